"""The rest of the loss family: PPO clip, DCPO, J1/J3, entropy baselines, TRL delegation, chunked log-probs.

References, not frozen numbers: explicit loops over (i, t), autograd on tiny softmax policies, the exact
expectation of a toy categorical policy for J3's importance-sampling estimator.
"""

import math

import pytest
import torch

from dgro_lib import losses as L
from dgro_lib.models.logprobs import chunked_logprobs, naive_logprobs

torch.set_num_threads(1)


def rand_batch(B=5, T=7, seed=0, off_policy=True):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(B, T, 11, generator=g)
    ids = torch.randint(0, 11, (B, T), generator=g)
    lp_all = torch.log_softmax(logits, -1)
    old = lp_all.gather(-1, ids[..., None]).squeeze(-1)
    new = old + (0.3 * torch.randn(B, T, generator=g) if off_policy else 0.0)
    mask = torch.ones(B, T)
    mask[0, 5:] = 0
    mask[3, 2:] = 0
    return new.clone().requires_grad_(True), old, mask, logits, ids


# ------------------------------------------------------------------ PPO clip


def ppo_ref(lp, old, A, eps, eps_high, dual):
    r = math.exp(lp - old)
    loss = max(-A * r, -A * min(max(r, 1 - eps), 1 + eps_high))
    if dual is not None and A < 0:
        loss = min(loss, -A * dual)
    return loss


@pytest.mark.parametrize("dual", [None, 3.0])
def test_ppo_clip_matches_loop(dual):
    lp, old, mask, *_ = rand_batch()
    with torch.no_grad():
        lp[1, :] = old[1, :] + 2.0  # far outside the clip range: exercises both clips and the dual clip
    A = torch.randn(5, 7, generator=torch.Generator().manual_seed(1)) * 2
    lp = lp.detach()
    out, flags = L.ppo_clip_per_token(lp, old, A, epsilon=0.2, epsilon_high=0.28, dual_clip=dual)
    for i in range(5):
        for t in range(7):
            ref = ppo_ref(lp[i, t].item(), old[i, t].item(), A[i, t].item(), 0.2, 0.28, dual)
            assert out[i, t].item() == pytest.approx(ref, rel=1e-5, abs=1e-6)
    if dual is not None:
        assert flags["dual"].any()
    with pytest.raises(ValueError, match="dual_clip"):
        L.ppo_clip_per_token(lp, old, A, dual_clip=0.5)


# ------------------------------------------------------------------ DCPO rules


def test_dcpo_temperature_and_alpha_rules():
    assert L.dcpo_temperature(0.5, entropy_base=0.5) == 1.2  # H <= H0 -> T_high
    assert L.dcpo_temperature(0.51, entropy_base=0.5) == 0.8
    # alpha' = min(|0.5-0.3|, 0.1) / 0.5 = 0.2 -> alpha = 0.2 / 1.2
    assert L.dcpo_alpha(0.3, 0.5, entropy_base=0.5) == pytest.approx(0.2 / 1.2)
    # below the cap: alpha' = 0.05 / 0.25 = 0.2
    assert L.dcpo_alpha(0.45, 0.25, entropy_base=0.5) == pytest.approx(0.2 / 1.2)
    assert L.dcpo_alpha(0.3, 0.0) == 0.0  # the guard: no correct sample


