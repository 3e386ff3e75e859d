"""Run an experiment: every (sweep point x seed) training run, in parallel processes, with resume.

The notebooks call :func:`run_experiment` and plot what it returns. One run is :mod:`dgro_lib.training`'s,
started by :mod:`dgro_lib.launch`; the layout of ``out_dir`` and when a run folder is reused, resumed or
extended are :mod:`dgro_lib.runstore`'s. Here: the base model's evaluation (shared by all runs), the worker
pool over the sweep, and the results read back into DataFrames.
"""

from __future__ import annotations

import concurrent.futures as cf
import json
import multiprocessing as mp
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from .config import ExperimentConfig, check_runnable_here, config_to_dict, expand_sweep, uses_reference_model
from .evaluate import eval_summary, evaluate_under_config, protocol_for_config
from .inputs import load_eval_records, resolve_model_path
from .launch import launch_run
from .manifest import finish_manifest, write_json, write_manifest
from .models import load_model
from .runstore import config_diff, prepare_run, run_id_for
from .training import grpo_config, run_training

# run_training, prepare_run, config_diff, run_id_for, grpo_config, uses_reference_model, resolve_model_path and
# load_eval_records are re-exported: notebooks and tests import them from here.
__all__ = ["run_experiment", "collect_results", "ExperimentResult", "run_training", "prepare_run", "config_diff",
           "run_id_for", "grpo_config", "uses_reference_model", "resolve_model_path", "load_eval_records"]


@dataclass
class ExperimentResult:
    """What a notebook needs: per-step metrics, per-run final evaluations and the base model's evaluation."""

    metrics: pd.DataFrame
    heldout: pd.DataFrame
    finals: pd.DataFrame
    base: dict[str, Any]
    out_dir: Path


def _base_eval(cfg: ExperimentConfig, out_dir: Path) -> dict[str, Any]:
    """Evaluate the base model once per experiment (every run starts from it)."""
    path = out_dir / "base_eval.json"
    model_path = resolve_model_path(cfg)
    records = load_eval_records(cfg)
    protocol = json.loads(json.dumps(protocol_for_config(cfg, len(records))))
    if path.exists():
        base = json.loads(path.read_text())
        if base["protocol"] == protocol and base.get("model_path", model_path) == model_path:
            return base
        # another protocol or model: its numbers cannot be paired with these runs; keep them under another name
        kept = path.with_name(f"base_eval-{time.strftime('%Y%m%dT%H%M%S')}.json")
        changed = {k: (base["protocol"].get(k), v) for k, v in protocol.items() if base["protocol"].get(k) != v}
        if base.get("model_path", model_path) != model_path:
            changed["model_path"] = (base["model_path"], model_path)
        print(f"{path}: made under other settings {changed}; kept as {kept.name}, evaluating the base model again",
              flush=True)
        os.replace(path, kept)
    torch.set_num_threads(cfg.train.threads)
    model, tokenizer = load_model(model_path)
    ev = evaluate_under_config(model, tokenizer, records, cfg)
    base = {"summary": eval_summary(ev), "correct": list(map(bool, ev["correct"])), "protocol": protocol,
            "model_path": model_path}
    write_json(path, base)
    return json.loads(path.read_text())  # the form a reused evaluation has (JSON keys are strings)


def _worker(args: tuple) -> dict:
    cfg, seed, run_dir, point = args
    os.environ.setdefault("OMP_NUM_THREADS", str(cfg.train.threads))
    return launch_run(cfg, seed, run_dir, point=point)


def run_experiment(cfg: ExperimentConfig, out_dir: str | Path, *, workers: int | None = None) -> ExperimentResult:
    """Run every (sweep point x seed) of ``cfg`` into ``out_dir`` (runs already finished are reused).

    The base model is built and evaluated first in this process, so parallel workers only read it.
    """
    check_runnable_here(cfg)  # a GPU setting on a CPU machine: a ConfigError naming the key, not a CUDA traceback
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    write_manifest(out_dir / "manifest.json", config=config_to_dict(cfg), seed=None)
    base = _base_eval(cfg, out_dir)
    jobs = [
        (concrete, seed, out_dir / "runs" / run_id_for(point, seed), point)
        for point, seed, concrete in expand_sweep(cfg)
    ]
    workers = workers or cfg.workers
    failures = []
    if workers <= 1:
        for job in jobs:
            _worker(job)
    else:
        ctx = mp.get_context("spawn")  # fork after torch initialised its thread pools can deadlock
        with cf.ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
            futures = {pool.submit(_worker, job): job for job in jobs}
            for fut in cf.as_completed(futures):
                exc = fut.exception()
                if exc is not None:
                    failures.append((futures[fut][2].name, exc))
    if failures:
        names = ", ".join(n for n, _ in failures)
        raise RuntimeError(f"{len(failures)} run(s) failed: {names}; first error: {failures[0][1]!r}") from failures[0][1]
    result = collect_results(out_dir, base=base, runs=[job[2].name for job in jobs])
    finish_manifest(out_dir / "manifest.json", runs=[job[2].name for job in jobs])
    return result


def collect_results(out_dir: str | Path, *, base: dict | None = None,
                    runs: list[str] | None = None) -> ExperimentResult:
    """Read the runs' CSV/JSON under ``out_dir/runs`` into three DataFrames: the runs named in ``runs`` (what
    :func:`run_experiment` passes: the current sweep, so a folder left by an earlier sweep is not plotted), or
    every run folder when None."""
    out_dir = Path(out_dir)
    base = base if base is not None else json.loads((out_dir / "base_eval.json").read_text())
    metrics, heldout, finals = [], [], []
    folders = sorted((out_dir / "runs").glob("*")) if runs is None else [out_dir / "runs" / r for r in sorted(runs)]
    for run in folders:
        manifest = json.loads((run / "manifest.json").read_text())
        tags = {"run": run.name, "seed": manifest["seed"], **manifest.get("sweep_point", {})}
        if (run / "metrics.csv").exists():
            metrics.append(pd.read_csv(run / "metrics.csv").assign(**tags))
        if (run / "heldout.csv").exists():
            heldout.append(pd.read_csv(run / "heldout.csv").assign(**tags))
        if (run / "final_eval.json").exists():
            fe = json.loads((run / "final_eval.json").read_text())
            finals.append({**tags, **fe["summary"], "correct": fe["correct"]})
    return ExperimentResult(
        metrics=pd.concat(metrics, ignore_index=True) if metrics else pd.DataFrame(),
        heldout=pd.concat(heldout, ignore_index=True) if heldout else pd.DataFrame(),
        finals=pd.DataFrame(finals),
        base=base,
        out_dir=out_dir,
    )
