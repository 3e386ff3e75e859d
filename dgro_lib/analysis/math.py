"""The math experiments' tables and verdicts: DGRO Table 3 (pass@1 per benchmark against the base model) and Fig. 4
(whether the entropy rises during math training), as the notebooks ``dgro_table3_math`` and
``dgro_fig4_math_entropy`` compute them. At the miniature's scale a "benchmark" is one generated problem kind.
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from dgro_lib.analysis.probes import method_labels
from dgro_lib.evaluate import paired_improvement_table
from dgro_lib.util.files import write_json

__all__ = ["DGRO_TABLE3_PAPER", "math_benchmark_table", "math_benchmark_wide",
           "entropy_trend", "run_labels", "CARRY_TOKENS", "has_carry_tokens", "carry_probabilities",
           "carry_table", "carry_summary_path", "run_carry_table"]

# DGRO paper, Table 3 (pass@1 on the math benchmarks): quoted, not measured here.
DGRO_TABLE3_PAPER = pd.DataFrame(
    [["O1-Preview", 0.40, 0.81, None, None, None, None],
     ["GPT-4o-2024-08-06", None, 0.81, None, 0.37, 0.43, None],
     ["Deepseek-R1", 0.80, 0.97, None, None, None, None],
     ["Qwen2.5-Math-7B-Instruct", 0.13, 0.50, 0.51, 0.35, 0.41, 0.44],
     ["rStar-Math-7B", 0.27, 0.78, 0.48, None, 0.47, None],
     ["Eurus-2-7B-PRIME", 0.28, 0.58, 0.39, None, 0.42, 0.42],
     ["Qwen2.5-7B-SimpleRL", 0.30, 0.63, 0.40, 0.43, 0.43, 0.51],
     ["DeepScaleR-1.5B-Preview", 0.43, 0.88, 0.74, 0.30, 0.50, 0.57],
     ["DeepSeek-R1-Distill-Qwen-1.5B", 0.29, 0.83, 0.27, None, 0.43, 0.49],
     ["DeepSeek-R1-Distill-Qwen-7B (32k)", 0.56, 0.93, None, None, None, None],
     ["DeepSeek-R1-Distill-Qwen-7B (8k)", 0.40, 0.86, 0.69, 0.35, 0.49, 0.558],
     ["+DGRO, Distill-Qwen-7B (8k) on Deepscaler", 0.43, 0.91, 0.81, 0.39, 0.53, 0.614],
     ["+DGRO, Distill-Qwen-7B (8k) on Orz", 0.50, 0.92, 0.81, 0.35, 0.56, 0.628]],
    columns=["model", "AIME 2024", "MATH 500", "AMC 2023", "Minerva Math", "Olympiad Bench", "Avg."])


def _benchmark_name(source: str) -> str:
    return source.split("/", 1)[1] if source.startswith("synthetic/") else source


def math_benchmark_table(finals: pd.DataFrame, base: dict, sources: Sequence[str]
                         ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """DGRO Table 3 from one held-out evaluation: pass@1 per benchmark (the ``source`` of each held-out problem;
    a generated kind at the miniature's scale), for the base model and each labelled point of ``finals`` (a
    ``point`` column, a ``correct`` list per run in the order of ``sources``), plus ``all`` (every problem).

    Returns (long, tests). ``long``: one row per (model, benchmark): n problems, seeds, pass@1 mean and s.d. over
    seeds. ``tests``: each point against the base per benchmark, McNemar pooled over seeds
    (:func:`~dgro_lib.evaluate.paired_improvement_table`).
    """
    if len(base["correct"]) != len(sources):
        raise ValueError(f"sources: {len(sources)} entries, but the base model was evaluated on "
                         f"{len(base['correct'])} problems")
    groups = {_benchmark_name(s): [i for i, x in enumerate(sources) if x == s] for s in dict.fromkeys(sources)}
    groups["all"] = list(range(len(sources)))
    long, tests = [], []
    for bench, idx in groups.items():
        sub = finals.assign(correct=[[c[i] for i in idx] for c in finals["correct"]])
        base_c = [base["correct"][i] for i in idx]
        long.append({"model": "base model", "benchmark": bench, "n": len(idx), "seeds": 1,
                     "pass@1": float(np.mean(base_c)), "std": 0.0})
        for label, g in sub.groupby("point", sort=False):
            acc = [float(np.mean(c)) for c in g["correct"]]
            long.append({"model": label, "benchmark": bench, "n": len(idx), "seeds": len(acc),
                         "pass@1": float(np.mean(acc)), "std": float(np.std(acc, ddof=1)) if len(acc) > 1 else 0.0})
        t = paired_improvement_table(sub, base_c, by="point")
        tests.append(t[t["seed"] == "pooled"].drop(columns="seed").assign(benchmark=bench))
    tests = pd.concat(tests, ignore_index=True).rename(columns={"point": "model"})
    return pd.DataFrame(long), tests[["model", "benchmark", "acc_before", "acc_after", "delta_points", "fixed",
                                      "broken", "z", "p"]]


def math_benchmark_wide(long: pd.DataFrame, *, value: str = "pass@1") -> pd.DataFrame:
    """``long`` of :func:`math_benchmark_table` in Table 3's layout: one row per model, one column per benchmark
    (``mean`` ± s.d. over seeds where there are several), ``Avg.`` (the mean over the benchmark columns, as the
    paper's) and ``all`` (``value`` over every problem). ``value``: the long table's metric column (``pass@1``;
    ``avg@8``, ``pass@8`` for :func:`dgro_lib.analysis.dcpo.per_benchmark`)."""
    benches = [b for b in dict.fromkeys(long["benchmark"]) if b != "all"]
    cell = long.assign(cell=[f"{m:.3f}" + (f" ± {s:.3f}" if k > 1 else "") for m, s, k in
                             zip(long[value], long["std"], long["seeds"])])
    wide = cell.pivot(index="model", columns="benchmark", values="cell").reindex(
        index=list(dict.fromkeys(long["model"])), columns=[*benches, "all"])
    means = long.pivot(index="model", columns="benchmark", values=value)
    wide.insert(len(benches), "Avg.", means[benches].mean(axis=1).map("{:.3f}".format))
    return wide.reset_index().assign(source="measured here")


def entropy_trend(metrics: pd.DataFrame, *, by: str = "point", column: str = "entropy", fraction: float = 0.2
                  ) -> pd.DataFrame:
    """Whether ``column`` rises over training, per run: its mean over the last ``fraction`` of the logged steps
    minus its mean over the first ``fraction`` (``change``), and ``relative`` = change / first. One row per run
    (``by``, seed, run, first, last, change, relative). Rows without the column (an optimizer step that logs no
    rollout) are skipped."""
    rows = []
    for (point, seed, run), g in metrics.groupby([by, "seed", "run"], sort=False):
        v = g.sort_values("step")[["step", column]].dropna()
        k = max(1, int(round(len(v) * fraction)))
        first, last = float(v[column].iloc[:k].mean()), float(v[column].iloc[-k:].mean())
        rows.append({by: point, "seed": seed, "run": run, "first": first, "last": last, "change": last - first,
                     "relative": (last - first) / first if first else math.nan})
    return pd.DataFrame(rows)


def run_labels(df: pd.DataFrame, *, loss: dict, keys: Sequence[str], scheme: str | None = None) -> pd.Series:
    """One label per row: the method (:func:`dgro_lib.analysis.probes.method_labels`, e.g. ``DGRO [-3,3]``; ``loss``
    and ``scheme`` are the config's, for a sweep that varies neither), followed by the values of the other swept keys
    (``DGRO [-3,3] on deepscaler`` for a sweep over ``data.math_train``), so that points differing only in their data
    are not pooled into one row."""
    from dgro_lib.config import point_keys

    labels = method_labels(df, loss=loss, scheme=scheme)
    other = [k for k in point_keys(*keys) if k not in ("loss", "reward.scheme")]
    if not other:
        return labels
    return labels + df.apply(lambda r: " on " + ", ".join(str(r[k]) for k in other), axis=1)


CARRY_TOKENS = (" +", " =")
"""The math miniature's tokens after a carry decision: the carry written (`` +``) or left out (`` =``)."""


def has_carry_tokens(tokenizer) -> bool:
    """Whether ``tokenizer`` has :data:`CARRY_TOKENS` as tokens of their own, as the math miniature's digit-level
    tokenizer (:func:`~dgro_lib.models.build_math_tokenizer`) has; a BPE tokenizer (Qwen's) spells them otherwise
    (``Ġ+``) or splits them, so no single next-token probability is the carry decision."""
    vocab = tokenizer.get_vocab()
    return all(t in vocab for t in CARRY_TOKENS)


def carry_probabilities(model, tokenizer, records: Sequence[dict], *, template: str = "plain",
                        batch_size: int = 64) -> pd.DataFrame:
    """How a model decides each carry of the slip-free worked traces (:func:`~dgro_lib.data.math.worked.
    carry_decisions`): teacher-forced on the prompt and the trace up to the decision, the probability of the next
    token being `` +`` (the carry written, as the slip-free trace goes on) and `` =`` (the carry left out, as a
    carry slip goes on). A base warmed up with carry slips at rate p has ``p_leave_out`` near p; an outcome reward
    should lower it.

    One row per decision: ``problem``, ``source``, ``decision`` (0, 1, ... within the problem), ``p_write``,
    ``p_leave_out``. Problems without carries (and ``linear`` ones) give no rows."""
    import torch

    from dgro_lib.data.math import format_prompt
    from dgro_lib.data.math.worked import carry_decisions

    plus, equals = (tokenizer.convert_tokens_to_ids(t) for t in CARRY_TOKENS)
    if not has_carry_tokens(tokenizer):
        raise ValueError("the tokenizer has no ' +' / ' =' tokens: carry_probabilities reads the math miniature's "
                         "digit-level tokenizer (build_math_tokenizer)")
    rows, texts = [], []
    for rec in records:
        for i, prefix in enumerate(carry_decisions(rec["problem"])):
            rows.append({"problem": rec["problem"], "source": rec.get("source", ""), "decision": i})
            texts.append(format_prompt(rec, template=template) + " " + prefix)
    probs = []
    model.eval()
    with torch.no_grad():
        for start in range(0, len(texts), batch_size):
            # right padding, so that positions are those of an unpadded pass; the last real position of each row
            # predicts the decision token
            enc = tokenizer(texts[start:start + batch_size], add_special_tokens=False, padding=True,
                            padding_side="right", return_tensors="pt")
            logits = model(**enc).logits
            last = logits[torch.arange(len(logits)), enc["attention_mask"].sum(1) - 1].float().softmax(-1)
            probs.append(last[:, [plus, equals]])
    df = pd.DataFrame(rows, columns=["problem", "source", "decision"])
    p = torch.cat(probs).numpy() if probs else np.zeros((0, 2))
    return df.assign(p_write=p[:, 0], p_leave_out=p[:, 1])


def carry_summary_path(run_dir: str | Path, records: Sequence[dict], *, template: str = "plain") -> Path:
    """Where :func:`carry_table` keeps one run's summary: ``<run_dir>/evals/carries-<12 hex>.json``, keyed by the
    problems and the prompt template. It sits with the run's other stored evaluations, so the run archive carries it
    (:mod:`dgro_lib.runs.archive` copies ``evals/*.json``) and a run restored without weights still has its row."""
    payload = {"analysis": "carry_table", "template": template,
               "problems": [[r["problem"], r.get("source", "")] for r in records]}
    key = hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:12]
    return Path(run_dir) / "evals" / f"carries-{key}.json"


def carry_table(models: dict[str, str | None], records: Sequence[dict], *, template: str = "plain",
                stored: Mapping[str, str | Path] | None = None) -> pd.DataFrame:
    """:func:`carry_probabilities` of several models on the same problems, summarised per benchmark and over all:
    ``p_leave_out`` (mean probability of leaving a due carry out), ``greedy_leaves_out`` (the share of decisions
    where leaving it out is the likelier token, i.e. what greedy decoding does) and ``decisions``.

    ``models`` maps a label to a local model folder, or to None where no weights exist (a run restored from the run
    archive keeps its results, not its weights). ``stored`` maps a label to the file its summary is kept in
    (:func:`carry_summary_path`): read from there when it exists, written there when computed, so the summary
    outlives the weights; the table is the same either way. A label with neither weights nor a stored summary gets
    one row with ``summary`` = ``absent`` (``measured`` otherwise).

    The carries are the math miniature's: with a model whose tokenizer lacks its carry tokens (a real checkpoint at
    the ``paper`` profile) the table is skipped, empty, with a printed note, and no weights are loaded."""
    from dgro_lib.models import load_model, load_tokenizer

    stored = {k: Path(v) for k, v in (stored or {}).items()}
    columns = ["model", "benchmark", "summary", "decisions", "p_leave_out", "greedy_leaves_out"]
    for label, path in models.items():
        if path is not None and not has_carry_tokens(load_tokenizer(path)):
            print(f"carry_table: skipped (empty table): the tokenizer of {label!r} ({path}) has no "
                  f"{' / '.join(repr(t) for t in CARRY_TOKENS)} tokens; the carry decisions are the math miniature's "
                  "(its digit-level tokenizer and worked traces), not a real model's", flush=True)
            return pd.DataFrame(columns=columns)
    rows = []
    for label, path in models.items():
        keep = stored.get(label)
        if keep is not None and keep.is_file():
            saved = json.loads(keep.read_text())
            if saved.get("analysis") != "carry_table" or saved.get("problems") != len(records):
                raise ValueError(f"{keep}: not a carry_table summary of these {len(records)} problems "
                                 f"(analysis {saved.get('analysis')!r}, problems {saved.get('problems')!r})")
            rows += [{"model": label, "summary": "measured", **r} for r in saved["rows"]]
            continue
        if path is None:
            rows.append({"model": label, "benchmark": "all", "summary": "absent"})
            continue
        model, tokenizer = load_model(path)
        df = carry_probabilities(model, tokenizer, records, template=template)
        df = pd.concat([df.assign(benchmark=[_benchmark_name(s) for s in df["source"]]), df.assign(benchmark="all")])
        # float(): the probabilities are float32; a Python float stores and reads back the same value
        summary = [{"benchmark": bench, "decisions": len(g), "p_leave_out": float(g["p_leave_out"].mean()),
                    "greedy_leaves_out": float((g["p_leave_out"] > g["p_write"]).mean())}
                   for bench, g in df.groupby("benchmark", sort=False)]
        if keep is not None:
            write_json(keep, {"analysis": "carry_table", "template": template, "problems": len(records),
                              "model": str(path), "rows": summary})
        rows += [{"model": label, "summary": "measured", **r} for r in summary]
    return pd.DataFrame(rows, columns=columns)


def run_carry_table(finals: pd.DataFrame, store: str | Path, base_model: str, records: Sequence[dict], *,
                    template: str = "plain", label: str = "{point} seed {seed}") -> pd.DataFrame:
    """:func:`carry_table` of the base model and of every run in ``finals`` (columns ``key``, and those ``label``
    names), each run read from its last checkpoint in the run store ``store`` and its summary kept with the run
    (:func:`carry_summary_path`): computed once, while the weights exist, and read back after a restore."""
    from dgro_lib.runs.store import latest_checkpoint

    runs = {label.format(**r._asdict()): Path(store) / r.key for r in finals.itertuples(index=False)}
    models = {"base model": base_model, **{k: latest_checkpoint(d / "trainer") for k, d in runs.items()}}
    return carry_table(models, records, template=template,
                       stored={k: carry_summary_path(d, records, template=template) for k, d in runs.items()})
