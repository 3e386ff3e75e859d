"""One training run (one sweep point, one seed): the TRL objects it is made of, and its training to completion.

This is the only place that turns an :class:`~dgro_lib.config.ExperimentConfig` into TRL objects. The run's
folder (reuse, resume, extension) is :mod:`dgro_lib.runs.store`'s; where the run happens (in-process or under
``accelerate launch``) is :mod:`dgro_lib.runs.launch`'s.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pandas as pd
import torch
from datasets import Dataset
from transformers import TrainerCallback, set_seed
from trl import GRPOConfig

from dgro_lib.config import (ExperimentConfig, check_runnable_here, config_to_dict, uses_reference_model,
                     vllm_max_model_length)
from dgro_lib.evaluate import eval_summary, evaluate_under_config, per_item_correct, protocol_for_config
from dgro_lib.runs.data_sources import close_eval_model, load_eval_model, load_eval_records, load_train_records, resolve_model_path
from dgro_lib.losses import loss_entry
from dgro_lib.util.manifest import finish_manifest, write_manifest
from dgro_lib.util.files import atomic_write, write_json
from dgro_lib.models import load_model, load_tokenizer
from dgro_lib.runs.store import latest_checkpoint, prepare_run
from dgro_lib.models.sampling import sample
from dgro_lib.tasks import get_task
from dgro_lib.rl.trainer import DGROTrainer, NonFiniteError, make_rollout_func

__all__ = ["grpo_config", "uses_reference_model", "run_training", "evaluate_trained_run", "snapshot_dir",
           "RunRecorder", "TRAINED"]

# TrainConfig fields that GRPOConfig takes under the same name and meaning
_SAME_NAME_FIELDS = ("num_generations", "num_iterations", "top_p", "max_steps", "learning_rate", "adam_beta1",
                     "adam_beta2", "weight_decay", "max_grad_norm", "warmup_steps", "lr_scheduler_type", "temperature",
                     "max_completion_length", "save_steps", "gradient_checkpointing")


def grpo_config(cfg: ExperimentConfig, seed: int, run_dir: str | Path) -> GRPOConfig:
    """The ``trl.GRPOConfig`` of one run: every field we set, in one place (tests check what TRL receives).

    The rollout batch is prompts_per_step x num_generations rows in total, split evenly over
    ``train.num_processes`` and into ``train.updates_per_rollout`` optimizer steps of
    ``rows / (processes x updates)`` rows per process, each in micro-batches of ``train.micro_batch_size``.
    """
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
        # vLLM reserves KV cache for at least one sequence of its max model length: left to the model's config that
        # is the whole context (1,010,000 tokens for Qwen2.5-7B-Instruct-1M, ~54 GiB), which no colocate share holds
        vllm = dict(use_vllm=True, vllm_mode=t.vllm_mode, vllm_gpu_memory_utilization=t.vllm_gpu_memory_utilization,
                    vllm_importance_sampling_correction=t.vllm_importance_sampling_correction,
                    vllm_max_model_length=vllm_max_model_length(cfg))
        if t.vllm_mode == "server":
            vllm.update(vllm_server_host=t.vllm_server_host, vllm_server_port=t.vllm_server_port)
    return GRPOConfig(
        output_dir=str(Path(run_dir) / "trainer"),
        per_device_train_batch_size=micro,
        gradient_accumulation_steps=accumulation,
        steps_per_generation=accumulation * t.updates_per_rollout,
        **{k: getattr(t, k) for k in _SAME_NAME_FIELDS},
        **({} if t.optim is None else {"optim": t.optim}),  # None keeps transformers' default (and old runs' bits)
        # TRL builds its reference model (and scores ref_per_token_logps) only when beta != 0; our own losses
        # ignore TRL's beta, so it is only the switch for those that need the reference (dro, online_dpo) or
        # sample from it. TRL's own losses get their beta from loss.kwargs (the trainer sets it).
        beta=1.0 if loss_entry(cfg.loss.name).trl_loss_type is None and uses_reference_model(cfg) else 0.0,
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


class RunRecorder(TrainerCallback):
    """Collects every log (written to metrics.csv at each checkpoint and at the end) and runs the periodic
    held-out evaluation on ``subset``. It starts from the rows a killed run left in ``run_dir``; rows after the
    checkpoint a run resumes from are dropped (:meth:`keep_until`) and re-logged. :meth:`attach` gives it the
    trainer it records (the trainer is built with the callback already in it).

    In one process it evaluates in place. Over several processes (``distributed``) no rank evaluates: under ZeRO-3
    a forward pass needs every rank, so rank 0 decoding alone while the others wait would hang the job (and a long
    evaluation would outlast the process group's timeout). Every rank instead saves the weights (a collective save,
    gathered to 16 bits) to ``run_dir/snapshots/step-N``, which :func:`evaluate_trained_run` evaluates after the
    training processes have exited."""

    def __init__(self, cfg: ExperimentConfig, run_dir: Path, tokenizer, subset: list[dict], *, main: bool,
                 distributed: bool = False):
        self.cfg, self.run_dir, self.tokenizer, self.subset, self.main = cfg, run_dir, tokenizer, subset, main
        self.distributed = distributed
        self.metrics_csv, self.heldout_csv = run_dir / "metrics.csv", run_dir / "heldout.csv"
        self.metrics_rows: list[dict] = []
        self.heldout_rows: list[dict] = []
        if self.metrics_csv.exists():  # resuming: keep what the killed run logged up to its last checkpoint
            self.metrics_rows = pd.read_csv(self.metrics_csv).to_dict("records")
        if self.heldout_csv.exists():
            self.heldout_rows = pd.read_csv(self.heldout_csv).to_dict("records")
        self.trainer: DGROTrainer | None = None

    def attach(self, trainer: DGROTrainer) -> None:
        self.trainer = trainer

    def keep_until(self, step: int) -> None:
        """Drop the rows logged after ``step`` (the checkpoint the run resumes from; 0 when it starts over)."""
        self.metrics_rows = [r for r in self.metrics_rows if r["step"] <= step]
        self.heldout_rows = [r for r in self.heldout_rows if r["step"] <= step]

    def add_heldout(self, row: dict) -> None:
        """Add (or, for an evaluation redone after a kill, replace) the held-out row of ``row["step"]``."""
        self.heldout_rows = [r for r in self.heldout_rows if r["step"] != row["step"]] + [row]
        rows = pd.DataFrame(self.heldout_rows).sort_values("step", kind="stable")
        atomic_write(self.heldout_csv, lambda tmp: rows.to_csv(tmp, index=False))

    def _write_metrics(self) -> None:
        if self.main:
            rows = pd.DataFrame(self.metrics_rows)
            atomic_write(self.metrics_csv, lambda tmp: rows.to_csv(tmp, index=False))

    def on_log(self, args, state, control, logs=None, **kw):
        if logs and ("loss" in logs or "reward" in logs):  # skip the end-of-training summary
            self.metrics_rows.append({"step": state.global_step, **logs})
            # transformers logs a step before it saves it: written now, the rows reach the disk before the
            # checkpoint does, so a kill during the save loses none (a resume drops rows past its checkpoint)
            if (args.save_steps and state.global_step % args.save_steps == 0) or state.global_step >= state.max_steps:
                self._write_metrics()

    def on_save(self, args, state, control, **kw):
        self._write_metrics()

    def on_train_end(self, args, state, control, **kw):
        self._write_metrics()

    def on_step_end(self, args, state, control, model=None, **kw):
        t, trainer = self.cfg.train, self.trainer
        if t.rank_logs:
            trainer.write_rank_log(self.run_dir / "ranks", state.global_step)
        if not (t.eval_every and state.global_step % t.eval_every == 0 and state.global_step < t.max_steps):
            return
        if self.distributed:
            trainer.save_model(str(snapshot_dir(self.run_dir, state.global_step)))  # every rank: a collective save
        elif self.main:
            ev = evaluate_under_config(trainer.accelerator.unwrap_model(trainer.model), self.tokenizer, self.subset,
                                       self.cfg)
            self.add_heldout({"step": state.global_step, "subset": len(self.subset), **eval_summary(ev)})
            trainer.model.train()


def run_training(cfg: ExperimentConfig, seed: int, run_dir: str | Path, *, point: dict | None = None) -> dict | None:
    """Train one run (one sweep point, one seed) to completion, resuming from its last checkpoint if any.

    Returns the final evaluation summary (None on the non-main processes of a distributed run, which only
    train). A run whose ``final_eval.json`` exists is not trained again. Files and evaluations are written by
    the main process only.
    """
    task = get_task(cfg.data.task)
    check_runnable_here(cfg)
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
    t = cfg.train
    # The TrainingArguments first: under `accelerate launch` with a ZeRO-3 config, building them registers the
    # DeepSpeed config that from_pretrained reads, so the weights are partitioned as they load (zero.Init). A model
    # loaded before that is a full fp32 copy in every rank's host RAM (~30 GB a rank for a 7B model).
    args = grpo_config(cfg, seed, run_dir)
    model, tokenizer = load_model(model_path, peft=cfg.model.peft)
    train_records = load_train_records(cfg)
    eval_records = load_eval_records(cfg)
    columns = {"prompt": [task.prompt(r, cfg.data.template, tokenizer) for r in train_records], **task.columns(train_records)}
    train_ds = Dataset.from_dict(columns)

    distributed = world > 1
    recorder = RunRecorder(cfg, run_dir, tokenizer, eval_records[: t.eval_subset], main=main,
                           distributed=distributed)
    trainer = DGROTrainer(
        model=model,
        reward_funcs=task.reward_func(cfg.reward.coefficients if cfg.reward.scheme == "custom" else cfg.reward.scheme),
        args=args,
        train_dataset=train_ds,
        processing_class=tokenizer,
        callbacks=[recorder],
        rollout_func=make_rollout_func(sample, policy=t.rollout_policy) if t.fast_sampler and not t.use_vllm else None,
        loss_name=cfg.loss.name,
        loss_kwargs=cfg.loss.kwargs,
        value=cfg.loss.value,
        scale=cfg.loss.scale,
        value_lr=cfg.loss.value_lr,
        forward_chunk_rows=t.forward_chunk_rows,
        skip_nonfinite=t.skip_nonfinite,
    )
    recorder.attach(trainer)
    engine = running_engine(trainer.accelerator)
    check_engine(cfg, engine, world)
    resume = latest_checkpoint(run_dir / "trainer")
    # rows logged after the checkpoint we resume from (all of them, killed before the first one) are redone
    recorder.keep_until(int(resume.split("-")[-1]) if resume else 0)
    t0 = time.time()
    try:
        if resume is not None and int(resume.split("-")[-1]) >= t.max_steps:
            # killed after its last checkpoint (in the final evaluation): transformers would train one step more on
            # resume, so only the weights are loaded
            trainer._load_from_checkpoint(resume)
        else:
            trainer.train(resume_from_checkpoint=resume)
    except NonFiniteError:
        # the run stops at the diverged step: keep the rows logged up to it (a resume drops those past its checkpoint)
        recorder.on_train_end(args, trainer.state, trainer.control)
        if main:
            finish_manifest(run_dir / "manifest.json", status="nonfinite", train_seconds=time.time() - t0)
        raise
    train_seconds = time.time() - t0
    trained = {"train_seconds": train_seconds, **({"resumed_from": Path(resume).name} if resume else {})}
    if distributed:
        trained["engine"] = engine  # what the processes ran under, into the run's manifest
        # No rank evaluates: the launcher does, in its own process, once these have exited (evaluate_trained_run)
        if trainer.accelerator.is_main_process:
            write_json(run_dir / TRAINED, trained)
        return None
    return _finish_run(cfg, seed, run_dir, trainer.accelerator.unwrap_model(trainer.model), tokenizer,
                       eval_records, trained, point=point, recorder=recorder)


def running_engine(accelerator) -> dict:
    """What accelerate is actually running: its ``distributed_type`` name, the processes and, under DeepSpeed, the
    ZeRO stage."""
    plugin = getattr(accelerator.state, "deepspeed_plugin", None)
    return {"distributed_type": accelerator.distributed_type.name, "num_processes": accelerator.num_processes,
            **({"zero_stage": int(plugin.zero_stage)} if plugin is not None else {})}


_ENGINES = {"zero2": ("DEEPSPEED", 2), "zero3": ("DEEPSPEED", 3), "fsdp": ("FSDP", None)}


def check_engine(cfg: ExperimentConfig, engine: dict, world: int) -> None:
    """Refuse to train under another engine than ``train.distributed`` asked for. accelerate falls back without an
    error: TRL's FSDP2 config on CPU processes runs them as independent single processes (``distributed_type`` NO,
    no gradient exchange at all), and a DeepSpeed config without deepspeed installed fails later or differently."""
    t = cfg.train
    if world <= 1:
        return
    want = _ENGINES.get(t.distributed)
    got = (engine["distributed_type"], engine.get("zero_stage"))
    if want is None:  # plain DDP: gloo on CPU, NCCL on GPUs
        ok = got[0] in ("MULTI_CPU", "MULTI_GPU")
    else:
        ok = got[0] == want[0] and (want[1] is None or got[1] == want[1])
    if not ok or engine["num_processes"] != world:
        raise RuntimeError(f"train.distributed: {t.distributed!r} over {world} processes, but accelerate runs "
                           f"{engine} (on CPU, accelerate 1.16 runs TRL's FSDP2 config as independent processes); "
                           "use train.distributed: none on CPU, or run on GPUs")


TRAINED = "trained.json"
"""Written by the main rank of a multi-process run when training has finished (train seconds, where it resumed);
the run is complete once :func:`evaluate_trained_run` has written ``final_eval.json``."""


def snapshot_dir(run_dir: str | Path, step: int) -> Path:
    """Where a multi-process run saves its weights at a periodic evaluation step, for :func:`evaluate_trained_run`."""
    return Path(run_dir) / "snapshots" / f"step-{step}"


def _finish_run(cfg: ExperimentConfig, seed: int, run_dir: Path, model, tokenizer, eval_records: list[dict],
                trained: dict, *, point: dict | None, recorder: RunRecorder) -> dict:
    """The final held-out evaluation of a trained run: final_eval.json, the last heldout.csv row, the manifest."""
    final = evaluate_under_config(model, tokenizer, eval_records, cfg)
    summary = {**eval_summary(final), "train_seconds": trained["train_seconds"], "seed": seed, **(point or {})}
    recorder.add_heldout({"step": cfg.train.max_steps, "subset": len(eval_records), **eval_summary(final)})
    write_json(run_dir / "final_eval.json", {"summary": summary, "correct": per_item_correct(final),
                                             "protocol": protocol_for_config(cfg, len(final["correct"])),
                                             "evaluated_on": {"device": str(model.device), "dtype": str(model.dtype)}})
    # train_seconds is this process's share: a resumed run records where it resumed, and estimates skip it
    finish_manifest(run_dir / "manifest.json", **trained)
    return json.loads(json.dumps(summary))  # the same form a reused run returns (JSON keys are strings)


def evaluate_trained_run(cfg: ExperimentConfig, seed: int, run_dir: str | Path, *,
                         point: dict | None = None) -> dict:
    """Evaluate a multi-process run after its training processes have exited, in this (one) process.

    The periodic snapshots (``run_dir/snapshots/step-N``, :class:`RunRecorder`) are evaluated on ``train.eval_subset``
    puzzles and removed, one at a time, so a kill loses at most the one in progress; then the last checkpoint on all
    held-out puzzles, as an in-process run does. The weights go to the GPU when there is one (in bf16 when
    ``train.bf16``; :func:`~dgro_lib.config.checks.eval_placement`), or to vLLM's engine with ``eval.engine: vllm``
    (:func:`~dgro_lib.runs.data_sources.load_eval_model`); the tokenizer is the base model's, which training does
    not change. Returns the run's summary, as :func:`run_training` does.
    """
    run_dir = Path(run_dir)
    final_path = run_dir / "final_eval.json"
    if final_path.exists():
        return json.loads(final_path.read_text())["summary"]
    if not (run_dir / TRAINED).is_file():
        raise RuntimeError(f"{run_dir}: the training processes exited without writing {TRAINED}; the run did not "
                           "finish training (its output above says why)")
    trained = json.loads((run_dir / TRAINED).read_text())
    torch.set_num_threads(cfg.train.threads)
    tokenizer = load_tokenizer(resolve_model_path(cfg))
    eval_records = load_eval_records(cfg)
    subset = eval_records[: cfg.train.eval_subset]
    recorder = RunRecorder(cfg, run_dir, tokenizer, subset, main=True)  # its heldout.csv, as the training wrote it
    snapshots = sorted((run_dir / "snapshots").glob("step-*"), key=lambda p: int(p.name.split("-")[1]))
    for snap in snapshots:
        model, _ = load_eval_model(cfg, snap)
        ev = evaluate_under_config(model, tokenizer, subset, cfg)
        recorder.add_heldout({"step": int(snap.name.split("-")[1]), "subset": len(subset), **eval_summary(ev)})
        close_eval_model(model)
        del model
        shutil.rmtree(snap)
    last = run_dir / "trainer" / f"checkpoint-{cfg.train.max_steps}"
    if not last.is_dir():
        raise FileNotFoundError(f"{run_dir}: training finished but left no checkpoint at its last step ({last})")
    model, _ = load_eval_model(cfg, last)
    try:
        return _finish_run(cfg, seed, run_dir, model, tokenizer, eval_records, trained, point=point,
                           recorder=recorder)
    finally:
        close_eval_model(model)
