"""Rehearse a GPU profile on the CPU: ``make rehearse PROFILE=gpu`` (``python -m dgro_lib.cli.rehearse --profile gpu``).

Every notebook that has params at the profile is executed with papermill, at that profile's params with only the
scale shrunk, to its last cell: its claims file and figures must be written. The verdicts at this scale mean
nothing; the rehearsal checks that the path a GPU user takes runs, before a GPU node's first hour is spent on it.

The one override set (:func:`shrink`), applied to the params file as written, nothing else changed:

* **seeds**: the first one; ``workers``: 1;
* **steps**: ``train.max_steps`` = two rollout batches' worth of optimizer steps (``num_iterations`` x
  ``updates_per_rollout`` x 2), evaluated after the first batch and checkpointed at the end; ``eval_subset`` at
  most 4;
* **sequence lengths**: completions and evaluation budgets at most 32 new tokens;
* **evaluation sizes**: ``data.n_train`` at most 16, ``data.n_eval`` at most 8, ``eval.n_samples`` at most 2 (``ks``
  cut to match), ``eval.batch_size`` at most 8, and the notebook knobs that size an evaluation (:data:`KNOB_CAPS`);
* **bf16 and CUDA flags**: ``bf16`` off, ``cpu`` on, ``require_gpu`` off, ``use_vllm`` off (vLLM generation during
  training needs CUDA), ``eval.engine`` hf; the GPU memory hint dropped; ``num_processes`` at most 2 (where the file
  asks for several GPUs, two CPU processes run the same engine: DDP, ZeRO-2/3 or FSDP).

Everything else runs as the file says: the base model and its preset, data format and templates, loss, reward, the
evaluation protocol, the sweep's arms, the multi-process engine, checkpointing and the notebook's own analysis.

The shrunk params go to ``outputs/rehearse/<profile>/params/<profile>/`` and the notebooks read them through
``DGRO_PARAMS_DIR`` (:func:`dgro_lib.config.find_params`); outputs and the run store go under
``outputs/rehearse/<profile>/``; nothing is restored from a run archive. The result, one row per notebook (ran or
failed, minutes, claims rows, figures), is ``outputs/rehearse/<profile>/rehearsal.csv``.

Not yet rehearsed: the ``paper`` profile, whose hub models and datasets need local stand-ins (a tiny random model
of each architecture family with the real tokenizer, and local files in each hub dataset's record format).
"""

from __future__ import annotations

import argparse
import copy
import os
import sys
import time
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from dgro_lib.config import find_params, load_config
from dgro_lib.config.load import PARAMS_DIR_ENV
from dgro_lib.runs.archive import ARCHIVE_ENV
from dgro_lib.util.files import atomic_write
from dgro_lib.util.paths import OUTPUTS, PARAMS

__all__ = ["shrink", "write_rehearsal_params", "rehearse", "main", "KNOB_CAPS", "PROFILES"]

PROFILES = ("gpu",)
# notebook knobs that size an evaluation or a probe, and their rehearsal caps (at any depth of ``extra``)
KNOB_CAPS = {"sample_prompts": 4, "samples_per_prompt": 2, "base_candidate_puzzles": 4, "sampled_eval_puzzles": 4,
             "scale_check_prompts": 2, "scale_check_generations": 2, "scale_check_updates": 1, "puzzles_per_size": 2,
             "n_prompts": 2, "n_samples": 2, "max_new_tokens": 32}
_CAPS = {("data", "n_train"): 16, ("data", "n_eval"): 8, ("train", "eval_subset"): 4,
         ("train", "max_completion_length"): 32, ("eval", "max_new_tokens"): 32, ("eval", "n_samples"): 2,
         ("eval", "batch_size"): 8, ("train", "num_processes"): 2}
# the flags of a GPU machine, and what they become on the CPU
_CPU_FLAGS = {("train", "bf16"): False, ("train", "cpu"): True, ("train", "require_gpu"): False,
              ("train", "use_vllm"): False}
_DROPPED = (("train", "gpu_memory_gb"), ("train", "vllm_mode"), ("train", "vllm_gpu_memory_utilization"))


def _cap_knobs(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: (min(v, KNOB_CAPS[k]) if k in KNOB_CAPS and isinstance(v, int) and not isinstance(v, bool)
                    else _cap_knobs(v)) for k, v in node.items()}
    if isinstance(node, list):
        return [_cap_knobs(v) for v in node]
    return node


