"""Run an experiment: every (sweep point x seed) training run, in parallel processes, with resume.

This is the only place that turns an :class:`~dgro_lib.config.ExperimentConfig` into TRL objects; the
notebooks call :func:`run_experiment` and plot what it returns. Layout of ``out_dir``::

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

import concurrent.futures as cf
import json
import multiprocessing as mp
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from .config import ExperimentConfig, config_to_dict, expand_sweep
from .evaluate import eval_summary as _summary
from .evaluate import evaluate_under_config as _evaluate
from .evaluate import protocol_for_config as _protocol
from .manifest import write_json, write_manifest

REPO = Path(__file__).resolve().parent.parent

__all__ = ["run_experiment", "run_training", "prepare_run", "config_diff", "ExperimentResult", "run_id_for", "resolve_model_path", "load_eval_records"]


@dataclass
class ExperimentResult:
    """What a notebook needs: per-step metrics, per-run final evaluations and the base model's evaluation."""

    metrics: pd.DataFrame
    heldout: pd.DataFrame
    finals: pd.DataFrame
    base: dict[str, Any]
    out_dir: Path


def run_id_for(point: dict[str, Any], seed: int) -> str:
    """A readable, filesystem-safe id: ``reward.scheme=[-1,1]`` -> ``scheme_m1_1-seed0``."""
    parts = []
    for key, value in point.items():
        text = str(value).replace("-", "m").replace(".", "p")
        text = re.sub(r"[^A-Za-z0-9_p]+", "_", text).strip("_")
        parts.append(f"{key.split('.')[-1]}_{text}")
    return "-".join(parts + [f"seed{seed}"])


def resolve_model_path(cfg: ExperimentConfig) -> str:
    """The base model's path: the embedded model is built (or reused from its cache) here."""
    if cfg.model.path != "embedded":
        return cfg.model.path
    from .models import EMBEDDED_PRESETS, get_embedded_base_model

    if cfg.model.embedded_preset not in EMBEDDED_PRESETS:
        raise ValueError(
            f"model.embedded_preset: {cfg.model.embedded_preset!r} is not one of {sorted(EMBEDDED_PRESETS)}"
        )
    cache_dir = Path(cfg.model.cache_dir)
    if not cache_dir.is_absolute():  # relative to the repository, not to the notebook's working directory
        cache_dir = REPO / cache_dir
    return str(get_embedded_base_model(EMBEDDED_PRESETS[cfg.model.embedded_preset], cache_dir=cache_dir))


def _records(cfg: ExperimentConfig, split: str) -> list[dict]:
    """Training or held-out puzzles of ``cfg``; training puzzles that also occur in the held-out set are dropped."""
    from .data import kk

    d = cfg.data
    people = d.train_people if split == "train" else d.eval_people
    n = d.n_train if split == "train" else d.n_eval
    seed = d.train_seed if split == "train" else d.eval_seed
    out: list[dict] = []
    for p in people:
        if d.source == "generated":
            out += kk.generate(p, n, seed=seed * 100 + p)
        elif d.source == "official":
            if d.official_dir is None:
                raise ValueError("data.official_dir: required when data.source is 'official'")
            out += kk.load_kk(Path(d.official_dir) / ("train" if split == "train" else "test"), people=p, limit=n)
        else:
            out += kk.load_kk_hub(subset="train" if split == "train" else "test", split=p, limit=n)
    if split == "train":
        held_out = {_puzzle_key(r) for r in _records(cfg, "eval")}
        out = [r for r in out if _puzzle_key(r) not in held_out]
    return out


def _puzzle_key(record: dict) -> tuple:
    return (tuple(record["names"]), str(record["statements"]))


def load_eval_records(cfg: ExperimentConfig) -> list[dict]:
    """The held-out puzzles of ``cfg`` (deterministic from ``data.eval_seed``)."""
    return _records(cfg, "eval")


def _latest_checkpoint(trainer_dir: Path) -> str | None:
    ckpts = sorted(trainer_dir.glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[-1]))
    return str(ckpts[-1]) if ckpts else None


