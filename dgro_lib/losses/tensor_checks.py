"""The common input contract of every loss: shape checks on the four tensors and their preparation.

``logps``, ``old_logps``, ``mask`` are (B, T); ``advantages`` is (B,) (one value per response) or (B, T).
:func:`_prepare` validates them, promotes to at least fp32 (half-precision sequence sums lose too much),
zeroes the padding positions and detaches everything but ``logps``.
"""

from __future__ import annotations

import torch


def _prepare(logps, old_logps, mask, advantages):
    """Check the four tensors and return ``(lp, old, m, adv)``, all (B, T) in fp32 or wider: ``lp`` the current
    log-probs (graph kept), ``old`` the detached old log-probs (``old_logps=None``: old = current), ``m`` the
    mask, ``adv`` the detached advantages broadcast over tokens; padding positions of ``lp`` and ``old`` are 0."""
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


def _prep_tokens(logps, old_logps, mask, advantages):
    """:func:`_prepare` (fp32+, padding zeroed, advantages expanded to (B, T)) plus the validity mask."""
    lp, old, m, adv = _prepare(logps, old_logps, mask, advantages)
    return lp, old, m, adv, m > 0
