"""Tests for dgro_lib.losses: vectorised code against loop / independent references.

Equation numbers refer to the DGRO paper (Eq. 4-6 the loss and its gradient, Eq. 13-15
the DRO / Kimi k1.5 / MSE rewritings of Appendix A).
"""

import math
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest
import torch

from dgro_lib import losses as L
from dgro_lib.losses import (
    aggregate,
    AGGREGATIONS,
    compute_advantages,
    dgro_loss,
    dro_loss,
    group_mean_baseline,
    group_stats,
    kimi_loss,
    list_losses,
    loss_entry,
    register_loss,
    soft_value_baseline,
)

torch.set_num_threads(1)
DT = torch.float64
LEVELS = ("sequence", "token")


# ---------------------------------------------------------------------------
# fixtures and loop references
# ---------------------------------------------------------------------------


def make_mask(B, T, gen):
    """Random right-padded mask; row 0 full length, row 1 a single token."""
    lengths = torch.randint(1, T + 1, (B,), generator=gen)
    lengths[0] = T
    lengths[1] = 1
    return (torch.arange(T)[None, :] < lengths[:, None]).to(DT)


def make_batch(B=6, T=7, seed=0, off_policy=True):
    gen = torch.Generator().manual_seed(seed)
    logps = -torch.rand(B, T, generator=gen, dtype=DT) * 3
    old = logps + 0.3 * torch.randn(B, T, generator=gen, dtype=DT) if off_policy else logps.clone()
    mask = make_mask(B, T, gen)
    adv = torch.randn(B, generator=gen, dtype=DT)
    return logps, old, mask, adv


def tiny_policy(B, T, V, seed):
    """A softmax 'policy': logits are the parameters; returns (logits leaf, tokens)."""
    gen = torch.Generator().manual_seed(seed)
    logits = torch.randn(B, T, V, generator=gen, dtype=DT).requires_grad_(True)
    tokens = torch.randint(0, V, (B, T), generator=gen)
    return logits, tokens


def token_logps(logits, tokens):
    return torch.log_softmax(logits, dim=-1).gather(-1, tokens[..., None]).squeeze(-1)


def ref_aggregate(x, mask, mode, norm_len=None):
    """Double loop over (i, t) of each aggregation mode's definition."""
    B, T = len(x), len(x[0])
    if mode == "token-mean":
        num = den = 0.0
        for i in range(B):
            for t in range(T):
                num += float(mask[i][t]) * float(x[i][t])
                den += float(mask[i][t])
        return num / den if den else 0.0
    total = 0.0
    for i in range(B):
        s = n = 0.0
        for t in range(T):
            s += float(mask[i][t]) * float(x[i][t])
            n += float(mask[i][t])
        if mode == "seq-mean-token-mean":
            total += s / n if n else 0.0
        elif mode == "seq-mean-token-sum":
            total += s
        elif mode == "seq-mean-token-sum-norm":
            total += s / (T if norm_len is None else norm_len)
        else:
            raise AssertionError(mode)
    return total / B


def ref_seq(lp, mask, i):
    return sum(float(mask[i][t]) * float(lp[i][t]) for t in range(len(lp[i])))


def ref_dgro_eq6(logps, old, mask, adv, b1, b2, level):
    """Eq. 4/6 written directly: -(1/B) Σ_i [β1 A_i L_i − β2 penalty_i]."""
    B, T = logps.shape
    total = 0.0
    for i in range(B):
        Li, Lo = ref_seq(logps, mask, i), ref_seq(old, mask, i)
        if level == "sequence":
            pen = (Li - Lo) ** 2
        else:
            pen = sum(float(mask[i][t]) * (float(logps[i][t]) - float(old[i][t])) ** 2 for t in range(T))
        total += b1 * float(adv[i]) * Li - b2 * pen
    return -total / B


