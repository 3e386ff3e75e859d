"""A notebook's claims: one file, one schema, one rule; and their comparison with the reference results.

Each notebook writes ``claims.csv`` beside its figures, one row per number a reader would quote, in the columns
:data:`COLUMNS`: the claim, its metric and unit, the paper's direction (``higher`` / ``lower`` / ``equal`` /
``none``), the verdict (:mod:`dgro_lib.report.verdict`), the estimate with its 95 % interval, the run-level
standard error and degrees of freedom, the seeds on each side and whether they were read as seed-for-seed pairs
(``paired``; ``p`` is the two-sided test's, or for a claim bounded by a margin the one-sided test's against it),
``source`` (``paper``: a claim the paper makes, the only kind the paper tally counts;
``project``: a check of the project's own, such as a positive control or an optimizer identity), the minimum
detectable effect (80 % power, alpha 0.05), the p-value and its Holm adjustment over the
notebook's directional claims, the run-level t-test's p with items held fixed (Welch's, or the paired one) and the
pooled item-level McNemar z (given these trained models). Rows are built with :func:`claim`
(from an :class:`~dgro_lib.report.inference.Estimate`) or :func:`exact` (a computed constant or an identity).

The repository keeps a reference copy of each notebook's outputs under ``reference/<profile>/<notebook>/``.
:func:`compare_claims` reads a rerun and the reference as two independent estimates: ``identical`` when the
number is bit-equal, ``consistent`` when they differ by under 1.96 x sqrt(se_new^2 + se_ref^2) and the verdicts
agree, ``differs`` otherwise. A claim without a standard error (an exact quantity) is consistent only within
1e-9 relative. ``make reproduce`` exits non-zero when any claim of any notebook differs.
"""

from __future__ import annotations

import math
import shutil
from pathlib import Path
from typing import Callable, Iterable, Sequence

import numpy as np
import pandas as pd

from dgro_lib.util.files import atomic_write
from dgro_lib.util.paths import REPO
from dgro_lib.report.inference import ALPHA, Estimate
from dgro_lib.report.verdict import BOUNDED, DIRECTIONS, claim_p, exact_verdict, judge_family

__all__ = ["REFERENCE", "COLUMNS", "SOURCES", "claim", "exact", "is_paired", "write_claims", "judge_claims", "read_claims",
           "format_claims", "claims_display", "claim_cells", "DISPLAY", "runs_of", "compare_claims", "compare_tables", "format_comparison",
           "reproduction_status", "save_reference", "split_half"]

REFERENCE = REPO / "reference"
# What a reference copy keeps: small files only (no checkpoints, no model weights, no run store).
_REFERENCE_SUFFIXES = (".csv", ".png", ".json", ".ipynb")

COLUMNS = ["claim", "metric", "unit", "direction", "source", "verdict", "value", "ci_low", "ci_high", "se", "df", "seeds_a",
           "seeds_b", "paired", "n_items", "mde", "p", "p_holm", "welch_p", "mcnemar_z", "se_runs", "se_items",
           "margin", "note"]
_EST_FIELDS = ("ci_low", "ci_high", "se", "df", "seeds_a", "seeds_b", "paired", "n_items", "mde", "p", "welch_p",
               "mcnemar_z", "se_runs", "se_items")
# Where a claim comes from: the paper's text (counted in the paper tally) or the project's own checks.
SOURCES = ("paper", "project")
# Two reruns' numbers that are not statistical (an exact constant) may differ by float rounding only.
EXACT_RTOL = 1e-9


def claim(name: str, est: Estimate, *, metric: str, unit: str = "points", direction: str = "none",
          margin: float | None = None, untestable: bool = False, source: str = "paper", note: str = "") -> dict:
    """One claim row from a run-level estimate. ``direction``: the sign the paper gives the estimate (A - B), or
    ``equal`` / ``at most`` with their ``margin`` (:mod:`dgro_lib.report.verdict`); ``untestable``: floor / ceiling
    (:func:`~dgro_lib.report.verdict.at_floor_or_ceiling`); ``source``: ``paper`` or ``project`` (see
    :data:`SOURCES`). The verdict is set by :func:`write_claims`, which judges the notebook's claims of each source
    as one Holm family."""
    if direction not in DIRECTIONS:
        raise ValueError(f"claim {name!r}: direction must be one of {DIRECTIONS}, got {direction!r}")
    if source not in SOURCES:
        raise ValueError(f"claim {name!r}: source must be one of {SOURCES}, got {source!r}")
    row = {"claim": name, "metric": metric, "unit": unit, "direction": direction, "source": source,
           "value": est.estimate,
           "margin": margin if margin is not None else math.nan, "note": note}
    row.update({f: getattr(est, f) for f in _EST_FIELDS})
    row["_est"], row["_untestable"] = est, untestable
    return row


