"""Run manifests: what produced an output (git commit, package versions, seeds, config, machine)."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any

from .paths import REPO

__all__ = ["environment_info", "git_info", "write_json", "write_manifest"]

_PACKAGES = ("dgro_lib", "torch", "transformers", "trl", "accelerate", "datasets", "peft", "tokenizers",
             "papermill", "pandas", "seaborn", "vllm", "math-verify")


def git_info(repo: str | Path | None = None) -> dict[str, Any]:
    """Commit hash and whether the work tree had uncommitted changes (``None`` outside a git checkout)."""
    repo = Path(repo) if repo else REPO

    def _git(*args: str) -> str | None:
        try:
            out = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return out.stdout.strip() if out.returncode == 0 else None

    commit = _git("rev-parse", "HEAD")
    status = _git("status", "--porcelain", "--untracked-files=no")
    return {"commit": commit, "dirty": bool(status) if status is not None else None}


def environment_info() -> dict[str, Any]:
    """Python, platform and the versions of the packages that change results."""
    versions = {}
    for name in _PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "packages": versions,
    }


def write_manifest(path: str | Path, *, config: dict, seed: int | None, extra: dict | None = None) -> dict:
    """Write (atomically) and return the manifest of one run or one experiment."""
    manifest = {
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "seed": seed,
        "git": git_info(),
        **environment_info(),
        "config": config,
        **(extra or {}),
    }
    write_json(path, manifest)
    return manifest


def write_json(path: str | Path, obj: Any) -> None:
    """Write ``obj`` as JSON through a temporary file and a rename, so a killed process never leaves half a file
    that a resumed run would take for a result."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(obj, indent=1, default=str))
    os.replace(tmp, path)