def ref_dgro_per_token(logps, old, mask, adv, b1, b2, level, mode, norm_len=None):
    """Loop form of the documented per-token definition, then ref_aggregate."""
    B, T = logps.shape
    x = [[0.0] * T for _ in range(B)]
    for i in range(B):
        n = sum(float(mask[i][t]) for t in range(T))
        Li, Lo = ref_seq(logps, mask, i), ref_seq(old, mask, i)
        for t in range(T):
            if not mask[i][t]:
                continue
            lp, lo = float(logps[i][t]), float(old[i][t])
            q = (lp - lo) ** 2 if level == "token" else (Li - Lo) ** 2 / n
            x[i][t] = b1 * float(adv[i]) * lp - b2 * q
    return -ref_aggregate(x, mask.tolist(), mode, norm_len)


# ---------------------------------------------------------------------------
# 1. values against loop references
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("mode", AGGREGATIONS)
def test_aggregate_matches_loop(mode):
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(5, 6, generator=gen, dtype=DT)
    mask = make_mask(5, 6, gen)
    x_pad = x.clone()
    x_pad[mask == 0] = 1e6  # padding must be ignored
    got = aggregate(x_pad, mask, mode)
    assert got.item() == pytest.approx(ref_aggregate(x.tolist(), mask.tolist(), mode), rel=1e-12, abs=1e-12)
    if mode == "seq-mean-token-sum-norm":
        got = aggregate(x, mask, mode, norm_len=11)
        assert got.item() == pytest.approx(ref_aggregate(x.tolist(), mask.tolist(), mode, 11), rel=1e-12)


def test_aggregate_unknown_mode_lists_modes():
    with pytest.raises(ValueError) as e:
        aggregate(torch.zeros(2, 3), torch.ones(2, 3), "mean-of-everything")
    for m in AGGREGATIONS:
        assert m in str(e.value)


def test_aggregate_all_padding_is_zero():
    x = torch.randn(3, 4, dtype=DT)
    for mode in AGGREGATIONS:
        assert aggregate(x, torch.zeros(3, 4, dtype=DT), mode).item() == 0.0


@pytest.mark.parametrize("level", LEVELS)
def test_dgro_default_is_eq6(level):
    logps, old, mask, adv = make_batch(seed=2)
    for b1, b2 in [(1.0, 0.1), (0.7, 2.5), (1.0, 0.0)]:
        loss, metrics = dgro_loss(logps, old, mask, adv, beta1=b1, beta2=b2, ratio_level=level)
        assert loss.item() == pytest.approx(ref_dgro_eq6(logps, old, mask, adv, b1, b2, level), rel=1e-12)
        assert metrics["dgro/penalty_term"] - metrics["dgro/pg_term"] == pytest.approx(loss.item(), rel=1e-12)
        B = logps.shape[0]
        seqs = [ref_seq(logps, mask, i) for i in range(B)]
        ratios = [seqs[i] - ref_seq(old, mask, i) for i in range(B)]
        assert metrics["dgro/pg_term"] == pytest.approx(sum(b1 * float(adv[i]) * seqs[i] for i in range(B)) / B)
        assert metrics["dgro/seq_logp_mean"] == pytest.approx(sum(seqs) / B)
        mu = sum(ratios) / B
        assert metrics["dgro/log_ratio_mean"] == pytest.approx(mu)
        assert metrics["dgro/log_ratio_std"] == pytest.approx(math.sqrt(sum((r - mu) ** 2 for r in ratios) / B))
        assert all(isinstance(v, float) for v in metrics.values())


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("mode", AGGREGATIONS)
def test_dgro_all_aggregations_match_loop(level, mode):
    logps, old, mask, adv = make_batch(seed=3)
    loss, _ = dgro_loss(logps, old, mask, adv, beta1=0.8, beta2=0.3, ratio_level=level, aggregation=mode)
    ref = ref_dgro_per_token(logps, old, mask, adv, 0.8, 0.3, level, mode)
    assert loss.item() == pytest.approx(ref, rel=1e-12)


