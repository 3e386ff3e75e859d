"""A rollout batch beside TRL's dict: extra temperature-T rollouts merged in (AEPO's substitution, J2/J4's extra
rows), the loss's batch statistics carried in the dict (:func:`put_batch_stats`), and the typed values the trainer
keeps (:class:`ScoredRollouts`, :class:`RolloutRecord`, :class:`EntropyTracker`).

A pure function on the dict of row-aligned tensors that ``GRPOTrainer._generate_and_score_completions``
returns, so the selection and padding rules are tested without a trainer. What to do is declared by the
loss (:class:`dgro_lib.losses.ExtraRollouts`); the trainer only generates, scores and calls
:func:`merge_rollouts`.

Layout of the batch dicts (TRL 1.16): ``prompt_ids``/``prompt_mask`` (B, P) left-padded;
``completion_ids``/``completion_mask`` and per-token tensors (``old_per_token_logps``, ``ref_per_token_logps``,
``sampling_per_token_logps``, ``importance_sampling_ratio``, ``tool_mask``) (B, C) right-padded; per-row
tensors (``advantages``, ``rewards``, ``group_ids``, ...) (B,); ``num_items_in_batch`` a 0-dim count.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import torch

from dgro_lib.losses import ExtraRollouts

__all__ = ["allocate_extra_rows", "merge_rollouts", "select_extra_rows", "BATCH_STATS", "put_batch_stats",
           "get_batch_stats", "ScoredRollouts", "RolloutRecord", "EntropyTracker"]

_LEFT_PADDED = {"prompt_ids": "pad", "prompt_mask": 0}
_RIGHT_PADDED = {"completion_ids": "pad", "completion_mask": 0, "old_per_token_logps": 0.0,
                 "ref_per_token_logps": 0.0, "sampling_per_token_logps": 0.0, "importance_sampling_ratio": 1.0,
                 "tool_mask": 1, "old_temp_logps": 0.0}
_RECOUNTED = ("num_items_in_batch",)


def allocate_extra_rows(counts: Sequence[int], spec: ExtraRollouts, *, high_entropy: bool) -> list[int]:
    """How many qualifying extra rows each process keeps, given every process's count of candidates (in process
    order): the cap ``spec.max_rows`` (halved when ``high_entropy`` and ``spec.halve_above_base``) holds for the
    whole rollout batch, as on the AEPO authors' driver (``min(reinforce_sample_num, n_kept) // 2`` over the
    gathered batch), and is filled in process order, so the kept rows are the first of the global batch."""
    total = sum(int(c) for c in counts)
    n = total if spec.max_rows is None else min(int(spec.max_rows), total)
    if spec.halve_above_base and high_entropy:
        n //= 2
    out = []
    for c in counts:
        k = min(int(c), n)
        out.append(k)
        n -= k
    return out


def select_extra_rows(advantages: torch.Tensor, spec: ExtraRollouts, *, high_entropy: bool,
                      limit: int | None = None) -> torch.Tensor:
    """Indices (in order) of the extra rows that enter the batch: advantage > ``min_advantage`` when set, at most
    ``limit`` of them (this process's share from :func:`allocate_extra_rows`); without ``limit``, the cap is
    applied to these rows alone (one process)."""
    idx = spec.qualifying(advantages).nonzero().flatten()
    if limit is None:
        limit = allocate_extra_rows([idx.numel()], spec, high_entropy=high_entropy)[0]
    return idx[:int(limit)]


def _pad_to(x: torch.Tensor, width: int, value, side: str) -> torch.Tensor:
    if x.shape[1] == width:
        return x
    pad = x.new_full((x.shape[0], width - x.shape[1], *x.shape[2:]), value)
    return torch.cat([pad, x] if side == "left" else [x, pad], dim=1)


def _cat(key: str, a: torch.Tensor, b: torch.Tensor, pad_token_id: int) -> torch.Tensor:
    if a.dim() == 1:
        return torch.cat([a, b.to(a.dtype)])
    if key in _LEFT_PADDED or key in _RIGHT_PADDED:
        side, value = ("left", _LEFT_PADDED[key]) if key in _LEFT_PADDED else ("right", _RIGHT_PADDED[key])
        value = pad_token_id if value == "pad" else value
        w = max(a.shape[1], b.shape[1])
        return torch.cat([_pad_to(a, w, value, side), _pad_to(b.to(a.dtype), w, value, side)])
    raise ValueError(f"merge_rollouts: do not know how to pad batch key {key!r} of shape {tuple(a.shape)} "
                     f"(known 2-D keys: {sorted({**_LEFT_PADDED, **_RIGHT_PADDED})})")


def merge_rollouts(
    on_policy: dict[str, Any],
    extra: dict[str, Any],
    spec: ExtraRollouts,
    *,
    temperature: float,
    sampling_temperature: float,
    high_entropy: bool,
    pad_token_id: int,
    limit: int | None = None,
) -> tuple[dict[str, Any], dict[str, float]]:
    """Merge the scored extra rollouts ``extra`` into ``on_policy`` as ``spec`` says.

    ``replace``: the selected extra rows (see :func:`select_extra_rows`) take the place of the first on-policy
    rows, so the batch keeps its size (AEPO: ``concat([extra[:n], batch[n:]])``). ``append``: they follow the
    on-policy rows. With ``spec.set_advantage`` the selected rows' advantage is overwritten (AEPO: 1).
    ``limit``: how many selected rows this process keeps, its share of the global row cap
    (:func:`allocate_extra_rows`); None applies the cap to these rows alone.

    Adds ``rollout_flags`` (B,) (1.0 on rows from the extra rollouts) and ``rollout_temps`` (B,) (the row's
    sampling temperature); recomputes ``num_items_in_batch`` as the local count of loss tokens (the caller
    gathers it across ranks). Both dicts must carry the same keys; ``None`` values stay ``None`` only if
    ``None`` on both sides. Returns (merged batch, stats ``extra_rollouts/{T,generated,kept,placed}``).
    """
    if set(on_policy) != set(extra):
        raise ValueError(f"on-policy and extra batches differ in keys: {sorted(set(on_policy) ^ set(extra))}")
    n_on = on_policy["completion_ids"].shape[0]
    sel = select_extra_rows(extra["advantages"], spec, high_entropy=high_entropy, limit=limit)
    if spec.placement == "replace":
        sel = sel[:n_on]
    n = int(sel.numel())
    keep_on = slice(n, None) if spec.placement == "replace" else slice(None)
    merged: dict[str, Any] = {}
    for key, a in on_policy.items():
        b = extra[key]
        if key in _RECOUNTED:
            continue
        if a is None or b is None:
            if (a is None) != (b is None):
                raise ValueError(f"batch key {key!r} is None in one of the two batches only")
            merged[key] = None
            continue
        if not isinstance(a, torch.Tensor) or a.dim() == 0:
            raise ValueError(f"merge_rollouts: batch key {key!r} is not a row-aligned tensor ({type(a).__name__})")
        b_sel = b[sel]
        if key == "advantages" and spec.set_advantage is not None:
            b_sel = torch.full_like(b_sel, float(spec.set_advantage))
        a_keep = a[keep_on]
        merged[key] = _cat(key, b_sel, a_keep, pad_token_id) if spec.placement == "replace" else _cat(
            key, a_keep, b_sel, pad_token_id)
    n_kept_on = on_policy["completion_ids"][keep_on].shape[0]
    device = on_policy["completion_ids"].device
    flags_on = torch.zeros(n_kept_on, device=device)
    flags_x = torch.ones(n, device=device)
    temps_on = torch.full((n_kept_on,), float(sampling_temperature), device=device)
    temps_x = torch.full((n,), float(temperature), device=device)
    if spec.placement == "replace":
        merged["rollout_flags"], merged["rollout_temps"] = torch.cat([flags_x, flags_on]), torch.cat([temps_x, temps_on])
    else:
        merged["rollout_flags"], merged["rollout_temps"] = torch.cat([flags_on, flags_x]), torch.cat([temps_on, temps_x])
    loss_mask = merged["completion_mask"]
    if merged.get("tool_mask") is not None:
        loss_mask = loss_mask * merged["tool_mask"]
    merged["num_items_in_batch"] = loss_mask.sum()
    stats = {"extra_rollouts/T": float(temperature), "extra_rollouts/generated": float(extra["completion_ids"].shape[0]),
             "extra_rollouts/kept": float(n), "extra_rollouts/frac_of_batch": n / max(merged["completion_ids"].shape[0], 1)}
    return merged, stats


# -- what a rollout batch carries besides TRL's row dict ------------------------------------------------------------

# The loss's once-per-rollout-batch statistics ride in TRL's batch dict as 0-dim float64 tensors under this prefix:
# TRL's shuffle and micro-batch split keep a 0-dim tensor whole in every micro-batch (as they keep
# num_items_in_batch), and float64 gives the loss back the exact Python float it was computed as.
BATCH_STATS = "batch_stats/"


def put_batch_stats(batch: dict, stats: dict[str, float]) -> None:
    """Store ``stats`` in ``batch`` (see :data:`BATCH_STATS`), on the device of its completion ids."""
    device = batch["completion_ids"].device
    for key, val in stats.items():
        batch[BATCH_STATS + key] = torch.tensor(float(val), dtype=torch.float64, device=device)


def get_batch_stats(batch: dict) -> dict[str, float] | None:
    """The statistics :func:`put_batch_stats` stored in ``batch`` (or a micro-batch of it); None when it holds none."""
    stats = {k[len(BATCH_STATS):]: float(v) for k, v in batch.items() if k.startswith(BATCH_STATS)}
    return stats or None


@dataclass
class ScoredRollouts:
    """What one pass of generation and scoring gives beside TRL's row dict (``DGROTrainer._score_rollouts``).

    rewards: (N,) the raw weighted rewards of every process's rows, in group order (G consecutive rows share a
        prompt), before TRL shuffles anything.
    token_entropy: (B, C) this process's per-token entropy estimate under pi_old, when a batch statistic needs this
        rollout batch's entropy and TRL did not score -log pi_old itself; else None.
    """

    rewards: torch.Tensor
    token_entropy: torch.Tensor | None = None


@dataclass
class RolloutRecord:
    """The last training rollout batch of this process, kept for the per-rank log only (nothing trains on it):
    its local rows' ``rewards``, ``group_ids``, ``advantages`` and ``rollout_flags``, the loss's batch statistics and
    every process's count of rows that qualified as extra rollouts."""

    rows: dict[str, torch.Tensor]
    batch_stats: dict[str, float] | None = None
    extra_candidates: list[int] | None = None


