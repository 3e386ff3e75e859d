"""A notebook's headline numbers (its *claims*) and their comparison with the reference results in the repository.

Each notebook writes ``claims.csv`` beside its figures: one row per number a reader would quote (``claim``,
``value``, ``spread``: the seed standard deviation or standard error that says how far a rerun may land). The
repository keeps a reference copy of each notebook's outputs under ``reference/<profile>/<notebook>/``;
``make reproduce`` prints, per claim, the new number beside the reference and flags those further from it than
``tolerance`` x the larger of the two spreads.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pandas as pd

from .manifest import atomic_write
from .paths import REPO

__all__ = ["REFERENCE", "write_claims", "paired_claims", "compare_claims", "format_comparison", "save_reference",
           "compare_replicates"]

REFERENCE = REPO / "reference"
# What a reference copy keeps: small files only (no checkpoints, no model weights, no run store).
_REFERENCE_SUFFIXES = (".csv", ".png", ".json", ".ipynb")


def write_claims(out_dir: str | Path, rows: list[dict]) -> pd.DataFrame:
    """Write ``out_dir/claims.csv`` from rows of ``claim`` (a unique name), ``value`` and ``spread`` (NaN when there
    is none, e.g. a single seed); returns the table."""
    table = pd.DataFrame(rows, columns=["claim", "value", "spread"])
    if table["claim"].duplicated().any():
        raise ValueError(f"claims: duplicated names {table['claim'][table['claim'].duplicated()].tolist()}")
    atomic_write(Path(out_dir) / "claims.csv", lambda tmp: table.to_csv(tmp, index=False))
    return table


def paired_claims(tests: pd.DataFrame, name: str) -> list[dict]:
    """One claim per row of a paired-test table (columns ``delta_points`` and ``z``, as
    :func:`dgro_lib.evaluate.paired_improvement_table` and the tables built on it): ``name`` formatted with the
    row's columns (``"{after} vs {before} (points)"``), the change in points as the value, and |change / z| (the
    change's standard error under the test) as the spread; NaN where z is 0."""
    return [{"claim": name.format(**row), "value": row["delta_points"],
             "spread": abs(row["delta_points"] / row["z"]) if row["z"] else float("nan")}
            for row in tests.to_dict("records")]


# How many spreads a new number may sit from the reference before it is flagged.
TOLERANCE = 2.0


def compare_claims(out_dir: str | Path, reference_dir: str | Path, *, tolerance: float = TOLERANCE) -> pd.DataFrame:
    """One row per claim of either side: the new value, the reference value, the spread used (the larger of the two
    sides' spreads) and ``status``: ``identical`` (the same number to the last bit), ``within`` (|new - reference| <=
    tolerance x spread), ``OUTSIDE``, ``no spread``
    (neither side has one: compared by eye), ``new only`` or ``reference only``."""
    new = pd.read_csv(Path(out_dir) / "claims.csv").set_index("claim")
    ref = pd.read_csv(Path(reference_dir) / "claims.csv").set_index("claim")
    rows = []
    for claim in list(ref.index) + [c for c in new.index if c not in ref.index]:
        if claim not in new.index or claim not in ref.index:
            side = new if claim in new.index else ref
            rows.append({"claim": claim, "value": new["value"].get(claim, math.nan),
                         "reference": ref["value"].get(claim, math.nan), "spread": side.loc[claim, "spread"],
                         "status": "new only" if claim in new.index else "reference only"})
            continue
        spread = pd.Series([new.loc[claim, "spread"], ref.loc[claim, "spread"]]).max()  # NaN-skipping
        diff = abs(new.loc[claim, "value"] - ref.loc[claim, "value"])
        status = ("identical" if new.loc[claim, "value"] == ref.loc[claim, "value"] else "no spread"
                  if pd.isna(spread) else "within" if diff <= tolerance * spread else "OUTSIDE")
        rows.append({"claim": claim, "value": new.loc[claim, "value"], "reference": ref.loc[claim, "value"],
                     "spread": spread, "status": status})
    table = pd.DataFrame(rows)
    table.attrs["tolerance"] = tolerance
    return table


