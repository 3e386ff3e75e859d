"""One verdict record and one judging rule, for every claim of every notebook.

A claim compares what a paper says (``direction``: the sign it gives A - B) with a run-level estimate
(:class:`dgro_lib.report.inference.Estimate`). The vocabulary:

* ``reproduced``: the 95 % interval excludes 0 in the paper's direction (after Holm's correction over the
  notebook's directional claims, see :func:`judge_family`);
* ``contradicted``: it excludes 0 the other way;
* ``inconclusive``: it includes 0. The row's ``mde`` says how large an effect these seeds could have detected;
* ``not testable at this scale``: both sides sit at the metric's floor or ceiling, so no difference can show;
* ``estimate``: a level or a change the paper gives no direction for (no test, still with its interval).

A paper claim of *no* difference (``direction="equal"``) is reproduced only when the whole interval lies within
+- ``margin`` (an equivalence margin, in the estimate's unit), contradicted when the interval excludes 0, and
inconclusive otherwise. Exact (non-statistical) checks, such as an identity that holds to rounding, carry their
own outcome: :func:`exact_verdict`.
"""

from __future__ import annotations

import math
from typing import Sequence

from dgro_lib.report.inference import ALPHA, Estimate, holm

__all__ = ["VERDICTS", "DIRECTIONS", "judge", "judge_family", "exact_verdict", "at_floor_or_ceiling"]

VERDICTS = ("reproduced", "contradicted", "inconclusive", "not testable at this scale", "estimate")
DIRECTIONS = ("higher", "lower", "equal", "none")


def at_floor_or_ceiling(means: Sequence[float], *, low: float = 0.0, high: float = 1.0, within: float = 0.02) -> bool:
    """True when every mean (in the metric's own unit, e.g. accuracy in [0, 1]) is within ``within`` of ``low``
    or every one is within ``within`` of ``high``: a difference cannot show there."""
    means = [m for m in means if m is not None and math.isfinite(m)]
    return bool(means) and (all(m <= low + within for m in means) or all(m >= high - within for m in means))


def judge(est: Estimate, direction: str, *, p: float | None = None, margin: float | None = None,
          untestable: bool = False, alpha: float = ALPHA) -> str:
    """The verdict for ``est`` against the paper's ``direction`` of A - B (one of :data:`DIRECTIONS`).

    ``p``: the (Holm-adjusted) p-value that decides; ``est.p`` by default. For ``higher`` / ``lower``, rejecting
    at ``alpha`` with the estimate's sign is the same as the interval at 1 - alpha excluding 0 on that side.
    ``margin``: the equivalence margin of a ``direction="equal"`` claim (required there)."""
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {DIRECTIONS}, got {direction!r}")
    if direction == "none":
        return "estimate"
    if untestable:
        return "not testable at this scale"
    p = est.p if p is None else p
    if not math.isfinite(p):  # one seed: no seed variance, nothing to judge with
        return "inconclusive"
    if direction == "equal":
        if margin is None or not margin > 0:
            raise ValueError(f"a claim of no difference needs an equivalence margin > 0, got {margin!r}")
        if p < alpha:
            return "contradicted"
        return "reproduced" if -margin < est.ci_low and est.ci_high < margin else "inconclusive"
    if p >= alpha:
        return "inconclusive"
    return "reproduced" if (est.estimate > 0) == (direction == "higher") else "contradicted"


def judge_family(estimates: Sequence[Estimate | None], directions: Sequence[str], *,
                 margins: Sequence[float | None] | None = None, untestable: Sequence[bool] | None = None,
                 alpha: float = ALPHA) -> tuple[list[str], list[float]]:
    """Judge the claims of one figure together: Holm's correction over the directional ones (``higher``,
    ``lower``, ``equal``; ``none`` and missing estimates are outside the family). Returns the verdicts and the
    adjusted p-values (NaN outside the family)."""
    n = len(estimates)
    margins = list(margins) if margins is not None else [None] * n
    untestable = list(untestable) if untestable is not None else [False] * n
    if not (len(directions) == len(margins) == len(untestable) == n):
        raise ValueError("judge_family: estimates, directions, margins and untestable must have one entry each")
    raw = [e.p if e is not None and d != "none" and not u else math.nan
           for e, d, u in zip(estimates, directions, untestable)]
    adjusted = holm(raw)
    verdicts = []
    for e, d, m, u, p in zip(estimates, directions, margins, untestable, adjusted):
        verdicts.append("estimate" if e is None else judge(e, d, p=p, margin=m, untestable=u, alpha=alpha))
    return verdicts, adjusted


def exact_verdict(holds: bool | None) -> str:
    """The verdict of an exact check (an identity, a bound, a computed constant): reproduced / contradicted;
    ``None`` (nothing to check) is an estimate."""
    return "estimate" if holds is None else "reproduced" if holds else "contradicted"
