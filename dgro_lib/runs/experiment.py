"""Run an experiment: every (sweep point x seed) training run, in parallel processes, with resume.

The notebooks call :func:`run_experiment` and plot what it returns. One run is :mod:`dgro_lib.runs.training`'s,
started by :mod:`dgro_lib.runs.launch`; the layout of ``out_dir`` and when a run folder is reused, resumed or
extended are :mod:`dgro_lib.runs.store`'s. Here: the base model's evaluation (shared by all runs), the worker
pool over the sweep, and the results read back into DataFrames.
"""

from __future__ import annotations

import concurrent.futures as cf
import hashlib
import json
import multiprocessing as mp
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import pandas as pd
import torch
from filelock import FileLock
from tqdm.auto import tqdm

from dgro_lib.runs.archive import (ARCHIVED, BASE_EVALS, archive_from_env, restore_base_eval, restore_runs,
                                   stored_measurement)
from dgro_lib.config import (ExperimentConfig, apply_overrides, check_runnable_here, config_to_dict, expand_sweep,
                     uses_reference_model)
from dgro_lib.evaluate import eval_summary, evaluate_under_config, per_item_correct, protocol_for_config
from dgro_lib.runs.data_sources import (close_eval_model, load_eval_model, load_eval_records, model_identity, puzzle_key,
                                       resolve_model_path)
from dgro_lib.runs.launch import launch_run
from dgro_lib.util.manifest import finish_manifest, write_manifest
from dgro_lib.util.files import atomic_write, write_json
from dgro_lib.runs.store import config_diff, latest_checkpoint, prepare_run, run_id_for, run_key
from dgro_lib.runs.training import grpo_config, run_training

# run_training, prepare_run, config_diff, run_id_for, grpo_config, uses_reference_model, resolve_model_path and
# load_eval_records are re-exported: notebooks and tests import them from here.
__all__ = ["run_experiment", "collect_results", "evaluate_runs", "evaluate_checkpoint", "evaluate_base_candidates", "ExperimentResult", "run_training", "prepare_run", "config_diff",
           "run_id_for", "grpo_config", "uses_reference_model", "resolve_model_path", "load_eval_records"]


@dataclass
class ExperimentResult:
    """What a notebook needs: per-step metrics, per-run final evaluations and the base model's evaluation."""

    metrics: pd.DataFrame
    heldout: pd.DataFrame
    finals: pd.DataFrame
    base: dict[str, Any]
    out_dir: Path
    bases: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Every base model's evaluation by its identity (the ``base_model`` column of ``finals``): more than one when
    the sweep changes the base model."""


def base_evaluation_key(model_path: str, protocol: dict, records: list[dict]) -> str:
    """12 hex digits naming a base-model evaluation in the run store: the model, the protocol and the puzzles."""
    payload = {"model": model_path, "protocol": protocol, "puzzles": [list(map(str, puzzle_key(r))) for r in records]}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:12]


def _experiment_base_evaluation(cfg: ExperimentConfig, out_dir: Path, store: Path | None = None, *, copy: bool = True
                                ) -> dict[str, Any]:
    """Evaluate the base model once (every run starts from it): ``store/base/<key>.json`` is reused by every
    experiment that evaluates the same model under the same protocol on the same puzzles; ``out_dir/base_eval.json``
    is this experiment's copy (unless ``copy`` is false: the base of a sweep point that changes the model)."""
    path = out_dir / "base_eval.json"
    model_path = resolve_model_path(cfg)
    records = load_eval_records(cfg)
    protocol = json.loads(json.dumps(protocol_for_config(cfg, len(records))))
    if store is not None:
        stored = store / "base" / f"{base_evaluation_key(model_identity(cfg, model_path), protocol, records)}.json"
        base = _stored_evaluation(model_path, cfg, records, protocol, stored)  # experiments sharing it evaluate once
        if copy:
            write_json(path, base)
        return base
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
    write_json(path, _evaluate_model(cfg, model_path, records, protocol))
    return json.loads(path.read_text())  # the form a reused evaluation has (JSON keys are strings)


