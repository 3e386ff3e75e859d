"""DCPO and the regularizers of its Table 1, and AEPO.

The DCPO text lost its equations; everything here follows the authors' code, github.com/597358816/DCPO
(and github.com/597358816/AEPO) at commit 15dc716, ``verl/trainer/ray_trainer.py``:

- :func:`dcpo_loss` (``dcpo``): GRPO plus a REINFORCE regularizer under the temperature-T target
  distribution, mixed with the adaptive α (:func:`dcpo_alpha`) and importance weight ρ = π_old^T/π_old;
  its once-per-rollout-batch scalars are :func:`dcpo_batch_stats`, the mixed advantage :func:`dcpo_advantages`,
  the temperature rule :func:`dcpo_temperature`.
- DCPO Table 1 on samples from π_old: ``j1`` (weight 1) and ``j3`` (weight ρ), presets of :func:`dcpo_loss`.
- DCPO Table 1 on extra samples drawn at temperature T (:class:`ExtraRollouts`, placement ``"append"``):
  :func:`j2_loss` (weight 1, AEPO's regularizer) and :func:`j4_loss` (weight 1/ρ).
- :func:`aepo_loss` (``aepo``): GRPO's PPO loss after temperature-T samples replace on-policy rows
  (placement ``"replace"``).

Shapes: logps, old_logps, mask (B, T); advantages (B,) or (B, T); rewards (B,) raw.
"""

from __future__ import annotations


import torch

from dgro_lib.losses.aggregation import _masked_mean
from dgro_lib.losses.tensor_checks import _prep_tokens
from dgro_lib.losses.ppo import _clipped_pg
from dgro_lib.losses.registry import register_loss
from dgro_lib.losses.specs import ENTROPY_FROM, ENTROPY_SOURCES, BatchStatistics, ExtraRollouts, dcpo_temperature

DCPO_COMBINE = ("convex", "additive")
DCPO_WEIGHTS = ("rho", "one")


def dcpo_alpha(entropy: float, frac_correct: float, *, entropy_base: float = 0.5, alpha_cap: float = 0.1) -> float:
    """DCPO's adaptive mixing weight: α' = min(|H0 − H|, cap) / frac_correct, α = α'/(1 + α').

    Guard (a deviation from the authors' code, which divides by zero): no correct sample → α = 0.
    """
    if frac_correct <= 0:
        return 0.0
    a = min(abs(entropy_base - entropy), alpha_cap) / frac_correct
    return a / (1.0 + a)


def dcpo_batch_stats(
    rewards: torch.Tensor,
    entropy: float,
    *,
    entropy_base: float = 0.5,
    t_high: float = 1.2,
    t_low: float = 0.8,
    alpha: float | str = "adaptive",
    alpha_cap: float = 0.1,
    correct_threshold: float = 0.05,
) -> dict[str, float]:
    """DCPO's once-per-rollout-batch scalars (597358816/DCPO ``verl/trainer/ray_trainer.py`` at 15dc716, computed on
    the driver): ``{"H", "T", "frac_correct", "alpha"}``.

    rewards (N,) the raw rewards of the *whole* rollout batch (every process's rows); entropy the policy entropy
    H (which one: :class:`BatchStatistics`). T = :func:`dcpo_temperature`; frac_correct = mean of
    1[r > correct_threshold]; alpha = :func:`dcpo_alpha` for ``"adaptive"``, else the fixed number.
    """
    if rewards.dim() != 1:
        raise ValueError(f"rewards must be (N,), got shape {tuple(rewards.shape)}")
    H = float(entropy)
    frac = float((rewards.detach() > correct_threshold).float().mean()) if rewards.numel() else 0.0
    if isinstance(alpha, str):
        if alpha != "adaptive":
            raise ValueError(f"alpha must be 'adaptive' or a number, got {alpha!r}")
        a = dcpo_alpha(H, frac, entropy_base=entropy_base, alpha_cap=alpha_cap)
    else:
        a = float(alpha)
    return {"H": H, "T": dcpo_temperature(H, entropy_base=entropy_base, t_high=t_high, t_low=t_low),
            "frac_correct": frac, "alpha": a}


