"""DGRO and the losses it contains as special cases (DGRO paper, Decoupled Group Reward Optimization).

- :func:`dgro_loss`: the DGRO objective (Eq. 4), its gradient (Eq. 5) and group estimate (Eq. 6);
  β = 2β2/β1 is the temperature of the soft value baseline (Eq. 15).
- :func:`kimi_loss`: Kimi k1.5's online policy mirror descent, β1 = 1, β2 = τ/2 (Table 1, Eq. 14).
- :func:`dro_loss`: DRO, β1 = β, β2 = β²/2, source policy π_ref, optional learned value (Table 1, Eq. 13).

Notation: ℓ_{i,t} = log π_θ(y_{i,t} | x, y_{i,<t}), mask m_{i,t}, n_i = Σ_t m_{i,t}, sequence log-prob
L_i = Σ_t m_{i,t} ℓ_{i,t}; "old" quantities come from π_θold; r_i is the scalar reward, r̄ its group mean.
Shapes: logps, old_logps, mask (B, T); advantages (B,) or (B, T).
"""

from __future__ import annotations

import math

import torch

from dgro_lib.losses.aggregation import aggregation_weights
from dgro_lib.losses.tensor_checks import _prepare
from dgro_lib.losses.registry import register_loss

RATIO_LEVELS = ("sequence", "token")


def _norm(x: torch.Tensor) -> float:
    return float(torch.linalg.vector_norm(x))


def _dgro_soft_beta(kw: dict) -> float:
    if kw["beta1"] == 0:
        raise ValueError("value 'soft' needs beta1 != 0 (beta = 2*beta2/beta1, DGRO Eq. 15)")
    return 2.0 * kw["beta2"] / kw["beta1"]


