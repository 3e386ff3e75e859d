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

Notation: ℓ_{i,t} = log π_θ(y_{i,t} | x, y_{i,<t}), mask m_{i,t},
n_i = Σ_t m_{i,t}, sequence log-prob L_i = Σ_t m_{i,t} ℓ_{i,t}; "old" quantities
come from π_θold; r_i is the scalar reward, r̄ its group mean.
Paper equations refer to the DGRO paper (Decoupled Group Reward Optimization).
"""

from __future__ import annotations

import inspect
import math
from dataclasses import dataclass
from typing import Callable, Iterable

import torch

__all__ = [
    "AGGREGATIONS",
    "TRL_LOSSES",
    "aggregate",
    "aggregation_weights",
    "compute_advantages",
    "dcpo_advantages",
    "dcpo_loss",
    "dgro_loss",
    "dro_loss",
    "entropy_adv_loss",
    "entropy_reg_loss",
    "EXTRA_PLACEMENTS",
    "ExtraRollouts",
    "aepo_loss",
    "BatchStatistics",
    "dcpo_batch_stats",
    "grpo_verl_loss",
    "loss_batch_statistics",
    "loss_call_kwargs",
    "loss_on_policy_inert",
    "loss_params",
    "loss_soft_beta",
    "validate_loss_kwargs",
    "j2_loss",
    "j4_loss",
    "loss_extra_rollouts",
    "get_loss",
    "group_mean_baseline",
    "group_stats",
    "kimi_loss",
    "list_losses",
    "loss_requires",
    "loss_temperatures",
    "online_dpo_loss",
    "ppo_clip_per_token",
    "register_loss",
    "soft_value_baseline",
    "trl_loss_type",
]

LossFn = Callable[..., "tuple[torch.Tensor, dict[str, float]]"]

# ---------------------------------------------------------------------------
# Registry
# ---------------------------------------------------------------------------

_LOSSES: dict[str, LossFn] = {}
_REQUIRES: dict[str, tuple[str, ...]] = {}
_TEMPERATURES: dict[str, Callable[[dict], tuple[float, ...]]] = {}
_EXTRA_ROLLOUTS: dict[str, Callable[[dict], "ExtraRollouts"]] = {}
_PARAMS: dict[str, tuple[str, ...] | None] = {}  # None: TRL's own loss, its kwargs are GRPOConfig fields
_SPEC_PARAMS: dict[str, tuple[str, ...]] = {}
_SOFT_BETA: dict[str, Callable[[dict], float]] = {}
_ON_POLICY_INERT: dict[str, Callable[[dict], tuple[str, ...]]] = {}
_BATCH_STATS: dict[str, Callable[[dict], "BatchStatistics"]] = {}

EXTRA_PLACEMENTS = ("replace", "append")
ENTROPY_SOURCES = ("nll", "full")
ENTROPY_FROM = ("previous_step", "rollout")


@dataclass(frozen=True)
class ExtraRollouts:
    """What a loss needs beyond the on-policy rollout batch: G more samples, at a temperature T chosen from the
    policy entropy, for a fraction of the batch's prompts (AEPO, DCPO's J2/J4). Declared at registration
    (``register_loss(..., extra_rollouts=fn(kwargs) -> ExtraRollouts)``); the trainer generates and scores them,
    and :func:`dgro_lib.rollouts.merge_rollouts` puts them into the batch. Rows that came from these rollouts
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

    def candidates(self, advantages: torch.Tensor) -> int:
        """How many extra rows qualify (advantage > ``min_advantage``; all when it is None), before the row cap."""
        if self.min_advantage is None:
            return int(advantages.shape[0])
        return int((advantages > self.min_advantage).sum())


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


_POSITIONAL = ("logps", "old_logps", "mask", "advantages")


def _signature_params(name: str, fn: LossFn, requires: tuple[str, ...]) -> tuple[str, ...]:
    """The configurable keyword arguments of a loss function: its parameters after the four tensors, less the
    extra tensors it ``requires``. A loss that forwards ``**kwargs`` must list its parameters explicitly."""
    sig = inspect.signature(fn)
    if any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values()):
        raise ValueError(f"loss {name!r} takes **kwargs: register it with params=(...) naming its keyword arguments")
    names = [p for p in sig.parameters if p not in _POSITIONAL and p not in requires]
    return tuple(names)