@dataclass
class EntropyTracker:
    """Policy entropy measured during the updates of a rollout batch: the sums over its micro-batches of the token-mean
    -log pi of the sampled tokens (``nll_sum``) and of the full-vocabulary entropy (``full_sum``), each already
    averaged over processes, and their ``count``. When the next rollout batch begins (:meth:`close`) their means
    become ``previous``, the "previous step" entropy (0 before the first, as the DCPO/AEPO authors' trainer starts)
    that picks DCPO's and AEPO's temperature. Checkpointed with the run (:meth:`state_dict`)."""

    nll_sum: float = 0.0
    full_sum: float = 0.0
    count: int = 0
    previous: dict[str, float] = field(default_factory=lambda: {"nll": 0.0, "full": 0.0})

    def add(self, nll: float, full: float) -> None:
        self.nll_sum += nll
        self.full_sum += full
        self.count += 1

    def close(self) -> None:
        """A new rollout batch begins: the running means become ``previous`` (kept as they were when no update ran
        since, e.g. right after a resume) and the sums restart."""
        if self.count:
            self.previous = {"nll": self.nll_sum / self.count, "full": self.full_sum / self.count}
        self.nll_sum, self.full_sum, self.count = 0.0, 0.0, 0

    def state_dict(self) -> dict:
        return {"prev_entropy": dict(self.previous), "update_entropy": [self.nll_sum, self.full_sum, self.count]}

    def load_state_dict(self, state: dict) -> None:
        self.previous = {k: float(v) for k, v in state["prev_entropy"].items()}
        s_nll, s_full, n = state["update_entropy"]
        self.nll_sum, self.full_sum, self.count = float(s_nll), float(s_full), int(n)
