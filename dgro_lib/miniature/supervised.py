"""Supervised warm-up of the embedded model: the puzzles it trains on, the drills, and the training loop.

The warm-up teaches the prompt -> reasoning trace -> answer format by next-token training: on K&K the traces of
:mod:`dgro_lib.data.kk.trace`, on math (``EmbeddedModelConfig.task = "math"``) the worked arithmetic of
:mod:`dgro_lib.data.math.worked` followed by ``</think> \\boxed{answer}``. Besides K&K puzzle batches it can
train on short *drills* (a numbered list of names and the trace's legend that copies it; quiz sentences and the
trace header that translates them): the two copying skills the trace needs and its own tokens teach slowly.
docs/embedded-model.md has what each recipe measured.
"""

from __future__ import annotations

import dataclasses

import random
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Sequence

import torch
from tqdm.auto import tqdm
from transformers import get_cosine_schedule_with_warmup

from dgro_lib.data import kk
from dgro_lib.data import math as math_data
from dgro_lib.data.math.worked import trace_answer, worked_examples
from dgro_lib.data.kk.trace import build_trace, format_answer, header_words, slip_answer
from dgro_lib.evaluate.accuracy import evaluate_greedy
from dgro_lib.tasks import get_task

if TYPE_CHECKING:  # annotations only: embedded.py builds on this module
    from dgro_lib.models.presets import EmbeddedModelConfig

__all__ = ["warmup", "warmup_records", "heldout_records", "warmup_heldout", "copy_drill_text", "statement_drill_text"]

# Training puzzles use seeds cfg.seed * 1000 + p; held-out ones this base + p (and are deduplicated
# against training by statement tree, since 2-3 person puzzle streams can collide).
HELDOUT_SEED_BASE = 990_000
# Math warm-up problems use this base + cfg.seed (data.math.worked keeps them disjoint from every held-out problem).
MATH_WARMUP_SEED_BASE = 500_000
ANSWER_SLIP_SEED_BASE = 700_000
GUESS_SEED_BASE = 800_000
_MATH_MAX_NEW_TOKENS = 128  # the longest worked trace (mul of 3 digits, muladd) is ~45 tokens


def _split_counts(n: int, mix: Sequence[float]) -> list[int]:
    total = float(sum(mix))
    counts = [int(round(n * m / total)) for m in mix]
    counts[-1] += n - sum(counts)
    return counts


def _generate_capped(n_people: int, n: int, seed: int, name_order: str = "random") -> list[dict]:
    """kk.generate, but settle for fewer puzzles when the space runs out (2 people: a few thousand)."""
    try:
        return kk.generate(n_people, n, seed=seed, name_order=name_order)
    except RuntimeError:
        lo, hi = 0, n  # binary search for the largest feasible prefix (generate is prefix-stable)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            try:
                kk.generate(n_people, mid, seed=seed, name_order=name_order)
                lo = mid
            except RuntimeError:
                hi = mid
        return kk.generate(n_people, lo, seed=seed, name_order=name_order)


def warmup_records(cfg: EmbeddedModelConfig) -> list[dict]:
    """The warm-up puzzles of ``cfg`` (deterministic; seeds cfg.seed * 1000 + people)."""
    out: list[dict] = []
    for p, c in zip(cfg.people, _split_counts(cfg.n_puzzles, cfg.mix)):
        if c > 0:
            out += _generate_capped(p, c, cfg.seed * 1000 + p, cfg.name_order)
    return out


def heldout_records(n_people: int, n: int, *, exclude: Iterable[dict] = (), seed_base: int = HELDOUT_SEED_BASE,
                    name_order: str = "random") -> list[dict]:
    """``n`` generated puzzles of ``n_people`` from a seed disjoint from warm-up seeds, with any puzzle
    whose statement tree occurs in ``exclude`` (e.g. :func:`warmup_records`) removed. Returns fewer than
    ``n`` when the puzzle space runs out (2 people: ~400 distinct puzzles in all)."""
    seen = {r["statements"] for r in exclude}
    k = n + n // 2 + 16
    while True:
        # generate() is prefix-stable, so asking for more only appends puzzles
        pool = _generate_capped(n_people, k, seed_base + n_people, name_order)
        recs = [r for r in pool if r["statements"] not in seen]
        if len(recs) >= n or len(pool) < k:  # enough, or the puzzle space is exhausted
            return recs[:n]
        k *= 2


def _tokenized(tokenizer, prompts: list[str], completions: list[str]) -> tuple[list[list[int]], list[int]]:
    """Token ids of prompt + completion + EOS per example, and the prompt lengths."""
    p_ids = tokenizer(prompts, add_special_tokens=False)["input_ids"]
    c_ids = tokenizer(completions, add_special_tokens=False)["input_ids"]
    eos = tokenizer.eos_token_id
    return [p + c + [eos] for p, c in zip(p_ids, c_ids)], [len(p) for p in p_ids]


@dataclass
class _Corpus:
    """What the warm-up trains on and evaluates with, for one task (``EmbeddedModelConfig.task``)."""

    records: list[dict]
    prompts: list[str]
    completions: list[str]
    groups: list[Any]
    """Per example: what ``mean_len_by_<group_name>`` breaks completion lengths down by."""
    group_name: str
    slipped: int
    heldout: Callable[[], list[tuple[str, list[dict], int]]]
    """-> ``[(key, held-out records, max_new_tokens)]`` for the greedy evaluation after the warm-up."""