def dcpo_advantages(
    advantages: torch.Tensor,
    correct: torch.Tensor,
    weight: torch.Tensor,
    *,
    alpha: float,
    combine: str = "convex",
) -> torch.Tensor:
    """Ã_{i,t} = (1 − α)·Â_i + α·R_i·w_{i,t} (``convex``, the authors' code) or Â_i + α·R_i·w_{i,t}
    (``additive``: J = J_GRPO + α·J_reg, the paper's framing). advantages (B,) or (B, T), correct (B,)
    in {0, 1}, weight (B, T) (ρ for DCPO/J3, 1 for J1); returns (B, T), detached."""
    if combine not in DCPO_COMBINE:
        raise ValueError(f"unknown combine {combine!r}; valid: {', '.join(DCPO_COMBINE)}")
    a = advantages if advantages.dim() == 2 else advantages[:, None]
    reg = correct.to(weight.dtype)[:, None] * weight
    base = (1.0 - alpha) * a if combine == "convex" else a
    return (base + alpha * reg).detach()


def _dcpo_temps(kw: dict) -> tuple[float, float]:
    return (float(kw["t_high"]), float(kw["t_low"]))


_DCPO_STAT_KEYS = ("entropy_base", "t_high", "t_low", "alpha", "alpha_cap", "correct_threshold")


def _dcpo_stats_spec(kw: dict) -> BatchStatistics:
    fixed = {k: kw[k] for k in _DCPO_STAT_KEYS}
    return BatchStatistics(compute=lambda rewards, entropy: dcpo_batch_stats(rewards, entropy, **fixed),
                           entropy_source=kw["entropy_source"], entropy_from=kw["entropy_from"])


@register_loss("dcpo", requires=("rewards", "temp_logps", "entropies", "batch_stats"), temperatures=_dcpo_temps,
               batch_stats=_dcpo_stats_spec)
