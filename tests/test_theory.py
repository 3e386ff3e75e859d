"""dgro_lib.analysis.theory against loop references, hand-derived values and the project's own loss."""

import itertools
import math

import numpy as np
import pytest
import torch

from dgro_lib.analysis import theory as T
from dgro_lib.config import ConfigError, config_from_dict, find_params, load_config
from dgro_lib.losses import loss_entry


def _soft_value_loop(p, r, beta):
    return beta * math.log(sum(pi * math.exp(ri / beta) for pi, ri in zip(p, r)))


def test_soft_value_matches_the_formula_and_its_limits():
    rng = np.random.default_rng(0)
    for _ in range(50):
        k = int(rng.integers(2, 6))
        p, r = rng.dirichlet(np.ones(k)), rng.uniform(-3, 3, k)
        for beta in (0.3, 1.0, 7.0):
            assert T.soft_value(p, r, beta)[0] == pytest.approx(_soft_value_loop(p, r, beta), rel=1e-12, abs=1e-12)
        # beta -> 0: the largest reward; beta -> infinity: mean + Var/(2 beta) (second order), no overflow or cancellation
        assert T.soft_value(p, r, 1e-6)[0] == pytest.approx(r.max(), abs=1e-4)
        mean, var = p @ r, p @ (r - p @ r) ** 2
        assert T.approximation_error(p, r, 1e6)[0] == pytest.approx(var / 2e6, rel=1e-3)
    # an outcome of probability 0 is not in the expectation
    assert T.soft_value([0.5, 0.5, 0.0], [0.0, 1.0, 9.0], 1e-6)[0] == pytest.approx(1.0, abs=1e-4)


def test_bad_inputs_are_named():
    with pytest.raises(ValueError, match="probability vector"):
        T.soft_value([0.5, 0.6], [0, 1], 1.0)
    with pytest.raises(ValueError, match="beta must be positive"):
        T.soft_value([0.5, 0.5], [0, 1], [1.0, 0.0])
    with pytest.raises(ValueError, match="shapes"):
        T.soft_value([0.5, 0.5], [0, 1, 2], 1.0)


def test_theorem_33_and_hoeffding_hold_and_the_error_is_monotone_in_beta():
    sweep = T.value_sweep(T.random_reward_problems(150, seed=1), np.logspace(-3, 3, 25))
    v = T.bound_violations(sweep).set_index("bound")
    assert v.loc["Theorem 3.3", "violations"] == 0 and v.loc["Hoeffding", "violations"] == 0
    assert (sweep["error"] >= -1e-12).all()
    for _, d in sweep.sort_values("beta").groupby("problem"):
        assert (np.diff(d["error"].to_numpy()) <= 1e-12).all()  # V - r̄ never grows with beta


def test_theorem_e1_fails_on_a_skewed_bernoulli_reward():
    # by hand: log(0.9 + 0.1 e) - 0.1 = 0.058568 > Var/(2 beta) = 0.09/2
    err = T.approximation_error([0.9, 0.1], [0.0, 1.0], 1.0)[0]
    assert err == pytest.approx(math.log(0.9 + 0.1 * math.e) - 0.1, rel=1e-12)
    assert err > T.theorem_e1_bound([0.9, 0.1], [0.0, 1.0], 1.0)[0] == pytest.approx(0.045)
    # a symmetric reward obeys it (all odd cumulants vanish, the even ones of a two-point law are negative beyond Var)
    assert T.approximation_error([0.5, 0.5], [0.0, 1.0], 1.0)[0] <= T.theorem_e1_bound([0.5, 0.5], [0.0, 1.0], 1.0)[0]


def test_theorem_33_bound_is_undefined_when_the_sup_has_probability_zero():
    assert np.isnan(T.theorem33_bound([0.5, 0.5, 0.0], [0.0, 1.0, 3.0], 1.0, sup="all")).all()
    assert np.isfinite(T.theorem33_bound([0.5, 0.5, 0.0], [0.0, 1.0, 3.0], 1.0)).all()


def test_lemma_e2_error_is_second_order():
    t = T.lemma_e2_table(0.7, 0.9, [100.0, 1000.0, 10000.0])
    assert t["beta_sq_error"].iloc[-1] == pytest.approx(t["beta_sq_error"].iloc[-2], rel=1e-2)


def test_beta_grid_error_uses_beta_2b2_over_b1():
    g = T.beta_grid_error([0.5], [0.0, 0.25], [0.3]).set_index("beta2")
    assert g.loc[0.0, "error"] == pytest.approx(0.7)  # the beta -> 0 limit m - r̄
    assert g.loc[0.25, "beta"] == 1.0
    assert g.loc[0.25, "error"] == pytest.approx(_soft_value_loop([0.7, 0.3], [0, 1], 1.0) - 0.3)


def _policy(seed=0, vocab=3, length=3, dim=4):
    return T.SequencePolicy.random(vocab, length, dim, generator=torch.Generator().manual_seed(seed))