def register_loss(
    name: str,
    *,
    requires: Iterable[str] = (),
    temperatures: Callable[[dict], Iterable[float]] | None = None,
    extra_rollouts: Callable[[dict], ExtraRollouts] | None = None,
    params: Iterable[str] | None = None,
    spec_params: Iterable[str] = (),
    soft_beta: Callable[[dict], float] | None = None,
    on_policy_inert: Callable[[dict], Iterable[str]] | None = None,
    batch_stats: Callable[[dict], BatchStatistics] | None = None,
    trl: bool = False,
) -> Callable[[LossFn], LossFn]:
    """Decorator registering a policy loss under ``name``.

    Args:
        name: registry key (what configs write, e.g. ``loss: dgro``).
        requires: names of extra tensors the loss reads from ``**extra_tensors``
            (for example ``"entropies"``, ``"ref_logps"``). Stored so the trainer
            computes and passes exactly those; see :func:`loss_requires`.
        temperatures: for losses requiring ``"temp_logps"``: a function of the loss kwargs
            returning the temperatures T at which the trainer must score the batch
            (see :func:`loss_temperatures`).
        extra_rollouts: a function of the loss kwargs returning the :class:`ExtraRollouts` the trainer
            must generate for each rollout batch (see :func:`loss_extra_rollouts`).
        params: the loss's keyword arguments (what ``loss.kwargs`` may set); default: read from the function's
            signature (every parameter after the four tensors, less ``requires``). Required for a function that
            forwards ``**kwargs``.
        spec_params: further keys of ``loss.kwargs`` read only by ``extra_rollouts`` (not passed to the function).
        soft_beta: a function of the loss kwargs (defaults filled in) giving β of the soft value baseline
            V = β·log mean exp(r/β) (``loss.value: soft``); losses without one refuse ``value: soft``.
        on_policy_inert: a function of the loss kwargs (defaults filled in) naming the kwargs whose term has zero
            gradient when π_θ = π_old (one on-policy update per rollout batch), e.g. DGRO's ``beta2``.
        batch_stats: a function of the loss kwargs (defaults filled in) returning the :class:`BatchStatistics`
            the trainer computes once per rollout batch and passes as ``batch_stats``.
        trl: TRL's own loss (``params`` are then the fields of ``trl.GRPOConfig``).

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
        own = None if trl else (tuple(params) if params is not None else _signature_params(name, fn, req))
        _LOSSES[name] = fn
        _REQUIRES[name] = req
        _PARAMS[name] = own
        _SPEC_PARAMS[name] = tuple(spec_params)
        for table, value in ((_SOFT_BETA, soft_beta), (_ON_POLICY_INERT, on_policy_inert), (_BATCH_STATS, batch_stats),
                             (_EXTRA_ROLLOUTS, extra_rollouts)):
            if value is not None:
                table[name] = value
            else:
                table.pop(name, None)
        if temperatures is not None:
            _TEMPERATURES[name] = lambda kw: tuple(float(t) for t in temperatures(kw))
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


def _trl_config_fields() -> tuple[str, ...]:
    import dataclasses

    from trl import GRPOConfig

    return tuple(f.name for f in dataclasses.fields(GRPOConfig))


def loss_params(name: str) -> tuple[str, ...]:
    """Every key ``loss.kwargs`` may set for the loss ``name``: its function's keyword arguments plus the keys its
    extra-rollout spec reads; for TRL's own losses the ``trl.GRPOConfig`` fields. Unknown name -> ``KeyError``."""
    if name not in _REQUIRES:
        raise _unknown(name)
    own = _PARAMS[name]
    if own is None:
        return _trl_config_fields()
    return own + tuple(k for k in _SPEC_PARAMS[name] if k not in own)


def validate_loss_kwargs(name: str, kwargs: dict | None) -> None:
    """Refuse keys that the loss ``name`` does not take: ``ValueError`` naming the key and listing the valid ones
    (a typo such as ``beta_2`` would otherwise be dropped without a word)."""
    valid = loss_params(name)
    bad = sorted(k for k in (kwargs or {}) if k not in valid)
    if bad:
        what = "trl.GRPOConfig fields (TRL's own loss)" if _PARAMS[name] is None else "its keyword arguments"
        shown = ", ".join(sorted(valid)) if _PARAMS[name] is not None else "e.g. epsilon, epsilon_high, beta, delta"
        raise ValueError(f"loss {name!r} has no parameter {bad[0]!r}" + (f" (nor {bad[1:]})" if len(bad) > 1 else "")
                         + f"; valid: {what}: {shown}")


def loss_call_kwargs(name: str, kwargs: dict | None) -> dict:
    """The part of ``kwargs`` passed to the loss function (the extra-rollout spec's own keys are left out);
    validates first (:func:`validate_loss_kwargs`)."""
    validate_loss_kwargs(name, kwargs)
    own = _PARAMS[name] or ()
    return {k: v for k, v in (kwargs or {}).items() if k in own}