def dcpo_ref(lp, old, lpT_hi, lpT_lo, mask, adv, rewards, *, H0, alpha, combine, double_is, weight, thr, eps, dual):
    """Loop reference of the DCPO rule (steps 1-6 of :func:`dgro_lib.losses.dcpo_loss`) with token-mean aggregation
    (value only)."""
    B, T = lp.shape
    toks = [(i, t) for i in range(B) for t in range(T) if mask[i, t] > 0]
    H = sum(-old[i, t] for i, t in toks) / len(toks)
    temp_lp = lpT_hi if H <= H0 else lpT_lo
    R = [1.0 if rewards[i] > thr else 0.0 for i in range(B)]
    frac = sum(R) / B
    if alpha == "adaptive":
        a = 0.0 if frac == 0 else min(abs(H0 - H), 0.1) / frac
        a = a / (1 + a)
    else:
        a = alpha
    total = 0.0
    for i, t in toks:
        rho = math.exp(temp_lp[i, t] - old[i, t]) if (double_is and weight == "rho") else 1.0
        At = ((1 - a) * adv[i] if combine == "convex" else adv[i]) + a * R[i] * rho
        total += ppo_ref(lp[i, t], old[i, t], At, eps, eps, dual)
    return total / len(toks), a, H


@pytest.mark.parametrize("alpha,combine,double_is,weight", [
    ("adaptive", "convex", True, "rho"),
    ("adaptive", "convex", False, "rho"),
    (0.3, "additive", True, "rho"),
    (0.3, "additive", True, "one"),
    (0.0, "convex", True, "rho"),
])
@pytest.mark.parametrize("H0", [0.1, 5.0])  # picks T_low / T_high
def test_dcpo_loss_matches_loop_reference(alpha, combine, double_is, weight, H0):
    lp, old, mask, logits, ids = rand_batch(seed=3)
    lpT = {t: torch.log_softmax(logits / t, -1).gather(-1, ids[..., None]).squeeze(-1) for t in (1.2, 0.8)}
    adv = torch.randn(5, generator=torch.Generator().manual_seed(4))
    rewards = torch.tensor([3.0, -0.5, 3.0, -3.0, 0.0])
    loss, m = L.dcpo_loss(lp, old, mask, adv, rewards=rewards, temp_logps=lpT, entropy_base=H0, alpha=alpha,
                          combine=combine, double_is=double_is, weight=weight, dual_clip=3.0)
    ref, a, H = dcpo_ref(lp.detach().double(), old.double(), lpT[1.2].double(),
                         lpT[0.8].double(), mask, adv.double(), rewards, H0=H0, alpha=alpha, combine=combine,
                         double_is=double_is, weight=weight, thr=0.05, eps=0.2, dual=3.0)
    assert loss.item() == pytest.approx(float(ref), rel=1e-5)
    assert m["dcpo/alpha"] == pytest.approx(a)
    # float32 mean of n = 29 positive terms vs a float64 loop: worst case ~n u = 29 x 6e-8 ~ 2e-6 (rel=1e-6 was
    # below that bound; the reduction order depends on the CPU's SIMD width)
    assert m["dcpo/H"] == pytest.approx(float(H), rel=1e-5)
    assert m["dcpo/T"] == (1.2 if H <= H0 else 0.8)
    assert m["dcpo/frac_correct"] == pytest.approx(0.4)
    for key in ("dcpo/rho_mean", "dcpo/rho_max", "dcpo/rho_min", "dcpo/clip_frac_low", "dcpo/clip_frac_high",
                "dcpo/clip_frac_dual", "dcpo/log_ratio_mean", "dcpo/log_ratio_std"):
        assert math.isfinite(m[key])


def test_dcpo_on_policy_gradient_is_reinforce_with_mixed_advantage():
    """On-policy (ratio 1, no clip active) the gradient is -(1/N) sum_{i,t} Ã_it grad l_it: check with autograd."""
    lp, old, mask, logits, ids = rand_batch(seed=5, off_policy=False)
    lpT = {t: torch.log_softmax(logits / t, -1).gather(-1, ids[..., None]).squeeze(-1) for t in (1.2, 0.8)}
    adv = torch.randn(5, generator=torch.Generator().manual_seed(6))
    rewards = torch.tensor([1.0, 0.0, 1.0, 1.0, 0.0])
    loss, m = L.dcpo_loss(lp, old, mask, adv, rewards=rewards, temp_logps=lpT, entropy_base=5.0)
    loss.backward()
    a, T = m["dcpo/alpha"], m["dcpo/T"]
    rho = torch.exp(lpT[T] - old)
    At = (1 - a) * adv[:, None] + a * rewards[:, None] * rho
    expected = -(At * mask) / mask.sum()
    torch.testing.assert_close(lp.grad, expected, rtol=1e-5, atol=1e-7)


