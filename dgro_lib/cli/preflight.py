"""Preflight for a GPU node: ``python -m dgro_lib.cli.preflight [--profile paper] [--only NOTEBOOK ...]``.

Before hours of notebooks start, it checks in one pass, and lists every problem it finds:

* **the stack**: torch at the version the project pins, and a CUDA build of it (a ``+cpu`` build, or a CUDA build
  that sees no GPU, is named as such); vLLM and deepspeed at their pinned versions where the profile's runs use
  them (``train.use_vllm`` or ``eval.engine: vllm``; ``train.distributed: zero2|zero3``);
* **the machine**: at least as many GPUs as the largest ``train.num_processes`` of the profile's runs, bf16 where
  ``train.bf16`` asks for it, and each params file's own :func:`~dgro_lib.config.checks.check_runnable_here`.

The pins are read from the installed ``dgro_lib``'s metadata (``pyproject.toml``), so they are written in one place.
Without ``--profile`` only the stack is checked (``make venv-gpu`` ends with that). Exit status 1 when anything is
wrong, with one line per problem naming the package, the file or the key; :mod:`dgro_lib.cli.reproduce` runs the same
checks before a profile with a params file that needs a GPU (:func:`needs_gpu`).
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from dgro_lib.config import ConfigError, ExperimentConfig, expand_sweep, load_config
from dgro_lib.util.paths import PARAMS

__all__ = ["Machine", "check_here", "format_report", "needs_gpu", "pinned_versions", "preflight", "profile_configs", "main"]

_PACKAGES = ("torch", "vllm", "deepspeed")


def pinned_versions() -> dict[str, str]:
    """The ``==`` pins of torch, vllm and deepspeed in dgro_lib's requirements (extras included)."""
    from packaging.requirements import Requirement

    pins = {}
    for line in md.requires("dgro_lib") or []:
        req = Requirement(line)
        exact = [s.version for s in req.specifier if s.operator == "=="]
        if req.name in _PACKAGES and exact:
            pins[req.name] = exact[0]
    return pins


def _installed(name: str) -> str | None:
    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return None


@dataclass
class Machine:
    """What the checks read off this machine; tests give stand-ins. ``None`` fields are read when needed."""

    versions: dict[str, str | None] = field(default_factory=dict)
    """Installed versions by package name (a missing key is read with importlib.metadata; None = not installed)."""
    torch_cuda: str | None = "unread"
    """``torch.version.cuda`` (None for a CPU build)."""
    gpus: int | None = None
    """GPUs torch sees."""
    bf16: bool | None = None
    """Whether GPU 0 supports bf16."""

    def read(self) -> "Machine":
        import torch

        for name in _PACKAGES:
            self.versions.setdefault(name, _installed(name))
        if self.torch_cuda == "unread":
            self.torch_cuda = torch.version.cuda
        if self.gpus is None:
            self.gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if self.bf16 is None:
            self.bf16 = bool(self.gpus) and torch.cuda.is_bf16_supported()
        return self


def _base(version: str) -> str:
    return version.split("+", 1)[0]


def _stack_problems(m: Machine, pins: dict[str, str], need: set[str]) -> list[str]:
    fix = "install the CUDA stack: make venv-gpu (requirements/cuda.txt)"
    problems = []
    torch_v = m.versions.get("torch")
    if torch_v is None:
        problems.append(f"torch is not installed; {fix}")
    else:
        if "torch" in pins and _base(torch_v) != pins["torch"]:
            problems.append(f"torch {torch_v} is installed, the project pins torch=={pins['torch']}; {fix}")
        if m.torch_cuda is None:
            problems.append(f"torch {torch_v} is a CPU build (torch.version.cuda is None): the GPU profiles would "
                            f"train on the CPU; {fix}")
        elif not m.gpus:
            problems.append(f"torch {torch_v} (CUDA {m.torch_cuda}) sees no GPU: check nvidia-smi, the driver (CUDA "
                            f"{m.torch_cuda} needs a driver that supports it) and CUDA_VISIBLE_DEVICES")
    for name in sorted(need):
        have, want = m.versions.get(name), pins.get(name)
        if have is None:
            problems.append(f"{name} is not installed, and the runs need it; {fix}")
        elif want is not None and _base(have) != want:
            problems.append(f"{name} {have} is installed, the project pins {name}=={want}; {fix}")
    return problems


