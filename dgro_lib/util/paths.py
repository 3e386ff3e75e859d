"""Where things live: the repository's folders, computed once (the package lives at ``<REPO>/dgro_lib``), and what
a model hub id looks like."""

from __future__ import annotations

import os
import re
from pathlib import Path

__all__ = ["REPO", "PARAMS", "NOTEBOOKS", "OUTPUTS", "HUB_ID", "is_hub_id", "HUB_MIRROR_ENV", "hub_copy_dir",
           "hub_mirror_path"]

REPO = Path(__file__).resolve().parents[2]  # dgro_lib/util/paths.py -> the repository
PARAMS = REPO / "params"  # params/<profile>/<notebook>.yaml
NOTEBOOKS = REPO / "notebooks"
OUTPUTS = REPO / "outputs"  # outputs/<profile>/<notebook>/ (reproduce) and the embedded model's cache

HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")
"""A model or data set id on the hub: ``owner/name`` or ``name``."""


def is_hub_id(s: str) -> bool:
    """Whether ``s`` has the shape of a hub id (``Qwen/Qwen2.5-7B``), as opposed to a local path."""
    return bool(HUB_ID.match(s))


HUB_MIRROR_ENV = "DGRO_HUB_MIRROR"
"""A folder holding local copies of Hub data sets, one per ``<owner>/<name>`` as a snapshot download of the data
set's repository lays it out (``huggingface-cli download --repo-type dataset <id> --local-dir <mirror>/<id>``).
When set, every ``data.source: hub`` load reads the copy instead of the Hub (:func:`hub_mirror_path`)."""


def hub_copy_dir(root: str | Path, hub_id: str, config: str | None = None) -> Path:
    """Where a mirror rooted at ``root`` keeps data set ``hub_id`` (its ``config`` folder, when given):
    ``<root>/<owner>/<name>[/<config>]``, the layout its readers (:func:`hub_mirror_path`) and its writers
    (:mod:`dgro_lib.data.hub_mirror`) share."""
    path = Path(root) / hub_id
    return path / config if config else path


def hub_mirror_path(hub_id: str, config: str | None = None) -> Path | None:
    """The copy of data set ``hub_id`` (its ``config`` folder, when given) under ``$DGRO_HUB_MIRROR``, or None when
    the variable is unset. FileNotFoundError when the variable names no folder, or the folder holds no copy of
    ``hub_id`` (both named): a set mirror is never passed over for the Hub."""
    root = os.environ.get(HUB_MIRROR_ENV)
    if not root:
        return None
    base = Path(root).expanduser()
    if not base.is_dir():
        raise FileNotFoundError(f"{HUB_MIRROR_ENV}={root!r} is not a directory")
    path = hub_copy_dir(base, hub_id, config)
    if not path.is_dir():
        raise FileNotFoundError(f"{HUB_MIRROR_ENV}={root!r} holds no copy of the Hub data set {hub_id!r}"
                                + (f" (config {config!r})" if config else "") + f": {path} is missing")
    return path
