"""A notebook's headline numbers (its *claims*) and their comparison with the reference results in the repository.

Each notebook writes ``claims.csv`` beside its figures: one row per number a reader would quote (``claim``,
``value``, ``spread``: the seed standard deviation or standard error that says how far a rerun may land). The
repository keeps a reference copy of each notebook's outputs under ``reference/<profile>/<notebook>/``;
``make reproduce`` prints, per claim, the new number beside the reference and flags those further from it than
``tolerance`` x the larger of the two spreads.
"""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import pandas as pd

from .manifest import atomic_write
from .paths import REPO

__all__ = ["REFERENCE", "write_claims", "paired_claims", "compare_claims", "format_comparison", "save_reference"]

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
    sides' spreads) and ``status``: ``within`` (|new - reference| <= tolerance x spread), ``OUTSIDE``, ``no spread``
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
        status = "no spread" if pd.isna(spread) else ("within" if diff <= tolerance * spread else "OUTSIDE")
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