def exact(name: str, value: float, *, metric: str, unit: str = "", holds: bool | None = None,
          direction: str = "none", source: str = "paper", note: str = "") -> dict:
    """One claim row for an exact quantity (no sampling error: a constant, an identity's residual, a count).
    ``holds``: the outcome of the check on it (True: reproduced, False: contradicted, None: an estimate);
    ``source`` as in :func:`claim`."""
    if source not in SOURCES:
        raise ValueError(f"claim {name!r}: source must be one of {SOURCES}, got {source!r}")
    return {"claim": name, "metric": metric, "unit": unit, "direction": direction, "source": source,
            "value": float(value),
            "verdict": exact_verdict(holds), "note": note or "exact: no sampling error"}


def write_claims(out_dir: str | Path, rows: Sequence[dict], *, alpha: float = ALPHA) -> pd.DataFrame:
    """Judge the rows (:func:`judge_claims`) and write ``out_dir/claims.csv`` in :data:`COLUMNS`; returns the
    table."""
    table = judge_claims(rows, alpha=alpha)
    atomic_write(Path(out_dir) / "claims.csv", lambda tmp: table.to_csv(tmp, index=False))
    return table


def judge_claims(rows: Sequence[dict], *, alpha: float = ALPHA) -> pd.DataFrame:
    """Judge the rows of :func:`claim`: the paper's claims as one Holm family, the project's checks as another
    (so adding a check of the project's never weakens the test of a claim the paper makes); keep the verdicts of
    :func:`exact` rows. Returns the claims table in :data:`COLUMNS`."""
    rows = [dict(r) for r in rows]
    names = [r["claim"] for r in rows]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ValueError(f"claims: duplicated names {dup}")
    for source in SOURCES:
        judged = [i for i, r in enumerate(rows) if "_est" in r and r.get("source", "paper") == source]
        verdicts, adjusted = judge_family(
            [rows[i]["_est"] for i in judged], [rows[i]["direction"] for i in judged],
            margins=[None if math.isnan(rows[i]["margin"]) else rows[i]["margin"] for i in judged],
            untestable=[rows[i]["_untestable"] for i in judged], alpha=alpha)
        family = sum(1 for p in adjusted if math.isfinite(p))
        for i, v, p in zip(judged, verdicts, adjusted):
            rows[i].update(verdict=v, p_holm=p)
            if rows[i]["direction"] in BOUNDED and not rows[i]["_untestable"]:  # the p of the one-sided test(s)
                rows[i]["p"] = claim_p(rows[i]["_est"], rows[i]["direction"], rows[i]["margin"])
            if math.isfinite(p) and family > 1:
                rows[i]["note"] = "; ".join(x for x in (rows[i]["note"], f"Holm over {family} {source} claims") if x)
    for r in rows:
        r.pop("_est", None), r.pop("_untestable", None)
    return pd.DataFrame(rows).reindex(columns=COLUMNS)


def read_claims(path: str | Path) -> pd.DataFrame:
    """A claims file (a folder holding ``claims.csv``, or the file), in :data:`COLUMNS`. A file of the earlier
    schema (``claim, value, spread``: an item-level spread) reads with no standard error and no verdict."""
    path = Path(path)
    path = path / "claims.csv" if path.is_dir() else path
    table = pd.read_csv(path)
    if "claim" not in table or "value" not in table:
        raise ValueError(f"{path}: not a claims file (needs the columns 'claim' and 'value')")
    table = table.reindex(columns=COLUMNS)
    table["source"] = table["source"].astype(object).fillna("paper")  # a file written before the column: all the paper's
    return table


