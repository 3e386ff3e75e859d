"""Models: load any HF-format causal LM (optionally with LoRA), or build the embedded tiny K&K model.

The ``cpu`` profile must run offline on two cores, so the project ships an *embedded default*
(DESIGN §8): a word-level tokenizer over the K&K vocabulary, a ~1M-parameter Qwen2/Llama model, and a
supervised warm-up on generated puzzles with explicit reasoning traces (:mod:`dgro_lib.data.trace`).
:func:`get_embedded_base_model` builds it once and caches it as an ordinary ``save_pretrained``
directory, so everything downstream loads it exactly like a real checkpoint via :func:`load_model`.

Also here: :func:`sample`, a KV-cache sampling loop that drops finished rows (faster than
``model.generate`` for RL rollouts and evaluation; greedy outputs are identical), and
:func:`evaluate_greedy` / :func:`evaluate_sampled` for K&K accuracy.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import math
import os
import platform
import random
import re
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

import torch

__all__ = [
    "SPECIAL_TOKENS",
    "TAG_TOKENS",
    "EmbeddedModelConfig",
    "EMBEDDED_PRESETS",
    "build_tokenizer",
    "build_embedded_tokenizer",
    "embedded_vocabulary",
    "build_tiny_model",
    "warmup",
    "config_hash",
    "get_embedded_base_model",
    "load_model",
    "sample",
    "evaluate_greedy",
    "greedy_eval",
    "evaluate_sampled",
    "heldout_records",
]

PAD, UNK, EOS = "<pad>", "<unk>", "<eos>"
SPECIAL_TOKENS = (PAD, UNK, EOS)
# Added as NON-special tokens: TRL decodes completions with skip_special_tokens=True and the reward
# needs to see the tags.
TAG_TOKENS = ("<think>", "</think>", "<answer>", "</answer>")

# Bump when the tokenizer, model construction or warm-up loop changes what a cfg builds
# (the embedded-model cache is keyed on it, together with the cfg and the trace version).
EMBEDDED_FORMAT_VERSION = 2
# The vocabulary is a fixed function of these (independent of any model cfg).
_VOCAB_SEED = 12_345
_VOCAB_PUZZLES_PER_PEOPLE = 300
# Training puzzles use seeds cfg.seed * 1000 + p; held-out ones this base + p (and are deduplicated
# against training by statement tree, since 2-3 person puzzle streams can collide).
HELDOUT_SEED_BASE = 990_000


# --------------------------------------------------------------------------------------------
# Tokenizer
# --------------------------------------------------------------------------------------------

def _pre_tokenizer():
    from tokenizers import Regex, pre_tokenizers

    # Whitespace, then every punctuation character on its own ('"Zoey,' -> '"', 'Zoey', ','), except a person
    # label "(k)", k one digit, which stays one word: it is the key the answer "(k) NAME" copies by.
    return pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(),
                                    pre_tokenizers.Split(Regex(r"\(\d\)|[^\w\s]|_"), "isolated")])


def build_tokenizer(words: Iterable[str], *, model_max_length: int = 8192):
    """A word-level ``PreTrainedTokenizerFast`` whose vocabulary is every word of ``words``.

    words: words or whole texts (split with the tokenizer's own pre-tokenizer: whitespace, then each
    punctuation character alone, except person labels "(1)".."(9)", one word each); the tags in :data:`TAG_TOKENS` inside texts are recognised.
    Ids: <pad>=0, <unk>=1, <eos>=2 (special), the four tags 3..6 (added, non-special), then the
    words in sorted order. No BOS/EOS is added on encode; decode joins tokens with single spaces
    (newlines are not kept: they only separate words).
    """
    from tokenizers import AddedToken, Tokenizer, models
    from transformers import PreTrainedTokenizerFast

    pre = _pre_tokenizer()
    vocab_words: set[str] = set()
    for text in words:
        for tag in TAG_TOKENS:
            text = text.replace(tag, " ")
        vocab_words.update(w for w, _ in pre.pre_tokenize_str(text))
    vocab_words -= set(SPECIAL_TOKENS) | set(TAG_TOKENS)
    ordered = [*SPECIAL_TOKENS, *TAG_TOKENS, *sorted(vocab_words)]
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(ordered)}, unk_token=UNK))
    tok.pre_tokenizer = pre
    # No decoder: the tokenizers library then joins tokens with spaces.
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS])
    tok.add_tokens([AddedToken(t, special=False, normalized=False, single_word=False) for t in TAG_TOKENS])
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token=PAD,
        unk_token=UNK,
        eos_token=EOS,
        padding_side="left",  # generation pads prompts on the left
        model_max_length=model_max_length,
        clean_up_tokenization_spaces=False,  # keep decode(encode(x)) word-for-word
    )


@functools.lru_cache(maxsize=1)
def embedded_vocabulary() -> tuple[str, ...]:
    """Texts whose words form the embedded vocabulary: generated quizzes (plain prompt) and answers for
    2-8 people, every official name, and the trace words. Deterministic (fixed seed)."""
    from dgro_lib.data import kk
    from dgro_lib.data.trace import trace_vocabulary

    texts: list[str] = []
    for p in range(2, 9):
        for rec in kk.generate(p, _VOCAB_PUZZLES_PER_PEOPLE, seed=_VOCAB_SEED + p):
            texts += [kk.format_prompt(rec, template="plain"), kk.answer_text(rec)]
    texts += list(kk.NAMES) + list(trace_vocabulary())
    return tuple(texts)


def build_embedded_tokenizer():
    """The embedded model's tokenizer (:func:`build_tokenizer` over :func:`embedded_vocabulary`)."""
    return build_tokenizer(embedded_vocabulary())


