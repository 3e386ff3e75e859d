"""Claim rows from a notebook's runs: arm levels, gains over the base model and arm-vs-arm contrasts, each a
run-level estimate (:func:`dgro_lib.report.inference.compare`) in one claims schema
(:func:`dgro_lib.report.claims.claim`).

The inputs are the frames the experiment API returns: ``finals`` (:attr:`ExperimentResult.finals`: one row per run
with its sweep point, seed and per-item ``correct`` list), a sampled evaluation (:func:`evaluate_runs`: per-item
fractions of correct samples, the base model's row ``run == "base"``), and the base model's evaluation. ``seeds``
restricts every arm to those seeds (the split-half check)."""

from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np
import pandas as pd

from dgro_lib.report.claims import claim, runs_of
from dgro_lib.report.inference import compare, level
from dgro_lib.report.verdict import at_floor_or_ceiling

__all__ = ["Arms", "arms", "sampled_arms", "level_rows", "gain_rows", "contrast_rows", "seed_pairs", "greedy_gain_rows"]


class Arms(dict):
    """``{point: (runs, items) scores}``, each arm's rows in seed order, with ``seeds``: ``{point: [seed, ...]}``,
    the seed of each row. Two arms with the same seeds were trained as seed-for-seed pairs (a seed fixes a run's
    prompt order and sampling streams), which :func:`contrast_rows` reads as pairs."""

    def __init__(self, scores: dict, seeds: dict):
        super().__init__(scores)
        self.seeds = seeds

    def subset(self, names: Iterable) -> "Arms":
        """The arms ``names`` (in that order), with their seeds."""
        names = list(names)
        return Arms({a: self[a] for a in names}, {a: self.seeds[a] for a in names})


def arms(frame: pd.DataFrame, by: str, *, column: str = "correct", seeds: Iterable[int] | None = None,
         order: Sequence | None = None) -> Arms:
    """``{point: (runs, items) scores}`` for every value of ``by`` (in ``order``, else as they appear), with the
    seeds of their rows (:class:`Arms`)."""
    points = list(order) if order is not None else list(dict.fromkeys(frame[by]))
    seeds = list(seeds) if seeds is not None else None
    return Arms({p: runs_of(frame, by, p, column=column, seeds=seeds) for p in points},
                {p: sorted(int(s) for s in frame.loc[frame[by] == p, "seed"] if seeds is None or s in seeds)
                 for p in points})


def sampled_arms(sampled: pd.DataFrame, finals: pd.DataFrame, by: str, *, seeds: Iterable[int] | None = None,
                 order: Sequence | None = None) -> tuple[dict, np.ndarray]:
    """The sampled evaluation's arms (labelled with ``finals``' ``by`` column, joined on ``run``) and the base
    model's per-item fractions."""
    base = sampled.loc[sampled["run"] == "base", "correct"]
    if len(base) != 1:
        raise ValueError(f"sampled evaluation: expected one base-model row, found {len(base)}")
    runs = sampled[sampled["run"] != "base"]
    if by not in runs:
        runs = runs.merge(finals[["run", by]], on="run")
    return arms(runs, by, seeds=seeds, order=order), np.asarray(base.iloc[0], dtype=float)


def level_rows(scores: dict, *, metric: str, unit: str = "accuracy", name: str = "{arm}: {metric}",
               source: str = "paper") -> list[dict]:
    """Each arm's level (mean over runs, two-level interval) in the metric's own unit."""
    return [claim(name.format(arm=arm, metric=metric), level(s), metric=metric, unit=unit, source=source)
            for arm, s in scores.items()]


def gain_rows(scores: dict, base: np.ndarray, *, metric: str, direction: str = "higher",
              name: str = "{arm}: {metric} gain over base (points)", bounded: bool = True,
              source: str = "paper") -> list[dict]:
    """Each arm against the base model every run started from (the same items), in points; ``direction`` the
    paper's (RL improves on the base). ``bounded``: the metric lives in [0, 1], so an arm and a base both at 0
    (or both at 1) are not testable at this scale."""
    rows = []
    for arm, s in scores.items():
        untestable = bounded and at_floor_or_ceiling([float(np.mean(s)), float(np.mean(base))])
        rows.append(claim(name.format(arm=arm, metric=metric), compare(s, base=base), metric=metric,
                          direction=direction, untestable=untestable, source=source))
    return rows