def _resolved(name: str, kwargs: dict | None) -> dict:
    """``kwargs`` with the loss function's own defaults filled in (so a declared quantity never depends on a default
    written a second time elsewhere)."""
    validate_loss_kwargs(name, kwargs)
    out = {}
    if _PARAMS[name] is not None:
        for p in inspect.signature(_LOSSES[name]).parameters.values():
            if p.name in (_PARAMS[name] or ()) and p.default is not inspect.Parameter.empty:
                out[p.name] = p.default
    out.update(kwargs or {})
    return out


def loss_soft_beta(name: str, kwargs: dict | None = None) -> float:
    """β of the soft value baseline for the loss ``name`` configured with ``kwargs`` (DGRO Eq. 15: β = 2β2/β1);
    ``ValueError`` when the loss defines none."""
    if name not in _REQUIRES:
        raise _unknown(name)
    fn = _SOFT_BETA.get(name)
    if fn is None:
        have = ", ".join(sorted(_SOFT_BETA)) or "none"
        raise ValueError(f"loss {name!r} defines no soft-value temperature beta (value: soft); losses that do: {have}")
    return float(fn(_resolved(name, kwargs)))


def loss_on_policy_inert(name: str, kwargs: dict | None = None) -> tuple[str, ...]:
    """Names of the kwargs of ``name`` whose term has zero gradient with one on-policy update per rollout batch
    (``()`` when none, or when they are 0 anyway)."""
    if name not in _REQUIRES:
        raise _unknown(name)
    fn = _ON_POLICY_INERT.get(name)
    return tuple(fn(_resolved(name, kwargs))) if fn is not None else ()


def loss_batch_statistics(name: str, kwargs: dict | None = None) -> BatchStatistics | None:
    """The :class:`BatchStatistics` the loss ``name`` needs once per rollout batch, or None."""
    if name not in _REQUIRES:
        raise _unknown(name)
    fn = _BATCH_STATS.get(name)
    return fn(_resolved(name, kwargs)) if fn is not None else None


def loss_temperatures(name: str, kwargs: dict | None = None) -> tuple[float, ...]:
    """Temperatures at which the loss ``name`` (configured with ``kwargs``) needs log-probs (``()`` for none)."""
    if name not in _REQUIRES:
        raise _unknown(name)
    fn = _TEMPERATURES.get(name)
    return fn(_resolved(name, kwargs)) if fn is not None else ()


def loss_extra_rollouts(name: str, kwargs: dict | None = None) -> ExtraRollouts | None:
    """The extra rollouts the loss ``name`` (configured with ``kwargs``) needs per batch, or None."""
    if name not in _REQUIRES:
        raise _unknown(name)
    fn = _EXTRA_ROLLOUTS.get(name)
    return fn(dict(kwargs or {})) if fn is not None else None


def trl_loss_type(name: str) -> str | None:
    """TRL ``loss_type`` a registry entry delegates to (``grpo``, ``dapo``, ...), or None for our own losses."""
    return getattr(get_loss(name), "trl_loss_type", None)


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
    soft_beta: float | None = None,
    scale: str | None = None,
    eps: float = 1e-4,
) -> torch.Tensor:
    """Advantages A_i = r_i − V (B,) for contiguous groups of ``group_size``.

    - ``value="group_mean"``: V = r̄ (DGRO Eq. 6, Kimi k1.5);
      ``value="soft"``: V = :func:`soft_value_baseline` with β = ``soft_beta`` (for DGRO β = 2β2/β1, Eq. 15:
      the loss declares it, :func:`loss_soft_beta`).
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
            raise ValueError("value='soft' needs soft_beta (the loss's soft-value temperature, loss_soft_beta)")
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


# ---------------------------------------------------------------------------
# GRPO family: TRL's own implementation, reachable through the registry
# ---------------------------------------------------------------------------

TRL_LOSSES: tuple[str, ...] = ("grpo", "dapo", "dr_grpo", "bnpo")


def _trl_delegate(loss_type: str) -> LossFn:
    def fn(*args: object, **kwargs: object):
        raise RuntimeError(
            f"loss {loss_type!r} is trl.GRPOTrainer's own loss (loss_type={loss_type!r}); it runs inside "
            "DGROTrainer._compute_loss, which delegates to TRL, and has no standalone form here"
        )

    fn.__name__ = fn.__qualname__ = f"trl_{loss_type}"
    fn.__doc__ = (
        f"TRL's ``loss_type={loss_type!r}`` (clipped surrogate; optional k3 KL to the reference with "
        "GRPOConfig.beta > 0). Not re-implemented: :class:`dgro_lib.trainer.DGROTrainer` sets TRL's loss type and "
        "calls ``GRPOTrainer._compute_loss`` with our advantages (use ``scale: group_std`` for GRPO's)."
    )
    fn.trl_loss_type = loss_type  # type: ignore[attr-defined]
    return fn


for _lt in TRL_LOSSES:
    register_loss(_lt, trl=True)(_trl_delegate(_lt))


# ---------------------------------------------------------------------------
# PPO clipped surrogate (shared by DCPO, the J grid and the entropy baselines)
# ---------------------------------------------------------------------------


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


def _masked_mean(x: torch.Tensor, m: torch.Tensor) -> float:
    return float((x.to(m.dtype) * m).sum() / m.sum().clamp(min=1.0))


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


def _prep_tokens(logps, old_logps, mask, advantages):
    """:func:`_prepare` (fp32+, padding zeroed, advantages expanded to (B, T)) plus the validity mask."""
    lp, old, m, adv = _prepare(logps, old_logps, mask, advantages)
    return lp, old, m, adv, m > 0


# ---------------------------------------------------------------------------
# DCPO and the J1/J3 regularizers (recovered from the authors' code, 597358816/DCPO at 15dc716)
# ---------------------------------------------------------------------------

DCPO_COMBINE = ("convex", "additive")
DCPO_WEIGHTS = ("rho", "one")


def dcpo_temperature(entropy: float, *, entropy_base: float = 0.5, t_high: float = 1.2, t_low: float = 0.8) -> float:
    """DCPO's target temperature: T_high when the policy entropy H <= H0 (sharpen less: explore), else T_low."""
    return float(t_high) if entropy <= entropy_base else float(t_low)


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


