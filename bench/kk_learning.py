"""Does RL learn on the K&K miniature? Every arm's learning figures, read from the run archive (or trained first).

The arms are those of a params file (default ``bench/kk_pilot.yaml``: GRPO and DGRO (1, 0.1) from the
``mini_guess`` base, and the positive control at a quarter of the learning rate). For each arm, over its seeds
(mean, with the between-seed s.d.; each run's figures are :func:`dgro_lib.analysis.learning.run_learning`'s, the notebooks'
definitions):

* ``sampled_base`` -> ``sampled_final``: held-out pass@1 at T = 1 (the params' ``eval`` protocol: avg@k on the
  held-out puzzles) of the base model and of each run's last checkpoint, and ``sampled_rise`` in points;
* ``speed``: the learning-speed metric, the mean of the held-out curve over the periodic evaluations during
  training (every ``train.eval_every`` steps on the first ``train.eval_subset`` puzzles, the same protocol; the base
  and the final evaluation excluded, so every arm is read at the same steps), in points;
* ``train_first10`` -> ``train_last10``: training accuracy on the T = 1 rollouts (``kk_outcome/correct``), the mean
  of the first 10 steps and of the last 10, and ``train_rise`` in points;
* ``greedy_base`` -> ``greedy_final``: the second evaluation (``extra.greedy_eval``, on all held-out puzzles);
* ``len_first10`` -> ``len_last10`` and ``ent_first10`` -> ``ent_last10``: completion length (tokens) and entropy
  (nats per token) of the rollouts;
* ``minutes``: wall time of a run on one core: its manifest's ``train_seconds`` (training and the periodic
  evaluations, which run inside it) plus the final and the second evaluation's own wall time (the base model's
  evaluation, shared by every run, and process start-up are not counted);
* ``d_speed`` [``d_speed_lo``, ``d_speed_hi``] and ``d_final`` [...]: the arm minus the first arm in the speed metric
  and in the final sampled accuracy, with the 95 % interval over seeds (:func:`dgro_lib.report.inference.compare` on
  the per-run values, read seed for seed on the seeds both arms hold, as the notebooks' claims are), and
  ``mde_speed`` / ``mde_final``, the minimum detectable difference of these seeds (80 % power, two-sided 5 %), in
  points.

The targets this miniature was built for (a sampled rise of at least 20 points, a training-accuracy rise of at least
15, at most 8 minutes a run) are checked per arm and printed beside the figures. Nothing is trained unless
``--train`` is given: then the runs the store and the archive lack are trained through the cpu run store (two
processes; each is checkpointed and resumes) and archived into ``reference/cpu/runs``.

With ``--notebook NAME`` it reads a notebook's runs instead (its ``params/cpu`` file: DGRO Figs. 1, 1 with β2
acting, 2 and 3, and the RL map) and also names the notebook's median arm (by sampled rise) and whether it meets the
targets.

    .venv/bin/python bench/kk_learning.py [--params bench/kk_pilot.yaml | --notebook NAME] [--train] [--store DIR]
        [--csv outputs/bench/kk_learning.csv] [--figure outputs/bench/kk_learning]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from dgro_lib.papers.common import seed_pairs
from dgro_lib.report.inference import compare

REPO = Path(__file__).resolve().parents[1]
TARGETS = {"sampled_rise": 20.0, "train_rise": 15.0, "minutes": 8.0}
# the notebooks whose runs --notebook reads (their cpu params; every one of them on `mini_guess`)
NOTEBOOKS = ("dgro_fig1_reward_variance", "dgro_fig1_beta2_acting", "dgro_fig2_beta", "dgro_fig3_methods",
             "01_miniature_map")


def _runs(cfg, store: Path, archive: Path, train: bool):
    """The runs of ``cfg``'s sweep, restored from the archive (or trained when ``train``), labelled by their arm
    (``point``: extra.labels, one per sweep entry in order, or the sweep values where the params have no labels);
    their greedy second evaluation; the base model's sampled and greedy accuracy in points."""
    from dgro_lib.analysis.probes import label_points
    from dgro_lib.papers.learning import arm_labeler
    from dgro_lib.config import expand_sweep
    from dgro_lib.runs.archive import archive_runs
    from dgro_lib.runs.experiment import evaluate_runs, run_experiment
    from dgro_lib.runs.store import run_key

    keys = [run_key(concrete, seed) for _, seed, concrete in expand_sweep(cfg)]
    missing = [k for k in keys if not (store / k / "final_eval.json").is_file()
               and not (archive / k / "final_eval.json").is_file()]
    if missing and not train:
        sys.exit(f"{len(missing)} of {len(keys)} runs of {cfg.name} are neither in {store} nor in {archive} "
                 f"(e.g. {missing[0]}); pass --train to train them")
    greedy_protocol = cfg.knobs.greedy_eval.overrides()
    result = run_experiment(cfg, store.parent / cfg.name, store=store, archive=archive,
                            evaluations=[(greedy_protocol, None)])
    if train:  # every run of the plan into the archive (a run archived already is refreshed in place)
        archive_runs(store, archive, keys)
    labelled = label_points(result, list(cfg.sweep), labeler=arm_labeler(cfg))  # labels, else the sweep values
    greedy = evaluate_runs(result, cfg, greedy_protocol)  # computed beside the training: read back
    base = {"sampled_base": 100 * result.base["summary"]["accuracy"],
            "greedy_base": 100 * float(greedy.loc[greedy["run"] == "base", "accuracy"].iloc[0])}
    return labelled, greedy, base


