"""The Adam reward-scale check on hand-made rollouts: the argument of docs/design.md (reward scale under Adam), re-derived on a tiny model."""

import json
import math

import pandas as pd
import pytest
import torch

from dgro_lib.analysis import adam_scale_check, base_model_info, base_model_summary, reward_range_verdict
from dgro_lib.evaluate import paired_improvement_table
from dgro_lib.data import kk
from dgro_lib.data.trace import completion_text
from dgro_lib.models import EMBEDDED_PRESETS, build_embedded_tokenizer, build_tiny_model

torch.set_num_threads(1)


def test_reward_scale_under_adam_and_sgd(monkeypatch):
    tokenizer = build_embedded_tokenizer()
    model = build_tiny_model(EMBEDDED_PRESETS["ci"], tokenizer=tokenizer)
    records = kk.generate(2, 2, seed=3)
    G = 4

    def fake_sample(model, tokenizer, prompts, *, n, **kw):
        # per prompt: two correct completions, one with the answer flipped, one with bad format
        out = []
        for r in records:
            good = completion_text(r)
            flipped = good.replace("knight", "KNAVE").replace("knave", "knight").replace("KNAVE", "knave")
            texts = [good, good, flipped, "no tags at all"][:n]
            out += [tokenizer(" " + t, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
                    for t in texts]
        return out

    monkeypatch.setattr("dgro_lib.analysis.sample", fake_sample)
    df = adam_scale_check(model, tokenizer, records, num_generations=G, updates=3, beta2=0.1, lr=1e-3,
                          max_new_tokens=8).set_index(["comparison", "optimizer"])
    same = df.loc[("[-5,5] vs [-1,1], beta2=0", "adam")]
    assert same["ratio"] == pytest.approx(1.0, abs=1e-3) and same["cosine"] == pytest.approx(1.0, abs=1e-4)
    equiv = df.loc[("[-5,5] beta2=0.1 vs [-1,1] beta2=0.02", "adam")]
    assert equiv["ratio"] == pytest.approx(1.0, abs=1e-3) and equiv["cosine"] == pytest.approx(1.0, abs=1e-4)
    sgd = df.loc[("[-5,5] vs [-1,1], beta2=0", "sgd")]
    # exactly 5 for the first SGD step; later steps see different gradients (the weights moved 5x further)
    assert sgd["ratio"] == pytest.approx(5.0, rel=0.05) and sgd["cosine"] > 0.99
    differ = df.loc[("[-5,5] vs [-1,1], beta2=0.1", "adam")]
    assert abs(differ["ratio"] - 1.0) > 1e-3 or differ["cosine"] < 1 - 1e-4
    var = df.attrs["reward_variance"]
    assert var["[-5,5]"] == pytest.approx(25 * var["[-1,1]"])


# ------------------------------------------------------------------ Figure 1's verdict, the base model's tables


def _finals(accs: dict[str, list[float]]) -> pd.DataFrame:
    return pd.DataFrame([{"reward.scheme": s, "seed": i, "accuracy": a} for s, v in accs.items()
                         for i, a in enumerate(v)])


def _pooled(rows: dict[str, tuple[float, float]]) -> pd.DataFrame:
    return pd.DataFrame([{"reward.scheme": s, "seed": "pooled", "delta_points": d, "z": z}
                         for s, (d, z) in rows.items()])


def test_reward_range_verdict_within_seed_noise():
    finals = _finals({"[-1,1]": [0.40, 0.44], "[-3,3]": [0.50, 0.50], "[-5,5]": [0.43, 0.45]})
    table = _pooled({"[-1,1]": (2.0, 1.5), "[-3,3]": (10.0, 4.0), "[-5,5]": (4.0, 2.5)})
    v = reward_range_verdict(table, finals)
    # means 0.42 / 0.50 / 0.44, s.d. (ddof 1) 0.04/sqrt2 / 0 / 0.02/sqrt2: gap 2 points <= 2.83 points
    assert v.gap_points == pytest.approx(2.0) and v.noise_points == pytest.approx(4 / math.sqrt(2))
    assert v.within_noise is True
    t = v.per_scheme.set_index("reward.scheme")
    assert list(t.index) == ["[-1,1]", "[-3,3]", "[-5,5]"]
    assert t.loc["[-5,5]", "final_mean"] == pytest.approx(0.44)
    assert t.loc["[-1,1]", "final_std"] == pytest.approx(0.04 / math.sqrt(2))
    assert (t.loc["[-3,3]", "delta_points"], t.loc["[-3,3]", "z"], t.loc["[-3,3]", "seeds"]) == (10.0, 4.0, 2)
    text = str(v)
    assert "[-3,3]: +10.00 points vs base (pooled McNemar z = +4.00)" in text
    assert "[-5,5] - [-1,1] final accuracy: +2.00 points; largest seed s.d. 2.83 points -> within seed noise" in text


def test_reward_range_verdict_beyond_noise_and_missing_scheme():
    finals = _finals({"[-1,1]": [0.40, 0.41], "[-5,5]": [0.50, 0.51]})
    v = reward_range_verdict(_pooled({"[-1,1]": (1.0, 0.5), "[-5,5]": (11.0, 5.0)}), finals)
    assert v.gap_points == pytest.approx(10.0) and v.within_noise is False
    assert "a difference larger than the seed s.d." in str(v)
    # one seed: s.d. is NaN, counted as 0 noise; with [-5,5] absent there is no gap to judge
    v = reward_range_verdict(_pooled({"[-1,1]": (1.0, 0.5)}), _finals({"[-1,1]": [0.4]}))
    assert v.gap_points is None and v.within_noise is None and "final accuracy" not in str(v)
    assert math.isnan(v.per_scheme.loc[0, "final_std"])


def test_reward_range_verdict_reads_the_paired_table():
    base = [False] * 6 + [True] * 4
    finals = pd.DataFrame([
        {"reward.scheme": "[-1,1]", "seed": 0, "correct": [True] + [False] * 5 + [True] * 4},  # +1
        {"reward.scheme": "[-5,5]", "seed": 0, "correct": [True] * 3 + [False] * 3 + [True] * 4},  # +3
    ]).assign(accuracy=lambda d: d["correct"].map(lambda c: sum(c) / len(c)))
    v = reward_range_verdict(paired_improvement_table(finals, base, by="reward.scheme"), finals)
    t = v.per_scheme.set_index("reward.scheme")
    assert t.loc["[-5,5]", "delta_points"] == pytest.approx(30.0)
    assert t.loc["[-5,5]", "z"] == pytest.approx(3 / math.sqrt(3))
    assert v.gap_points == pytest.approx(20.0) and v.within_noise is False  # one seed each: no noise estimate


def test_base_model_summary_matches_a_hand_count():
    greedy = pd.DataFrame({"people": [2, 3], "n": [8, 8], "greedy_accuracy": [0.5, 0.25],
                           "format_ok": [1.0, 0.75], "mean_length": [10.0, 12.0]})
    rates = pd.DataFrame({"people": [2, 2, 2, 2, 3, 3, 4],
                          "success_rate": [0.0, 0.5, 1.0, 1.0, 0.0, 0.0, 0.5]})
    s = base_model_summary(greedy, rates)
    expected = greedy.assign(sampled_accuracy=[0.625, 0.0], frac_all_wrong=[0.25, 1.0], frac_all_right=[0.5, 0.0])
    pd.testing.assert_frame_equal(s, expected)  # people 4 has no greedy row: dropped
    assert list(s.columns) == ["people", "n", "greedy_accuracy", "format_ok", "mean_length", "sampled_accuracy",
                               "frac_all_wrong", "frac_all_right"]  # the columns of base_model_accuracy.csv


def test_base_model_info_counts_parameters_and_reads_the_build_record(tmp_path):
    tokenizer = build_embedded_tokenizer()
    model = torch.nn.Linear(3, 2)  # 3*2 weights + 2 biases
    info = base_model_info(tmp_path, model, tokenizer)
    assert info == {"path": str(tmp_path), "parameters": 8, "vocabulary": len(tokenizer)}
    (tmp_path / "embedded.json").write_text(json.dumps({"config_hash": "abc", "versions": {"torch": "x"}}))
    info = base_model_info(tmp_path, model, tokenizer)
    assert info["config_hash"] == "abc" and "versions" not in info and info["parameters"] == 8


# --- DGRO Fig. 2: tests between grid points ---------------------------------------------------------------------


def _grid_finals(acc_by_point, n=400, seeds=(0, 1, 2), shared=0.9):
    """Synthetic finals: per (beta1, beta2) point and seed, a correctness vector whose accuracy is the given one; runs
    of one seed share most of their answers (as runs from one base do)."""
    import numpy as np

    from dgro_lib.analysis import point_labels

    rows = []
    for seed in seeds:
        rng = np.random.default_rng(seed)
        common = rng.random(n)
        for (b1, b2), acc in acc_by_point.items():
            own = np.random.default_rng(hash((seed, b1, b2)) % 2**32).random(n)
            u = np.where(np.random.default_rng(seed + 7).random(n) < shared, common, own)
            rows.append({"loss.kwargs.beta1": b1, "loss.kwargs.beta2": b2, "seed": seed, "run": f"{b1}-{b2}-{seed}",
                         "correct": list(u < acc), "accuracy": float((u < acc).mean())})
    finals = pd.DataFrame(rows)
    finals["point"] = point_labels(finals, ["loss.kwargs.beta1", "loss.kwargs.beta2"])
    return finals


def test_paired_between_points_matches_a_loop_reference():
    import math

    from dgro_lib.analysis import paired_between_points

    finals = _grid_finals({(1.0, 0.0): 0.5, (1.0, 0.1): 0.6})
    a, b = "beta1=1.0, beta2=0.1", "beta1=1.0, beta2=0.0"
    row = paired_between_points(finals, [(a, b)]).iloc[0]
    fixed = broken = 0
    for seed in (0, 1, 2):
        after = finals[(finals.point == a) & (finals.seed == seed)]["correct"].iloc[0]
        before = finals[(finals.point == b) & (finals.seed == seed)]["correct"].iloc[0]
        fixed += sum(1 for x, y in zip(before, after) if not x and y)
        broken += sum(1 for x, y in zip(before, after) if x and not y)
    assert (row.fixed, row.broken) == (fixed, broken)
    assert row.z == pytest.approx((fixed - broken) / math.sqrt(fixed + broken))
    with pytest.raises(ValueError, match="no seed has both"):
        paired_between_points(finals, [(a, "beta1=9, beta2=9")])


def test_entropy_fluctuation_is_the_sd_of_step_differences():
    from dgro_lib.analysis import entropy_fluctuation

    m = pd.DataFrame({"point": "p", "seed": 0, "run": "r", "step": [3, 1, 2, 4], "entropy": [1.0, 0.0, 2.0, 4.0]})
    # in step order: 0, 2, 1, 4 -> differences 2, -1, 3
    assert entropy_fluctuation(m)["fluctuation"].iloc[0] == pytest.approx(pd.Series([2.0, -1.0, 3.0]).std())


def test_beta_grid_verdicts_read_the_claims_from_the_numbers():
    from dgro_lib.analysis import beta_grid_verdicts

    acc = {(0.1, 0.0): 0.5, (0.1, 0.01): 0.55, (0.1, 0.1): 0.5, (0.1, 1.0): 0.45,
           (1.0, 0.0): 0.5, (1.0, 0.01): 0.65, (1.0, 0.1): 0.55, (1.0, 1.0): 0.5}
    finals = _grid_finals(acc)
    metrics = pd.DataFrame([{"point": p, "seed": s, "run": f"{p}-{s}", "step": k,
                             "entropy": (0.5 * (-1) ** k if p == "beta1=1.0, beta2=0.01" else 0.01 * k)}
                            for p in finals.point.unique() for s in (0, 1, 2) for k in range(20)])
    verdicts, tests = beta_grid_verdicts(finals, metrics)
    v = dict(zip(verdicts.statement, verdicts.verdict))
    assert v["smaller β2 → higher accuracy when β1 is not small (β1 = 1; DGRO §4.3, Theorem 3.3)"] == "reproduced"
    assert v["(β1, β2) = (1, 0.01) shows entropy fluctuations (DGRO Fig. 2c)"] == "reproduced"
    assert v["β2 = 0.01 against β2 = 0 at β1 = 1"] == "helps"
    assert v["β2 = 1 against β2 = 0 at β1 = 0.1"] == "hurts"
    # points of equal β2/β1 given equal accuracies: (0.1, 0.01) and (1, 0.1) both 55 %
    assert v["only β2/β1 matters under Adam: beta1=0.1, beta2=0.01 ≡ beta1=1.0, beta2=0.1"] == "holds"
    # reversed data reverse the first verdict
    flipped = {k: (1.05 - a if k[0] == 1.0 else a) for k, a in acc.items()}
    v2 = dict(zip(*beta_grid_verdicts(_grid_finals(flipped), metrics)[0][["statement", "verdict"]].T.values))
    assert v2["smaller β2 → higher accuracy when β1 is not small (β1 = 1; DGRO §4.3, Theorem 3.3)"] == "reversed"


def _size_evals():
    """Hand-made per-size evaluations: a base and two seeds of one DGRO range on 3 (trained) and 5 people, and a
    size (8) that nobody solves."""
    def rows(base, s0, s1):
        return pd.DataFrame([
            {"run": "base", "seed": float("nan"), "reward.scheme": None, "n": len(base),
             "accuracy": sum(base) / len(base), "correct": base},
            *[{"run": f"r{s}", "seed": s, "reward.scheme": "[-3,3]", "n": len(c), "accuracy": sum(c) / len(c),
               "correct": c} for s, c in ((0, s0), (1, s1))]])
    return {3: rows([1, 0, 0, 0, 1, 0], [1, 1, 1, 0, 1, 0], [1, 1, 0, 1, 1, 1]),
            5: rows([1, 1, 0, 0], [0, 1, 0, 0], [1, 0, 0, 0]),
            8: rows([0, 0], [0, 0], [0, 0])}


def _dgro_label(df):
    from dgro_lib.analysis import method_labels
    return method_labels(df, loss={"name": "dgro"})


def test_kk_size_table_against_a_hand_count():
    from dgro_lib.analysis import kk_size_table
    from dgro_lib.evaluate import mcnemar

    evals = _size_evals()
    long, tests = kk_size_table(evals, train_people=[3], labeler=_dgro_label)
    row = long[(long["model"] == "DGRO [-3,3]") & (long["people"] == 3)].iloc[0]
    assert row["pass@1"] == pytest.approx((4 / 6 + 5 / 6) / 2) and row["seeds"] == 2 and row["in_training"]
    assert row["std"] == pytest.approx(pd.Series([4 / 6, 5 / 6]).std(ddof=1))
    assert not long[long["people"] == 5]["in_training"].any()
    assert long[long["model"] == "base model"]["pass@1"].tolist() == [2 / 6, 0.5, 0.0]
    for people, ev in evals.items():  # pooled McNemar: the discordant counts summed over the seeds
        ms = [mcnemar(ev["correct"].iloc[0], c) for c in ev["correct"].iloc[1:]]
        fixed, broken = sum(m["fixed"] for m in ms), sum(m["broken"] for m in ms)
        t = tests[tests["people"] == people].iloc[0]
        assert (t["fixed"], t["broken"]) == (fixed, broken)
        assert t["z"] == pytest.approx((fixed - broken) / math.sqrt(fixed + broken) if fixed + broken else 0.0)
    with pytest.raises(ValueError, match="5 people: expected one base-model row"):
        kk_size_table({5: evals[5].iloc[1:]}, train_people=[3], labeler=_dgro_label)


def test_kk_size_wide_and_verdicts():
    from dgro_lib.analysis import DGRO_TABLE2_PAPER, kk_size_table, kk_size_wide, table2_verdicts

    long, tests = kk_size_table(_size_evals(), train_people=[3], labeler=_dgro_label)
    wide = kk_size_wide(long)
    assert list(wide.columns[:4]) == ["model", "3 people", "5 people", "8 people"]
    measured = wide[wide["source"] == "measured here"].set_index("model")
    assert measured.loc["DGRO [-3,3]", "3 people"] == "0.75 ± 0.12" and measured.loc["base model", "5 people"] == "0.50"
    assert float(measured.loc["base model", "Avg."]) == pytest.approx((2 / 6 + 0.5 + 0) / 3, abs=5e-4)
    quoted = wide[wide["source"] == "quoted from the paper"].set_index("model")
    assert len(quoted) == len(DGRO_TABLE2_PAPER) and quoted.loc["+DGRO [-5,5]", "8 people"] == "0.87"
    assert float(quoted.loc["+DGRO [-5,5]", "Avg."]) == pytest.approx((1.0 + 0.98 + 0.87) / 3, abs=5e-4)
    every_size = pd.DataFrame([{"model": "m", "people": p, "pass@1": 0.5, "std": 0.0, "seeds": 1, "in_training": True}
                               for p in (2, 3, 4, 5, 6, 7, 8)])
    full = kk_size_wide(every_size).set_index("model")
    assert float(full.loc["+DGRO [-5,5]", "Avg."]) == pytest.approx(0.969, abs=5e-4)  # the paper's own Avg.
    assert list(full.columns[:7]) == [f"{p} people" for p in (3, 4, 5, 6, 7, 2, 8)]
    verdicts = table2_verdicts(tests, long, z_threshold=1.0).set_index("people")
    assert verdicts.loc[8, "verdict"] == "not testable at this scale"
    assert verdicts.loc[3, "split"] == "in training" and verdicts.loc[5, "split"] == "out of distribution"
    assert verdicts.loc[3, "verdict"] == "improves"  # 5 fixed, 0 broken: z = 2.24 > 1
    assert verdicts.loc[5, "verdict"] in ("hurts", "no change")
