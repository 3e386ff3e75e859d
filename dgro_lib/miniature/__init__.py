"""The miniature: the embedded base model's own training, below every RL run.

* :mod:`.build` — a preset's model built (:func:`build_tiny_model`), warmed up and cached on disk
  (:func:`get_embedded_base_model`), or installed from the committed bases;
* :mod:`.supervised` — the supervised warm-up on generated puzzles with reasoning traces, its drills and held-out
  puzzles.

The presets themselves are plain data in :mod:`dgro_lib.models.presets`.
"""

from dgro_lib.miniature.build import build_tiny_model, embedded_tokenizer, get_embedded_base_model
from dgro_lib.miniature.supervised import (copy_drill_text, heldout_records, statement_drill_text, warmup,
                                       warmup_records)

__all__ = ["build_tiny_model", "embedded_tokenizer", "get_embedded_base_model", "warmup",
           "warmup_records", "copy_drill_text", "statement_drill_text", "heldout_records"]