def shrink(raw: dict) -> dict:
    """The rehearsal's params (see the module docstring) from a params file's mapping ``raw``; ``raw`` is not
    changed. A theory notebook (``kind: theory``) trains nothing and is kept as it is."""
    out = copy.deepcopy(raw)
    if out.get("kind") == "theory":
        return out
    out["seeds"] = list(out.get("seeds") or [0])[:1]
    if "workers" in out:
        out["workers"] = 1
    for (section, key), cap in _CAPS.items():
        sec = out.get(section)
        if isinstance(sec, dict) and isinstance(sec.get(key), int):
            sec[key] = min(sec[key], cap)
    for (section, key), value in _CPU_FLAGS.items():
        sec = out.get(section)
        if isinstance(sec, dict) and key in sec:
            sec[key] = value
    for section, key in _DROPPED:
        if isinstance(out.get(section), dict):
            out[section].pop(key, None)
    train, ev = out.get("train"), out.get("eval")
    if isinstance(train, dict) and "max_steps" in train:
        per_batch = int(train.get("num_iterations", 1)) * int(train.get("updates_per_rollout", 1))
        train["max_steps"] = 2 * per_batch
        if "eval_every" in train:  # once between the batches: the learning-speed metric reads a periodic evaluation
            train["eval_every"] = per_batch
        if "save_steps" in train:
            train["save_steps"] = train["max_steps"]
    if isinstance(ev, dict) and ev.get("engine") == "vllm":
        ev["engine"] = "hf"
    if "extra" in out:
        out["extra"] = _cap_knobs(out["extra"])
    protocols = [ev] + [v for v in (out.get("extra") or {}).values() if isinstance(v, dict)]
    for protocol in protocols:  # the eval section and every evaluation knob: pass@k only for k <= n_samples
        if isinstance(protocol, dict) and "ks" in protocol:
            protocol["ks"] = [k for k in protocol["ks"] if k <= protocol.get("n_samples", 1)] or [1]
    return out


def write_rehearsal_params(profile: str, root: Path) -> list[str]:
    """Write every params file of ``profile``, shrunk, to ``<root>/params/<profile>/``; each one must load as a
    checked config. Returns the notebook names."""
    target = root / "params" / profile
    target.mkdir(parents=True, exist_ok=True)
    names = []
    for path in sorted((PARAMS / profile).glob("*.yaml")):
        shrunk = shrink(yaml.safe_load(path.read_text()))
        dest = target / path.name
        text = (f"# {path.relative_to(PARAMS.parent)} shrunk for a CPU rehearsal (dgro_lib.cli.rehearse)\n"
                + yaml.safe_dump(shrunk, sort_keys=False, allow_unicode=True))
        atomic_write(dest, lambda tmp, t=text: tmp.write_text(t))
        load_config(dest)  # a shrunk file that does not load is the rehearsal's error, named here
        names.append(path.stem)
    return names


def rehearse(profile: str, only: list[str] | None = None, root: Path | None = None) -> pd.DataFrame:
    """Rehearse the notebooks of ``profile`` (``only`` those) on the CPU; returns one row per notebook."""
    from dgro_lib.cli.reproduce import list_notebooks

    root = root or OUTPUTS / "rehearse" / profile
    with_params = set(write_rehearsal_params(profile, root))
    names = [n for n in list_notebooks() if n in with_params and (not only or n in only)]
    saved = {k: os.environ.get(k) for k in (PARAMS_DIR_ENV, ARCHIVE_ENV)}
    os.environ[PARAMS_DIR_ENV] = str(root / "params")  # inherited by the notebooks' kernels
    os.environ[ARCHIVE_ENV] = "none"  # train everything: the rehearsal is of the path, not of a result
    try:
        rows = _run(names, profile, root)
    finally:  # the caller's environment as it was
        for key, val in saved.items():
            if val is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = val
    table = pd.DataFrame(rows)
    atomic_write(root / "rehearsal.csv", lambda tmp: table.to_csv(tmp, index=False))
    return table


def _run(names: list[str], profile: str, root: Path) -> list[dict]:
    from dgro_lib.cli.reproduce import run_notebook

    rows = []
    for name in names:
        find_params(name, profile)  # the shrunk file, through the same lookup the notebook makes
        t0 = time.time()
        print(f"[rehearse] {name} (profile {profile}, shrunk)", flush=True)
        try:
            executed = run_notebook(name, profile, output_root=root / "outputs")
            out = executed.parent
            claims = out / "claims.csv"
            figures = sorted(out.glob("*.png"))
            status = "ran" if claims.is_file() else "no claims.csv"
            n_claims = len(pd.read_csv(claims)) if claims.is_file() else 0
        except Exception as e:  # noqa: BLE001 - every failure is reported by name, and the next notebook runs
            status, n_claims, figures = f"failed: {type(e).__name__}: {str(e).splitlines()[0][:200]}", 0, []
        rows.append({"notebook": name, "status": status, "minutes": round((time.time() - t0) / 60, 2),
                     "claims": n_claims, "figures": len(figures)})
        print(f"[rehearse] {name}: {status} in {rows[-1]['minutes']} min, {n_claims} claims, {len(figures)} figures",
              flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="gpu", choices=PROFILES)
    parser.add_argument("--only", action="append", help="rehearse only this notebook (repeatable)")
    args = parser.parse_args(argv)
    table = rehearse(args.profile, args.only)
    print(table.to_string(index=False))
    failed = table[table["status"] != "ran"]
    return 1 if len(failed) or table.empty else 0


if __name__ == "__main__":
    sys.exit(main())
