"""DGRO Fig. 2 (the (beta1, beta2) grid; Theorem 3.3, Section 4.3): the claims of ``notebooks/dgro_fig2_beta``.

* every point against the base model, greedy and sampled (the paper: RL improves on it);
* Theorem 3.3's reading: at the largest beta1, a smaller beta2 gives higher accuracy (the smallest positive beta2
  against the largest), in greedy accuracy and in the sampled pass@1 estimate (avg@k at T = 1, the paper's pass@1
  at its temperature, whose seed spread is a fraction of greedy's);
* (beta1, beta2) = (1, 0.01) shows entropy fluctuations (Fig. 2c): its runs' s.d. of step-to-step entropy change
  against every other point's runs (per-run scalars);
* under Adam only beta2 / beta1 matters: the loss at (c beta1, c beta2) is c times the loss at (beta1, beta2) and
  Adam is invariant to a constant factor (up to eps and clipping), so points of equal ratio should agree: a claim
  of no difference within ``margin`` points, greedy and sampled. A check of the project's (``source = project``):
  the paper never says it;
* what beta2 does at each beta1 against beta2 = 0: estimates (the paper gives no direction for each cell), greedy
  and sampled."""

from __future__ import annotations

from typing import Iterable, Sequence

import pandas as pd

from dgro_lib.analysis.probes import entropy_fluctuation, point_labels
from dgro_lib.report.claims import claim
from dgro_lib.report.inference import compare
from dgro_lib.papers.common import contrast_rows, gain_rows, level_rows, readings

__all__ = ["claims", "EQUIVALENCE_MARGIN"]

# A claim of no difference holds when its whole 95 % interval lies within +-2 points (greedy or sampled accuracy).
EQUIVALENCE_MARGIN = 2.0


def _label(b1: float, b2: float, keys: Sequence[str]) -> str:
    return point_labels(pd.DataFrame([{keys[0]: b1, keys[1]: b2}]), keys).iloc[0]


def claims(finals: pd.DataFrame, metrics: pd.DataFrame, base_correct, sampled: pd.DataFrame | None, *,
           keys: Sequence[str] = ("loss.kwargs.beta1", "loss.kwargs.beta2"), seeds: Iterable[int] | None = None,
           margin: float = EQUIVALENCE_MARGIN) -> list[dict]:
    """The claim rows from :func:`~dgro_lib.analysis.probes.label_points`'s ``finals`` / ``metrics`` (a ``point``
    column) over the sweep columns ``keys``."""
    seeds = list(seeds) if seeds is not None else None
    order = list(dict.fromkeys(finals["point"]))
    reads = readings(finals, base_correct, sampled, "point", seeds=seeds, order=order)
    greedy = reads[0].scores
    b1s, b2s = sorted(finals[keys[0]].unique()), sorted(finals[keys[1]].unique())
    label = {(b1, b2): _label(b1, b2, keys) for b1 in b1s for b2 in b2s if _label(b1, b2, keys) in greedy}
    rows = level_rows(greedy, metric="greedy accuracy")
    for r in reads:
        rows += gain_rows(r.scores, r.base, metric=r.metric)
    top, positive = b1s[-1], [b for b in b2s if b > 0]
    # the greedy claims keep their names; the sampled twin of each names its metric
    metrics_ = [(r.scores, r.metric, "" if r.metric == "greedy" else ": {metric}") for r in reads]
    if len(positive) >= 2 and (top, positive[0]) in label and (top, positive[-1]) in label:
        for scores, metric, tag in metrics_:
            rows += contrast_rows(scores, [(label[(top, positive[0])], label[(top, positive[-1])], "higher")],
                                  metric=metric,
                                  name="smaller beta2 is better at beta1 = %g: {a} - {b}%s ({unit})" % (top, tag))
    key = label.get((1.0, 0.01))
    if key is not None:
        fl = entropy_fluctuation(metrics[metrics["seed"].isin(seeds)] if seeds is not None else metrics)
        mine = fl.loc[fl["point"] == key, "fluctuation"].to_numpy()
        rest = fl.loc[fl["point"] != key, "fluctuation"].to_numpy()
        rows.append(claim(f"{key} fluctuates most in entropy: its runs - the other points' (nats/token)",
                          compare(mine, rest, scale=1.0), metric="entropy fluctuation", unit="nats/token",
                          direction="higher", note="s.d. of the step-to-step entropy change, per run"))
    ratio: dict[float, list[str]] = {}
    for (b1, b2), lab in label.items():
        ratio.setdefault(round(b2 / b1, 12), []).append(lab)
    same = [(v[0], v[1], "equal", margin) for v in ratio.values() if len(v) >= 2]
    for scores, metric, tag in metrics_:
        rows += contrast_rows(scores, same, metric=metric, source="project",  # the project's check, not the paper's
                              name="only beta2/beta1 matters under Adam: {a} - {b}%s ({unit})" % tag)
    if 0.0 in b2s:
        against_zero = [(label[(b1, b2)], label[(b1, 0.0)], "none") for b1 in b1s for b2 in positive
                        if (b1, b2) in label and (b1, 0.0) in label]
        for scores, metric, _ in metrics_:
            rows += contrast_rows(scores, against_zero, metric=metric)
    return rows
