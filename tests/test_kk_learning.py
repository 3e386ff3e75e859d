"""bench/kk_learning.py on a made-up experiment: every figure against a computation written here from its definition,
and the pilot's params (arms named by their labels, the targets it checks)."""

import json
import math
import random
from types import SimpleNamespace

import pandas as pd
import pytest

from bench_scripts import load


def _run(folder, rng, *, final, curve, train, minutes_train, max_steps=40):
    """One finished run's store folder (what the wall time is read from) and its rows of the experiment's frames."""
    (folder / "evals").mkdir(parents=True)
    (folder / "final_eval.json").write_text(json.dumps({"summary": {"accuracy": final, "wall_s": 30.0}}))
    (folder / "evals" / "g.json").write_text(json.dumps({"protocol": {"temperature": 0.0},
                                                         "summary": {"accuracy": 0.5, "wall_s": 12.0}}))
    (folder / "manifest.json").write_text(json.dumps({"train_seconds": 60.0 * minutes_train}))
    steps = list(range(10, max_steps, 10))
    heldout = pd.DataFrame({"step": steps + [max_steps], "accuracy": curve + [final], "subset": 5})
    metrics = pd.DataFrame({"step": range(1, max_steps + 1), "kk_outcome/correct": train,
                            "completions/mean_length": [rng.uniform(20, 200) for _ in train],
                            "entropy": [rng.uniform(0, 0.1) for _ in train],
                            "completions/clipped_ratio": [0.0 for _ in train]})
    return heldout, metrics


def test_every_figure_matches_its_definition(tmp_path):
    kl = load("kk_learning")
    rng = random.Random(0)
    frames = {"heldout": [], "metrics": [], "finals": [], "listing": [], "greedy": []}
    runs = {}
    for arm, lift in (("A", 0.3), ("B", 0.1)):
        for seed in range(3):
            key = f"{arm}{seed}"
            final = 0.2 + lift + 0.01 * seed + rng.uniform(-0.02, 0.02)
            curve = [rng.random() for _ in range(3)]
            train = [rng.random() * (0.5 if s < 20 else 1.0) for s in range(40)]
            heldout, metrics = _run(tmp_path / "runs" / key, rng, final=final, curve=curve, train=train,
                                    minutes_train=4 + seed)
            runs[key] = (final, curve, train, 4 + seed)
            tags = {"run": key, "seed": seed, "point": arm}
            frames["heldout"].append(heldout.assign(**tags))
            frames["metrics"].append(metrics.assign(**tags))
            frames["finals"].append({**tags, "accuracy": final, "correct": [1, 0, 1, 0, 1]})
            frames["listing"].append({"run": key, "path": f"runs/{key}"})
            frames["greedy"].append({"run": key, "accuracy": 0.4 + lift})
    pd.DataFrame(frames["listing"]).to_csv(tmp_path / "runs.csv", index=False)
    labelled = SimpleNamespace(heldout=pd.concat(frames["heldout"]), metrics=pd.concat(frames["metrics"]),
                               finals=pd.DataFrame(frames["finals"]), out_dir=tmp_path,
                               base={"correct": [1, 0, 0, 0, 0]})  # 20 % on the periodic evaluations' puzzles
    base = {"sampled_base": 20.0, "greedy_base": 10.0}
    per_run = kl.per_run_figures(labelled, pd.DataFrame(frames["greedy"]), 40)
    table = kl.arm_table(per_run, base).set_index("arm")

    def arm_values(arm, fn):
        return [fn(*runs[f"{arm}{s}"]) for s in range(3)]

    def mean(xs):
        return sum(xs) / len(xs)

    def var(xs):
        m = mean(xs)
        return sum((x - m) ** 2 for x in xs) / (len(xs) - 1)

    for arm in ("A", "B"):
        finals = arm_values(arm, lambda f, c, t, m: 100 * f)
        speeds = arm_values(arm, lambda f, c, t, m: 100 * mean(c))  # the periodic curve, final step excluded
        first = arm_values(arm, lambda f, c, t, m: 100 * mean(t[:10]))
        last = arm_values(arm, lambda f, c, t, m: 100 * mean(t[-10:]))
        minutes = arm_values(arm, lambda f, c, t, m: m + (30.0 + 12.0) / 60)  # periodic ones are in m
        r = table.loc[arm]
        assert r["sampled_final"] == pytest.approx(mean(finals))
        assert r["sampled_rise"] == pytest.approx(mean(finals) - 20.0)
        assert r["speed"] == pytest.approx(mean(speeds))
        assert r["sd_speed"] == pytest.approx(math.sqrt(var(speeds)))
        assert r["train_rise"] == pytest.approx(mean(last) - mean(first))
        assert r["minutes"] == pytest.approx(mean(minutes))
        assert r["minutes_max"] == pytest.approx(max(minutes))
        assert r["greedy_final"] == pytest.approx(100 * (0.4 + (0.3 if arm == "A" else 0.1)))
    # B - A seed for seed (both arms hold seeds 0-2): the per-seed differences' mean, t interval at 2 df
    fa, fb = arm_values("A", lambda f, c, t, m: 100 * f), arm_values("B", lambda f, c, t, m: 100 * f)
    d = [b - a for a, b in zip(fa, fb)]
    half = 4.302652729911275 * math.sqrt(var(d) / 3)  # t(0.975, 2 df)
    assert table.loc["B", "d_final"] == pytest.approx(mean(d))
    assert table.loc["B", "d_final_lo"] == pytest.approx(mean(d) - half, rel=1e-6)
    assert table.loc["B", "d_final_hi"] == pytest.approx(mean(d) + half, rel=1e-6)
    assert table.loc["B", "mde_final"] > 0
    assert math.isnan(table.loc["A", "d_final"])  # the first arm is what the others are compared with
    # A rises 30+ points; its training rise and minutes decide whether it meets every target
    a = table.loc["A"]
    expected = a["sampled_rise"] >= 20 and a["train_rise"] >= 15 and a["minutes_max"] <= 8
    assert bool(a["meets_targets"]) == bool(expected)
    assert not table.loc["B", "meets_targets"]  # a 10-point rise misses the 20-point target

    # the curves: step 0 is the base, the periodic points and the final are each run's, and the figure's lines are
    # the seed means at every step (the control dashed)
    from dgro_lib.analysis.plots import LEARNING_BAND_PANELS, learning_bands_figure, learning_curves

    curves = learning_curves(labelled, by="point", smooth_window=5)  # what the script draws with --figure
    acc = curves.dropna(subset=["accuracy"])
    assert set(acc.loc[acc["step"] == 0, "accuracy"]) == {0.2}
    a0 = acc[(acc["point"] == "A") & (acc["seed"] == 0)].set_index("step")["accuracy"]
    final, curve, _, _ = runs["A0"]
    assert list(a0.loc[[10, 20, 30, 40]]) == pytest.approx(curve + [final])
    fig = learning_bands_figure(curves, hue="point", order=["A", "B"], dashed=["B"])
    line_a, line_b = fig.axes[0].get_lines()[:2]
    means = 100 * acc[acc["point"] == "A"].groupby("step")["accuracy"].mean()  # the figure draws percent
    assert list(line_a.get_ydata()) == pytest.approx(list(means))
    assert line_b.get_linestyle() == "--" and line_a.get_linestyle() == "-"
    assert len(fig.axes) == len(LEARNING_BAND_PANELS)


