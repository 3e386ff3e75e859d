"""Value checks of an experiment config and of the machine it is to run on.

:func:`validate_values` is the part of :func:`dgro_lib.config.load_config`'s validation that checks every field's
range, choices and paths, so that nothing trains on a value that would only fail (or be silently ignored) at the
first step; each :class:`ConfigError` names the dotted key and the bad value. :func:`check_runnable_here` runs
before a run starts (not at load time: the dry-run validates GPU params on a CPU machine).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import inspect
import math
import re
import sys
import typing
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dgro_lib import losses as _losses
from dgro_lib.data import kk as _kk
from dgro_lib.data import math as _math_data
from dgro_lib.data.kk.generate import NAMES as _KK_NAMES
from dgro_lib.models.presets import EMBEDDED_PRESETS
from dgro_lib.util.typed import ConfigError, coerce
from dgro_lib.losses import loss_entry
from dgro_lib.util.paths import is_hub_id

if TYPE_CHECKING:
    from dgro_lib.config.schema import ExperimentConfig

# --------------------------------------------------------------------------------------------------------------
# Value checks of _validate: every field's range, choices and paths, so that nothing trains on a value that would
# only fail (or be silently ignored) at the first step. Each ConfigError names the dotted key and the bad value.
# --------------------------------------------------------------------------------------------------------------

KK_HUB_PEOPLE = (2, 8)
"""People counts of the K&K data set (``K-and-K/knights-and-knaves``: splits ``2ppl`` ... ``8ppl``)."""

LR_SCHEDULERS_NEEDING_MORE = ("reduce_lr_on_plateau", "greedy", "cosine_with_min_lr", "cosine_warmup_with_min_lr",
                              "warmup_stable_decay")
"""``transformers.SchedulerType`` values this config cannot drive: they need ``lr_scheduler_kwargs`` (min_lr,
num_decay_steps) or an eval metric, neither of which the runner passes (transformers raises at the first step)."""

PEFT_KEYS = ("r", "alpha", "target_modules", "dropout")
"""Keys of ``model.peft`` (:func:`dgro_lib.models.load_model`)."""


# Loss keyword arguments, by name (the same name means the same knob in every loss that takes it, TRL's own
# GRPOConfig fields epsilon / epsilon_high / beta included). Numbers: the range; strings: the allowed values, the
# tuples the losses themselves check against at the first step.
_KWARG_RANGES: dict[str, tuple[Any, str]] = {
    "epsilon": (lambda x: x >= 0, ">= 0"),
    "epsilon_high": (lambda x: x >= 0, ">= 0 (or null)"),
    "dual_clip": (lambda x: x > 1, "> 1 (or null)"),
    "beta1": (lambda x: x >= 0, ">= 0"),
    "beta2": (lambda x: x >= 0, ">= 0"),
    "tau": (lambda x: x >= 0, ">= 0"),
    "beta": (lambda x: x >= 0, ">= 0"),
    "coef": (lambda x: x >= 0, ">= 0"),
    "value_coef": (lambda x: x >= 0, ">= 0"),
    "alpha": (lambda x: x >= 0, ">= 0 (or 'adaptive' where the loss takes it)"),
    "alpha_cap": (lambda x: x >= 0, ">= 0"),
    "kappa": (lambda x: x > 0, "> 0"),
    "t_high": (lambda x: x > 0, "> 0"),
    "t_low": (lambda x: x > 0, "> 0"),
    "fraction": (lambda x: 0 < x <= 1, "in (0, 1]"),
    "reinforce_sample_num": (lambda x: x >= 0, ">= 0"),
    "norm_len": (lambda x: x > 0, "> 0 (or null)"),
}
_KWARG_CHOICES: dict[str, tuple[str, ...]] = {
    "ratio_level": _losses.RATIO_LEVELS,
    "aggregation": _losses.AGGREGATIONS,
    "combine": _losses.DCPO_COMBINE,
    "weight": _losses.DCPO_WEIGHTS,
    "entropy_source": _losses.ENTROPY_SOURCES,
    "entropy_from": _losses.ENTROPY_FROM,
    "alpha": ("adaptive",),
}
_SPEC_FIELD = {"reinforce_sample_num": "max_rows"}
"""Loss kwargs read by an extra-rollout spec under another :class:`~dgro_lib.losses.ExtraRollouts` field name
(AEPO's row cap); the others share the field's name."""


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _check_finite(obj: Any, where: str) -> None:
    """Refuse NaN and infinities in every float field (``.nan`` / ``.inf`` in YAML pass any range written as a
    comparison that is false for NaN)."""
    for f in dataclasses.fields(obj):
        key = f"{where}.{f.name}" if where else f.name
        v = getattr(obj, f.name)
        if dataclasses.is_dataclass(v):
            _check_finite(v, key)
            continue
        for i, x in enumerate(v if isinstance(v, list) else [v]):
            if isinstance(x, float) and not math.isfinite(x):
                raise ConfigError(f"{key}{f'[{i}]' if isinstance(v, list) else ''}: must be a finite number, got {x}")


def _loss_kwarg_types(name: str) -> dict[str, Any]:
    """The annotation of every keyword argument of the loss ``name``: from its function's signature (our losses),
    from :class:`~dgro_lib.losses.ExtraRollouts` for the keys only its extra-rollout spec reads, from
    ``trl.GRPOConfig`` for TRL's own losses (where the annotation is a plain scalar type)."""
    out: dict[str, Any] = {}
    if loss_entry(name).trl_loss_type is not None:
        from trl import GRPOConfig  # loss_entry(name).kwarg_names has imported trl already for this loss

        for k, tp in typing.get_type_hints(GRPOConfig).items():
            if all(a in (int, float, bool, str, type(None)) for a in (typing.get_args(tp) or (tp,))):
                out[k] = tp
        return out
    fn = _losses.loss_entry(name).fn
    hints = typing.get_type_hints(fn)  # the presets carry their parent's annotations too
    out.update({p: hints[p] for p in inspect.signature(fn).parameters if p in hints})
    spec_hints = typing.get_type_hints(_losses.ExtraRollouts)
    for k in loss_entry(name).kwarg_names:
        if k not in out and _SPEC_FIELD.get(k, k) in spec_hints:
            out[k] = spec_hints[_SPEC_FIELD.get(k, k)]
    return out


def _probe_loss(name: str, kwargs: dict) -> None:
    """Call the loss ``name`` once with ``kwargs`` on a 2-row, 3-token batch with every extra tensor it requires:
    whatever the loss refuses at the first training step (a preset's fixed α, a value read only inside) is refused
    here. TRL's own losses run inside TRL and are not probed."""
    import torch

    if loss_entry(name).trl_loss_type is not None:
        return
    B, T = 2, 3
    lp = torch.full((B, T), -1.0)
    rewards = torch.tensor([1.0, 0.0])
    temps = _losses.loss_entry(name).temperatures(kwargs)
    stats = _losses.loss_entry(name).batch_statistics(kwargs)
    extras = {"entropies": torch.ones(B, T), "ref_logps": lp.clone(), "rewards": rewards, "values": torch.zeros(B),
              "group_ids": torch.zeros(B, dtype=torch.long), "temp_logps": {t: lp.clone() for t in temps},
              "batch_stats": stats.compute(rewards, 0.0) if stats is not None else None,
              "rollout_flags": torch.tensor([0, 1]), "rollout_temps": torch.tensor([1.0, temps[0] if temps else 1.0])}
    required = loss_entry(name).requires
    if any(k not in extras for k in required):  # a loss needing a tensor this probe does not know: not probed
        return
    with torch.no_grad():
        _losses.loss_entry(name).fn(lp, lp.clone(), torch.ones(B, T), torch.tensor([0.5, -0.5]),
                               **_losses.loss_entry(name).call_kwargs(kwargs), **{k: extras[k] for k in required})


def _validate_loss_values(cfg: ExperimentConfig) -> None:
    """Types, ranges and allowed values of ``loss.kwargs``, then what the loss's own declarations refuse (extra
    rollouts, batch statistics, temperatures) and a probe call of the loss; and ``loss.value_lr``."""
    lc = cfg.loss
    name, kwargs = lc.name, lc.kwargs
    trl = loss_entry(name).trl_loss_type is not None
    types_ = _loss_kwarg_types(name)
    train_keys = {f.name for f in dataclasses.fields(cfg.train)}
    for k, v in kwargs.items():
        where = f"loss.kwargs.{k}"
        if trl and (k in train_keys or k == "loss_type"):
            raise ConfigError(f"{where}: {v!r} would overwrite the GRPOConfig field that "
                              + (f"train.{k} sets; set train.{k}" if k in train_keys else f"loss.name {name!r} sets"))
        if k in types_:
            coerce(v, types_[k], where)
        if isinstance(v, str) and k in _KWARG_CHOICES and v not in _KWARG_CHOICES[k]:
            raise ConfigError(f"{where}: {v!r} is not one of {', '.join(_KWARG_CHOICES[k])}")
        if _is_number(v):
            if not math.isfinite(v):
                raise ConfigError(f"{where}: must be a finite number, got {v}")
            if k in _KWARG_RANGES and not _KWARG_RANGES[k][0](v):
                raise ConfigError(f"{where}: must be {_KWARG_RANGES[k][1]}, got {v!r}")
    try:
        _losses.loss_entry(name).extra_rollouts(kwargs)
        _losses.loss_entry(name).batch_statistics(kwargs)
        _losses.loss_entry(name).temperatures(kwargs)
        _probe_loss(name, kwargs)
    except (ValueError, TypeError, KeyError, RuntimeError) as e:
        raise ConfigError(f"loss.kwargs: loss {name!r} refuses {kwargs!r}: {e}") from None
    if lc.value == "soft":
        beta = loss_entry(name).soft_beta(kwargs)
        if not beta >= 0:
            raise ConfigError(f"loss.value: 'soft' needs the loss's beta >= 0, got {beta!r} from {kwargs!r}")
    if lc.value_lr is not None:
        if not lc.value_lr > 0:
            raise ConfigError(f"loss.value_lr: must be > 0 (or null), got {lc.value_lr!r}")
        if "values" not in loss_entry(name).requires:
            raise ConfigError(f"loss.value_lr: {lc.value_lr!r} is set, but loss {name!r} learns no value head "
                              "(only losses that require 'values', e.g. dro, read it)")


OPTIMIZERS = ("adamw_torch", "adamw_torch_fused", "sgd")
"""The ``train.optim`` values accepted (transformers' ``TrainingArguments.optim`` names)."""


def _validate_train_values(cfg: ExperimentConfig) -> None:
    t = cfg.train
    if not t.learning_rate > 0:
        raise ConfigError(f"train.learning_rate: must be > 0, got {t.learning_rate!r}")
    if t.optim is not None and t.optim not in OPTIMIZERS:
        raise ConfigError(f"train.optim: {t.optim!r} is not one of {', '.join(OPTIMIZERS)} (or null: AdamW)")
    for key in ("adam_beta1", "adam_beta2"):
        if not 0 <= getattr(t, key) < 1:
            raise ConfigError(f"train.{key}: must be in [0, 1), got {getattr(t, key)!r}")
    for key in ("weight_decay", "max_grad_norm", "warmup_steps", "eval_every"):
        if getattr(t, key) < 0:
            raise ConfigError(f"train.{key}: must be >= 0, got {getattr(t, key)!r}")
    for key in ("save_steps", "eval_subset", "threads"):
        if getattr(t, key) < 1:
            raise ConfigError(f"train.{key}: must be >= 1, got {getattr(t, key)!r}")
    if t.lr_scheduler_type != "constant":
        from transformers.trainer_utils import SchedulerType  # seconds to import: only for a non-default scheduler

        known = [s.value for s in SchedulerType]
        if t.lr_scheduler_type not in known:
            raise ConfigError(f"train.lr_scheduler_type: {t.lr_scheduler_type!r} is not a transformers scheduler "
                              f"(transformers.SchedulerType: {', '.join(known)})")
        if t.lr_scheduler_type in LR_SCHEDULERS_NEEDING_MORE:
            raise ConfigError(f"train.lr_scheduler_type: {t.lr_scheduler_type!r} needs lr_scheduler_kwargs or an eval "
                              "metric, which the runner does not pass; use constant, constant_with_warmup, linear, "
                              "cosine, cosine_with_restarts, polynomial or inverse_sqrt")
    elif t.warmup_steps > 0:
        raise ConfigError(f"train.warmup_steps: {t.warmup_steps} has no effect under lr_scheduler_type 'constant' "
                          "(transformers ignores it); use constant_with_warmup, or warmup_steps: 0")
    if cfg.kind == "train" and t.num_generations < 2:
        raise ConfigError(f"train.num_generations: must be >= 2, got {t.num_generations}: every loss's advantage "
                          f"uses a group baseline (loss.value {cfg.loss.value!r}"
                          + (f", loss.scale {cfg.loss.scale!r}" if cfg.loss.scale else "")
                          + "), and a group of 1 has advantage 0 (TRL refuses it too)")
    if t.max_prompt_length is not None and t.max_prompt_length < 1:
        raise ConfigError(f"train.max_prompt_length: must be >= 1 or null, got {t.max_prompt_length}")
    if not t.gpu_memory_gb > 0:
        raise ConfigError(f"train.gpu_memory_gb: must be > 0, got {t.gpu_memory_gb!r}")
    if not 0 < t.vllm_gpu_memory_utilization <= 1:
        raise ConfigError(f"train.vllm_gpu_memory_utilization: must be in (0, 1], got "
                          f"{t.vllm_gpu_memory_utilization!r}")
    if not 1 <= t.vllm_server_port <= 65535:
        raise ConfigError(f"train.vllm_server_port: must be in 1..65535, got {t.vllm_server_port}")
    if t.distributed != "none" and t.num_processes == 1:
        raise ConfigError(f"train.distributed: {t.distributed!r} needs train.num_processes > 1 (one process runs "
                          "in-process, without an engine), got num_processes 1")
    if t.cpu and (t.use_vllm or (t.distributed != "none" and not deepspeed_on_cpu(cfg))):
        what = "train.use_vllm" if t.use_vllm else "train.distributed"
        raise ConfigError(f"{what}: {getattr(t, what.split('.')[1])!r} needs GPUs, but train.cpu is true")
    spec = _losses.loss_entry(cfg.loss.name).extra_rollouts(cfg.loss.kwargs)
    if spec is not None and t.prompts_per_step % t.num_processes:
        raise ConfigError(f"train.prompts_per_step: {t.prompts_per_step} prompts do not split into whole groups over "
                          f"train.num_processes = {t.num_processes}, which the extra rollouts of loss "
                          f"{cfg.loss.name!r} need")
    if spec is not None and t.use_vllm and t.vllm_importance_sampling_correction:
        raise ConfigError(f"train.vllm_importance_sampling_correction: true, but loss {cfg.loss.name!r} samples extra "
                          "rollouts at another temperature, which TRL's correction would compare with temperature-1 "
                          "log-probs; set it to false")
    if t.use_vllm and t.vllm_importance_sampling_correction and loss_entry(cfg.loss.name).trl_loss_type is None:
        # TRL multiplies only its own losses by the correction; ours never read it. Refusing it here keeps every arm
        # of a comparison (GRPO beside DGRO, online DPO, ...) under the same setting: off, or all TRL losses.
        raise ConfigError(f"train.vllm_importance_sampling_correction: true, but loss {cfg.loss.name!r} is not one of "
                          "TRL's own losses and ignores it, while TRL would apply it to a GRPO-family arm of the same "
                          "comparison; set it to false")
    if t.require_gpu and t.cpu:
        raise ConfigError("train.require_gpu: true, but train.cpu is true (CPU processes); set one of them to false")
    if t.rollout_policy == "reference" and loss_entry(cfg.loss.name).trl_loss_type is not None and not uses_reference_model(cfg):
        raise ConfigError(f"train.rollout_policy: 'reference' samples from TRL's reference model, which TRL's loss "
                          f"{cfg.loss.name!r} builds only with loss.kwargs.beta != 0, got "
                          f"{cfg.loss.kwargs.get('beta', 0.0)!r}")


def _validate_data_values(cfg: ExperimentConfig) -> None:
    d = cfg.data
    for key in ("n_train", "n_eval"):
        if getattr(d, key) < 1:
            raise ConfigError(f"data.{key}: must be >= 1, got {getattr(d, key)}")
    templates = _kk.TEMPLATES if d.task == "kk" else _math_data.TEMPLATES
    if d.template not in templates:
        raise ConfigError(f"data.template: {d.template!r} is not one of {', '.join(templates)}")
    if d.name_order not in _kk.NAME_ORDERS:
        raise ConfigError(f"data.name_order: {d.name_order!r} is not one of {', '.join(_kk.NAME_ORDERS)}")
    if d.name_order != "random" and d.source != "generated":
        raise ConfigError(f"data.name_order: {d.name_order!r} renames the generator's puzzles; data.source "
                          f"{d.source!r} keeps the data set's own names (use 'random')")
    if d.source != "official" and d.official_dir is not None:
        raise ConfigError(f"data.official_dir: {d.official_dir!r} is set, but data.source is {d.source!r} (only "
                          "'official' reads it)")
    if d.task == "kk" and (d.math_train is not None or d.math_eval):
        key = "data.math_train" if d.math_train is not None else "data.math_eval"
        raise ConfigError(f"{key}: {d.math_train if d.math_train is not None else d.math_eval!r} is set, but "
                          "data.task is 'kk' (only 'math' reads it)")
    if d.source == "official":  # both tasks read local copies from it (K&K: train/ and test/; math: <name>/)
        if d.official_dir is None:
            raise ConfigError("data.official_dir: required when data.source is 'official' (K&K: a directory with "
                              "train/ and test/ peopleN_numM.jsonl files; math: one folder per data set name)")
        root = Path(d.official_dir).expanduser()
        if not root.is_dir():
            raise ConfigError(f"data.official_dir: {d.official_dir!r} is not a directory ({root.resolve()})")
    if d.task != "kk":
        return
    splits = [("data.eval_people", d.eval_people, "test")]
    if cfg.kind == "train":
        splits.insert(0, ("data.train_people", d.train_people, "train"))
    for key, people, split in splits:
        if not people:
            raise ConfigError(f"{key}: at least one people count is required, got {people}")
        if len(set(people)) != len(people):
            raise ConfigError(f"{key}: repeated people count in {people} (the same puzzles would be loaded twice)")
        if d.source == "generated":
            low, high = 2, len(_KK_NAMES)
        elif d.source == "hub":
            low, high = KK_HUB_PEOPLE
        else:
            folder = Path(d.official_dir).expanduser() / split
            have = sorted({int(m.group(1)) for f in (folder.iterdir() if folder.is_dir() else ())
                           if (m := re.match(r"^people(\d+)_num\d+\.jsonl$", f.name))})
            bad = [p for p in people if p not in have]
            if bad:
                raise ConfigError(f"{key}: no peopleN_numM.jsonl file for {bad} in {folder} (available: {have})")
            continue
        bad = [p for p in people if not low <= p <= high]
        if bad:
            raise ConfigError(f"{key}: people counts {bad} outside {low}..{high}, what data.source "
                              f"{d.source!r} provides")


def _validate_model_values(cfg: ExperimentConfig) -> None:
    m = cfg.model
    if m.path == "embedded":

        if m.embedded_preset not in EMBEDDED_PRESETS:
            raise ConfigError(f"model.embedded_preset: {m.embedded_preset!r} is not one of "
                              f"{', '.join(sorted(EMBEDDED_PRESETS))}")
        preset = EMBEDDED_PRESETS[m.embedded_preset]
        # a model warmed up on one surface and trained or evaluated on another is measured off its distribution
        if cfg.data.task != preset.task:
            raise ConfigError(f"data.task: {cfg.data.task!r}, but model.embedded_preset {m.embedded_preset!r} was "
                              f"warmed up on task {preset.task!r} (its tokenizer has the words of that task only)")
        for key in ("name_order", "template") if preset.task == "kk" else ("template",):
            if getattr(cfg.data, key) != getattr(preset, key):
                raise ConfigError(f"data.{key}: {getattr(cfg.data, key)!r}, but model.embedded_preset "
                                  f"{m.embedded_preset!r} was warmed up with {key} {getattr(preset, key)!r}")
    else:
        p = Path(m.path).expanduser()
        if p.exists():
            if not (p / "config.json").is_file():
                raise ConfigError(f"model.path: {m.path!r} exists but is not an HF model directory (no config.json)")
        elif not is_hub_id(m.path):
            raise ConfigError(f"model.path: {m.path!r} is neither 'embedded', an existing directory, nor a hub id "
                              "(owner/name)")
    if m.peft is not None:
        for k, v in m.peft.items():
            where = f"model.peft.{k}"
            if k not in PEFT_KEYS:
                raise ConfigError(f"unknown key {where} (valid keys: {', '.join(PEFT_KEYS)})")
            ok = {"r": lambda x: isinstance(x, int) and not isinstance(x, bool) and x >= 1,
                  "alpha": lambda x: _is_number(x) and math.isfinite(x) and x > 0,
                  "dropout": lambda x: _is_number(x) and 0 <= x < 1,
                  "target_modules": lambda x: isinstance(x, str) or (
                      isinstance(x, list) and bool(x) and all(isinstance(s, str) for s in x))}[k](v)
            if not ok:
                need = {"r": "an integer >= 1", "alpha": "a number > 0", "dropout": "a number in [0, 1)",
                        "target_modules": "a string or a list of module names"}[k]
                raise ConfigError(f"{where}: must be {need}, got {v!r}")


def validate_values(cfg: ExperimentConfig) -> None:
    """Ranges, finiteness, allowed values and paths of every field (see the checks above)."""
    if not cfg.name or any(c in cfg.name for c in "/\\"):
        raise ConfigError(f"name: must be a non-empty file-name-like string (the output folder), got {cfg.name!r}")
    bad = [s for s in cfg.seeds if s < 0]
    if bad:
        raise ConfigError(f"seeds: must be >= 0 (numpy refuses negative seeds), got {bad[0]}")
    if len(set(cfg.seeds)) != len(cfg.seeds):
        raise ConfigError(f"seeds: repeated seed in {cfg.seeds} (the runs would share one folder)")
    _check_finite(cfg, "")
    if cfg.eval.seed < 0:
        raise ConfigError(f"eval.seed: must be >= 0, got {cfg.eval.seed}")
    if cfg.reward.scheme != "custom" and cfg.reward.coefficients is not None:
        raise ConfigError(f"reward.coefficients: {cfg.reward.coefficients} is set, but reward.scheme is "
                          f"{cfg.reward.scheme!r} (only 'custom' reads them)")
    _validate_model_values(cfg)
    _validate_data_values(cfg)
    _validate_loss_values(cfg)  # before train: the train checks read the loss's declarations
    _validate_train_values(cfg)


def deepspeed_on_cpu(cfg: ExperimentConfig) -> bool:
    """A ZeRO run on CPU processes through DeepSpeed's CPU accelerator (``train.cpu`` with ``zero2`` / ``zero3``):
    slow, for tests. vLLM and FSDP have no CPU path (accelerate runs TRL's FSDP2 config on CPU processes as
    independent single processes, silently)."""
    return cfg.train.cpu and cfg.train.distributed in ("zero2", "zero3")


def eval_placement(cfg: ExperimentConfig, *, cuda: bool | None = None):
    """(device, dtype) of an evaluation outside the trainer (base models, second protocols, a multi-process run's
    final checkpoint): the GPU when there is one and ``train.cpu`` is off, in bf16 when ``train.bf16``, else the
    CPU in fp32. ``cuda`` stands in for the machine (tests); None = ask torch. On CPU this is what every committed
    reference was evaluated under."""
    import torch

    cuda = torch.cuda.is_available() if cuda is None else cuda
    if cuda and not cfg.train.cpu:
        return "cuda", torch.bfloat16 if cfg.train.bf16 else torch.float32
    return "cpu", torch.float32


def check_runnable_here(cfg: ExperimentConfig, *, cuda: bool | None = None, gpus: int | None = None,
                        bf16_supported: bool | None = None, vllm_installed: bool | None = None) -> list[str]:
    """Whether ``cfg`` can run on this machine, checked before a run starts (not at load time: the ``--dry-run``
    validates GPU params on a CPU machine). Raises :class:`ConfigError` naming the key, instead of the CUDA or
    accelerate traceback the run would end in: ``train.use_vllm`` or ``eval.engine: vllm`` without CUDA or without the vllm package,
    ``train.distributed`` (ZeRO/FSDP) without CUDA, ``train.num_processes`` above the GPUs present, ``train.bf16`` on
    a GPU without bf16, ``train.require_gpu`` (a GPU profile) without CUDA. Returns notes for what runs differently here (bf16 ignored on CPU). The keyword arguments
    stand in for the machine (tests); None = ask torch / importlib."""
    import torch

    t = cfg.train
    cuda = torch.cuda.is_available() if cuda is None else cuda
    gpus = (torch.cuda.device_count() if cuda else 0) if gpus is None else gpus
    on_gpu = cuda and not t.cpu
    notes: list[str] = []
    if cfg.kind == "train":
        if t.use_vllm:
            if not on_gpu:
                raise ConfigError("train.use_vllm: true needs a CUDA GPU, and this machine has none "
                                  "(torch.cuda.is_available() is False); set train.use_vllm: false, or run on a GPU "
                                  "node (validate the params here with --dry-run)")
            if not (importlib.util.find_spec("vllm") is not None if vllm_installed is None else vllm_installed):
                raise ConfigError("train.use_vllm: true, but the vllm package is not installed (pip install .[vllm])")
        if t.num_processes > 1 and t.distributed != "none" and not on_gpu and not deepspeed_on_cpu(cfg):
            raise ConfigError(f"train.distributed: {t.distributed!r} over train.num_processes = {t.num_processes} "
                              "needs CUDA GPUs, and this machine has none; use distributed: none (gloo DDP on CPU), "
                              "train.cpu: true with zero2/zero3 (DeepSpeed's CPU accelerator: slow, for tests; FSDP "
                              "has no CPU path), or a GPU node")
        if t.num_processes > 1 and on_gpu and t.num_processes > gpus:
            raise ConfigError(f"train.num_processes: {t.num_processes} processes (one per GPU), but this machine has "
                              f"{gpus} GPU(s)")
    if cfg.eval.engine == "vllm" and cfg.kind in ("train", "eval"):
        if not on_gpu:
            raise ConfigError("eval.engine: vllm needs a CUDA GPU, and this machine has none "
                              "(torch.cuda.is_available() is False); set eval.engine: hf, or run on a GPU node")
        if not (importlib.util.find_spec("vllm") is not None if vllm_installed is None else vllm_installed):
            raise ConfigError("eval.engine: vllm, but the vllm package is not installed (make venv-gpu)")
    if t.require_gpu and not on_gpu and cfg.kind == "train":
        raise ConfigError(f"train.require_gpu: true, but this machine has no CUDA GPU (torch {torch.__version__} in "
                          f"{sys.executable}: torch.cuda.is_available() is False), so the run would train on the CPU; "
                          "run it on a GPU node with a CUDA build of torch, or use a CPU profile (ci, cpu); validate "
                          "the params here with --dry-run")
    if t.bf16:
        if on_gpu:
            ok = torch.cuda.is_bf16_supported() if bf16_supported is None else bf16_supported
            if not ok:
                raise ConfigError("train.bf16: true, but this machine's GPU does not support bf16; "
                                  "set train.bf16: false")
        else:
            notes.append("train.bf16: true is ignored on CPU (the run trains in float32)")
    return notes


def vllm_max_model_length(cfg: ExperimentConfig) -> int | None:
    """The context vLLM reserves KV cache for: ``train.max_prompt_length + train.max_completion_length``, or None
    (unset: vLLM takes the model's ``max_position_embeddings``, 1,010,000 tokens for Qwen2.5-7B-Instruct-1M, whose
    KV cache for one sequence is larger than a colocate share of the GPU). One definition for the trainer's
    GRPOConfig and the dry run's KV-cache check."""
    t = cfg.train
    if t.max_prompt_length is None:
        return None
    return t.max_prompt_length + t.max_completion_length


def uses_reference_model(cfg: ExperimentConfig) -> bool:
    """Whether a run needs TRL's frozen reference model: TRL's own losses when their k3-KL ``beta`` is set; ours
    when the loss reads ``ref_logps`` (dro, online_dpo) or the rollouts are sampled from it."""
    if loss_entry(cfg.loss.name).trl_loss_type is not None:
        return float(cfg.loss.kwargs.get("beta", 0.0)) != 0.0
    return "ref_logps" in loss_entry(cfg.loss.name).requires or cfg.train.rollout_policy == "reference"
