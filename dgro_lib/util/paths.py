"""Where things live: the repository's folders, computed once (the package lives at ``<REPO>/dgro_lib``), and what
a model hub id looks like."""

from __future__ import annotations

import re
from pathlib import Path

__all__ = ["REPO", "PARAMS", "NOTEBOOKS", "OUTPUTS", "HUB_ID", "is_hub_id"]

REPO = Path(__file__).resolve().parents[2]  # dgro_lib/util/paths.py -> the repository
PARAMS = REPO / "params"  # params/<profile>/<notebook>.yaml
NOTEBOOKS = REPO / "notebooks"
OUTPUTS = REPO / "outputs"  # outputs/<profile>/<notebook>/ (reproduce) and the embedded model's cache

HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")
"""A model or data set id on the hub: ``owner/name`` or ``name``."""


def is_hub_id(s: str) -> bool:
    """Whether ``s`` has the shape of a hub id (``Qwen/Qwen2.5-7B``), as opposed to a local path."""
    return bool(HUB_ID.match(s))
