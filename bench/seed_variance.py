"""Where the seed-to-seed spread of a K&K claim comes from, and what lowers it: greedy accuracy against the sampled
pass@1 estimate (avg@k at T = 1), from the committed run archive (trains nothing, reads JSON).

For each arm (one sweep point, all its seeds) of a notebook's reference:

* ``sd_greedy``: between-seed s.d. of greedy accuracy on the held-out puzzles the sampled evaluation also uses (the
  first ``n`` of them), and ``sd_greedy_all`` on all of them;
* ``sd_sampled``: between-seed s.d. of avg@k on those ``n`` puzzles (k draws each, as the archive holds them);
* ``sd_decode``: the part of ``sd_sampled`` that is the k draws' own noise, from each puzzle's unbiased
  q(1 - q) = k/(k-1) f(1 - f) (f its fraction of correct draws): var = mean_i q_i(1 - q_i) / (k n);
* ``sd_sampled_at_K``: the s.d. that K draws per puzzle would give, sqrt(sd_sampled^2 - var_decode + var_decode k/K);
* ``sd_item_flips`` / ``sd_greedy_inf``: the split of ``sd_greedy_all`` (n puzzles) into the part that is which
  single puzzles flip between seeds, sqrt(mean_i var_s(c_si) / n) (c_si: seed s's greedy outcome on puzzle i), and
  the rest, the shift the seeds share across puzzles, sqrt(sd_greedy_all^2 - that^2): the s.d. that a held-out set
  of unlimited size would leave. It asks whether more held-out puzzles would lower the spread;
* ``sd_last_sub`` / ``sd_ckpt_avg_sub``: the between-seed s.d. of greedy accuracy on the first ``train.eval_subset``
  held-out puzzles (the periodic evaluations' puzzles) at the last step alone, and averaged over the last
  checkpoints in the second half of training (the periodic evaluations after the midpoint, and the last step);
  ``ckpts`` says how many were averaged. It asks whether reading a run through its last few checkpoints rather
  than its last one lowers the spread;
* ``seeds_for_3pt``: seeds per arm for an arm-vs-arm minimum detectable difference of 3 points (80 % power,
  alpha 0.05, normal approximation: MDE = 2.80 sqrt(2) sd / sqrt(S)) with greedy accuracy and with avg@K.

The held-out puzzles are the same for every seed, so greedy decoding adds no evaluation noise between seeds: its
spread is the training's (which model each seed ends at, read through an argmax). The sampled estimate reads the
same models through their expected accuracy at T = 1; whether that spread is smaller is what this measures.

    .venv/bin/python bench/seed_variance.py [--notebooks dgro_fig1_reward_variance ...] [--draws 8]
        [--csv outputs/bench/seed_variance.csv]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parents[1]
REFERENCE = REPO / "reference" / "cpu"
NOTEBOOKS = ("dgro_fig1_reward_variance", "dgro_fig1_beta2_acting", "dgro_fig2_beta", "dgro_fig3_methods")
Z = 1.959964 + 0.841621  # alpha 0.05 two-sided, 80 % power


def _sampled(run: Path) -> list[float] | None:
    """The per-puzzle correct fractions of the run's sampled evaluation (T > 0, several draws), or None."""
    for f in sorted((run / "evals").glob("*.json")):
        d = json.loads(f.read_text())
        p = d.get("protocol", {})
        if p.get("temperature", 0) > 0 and p.get("n_samples", 1) > 1:
            return d["correct"], int(p["n_samples"])
    return None


def _checkpoints(run: Path, correct: list[float]) -> tuple[float, float, int] | None:
    """(greedy accuracy on the periodic evaluations' puzzles at the last step, its mean over the last checkpoints
    in the second half of training, how many), from ``heldout.csv``; None without a periodic evaluation there."""
    h = pd.read_csv(run / "heldout.csv")
    last = int(h["step"].max())
    sub = h[(h["step"] < last) & (h["step"] > last / 2) & (h["subset"] == h["subset"].min())]
    if sub.empty or int(sub["subset"].iloc[0]) >= len(correct):
        return None
    n_sub = int(sub["subset"].iloc[0])
    at_last = sum(correct[:n_sub]) / n_sub
    accs = [*sub["accuracy"].astype(float), at_last]
    return at_last, sum(accs) / len(accs), len(accs)


