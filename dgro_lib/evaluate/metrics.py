"""Evaluation statistics: paired McNemar tests of base vs trained accuracy, the per-run summary tables, the
unbiased pass@k / avg@k tables of DGRO Tables 2-3 and DCPO Tables 2-3, and their results files (each table written
with the protocol that measured it, see :mod:`.protocol`)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd

from dgro_lib.util.files import atomic_path
from dgro_lib.report.inference import mcnemar_z  # the one definition (torch-free)

__all__ = ["mcnemar", "paired_improvement_table"]


def mcnemar(before: Sequence[bool], after: Sequence[bool]) -> dict[str, float]:
    """Paired comparison of two per-puzzle correctness vectors on the same puzzles.

    ``fixed`` = wrong before, right after; ``broken`` = right before, wrong after. ``z`` is the McNemar
    statistic (fixed - broken) / sqrt(fixed + broken) (normal approximation, no continuity correction) and
    ``p`` its two-sided p-value. Returns z = 0 when there are no discordant pairs.
    """
    if len(before) != len(after):
        raise ValueError(f"before/after must be paired: lengths {len(before)} and {len(after)} differ")
    for name, v in (("before", before), ("after", after)):
        odd = [x for x in v if x not in (0, 1)]  # True/False compare equal to 1/0
        if odd:  # a per-puzzle fraction of samples (avg@k) is truthy when partly right: McNemar would miscount it
            raise ValueError(f"mcnemar: {name} holds {odd[0]!r}, not a 0/1 correctness; for per-puzzle fractions of "
                             "correct samples use paired_fraction_table")
    fixed = sum(1 for b, a in zip(before, after) if not b and a)
    broken = sum(1 for b, a in zip(before, after) if b and not a)
    z, p = mcnemar_z(fixed, broken)
    return {"fixed": fixed, "broken": broken, "z": z, "p": p,
            "acc_before": sum(map(bool, before)) / max(len(before), 1),
            "acc_after": sum(map(bool, after)) / max(len(after), 1)}


def paired_improvement_table(finals: pd.DataFrame, base_correct: Sequence[bool], *, by: str) -> pd.DataFrame:
    """One row per run (base vs final accuracy, McNemar z) plus one pooled row per ``by`` value.

    ``finals`` is :attr:`ExperimentResult.finals` (a ``correct`` list per run). The pooled row sums the
    discordant counts over seeds (each seed is an independent training run evaluated on the same puzzles).
    """
    rows: list[dict[str, Any]] = []
    for _, r in finals.iterrows():
        m = mcnemar(base_correct, r["correct"])
        rows.append({by: r[by], "seed": r["seed"], **m, "delta_points": 100 * (m["acc_after"] - m["acc_before"])})
    table = pd.DataFrame(rows)
    pooled = []
    for key, g in table.groupby(by, sort=False):
        fixed, broken = int(g["fixed"].sum()), int(g["broken"].sum())
        z, p = mcnemar_z(fixed, broken)
        pooled.append({by: key, "seed": "pooled", "fixed": fixed, "broken": broken, "z": z,
                       "p": p, "acc_before": g["acc_before"].mean(),
                       "acc_after": g["acc_after"].mean(), "delta_points": g["delta_points"].mean()})
    return pd.concat([table, pd.DataFrame(pooled)], ignore_index=True)


def paired_fraction_table(finals: pd.DataFrame, base_fraction: Sequence[float], *, by: str) -> pd.DataFrame:
    """The sampled-accuracy counterpart of :func:`paired_improvement_table`: ``correct`` holds per puzzle the
    fraction of correct samples (avg@k), and the test is the paired z of the per-puzzle differences after - before.

    One row per run plus one pooled row per ``by`` value, whose z is computed on the per-puzzle difference averaged
    over seeds (the seeds share the puzzles and the base, so their differences are not independent draws: averaging
    first is the conservative pooling).
    """
    base = np.asarray(base_fraction, dtype=float)

    def z_of(d: np.ndarray) -> float:
        sd = d.std(ddof=1) if len(d) > 1 else 0.0
        return float(d.mean() / (sd / math.sqrt(len(d)))) if sd > 0 else 0.0

    rows, diffs = [], {}
    for _, r in finals.iterrows():
        after = np.asarray(r["correct"], dtype=float)
        if after.shape != base.shape:
            raise ValueError(f"run {r.get('run', '?')}: {after.size} puzzles, the base has {base.size}")
        d = after - base
        diffs.setdefault(r[by], []).append(d)
        z = z_of(d)
        rows.append({by: r[by], "seed": r["seed"], "acc_before": base.mean(), "acc_after": after.mean(),
                     "delta_points": 100 * d.mean(), "z": z, "p": math.erfc(abs(z) / math.sqrt(2.0))})
    for key, ds in diffs.items():
        d = np.mean(ds, axis=0)
        z = z_of(d)
        rows.append({by: key, "seed": "pooled", "acc_before": base.mean(), "acc_after": base.mean() + d.mean(),
                     "delta_points": 100 * d.mean(), "z": z, "p": math.erfc(abs(z) / math.sqrt(2.0))})
    return pd.DataFrame(rows)


__all__ += ["paired_fraction_table"]


# ---------------------------------------------------------------------------------------------
# pass@k, avg@k and the papers' result tables
# ---------------------------------------------------------------------------------------------

__all__ += ["pass_at_k", "avg_at_k", "per_problem_counts", "pass_at_k_table", "write_results", "read_results"]


def _count(value: Any, name: str) -> int:
    if isinstance(value, bool) or not hasattr(value, "__index__"):  # int or a numpy integer, not bool/float
        raise TypeError(f"{name} must be an int, got {type(value).__name__}: {value!r}")
    v = int(value.__index__())
    if v < 0:
        raise ValueError(f"{name} must be >= 0, got {v}")
    return v


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k of one problem from ``n`` samples of which ``c`` are correct (Chen et al. 2021, Eq. 1).

    ``pass@k = 1 - C(n-c, k) / C(n, k)``: the probability that a uniformly drawn k-subset of the
    n samples holds at least one correct one. Computed in the numerically stable product form
    ``1 - prod_{i=n-c+1}^{n} (1 - k/i)`` (exactly 1.0 when ``n - c < k``). ``pass_at_k(n, c, 1)
    = c/n``. This is the unbiased estimator, not the bootstrapped best-of-k of some RL
    frameworks (see verl PR #7240).

    Raises:
      TypeError: an argument that is not an int (the message names it).
      ValueError: a negative argument, ``k < 1``, ``n < 1``, ``c > n`` or ``k > n`` (the message names
        the arguments and their values).
    """
    n, c, k = _count(n, "n"), _count(c, "c"), _count(k, "k")
    if n < 1:
        raise ValueError(f"n (samples per problem) must be >= 1, got {n}")
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    if c > n:
        raise ValueError(f"c (correct samples) = {c} exceeds n (samples) = {n}")
    if k > n:
        raise ValueError(f"k = {k} exceeds n = {n}: pass@k needs at least k samples per problem")
    if n - c < k:
        return 1.0
    return 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1))


