"""Result numbers from one source: ``make results`` (``python -m dgro_lib.cli.results``) writes every generated block of
the README and of ``docs/results.md`` from ``reference/<profile>/*/claims.csv``; the prose outside the blocks stays
hand-written. A block sits between ``<!-- results:<name>:begin -->`` and ``<!-- results:<name>:end -->``: the
README has ``headline`` (the papers' claims counted by verdict per notebook, the project's own checks apart);
``docs/results.md`` has ``summary`` (every judged claim counted per notebook, with its MDEs) and one block per notebook that has a claims file, named after
the notebook (every claim of it, estimates included). A notebook with a claims file and no block, or a block that no
claims file fills, is an error naming both. ``--check`` changes nothing and exits 1, naming each file and block that
differs from what the references give (the ``cog --check`` pattern; a test runs it), so a number in the docs cannot
drift from the reference it quotes."""

from __future__ import annotations

import argparse
import math
import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from dgro_lib.cli.timed import costs_block
from dgro_lib.util.files import atomic_write
from dgro_lib.util.paths import REPO
from dgro_lib.report.claims import DISPLAY, claim_cells, is_paired, read_claims
from dgro_lib.report.inference import seeds_for_mde

__all__ = ["claims_table", "notebook_block", "headline", "blocks", "splice", "update", "main", "markers", "BEGIN",
           "END", "ORDER", "NOTEBOOKS", "seeds_needed", "MDE_TARGET"]


def markers(name: str) -> tuple[str, str]:
    """The begin and end markers of the generated block ``name``."""
    return f"<!-- results:{name}:begin -->", f"<!-- results:{name}:end -->"


BEGIN, END = markers("claims")
_BLOCK = re.compile(r"<!-- results:([\w.-]+):begin -->")
README = REPO / "README.md"
RESULTS = REPO / "docs" / "results.md"
GUIDE = REPO / "docs" / "guide.md"

# the order of the README: the papers' figures and tables, then the theory
ORDER = ["dgro_fig1_reward_variance", "dgro_fig1_beta2_acting", "dgro_fig2_beta", "dgro_fig3_methods",
         "dgro_table2_kk", "dgro_table3_math", "dgro_fig4_math_entropy", "dcpo_fig1_grid", "dcpo_table2_main",
         "dcpo_table4_h0", "dcpo_table5_ablation", "dgro_theory"]
# the sections of docs/results.md: the base model and the RL map first (their claims are estimates only)
NOTEBOOKS = ["00_base_model", "01_miniature_map", *ORDER]
VERDICTS = ["reproduced", "contradicted", "inconclusive", "not testable at this scale"]
# the effect, in points, that an arm-vs-arm comparison should be able to detect: the papers' differences between
# arms are a few points, so a comparison that cannot see 3 is no test of them
MDE_TARGET = 3.0


def _claims(reference: Path, name: str) -> pd.DataFrame | None:
    """The claims of notebook ``name`` that carry a verdict, with a ``notebook`` column; None without a claims file."""
    path = reference / name / "claims.csv"
    if not path.is_file():
        return None
    t = read_claims(path)
    return t[t["verdict"].notna()].assign(notebook=name)


def claims_table(reference: Path) -> pd.DataFrame:
    """Every judged claim (verdict other than ``estimate``) of the notebooks in :data:`ORDER` that have a claims
    file under ``reference``, in order."""
    frames = [t[t["verdict"] != "estimate"] for t in (_claims(reference, n) for n in ORDER) if t is not None]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def seeds_needed(claims: pd.DataFrame, target: float = MDE_TARGET) -> pd.Series:
    """For each arm-vs-arm claim in points that carries a test (two arms of two or more runs, verdict neither
    ``estimate`` nor not testable), the runs per arm its MDE would need to reach ``target``, the measured seed
    spread, its split between the two arms (read from the claim's df) and the item part held
    (:func:`~dgro_lib.report.inference.seeds_for_mde`); indexed like ``claims``.
    ``inf`` where no seed count does. An estimate tests nothing, so its MDE sets no target. A paired claim is the
    level of one per-seed difference, so it projects as against a fixed comparator (its pairs are the runs)."""
    keep = ((claims["unit"] == "points") & (claims["seeds_b"].astype(float) >= 2)
            & ~claims["verdict"].isin(["estimate", "not testable at this scale"])
            & np.isfinite(claims["se"].astype(float)) & np.isfinite(claims["se_runs"].astype(float)))
    return pd.Series({i: seeds_for_mde(float(r.se), float(r.se_runs), int(r.seeds_a),
                                       0 if is_paired(r.get("paired")) else int(r.seeds_b),
                                       int(r.n_items), target, df=float(r.df))
                      for i, r in claims[keep].iterrows()}, dtype=float)


