"""DGRO Fig. 4 (entropy over training): the claims of ``notebooks/dgro_fig4_math_entropy``. The paper: entropy
rises on math and falls on K&K. Per run, the change of the per-step entropy between the first and the last fifth
of training (:func:`~dgro_lib.analysis.math.entropy_trend`); per task, the mean change over runs against 0, a
run-level estimate with its interval (per-run scalars: Welch's interval at n - 1 df)."""

from __future__ import annotations

from typing import Iterable

import numpy as np
import pandas as pd

from dgro_lib.report.claims import claim
from dgro_lib.report.inference import compare

__all__ = ["claims", "PAPER"]

# The paper's direction of the entropy change per task (DGRO Section 4.5, Fig. 4).
PAPER = {"math": "higher", "K&K": "lower"}


def claims(trend: pd.DataFrame, *, by: str = "task", seeds: Iterable[int] | None = None) -> list[dict]:
    """``trend``: :func:`~dgro_lib.analysis.math.entropy_trend`, one row per run (``by``, ``seed``, ``change``)."""
    if seeds is not None:
        trend = trend[trend["seed"].isin(list(seeds))]
    rows = []
    for task, g in trend.groupby(by, sort=False):
        rows.append(claim(f"{task}: entropy change, last fifth - first fifth (nats/token)",
                          compare(g.sort_values("seed")["change"].to_numpy(), base=np.float64(0.0), scale=1.0),
                          metric="entropy change", unit="nats/token", direction=PAPER.get(task, "none")))
    return rows
