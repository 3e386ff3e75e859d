"""DGRO Table 3 (math benchmarks): the claims of ``notebooks/dgro_table3_math``.

Each trained model against the base model, per benchmark and over all held-out problems (the paper: DGRO improves
pass@1 on every benchmark), on two metrics: greedy pass@1 on every problem, and sampled pass@1 (avg@k, the paper's
pass@1) on the first problems the sampled protocol reads. *Not testable at this scale* where the base and the model
both score 0 (or both 1) on a benchmark."""

from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np
import pandas as pd

from dgro_lib.analysis.math import _benchmark_name
from dgro_lib.papers.common import arms, gain_rows, sampled_arms

__all__ = ["claims"]


def _per_benchmark(scores: dict, base: np.ndarray, names: np.ndarray, *, metric: str) -> list[dict]:
    rows = []
    for bench in [*dict.fromkeys(names), "all"]:
        keep = np.ones(len(names), bool) if bench == "all" else names == bench
        rows += gain_rows({arm: s[:, keep] for arm, s in scores.items()}, base[keep], metric=metric,
                          name=f"{{arm}}, {bench}: {metric} gain over base (points)")
    return rows


def claims(finals: pd.DataFrame, base_correct, sampled: pd.DataFrame | None, sources: Sequence[str], *,
           sampled_metric: str = "sampled pass@1", seeds: Iterable[int] | None = None) -> list[dict]:
    """The claim rows: ``finals`` with a ``point`` column (the model's label), ``sources`` the held-out problems'
    sources in order (the sampled protocol reads a prefix of them)."""
    seeds = list(seeds) if seeds is not None else None
    order = list(dict.fromkeys(finals["point"]))
    names = np.array([_benchmark_name(s) for s in sources])
    base = np.asarray(base_correct, dtype=float)
    if len(names) != len(base):
        raise ValueError(f"sources: {len(names)} entries, the greedy evaluation read {len(base)} problems")
    rows = _per_benchmark(arms(finals, "point", seeds=seeds, order=order), base, names, metric="greedy pass@1")
    if sampled is not None:
        samp, base_fraction = sampled_arms(sampled, finals, "point", seeds=seeds, order=order)
        rows += _per_benchmark(samp, base_fraction, names[:len(base_fraction)], metric=sampled_metric)
    return rows