def _seeds_cell(claims: pd.DataFrame, need: pd.Series) -> str:
    """Per metric of a notebook's arm-vs-arm claims of the paper (in the order they appear; the project's own checks,
    such as a positive control, are not the target), the most runs per arm any of them needs for the target MDE:
    what it takes for every such comparison in that metric to be powered."""
    if need.empty:
        return "—"
    by = claims.loc[need.index, "metric"]
    show = {m: need[by == m].max() for m in dict.fromkeys(by)}
    return "; ".join(f"{m} {'∞' if math.isinf(x) else f'{x:.0f}'}" for m, x in show.items())


def _overview(table: pd.DataFrame) -> list[str]:
    """Per notebook, its judged claims counted by verdict with the range of their minimum detectable effects and
    the seeds per arm its arm-vs-arm claims would need for an MDE of :data:`MDE_TARGET` (:func:`seeds_needed`: the
    most any claim in a metric needs, per metric); then the totals."""
    lines = ["| notebook | judged claims | " + " | ".join(VERDICTS) + " | seeds per arm | MDE (points) "
             f"| seeds per arm for an MDE ≤ {MDE_TARGET:g} between arms, per metric |",
             "|---|---|" + "---|" * len(VERDICTS) + "---|---|---|"]
    for name, g in table.groupby("notebook", sort=False):
        counts = g["verdict"].value_counts()
        stat = g[np.isfinite(g["se"].astype(float))]
        seeds = sorted({int(x) for x in stat["seeds_a"]}) if not stat.empty else []
        pts = stat[(stat["unit"] == "points") & (stat["verdict"] != "not testable at this scale")]["mde"].dropna()
        mde = f"{pts.min():.1f}–{pts.max():.1f}" if len(pts) else "—"
        lines.append(f"| `{name}` | {len(g)} | " + " | ".join(str(int(counts.get(v, 0))) for v in VERDICTS)
                     + f" | {', '.join(map(str, seeds)) or '— (exact)'} | {mde} | "
                     f"{_seeds_cell(g, seeds_needed(g[g['source'] == 'paper']))} |")
    return lines + ["", _tally(table)]


def _tally(table: pd.DataFrame) -> str:
    """The count of judged claims by verdict: the papers' claims (the tally), then the project's own checks."""
    out = []
    for source, what in (("paper", "claims the papers make"), ("project", "checks of the project's own")):
        g = table[table["source"] == source] if not table.empty else table
        counts = g["verdict"].value_counts() if not g.empty else pd.Series(dtype=int)
        out.append(f"{len(g)} judged {what}" + (": " + ", ".join(f"{k} {v}" for k, v in counts.items())
                                                 if len(g) else ""))
    return "In all, " + "; and ".join(out) + "."



def headline(reference: Path) -> str:
    """The README's ``headline`` block (markers excluded): the claims the papers make, counted by verdict per
    notebook and in all, then the project's own checks counted apart (they are not the papers' claims)."""
    every = claims_table(reference)
    table = every[every["source"] == "paper"]
    lines = ["| notebook | paper claims judged | " + " | ".join(VERDICTS) + " |",
             "|---|---|" + "---|" * len(VERDICTS)]
    for name, g in table.groupby("notebook", sort=False):
        counts = g["verdict"].value_counts()
        lines.append(f"| `{name}` | {len(g)} | " + " | ".join(str(int(counts.get(v, 0))) for v in VERDICTS) + " |")
    counts = table["verdict"].value_counts()
    lines.append(f"| **all** | **{len(table)}** | "
                 + " | ".join(f"**{int(counts.get(v, 0))}**" for v in VERDICTS) + " |")
    project = every[every["source"] == "project"]["verdict"].value_counts()
    lines += ["", f"Besides these, {int(project.sum())} checks of the project's own (positive controls, optimizer "
              "identities, orderings the papers do not state): "
              + ", ".join(f"{k} {v}" for k, v in project.items()) + "."]
    return "\n".join(lines)


