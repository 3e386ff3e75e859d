"""Pure loss and advantage functions behind one name registry.

Modelled on verl's ``core_algos``: every policy loss is a plain function with the
same signature, registered by name, returning ``(loss, metrics)``::

    fn(logps, old_logps, mask, advantages, *, <cfg kwargs>, **extra_tensors)
        -> (loss: Tensor scalar, metrics: dict[str, float])

Shapes: ``logps``, ``old_logps``, ``mask`` are ``(B, T)`` (B responses, T padded
completion tokens; mask 1 on real tokens, 0 on padding); ``advantages`` is ``(B,)``
(one value per response) or ``(B, T)``. Extra tensors a loss needs (entropies,
reference log-probs, ...) are declared with ``register_loss(name, requires=...)``
so that the trainer knows what to pass; ``loss_requires(name)`` reads them back.

Nothing in here reads a config object: every knob is a keyword argument.

Notation (DESIGN.md §2): ℓ_{i,t} = log π_θ(y_{i,t} | x, y_{i,<t}), mask m_{i,t},
n_i = Σ_t m_{i,t}, sequence log-prob L_i = Σ_t m_{i,t} ℓ_{i,t}; "old" quantities
come from π_θold; r_i is the scalar reward, r̄ its group mean.
Paper equations refer to the DGRO paper (Decoupled Group Reward Optimization).
"""

from __future__ import annotations

import math
from typing import Callable, Iterable

import torch

__all__ = [
    "AGGREGATIONS",
    "aggregate",
    "aggregation_weights",
    "compute_advantages",
    "dgro_loss",
    "dro_loss",
    "get_loss",
    "group_mean_baseline",
    "group_stats",
    "kimi_loss",
    "list_losses",
    "loss_requires",
    "register_loss",
    "soft_value_baseline",
]

LossFn = Callable[..., "tuple[torch.Tensor, dict[str, float]]"]

# ---------------------------------------------------------------------------
# Registry
# ---------------------------------------------------------------------------

_LOSSES: dict[str, LossFn] = {}
_REQUIRES: dict[str, tuple[str, ...]] = {}


def register_loss(name: str, *, requires: Iterable[str] = ()) -> Callable[[LossFn], LossFn]:
    """Decorator registering a policy loss under ``name``.

    Args:
        name: registry key (what configs write, e.g. ``loss: dgro``).
        requires: names of extra tensors the loss reads from ``**extra_tensors``
            (for example ``"entropies"``, ``"ref_logps"``). Stored so the trainer
            computes and passes exactly those; see :func:`loss_requires`.

    Re-registering the same function (same module and qualified name, e.g. after a
    module reload) is allowed; registering a different function under a taken name
    raises ``ValueError``.
    """
    req = tuple(requires)
    if isinstance(requires, str):  # a bare string would be split into characters
        req = (requires,)

    def decorator(fn: LossFn) -> LossFn:
        old = _LOSSES.get(name)
        if old is not None and (old.__module__, old.__qualname__) != (fn.__module__, fn.__qualname__):
            raise ValueError(f"loss {name!r} is already registered to {old.__module__}.{old.__qualname__}")
        _LOSSES[name] = fn
        _REQUIRES[name] = req
        return fn

    return decorator


def _unknown(name: str) -> KeyError:
    return KeyError(f"unknown loss {name!r}; valid names: {', '.join(list_losses())}")


def get_loss(name: str) -> LossFn:
    """The loss function registered as ``name``; unknown name -> ``KeyError`` listing the valid names."""
    try:
        return _LOSSES[name]
    except KeyError:
        raise _unknown(name) from None


def list_losses() -> list[str]:
    """Sorted names of all registered losses."""
    return sorted(_LOSSES)


def loss_requires(name: str) -> tuple[str, ...]:
    """Names of the extra tensors the loss ``name`` needs (``()`` for none); unknown name -> ``KeyError``."""
    if name not in _REQUIRES:
        raise _unknown(name)
    return _REQUIRES[name]


# ---------------------------------------------------------------------------
# Aggregation
# ---------------------------------------------------------------------------

