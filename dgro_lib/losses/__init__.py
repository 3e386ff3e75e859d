"""Pure loss and advantage functions behind one name registry.

Modelled on verl's ``core_algos``: every policy loss is a plain function with the
same signature, registered by name, returning ``(loss, metrics)``::

    fn(logps, old_logps, mask, advantages, *, <cfg kwargs>, **extra_tensors)
        -> (loss: Tensor scalar, metrics: dict[str, float])

Shapes: ``logps``, ``old_logps``, ``mask`` are ``(B, T)`` (B responses, T padded
completion tokens; mask 1 on real tokens, 0 on padding); ``advantages`` is ``(B,)``
(one value per response) or ``(B, T)``. Extra tensors a loss needs (entropies,
reference log-probs, ...) are declared with ``register_loss(name, requires=...)``
so that the trainer knows what to pass; ``loss_entry(name).requires`` reads them back.

Nothing in here reads a config object: every knob is a keyword argument. No ``**kwargs`` catch-all: an unknown
keyword is a TypeError.

The extra tensors the trainer can pass (each declared with ``requires=``): ``entropies`` (B, T, with grad),
``rewards`` (B,) raw, ``group_ids`` (B,), ``ref_logps`` (B, T; TRL computes them only when GRPOConfig.beta != 0),
``sampling_logps`` (B, T), ``temp_logps`` ({T: (B, T)} detached log pi_old^T for the temperatures a loss declares
with ``register_loss(..., temperatures=fn(kwargs))``, scored once at generation time), ``batch_stats`` (the loss's
``BatchStatistics`` for the current rollout batch, over all processes; None in evaluation), ``rollout_flags`` (B,)
1.0 on rows of extra rollouts and ``rollout_temps`` (B,) each row's sampling temperature (losses registered with
``extra_rollouts=``), ``values`` (B,) V_phi(x) with the value head's graph. A loss sees the whole micro-batch at once
whatever ``train.forward_chunk_rows`` is (outputs padded back to (B, T) with zeros where the mask is 0: a loss must
not read masked positions). TRL's own losses (``grpo``, ``dapo``, ``dr_grpo``, ``bnpo``) are entries whose function
carries ``trl_loss_type``: the trainer then sets ``GRPOConfig.loss_type`` and calls TRL's ``_compute_loss``.

Notation: ℓ_{i,t} = log π_θ(y_{i,t} | x, y_{i,<t}), mask m_{i,t},
n_i = Σ_t m_{i,t}, sequence log-prob L_i = Σ_t m_{i,t} ℓ_{i,t}; "old" quantities
come from π_θold; r_i is the scalar reward, r̄ its group mean.
"DGRO" is the paper Decoupled Group Reward Optimization; "DCPO" follows the authors'
code (github.com/597358816/DCPO at commit 15dc716), since its text lost the equations.

Map of the modules (importing this package imports them all, so every loss is registered):

============================  ==========================================================================
module                        contents
============================  ==========================================================================
:mod:`.registry`              ``register_loss`` and the one lookup ``loss_entry(name)``: its ``fn``,
                              ``requires``, ``call_kwargs``, ``soft_beta`` (β = 2β2/β1, DGRO Eq. 15), ...
:mod:`.specs`                 what a loss declares besides its function: ``ExtraRollouts``,
                              ``BatchStatistics``, the DCPO/AEPO temperature rule ``dcpo_temperature``
:mod:`.tensor_checks`         the common checks on the four tensors (``_prepare``)
:mod:`.aggregation`           ``aggregate`` / ``aggregation_weights``: token-mean, seq-mean-token-mean,
                              seq-mean-token-sum (DGRO Eq. 4/6), seq-mean-token-sum-norm (Dr.GRPO)
:mod:`.advantages`            group mean baseline (DGRO Eq. 6), soft value baseline (DGRO Eq. 2, 15;
                              limits in Appendix E), ``compute_advantages``, ``group_stats``
:mod:`.dgro`                  ``dgro_loss`` (DGRO Eq. 4, gradient Eq. 5, group estimate Eq. 6),
                              ``kimi_loss`` (Table 1, Eq. 14), ``dro_loss`` (Table 1, Eq. 13)
:mod:`.ppo`                   ``ppo_clip_per_token`` (PPO clip, dual clip), ``grpo_verl_loss``,
                              TRL's own ``grpo``/``dapo``/``dr_grpo``/``bnpo`` (``TRL_LOSSES``)
:mod:`.dcpo`                  ``dcpo_loss`` and its rules (``dcpo_alpha``, ``dcpo_batch_stats``,
                              ``dcpo_advantages``), DCPO Table 1's J1–J4, ``aepo_loss``
:mod:`.baselines`             Entropy-Reg, Entropy-Adv (DCPO Tables 2–3), Online DPO (DGRO Fig. 3)
============================  ==========================================================================

Dependencies point one way: ``specs`` <- ``registry`` <- the loss modules; ``tensor_checks``, ``aggregation`` and
``advantages`` import nothing of the package; ``dcpo`` and ``baselines`` use ``ppo``'s clipped surrogate.
"""

