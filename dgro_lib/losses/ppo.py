"""The PPO clipped surrogate and the GRPO family.

- :func:`ppo_clip_per_token`: the per-token clipped surrogate with optional dual clip (verl's
  ``compute_policy_loss`` before aggregation); ``_clipped_pg`` aggregates it and adds the shared
  clip-fraction / log-ratio / entropy metrics. DCPO, AEPO, J1–J4 and the entropy baselines all build on it.
- :func:`grpo_verl_loss` (``grpo_verl``): GRPO as the DCPO/AEPO authors' trainer updates the actor.
- :data:`TRL_LOSSES` (``grpo``, ``dapo``, ``dr_grpo``, ``bnpo``): TRL's own losses, reachable through the
  registry; they run inside the trainer, which delegates to ``trl.GRPOTrainer``.
"""

from __future__ import annotations

import torch

from dgro_lib.losses.aggregation import _masked_mean, aggregate
from dgro_lib.losses.tensor_checks import _prep_tokens
from dgro_lib.losses.registry import register_loss

TRL_LOSSES: tuple[str, ...] = ("grpo", "dapo", "dr_grpo", "bnpo")


def _runs_inside_trl(loss_type: str):
    raise RuntimeError(
        f"loss {loss_type!r} is trl.GRPOTrainer's own loss (loss_type={loss_type!r}); it runs inside "
        "DGROTrainer._compute_loss, which delegates to TRL, and has no standalone form here")


# TRL's own losses: each registered name is a def whose ``trl_loss_type`` the trainer reads; it sets GRPOConfig's
# loss_type and calls GRPOTrainer._compute_loss with our advantages (use ``scale: group_std`` for GRPO's). Not
# re-implemented; tested equal to stock TRL. Their kwargs are GRPOConfig fields (epsilon, epsilon_high, beta, ...).

@register_loss("grpo", trl=True)
def grpo_loss(*args: object, **kwargs: object):
    """TRL's ``loss_type="grpo"``: the clipped surrogate, each sequence's token mean, optional k3 KL to the
    reference with GRPOConfig.beta > 0. Runs inside :class:`dgro_lib.rl.trainer.DGROTrainer`."""
    _runs_inside_trl("grpo")


@register_loss("dapo", trl=True)
def dapo_loss(*args: object, **kwargs: object):
    """TRL's ``loss_type="dapo"``: the clipped surrogate averaged over every token of the global batch (DAPO).
    Runs inside :class:`dgro_lib.rl.trainer.DGROTrainer`."""
    _runs_inside_trl("dapo")


@register_loss("dr_grpo", trl=True)
def dr_grpo_loss(*args: object, **kwargs: object):
    """TRL's ``loss_type="dr_grpo"``: the clipped surrogate summed over tokens and divided by a constant (Dr.GRPO).
    Runs inside :class:`dgro_lib.rl.trainer.DGROTrainer`."""
    _runs_inside_trl("dr_grpo")


@register_loss("bnpo", trl=True)
def bnpo_loss(*args: object, **kwargs: object):
    """TRL's ``loss_type="bnpo"``: the clipped surrogate averaged over the local batch's tokens (BNPO). Runs inside
    :class:`dgro_lib.rl.trainer.DGROTrainer`."""
    _runs_inside_trl("bnpo")


for _fn, _lt in ((grpo_loss, "grpo"), (dapo_loss, "dapo"), (dr_grpo_loss, "dr_grpo"), (bnpo_loss, "bnpo")):
    _fn.trl_loss_type = _lt  # type: ignore[attr-defined]