def evaluate_checkpoint(cfg: ExperimentConfig, model_path: str | Path, records: list[dict]) -> tuple[dict, Any]:
    """``(evaluation, model)``: :func:`~dgro_lib.evaluate.evaluate_under_config` of the weights at ``model_path`` on
    ``records``, loaded where ``cfg`` evaluates (:func:`load_eval_model`) with ``cfg.train.threads`` torch threads, and
    released after; the model is returned for its device and dtype only."""
    torch.set_num_threads(cfg.train.threads)
    # a GPU node evaluates on the GPU (or through vLLM, eval.engine), not on one CPU thread in fp32
    model, tokenizer = load_eval_model(cfg, model_path)
    try:
        return evaluate_under_config(model, tokenizer, records, cfg), model
    finally:
        close_eval_model(model)


def _evaluate_model(cfg: ExperimentConfig, model_path: str, records: list[dict], protocol: dict) -> dict[str, Any]:
    """One evaluation of ``model_path`` under ``cfg.eval`` as it is stored: the summary, and per puzzle ``correct`` (a
    bool when greedy, the fraction of correct samples when sampling), with the protocol and the model path."""
    ev, model = evaluate_checkpoint(cfg, model_path, records)
    return {"summary": eval_summary(ev), "correct": per_item_correct(ev), "protocol": protocol,
            "model_path": str(model_path),
            "evaluated_on": {"device": str(model.device), "dtype": str(model.dtype)}}


def _worker(args: tuple) -> dict:
    cfg, seed, run_dir, point, evaluations = args
    os.environ.setdefault("OMP_NUM_THREADS", str(cfg.train.threads))
    # two experiments that share the store may ask for the same run at once: the second waits, then reuses it
    with FileLock(str(run_dir) + ".lock"):
        summary = launch_run(cfg, seed, run_dir, point=point)
    for overrides, n_puzzles, data in evaluations:  # here, so that they overlap with the other workers' training
        _stored_evaluation(*_run_eval_target(cfg, Path(run_dir), overrides, n_puzzles, data_overrides=data))
    return summary


def _eval_worker(args: tuple) -> str:
    model_path, ecfg, records, protocol, path = args
    os.environ.setdefault("OMP_NUM_THREADS", str(ecfg.train.threads))
    _stored_evaluation(model_path, ecfg, records, protocol, path)
    return path.name


