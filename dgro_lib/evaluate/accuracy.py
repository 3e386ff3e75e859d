"""K&K accuracy of a model: greedy or sampled answers to puzzles, checked by the reward's correctness rule, and
the held-out evaluation under an experiment config's ``eval:`` protocol."""

from __future__ import annotations

import time
from typing import Any, Sequence

from tqdm.auto import tqdm

from dgro_lib.config import ExperimentConfig
from dgro_lib.data import kk
from dgro_lib.sampling import eos_ids, sample
from dgro_lib.rewards import kk_is_correct

from .metrics import pass_at_k

__all__ = ["evaluate_greedy", "greedy_eval", "evaluate_sampled", "evaluate_under_config", "eval_summary"]

def _correctness_checker():
    """The correctness rule of every evaluation and the name recorded with its results (``checker``): the reward's
    own rule, :func:`dgro_lib.rewards.kk_is_correct`."""
    return kk_is_correct, "dgro_lib.rewards.kk_is_correct"


def evaluate_greedy(model, tokenizer, records: Sequence[dict], *, template: str = "plain",
                    max_new_tokens: int = 512, batch_size: int = 64, progress: bool = False) -> dict[str, Any]:
    """Greedy K&K accuracy of ``model`` on ``records``.

    Returns accuracy, n, correct (list[bool] per record, for paired McNemar tests), completions (texts,
    decoded with skip_special_tokens=True as TRL does), lengths (completion tokens incl. EOS),
    mean_length, truncated (fraction that hit max_new_tokens without EOS), by_people {n: accuracy},
    checker (which correctness function was used), wall_s.
    """
    return _evaluate_records(model, tokenizer, records, n=1, greedy=True, template=template,
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
    ev = _evaluate_records(model, tokenizer, records, n=n, greedy=False, temperature=temperature, top_p=top_p,
                           seed=seed, template=template, max_new_tokens=max_new_tokens, batch_size=batch_size,
                           progress=progress)
    c = ev["correct"]
    per = [sum(c[i * n:(i + 1) * n]) / n for i in range(len(records))]
    ev.update(per_prompt=per, frac_all_correct=sum(p == 1 for p in per) / max(len(per), 1),
              frac_all_wrong=sum(p == 0 for p in per) / max(len(per), 1))
    return ev


def _evaluate_records(model, tokenizer, records, *, n, greedy, template, max_new_tokens, batch_size, progress,
                      temperature=1.0, top_p=1.0, seed=None) -> dict[str, Any]:
    check, checker = _correctness_checker()
    t0 = time.perf_counter()
    eos = eos_ids(tokenizer, model)
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


def evaluate_under_config(model, tokenizer, records: Sequence[dict], cfg: ExperimentConfig) -> dict[str, Any]:
    """Held-out evaluation under ``cfg.eval`` (and ``cfg.data.template``). ``correct`` has one entry per puzzle
    (what the paired McNemar test compares): the greedy answer, or with sampling the first sample (one unbiased
    pass@1 draw); with sampling, ``n_correct`` (per puzzle, out of n_samples), ``pass@k`` for ``cfg.eval.ks`` and
    ``accuracy`` = avg@n are added."""
    e = cfg.eval
    common = dict(template=cfg.data.template, max_new_tokens=e.max_new_tokens, batch_size=e.batch_size)
    if e.temperature == 0:
        ev = evaluate_greedy(model, tokenizer, records, **common)
        ev["pass@1"] = ev["accuracy"]
        return ev
    ev = evaluate_sampled(model, tokenizer, records, n=e.n_samples, temperature=e.temperature, top_p=e.top_p,
                          seed=e.seed, **common)
    n = e.n_samples
    counts = [sum(ev["correct"][i * n:(i + 1) * n]) for i in range(len(records))]
    ev["n_correct"] = counts
    ev["correct"] = [bool(ev["correct"][i * n]) for i in range(len(records))]
    for k in e.ks:
        ev[f"pass@{k}"] = sum(pass_at_k(n, c, k) for c in counts) / max(len(counts), 1)
    return ev


def eval_summary(ev: dict[str, Any]) -> dict[str, Any]:
    """The scalar fields of an evaluation (what a results row or a run summary holds): every value that is not
    a per-sample list."""
    return {k: v for k, v in ev.items() if not isinstance(v, (list, tuple))}
