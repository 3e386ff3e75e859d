"""Do runs that share a seed share their luck? Welch's against the seed-paired reading of every arm-vs-arm greedy
comparison of the K&K Figs. 1-3, from the committed run archive (trains nothing, reads JSON).

A seed fixes a run's prompt order and its sampling streams (the TRL config's ``seed`` and ``data_seed``, and
``set_seed``), so two arms trained with the same seeds share those random numbers: a design of blocks, one per seed.
Whether the blocks matter is measured here, for every pair of arms of a notebook that hold the same seeds:

* ``corr``: the Pearson correlation, over the seeds, of the two arms' run accuracies (greedy, all held-out puzzles);
* ``mde_welch`` / ``mde_paired``: the minimum detectable difference (80 % power, alpha 0.05) of
  :func:`dgro_lib.report.inference.compare` as the notebooks judge today (Welch over the runs, with the item level)
  and with ``paired=True`` (the level of the per-seed difference, n - 1 degrees of freedom);
* ``estimate``, ``ci_welch``, ``ci_paired``: the difference a - b in points and both 95 % intervals.

The pairs are every two arms of a notebook, a superset of the comparisons its claims make. Pairing is narrower when
``corr`` is well above zero and a little wider (half the degrees of freedom) near zero; a claim's reading has to be
chosen from its design before its runs are read, so this table measures the design, it does not pick readings.

    .venv/bin/python bench/seed_pairing.py [--notebooks dgro_fig2_beta ...] [--csv outputs/bench/seed_pairing.csv]
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from dgro_lib.report.inference import compare

REPO = Path(__file__).resolve().parents[1]
REFERENCE = REPO / "reference" / "cpu"
NOTEBOOKS = ("dgro_fig1_reward_variance", "dgro_fig1_beta2_acting", "dgro_fig2_beta", "dgro_fig3_methods")


def _label(sweep_point: str) -> str:
    """A sweep point's values, e.g. ``0.1, 0.01`` for ``{"loss.kwargs.beta1": 0.1, "loss.kwargs.beta2": 0.01}``; a
    whole loss section by its name (``grpo, [-3,3]``)."""
    point = json.loads(sweep_point)
    return ", ".join(str(v.get("name", v)) if isinstance(v, dict) else str(v) for v in point.values()) or "default"


def arms(notebook: str) -> dict[str, dict[int, list[float]]]:
    """``{arm: {seed: per-puzzle greedy correctness}}`` of the notebook's reference runs."""
    runs = pd.read_csv(REFERENCE / notebook / "runs.csv", dtype={"key": str})
    out: dict[str, dict[int, list[float]]] = {}
    for row in runs.itertuples():
        final = json.loads((REFERENCE / "runs" / row.key / "final_eval.json").read_text())
        out.setdefault(_label(row.sweep_point), {})[int(row.seed)] = [float(c) for c in final["correct"]]
    return out


def pair_table(notebook: str) -> pd.DataFrame:
    rows = []
    for (a, sa), (b, sb) in itertools.combinations(arms(notebook).items(), 2):
        if sorted(sa) != sorted(sb):
            continue  # no seed-for-seed pairing to read
        seeds = sorted(sa)
        xa, xb = np.array([sa[s] for s in seeds]), np.array([sb[s] for s in seeds])
        welch, paired = compare(xa, xb), compare(xa, xb, paired=True)
        rows.append({"notebook": notebook, "a": a, "b": b, "seeds": len(seeds),
                     "corr": float(np.corrcoef(xa.mean(axis=1), xb.mean(axis=1))[0, 1]),
                     "estimate": welch.estimate, "mde_welch": welch.mde, "mde_paired": paired.mde,
                     "ci_welch": f"[{welch.ci_low:+.2f}, {welch.ci_high:+.2f}]",
                     "ci_paired": f"[{paired.ci_low:+.2f}, {paired.ci_high:+.2f}]"})
    return pd.DataFrame(rows)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--notebooks", nargs="+", default=list(NOTEBOOKS))
    ap.add_argument("--csv", default=str(REPO / "outputs" / "bench" / "seed_pairing.csv"))
    args = ap.parse_args(argv)
    df = pd.concat([pair_table(n) for n in args.notebooks], ignore_index=True)
    Path(args.csv).parent.mkdir(parents=True, exist_ok=True)
    df.to_csv(args.csv, index=False)
    with pd.option_context("display.width", 200, "display.max_columns", 20, "display.float_format", "{:.2f}".format):
        print(df.to_string(index=False))
    ratio = df["mde_paired"] / df["mde_welch"]
    print(f"\n{len(df)} pairs of arms: seed correlation median {df['corr'].median():.2f} (range "
          f"{df['corr'].min():.2f} to {df['corr'].max():.2f}); paired MDE / Welch MDE median {ratio.median():.2f} "
          f"(range {ratio.min():.2f}-{ratio.max():.2f}), paired narrower in {(ratio < 1).sum()} of {len(df)}")
    for nb, g in df.groupby("notebook", sort=False):
        print(f"{nb}: {len(g)} pairs, {g['seeds'].min()}-{g['seeds'].max()} seeds; greedy MDE Welch "
              f"{g['mde_welch'].min():.2f}-{g['mde_welch'].max():.2f}, paired {g['mde_paired'].min():.2f}-"
              f"{g['mde_paired'].max():.2f} points; corr median {g['corr'].median():.2f}  (written to {args.csv})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
