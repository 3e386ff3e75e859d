"""What the four DCPO notebooks' claims share: a :class:`~dgro_lib.analysis.dcpo.MethodSweep` as arms of per-item
scores (greedy 0/1, sampled avg@k fractions) and of per-run end-of-training entropy, and the arm-vs-arm rows."""

from __future__ import annotations

from typing import Iterable, Sequence

from dgro_lib.analysis.dcpo import entropy_endpoints
from dgro_lib.papers.common import arms, contrast_rows

__all__ = ["sweep_arms", "accuracy_rows", "entropy_rows"]


def sweep_arms(sweep, *, seeds: Iterable[int] | None = None) -> tuple[dict, dict, dict]:
    """(greedy, sampled, end-of-training entropy) arms of ``sweep`` in its label order: per-item scores of shape
    (runs, items) and, for entropy, each run's mean ``entropy_nll`` over the last fifth of its steps (DCPO's H)."""
    seeds = list(seeds) if seeds is not None else None
    greedy = arms(sweep.finals, "point", seeds=seeds, order=sweep.labels)
    runs = sweep.sampled[sweep.sampled["run"] != "base"]
    sampled = arms(runs, "point", seeds=seeds, order=sweep.labels)
    ends = entropy_endpoints(sweep.labelled.metrics)
    entropy = arms(ends, "point", column="last", seeds=seeds, order=sweep.labels)
    return greedy, sampled, entropy


def accuracy_rows(greedy: dict, sampled: dict, pairs: Sequence[tuple]) -> list[dict]:
    """``a - b`` on sampled avg@k (the papers' metric) and on greedy pass@1, in points, for ``(a, b, direction)``."""
    return (contrast_rows(sampled, pairs, metric="sampled avg@k")
            + contrast_rows(greedy, pairs, metric="greedy pass@1"))


def entropy_rows(entropy: dict, pairs: Sequence[tuple]) -> list[dict]:
    """``a - b`` of the end-of-training entropy (nats/token), for ``(a, b, direction)``; per-run scalars."""
    return contrast_rows(entropy, pairs, metric="end-of-training H", unit="nats/token", scale=1.0, bounded=False)