# --------------------------------------------------------------------------------------------
# Embedded model config
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class EmbeddedModelConfig:
    """Architecture and warm-up recipe of the embedded tiny model. Its hash keys the cache."""

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
    ``attention_bias``). Measured: the biased model learns to copy names from the quiz ~2x sooner."""
    max_position: int = 8192
    """RoPE has no position parameters; this only bounds sequence length (8-person traces are long)."""

    people: tuple[int, ...] = (2, 3, 4)
    """People counts of the warm-up puzzles."""
    mix: tuple[float, ...] = (0.25, 0.5, 0.25)
    """Fraction of warm-up puzzles per entry of ``people`` (normalized)."""
    n_puzzles: int = 20_000
    """Distinct warm-up puzzles (2-person ones are capped by the puzzle space); reused over epochs."""
    trace_style: str = "explicit"
    """:func:`dgro_lib.data.trace.reasoning_trace` style; ``explicit`` is the one that learns (DESIGN §8)."""
    slip_rate: float = 0.0
    """Probability that a warm-up trace carries one answer-changing slip (a base whose errors RL can fix)."""

    prompt_loss: bool = False
    """Train on the prompt tokens too (full language modelling), not only the completion. Free (the prompt is
    in the forward pass anyway) and it gives the model the quiz's own repetitions to learn copying from;
    the recipe that learned the trace used it (see EMBEDDED_PRESETS)."""
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
    copied every name and operator but wrote ``knight`` for most knaves (measured: see EMBEDDED_PRESETS)."""
    name_loss_weight: float = 1.0
    """Weight of person-name target tokens in the warm-up loss. The explicit trace mentions names only in its
    legend and the answer (~3% of tokens), and copying a name from the quiz is the one skill the rest of
    the trace cannot teach; upweighting them speeds up learning to copy (measured: see EMBEDDED_PRESETS)."""
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
        object.__setattr__(self, "mix", tuple(float(m) for m in self.mix))
        object.__setattr__(self, "eval_people", tuple(int(p) for p in self.eval_people))
        object.__setattr__(self, "lr", float(self.lr))
        object.__setattr__(self, "statement_drills", float(self.statement_drills))
        from dgro_lib.data.trace import STYLES

        if self.trace_style not in STYLES:
            raise ValueError(f"trace_style must be one of {STYLES}, got {self.trace_style!r}")
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
        if d["statement_drills"] == 0.0:  # likewise for configs from before statement drills existed
            del d["statement_drills"]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "EmbeddedModelConfig":
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(d) - known
        if unknown:
            raise ValueError(f"unknown EmbeddedModelConfig keys: {sorted(unknown)}")
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in d.items()})


EMBEDDED_PRESETS: dict[str, EmbeddedModelConfig] = {
    # Builds in well under a minute; does not solve puzzles, only learns to emit the format often.
    "ci": EmbeddedModelConfig(hidden=32, layers=2, heads=2, kv_heads=2, intermediate=64,
                              people=(2, 3), mix=(0.5, 0.5), n_puzzles=400, lr=1e-2, warmup_steps=10,
                              batch_size=8, max_steps=60, time_budget_min=1.0, trace_style="none"),
    # Stage 1 of the cpu recipe (README, status table): full-sequence loss, 2- and 3-person puzzles, batch 16,
    # lr 2e-3, copy drills every 4th step, names x4 in the loss; 3000 steps (49 min on one core). Measured: 27.5 %
    # greedy on 200 held-out 3-person puzzles (at 1500 steps: 0 %, the checks learned but only ~half the names).
    "cpu_stage1": EmbeddedModelConfig(people=(2, 3), mix=(0.3, 0.7), prompt_loss=True, batch_size=16, lr=2e-3,
                                      warmup_steps=60, max_steps=3000, copy_drill_every=4, name_loss_weight=4.0),
}
# The cpu base: stage 1 plus 2000 more steps on 14,399 new puzzles (seed 1), lr 1e-3 (cosine, 20 warm-up steps):
# 42.0 % greedy on 200 held-out 3-person puzzles (84/200; stage 1: 27.5 %); the second stage took 49 min on one
# core next to another job (~1.5 s/step).
EMBEDDED_PRESETS["cpu"] = dataclasses.replace(EMBEDDED_PRESETS["cpu_stage1"], continue_from="cpu_stage1",
                                              max_steps=2000, lr=1e-3, warmup_steps=20, seed=1)

# A faster single-stage base (issue #2, stop 10), not yet the cpu profile's: the "named" trace (the quiz's own names
# instead of (k) labels, no legend) and a drill step every 2nd step, half of them statement drills. Measured: 35.5 %
# greedy on 200 held-out 3-person puzzles after 1200 steps (24 min on one core next to another job), 27.5 % on the
# first 400 of Fig. 1's set; cpu_stage1 needs 3000 steps (49 min) for 27.5 %, the two-stage cpu base 5000 (~100 min)
# for 42 %. Drills every 4th step: 27 %; no statement drills: 22 %; no drills at all: 1 % (600 steps); lr 3e-3: 25 %;
# 2000 steps: 34 % (a plateau; RL from the 1200-step model was flat: README, Profiles).
EMBEDDED_PRESETS["cpu_named"] = dataclasses.replace(EMBEDDED_PRESETS["cpu_stage1"], trace_style="named", max_steps=1200,
                                                    copy_drill_every=2, statement_drills=0.5)


ARCH_FIELDS = ("arch", "hidden", "layers", "heads", "kv_heads", "intermediate", "attention_bias")


def config_hash(cfg: EmbeddedModelConfig) -> str:
    """12 hex digits of sha256 over the cfg (and its parent's hash for a continuation), the trace version and
    the build-format version."""
    from dgro_lib.data.trace import TRACE_VERSION

    payload = {"cfg": cfg.to_dict(), "trace_version": TRACE_VERSION, "format": EMBEDDED_FORMAT_VERSION}
    if cfg.continue_from is not None:
        payload["parent"] = config_hash(_resolve_cfg(cfg.continue_from))
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:12]


def _resolve_cfg(cfg: EmbeddedModelConfig | str) -> EmbeddedModelConfig:
    if isinstance(cfg, str):
        if cfg not in EMBEDDED_PRESETS:
            raise ValueError(f"unknown embedded preset {cfg!r}; valid: {sorted(EMBEDDED_PRESETS)}")
        return EMBEDDED_PRESETS[cfg]
    return cfg


# --------------------------------------------------------------------------------------------
# Model construction
# --------------------------------------------------------------------------------------------