def preflight(configs: dict[str, ExperimentConfig] | None = None, *, machine: Machine | None = None,
              pins: dict[str, str] | None = None) -> list[str]:
    """Every problem that keeps ``configs`` (label -> config, e.g. the params file's name) from running here, one
    line each; empty when all is well. With no configs, the GPU stack alone (torch's CUDA build, vllm, deepspeed)."""
    from dgro_lib.config.checks import check_runnable_here

    m = (machine or Machine()).read()
    pins = pinned_versions() if pins is None else pins
    concrete = {f"{label} {point}".strip(): c for label, cfg in (configs or {}).items()
                for point, c in _points(cfg)}
    train = [c for c in concrete.values() if c.kind == "train"]
    need = {"vllm", "deepspeed"} if not configs else set()
    need |= {"vllm"} if any(c.train.use_vllm for c in train) or any(
        c.eval.engine == "vllm" for c in concrete.values() if c.kind != "theory") else set()
    need |= {"deepspeed"} if any(c.train.distributed.startswith("zero") for c in train) else set()
    problems = _stack_problems(m, pins, need)
    if m.torch_cuda is not None and m.gpus:  # the per-file checks would only repeat the stack's refusal otherwise
        seen = set()
        for label, c in concrete.items():
            try:
                check_runnable_here(c, cuda=True, gpus=m.gpus, bf16_supported=m.bf16,
                                    vllm_installed=m.versions.get("vllm") is not None)
            except ConfigError as e:
                if str(e) not in seen:
                    seen.add(str(e))
                    problems.append(f"{label}: {e}")
    return problems


def _points(cfg: ExperimentConfig):
    import json

    if cfg.kind != "train":  # theory and evaluation files: no sweep of runs to check
        yield "", cfg
        return
    seen = set()
    for point, _seed, concrete in expand_sweep(cfg):
        key = json.dumps(point, sort_keys=True)
        if key not in seen:
            seen.add(key)
            yield ("" if not point else key), concrete


def profile_configs(profile: str, only: Sequence[str] | None = None, *, params_root: Path | None = None
                    ) -> dict[str, ExperimentConfig]:
    """The params files of ``profile`` (all, or the notebooks ``only`` names) loaded, by file name."""
    root = (params_root or PARAMS) / profile
    files = sorted(root.glob("*.yaml"))
    if not files:
        raise ValueError(f"no params files under {root}")
    if only:
        unknown = [n for n in only if not (root / f"{n}.yaml").is_file()]
        if unknown:
            raise ValueError(f"no params for {', '.join(unknown)} under {root} "
                             f"(have: {', '.join(f.stem for f in files)})")
        files = [root / f"{n}.yaml" for n in only]
    return {f"{profile}/{f.name}": load_config(f) for f in files}


def needs_gpu(cfg: ExperimentConfig) -> bool:
    """Whether a params file needs a GPU node: ``train.require_gpu``, vLLM (training or evaluation), or ZeRO/FSDP
    over processes."""
    t = cfg.train
    if cfg.kind == "eval":
        return cfg.eval.engine == "vllm"
    return cfg.kind == "train" and (t.require_gpu or t.use_vllm or cfg.eval.engine == "vllm"
                                    or (t.num_processes > 1 and t.distributed != "none"))


def format_report(problems: list[str], machine: Machine) -> str:
    v = machine.versions
    head = (f"[preflight] torch {v.get('torch')} (CUDA {machine.torch_cuda}), {machine.gpus} GPU(s), "
            f"vllm {v.get('vllm')}, deepspeed {v.get('deepspeed')}")
    if not problems:
        return head + "\n[preflight] ok"
    return "\n".join([head, *(f"[preflight] problem: {p}" for p in problems),
                      f"[preflight] {len(problems)} problem(s): nothing was started"])


def check_here(configs: dict[str, ExperimentConfig] | None = None) -> bool:
    """Read this machine, run :func:`preflight`, print the report (to stderr when there are problems); True when all
    is well. What ``python -m dgro_lib.cli.preflight`` and :mod:`dgro_lib.cli.reproduce` both run."""
    machine = Machine().read()
    problems = preflight(configs, machine=machine)
    print(format_report(problems, machine), file=sys.stderr if problems else sys.stdout, flush=True)
    return not problems


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m dgro_lib.cli.preflight", description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", help="also check this profile's params (e.g. paper, gpu); without it, the stack only")
    ap.add_argument("--only", action="append", help="only this notebook's params (repeatable)")
    a = ap.parse_args(argv)
    try:
        configs = profile_configs(a.profile, a.only) if a.profile else None
    except (ValueError, ConfigError) as e:
        print(f"[preflight] {e}", file=sys.stderr)
        return 1
    return 0 if check_here(configs) else 1


if __name__ == "__main__":
    sys.exit(main())
