"""Claim rows on how runs learned (:func:`dgro_lib.analysis.learning.run_learning`: one scalar per run, such as the
learning-speed metric, the entropy change or the wall time), in the claims schema of
:mod:`dgro_lib.report.claims`. Arms holding the same seeds are read seed for seed, as the accuracy contrasts of
:func:`dgro_lib.papers.common.contrast_rows` are."""

from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np
import pandas as pd

from dgro_lib.papers.common import Arms, contrast_rows
from dgro_lib.report.claims import claim
from dgro_lib.report.inference import compare

__all__ = ["learning_arms", "learning_contrast_rows", "learning_level_rows"]


def learning_arms(per_run: pd.DataFrame, column: str, *, by: str = "point", order: Sequence[str] | None = None,
                  seeds: Iterable[int] | None = None) -> Arms:
    """``{arm: (runs,) values of column}`` in seed order, with each arm's seeds (:class:`Arms`)."""
    seeds = set(seeds) if seeds is not None else None
    order = list(order) if order is not None else list(dict.fromkeys(per_run[by]))
    scores, held = {}, {}
    for arm in order:
        g = per_run[(per_run[by] == arm) & (per_run["seed"].isin(seeds) if seeds is not None else True)]
        if g.empty:
            raise KeyError(f"{by}={arm!r}: no runs (have {sorted(map(str, per_run[by].unique()))})")
        g = g.sort_values("seed")
        scores[arm], held[arm] = g[column].to_numpy(dtype=float), [int(s) for s in g["seed"]]
    return Arms(scores, held)


def learning_contrast_rows(per_run: pd.DataFrame, pairs: Sequence[tuple], *, column: str, metric: str, unit: str,
                           by: str = "point", seeds: Iterable[int] | None = None, source: str = "paper",
                           note: str = "") -> list[dict]:
    """Arm-vs-arm contrasts of a per-run ``column`` (already in ``unit``): ``pairs`` of ``(a, b, direction)`` or
    ``(a, b, direction, margin)``, each ``a - b``."""
    names = {a for p in pairs for a in p[:2]}
    arms = learning_arms(per_run, column, by=by, order=[a for a in dict.fromkeys(per_run[by]) if a in names],
                         seeds=seeds)
    return contrast_rows(arms, pairs, metric=metric, unit=unit, scale=1.0, bounded=False, source=source, note=note)


def learning_level_rows(per_run: pd.DataFrame, arms: Sequence[str], *, column: str, metric: str, unit: str,
                        name: str, direction: str = "none", margin: float | None = None, by: str = "point",
                        seeds: Iterable[int] | None = None, source: str = "paper", note: str = "") -> list[dict]:
    """Each arm's mean of a per-run ``column`` (a level, or a per-run change such as last - first), with its 95 %
    interval over seeds, against ``direction`` (``lower``: below 0; ``at most``: below ``margin``). ``name`` is
    formatted with ``arm``."""
    values = learning_arms(per_run, column, by=by, order=arms, seeds=seeds)
    return [claim(name.format(arm=arm), compare(np.asarray(v), scale=1.0), metric=metric, unit=unit,
                  direction=direction, margin=margin, source=source, note=note) for arm, v in values.items()]
