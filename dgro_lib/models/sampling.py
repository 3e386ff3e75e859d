"""The KV-cache sampler: :func:`sample` draws completions for RL rollouts and evaluation.

Faster than ``model.generate`` on this project's small models: rows are dropped from the batch and the cache as
they finish, identical prompts share one prefill, and the cache grows in place (:class:`GrowingKVLayer`). Greedy
outputs are identical to ``generate``'s; ``top_p`` keeps the set transformers' ``TopPLogitsWarper`` keeps.
"""

from __future__ import annotations

from typing import Sequence

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer

__all__ = ["sample", "eos_ids", "GrowingKVLayer"]


def _as_ids(x) -> list[int]:
    return [] if x is None else [x] if isinstance(x, int) else list(x)


def eos_ids(tokenizer, model, eos_token_id=None) -> list[int]:
    """The ids that end a completion: ``eos_token_id`` (an id or ids) if given, else the tokenizer's EOS followed by
    every other id of the model's generation config's ``eos_token_id`` (an int or a list: chat checkpoints declare an
    end-of-turn token there too); [] when none is known. The union is what TRL's trainer stops and masks
    completions at, so an evaluation ends a completion where training did."""
    if eos_token_id is not None:
        return _as_ids(eos_token_id)
    config = getattr(model, "generation_config", None)
    ids = _as_ids(tokenizer.eos_token_id) + _as_ids(getattr(config, "eos_token_id", None))
    return list(dict.fromkeys(ids))


@torch.no_grad()
def sample(model, tokenizer, prompts: Sequence[str] | Sequence[Sequence[int]], *, n: int = 1,
           temperature: float = 1.0, max_new_tokens: int = 256, greedy: bool = False, seed: int | None = None,
           eos_token_id: int | Sequence[int] | None = None, batch_size: int | None = None,
           top_p: float = 1.0) -> list[list[int]]:
    """Sample completions with a KV cache, dropping rows from the batch and the cache as they finish.

    prompts: P texts (tokenized without special tokens) or P lists of token ids.
    Returns P*n lists of completion token ids, ordered prompt0 x n, prompt1 x n, ... (TRL's grouping);
    a row that generated EOS ends with it, others have exactly max_new_tokens ids.
    greedy: argmax (then temperature, top_p and seed are irrelevant); equals ``model.generate(do_sample=False)``.
    top_p: nucleus sampling, in (0, 1]: each step samples from the smallest set of most likely tokens whose
    probability (after the temperature) sums to >= top_p, always at least the top token, renormalised (the
    set transformers' ``TopPLogitsWarper`` keeps). 1.0 (the default) skips the filter: the same probabilities,
    random stream and tokens as a sampler without top_p.
    seed: seeds a private torch.Generator (the global RNG is untouched); None uses the global RNG.
    batch_size: at most this many rows (completions) at once; default all.

    Shapes: prompts are left-padded to (B, P) with an attention mask; position ids count real tokens
    only (as generate does); each step feeds (B', 1) tokens, B' the rows still running. Identical
    prompts (e.g. the n copies) share one prefill; the cache rows are then copied.
    """
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    if isinstance(top_p, bool) or not isinstance(top_p, (int, float)) or not 0 < top_p <= 1:
        raise ValueError(f"top_p must be in (0, 1], got {top_p!r}")
    ids_list = [list(p) if not isinstance(p, str) else tokenizer(p, add_special_tokens=False)["input_ids"]
                for p in prompts]
    rows = [i for i in range(len(ids_list)) for _ in range(n)]
    eos = eos_ids(tokenizer, model, eos_token_id)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else (eos[0] if eos else 0)
    gen = torch.Generator().manual_seed(seed) if seed is not None else None
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    out: list[list[int]] = [[] for _ in rows]
    step = batch_size or max(len(rows), 1)
    try:
        for start in range(0, len(rows), step):
            chunk = list(range(start, min(start + step, len(rows))))
            _sample_chunk(model, [ids_list[rows[r]] for r in chunk], chunk, out, temperature=temperature, top_p=top_p,
                          max_new_tokens=max_new_tokens, greedy=greedy, gen=gen, eos=eos, pad=pad, device=device)
    finally:
        model.train(was_training)
    return out


class GrowingKVLayer(DynamicLayer):
    """A ``DynamicLayer`` whose keys/values live in a buffer with spare capacity (doubled when full), so a decode step
    writes one column instead of concatenating the whole cache (``torch.cat`` copies B x L x d per layer and step:
    O(L^2) per completion; bench/sampler_cache.py measures the difference). Same numbers: attention reads a view of
    the first L columns."""

    def lazy_initialization(self, key_states, value_states) -> None:
        super().lazy_initialization(key_states, value_states)
        self._buf_k = self._buf_v = None
        self._len = 0

    def update(self, key_states, value_states, *args, **kwargs):
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        new_len = self._len + key_states.shape[-2]
        if self._buf_k is None or new_len > self._buf_k.shape[-2]:
            cap = max(new_len, 2 * (self._buf_k.shape[-2] if self._buf_k is not None else 32))
            buf_k = key_states.new_empty((*key_states.shape[:2], cap, key_states.shape[-1]))
            buf_v = value_states.new_empty((*value_states.shape[:2], cap, value_states.shape[-1]))
            if self._len:
                buf_k[:, :, :self._len] = self._buf_k[:, :, :self._len]
                buf_v[:, :, :self._len] = self._buf_v[:, :, :self._len]
            self._buf_k, self._buf_v = buf_k, buf_v
        self._buf_k[:, :, self._len:new_len] = key_states
        self._buf_v[:, :, self._len:new_len] = value_states
        self._view(new_len)
        return self.keys, self.values

    def batch_select_indices(self, indices) -> None:
        if self.is_initialized and self._len:
            self._buf_k, self._buf_v = self._buf_k[indices], self._buf_v[indices]
            self._view(self._len)

    def _view(self, length: int) -> None:
        self._len = length
        self.keys, self.values = self._buf_k[:, :, :length], self._buf_v[:, :, :length]

    # generate's other cache operations, kept consistent with the buffer (the sampler itself does not use them)
    def crop(self, tokens_to_remove: int) -> None:
        if self.is_initialized and self._len:
            super().crop(tokens_to_remove)  # DynamicLayer's semantics; its result is a view of our buffer
            self._view(self.keys.shape[-2])

    def batch_repeat_interleave(self, repeats: int) -> None:
        if self.is_initialized and self._len:
            self._buf_k = self._buf_k.repeat_interleave(repeats, dim=0)
            self._buf_v = self._buf_v.repeat_interleave(repeats, dim=0)
            self._view(self._len)


