"""Run-level inference (dgro_lib.report.inference) against what it must reduce to, and its coverage on simulated
runs with known seed and item variance, printed beside the pooled-McNemar interval's (run with -s to see it)."""

import math

import numpy as np
import pytest
from scipy import stats

from dgro_lib.report.inference import _run_shares, compare, holm, level, mde, projected_mde, seeds_for_mde
from dgro_lib.report.verdict import at_floor_or_ceiling, judge, judge_family


def simulate(rng, *, n=3, items=1200, sd_run=0.025, effect=(0.03, 0.0), interaction=0.05):
    """Two arms of ``n`` runs on the same ``items`` binary items: P(correct) = difficulty_i + arm effect + the arm's
    item-specific effect + the run's effect (the seed). The true difference of the arms is effect[0] - effect[1]
    (difficulty in [0.2, 0.8] and small effects keep every probability inside [0, 1], so no clipping biases it).
    Also a base model: one draw at the difficulties."""
    difficulty = rng.uniform(0.2, 0.8, items)

    def arm(d):
        p = difficulty + d + rng.normal(0, interaction, items) + rng.normal(0, sd_run, (n, 1))
        return (rng.random((n, items)) < np.clip(p, 0, 1)).astype(float)

    base = (rng.random(items) < difficulty).astype(float)
    return arm(effect[0]), arm(effect[1]), base, difficulty


def coverage(rng, trials, **kw):
    truth = 100 * (kw.get("effect", (0.03, 0.0))[0] - kw.get("effect", (0.03, 0.0))[1])
    ours = pooled = 0
    for k in range(trials):
        a, b, _, _ = simulate(rng, **kw)
        e = compare(a, b, n_boot=400, seed=k)
        ours += e.ci_low <= truth <= e.ci_high
        se = abs(e.estimate / e.mcnemar_z) if e.mcnemar_z else 0.0  # the pooled McNemar's implied error
        pooled += e.estimate - 1.96 * se <= truth <= e.estimate + 1.96 * se
    return ours / trials, pooled / trials


@pytest.mark.parametrize("sd_run,n,gap", [(0.025, 3, 0.2), (0.01, 5, 0.03)])
def test_interval_covers_the_true_difference_about_95_percent(sd_run, n, gap, capsys):
    rng = np.random.default_rng(20261203)
    trials = 300
    ours, pooled = coverage(rng, trials, sd_run=sd_run, n=n)
    with capsys.disabled():
        print(f"\n[coverage] seed s.d. {100 * sd_run:.1f} points, {n} seeds per arm, 1,200 items, {trials} "
              f"simulated experiments: run-level 95 % CI {ours:.3f}, pooled-McNemar 95 % CI {pooled:.3f}")
    # 300 trials: the binomial s.d. of a 95 % coverage is 1.3 points
    assert 0.91 <= ours <= 0.99
    assert pooled < ours - gap  # the items-only interval leaves the seed variance out


def test_zero_seed_variance_reduces_to_the_paired_item_test():
    rng = np.random.default_rng(0)
    a1, b1, _, _ = simulate(rng, n=1, sd_run=0.0)
    a, b = np.repeat(a1, 3, axis=0), np.repeat(b1, 3, axis=0)  # three identical runs per arm
    e = compare(a, b, n_boot=20000, seed=1)
    d = a1[0] - b1[0]
    paired_se = 100 * d.std(ddof=1) / math.sqrt(d.size)
    assert e.estimate == pytest.approx(100 * d.mean())
    assert e.se_runs == 0.0
    assert e.se == pytest.approx(paired_se, rel=0.03)  # bootstrap noise of a variance at 20k draws
    assert e.df > 1000  # the items' df: the interval is the paired test's
    assert e.p == pytest.approx(2 * stats.norm.sf(abs(100 * d.mean()) / paired_se), abs=0.02)


