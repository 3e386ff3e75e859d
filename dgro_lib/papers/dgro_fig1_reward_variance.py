"""DGRO Fig. 1 (reward variance; Theorem 3.4): a larger reward range gives higher accuracy. The claims of
``notebooks/dgro_fig1_reward_variance`` and ``notebooks/dgro_fig1_beta2_acting`` (the same figure with beta2 acting).

Per reward scheme: the final greedy held-out accuracy (a level), the greedy and sampled gains over the base model
(the paper: RL improves on it), and the paper's ordering as arm-vs-arm contrasts, each wider range against each
narrower one (direction ``higher``), greedy and sampled. One Holm family per notebook."""

from __future__ import annotations

from itertools import combinations
from typing import Iterable, Sequence

import pandas as pd

from dgro_lib.papers.common import contrast_rows, gain_rows, level_rows, readings

__all__ = ["claims"]


def claims(finals: pd.DataFrame, base_correct, sampled: pd.DataFrame | None, *, schemes: Sequence[str],
           by: str = "reward.scheme", seeds: Iterable[int] | None = None) -> list[dict]:
    """The claim rows. ``schemes`` in increasing range (``[-1,1]``, ``[-3,3]``, ``[-5,5]``): every later scheme
    is claimed to beat every earlier one. ``sampled``: the sampled evaluation (None: greedy only)."""
    reads = readings(finals, base_correct, sampled, by, seeds=seeds, order=schemes)
    pairs = [(wide, narrow, "higher") for narrow, wide in combinations(schemes, 2)]
    rows = level_rows(reads[0].scores, metric="greedy accuracy")
    for r in reads:
        rows += gain_rows(r.scores, r.base, metric=r.metric)
        rows += contrast_rows(r.scores, pairs, metric=r.metric)
    return rows
