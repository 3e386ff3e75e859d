"""The comparison baselines: entropy methods of DCPO Tables 2–3 and Online DPO of DGRO Fig. 3.

- :func:`entropy_reg_loss` (``entropy_reg``): PPO clipped loss − coef·H̄.
- :func:`entropy_adv_loss` (``entropy_adv``): entropy bonus on the advantage, capped at |Â|/κ (Cheng et al. 2025).
- :func:`online_dpo_loss` (``online_dpo``): pairwise DPO (Rafailov et al. 2023, Eq. 7) on each group's best
  and worst sample.

The entropy baselines share the DCPO authors' actor update (:func:`dgro_lib.losses.ppo.grpo_verl_loss`).
"""

from __future__ import annotations

import torch

from dgro_lib.losses.aggregation import _masked_mean, aggregate
from dgro_lib.losses.tensor_checks import _prep_tokens, _prepare
from dgro_lib.losses.ppo import _clipped_pg
from dgro_lib.losses.registry import register_loss
from dgro_lib.losses.specs import ENTROPY_SOURCES


@register_loss("entropy_reg", requires=("entropies",))
def entropy_reg_loss(
    logps: torch.Tensor,
    old_logps: torch.Tensor | None,
    mask: torch.Tensor,
    advantages: torch.Tensor,
    *,
    entropies: torch.Tensor,
    coef: float = 0.03,
    entropy_source: str = "nll",
    epsilon: float = 0.2,
    epsilon_high: float | None = None,
    dual_clip: float | None = 3.0,
    aggregation: str = "token-mean",
    norm_len: float | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Entropy-Reg: PPO clipped loss − coef · H̄ (with gradient), on the authors' shared actor update (dual clip 3,
    token-mean; :func:`grpo_verl_loss`).

    H̄: ``entropy_source="nll"`` the aggregated −log π of the sampled tokens, the estimator the authors' actor
    subtracts (597358816/DCPO ``verl/workers/actor/dp_actor.py`` at 15dc716: ``pg_loss − entropy_loss ·
    entropy_coef`` with ``entropy_loss = −masked_mean(log_probs)``); ``"full"`` the full-vocabulary entropy
    (``entropies`` (B, T), which must then carry the graph, as TRL's fused head gives it).
    ``coef`` 0.03 is ``entropy_coef`` of the authors' actor config (``verl/workers/actor/config.py``). The DCPO
    paper prints no coefficient, and the public code has no switch that turns the term on (``use_entropy_loss``
    is ``init=False``, default off), so 0.03 is the value their code would use, not one the paper confirms.
    Metrics under ``entropy_reg/``.
    """
    if entropy_source not in ENTROPY_SOURCES:
        raise ValueError(f"unknown entropy_source {entropy_source!r}; valid: {', '.join(ENTROPY_SOURCES)}")
    lp, old, m, adv, _valid = _prep_tokens(logps, old_logps, mask, advantages)
    pg, metrics = _clipped_pg("entropy_reg", lp, old, m, adv * m, entropies, epsilon=epsilon,
                              epsilon_high=epsilon_high, dual_clip=dual_clip, aggregation=aggregation,
                              norm_len=norm_len)
    ent = -lp if entropy_source == "nll" else torch.where(m > 0, entropies.to(m.dtype), 0.0)
    h = aggregate(ent * m, m, aggregation, norm_len=norm_len)
    loss = pg - coef * h
    metrics.update({"entropy_reg/pg_loss": float(pg.detach()), "entropy_reg/entropy_term": float(h.detach())})
    return loss, metrics


@register_loss("entropy_adv", requires=("entropies",))
def entropy_adv_loss(
    logps: torch.Tensor,
    old_logps: torch.Tensor | None,
    mask: torch.Tensor,
    advantages: torch.Tensor,
    *,
    entropies: torch.Tensor,
    alpha: float = 0.4,
    kappa: float = 2.0,
    epsilon: float = 0.2,
    epsilon_high: float | None = None,
    dual_clip: float | None = 3.0,
    aggregation: str = "token-mean",
    norm_len: float | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Entropy-Adv (Cheng et al. 2025): Ã_{i,t} = Â_i + min(α·H_{i,t}.detach(), |Â_i|/κ), then PPO clip.

    The bonus is capped at |Â|/κ so it never flips the sign of a negative advantage (κ > 1). Defaults
    α = 0.4, κ = 2 as we read that paper; set them in the params file. The PPO part is the DCPO authors' shared
    actor update (dual clip 3, token-mean; :func:`grpo_verl_loss`). entropies (B, T). Metrics under
    ``entropy_adv/`` (incl. the mean bonus and the fraction of tokens where the cap binds).
    """
    if kappa <= 0:
        raise ValueError(f"kappa must be > 0, got {kappa!r}")
    lp, old, m, adv, _valid = _prep_tokens(logps, old_logps, mask, advantages)
    with torch.no_grad():
        h = torch.where(m > 0, entropies.detach().to(m.dtype), 0.0)
        raw = alpha * h
        cap = adv.abs() / kappa
        bonus = torch.minimum(raw, cap)
        adv_t = (adv + bonus) * m
    loss, metrics = _clipped_pg("entropy_adv", lp, old, m, adv_t, entropies, epsilon=epsilon, epsilon_high=epsilon_high, dual_clip=dual_clip, aggregation=aggregation, norm_len=norm_len)
    metrics.update({"entropy_adv/bonus_mean": _masked_mean(bonus, m),
                    "entropy_adv/cap_frac": _masked_mean(raw > cap, m)})
    return loss, metrics


@register_loss("online_dpo", requires=("rewards", "group_ids", "ref_logps"))
def online_dpo_loss(
    logps: torch.Tensor,
    old_logps: torch.Tensor | None,
    mask: torch.Tensor,
    advantages: torch.Tensor,
    *,
    rewards: torch.Tensor,
    group_ids: torch.Tensor,
    ref_logps: torch.Tensor,
    beta: float = 0.1,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Online DPO as a loss on our rollouts: per group, chosen = the highest-reward sample, rejected = the lowest.

    loss = mean over groups with a preference of −log σ(β·[(L_w − L_w^ref) − (L_l − L_l^ref)]), L the sequence
    log-prob Σ_t m ℓ (Rafailov et al. 2023, Eq. 7; Guo et al. 2024's online setting: the pair is sampled from
    the current policy and ranked by the reward, here the task reward instead of an LLM judge).

    Why this and not ``trl.experimental.online_dpo.OnlineDPOTrainer``: that trainer draws exactly two samples
    per prompt and overrides ``training_step``; as a loss here it shares the rollout, reward, group
    statistics, logging and sampler of every other method, so DGRO Fig. 3 compares losses, not pipelines.
    ``advantages`` and ``old_logps`` are unused. Groups whose rewards are all equal carry no preference and
    are skipped (their rows get no gradient). Ties for best/worst go to the first row.

    Shapes: logps/mask/ref_logps (B, T); rewards, group_ids (B,). Every group present must be complete in
    this call (its rows are found by ``group_ids``); a group split across micro-batches is not detected
    here, so keep one micro-batch per rollout batch (``gradient_accumulation_steps = steps_per_generation = 1``).

    Metrics: ``online_dpo/{loss,frac_groups_with_pair,margin_mean,reward_acc,chosen_logratio,rejected_logratio}``.
    """
    lp, ref, m, _adv = _prepare(logps, ref_logps, mask, advantages)
    if rewards.shape != (lp.shape[0],) or group_ids.shape != (lp.shape[0],):
        raise ValueError(f"rewards {tuple(rewards.shape)} and group_ids {tuple(group_ids.shape)} must be (B,)")
    seq = (m * lp).sum(-1) - (m * ref).sum(-1)  # (B,) log π/π_ref of each response
    chosen, rejected = [], []
    groups = torch.unique(group_ids)
    for g in groups.tolist():
        rows = (group_ids == g).nonzero().squeeze(1)
        r = rewards[rows]
        if bool((r.max() == r.min()).item()):
            continue
        chosen.append(rows[int(torch.argmax(r))])
        rejected.append(rows[int(torch.argmin(r))])
    if not chosen:
        zero = (lp * 0.0).sum()  # keeps the graph: a batch without preferences contributes a zero gradient
        return zero, {"online_dpo/loss": 0.0, "online_dpo/frac_groups_with_pair": 0.0, "online_dpo/margin_mean": 0.0,
                      "online_dpo/reward_acc": 0.0, "online_dpo/chosen_logratio": 0.0,
                      "online_dpo/rejected_logratio": 0.0}
    w, l_ = torch.stack(chosen), torch.stack(rejected)
    margin = beta * (seq[w] - seq[l_])
    loss = -torch.nn.functional.logsigmoid(margin).mean()
    with torch.no_grad():
        metrics = {
            "online_dpo/loss": float(loss.detach()),
            "online_dpo/frac_groups_with_pair": len(chosen) / max(len(groups), 1),
            "online_dpo/margin_mean": float(margin.mean()),
            "online_dpo/reward_acc": float((margin > 0).float().mean()),
            "online_dpo/chosen_logratio": float(seq[w].mean()),
            "online_dpo/rejected_logratio": float(seq[l_].mean()),
        }
    return loss, metrics
