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

from dgro_lib.util.files import write_json
from dgro_lib.util.paths import REPO

__all__ = ["environment_info", "finish_manifest", "git_info", "machine_info", "write_manifest"]

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


def _cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith(("model name", "hardware", "cpu model")):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


ISA_FLAGS = ("avx2", "fma", "avx512f", "avx512bw", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_bf16", "amx_int8")
"""The /proc/cpuinfo flags that decide which kernels torch, MKL and oneDNN may pick (recorded with every run)."""


def _cpuinfo_field(name: str) -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.split(":", 1)[0].strip() == name:
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def cpu_vendor() -> str | None:
    """The CPU vendor as /proc/cpuinfo names it (``AuthenticAMD``, ``GenuineIntel``), None where it says nothing."""
    return _cpuinfo_field("vendor_id")


def cpu_isa() -> list[str] | None:
    """Which of :data:`ISA_FLAGS` the CPU has (None where /proc/cpuinfo has no flags line)."""
    flags = _cpuinfo_field("flags")
    return None if flags is None else [f for f in ISA_FLAGS if f in flags.split()]


def machine_info() -> dict[str, Any]:
    """The machine a result was made on: host, CPU vendor, model and ISA flags (:data:`ISA_FLAGS`), torch threads,
    the CPU kernels in use (:func:`dgro_lib.util.numerics.cpu_numerics`) and GPUs (empty without CUDA)."""
    info: dict[str, Any] = {"hostname": platform.node(), "platform": platform.platform(),
                            "machine": platform.machine(), "cpu_vendor": cpu_vendor(), "cpu_model": _cpu_model(),
                            "cpu_isa": cpu_isa(), "cpu_count": os.cpu_count(),
                            "torch_threads": None, "cuda": False, "gpus": []}
    try:
        import torch
    except ImportError:
        return info
    info["torch_threads"] = torch.get_num_threads()
    from dgro_lib.util.numerics import cpu_numerics

    info["cpu_numerics"] = cpu_numerics()  # which SIMD kernels: they decide the last bits of every CPU result
    try:
        if torch.cuda.is_available():
            info["cuda"] = True
            info["cuda_version"] = torch.version.cuda
            info["gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    except Exception as e:  # a broken driver must not stop a run from recording what it can
        info["gpus_error"] = repr(e)
    return info


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


def write_manifest(path: str | Path, *, config: dict, seed: int | None, extra: dict | None = None) -> dict:
    """Write (atomically) and return the manifest of one run or one experiment: git commit and dirty flag, package
    versions, seed(s), the resolved config, the machine (:func:`machine_info`) and the wall time: ``started`` now;
    :func:`finish_manifest` adds ``finished`` and ``wall_seconds`` when the run or experiment ends."""
    manifest = {
        "created": _now(),
        "seed": seed,
        "git": git_info(),
        **environment_info(),
        "machine": machine_info(),
        "config": config,
        "wall_time": {"started": _now(), "started_unix": time.time(), "finished": None, "wall_seconds": None},
        **(extra or {}),
    }
    write_json(path, manifest)
    return manifest


def finish_manifest(path: str | Path, **extra: Any) -> dict:
    """Record in the manifest at ``path`` that its run or experiment ended now (``wall_time.finished`` and
    ``wall_seconds`` since ``started``), plus ``extra`` keys; written atomically."""
    path = Path(path)
    manifest = json.loads(path.read_text())
    wall = dict(manifest.get("wall_time") or {})
    end = time.time()
    wall["finished"], wall["finished_unix"] = _now(), end
    if wall.get("started_unix") is not None:
        wall["wall_seconds"] = end - wall["started_unix"]
    manifest["wall_time"] = wall
    manifest.update(extra)
    write_json(path, manifest)
    return manifest
