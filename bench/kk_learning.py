"""Does RL learn on the K&K miniature? Every arm's learning figures, read from the run archive (or trained first).

The arms are those of a params file (default ``bench/kk_pilot.yaml``: GRPO and DGRO (1, 0.1) from the
``mini_guess`` base, and the positive control at a quarter of the learning rate). For each arm, over its seeds
(mean, with the between-seed s.d.):

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
  the per-run values, read seed for seed when both arms hold the same seeds, as the notebooks' claims are), and
  ``mde_speed`` / ``mde_final``, the minimum detectable difference of these seeds (80 % power, two-sided 5 %), in
  points.

The targets this miniature was built for (a sampled rise of at least 20 points, a training-accuracy rise of at least
15, at most 8 minutes a run) are checked per arm and printed beside the figures. Nothing is trained unless
``--train`` is given: then the runs the store and the archive lack are trained through the cpu run store (two
processes; each is checkpointed and resumes) and archived into ``reference/cpu/runs``.

    .venv/bin/python bench/kk_learning.py [--params bench/kk_pilot.yaml] [--train] [--store DIR]
        [--csv outputs/bench/kk_learning.csv] [--figure outputs/bench/kk_learning]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import pandas as pd

from dgro_lib.report.inference import compare

REPO = Path(__file__).resolve().parents[1]
TARGETS = {"sampled_rise": 20.0, "train_rise": 15.0, "minutes": 8.0}


def _runs(cfg, store: Path, archive: Path, train: bool) -> tuple[pd.DataFrame, dict]:
    """One row per run of ``cfg``'s sweep (its arm label, seed, store folder and greedy accuracy; restored from the
    archive, or trained when ``train``), and the base model's sampled and greedy accuracy in points."""
    from dgro_lib.runs.archive import archive_runs
    from dgro_lib.runs.experiment import evaluate_runs, run_experiment
    from dgro_lib.runs.store import run_id_for, run_key
    from dgro_lib.config import expand_sweep

    jobs = [(point, seed, run_key(concrete, seed)) for point, seed, concrete in expand_sweep(cfg)]
    missing = [k for _, _, k in jobs if not (store / k / "final_eval.json").is_file()
               and not (archive / k / "final_eval.json").is_file()]
    if missing and not train:
        sys.exit(f"{len(missing)} of {len(jobs)} runs of {cfg.name} are neither in {store} nor in {archive} "
                 f"(e.g. {missing[0]}); pass --train to train them")
    out = store.parent / cfg.name
    result = run_experiment(cfg, out, store=store, archive=archive, evaluations=[(cfg.knobs.greedy_eval.overrides(), None)])
    if train:  # every run of the plan into the archive (a run archived already is refreshed in place)
        archive_runs(store, archive, [k for _, _, k in jobs])
    greedy = evaluate_runs(result, cfg, cfg.knobs.greedy_eval.overrides())  # computed beside the training: read back
    listing = pd.DataFrame([{**point, "seed": seed, "key": key, "run": run_id_for(point, seed)}
                            for point, seed, key in jobs])
    # the arms by their labels (extra.labels, one per sweep entry in order)
    points = list(dict.fromkeys(json.dumps(p, sort_keys=True) for p, _, _ in jobs))
    names = dict(zip(points, cfg.knobs.labels, strict=True))
    listing["arm"] = [names[json.dumps(p, sort_keys=True)] for p, _, _ in jobs]
    listing = listing.merge(greedy[["run", "accuracy"]].rename(columns={"accuracy": "greedy"}), on="run")
    base = {"sampled_base": 100 * result.base["summary"]["accuracy"],
            "greedy_base": 100 * float(greedy.loc[greedy["run"] == "base", "accuracy"].iloc[0])}
    return listing, base


def _mean10(metrics: pd.DataFrame, col: str, last: bool) -> float:
    m = metrics.sort_values("step")
    return float((m.tail(10) if last else m.head(10))[col].mean())


def run_figures(run_dir: Path, cfg) -> dict:
    """One run's figures (see the module docstring), from its store folder."""
    final = json.loads((run_dir / "final_eval.json").read_text())
    manifest = json.loads((run_dir / "manifest.json").read_text())
    metrics = pd.read_csv(run_dir / "metrics.csv")
    curve = pd.read_csv(run_dir / "heldout.csv")
    during = curve[curve["step"] < cfg.train.max_steps]
    evals = [json.loads(p.read_text()) for p in sorted((run_dir / "evals").glob("*.json"))]
    eval_wall = float(final["summary"].get("wall_s", 0.0))  # train_seconds holds the periodic evaluations
    eval_wall += sum(float(e["summary"].get("wall_s", 0.0)) for e in evals)
    return {
        "sampled_final": 100 * final["summary"]["accuracy"],
        "speed": 100 * float(during["accuracy"].mean()),
        "train_first10": 100 * _mean10(metrics, "kk_outcome/correct", last=False),
        "train_last10": 100 * _mean10(metrics, "kk_outcome/correct", last=True),
        "len_first10": _mean10(metrics, "completions/mean_length", last=False),
        "len_last10": _mean10(metrics, "completions/mean_length", last=True),
        "ent_first10": _mean10(metrics, "entropy", last=False),
        "ent_last10": _mean10(metrics, "entropy", last=True),
        "minutes": (float(manifest.get("train_seconds", math.nan)) + eval_wall) / 60,
    }


