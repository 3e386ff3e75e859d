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