# TrainConfig fields that GRPOConfig takes under the same name and meaning
_SAME_NAME_FIELDS = ("num_generations", "num_iterations", "top_p", "max_steps", "learning_rate", "adam_beta1",
                     "adam_beta2", "weight_decay", "max_grad_norm", "warmup_steps", "lr_scheduler_type", "temperature",
                     "max_completion_length", "save_steps", "gradient_checkpointing")


def uses_reference_model(cfg: ExperimentConfig) -> bool:
    """Whether a run needs TRL's frozen reference model: TRL's own losses when their k3-KL ``beta`` is set; ours
    when the loss reads ``ref_logps`` (dro, online_dpo) or the rollouts are sampled from it."""
    from .losses import loss_requires, trl_loss_type

    if trl_loss_type(cfg.loss.name) is not None:
        return float(cfg.loss.kwargs.get("beta", 0.0)) != 0.0
    return "ref_logps" in loss_requires(cfg.loss.name) or cfg.train.rollout_policy == "reference"


def grpo_config(cfg: ExperimentConfig, seed: int, run_dir: str | Path):
    """The ``trl.GRPOConfig`` of one run: every field we set, in one place (tests check what TRL receives).

    The rollout batch is prompts_per_step x num_generations rows in total, split evenly over
    ``train.num_processes`` and into ``train.updates_per_rollout`` optimizer steps of
    ``rows / (processes x updates)`` rows per process, each in micro-batches of ``train.micro_batch_size``.
    """
    import torch
    from trl import GRPOConfig

    from .losses import trl_loss_type

    t = cfg.train
    rows = t.prompts_per_step * t.num_generations
    # TRL: rows per rollout = per_device x processes x steps_per_generation; an optimizer step every
    # gradient_accumulation_steps micro-batches, so updates per rollout = steps_per_generation / accumulation.
    per_update = rows // (t.num_processes * t.updates_per_rollout)
    micro = t.micro_batch_size or per_update
    accumulation = per_update // micro
    on_cpu = t.cpu or not torch.cuda.is_available()
    vllm = {}
    if t.use_vllm:
        vllm = dict(use_vllm=True, vllm_mode=t.vllm_mode, vllm_gpu_memory_utilization=t.vllm_gpu_memory_utilization,
                    vllm_importance_sampling_correction=t.vllm_importance_sampling_correction)
        if t.vllm_mode == "server":
            vllm.update(vllm_server_host=t.vllm_server_host, vllm_server_port=t.vllm_server_port)
    return GRPOConfig(
        output_dir=str(Path(run_dir) / "trainer"),
        per_device_train_batch_size=micro,
        gradient_accumulation_steps=accumulation,
        steps_per_generation=accumulation * t.updates_per_rollout,
        **{k: getattr(t, k) for k in _SAME_NAME_FIELDS},
        # TRL builds its reference model (and scores ref_per_token_logps) only when beta != 0; our own losses
        # ignore TRL's beta, so it is only the switch for those that need the reference (dro, online_dpo) or
        # sample from it. TRL's own losses get their beta from loss.kwargs (the trainer sets it).
        beta=1.0 if trl_loss_type(cfg.loss.name) is None and uses_reference_model(cfg) else 0.0,
        scale_rewards="none",
        logging_steps=1,
        save_total_limit=1,  # the last checkpoint suffices to resume; older ones only cost disk
        save_strategy="steps",
        report_to=[],
        bf16=t.bf16 and not on_cpu,
        use_cpu=on_cpu,
        seed=seed,
        data_seed=seed,
        dataloader_num_workers=0,
        disable_tqdm=False,
        **vllm,
    )


# Config fields that do not change what a run computes (they describe the experiment around it).
_NOT_RUN_FIELDS = ("description", "seeds", "workers", "sweep", "extra")
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
        from .config import config_from_dict

        old_cfg = config_from_dict(old["config"], source=str(manifest_path))
        if [_puzzle_key(r) for r in _records(old_cfg, "train")] != [_puzzle_key(r) for r in _records(cfg, "train")]:
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
            from .models import load_model

            model, tokenizer = load_model(str(run_dir / "trainer" / f"checkpoint-{step}"))
            subset = load_eval_records(cfg)[: t.eval_subset]
            ev = _evaluate(model, tokenizer, subset, cfg)
            rows = pd.concat([rows, pd.DataFrame([{"step": step, "subset": len(subset), **_summary(ev)}])])
        rows.sort_values("step").to_csv(heldout_csv, index=False)
    os.replace(final_path, run_dir / f"final_eval-step{step}.json")


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


