"""The repository's folders, computed once: the package lives at ``<REPO>/dgro_lib``."""

from __future__ import annotations

from pathlib import Path

__all__ = ["REPO", "PARAMS", "NOTEBOOKS", "OUTPUTS"]

REPO = Path(__file__).resolve().parent.parent
PARAMS = REPO / "params"  # params/<profile>/<notebook>.yaml
NOTEBOOKS = REPO / "notebooks"
OUTPUTS = REPO / "outputs"  # outputs/<profile>/<notebook>/ (reproduce) and the embedded model's cache
