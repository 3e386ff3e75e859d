"""Result numbers from one source: ``make results`` (``python -m dgro_lib.results``) writes the README's claims table
from ``reference/<profile>/*/claims.csv`` between the markers ``<!-- results:claims:begin -->`` and
``<!-- results:claims:end -->``; the prose outside the markers stays hand-written. ``--check`` changes nothing and
exits 1 when the committed text differs from what the references give (the ``cog --check`` pattern; a test runs
it), so a number in the README cannot drift from the reference it quotes."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from .manifest import atomic_write
from .paths import REPO
from .report.claims import read_claims

__all__ = ["claims_table", "render", "main", "BEGIN", "END"]

BEGIN, END = "<!-- results:claims:begin -->", "<!-- results:claims:end -->"
README = REPO / "README.md"

# the order of the README: the papers' figures and tables, then the theory
ORDER = ["dgro_fig1_reward_variance", "dgro_fig1_beta2_acting", "dgro_fig2_beta", "dgro_fig3_methods",
         "dgro_table2_kk", "dgro_table3_math", "dgro_fig4_math_entropy", "dcpo_fig1_grid", "dcpo_table2_main",
         "dcpo_table4_h0", "dcpo_table5_ablation", "dgro_theory"]


def _fmt(x: float, unit: str) -> str:
    digits = 4 if unit == "nats/token" else 2
    return f"{x:+.{digits}f}"


def claims_table(reference: Path) -> pd.DataFrame:
    """Every judged claim (verdict other than ``estimate``) of the notebooks in :data:`ORDER` that have a claims
    file under ``reference``, in order."""
    frames = []
    for name in ORDER:
        path = reference / name / "claims.csv"
        if path.is_file():
            t = read_claims(path)
            frames.append(t[t["verdict"].notna() & (t["verdict"] != "estimate")].assign(notebook=name))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _row(r) -> str:
    if not math.isfinite(float(r.se)):  # an exact check
        effect, seeds, mde, p = f"{r.value:.6g} (exact)", "—", "—", "—"
    else:
        seeds = f"{r.seeds_a:.0f}" + (f" vs {r.seeds_b:.0f}" if r.seeds_b > 0 else "")
        if r.verdict == "not testable at this scale":
            effect, mde, p = f"{_fmt(r.value, r.unit)} {r.unit} (both at the floor or ceiling)", "—", "—"
        else:
            effect = (f"{_fmt(r.value, r.unit)} [{_fmt(r.ci_low, r.unit)}, {_fmt(r.ci_high, r.unit)}] {r.unit}"
                      if math.isfinite(float(r.ci_low)) else f"{_fmt(r.value, r.unit)} {r.unit} (1 seed)")
            mde = f"{r.mde:.{4 if r.unit == 'nats/token' else 1}f}" if math.isfinite(float(r.mde)) else "—"
            p = f"{r.p_holm:.2g}" if math.isfinite(float(r.p_holm)) else "—"
    direction = {"higher": "> 0", "lower": "< 0", "equal": f"≈ 0 (±{r.margin:.3g})"}.get(r.direction, "")
    claim = str(r.claim).replace("|", "\\|")
    return f"| `{r.notebook}` | {claim} | {direction} | **{r.verdict}** | {effect} | {seeds} | {mde} | {p} |"


def render(reference: Path) -> str:
    """The generated block (markers excluded): per notebook, its judged claims counted by verdict with the range
    of their minimum detectable effects; then every judged claim, one row each, in a collapsed section."""
    table = claims_table(reference)
    verdicts = ["reproduced", "contradicted", "inconclusive", "not testable at this scale"]
    lines = ["| notebook | judged claims | " + " | ".join(verdicts) + " | seeds per arm | MDE (points) |",
             "|---|---|" + "---|" * len(verdicts) + "---|---|"]
    for name, g in table.groupby("notebook", sort=False):
        counts = g["verdict"].value_counts()
        stat = g[np.isfinite(g["se"].astype(float))]
        seeds = sorted({int(x) for x in stat["seeds_a"]}) if not stat.empty else []
        pts = stat[(stat["unit"] == "points") & (stat["verdict"] != "not testable at this scale")]["mde"].dropna()
        mde = f"{pts.min():.1f}–{pts.max():.1f}" if len(pts) else "—"
        lines.append(f"| `{name}` | {len(g)} | " + " | ".join(str(int(counts.get(v, 0))) for v in verdicts)
                     + f" | {', '.join(map(str, seeds)) or '— (exact)'} | {mde} |")
    counts = table["verdict"].value_counts() if not table.empty else pd.Series(dtype=int)
    lines += ["", f"In all, {len(table)} judged claims: " + ", ".join(f"{k} {v}" for k, v in counts.items()) + ".",
              "", "<details><summary>Every judged claim: verdict, effect with its 95 % interval, seeds, minimum "
              "detectable effect, Holm-adjusted p</summary>", "",
              "| notebook | claim | paper | verdict | effect [95 % CI] | seeds | MDE | p (Holm) |",
              "|---|---|---|---|---|---|---|---|"]
    lines += [_row(r) for r in table.itertuples()]
    lines += ["", "</details>"]
    return "\n".join(lines)


def splice(text: str, block: str) -> str:
    """``text`` with the part between the markers replaced by ``block``; a missing marker is a ValueError."""
    if BEGIN not in text or END not in text:
        raise ValueError(f"README: the markers {BEGIN} / {END} are missing")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n{block}\n{END}{tail}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="cpu")
    parser.add_argument("--check", action="store_true", help="exit 1 if README.md differs from the references")
    parser.add_argument("--readme", type=Path, default=README)
    args = parser.parse_args(argv)
    text = args.readme.read_text()
    new = splice(text, render(REPO / "reference" / args.profile))
    if args.check:
        if new != text:
            print(f"[results] {args.readme} is out of date with reference/{args.profile}: run `make results`",
                  file=sys.stderr)
            return 1
        print(f"[results] {args.readme} matches reference/{args.profile}")
        return 0
    if new != text:
        atomic_write(args.readme, lambda tmp: tmp.write_text(new))
    print(f"[results] {args.readme}: claims table written from reference/{args.profile}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