def test_dgro_token_advantages_and_padding_robustness():
    logps, old, mask, adv = make_batch(seed=4)
    base, _ = dgro_loss(logps, old, mask, adv)
    tok, _ = dgro_loss(logps, old, mask, adv[:, None].expand_as(logps).clone())
    assert tok.item() == pytest.approx(base.item(), rel=1e-12)
    # -inf (or garbage) in the padding changes nothing and stays finite through backward
    lp = logps.clone()
    lp[mask == 0] = -math.inf
    lp.requires_grad_(True)
    loss, _ = dgro_loss(lp, old.masked_fill(mask == 0, math.nan), mask, adv, ratio_level="token")
    loss.backward()
    ref, _ = dgro_loss(logps, old, mask, adv, ratio_level="token")
    assert loss.item() == pytest.approx(ref.item(), rel=1e-12)
    assert torch.isfinite(lp.grad).all() and (lp.grad[mask == 0] == 0).all()


def test_dgro_bad_arguments():
    logps, old, mask, adv = make_batch()
    with pytest.raises(ValueError, match="ratio_level"):
        dgro_loss(logps, old, mask, adv, ratio_level="chunk")
    with pytest.raises(ValueError, match="token-mean"):
        dgro_loss(logps, old, mask, adv, aggregation="sum")
    with pytest.raises(ValueError, match="advantages"):
        dgro_loss(logps, old, mask, adv[:-1])


def test_half_precision_is_upcast():
    logps, old, mask, adv = make_batch()
    loss, _ = dgro_loss(logps.bfloat16(), old.bfloat16(), mask.bfloat16(), adv.bfloat16())
    assert loss.dtype == torch.float32


# ---------------------------------------------------------------------------
# 2. gradients against Eq. 5 and the analytic per-token coefficients
# ---------------------------------------------------------------------------


def eq4_direct(logps, old, mask, adv, b1, b2, level):
    """Eq. 4 with the sample mean, written directly in torch (no shared code)."""
    Ls = (logps * mask).sum(1)
    Lo = (old * mask).sum(1)
    if level == "sequence":
        pen = (Ls - Lo) ** 2
    else:
        pen = (((logps - old) * mask) ** 2).sum(1)
    return -(b1 * adv * Ls - b2 * pen).mean()


