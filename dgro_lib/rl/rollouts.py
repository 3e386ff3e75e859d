"""Put extra temperature-T rollouts into a rollout batch (AEPO's substitution, J2/J4's extra rows).

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

from typing import Any, Sequence

import torch

from dgro_lib.losses import ExtraRollouts

__all__ = ["allocate_extra_rows", "merge_rollouts", "select_extra_rows"]

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
