"""One verdict record and one judging rule, for every claim of every notebook.

A claim compares what a paper says (``direction``: the sign it gives A - B) with a run-level estimate
(:class:`dgro_lib.report.inference.Estimate`). The vocabulary:

* ``reproduced``: the 95 % interval excludes 0 in the paper's direction (after Holm's correction over the
  notebook's directional claims, see :func:`judge_family`);
* ``contradicted``: it excludes 0 the other way;
* ``inconclusive``: it includes 0. The row's ``mde`` says how large an effect these seeds could have detected;
* ``not testable at this scale``: both sides sit at the metric's floor or ceiling, so no difference can show;
* ``estimate``: a level or a change the paper gives no direction for (no test, still with its interval).

Two kinds of claim are bounded by a ``margin`` (in the estimate's unit) and tested one-sidedly, each p entering the
same Holm family as the directional claims:

* ``equal``: no difference. Its p is the two one-sided tests' (TOST: the larger of the two one-sided p-values
  against -margin and +margin). ``reproduced`` (equivalent) when that p, Holm-adjusted, is under alpha, whether or
  not the interval also excludes 0; ``contradicted`` when the 95 % interval lies wholly outside +- margin;
  ``inconclusive`` otherwise.
* ``at most``: the estimate stays below ``margin`` (the paper's "not excessively long", "without extra cost").
  Its p is the one-sided test against ``margin``; ``reproduced`` when it is under alpha after Holm,
  ``contradicted`` when the 95 % interval lies wholly above ``margin``, ``inconclusive`` otherwise.

Exact (non-statistical) checks, such as an identity that holds to rounding, carry their own outcome:
:func:`exact_verdict`.
"""

from __future__ import annotations

import math
from typing import Sequence

from scipy import stats

from dgro_lib.report.inference import ALPHA, Estimate, holm

__all__ = ["VERDICTS", "DIRECTIONS", "BOUNDED", "claim_p", "judge", "judge_family", "exact_verdict",
           "at_floor_or_ceiling"]

VERDICTS = ("reproduced", "contradicted", "inconclusive", "not testable at this scale", "estimate")
DIRECTIONS = ("higher", "lower", "equal", "at most", "none")
# the directions whose claim is bounded by a margin (tested one-sidedly against it)
BOUNDED = ("equal", "at most")


def at_floor_or_ceiling(means: Sequence[float], *, low: float = 0.0, high: float = 1.0, within: float = 0.02) -> bool:
    """True when every mean (in the metric's own unit, e.g. accuracy in [0, 1]) is within ``within`` of ``low``
    or every one is within ``within`` of ``high``: a difference cannot show there."""
    means = [m for m in means if m is not None and math.isfinite(m)]
    return bool(means) and (all(m <= low + within for m in means) or all(m >= high - within for m in means))


def claim_p(est: Estimate, direction: str, margin: float | None = None) -> float:
    """The p-value claim ``est`` enters its Holm family with: the two-sided p for ``higher`` / ``lower``; for
    ``equal`` the TOST p (the larger of the one-sided p-values of ``est > -margin`` and ``est < margin``); for
    ``at most`` the one-sided p of ``est < margin``. NaN without an interval (one seed) or for ``none``."""
    if direction == "none":
        return math.nan
    if direction not in BOUNDED:
        return est.p
    if margin is None or not margin > 0:
        raise ValueError(f"a claim {direction!r} needs a margin > 0, got {margin!r}")
    if not (math.isfinite(est.se) and math.isfinite(est.df)):
        return math.nan

    def beyond(distance: float) -> float:  # one-sided p of "the true value lies this far inside the bound"
        if est.se == 0:
            return 0.0 if distance > 0 else 1.0
        return float(stats.t.sf(distance / est.se, est.df))

    if direction == "at most":
        return beyond(margin - est.estimate)
    return max(beyond(margin - est.estimate), beyond(est.estimate + margin))


def judge(est: Estimate, direction: str, *, p: float | None = None, margin: float | None = None,
          untestable: bool = False, alpha: float = ALPHA) -> str:
    """The verdict for ``est`` against the paper's ``direction`` of A - B (one of :data:`DIRECTIONS`).

    ``p``: the (Holm-adjusted) p-value that decides; :func:`claim_p` by default. For ``higher`` / ``lower``,
    rejecting at ``alpha`` with the estimate's sign is the same as the interval at 1 - alpha excluding 0 on that
    side. ``margin``: the bound of an ``equal`` or ``at most`` claim (required there; see the module docstring)."""
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {DIRECTIONS}, got {direction!r}")
    if direction == "none":
        return "estimate"
    if untestable:
        return "not testable at this scale"
    p = claim_p(est, direction, margin) if p is None else p
    if direction in BOUNDED and (margin is None or not margin > 0):
        raise ValueError(f"a claim {direction!r} needs a margin > 0, got {margin!r}")
    if not math.isfinite(p):  # one seed: no seed variance, nothing to judge with
        return "inconclusive"
    if p < alpha:
        return "reproduced" if direction in BOUNDED else (
            "reproduced" if (est.estimate > 0) == (direction == "higher") else "contradicted")
    if direction == "equal":
        return "contradicted" if est.ci_low > margin or est.ci_high < -margin else "inconclusive"
    if direction == "at most":
        return "contradicted" if est.ci_low > margin else "inconclusive"
    return "inconclusive"


def judge_family(estimates: Sequence[Estimate | None], directions: Sequence[str], *,
                 margins: Sequence[float | None] | None = None, untestable: Sequence[bool] | None = None,
                 alpha: float = ALPHA) -> tuple[list[str], list[float]]:
    """Judge the claims of one figure together: Holm's correction over the tested ones (``higher``, ``lower``,
    ``equal``, ``at most``, each with its :func:`claim_p`; ``none`` and missing estimates are outside the family). Returns the verdicts and the
    adjusted p-values (NaN outside the family)."""
    n = len(estimates)
    margins = list(margins) if margins is not None else [None] * n
    untestable = list(untestable) if untestable is not None else [False] * n
    if not (len(directions) == len(margins) == len(untestable) == n):
        raise ValueError("judge_family: estimates, directions, margins and untestable must have one entry each")
    raw = [claim_p(e, d, m) if e is not None and d != "none" and not u else math.nan
           for e, d, m, u in zip(estimates, directions, margins, untestable)]
    adjusted = holm(raw)
    verdicts = []
    for e, d, m, u, p in zip(estimates, directions, margins, untestable, adjusted):
        verdicts.append("estimate" if e is None else judge(e, d, p=p, margin=m, untestable=u, alpha=alpha))
    return verdicts, adjusted


def exact_verdict(holds: bool | None) -> str:
    """The verdict of an exact check (an identity, a bound, a computed constant): reproduced / contradicted;
    ``None`` (nothing to check) is an estimate."""
    return "estimate" if holds is None else "reproduced" if holds else "contradicted"