def run_experiment(cfg: ExperimentConfig, out_dir: str | Path, *, workers: int | None = None,
                   store: str | Path | None = None,
                   evaluations: Sequence[tuple] = (), archive: str | Path | None = None) -> ExperimentResult:
    """Run every (sweep point x seed) of ``cfg`` (runs already finished are reused); results under ``out_dir``.

    Runs live in the run store ``store/<run_key>`` (default ``out_dir/runs``; the notebooks share
    ``outputs/<profile>/runs``): a run is named by what it computes (:func:`~dgro_lib.runs.store.run_key`), so every
    experiment that asks for the same configuration and seed gets the same run, trained once. ``out_dir/runs.csv``
    lists the runs this experiment used (its label for each, the sweep point, the seed, the store folder). The base
    model is built first in this process, so parallel workers only read it.

    ``evaluations`` are further protocols, each ``(eval overrides, number of puzzles or None)`` or ``(eval overrides,
    number of puzzles or None, data overrides)`` as :func:`evaluate_runs` takes them: each worker computes them for its run right after training it, and the base
    models' evaluations are jobs of the same pool, queued after the runs, so that no core waits while another
    evaluates. A later :func:`evaluate_runs` with the same arguments reads them back from the store.

    ``archive`` (default: :func:`~dgro_lib.runs.archive.archive_from_env`: ``DGRO_RUN_ARCHIVE``, else
    ``reference/<profile>/runs`` for a profile's store ``outputs/<profile>/runs``) is a run archive
    (:mod:`dgro_lib.runs.archive`): a run the store lacks is restored from it, instead of trained, when the archive holds
    the same run from the same base weights. ``runs.csv``'s ``from_archive`` column says which runs were.
    """
    check_runnable_here(cfg)  # a GPU setting on a CPU machine: a ConfigError naming the key, not a CUDA traceback
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    store = Path(store) if store is not None else out_dir / "runs"
    write_manifest(out_dir / "manifest.json", config=config_to_dict(cfg), seed=None, extra={"run_store": str(store)})
    evaluations = [_evaluation_spec(e) for e in evaluations]
    jobs = [(concrete, seed, store / run_key(concrete, seed), point, evaluations)
            for point, seed, concrete in expand_sweep(cfg)]
    # a sweep may change the base model itself (model.embedded_preset): each run is compared with its own base.
    # resolve_model_path builds an embedded base that is not cached yet, here, before any worker needs it.
    base_cfgs = {model_identity(cfg, resolve_model_path(cfg)): cfg}
    base_of, base_path = {}, {}
    for concrete, seed, run_dir, _, _ in jobs:
        base_path[run_dir] = resolve_model_path(concrete)
        ident = model_identity(concrete, base_path[run_dir])
        base_cfgs.setdefault(ident, concrete)
        base_of[run_dir] = ident
    archive = Path(archive) if archive is not None else archive_from_env(store)
    restored = {}
    if archive is not None:
        restored = restore_runs([(c, s, d, base_path[d]) for c, s, d, _, _ in jobs], archive)
    eval_jobs = [_base_evaluation_job(c, store, overrides, n, data_overrides=data)
                 for c in base_cfgs.values() for overrides, n, data in [({}, None, {}), *evaluations]]
    if archive is not None:  # the base evaluations the archive holds for these base weights are read, not redone
        n = sum(restore_base_eval(job[0], job[4], archive) for job in eval_jobs)
        if n:
            print(f"[experiment] {n} of {len(eval_jobs)} base evaluations restored from the run archive", flush=True)
    listing = pd.DataFrame([{"run": run_id_for(point, seed), "seed": seed, "key": run_dir.name,
                             "path": os.path.relpath(run_dir, out_dir), "sweep_point": json.dumps(point),
                             "base_model": base_of[run_dir], "from_archive": restored.get(run_dir.name, "").startswith("restored")}
                            for _, seed, run_dir, point, _ in jobs])
    if listing["run"].duplicated().any():  # two sweep points with one label would overwrite each other's rows
        raise ValueError(f"sweep: points with the same label {listing['run'][listing['run'].duplicated()].tolist()}")
    atomic_write(out_dir / "runs.csv", lambda tmp: listing.to_csv(tmp, index=False))
    workers = workers or cfg.workers
    failures = []
    t0, finished = time.time(), 0
    # One line per run, in the order they finish, goes to out_dir/experiment.log; the notebook shows one progress bar.
    log = open(out_dir / "experiment.log", "a", encoding="utf-8")
    bar = tqdm(total=len(jobs), desc=f"{cfg.name}: runs", unit="run", file=sys.stderr)

    def report(job, summary) -> None:
        nonlocal finished
        finished += 1
        acc = f"held-out accuracy {summary['accuracy']:.4f}" if summary else "failed"
        log.write(f"[experiment] run {finished}/{len(jobs)} {run_id_for(job[3], job[1])} ({job[2].name}): {acc}, "
                  f"{(time.time() - t0) / 60:.1f} min since start\n")
        log.flush()
        bar.update(1)

    if workers <= 1:
        for job in eval_jobs:
            _eval_worker(job)
        for job in jobs:
            report(job, _worker(job))
    else:
        ctx = mp.get_context("spawn")  # fork after torch initialised its thread pools can deadlock
        with cf.ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
            # runs first, the (short) base evaluations after them: they fill the cores the last runs leave idle
            futures = {pool.submit(_worker, job): job for job in jobs}
            futures |= {pool.submit(_eval_worker, job): None for job in eval_jobs}
            for fut in cf.as_completed(futures):
                exc, job = fut.exception(), futures[fut]
                if job is None:  # a base evaluation
                    if exc is not None:
                        failures.append(("base evaluation", exc))
                    continue
                if exc is not None:
                    failures.append((job[2].name, exc))
                report(job, None if exc is not None else fut.result())
    bar.close()
    log.close()
    print(f"[experiment] {cfg.name}: {len(jobs)} run(s), {int(listing['from_archive'].sum())} restored from the run "
          f"archive{f' {archive}' if archive is not None else ''}, {(time.time() - t0) / 60:.1f} min; one line per run "
          f"in {out_dir / 'experiment.log'}", flush=True)
    if failures:
        names = ", ".join(n for n, _ in failures)
        raise RuntimeError(f"{len(failures)} job(s) failed: {names}; first error: {failures[0][1]!r}") from failures[0][1]
    base = _experiment_base_evaluation(cfg, out_dir, store)  # computed above: read back from the store
    bases = {ident: base if c is cfg else _experiment_base_evaluation(c, out_dir, store, copy=False) for ident, c in base_cfgs.items()}
    write_json(out_dir / "bases.json", bases)
    result = collect_results(out_dir, base=base)
    finish_manifest(out_dir / "manifest.json", runs=listing[["run", "key", "from_archive"]].to_dict("records"),
                    **({"run_archive": str(archive)} if archive is not None else {}))
    return result