def test_equal_item_profiles_reduce_to_welch():
    rng = np.random.default_rng(1)
    a, b = rng.normal(0.5, 0.03, 4), rng.normal(0.48, 0.01, 3)  # per-run scalars: no item level
    e = compare(a, b, scale=1.0)
    welch = stats.ttest_ind(a, b, equal_var=False)
    lo, hi = welch.confidence_interval()
    assert e.estimate == pytest.approx(a.mean() - b.mean())
    assert (e.ci_low, e.ci_high) == pytest.approx((lo, hi))
    assert e.p == pytest.approx(welch.pvalue) and e.welch_p == pytest.approx(welch.pvalue)
    assert e.se_items == 0.0 and e.n_items == 0


def test_paired_scalars_reduce_to_the_paired_t_test():
    rng = np.random.default_rng(5)
    seed_effect = rng.normal(0, 0.03, 6)  # what a seed does to both arms' runs
    a, b = 0.52 + seed_effect + rng.normal(0, 0.01, 6), 0.50 + seed_effect + rng.normal(0, 0.01, 6)
    e = compare(a, b, paired=True, scale=1.0)
    t = stats.ttest_rel(a, b)
    assert e.estimate == pytest.approx((a - b).mean())
    assert (e.ci_low, e.ci_high) == pytest.approx(tuple(t.confidence_interval()))
    assert e.p == pytest.approx(t.pvalue) and e.welch_p == pytest.approx(t.pvalue)
    assert e.df == 5 and e.seeds_a == e.seeds_b == 6
    assert e.ci_high - e.ci_low < compare(a, b, scale=1.0).ci_high - compare(a, b, scale=1.0).ci_low


def test_paired_items_are_the_level_of_the_per_seed_difference():
    rng = np.random.default_rng(6)
    a, b, _, _ = simulate(rng, n=4)
    e, lv = compare(a, b, paired=True), level(a - b, scale=100.0)
    assert (e.estimate, e.se, e.ci_low, e.ci_high, e.df, e.se_items) == (lv.estimate, lv.se, lv.ci_low, lv.ci_high,
                                                                        lv.df, lv.se_items)
    assert e.seeds_b == 4 and e.mcnemar_z == compare(a, b).mcnemar_z  # seed s against seed s, as before
    with pytest.raises(ValueError, match="run s of a beside run s of b"):
        compare(a, b[:3], paired=True)
    with pytest.raises(ValueError, match="b is missing"):
        compare(a, paired=True)


def simulate_shared_seeds(rng, *, n, rho, sd_run=0.03, items=1200, gap=0.03):
    """Two arms whose run s shares the seed s: the run effects correlate by ``rho`` across the arms."""
    difficulty = rng.uniform(0.2, 0.8, items)
    shared = rng.normal(0, sd_run, (n, 1))
    own = lambda: rng.normal(0, sd_run, (n, 1))  # noqa: E731
    arm = lambda d: (rng.random((n, items)) < np.clip(  # noqa: E731
        difficulty + d + rng.normal(0, 0.05, items) + math.sqrt(rho) * shared + math.sqrt(1 - rho) * own(), 0, 1))
    return arm(gap).astype(float), arm(0.0).astype(float)


@pytest.mark.parametrize("rho", [0.0, 0.8])
def test_paired_interval_covers_about_95_percent_and_is_narrower_when_seeds_correlate(rho, capsys):
    rng = np.random.default_rng(20261206)
    trials, hits, widths = 200, 0, []
    for k in range(trials):
        a, b = simulate_shared_seeds(rng, n=8, rho=rho)
        e, w = compare(a, b, paired=True, n_boot=300, seed=k), compare(a, b, n_boot=300, seed=k)
        hits += e.ci_low <= 3.0 <= e.ci_high
        widths.append((e.ci_high - e.ci_low) / (w.ci_high - w.ci_low))
    with capsys.disabled():
        print(f"\n[coverage] paired, seed correlation {rho}, 8 seeds per arm, {trials} simulated experiments: "
              f"95 % CI {hits / trials:.3f}, median width / Welch's {np.median(widths):.2f}")
    assert 0.90 <= hits / trials <= 0.99  # 200 trials: the binomial s.d. of a 95 % coverage is 1.5 points
    # uncorrelated seeds: half the df for nothing, a little wider; correlated: the shared shift cancels
    assert (np.median(widths) > 1.0) if rho == 0 else (np.median(widths) < 0.75)


