"""DGRO Fig. 1 with beta2 acting (each rollout batch split into two optimizer updates, so that the second is
off-policy and beta2's squared log-ratio to pi_old has a gradient): the claims of
:func:`dgro_lib.papers.dgro_fig1_reward_variance.claims`, without a positive control (Fig. 1's control shows the
design detects a slower arm; this notebook shares its recipe but the beta2 anchor), and with the [-3,3] arm's gain
over the base left to ``dgro_fig2_beta``, whose (1, 0.1) point is the same runs (``counted_elsewhere``)."""

from dgro_lib.papers.dgro_fig1_reward_variance import claims

__all__ = ["claims"]