def _kk_corpus(cfg: EmbeddedModelConfig) -> _Corpus:
    records = warmup_records(cfg)
    rng = random.Random(cfg.seed)
    # answer slips draw from a stream of their own, so a config without them builds the data it always built
    answer_rng = random.Random(ANSWER_SLIP_SEED_BASE + cfg.seed)
    guess_rng = random.Random(GUESS_SEED_BASE + cfg.seed)
    prompts, completions, slipped = [], [], 0
    for rec in records:
        prompts.append(kk.format_prompt(rec, template=cfg.template))
        if cfg.guess_rate > 0 and guess_rng.random() < cfg.guess_rate:
            guess = [guess_rng.random() < 0.5 for _ in rec["names"]]
            completions.append(f"</think> <answer> {format_answer(rec['names'], guess)} </answer>")
            continue
        t = build_trace(rec, style=cfg.trace_style, slip_rate=cfg.slip_rate, rng=rng)
        answer, flipped = t.assignment, 0
        if cfg.answer_slip_rate > 0:
            answer, flipped = slip_answer(t.assignment, cfg.answer_slip_rate, answer_rng)
        slipped += bool(t.slipped or flipped)
        head = f"{t.text} " if t.text else ""
        completions.append(f"{head}</think> <answer> {format_answer(rec['names'], answer)} </answer>")

    def heldout():
        return [(str(p), heldout_records(p, cfg.eval_puzzles, exclude=records, name_order=cfg.name_order),
                 _max_new_tokens(p)) for p in cfg.eval_people]

    return _Corpus(records, prompts, completions, [len(r["names"]) for r in records], "people", slipped, heldout)


def _math_corpus(cfg: EmbeddedModelConfig) -> _Corpus:
    pairs = worked_examples(cfg.n_puzzles, seed=MATH_WARMUP_SEED_BASE + cfg.seed, kinds=cfg.math_kinds,
                            slip_rate=cfg.slip_rate)
    records = [r for r, _ in pairs]
    prompts = [math_data.format_prompt(r, template=cfg.template) for r in records]
    # the boxed answer is the one the trace reaches: a slipped trace ends in a wrong answer, as a K&K slip does
    completions = [f" {trace} </think> \\boxed{{{trace_answer(trace)}}}" for _, trace in pairs]
    slipped = sum(trace_answer(trace) != r["answer"] for r, trace in pairs)

    def heldout():
        # reserved problems only (data.math.worked): none of them is a warm-up problem
        held = math_data.generate_math(cfg.eval_puzzles, seed=HELDOUT_SEED_BASE, kinds=cfg.math_kinds)
        return [("math", held, _MATH_MAX_NEW_TOKENS)]

    return _Corpus(records, prompts, completions, [r["source"].split("/")[-1] for r in records], "kind", slipped,
                   heldout)


_CORPORA: dict[str, Callable[[EmbeddedModelConfig], _Corpus]] = {"kk": _kk_corpus, "math": _math_corpus}


def warmup_heldout(cfg: EmbeddedModelConfig, n: int) -> list[tuple[str, list[dict], int]]:
    """The held-out records a warm-up of ``cfg`` evaluates on, ``n`` per group: ``[(key, records, max_new_tokens)]``
    (K&K: one entry per ``cfg.eval_people``, none of them a warm-up puzzle; math: reserved problems of
    ``cfg.math_kinds``)."""
    return _CORPORA[cfg.task](dataclasses.replace(cfg, eval_puzzles=n)).heldout()


def copy_drill_text(rng: random.Random, *, people: Sequence[int] = (2, 3, 4, 5)) -> str:
    """One copy drill: "You meet 3 inhabitants: (1) Ava, (2) Jack, and (3) Mia. people (1) Ava (2) Jack (3) Mia ."

    Random distinct names (the 51 official ones) and count; the second half is the trace's legend, so the
    drill exercises exactly "the name after label (k)" (the same lookup the answer block makes).
    """
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
    slipped (records whose trace slipped), mean_len_by_people (K&K) or mean_len_by_kind (math; completion tokens),
    and ``eval`` (held-out greedy accuracy, per people count or for the math set, with its breakdown by group) when
    cfg.eval_puzzles > 0.
    """
    random.seed(cfg.seed)
    torch.manual_seed(cfg.seed)
    corpus = _CORPORA[cfg.task](cfg)
    seqs, plens = _tokenized(tokenizer, corpus.prompts, corpus.completions)
    lengths = [len(s) for s in seqs]
    by_group: dict[Any, list[int]] = {}
    for g, s, p in zip(corpus.groups, seqs, plens):
        by_group.setdefault(g, []).append(len(s) - p)
    batches = _batches(lengths, cfg.batch_size, random.Random(cfg.seed))

    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, betas=(0.9, 0.95), weight_decay=cfg.weight_decay)
    sched = get_cosine_schedule_with_warmup(opt, num_warmup_steps=cfg.warmup_steps, num_training_steps=cfg.max_steps)
    pad = tokenizer.pad_token_id
    name_ids = None
    if cfg.name_loss_weight != 1.0:
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
        "n_records": len(corpus.records), "slipped": corpus.slipped,
        f"mean_len_by_{corpus.group_name}": {g: sum(v) / len(v) for g, v in sorted(by_group.items())},
    }
    if cfg.eval_puzzles > 0:
        stats["eval"] = {}
        group = get_task(cfg.task).group_name
        for key, held, max_new in corpus.heldout():
            ev = evaluate_greedy(model, tokenizer, held, template=cfg.template, max_new_tokens=max_new,
                                 batch_size=64, task=cfg.task)
            stats["eval"][key] = {k: ev[k] for k in ("accuracy", "n", "mean_length", "truncated", "wall_s", group)}
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