def build_tiny_model(cfg: EmbeddedModelConfig, vocab_size: int | None = None, tokenizer=None):
    """A randomly initialised Qwen2ForCausalLM / LlamaForCausalLM (tied embeddings), seeded by cfg.seed.

    vocab_size defaults to ``len(tokenizer)``; the tokenizer also supplies pad/eos ids.
    """
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

    if vocab_size is None:
        if tokenizer is None:
            raise ValueError("build_tiny_model needs vocab_size or tokenizer")
        vocab_size = len(tokenizer)
    ids = {}
    if tokenizer is not None:
        ids = {"pad_token_id": tokenizer.pad_token_id, "eos_token_id": tokenizer.eos_token_id, "bos_token_id": None}
    kw = dict(vocab_size=vocab_size, hidden_size=cfg.hidden, intermediate_size=cfg.intermediate,
              num_hidden_layers=cfg.layers, num_attention_heads=cfg.heads, num_key_value_heads=cfg.kv_heads,
              max_position_embeddings=cfg.max_position, tie_word_embeddings=True, **ids)
    torch.manual_seed(cfg.seed)  # init is the first thing the seed decides
    if cfg.arch == "qwen2":
        model = Qwen2ForCausalLM(Qwen2Config(**kw))  # q/k/v biases are built in
    else:
        model = LlamaForCausalLM(LlamaConfig(attention_bias=cfg.attention_bias, **kw))
    if tokenizer is not None:
        model.generation_config.pad_token_id = tokenizer.pad_token_id
        model.generation_config.eos_token_id = tokenizer.eos_token_id
        model.generation_config.bos_token_id = None
    return model


# --------------------------------------------------------------------------------------------
# Warm-up (supervised)
# --------------------------------------------------------------------------------------------

def _split_counts(n: int, mix: Sequence[float]) -> list[int]:
    total = float(sum(mix))
    counts = [int(round(n * m / total)) for m in mix]
    counts[-1] += n - sum(counts)
    return counts


def _generate_capped(n_people: int, n: int, seed: int) -> list[dict]:
    """kk.generate, but settle for fewer puzzles when the space runs out (2 people: a few thousand)."""
    from dgro_lib.data import kk

    try:
        return kk.generate(n_people, n, seed=seed)
    except RuntimeError:
        lo, hi = 0, n  # binary search for the largest feasible prefix (generate is prefix-stable)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            try:
                kk.generate(n_people, mid, seed=seed)
                lo = mid
            except RuntimeError:
                hi = mid
        return kk.generate(n_people, lo, seed=seed)


def warmup_records(cfg: EmbeddedModelConfig) -> list[dict]:
    """The warm-up puzzles of ``cfg`` (deterministic; seeds cfg.seed * 1000 + people)."""
    out: list[dict] = []
    for p, c in zip(cfg.people, _split_counts(cfg.n_puzzles, cfg.mix)):
        if c > 0:
            out += _generate_capped(p, c, cfg.seed * 1000 + p)
    return out


def heldout_records(n_people: int, n: int, *, exclude: Iterable[dict] = (), seed_base: int = HELDOUT_SEED_BASE
                    ) -> list[dict]:
    """``n`` generated puzzles of ``n_people`` from a seed disjoint from warm-up seeds, with any puzzle
    whose statement tree occurs in ``exclude`` (e.g. :func:`warmup_records`) removed. Returns fewer than
    ``n`` when the puzzle space runs out (2 people: ~400 distinct puzzles in all)."""
    seen = {r["statements"] for r in exclude}
    k = n + n // 2 + 16
    while True:
        # generate() is prefix-stable, so asking for more only appends puzzles
        pool = _generate_capped(n_people, k, seed_base + n_people)
        recs = [r for r in pool if r["statements"] not in seen]
        if len(recs) >= n or len(pool) < k:  # enough, or the puzzle space is exhausted
            return recs[:n]
        k *= 2


def _warmup_examples(tokenizer, cfg: EmbeddedModelConfig, records: list[dict]) -> tuple[list[list[int]], list[int], int]:
    """Token ids of prompt + completion + EOS per record, the prompt lengths, and the slipped count."""
    from dgro_lib.data import kk
    from dgro_lib.data.trace import build_trace, format_answer

    rng = random.Random(cfg.seed)
    prompts, completions, slipped = [], [], 0
    for rec in records:
        t = build_trace(rec, style=cfg.trace_style, slip_rate=cfg.slip_rate, rng=rng)
        slipped += t.slipped
        head = f"{t.text} " if t.text else ""
        prompts.append(kk.format_prompt(rec, template="plain"))
        completions.append(f"{head}</think> <answer> {format_answer(rec['names'], t.assignment)} </answer>")
    p_ids = tokenizer(prompts, add_special_tokens=False)["input_ids"]
    c_ids = tokenizer(completions, add_special_tokens=False)["input_ids"]
    eos = tokenizer.eos_token_id
    return [p + c + [eos] for p, c in zip(p_ids, c_ids)], [len(p) for p in p_ids], slipped


def copy_drill_text(rng: random.Random, *, people: Sequence[int] = (2, 3, 4, 5)) -> str:
    """One copy drill: "You meet 3 inhabitants: (1) Ava, (2) Jack, and (3) Mia. people (1) Ava (2) Jack (3) Mia ."

    Random distinct names (the 51 official ones) and count; the second half is the trace's legend, so the
    drill exercises exactly "the name after label (k)" (the same lookup the answer block makes).
    """
    from dgro_lib.data import kk

    k = rng.choice(list(people))
    names = rng.sample(list(kk.NAMES), k)
    listed = [f"({i + 1}) {n}" for i, n in enumerate(names)]
    joined = ", ".join(listed[:-1]) + f", and {listed[-1]}" if k > 1 else listed[0]
    legend = " ".join(f"({i + 1}) {n}" for i, n in enumerate(names))
    return f"You meet {k} inhabitants: {joined}. people {legend} ."


