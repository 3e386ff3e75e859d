"""What a loss declares at registration besides its function: the extra rollouts it needs
(:class:`ExtraRollouts`, AEPO and DCPO's J2/J4) and the once-per-rollout-batch scalars it reads
(:class:`BatchStatistics`, DCPO and J1/J3), with the entropy-to-temperature rule both use
(:func:`dcpo_temperature`).

The trainer reads these through the loss's registry entry
(:meth:`dgro_lib.losses.registry.LossEntry.extra_rollouts`, :meth:`~dgro_lib.losses.registry.LossEntry.batch_statistics`);
nothing here computes a loss.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

EXTRA_PLACEMENTS = ("replace", "append")
ENTROPY_SOURCES = ("nll", "full")
ENTROPY_FROM = ("previous_step", "rollout")


def dcpo_temperature(entropy: float, *, entropy_base: float = 0.5, t_high: float = 1.2, t_low: float = 0.8) -> float:
    """DCPO's target temperature: T_high when the policy entropy H <= H0 (sharpen less: explore), else T_low.

    The rule of the DCPO and AEPO authors' trainer (github.com/597358816/DCPO, ``verl/trainer/ray_trainer.py`` at
    15dc716); H, H0 (``entropy_base``) and T are scalars. Used for DCPO's ρ (:func:`dgro_lib.losses.dcpo.dcpo_loss`)
    and for the sampling temperature of extra rollouts (:meth:`ExtraRollouts.temperature`).
    """
    return float(t_high) if entropy <= entropy_base else float(t_low)


@dataclass(frozen=True)
class ExtraRollouts:
    """What a loss needs beyond the on-policy rollout batch: G more samples, at a temperature T chosen from the
    policy entropy, for a fraction of the batch's prompts (AEPO, DCPO's J2/J4). Declared at registration
    (``register_loss(..., extra_rollouts=fn(kwargs) -> ExtraRollouts)``); the trainer generates and scores them,
    and :func:`dgro_lib.rl.rollouts.merge_rollouts` puts them into the batch. Rows that came from these rollouts
    are flagged ``rollout_flags == 1`` and carry their temperature in ``rollout_temps``.

    Fields:
        placement: ``"replace"`` — the selected extra rows take the place of the *first* on-policy rows (the
            batch keeps its size; AEPO's ``concat([extra[:n], batch[n:]])``), or ``"append"`` — they are added
            after the on-policy rows (J2/J4: J_GRPO on the on-policy rows + α·J_reg on the extra rows).
        fraction: share of the batch's prompts (whole groups) that get extra rollouts, rounded, at least one.
        entropy_base, t_high, t_low: T = t_high if H <= entropy_base else t_low (the DCPO/AEPO rule), H the
            policy entropy of the *previous* optimizer step (0 before the first, so the first batch uses
            t_high), as the AEPO authors' trainer does.
        entropy_source: which estimate H is: ``"nll"`` the token-mean −log π of the sampled tokens during the
            previous step's update (the authors' ``actor/entropy_loss``), ``"full"`` the full-vocabulary entropy.
        min_advantage: keep only extra rows whose (group-normalised) advantage exceeds this (AEPO: 0.05).
        set_advantage: overwrite the kept rows' advantage with this value (AEPO: 1.0).
        max_rows: keep at most this many rows over the whole rollout batch, all processes together (AEPO's
            ``reinforce_sample_num``, 60, applied on the driver), halved when H > entropy_base if
            ``halve_above_base``.
    """

    placement: str
    fraction: float = 1.0
    entropy_base: float = 0.5
    t_high: float = 1.2
    t_low: float = 0.8
    entropy_source: str = "nll"
    min_advantage: float | None = None
    set_advantage: float | None = None
    max_rows: int | None = None
    halve_above_base: bool = False

    def __post_init__(self):
        if self.placement not in EXTRA_PLACEMENTS:
            raise ValueError(f"extra rollouts placement {self.placement!r}; valid: {', '.join(EXTRA_PLACEMENTS)}")
        if not 0.0 < self.fraction <= 1.0:
            raise ValueError(f"extra rollouts fraction must be in (0, 1], got {self.fraction!r}")
        if self.t_high <= 0 or self.t_low <= 0:
            raise ValueError(f"temperatures must be > 0, got t_high={self.t_high!r}, t_low={self.t_low!r}")
        if self.entropy_source not in ENTROPY_SOURCES:
            raise ValueError(f"entropy_source {self.entropy_source!r}; valid: {', '.join(ENTROPY_SOURCES)}")
        if self.max_rows is not None and self.max_rows < 0:
            raise ValueError(f"max_rows must be >= 0 or None, got {self.max_rows!r}")

    def temperature(self, entropy: float) -> float:
        """The sampling temperature of the extra rollouts for a policy entropy H (:func:`dcpo_temperature`)."""
        return dcpo_temperature(entropy, entropy_base=self.entropy_base, t_high=self.t_high, t_low=self.t_low)

    def n_prompts(self, n_local_prompts: int) -> int:
        """How many of ``n_local_prompts`` get extra rollouts."""
        return max(1, min(n_local_prompts, round(self.fraction * n_local_prompts)))

    def qualifying(self, advantages: torch.Tensor) -> torch.Tensor:
        """(N,) bool: the extra rows that qualify (advantage > ``min_advantage``; all when it is None)."""
        if self.min_advantage is None:
            return torch.ones_like(advantages, dtype=torch.bool)
        return advantages > self.min_advantage

    def candidates(self, advantages: torch.Tensor) -> int:
        """How many extra rows qualify (:meth:`qualifying`), before the row cap."""
        return int(self.qualifying(advantages).sum())


@dataclass(frozen=True)
class BatchStatistics:
    """Scalars a loss needs once per rollout batch, over all of its rows on all processes (DCPO's H, T, correct
    fraction and α), declared at registration (``register_loss(..., batch_stats=fn(kwargs) -> BatchStatistics)``).

    The trainer computes them when the rollout batch is generated, before TRL shuffles it and splits it into
    micro-batches, and passes ``batch_stats={...}`` to every loss call of that batch, so a micro-batch split or
    a second process cannot change them (the DCPO authors compute them on the driver).

    Fields:
        compute: ``compute(rewards, entropy) -> dict[str, float]`` with ``rewards`` (N,) the raw rewards of the
            whole rollout batch (every process's rows) and ``entropy`` the policy entropy H chosen below.
        entropy_source: ``"nll"`` (token-mean −log π of the sampled tokens) or ``"full"`` (full-vocabulary).
        entropy_from: ``"previous_step"`` — H measured during the previous rollout batch's update (the mean over
            its micro-batches and processes; 0 before the first; the authors' ``actor/entropy_loss`` lag) — or
            ``"rollout"`` — H of this rollout batch under π_old, from a no-grad scoring pass over all its tokens.
    """

    compute: Callable[[torch.Tensor, float], dict]
    entropy_source: str = "nll"
    entropy_from: str = "previous_step"

    def __post_init__(self):
        if self.entropy_source not in ENTROPY_SOURCES:
            raise ValueError(f"entropy_source {self.entropy_source!r}; valid: {', '.join(ENTROPY_SOURCES)}")
        if self.entropy_from not in ENTROPY_FROM:
            raise ValueError(f"entropy_from {self.entropy_from!r}; valid: {', '.join(ENTROPY_FROM)}")