@pytest.mark.parametrize("level", LEVELS)
def test_gradient_matches_eq5(level):
    B, T, V = 6, 5, 4
    b1, b2 = 0.9, 0.4
    logits, tokens = tiny_policy(B, T, V, seed=5)
    with torch.no_grad():
        noise = torch.randn(B, T, V, dtype=DT, generator=torch.Generator().manual_seed(9))
        old = token_logps(logits + 0.5 * noise, tokens)
    gen = torch.Generator().manual_seed(6)
    mask = make_mask(B, T, gen)
    adv = torch.randn(B, generator=gen, dtype=DT)

    lib, _ = dgro_loss(token_logps(logits, tokens), old, mask, adv, beta1=b1, beta2=b2, ratio_level=level)
    (g_lib,) = torch.autograd.grad(lib, logits)
    (g_eq4,) = torch.autograd.grad(eq4_direct(token_logps(logits, tokens), old, mask, adv, b1, b2, level), logits)

    # analytic: ∂loss/∂ℓ_it = -(1/B) m_it [β1 A_i − 2β2 d], d = L_i − L_i^old or ℓ_it − ℓ^old_it;
    # ∂ℓ_it/∂logits_it = onehot(y_it) − softmax(logits_it)
    with torch.no_grad():
        lp = token_logps(logits, tokens)
        if level == "sequence":
            d = ((lp - old) * mask).sum(1, keepdim=True)
        else:
            d = lp - old
        coef = -(mask / B) * (b1 * adv[:, None] - 2 * b2 * d)
        onehot = torch.nn.functional.one_hot(tokens, V).to(DT)
        g_analytic = coef[..., None] * (onehot - torch.softmax(logits, -1))
    torch.testing.assert_close(g_lib, g_eq4, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(g_lib, g_analytic, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("mode", AGGREGATIONS)
def test_grad_ratio_metric_matches_autograd(level, mode):
    logps, old, mask, adv = make_batch(seed=7)
    b1, b2 = 1.3, 0.2

    def grad(beta1, beta2):
        lp = logps.clone().requires_grad_(True)
        loss, _ = dgro_loss(lp, old, mask, adv, beta1=beta1, beta2=beta2, ratio_level=level, aggregation=mode)
        return torch.autograd.grad(loss, lp)[0]

    n1, n2 = grad(b1, 0.0).norm().item(), grad(0.0, b2).norm().item()
    _, metrics = dgro_loss(logps, old, mask, adv, beta1=b1, beta2=b2, ratio_level=level, aggregation=mode)
    assert metrics["dgro/grad_norm_b1"] == pytest.approx(n1, rel=1e-10)
    assert metrics["dgro/grad_norm_b2"] == pytest.approx(n2, rel=1e-10)
    assert metrics["dgro/grad_ratio_b2_b1"] == pytest.approx(n2 / n1, rel=1e-10)


def test_grad_ratio_degenerate_cases():
    logps, old, mask, _ = make_batch()
    zero = torch.zeros(logps.shape[0], dtype=DT)
    assert dgro_loss(logps, logps, mask, zero)[1]["dgro/grad_ratio_b2_b1"] == 0.0
    assert dgro_loss(logps, old, mask, zero)[1]["dgro/grad_ratio_b2_b1"] == math.inf


# ---------------------------------------------------------------------------
# 3. MSE form (Appendix A, Eq. 15)
# ---------------------------------------------------------------------------


def test_mse_form_eq15():
    """DGRO(θ) − (β1²/(4β2))·mean_i[(A_i − (2β2/β1) d_i)²] = mean_i[−β1 A_i L_i^old − β1² A_i²/(4β2)],
    which is θ-free (d_i = L_i − L_i^old); gradients of both forms are equal."""
    B, T, V = 8, 5, 3
    b1, b2 = 0.8, 0.15
    gen = torch.Generator().manual_seed(11)
    tokens = torch.randint(0, V, (B, T), generator=gen)
    mask = make_mask(B, T, gen)
    adv = torch.randn(B, generator=gen, dtype=DT)
    old = token_logps(torch.randn(B, T, V, generator=gen, dtype=DT), tokens)

    def both(logits):
        lp = token_logps(logits, tokens)
        d = ((lp - old) * mask).sum(1)
        mse = (b1**2 / (4 * b2)) * ((adv - (2 * b2 / b1) * d) ** 2).mean()
        return dgro_loss(lp, old, mask, adv, beta1=b1, beta2=b2)[0], mse

    diffs, grads = [], []
    for _ in range(2):
        logits = torch.randn(B, T, V, generator=gen, dtype=DT).requires_grad_(True)
        dgro, mse = both(logits)
        diffs.append((dgro - mse).item())
        grads.append([torch.autograd.grad(f, logits, retain_graph=True)[0] for f in (dgro, mse)])
    assert diffs[0] == pytest.approx(diffs[1], rel=1e-10, abs=1e-12)
    const = (-b1 * adv * (old * mask).sum(1) - b1**2 * adv**2 / (4 * b2)).mean().item()
    assert diffs[0] == pytest.approx(const, rel=1e-10)
    for g_dgro, g_mse in grads:
        torch.testing.assert_close(g_dgro, g_mse, rtol=1e-10, atol=1e-12)


# ---------------------------------------------------------------------------
# 4. the β2 term is inert on-policy
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("level", LEVELS)
def test_beta2_inert_on_policy_active_off_policy(level):
    B, T, V = 6, 5, 4
    logits, tokens = tiny_policy(B, T, V, seed=12)
    gen = torch.Generator().manual_seed(13)
    mask = make_mask(B, T, gen)
    adv = torch.randn(B, generator=gen, dtype=DT)
    with torch.no_grad():
        stale = token_logps(logits + 0.3 * torch.randn(B, T, V, generator=gen, dtype=DT), tokens)

    def grad(beta2, old):
        lp = token_logps(logits, tokens)
        o = lp.detach() if old == "current" else old
        return torch.autograd.grad(dgro_loss(lp, o, mask, adv, beta2=beta2, ratio_level=level)[0], logits)[0]

    torch.testing.assert_close(grad(0.7, "current"), grad(0.0, "current"), rtol=0, atol=0)
    torch.testing.assert_close(grad(0.7, None), grad(0.0, None), rtol=0, atol=0)  # None = on-policy
    diff = (grad(0.7, stale) - grad(0.0, stale)).norm()
    assert diff > 1e-3 * grad(0.0, stale).norm()


# ---------------------------------------------------------------------------
# 5. β2 = 0 is REINFORCE with the group-mean baseline
# ---------------------------------------------------------------------------


def test_beta2_zero_is_reinforce_with_group_mean():
    G, n_groups, T, V = 4, 3, 5, 3
    B = G * n_groups
    logits, tokens = tiny_policy(B, T, V, seed=14)
    gen = torch.Generator().manual_seed(15)
    mask = make_mask(B, T, gen)
    rewards = torch.randint(-3, 4, (B,), generator=gen).to(DT)
    old = token_logps(logits, tokens).detach() + 0.2

    lp = token_logps(logits, tokens)
    loss, _ = dgro_loss(lp, old, mask, compute_advantages(rewards, G), beta1=1.0, beta2=0.0)
    (g,) = torch.autograd.grad(loss, logits)

    lp = token_logps(logits, tokens)
    ref = 0.0
    for i in range(B):
        grp = range(G * (i // G), G * (i // G) + G)
        rbar = sum(float(rewards[j]) for j in grp) / G
        ref = ref - (float(rewards[i]) - rbar) * (lp[i] * mask[i]).sum()
    ref = ref / B
    (g_ref,) = torch.autograd.grad(ref, logits)
    assert loss.item() == pytest.approx(ref.item(), rel=1e-12)
    torch.testing.assert_close(g, g_ref, rtol=1e-10, atol=1e-12)


# ---------------------------------------------------------------------------
# 6. Kimi k1.5 and DRO presets (Table 1, Eq. 13-14)
# ---------------------------------------------------------------------------


def test_kimi_preset_and_its_own_squared_loss():
    """Kimi k1.5 = DGRO(β1=1, β2=τ/2). With β1=1, β2=τ/2 Eq. 15 gives
    β1²/(4β2) = 1/(2τ) and 2β2/β1 = τ, so
        DGRO-kimi(θ) = (1/(2τ))·mean_i[(r_i − r̄ − τ(L_i − L_i^old))²] + c,
    c = −mean_i[A_i L_i^old + A_i²/(2τ)] independent of θ (Kimi k1.5's Eq. 3 with τ log Z ≈ r̄)."""
    tau, G, T, V = 0.3, 4, 5, 3
    B = 2 * G
    gen = torch.Generator().manual_seed(16)
    tokens = torch.randint(0, V, (B, T), generator=gen)
    mask = make_mask(B, T, gen)
    rewards = torch.randint(-1, 2, (B,), generator=gen).to(DT)
    adv = compute_advantages(rewards, G)
    old = token_logps(torch.randn(B, T, V, generator=gen, dtype=DT), tokens)

    diffs = []
    for _ in range(2):
        logits = torch.randn(B, T, V, generator=gen, dtype=DT).requires_grad_(True)
        lp = token_logps(logits, tokens)
        kimi, km = kimi_loss(lp, old, mask, adv, tau=tau)
        dgro, dm = dgro_loss(lp, old, mask, adv, beta1=1.0, beta2=tau / 2)
        assert kimi.item() == dgro.item() and km == dm
        rbar = group_mean_baseline(rewards, G)
        own = (1 / (2 * tau)) * ((rewards - rbar - tau * ((lp - old) * mask).sum(1)) ** 2).mean()
        diffs.append((kimi - own).item())
        g_kimi, g_own = (torch.autograd.grad(f, logits, retain_graph=True)[0] for f in (kimi, own))
        torch.testing.assert_close(g_kimi, g_own, rtol=1e-10, atol=1e-12)
    assert diffs[0] == pytest.approx(diffs[1], rel=1e-10)
    c = -(adv * (old * mask).sum(1) + adv**2 / (2 * tau)).mean().item()
    assert diffs[0] == pytest.approx(c, rel=1e-10)


def test_dro_preset_matches_dro_objective():
    """DRO (Eq. 13): β1 = β, β2 = β²/2, π_src = π_ref ⇒ DGRO ≡ (1/2)·E[(r − V − β log π/π_ref)²]."""
    beta, B, T, V = 0.4, 6, 4, 3
    gen = torch.Generator().manual_seed(17)
    tokens = torch.randint(0, V, (B, T), generator=gen)
    mask = make_mask(B, T, gen)
    adv = torch.randn(B, generator=gen, dtype=DT)  # r − V_φ(x)
    ref = token_logps(torch.randn(B, T, V, generator=gen, dtype=DT), tokens)
    assert loss_entry("dro").requires == ("ref_logps", "rewards", "values")
    diffs = []
    for _ in range(2):
        logits = torch.randn(B, T, V, generator=gen, dtype=DT).requires_grad_(True)
        lp = token_logps(logits, tokens)
        dro, _ = dro_loss(lp, None, mask, adv, ref_logps=ref, beta=beta)
        own = 0.5 * ((adv - beta * ((lp - ref) * mask).sum(1)) ** 2).mean()
        diffs.append((dro - own).item())
        g1, g2 = (torch.autograd.grad(f, logits, retain_graph=True)[0] for f in (dro, own))
        torch.testing.assert_close(g1, g2, rtol=1e-10, atol=1e-12)
    assert diffs[0] == pytest.approx(diffs[1], rel=1e-10)


def test_dro_with_learned_value_has_the_gradients_of_dros_objective():
    """With V_φ(x) from a value head, dro_loss's gradient w.r.t. the policy logits AND the head's parameters
    equals autograd of DRO's own (1/2)·E[(r − V_φ(x) − β log π/π_ref)²] (a surrogate: same gradients, not value)."""
    beta, B, T, V, H = 0.3, 6, 4, 3, 5
    gen = torch.Generator().manual_seed(23)
    tokens = torch.randint(0, V, (B, T), generator=gen)
    mask = make_mask(B, T, gen)
    ref = token_logps(torch.randn(B, T, V, generator=gen, dtype=DT), tokens)
    feats = torch.randn(B, H, generator=gen, dtype=DT)  # the prompts' hidden states (detached)
    r = torch.randn(B, generator=gen, dtype=DT)
    for _ in range(2):
        logits = torch.randn(B, T, V, generator=gen, dtype=DT).requires_grad_(True)
        w = torch.randn(H, generator=gen, dtype=DT).requires_grad_(True)
        lp = token_logps(logits, tokens)
        values = feats @ w
        dro, m = dro_loss(lp, None, mask, torch.zeros(B, dtype=DT), ref_logps=ref, rewards=r, values=values, beta=beta)
        own = 0.5 * ((r - values - beta * ((lp - ref) * mask).sum(1)) ** 2).mean()
        g1 = torch.autograd.grad(dro, (logits, w), retain_graph=True)
        g2 = torch.autograd.grad(own, (logits, w))
        for a, b in zip(g1, g2):
            torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)
        assert m["dro/value_loss"] == pytest.approx(own.item(), rel=1e-10)


# ---------------------------------------------------------------------------
# 7. baselines, advantages, stats, registry
# ---------------------------------------------------------------------------


def test_group_mean_baseline_loop():
    r = torch.randn(12, dtype=DT)
    got = group_mean_baseline(r, 3)
    for i in range(12):
        g = r[3 * (i // 3) : 3 * (i // 3) + 3].tolist()
        assert got[i].item() == pytest.approx(sum(g) / 3, rel=1e-12)
    with pytest.raises(ValueError):
        group_mean_baseline(r, 5)


def test_soft_value_baseline_loop_and_limits():
    G = 4
    r = torch.tensor([1.0, -1.0, 3.0, 0.5, 5.0, 5.0, -5.0, 0.0], dtype=DT)
    groups = [r[:4].tolist(), r[4:].tolist()]
    for beta in (0.3, 1.0, 7.0):
        got = soft_value_baseline(r, G, beta)
        for i in range(8):
            g = groups[i // G]
            ref = beta * math.log(sum(math.exp(x / beta) for x in g) / G)
            assert got[i].item() == pytest.approx(ref, rel=1e-12)
            assert max(g) + 1e-12 >= got[i].item() >= sum(g) / G - 1e-12  # Jensen
    mean, mx = group_mean_baseline(r, G), torch.tensor([3.0] * 4 + [5.0] * 4, dtype=DT)
    torch.testing.assert_close(soft_value_baseline(r, G, 1e7), mean, rtol=0, atol=1e-5)
    # small β: max + β·log(k/G) (k = number of maxima) → max; stable where exp(r/β) overflows
    small = soft_value_baseline(r, G, 1e-3)
    assert torch.isfinite(small).all()
    torch.testing.assert_close(small, mx, rtol=0, atol=2e-3)
    assert torch.equal(soft_value_baseline(r, G, 0.0), mx)
    torch.testing.assert_close(soft_value_baseline(r, G, math.inf), mean)
    with pytest.raises(ValueError):
        soft_value_baseline(r, G, -1.0)


def test_compute_advantages():
    G = 4
    gen = torch.Generator().manual_seed(18)
    r = torch.randint(-3, 4, (12,), generator=gen).to(DT)
    r[8:] = 2.0  # a zero-variance group
    got = compute_advantages(r, G, scale="group_std")
    for i in range(12):
        g = r[G * (i // G) : G * (i // G) + G].tolist()
        mu = sum(g) / G
        std = math.sqrt(sum((x - mu) ** 2 for x in g) / (G - 1))
        assert got[i].item() == pytest.approx((r[i].item() - mu) / (std + 1e-4), rel=1e-12, abs=1e-12)
    b1, b2 = 0.5, 0.2
    beta = L.loss_entry("dgro").soft_beta({"beta1": b1, "beta2": b2})  # the loss declares its soft-value beta (Eq. 15)
    assert beta == pytest.approx(2 * b2 / b1)
    soft = compute_advantages(r, G, value="soft", soft_beta=beta)
    torch.testing.assert_close(soft, r - soft_value_baseline(r, G, 2 * b2 / b1))
    with pytest.raises(ValueError, match="soft_beta"):
        compute_advantages(r, G, value="soft")
    torch.testing.assert_close(compute_advantages(r, G), r - group_mean_baseline(r, G))
    with pytest.raises(ValueError, match="learned"):
        compute_advantages(r, G, value="learned")
    with pytest.raises(ValueError, match="batch_std"):
        compute_advantages(r, G, scale="batch_std")


def test_group_stats_loop():
    G = 3
    r = torch.tensor([1.0, 1.0, 1.0, -3.0, 0.0, 3.0, 2.0, 2.0, 5.0, 0.0, 0.0, 0.0], dtype=DT)
    s = group_stats(r, G)
    xs = r.tolist()
    mu = sum(xs) / len(xs)
    var = sum((x - mu) ** 2 for x in xs) / len(xs)
    within = []
    for k in range(0, len(xs), G):
        g = xs[k : k + G]
        m = sum(g) / G
        within.append(sum((x - m) ** 2 for x in g) / G)
    assert s["reward/mean"] == pytest.approx(mu)
    assert s["reward/var"] == pytest.approx(var)
    assert s["reward/std"] == pytest.approx(math.sqrt(var))
    assert s["reward/within_group_var"] == pytest.approx(sum(within) / len(within))
    assert s["reward/frac_zero_std_groups"] == pytest.approx(0.5)


def test_registry():
    assert {"dgro", "kimi", "dro"} <= set(list_losses())
    assert list_losses() == sorted(list_losses())
    assert loss_entry("dgro").fn is dgro_loss and loss_entry("kimi").fn is kimi_loss
    assert loss_entry("dgro").requires == () and loss_entry("kimi").requires == ()
    with pytest.raises(KeyError) as e:
        loss_entry("grpo-but-misspelt").fn
    assert "dgro" in str(e.value) and "kimi" in str(e.value)
    with pytest.raises(KeyError, match="dgro"):
        loss_entry("nope").requires

    @register_loss("_test_entropy_bonus", requires=("entropies",))
    def _bonus(logps, old_logps, mask, advantages, *, coef=0.1, entropies):
        return -coef * aggregate(entropies, mask, "token-mean"), {}

    try:
        assert loss_entry("_test_entropy_bonus").requires == ("entropies",)
        assert L.loss_entry("_test_entropy_bonus").kwarg_names == ("coef",)  # read from the signature, less the tensors
        assert "_test_entropy_bonus" in list_losses()
        with pytest.raises(ValueError, match=r"\*\*kwargs"):  # a loss that swallows keys must name its params
            register_loss("_test_swallow")(lambda logps, old_logps, mask, advantages, **kw: (logps.sum(), {}))
        with pytest.raises(ValueError, match="already registered"):
            register_loss("dgro")(_bonus)
    finally:
        L.unregister_loss("_test_entropy_bonus")


def test_every_registered_loss_has_the_common_signature():
    logps, old, mask, adv = make_batch()
    from dgro_lib.losses import loss_entry

    extras = {"ref_logps": old, "entropies": torch.ones_like(logps), "rewards": adv.detach().clone(),
              "group_ids": torch.arange(logps.shape[0]) // 2, "values": torch.zeros(logps.shape[0], dtype=logps.dtype),
              "rollout_flags": torch.arange(logps.shape[0]) % 2, "rollout_temps": torch.full((logps.shape[0],), 1.2)}
    for name in list_losses():
        if loss_entry(name).trl_loss_type is not None:  # TRL's own loss: runs inside the trainer (tests/test_trainer.py)
            continue
        extras["temp_logps"] = {t: old for t in loss_entry(name).temperatures()}
        extras["batch_stats"] = None  # a standalone call: the loss computes them from its own rows
        kw = {k: extras[k] for k in loss_entry(name).requires}
        with pytest.raises(TypeError, match="unrelated_cfg"):  # no loss swallows an unknown key
            loss_entry(name).fn(logps, old, mask, adv, unrelated_cfg=1, **kw)
        loss, metrics = loss_entry(name).fn(logps, old, mask, adv, **kw)
        assert loss.dim() == 0 and torch.isfinite(loss)
        assert all(isinstance(v, float) for v in metrics.values())


def test_a_loss_is_one_record_and_re_registering_replaces_all_of_it():
    """One frozen LossEntry per name: registering the same function again with fewer declarations leaves none of
    the old ones behind (the old parallel tables kept a stale temperature)."""
    import dataclasses

    import dgro_lib.losses as L

    def _t(logps, old_logps, mask, advantages, *, temp_logps=None, t: float = 2.0):
        return (logps * mask).sum(), {}

    try:
        L.register_loss("_test_record", requires=("temp_logps",), temperatures=lambda kw: (kw["t"],))(_t)
        e = L.loss_entry("_test_record")
        assert L.loss_entry("_test_record").temperatures({"t": 3}) == (3.0,) and e.params == ("t",)
        with pytest.raises(dataclasses.FrozenInstanceError):
            e.requires = ()
        L.register_loss("_test_record", requires=("temp_logps",))(_t)
        assert L.loss_entry("_test_record").temperatures({"t": 3}) == ()
    finally:
        L.unregister_loss("_test_record")
    with pytest.raises(KeyError, match="unknown loss '_test_record'"):
        L.loss_entry("_test_record")