AGGREGATIONS: tuple[str, ...] = (
    "token-mean",
    "seq-mean-token-mean",
    "seq-mean-token-sum",
    "seq-mean-token-sum-norm",
)


def aggregation_weights(mask: torch.Tensor, mode: str, *, norm_len: float | None = None) -> torch.Tensor:
    """Per-token weights ``w`` (B, T) with ``aggregate(x, mask, mode) == (w * x).sum()``.

    Every mode is linear in the per-token values, so it is a weighted sum; the
    weights already include the mask (w = 0 on padding):

    - ``token-mean``: w = m / Σ_{i,t} m (DAPO; TRL's "dapo"/"bnpo" style).
    - ``seq-mean-token-mean``: w = m / (B · n_i) (original GRPO).
    - ``seq-mean-token-sum``: w = m / B (the DGRO paper's sequence-level expectation, Eq. 4/6).
    - ``seq-mean-token-sum-norm``: w = m / (B · norm_len), norm_len defaults to T (Dr.GRPO).

    Rows with no valid token contribute 0 but still count in B (the "seq-mean" is
    over all B rows); an all-padding batch gives all-zero weights under token-mean.
    Deviation from verl: verl's ``seq-mean-token-sum-norm`` is Σ_i Σ_t / T with no
    1/B; we divide by B as well, as Dr.GRPO's (1/G) Σ_i (1/MAX_TOKENS) Σ_t does.
    """
    if mode not in AGGREGATIONS:
        raise ValueError(f"unknown aggregation mode {mode!r}; valid modes: {', '.join(AGGREGATIONS)}")
    if mask.dim() != 2:
        raise ValueError(f"mask must be (B, T), got shape {tuple(mask.shape)}")
    m = mask if mask.is_floating_point() else mask.float()
    B, T = m.shape
    if mode == "token-mean":
        return m / m.sum().clamp(min=1.0)
    if mode == "seq-mean-token-mean":
        return m / (B * m.sum(dim=-1, keepdim=True).clamp(min=1.0))
    if mode == "seq-mean-token-sum":
        return m / B
    norm = float(T if norm_len is None else norm_len)
    if norm <= 0:
        raise ValueError(f"norm_len must be positive, got {norm_len!r}")
    return m / (B * norm)


def aggregate(per_token: torch.Tensor, mask: torch.Tensor, mode: str, *, norm_len: float | None = None) -> torch.Tensor:
    """Reduce a per-token quantity (B, T) to a scalar (verl's ``agg_loss``).

    Modes (n_i = Σ_t m_it, B rows, T columns):

    - ``token-mean``: Σ_{i,t} m x / Σ_{i,t} m.
    - ``seq-mean-token-mean``: (1/B) Σ_i (Σ_t m x / n_i).
    - ``seq-mean-token-sum``: (1/B) Σ_i Σ_t m x.
    - ``seq-mean-token-sum-norm``: (1/B) Σ_i Σ_t m x / norm_len (norm_len default T; keep it
      fixed, e.g. max_completion_length, to reproduce Dr.GRPO).

    Unknown ``mode`` -> ``ValueError`` listing the modes. Padding positions are
    multiplied by 0, so they must be finite (0 · inf = nan).
    """
    if per_token.shape != mask.shape:
        raise ValueError(f"per_token {tuple(per_token.shape)} and mask {tuple(mask.shape)} differ in shape")
    w = aggregation_weights(mask.to(per_token.dtype), mode, norm_len=norm_len)
    return (w * per_token).sum()


# ---------------------------------------------------------------------------
# DGRO and its special cases
# ---------------------------------------------------------------------------

RATIO_LEVELS = ("sequence", "token")