def test_sequence_policy_enumerates_a_distribution_with_the_right_prefix_features():
    pol = _policy()
    W = torch.randn(3, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    assert float(pol.logp(W).exp().sum()) == pytest.approx(1.0, abs=1e-12)
    # loop reference: prefixes numbered by length, then in base-vocab order
    order = [()] + [pre for n in range(1, 3) for pre in itertools.product(range(3), repeat=n)]
    row = {pre: i for i, pre in enumerate(order)}
    for s, y in enumerate(pol.sequences.tolist()):
        ref = 0.0
        for n in range(3):
            logits = W @ pol.features[row[tuple(y[:n])]]
            ref += float(torch.log_softmax(logits, 0)[y[n]])
        assert float(pol.logp(W)[s]) == pytest.approx(ref, abs=1e-12)


def test_closed_form_score_equals_autograd():
    pol = _policy(2)
    W = torch.randn(3, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    jac = torch.autograd.functional.jacobian(pol.logp, W)  # (S, V, d)
    assert torch.allclose(pol.score_closed_form(W), jac, atol=1e-12)


def test_gradient_terms_on_and_off_policy():
    pol = _policy(4)
    gen = torch.Generator().manual_seed(5)
    W_old = torch.randn(3, 4, dtype=torch.float64, generator=gen)
    r = torch.rand(27, dtype=torch.float64, generator=gen)
    on = T.gradient_terms(pol, W_old, W_old, r, beta1=1.0, beta2=0.5)
    assert on["normaliser_norm"] < 1e-12 and on["eq10_minus_sign_error"] < 1e-12  # the two signs agree on-policy
    W = W_old + 0.2 * torch.randn(3, 4, dtype=torch.float64, generator=gen)  # (a constant shift would not move π)
    off = T.gradient_terms(pol, W, W_old, r, beta1=1.0, beta2=0.5)
    assert off["eq10_plus_sign_error"] < 1e-12 < off["eq10_minus_sign_error"]
    assert off["pg_norm"] <= off["pg_bound_mad"] <= off["pg_bound"]
    assert off["normaliser_norm"] <= off["normaliser_bound"]


def test_exact_pg_equals_the_registered_dgro_loss_weighted_by_pi_old():
    """PG of Eq. 10 is −∇ of the project's dgro loss (β2 = 0) over all responses with advantages B·π_old(y)(r − r̄):
    the loss averages rows uniformly, the expectation weighs them by π_old."""
    pol = _policy(6)
    gen = torch.Generator().manual_seed(7)
    W_old = torch.randn(3, 4, dtype=torch.float64, generator=gen)
    W = W_old + 0.1 * torch.randn(3, 4, dtype=torch.float64, generator=gen)
    r = torch.randn(27, dtype=torch.float64, generator=gen)
    terms = T.gradient_terms(pol, W, W_old, r, beta1=0.7, beta2=0.0)
    p_old = pol.logp(W_old).exp()
    Wg = W.clone().requires_grad_(True)
    lp = pol.token_logprobs(Wg).gather(-1, pol.sequences.unsqueeze(-1)).squeeze(-1)  # (S, N) per-token
    adv = len(r) * p_old * (r - p_old @ r)
    loss, _ = loss_entry("dgro").fn(lp, None, torch.ones_like(lp), adv, beta1=0.7, beta2=0.0)
    (g,) = torch.autograd.grad(loss, Wg)
    assert float(g.norm()) == pytest.approx(terms["pg_norm"], rel=1e-10)


def test_bandit_gradient_of_the_loss_equals_its_closed_form():
    for b2 in (0.0, 0.1, 1.0):
        assert T.bandit_gradient_check(beta2=b2, seed=int(b2 * 10))["max_abs_difference"] < 1e-12


def test_verdicts_on_a_small_sweep():
    problems = T.random_reward_problems(60, seed=0)
    sweep = T.value_sweep(problems, np.logspace(-3, 3, 13))
    v = T.verdicts(violations=T.bound_violations(sweep), sweep=sweep,
                   lemma31=T.lemma31_check(problems, np.logspace(-3, 4, 8)), lemma32=T.lemma32_check(problems),
                   lemma_e2=T.lemma_e2_table(0.7, 0.9, np.logspace(1, 4, 7)),
                   thm34=T.theorem34_sweep(1, seed=0), bandit=T.bandit_gradient_check())
    verdict = dict(zip(v["statement"].str.split(":").str[0], v["verdict"]))
    assert verdict["Theorem E.1"] == "fails" and verdict["Eq. 10"] == "fails"
    assert verdict["Theorem 3.3 as the text reads it"] == "fails"
    assert verdict["Lemma 3.2"] == "holds only under its assumptions"
    assert verdict["Theorem 3.3"] == verdict["Lemma 3.1"] == verdict["Lemma E.2"] == "holds"
    assert (v.loc[v.verdict == "fails", "counterexample"].str.len() > 0).all()


def test_theory_kind_validates_and_an_unknown_kind_lists_the_valid_ones():
    for profile in ("ci", "cpu", "gpu", "paper"):
        assert load_config(find_params("dgro_theory", profile)).kind == "theory"
    with pytest.raises(ConfigError, match="kind: 'proof' is not one of train, eval, theory"):
        config_from_dict({"name": "x", "kind": "proof"})