def collect_results(out_dir: str | Path, *, base: dict | None = None,
                    runs: list[str] | None = None) -> ExperimentResult:
    """Read the runs listed in ``out_dir/runs.csv`` (the current sweep, so a run left by an earlier sweep is not
    plotted) into three DataFrames, tagged with this experiment's label, seed and sweep point; ``runs`` narrows the
    listing to those labels."""
    out_dir = Path(out_dir)
    base = base if base is not None else json.loads((out_dir / "base_eval.json").read_text())
    listing = pd.read_csv(out_dir / "runs.csv", dtype={"key": str})
    if runs is not None:
        unknown = sorted(set(runs) - set(listing["run"]))
        if unknown:
            raise ValueError(f"runs {unknown} are not in {out_dir / 'runs.csv'} (listed: {listing['run'].tolist()})")
        listing = listing[listing["run"].isin(runs)]
    metrics, heldout, finals = [], [], []
    for row in listing.sort_values("run").itertuples():
        run = out_dir / row.path
        tags = {"run": row.run, "seed": int(row.seed), "key": row.key, **json.loads(row.sweep_point),
                **({"base_model": row.base_model} if "base_model" in listing else {})}
        if (run / "metrics.csv").exists():
            metrics.append(_tagged(pd.read_csv(run / "metrics.csv"), tags))
        if (run / "heldout.csv").exists():
            heldout.append(_tagged(pd.read_csv(run / "heldout.csv"), tags))
        if (run / "final_eval.json").exists():
            fe = json.loads((run / "final_eval.json").read_text())
            finals.append({**tags, **fe["summary"], "correct": fe["correct"]})
    return ExperimentResult(
        metrics=pd.concat(metrics, ignore_index=True) if metrics else pd.DataFrame(),
        heldout=pd.concat(heldout, ignore_index=True) if heldout else pd.DataFrame(),
        finals=pd.DataFrame(finals),
        base=base,
        out_dir=out_dir,
        bases=json.loads((out_dir / "bases.json").read_text()) if (out_dir / "bases.json").exists() else {},
    )


def _tagged(df: pd.DataFrame, tags: dict[str, Any]) -> pd.DataFrame:
    """``df`` with one column per tag, the same value in every row; a dict value (a swept ``loss`` section) is
    kept whole in each row (``DataFrame.assign`` would read a dict as an index -> value mapping)."""
    return df.assign(**{k: [v] * len(df) if isinstance(v, (dict, list)) else v for k, v in tags.items()})


def _stored_evaluation(model_path: str, ecfg: ExperimentConfig, records: list[dict], protocol: dict,
                       path: Path) -> dict:
    """Evaluate ``model_path`` under ``ecfg.eval`` on ``records`` unless ``path`` holds that evaluation already
    (stored as :func:`_evaluate_model` makes it)."""
    return stored_measurement(path, model_path, lambda: _evaluate_model(ecfg, model_path, records, protocol))


def _evaluation_spec(spec: Sequence) -> tuple[dict[str, Any], int | None, dict[str, Any]]:
    """``(eval overrides, n_puzzles[, data overrides])`` as run_experiment's ``evaluations`` take it, in full."""
    if not 2 <= len(spec) <= 3:
        raise ValueError(f"evaluations: {spec!r} is not (eval overrides, n_puzzles[, data overrides])")
    return dict(spec[0]), spec[1], dict(spec[2]) if len(spec) == 3 else {}


def _eval_setup(cfg: ExperimentConfig, eval_overrides: dict[str, Any], n_puzzles: int | None = None,
                data_overrides: dict[str, Any] | None = None):
    """``cfg`` with ``eval.<k>`` and ``data.<k>`` overridden (the held-out set itself may change: another people
    count for DGRO Table 2), its first ``n_puzzles`` held-out records and the protocol that keys the evaluation."""
    overrides = ({f"eval.{k}": v for k, v in eval_overrides.items()}
                 | {f"data.{k}": v for k, v in (data_overrides or {}).items()} | {"sweep": {}})
    ecfg = apply_overrides(cfg, overrides, source="evaluation overrides")
    records = load_eval_records(ecfg)[:n_puzzles]
    return ecfg, records, json.loads(json.dumps(protocol_for_config(ecfg, len(records))))