def format_claims(table: pd.DataFrame, *, verdicts_only: bool = False) -> str:
    """The printed form of a claims table: one line per claim, ``[VERDICT] claim: estimate [CI], seeds, MDE, p
    (Holm); the pooled McNemar z given these trained models``. ``verdicts_only``: leave out the estimates."""
    lines = []
    for r in table.itertuples():
        if verdicts_only and r.verdict == "estimate":
            continue
        if not math.isfinite(float(r.se)) and str(r.note).startswith("exact"):
            lines.append(f"[{str(r.verdict).upper()}] {r.claim}: {r.value:.6g} ({r.note})")
            continue
        seeds = (f"{r.seeds_a:.0f} paired seeds" if is_paired(r.paired) else
                 f"{r.seeds_a:.0f}" + (f" vs {r.seeds_b:.0f}" if r.seeds_b > 0 else "") + " seeds")
        ci = f"[{r.ci_low:+.2f}, {r.ci_high:+.2f}]" if math.isfinite(float(r.ci_low)) else "[no interval: 1 seed]"
        tail = f", p {r.p:.3g}" + (f" (Holm {r.p_holm:.3g})" if math.isfinite(float(r.p_holm)) else "")
        mcn = f"; pooled McNemar z {r.mcnemar_z:+.2f} given these models" if math.isfinite(float(r.mcnemar_z)) else ""
        lines.append(f"[{str(r.verdict).upper()}] {r.claim}: {r.value:+.3f} {ci}, {seeds}, MDE {r.mde:.2f}"
                     f"{tail}{mcn}")
    return "\n".join(lines)


def is_paired(value) -> bool:
    """A claims file's ``paired`` cell as a bool (a file of the earlier schema has none: not paired)."""
    return str(value).strip().lower() in ("true", "1", "1.0")


# A level of accuracy (a fraction) is shown in percent; every other unit as it is.
_SCALE = {"accuracy": 100.0}
# The columns a reader needs, in the order a notebook and the results site show them.
DISPLAY = ["claim", "paper direction", "estimate [95 % CI]", "seeds", "MDE", "Holm p", "verdict"]


def _fmt(x: float, unit: str) -> str:
    if unit == "accuracy":  # a level: unsigned, in percent
        return f"{_SCALE[unit] * x:.2f}"
    digits = 4 if unit == "nats/token" else 2
    return f"{x:+.{digits}f}"


def claim_cells(r, *, markdown: bool = False) -> list[str]:
    """One claims row (a namedtuple from ``table.itertuples()``) as the :data:`DISPLAY` cells: the claim (a project's
    check marked so), the paper's direction, the estimate [95 % CI] with its unit, seeds, MDE, the Holm-adjusted p and
    the verdict. ``markdown``: pipes escaped and the verdict in bold, for a Markdown table."""
    unit = r.unit if isinstance(r.unit, str) else ""
    shown = "%" if unit == "accuracy" else unit
    if not math.isfinite(float(r.seeds_a)):  # an exact check or constant: no runs, no interval
        effect, seeds, mde, p = f"{r.value:.6g} (exact)", "—", "—", "—"
    else:
        seeds = ("1 model" if str(r.note).startswith("one fixed model") else  # a level of the base: items only
                 f"{r.seeds_a:.0f} paired" if is_paired(r.paired) else  # seed s of A against seed s of B
                 f"{r.seeds_a:.0f}" + (f" vs {r.seeds_b:.0f}" if r.seeds_b > 0 else ""))
        if r.verdict == "not testable at this scale":
            effect, mde, p = f"{_fmt(r.value, unit)} {shown} (both at the floor or ceiling)", "—", "—"
        else:
            effect = (f"{_fmt(r.value, unit)} [{_fmt(r.ci_low, unit)}, {_fmt(r.ci_high, unit)}] {shown}"
                      if math.isfinite(float(r.ci_low)) else f"{_fmt(r.value, unit)} {shown} (1 seed)")
            mde = (f"{_SCALE.get(unit, 1.0) * r.mde:.{4 if unit == 'nats/token' else 1}f}"
                   if math.isfinite(float(r.mde)) and r.verdict != "estimate" else "—")  # an estimate tests nothing
            p = f"{r.p_holm:.2g}" if math.isfinite(float(r.p_holm)) else "—"
    direction = {"higher": "> 0", "lower": "< 0", "equal": f"≈ 0 (±{r.margin:.3g})",
                 "at most": f"≤ {r.margin:.3g}"}.get(r.direction, "")
    if markdown:
        claim = str(r.claim).replace("|", "\\|") + (" *(project check)*" if r.source == "project" else "")
        return [claim, direction, effect, seeds, mde, p, f"**{r.verdict}**"]
    claim = str(r.claim) + (" (project check)" if r.source == "project" else "")
    return [claim, direction, effect, seeds, mde, p, str(r.verdict)]