def avg_at_k(correct_matrix: Any) -> float:
    """avg@k: mean correctness over ``problems x k`` samples (DCPO Appendix B.2: "Avg@32").

    Args:
      correct_matrix: shape ``(problems, k)``, bool or 0/1 (nested lists or an array); every
        problem must have the same number k >= 1 of samples.

    Returns the mean over problems of each problem's fraction correct (= the mean of all entries,
    and = the mean of ``pass_at_k(k, c_i, 1)``).

    Raises ValueError for an empty matrix, ragged rows (names the row and lengths) or entries other
    than bool/0/1 (names the position).
    """
    rows = [list(r) for r in correct_matrix]
    if not rows:
        raise ValueError("correct_matrix is empty: need at least one problem")
    k = len(rows[0])
    if k == 0:
        raise ValueError("correct_matrix row 0 is empty: need at least one sample per problem")
    total = 0
    for i, r in enumerate(rows):
        if len(r) != k:
            raise ValueError(f"correct_matrix is ragged: row {i} has {len(r)} samples, row 0 has {k}")
        for j, x in enumerate(r):
            total += _as_correct(x, f"correct_matrix[{i}][{j}]")
    return total / (len(rows) * k)


def _as_correct(x: Any, where: str) -> int:
    if hasattr(x, "item") and not isinstance(x, (bool, int, float)):
        x = x.item()
    if isinstance(x, bool):
        return int(x)
    if isinstance(x, (int, float)) and x in (0, 1):
        return int(x)
    raise ValueError(f"{where} must be a bool or 0/1, got {x!r}")


def _py(x: Any) -> Any:
    """A numpy scalar as the Python scalar (for readable error messages)."""
    return x.item() if hasattr(x, "item") and not isinstance(x, (str, bytes)) else x


