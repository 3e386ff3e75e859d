"""DGRO Fig. 1 with beta2 acting (two updates per rollout batch): the same claims as
:mod:`dgro_lib.papers.dgro_fig1_reward_variance`, whose :func:`claims` this notebook uses."""

from dgro_lib.papers.dgro_fig1_reward_variance import claims

__all__ = ["claims"]