def dcpo_loss(
    logps: torch.Tensor,
    old_logps: torch.Tensor | None,
    mask: torch.Tensor,
    advantages: torch.Tensor,
    *,
    rewards: torch.Tensor,
    temp_logps: dict[float, torch.Tensor],
    entropies: torch.Tensor | None = None,
    batch_stats: dict[str, float] | None = None,
    entropy_base: float = 0.5,
    t_high: float = 1.2,
    t_low: float = 0.8,
    alpha: float | str = "adaptive",
    alpha_cap: float = 0.1,
    combine: str = "convex",
    double_is: bool = True,
    weight: str = "rho",
    correct_threshold: float = 0.05,
    entropy_source: str = "nll",
    entropy_from: str = "previous_step",
    epsilon: float = 0.2,
    epsilon_high: float | None = None,
    dual_clip: float | None = 3.0,
    aggregation: str = "token-mean",
    norm_len: float | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """DCPO: GRPO plus a REINFORCE regularizer under the temperature-T target distribution.

    The DCPO text lost its equations; this follows the authors' code (597358816/DCPO,
    ``verl/trainer/ray_trainer.py`` at commit 15dc716):

    1. H = the policy entropy. The authors use the *previous* step's ``actor/entropy_loss``: the token-mean
       −log π of the sampled tokens measured during the previous rollout batch's update, 0 before the first step
       (``entropy_source="nll"``, ``entropy_from="previous_step"``, the defaults). ``entropy_source="full"``
       uses the full-vocabulary entropy instead; ``entropy_from="rollout"`` measures H on this rollout batch
       under π_old (no lag; an extra no-grad scoring pass in the trainer).
    2. T = T_high if H <= H0 (``entropy_base``) else T_low (:func:`dcpo_temperature`).
    3. ρ_{i,t} = exp(ℓ^{old,T}_{i,t} − ℓ^old_{i,t}) (detached, not clipped); ``double_is=False`` → ρ = 1
       (the paper's "without double IS" ablation). ``weight="one"`` also gives 1 (J1 of Table 1).
    4. R_i = 1[r_i > correct_threshold] from the raw rewards.
    5. α: ``"adaptive"`` → :func:`dcpo_alpha` (0 when nothing is correct), or a fixed float
       (``alpha=0`` is the "without REINFORCE" ablation).
    6. Ã = :func:`dcpo_advantages` (``combine="convex"`` authors' code, ``"additive"`` J_GRPO + α·J_reg);
       then the PPO clipped loss (ε, dual clip 3.0 for Ã < 0) aggregated ``token-mean``.

    H, T, the correct fraction and α are statistics of the whole rollout batch (1, 2, 5): the trainer computes
    them once, over every process's rows, with :func:`dcpo_batch_stats` and passes them as ``batch_stats``, so
    neither the micro-batch split nor the number of processes changes them. Called without ``batch_stats``
    (a standalone call), they are computed from the rows of this call, with H from this call's tokens
    (``entropy_from`` is then not used): the authors' values only when the call holds the whole rollout batch.

    Shapes: logps/old_logps/mask (B, T); advantages (B,) — GRPO's group-normalised Â (configure the
    trainer with ``scale: group_std``); rewards (B,) raw; temp_logps {T: (B, T) ℓ^{old,T}} for T_high and
    T_low; entropies (B, T) (read for ``entropy_source="full"`` without ``batch_stats``, and for the metric).
    ℓ^{old,T} is what the trainer supplies (scored at generation time when the batch feeds several updates).

    Metrics: ``dcpo/{alpha,T,H,rho_mean,rho_max,rho_min,frac_correct,adv_mean}`` plus clip fractions,
    log-ratio mean/std and entropy under ``dcpo/``.
    """
    if weight not in DCPO_WEIGHTS:
        raise ValueError(f"unknown weight {weight!r}; valid: {', '.join(DCPO_WEIGHTS)}")
    if entropy_source not in ENTROPY_SOURCES:
        raise ValueError(f"unknown entropy_source {entropy_source!r}; valid: {', '.join(ENTROPY_SOURCES)}")
    if entropy_from not in ENTROPY_FROM:
        raise ValueError(f"unknown entropy_from {entropy_from!r}; valid: {', '.join(ENTROPY_FROM)}")
    lp, old, m, adv, valid = _prep_tokens(logps, old_logps, mask, advantages)
    B = lp.shape[0]
    if rewards.shape != (B,):
        raise ValueError(f"rewards must be (B,)=({B},), got {tuple(rewards.shape)}")
    with torch.no_grad():
        if batch_stats is None:
            if entropy_source == "nll":
                H = float((-old * m).sum() / m.sum().clamp(min=1.0))
            else:
                if entropies is None:
                    raise ValueError("entropy_source='full' needs entropies (B, T)")
                H = _masked_mean(entropies.detach().to(m.dtype), m)
            batch_stats = dcpo_batch_stats(rewards, H, entropy_base=entropy_base, t_high=t_high, t_low=t_low,
                                           alpha=alpha, alpha_cap=alpha_cap, correct_threshold=correct_threshold)
        missing = sorted({"H", "T", "frac_correct", "alpha"} - set(batch_stats))
        if missing:
            raise KeyError(f"batch_stats lacks {missing} (see dcpo_batch_stats)")
        H, T, a = float(batch_stats["H"]), float(batch_stats["T"]), float(batch_stats["alpha"])
        if double_is and weight == "rho":
            key = next((k for k in temp_logps if abs(float(k) - T) < 1e-9), None)
            if key is None:
                raise KeyError(f"temp_logps has temperatures {sorted(map(float, temp_logps))}, DCPO chose T={T}")
            lpT = torch.where(valid, temp_logps[key].detach().to(m.dtype), 0.0)
            rho = torch.exp(lpT - old) * m
        else:
            rho = m.clone()
        correct = (rewards.detach() > correct_threshold).to(m.dtype)
        adv_t = dcpo_advantages(adv, correct, rho, alpha=a, combine=combine) * m
    loss, metrics = _clipped_pg("dcpo", lp, old, m, adv_t, entropies, epsilon=epsilon, epsilon_high=epsilon_high,
                                dual_clip=dual_clip, aggregation=aggregation, norm_len=norm_len)
    rv = rho[valid] if bool(valid.any()) else rho.new_ones(1)
    metrics.update({
        "dcpo/alpha": a, "dcpo/T": T, "dcpo/H": H, "dcpo/frac_correct": float(batch_stats["frac_correct"]),
        "dcpo/rho_mean": float(rv.mean()), "dcpo/rho_max": float(rv.max()), "dcpo/rho_min": float(rv.min()),
        "dcpo/adv_mean": _masked_mean(adv_t, m),
    })
    return loss, metrics


def _fixed_alpha(alpha: float | str) -> float:
    """The J presets' α: a number (DCPO's adaptive α is DCPO's own)."""
    if isinstance(alpha, str):
        raise ValueError(f"the J presets take a fixed numeric alpha, got {alpha!r}")
    return alpha


@register_loss("j1", requires=("rewards", "entropies", "batch_stats"), batch_stats=_dcpo_stats_spec)
def j1_loss(
    logps: torch.Tensor,
    old_logps: torch.Tensor | None,
    mask: torch.Tensor,
    advantages: torch.Tensor,
    *,
    rewards: torch.Tensor,
    entropies: torch.Tensor | None = None,
    batch_stats: dict[str, float] | None = None,
    entropy_base: float = 0.5,
    t_high: float = 1.2,
    t_low: float = 0.8,
    alpha: float | str = 0.1,
    alpha_cap: float = 0.1,
    double_is: bool = True,
    correct_threshold: float = 0.05,
    entropy_source: str = "nll",
    entropy_from: str = "previous_step",
    epsilon: float = 0.2,
    epsilon_high: float | None = None,
    dual_clip: float | None = 3.0,
    aggregation: str = "token-mean",
    norm_len: float | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """DCPO Table 1, J1: J = J_GRPO + α·J_reg with the REINFORCE regularizer on samples from π_old, weight 1.

    Equals :func:`dcpo_loss` with ``combine="additive"``, ``weight="one"`` and a fixed ``alpha`` (Ã = Â + α·R_i).
    Other kwargs as :func:`dcpo_loss` (T is still chosen and logged, not used); shapes as there."""
    return dcpo_loss(logps, old_logps, mask, advantages, rewards=rewards, temp_logps={}, entropies=entropies,
                     batch_stats=batch_stats, entropy_base=entropy_base, t_high=t_high, t_low=t_low,
                     alpha=_fixed_alpha(alpha), alpha_cap=alpha_cap, combine="additive", double_is=double_is,
                     weight="one", correct_threshold=correct_threshold, entropy_source=entropy_source,
                     entropy_from=entropy_from, epsilon=epsilon, epsilon_high=epsilon_high, dual_clip=dual_clip,
                     aggregation=aggregation, norm_len=norm_len)


@register_loss("j3", requires=("rewards", "temp_logps", "entropies", "batch_stats"), temperatures=_dcpo_temps,
               batch_stats=_dcpo_stats_spec)
def j3_loss(
    logps: torch.Tensor,
    old_logps: torch.Tensor | None,
    mask: torch.Tensor,
    advantages: torch.Tensor,
    *,
    rewards: torch.Tensor,
    temp_logps: dict[float, torch.Tensor],
    entropies: torch.Tensor | None = None,
    batch_stats: dict[str, float] | None = None,
    entropy_base: float = 0.5,
    t_high: float = 1.2,
    t_low: float = 0.8,
    alpha: float | str = 0.1,
    alpha_cap: float = 0.1,
    double_is: bool = True,
    correct_threshold: float = 0.05,
    entropy_source: str = "nll",
    entropy_from: str = "previous_step",
    epsilon: float = 0.2,
    epsilon_high: float | None = None,
    dual_clip: float | None = 3.0,
    aggregation: str = "token-mean",
    norm_len: float | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """DCPO Table 1, J3: samples from π_old, importance weight ρ = π_old^T/π_old (DCPO's regularizer with a fixed
    α, additive: Ã = Â + α·R_i·ρ_{i,t}). Unbiased for the π_old^T expectation of R·∇log π. Other kwargs as
    :func:`dcpo_loss`; shapes as there."""
    return dcpo_loss(logps, old_logps, mask, advantages, rewards=rewards, temp_logps=temp_logps, entropies=entropies,
                     batch_stats=batch_stats, entropy_base=entropy_base, t_high=t_high, t_low=t_low,
                     alpha=_fixed_alpha(alpha), alpha_cap=alpha_cap, combine="additive", double_is=double_is,
                     weight="rho", correct_threshold=correct_threshold, entropy_source=entropy_source,
                     entropy_from=entropy_from, epsilon=epsilon, epsilon_high=epsilon_high, dual_clip=dual_clip,
                     aggregation=aggregation, norm_len=norm_len)


# ---------------------------------------------------------------------------
# Losses on extra temperature-T rollouts: AEPO, J2, J4 (DCPO Table 1; github.com/597358816/AEPO)
# ---------------------------------------------------------------------------


def _spec_kwargs(kw: dict, names: tuple[str, ...]) -> dict:
    return {k: kw[k] for k in names if k in kw}


_SPEC_KEYS = ("fraction", "entropy_base", "t_high", "t_low", "entropy_source")
_AEPO_SPEC_KEYS = _SPEC_KEYS + ("min_advantage", "reinforce_sample_num")

AEPO_FRACTION = 0.25
"""Share of the prompts AEPO samples again at T: the authors' trainer since 597358816/AEPO commit 1a3e368
(2025-11-24, kept at 15dc716) takes ``gen_batch_bak[:len(gen_batch_bak) // 4]``; the older 07f16ff resampled the
whole batch (``fraction: 1.0``)."""


def _aepo_spec(kw: dict) -> ExtraRollouts:
    return ExtraRollouts(placement="replace", fraction=float(kw.get("fraction", AEPO_FRACTION)),
                         min_advantage=float(kw.get("min_advantage", 0.05)), set_advantage=1.0,
                         max_rows=kw.get("reinforce_sample_num", 60), halve_above_base=True,
                         **_spec_kwargs(kw, ("entropy_base", "t_high", "t_low", "entropy_source")))


@register_loss("aepo", requires=("rollout_flags",), extra_rollouts=_aepo_spec, spec_params=_AEPO_SPEC_KEYS)
def aepo_loss(
    logps: torch.Tensor,
    old_logps: torch.Tensor | None,
    mask: torch.Tensor,
    advantages: torch.Tensor,
    *,
    rollout_flags: torch.Tensor,
    epsilon: float = 0.2,
    epsilon_high: float | None = None,
    dual_clip: float | None = 3.0,
    aggregation: str = "token-mean",
    norm_len: float | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """AEPO (597358816/AEPO ``verl/trainer/ray_trainer.py`` at 15dc716): GRPO's PPO loss on a batch in which up to
    ``reinforce_sample_num`` temperature-T samples with GRPO advantage > ``min_advantage`` (0.05) replace the
    first on-policy rows, with their advantage set to 1 (half as many when H > H0).

    The substitution is the rollout spec (:class:`ExtraRollouts`, placement ``"replace"``) that the trainer
    applies before this function runs; the loss itself is the clipped surrogate (ε 0.2, dual clip 3.0 as
    DCPO) aggregated ``token-mean``. Spec kwargs (read at registration, not passed here): ``fraction``
    (default :data:`AEPO_FRACTION` = 0.25, the authors' code since 1a3e368; 1.0 reproduces the older 07f16ff),
    ``entropy_base``, ``t_high``, ``t_low``, ``entropy_source`` (H: the previous step's token-mean −log π of the
    sampled tokens, as the authors), ``min_advantage``, ``reinforce_sample_num`` (an absolute row count over the
    whole rollout batch, all processes together, as on the authors' driver; scale it with the batch).

    Shapes: logps/old_logps/mask (B, T); advantages (B,) or (B, T); rollout_flags (B,) 1 on substituted rows.
    Metrics: ``aepo/frac_substituted`` plus clip fractions, log-ratio mean/std under ``aepo/``.
    """
    lp, old, m, adv, _valid = _prep_tokens(logps, old_logps, mask, advantages)
    loss, metrics = _clipped_pg("aepo", lp, old, m, adv * m, None, epsilon=epsilon, epsilon_high=epsilon_high,
                                dual_clip=dual_clip, aggregation=aggregation, norm_len=norm_len)
    metrics["aepo/frac_substituted"] = float(rollout_flags.float().mean()) if rollout_flags.numel() else 0.0
    return loss, metrics


def _append_spec(kw: dict) -> ExtraRollouts:
    return ExtraRollouts(placement="append", **_spec_kwargs(kw, _SPEC_KEYS))


def _j4_temps(kw: dict) -> tuple[float, float]:
    spec = _append_spec(kw)  # J4 scores its extra rows at the temperatures they were sampled at
    return (spec.t_high, spec.t_low)


def _j_extra(prefix, logps, old_logps, mask, advantages, rewards, rollout_flags, weight_fn, *, alpha,
             correct_threshold, epsilon, epsilon_high, dual_clip, aggregation, norm_len):
    """J = J_GRPO(on-policy rows, Â) + α·J_reg(extra rows, R_i·w_{i,t}), each aggregated over its own rows."""
    lp, old, m, adv, valid = _prep_tokens(logps, old_logps, mask, advantages)
    B = lp.shape[0]
    if rewards.shape != (B,) or rollout_flags.shape != (B,):
        raise ValueError(f"rewards {tuple(rewards.shape)} and rollout_flags {tuple(rollout_flags.shape)} must be ({B},)")
    extra = rollout_flags.to(m.dtype)[:, None]
    m_on, m_x = m * (1.0 - extra), m * extra
    with torch.no_grad():
        correct = (rewards.detach() > correct_threshold).to(m.dtype)
        w = weight_fn(old, valid)
        adv_x = correct[:, None] * w * m_x
    pg, metrics = _clipped_pg(prefix, lp, old, m_on, adv * m_on, None, epsilon=epsilon, epsilon_high=epsilon_high,
                              dual_clip=dual_clip, aggregation=aggregation, norm_len=norm_len)
    reg, _ = _clipped_pg(prefix, lp, old, m_x, adv_x, None, epsilon=epsilon, epsilon_high=epsilon_high,
                         dual_clip=dual_clip, aggregation=aggregation, norm_len=norm_len)
    n_x = int(rollout_flags.sum())
    wv = w[(m_x > 0)] if bool((m_x > 0).any()) else w.new_ones(1)
    metrics.update({
        f"{prefix}/alpha": float(alpha), f"{prefix}/pg_loss": float(pg.detach()), f"{prefix}/reg_loss": float(reg.detach()),
        f"{prefix}/extra_rows": float(n_x),
        f"{prefix}/extra_frac_correct": float((correct * rollout_flags.to(m.dtype)).sum() / max(n_x, 1)),
        f"{prefix}/weight_mean": float(wv.mean()), f"{prefix}/weight_max": float(wv.max()),
    })
    return pg + alpha * reg, metrics


@register_loss("j2", requires=("rewards", "rollout_flags"), extra_rollouts=_append_spec, spec_params=_SPEC_KEYS)
def j2_loss(
    logps: torch.Tensor,
    old_logps: torch.Tensor | None,
    mask: torch.Tensor,
    advantages: torch.Tensor,
    *,
    rewards: torch.Tensor,
    rollout_flags: torch.Tensor,
    alpha: float = 0.1,
    correct_threshold: float = 0.05,
    epsilon: float = 0.2,
    epsilon_high: float | None = None,
    dual_clip: float | None = 3.0,
    aggregation: str = "token-mean",
    norm_len: float | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """DCPO Table 1, J2 (AEPO's regularizer): J = J_GRPO + α·J_reg, J_reg = E_{y~π_old^T}[R(y)·∇log π(y)]
    estimated on extra samples drawn at temperature T, weight 1.

    The extra rows come from the rollout spec (placement ``"append"``; kwargs ``fraction``, ``entropy_base``,
    ``t_high``, ``t_low``). The on-policy rows (``rollout_flags == 0``) give the clipped GRPO loss with their Â;
    the extra rows the clipped loss with advantage R_i = 1[r_i > correct_threshold]; each part is aggregated over
    its own rows and the parts are added with weight α. Shapes: logps/old_logps/mask (B, T); advantages (B,);
    rewards, rollout_flags (B,). Metrics under ``j2/`` (α, both parts, extra rows, their correct fraction).
    """
    return _j_extra("j2", logps, old_logps, mask, advantages, rewards, rollout_flags,
                    lambda old, valid: torch.ones_like(old), alpha=alpha, correct_threshold=correct_threshold,
                    epsilon=epsilon, epsilon_high=epsilon_high, dual_clip=dual_clip, aggregation=aggregation,
                    norm_len=norm_len)


@register_loss("j4", requires=("rewards", "rollout_flags", "rollout_temps", "temp_logps"),
               temperatures=_j4_temps, extra_rollouts=_append_spec, spec_params=_SPEC_KEYS)
def j4_loss(
    logps: torch.Tensor,
    old_logps: torch.Tensor | None,
    mask: torch.Tensor,
    advantages: torch.Tensor,
    *,
    rewards: torch.Tensor,
    rollout_flags: torch.Tensor,
    rollout_temps: torch.Tensor,
    temp_logps: dict[float, torch.Tensor],
    alpha: float = 0.1,
    correct_threshold: float = 0.05,
    epsilon: float = 0.2,
    epsilon_high: float | None = None,
    dual_clip: float | None = 3.0,
    aggregation: str = "token-mean",
    norm_len: float | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """DCPO Table 1, J4: samples from π_old^T with importance weight 1/ρ = π_old/π_old^T, i.e. the regularizer
    estimates E_{y~π_old}[R·∇log π] from temperature-T samples (the paper reports that J4 collapses entropy).

    As :func:`j2_loss` with w_{i,t} = exp(ℓ^old_{i,t} − ℓ^{old,T}_{i,t}) on the extra rows, T the row's sampling
    temperature (``rollout_temps``), ℓ^{old,T} from ``temp_logps`` (the trainer scores every declared T).
    Shapes additionally: rollout_temps (B,); temp_logps {T: (B, T)}. Metrics under ``j4/``.
    """
    def inverse_rho(old, valid):
        w = torch.ones_like(old)
        for T in torch.unique(rollout_temps[rollout_flags > 0]).tolist():
            key = next((k for k in temp_logps if abs(float(k) - T) < 1e-6), None)
            if key is None:
                raise KeyError(f"temp_logps has temperatures {sorted(map(float, temp_logps))}; extra rows were "
                               f"sampled at T={T}")
            rows = ((rollout_flags > 0) & (abs(rollout_temps - T) < 1e-6))[:, None] & valid
            lpT = temp_logps[key].detach().to(old.dtype)
            w = torch.where(rows, torch.exp(old - torch.where(valid, lpT, 0.0)), w)
        return w

    return _j_extra("j4", logps, old_logps, mask, advantages, rewards, rollout_flags, inverse_rho, alpha=alpha,
                    correct_threshold=correct_threshold, epsilon=epsilon, epsilon_high=epsilon_high,
                    dual_clip=dual_clip, aggregation=aggregation, norm_len=norm_len)