def test_equal_arms_and_bit_determinism():
    rng = np.random.default_rng(2)
    a, _, base, _ = simulate(rng)
    e = compare(a, a)
    assert e.estimate == 0.0 and e.ci_low == -e.ci_high and judge(e, "higher") == "inconclusive"
    assert compare(a, base=base) == compare(a, base=base)  # seeded: the same interval to the last bit


def test_against_a_fixed_base_uses_the_runs_df():
    rng = np.random.default_rng(3)
    a, _, base, _ = simulate(rng, n=4)
    e = compare(a, base=base)
    run_gain = 100 * (a.mean(axis=1) - base.mean())
    assert e.estimate == pytest.approx(run_gain.mean())
    assert e.se_runs == pytest.approx(run_gain.std(ddof=1) / 2)
    assert e.welch_p == pytest.approx(stats.ttest_1samp(run_gain, 0).pvalue)
    assert e.df >= 3  # n - 1, more with the item part (here large: the base's own item noise is independent)
    assert e.se ** 2 >= e.se_runs ** 2
    assert e.seeds_a == 4 and e.seeds_b == 0 and math.isfinite(e.mcnemar_z)


def test_one_seed_claims_no_interval_and_level_quotes_the_unit():
    rng = np.random.default_rng(4)
    a, b, _, _ = simulate(rng, n=1)
    e = compare(a, b)
    assert math.isnan(e.ci_low) and math.isnan(e.mde) and judge(e, "higher") == "inconclusive"
    lv = level(np.vstack([a, b]))
    assert lv.estimate == pytest.approx(np.vstack([a, b]).mean()) and lv.ci_low < lv.estimate < lv.ci_high


def test_bad_input_names_the_field():
    with pytest.raises(ValueError, match="same items"):
        compare([[1, 0, 1], [1, 0]])
    with pytest.raises(ValueError, match="b has shape"):
        compare(np.ones((2, 3)), np.ones((2, 4)))
    with pytest.raises(ValueError, match="not both"):
        compare(np.ones((2, 3)), np.ones((2, 3)), base=np.ones(3))


def test_mde_matches_a_power_computation():
    # at the MDE, the power of the two-sided t-test (noncentral t) is ~80 % for a large df
    se, df = 1.5, 400
    d = mde(se, df)
    crit = stats.t.ppf(0.975, df)
    power = stats.nct.sf(crit, df, d / se) + stats.nct.cdf(-crit, df, d / se)
    assert power == pytest.approx(0.80, abs=0.005)
    assert math.isnan(mde(1.0, math.nan))


def test_holm_matches_the_textbook_example():
    # Holm (1979) step-down: sorted p (0.01, 0.02, 0.03, 0.04) x (4, 3, 2, 1), made monotone
    assert holm([0.04, 0.01, 0.03, 0.02]) == pytest.approx([0.06, 0.04, 0.06, 0.06])
    out = holm([0.01, float("nan")])
    assert out[0] == 0.01 and math.isnan(out[1])


