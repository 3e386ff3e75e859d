"""The loss registry: name -> loss function, plus what each loss declares at registration.

Modelled on verl's ``core_algos`` registry: :func:`register_loss` is a decorator that stores a loss
function under a name together with the extra tensors it ``requires``, its configurable keyword
arguments, and optional declarations (soft-value β, on-policy-inert terms, scoring temperatures,
extra rollouts, batch statistics). Each name has one frozen :class:`LossEntry`, and :func:`loss_entry` is the one
lookup: the trainer and the config checks ask the entry (``entry.fn``, ``entry.requires``,
``entry.call_kwargs(kwargs)``, ``entry.temperatures(kwargs)``, ...), so neither ever hard-codes a loss. Every registered function has the common signature::

    fn(logps, old_logps, mask, advantages, *, <cfg kwargs>, **extra_tensors)
        -> (loss: Tensor scalar, metrics: dict[str, float])

This module imports no loss; the loss modules import it.
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Callable, Iterable

from dgro_lib.losses.specs import BatchStatistics, ExtraRollouts

LossFn = Callable[..., "tuple[torch.Tensor, dict[str, float]]"]



@dataclasses.dataclass(frozen=True)
class LossEntry:
    """Everything one loss declared at registration (one record per name; :func:`register_loss` writes it), and the
    questions the trainer and the config checks ask of it, each a method of the kwargs ``loss.kwargs`` sets
    (validated, the function's own defaults filled in)."""

    name: str
    fn: LossFn
    requires: tuple[str, ...] = ()
    """Extra tensors the trainer computes and passes."""
    params: tuple[str, ...] | None = ()
    """Its keyword arguments; None: TRL's own loss, whose kwargs are GRPOConfig fields."""
    spec_params: tuple[str, ...] = ()
    """Keys of ``loss.kwargs`` read only by the extra-rollout rule."""
    temperatures_rule: Callable[[dict], tuple[float, ...]] | None = None
    extra_rollouts_rule: Callable[[dict], ExtraRollouts] | None = None
    soft_beta_rule: Callable[[dict], float] | None = None
    on_policy_inert_rule: Callable[[dict], Iterable[str]] | None = None
    batch_stats_rule: Callable[[dict], BatchStatistics] | None = None

    @property
    def trl_loss_type(self) -> str | None:
        """TRL ``loss_type`` the entry delegates to (``grpo``, ``dapo``, ...), or None for our own losses."""
        return getattr(self.fn, "trl_loss_type", None)

    @property
    def kwarg_names(self) -> tuple[str, ...]:
        """Every key ``loss.kwargs`` may set: the function's keyword arguments plus the keys its extra-rollout rule
        reads; for TRL's own losses the ``trl.GRPOConfig`` fields."""
        if self.params is None:
            return _trl_config_fields()
        return self.params + tuple(k for k in self.spec_params if k not in self.params)

    def validate(self, kwargs: dict | None) -> None:
        """Refuse keys the loss does not take: ``ValueError`` naming the key and listing the valid ones (a typo such
        as ``beta_2`` would otherwise be dropped without a word)."""
        valid = self.kwarg_names
        bad = sorted(k for k in (kwargs or {}) if k not in valid)
        if bad:
            trl = self.params is None
            what = "trl.GRPOConfig fields (TRL's own loss)" if trl else "its keyword arguments"
            shown = "e.g. epsilon, epsilon_high, beta, delta" if trl else ", ".join(sorted(valid))
            raise ValueError(f"loss {self.name!r} has no parameter {bad[0]!r}"
                             + (f" (nor {bad[1:]})" if len(bad) > 1 else "") + f"; valid: {what}: {shown}")

    def call_kwargs(self, kwargs: dict | None) -> dict:
        """The part of ``kwargs`` passed to the function (the extra-rollout rule's own keys are left out); validates
        first."""
        self.validate(kwargs)
        return {k: v for k, v in (kwargs or {}).items() if k in (self.params or ())}

    def _resolved(self, kwargs: dict | None) -> dict:
        """``kwargs`` with the function's own defaults filled in (so a declared quantity never depends on a default
        written a second time elsewhere)."""
        self.validate(kwargs)
        out = {}
        if self.params is not None:
            for p in inspect.signature(self.fn).parameters.values():
                if p.name in self.params and p.default is not inspect.Parameter.empty:
                    out[p.name] = p.default
        out.update(kwargs or {})
        return out

    def soft_beta(self, kwargs: dict | None = None) -> float:
        """β of the soft value baseline V = β·log mean exp(r/β) (``loss.value: soft``; DGRO Eq. 15: β = 2β2/β1);
        ``ValueError`` when the loss defines none."""
        if self.soft_beta_rule is None:
            have = ", ".join(sorted(n for n, e in _REGISTRY.items() if e.soft_beta_rule is not None)) or "none"
            raise ValueError(f"loss {self.name!r} defines no soft-value temperature beta (value: soft); losses that "
                             f"do: {have}")
        return float(self.soft_beta_rule(self._resolved(kwargs)))

    def on_policy_inert(self, kwargs: dict | None = None) -> tuple[str, ...]:
        """The kwargs whose term has zero gradient with one on-policy update per rollout batch (``()`` when none, or
        when they are 0 anyway), e.g. DGRO's ``beta2``."""
        rule = self.on_policy_inert_rule
        return tuple(rule(self._resolved(kwargs))) if rule is not None else ()

    def batch_statistics(self, kwargs: dict | None = None) -> BatchStatistics | None:
        """The :class:`BatchStatistics` the loss needs once per rollout batch, or None."""
        rule = self.batch_stats_rule
        return rule(self._resolved(kwargs)) if rule is not None else None

    def temperatures(self, kwargs: dict | None = None) -> tuple[float, ...]:
        """Temperatures at which the loss needs log-probs (``temp_logps``; ``()`` for none)."""
        rule = self.temperatures_rule
        return rule(self._resolved(kwargs)) if rule is not None else ()

    def extra_rollouts(self, kwargs: dict | None = None) -> ExtraRollouts | None:
        """The extra rollouts the loss needs per rollout batch, or None."""
        rule = self.extra_rollouts_rule
        return rule(dict(kwargs or {})) if rule is not None else None


_REGISTRY: dict[str, LossEntry] = {}

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
            computes and passes exactly those; see :attr:`LossEntry.requires`.
        temperatures: for losses requiring ``"temp_logps"``: a function of the loss kwargs
            returning the temperatures T at which the trainer must score the batch
            (see :meth:`LossEntry.temperatures`).
        extra_rollouts: a function of the loss kwargs returning the :class:`ExtraRollouts` the trainer
            must generate for each rollout batch (see :meth:`LossEntry.extra_rollouts`).
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
        old = _REGISTRY.get(name)
        if old is not None and (old.fn.__module__, old.fn.__qualname__) != (fn.__module__, fn.__qualname__):
            raise ValueError(f"loss {name!r} is already registered to {old.fn.__module__}.{old.fn.__qualname__}")
        own = None if trl else (tuple(params) if params is not None else _signature_params(name, fn, req))
        temps = None if temperatures is None else (lambda kw: tuple(float(t) for t in temperatures(kw)))
        _REGISTRY[name] = LossEntry(name=name, fn=fn, requires=req, params=own, spec_params=tuple(spec_params),
                                    temperatures_rule=temps, extra_rollouts_rule=extra_rollouts,
                                    soft_beta_rule=soft_beta, on_policy_inert_rule=on_policy_inert,
                                    batch_stats_rule=batch_stats)
        return fn

    return decorator


def unregister_loss(name: str) -> None:
    """Remove the loss ``name`` from the registry (a test's or a plugin's own loss); unknown name: nothing to do."""
    _REGISTRY.pop(name, None)


def _unknown(name: str) -> KeyError:
    return KeyError(f"unknown loss {name!r}; valid names: {', '.join(list_losses())}")


def loss_entry(name: str) -> LossEntry:
    """The record the loss ``name`` registered; unknown name -> ``KeyError`` listing the valid names."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise _unknown(name) from None


def list_losses() -> list[str]:
    """Sorted names of all registered losses."""
    return sorted(_REGISTRY)


def _trl_config_fields() -> tuple[str, ...]:
    from trl import GRPOConfig  # imported on first use: importing trl takes seconds, and only TRL's losses need it

    return tuple(f.name for f in dataclasses.fields(GRPOConfig))
