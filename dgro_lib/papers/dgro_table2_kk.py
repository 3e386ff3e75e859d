"""DGRO Table 2 (pass@1 on Knights-and-Knaves by number of people): the claims of ``notebooks/dgro_table2_kk``.

Each trained model against the base model at each people count (the paper: DGRO improves at every size, in and
out of its training sizes), pass@1 under the params' protocol on that size's held-out puzzles (per puzzle the
fraction of correct samples, or 0/1 when greedy); *not testable at this scale* where the base and the model both
score 0 (a size the miniature cannot solve) or both 1."""

from __future__ import annotations

from typing import Callable, Iterable

import pandas as pd

from dgro_lib.papers.common import arms, gain_rows

__all__ = ["claims"]


def claims(evals: dict[int, pd.DataFrame], *, labeler: Callable[[pd.DataFrame], pd.Series],
           train_people: Iterable[int], seeds: Iterable[int] | None = None) -> list[dict]:
    """``evals[people]``: :func:`~dgro_lib.runs.experiment.evaluate_runs` on that size (its ``run == "base"`` row the
    base model); ``labeler`` names the runs' sweep points."""
    seeds = list(seeds) if seeds is not None else None
    train_people = set(train_people)
    rows = []
    for people, ev in evals.items():
        base = ev.loc[ev["run"] == "base", "correct"]
        if len(base) != 1:
            raise ValueError(f"{people} people: expected one base-model row, found {len(base)}")
        runs = ev[ev["run"] != "base"].assign(point=lambda d: labeler(d))
        split = "in training" if people in train_people else "out of distribution"
        for row in gain_rows(arms(runs, "point", seeds=seeds), base.iloc[0], metric="pass@1",
                             name=f"{{arm}}, {people} people: pass@1 gain over base (points)"):
            row["note"] = split
            rows.append(row)
    return rows