def test_dcpo_without_reinforce_is_token_mean_ppo():
    lp, old, mask, logits, ids = rand_batch(seed=7)
    lpT = {t: torch.zeros_like(old) for t in (1.2, 0.8)}
    adv = torch.randn(5)
    loss, _ = L.dcpo_loss(lp, old, mask, adv, rewards=torch.ones(5), temp_logps=lpT, alpha=0.0, dual_clip=None)
    per, _ = L.ppo_clip_per_token(lp, old, adv[:, None].expand(5, 7))
    torch.testing.assert_close(loss, (per * mask).sum() / mask.sum())


def test_dcpo_bad_options_name_themselves():
    lp, old, mask, *_ = rand_batch()
    kw = dict(rewards=torch.ones(5), temp_logps={1.2: old, 0.8: old})
    with pytest.raises(ValueError, match="combine"):
        L.dcpo_loss(lp, old, mask, torch.zeros(5), combine="mix", **kw)
    with pytest.raises(ValueError, match="alpha"):
        L.dcpo_loss(lp, old, mask, torch.zeros(5), alpha="auto", **kw)
    with pytest.raises(ValueError, match="rewards"):
        L.dcpo_loss(lp, old, mask, torch.zeros(5), rewards=torch.ones(4), temp_logps=kw["temp_logps"])
    with pytest.raises(KeyError, match="T=1.2"):
        L.dcpo_loss(lp, old, mask, torch.zeros(5), rewards=torch.ones(5), temp_logps={0.8: old}, entropy_base=99.0)
    with pytest.raises(TypeError, match="combine"):  # fixed by the preset: not one of its parameters
        L.loss_entry("j3").fn(lp, old, mask, torch.zeros(5), combine="convex", **kw)


def test_j3_estimator_is_unbiased_for_the_temperature_expectation():
    """E_{y~pi}[rho R grad log pi] = E_{y~pi^T}[R grad log pi]: J3's weighted regularizer on samples from pi_old
    estimates the pi_old^T expectation (Monte Carlo, tolerance from the estimator's own standard error)."""
    K, T, N = 6, 1.2, 20000
    z = torch.tensor([1.5, 0.2, -0.3, 0.8, -1.0, 0.0], requires_grad=True)
    R = torch.tensor([1.0, 0.0, 1.0, 0.0, 1.0, 0.0])
    piT = torch.softmax(z.detach() / T, -1)
    # exact: sum_y pi^T(y) R(y) grad log pi(y), grad log pi(y) = e_y - pi
    pi = torch.softmax(z.detach(), -1)
    exact = sum(piT[y] * R[y] * (torch.eye(K)[y] - pi) for y in range(K))
    y = torch.multinomial(pi, N, replacement=True, generator=torch.Generator().manual_seed(0))
    logp = torch.log_softmax(z, -1)[y][:, None]  # (N, 1): one-token "responses"
    old = logp.detach()
    lpT = {T: torch.log_softmax(z.detach() / T, -1)[y][:, None], 0.8: old}
    loss, m = L.loss_entry("j3").fn(logp, old, torch.ones(N, 1), torch.zeros(N), rewards=R[y], temp_logps=lpT,
                               alpha=1.0, entropy_base=99.0, dual_clip=None)
    assert m["dcpo/T"] == T
    (g,) = torch.autograd.grad(-loss, z)  # ascent direction = the estimator's mean
    per = (torch.exp(lpT[T] - old).squeeze(1) * R[y])[:, None] * (torch.eye(K)[y] - pi)  # per-sample terms
    se = per.std(0) / math.sqrt(N)
    assert torch.all((g - exact).abs() <= 5 * se + 1e-6), (g, exact, se)
    # and J1 (weight 1) estimates the pi_old expectation instead, which differs here
    exact_j1 = sum(pi[y_] * R[y_] * (torch.eye(K)[y_] - pi) for y_ in range(K))
    assert (exact - exact_j1).abs().max() > 10 * se.max()