@register_loss("dgro", soft_beta=_dgro_soft_beta, on_policy_inert=lambda kw: ("beta2",) if kw["beta2"] != 0 else ())
def dgro_loss(
    logps: torch.Tensor,
    old_logps: torch.Tensor | None,
    mask: torch.Tensor,
    advantages: torch.Tensor,
    *,
    beta1: float = 1.0,
    beta2: float = 0.1,
    ratio_level: str = "sequence",
    aggregation: str | None = None,
    norm_len: float | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """DGRO loss (DGRO paper Eq. 4, gradient Eq. 5, group estimate Eq. 6).

    Default (``ratio_level="sequence"``, ``aggregation=None`` = "seq-mean-token-sum")
    is exactly the paper::

        loss = -(1/B) Σ_i [ β1·A_i·L_i − β2·(L_i − L_i^old)² ]

    with A_i = r_i − V (``advantages``, e.g. :func:`compute_advantages`; the paper
    uses V = r̄, Eq. 6), π_src = π_sam = π_θold (Table 1, "online"). Averaging over
    all B rows of several equal-size groups equals the mean over groups of Eq. 6.

    Args:
        logps: (B, T) current per-token log-probs ℓ (carry the graph).
        old_logps: (B, T) log-probs under π_θold (treated as constants, detached);
            ``None`` means old = current (on-policy), so the β2 term is inert.
        mask: (B, T) 1 on completion tokens, 0 on padding.
        advantages: (B,) A_i = r_i − V, or (B, T) per-token advantages (detached).
        beta1: β1, the policy-gradient coefficient.
        beta2: β2, the policy-distance coefficient (β = 2β2/β1, Eq. 15).
        ratio_level: ``"sequence"`` (paper: squared log-ratio of the whole response,
            (L_i − L_i^old)²) or ``"token"`` (Σ_t m_it (ℓ_it − ℓ^old_it)², as ROLL's
            kimi15 loss). Sequence-level penalties grow with length (the squared
            sum of n_i per-token log-ratios is up to n_i times their sum of squares,
            ~n_i² for correlated drift), so a given β2 is much stronger on long
            responses than with the token form.
        aggregation: one of :data:`AGGREGATIONS` or ``None`` (= "seq-mean-token-sum").
        norm_len: divisor for "seq-mean-token-sum-norm" (default T).

    Per-token form used for every aggregation: loss = −aggregate(x, mask, mode) with
    ``x_it = β1·A_it·ℓ_it − β2·q_it`` where q_it = (ℓ_it − ℓ^old_it)² for
    ``ratio_level="token"`` and q_it = (L_i − L_i^old)² / n_i for ``"sequence"``
    (so that Σ_t m_it q_it = (L_i − L_i^old)² and "seq-mean-token-sum" is Eq. 4
    exactly). Other aggregations are our extension, not the paper's.

    Gradient (Eq. 5): on-policy (old = current) the β2 term has zero gradient, since
    ∇(L − L^old)² = 2(L − L^old)∇L. β2 acts only on the 2nd+ update of a rollout batch.

    Returns ``(loss, metrics)``; metrics (python floats):

    - ``dgro/pg_term``: aggregate(β1·A·ℓ) (default: mean_i β1 A_i L_i);
    - ``dgro/penalty_term``: aggregate(β2·q) (default: mean_i β2 (L_i − L_i^old)²);
      loss = penalty_term − pg_term;
    - ``dgro/log_ratio_mean``, ``dgro/log_ratio_std``: mean / population std over rows
      of the sequence log-ratio L_i − L_i^old;
    - ``dgro/seq_logp_mean``: mean_i L_i;
    - ``dgro/grad_norm_b1``, ``dgro/grad_norm_b2``: L2 norms over (i, t) of the two
      terms' contributions to ∂loss/∂ℓ_it, computed analytically (no backward):
      β1 term −w_it β1 A_it; β2 term w_it 2β2 (ℓ_it − ℓ^old_it) (token) or
      m_it 2β2 (L_i − L_i^old) (Σ_s w_is)/n_i (sequence), with w from
      :func:`aggregation_weights`;
    - ``dgro/grad_ratio_b2_b1``: grad_norm_b2 / grad_norm_b1; 0.0 when both are 0,
      ``inf`` when only the β1 norm is 0 (all advantages zero but π ≠ π_old).
    """
    if ratio_level not in RATIO_LEVELS:
        raise ValueError(f"unknown ratio_level {ratio_level!r}; valid: {', '.join(RATIO_LEVELS)}")
    mode = "seq-mean-token-sum" if aggregation is None else aggregation
    lp, old, m, adv = _prepare(logps, old_logps, mask, advantages)
    w = aggregation_weights(m, mode, norm_len=norm_len)  # validates mode

    n = m.sum(dim=-1, keepdim=True)  # (B, 1)
    seq_lp = (m * lp).sum(dim=-1, keepdim=True)  # L_i
    seq_old = (m * old).sum(dim=-1, keepdim=True)  # L_i^old
    seq_ratio = seq_lp - seq_old  # (B, 1)
    if ratio_level == "sequence":
        q = seq_ratio.pow(2) / n.clamp(min=1.0)  # spread (L − L^old)² over the row's tokens
    else:
        q = (lp - old).pow(2)

    pg = beta1 * adv * lp
    pen = beta2 * q
    pg_term = (w * pg).sum()
    pen_term = (w * pen).sum()
    loss = pen_term - pg_term

    with torch.no_grad():
        c1 = -beta1 * w * adv
        if ratio_level == "sequence":
            c2 = 2.0 * beta2 * seq_ratio * m * (w.sum(dim=-1, keepdim=True) / n.clamp(min=1.0))
        else:
            c2 = 2.0 * beta2 * w * (lp - old)
        g1, g2 = _norm(c1), _norm(c2)
        if g1 > 0:
            ratio = g2 / g1
        else:
            ratio = 0.0 if g2 == 0 else math.inf
        r = seq_ratio.squeeze(-1)
        metrics = {
            "dgro/pg_term": float(pg_term),
            "dgro/penalty_term": float(pen_term),
            "dgro/log_ratio_mean": float(r.mean()),
            "dgro/log_ratio_std": float(r.std(correction=0)),
            "dgro/seq_logp_mean": float(seq_lp.mean()),
            "dgro/grad_norm_b1": g1,
            "dgro/grad_norm_b2": g2,
            "dgro/grad_ratio_b2_b1": ratio,
        }
    return loss, metrics


@register_loss("kimi", soft_beta=lambda kw: kw["tau"], on_policy_inert=lambda kw: ("tau",) if kw["tau"] != 0 else ())
def kimi_loss(
    logps: torch.Tensor,
    old_logps: torch.Tensor | None,
    mask: torch.Tensor,
    advantages: torch.Tensor,
    *,
    tau: float = 0.1,
    ratio_level: str = "sequence",
    aggregation: str | None = None,
    norm_len: float | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Kimi k1.5's online policy-mirror-descent loss as a DGRO preset (DGRO Table 1, Eq. 14).

    β1 = 1, β2 = τ/2, V = r̄ (pass ``advantages = r − r̄``), π_src = π_sam = π_θold.
    Kimi k1.5 (Eq. 3 there) minimises E[(r − τ log Z − τ log π/π_old)²] with
    τ log Z ≈ r̄; its surrogate gradient is ∇log π·(r − r̄) − (τ/2)∇(log π/π_old)²,
    which is this loss; by Eq. 14/15 it equals (1/(2τ))·E[(r − r̄ − τ log π/π_old)²]
    up to a θ-free term.

    ``tau``: Kimi k1.5's regulariser τ. The Kimi report does not publish its value;
    the default 0.1 (β2 = 0.05) is our choice, set it explicitly in configs.
    Shapes: logps/old_logps/mask (B, T); advantages (B,) or (B, T).
    Other arguments and metrics as :func:`dgro_loss` (metric keys stay ``dgro/*``).
    """
    return dgro_loss(
        logps,
        old_logps,
        mask,
        advantages,
        beta1=1.0,
        beta2=tau / 2.0,
        ratio_level=ratio_level,
        aggregation=aggregation,
        norm_len=norm_len,
    )


@register_loss("dro", requires=("ref_logps", "rewards", "values"), soft_beta=lambda kw: kw["beta"])
def dro_loss(
    logps: torch.Tensor,
    old_logps: torch.Tensor | None,
    mask: torch.Tensor,
    advantages: torch.Tensor,
    *,
    ref_logps: torch.Tensor,
    rewards: torch.Tensor | None = None,
    values: torch.Tensor | None = None,
    beta: float = 0.1,
    value_coef: float = 1.0,
    ratio_level: str = "sequence",
    aggregation: str | None = None,
    norm_len: float | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """DRO (Richemond et al. 2024) as a DGRO preset (DGRO Table 1, Eq. 13): β1 = β, β2 = β²/2, π_src = π_ref.

    With a learned value (``values`` = V_φ(x) (B,) carrying the value head's graph, ``rewards`` (B,) raw):
    A_i = r_i − V_φ(x_i) (detached) for the policy term, plus ``value_coef`` × the value loss
    (1/2)·mean_i (r_i − V_φ(x_i) − β·Δ_i)², Δ_i = Σ_t m(ℓ − ℓ^ref) detached. With value_coef = 1 the sum is a
    surrogate with exactly the θ- and φ-gradients of DRO's objective (1/2)·E[(r − V_φ(x) − β log π_θ/π_ref)²]
    (its Eq. 4; tested), with sequence-level ratios. Without ``values``, ``advantages`` must already be r − V.

    Shapes: logps/mask/ref_logps (B, T); advantages, rewards, values (B,). ``old_logps`` is ignored (the
    source policy is π_ref). DRO's data are offline samples of a fixed policy μ: run the trainer with
    ``make_rollout_func(sample, policy="reference")`` (``train.rollout_policy: reference``).
    Metrics as :func:`dgro_loss` plus ``dro/{value_loss,value_mean,adv_mean}`` with a learned value.
    """
    metrics: dict[str, float] = {}
    value_loss = None
    if values is not None:
        if rewards is None:
            raise ValueError("dro_loss with values needs rewards (B,) to form r - V")
        if values.shape != rewards.shape or values.dim() != 1:
            raise ValueError(f"values {tuple(values.shape)} and rewards {tuple(rewards.shape)} must both be (B,)")
        r = rewards.detach().to(values.dtype)
        advantages = r - values.detach()
        with torch.no_grad():
            m = mask.to(logps.dtype)
            delta = ((logps.detach() - ref_logps.detach()) * m).sum(-1).to(values.dtype)
        value_loss = 0.5 * ((r - values - beta * delta) ** 2).mean()
        metrics = {"dro/value_loss": float(value_loss.detach()), "dro/value_mean": float(values.detach().mean()),
                   "dro/adv_mean": float(advantages.mean())}
    loss, m2 = dgro_loss(
        logps,
        ref_logps,
        mask,
        advantages,
        beta1=beta,
        beta2=beta * beta / 2.0,
        ratio_level=ratio_level,
        aggregation=aggregation,
        norm_len=norm_len,
    )
    m2.update(metrics)
    if value_loss is not None:
        loss = loss + value_coef * value_loss.to(loss.dtype)
    return loss, m2
