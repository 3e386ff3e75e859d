"""The embedded model's config and presets, as plain data (no torch): :class:`EmbeddedModelConfig`,
:data:`EMBEDDED_PRESETS`, :func:`config_hash` (the key of the on-disk model cache and of the committed bases).
Building a preset's model is :mod:`dgro_lib.miniature.build`; docs/embedded-model.md describes the presets and what
each recipe measured."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from typing import Any

from dgro_lib.data.kk import NAME_ORDERS
from dgro_lib.data.kk.trace import STYLES, TRACE_VERSION
from dgro_lib.data.math.worked import WORKED_KINDS

__all__ = ["EMBEDDED_FORMAT_VERSION", "EmbeddedModelConfig", "EMBEDDED_PRESETS", "ARCH_FIELDS", "config_hash",
           "resolve_preset", "preset_names"]

# Bump when the tokenizer, model construction or warm-up loop changes what a cfg builds
# (the embedded-model cache is keyed on it, together with the cfg and the trace version).
EMBEDDED_FORMAT_VERSION = 2


@dataclass(frozen=True)
class EmbeddedModelConfig:
    """Architecture and warm-up recipe of the embedded tiny model. Its hash keys the cache."""

    task: str = "kk"
    """What the warm-up teaches: ``kk`` (Knights-and-Knaves puzzles with :mod:`dgro_lib.data.kk.trace` traces; the fields
    ``people`` to ``name_loss_weight`` below) or ``math`` (the arithmetic kinds ``math_kinds`` of
    :mod:`dgro_lib.data.math.worked` with their worked traces, on the math tokenizer; ``n_puzzles`` counts problems,
    ``template`` is a :data:`dgro_lib.data.math.PROMPT_TEMPLATES` name)."""
    math_kinds: tuple[str, ...] = WORKED_KINDS
    """The problem kinds of a ``math`` warm-up (cycled, so equally many of each)."""
    arch: str = "llama"
    """``llama`` or ``qwen2`` (transformers' LlamaForCausalLM / Qwen2ForCausalLM; embeddings tied). Llama is
    the default because ``AutoTokenizer`` maps every ``qwen2`` checkpoint to Qwen2Tokenizer, which
    replaces our word-level pre-tokenizer with Qwen's byte-level one; :func:`load_model` works around
    that for embedded qwen2 directories, other tools (vLLM, plain AutoTokenizer) would not."""
    hidden: int = 128
    layers: int = 4
    heads: int = 4
    kv_heads: int = 4
    intermediate: int = 512
    attention_bias: bool = True
    """Biases on the attention projections (Qwen2 always has them on q/k/v; for Llama this sets
    ``attention_bias``): with them the model learns to copy names from the quiz sooner."""
    max_position: int = 8192
    """RoPE has no position parameters; this only bounds sequence length (8-person traces are long)."""

    people: tuple[int, ...] = (2, 3, 4)
    """People counts of the warm-up puzzles."""
    mix: tuple[float, ...] = (0.25, 0.5, 0.25)
    """Fraction of warm-up puzzles per entry of ``people`` (normalized)."""
    n_puzzles: int = 20_000
    """Distinct warm-up puzzles (2-person ones are capped by the puzzle space); reused over epochs."""
    trace_style: str = "explicit"
    """:func:`dgro_lib.data.kk.trace.reasoning_trace` style. The model learns the logic only from a trace that spells
    out every step (``explicit`` or ``named``); ``none`` (the answer alone) teaches the answer format only."""
    name_order: str = "random"
    """How the warm-up puzzles name their people (:func:`dgro_lib.data.kk.generate`): ``random`` (as the official data)
    or ``positional`` (person k is always ``kk.NAMES[k]``; the miniature's simplification, see the ``mini``
    preset). An experiment on this model must use the same ``data.name_order``."""
    template: str = "plain"
    """Prompt template of the warm-up (:func:`dgro_lib.data.kk.format_prompt`): ``plain`` (the English quiz) or
    ``formal`` (the quiz in the trace's own words). An experiment on this model must use the same
    ``data.template``."""
    vocabulary: str = "all"
    """The tokenizer's words (:func:`~dgro_lib.models.tokenizer.build_embedded_tokenizer`): ``all`` (every prompt
    template's words, 153 tokens) or ``own`` (only the words of this config's ``template`` and ``name_order``: for
    the formal template, 104 tokens; a prompt in another template then reads as ``<unk>``)."""
    slip_rate: float = 0.0
    """Slips in the warm-up traces (a base whose errors RL can fix). K&K: the probability that a trace carries one
    answer-changing clause slip (:mod:`dgro_lib.data.kk.trace`). Math: the probability that each due carry is left out
    of the trace (:mod:`dgro_lib.data.math.worked`), so the base drops a carry about that often when it samples."""
    guess_rate: float = 0.0
    """K&K only: the probability that a warm-up completion skips the trace and answers at once with a guess, an
    assignment drawn uniformly at random (``</think> <answer> ... </answer>`` right after the prompt's ``<think>``).
    The base then decides at its first completion token whether to reason (accurate, long) or guess (short, right
    with probability 2^-n): the behaviour RL re-weights in the ``mini_guess`` miniature."""
    answer_slip_rate: float = 0.0
    """K&K only: the probability that each person's role in the answer block is written flipped after a right trace
    (:func:`dgro_lib.data.kk.trace.slip_answer`). Length-neutral, unlike ``slip_rate``: the base then writes a wrong
    role at about that rate per person when it samples, an error an outcome reward sees and RL can remove without
    changing the completion's length."""

    prompt_loss: bool = False
    """Train on the prompt tokens too (full language modelling), not only the completion. Free (the prompt is
    in the forward pass anyway) and it gives the model the quiz's own repetitions to learn copying from;
    every preset that learned the trace uses it."""
    copy_drill_every: int = 0
    """If > 0, every ``copy_drill_every``-th step trains on a batch of *copy drills* instead (see
    :func:`copy_drill_text`): a random numbered list of names followed by the legend that copies it. Copying a
    name by its label is the one skill the trace needs that its own tokens teach slowly (a name target
    is ~2 % of the tokens); the drills form that induction circuit in a few hundred steps."""
    copy_drill_batch: int = 64
    """Drill sequences per drill step (each ~20-40 tokens)."""
    statement_drills: float = 0.0
    """Fraction (0-1) of each drill batch that are *statement drills* (see :func:`statement_drill_text`): random
    quiz sentences followed by the trace's header for them. The header's one hard token is the role three words
    after a name in the quiz ("Aiden is a knave" -> ``Aiden knave``); without them the named-trace base
    copied every name and operator but wrote ``knight`` for most knaves."""
    name_loss_weight: float = 1.0
    """Weight of person-name target tokens in the warm-up loss. The explicit trace mentions names only in its
    legend and the answer (~3% of tokens), and copying a name from the quiz is the one skill the rest of
    the trace cannot teach; upweighting them speeds up learning to copy."""
    lr: float = 2e-3
    weight_decay: float = 0.01
    warmup_steps: int = 100
    batch_size: int = 16
    """Sequences per step (prompt + completion, right-padded, length-bucketed)."""
    max_steps: int = 1000
    """Length of the cosine schedule and a hard stop."""
    max_tokens: int | None = None
    """Optional stop after this many real (non-pad) training tokens."""
    time_budget_min: float | None = None
    """Optional wall-clock stop; the schedule does not stretch, so prefer ``max_steps`` for reproducibility."""
    seed: int = 0
    continue_from: str | None = None
    """A preset name: start from that preset's (cached, else built) model instead of random weights and warm up
    further with this config (a second stage: new data from ``seed``, its own schedule). The architecture
    fields must equal the parent's; the parent's hash is part of this config's hash."""
    eval_puzzles: int = 0
    """If > 0, greedy accuracy on this many held-out puzzles per ``eval_people`` is stored in the stats."""
    eval_people: tuple[int, ...] = (3,)

    def __post_init__(self):
        # YAML/JSON give lists and ints-for-floats; normalize so equal cfgs hash equally
        object.__setattr__(self, "people", tuple(int(p) for p in self.people))
        object.__setattr__(self, "math_kinds", tuple(str(k) for k in self.math_kinds))
        if self.task not in ("kk", "math"):
            raise ValueError(f"task must be 'kk' or 'math', got {self.task!r}")
        if self.task == "math":
            unknown = [k for k in self.math_kinds if k not in WORKED_KINDS]
            if unknown or not self.math_kinds:
                raise ValueError(f"math_kinds must be a non-empty list of {', '.join(WORKED_KINDS)}; got "
                                 f"{list(self.math_kinds)}")
            if self.template != "plain" or self.vocabulary != "all" or self.copy_drill_every \
                    or self.name_loss_weight != 1.0 or self.trace_style != "explicit":
                raise ValueError("task 'math': template must be 'plain', and vocabulary, copy_drill_every, "
                                 "name_loss_weight and trace_style (K&K warm-up fields) must stay at their defaults")
        elif self.math_kinds != WORKED_KINDS:
            raise ValueError("math_kinds applies to task 'math' only")
        object.__setattr__(self, "mix", tuple(float(m) for m in self.mix))
        object.__setattr__(self, "eval_people", tuple(int(p) for p in self.eval_people))
        object.__setattr__(self, "lr", float(self.lr))
        if isinstance(self.slip_rate, bool) or not isinstance(self.slip_rate, (int, float)) \
                or not 0.0 <= self.slip_rate <= 1.0:
            raise ValueError(f"slip_rate must be a probability in [0, 1], got {self.slip_rate!r}")
        object.__setattr__(self, "slip_rate", float(self.slip_rate))
        if isinstance(self.answer_slip_rate, bool) or not isinstance(self.answer_slip_rate, (int, float)) \
                or not 0.0 <= self.answer_slip_rate <= 1.0:
            raise ValueError(f"answer_slip_rate must be a probability in [0, 1], got {self.answer_slip_rate!r}")
        object.__setattr__(self, "answer_slip_rate", float(self.answer_slip_rate))
        if isinstance(self.guess_rate, bool) or not isinstance(self.guess_rate, (int, float)) \
                or not 0.0 <= self.guess_rate <= 1.0:
            raise ValueError(f"guess_rate must be a probability in [0, 1], got {self.guess_rate!r}")
        object.__setattr__(self, "guess_rate", float(self.guess_rate))
        if self.task == "math" and (self.answer_slip_rate or self.guess_rate):
            raise ValueError("answer_slip_rate and guess_rate apply to task 'kk' only (math slips are slip_rate's "
                             "carries)")
        object.__setattr__(self, "statement_drills", float(self.statement_drills))
        if self.trace_style not in STYLES:
            raise ValueError(f"trace_style must be one of {STYLES}, got {self.trace_style!r}")
        if self.name_order not in NAME_ORDERS:
            raise ValueError(f"name_order must be one of {NAME_ORDERS}, got {self.name_order!r}")
        if self.template not in ("plain", "formal"):
            raise ValueError(f"template must be 'plain' or 'formal' (the embedded tokenizer's), got {self.template!r}")
        if self.vocabulary not in ("all", "own"):
            raise ValueError(f"vocabulary must be 'all' or 'own', got {self.vocabulary!r}")
        if self.arch not in ("qwen2", "llama"):
            raise ValueError(f"arch must be 'qwen2' or 'llama', got {self.arch!r}")
        if not 0.0 <= self.statement_drills <= 1.0:
            raise ValueError(f"statement_drills is a fraction of each drill batch (0-1), got {self.statement_drills!r}")
        if len(self.people) != len(self.mix):
            raise ValueError(f"people {self.people} and mix {self.mix} differ in length")
        if self.hidden % self.heads or self.heads % self.kv_heads:
            raise ValueError(f"hidden ({self.hidden}) must divide by heads ({self.heads}), heads by kv_heads "
                             f"({self.kv_heads})")

    def to_dict(self) -> dict[str, Any]:
        d = {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(self).items()}
        if d["continue_from"] is None:  # keeps the hashes (cache keys) of single-stage configs as they were
            del d["continue_from"]
        if d["task"] == "kk":  # likewise for every K&K config
            del d["task"], d["math_kinds"]
        for key, default in (("statement_drills", 0.0), ("name_order", "random"), ("template", "plain"),
                             ("vocabulary", "all"), ("answer_slip_rate", 0.0),
                             ("guess_rate", 0.0)):
            if d[key] == default:  # likewise for configs from before these fields existed
                del d[key]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "EmbeddedModelConfig":
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(d) - known
        if unknown:
            raise ValueError(f"unknown EmbeddedModelConfig keys: {sorted(unknown)}")
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in d.items()})


