"""What the benchmark scripts share: the model they time."""

from __future__ import annotations

import torch

from dgro_lib import miniature
from dgro_lib import models as M


def bench_model(path: str | None, *, threads: int = 1):
    """(model, tokenizer): the model at ``path`` (e.g. the trained embedded base under outputs/models/), else the
    cpu preset's architecture with fresh weights (seeded), with torch limited to ``threads`` threads."""
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    if path:
        return M.load_model(path)
    tokenizer = M.build_embedded_tokenizer()
    return miniature.build_tiny_model(M.EMBEDDED_PRESETS["cpu"], tokenizer=tokenizer), tokenizer