def _prepare(logps, old_logps, mask, advantages):
    if logps.dim() != 2:
        raise ValueError(f"logps must be (B, T), got shape {tuple(logps.shape)}")
    if old_logps is None:  # no stale policy: old = current, so the β2 term is inert
        old_logps = logps.detach()
    if old_logps.shape != logps.shape or mask.shape != logps.shape:
        raise ValueError(
            f"logps {tuple(logps.shape)}, old_logps {tuple(old_logps.shape)} and mask {tuple(mask.shape)} must match"
        )
    B, T = logps.shape
    if advantages.shape == (B,):
        adv = advantages[:, None]
    elif advantages.shape == (B, T):
        adv = advantages
    else:
        raise ValueError(f"advantages must be (B,)=({B},) or (B, T)=({B}, {T}), got {tuple(advantages.shape)}")
    # half precision sequence sums lose too much: compute in at least fp32
    dtype = torch.promote_types(logps.dtype, torch.float32)
    m = mask.detach().to(dtype)
    valid = m > 0  # padding log-probs may be anything (even -inf): zero them, gradient 0 there
    lp = torch.where(valid, logps.to(dtype), 0.0)
    old = torch.where(valid, old_logps.detach().to(dtype), 0.0)
    adv = adv.detach().to(dtype).expand(B, T)
    return lp, old, m, adv


def _norm(x: torch.Tensor) -> float:
    return float(torch.linalg.vector_norm(x))


@register_loss("dgro")
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
    **_: object,
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


@register_loss("kimi")
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
    **_: object,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Kimi k1.5's online policy-mirror-descent loss as a DGRO preset (DGRO Table 1, Eq. 14).

    β1 = 1, β2 = τ/2, V = r̄ (pass ``advantages = r − r̄``), π_src = π_sam = π_θold.
    Kimi k1.5 (Eq. 3 there) minimises E[(r − τ log Z − τ log π/π_old)²] with
    τ log Z ≈ r̄; its surrogate gradient is ∇log π·(r − r̄) − (τ/2)∇(log π/π_old)²,
    which is this loss; by Eq. 14/15 it equals (1/(2τ))·E[(r − r̄ − τ log π/π_old)²]
    up to a θ-free term.

    ``tau``: Kimi k1.5's regulariser τ. The Kimi report does not publish its value;
    the default 0.1 (β2 = 0.05) is our choice, set it explicitly in configs.
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


