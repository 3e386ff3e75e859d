"""Models: load any HF-format causal LM (optionally with LoRA), the embedded model's presets, the tokenizer, the
KV-cache sampler and chunked log-probs.

Modules, one job each:

* :mod:`.loading` — :func:`load_model`: local HF checkpoints and hub ids, LoRA via peft.
* :mod:`.tokenizer` — the word-level tokenizer and the embedded vocabulary (:func:`build_tokenizer`,
  :func:`build_embedded_tokenizer`, :data:`TAG_TOKENS`).
* :mod:`.presets` — the embedded model's config and presets as plain data (:class:`EmbeddedModelConfig`,
  :data:`EMBEDDED_PRESETS`, :func:`config_hash`); no torch.
* :mod:`.committed` — the committed bases (``reference/bases``): install and check them.
* :mod:`.sampling` — :func:`sample`, the KV-cache sampler of rollouts and evaluation.
* :mod:`.logprobs` — per-token log-probs in chunks, at extra temperatures, from the trainer's hidden states.

The face is lazy (PEP 562): a name is imported from its module when first asked for, so that reading the presets
(the config's checks, the run store's keys) does not load torch and transformers.

Building and warming up the embedded model is the miniature's own training, one floor up
(:mod:`dgro_lib.miniature`); evaluating a model is :mod:`dgro_lib.evaluate`. Both import this package, never the
other way round.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what __getattr__ hands out, for type checkers and readers
    from dgro_lib.models.loading import load_model, load_tokenizer
    from dgro_lib.models.presets import EMBEDDED_PRESETS, EmbeddedModelConfig, config_hash
    from dgro_lib.models.sampling import sample
    from dgro_lib.models.tokenizer import (SPECIAL_TOKENS, TAG_TOKENS, build_embedded_tokenizer, build_tokenizer,
                                           embedded_vocabulary)

_WHERE = {
    "load_model": "loading", "load_tokenizer": "loading",
    "EMBEDDED_PRESETS": "presets", "EmbeddedModelConfig": "presets", "config_hash": "presets",
    "sample": "sampling",
    "SPECIAL_TOKENS": "tokenizer", "TAG_TOKENS": "tokenizer", "build_embedded_tokenizer": "tokenizer",
    "build_tokenizer": "tokenizer", "embedded_vocabulary": "tokenizer",
}
__all__ = list(_WHERE)


_MODULES = ("loading", "tokenizer", "presets", "committed", "sampling", "logprobs")


def __getattr__(name: str) -> Any:
    if name in _MODULES:  # dgro_lib.models.sampling without importing it first, as an eager face allowed
        return importlib.import_module(f"dgro_lib.models.{name}")
    if name not in _WHERE:
        raise AttributeError(f"module 'dgro_lib.models' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"dgro_lib.models.{_WHERE[name]}"), name)
    globals()[name] = value  # looked up once
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE) | set(_MODULES))
