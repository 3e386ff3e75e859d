"""Evaluation statistics: paired McNemar tests of base vs trained accuracy, and the per-run summary tables."""

from __future__ import annotations

import math
from typing import Any, Sequence

import pandas as pd

__all__ = ["mcnemar", "paired_improvement_table"]


def mcnemar(before: Sequence[bool], after: Sequence[bool]) -> dict[str, float]:
    """Paired comparison of two per-puzzle correctness vectors on the same puzzles.

    ``fixed`` = wrong before, right after; ``broken`` = right before, wrong after. ``z`` is the McNemar
    statistic (fixed - broken) / sqrt(fixed + broken) (normal approximation, no continuity correction) and
    ``p`` its two-sided p-value. Returns z = 0 when there are no discordant pairs.
    """
    if len(before) != len(after):
        raise ValueError(f"before/after must be paired: lengths {len(before)} and {len(after)} differ")
    fixed = sum(1 for b, a in zip(before, after) if not b and a)
    broken = sum(1 for b, a in zip(before, after) if b and not a)
    n = fixed + broken
    z = (fixed - broken) / math.sqrt(n) if n else 0.0
    p = math.erfc(abs(z) / math.sqrt(2.0))
    return {"fixed": fixed, "broken": broken, "z": z, "p": p,
            "acc_before": sum(map(bool, before)) / max(len(before), 1),
            "acc_after": sum(map(bool, after)) / max(len(after), 1)}


def paired_improvement_table(finals: pd.DataFrame, base_correct: Sequence[bool], *, by: str) -> pd.DataFrame:
    """One row per run (base vs final accuracy, McNemar z) plus one pooled row per ``by`` value.

    ``finals`` is :attr:`ExperimentResult.finals` (a ``correct`` list per run). The pooled row sums the
    discordant counts over seeds (each seed is an independent training run evaluated on the same puzzles).
    """
    rows: list[dict[str, Any]] = []
    for _, r in finals.iterrows():
        m = mcnemar(base_correct, r["correct"])
        rows.append({by: r[by], "seed": r["seed"], **m, "delta_points": 100 * (m["acc_after"] - m["acc_before"])})
    table = pd.DataFrame(rows)
    pooled = []
    for key, g in table.groupby(by, sort=False):
        fixed, broken = int(g["fixed"].sum()), int(g["broken"].sum())
        n = fixed + broken
        z = (fixed - broken) / math.sqrt(n) if n else 0.0
        pooled.append({by: key, "seed": "pooled", "fixed": fixed, "broken": broken, "z": z,
                       "p": math.erfc(abs(z) / math.sqrt(2.0)), "acc_before": g["acc_before"].mean(),
                       "acc_after": g["acc_after"].mean(), "delta_points": g["delta_points"].mean()})
    return pd.concat([table, pd.DataFrame(pooled)], ignore_index=True)
