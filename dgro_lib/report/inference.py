"""Run-level inference: the training run is the unit, the held-out items are the second level.

A claim about training is a claim about training *runs*: an arm (one configuration) trained with ``n`` seeds gives
``n`` models, each scored on the same held-out items. The test set is crossed with the runs (every run answers
every item, and so does the base model), so a comparison has two sources of uncertainty: which seeds were drawn
(between-run variance, usually the larger one here) and which items were drawn. Pooling the items of all seeds
into one McNemar test (the items-only view) leaves the first out, and so claims effects that a rerun with other
seeds does not find.

:func:`compare` takes per-item scores, shape ``(runs, items)`` per arm (0/1 greedy correctness, the fraction of
correct samples, ...), or per-run scalars, shape ``(runs,)`` (entropy, length, a slope), and returns the
difference of run means with:

* **a standard error over both levels.** The item level is a bootstrap of the items: one draw (multinomial
  weights) shared by every run of both arms and by the base, applied to the difference of the arms' mean item
  profiles, which is the item half of the row-and-column ("pigeonhole") bootstrap of a crossed design (Owen 2007,
  *Ann. Appl. Stat.* 1(2)). The run level is resampling the runs of each arm with replacement, rescaled by
  sqrt(n / (n - 1)); its variance is known in closed form, s_A^2 / n_A + s_B^2 / n_B (Welch's), so that is used
  rather than a Monte-Carlo copy of it. The run-by-item noise of an arm is in both (in the spread of the run
  means, and in the item profile as residual / runs), so its two-way-ANOVA estimate is taken out of the item
  part once; what is left there is the arm-specific item effect, the error of generalizing to new items. Zero
  seed variance leaves the paired item test; equal item profiles leave Welch.
* **a Student-t interval at the Welch-Satterthwaite degrees of freedom of the runs**, estimate +- t * se. With
  3 seeds a percentile bootstrap cannot reach beyond the seeds' range and uses normal tails where t at 2-4 df
  is 1.4-2x wider, so it covers far less than 95 %; and an exact permutation test over 3 + 3 runs has 20
  arrangements, so its smallest two-sided p is 0.1: it can never reject at 0.05. So the bootstrap gives only the
  standard error, and the seed count sets the tails (Satterthwaite's df over both levels).
  ``tests/test_inference.py`` measures the coverage on simulated runs with known seed and item variance, with
  the pooled-McNemar interval's beside it.
* **the run-level Welch t-test** (:func:`scipy.stats.ttest_ind`, items held fixed; a one-sample t on the per-run
  differences against a single base model), the **minimum detectable effect** at 80 % power and alpha 0.05 for
  this standard error and degrees of freedom, and the **item-level McNemar z** pooled over seeds, kept as a
  secondary column: it answers "given these trained models", not "given this recipe".

``paired=True`` reads two arms trained with the same seeds as seed-blocked pairs: run ``s`` of A against run ``s``
of B. Here a seed fixes the prompt order and the sampling streams of a run (``seed`` and ``data_seed`` of the TRL
config, and ``set_seed``), so two arms that share it share those random numbers; the comparison is then the level of
the per-seed difference ``A_s - B_s`` (the same two levels, with n - 1 degrees of freedom, and the paired t-test,
:func:`scipy.stats.ttest_rel`, in ``welch_p``'s place). It is narrower than Welch's when the arms' runs correlate
across seeds, and wider when they do not (half the degrees of freedom); which reading a claim uses is a property of
its design, fixed before its runs are seen, never the narrower of the two.

Everything here is numpy/scipy only (no torch), and deterministic: the bootstrap generator is seeded.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Sequence

import numpy as np
from scipy import stats

__all__ = ["Estimate", "compare", "level", "holm", "mde", "as_runs", "mcnemar_z", "projected_mde", "seeds_for_mde"]

ALPHA = 0.05
POWER = 0.80
N_BOOT = 4000


@dataclass(frozen=True)
class Estimate:
    """One estimate (an arm's level, or a difference A - B), in the caller's unit (``scale`` x the score).

    ``seeds_a`` / ``seeds_b`` count runs (``seeds_b`` is 0 against a single base model, and for a level);
    ``df`` is the Satterthwaite degrees of freedom over both levels (the runs', Welch's, widened by the item
    part; NaN with one run: no seed variance can be estimated, so no interval is claimed); ``p`` is two-sided, from estimate / se on ``df``; ``welch_p`` the
    run-level test with the items held fixed; ``mcnemar_z`` the pooled item-level statistic (NaN when the scores
    are not 0/1 or there are no items). ``paired``: run s of A was read against run s of B (the same seed), so
    the run part is the per-seed differences' spread on ``seeds_a - 1`` df and ``welch_p`` is the paired t-test's."""

    estimate: float
    se: float
    ci_low: float
    ci_high: float
    df: float
    p: float
    mde: float
    seeds_a: int
    seeds_b: int
    n_items: int
    welch_p: float
    mcnemar_z: float
    se_runs: float
    se_items: float
    paired: bool = False


def as_runs(values, name: str = "scores") -> np.ndarray:
    """``values`` (a list of per-run item lists, a 2-D array, or per-run scalars) as a float array of shape
    ``(runs, items)`` or ``(runs,)``; a ragged list or an empty arm is a ValueError naming ``name``."""
    try:
        arr = np.asarray([np.asarray(v, dtype=float) for v in values], dtype=float)
    except ValueError as e:  # ragged: runs scored on different item sets cannot be crossed
        lengths = sorted({len(v) for v in values})
        raise ValueError(f"{name}: every run must be scored on the same items; item counts {lengths}") from e
    if arr.size == 0 or arr.shape[0] == 0:
        raise ValueError(f"{name}: no runs")
    if arr.ndim not in (1, 2):
        raise ValueError(f"{name}: expected (runs,) or (runs, items), got shape {arr.shape}")
    if not np.isfinite(arr).all():
        raise ValueError(f"{name}: non-finite scores")
    return arr


def mde(se: float, df: float, *, alpha: float = ALPHA, power: float = POWER) -> float:
    """The smallest true difference a two-sided test at ``alpha`` detects with probability ``power``, given the
    standard error ``se`` on ``df`` degrees of freedom: (t_{1 - alpha/2} + t_{power}) x se. NaN without df."""
    if not (df > 0) or not math.isfinite(se):
        return math.nan
    return float((stats.t.ppf(1 - alpha / 2, df) + stats.t.ppf(power, df)) * se)


def _welch_df(va: float, na: int, vb: float, nb: int) -> float:
    """Welch-Satterthwaite df of var_a / n_a + var_b / n_b (``nb`` = 0: a fixed comparator, df = n_a - 1)."""
    if nb == 0:
        return float(na - 1) if na > 1 else math.nan
    if na < 2 or nb < 2:
        return math.nan
    qa, qb = va / na, vb / nb
    if qa + qb == 0:
        return float(na + nb - 2)  # no seed spread at all: the pooled df (the interval is then the items')
    return float((qa + qb) ** 2 / (qa ** 2 / (na - 1) + qb ** 2 / (nb - 1)))


def _residual_variance(y: np.ndarray) -> float:
    """The run-by-item residual variance of one arm's (runs, items) scores: the two-way ANOVA mean square
    sum((y - row mean - column mean + grand mean)^2) / ((runs - 1)(items - 1))."""
    r = y - y.mean(axis=1, keepdims=True) - y.mean(axis=0, keepdims=True) + y.mean()
    return float((r ** 2).sum() / ((y.shape[0] - 1) * (y.shape[1] - 1)))


def mcnemar_z(fixed: int, broken: int) -> tuple[float, float]:
    """McNemar's statistic from the discordant counts, (fixed - broken) / sqrt(fixed + broken) (normal
    approximation, no continuity correction; 0 when there are none), and its two-sided p-value. Seeds evaluated on
    the same puzzles are pooled by summing their counts before calling it."""
    n = fixed + broken
    z = (fixed - broken) / math.sqrt(n) if n else 0.0
    return z, math.erfc(abs(z) / math.sqrt(2.0))


def _pooled_mcnemar(a: np.ndarray, b: np.ndarray | None) -> float:
    """Pooled McNemar z of 0/1 scores: seed s of A against seed s of B (or every run against the base row
    ``b`` of shape (items,)), discordant counts summed over the pairs; NaN for non-binary scores."""
    if a.ndim != 2 or not np.isin(a, (0.0, 1.0)).all() or (b is not None and not np.isin(b, (0.0, 1.0)).all()):
        return math.nan
    pairs = [(a[i], b if b.ndim == 1 else b[i]) for i in range(a.shape[0] if b.ndim == 1 else min(len(a), len(b)))]
    fixed = sum(int(((x == 1) & (y == 0)).sum()) for x, y in pairs)
    broken = sum(int(((x == 0) & (y == 1)).sum()) for x, y in pairs)
    return mcnemar_z(fixed, broken)[0]


def compare(a, b=None, *, base=None, paired: bool = False, scale: float = 100.0, n_boot: int = N_BOOT,
            seed: int = 0, alpha: float = ALPHA, power: float = POWER) -> Estimate:
    """Arm A - arm B (``b``), or arm A - a single fixed model (``base``, e.g. the base checkpoint every run started
    from: per-item scores of shape (items,), or a scalar), or arm A's level (neither).

    ``a``, ``b``: per-item scores ``(runs, items)`` on the same items in the same order, or per-run scalars
    ``(runs,)``. ``scale`` multiplies the result (100: proportions in points). See the module docstring for the
    method; ``seed`` seeds the bootstrap, so the same inputs give the same interval bit for bit.

    ``paired``: row ``s`` of ``a`` and row ``s`` of ``b`` are runs with the same seed (the module docstring says
    when that is a design); the estimate is then :func:`level` of ``a - b``, with the paired t-test's p in
    ``welch_p``. The arms must then have the same shape."""
    if b is not None and base is not None:
        raise ValueError("compare: give b (another arm) or base (a fixed model), not both")
    if paired:
        if b is None:
            raise ValueError("compare: paired=True compares two arms; b is missing")
        a, b = as_runs(a, "a"), as_runs(b, "b")
        if a.shape != b.shape:
            raise ValueError(f"compare: paired arms need run s of a beside run s of b on the same items; a has "
                             f"shape {a.shape}, b {b.shape}")
        est = compare(a - b, scale=scale, n_boot=n_boot, seed=seed, alpha=alpha, power=power)
        run_a, run_b = (a.mean(axis=1), b.mean(axis=1)) if a.ndim == 2 else (a, b)
        d = run_a - run_b
        t_p = float(stats.ttest_rel(run_a, run_b).pvalue) if len(d) > 1 and d.var() > 0 else math.nan
        mz = _pooled_mcnemar(a, b) if a.ndim == 2 else math.nan
        return replace(est, seeds_b=b.shape[0], welch_p=t_p, mcnemar_z=mz, paired=True)
    a = as_runs(a, "a")
    arm_b = as_runs(b, "b") if b is not None else None
    fixed = np.asarray(base, dtype=float) if base is not None else None
    items = a.ndim == 2
    for other, name in ((arm_b, "b"), (fixed, "base")):
        if other is None:
            continue
        if items and (other.ndim != (2 if name == "b" else 1) or other.shape[-1] != a.shape[1]):
            raise ValueError(f"compare: {name} has shape {other.shape}; a has {a.shape[1]} items per run")
        if not items and other.ndim != (1 if name == "b" else 0):
            raise ValueError(f"compare: a holds per-run scalars, {name} has shape {other.shape}")
    na, nb = a.shape[0], (arm_b.shape[0] if arm_b is not None else 0)
    run_a = a.mean(axis=1) if items else a
    run_b = (arm_b.mean(axis=1) if items else arm_b) if arm_b is not None else None
    fixed_mean = float(fixed.mean()) if fixed is not None else 0.0
    est = run_a.mean() - (run_b.mean() if run_b is not None else fixed_mean)
    va = run_a.var(ddof=1) if na > 1 else math.nan
    vb = run_b.var(ddof=1) if run_b is not None and nb > 1 else (0.0 if run_b is None else math.nan)
    df = _welch_df(va, na, vb, nb)
    se_runs = math.sqrt(va / na + (vb / nb if nb else 0.0)) if math.isfinite(df) else math.nan

    # The item level: a bootstrap of the items, one draw (multinomial weights) shared by every run of both arms
    # and by the base, applied to the difference of the arms' mean item profiles.
    if items:
        n_items = a.shape[1]
        rng = np.random.default_rng(seed)
        w = rng.multinomial(n_items, np.full(n_items, 1.0 / n_items), size=n_boot).T / n_items  # (items, B)
        profile = a.mean(axis=0) - (arm_b.mean(axis=0) if arm_b is not None else
                                    fixed if fixed is not None else 0.0)
        var_items = float((profile @ w).var(ddof=1))  # what pooling the seeds' items measures
        # The run-by-item noise of an arm is in that profile (as residual variance / runs) and, already, in the
        # spread of its run means: count it once, taking its two-way-ANOVA estimate out of the item part.
        overlap = sum(_residual_variance(x) / (x.shape[0] * x.shape[1]) for x in (a, arm_b)
                      if x is not None and x.shape[0] > 1)
        var_excess = max(var_items - overlap, 0.0)
    else:
        n_items, var_items, var_excess = 0, 0.0, 0.0
    # The run level: resampling n runs with replacement, rescaled by sqrt(n / (n - 1)), has variance s^2 / n
    # exactly, so it is used in closed form (Welch's) instead of through Monte-Carlo noise.
    se = math.sqrt(se_runs ** 2 + var_excess) if math.isfinite(df) else math.nan
    if math.isfinite(df) and var_excess > 0 and n_items > 1:  # Satterthwaite over both levels
        qa, qb = va / na, (vb / nb if nb else 0.0)
        denom = qa ** 2 / (na - 1) + (qb ** 2 / (nb - 1) if nb > 1 else 0.0) + var_excess ** 2 / (n_items - 1)
        df = float(se ** 4 / denom) if denom > 0 else df
    se_items = math.sqrt(var_items)
    if math.isfinite(df) and se > 0:
        t = stats.t.ppf(1 - alpha / 2, df)
        lo, hi = est - t * se, est + t * se
        p = float(2 * stats.t.sf(abs(est) / se, df))
    elif math.isfinite(df):  # no variance at either level: the difference is what it is
        lo = hi = est
        p = 1.0 if est == 0 else 0.0
    else:
        lo = hi = p = math.nan
    if run_b is not None and na > 1 and nb > 1 and (va > 0 or vb > 0):
        welch = float(stats.ttest_ind(run_a, run_b, equal_var=False).pvalue)
    elif run_b is None and fixed is not None and na > 1 and va > 0:
        welch = float(stats.ttest_1samp(run_a - fixed_mean, 0.0).pvalue)
    else:
        welch = math.nan
    mz = _pooled_mcnemar(a, arm_b if arm_b is not None else fixed) if items and (arm_b is not None or
                                                                                    fixed is not None) else math.nan
    return Estimate(estimate=scale * est, se=scale * se, ci_low=scale * lo, ci_high=scale * hi, df=df, p=p,
                    mde=scale * mde(se, df, alpha=alpha, power=power), seeds_a=na, seeds_b=nb, n_items=n_items,
                    welch_p=welch, mcnemar_z=mz, se_runs=scale * se_runs, se_items=scale * se_items)


def level(a, *, scale: float = 1.0, **kw) -> Estimate:
    """An arm's level (mean over runs of the per-run mean), with the same two-level interval as :func:`compare`;
    ``scale`` defaults to 1 (a level is quoted in the metric's own unit)."""
    return compare(a, scale=scale, **kw)


def _run_shares(se: float, se_runs: float, seeds_a: int, seeds_b: int, n_items: int,
                df: float) -> list[tuple[float, float]]:
    """The run part se_runs^2 split into the two arms' shares (s_a^2 / n_a, s_b^2 / n_b), read back from the
    measured Satterthwaite ``df`` of :func:`compare`: se^4 / df = q_a^2 / (n_a - 1) + q_b^2 / (n_b - 1)
    + excess^2 / (n_items - 1) with q_a + q_b = se_runs^2, a quadratic in q_a. Both roots are returned (which arm
    spreads more is not recorded; with equal seed counts the two give the same projection); one equal split where
    ``df`` is not finite, and (se_runs^2, 0) against a fixed base."""
    r = se_runs ** 2
    if seeds_b == 0:
        return [(r, 0.0)]
    if not math.isfinite(df) or df <= 0 or r <= 0:
        # no df to read: the equal-spread split, s^2 (1/n_a + 1/n_b) = se_runs^2
        s2 = r / (1 / seeds_a + 1 / seeds_b)
        return [(s2 / seeds_a, s2 / seeds_b)]
    excess = max(se ** 2 - r, 0.0)
    d = se ** 4 / df - (excess ** 2 / (n_items - 1) if n_items > 1 else 0.0)
    u, v = 1 / (seeds_a - 1), 1 / (seeds_b - 1)
    # (u + v) q_a^2 - 2 v r q_a + v r^2 - d = 0; a negative discriminant is rounding (d at its least, u v r^2 /
    # (u + v), is equal spreads scaled by the seeds), so it is read as zero
    disc = math.sqrt(max((u + v) * d - u * v * r ** 2, 0.0))
    roots = {min(max((v * r + sign * disc) / (u + v), 0.0), r) for sign in (1.0, -1.0)}
    return [(qa, r - qa) for qa in sorted(roots)]


def projected_mde(se: float, se_runs: float, seeds_a: int, seeds_b: int, n_items: int, seeds: int, *,
                  df: float = math.nan, alpha: float = ALPHA, power: float = POWER) -> float:
    """The MDE that a comparison measured as (``se``, ``se_runs``, ``df``) with ``seeds_a`` vs ``seeds_b`` runs (0:
    against a fixed base) on ``n_items`` items would have with ``seeds`` runs in each arm, the runs' spread and the
    items held as measured: the run part s_a^2 / n_a + s_b^2 / n_b scales to (s_a^2 + s_b^2) / seeds, the
    arm-specific item part (se^2 - se_runs^2) stays, and the degrees of freedom are :func:`compare`'s
    Satterthwaite value over both levels.

    How the run part splits between the arms sets the df (one arm with most of the spread has the df of its own
    seeds alone); it is read back from the measured ``df`` (:func:`_run_shares`), so at the measured seed counts
    the result is :func:`compare`'s own MDE. Of the two splits that fit, the larger MDE is returned. Without
    ``df`` the spreads are taken as equal, which understates the MDE when one arm spreads much more than the other.
    A paired estimate (``compare(..., paired=True)``) is the level of one difference: project it with ``seeds_b=0``.
    Same unit as ``se``; NaN when the spread was not measured (one run)."""
    if seeds < 2:
        raise ValueError(f"projected_mde: seeds must be at least 2 (a spread needs two runs), got {seeds}")
    if not (math.isfinite(se) and math.isfinite(se_runs)) or seeds_a < 2 or seeds_b == 1:
        return math.nan
    excess = max(se ** 2 - se_runs ** 2, 0.0)  # the arm-specific item effect: no seed count removes it
    item_df = excess ** 2 / (n_items - 1) if n_items > 1 else 0.0
    worst = -math.inf
    for qa, qb in _run_shares(se, se_runs, seeds_a, seeds_b, n_items, df):
        # each arm's per-run variance (q * n) over the projected count
        pa, pb = qa * seeds_a / seeds, (qb * seeds_b / seeds if seeds_b else 0.0)
        se_m = math.sqrt(pa + pb + excess)
        denom = (pa ** 2 + pb ** 2) / (seeds - 1) + item_df
        df_m = se_m ** 4 / denom if denom > 0 else float(2 * seeds - 2 if seeds_b else seeds - 1)
        worst = max(worst, mde(se_m, df_m, alpha=alpha, power=power))
    return worst


def seeds_for_mde(se: float, se_runs: float, seeds_a: int, seeds_b: int, n_items: int, target: float, *,
                  df: float = math.nan, alpha: float = ALPHA, power: float = POWER, max_seeds: int = 10_000) -> float:
    """The fewest runs per arm (at least 2) whose :func:`projected_mde` is at most ``target`` (same unit as
    ``se``): what a comparison would need to detect a ``target``-sized effect. ``inf`` when no seed count does
    (the item part alone is too large: then only more held-out items help), NaN when the spread was not measured.
    The MDE falls monotonically with the seeds, so a bisection finds the count."""
    def at(m: int) -> float:
        return projected_mde(se, se_runs, seeds_a, seeds_b, n_items, m, df=df, alpha=alpha, power=power)

    if not math.isfinite(at(2)):
        return math.nan
    if at(2) <= target:
        return 2
    if at(max_seeds) > target:
        return math.inf
    lo, hi = 2, max_seeds  # at(lo) > target >= at(hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if at(mid) <= target else (mid, hi)
    return hi


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (Holm 1979), family-wise error control for the comparisons of one figure
    (NaN entries are left out of the family and stay NaN). scipy has only false-discovery-rate control
    (:func:`scipy.stats.false_discovery_control`), hence these few lines."""
    p = np.asarray(pvalues, dtype=float)
    out = np.full(p.shape, np.nan)
    ok = np.flatnonzero(np.isfinite(p))
    m = len(ok)
    order = ok[np.argsort(p[ok], kind="stable")]
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[i]))
        out[i] = running
    return out.tolist()
