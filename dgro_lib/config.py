"""One typed, strict experiment config, loaded from ``params/<profile>/<experiment>.yaml``.

Every field is documented where it is declared (the TRL/CleanRL habit). Loading is strict: an unknown
key, a missing required key or a value of the wrong type raises :class:`ConfigError` naming the file
and the dotted key, so a typo in a YAML never silently falls back to a default.
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .data.math import ALL_KINDS, SYNTHETIC, resolve_dataset
from .losses import list_losses, loss_params, loss_soft_beta, validate_loss_kwargs
from .checks import check_runnable_here, eval_placement, uses_reference_model, validate_values, vllm_max_model_length
from .typed import ConfigError, build_dataclass
from .paths import PARAMS
from .rewards import get_scheme

__all__ = [
    "ConfigError",
    "ModelConfig",
    "DataConfig",
    "RewardConfig",
    "LossConfig",
    "TrainConfig",
    "EvalConfig",
    "ExperimentConfig",
    "load_config",
    "config_from_dict",
    "config_to_dict",
    "apply_overrides",
    "expand_sweep",
    "find_params",
    "uses_reference_model",
    "vllm_max_model_length",
    "check_runnable_here",
    "eval_placement",
]


DISTRIBUTED = ("none", "zero2", "zero3", "fsdp")


@dataclass
class ModelConfig:
    path: str = "embedded"
    """``"embedded"`` builds (or reuses from ``cache_dir``) the project's tiny CPU model; anything else is a
    local HF-format directory or a hub id (e.g. ``Qwen/Qwen2.5-7B-Instruct-1M``), loaded by
    :func:`dgro_lib.models.load_model`."""
    embedded_preset: str = "cpu"
    """Which :data:`dgro_lib.models.EMBEDDED_PRESETS` entry builds the embedded model (``ci`` or ``cpu``)."""
    cache_dir: str = "outputs/models"
    """Where the embedded model is saved with ``save_pretrained`` and reused, keyed by its config hash."""
    peft: dict[str, Any] | None = None
    """Optional LoRA settings passed to peft (``r``, ``alpha``, ``target_modules``, ``dropout``)."""


@dataclass
class DataConfig:
    source: str = "generated"
    """``generated`` (the project's own K&K generator, offline), ``official`` (jsonl files under
    ``official_dir``, e.g. a copy of K-and-K/knights-and-knaves) or ``hub`` (``datasets.load_dataset``)."""
    official_dir: str | None = None
    """Directory with ``train/`` and ``test/`` peopleN_numM.jsonl files (only for ``source: official``)."""
    train_people: list[int] = field(default_factory=lambda: [3])
    """People counts of the training puzzles (DGRO follows Logic-RL: 3-7)."""
    n_train: int = 2000
    """Training puzzles per people count (generated) or at most this many (official)."""
    eval_people: list[int] = field(default_factory=lambda: [3])
    """People counts of the held-out evaluation puzzles (DGRO Table 2: 2-8, with 2 and 8 out of distribution)."""
    n_eval: int = 400
    """Held-out puzzles per people count."""
    train_seed: int = 1000
    """Generator seed of the training set (disjoint from ``eval_seed`` and from the base model's warm-up seed)."""
    eval_seed: int = 2000
    """Generator seed of the held-out set."""
    task: str = "kk"
    """``kk`` (Knights and Knaves) or ``math`` (DGRO Table 3, DCPO); what differs between them (records, prompt,
    reward, correctness) is :mod:`dgro_lib.tasks`'s."""
    math_train: str | None = None
    """Training set of ``task: math``: a :data:`dgro_lib.data.math.MATH_DATASETS` name (deepscaler, orz, dapo17k,
    ...) with ``source: hub`` or ``official`` (files under ``official_dir/<name>``), or ``synthetic`` (the offline
    generator, :func:`dgro_lib.data.math.generate_math`) with ``source: generated``."""
    math_eval: list[str] = field(default_factory=list)
    """Evaluation sets of ``task: math`` (math500, aime24, aime25, amc23, minerva, olympiadbench, gsm8k, ...; or
    ``synthetic``), each capped at ``n_eval`` problems."""
    math_kinds: list[str] | None = None
    """Problem kinds of the ``synthetic`` generator (:data:`dgro_lib.data.math.ALL_KINDS`); null = its default
    :data:`~dgro_lib.data.math.KINDS`, one per answer form. The embedded math miniature trains on ``[add, mul,
    muladd, linear]`` (:mod:`dgro_lib.data.math_worked`)."""
    template: str = "plain"
    """Prompt template of :func:`dgro_lib.data.kk.format_prompt` (``plain`` for the embedded model, ``formal`` for
    the embedded miniature, ``qwen`` for Logic-RL's hand-written ChatML prompt on a ChatML model such as Qwen2.5,
    ``chat`` for the same turns through the model's own chat template, which a model without ChatML tokens, such as
    DeepSeek-R1-Distill-Qwen-7B, needs)."""
    name_order: str = "random"
    """How generated puzzles name their people: ``random`` (as the official data) or ``positional`` (person k is
    always the k-th name; the embedded miniature's simplification). Must match the embedded preset's."""


@dataclass
class RewardConfig:
    scheme: str = "[-3,3]"
    """A DGRO Table 4 scheme (``[-1,1]``, ``[-3,3]``, ``[-5,5]``), ``logic-rl``, ``accuracy`` (DCPO's reward: 1 if
    the answer is right, else 0, format not checked), or ``custom`` (then set ``coefficients``)."""
    coefficients: list[float] | None = None
    """(c_f, c_corr, c_com) of DGRO Eq. 12 when ``scheme: custom``."""


@dataclass
class LossConfig:
    name: str = "dgro"
    """Registered loss name (:func:`dgro_lib.losses.list_losses`)."""
    kwargs: dict[str, Any] = field(default_factory=dict)
    """Keyword arguments of the loss (for ``dgro``: ``beta1``, ``beta2``, ``ratio_level``, ``aggregation``); checked
    against the registered loss's parameters (:func:`dgro_lib.losses.loss_params`), so a typo is an error."""
    value: str = "group_mean"
    """Baseline V(x): ``group_mean`` (DGRO, Kimi k1.5) or ``soft`` (beta*log-mean-exp(r/beta), DGRO Eq. 2/15, with
    the beta the loss declares: 2*beta2/beta1 for ``dgro``, tau for ``kimi``, beta for ``dro``)."""
    scale: str | None = None
    """``None`` (DGRO: A = r - V) or ``group_std`` (GRPO's division by the group std)."""
    value_lr: float | None = None
    """Learning rate of the value head V_phi(x) of losses that learn one (``dro``); null = train.learning_rate."""


@dataclass
class TrainConfig:
    max_steps: int = 90
    """Optimizer steps. One rollout batch feeds ``num_iterations`` optimizer steps."""
    learning_rate: float = 3e-5
    """Adam learning rate (the paper used 4e-7 on a 7B model; docs/results.md has the recipe behind 3e-5)."""
    optim: str | None = None
    """The optimizer: null = transformers' default AdamW (``adamw_torch_fused``), as the papers' trainers; or one of
    :data:`dgro_lib.checks.OPTIMIZERS` by its ``TrainingArguments.optim`` name (``sgd``: plain SGD, the step is ``learning_rate`` x
    the clipped gradient, so the reward scale and beta1 scale the step, unlike under Adam)."""
    adam_beta1: float = 0.9
    """Adam β1, in [0, 1)."""
    adam_beta2: float = 0.99
    """Adam β2, in [0, 1)."""
    weight_decay: float = 0.0
    """AdamW weight decay, >= 0."""
    max_grad_norm: float = 1.0
    """Gradient-norm clip, >= 0 (0 = no clipping, transformers' convention)."""
    warmup_steps: int = 0
    """Linear learning-rate warm-up steps, >= 0; > 0 needs a scheduler that warms up (``constant`` ignores it:
    use ``constant_with_warmup``)."""
    lr_scheduler_type: str = "constant"
    """A ``transformers.SchedulerType`` value that needs no ``lr_scheduler_kwargs`` and no eval metric (``constant``,
    ``constant_with_warmup``, ``linear``, ``cosine``, ``cosine_with_restarts``, ``polynomial``, ``inverse_sqrt``)."""
    prompts_per_step: int = 4
    """Distinct prompts per rollout batch."""
    num_generations: int = 16
    """Samples per prompt (the group size G)."""
    num_iterations: int = 1
    """Optimizer steps per rollout batch. With 1, pi_theta == pi_old at every update and DGRO's beta2 term has
    zero gradient (docs/design.md, "Why β2 is inert on-policy"); use >= 2 to make beta2 act."""
    temperature: float = 1.0
    """Sampling temperature of the rollouts."""
    max_completion_length: int = 320
    """Maximum generated tokens per completion."""
    eval_every: int = 0
    """Greedy held-out evaluation on ``eval_subset`` puzzles every this many steps (0 = only at start and end)."""
    eval_subset: int = 100
    """Held-out puzzles used for the periodic evaluation; the start and end evaluations use all of them."""
    save_steps: int = 30
    """Checkpoint every this many steps (a killed run resumes from the last one)."""
    fast_sampler: bool = True
    """Use the KV-cache sampler that drops finished rows (docs/speed.md) through TRL's ``rollout_func`` hook
    instead of ``model.generate``."""
    threads: int = 1
    """torch threads per run (runs are parallelised across processes instead)."""
    updates_per_rollout: int = 1
    """Optimizer steps one rollout batch is split into (verl's rollout batch / PPO mini-batch; the DCPO authors
    use 4). Updates after the first of a batch are off-policy, so DGRO's beta2 acts when this is > 1."""
    micro_batch_size: int | None = None
    """Rows per forward/backward pass on one process (gradient accumulation fills an optimizer step); None = a
    whole optimizer step's rows at once."""
    forward_chunk_rows: int | None = None
    """Rows per forward pass of the loss inside one micro-batch, sorted by completion length and trimmed of their
    padding; the loss still sees the whole micro-batch (same normalization, one backward), so only the speed and
    the floating-point rounding change (DGROTrainer). None = one padded forward. Worth it when completion lengths
    vary a lot (bench/forward_chunks.py prints the ratio; docs/speed.md has it)."""
    top_p: float = 1.0
    """Nucleus sampling of the rollouts (TRL's ``model.generate``, vLLM and the fast sampler all apply it)."""
    max_prompt_length: int | None = None
    """Longest prompt in tokens (DGRO Table 5: 400 logic, 2048 math): used by the dry-run's memory estimate and, with
    ``use_vllm``, for vLLM's context (``vllm_max_model_length`` = this + ``max_completion_length``; unset, vLLM
    reserves the model's whole context); TRL 1.16 does not truncate prompts."""
    gpu_memory_gb: float = 80.0
    """Memory of one GPU, for the dry-run's budget check (A100-80GB: 80; H200: 141)."""
    num_processes: int = 1
    """Training processes (GPUs). 1 = in-process (ci/cpu); > 1 = ``accelerate launch`` of ``python -m
    dgro_lib.train`` (:mod:`dgro_lib.launch`); prompts_per_step * num_generations must divide evenly."""
    distributed: str = "none"
    """Engine for num_processes > 1: ``none`` (plain DDP), ``zero2`` / ``zero3`` (DeepSpeed) or ``fsdp`` (FSDP2),
    through TRL's own accelerate configs (trl/accelerate_configs/)."""
    cpu: bool = False
    """Force CPU processes (gloo) for a multi-process run (``accelerate launch --cpu``)."""
    require_gpu: bool = False
    """Refuse to start a run on a machine without a CUDA GPU (the ``gpu`` profile). A one-process run otherwise
    trains on the CPU when torch has no CUDA, which for a GPU profile is hours of the wrong run, not an error."""
    use_vllm: bool = False
    """Generate with vLLM (GPU nodes, ``pip install .[vllm]``); then fast_sampler is not used."""
    vllm_mode: str = "colocate"
    """``colocate`` (vLLM inside the training processes) or ``server`` (a separate ``vllm serve``; see
    :func:`dgro_lib.vllm_server.start_vllm_server`)."""
    vllm_server_host: str = "0.0.0.0"
    vllm_server_port: int = 8000
    vllm_gpu_memory_utilization: float = 0.3
    """Share of GPU memory vLLM may take in colocate mode."""
    vllm_importance_sampling_correction: bool = True
    """TRL's correction for the vLLM sampler / trainer mismatch. Only TRL's own losses (grpo, dapo, ...) apply it, so
    with ``use_vllm`` it must be false for every other loss (they ignore it: arms of one comparison would otherwise
    be corrected differently) and for losses with extra rollouts."""
    bf16: bool = False
    """bf16 mixed precision (GPU only; ignored on CPU)."""
    gradient_checkpointing: bool = False
    rank_logs: bool = False
    """Each process appends its local batch (rewards, group ids, advantages), the all-reduced loss and a parameter
    checksum to ``ranks/rank<k>.jsonl`` after every step: for checking a distributed run."""
    rollout_policy: str = "current"
    """Who samples the rollouts: ``current`` (online RL) or ``reference`` (the frozen initial model, a fixed
    sampling policy mu: DRO's offline setting). ``reference`` needs ``fast_sampler``."""
    skip_nonfinite: bool = False
    """A non-finite reward, loss or gradient norm stops the run with an error naming the step (after saving the
    rollout batch to ``trainer/nonfinite_step<k>.pt`` and ``.json``; the diverged update is not applied, so the last
    checkpoint is the last good state). True: skip such a step instead (its gradients are dropped, the optimizer
    does not move; counted in the logged ``nonfinite/skipped``), still saving the evidence file."""


@dataclass
class EvalConfig:
    """The held-out evaluation protocol; written into base_eval.json / final_eval.json beside the numbers."""

    temperature: float = 0.0
    """0 = greedy decoding (then n_samples must be 1); > 0 = sampling at this temperature."""
    top_p: float = 1.0
    """Nucleus sampling, in (0, 1]: each token is drawn from the smallest set of most likely tokens whose probability
    (after the temperature) sums to >= top_p, renormalised; 1.0 = plain sampling (ignored when greedy)."""
    n_samples: int = 1
    """Samples per puzzle (accuracy is then avg@n, the mean over all samples)."""
    ks: list[int] = field(default_factory=lambda: [1])
    """pass@k values reported (unbiased estimator of Chen et al.; every k <= n_samples)."""
    seed: int = 0
    """Sampling seed of the evaluation (ignored when greedy)."""
    max_new_tokens: int = 400
    """Generation budget per completion."""
    batch_size: int = 50
    """Rows per generation chunk (memory, not results; the vLLM engine batches by itself)."""
    engine: str = "hf"
    """What generates the evaluation's completions outside the trainer: ``hf`` (the project's KV-cache sampler on
    the run's model, CPU or GPU) or ``vllm`` (vLLM's offline engine, :mod:`dgro_lib.evaluate.vllm_engine`: GPU
    nodes, multi-process runs, whose every evaluation runs after training in its own process). The protocol of a
    result names the engine when it is not ``hf``."""


KINDS = ("train", "eval", "theory")


@dataclass
class ExperimentConfig:
    name: str
    """Experiment name: the notebook and output folder it belongs to."""
    description: str = ""
    kind: str = "train"
    """``train`` (RL runs), ``eval`` (the notebook only evaluates a model, e.g. 00_base_model: the dry-run then
    counts inference memory only) or ``theory`` (no model: exact computations on small settings, e.g. dgro_theory,
    whose knobs are in ``extra``; the dry-run only validates the file)."""
    seeds: list[int] = field(default_factory=lambda: [0])
    """Training seeds; every sweep point runs once per seed."""
    workers: int = 1
    """Independent runs executed in parallel processes (one torch thread each)."""
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    reward: RewardConfig = field(default_factory=RewardConfig)
    loss: LossConfig = field(default_factory=LossConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    sweep: dict[str, list[Any]] = field(default_factory=dict)
    """Dotted key -> list of values, e.g. ``{"reward.scheme": ["[-1,1]", "[-3,3]", "[-5,5]"]}``; runs are the
    product of all lists, times ``seeds``. Several dotted keys joined by ``|`` vary together (zipped, not
    crossed): each entry of their list is a list of one value per key, in the key's order, e.g.
    ``{"model.path|data.math_eval": [["Qwen/Qwen2.5-7B", ["aime24", "gsm8k"]], ["Qwen/Qwen3-4B", ["aime24",
    "gpqa_diamond"]]]}`` gives two points, each model with its own benchmarks (crossed with the other sweep
    keys as usual). A sweep point names every dotted key separately (``point["data.math_eval"]``). A dotted
    key (or one inside it, like ``loss`` and ``loss.kwargs.coef``) may appear in one sweep key only, and no
    list may be empty (:class:`ConfigError` naming the sweep key)."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Notebook-specific knobs (documented in the notebook that reads them)."""


def config_from_dict(data: dict, *, source: str = "<dict>") -> ExperimentConfig:
    """Build an :class:`ExperimentConfig` from a plain mapping; errors are prefixed by ``source``."""
    try:
        cfg = build_dataclass(ExperimentConfig, data, "")
        _validate(cfg)
    except ConfigError as e:
        raise ConfigError(f"{source}: {e}") from None
    return cfg


def _validate(cfg: ExperimentConfig) -> None:
    """Cross-field checks that the types alone cannot express."""
    if not cfg.seeds:
        raise ConfigError("seeds: at least one seed is required")
    if cfg.kind not in KINDS:
        raise ConfigError(f"kind: {cfg.kind!r} is not one of {', '.join(KINDS)}")
    if cfg.workers < 1:
        raise ConfigError(f"workers: must be >= 1, got {cfg.workers}")
    t = cfg.train
    for key in ("max_steps", "prompts_per_step", "num_generations", "num_iterations", "max_completion_length"):
        if getattr(t, key) < 1:
            raise ConfigError(f"train.{key}: must be >= 1, got {getattr(t, key)}")
    if t.temperature <= 0:
        raise ConfigError(f"train.temperature: must be > 0, got {t.temperature}")
    if t.num_processes < 1:
        raise ConfigError(f"train.num_processes: must be >= 1, got {t.num_processes}")
    if t.num_processes > 1 and cfg.workers > 1:
        raise ConfigError(f"workers: {cfg.workers} parallel runs with train.num_processes = {t.num_processes} each "
                          "would share the same GPUs; use workers: 1 (each run takes all its processes)")
    if t.updates_per_rollout < 1:
        raise ConfigError(f"train.updates_per_rollout: must be >= 1, got {t.updates_per_rollout}")
    rows = t.prompts_per_step * t.num_generations
    if rows % (t.num_processes * t.updates_per_rollout):
        raise ConfigError(f"train.num_processes x train.updates_per_rollout = {t.num_processes} x "
                          f"{t.updates_per_rollout} does not divide the rollout batch prompts_per_step x "
                          f"num_generations = {rows}")
    if t.micro_batch_size is not None and (t.micro_batch_size < 1 or (
            rows // (t.num_processes * t.updates_per_rollout)) % t.micro_batch_size):
        raise ConfigError(f"train.micro_batch_size: {t.micro_batch_size} must divide the rows of one optimizer "
                          f"step on one process, {rows // (t.num_processes * t.updates_per_rollout)}")
    if t.forward_chunk_rows is not None and t.forward_chunk_rows < 1:
        raise ConfigError(f"train.forward_chunk_rows: must be >= 1 or null, got {t.forward_chunk_rows}")
    if not 0 < t.top_p <= 1:
        raise ConfigError(f"train.top_p: must be in (0, 1], got {t.top_p}")
    if cfg.data.task not in ("kk", "math"):
        raise ConfigError(f"data.task: {cfg.data.task!r} is not one of kk, math")
    if cfg.data.task == "math" and not cfg.data.math_train:
        raise ConfigError("data.math_train: task 'math' needs a training set (e.g. deepscaler, orz, dapo17k)")
    if cfg.data.math_kinds is not None:
        if cfg.data.task != "math" or SYNTHETIC not in [cfg.data.math_train, *cfg.data.math_eval]:
            raise ConfigError(f"data.math_kinds: only read by the {SYNTHETIC!r} math generator (task 'math')")
        unknown = [k for k in cfg.data.math_kinds if k not in ALL_KINDS]
        if unknown or not cfg.data.math_kinds:
            raise ConfigError(f"data.math_kinds: {cfg.data.math_kinds!r} must be a non-empty list of "
                              f"{', '.join(ALL_KINDS)}")
    if cfg.data.task == "math":
        if not cfg.data.math_eval:
            raise ConfigError(f"data.math_eval: task 'math' needs at least one evaluation set (a benchmark, or "
                              f"{SYNTHETIC!r} for generated problems)")
        for key, names in (("data.math_train", [cfg.data.math_train]), ("data.math_eval", cfg.data.math_eval)):
            for n in names:
                generated = cfg.data.source == "generated"
                if n == SYNTHETIC or generated:
                    if n != SYNTHETIC or not generated:
                        raise ConfigError(f"{key}: {n!r} with data.source {cfg.data.source!r}: the offline generator "
                                          f"({SYNTHETIC!r}) goes with source 'generated', a data set with 'hub' or "
                                          "'official'")
                    continue
                try:
                    resolve_dataset(n)
                except ValueError as e:
                    raise ConfigError(f"{key}: {e}") from None
    if t.distributed not in DISTRIBUTED:
        raise ConfigError(f"train.distributed: {t.distributed!r} is not one of {', '.join(DISTRIBUTED)}")
    if t.vllm_mode not in ("colocate", "server"):
        raise ConfigError(f"train.vllm_mode: {t.vllm_mode!r} is not one of colocate, server")
    if t.rollout_policy not in ("current", "reference"):
        raise ConfigError(f"train.rollout_policy: {t.rollout_policy!r} is not one of current, reference")
    if t.rollout_policy == "reference" and not t.fast_sampler:
        raise ConfigError("train.rollout_policy: 'reference' samples through the rollout_func hook; set train.fast_sampler: true")
    e = cfg.eval
    if e.temperature < 0:
        raise ConfigError(f"eval.temperature: must be >= 0 (0 = greedy), got {e.temperature}")
    if not 0 < e.top_p <= 1:
        raise ConfigError(f"eval.top_p: must be in (0, 1], got {e.top_p}")
    if e.n_samples < 1 or e.max_new_tokens < 1 or e.batch_size < 1:
        raise ConfigError(f"eval.n_samples, eval.max_new_tokens, eval.batch_size: must be >= 1, got "
                          f"{e.n_samples}, {e.max_new_tokens}, {e.batch_size}")
    if e.temperature == 0 and e.n_samples != 1:
        raise ConfigError(f"eval.n_samples: greedy decoding (eval.temperature 0) gives one answer, got {e.n_samples}")
    if e.engine not in ("hf", "vllm"):
        raise ConfigError(f"eval.engine: {e.engine!r} is not one of hf, vllm")
    if e.engine == "vllm" and cfg.kind == "train" and cfg.train.num_processes == 1:
        raise ConfigError("eval.engine: vllm evaluates outside the training processes, which only multi-process runs "
                          "(train.num_processes > 1) do; a one-process run evaluates in its own process with the "
                          "KV-cache sampler, so its results would mix engines: use eval.engine: hf")
    if e.engine == "vllm" and cfg.train.max_prompt_length is None:
        raise ConfigError("eval.engine: vllm reserves KV cache for train.max_prompt_length + eval.max_new_tokens "
                          "tokens, and train.max_prompt_length is unset (vLLM would reserve the model's whole "
                          "context); set train.max_prompt_length")
    bad_k = [k for k in e.ks if not 1 <= k <= e.n_samples]
    if not e.ks or bad_k:
        raise ConfigError(f"eval.ks: every k must satisfy 1 <= k <= eval.n_samples={e.n_samples}, got {e.ks}")
    if cfg.data.source not in ("generated", "official", "hub"):
        raise ConfigError(f"data.source: {cfg.data.source!r} is not one of generated, official, hub")
    if cfg.loss.name not in list_losses():
        raise ConfigError(f"loss.name: {cfg.loss.name!r} is not a registered loss; valid: {', '.join(list_losses())}")
    if cfg.loss.value not in ("group_mean", "soft"):
        raise ConfigError(f"loss.value: {cfg.loss.value!r} is not one of group_mean, soft")
    try:
        validate_loss_kwargs(cfg.loss.name, cfg.loss.kwargs)
    except ValueError as e:
        bad = sorted(k for k in cfg.loss.kwargs if k not in loss_params(cfg.loss.name))
        raise ConfigError(f"loss.kwargs.{bad[0]}: {e}") from None
    if cfg.loss.value == "soft":
        try:
            loss_soft_beta(cfg.loss.name, cfg.loss.kwargs)
        except (ValueError, TypeError) as e:  # TypeError: a kwarg of the wrong type (named again below)
            raise ConfigError(f"loss.value: {e}") from None
    if cfg.loss.scale not in (None, "group_std"):
        raise ConfigError(f"loss.scale: {cfg.loss.scale!r} is not one of null, group_std")
    if cfg.reward.scheme == "custom" and (cfg.reward.coefficients is None or len(cfg.reward.coefficients) != 3):
        raise ConfigError("reward.coefficients: scheme 'custom' needs three coefficients [c_f, c_corr, c_com]")
    if cfg.reward.scheme != "custom":
        try:
            get_scheme(cfg.reward.scheme)
        except ValueError as e:
            raise ConfigError(f"reward.scheme: {e}") from None
    validate_values(cfg)  # ranges, finiteness, allowed values, paths: ConfigError naming the key and value
    _sweep_axes(cfg)  # unknown dotted key, repeated key, empty list, wrong tuple length: ConfigError naming it
    if cfg.sweep:  # every sweep point is checked like a file of its own (ConfigError names the point)
        expand_sweep(cfg)


def config_to_dict(cfg: ExperimentConfig) -> dict:
    """Plain-dict form (what the run manifest stores)."""
    return dataclasses.asdict(cfg)


def load_config(path: str | Path, overrides: dict[str, Any] | None = None) -> ExperimentConfig:
    """Load a params YAML strictly, then apply ``overrides`` (dotted key -> value, e.g. from a notebook cell)."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: params file not found")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML: {e}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: top level must be a mapping, got {type(data).__name__}")
    cfg = config_from_dict(data, source=str(path))
    if overrides:
        cfg = apply_overrides(cfg, overrides, source=f"{path} (overrides)")
    return cfg


def _get_dotted(cfg: Any, key: str) -> Any:
    obj = cfg
    for part in key.split("."):
        if dataclasses.is_dataclass(obj) and part in {f.name for f in dataclasses.fields(obj)}:
            obj = getattr(obj, part)
        elif isinstance(obj, dict):
            obj = obj.get(part)
        else:
            raise ConfigError(f"unknown key {key}")
    return obj


def apply_overrides(cfg: ExperimentConfig, overrides: dict[str, Any], *, source: str = "overrides") -> ExperimentConfig:
    """Return a copy of ``cfg`` with dotted keys replaced, re-validated as strictly as a YAML file."""
    data = config_to_dict(cfg)
    for key, value in overrides.items():
        node = data
        parts = key.split(".")
        for part in parts[:-1]:
            if not isinstance(node, dict) or part not in node:
                raise ConfigError(f"{source}: unknown key {key}")
            node = node[part] if node[part] is not None else node.setdefault(part, {})
        if not isinstance(node, dict):
            raise ConfigError(f"{source}: unknown key {key}")
        # loss.kwargs / extra are free-form mappings; every other level must already know the key
        if parts[-1] not in node and parts[-2:-1] not in (["kwargs"], ["extra"], ["peft"]):
            raise ConfigError(f"{source}: unknown key {key}")
        node[parts[-1]] = copy.deepcopy(value)
    return config_from_dict(data, source=source)


SWEEP_JOIN = "|"
"""Joins dotted keys into one sweep key whose values vary together (see ``ExperimentConfig.sweep``)."""


def _sweep_axes(cfg: ExperimentConfig) -> list[list[dict[str, Any]]]:
    """One axis per sweep key: its values as ``{dotted key: value}`` dicts (a ``|`` key zips its dotted keys).

    Raises ConfigError naming the sweep key for an unknown or repeated dotted key, an empty list, or an entry of
    a ``|`` key that is not a list of one value per dotted key.
    """
    axes: list[list[dict[str, Any]]] = []
    owner: dict[str, str] = {}
    for skey, values in cfg.sweep.items():
        where = f"sweep.{skey}"
        keys = [k.strip() for k in skey.split(SWEEP_JOIN)]
        for k in keys:
            if not k:
                raise ConfigError(f"{where}: empty dotted key (keys joined by {SWEEP_JOIN!r} must all be named)")
            try:
                _get_dotted(cfg, k)
            except ConfigError:
                raise ConfigError(f"{where}: unknown key {k}") from None
            clash = next((o for o in owner if o == k or o.startswith(k + ".") or k.startswith(o + ".")), None)
            if clash is not None:  # the same key, or one inside the other: the result would depend on the order
                raise ConfigError(f"{where}: {k} is already swept by sweep.{owner[clash]}"
                                  + ("" if clash == k else f" (as {clash})"))
            owner[k] = skey
        if not values:
            raise ConfigError(f"{where}: empty list (a sweep key needs at least one value)")
        if len(keys) == 1:
            axes.append([{keys[0]: v} for v in values])
            continue
        axis = []
        for i, v in enumerate(values):
            if not isinstance(v, (list, tuple)) or len(v) != len(keys):
                raise ConfigError(f"{where}[{i}]: expected a list of {len(keys)} values, one per key "
                                  f"({', '.join(keys)}), got {v!r:.200}")
            axis.append(dict(zip(keys, v)))
        axes.append(axis)
    return axes


def expand_sweep(cfg: ExperimentConfig) -> list[tuple[dict[str, Any], int, ExperimentConfig]]:
    """All runs of an experiment: (sweep point, seed, concrete config) for the product of ``sweep`` x ``seeds``.

    Each sweep key is one axis of the product; a key of dotted keys joined by ``|`` is one axis whose entries set
    all of them together. A point maps every swept dotted key to its value, in the order of ``sweep``.
    """
    points = [{k: v for part in combo for k, v in part.items()}
              for combo in itertools.product(*_sweep_axes(cfg))] or [{}]
    runs = []
    for point in points:
        concrete = apply_overrides(cfg, {**point, "sweep": {}}, source=f"sweep point {point}")
        for seed in cfg.seeds:
            runs.append((point, seed, concrete))
    return runs


def find_params(experiment: str, profile: str, root: str | Path | None = None) -> Path:
    """``params/<profile>/<experiment>.yaml`` under the repo (or ``root``); a clear error lists what exists."""
    root = Path(root) if root is not None else PARAMS
    path = root / profile / f"{experiment}.yaml"
    if not path.is_file():
        have = sorted(p.relative_to(root).as_posix() for p in root.glob("*/*.yaml"))
        raise ConfigError(f"no params file {path} (available: {', '.join(have) or 'none'})")
    return path
