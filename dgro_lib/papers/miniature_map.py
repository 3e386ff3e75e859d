"""The RL map of the miniature (``notebooks/01_miniature_map``) and the base model (``notebooks/00_base_model``):
estimates, not paper claims. Each map point's greedy and sampled change against its own base model, and the base
model's greedy accuracy per people count, each with its interval."""

from __future__ import annotations

from typing import Iterable

import numpy as np
import pandas as pd

from dgro_lib.analysis.probes import base_models, point_labels, protocol_frame
from dgro_lib.report.claims import claim
from dgro_lib.report.inference import compare, level
from dgro_lib.papers.common import sampled_arms

__all__ = ["map_claims", "base_model_claims"]


def map_claims(result, sampled: pd.DataFrame, keys, *, greedy: pd.DataFrame | None = None,
               seeds: Iterable[int] | None = None) -> list[dict]:
    """Per map point (labelled by :func:`~dgro_lib.analysis.probes.point_labels` of ``keys``): the greedy and sampled
    change against the base model its runs started from, in points (no direction: a map). ``sampled`` and
    ``greedy`` as :func:`~dgro_lib.analysis.probes.rl_map_table` takes them (without ``greedy``, ``result``'s own
    final evaluations are the greedy reading)."""
    seeds = list(seeds) if seeds is not None else None
    finals, _ = base_models(result)
    finals = finals.assign(point=point_labels(finals, keys))
    greedy = protocol_frame(result) if greedy is None else greedy
    rows = []
    for point in dict.fromkeys(finals["point"]):
        group = finals[finals["point"] == point]
        ident = group["base_model"].iloc[0]
        for metric, frame in (("greedy", greedy), ("sampled", sampled)):
            base_rows = frame[(frame["run"] == "base") & (frame["base_model"] == ident)]
            runs = frame[frame["run"].isin(group["run"])].drop(columns="point", errors="ignore")
            scores, base = sampled_arms(pd.concat([base_rows, runs]), group, "point", seeds=seeds)
            rows.append(claim(f"{point}: {metric} change (points)", compare(scores[point], base=base), metric=metric))
    return rows


def base_model_claims(summary: pd.DataFrame) -> list[dict]:
    """The base model's greedy accuracy per people count (``summary``: ``people``, ``greedy_accuracy``, ``n``).
    One fixed model, so the interval is over the items only: a proportion k / n is the mean of k ones and n - k
    zeros, scored as two identical "runs" (no seed variance)."""
    rows = []
    for r in summary.itertuples():
        k = int(round(r.greedy_accuracy * r.n))
        items = np.r_[np.ones(k), np.zeros(int(r.n) - k)]
        rows.append(claim(f"{int(r.people)} people: greedy accuracy", level(np.vstack([items, items])),
                          metric="greedy accuracy", unit="accuracy", note="one fixed model: items only"))
    return rows