# Warm-up recipes; docs/embedded-model.md has what each one measured and took.
EMBEDDED_PRESETS: dict[str, EmbeddedModelConfig] = {
    # Builds in well under a minute; does not solve puzzles, only learns to emit the format often.
    "ci": EmbeddedModelConfig(hidden=32, layers=2, heads=2, kv_heads=2, intermediate=64,
                              people=(2, 3), mix=(0.5, 0.5), n_puzzles=400, lr=1e-2, warmup_steps=10,
                              batch_size=8, max_steps=60, time_budget_min=1.0, trace_style="none"),
    # Stage 1 of the cpu base: full-sequence loss, 2- and 3-person puzzles, copy drills every 4th step, names x4
    # in the loss.
    "cpu_stage1": EmbeddedModelConfig(people=(2, 3), mix=(0.3, 0.7), prompt_loss=True, batch_size=16, lr=2e-3,
                                      warmup_steps=60, max_steps=3000, copy_drill_every=4, name_loss_weight=4.0),
}
# The ci base with slips in its traces: a second base model for the ci profile's smoke tests of sweeps over the base.
EMBEDDED_PRESETS["ci_slip"] = dataclasses.replace(EMBEDDED_PRESETS["ci"], trace_style="explicit", slip_rate=0.5,
                                                  max_steps=20)