def claims_display(table: pd.DataFrame) -> pd.DataFrame:
    """A claims table as a reader sees it (:data:`DISPLAY`, one row per claim, estimates included): the judged claims
    first, in the file's order, then the plain estimates; the file keeps every column."""
    judged = table["verdict"] != "estimate"
    ordered = pd.concat([table[judged], table[~judged]])
    return pd.DataFrame([claim_cells(r) for r in ordered.itertuples()], columns=DISPLAY)


def runs_of(frame: pd.DataFrame, by: str, point, *, column: str = "correct", seeds: Iterable[int] | None = None
            ) -> np.ndarray:
    """The per-item scores of one arm, shape (runs, items), one row per seed in seed order: the rows of
    ``frame`` (e.g. :attr:`ExperimentResult.finals`, a ``correct`` list per run) whose ``by`` equals ``point``,
    restricted to ``seeds`` when given. A missing arm or seed is a KeyError naming it."""
    g = frame[frame[by] == point]
    if seeds is not None:
        seeds = list(seeds)
        missing = sorted(set(seeds) - set(g["seed"]))
        if missing:
            raise KeyError(f"{by}={point!r}: no runs for seeds {missing}")
        g = g[g["seed"].isin(seeds)]
    if g.empty:
        raise KeyError(f"{by}={point!r}: no runs (have {sorted(map(str, frame[by].unique()))})")
    g = g.sort_values("seed")
    values = g[column].tolist()
    return np.asarray([np.asarray(v, dtype=float) for v in values]) if np.ndim(values[0]) else np.asarray(values,
                                                                                                        dtype=float)


def compare_claims(out_dir: str | Path, reference_dir: str | Path) -> pd.DataFrame:
    """One row per claim of either side: the new value, the reference value, both standard errors, both
    verdicts, the allowed distance 1.96 x sqrt(se_new^2 + se_ref^2) and ``status``: ``identical`` (the same number
    to the last bit and the same verdict), ``consistent`` (within the allowed distance, or within
    :data:`EXACT_RTOL` for an exact quantity, and the same verdict), ``differs``, ``new only`` (a claim the
    reference lacks) or ``reference only`` (a claim the rerun lost: it counts as differing)."""
    return compare_tables(read_claims(out_dir), read_claims(reference_dir))


def compare_tables(new: pd.DataFrame, ref: pd.DataFrame) -> pd.DataFrame:
    """:func:`compare_claims` on two claims tables (the rerun's, the reference's) already read."""
    new = new.reindex(columns=COLUMNS).set_index("claim")
    ref = ref.reindex(columns=COLUMNS).set_index("claim")
    rows = []
    for name in list(ref.index) + [c for c in new.index if c not in ref.index]:
        if name not in new.index or name not in ref.index:
            side = new if name in new.index else ref
            rows.append({"claim": name, "value": new["value"].get(name, math.nan),
                         "reference": ref["value"].get(name, math.nan), "se": side.loc[name, "se"],
                         "se_reference": math.nan, "allowed": math.nan,
                         "verdict": new["verdict"].get(name, ""), "verdict_reference": ref["verdict"].get(name, ""),
                         "status": "new only" if name in new.index else "reference only"})
            continue
        a, b = new.loc[name], ref.loc[name]
        # a reference of the earlier schema has no verdicts: the numbers alone are compared there
        same_verdict = pd.isna(a["verdict"]) or pd.isna(b["verdict"]) or str(a["verdict"]) == str(b["verdict"])
        se_a, se_b = float(a["se"]), float(b["se"])
        if math.isfinite(se_a) and math.isfinite(se_b):
            allowed = 1.96 * math.hypot(se_a, se_b)
        elif math.isfinite(se_a) or math.isfinite(se_b):  # one side one seed: the other side's error only
            allowed = 1.96 * (se_a if math.isfinite(se_a) else se_b)
        else:
            allowed = EXACT_RTOL * max(1.0, abs(float(b["value"])))
        diff = abs(float(a["value"]) - float(b["value"]))
        status = ("identical" if a["value"] == b["value"] and same_verdict
                  else "consistent" if diff <= allowed and same_verdict else "differs")
        rows.append({"claim": name, "value": a["value"], "reference": b["value"], "se": se_a, "se_reference": se_b,
                     "allowed": allowed, "verdict": a["verdict"], "verdict_reference": b["verdict"],
                     "status": status})
    return pd.DataFrame(rows)