@pytest.mark.parametrize("name", ["j2", "j4"])
def test_j2_j4_match_loop_reference(name):
    """J = token-mean PPO(on-policy rows, Â) + α · token-mean PPO(extra rows, R_i·w_{i,t}); w = 1 (J2) or
    π_old/π_old^T (J4) at the extra row's own temperature."""
    lp, old, mask, logits, ids = rand_batch(B=6, seed=21)
    flags = torch.tensor([0, 0, 0, 1, 1, 1.0])
    temps = torch.tensor([1.0, 1.0, 1.0, 1.2, 0.8, 1.2])
    rewards = torch.tensor([1.0, -1.0, 0.5, 1.0, 1.0, 0.0])
    adv = torch.tensor([0.7, -0.4, 0.2, 9.0, 9.0, 9.0])  # extra rows' Â must be ignored
    lpT = {T: torch.log_softmax(logits / T, -1).gather(-1, ids[..., None]).squeeze(-1) for T in (1.2, 0.8)}
    kw = {"rollout_temps": temps, "temp_logps": lpT} if name == "j4" else {}
    loss, m = L.loss_entry(name).fn(lp, old, mask, adv, rewards=rewards, rollout_flags=flags, alpha=0.3, **kw)
    parts = {0: [0.0, 0], 1: [0.0, 0]}
    for i in range(6):
        x = int(flags[i])
        for t in range(7):
            if mask[i, t] == 0:
                continue
            if x:
                w = 1.0 if name == "j2" else math.exp(old[i, t].item() - lpT[round(temps[i].item(), 1)][i, t].item())
                A = float(rewards[i] > 0.05) * w
            else:
                A = float(adv[i])
            parts[x][0] += ppo_ref(lp[i, t].item(), old[i, t].item(), A, 0.2, 0.2, 3.0)
            parts[x][1] += 1
    ref = parts[0][0] / parts[0][1] + 0.3 * parts[1][0] / parts[1][1]
    assert loss.item() == pytest.approx(ref, rel=1e-5)
    assert m[f"{name}/extra_rows"] == 3 and m[f"{name}/extra_frac_correct"] == pytest.approx(2 / 3)


def test_j4_estimator_is_unbiased_for_the_on_policy_expectation():
    """Samples from pi^T weighted by 1/rho = pi/pi^T estimate E_{y~pi}[R grad log pi] (J4), while J2's weight 1
    estimates the pi^T expectation (Monte Carlo, tolerance from the estimator's own standard error)."""
    K, T, N = 6, 0.8, 20000
    z = torch.tensor([1.5, 0.2, -0.3, 0.8, -1.0, 0.0], requires_grad=True)
    R = torch.tensor([1.0, 0.0, 1.0, 0.0, 1.0, 0.0])
    pi, piT = torch.softmax(z.detach(), -1), torch.softmax(z.detach() / T, -1)
    exact = sum(pi[y] * R[y] * (torch.eye(K)[y] - pi) for y in range(K))
    y = torch.multinomial(piT, N, replacement=True, generator=torch.Generator().manual_seed(1))
    logp = torch.log_softmax(z, -1)[y][:, None]
    old = logp.detach()
    lpT = {T: torch.log_softmax(z.detach() / T, -1)[y][:, None], 1.2: old}
    ones = torch.ones(N)
    loss, _ = L.loss_entry("j4").fn(logp, old, torch.ones(N, 1), torch.zeros(N), rewards=R[y], rollout_flags=ones,
                               rollout_temps=ones * T, temp_logps=lpT, alpha=1.0, dual_clip=None)
    (g,) = torch.autograd.grad(-loss, z, retain_graph=True)
    per = (torch.exp(old - lpT[T]).squeeze(1) * R[y])[:, None] * (torch.eye(K)[y] - pi)
    se = per.std(0) / math.sqrt(N)
    assert torch.all((g - exact).abs() <= 5 * se + 1e-6), (g, exact, se)
    loss2, _ = L.loss_entry("j2").fn(logp, old, torch.ones(N, 1), torch.zeros(N), rewards=R[y], rollout_flags=ones,
                                alpha=1.0, dual_clip=None)
    (g2,) = torch.autograd.grad(-loss2, z)
    exact_T = sum(piT[k] * R[k] * (torch.eye(K)[k] - pi) for k in range(K))
    se2 = (R[y][:, None] * (torch.eye(K)[y] - pi)).std(0) / math.sqrt(N)
    assert torch.all((g2 - exact_T).abs() <= 5 * se2 + 1e-6)