from __future__ import annotations

from dgro_lib.losses.registry import (
    LossEntry,
    LossFn,
    loss_entry,
    list_losses,
    register_loss,
    unregister_loss,
)
from dgro_lib.losses.specs import ENTROPY_FROM, ENTROPY_SOURCES, EXTRA_PLACEMENTS, BatchStatistics, ExtraRollouts, dcpo_temperature
from dgro_lib.losses.aggregation import AGGREGATIONS, aggregate, aggregation_weights
from dgro_lib.losses.advantages import SCALES, VALUES, compute_advantages, group_mean_baseline, group_stats, soft_value_baseline
from dgro_lib.losses.dgro import RATIO_LEVELS, dgro_loss, dro_loss, kimi_loss
from dgro_lib.losses.ppo import TRL_LOSSES, bnpo_loss, dapo_loss, dr_grpo_loss, grpo_loss, grpo_verl_loss, ppo_clip_per_token
from dgro_lib.losses.dcpo import (
    AEPO_FRACTION,
    DCPO_COMBINE,
    DCPO_WEIGHTS,
    aepo_loss,
    dcpo_advantages,
    dcpo_alpha,
    dcpo_batch_stats,
    dcpo_loss,
    j1_loss,
    j2_loss,
    j3_loss,
    j4_loss,
)
from dgro_lib.losses.baselines import entropy_adv_loss, entropy_reg_loss, online_dpo_loss

__all__ = [  # every name imported above, sorted (tests/test_structure.py checks both)
    "AEPO_FRACTION",
    "AGGREGATIONS",
    "BatchStatistics",
    "DCPO_COMBINE",
    "DCPO_WEIGHTS",
    "ENTROPY_FROM",
    "ENTROPY_SOURCES",
    "EXTRA_PLACEMENTS",
    "ExtraRollouts",
    "LossEntry",
    "LossFn",
    "RATIO_LEVELS",
    "SCALES",
    "TRL_LOSSES",
    "VALUES",
    "aepo_loss",
    "aggregate",
    "aggregation_weights",
    "bnpo_loss",
    "compute_advantages",
    "dapo_loss",
    "dcpo_advantages",
    "dcpo_alpha",
    "dcpo_batch_stats",
    "dcpo_loss",
    "dcpo_temperature",
    "dgro_loss",
    "dr_grpo_loss",
    "dro_loss",
    "entropy_adv_loss",
    "entropy_reg_loss",
    "group_mean_baseline",
    "group_stats",
    "grpo_loss",
    "grpo_verl_loss",
    "j1_loss",
    "j2_loss",
    "j3_loss",
    "j4_loss",
    "kimi_loss",
    "list_losses",
    "loss_entry",
    "online_dpo_loss",
    "ppo_clip_per_token",
    "register_loss",
    "soft_value_baseline",
    "unregister_loss",
]