def run_training(cfg: ExperimentConfig, seed: int, run_dir: str | Path, *, point: dict | None = None) -> dict | None:
    """Train one run (one sweep point, one seed) to completion, resuming from its last checkpoint if any.

    Returns the final evaluation summary (None on the non-main processes of a distributed run, which only
    train). A run whose ``final_eval.json`` exists is not trained again. Files and evaluations are written by
    the main process only.
    """
    import torch
    from datasets import Dataset
    from transformers import TrainerCallback, set_seed

    from .data import kk
    from .models import load_model
    from .sampling import sample
    from .rewards import kk_reward_func
    from .trainer import DGROTrainer, make_rollout_func

    if cfg.data.task != "kk":
        raise ValueError(
            f"data.task: {cfg.data.task!r} — the experiment runner trains on K&K only so far; the math loaders "
            "(dgro_lib.data.math) and reward (dgro_lib.rewards.math_reward) exist, and "
            "`python -m dgro_lib.reproduce --profile paper --dry-run` validates math params")
    run_dir = Path(run_dir)
    final_path = run_dir / "final_eval.json"
    # torchrun (accelerate launch) sets RANK / WORLD_SIZE; PartialState() here would initialise before TRL's
    # Accelerator and, on CPU, see a single process.
    rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    main = rank == 0
    torch.set_num_threads(cfg.train.threads)
    # launch_run prepares a multi-process run before starting it; only rank 0 may touch the folder here
    if prepare_run(cfg, seed, run_dir) if main else final_path.exists():
        return json.loads(final_path.read_text())["summary"]
    run_dir.mkdir(parents=True, exist_ok=True)
    set_seed(seed)
    model_path = resolve_model_path(cfg)
    if main:
        history = []
        if (run_dir / "manifest.json").exists():
            history = json.loads((run_dir / "manifest.json").read_text()).get("history", [])
        write_manifest(run_dir / "manifest.json", config=config_to_dict(cfg), seed=seed,
                       extra={"sweep_point": point or {}, "model_path": model_path,
                              "num_processes": world, **({"history": history} if history else {})})
    model, tokenizer = load_model(model_path, peft=cfg.model.peft)
    train_records = _records(cfg, "train")
    eval_records = _records(cfg, "eval")
    columns = {
        "prompt": [kk.format_prompt(r, template=cfg.data.template) for r in train_records],
        "names": [list(r["names"]) for r in train_records],
        "solution": [list(r["solution"]) for r in train_records],
    }
    train_ds = Dataset.from_dict(columns)

    t = cfg.train
    args = grpo_config(cfg, seed, run_dir)
    metrics_rows: list[dict] = []
    heldout_rows: list[dict] = []
    metrics_csv, heldout_csv = run_dir / "metrics.csv", run_dir / "heldout.csv"
    subset = eval_records[: t.eval_subset]

    class _Recorder(TrainerCallback):
        """Collects every log (written to metrics.csv at each checkpoint and at the end) and runs the periodic
        held-out evaluation, on the main process. Rows after the last checkpoint of a killed run are re-logged
        when it resumes."""

        def on_log(self, args_, state, control, logs=None, **kw):
            if logs and ("loss" in logs or "reward" in logs):  # skip the end-of-training summary
                metrics_rows.append({"step": state.global_step, **logs})

        def on_save(self, args_, state, control, **kw):
            if main:
                pd.DataFrame(metrics_rows).to_csv(metrics_csv, index=False)

        def on_train_end(self, args_, state, control, **kw):
            if main:
                pd.DataFrame(metrics_rows).to_csv(metrics_csv, index=False)

        def on_step_end(self, args_, state, control, model=None, **kw):
            if t.rank_logs:
                trainer.write_rank_log(run_dir / "ranks", state.global_step)
            if main and t.eval_every and state.global_step % t.eval_every == 0 and state.global_step < t.max_steps:
                ev = _evaluate(trainer.accelerator.unwrap_model(trainer.model), tokenizer, subset, cfg)
                heldout_rows.append({"step": state.global_step, "subset": len(subset), **_summary(ev)})
                pd.DataFrame(heldout_rows).to_csv(heldout_csv, index=False)
                trainer.model.train()

    if metrics_csv.exists():  # resuming: keep what the killed run logged up to its last checkpoint
        metrics_rows = pd.read_csv(metrics_csv).to_dict("records")
    if heldout_csv.exists():
        heldout_rows = pd.read_csv(heldout_csv).to_dict("records")

    trainer = DGROTrainer(
        model=model,
        reward_funcs=kk_reward_func(cfg.reward.coefficients if cfg.reward.scheme == "custom" else cfg.reward.scheme),
        args=args,
        train_dataset=train_ds,
        processing_class=tokenizer,
        callbacks=[_Recorder()],
        rollout_func=make_rollout_func(sample, policy=t.rollout_policy) if t.fast_sampler and not t.use_vllm else None,
        loss_name=cfg.loss.name,
        loss_kwargs=cfg.loss.kwargs,
        value=cfg.loss.value,
        scale=cfg.loss.scale,
        value_lr=cfg.loss.value_lr,
        forward_chunk_rows=t.forward_chunk_rows,
    )
    resume = _latest_checkpoint(run_dir / "trainer")
    # rows logged after the checkpoint we resume from (all of them, killed before the first one) are redone
    step = int(resume.split("-")[-1]) if resume else 0
    metrics_rows = [r for r in metrics_rows if r["step"] <= step]
    heldout_rows = [r for r in heldout_rows if r["step"] <= step]
    t0 = time.time()
    trainer.train(resume_from_checkpoint=resume)
    train_seconds = time.time() - t0
    if not trainer.accelerator.is_main_process:
        return None

    final = _evaluate(trainer.accelerator.unwrap_model(trainer.model), tokenizer, eval_records, cfg)
    summary = {**_summary(final), "train_seconds": train_seconds, "seed": seed, **(point or {})}
    heldout_rows.append({"step": t.max_steps, "subset": len(eval_records), **_summary(final)})
    pd.DataFrame(heldout_rows).to_csv(heldout_csv, index=False)
    write_json(final_path, {"summary": summary, "correct": list(map(bool, final["correct"])),
                            "protocol": _protocol(cfg, len(final["correct"]))})
    return json.loads(json.dumps(summary))  # the same form a reused run returns (JSON keys are strings)