def test_the_pilot_meets_its_targets_read_from_the_run_archive(tmp_path):
    """From a clean clone: the archived pilot runs restore into a fresh store (nothing trains), both paper arms meet
    every learning target, and the control at a quarter of the learning rate is detected as slower."""
    kl = load("kk_learning")
    table = kl.main(["--store", str(tmp_path / "runs")]).set_index("arm")
    for arm in ("DGRO (1, 0.1) [-3,3]", "GRPO [-3,3]"):
        assert table.loc[arm, "meets_targets"], table.loc[arm]
    control = table.loc["control: DGRO (1, 0.1) [-3,3] at lr / 4"]
    assert control["d_speed_hi"] < 0  # slower, with a run-level interval that excludes 0
    assert not list((tmp_path / "runs").glob("*/trainer"))  # restored, not trained: no checkpoint anywhere


def test_the_pilot_params_name_every_arm_and_keep_a_control():
    from dgro_lib.config import expand_sweep, load_config
    from bench_scripts import BENCH

    cfg = load_config(BENCH / "kk_pilot.yaml")
    points = {json.dumps(p, sort_keys=True) for p, _, _ in expand_sweep(cfg)}
    assert len(points) == len(cfg.knobs.labels)
    lrs = {json.loads(p)["train.learning_rate"] for p in points}
    assert min(lrs) == pytest.approx(max(lrs) / 4)  # the positive control learns at a quarter of the rate
    assert cfg.eval.temperature == 1.0 and cfg.knobs.greedy_eval.temperature == 0.0
    assert cfg.model.embedded_preset == "mini_guess"


def test_a_notebooks_runs_are_read_with_their_sweep_labels_and_a_median_arm(tmp_path, capsys):
    """--notebook reads a notebook's archived runs (Fig. 2 has no labels: its arms are named by their sweep values)
    and names the median arm by sampled rise, the lower middle one when the number of arms is even."""
    kl = load("kk_learning")
    table = kl.main(["--notebook", "dgro_fig2_beta", "--store", str(tmp_path / "runs")])
    assert set(table["arm"]) == {"beta1=1.0, beta2=0.0", "beta1=1.0, beta2=0.01", "beta1=1.0, beta2=0.1",
                                 "beta1=1.0, beta2=1.0", "beta1=0.1, beta2=0.01"}
    mid = kl.median_arm(table)
    assert mid["sampled_rise"] == sorted(table["sampled_rise"])[2]
    assert f"median arm (by sampled rise, of 5): {mid['arm']}:" in capsys.readouterr().out
    even = pd.DataFrame({"arm": list("abcd"), "sampled_rise": [4.0, 1.0, 3.0, 2.0]})
    assert kl.median_arm(even)["arm"] == "d"  # rises 1, 2, 3, 4: the lower middle one, 2
    with pytest.raises(SystemExit, match="--notebook 'dgro_fig9': not one of the K&K learning notebooks"):
        kl.main(["--notebook", "dgro_fig9"])


def test_a_params_file_of_one_arm_prints_its_figures_without_contrasts(tmp_path, capsys):
    """A params copy that trains one arm (a block of seeds for one point) has no arm to compare with: its table
    prints the contrast columns empty instead of failing on them."""
    import yaml

    kl = load("kk_learning")
    d = yaml.safe_load(open("params/cpu/dgro_fig2_beta.yaml"))
    (key, entries), = d["sweep"].items()
    d["sweep"] = {key: [[*entries[-1][:2], [0, 1]]]}  # (0.1, 0.01), seeds 0-1: archived
    (tmp_path / "one.yaml").write_text(yaml.safe_dump(d))
    table = kl.main(["--params", str(tmp_path / "one.yaml"), "--store", str(tmp_path / "runs")])
    assert list(table["arm"]) == ["beta1=0.1, beta2=0.01"] and list(table["seeds"]) == [2]
    out = capsys.readouterr().out
    assert "d_speed" in out and "median arm (by sampled rise, of 1)" in out