def _j_preset(name: str, weight: str, requires: tuple[str, ...], doc: str) -> LossFn:
    """Register a DCPO Table 1 preset: :func:`dcpo_loss` with ``combine="additive"``, the given ``weight`` and a
    fixed numeric α (default 0.1). Its signature is DCPO's less the fixed arguments, so the registry validates
    and fills its kwargs like any other loss."""
    drop = {"combine", "weight"} | ({"temp_logps"} if "temp_logps" not in requires else set())
    sig = inspect.Signature([p.replace(default=0.1) if p.name == "alpha" else p
                             for p in inspect.signature(dcpo_loss).parameters.values() if p.name not in drop])

    def fn(*args, **kwargs):
        bound = sig.bind(*args, **kwargs)  # an unknown key is a TypeError, as for every loss
        bound.apply_defaults()
        kw = dict(bound.arguments)
        if isinstance(kw["alpha"], str):
            raise ValueError(f"the J presets take a fixed numeric alpha, got {kw['alpha']!r}")
        kw.setdefault("temp_logps", {})
        return dcpo_loss(**kw, combine="additive", weight=weight)

    fn.__signature__ = sig  # type: ignore[attr-defined]
    fn.__name__ = fn.__qualname__ = f"{name}_loss"
    fn.__doc__ = doc
    temps = _dcpo_temps if "temp_logps" in requires else None
    return register_loss(name, requires=requires, temperatures=temps, batch_stats=_dcpo_stats_spec)(fn)


j1_loss = _j_preset("j1", "one", ("rewards", "entropies", "batch_stats"), """DCPO Table 1, J1: J = J_GRPO + α·J_reg
    with the REINFORCE regularizer on samples from π_old, weight 1.

    Equals :func:`dcpo_loss` with ``combine="additive"``, ``weight="one"`` and a fixed ``alpha`` (Ã = Â + α·R_i).
    Other kwargs as :func:`dcpo_loss` (T is still chosen and logged, not used).""")

j3_loss = _j_preset("j3", "rho", ("rewards", "temp_logps", "entropies", "batch_stats"), """DCPO Table 1, J3: samples
    from π_old, importance weight ρ = π_old^T/π_old (DCPO's regularizer with a fixed α, additive:
    Ã = Â + α·R_i·ρ_{i,t}). Unbiased for the π_old^T expectation of R·∇log π. Other kwargs as :func:`dcpo_loss`.""")


# ---------------------------------------------------------------------------
# Losses on extra temperature-T rollouts: AEPO, J2, J4 (DCPO Table 1; 597358816/AEPO)
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


# ---------------------------------------------------------------------------
# Entropy baselines (DCPO Tables 2-3)
# ---------------------------------------------------------------------------


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


# ---------------------------------------------------------------------------
# Online DPO (DGRO Fig. 3 baseline): pairwise DPO on each group's best and worst sample
# ---------------------------------------------------------------------------


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