def per_problem_counts(df: pd.DataFrame, *, by: str = "benchmark", method: str = "method",
                       problem: str = "problem_id", correct: str = "correct",
                       sample: str | None = "sample_idx") -> pd.DataFrame:
    """Collapse long-form per-sample correctness into ``n`` (samples) and ``c`` (correct) per problem.

    ``df`` has one row per sample with columns ``method``, ``by`` (benchmark, or the K&K people
    count), ``problem`` and ``correct`` (bool or 0/1), and optionally ``sample`` (then a repeated
    ``(method, by, problem, sample)`` is an error rather than a double count). Returns columns
    ``[method, by, problem, n, c]``, groups in order of first appearance.

    Raises ValueError naming a missing column, a bad ``correct`` value (with its row label), or a
    duplicated sample.
    """
    if not isinstance(df, pd.DataFrame):
        raise TypeError(f"df must be a pandas DataFrame, got {type(df).__name__}")
    needed = [method, by, problem, correct]
    missing = [col for col in needed if col not in df.columns]
    if missing:
        raise ValueError(f"df is missing column(s) {missing} (has {list(df.columns)})")
    if df.empty:
        raise ValueError("df has no rows")
    flags = [_as_correct(x, f"df[{correct!r}] at row {idx!r}") for idx, x in df[correct].items()]
    if sample is not None and sample in df.columns:
        dup = df.duplicated(subset=[method, by, problem, sample], keep=False)
        if dup.any():
            first = df[dup].iloc[0]
            raise ValueError(f"duplicated sample: {method}={_py(first[method])!r}, {by}={_py(first[by])!r}, "
                             f"{problem}={_py(first[problem])!r}, {sample}={_py(first[sample])!r} occurs "
                             f"{int(dup.sum())} times")
    work = df[[method, by, problem]].copy()
    work["_correct"] = flags
    g = work.groupby([method, by, problem], sort=False)["_correct"]
    return pd.DataFrame({"n": g.size(), "c": g.sum()}).reset_index()


def pass_at_k_table(df: pd.DataFrame, ks: int | Sequence[int] = 1, *, by: str = "benchmark",
                    metric: str = "pass", columns: Sequence[Any] | None = None, methods: Sequence[Any] | None = None,
                    method: str = "method", problem: str = "problem_id", correct: str = "correct",
                    sample: str | None = "sample_idx", avg_label: str = "Avg.") -> pd.DataFrame:
    """A results table in the layout of DGRO Tables 2-3 and DCPO Tables 2-3.

    Rows are methods, columns the values of ``by`` (K&K people counts 2..8 for DGRO Table 2; math
    benchmarks for DGRO Table 3 and DCPO Tables 2-3), plus ``avg_label``: the unweighted mean of
    the row's columns, as the papers average benchmarks (NaN when a column is missing for that
    method, printed "-" in the papers). Each cell is the mean over problems of

    * ``metric="pass"``: the unbiased :func:`pass_at_k` from that problem's n samples and c correct
      (pass@1 with n = 1 greedy sample is plain greedy accuracy; with n samples it is c/n averaged);
    * ``metric="avg"``: avg@k, the fraction correct of exactly k samples per problem
      (:func:`avg_at_k`; DCPO's Avg@32). A problem with a number of samples other than k raises.

    Args:
      df: long form, one row per sample (see :func:`per_problem_counts` for the columns).
      ks: one k gives flat columns; a sequence gives two column levels ``(f"{metric}@{k}", column)``.
      columns: the column order (e.g. ``[3, 4, 5, 6, 7, 2, 8]`` for DGRO Table 2); values of ``by``
        not listed are dropped. Default: order of appearance. A cell whose method has no samples
        for that column is NaN.
      methods: the row order (default: order of appearance); unlisted methods are dropped.

    Raises ValueError for an unknown metric, an empty ``ks``, a listed column or method that does
    not occur in ``df`` at all, and (naming the method, column and problem) a problem with fewer
    than k samples, or for avg@k a problem without exactly k.
    """
    if metric not in ("pass", "avg"):
        raise ValueError(f"metric must be 'pass' or 'avg', got {metric!r}")
    single = isinstance(ks, int) and not isinstance(ks, bool)
    k_list = [ks] if single else list(ks)
    if not k_list:
        raise ValueError("ks is empty")
    for k in k_list:
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"every k must be an int >= 1, got {k!r}")
    counts = per_problem_counts(df, by=by, method=method, problem=problem, correct=correct, sample=sample)
    present_cols, present_rows = list(dict.fromkeys(counts[by])), list(dict.fromkeys(counts[method]))
    col_order = present_cols if columns is None else list(columns)
    row_order = present_rows if methods is None else list(methods)
    for label, wanted, present in ((by, col_order, present_cols), (method, row_order, present_rows)):
        absent = [x for x in wanted if x not in present]
        if absent:  # most likely a typo or a str/int mismatch, not a result to print as NaN
            raise ValueError(f"{absent} not found in df[{label!r}] (values: {[_py(x) for x in present][:20]})")

    blocks = []
    for k in k_list:
        scores: dict[tuple[Any, Any], float] = {}
        for (m, b), g in counts.groupby([method, by], sort=False):
            vals = []
            for p, n, c in zip(g[problem], g["n"], g["c"]):
                where = f"{method}={_py(m)!r}, {by}={_py(b)!r}, {problem}={_py(p)!r}"
                if metric == "avg":
                    if n != k:
                        raise ValueError(f"avg@{k} needs exactly {k} samples per problem; {where} has {n}")
                    vals.append(c / n)
                else:
                    if k > n:
                        raise ValueError(f"pass@{k} needs at least {k} samples per problem; {where} has {n}")
                    vals.append(pass_at_k(int(n), int(c), k))
            scores[(m, b)] = sum(vals) / len(vals)
        table = pd.DataFrame(
            [[scores.get((m, b), float("nan")) for b in col_order] for m in row_order],
            index=pd.Index(row_order, name=method), columns=pd.Index(col_order, name=by), dtype=float)
        table[avg_label] = table[col_order].mean(axis=1, skipna=False) if col_order else float("nan")
        blocks.append(table)
    if single:
        return blocks[0]
    return pd.concat(blocks, axis=1, keys=[f"{metric}@{k}" for k in k_list], names=["metric", by])