def test_aepo_loss_is_the_clipped_surrogate_on_the_substituted_batch():
    lp, old, mask, _, _ = rand_batch(seed=4)
    adv = torch.tensor([1.0, 1.0, -0.3, 0.4, -2.0])
    loss, m = L.aepo_loss(lp, old, mask, adv, rollout_flags=torch.tensor([1.0, 1.0, 0, 0, 0]))
    tot = sum(ppo_ref(lp[i, t].item(), old[i, t].item(), float(adv[i]), 0.2, 0.2, 3.0)
              for i in range(5) for t in range(7) if mask[i, t] > 0)
    assert loss.item() == pytest.approx(tot / mask.sum().item(), rel=1e-5)
    assert m["aepo/frac_substituted"] == pytest.approx(0.4)


# ------------------------------------------------------------------ entropy baselines


def test_entropy_adv_matches_loop_and_never_flips_sign():
    lp, old, mask, logits, ids = rand_batch(seed=9)
    ent = -(torch.softmax(logits, -1) * torch.log_softmax(logits, -1)).sum(-1)
    adv = torch.tensor([1.0, -0.5, 0.0, -2.0, 0.3])
    loss, m = L.entropy_adv_loss(lp, old, mask, adv, entropies=ent, alpha=0.4, kappa=2.0)
    tot, n = 0.0, 0
    for i in range(5):
        for t in range(7):
            if mask[i, t] > 0:
                At = float(adv[i]) + min(0.4 * float(ent[i, t]), abs(float(adv[i])) / 2.0)
                if adv[i] < 0:
                    assert At <= 0
                tot += ppo_ref(lp[i, t].item(), old[i, t].item(), At, 0.2, 0.2, None)
                n += 1
    assert loss.item() == pytest.approx(tot / n, rel=1e-5)
    assert 0 < m["entropy_adv/cap_frac"] <= 1


def test_entropy_reg_gradient_on_a_softmax_policy():
    """loss = PPO(token-mean) - c * mean H: its gradient w.r.t. the logits equals autograd of the hand-written sum."""
    g = torch.Generator().manual_seed(11)
    logits = torch.randn(3, 4, 5, generator=g, requires_grad=True)
    ids = torch.randint(0, 5, (3, 4), generator=g)
    mask = torch.ones(3, 4)
    mask[2, 3] = 0
    logp_all = torch.log_softmax(logits, -1)
    lp = logp_all.gather(-1, ids[..., None]).squeeze(-1)
    ent = -(logp_all.exp() * logp_all).sum(-1)
    adv = torch.tensor([0.5, -1.0, 2.0])
    pg = (-(adv[:, None] * torch.exp(lp - lp.detach())) * mask).sum() / mask.sum()
    for source, h in (("full", ent), ("nll", -lp)):  # nll: the authors' estimator, -log pi of the sampled tokens
        loss, _ = L.entropy_reg_loss(lp, lp.detach(), mask, adv, entropies=ent, coef=0.05, entropy_source=source)
        (g1,) = torch.autograd.grad(loss, logits, retain_graph=True)
        ref = pg - 0.05 * (h * mask).sum() / mask.sum()
        (g2,) = torch.autograd.grad(ref, logits, retain_graph=True)
        torch.testing.assert_close(g1, g2)


