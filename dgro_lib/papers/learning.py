"""The K&K learning notebooks' runs and claim rows on how they learned.

:func:`read_learning_runs` is what DGRO Figs. 1-3 (and Fig. 1 with beta2 acting) do once their runs are trained or
restored under the params' sampled protocol with the greedy reading as a second evaluation: label the arms, and
read each run's learning table (:func:`dgro_lib.analysis.learning.run_learning`: one scalar per run, such as the
learning-speed metric, the entropy change or the wall time). The row builders turn that table into claims in the
schema of :mod:`dgro_lib.report.claims`; arms holding the same seeds are read seed for seed, as the accuracy
contrasts of :func:`dgro_lib.papers.common.contrast_rows` are."""

from __future__ import annotations

from typing import Callable, Iterable, NamedTuple, Sequence

import numpy as np
import pandas as pd

from dgro_lib.papers.common import Arms, contrast_rows
from dgro_lib.report.claims import claim
from dgro_lib.report.inference import compare

__all__ = ["LearningRuns", "arm_labeler", "read_learning_runs", "learning_arms", "learning_contrast_rows", "learning_level_rows"]


class LearningRuns(NamedTuple):
    """A learning notebook's runs: the experiment ``result``, the same with a ``point`` column (``labelled``), the
    greedy second evaluation labelled alike (``greedy``, the base model's row ``run == "base"``), and the per-run
    learning table (``learning``)."""
    result: object
    labelled: object
    greedy: pd.DataFrame
    learning: pd.DataFrame


def arm_labeler(cfg) -> Callable[[pd.DataFrame], pd.Series] | None:
    """How ``cfg``'s arms are named: by the params' ``labels`` (one per entry of the first sweep key,
    :func:`~dgro_lib.analysis.dcpo.sweep_labels`) where it has them, else None, which
    :func:`~dgro_lib.analysis.probes.label_points` reads as the sweep values (Fig. 2's grid, the RL map)."""
    from dgro_lib.analysis.dcpo import sweep_labels

    return sweep_labels(cfg, key=next(iter(cfg.sweep))) if "labels" in cfg.extra else None


def read_learning_runs(cfg, result, greedy: pd.DataFrame, *,
                       labeler: Callable[[pd.DataFrame], pd.Series] | None = None) -> LearningRuns:
    """:class:`LearningRuns` of an experiment ``result`` of ``cfg`` and its greedy second evaluation ``greedy``
    (:func:`~dgro_lib.runs.experiment.evaluate_runs` under ``cfg.knobs.greedy_eval``, base model's row included).
    ``labeler``: each row's arm label (default: :func:`arm_labeler`). The notebook or command trains the runs; this
    reads them."""
    from dgro_lib.analysis.learning import run_learning
    from dgro_lib.analysis.probes import label_points

    labelled = label_points(result, list(cfg.sweep), labeler=labeler or arm_labeler(cfg))
    greedy = greedy.merge(labelled.finals[["run", "point"]], on="run", how="left")
    return LearningRuns(result, labelled, greedy, run_learning(labelled, max_steps=cfg.train.max_steps))


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
                           note: str = "", name: str = "{a} - {b}: {metric} ({unit})") -> list[dict]:
    """Arm-vs-arm contrasts of a per-run ``column`` (already in ``unit``): ``pairs`` of ``(a, b, direction)`` or
    ``(a, b, direction, margin)``, each ``a - b``; ``name`` as :func:`~dgro_lib.papers.common.contrast_rows`'s."""
    names = {a for p in pairs for a in p[:2]}
    arms = learning_arms(per_run, column, by=by, order=[a for a in dict.fromkeys(per_run[by]) if a in names],
                         seeds=seeds)
    return contrast_rows(arms, pairs, metric=metric, unit=unit, scale=1.0, bounded=False, source=source, note=note,
                         name=name)


def learning_level_rows(per_run: pd.DataFrame, arms: Sequence[str], *, column: str, metric: str, unit: str,
                        name: str, direction: str = "none", margin: float | None = None, by: str = "point",
                        seeds: Iterable[int] | None = None, source: str = "paper", note: str = "") -> list[dict]:
    """Each arm's mean of a per-run ``column`` (a level, or a per-run change such as last - first), with its 95 %
    interval over seeds, against ``direction`` (``lower``: below 0; ``at most``: below ``margin``). ``name`` is
    formatted with ``arm``."""
    values = learning_arms(per_run, column, by=by, order=arms, seeds=seeds)
    return [claim(name.format(arm=arm), compare(np.asarray(v), scale=1.0), metric=metric, unit=unit,
                  direction=direction, margin=margin, source=source, note=note) for arm, v in values.items()]
