"""Baselines, advantages and group statistics (DGRO Eq. 2, 6, 15; GRPO's group-std scaling).

Rewards come as (B,) in contiguous groups of ``group_size`` responses to the same prompt; every
function here returns (B,) (or a dict of floats) and must run on the groups before any row shuffle.
"""

from __future__ import annotations

import math

import torch


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
    soft_beta: float | None = None,
    scale: str | None = None,
    eps: float = 1e-4,
) -> torch.Tensor:
    """Advantages A_i = r_i − V (B,) for contiguous groups of ``group_size``.

    - ``value="group_mean"``: V = r̄ (DGRO Eq. 6, Kimi k1.5);
      ``value="soft"``: V = :func:`soft_value_baseline` with β = ``soft_beta`` (for DGRO β = 2β2/β1, Eq. 15:
      the loss declares it, :meth:`LossEntry.soft_beta <dgro_lib.losses.registry.LossEntry.soft_beta>`).
    - ``scale=None``: no scaling (DGRO); ``scale="group_std"``: divide by the group's
      unbiased std + eps (GRPO as in TRL, eps = 1e-4; a group of size 1 has std 0).

    Must run on the groups before any row shuffle. Invalid value/scale, or ``value="soft"`` without
    ``soft_beta`` -> ValueError.
    """
    if value not in VALUES:
        raise ValueError(f"unknown value {value!r}; valid: {', '.join(VALUES)}")
    if scale not in SCALES:
        raise ValueError(f"unknown scale {scale!r}; valid: {', '.join(map(repr, SCALES))}")
    if value == "group_mean":
        v = group_mean_baseline(rewards, group_size)
    else:
        if soft_beta is None:
            raise ValueError("value='soft' needs soft_beta (the loss's soft-value temperature, loss_entry(name).soft_beta)")
        v = soft_value_baseline(rewards, group_size, float(soft_beta))
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