# ------------------------------------------------------------------ registry


def test_registry_names_and_trl_delegates():
    names = set(L.list_losses())
    assert {"grpo", "dapo", "dr_grpo", "bnpo", "dgro", "kimi", "dro", "online_dpo", "dcpo", "aepo", "j1", "j2", "j3",
            "j4", "entropy_reg", "entropy_adv"} <= names
    for lt in L.TRL_LOSSES:
        assert L.loss_entry(lt).trl_loss_type == lt
        with pytest.raises(RuntimeError, match="GRPOTrainer"):
            L.loss_entry(lt).fn(None, None, None, None)
    assert L.loss_entry("dgro").trl_loss_type is None
    assert L.loss_entry("dcpo").temperatures({"t_high": 1.5}) == (1.5, 0.8)
    assert L.loss_entry("dgro").temperatures() == ()
    assert "temp_logps" in L.loss_entry("j3").requires and "temp_logps" not in L.loss_entry("j1").requires


# ------------------------------------------------------------------ chunked log-probs


@pytest.mark.parametrize("chunk", [1, 3, 1000])
def test_chunked_logprobs_match_full_logits(chunk):
    g = torch.Generator().manual_seed(12)
    hidden, weight, bias = torch.randn(2, 9, 8, generator=g), torch.randn(50, 8, generator=g), torch.randn(50, generator=g)
    labels = torch.randint(0, 50, (2, 9), generator=g)
    out = chunked_logprobs(hidden, weight, labels, temperatures=(0.8, 1.0, 1.2), bias=bias, chunk_size=chunk)
    for t in (0.8, 1.0, 1.2):
        ref_lp, ref_h = naive_logprobs(hidden, weight, labels, temperature=t, bias=bias)
        torch.testing.assert_close(out[t][0], ref_lp, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(out[t][1], ref_h, rtol=1e-5, atol=1e-5)


def test_chunked_logprobs_errors_name_the_argument():
    h, w, y = torch.zeros(2, 3, 4), torch.zeros(5, 4), torch.zeros(2, 3, dtype=torch.long)
    with pytest.raises(ValueError, match="temperatures"):
        chunked_logprobs(h, w, y, temperatures=(0.0,))
    with pytest.raises(ValueError, match="weight"):
        chunked_logprobs(h, torch.zeros(5, 3), y, temperatures=(1.0,))
    with pytest.raises(ValueError, match="chunk_size"):
        chunked_logprobs(h, w, y, temperatures=(1.0,), chunk_size=0)


# ------------------------------------------------------------------ online DPO


def test_online_dpo_matches_pairwise_loop_and_skips_ties():
    lp, old, mask, *_ = rand_batch(B=6, seed=13)
    ref = old + 0.1 * torch.randn(6, 7, generator=torch.Generator().manual_seed(14))
    rewards = torch.tensor([1.0, 3.0, -1.0, 2.0, 2.0, 2.0])  # group 0: rows 0-2; group 1: rows 3-5 (all tied)
    gids = torch.tensor([0, 0, 0, 1, 1, 1])
    loss, m = L.loss_entry("online_dpo").fn(lp, old, mask, torch.zeros(6), rewards=rewards, group_ids=gids, ref_logps=ref,
                                       beta=0.5)
    seq = lambda i: float(((lp[i].detach() - ref[i]) * mask[i]).sum())  # noqa: E731
    ref_loss = -math.log(1 / (1 + math.exp(-0.5 * (seq(1) - seq(2)))))
    assert loss.item() == pytest.approx(ref_loss, rel=1e-5)
    assert m["online_dpo/frac_groups_with_pair"] == 0.5
    loss.backward()
    assert lp.grad[3:].abs().sum() == 0 and lp.grad[0].abs().sum() == 0 and lp.grad[1].abs().sum() > 0
    tied, m2 = L.loss_entry("online_dpo").fn(lp, old, mask, torch.zeros(6), rewards=torch.ones(6), group_ids=gids,
                                        ref_logps=ref)
    assert tied.item() == 0 and m2["online_dpo/frac_groups_with_pair"] == 0


def test_chunked_logprobs_softcap_matches_capped_logits():
    g = torch.Generator().manual_seed(15)
    hidden, weight = torch.randn(3, 6, 8, generator=g) * 3, torch.randn(40, 8, generator=g)
    labels = torch.randint(0, 40, (3, 6), generator=g)
    out = chunked_logprobs(hidden, weight, labels, temperatures=(0.7,), chunk_size=4, softcap=5.0)
    logits = torch.tanh((hidden @ weight.T) / 5.0) * 5.0 / 0.7
    ref = torch.log_softmax(logits, -1).gather(-1, labels[..., None]).squeeze(-1)
    torch.testing.assert_close(out[0.7][0], ref, rtol=1e-5, atol=1e-5)


# ------------------------------------------------------------------ statistics of the whole rollout batch


def test_dcpo_statistics_do_not_depend_on_the_micro_batch_split():
    """The authors compute H, T, the correct fraction and alpha once per rollout batch on the driver. With those
    statistics passed in, the micro-batch split changes neither them nor the gradient: 4 micro-batches of equal
    token count (token-mean per micro-batch, averaged, as gradient accumulation does) give the gradient of one
    call on the whole batch. Computed per micro-batch instead (a standalone call), alpha differs."""
    g = torch.Generator().manual_seed(21)
    B, T = 16, 6
    logits = torch.randn(B, T, 9, generator=g, dtype=torch.float64)
    ids = torch.randint(0, 9, (B, T), generator=g)
    lp_all = torch.log_softmax(logits, -1)
    old = lp_all.gather(-1, ids[..., None]).squeeze(-1)
    lpT = {t: torch.log_softmax(logits / t, -1).gather(-1, ids[..., None]).squeeze(-1) for t in (1.2, 0.8)}
    mask = torch.ones(B, T, dtype=torch.float64)
    rewards = torch.tensor([1.0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0, 1], dtype=torch.float64)
    adv = torch.randn(B, generator=g, dtype=torch.float64)
    H = 0.43  # the previous step's entropy (the authors' lag)
    stats = L.dcpo_batch_stats(rewards, H, entropy_base=0.5)
    assert stats["frac_correct"] == pytest.approx(5 / 16) and stats["T"] == 1.2
    assert stats["alpha"] == pytest.approx(L.dcpo_alpha(H, 5 / 16, entropy_base=0.5))

    def grad(parts, batch_stats):
        lp = old.clone().requires_grad_(True)
        total, alphas = 0.0, []
        for rows in parts:
            loss, m = L.dcpo_loss(lp[rows], old[rows], mask[rows], adv[rows], rewards=rewards[rows],
                                  temp_logps={t: v[rows] for t, v in lpT.items()}, batch_stats=batch_stats)
            total = total + loss / len(parts)
            alphas.append(m["dcpo/alpha"])
        (gr,) = torch.autograd.grad(total, lp)
        return gr, alphas

    whole, a1 = grad([slice(0, B)], stats)
    split, a4 = grad([slice(k, k + 4) for k in range(0, B, 4)], stats)
    assert a1 == a4[:1] and len(set(a4)) == 1
    torch.testing.assert_close(split, whole, rtol=1e-12, atol=1e-15)
    # what a micro-batch sees on its own: alpha varies, so does the gradient
    local, a_local = grad([slice(k, k + 4) for k in range(0, B, 4)], None)
    assert len(set(a_local)) > 1
    assert float((local - whole).norm()) > 1e-3 * float(whole.norm())


def test_dcpo_with_batch_stats_uses_them_and_names_what_is_missing():
    lp, old, mask, logits, ids = rand_batch(seed=8)
    lpT = {t: torch.log_softmax(logits / t, -1).gather(-1, ids[..., None]).squeeze(-1) for t in (1.2, 0.8)}
    kw = dict(rewards=torch.tensor([1.0, 0, 0, 1, 0]), temp_logps=lpT)
    _, m = L.dcpo_loss(lp, old, mask, torch.zeros(5), **kw,
                       batch_stats={"H": 0.9, "T": 0.8, "frac_correct": 0.25, "alpha": 0.07})
    assert (m["dcpo/H"], m["dcpo/T"], m["dcpo/frac_correct"], m["dcpo/alpha"]) == (0.9, 0.8, 0.25, 0.07)
    with pytest.raises(KeyError, match="alpha"):
        L.dcpo_loss(lp, old, mask, torch.zeros(5), **kw, batch_stats={"H": 0.9, "T": 0.8, "frac_correct": 0.25})
    spec = L.loss_entry("dcpo").batch_statistics({"entropy_base": 0.25})
    assert (spec.entropy_source, spec.entropy_from) == ("nll", "previous_step")  # the authors' lag is the default
    assert spec.compute(torch.tensor([1.0, 0.0, 0.0, 0.0]), 0.0)["T"] == 1.2  # H = 0 before the first step
    assert L.loss_entry("j1").batch_statistics({}).compute(torch.ones(4), 0.3)["alpha"] == 0.1  # J presets: fixed alpha
    assert L.loss_entry("grpo_verl").batch_statistics({}) is None
    with pytest.raises(ValueError, match="entropy_from"):
        L.loss_entry("dcpo").batch_statistics({"entropy_from": "tomorrow"})


# ------------------------------------------------------------------ GRPO as the DCPO authors update the actor


def test_grpo_verl_is_the_authors_shared_actor_update():
    """Token-mean PPO clip with dual clip 3 (loop reference); DCPO with alpha = 0 is exactly this loss, and so are
    Entropy-Reg with coef 0 and Entropy-Adv with alpha 0: the baselines differ from DCPO only in what the paper varies."""
    lp, old, mask, logits, ids = rand_batch(seed=9)
    with torch.no_grad():
        lp[2] = old[2] + 1.5  # ratio e^1.5 > 3 with a negative advantage: the dual clip binds
    adv = torch.tensor([0.7, -1.2, -2.0, 0.4, 1.1])
    loss, m = L.grpo_verl_loss(lp, old, mask, adv)
    ref = sum(ppo_ref(lp[i, t].item(), old[i, t].item(), adv[i].item(), 0.2, 0.2, 3.0)
              for i in range(5) for t in range(7) if mask[i, t] > 0) / float(mask.sum())
    # float32 token mean of n = 29 clipped terms vs a float64 loop: worst case ~n u ~ 2e-6 relative (u = 6e-8)
    # plus float32 exp; rel=1e-6 was below that bound, 1e-5 as for the DCPO loss
    assert loss.item() == pytest.approx(ref, rel=1e-5)
    assert m["grpo_verl/clip_frac_dual"] > 0
    lpT = {t: torch.log_softmax(logits / t, -1).gather(-1, ids[..., None]).squeeze(-1) for t in (1.2, 0.8)}
    ent = torch.rand(5, 7, generator=torch.Generator().manual_seed(2))
    same = [L.dcpo_loss(lp, old, mask, adv, rewards=torch.ones(5), temp_logps=lpT, alpha=0.0)[0],
            L.entropy_reg_loss(lp, old, mask, adv, entropies=ent, coef=0.0)[0],
            L.entropy_adv_loss(lp, old, mask, adv, entropies=ent, alpha=0.0)[0]]
    for other in same:
        torch.testing.assert_close(other, loss)