def format_comparison(table: pd.DataFrame, name: str) -> str:
    """The printed form of :func:`compare_claims`'s table (its tolerance is read from the table)."""
    tolerance = table.attrs.get("tolerance", TOLERANCE)
    lines = [f"[reproduce] {name}: your numbers vs the reference (status: within {tolerance:g} x spread, or OUTSIDE)"]
    for r in table.itertuples():
        lines.append(f"[reproduce]   {r.claim:48s} {r.value:10.4f}  ref {r.reference:10.4f}  spread {r.spread:8.4f}  "
                     f"{r.status}")
    return "\n".join(lines)


def save_reference(out_dir: str | Path, reference_dir: str | Path) -> list[Path]:
    """Copy a notebook's small outputs (CSV, PNG, JSON, the executed notebook; not the run store, checkpoints or
    failed notebooks) into ``reference_dir``, replacing what was there; returns the files copied."""
    out_dir, reference_dir = Path(out_dir), Path(reference_dir)
    if reference_dir.exists():
        shutil.rmtree(reference_dir)
    reference_dir.mkdir(parents=True)
    copied = []
    for f in sorted(out_dir.iterdir()):
        if f.is_file() and f.suffix in _REFERENCE_SUFFIXES and not f.name.endswith(".failed.ipynb"):
            shutil.copy2(f, reference_dir / f.name)
            copied.append(reference_dir / f.name)
    return copied


def compare_replicates(archive: str | Path, runs_csv: str | Path, *, other: str | None = None) -> pd.DataFrame:
    """The reference replicates of a notebook's runs (``runs.csv``) against another replicate of each, from the run
    archive (:func:`dgro_lib.archive.replicates`): one row per sweep point (arm) with both sides' greedy held-out
    accuracy over seeds (mean, s.d., seeds), the difference of the means in points, its standard error from the
    seed spread (sqrt(s_a^2 / n_a + s_b^2 / n_b), in points), the fraction of held-out items with the same
    correctness run by run, and ``status``: ``identical`` (every per-item result bit-equal), ``consistent``
    (|difference| <= 1.96 x its standard error), ``differs``, or ``no replicate``.

    ``other`` picks the replicate by id prefix (e.g. ``intel``); by default the first one that is not the
    reference. Both sides of one arm must have the same seeds; a seed with only one side is left out of both.
    This is the seed-level check of a reproduction on another machine; the training run is the unit, so it is
    only as sharp as the seed count allows."""
    from .archive import replicates  # torch-free, but keeps this module's import light

    runs = pd.read_csv(runs_csv, dtype={"key": str})
    per_run = []
    for r in runs.itertuples():
        found = replicates(archive, r.key)
        ref = next((f for f in found if f[0] == "reference"), None)
        alt = next((f for f in found if f[0] != "reference" and (other is None or f[0].startswith(other))), None)
        row = {"sweep_point": r.sweep_point, "seed": r.seed, "key": r.key}
        if ref is None or alt is None:
            per_run.append(row | {"paired": False})
            continue
        ea, eb = (json.loads((f[1] / "final_eval.json").read_text()) for f in (ref, alt))
        same = sum(x == y for x, y in zip(ea["correct"], eb["correct"])) / max(len(ea["correct"]), 1)
        per_run.append(row | {"paired": True, "a": ea["summary"]["accuracy"], "b": eb["summary"]["accuracy"],
                              "identical": ref[2]["results_sha256"] == alt[2]["results_sha256"],
                              "same_items": same, "other": alt[0]})
    table = pd.DataFrame(per_run)
    rows = []
    for point, g in table.groupby("sweep_point", sort=False):
        g = g[g["paired"]] if "paired" in g else g.iloc[:0]
        if g.empty:
            rows.append({"sweep_point": point, "seeds": 0, "status": "no replicate"})
            continue
        n = len(g)
        sd_a, sd_b = (g[c].std(ddof=1) if n > 1 else math.nan for c in ("a", "b"))
        diff = 100 * (g["b"].mean() - g["a"].mean())
        se = 100 * math.sqrt(sd_a ** 2 / n + sd_b ** 2 / n) if n > 1 else math.nan
        status = ("identical" if g["identical"].all() else "consistent" if n > 1 and abs(diff) <= 1.96 * se
                  else "differs")
        rows.append({"sweep_point": point, "seeds": n, "reference_mean": g["a"].mean(), "reference_sd": sd_a,
                     "other_mean": g["b"].mean(), "other_sd": sd_b, "diff_points": diff, "se_points": se,
                     "same_items": g["same_items"].mean(), "other": g["other"].iloc[0], "status": status})
    return pd.DataFrame(rows)