def _growing_kv_layer_class():
    """(transformers' ``DynamicLayer``, :class:`GrowingKVLayer`): the cache layer class the sampler replaces, and
    its replacement."""
    return DynamicLayer, GrowingKVLayer


def _sampler_cache(config):
    """A ``DynamicCache`` for ``config`` whose full-attention layers grow in place (sliding-window layers, e.g. of
    some Qwen2 configs, keep their own class)."""
    dynamic, growing = _growing_kv_layer_class()
    cache = DynamicCache(config=config)
    cache.layers = [growing() if type(layer) is dynamic else layer for layer in cache.layers]
    return cache


def _top_p_probs(probs: torch.Tensor, top_p: float) -> torch.Tensor:
    """Nucleus filter of (B, V) probabilities: per row, keep the most likely tokens until their mass reaches
    ``top_p`` (a token is dropped when the tokens more likely than it already hold >= top_p, so the top token always
    stays), zero the rest and renormalise. Equals transformers' ``TopPLogitsWarper`` (which drops the least likely
    tokens whose ascending cumulative mass is <= 1 - top_p) up to float rounding at the boundary and ties."""
    sorted_p, order = probs.sort(dim=-1, descending=True)
    mass = sorted_p.cumsum(dim=-1)
    before = torch.cat([torch.zeros_like(mass[:, :1]), mass[:, :-1]], dim=-1)  # exclusive: 0 for the top token
    drop_sorted = before >= top_p
    drop = drop_sorted.scatter(-1, order, drop_sorted)
    kept = probs.masked_fill(drop, 0.0)
    return kept / kept.sum(dim=-1, keepdim=True)


def _sample_chunk(model, prompt_ids: list[list[int]], out_rows: list[int], out: list[list[int]], *,
                  temperature, top_p=1.0, max_new_tokens, greedy, gen, eos, pad, device) -> None:
    if max_new_tokens <= 0 or not prompt_ids:
        return
    # Prefill each distinct prompt once, then copy its cache rows (TRL repeats prompts G times).
    uniq: dict[tuple, int] = {}
    row_to_uniq = [uniq.setdefault(tuple(p), len(uniq)) for p in prompt_ids]
    uprompts = list(uniq)
    width = max(len(p) for p in uprompts)
    input_ids = torch.full((len(uprompts), width), pad, dtype=torch.long)
    mask = torch.zeros((len(uprompts), width), dtype=torch.long)
    for i, p in enumerate(uprompts):
        if p:
            input_ids[i, width - len(p):] = torch.tensor(p)
            mask[i, width - len(p):] = 1
    # (U, P): positions of real tokens 0..len-1; pads get 1 (their value is irrelevant, masked).
    pos = (mask.cumsum(-1) - 1).masked_fill(mask == 0, 1)
    cache = _sampler_cache(model.config)
    logits = model(input_ids=input_ids.to(device), attention_mask=mask.to(device), position_ids=pos.to(device),
                   past_key_values=cache, use_cache=True, logits_to_keep=1).logits[:, -1, :]
    sel = torch.tensor(row_to_uniq, dtype=torch.long)
    if len(uprompts) != len(prompt_ids) or row_to_uniq != list(range(len(uprompts))):
        cache.batch_select_indices(sel.to(device))
        logits, mask, pos = logits[sel.to(device)], mask[sel], pos[sel]
    mask = mask.to(device)
    last_pos = pos[:, -1].to(device)  # (B,) position of each row's last token
    active = torch.tensor(out_rows, dtype=torch.long)  # (B,) output row of each batch row
    eos_t = torch.tensor(eos, dtype=torch.long, device=device) if eos else None
    for t in range(max_new_tokens):
        if greedy:
            nxt = logits.argmax(-1)
        else:
            probs = torch.softmax(logits.float() / temperature, dim=-1)
            if top_p < 1.0:  # at 1.0 the probabilities (and so the random stream) are untouched
                probs = _top_p_probs(probs, top_p)
            nxt = torch.multinomial(probs.cpu(), 1, generator=gen).squeeze(1).to(device)
        for r, tok in zip(active.tolist(), nxt.tolist()):
            out[r].append(tok)
        if t == max_new_tokens - 1:
            break
        if eos_t is not None:
            keep = ~torch.isin(nxt, eos_t)
            if not bool(keep.all()):
                if not bool(keep.any()):
                    break
                idx = keep.nonzero().squeeze(1)
                cache.batch_select_indices(idx)
                nxt, mask, last_pos, active = nxt[idx], mask[idx], last_pos[idx], active[idx.cpu()]
        mask = torch.cat([mask, mask.new_ones((mask.shape[0], 1))], dim=1)
        last_pos = last_pos + 1
        logits = model(input_ids=nxt[:, None], attention_mask=mask, position_ids=last_pos[:, None],
                       past_key_values=cache, use_cache=True).logits[:, -1, :]