def contrast_rows(scores: dict, pairs: Sequence[tuple], *, metric: str, unit: str = "points", scale: float = 100.0,
                  name: str = "{a} - {b}: {metric} ({unit})", bounded: bool = True, source: str = "paper",
                  note: str = "") -> list[dict]:
    """Arm-vs-arm contrasts: ``pairs`` of ``(a, b, direction)`` or ``(a, b, direction, margin)`` (``margin`` for a
    claim of no difference, in ``unit``), each ``a - b``.

    Two arms of :class:`Arms` that hold the same seeds are compared seed for seed (``compare(..., paired=True)``):
    runs that share a seed share their prompt order and sampling streams, so their results correlate, and Welch's
    interval, which takes the arms as independent, would misstate the error (too wide where they correlate, too
    narrow where they anticorrelate). The reading follows from the seeds the arms were trained with, never from
    which interval is narrower: arms that share at least 2 seeds are compared on those seeds, seed for seed (an arm
    given more seeds than another, for another contrast's MDE, adds nothing to this one); arms that share fewer (or
    a plain dict, which carries no seeds) are compared by Welch."""
    rows = []
    for pair in pairs:
        a, b, direction = pair[:3]
        margin = pair[3] if len(pair) > 3 else None
        for arm in (a, b):
            if arm not in scores:
                raise KeyError(f"contrast {a} - {b}: no arm {arm!r} (have {list(scores)})")
        untestable = bounded and at_floor_or_ceiling([float(np.mean(scores[a])), float(np.mean(scores[b]))])
        sa, sb, paired = _shared_seeds(scores, a, b)
        est = compare(sa, sb, scale=scale, paired=paired)
        rows.append(claim(name.format(a=a, b=b, metric=metric, unit=unit), est, metric=metric, unit=unit,
                          direction=direction, margin=margin, untestable=untestable, source=source, note=note))
    return rows


def _shared_seeds(scores: dict, a, b) -> tuple[np.ndarray, np.ndarray, bool]:
    """:func:`seed_pairs` of arms ``a`` and ``b`` of ``scores`` (a plain dict carries no seeds: unpaired)."""
    if not isinstance(scores, Arms):
        return scores[a], scores[b], False
    return seed_pairs(scores[a], scores.seeds[a], scores[b], scores.seeds[b])


def seed_pairs(a, seeds_a: Sequence[int], b, seeds_b: Sequence[int]) -> tuple[np.ndarray, np.ndarray, bool]:
    """``(rows of a, rows of b, paired)``: two arms' runs (rows in the order of their ``seeds``) as
    :func:`contrast_rows` reads them: the rows of the seeds both hold, in seed order, when they share at least 2
    (seed-for-seed pairs); else every row of each, unpaired."""
    a, b = np.asarray(a), np.asarray(b)
    seeds_a, seeds_b = [int(s) for s in seeds_a], [int(s) for s in seeds_b]
    if len(seeds_a) != len(a) or len(seeds_b) != len(b):
        raise ValueError(f"seed_pairs: {len(a)} and {len(b)} rows for {len(seeds_a)} and {len(seeds_b)} seeds")
    shared = sorted(set(seeds_a) & set(seeds_b))
    if len(shared) < 2:
        return a, b, False
    return a[[seeds_a.index(s) for s in shared]], b[[seeds_b.index(s) for s in shared]], True


def greedy_gain_rows(greedy: pd.DataFrame, by: str, *, order: Sequence, seeds: Iterable[int] | None = None
                     ) -> list[dict]:
    """The greedy second evaluation's gains over the base model (the project's checks of the K&K learning
    notebooks): ``greedy`` as :func:`~dgro_lib.runs.experiment.evaluate_runs` returns it, labelled by ``by``, with
    the base model's row ``run == "base"``; one row per arm of ``order``."""
    g = arms(greedy[greedy["run"] != "base"], by, seeds=seeds, order=order)
    g_base = np.asarray(greedy.loc[greedy["run"] == "base", "correct"].iloc[0], dtype=float)
    return gain_rows(g, g_base, metric="greedy accuracy", source="project")