def per_run_figures(labelled, greedy: pd.DataFrame, max_steps: int) -> pd.DataFrame:
    """One row per run (its ``arm`` and ``seed``): :func:`dgro_lib.analysis.learning.run_learning`'s figures under
    this script's names, and the run's greedy accuracy (``greedy``: the second evaluation, a row per run)."""
    from dgro_lib.analysis.learning import run_learning

    fig = run_learning(labelled, max_steps=max_steps).merge(
        greedy[["run", "accuracy"]].rename(columns={"accuracy": "greedy"}), on="run")
    return pd.DataFrame({"arm": fig["point"], "seed": fig["seed"], "sampled_final": fig["final"],
                         "speed": fig["speed"], "train_first10": fig["train_accuracy_first"],
                         "train_last10": fig["train_accuracy_last"], "greedy_final": 100 * fig["greedy"],
                         "len_first10": fig["length_first"], "len_last10": fig["length_last"],
                         "ent_first10": fig["entropy_first"], "ent_last10": fig["entropy_last"],
                         "minutes": fig["minutes"]})


def arm_table(per_run: pd.DataFrame, base: dict) -> pd.DataFrame:
    """One row per arm of :func:`per_run_figures`' table: the means over its seeds, the spreads, the rises and the
    MDEs against the first arm."""
    rows = []
    arms = list(dict.fromkeys(per_run["arm"]))
    first = per_run[per_run["arm"] == arms[0]]
    for arm in arms:
        g = per_run[per_run["arm"] == arm]
        row = {"arm": arm, "seeds": len(g)}
        for col in ("sampled_final", "speed", "train_first10", "train_last10", "greedy_final", "len_first10",
                    "len_last10", "ent_first10", "ent_last10", "minutes"):
            row[col] = g[col].mean()
        row["sd_final"], row["sd_speed"] = g["sampled_final"].std(), g["speed"].std()
        row.update(base)
        row["sampled_rise"] = row["sampled_final"] - row["sampled_base"]
        row["train_rise"] = row["train_last10"] - row["train_first10"]
        row["minutes_max"] = g["minutes"].max()
        for col, short in (("speed", "speed"), ("sampled_final", "final")):
            if arm == arms[0]:
                continue
            # the run-level comparison the notebooks' claims use, seed for seed on the seeds both arms hold
            ga, gb = g.sort_values("seed"), first.sort_values("seed")
            a, b, paired = seed_pairs(ga[col].to_numpy(), ga["seed"], gb[col].to_numpy(), gb["seed"])
            est = compare(a, b, scale=1.0, paired=paired)
            row.update({f"d_{short}": est.estimate, f"d_{short}_lo": est.ci_low, f"d_{short}_hi": est.ci_high,
                        f"mde_{short}": est.mde})
        row["meets_targets"] = bool(row["sampled_rise"] >= TARGETS["sampled_rise"]
                                    and row["train_rise"] >= TARGETS["train_rise"]
                                    and row["minutes_max"] <= TARGETS["minutes"])
        rows.append(row)
    return pd.DataFrame(rows)