@register_loss("dro", requires=("ref_logps",))
def dro_loss(
    logps: torch.Tensor,
    old_logps: torch.Tensor | None,
    mask: torch.Tensor,
    advantages: torch.Tensor,
    *,
    ref_logps: torch.Tensor,
    beta: float = 0.1,
    ratio_level: str = "sequence",
    aggregation: str | None = None,
    norm_len: float | None = None,
    **_: object,
) -> tuple[torch.Tensor, dict[str, float]]:
    """DRO's policy loss as a DGRO preset (DGRO Table 1, Eq. 13): β1 = β, β2 = β²/2, π_src = π_ref.

    Equals (1/2)·E[(r − V_φ − β log π/π_ref)²] up to a θ-free term (DRO's Eq. 4).
    ``advantages`` must be r − V_φ(x) from a learned value (the value-head loss is
    not part of this function); ``ref_logps`` (B, T) replaces ``old_logps`` as the
    source policy (``old_logps`` is ignored). Metrics as :func:`dgro_loss`.
    """
    return dgro_loss(
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


# ---------------------------------------------------------------------------
# Baselines, advantages, group statistics
# ---------------------------------------------------------------------------


def _groups(rewards: torch.Tensor, group_size: int) -> torch.Tensor:
    if rewards.dim() != 1:
        raise ValueError(f"rewards must be (B,), got shape {tuple(rewards.shape)}")
    if group_size < 1 or rewards.numel() % group_size != 0:
        raise ValueError(f"group_size {group_size} must be >= 1 and divide the batch size {rewards.numel()}")
    return rewards.reshape(-1, group_size)


def group_mean_baseline(rewards: torch.Tensor, group_size: int) -> torch.Tensor:
    """V_i = r̄ of row i's group (DGRO Eq. 6). rewards (B,) as contiguous groups of ``group_size``; returns (B,)."""
    g = _groups(rewards, group_size)
    return g.mean(dim=1, keepdim=True).expand_as(g).reshape(-1)


def soft_value_baseline(rewards: torch.Tensor, group_size: int, beta: float) -> torch.Tensor:
    """Empirical soft value V = β·log((1/G) Σ_j exp(r_j/β)) per group (Eq. 2 with π_src = π_sam).

    rewards (B,) as contiguous groups of ``group_size``; returns (B,). For DGRO use
    β = 2β2/β1 (Eq. 15). Computed with logsumexp (stable for small β). Limits:
    β → ∞ gives the group mean (Appendix E: 0 ≤ V − r̄ ≤ Var/(2β)), β → 0 the group
    max; ``beta=0`` and ``beta=inf`` return those limits exactly. Negative β -> ValueError.
    """
    g = _groups(rewards, group_size)
    if beta < 0 or math.isnan(beta):
        raise ValueError(f"beta must be >= 0, got {beta!r}")
    if beta == 0:
        v = g.max(dim=1, keepdim=True).values
    elif math.isinf(beta):
        v = g.mean(dim=1, keepdim=True)
    else:
        v = beta * (torch.logsumexp(g / beta, dim=1, keepdim=True) - math.log(group_size))
    return v.expand_as(g).reshape(-1)


VALUES = ("group_mean", "soft")
SCALES = (None, "group_std")


def compute_advantages(
    rewards: torch.Tensor,
    group_size: int,
    *,
    value: str = "group_mean",
    beta1: float = 1.0,
    beta2: float = 0.1,
    scale: str | None = None,
    eps: float = 1e-4,
) -> torch.Tensor:
    """Advantages A_i = r_i − V (B,) for contiguous groups of ``group_size``.

    - ``value="group_mean"``: V = r̄ (DGRO Eq. 6, Kimi k1.5);
      ``value="soft"``: V = :func:`soft_value_baseline` with β = 2β2/β1 (Eq. 15).
      β1/β2 are read only for "soft".
    - ``scale=None``: no scaling (DGRO); ``scale="group_std"``: divide by the group's
      unbiased std + eps (GRPO as in TRL, eps = 1e-4; a group of size 1 has std 0).

    Must run on the groups before any row shuffle. Invalid value/scale -> ValueError.
    """
    if value not in VALUES:
        raise ValueError(f"unknown value {value!r}; valid: {', '.join(VALUES)}")
    if scale not in SCALES:
        raise ValueError(f"unknown scale {scale!r}; valid: {', '.join(map(repr, SCALES))}")
    if value == "group_mean":
        v = group_mean_baseline(rewards, group_size)
    else:
        if beta1 == 0:
            raise ValueError("value='soft' needs beta1 != 0 (β = 2β2/β1)")
        v = soft_value_baseline(rewards, group_size, 2.0 * beta2 / beta1)
    adv = rewards - v
    if scale == "group_std":
        g = _groups(rewards, group_size)
        std = g.std(dim=1, keepdim=True) if group_size > 1 else torch.zeros_like(g[:, :1])
        adv = adv / (std.expand_as(g).reshape(-1) + eps)
    return adv


def group_stats(rewards: torch.Tensor, group_size: int) -> dict[str, float]:
    """Reward diagnostics for contiguous groups (population variances, correction 0).

    Keys: ``reward/mean``, ``reward/std`` and ``reward/var`` over all B rewards;
    ``reward/within_group_var`` the mean over groups of the within-group variance
    (the variance the DGRO convergence analysis depends on);
    ``reward/frac_zero_std_groups`` the fraction of groups whose rewards are all
    equal (zero advantage with the group-mean baseline).
    """
    g = _groups(rewards, group_size).to(torch.promote_types(rewards.dtype, torch.float32))
    flat = g.reshape(-1)
    within = g.var(dim=1, correction=0)
    zero = (g.max(dim=1).values == g.min(dim=1).values).to(g.dtype)
    return {
        "reward/mean": float(flat.mean()),
        "reward/std": float(flat.std(correction=0)),
        "reward/var": float(flat.var(correction=0)),
        "reward/within_group_var": float(within.mean()),
        "reward/frac_zero_std_groups": float(zero.mean()),
    }
