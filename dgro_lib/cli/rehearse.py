"""Rehearse a GPU profile on the CPU: ``make rehearse PROFILE=gpu`` (``python -m dgro_lib.cli.rehearse --profile gpu``).

Every notebook that has params at the profile is executed with papermill, at that profile's params with only the
scale shrunk, to its last cell: its claims file and figures must be written. The verdicts at this scale mean
nothing; the rehearsal checks that the path a GPU user takes runs, before a GPU node's first hour is spent on it.

The one override set (:func:`shrink`), applied to the params file as written, nothing else changed:

* **seeds**: the first one; ``workers``: 1;
* **the rollout batch**: more than :data:`MAX_ROLLOUTS` rollouts (DCPO's 512 prompts x 5 at ``paper``) are cut to
  the largest divisor of ``prompts_per_step`` that fits and still splits over the processes and mini-batches; the
  group size and the number of mini-batches stay, and ``micro_batch_size`` (gradient accumulation) is lowered where
  it no longer divides one step's rows;
* **steps**: ``train.max_steps`` = two rollout batches' worth of optimizer steps (``num_iterations`` x
  ``updates_per_rollout`` x 2), evaluated after the first batch and checkpointed at the end; ``eval_subset`` at
  most 2;
* **sequence lengths**: completions and evaluation budgets at most 32 new tokens;
* **evaluation sizes**: ``data.n_train`` at most 16, ``data.n_eval`` at most 4 (per people count or benchmark),
  ``eval.n_samples`` at most 2 (``ks`` cut to match), ``eval.batch_size`` at most 8, and the notebook knobs that
  size an evaluation (:data:`KNOB_CAPS`); a size the file leaves to the schema's default, or sets to null (all),
  gets the cap too;
* **bf16 and CUDA flags**: ``bf16`` off, ``cpu`` on, ``require_gpu`` off, ``use_vllm`` off (vLLM generation during
  training needs CUDA), ``eval.engine`` hf; the GPU memory hint dropped; ``num_processes`` at most 2 (where the file
  asks for several GPUs, two CPU processes run the same engine: DDP, ZeRO-2/3 or FSDP).

Everything else runs as the file says: the base model and its preset, data format and templates, loss, reward, the
evaluation protocol, the sweep's arms, the multi-process engine, checkpointing and the notebook's own analysis.

The shrunk params go to ``outputs/rehearse/<profile>/params/<profile>/`` and the notebooks read them through
``DGRO_PARAMS_DIR`` (:func:`dgro_lib.config.find_params`); outputs and the run store go under
``outputs/rehearse/<profile>/``; nothing is restored from a run archive. The result, one row per notebook (ran or
failed, minutes, claims rows, figures), is ``outputs/rehearse/<profile>/rehearsal.csv``.

The ``paper`` profile names hub checkpoints and hub data sets, which this machine cannot reach. Its rehearsal adds
two things, and changes nothing else:

* **the model** (an override): every hub checkpoint the file names (``model.path``, and ``model.path`` in a sweep) is
  replaced by its stand-in, a tiny random-weight model of the same architecture family with the family's real
  tokenizer (:mod:`dgro_lib.models.standins`), built once under ``outputs/rehearse/paper/models/``;
* **the data** (no override: the params still say ``source: hub``): the hub loaders read a local mirror of every data
  set the files name, written by the project's generators in each data set's own record format
  (:mod:`dgro_lib.data.hub_mirror`) under ``outputs/rehearse/paper/hub/`` and named by ``$DGRO_HUB_MIRROR``.
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

from dgro_lib.config import expand_sweep, find_params, load_config
from dgro_lib.config.schema import DataConfig, EvalConfig, ExperimentConfig, TrainConfig
from dgro_lib.config.load import PARAMS_DIR_ENV
from dgro_lib.runs.archive import ARCHIVE_ENV
from dgro_lib.util.files import atomic_write
from dgro_lib.util.paths import HUB_MIRROR_ENV, OUTPUTS, PARAMS, is_hub_id

__all__ = ["shrink", "hub_models", "hub_datasets", "write_rehearsal_params", "rehearse", "main", "KNOB_CAPS",
           "PROFILES"]

PROFILES = ("gpu", "paper")
# notebook knobs that size an evaluation or a probe, and their rehearsal caps (at any depth of ``extra``)
KNOB_CAPS = {"sample_prompts": 4, "samples_per_prompt": 2, "base_candidate_puzzles": 4, "sampled_eval_puzzles": 4,
             "scale_check_prompts": 2, "scale_check_generations": 2, "scale_check_updates": 1, "puzzles_per_size": 2,
             "n_prompts": 2, "n_samples": 2, "max_new_tokens": 32}
_CAPS = {("data", "n_train"): 16, ("data", "n_eval"): 4, ("train", "eval_subset"): 2,
         ("train", "max_completion_length"): 32, ("eval", "max_new_tokens"): 32, ("eval", "n_samples"): 2,
         ("eval", "batch_size"): 8, ("train", "num_processes"): 2}
_SECTIONS = {"data": DataConfig, "train": TrainConfig, "eval": EvalConfig}  # whose defaults an absent key takes
MAX_ROLLOUTS = 64  # rollouts per rollout batch in a rehearsal (DCPO's paper batch is 512 prompts x 5)
# the flags of a GPU machine, and what they become on the CPU
_CPU_FLAGS = {("train", "bf16"): False, ("train", "cpu"): True, ("train", "require_gpu"): False,
              ("train", "use_vllm"): False}
_DROPPED = (("train", "gpu_memory_gb"), ("train", "vllm_mode"), ("train", "vllm_gpu_memory_utilization"))


def _capped(value: Any, cap: int) -> Any:
    """``value`` at most ``cap``; None (all of them, or the evaluation's own) becomes ``cap``."""
    if value is None:
        return cap
    return min(value, cap) if isinstance(value, int) and not isinstance(value, bool) else value


def _cap_knobs(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: (_capped(v, KNOB_CAPS[k]) if k in KNOB_CAPS and (v is None or isinstance(v, int))
                    else _cap_knobs(v)) for k, v in node.items()}
    if isinstance(node, list):
        return [_cap_knobs(v) for v in node]
    return node


def _sweep_values(raw: dict, key: str) -> list[tuple[str, int | None]]:
    """``(sweep key, position)`` of every sweep axis that sets ``key`` (position within a ``a|b`` key; None for a
    key of its own)."""
    out = []
    for sweep_key in (raw.get("sweep") or {}):
        parts = sweep_key.split("|")
        if key in parts:
            out.append((sweep_key, parts.index(key) if len(parts) > 1 else None))
    return out


def _runs(cfg: ExperimentConfig) -> list[ExperimentConfig]:
    """The run config of each sweep point of ``cfg`` (its first seed's: a point's seeds share it)."""
    runs = expand_sweep(cfg)
    return [run for i, (_, seed, run) in enumerate(runs) if i == 0 or runs[i - 1][2] is not run]


def hub_models(cfg: ExperimentConfig) -> list[str]:
    """The hub checkpoints ``cfg``'s runs start from (``model.path``, also where a sweep sets it), in order, each
    once."""
    return list(dict.fromkeys(r.model.path for r in _runs(cfg)
                              if r.model.path != "embedded" and is_hub_id(r.model.path)
                              and not Path(r.model.path).exists()))


def hub_datasets(cfg: ExperimentConfig) -> tuple[bool, list[str]]:
    """``(K&K from the hub?, the math data sets loaded from the hub)`` of ``cfg``'s runs (also where a sweep sets
    them)."""
    runs = [r for r in _runs(cfg) if r.data.source == "hub"]
    names = [n for r in runs if r.data.task == "math" for n in (r.data.math_train, *r.data.math_eval)]
    return any(r.data.task == "kk" for r in runs), list(dict.fromkeys(names))


def _replace_models(out: dict, models: dict[str, str]) -> None:
    if isinstance(out.get("model"), dict) and out["model"].get("path") in models:
        out["model"]["path"] = models[out["model"]["path"]]
    for sweep_key, pos in _sweep_values(out, "model.path"):
        entries = out["sweep"][sweep_key]
        if pos is None:
            out["sweep"][sweep_key] = [models.get(e, e) for e in entries]
        else:
            for entry in entries:
                entry[pos] = models.get(entry[pos], entry[pos])


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _cap_rollout_batch(train: dict) -> None:
    """Cut a rollout batch of more than :data:`MAX_ROLLOUTS` rollouts to the largest divisor of ``prompts_per_step``
    whose batch fits and still splits over the processes and mini-batches; lower ``micro_batch_size`` (gradient
    accumulation: the same update) to the largest divisor of one step's rows on one process where it no longer
    divides them. The group size ``num_generations`` and the number of mini-batches stay as written."""
    prompts, group = int(train["prompts_per_step"]), int(train.get("num_generations", 8))
    if prompts * group <= MAX_ROLLOUTS:
        return
    split = int(train.get("num_processes", 1)) * int(train.get("updates_per_rollout", 1))
    fits = [d for d in _divisors(prompts) if d * group <= MAX_ROLLOUTS and (d * group) % split == 0]
    if not fits:
        raise ValueError(f"train.prompts_per_step: no divisor of {prompts} gives a rollout batch of at most "
                         f"{MAX_ROLLOUTS} rollouts that splits over {split} process x mini-batch shares")
    train["prompts_per_step"] = fits[-1]
    rows = fits[-1] * group // split
    micro = train.get("micro_batch_size")
    if isinstance(micro, int) and rows % micro:
        train["micro_batch_size"] = max(d for d in _divisors(rows) if d <= micro)


def shrink(raw: dict, models: dict[str, str] | None = None) -> dict:
    """The rehearsal's params (see the module docstring) from a params file's mapping ``raw``; ``raw`` is not
    changed. ``models`` maps a hub checkpoint to its stand-in's folder (the ``paper`` profile). A theory notebook
    (``kind: theory``) trains nothing and is kept as it is."""
    out = copy.deepcopy(raw)
    if out.get("kind") == "theory":
        return out
    if models:
        _replace_models(out, models)
    out["seeds"] = list(out.get("seeds") or [0])[:1]
    if "workers" in out:
        out["workers"] = 1
    for (section, key), cap in _CAPS.items():
        sec = out.get(section)
        if not isinstance(sec, dict):
            continue
        if key not in sec:  # the schema's default applies: cap it where it is larger (n_eval 400, ...)
            default = getattr(_SECTIONS[section](), key)
            if isinstance(default, int) and default > cap:
                sec[key] = cap
        elif sec[key] is None or isinstance(sec[key], int):
            sec[key] = _capped(sec[key], cap)  # None: every record of the data set, here the cap
    for (section, key), value in _CPU_FLAGS.items():
        sec = out.get(section)
        if isinstance(sec, dict) and (key in sec or key == "cpu"):  # cpu: also where the file leaves it to the default
            sec[key] = value
    for section, key in _DROPPED:
        if isinstance(out.get(section), dict):
            out[section].pop(key, None)
    train, ev = out.get("train"), out.get("eval")
    if isinstance(train, dict) and "prompts_per_step" in train:
        _cap_rollout_batch(train)
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


def _stand_ins(cfgs: list[ExperimentConfig], root: Path) -> dict[str, str]:
    """Build the stand-in of every hub checkpoint of ``cfgs`` under ``<root>/models/``; hub id -> folder."""
    from dgro_lib.models.standins import build_standin

    models = {}
    for hub_id in dict.fromkeys(m for cfg in cfgs for m in hub_models(cfg)):
        folder = root / "models" / hub_id.replace("/", "__")
        print(f"[rehearse] stand-in for {hub_id}: {folder}", flush=True)
        models[hub_id] = str(build_standin(hub_id, folder))
    return models


def _hub_mirror(cfgs: list[ExperimentConfig], root: Path) -> Path | None:
    """Write the local mirror of every hub data set of ``cfgs`` under ``<root>/hub/`` (None when none is named)."""
    from dgro_lib.data.hub_mirror import write_kk_mirror, write_math_mirror

    kk_any, math_names = False, []
    for cfg in cfgs:
        kk_hub, names = hub_datasets(cfg)
        kk_any, math_names = kk_any or kk_hub, math_names + names
    if not kk_any and not math_names:
        return None
    mirror = root / "hub"
    if kk_any:  # every people count, at the shrunk sizes
        write_kk_mirror(mirror, n_train=_CAPS[("data", "n_train")], n_test=_CAPS[("data", "n_eval")])
    if math_names:
        write_math_mirror(mirror, math_names, n=_CAPS[("data", "n_train")])
    return mirror


def write_rehearsal_params(profile: str, root: Path) -> list[str]:
    """Write every params file of ``profile``, shrunk, to ``<root>/params/<profile>/``; each one must load as a
    checked config. For hub checkpoints and data sets, the stand-ins and the local mirror are written first
    (``<root>/models/``, ``<root>/hub/``). Returns the notebook names."""
    target = root / "params" / profile
    target.mkdir(parents=True, exist_ok=True)
    paths = sorted((PARAMS / profile).glob("*.yaml"))
    raws = [yaml.safe_load(p.read_text()) for p in paths]
    cfgs = [load_config(p) for p in paths]  # the files as a GPU node reads them: their runs name models and data
    models = _stand_ins(cfgs, root)
    _hub_mirror(cfgs, root)
    names = []
    for path, raw in zip(paths, raws):
        shrunk = shrink(raw, models)
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
    order = only or list_notebooks()  # ``only``'s order when given: the notebooks that matter most first
    names = [n for n in order if n in with_params and n in list_notebooks()]
    for name in sorted(with_params - set(list_notebooks())):  # loaded and checked above; nothing executes it
        print(f"[rehearse] params/{profile}/{name}.yaml: no notebook reads it (loaded and checked only)", flush=True)
    saved = {k: os.environ.get(k) for k in (PARAMS_DIR_ENV, ARCHIVE_ENV, HUB_MIRROR_ENV)}
    os.environ[PARAMS_DIR_ENV] = str(root / "params")  # inherited by the notebooks' kernels
    os.environ[ARCHIVE_ENV] = "none"  # train everything: the rehearsal is of the path, not of a result
    if (root / "hub").is_dir():  # the hub loaders read the local mirror
        os.environ[HUB_MIRROR_ENV] = str(root / "hub")
    try:
        rows = _run(names, profile, root)
    finally:  # the caller's environment as it was
        for key, val in saved.items():
            if val is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = val
    table = pd.DataFrame(rows)
    _merge_rows(root / "rehearsal.csv", table)
    return table


def _merge_rows(path: Path, table: pd.DataFrame) -> None:
    """Write ``table`` to ``path``, keeping the rows of notebooks it does not hold from an earlier rehearsal there
    (a rehearsal of some notebooks, ``--only``, updates their rows; the runs it reuses are in its run store)."""
    if path.is_file() and len(table):
        earlier = pd.read_csv(path)
        table = pd.concat([earlier[~earlier["notebook"].isin(table["notebook"])], table], ignore_index=True)
    atomic_write(path, lambda tmp: table.to_csv(tmp, index=False))


def _backbones(name: str, profile: str) -> list[str | None]:
    """The backbones a notebook is executed for (its params through the lookup the notebook makes, so at a
    rehearsal the shrunk file): each model of a sweep that pairs models with their benchmark suites
    (DCPO Table 2 at ``paper``: one execution per backbone, its ``backbone`` parameter), else [None] (one
    execution)."""
    from dgro_lib.analysis.dcpo import BACKBONE_KEY

    cfg = load_config(find_params(name, profile))
    return [entry[0] for entry in cfg.sweep[BACKBONE_KEY]] if BACKBONE_KEY in cfg.sweep else [None]


def _run(names: list[str], profile: str, root: Path) -> list[dict]:
    from dgro_lib.cli.reproduce import run_notebook

    rows = []
    for name, backbone in [(n, b) for n in names for b in _backbones(n, profile)]:
        t0 = time.time()
        label = name + (f" [backbone {Path(backbone).name}]" if backbone else "")
        print(f"[rehearse] {label} (profile {profile}, shrunk)", flush=True)
        try:
            executed = run_notebook(name, profile, output_root=root / "outputs",
                                    parameters={"backbone": backbone} if backbone else None,
                                    variant=f"_{Path(backbone).name}" if backbone else "")
            out = executed.parent
            claims = out / "claims.csv"
            figures = sorted(out.glob("*.png"))
            status = "ran" if claims.is_file() else "no claims.csv"
            n_claims = len(pd.read_csv(claims)) if claims.is_file() else 0
        except Exception as e:  # noqa: BLE001 - every failure is reported by name, and the next notebook runs
            status, n_claims, figures = f"failed: {type(e).__name__}: {str(e).splitlines()[0][:200]}", 0, []
        rows.append({"notebook": label, "status": status, "minutes": round((time.time() - t0) / 60, 2),
                     "claims": n_claims, "figures": len(figures)})
        print(f"[rehearse] {label}: {status} in {rows[-1]['minutes']} min, {n_claims} claims, {len(figures)} figures",
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