def statement_drill_text(rng: random.Random, *, style: str = "named", people: Sequence[int] = (2, 3)) -> str:
    """One statement drill: random quiz sentences, then the trace header that translates them, e.g.
    ``Ava said that Mia is a knave. "If Ava is a knight then Mia is a knight," Mia declared. Ava says Mia
    knave . Mia says if Ava knight then Mia knight .`` (for ``style="explicit"`` the header uses the labels).

    The statements are drawn like the generator's (depth 2, width 2) but need not form a unique-solution
    puzzle: the drill exercises the translation only.
    """
    from dgro_lib.data import kk
    from dgro_lib.data.trace import header_words

    k = rng.choice(list(people))
    names = rng.sample(list(kk.NAMES), k)
    statements = kk.random_statements(rng, k)
    said = kk.render_sayings(names, statements, [rng.randrange(len(kk.SAYING_TEMPLATES)) for _ in range(k)])
    return f"{said} {' '.join(header_words(statements, names, style=style))}"


def _batches(lengths: Sequence[int], batch_size: int, rng: random.Random) -> Iterator[list[int]]:
    """Endless length-bucketed batches of example indices: shuffle, sort within windows of 50 batches
    (little padding waste), shuffle the batches. Deterministic given rng."""
    idx = list(range(len(lengths)))
    window = batch_size * 50
    while True:
        rng.shuffle(idx)
        batches = []
        for w in range(0, len(idx), window):
            chunk = sorted(idx[w:w + window], key=lambda i: lengths[i])
            batches += [chunk[b:b + batch_size] for b in range(0, len(chunk), batch_size)]
        rng.shuffle(batches)
        yield from batches


def warmup(model, tokenizer, cfg: EmbeddedModelConfig, *, progress: bool = True) -> dict[str, Any]:
    """Supervised next-token training on prompt + completion; loss on the completion tokens (incl. EOS), and on
    the prompt tokens as well when ``cfg.prompt_loss``.

    A plain torch loop rather than transformers' Trainer / TRL's SFTTrainer: on two CPU cores a
    ~1M-parameter model is dominated by per-step overhead, and the loop is ~30 lines with nothing to
    configure. AdamW (betas 0.9/0.95), linear warm-up + cosine decay over ``cfg.max_steps``
    (transformers' get_cosine_schedule_with_warmup), grad-norm clip 1.0, length-bucketed batches.
    Stops at max_steps, max_tokens or time_budget_min, whichever comes first. Deterministic from
    cfg.seed for a given thread count.

    Returns stats: steps, tokens (real, incl. prompt), completion_tokens, wall_s, tokens_per_s,
    loss (mean of the last 50 steps), loss_curve [(step, loss)], stopped_by, n_params, n_records,
    slipped (records whose trace slipped), mean_len_by_people (completion tokens), and ``eval`` (held-out
    greedy accuracy) when cfg.eval_puzzles > 0.
    """
    from tqdm.auto import tqdm
    from transformers import get_cosine_schedule_with_warmup

    random.seed(cfg.seed)
    torch.manual_seed(cfg.seed)
    records = warmup_records(cfg)
    seqs, plens, slipped = _warmup_examples(tokenizer, cfg, records)
    lengths = [len(s) for s in seqs]
    by_people: dict[int, list[int]] = {}
    for rec, s, p in zip(records, seqs, plens):
        by_people.setdefault(len(rec["names"]), []).append(len(s) - p)
    batches = _batches(lengths, cfg.batch_size, random.Random(cfg.seed))

    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, betas=(0.9, 0.95), weight_decay=cfg.weight_decay)
    sched = get_cosine_schedule_with_warmup(opt, num_warmup_steps=cfg.warmup_steps, num_training_steps=cfg.max_steps)
    pad = tokenizer.pad_token_id
    name_ids = None
    if cfg.name_loss_weight != 1.0:
        from dgro_lib.data import kk

        name_ids = torch.tensor(sorted(set(tokenizer.convert_tokens_to_ids(list(kk.NAMES)))))
    t0 = time.perf_counter()
    tokens = comp_tokens = 0
    losses: list[float] = []
    curve: list[tuple[int, float]] = []
    stopped_by = "max_steps"
    bar = tqdm(total=cfg.max_steps, desc="warm-up", disable=not progress, mininterval=2.0)
    step = 0
    drill_rng = random.Random(cfg.seed + 7)
    for step in range(1, cfg.max_steps + 1):
        drill = cfg.copy_drill_every > 0 and step % cfg.copy_drill_every == 0
        if drill:
            loss = _drill_step(model, tokenizer, drill_rng, cfg.copy_drill_batch, pad,
                               statement_fraction=cfg.statement_drills, style=cfg.trace_style)
        else:
            ids = next(batches)
            width = max(lengths[i] for i in ids)
            # (B, L) right-padded: with causal attention no real token sees a pad, so no attention mask
            # is needed (and sdpa keeps its fast causal path); pads and prompt tokens get label -100.
            input_ids = torch.full((len(ids), width), pad, dtype=torch.long)
            labels = torch.full((len(ids), width), -100, dtype=torch.long)
            for r, i in enumerate(ids):
                input_ids[r, : lengths[i]] = torch.tensor(seqs[i])
                start = 0 if cfg.prompt_loss else plens[i]
                labels[r, start: lengths[i]] = input_ids[r, start: lengths[i]]
            if name_ids is None:
                loss = model(input_ids=input_ids, labels=labels).loss
            else:
                loss = _weighted_lm_loss(model(input_ids=input_ids).logits, labels, name_ids, cfg.name_loss_weight)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        if not drill:  # the loss curve and token counts are over puzzle batches only
            tokens += sum(lengths[i] for i in ids)
            comp_tokens += sum(lengths[i] - plens[i] for i in ids)
            losses.append(loss.item())
        if step % 25 == 0 and losses:
            curve.append((step, sum(losses[-25:]) / len(losses[-25:])))
            bar.set_postfix(loss=f"{curve[-1][1]:.3f}", tok_s=f"{tokens / (time.perf_counter() - t0):.0f}")
        bar.update(1)
        if cfg.max_tokens is not None and tokens >= cfg.max_tokens:
            stopped_by = "max_tokens"
            break
        if cfg.time_budget_min is not None and time.perf_counter() - t0 >= 60 * cfg.time_budget_min:
            stopped_by = "time_budget"
            break
    bar.close()
    wall = time.perf_counter() - t0
    model.eval()
    stats: dict[str, Any] = {
        "steps": step, "tokens": tokens, "completion_tokens": comp_tokens, "wall_s": round(wall, 2),
        "tokens_per_s": round(tokens / max(wall, 1e-9), 1), "loss": sum(losses[-50:]) / max(len(losses[-50:]), 1),
        "loss_curve": curve, "stopped_by": stopped_by, "n_params": sum(p.numel() for p in model.parameters()),
        "n_records": len(records), "slipped": slipped,
        "mean_len_by_people": {p: sum(v) / len(v) for p, v in sorted(by_people.items())},
    }
    if cfg.eval_puzzles > 0:
        stats["eval"] = {}
        for p in cfg.eval_people:
            ev = evaluate_greedy(model, tokenizer, heldout_records(p, cfg.eval_puzzles, exclude=records),
                                 max_new_tokens=_max_new_tokens(p), batch_size=64)
            stats["eval"][str(p)] = {k: ev[k] for k in ("accuracy", "n", "mean_length", "truncated", "wall_s")}
    return stats