def notebook_block(reference: Path, name: str) -> str:
    """The block of notebook ``name`` in ``docs/results.md`` (markers excluded): its claims file named and its claims
    counted by verdict, then every claim, estimates included, in the file's order."""
    table = _claims(reference, name)
    if table is None:
        raise FileNotFoundError(f"{reference / name / 'claims.csv'}: no claims file for notebook {name!r}")
    counts = table["verdict"].value_counts()
    tally = ", ".join(f"{v} {int(counts[v])}" for v in [*VERDICTS, "estimate"] if v in counts)
    source = f"reference/{reference.name}/{name}/claims.csv"
    lines = [f"Generated from [`{source}`](../{source}): {len(table)} claims ({tally}).", "",
             _row(DISPLAY), "|" + "---|" * len(DISPLAY)]
    return "\n".join(lines + [_row(claim_cells(r, markdown=True)) for r in table.itertuples()])


def blocks(reference: Path, readme: Path = README, results: Path = RESULTS, guide: Path = GUIDE
           ) -> dict[Path, dict[str, str]]:
    """Every generated block, by file and block name: the README's ``headline`` and ``costs`` (the measured costs of
    the two commands, :func:`dgro_lib.cli.timed.costs_block`); ``docs/guide.md``'s ``costs``; ``docs/results.md``'s
    ``summary`` and one block per notebook of :data:`NOTEBOOKS` that has a claims file under ``reference``."""
    per_notebook = {n: notebook_block(reference, n) for n in NOTEBOOKS if (reference / n / "claims.csv").is_file()}
    return {readme: {"headline": headline(reference), "costs": costs_block()}, guide: {"costs": costs_block()},
            results: {"summary": "\n".join(_overview(claims_table(reference))), **per_notebook}}


def splice(text: str, block: str, name: str = "claims", where: str = "README") -> str:
    """``text`` with the part between the markers of block ``name`` replaced by ``block``; a missing or repeated
    marker is a ValueError naming ``where`` and the block."""
    begin, end = markers(name)
    if text.count(begin) != 1 or text.count(end) != 1:
        found = "missing" if begin not in text or end not in text else "repeated"
        raise ValueError(f"{where}: the markers {begin} / {end} of block {name!r} are {found}")
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{begin}\n{block}\n{end}{tail}"


def update(text: str, generated: dict[str, str], where: str) -> str:
    """``text`` with every block of ``generated`` (name -> content) spliced in; a block in ``text`` that nothing
    generates (a notebook without a claims file) is a ValueError naming it and ``where``."""
    unknown = [n for n in _BLOCK.findall(text) if n not in generated]
    if unknown:
        raise ValueError(f"{where}: block(s) {unknown} have no claims file in the references to be generated from")
    for name, block in generated.items():
        text = splice(text, block, name, where)
    return text


def _inner(text: str, name: str) -> str:
    begin, end = markers(name)
    return text.split(begin, 1)[1].split(end, 1)[0]


def _shown(path: Path) -> str:
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="cpu")
    parser.add_argument("--check", action="store_true",
                        help="exit 1 if a generated block differs from the references; writes nothing")
    parser.add_argument("--readme", type=Path, default=README)
    parser.add_argument("--results-doc", type=Path, default=RESULTS)
    parser.add_argument("--guide", type=Path, default=GUIDE)
    args = parser.parse_args(argv)
    reference = REPO / "reference" / args.profile
    # every file's new text first, so that a missing marker in one writes none of them
    texts = {path: (path.read_text(), gen) for path, gen in blocks(reference, args.readme, args.results_doc, args.guide).items()}
    new = {path: update(text, gen, _shown(path)) for path, (text, gen) in texts.items()}
    if args.check:
        stale = [f"{_shown(path)}: block {name}" for path, (text, gen) in texts.items() for name in gen
                 if _inner(text, name) != _inner(new[path], name)]
        for s in stale:
            print(f"[results] {s} is out of date with reference/{args.profile}: run `make results`", file=sys.stderr)
        if not stale:
            print(f"[results] {', '.join(map(_shown, texts))} match reference/{args.profile}")
        return 1 if stale else 0
    for path, (text, gen) in texts.items():
        if new[path] != text:
            atomic_write(path, lambda tmp, t=new[path]: tmp.write_text(t))
        print(f"[results] {_shown(path)}: {len(gen)} block(s) written from reference/{args.profile}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
