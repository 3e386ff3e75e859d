"""bench/seed_variance.py on a made-up archive: each column against a loop written here from its definition."""

import json
import math
import random

import pandas as pd
import pytest

from bench_scripts import load


def _module():
    return load("seed_variance")


def _sd(xs):
    m = sum(xs) / len(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1))


def test_the_columns_match_their_definitions(tmp_path):
    sv = _module()
    rng = random.Random(0)
    n_items, n_sub, n_sampled, k, seeds = 60, 20, 30, 2, 5
    rows, greedy, periodic, fractions = [], [], [], []
    for s in range(seeds):
        key = f"run{s}"
        run = tmp_path / "runs" / key
        (run / "evals").mkdir(parents=True)
        p = 0.4 + 0.05 * s  # a shift shared across puzzles, plus single puzzles flipping
        correct = [rng.random() < p for _ in range(n_items)]
        acc_mid = rng.random()
        frac = [rng.randrange(k + 1) / k for _ in range(n_sampled)]
        (run / "final_eval.json").write_text(json.dumps({"summary": {}, "correct": correct}))
        (run / "evals" / "s.json").write_text(json.dumps({"protocol": {"temperature": 1.0, "n_samples": k},
                                                          "correct": frac}))
        pd.DataFrame({"step": [2, 6, 10], "subset": [n_sub, n_sub, n_items],
                      "accuracy": [0.0, acc_mid, sum(correct) / n_items]}).to_csv(run / "heldout.csv", index=False)
        rows.append({"key": key, "sweep_point": '{"a": 1}'})
        greedy.append([float(c) for c in correct])
        periodic.append(acc_mid)
        fractions.append(frac)
    (tmp_path / "nb").mkdir()
    pd.DataFrame(rows).to_csv(tmp_path / "nb" / "runs.csv", index=False)
    sv.REFERENCE = tmp_path
    row = sv.arm_table("nb", draws=8).iloc[0]

    acc = [sum(c) / n_items for c in greedy]
    assert row["sd_greedy_all"] == pytest.approx(_sd(acc) * 100)
    assert row["sd_greedy"] == pytest.approx(_sd([sum(c[:n_sampled]) / n_sampled for c in greedy]) * 100)
    flips = sum(_sd([greedy[s][i] for s in range(seeds)]) ** 2 for i in range(n_items)) / n_items / n_items
    assert row["sd_item_flips"] == pytest.approx(math.sqrt(flips) * 100)
    assert row["sd_greedy_inf"] == pytest.approx(math.sqrt(max(_sd(acc) ** 2 - flips, 0)) * 100)
    # the last checkpoints in the second half: step 6 (periodic) and the last step read on the same 20 puzzles
    last = [sum(c[:n_sub]) / n_sub for c in greedy]
    assert row["ckpts"] == 2
    assert row["sd_last_sub"] == pytest.approx(_sd(last) * 100)
    assert row["sd_ckpt_avg_sub"] == pytest.approx(_sd([(a + b) / 2 for a, b in zip(periodic, last)]) * 100)
    assert row["sd_sampled"] == pytest.approx(_sd([sum(f) / n_sampled for f in fractions]) * 100)
    dec = sum(sum(k / (k - 1) * f * (1 - f) for f in fr) / (k * n_sampled ** 2) for fr in fractions) / seeds
    assert row["sd_decode"] == pytest.approx(math.sqrt(dec) * 100)