def _json_cell(x: Any) -> Any:
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if hasattr(x, "item"):
        return _json_cell(x.item())
    return x


def _label(x: Any) -> Any:
    return list(x) if isinstance(x, tuple) else _json_cell(x)


def write_results(table: pd.DataFrame, protocol: dict[str, Any], path: str | Path) -> tuple[Path, Path]:
    """Write ``table`` with its ``protocol`` side by side as ``<path>.csv`` and ``<path>.json``.

    ``path`` is a stem (a ``.csv`` or ``.json`` suffix is dropped). The CSV opens with one
    ``# protocol: <json>`` line, then the table (spreadsheet-friendly; pandas reads it back with
    ``pd.read_csv(path, skiprows=1, index_col=0)`` for flat columns). The JSON holds
    ``{"protocol": ..., "table": {"index", "index_name", "columns", "column_names", "data"}}``,
    with NaN written as null; :func:`read_results` restores the table exactly from it. Returns
    ``(csv_path, json_path)``.
    """
    if not isinstance(table, pd.DataFrame):
        raise TypeError(f"table must be a pandas DataFrame, got {type(table).__name__}")
    if not isinstance(protocol, dict):
        raise TypeError(f"protocol must be a dict (see eval_protocol), got {type(protocol).__name__}")
    stem = Path(path)
    if stem.suffix in (".csv", ".json"):
        stem = stem.with_suffix("")
    stem.parent.mkdir(parents=True, exist_ok=True)
    csv_path, json_path = stem.with_name(stem.name + ".csv"), stem.with_name(stem.name + ".json")
    payload = {
        "protocol": protocol,
        "table": {
            "index": [_label(i) for i in table.index],
            "index_name": table.index.name,
            "columns": [_label(c) for c in table.columns],
            "column_names": [_json_cell(n) for n in table.columns.names],
            "data": [[_json_cell(x) for x in row] for row in table.itertuples(index=False, name=None)],
        },
    }
    text = json.dumps(payload, indent=1, allow_nan=False)  # raises early for a non-JSON protocol
    header = "# protocol: " + json.dumps(protocol, allow_nan=False) + "\n"
    with atomic_path(csv_path) as tmp, tmp.open("w", encoding="utf-8", newline="") as fh:
        fh.write(header)
        table.to_csv(fh)
    with atomic_path(json_path) as tmp:
        tmp.write_text(text + "\n", encoding="utf-8")
    return csv_path, json_path


def read_results(path: str | Path) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Read back ``(table, protocol)`` written by :func:`write_results` (from the JSON file of the stem)."""
    stem = Path(path)
    if stem.suffix in (".csv", ".json"):
        stem = stem.with_suffix("")
    json_path = stem.with_name(stem.name + ".json")
    payload = json.loads(json_path.read_text(encoding="utf-8"))
    t = payload["table"]
    cols = t["columns"]
    if cols and isinstance(cols[0], list):
        columns = pd.MultiIndex.from_tuples([tuple(c) for c in cols], names=t["column_names"])
    else:
        columns = pd.Index(cols, name=t["column_names"][0] if t["column_names"] else None)
    data = [[float("nan") if x is None else x for x in row] for row in t["data"]]
    table = pd.DataFrame(data, index=pd.Index(t["index"], name=t["index_name"]), columns=columns)
    return table, payload["protocol"]
