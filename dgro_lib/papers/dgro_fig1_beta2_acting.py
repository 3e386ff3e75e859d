"""DGRO Fig. 1 with beta2 acting (two updates per rollout batch): the final-accuracy claims of
:func:`dgro_lib.papers.dgro_fig1_reward_variance.final_accuracy_claims`, which this notebook uses."""

from dgro_lib.papers.dgro_fig1_reward_variance import final_accuracy_claims as claims

__all__ = ["claims"]
