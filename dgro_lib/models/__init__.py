"""Models: load any HF-format causal LM (optionally with LoRA), build the embedded tiny K&K model, sample from either.

Modules, one job each:

* :mod:`.tokenizer` — the word-level tokenizer and the embedded vocabulary (:func:`build_tokenizer`,
  :func:`build_embedded_tokenizer`, :data:`TAG_TOKENS`).
* :mod:`.embedded` — the embedded model's config and presets (:class:`EmbeddedModelConfig`,
  :data:`EMBEDDED_PRESETS`, :func:`config_hash`), its construction (:func:`build_tiny_model`) and the on-disk model
  cache (:func:`get_embedded_base_model`).
* :mod:`.supervised` — the supervised warm-up (:func:`warmup`), its drills and its training / held-out puzzles.
* :mod:`.loading` — :func:`load_model`: local HF checkpoints and hub ids, LoRA via peft.

Evaluating a model (:func:`~dgro_lib.evaluate.evaluate_greedy`, :func:`~dgro_lib.evaluate.evaluate_sampled`) lives
in :mod:`dgro_lib.evaluate`, which imports this package (never the other way round).
"""

# The names with a leading underscore are the internals that tests and bench/ reach through this package.
from .embedded import (EMBEDDED_PRESETS, EmbeddedModelConfig, build_tiny_model, config_hash, embedded_tokenizer,
                       get_embedded_base_model)
from .loading import load_model, load_tokenizer
from dgro_lib.sampling import sample  # the sampler is used by evaluation and training too: it lives beside them
from .tokenizer import SPECIAL_TOKENS, TAG_TOKENS, build_embedded_tokenizer, build_tokenizer, embedded_vocabulary
from .supervised import _drill_step, copy_drill_text, heldout_records, statement_drill_text, warmup, warmup_records

__all__ = [
    "SPECIAL_TOKENS",
    "TAG_TOKENS",
    "EmbeddedModelConfig",
    "EMBEDDED_PRESETS",
    "build_tokenizer",
    "build_embedded_tokenizer",
    "embedded_tokenizer",
    "embedded_vocabulary",
    "build_tiny_model",
    "warmup",
    "warmup_records",
    "copy_drill_text",
    "statement_drill_text",
    "config_hash",
    "get_embedded_base_model",
    "load_model",
    "load_tokenizer",
    "sample",
    "heldout_records",
]