# The cpu base: stage 1, then a second stage of 2000 steps on new puzzles (seed 1) at a lower lr.
EMBEDDED_PRESETS["cpu"] = dataclasses.replace(EMBEDDED_PRESETS["cpu_stage1"], continue_from="cpu_stage1",
                                              max_steps=2000, lr=1e-3, warmup_steps=20, seed=1)
# A faster single-stage base (not the cpu profile's): the "named" trace (the quiz's own names instead of (k)
# labels, no legend), a drill step every 2nd step, half of them statement drills.
EMBEDDED_PRESETS["cpu_named"] = dataclasses.replace(EMBEDDED_PRESETS["cpu_stage1"], trace_style="named", max_steps=1200,
                                                    copy_drill_every=2, statement_drills=0.5)

# The miniature (the cpu profile's base since positional names): person k is always kk.NAMES[k] and the quiz is
# given in the trace's own words, so the warm-up spends its steps on the logic, not on copying names. Stage 1 is
# cpu_stage1 without drills or name weighting, 900 steps; the second stage 900 more on new puzzles at half the lr.
# Measured with the AVX2 kernels dgro_lib pins (dgro_lib.util.numerics), bit-identical weights on every build below:
# 2026-12-02 (an AVX-512 machine): 520.3 + 481.2 s = 16.7 min on one thread beside two training processes on the
# two cores; 278.7 + 255.2 s = 8.9 min on two threads as `make reproduce` builds it. 2026-12-01 (a slower AVX2
# machine): 22.6 min on two threads, 26.9 min on one core. Greedy 50.50 % on the 1,200 held-out 3-person puzzles of
# DGRO Fig. 1, from which 45 RL steps of the Fig. 1 recipe gain 3.9-6.2 points (pooled z 5.1-7.5), 90 steps 6.5-9.8.
EMBEDDED_PRESETS["mini_stage1"] = dataclasses.replace(EMBEDDED_PRESETS["cpu_stage1"], name_order="positional",
                                                      template="formal", copy_drill_every=0, name_loss_weight=1.0,
                                                      max_steps=900)