def ppo_clip_per_token(
    logps: torch.Tensor,
    old_logps: torch.Tensor,
    advantages: torch.Tensor,
    *,
    epsilon: float = 0.2,
    epsilon_high: float | None = None,
    dual_clip: float | None = None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Per-token PPO clipped surrogate loss (to minimise), verl's ``compute_policy_loss`` before aggregation.

    r = exp(ℓ − ℓ^old); loss_t = max(−A·r, −A·clip(r, 1−ε, 1+ε_high)); with ``dual_clip`` = c > 1
    (Ye et al. 2020) tokens with A < 0 are further capped at −A·c.
    Shapes: logps, old_logps, advantages (B, T) (advantages broadcastable); returns ((B, T) loss, flags)
    where flags are boolean (B, T) tensors ``low`` (r < 1−ε, A < 0), ``high`` (r > 1+ε_high, A > 0) and
    ``dual`` (the dual clip binds), as TRL/verl count their clip fractions.
    """
    eh = epsilon if epsilon_high is None else epsilon_high
    ratio = torch.exp(logps - old_logps.detach())
    l1 = -advantages * ratio
    l2 = -advantages * torch.clamp(ratio, 1.0 - epsilon, 1.0 + eh)
    loss = torch.maximum(l1, l2)
    dual = torch.zeros_like(loss, dtype=torch.bool)
    if dual_clip is not None:
        if dual_clip <= 1.0:
            raise ValueError(f"dual_clip must be > 1 (or None), got {dual_clip!r}")
        l3 = -advantages * dual_clip
        dual = (advantages < 0) & (loss > l3)
        loss = torch.where(advantages < 0, torch.minimum(loss, l3), loss)
    with torch.no_grad():
        flags = {"low": (ratio < 1.0 - epsilon) & (advantages < 0), "high": (ratio > 1.0 + eh) & (advantages > 0),
                 "dual": dual}
    return loss, flags


def _ppo_metrics(prefix: str, logps, old, m, flags, entropies=None) -> dict[str, float]:
    with torch.no_grad():
        lr = (logps - old) * m
        n = m.sum().clamp(min=1.0)
        mean = lr.sum() / n
        out = {
            f"{prefix}/clip_frac_low": _masked_mean(flags["low"], m),
            f"{prefix}/clip_frac_high": _masked_mean(flags["high"], m),
            f"{prefix}/clip_frac_dual": _masked_mean(flags["dual"], m),
            f"{prefix}/log_ratio_mean": float(mean),
            f"{prefix}/log_ratio_std": float((((logps - old - mean) ** 2) * m).sum().div(n).sqrt()),
        }
        if entropies is not None:
            out[f"{prefix}/entropy"] = _masked_mean(entropies.detach(), m)
    return out


def _clipped_pg(prefix, lp, old, m, adv, entropies, *, epsilon, epsilon_high, dual_clip, aggregation, norm_len):
    """PPO clipped surrogate aggregated over the mask, with the shared clip/log-ratio/entropy metrics."""
    per_tok, flags = ppo_clip_per_token(lp, old, adv, epsilon=epsilon, epsilon_high=epsilon_high, dual_clip=dual_clip)
    loss = aggregate(per_tok * m, m, aggregation, norm_len=norm_len)
    return loss, _ppo_metrics(prefix, lp, old, m, flags, entropies)


@register_loss("grpo_verl")
def grpo_verl_loss(
    logps: torch.Tensor,
    old_logps: torch.Tensor | None,
    mask: torch.Tensor,
    advantages: torch.Tensor,
    *,
    epsilon: float = 0.2,
    epsilon_high: float | None = None,
    dual_clip: float | None = 3.0,
    aggregation: str = "token-mean",
    norm_len: float | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """GRPO as the DCPO/AEPO authors' trainer updates the actor (597358816/DCPO ``verl/workers/actor/dp_actor.py``
    and ``verl/workers/actor/config.py`` at 15dc716): PPO clipped surrogate with ε_low = ε_high = 0.2, dual clip
    3.0 for Â < 0, token-mean over the micro-batch, no KL term; Â the group-normalised advantage (configure the
    trainer with ``scale: group_std``).

    DCPO, AEPO, Entropy-Reg and Entropy-Adv share exactly this update in the authors' code, so the DCPO
    comparison uses this entry; TRL's ``grpo`` (per-sequence token mean, no dual clip) stays for the DGRO
    notebooks. Shapes: logps/old_logps/mask (B, T); advantages (B,) or (B, T). Metrics under ``grpo_verl/``.
    """
    lp, old, m, adv, _valid = _prep_tokens(logps, old_logps, mask, advantages)
    return _clipped_pg("grpo_verl", lp, old, m, adv * m, None, epsilon=epsilon, epsilon_high=epsilon_high,
                       dual_clip=dual_clip, aggregation=aggregation, norm_len=norm_len)
