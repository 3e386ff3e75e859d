"""Per-token log-probs and entropy at any temperature, chunked over tokens (DCPO / AEPO / J1–J4).

TRL 1.16 scores completions through a fused LM head at its *sampling* temperature only. DCPO's
importance weight ρ_{i,t} = π_old^T(y_t) / π_old(y_t), AEPO's correction and the J3/J4 regularizers need
log π^T at a second temperature T. Materialising the logits for that is (tokens × vocab): at Qwen's
152,064-token vocabulary and 8,192 tokens that is 2.5 GB in bf16 and 5 GB in fp32, per extra temperature.

:func:`chunked_logprobs` takes the final hidden states (one backbone pass, shared with TRL's own scoring)
and the LM-head weight, and projects ``chunk_size`` tokens at a time, returning the log-prob of the
target token and the entropy at every requested temperature from the *same* chunk of logits. Peak extra
memory is O(chunk_size × vocab) (a few fp32 copies of one chunk), never O(tokens × vocab).
It runs under ``torch.no_grad``: every consumer (ρ, the T-entropy) treats these values as constants.
``bench/logprob_memory.py`` measures the peak against the naive full-logits computation.

:class:`HiddenStateCapture` records the backbone's last hidden state during a forward pass (a forward
hook), so the trainer gets the extra temperatures without a second forward.
"""

from __future__ import annotations

from typing import Sequence

import torch

__all__ = ["HiddenStateCapture", "chunked_logprobs", "naive_logprobs"]


@torch.no_grad()
def chunked_logprobs(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    labels: torch.Tensor,
    *,
    temperatures: Sequence[float],
    bias: torch.Tensor | None = None,
    chunk_size: int = 256,
    compute_entropy: bool = True,
    logit_scale: float = 1.0,
    softcap: float | None = None,
) -> dict[float, tuple[torch.Tensor, torch.Tensor | None]]:
    """Log-prob of ``labels`` and entropy under softmax(logits / T) for each T, chunked over tokens.

    Args:
        hidden: (..., H) hidden states that predict ``labels`` (already shifted: hidden[k] scores labels[k]).
        weight: (V, H) LM-head weight; ``bias`` optional (V,).
        labels: (...) target token ids, same leading shape as ``hidden``; entries < 0 (e.g. -100 padding)
            are scored as token 0 and must be masked by the caller.
        temperatures: the temperatures T (> 0) to evaluate; the logits are computed once per chunk.
        chunk_size: tokens projected at once (peak extra memory ~ 3 × chunk_size × V × 4 bytes).
        compute_entropy: also return the full-vocabulary entropy H(softmax(logits/T)) per token.
        logit_scale: multiplier applied to the logits before the temperature (models that scale logits).
        softcap: ``final_logit_softcapping`` c of models that use it (Gemma 2): logits -> c·tanh(logits/c),
            after ``logit_scale`` and before the temperature, as transformers and TRL's fused head do.

    Returns:
        {T: (logps, entropy)} with tensors of shape ``labels.shape`` in float32 (entropy None when
        ``compute_entropy`` is False). Computed in float32 whatever the input dtype.
    """
    temps = [float(t) for t in temperatures]
    if not temps:
        raise ValueError("temperatures must name at least one temperature")
    for t in temps:
        if not t > 0:
            raise ValueError(f"temperatures must be > 0, got {t!r}")
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
    if hidden.shape[:-1] != labels.shape:
        raise ValueError(f"hidden {tuple(hidden.shape)} must be labels {tuple(labels.shape)} + (H,)")
    if weight.dim() != 2 or weight.shape[1] != hidden.shape[-1]:
        raise ValueError(f"weight must be (V, H={hidden.shape[-1]}), got {tuple(weight.shape)}")
    lead = labels.shape
    h = hidden.reshape(-1, hidden.shape[-1])
    y = labels.reshape(-1).clamp(min=0).to(h.device)
    n = h.shape[0]
    out_lp = {t: torch.empty(n, dtype=torch.float32, device=h.device) for t in temps}
    out_h = {t: torch.empty(n, dtype=torch.float32, device=h.device) for t in temps} if compute_entropy else {}
    for s in range(0, n, chunk_size):
        e = min(s + chunk_size, n)
        logits = torch.nn.functional.linear(h[s:e], weight, bias).float()  # (c, V): the only big tensor
        if logit_scale != 1.0:
            logits.mul_(logit_scale)
        if softcap:
            logits = torch.tanh(logits / softcap) * softcap
        tgt = logits.gather(1, y[s:e, None]).squeeze(1)
        for t in temps:
            z = logits if t == 1.0 else logits / t
            lse = torch.logsumexp(z, dim=-1)
            out_lp[t][s:e] = tgt / t - lse
            if compute_entropy:
                p = torch.softmax(z, dim=-1)
                out_h[t][s:e] = lse - (p * z).sum(-1)  # H = logsumexp(z) - E_p[z]
                del p
            del z
        del logits
    return {t: (out_lp[t].view(lead), out_h[t].view(lead) if compute_entropy else None) for t in temps}


@torch.no_grad()
def naive_logprobs(hidden, weight, labels, *, temperature: float, bias=None) -> tuple[torch.Tensor, torch.Tensor]:
    """Reference for :func:`chunked_logprobs`: full (tokens × vocab) logits at once. Tests and the benchmark only."""
    logits = torch.nn.functional.linear(hidden, weight, bias).float() / temperature
    logp = torch.log_softmax(logits, dim=-1)
    tok = logp.gather(-1, labels.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    ent = -(logp.exp() * logp).sum(-1)
    return tok, ent


class HiddenStateCapture:
    """Context manager recording the last hidden state the backbone of a causal LM returns.

    ``with HiddenStateCapture(model) as cap: model(...)`` then ``cap.hidden`` is (B, L, H) (detached),
    the input of the LM head. Works on the plain transformers model, on TRL's fused-head forward (which
    calls the same backbone) and on a peft-wrapped model. The hook keeps only the most recent call.
    """

    def __init__(self, model: torch.nn.Module):
        base = model
        while hasattr(base, "module") and isinstance(base.module, torch.nn.Module):  # DDP / DeepSpeed wrappers
            base = base.module
        if hasattr(base, "get_base_model"):  # peft
            base = base.get_base_model()
        backbone = getattr(base, "base_model", None)
        if backbone is None or backbone is base:
            backbone = getattr(base, "model", None)
        if backbone is None:
            raise TypeError(f"cannot find the backbone of {type(model).__name__} (no .base_model / .model)")
        self.backbone = backbone
        self.lm_head = base.get_output_embeddings()
        self.hidden: torch.Tensor | None = None
        self._handle = None

    def _hook(self, module, args, output):
        hs = getattr(output, "last_hidden_state", None)
        if hs is None and isinstance(output, (tuple, list)):
            hs = output[0]
        self.hidden = hs.detach() if hs is not None else None

    def __enter__(self) -> "HiddenStateCapture":
        self._handle = self.backbone.register_forward_hook(self._hook)
        return self

    def __exit__(self, *exc) -> None:
        if self._handle is not None:
            self._handle.remove()
            self._handle = None