def _base_evaluation_job(cfg: ExperimentConfig, store: Path, eval_overrides: dict[str, Any],
                         n_puzzles: int | None = None, *, data_overrides: dict[str, Any] | None = None) -> tuple:
    """The arguments of :func:`_stored_evaluation` for ``cfg``'s base model under ``cfg.eval`` with
    ``eval_overrides``: one store key, whoever asks (:func:`run_experiment`'s pool, :func:`evaluate_runs`,
    :func:`_experiment_base_evaluation`)."""
    ecfg, records, protocol = _eval_setup(cfg, eval_overrides, n_puzzles, data_overrides)
    model_path = resolve_model_path(ecfg)
    key = base_evaluation_key(model_identity(ecfg, model_path), protocol, records)
    return model_path, ecfg, records, protocol, Path(store) / "base" / f"{key}.json"


def _run_eval_target(cfg: ExperimentConfig, run_dir: Path, eval_overrides: dict[str, Any],
                     n_puzzles: int | None = None, *, label: str | None = None,
                     data_overrides: dict[str, Any] | None = None) -> tuple:
    """The arguments of :func:`_stored_evaluation` for the last checkpoint of the finished run ``run_dir``
    (stored as ``run_dir/evals/<key>.json``)."""
    ecfg, records, protocol = _eval_setup(cfg, eval_overrides, n_puzzles, data_overrides)
    steps = cfg.train.max_steps
    ckpt = run_dir / "trainer" / f"checkpoint-{steps}"
    path = run_dir / "evals" / f"{base_evaluation_key(ckpt.name, protocol, records)}.json"
    if path.is_file() and (run_dir / "final_eval.json").exists():  # stored: no weights needed (an archived run)
        return str(ckpt), ecfg, records, protocol, path
    last = latest_checkpoint(run_dir / "trainer")
    if last is None or not (run_dir / "final_eval.json").exists() or Path(last).name != ckpt.name:
        why = (" (it was restored from the run archive, which keeps no weights, and does not hold this evaluation; "
               "train the run here to evaluate it: remove the folder, or run without the archive)"
               if (run_dir / ARCHIVED).is_file() else "")
        raise FileNotFoundError(f"{run_dir}: run {label or run_dir.name} has no checkpoint at its last step {steps} "
                                f"to evaluate{why}")
    return last, ecfg, records, protocol, path


def evaluate_base_candidates(cfg: ExperimentConfig, presets: list[str], store: str | Path, *,
                             greedy: dict[str, Any], sampled: dict[str, Any],
                             n_puzzles: int | None = None) -> pd.DataFrame:
    """Greedy and sampled accuracy (``cfg.eval`` with the ``greedy`` and the ``sampled`` overrides) of several
    embedded base models on the first ``n_puzzles`` held-out puzzles, plus the fraction of puzzles whose samples are
    all right or all wrong (the zero-variance groups GRPO-style losses learn nothing from). Stored in
    ``store/base`` and computed once."""
    rows = []
    torch.set_num_threads(cfg.train.threads)
    for preset in presets:
        c = apply_overrides(cfg, {"model.embedded_preset": preset, "sweep": {}}, source=f"base candidate {preset}")
        model_path = resolve_model_path(c)
        out = {"preset": preset, "model": Path(model_path).name}
        for name, overrides in (("greedy", greedy), ("sampled", sampled)):
            ecfg, records, protocol = _eval_setup(c, overrides, n_puzzles)
            if (ecfg.eval.temperature == 0) != (name == "greedy"):
                raise ValueError(f"base candidates: the {name} protocol has temperature {ecfg.eval.temperature}")
            key = base_evaluation_key(model_identity(ecfg, model_path), protocol, records)
            saved = _stored_evaluation(model_path, ecfg, records, protocol, Path(store) / "base" / f"{key}.json")
            out[f"{name}_accuracy"] = saved["summary"]["accuracy"]
            if name == "sampled":
                out["zero_variance_fraction"] = sum(f in (0.0, 1.0) for f in saved["correct"]) / len(saved["correct"])
                out["samples_per_puzzle"] = ecfg.eval.n_samples
        out["puzzles"] = len(records)
        rows.append(out)
    return pd.DataFrame(rows)


