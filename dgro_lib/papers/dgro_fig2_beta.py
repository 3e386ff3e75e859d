"""DGRO Fig. 2 (the (beta1, beta2) grid; Theorem 3.3, Section 4.3): the claims of ``notebooks/dgro_fig2_beta``, as
the paper states them, on runs whose held-out protocol is sampled pass@1 at T = 1.

The paper's claims (``source = paper``, one Holm family):

* RL improves on the base model: every point's sampled pass@1 gain over the base (``higher``);
* "when beta1 is not very small, reducing beta2 makes the accuracy curve steeper ... faster policy improvement"
  (the paper's reading of Theorem 3.3): at the largest beta1, the smallest positive beta2 against the largest, on
  the learning-speed metric (:mod:`dgro_lib.analysis.learning`: a steeper curve is a larger mean of the curve) and
  on the final sampled pass@1 (``higher``);
* "(beta1, beta2) = (1, 0.01) exhibits noticeable fluctuations in entropy": that point's runs against every other
  point's runs in ``entropy_fluctuation`` (the s.d. of a run's step-to-step entropy change; ``higher``).

The project's checks (``source = project``, a Holm family of their own):

* under Adam only beta2 / beta1 matters: the loss at (c beta1, c beta2) is c times the loss at (beta1, beta2) and
  Adam is invariant to a constant factor (up to eps and clipping), so points of equal ratio should agree: a claim
  of no difference within ``margin`` points (TOST), on speed and final accuracy. The paper never says it;
* the greedy second evaluation's gains over the base.

Estimates (no direction in the paper): what beta2 does at each beta1 against beta2 = 0, on speed and final
accuracy. A point whose runs another notebook reads too (``counted_elsewhere``, e.g. the (1, 0.1) point that is
``dgro_fig1_beta2_acting``'s [-3,3] arm) is counted here once: that notebook leaves its gain out.
"""

from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np
import pandas as pd

from dgro_lib.analysis.probes import point_labels
from dgro_lib.papers.common import arms, contrast_rows, gain_rows, level_rows, greedy_gain_rows
from dgro_lib.papers.learning import learning_arms, learning_contrast_rows
from dgro_lib.report.claims import claim
from dgro_lib.report.inference import compare

__all__ = ["claims", "EQUIVALENCE_MARGIN", "grid_labels"]

# A claim of no difference holds when its whole 95 % interval lies within +-2 points (speed or sampled accuracy).
EQUIVALENCE_MARGIN = 2.0
SPEED = "learning speed"


def grid_labels(finals: pd.DataFrame, keys: Sequence[str]) -> dict[tuple[float, float], str]:
    """``{(beta1, beta2): point label}`` for the grid points ``finals`` holds (labels as
    :func:`~dgro_lib.analysis.probes.point_labels` writes them)."""
    pts = finals[list(keys)].drop_duplicates()
    return {(float(r[keys[0]]), float(r[keys[1]])): lab
            for (_, r), lab in zip(pts.iterrows(), point_labels(pts, keys))}


def claims(finals: pd.DataFrame, base_correct, greedy: pd.DataFrame | None, learning: pd.DataFrame, *,
           keys: Sequence[str] = ("loss.kwargs.beta1", "loss.kwargs.beta2"), by: str = "point",
           seeds: Iterable[int] | None = None, margin: float = EQUIVALENCE_MARGIN) -> list[dict]:
    """The claim rows.

    ``finals``: one row per run (``by`` its point label as :func:`grid_labels` gives it, the ``keys`` columns, and
    ``correct`` the per-item fraction of correct samples under the params' sampled protocol); ``base_correct``: the
    base model's, on the same items; ``greedy``: the second evaluation (labelled by ``by``, with the base model's
    row ``run == "base"``; None: left out); ``learning``: :func:`~dgro_lib.analysis.learning.run_learning`'s
    per-run table, labelled by ``by``. ``seeds`` restricts every point to those seeds (the split-half check)."""
    seeds = list(seeds) if seeds is not None else None
    label = grid_labels(finals, keys)
    order = [label[k] for k in sorted(label)]
    sampled = arms(finals, by, seeds=seeds, order=order)
    base = np.asarray(base_correct, dtype=float)
    metric = "sampled pass@1"
    b1s, b2s = sorted({k[0] for k in label}), sorted({k[1] for k in label})
    top, positive = b1s[-1], [b for b in b2s if b > 0]

    rows = level_rows(sampled, metric=metric)
    rows += gain_rows(sampled, base, metric=metric)
    if len(positive) >= 2 and (top, positive[0]) in label and (top, positive[-1]) in label:
        steeper = [(label[(top, positive[0])], label[(top, positive[-1])], "higher")]
        name = "smaller beta2 is better at beta1 = %g: {a} - {b}: {metric} ({unit})" % top
        rows += learning_contrast_rows(learning, steeper, column="speed", metric=SPEED, unit="points", by=by,
                                       seeds=seeds, name=name)
        rows += contrast_rows(sampled, steeper, metric=metric, name=name)
    key = label.get((1.0, 0.01))
    if key is not None:
        fl = learning_arms(learning, "entropy_fluctuation", by=by, order=order, seeds=seeds)
        rest = np.concatenate([v for p, v in fl.items() if p != key])
        rows.append(claim(f"{key} fluctuates most in entropy: its runs - the other points' (nats/token)",
                          compare(fl[key], rest, scale=1.0), metric="entropy fluctuation", unit="nats/token",
                          direction="higher", note="s.d. of a run's step-to-step rollout-entropy change"))
    # the project's check: points of equal beta2 / beta1 train alike under Adam (TOST within the margin)
    ratio: dict[float, list[str]] = {}
    for (b1, b2), lab in sorted(label.items()):
        ratio.setdefault(round(b2 / b1, 12), []).append(lab)
    same = [(v[0], v[1], "equal", margin) for v in ratio.values() if len(v) >= 2]
    name = "only beta2/beta1 matters under Adam: {a} - {b}: {metric} ({unit})"
    rows += learning_contrast_rows(learning, same, column="speed", metric=SPEED, unit="points", by=by, seeds=seeds,
                                   source="project", name=name)
    rows += contrast_rows(sampled, same, metric=metric, source="project", name=name)
    if greedy is not None:
        rows += greedy_gain_rows(greedy, by, seeds=seeds, order=order)
    # estimates: beta2 > 0 against beta2 = 0 at the same beta1 (the paper gives no direction per cell)
    if 0.0 in b2s:
        against_zero = [(label[(b1, b2)], label[(b1, 0.0)], "none") for b1 in b1s for b2 in positive
                        if (b1, b2) in label and (b1, 0.0) in label]
        rows += learning_contrast_rows(learning, against_zero, column="speed", metric=SPEED, unit="points", by=by,
                                       seeds=seeds)
        rows += contrast_rows(sampled, against_zero, metric=metric)
    return rows
