"""Aggregation: how a per-token quantity (B, T) becomes the scalar loss (verl's ``agg_loss`` modes).

Every mode is a weighted sum over the mask (:func:`aggregation_weights`), so a loss can also compute
gradient norms of its terms analytically. ``seq-mean-token-sum`` is the DGRO paper's sequence-level
expectation (Eq. 4/6); ``token-mean`` is DAPO's and the DCPO authors'.
"""

from __future__ import annotations

import torch

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


def _masked_mean(x: torch.Tensor, m: torch.Tensor) -> float:
    """Σ m·x / Σ m over all tokens (x, m (B, T)), as a python float for metrics; 0 when the mask is empty."""
    return float((x.to(m.dtype) * m).sum() / m.sum().clamp(min=1.0))
