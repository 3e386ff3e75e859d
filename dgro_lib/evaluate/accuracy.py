"""A model's accuracy on a task's records (K&K puzzles or math problems, :mod:`dgro_lib.tasks`): greedy or sampled
answers, checked by the task reward's own correctness rule, and the held-out evaluation under an experiment config's
``eval:`` protocol."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Sequence

import pandas as pd
from tqdm.auto import tqdm

from dgro_lib.models.sampling import eos_ids, sample
from dgro_lib.tasks import get_task

from dgro_lib.evaluate.metrics import pass_at_k

if TYPE_CHECKING:  # annotations only: dgro_lib.config imports the model checks, which import this package
    from dgro_lib.config.schema import ExperimentConfig

__all__ = ["evaluate_greedy", "greedy_eval", "evaluate_sampled", "evaluate_under_config", "eval_summary",
           "per_item_correct", "greedy_accuracy_by_people", "sampled_success_by_people"]


def evaluate_greedy(model, tokenizer, records: Sequence[dict], *, template: str = "plain",
                    max_new_tokens: int = 512, batch_size: int = 64, progress: bool = False,
                    task: str = "kk") -> dict[str, Any]:
    """Greedy accuracy of ``model`` on ``records`` of ``task`` (``kk`` or ``math``, :mod:`dgro_lib.tasks`).

    Returns accuracy, n, correct (list[bool] per record, for paired McNemar tests), completions (texts,
    decoded with skip_special_tokens=True as TRL does), lengths (completion tokens incl. EOS),
    mean_length, truncated (fraction that hit max_new_tokens without EOS), the accuracy per group (K&K:
    ``by_people`` {people: accuracy}; math: ``by_source`` {benchmark: accuracy}), well_formatted (list[bool] per
    completion: the tags pass the reward's own format rule, :func:`dgro_lib.rewards.kk.check_format` or
    :func:`dgro_lib.rewards.check_math_format`, with the prompt's ``<think>`` counted as the opening tag exactly as
    the correctness check counts it), format_rate (the fraction of completions that are well formatted; a correct
    completion is always well formatted, so format_rate >= accuracy), checker (which correctness function was
    used), wall_s.
    """
    return _evaluate_records(model, tokenizer, records, n=1, greedy=True, template=template,
                             max_new_tokens=max_new_tokens, batch_size=batch_size, progress=progress, task=task)


greedy_eval = evaluate_greedy  # the older name, kept for notebooks and user code that call it


def evaluate_sampled(model, tokenizer, records: Sequence[dict], *, n: int = 8, temperature: float = 1.0,
                     template: str = "plain", max_new_tokens: int = 512, batch_size: int = 64,
                     seed: int = 0, progress: bool = False, top_p: float = 1.0, task: str = "kk") -> dict[str, Any]:
    """Sampled accuracy: ``n`` samples per record at ``temperature`` (nucleus ``top_p``, see :func:`sample`).

    Returns what :func:`evaluate_greedy` returns over the n*len(records) samples (format_rate included), plus per_prompt
    (success rate per record), frac_all_correct / frac_all_wrong (groups with zero reward variance
    under a correctness reward) and mean_per_prompt.
    """
    ev = _evaluate_records(model, tokenizer, records, n=n, greedy=False, temperature=temperature, top_p=top_p,
                           seed=seed, template=template, max_new_tokens=max_new_tokens, batch_size=batch_size,
                           progress=progress, task=task)
    c = ev["correct"]
    per = [sum(c[i * n:(i + 1) * n]) / n for i in range(len(records))]
    ev.update(per_prompt=per, frac_all_correct=sum(p == 1 for p in per) / max(len(per), 1),
              frac_all_wrong=sum(p == 0 for p in per) / max(len(per), 1))
    return ev


def _evaluate_records(model, tokenizer, records, *, n, greedy, template, max_new_tokens, batch_size, progress,
                      temperature=1.0, top_p=1.0, seed=None, task="kk") -> dict[str, Any]:
    task = get_task(task)
    t0 = time.perf_counter()
    eos = eos_ids(tokenizer, model)
    if hasattr(model, "generate_ids"):  # an engine (vLLM, eval.engine: vllm): every prompt in one call, it batches
        prompt_ids = [tokenizer(task.prompt(r, template, tokenizer), add_special_tokens=False)["input_ids"]
                      for r in records]
        ids, cut = model.generate_ids(prompt_ids, n=n, greedy=greedy, temperature=temperature, top_p=top_p,
                                      max_new_tokens=max_new_tokens, seed=seed, stop_token_ids=eos)
        completions = tokenizer.batch_decode(ids, skip_special_tokens=True)
        lengths = [len(x) for x in ids]
        truncated = sum(cut)
    else:
        # Chunk by prompts (not rows) so the sampler can share prefills within a chunk.
        per_chunk = max(1, batch_size // n)
        completions, lengths, truncated = [], [], 0
        for s in tqdm(range(0, len(records), per_chunk), desc="eval", disable=not progress):
            recs = records[s:s + per_chunk]
            ids = sample(model, tokenizer, [task.prompt(r, template, tokenizer) for r in recs], n=n,
                         temperature=temperature, top_p=top_p, greedy=greedy, max_new_tokens=max_new_tokens,
                         seed=None if seed is None else seed + s)
            completions += tokenizer.batch_decode(ids, skip_special_tokens=True)
            lengths += [len(x) for x in ids]
            truncated += sum(1 for x in ids if not (x and x[-1] in eos))
    rows = [r for r in records for _ in range(n)]
    correct = [task.is_correct(c, r) for c, r in zip(completions, rows, strict=True)]
    well_formatted = [task.well_formatted(c) for c in completions]
    groups: dict[Any, list[bool]] = {}
    for r, ok in zip(rows, correct):
        groups.setdefault(task.group(r), []).append(ok)
    return {
        "accuracy": sum(correct) / max(len(correct), 1), "n": len(correct), "correct": correct,
        "completions": completions, "lengths": lengths, "mean_length": sum(lengths) / max(len(lengths), 1),
        "truncated": truncated / max(len(lengths), 1),
        task.group_name: {p: sum(v) / len(v) for p, v in sorted(groups.items())},
        "well_formatted": well_formatted, "format_rate": sum(well_formatted) / max(len(well_formatted), 1),
        "checker": task.checker, "wall_s": round(time.perf_counter() - t0, 2),
    }


def evaluate_under_config(model, tokenizer, records: Sequence[dict], cfg: ExperimentConfig) -> dict[str, Any]:
    """Held-out evaluation under ``cfg.eval`` (and ``cfg.data.template``). ``correct`` has one entry per puzzle:
    the greedy answer, or with sampling the first sample (one pass@1 draw). With sampling, ``n_correct`` (per
    puzzle, out of ``n_samples``; ``n`` counts every sample), ``pass@k`` for ``cfg.eval.ks`` and ``accuracy`` =
    avg@n are added. What is stored per puzzle is :func:`per_item_correct`
    (the fraction of samples right)."""
    e = cfg.eval
    common = dict(template=cfg.data.template, max_new_tokens=e.max_new_tokens, batch_size=e.batch_size,
                  task=cfg.data.task)
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


def per_item_correct(ev: dict[str, Any]) -> list:
    """What a stored evaluation keeps per puzzle (``final_eval.json``, ``evals/<key>.json``, base evaluations): the
    fraction of its samples that were right when :func:`evaluate_under_config` sampled (``n_correct`` over the
    samples per puzzle, so a paired test uses every sample, not the first one alone), the greedy answer's correctness
    (a bool) otherwise."""
    if "n_correct" not in ev:
        return list(map(bool, ev["correct"]))
    n = ev["n"] // len(ev["n_correct"])  # samples per puzzle
    return [c / n for c in ev["n_correct"]]


def eval_summary(ev: dict[str, Any]) -> dict[str, Any]:
    """The scalar fields of an evaluation (what a results row or a run summary holds): every value that is not
    a per-sample list."""
    return {k: v for k, v in ev.items() if not isinstance(v, (list, tuple))}


# ---------------------------------------------------------------------------------------------
# per people count (the base model's table in notebooks/00_base_model)
# ---------------------------------------------------------------------------------------------


def _people_subsets(records: Sequence[dict], people_counts: Sequence[int]) -> list[tuple[int, list[dict]]]:
    out = []
    for people in people_counts:
        subset = [r for r in records if len(r["names"]) == people]
        if not subset:
            have = sorted({len(r["names"]) for r in records})
            raise ValueError(f"no record with {people} people (records have people counts {have})")
        out.append((people, subset))
    return out


def greedy_accuracy_by_people(model, tokenizer, records: Sequence[dict], cfg: ExperimentConfig) -> pd.DataFrame:
    """Greedy accuracy of ``model`` for each people count of ``cfg.data.eval_people``, one
    :func:`evaluate_greedy` per count (template, max_new_tokens and batch_size from ``cfg``).

    Columns: people, n (puzzles), greedy_accuracy, format_ok (the evaluation's format_rate: the fraction of
    completions with valid think/answer tags), mean_length (completion tokens). Raises ValueError for a people
    count that no record has.
    """
    rows = []
    for people, subset in _people_subsets(records, cfg.data.eval_people):
        ev = evaluate_greedy(model, tokenizer, subset, template=cfg.data.template,
                             max_new_tokens=cfg.eval.max_new_tokens, batch_size=cfg.eval.batch_size)
        rows.append({"people": people, "n": ev["n"], "greedy_accuracy": ev["accuracy"],
                     "format_ok": ev["format_rate"], "mean_length": ev["mean_length"]})
    return pd.DataFrame(rows, columns=["people", "n", "greedy_accuracy", "format_ok", "mean_length"])


def sampled_success_by_people(model, tokenizer, records: Sequence[dict], cfg: ExperimentConfig, *, prompts: int,
                              samples: int, temperature: float = 1.0) -> pd.DataFrame:
    """Per-puzzle success rates under sampling, for each people count of ``cfg.data.eval_people``: the first
    ``prompts`` puzzles of that count, ``samples`` samples each at ``temperature`` (one :func:`evaluate_sampled`
    per count, seed 0 and its default batch size; template and max_new_tokens from ``cfg``).

    Long table, one row per puzzle: people, success_rate (correct samples / ``samples``). A puzzle whose rate is
    0 or 1 gives a group of zero reward variance, which group-based RL cannot learn from. Raises ValueError for a
    people count that no record has.
    """
    rows = []
    for people, subset in _people_subsets(records, cfg.data.eval_people):
        ev = evaluate_sampled(model, tokenizer, subset[:prompts], n=samples, temperature=temperature,
                              template=cfg.data.template, max_new_tokens=cfg.eval.max_new_tokens)
        rows += [{"people": people, "success_rate": rate} for rate in ev["per_prompt"]]
    return pd.DataFrame(rows, columns=["people", "success_rate"])