def test_verdict_vocabulary():
    rng = np.random.default_rng(5)
    a, b, _, _ = simulate(rng, n=8, sd_run=0.005, effect=(0.08, 0.0))
    e = compare(a, b)
    assert judge(e, "higher") == "reproduced" and judge(e, "lower") == "contradicted"
    assert judge(e, "none") == "estimate"
    assert judge(e, "higher", untestable=True) == "not testable at this scale"
    assert judge(e, "equal", margin=2.0) == "contradicted"
    same = compare(a, a[::-1])
    assert judge(same, "equal", margin=2.0) == "reproduced" and judge(same, "equal", margin=1e-9) == "inconclusive"
    with pytest.raises(ValueError, match="margin"):
        judge(same, "equal")
    # Holm: a p of 0.03 alone is reproduced, beside two weaker comparisons it is not
    verdicts, adjusted = judge_family([e, same, same], ["higher", "higher", "none"])
    assert verdicts == ["reproduced", "inconclusive", "estimate"] and math.isnan(adjusted[2])
    assert at_floor_or_ceiling([0.0, 0.01]) and at_floor_or_ceiling([0.99, 1.0]) and not at_floor_or_ceiling([0, 0.5])


def test_bounded_claims_are_one_sided_tests_in_the_holm_family():
    from scipy import stats

    from dgro_lib.report.inference import Estimate
    from dgro_lib.report.verdict import claim_p

    def est(value, se, df=10.0):
        t = stats.t.ppf(0.975, df)
        return Estimate(estimate=value, se=se, ci_low=value - t * se, ci_high=value + t * se, df=df,
                        p=float(2 * stats.t.sf(abs(value) / se, df)), mde=math.nan, seeds_a=11, seeds_b=0,
                        n_items=0, welch_p=math.nan, mcnemar_z=math.nan, se_runs=se, se_items=0.0)

    # TOST: the larger one-sided p, against -margin and +margin, by hand
    e = est(1.0, 0.5)
    assert claim_p(e, "equal", 2.0) == pytest.approx(max(stats.t.sf(1.0 / 0.5, 10), stats.t.sf(3.0 / 0.5, 10)))
    # inside the margin and away from 0 at once: equivalent (the old rule called this contradicted)
    inside = est(1.0, 0.3)
    assert inside.ci_low > 0 and judge(inside, "equal", margin=2.0) == "reproduced"
    assert judge(est(5.0, 0.5), "equal", margin=2.0) == "contradicted"  # wholly outside the margin
    assert judge(est(1.5, 0.5), "equal", margin=2.0) == "inconclusive"
    # at most: one-sided against the margin
    assert claim_p(e, "at most", 2.0) == pytest.approx(stats.t.sf(1.0 / 0.5, 10))
    assert judge(est(0.1, 0.2), "at most", margin=2.0) == "reproduced"
    assert judge(est(4.0, 0.5), "at most", margin=2.0) == "contradicted"
    assert judge(est(-9.0, 0.5), "at most", margin=2.0) == "reproduced"  # far below the bound is within it
    # Holm: the TOST p enters the same family as the directional claims
    verdicts, adjusted = judge_family([e, est(3.0, 1.0)], ["equal", "higher"], margins=[2.0, None])
    raw = [claim_p(e, "equal", 2.0), est(3.0, 1.0).p]
    assert adjusted == pytest.approx(holm(raw))
    with pytest.raises(ValueError, match="margin"):
        claim_p(e, "at most")


def test_projected_mde_at_the_measured_seeds_is_compares_own():
    # arm B = 1 - arm A: the two arms' run means have exactly the same spread, the one assumption the projection
    # makes, so at the measured seed count it must give compare's MDE (same se split, same Satterthwaite df)
    rng = np.random.default_rng(11)
    a, _, base, _ = simulate(rng, n=5, items=300)
    for e in (compare(a, 1.0 - a), compare(a, base=base)):
        assert projected_mde(e.se, e.se_runs, e.seeds_a, e.seeds_b, e.n_items, e.seeds_a) == pytest.approx(e.mde,
                                                                                                           rel=1e-9)