def evaluate_runs(result: ExperimentResult, cfg: ExperimentConfig, eval_overrides: dict[str, Any], *,
                  n_puzzles: int | None = None, data_overrides: dict[str, Any] | None = None) -> pd.DataFrame:
    """A second evaluation protocol for every run of ``result`` (its last checkpoint) and for its base model, on the
    same held-out puzzles: the run's ``eval`` section with ``eval_overrides`` applied (e.g. ``{"temperature": 1.0,
    "n_samples": 4}`` for sampled avg@4 beside the greedy final evaluation). Each evaluation is stored beside what it
    evaluates (``<run>/evals/<key>.json``, ``<store>/base/<key>.json``), so it is computed once. ``n_puzzles``
    evaluates on the first that many held-out puzzles only (sampling costs ``n_samples`` generations per puzzle).
    ``data_overrides`` change the held-out set itself (``{"eval_people": [5], "n_eval": 100}``: DGRO Table 2's
    columns); they never touch the runs, which stay the ones ``cfg`` names.

    Returns one row per run and one per base model (``run == "base"``), each with ``base_model`` (the base's
    identity), the summary and ``correct`` (per puzzle, the fraction of correct samples).
    """
    listing = pd.read_csv(result.out_dir / "runs.csv", dtype={"key": str})
    store = Path(json.loads((result.out_dir / "manifest.json").read_text()).get("run_store", result.out_dir / "runs"))
    targets, seen_bases = [], set()
    for row in listing.itertuples():
        point = json.loads(row.sweep_point)
        concrete = apply_overrides(cfg, {**point, "sweep": {}}, source=f"sweep point {point}")
        base_target = _base_evaluation_job(concrete, store, eval_overrides, n_puzzles, data_overrides=data_overrides)
        ident = model_identity(concrete, base_target[0])
        if ident not in seen_bases:
            seen_bases.add(ident)
            targets.append(("base", base_target, {"base_model": ident}))
        run_target = _run_eval_target(concrete, result.out_dir / row.path, eval_overrides, n_puzzles,
                                      label=row.run, data_overrides=data_overrides)
        targets.append((row.run, run_target, {"seed": int(row.seed), "base_model": ident, **point}))
    rows = []
    torch.set_num_threads(cfg.train.threads)
    for name, target, tags in tqdm(targets, desc="evaluations", mininterval=5):
        saved = _stored_evaluation(*target)
        rows.append({"run": name, **tags, **saved["summary"], "correct": saved["correct"]})
    return pd.DataFrame(rows)


def base_model_tables(cfg: ExperimentConfig, store: str | Path, *, prompts: int, samples: int,
                      temperature: float = 1.0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The base model's greedy accuracy per people count (:func:`~dgro_lib.evaluate.accuracy.greedy_accuracy_by_people`)
    and its per-puzzle sampled success rates (:func:`~dgro_lib.evaluate.accuracy.sampled_success_by_people`, the
    first ``prompts`` puzzles of each count, ``samples`` samples each) on ``cfg``'s held-out puzzles.

    Computed once per base model, protocol and puzzles and kept in the run store (``store/base/<key>.json``), so
    the run archive carries it to another machine like any base evaluation (a fresh clone reads it instead of
    sampling the base again); returns ``(greedy, rates)``."""
    from dgro_lib.evaluate.accuracy import greedy_accuracy_by_people, sampled_success_by_people

    model_path = resolve_model_path(cfg)
    records = load_eval_records(cfg)
    protocol = {"tables": "greedy by people + sampled success rates", "people": list(cfg.data.eval_people),
                "template": cfg.data.template, "max_new_tokens": cfg.eval.max_new_tokens,
                "batch_size": cfg.eval.batch_size, "prompts": prompts, "samples": samples,
                "temperature": temperature}
    path = Path(store) / BASE_EVALS / f"{base_evaluation_key(model_identity(cfg, model_path), protocol, records)}.json"

    def measure() -> dict[str, Any]:  # the notebook's own thread count, as before the tables were stored
        model, tokenizer = load_eval_model(cfg, model_path)
        try:
            greedy = greedy_accuracy_by_people(model, tokenizer, records, cfg)
            rates = sampled_success_by_people(model, tokenizer, records, cfg, prompts=prompts, samples=samples,
                                              temperature=temperature)
        finally:
            close_eval_model(model)
        return {"greedy": greedy.to_dict("records"), "rates": rates.to_dict("records"), "protocol": protocol,
                "model_path": str(model_path)}

    stored = stored_measurement(path, model_path, measure)
    return pd.DataFrame(stored["greedy"]), pd.DataFrame(stored["rates"])