def _base_eval(cfg: ExperimentConfig, out_dir: Path) -> dict[str, Any]:
    """Evaluate the base model once per experiment (every run starts from it)."""
    import torch

    from .models import load_model

    path = out_dir / "base_eval.json"
    model_path = resolve_model_path(cfg)
    records = load_eval_records(cfg)
    protocol = json.loads(json.dumps(_protocol(cfg, len(records))))
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
    ev = _evaluate(model, tokenizer, records, cfg)
    base = {"summary": _summary(ev), "correct": list(map(bool, ev["correct"])), "protocol": protocol,
            "model_path": model_path}
    write_json(path, base)
    return json.loads(path.read_text())  # the form a reused evaluation has (JSON keys are strings)


def _worker(args: tuple) -> dict:
    from .launch import launch_run

    cfg, seed, run_dir, point = args
    os.environ.setdefault("OMP_NUM_THREADS", str(cfg.train.threads))
    return launch_run(cfg, seed, run_dir, point=point)


def run_experiment(cfg: ExperimentConfig, out_dir: str | Path, *, workers: int | None = None) -> ExperimentResult:
    """Run every (sweep point x seed) of ``cfg`` into ``out_dir`` (runs already finished are reused).

    The base model is built and evaluated first in this process, so parallel workers only read it.
    """
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
    return collect_results(out_dir, base=base, runs=[job[2].name for job in jobs])


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
