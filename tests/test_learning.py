"""dgro_lib.analysis.learning on a made-up experiment: every per-run figure against a computation written here from
its definition (the learning-speed metric, first/last-10 means, the entropy spike, the wall time)."""

import json
import random
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from dgro_lib.analysis.learning import arm_summary, entropy_spike, run_learning


def _experiment(tmp_path, *, max_steps=40, seeds=(0, 1, 2)):
    rng = random.Random(3)
    metrics, heldout, finals, listing, truth = [], [], [], [], {}
    for arm in ("A", "B"):
        for seed in seeds:
            run = f"{arm}-seed{seed}"
            folder = tmp_path / "runs" / run
            (folder / "evals").mkdir(parents=True)
            train_s, final_wall, second_wall = 60.0 * rng.uniform(3, 6), 30.0, 12.0
            (folder / "manifest.json").write_text(json.dumps({"train_seconds": train_s}))
            (folder / "final_eval.json").write_text(json.dumps({"summary": {"wall_s": final_wall}}))
            (folder / "evals" / "g.json").write_text(json.dumps({"summary": {"wall_s": second_wall}}))
            listing.append({"run": run, "path": f"runs/{run}", "seed": seed, "key": run})
            curve = [rng.random() for _ in range(10, max_steps, 10)]
            final = rng.random()
            heldout += [{"run": run, "step": s, "accuracy": a} for s, a in zip(range(10, max_steps, 10), curve)]
            heldout.append({"run": run, "step": max_steps, "accuracy": final})
            steps = range(1, max_steps + 1)
            cols = {c: [rng.random() for _ in steps] for c in ("kk_outcome/correct", "completions/mean_length",
                                                                 "entropy", "completions/clipped_ratio")}
            metrics += [{"run": run, "step": s, **{c: v[i] for c, v in cols.items()}} for i, s in enumerate(steps)]
            finals.append({"run": run, "seed": seed, "point": arm, "accuracy": final, "correct": [1, 0]})
            truth[run] = (curve, final, cols, (train_s + final_wall + second_wall) / 60)
    pd.DataFrame(listing).to_csv(tmp_path / "runs.csv", index=False)
    result = SimpleNamespace(metrics=pd.DataFrame(metrics), heldout=pd.DataFrame(heldout),
                             finals=pd.DataFrame(finals), out_dir=tmp_path)
    return result, truth


def test_every_per_run_figure_matches_its_definition(tmp_path):
    result, truth = _experiment(tmp_path)
    table = run_learning(result, max_steps=40).set_index("run")
    assert list(table["point"].unique()) == ["A", "B"]
    for run, (curve, final, cols, minutes) in truth.items():
        r = table.loc[run]
        assert r["speed"] == pytest.approx(100 * sum(curve) / len(curve))  # the final evaluation is not in it
        assert r["final"] == pytest.approx(100 * final)
        acc = cols["kk_outcome/correct"]
        assert r["train_accuracy_first"] == pytest.approx(100 * np.mean(acc[:10]))
        assert r["train_accuracy_rise"] == pytest.approx(100 * (np.mean(acc[-10:]) - np.mean(acc[:10])))
        assert r["length_last"] == pytest.approx(np.mean(cols["completions/mean_length"][-10:]))
        assert r["clipped_last"] == pytest.approx(100 * np.mean(cols["completions/clipped_ratio"][-10:]))
        ent = cols["entropy"]
        spike = max(ent[t] - float(np.median(ent[max(0, t - 4):t + 5])) for t in range(len(ent)))
        assert r["entropy_spike"] == pytest.approx(spike)
        assert r["minutes"] == pytest.approx(minutes)
    summary = arm_summary(run_learning(result, max_steps=40), by="point")
    assert summary.loc["A", "seeds"] == 3
    assert summary.loc["B", "speed"] == pytest.approx(table[table["point"] == "B"]["speed"].mean())
    assert summary.loc["B", "speed_sd"] == pytest.approx(table[table["point"] == "B"]["speed"].std())


def test_a_run_without_periodic_evaluations_or_rollout_columns_is_refused(tmp_path):
    result, _ = _experiment(tmp_path)
    only_final = SimpleNamespace(**{**vars(result), "heldout": result.heldout[result.heldout["step"] == 40]})
    with pytest.raises(ValueError, match="no periodic held-out evaluation before step 40.*eval_every"):
        run_learning(only_final, max_steps=40)
    no_clip = SimpleNamespace(**{**vars(result), "metrics": result.metrics.drop(columns="completions/clipped_ratio")})
    with pytest.raises(ValueError, match=r"lacks \['completions/clipped_ratio'\]"):
        run_learning(no_clip, max_steps=40)


def test_entropy_spike_is_the_largest_rise_above_the_running_median():
    assert entropy_spike(pd.Series([0.05] * 30)) == 0.0
    spiky = pd.Series([0.05] * 30)
    spiky[12] = 0.09
    assert entropy_spike(spiky) == pytest.approx(0.04)
