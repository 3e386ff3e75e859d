"""The experiment config's schema: the dataclasses only, every field documented where it is declared (the
TRL/CleanRL habit). Nothing here validates or loads; :mod:`dgro_lib.config.load` does (and
:mod:`dgro_lib.config.checks` holds the value checks), so the modules that only type against a config import this
one and nothing heavier."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dgro_lib.util.typed import build_dataclass

__all__ = ["DISTRIBUTED", "KINDS", "ModelConfig", "DataConfig", "RewardConfig", "LossConfig", "TrainConfig",
           "EvalConfig", "ExperimentConfig"]


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
    muladd, linear]`` (:mod:`dgro_lib.data.math.worked`)."""
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
    against the registered loss's parameters (``dgro_lib.losses.loss_entry(name).kwarg_names``), so a typo is an error."""
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
    :data:`dgro_lib.config.checks.OPTIMIZERS` by its ``TrainingArguments.optim`` name (``sgd``: plain SGD, the step is ``learning_rate`` x
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
    """Passes over each rollout batch (PPO epochs; TRL's ``GRPOConfig.num_iterations``): the whole batch is reused
    this many times, each pass split into ``updates_per_rollout`` optimizer steps. A rollout batch therefore feeds
    ``num_iterations x updates_per_rollout`` optimizer steps, and ``max_steps`` (optimizer steps) must be a multiple
    of that product. With both at 1, pi_theta == pi_old at every update and DGRO's beta2 term has zero gradient
    (docs/design.md, "Why β2 is inert on-policy"); either > 1 makes beta2 act."""
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
    """Mini-batches one pass over a rollout batch is split into, one optimizer step each (verl's rollout batch / PPO
    mini-batch; the DCPO authors use 4): every row is used once per pass, where ``num_iterations`` repeats the
    passes. Updates after the first of a batch are off-policy, so DGRO's beta2 acts when this is > 1."""
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
    dgro_lib.runs.process_main`` (:mod:`dgro_lib.runs.launch`); prompts_per_step * num_generations must divide evenly."""
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
    :func:`dgro_lib.rl.vllm_server.start_vllm_server`)."""
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
    """Training seeds; every sweep point runs once per seed (unless the sweep gives the point its own ``seeds``)."""
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
    list may be empty (:class:`ConfigError` naming the sweep key). ``seeds`` joined to other keys
    (``"loss|seeds"``) gives each entry its own seeds instead of the top-level ``seeds``: an arm with a larger run
    spread gets more runs; it is not part of the point (:func:`~dgro_lib.config.expand_sweep`)."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Notebook-specific knobs, as written: the notebook's typed section (:data:`dgro_lib.config.knobs.KNOBS`, by
    ``name``) checks them when the file loads, and :attr:`knobs` returns it built. Free-form for an experiment no
    notebook registers."""

    @property
    def knobs(self) -> Any:
        """The typed ``extra`` section of this experiment's notebook (:mod:`dgro_lib.config.knobs`), built strictly
        (a :class:`~dgro_lib.util.typed.ConfigError` names a missing or unknown ``extra.<key>``); the plain mapping
        for an experiment no notebook registers."""
        from dgro_lib.config.knobs import knobs_class  # a leaf module; imported here to keep schema free of it

        cls = knobs_class(self.name)
        return dict(self.extra) if cls is None else build_dataclass(cls, dict(self.extra), "extra")