def arm_curves(listing: pd.DataFrame, base: dict, store: Path, cfg) -> pd.DataFrame:
    """Per run and step: held-out sampled accuracy (points; step 0 is the base model and the last step the final
    evaluation, on all held-out puzzles; the steps between are the periodic evaluations on the first
    ``train.eval_subset``), and the rollouts' training accuracy (points), length and entropy, each a 5-step mean."""
    frames = []
    for r in listing.itertuples():
        run = store / r.key
        h = pd.read_csv(run / "heldout.csv")[["step", "accuracy"]]
        h = pd.concat([pd.DataFrame({"step": [0], "accuracy": [base["sampled_base"] / 100]}), h])
        m = pd.read_csv(run / "metrics.csv").sort_values("step")
        m = pd.DataFrame({"step": m["step"], "train_accuracy": m["kk_outcome/correct"],
                          "response_length": m["completions/mean_length"], "entropy": m["entropy"]})
        m.iloc[:, 1:] = m.iloc[:, 1:].rolling(5, min_periods=1, center=True).mean()
        frame = h.merge(m, on="step", how="outer")
        frame[["accuracy", "train_accuracy"]] *= 100
        frames.append(frame.assign(arm=r.arm, seed=r.seed))
    return pd.concat(frames, ignore_index=True)


CURVE_PANELS = {"accuracy": "held-out pass@1, T = 1 (%)", "train_accuracy": "training accuracy (%, 5-step mean)",
                "response_length": "response length (tokens)", "entropy": "entropy (nats/token)"}


def arm_table(listing: pd.DataFrame, base: dict, store: Path, cfg) -> pd.DataFrame:
    """One row per arm: the means over its seeds, the spreads, the rises and the MDEs against the first arm."""
    per_run = pd.DataFrame([{"arm": r.arm, "seed": r.seed, "greedy_final": 100 * r.greedy,
                             **run_figures(store / r.key, cfg)} for r in listing.itertuples()])
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
            # the run-level comparison the notebooks' claims use, seed for seed when both arms hold the same seeds
            paired = sorted(g["seed"]) == sorted(first["seed"])
            est = compare(g.sort_values("seed")[col].to_numpy(), first.sort_values("seed")[col].to_numpy(),
                          scale=1.0, paired=paired)
            row.update({f"d_{short}": est.estimate, f"d_{short}_lo": est.ci_low, f"d_{short}_hi": est.ci_high,
                        f"mde_{short}": est.mde})
        row["meets_targets"] = bool(row["sampled_rise"] >= TARGETS["sampled_rise"]
                                    and row["train_rise"] >= TARGETS["train_rise"]
                                    and row["minutes_max"] <= TARGETS["minutes"])
        rows.append(row)
    return pd.DataFrame(rows)


def main(argv: list[str] | None = None) -> pd.DataFrame:
    """Parse ``argv``, restore (or train) the runs, print the table and return it."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--params", default=str(REPO / "bench" / "kk_pilot.yaml"))
    ap.add_argument("--train", action="store_true", help="train the runs the store and the archive lack")
    ap.add_argument("--csv", default=None, help="also write the table here")
    ap.add_argument("--figure", default=None, help="also draw every arm's curves: FIGURE.png beside FIGURE.csv")
    ap.add_argument("--store", default=str(REPO / "outputs" / "cpu" / "runs"),
                    help="the run store the runs are restored into (or trained in); default: the cpu profile's")
    args = ap.parse_args(argv)
    from dgro_lib.config.load import load_config

    cfg = load_config(args.params)
    store, archive = Path(args.store), REPO / "reference" / "cpu" / "runs"
    listing, base = _runs(cfg, store, archive, args.train)
    table = arm_table(listing, base, store, cfg)
    pd.set_option("display.width", 250)
    cols = ["arm", "seeds", "sampled_base", "sampled_final", "sampled_rise", "sd_final", "speed", "sd_speed",
            "train_first10", "train_last10", "train_rise", "greedy_base", "greedy_final", "len_first10",
            "len_last10", "ent_first10", "ent_last10", "minutes", "minutes_max", "d_speed", "d_speed_lo",
            "d_speed_hi", "mde_speed", "d_final", "d_final_lo", "d_final_hi", "mde_final", "meets_targets"]
    print(table[cols].round(3).to_string(index=False))
    print(f"targets (arms that meet them all: {', '.join(table.loc[table['meets_targets'], 'arm']) or 'none'}): "
          f"sampled rise >= {TARGETS['sampled_rise']:g} points, training-accuracy rise >= "
          f"{TARGETS['train_rise']:g} points, <= {TARGETS['minutes']:g} min a run (one core)")
    if args.figure:
        from dgro_lib.analysis.plots import arm_bands_figure, save_figure

        curves = arm_curves(listing, base, store, cfg)
        arms = list(dict.fromkeys(listing["arm"]))
        fig = arm_bands_figure(curves, CURVE_PANELS, hue="arm", order=arms,
                               dashed=[a for a in arms if a.startswith("control")],
                               title=f"{cfg.name}: the K&K miniature under RL (mean of the seeds, 95 % band)")
        print("figure:", *save_figure(fig, curves, args.figure))
    if args.csv:
        Path(args.csv).parent.mkdir(parents=True, exist_ok=True)
        table.to_csv(args.csv, index=False)
    return table


if __name__ == "__main__":
    main()