def _drill_step(model, tokenizer, rng: random.Random, n: int, pad: int, *, statement_fraction: float = 0.0,
                style: str = "explicit") -> torch.Tensor:
    """LM loss on ``n`` drills (every token a target; right-padded, pads ignored): copy drills, of which
    ``round(n * statement_fraction)`` are statement drills instead."""
    n_st = round(n * statement_fraction)
    texts = [statement_drill_text(rng, style=style) for _ in range(n_st)]
    texts += [copy_drill_text(rng) for _ in range(n - n_st)]
    ids = tokenizer(texts, add_special_tokens=False)["input_ids"]
    width = max(len(x) for x in ids)
    input_ids = torch.full((n, width), pad, dtype=torch.long)
    labels = torch.full((n, width), -100, dtype=torch.long)
    for r, x in enumerate(ids):
        input_ids[r, : len(x)] = torch.tensor(x)
        labels[r, : len(x)] = input_ids[r, : len(x)]
    return model(input_ids=input_ids, labels=labels).loss


def _weighted_lm_loss(logits: torch.Tensor, labels: torch.Tensor, weighted_ids: torch.Tensor, weight: float
                      ) -> torch.Tensor:
    """Next-token cross-entropy with target tokens in ``weighted_ids`` counted ``weight`` times.

    logits (B, L, V), labels (B, L) with -100 = ignored; returns sum(w * nll) / sum(w) over the targets.
    """
    logits, labels = logits[:, :-1].float(), labels[:, 1:]
    mask = labels != -100
    nll = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.clamp(min=0).reshape(-1),
                                            reduction="none").view_as(labels)
    w = torch.where(torch.isin(labels, weighted_ids), weight, 1.0) * mask
    return (nll * w).sum() / w.sum()


def _max_new_tokens(n_people: int) -> int:
    """Generous completion budget for an explicit trace of ``n_people`` (worst case ~2x the mean)."""
    return {2: 256, 3: 512, 4: 1024}.get(n_people, 2048)


# --------------------------------------------------------------------------------------------
# Cache
# --------------------------------------------------------------------------------------------

def _versions() -> dict[str, str]:
    import tokenizers
    import transformers

    import dgro_lib

    return {"torch": torch.__version__, "transformers": transformers.__version__,
            "tokenizers": tokenizers.__version__, "dgro_lib": dgro_lib.__version__,
            "python": platform.python_version()}


def get_embedded_base_model(cfg: EmbeddedModelConfig | str = "cpu", cache_dir: str | Path = "outputs/models", *,
                            force: bool = False, progress: bool = True) -> Path:
    """Build + warm up + save the embedded model, or reuse the cached one; returns its directory.

    The directory ``cache_dir/<arch>-<config_hash(cfg)>`` holds ``save_pretrained`` model and tokenizer
    files plus ``embedded.json`` (cfg, warm-up stats, library versions). Concurrent builders of the same
    cfg serialize on a file lock; a build is written to a temporary directory and renamed into place,
    so a crash never leaves a half-written model that looks complete. ``cfg`` may be a preset name.
    """
    from filelock import FileLock

    cfg = _resolve_cfg(cfg)
    cache_dir = Path(cache_dir)
    cache_dir.mkdir(parents=True, exist_ok=True)
    final = cache_dir / f"{cfg.arch}-{config_hash(cfg)}"
    marker = final / "embedded.json"
    if marker.exists() and not force:
        return final
    with FileLock(str(final) + ".lock"):
        if marker.exists() and not force:  # another process built it while we waited
            return final
        if cfg.continue_from is None:
            tokenizer = build_embedded_tokenizer()
            model = build_tiny_model(cfg, tokenizer=tokenizer)
        else:  # a second warm-up stage on top of the parent preset's model
            parent = _resolve_cfg(cfg.continue_from)
            diff = [f for f in ARCH_FIELDS if getattr(parent, f) != getattr(cfg, f)]
            if diff:
                raise ValueError(f"continue_from={cfg.continue_from!r}: architecture fields differ from the parent's: "
                                 + ", ".join(f"{f} {getattr(cfg, f)!r} != {getattr(parent, f)!r}" for f in diff))
            model, tokenizer = load_model(get_embedded_base_model(parent, cache_dir, progress=progress))
        stats = warmup(model, tokenizer, cfg, progress=progress)
        tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.tmp-", dir=cache_dir))
        try:
            model.save_pretrained(tmp)
            tokenizer.save_pretrained(tmp)
            (tmp / "embedded.json").write_text(json.dumps(
                {"cfg": cfg.to_dict(), "config_hash": config_hash(cfg), "stats": stats,
                 "versions": _versions()}, indent=1))
            if final.exists():
                shutil.rmtree(final)  # force=True, or a stale directory without a marker
            os.rename(tmp, final)  # atomic on one filesystem
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    return final


# --------------------------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------------------------

_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")


def _is_hub_id(s: str) -> bool:
    """'Qwen/Qwen2.5-7B-Instruct' or 'gpt2'; anything with more slashes, a leading '.', '/' or '~' is a path."""
    return bool(_HUB_ID.match(s))