def median_arm(table: pd.DataFrame) -> pd.Series:
    """The arm with the median sampled rise (the lower of the two middle arms when their number is even: the
    conservative reading of "the median arm meets the targets")."""
    ordered = table.sort_values("sampled_rise", kind="stable").reset_index(drop=True)
    return ordered.iloc[(len(ordered) - 1) // 2]


def main(argv: list[str] | None = None) -> pd.DataFrame:
    """Parse ``argv``, restore (or train) the runs, print the table and return it."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--params", default=str(REPO / "bench" / "kk_pilot.yaml"))
    ap.add_argument("--notebook", default=None,
                    help=f"read a notebook's runs instead (params/cpu/NAME.yaml; one of {', '.join(NOTEBOOKS)})")
    ap.add_argument("--train", action="store_true", help="train the runs the store and the archive lack")
    ap.add_argument("--seeds", default=None,
                    help="read these seeds instead of the params' (e.g. 0-15, or 0,1,2): every seed Figs. 1 and 3 hold")
    ap.add_argument("--csv", default=None, help="also write the table here")
    ap.add_argument("--figure", default=None, help="also draw every arm's curves: FIGURE.png beside FIGURE.csv")
    ap.add_argument("--store", default=str(REPO / "outputs" / "cpu" / "runs"),
                    help="the run store the runs are restored into (or trained in); default: the cpu profile's")
    args = ap.parse_args(argv)
    from dgro_lib.config.load import load_config

    if args.notebook is not None and args.notebook not in NOTEBOOKS:
        sys.exit(f"--notebook {args.notebook!r}: not one of the K&K learning notebooks {', '.join(NOTEBOOKS)}")
    cfg = load_config(REPO / "params" / "cpu" / f"{args.notebook}.yaml" if args.notebook else args.params)
    if args.seeds:
        from dgro_lib.config import apply_overrides

        lo, _, hi = args.seeds.partition("-")
        seeds = list(range(int(lo), int(hi) + 1)) if hi else [int(x) for x in args.seeds.split(",")]
        cfg = apply_overrides(cfg, {"seeds": seeds}, source="--seeds")
    store, archive = Path(args.store), REPO / "reference" / "cpu" / "runs"
    labelled, greedy, base = _runs(cfg, store, archive, args.train)
    table = arm_table(per_run_figures(labelled, greedy, cfg.train.max_steps), base)
    pd.set_option("display.width", 250)
    cols = ["arm", "seeds", "sampled_base", "sampled_final", "sampled_rise", "sd_final", "speed", "sd_speed",
            "train_first10", "train_last10", "train_rise", "greedy_base", "greedy_final", "len_first10",
            "len_last10", "ent_first10", "ent_last10", "minutes", "minutes_max", "d_speed", "d_speed_lo",
            "d_speed_hi", "mde_speed", "d_final", "d_final_lo", "d_final_hi", "mde_final", "meets_targets"]
    print(table.reindex(columns=cols).round(3).to_string(index=False))  # one arm: no contrasts, NaN
    print(f"targets (arms that meet them all: {', '.join(table.loc[table['meets_targets'], 'arm']) or 'none'}): "
          f"sampled rise >= {TARGETS['sampled_rise']:g} points, training-accuracy rise >= "
          f"{TARGETS['train_rise']:g} points, <= {TARGETS['minutes']:g} min a run (one core)")
    mid = median_arm(table)
    print(f"median arm (by sampled rise, of {len(table)}): {mid['arm']}: sampled rise {mid['sampled_rise']:+.1f}, "
          f"training-accuracy rise {mid['train_rise']:+.1f}, at most {mid['minutes_max']:.1f} min a run -> "
          f"{'meets' if mid['meets_targets'] else 'does not meet'} the targets")
    if args.figure:
        from dgro_lib.analysis.plots import learning_bands_figure, learning_curves, save_figure

        curves = learning_curves(labelled, by="point", smooth_window=5)  # the notebooks' curves and figure
        arms = list(dict.fromkeys(table["arm"]))
        fig = learning_bands_figure(curves, hue="point", order=arms, dashed=[a for a in arms if a.startswith("control")],
                                    title=f"{cfg.name}: the K&K miniature under RL (mean of the seeds, 95 % band)")
        print("figure:", *save_figure(fig, curves, args.figure))
    if args.csv:
        Path(args.csv).parent.mkdir(parents=True, exist_ok=True)
        table.to_csv(args.csv, index=False)
    return table


if __name__ == "__main__":
    main()
