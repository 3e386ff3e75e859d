"""A run's folder: its id, the params it was made with, and whether it is reused, resumed, extended or refused.

Layout of an experiment's ``out_dir``::

    out_dir/
      base_eval.json               held-out evaluation of the base model (shared by all runs)
      runs/<run_id>/
        manifest.json              git commit, package versions, seed, the concrete config (+ ``history`` of
                                   extensions, see prepare_run)
        metrics.csv                one row per optimizer step (TRL's logs + ours)
        heldout.csv                periodic greedy held-out accuracy (step, accuracy, length)
        final_eval.json            full held-out evaluation after training, per-puzzle correctness included
        final_eval-step<N>.json    the final evaluation of a run later extended beyond step N
        trainer/checkpoint-*       TRL checkpoints (a killed run resumes from the last one)

A folder is reused or resumed only for the params it was made with (:func:`prepare_run`).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any

import pandas as pd

from dgro_lib.config import ExperimentConfig, config_from_dict, config_to_dict
from dgro_lib.evaluate import eval_summary, evaluate_under_config
from dgro_lib.runs.data_sources import close_eval_model, load_eval_model, load_eval_records, load_train_records, puzzle_key
from dgro_lib.models.presets import EMBEDDED_PRESETS, config_hash
from dgro_lib.util.files import atomic_write, write_json

__all__ = ["run_id_for", "run_key", "config_diff", "prepare_run", "latest_checkpoint"]


def run_id_for(point: dict[str, Any], seed: int) -> str:
    """A readable, filesystem-safe id: ``reward.scheme=[-1,1]`` -> ``scheme_m1_1-seed0``."""
    parts = []
    for key, value in point.items():
        text = str(value).replace("-", "m").replace(".", "p")
        text = re.sub(r"[^A-Za-z0-9_p]+", "_", text).strip("_")
        parts.append(f"{key.split('.')[-1]}_{text}")
    return "-".join(parts + [f"seed{seed}"])


def run_key(cfg: ExperimentConfig, seed: int) -> str:
    """12 hex digits that identify what a run computes: sha256 over every run-relevant field of ``cfg`` that differs
    from its default, the seed, and (for the embedded model) the hash of the preset's warm-up recipe.

    The shared run store (``outputs/<profile>/runs/<key>``) names runs by it, so two notebooks that ask for the same
    run train it once, and any change to what a run computes makes a new one. Left out: what describes the experiment
    around the run (name, seeds, sweep, extra, ...) and what only changes speed (``train.forward_chunk_rows``); and
    ``train.max_steps`` under a ``constant`` lr schedule, because such a run is extended in place to more steps (its
    first steps are the shorter run, see :func:`prepare_run`). Fields at their default value are left out, so adding
    a config field keeps the keys of the runs already made.
    """
    d = json.loads(json.dumps({k: v for k, v in config_to_dict(cfg).items() if k not in _NOT_RUN_FIELDS}))
    default = _flatten(json.loads(json.dumps(config_to_dict(ExperimentConfig(name="")))))
    skip = set(_SPEED_FIELDS) | ({"train.max_steps"} if cfg.train.lr_scheduler_type == "constant" else set())
    fields = {k: v for k, v in _flatten(d).items() if k not in skip and v != default.get(k, object())}
    payload: dict[str, Any] = {"config": fields, "seed": seed}
    if cfg.model.path == "embedded" and cfg.model.embedded_preset in EMBEDDED_PRESETS:
        payload["embedded"] = config_hash(EMBEDDED_PRESETS[cfg.model.embedded_preset])
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:12]


def latest_checkpoint(trainer_dir: Path) -> str | None:
    """The last complete ``checkpoint-<step>`` folder under ``trainer_dir`` (None when there is none).

    transformers writes a checkpoint's files in place and ``trainer_state.json`` last, then deletes older checkpoints:
    a folder without that file is a save cut short by a kill, and the one before it is still there."""
    ckpts = sorted((p for p in Path(trainer_dir).glob("checkpoint-*") if (p / "trainer_state.json").is_file()),
                   key=lambda p: int(p.name.split("-")[-1]))
    return str(ckpts[-1]) if ckpts else None


# Config fields that do not change what a run computes (they describe the experiment around it).
_NOT_RUN_FIELDS = ("name", "description", "seeds", "workers", "sweep", "extra")
# Fields that change only how fast a run computes (and the floating-point rounding), not what it computes.
_SPEED_FIELDS = ("train.forward_chunk_rows",)
# The only differences with which an existing run is continued instead of refused (see _prior_run).
_EXTENDABLE_FIELDS = ("train.max_steps", "data.n_eval")


def _flatten(d: dict, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and k not in ("kwargs", "peft"):  # free-form mappings compare whole
            out.update(_flatten(v, key + "."))
        else:
            out[key] = v
    return out


def config_diff(old: dict, new: dict) -> dict[str, tuple[Any, Any]]:
    """Dotted key -> (old, new) for every run-relevant field where two ``config_to_dict`` forms differ (JSON
    round-trip applied to both, so tuples and lists compare equal). A field that only one side has (a manifest
    written before the field existed) counts as different only when the other side's value is not the field's
    default, so adding a config field does not orphan the runs already made."""
    old, new = (json.loads(json.dumps({k: v for k, v in d.items() if k not in _NOT_RUN_FIELDS})) for d in (old, new))
    a, b = ({k: v for k, v in _flatten(d).items() if k not in _SPEED_FIELDS} for d in (old, new))
    default = _flatten(json.loads(json.dumps(config_to_dict(ExperimentConfig(name="")))))
    missing = object()
    diff = {}
    for k in sorted(set(a) | set(b)):
        x, y = a.get(k, missing), b.get(k, missing)
        if x is missing or y is missing:
            if (y if x is missing else x) == default.get(k, missing):
                continue
        if x != y:
            diff[k] = (None if x is missing else x, None if y is missing else y)
    return diff


def _prior_run(cfg: ExperimentConfig, seed: int, run_dir: Path) -> dict | None:
    """Decide what an existing ``run_dir`` means for ``cfg``: the same run (reuse or resume it: returns None),
    an extension (returns what to record), or a different run (raises).

    Reusing a run that was trained with other params would put a wrong curve into a figure without a trace, so
    any difference is refused with the fields named. One difference is allowed, because it loses nothing and
    costs nothing: a longer ``train.max_steps`` under a ``constant`` lr schedule (the first steps of the longer
    run are exactly the old run, so it continues from the checkpoint at the old last step), optionally with a
    larger ``data.n_eval`` when the training puzzles stay the same (held-out sets are prefix-stable). The old
    final evaluation is kept as ``final_eval-step<N>.json``.
    """
    manifest_path = run_dir / "manifest.json"
    if not manifest_path.exists():
        return None
    old = json.loads(manifest_path.read_text())
    diff = config_diff(old["config"], config_to_dict(cfg))
    if old.get("seed") != seed:
        diff["seed"] = (old.get("seed"), seed)
    if not diff:
        return None
    listing = "; ".join(f"{k}: {a!r} -> {b!r}" for k, (a, b) in diff.items())
    refuse = (f"{run_dir}: this run was made with other params ({listing}). Use another output folder, or move "
              "this run away to train it again")
    if not set(diff) <= set(_EXTENDABLE_FIELDS) or "train.max_steps" not in diff:
        raise ValueError(refuse)
    old_steps, new_steps = diff["train.max_steps"]
    if new_steps < old_steps or cfg.train.lr_scheduler_type != "constant":
        raise ValueError(refuse + f" (a run can only be extended to more steps under lr_scheduler_type 'constant'; "
                         f"got {old_steps} -> {new_steps}, {cfg.train.lr_scheduler_type!r})")
    if "data.n_eval" in diff:
        old_cfg = config_from_dict(old["config"], source=str(manifest_path))
        if [puzzle_key(r) for r in load_train_records(old_cfg)] != [puzzle_key(r) for r in load_train_records(cfg)]:
            raise ValueError(refuse + " (data.n_eval changes which training puzzles overlap the held-out set)")
        if cfg.data.n_eval < old_cfg.data.n_eval:
            raise ValueError(refuse + " (data.n_eval can only grow when a run is extended)")
    ckpt = run_dir / "trainer" / f"checkpoint-{old_steps}"
    if (run_dir / "final_eval.json").exists() and not ckpt.is_dir():
        raise ValueError(refuse + f" (cannot extend: no checkpoint at the old last step, {ckpt} is missing)")
    return {"extended": {"from_max_steps": old_steps, "to_max_steps": new_steps,
                         "changed": {k: list(v) for k, v in diff.items()},
                         "previous_manifest": {k: old.get(k) for k in ("created", "git")},
                         "checkpoint": ckpt.name}}


def _start_extension(cfg: ExperimentConfig, run_dir: Path, extension: dict) -> None:
    """Turn a finished run into the first part of a longer one: keep its final evaluation under another name, and
    replace its full-set held-out row at the old last step by the periodic (subset) evaluation a run of the new
    length makes at that step, computed from the checkpoint."""
    final_path = run_dir / "final_eval.json"
    step = extension["extended"]["from_max_steps"]
    if not final_path.exists():  # killed after the old run ended and before any new checkpoint: nothing to move
        return
    heldout_csv = run_dir / "heldout.csv"
    t = cfg.train
    if heldout_csv.exists():
        rows = pd.read_csv(heldout_csv)
        rows = rows[rows.step != step]
        if t.eval_every and step % t.eval_every == 0:
            model, tokenizer = load_eval_model(cfg, str(run_dir / "trainer" / f"checkpoint-{step}"))
            subset = load_eval_records(cfg)[: t.eval_subset]
            try:
                ev = evaluate_under_config(model, tokenizer, subset, cfg)
            finally:
                close_eval_model(model)
            rows = pd.concat([rows, pd.DataFrame([{"step": step, "subset": len(subset), **eval_summary(ev)}])])
        rows = rows.sort_values("step")
        atomic_write(heldout_csv, lambda tmp: rows.to_csv(tmp, index=False))
    os.replace(final_path, run_dir / f"final_eval-step{step}.json")
    (run_dir / "trained.json").unlink(missing_ok=True)  # a multi-process run's end of training: now the extension's


def prepare_run(cfg: ExperimentConfig, seed: int, run_dir: str | Path) -> bool:
    """Check an existing ``run_dir`` against ``cfg`` (raises when it was made with other params, see
    :func:`_prior_run`), turn a finished run into the start of an allowed extension, and return whether the run
    is finished for ``cfg`` (its ``final_eval.json`` exists)."""
    run_dir = Path(run_dir)
    extension = _prior_run(cfg, seed, run_dir)
    if extension is not None:
        _start_extension(cfg, run_dir, extension)
        manifest_path = run_dir / "manifest.json"
        manifest = json.loads(manifest_path.read_text())
        manifest["config"] = config_to_dict(cfg)
        manifest["history"] = manifest.get("history", []) + [extension]
        write_json(manifest_path, manifest)
    return (run_dir / "final_eval.json").exists()