def arm_table(notebook: str, draws: int) -> pd.DataFrame:
    runs = pd.read_csv(REFERENCE / notebook / "runs.csv", dtype={"key": str})
    rows = []
    for point, g in runs.groupby("sweep_point", sort=False):
        greedy_n, greedy_all, sampled, decode, last_sub, avg_sub, outcomes = [], [], [], [], [], [], []
        ckpts = 0
        k = None
        for key in g["key"]:
            run = REFERENCE / "runs" / key
            final = json.loads((run / "final_eval.json").read_text())
            s = _sampled(run)
            if s is None:
                continue
            fr, k = s
            n = len(fr)
            correct = [float(c) for c in final["correct"]]
            greedy_all.append(sum(correct) / len(correct))
            outcomes.append(correct)
            greedy_n.append(sum(correct[:n]) / n)
            c = _checkpoints(run, correct)
            if c is not None:
                last_sub.append(c[0])
                avg_sub.append(c[1])
                ckpts = c[2]
            sampled.append(sum(fr) / n)
            qq = [k / (k - 1) * f * (1 - f) for f in fr]
            decode.append(sum(qq) / (k * n * n))
        if len(sampled) < 2:
            continue
        S = len(sampled)
        sd = lambda xs: pd.Series(xs).std(ddof=1)  # noqa: E731
        var_dec = sum(decode) / S
        sd_s = sd(sampled)
        var_train = max(sd_s ** 2 - var_dec, 0.0)
        sd_K = math.sqrt(var_train + var_dec * k / draws)
        flips = pd.DataFrame(outcomes).var(axis=0, ddof=1).mean() / len(outcomes[0])
        sd_inf = math.sqrt(max(sd(greedy_all) ** 2 - flips, 0.0))
        need = lambda s_: math.ceil((Z * math.sqrt(2) * s_ / 0.03) ** 2)  # noqa: E731
        rows.append({"notebook": notebook, "arm": point, "seeds": S, "items": n, "draws": k,
                     "sd_greedy_all": sd(greedy_all) * 100, "sd_greedy": sd(greedy_n) * 100,
                     "sd_item_flips": math.sqrt(flips) * 100, "sd_greedy_inf": sd_inf * 100,
                     "sd_sampled": sd_s * 100, "sd_decode": math.sqrt(var_dec) * 100,
                     f"sd_sampled_at_{draws}": sd_K * 100,
                     "sd_last_sub": sd(last_sub) * 100 if len(last_sub) > 1 else math.nan,
                     "sd_ckpt_avg_sub": sd(avg_sub) * 100 if len(avg_sub) > 1 else math.nan, "ckpts": ckpts,
                     "seeds_for_3pt_greedy": need(sd(greedy_all)), f"seeds_for_3pt_avg@{draws}": need(sd_K)})
    return pd.DataFrame(rows)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--notebooks", nargs="+", default=list(NOTEBOOKS))
    ap.add_argument("--draws", type=int, default=8, help="K, the draws per puzzle to project to (default 8)")
    ap.add_argument("--csv", default=str(REPO / "outputs" / "bench" / "seed_variance.csv"))
    a = ap.parse_args(argv)
    df = pd.concat([arm_table(n, a.draws) for n in a.notebooks], ignore_index=True)
    Path(a.csv).parent.mkdir(parents=True, exist_ok=True)
    df.to_csv(a.csv, index=False)
    with pd.option_context("display.width", 220, "display.max_columns", 30, "display.max_colwidth", 44,
                           "display.float_format", "{:.2f}".format):
        print(df.to_string(index=False))
    ratio = (df[f"sd_sampled_at_{a.draws}"] / df["sd_greedy_all"]).median()
    print(f"\nmedian over arms: s.d. of avg@{a.draws} / s.d. of greedy accuracy = {ratio:.2f}; seeds per arm for a "
          f"3-point MDE: greedy median {df['seeds_for_3pt_greedy'].median():.0f}, avg@{a.draws} median "
          f"{df[f'seeds_for_3pt_avg@{a.draws}'].median():.0f}  (s.d. in points; written to {a.csv})")
    print(f"greedy s.d. from single puzzles flipping between seeds: {df['sd_item_flips'].min():.2f}-"
          f"{df['sd_item_flips'].max():.2f} points; with unlimited held-out puzzles the greedy s.d. would be "
          f"{(df['sd_greedy_inf'] / df['sd_greedy_all']).median():.2f} of today's (median over arms)")
    ck = df.dropna(subset=["sd_ckpt_avg_sub"])
    if not ck.empty:
        print(f"over {len(ck)} arms with a periodic evaluation in the second half: s.d. averaged over the last "
              f"{ck['ckpts'].min()}-{ck['ckpts'].max()} checkpoints / s.d. at the last step alone (same puzzles) = "
              f"{(ck['sd_ckpt_avg_sub'] / ck['sd_last_sub']).median():.2f} (median; range "
              f"{(ck['sd_ckpt_avg_sub'] / ck['sd_last_sub']).min():.2f}-"
              f"{(ck['sd_ckpt_avg_sub'] / ck['sd_last_sub']).max():.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