def reproduction_status(table: pd.DataFrame) -> str:
    """One word for a notebook's :func:`compare_claims` table: ``differs`` if any claim differs or was lost,
    ``identical`` if every claim is identical, ``consistent`` otherwise."""
    status = set(table["status"])
    if status & {"differs", "reference only"}:
        return "differs"
    return "identical" if status <= {"identical"} else "consistent"


def format_comparison(table: pd.DataFrame, name: str) -> str:
    """The printed form of :func:`compare_claims`'s table, ending with the notebook's one-word status."""
    lines = [f"[reproduce] {name}: your numbers vs the reference (consistent: within 1.96 x sqrt(se^2 + se_ref^2),"
             f" same verdict)"]
    for r in table.itertuples():
        verdict = (r.verdict if r.verdict == r.verdict_reference or pd.isna(r.verdict_reference)
                   else f"{r.verdict} (ref {r.verdict_reference})")
        lines.append(f"[reproduce]   {r.claim:52s} {r.value:10.4f}  ref {r.reference:10.4f}  allowed "
                     f"{r.allowed:8.4f}  {r.status:10s} {verdict}")
    lines.append(f"[reproduce] {name}: {reproduction_status(table)}")
    return "\n".join(lines)


def split_half(build: Callable[[Sequence[int]], pd.DataFrame], seeds: Sequence[int]) -> pd.DataFrame:
    """The statistical reproduction check on one notebook's own runs: ``build(seeds)`` returns the notebook's
    claims table (as :func:`write_claims` does) computed on those seeds only; the first half of ``seeds`` is
    compared with the second half as two independent estimates, by the rule of :func:`compare_claims`.
    Levels and differences with a standard error on both sides are compared; the rest is left out."""
    seeds = list(seeds)
    if len(seeds) < 4:
        raise ValueError(f"split_half: needs at least 4 seeds (2 per half, for a seed variance), got {seeds}")
    half = len(seeds) // 2
    table = compare_tables(build(seeds[:half]), build(seeds[half:]))
    table = table[np.isfinite(table["se"].astype(float)) & np.isfinite(table["se_reference"].astype(float))]
    table.attrs["halves"] = (seeds[:half], seeds[half:])
    return table.reset_index(drop=True)


def save_reference(out_dir: str | Path, reference_dir: str | Path, *, since: float | None = None) -> list[Path]:
    """Copy a notebook's small outputs (CSV, PNG, JSON, the executed notebook; not the run store, checkpoints or
    failed notebooks) into ``reference_dir``, replacing what was there; returns the files copied. ``since`` (a
    time.time()): only files written since then, so that a file an earlier version of the notebook wrote, and this
    one no longer does, is not carried into the reference."""
    out_dir, reference_dir = Path(out_dir), Path(reference_dir)
    if reference_dir.exists():
        shutil.rmtree(reference_dir)
    reference_dir.mkdir(parents=True)
    copied = []
    for f in sorted(out_dir.iterdir()):
        if (f.is_file() and f.suffix in _REFERENCE_SUFFIXES and not f.name.endswith(".failed.ipynb")
                and (since is None or f.stat().st_mtime >= since)):
            shutil.copy2(f, reference_dir / f.name)
            copied.append(reference_dir / f.name)
    return copied