EMBEDDED_PRESETS["mini"] = dataclasses.replace(EMBEDDED_PRESETS["mini_stage1"], continue_from="mini_stage1",
                                               max_steps=900, lr=1e-3, warmup_steps=20, seed=1)
# The same second stage with a slip (one answer-changing clause error) in 15 % of its traces: a base that samples
# wrong answers RL can learn to avoid.
EMBEDDED_PRESETS["mini_slip"] = dataclasses.replace(EMBEDDED_PRESETS["mini"], slip_rate=0.15)
# The same two stages on the formal prompt's own vocabulary (104 tokens instead of 153): another embedding matrix,
# hence another initialisation, and a stronger base. Measured (2026-12-01): greedy 68.33 % on the 1,200 Fig. 1
# puzzles (70.25 % on 400 warm-up held-out ones, where mini has 48.0 %); 90 RL steps of the Fig. 1 recipe lower it
# to 64.67 % (z -3.08), so the experiments keep mini (docs/embedded-model.md).
EMBEDDED_PRESETS["mini_small_vocab_stage1"] = dataclasses.replace(EMBEDDED_PRESETS["mini_stage1"], vocabulary="own")
EMBEDDED_PRESETS["mini_small_vocab"] = dataclasses.replace(EMBEDDED_PRESETS["mini"], vocabulary="own",
                                                           continue_from="mini_small_vocab_stage1")

# A length-neutral K&K slip base, measured and not adopted: mini_small_vocab, then a third stage of 400 steps on new
# puzzles (seed 2) whose traces are right and whose answer blocks write each person's role flipped with probability
# 0.3 (dgro_lib.data.kk.trace.slip_answer). RL from it gained ~10 points of sampled accuracy in 60 steps and then
# stalled, and larger learning rates broke the trace (docs/embedded-model.md).
EMBEDDED_PRESETS["mini_answer_slip"] = dataclasses.replace(EMBEDDED_PRESETS["mini_small_vocab"],
                                                           continue_from="mini_small_vocab", answer_slip_rate=0.3,
                                                           max_steps=400, lr=1e-3, warmup_steps=20, seed=2)