def test_projected_mde_reads_the_arms_split_from_the_measured_df():
    # one arm spreads four times as much as the other: the df falls towards that arm's own seeds, and the
    # projection, given compare's df, reads the split back and gives compare's MDE at the measured counts
    rng = np.random.default_rng(5)
    for n_a, n_b, items in ((3, 3, 400), (6, 6, 1200), (5, 8, 300)):
        run_a = rng.normal(0.5, 0.08, size=(n_a, 1))
        run_b = rng.normal(0.5, 0.02, size=(n_b, 1))
        a = (rng.random((n_a, items)) < run_a).astype(float)
        b = (rng.random((n_b, items)) < run_b).astype(float)
        e = compare(a, b)
        shares = _run_shares(e.se, e.se_runs, e.seeds_a, e.seeds_b, e.n_items, e.df)
        assert all(qa + qb == pytest.approx(e.se_runs ** 2) and qa >= 0 and qb >= 0 for qa, qb in shares)
        if n_a == n_b:
            got = projected_mde(e.se, e.se_runs, n_a, n_b, items, n_a, df=e.df)
            assert got == pytest.approx(e.mde, rel=1e-9)
            # the equal-spread reading has more df, so it understates the MDE
            assert projected_mde(e.se, e.se_runs, n_a, n_b, items, n_a) < got
        # one of the (at most two) splits that fit the df is the arms' measured one
        va, vb = a.mean(axis=1).var(ddof=1) * 100 ** 2, b.mean(axis=1).var(ddof=1) * 100 ** 2
        assert any(qa == pytest.approx(va / n_a, rel=1e-6) and qb == pytest.approx(vb / n_b, rel=1e-6)
                   for qa, qb in shares), (shares, va / n_a, vb / n_b)
    # without a df, and against a fixed base, the split is the equal one / all in arm A
    assert _run_shares(2.0, 2.0, 4, 4, 100, math.nan) == [(2.0, 2.0)]
    assert _run_shares(2.0, 1.5, 4, 0, 100, 3.0) == [(2.25, 0.0)]


def test_projected_mde_scales_the_run_part_and_keeps_the_item_part():
    # no item part: se = se_runs, which scales with 1 / sqrt(seeds); the df is Welch's 2 (m - 1)
    se = 2.0
    for m in (4, 16, 64):
        want = (stats.t.ppf(0.975, 2 * m - 2) + stats.t.ppf(0.8, 2 * m - 2)) * se * math.sqrt(4 / m)
        assert projected_mde(se, se, 4, 4, 1200, m) == pytest.approx(want, rel=1e-12)
    # the arm-specific item part stays: with unlimited seeds the MDE tends to (z_.975 + z_.8) x that part
    far = projected_mde(math.hypot(2.0, 1.5), 2.0, 4, 4, 1200, 10 ** 6)
    assert far == pytest.approx((stats.norm.ppf(0.975) + stats.norm.ppf(0.8)) * 1.5, rel=1e-3)
    assert math.isnan(projected_mde(1.0, math.nan, 1, 1, 10, 4))
    with pytest.raises(ValueError, match="seeds must be at least 2"):
        projected_mde(1.0, 1.0, 3, 3, 10, 1)


def test_seeds_for_mde_is_the_smallest_count_that_reaches_the_target():
    cases = [(2.0, 2.0, 3, 3, 1200), (3.1, 2.4, 16, 16, 1200), (1.5, 1.2, 9, 0, 1200), (0.5, 0.5, 3, 3, 0)]
    for se, se_runs, na, nb, items in cases:
        for target in (1.0, 3.0, 5.0):
            for df in (math.nan, 3.0):  # equal spreads, and a df that puts most of the spread in one arm
                got = seeds_for_mde(se, se_runs, na, nb, items, target, df=df)
                loop = next((m for m in range(2, 10_001)
                             if projected_mde(se, se_runs, na, nb, items, m, df=df) <= target), math.inf)
                assert got == loop, (se, se_runs, na, nb, target, df)
    # an item part of 1.5 points alone needs an MDE of ~4.2: no seed count reaches 3
    assert seeds_for_mde(math.hypot(2.0, 1.5), 2.0, 4, 4, 1200, 3.0) == math.inf
    assert math.isnan(seeds_for_mde(1.0, math.nan, 1, 0, 10, 3.0))