def load_model(path: str | Path, *, peft: dict | Any | None = None, dtype: torch.dtype = torch.float32):
    """Load (model, tokenizer) from a local HF-format directory or a hub id.

    peft: None, a ``peft.LoraConfig``, or a dict with ``r``, ``alpha``, ``target_modules`` (default
    "all-linear"), ``dropout`` -> the model is wrapped with ``get_peft_model``.
    The tokenizer gets a pad token (EOS when it has none) and left padding, as generation needs.
    Raises FileNotFoundError naming ``path`` when it is neither an existing directory nor loadable
    from the hub.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    p = Path(path).expanduser()
    if not p.exists() and (isinstance(path, Path) or not _is_hub_id(str(path))):
        raise FileNotFoundError(f"model path does not exist: {str(path)!r}")
    if p.exists() and not (p / "config.json").exists():
        raise FileNotFoundError(f"not an HF model directory (no config.json): {str(p)!r}")
    src = str(p) if p.exists() else str(path)
    try:
        model = AutoModelForCausalLM.from_pretrained(src, dtype=dtype)
        if p.exists() and (p / "embedded.json").exists():
            # Our word-level tokenizer, loaded as saved: AutoTokenizer would swap in Qwen2Tokenizer for
            # qwen2-type configs (see EmbeddedModelConfig.arch).
            from transformers import PreTrainedTokenizerFast

            tokenizer = PreTrainedTokenizerFast.from_pretrained(src)
        else:
            tokenizer = AutoTokenizer.from_pretrained(src)
    except OSError as e:  # hub id unreachable or unknown
        raise FileNotFoundError(f"model {str(path)!r} is not a local directory and could not be loaded "
                                f"from the hub: {e}") from e
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"
    if peft is not None:
        from peft import LoraConfig, get_peft_model

        if isinstance(peft, dict):
            unknown = set(peft) - {"r", "alpha", "target_modules", "dropout"}
            if unknown:
                raise ValueError(f"unknown peft keys {sorted(unknown)}; valid: r, alpha, target_modules, dropout")
            peft = LoraConfig(r=peft.get("r", 8), lora_alpha=peft.get("alpha", 16),
                              target_modules=peft.get("target_modules", "all-linear"),
                              lora_dropout=peft.get("dropout", 0.0), task_type="CAUSAL_LM")
        model = get_peft_model(model, peft)
    model.eval()
    return model, tokenizer


# --------------------------------------------------------------------------------------------
# Sampling
# --------------------------------------------------------------------------------------------

def _eos_ids(tokenizer, model, eos_token_id) -> list[int]:
    if eos_token_id is None:
        eos_token_id = tokenizer.eos_token_id
        if eos_token_id is None:
            eos_token_id = getattr(model.generation_config, "eos_token_id", None)
    if eos_token_id is None:
        return []
    return [eos_token_id] if isinstance(eos_token_id, int) else list(eos_token_id)


@torch.no_grad()
def sample(model, tokenizer, prompts: Sequence[str] | Sequence[Sequence[int]], *, n: int = 1,
           temperature: float = 1.0, max_new_tokens: int = 256, greedy: bool = False, seed: int | None = None,
           eos_token_id: int | Sequence[int] | None = None, batch_size: int | None = None,
           top_p: float = 1.0) -> list[list[int]]:
    """Sample completions with a KV cache, dropping rows from the batch and the cache as they finish.

    prompts: P texts (tokenized without special tokens) or P lists of token ids.
    Returns P*n lists of completion token ids, ordered prompt0 x n, prompt1 x n, ... (TRL's grouping);
    a row that generated EOS ends with it, others have exactly max_new_tokens ids.
    greedy: argmax (then temperature, top_p and seed are irrelevant); equals ``model.generate(do_sample=False)``.
    top_p: nucleus sampling, in (0, 1]: each step samples from the smallest set of most likely tokens whose
    probability (after the temperature) sums to >= top_p, always at least the top token, renormalised (the
    set transformers' ``TopPLogitsWarper`` keeps). 1.0 (the default) skips the filter: the same probabilities,
    random stream and tokens as a sampler without top_p.
    seed: seeds a private torch.Generator (the global RNG is untouched); None uses the global RNG.
    batch_size: at most this many rows (completions) at once; default all.

    Shapes: prompts are left-padded to (B, P) with an attention mask; position ids count real tokens
    only (as generate does); each step feeds (B', 1) tokens, B' the rows still running. Identical
    prompts (e.g. the n copies) share one prefill; the cache rows are then copied.
    """
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    if isinstance(top_p, bool) or not isinstance(top_p, (int, float)) or not 0 < top_p <= 1:
        raise ValueError(f"top_p must be in (0, 1], got {top_p!r}")
    ids_list = [list(p) if not isinstance(p, str) else tokenizer(p, add_special_tokens=False)["input_ids"]
                for p in prompts]
    rows = [i for i in range(len(ids_list)) for _ in range(n)]
    eos = _eos_ids(tokenizer, model, eos_token_id)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else (eos[0] if eos else 0)
    gen = torch.Generator().manual_seed(seed) if seed is not None else None
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    out: list[list[int]] = [[] for _ in rows]
    step = batch_size or max(len(rows), 1)
    try:
        for start in range(0, len(rows), step):
            chunk = list(range(start, min(start + step, len(rows))))
            _sample_chunk(model, [ids_list[rows[r]] for r in chunk], chunk, out, temperature=temperature, top_p=top_p,
                          max_new_tokens=max_new_tokens, greedy=greedy, gen=gen, eos=eos, pad=pad, device=device)
    finally:
        model.train(was_training)
    return out


@functools.cache
def _growing_kv_layer_class():
    """(transformers' ``DynamicLayer``, ``GrowingKVLayer``), the class defined once (transformers is imported lazily).

    ``GrowingKVLayer``: a ``DynamicLayer`` whose keys/values live in a buffer with spare capacity (doubled when full), so a decode
    step writes one column instead of concatenating the whole cache (``torch.cat`` copies B x L x d per layer and
    step: O(L^2) per completion). Measured on the cpu base (B = 64, 400 cached tokens): 25 vs 39 ms per decode
    step (bench/sampler_cache.py). Same numbers: attention reads a view of the first L columns."""
    from transformers.cache_utils import DynamicLayer

    class GrowingKVLayer(DynamicLayer):
        def lazy_initialization(self, key_states, value_states) -> None:
            super().lazy_initialization(key_states, value_states)
            self._buf_k = self._buf_v = None
            self._len = 0

        def update(self, key_states, value_states, *args, **kwargs):
            if not self.is_initialized:
                self.lazy_initialization(key_states, value_states)
            new_len = self._len + key_states.shape[-2]
            if self._buf_k is None or new_len > self._buf_k.shape[-2]:
                cap = max(new_len, 2 * (self._buf_k.shape[-2] if self._buf_k is not None else 32))
                buf_k = key_states.new_empty((*key_states.shape[:2], cap, key_states.shape[-1]))
                buf_v = value_states.new_empty((*value_states.shape[:2], cap, value_states.shape[-1]))
                if self._len:
                    buf_k[:, :, :self._len] = self._buf_k[:, :, :self._len]
                    buf_v[:, :, :self._len] = self._buf_v[:, :, :self._len]
                self._buf_k, self._buf_v = buf_k, buf_v
            self._buf_k[:, :, self._len:new_len] = key_states
            self._buf_v[:, :, self._len:new_len] = value_states
            self._view(new_len)
            return self.keys, self.values

        def batch_select_indices(self, indices) -> None:
            if self.is_initialized and self._len:
                self._buf_k, self._buf_v = self._buf_k[indices], self._buf_v[indices]
                self._view(self._len)

        def _view(self, length: int) -> None:
            self._len = length
            self.keys, self.values = self._buf_k[:, :, :length], self._buf_v[:, :, :length]

        # generate's other cache operations, kept consistent with the buffer (the sampler itself does not use them)
        def crop(self, tokens_to_remove: int) -> None:
            if self.is_initialized and self._len:
                super().crop(tokens_to_remove)  # DynamicLayer's semantics; its result is a view of our buffer
                self._view(self.keys.shape[-2])

        def batch_repeat_interleave(self, repeats: int) -> None:
            if self.is_initialized and self._len:
                self._buf_k = self._buf_k.repeat_interleave(repeats, dim=0)
                self._buf_v = self._buf_v.repeat_interleave(repeats, dim=0)
                self._view(self._len)

    return DynamicLayer, GrowingKVLayer


def _sampler_cache(config):
    """A ``DynamicCache`` for ``config`` whose full-attention layers grow in place (sliding-window layers, e.g. of
    some Qwen2 configs, keep their own class)."""
    from transformers import DynamicCache

    dynamic, growing = _growing_kv_layer_class()
    cache = DynamicCache(config=config)
    cache.layers = [growing() if type(layer) is dynamic else layer for layer in cache.layers]
    return cache


def _top_p_probs(probs: torch.Tensor, top_p: float) -> torch.Tensor:
    """Nucleus filter of (B, V) probabilities: per row, keep the most likely tokens until their mass reaches
    ``top_p`` (a token is dropped when the tokens more likely than it already hold >= top_p, so the top token always
    stays), zero the rest and renormalise. Equals transformers' ``TopPLogitsWarper`` (which drops the least likely
    tokens whose ascending cumulative mass is <= 1 - top_p) up to float rounding at the boundary and ties."""
    sorted_p, order = probs.sort(dim=-1, descending=True)
    mass = sorted_p.cumsum(dim=-1)
    before = torch.cat([torch.zeros_like(mass[:, :1]), mass[:, :-1]], dim=-1)  # exclusive: 0 for the top token
    drop_sorted = before >= top_p
    drop = drop_sorted.scatter(-1, order, drop_sorted)
    kept = probs.masked_fill(drop, 0.0)
    return kept / kept.sum(dim=-1, keepdim=True)


def _sample_chunk(model, prompt_ids: list[list[int]], out_rows: list[int], out: list[list[int]], *,
                  temperature, top_p=1.0, max_new_tokens, greedy, gen, eos, pad, device) -> None:

    if max_new_tokens <= 0 or not prompt_ids:
        return
    # Prefill each distinct prompt once, then copy its cache rows (TRL repeats prompts G times).
    uniq: dict[tuple, int] = {}
    row_to_uniq = [uniq.setdefault(tuple(p), len(uniq)) for p in prompt_ids]
    uprompts = list(uniq)
    width = max(len(p) for p in uprompts)
    input_ids = torch.full((len(uprompts), width), pad, dtype=torch.long)
    mask = torch.zeros((len(uprompts), width), dtype=torch.long)
    for i, p in enumerate(uprompts):
        if p:
            input_ids[i, width - len(p):] = torch.tensor(p)
            mask[i, width - len(p):] = 1
    # (U, P): positions of real tokens 0..len-1; pads get 1 (their value is irrelevant, masked).
    pos = (mask.cumsum(-1) - 1).masked_fill(mask == 0, 1)
    cache = _sampler_cache(model.config)
    logits = model(input_ids=input_ids.to(device), attention_mask=mask.to(device), position_ids=pos.to(device),
                   past_key_values=cache, use_cache=True, logits_to_keep=1).logits[:, -1, :]
    sel = torch.tensor(row_to_uniq, dtype=torch.long)
    if len(uprompts) != len(prompt_ids) or row_to_uniq != list(range(len(uprompts))):
        cache.batch_select_indices(sel.to(device))
        logits, mask, pos = logits[sel.to(device)], mask[sel], pos[sel]
    mask = mask.to(device)
    last_pos = pos[:, -1].to(device)  # (B,) position of each row's last token
    active = torch.tensor(out_rows, dtype=torch.long)  # (B,) output row of each batch row
    eos_t = torch.tensor(eos, dtype=torch.long, device=device) if eos else None
    for t in range(max_new_tokens):
        if greedy:
            nxt = logits.argmax(-1)
        else:
            probs = torch.softmax(logits.float() / temperature, dim=-1)
            if top_p < 1.0:  # at 1.0 the probabilities (and so the random stream) are untouched
                probs = _top_p_probs(probs, top_p)
            nxt = torch.multinomial(probs.cpu(), 1, generator=gen).squeeze(1).to(device)
        for r, tok in zip(active.tolist(), nxt.tolist()):
            out[r].append(tok)
        if t == max_new_tokens - 1:
            break
        if eos_t is not None:
            keep = ~torch.isin(nxt, eos_t)
            if not bool(keep.all()):
                if not bool(keep.any()):
                    break
                idx = keep.nonzero().squeeze(1)
                cache.batch_select_indices(idx)
                nxt, mask, last_pos, active = nxt[idx], mask[idx], last_pos[idx], active[idx.cpu()]
        mask = torch.cat([mask, mask.new_ones((mask.shape[0], 1))], dim=1)
        last_pos = last_pos + 1
        logits = model(input_ids=nxt[:, None], attention_mask=mask, position_ids=last_pos[:, None],
                       past_key_values=cache, use_cache=True).logits[:, -1, :]


# --------------------------------------------------------------------------------------------
# K&K evaluation
# --------------------------------------------------------------------------------------------

_ANSWER_RE = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)


def _local_kk_is_correct(completion: str, *, names: Sequence[str], solution: Sequence[bool]) -> bool:
    """Fallback checker (DESIGN §4): tags </think>, <answer>, </answer> once each and in order (the
    prompt holds <think>), last answer block names every person's role correctly, and it mentions
    knight/knave exactly once per person."""
    if completion.count("<think>") or any(completion.count(t) != 1 for t in TAG_TOKENS[1:]):
        return False
    if not completion.index("</think>") < completion.index("<answer>") < completion.index("</answer>"):
        return False
    blocks = _ANSWER_RE.findall(completion)
    if not blocks:
        return False
    ans = blocks[-1]
    if len(re.findall(r"\b(knight|knave)\b", ans)) != len(names):
        return False
    for name, is_knight in zip(names, solution):
        m = re.search(rf"\b{re.escape(name)}\b\s+is\s+a\s+(knight|knave)", ans)
        if not m or (m.group(1) == "knight") != bool(is_knight):
            return False
    return True


def _correctness_checker():
    """dgro_lib.rewards.kk_is_correct when it exists (the reward module's own rule), else the fallback."""
    try:
        from dgro_lib.rewards import kk_is_correct

        return kk_is_correct, "dgro_lib.rewards.kk_is_correct"
    except ImportError:
        return _local_kk_is_correct, "dgro_lib.models._local_kk_is_correct"


def evaluate_greedy(model, tokenizer, records: Sequence[dict], *, template: str = "plain",
                    max_new_tokens: int = 512, batch_size: int = 64, progress: bool = False) -> dict[str, Any]:
    """Greedy K&K accuracy of ``model`` on ``records``.

    Returns accuracy, n, correct (list[bool] per record, for paired McNemar tests), completions (texts,
    decoded with skip_special_tokens=True as TRL does), lengths (completion tokens incl. EOS),
    mean_length, truncated (fraction that hit max_new_tokens without EOS), by_people {n: accuracy},
    checker (which correctness function was used), wall_s.
    """
    return _evaluate(model, tokenizer, records, n=1, greedy=True, template=template,
                     max_new_tokens=max_new_tokens, batch_size=batch_size, progress=progress)


greedy_eval = evaluate_greedy  # the name docs/CONTRACTS.md uses


def evaluate_sampled(model, tokenizer, records: Sequence[dict], *, n: int = 8, temperature: float = 1.0,
                     template: str = "plain", max_new_tokens: int = 512, batch_size: int = 64,
                     seed: int = 0, progress: bool = False, top_p: float = 1.0) -> dict[str, Any]:
    """Sampled K&K accuracy: ``n`` samples per record at ``temperature`` (nucleus ``top_p``, see :func:`sample`).

    Returns what :func:`evaluate_greedy` returns over the n*len(records) samples, plus per_prompt
    (success rate per record), frac_all_correct / frac_all_wrong (groups with zero reward variance
    under a correctness reward) and mean_per_prompt.
    """
    ev = _evaluate(model, tokenizer, records, n=n, greedy=False, temperature=temperature, top_p=top_p, seed=seed,
                   template=template, max_new_tokens=max_new_tokens, batch_size=batch_size, progress=progress)
    c = ev["correct"]
    per = [sum(c[i * n:(i + 1) * n]) / n for i in range(len(records))]
    ev.update(per_prompt=per, frac_all_correct=sum(p == 1 for p in per) / max(len(per), 1),
              frac_all_wrong=sum(p == 0 for p in per) / max(len(per), 1))
    return ev


def _evaluate(model, tokenizer, records, *, n, greedy, template, max_new_tokens, batch_size, progress,
              temperature=1.0, top_p=1.0, seed=None) -> dict[str, Any]:
    from tqdm.auto import tqdm

    from dgro_lib.data import kk

    check, checker = _correctness_checker()
    t0 = time.perf_counter()
    eos = _eos_ids(tokenizer, model, None)
    # Chunk by prompts (not rows) so the sampler can share prefills within a chunk.
    per_chunk = max(1, batch_size // n)
    completions: list[str] = []
    lengths: list[int] = []
    truncated = 0
    for s in tqdm(range(0, len(records), per_chunk), desc="eval", disable=not progress):
        recs = records[s:s + per_chunk]
        ids = sample(model, tokenizer, [kk.format_prompt(r, template=template) for r in recs], n=n,
                     temperature=temperature, top_p=top_p, greedy=greedy, max_new_tokens=max_new_tokens,
                     seed=None if seed is None else seed + s)
        completions += tokenizer.batch_decode(ids, skip_special_tokens=True)
        lengths += [len(x) for x in ids]
        truncated += sum(1 for x in ids if not (x and x[-1] in eos))
    rows = [r for r in records for _ in range(n)]
    correct = [bool(check(c, names=r["names"], solution=r["solution"])) for c, r in zip(completions, rows)]
    by_people: dict[int, list[bool]] = {}
    for r, ok in zip(rows, correct):
        by_people.setdefault(len(r["names"]), []).append(ok)
    return {
        "accuracy": sum(correct) / max(len(correct), 1), "n": len(correct), "correct": correct,
        "completions": completions, "lengths": lengths, "mean_length": sum(lengths) / max(len(lengths), 1),
        "truncated": truncated / max(len(lengths), 1),
        "by_people": {p: sum(v) / len(v) for p, v in sorted(by_people.items())},
        "checker": checker, "wall_s": round(time.perf_counter() - t0, 2),
    }