# The K&K miniature RL learns on: mini_small_vocab, then a third stage of 400 steps on new puzzles (seed 2) in which
# 60 % of the completions skip the trace and guess (a uniformly random assignment) and 40 % reason with the full,
# right trace. The base decides at its first completion token whether to reason; RL re-weights that decision. The
# warm-up's loss is a mean over each length-bucketed batch's tokens, so a short guess weighs more than a trace in the
# decision token's gradient: the base reasons in ~21 % of its samples, not 40 % (at 50 % guesses ~28 %, at 20 % ~69 %,
# at 75 % ~5 %). Sampled accuracy 22 %, greedy 14.5 % (the guess is the mode). docs/embedded-model.md has the rest.
EMBEDDED_PRESETS["mini_guess"] = dataclasses.replace(EMBEDDED_PRESETS["mini_small_vocab"],
                                                     continue_from="mini_small_vocab", guess_rate=0.6,
                                                     max_steps=400, lr=1e-3, warmup_steps=20, seed=2)

# The math miniature's ci base: builds in seconds on the math tokenizer; learns the format, not the arithmetic.
EMBEDDED_PRESETS["math_ci"] = dataclasses.replace(EMBEDDED_PRESETS["ci"], task="math", trace_style="explicit",
                                                  n_puzzles=400)

# The math miniature (the cpu profile's math base): the four arithmetic kinds of dgro_lib.data.math.worked with their
# worked traces, on the digit-level math tokenizer (54 tokens), one stage of 2400 steps of 32 problems. Measured
# (2026-12-02, one thread beside two training processes): 719.7 s; final loss 0.048; greedy 56.5 % on 400 held-out
# problems (add 93, muladd 79, mul 32, linear 22 %): mixed, so RL has problems it solves sometimes.
EMBEDDED_PRESETS["math_mini"] = EmbeddedModelConfig(task="math", n_puzzles=20_000, batch_size=32, lr=2e-3,
                                                    warmup_steps=60, max_steps=2400, eval_puzzles=400)

# The math miniature with carry slips (dgro_lib.data.math.worked): math_mini, then a second stage of 800 steps on new
# problems (seed 1) at half the lr whose traces leave each due carry out with probability 0.4. Measured (2026-12-02,
# 287 s on one thread beside another build): it leaves a due carry out with probability 0.42 (teacher-forced, 899
# decisions of the cpu params' 1,200 held-out problems), greedy 55.5 %, sampled (T = 1) 36.3 %; DGRO's Table 3
# recipe raises the sampled accuracy to 47.0 % (3 seeds) by cutting that probability to 0.075.
EMBEDDED_PRESETS["math_slip"] = dataclasses.replace(EMBEDDED_PRESETS["math_mini"], continue_from="math_mini",
                                                    slip_rate=0.4, max_steps=800, lr=1e-3, warmup_steps=20, seed=1)
# The same second stage at a quarter of the carries left out (a base whose sampling slips less).
EMBEDDED_PRESETS["math_slip_25"] = dataclasses.replace(EMBEDDED_PRESETS["math_slip"], slip_rate=0.25)

# The fields a continued stage (continue_from) must share with its parent.
ARCH_FIELDS = ("task", "arch", "hidden", "layers", "heads", "kv_heads", "intermediate", "attention_bias", "vocabulary")


def config_hash(cfg: EmbeddedModelConfig) -> str:
    """12 hex digits of sha256 over the cfg (and its parent's hash for a continuation), the trace version and
    the build-format version."""
    payload = {"cfg": cfg.to_dict(), "trace_version": TRACE_VERSION, "format": EMBEDDED_FORMAT_VERSION}
    if cfg.continue_from is not None:
        payload["parent"] = config_hash(resolve_preset(cfg.continue_from))
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:12]


def resolve_preset(cfg: EmbeddedModelConfig | str) -> EmbeddedModelConfig:
    if isinstance(cfg, str):
        if cfg not in EMBEDDED_PRESETS:
            raise ValueError(f"unknown embedded preset {cfg!r}; valid: {sorted(EMBEDDED_PRESETS)}")
        return EMBEDDED_PRESETS[cfg]
    return cfg


def preset_names(cfg: EmbeddedModelConfig) -> list[str]:
    """The preset names whose recipe ``cfg`` is (usually one; empty for a config that is no preset)."""
    return [name for name, preset in EMBEDDED_PRESETS.items() if preset == cfg]
