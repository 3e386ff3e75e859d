"""The Adam reward-scale check on hand-made rollouts: the argument of docs/design.md (reward scale under Adam), re-derived on a tiny model."""

import json
import math

import pandas as pd
import pytest
import torch

from dgro_lib.analysis.probes import adam_scale_check, base_model_info, base_model_summary
from dgro_lib.data import kk
from dgro_lib.data.kk.trace import completion_text
from dgro_lib.models import EMBEDDED_PRESETS, build_embedded_tokenizer
from dgro_lib.miniature import build_tiny_model

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

    monkeypatch.setattr("dgro_lib.analysis.probes.sample", fake_sample)
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

    from dgro_lib.analysis.probes import point_labels

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

    from dgro_lib.analysis.probes import paired_between_points

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
    from dgro_lib.analysis.learning import entropy_fluctuation

    # per-step entropy 0, 2, 1, 4 -> differences 2, -1, 3 (a loop reference: the sample s.d. by hand)
    d = [2.0, -1.0, 3.0]
    mean = sum(d) / 3
    assert entropy_fluctuation(pd.Series([0.0, 2.0, 1.0, 4.0])) == pytest.approx(
        math.sqrt(sum((x - mean) ** 2 for x in d) / 2))
    assert entropy_fluctuation(pd.Series([5.0, 6.0, 7.0, 8.0])) == pytest.approx(0.0)  # a steady trend
    assert math.isnan(entropy_fluctuation(pd.Series([1.0, 2.0])))


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
    from dgro_lib.analysis.probes import method_labels
    return method_labels(df, loss={"name": "dgro"})


def test_kk_size_table_against_a_hand_count():
    from dgro_lib.analysis.probes import kk_size_table
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


def test_kk_size_table_on_a_sampled_protocol_tests_the_fractions_and_mcnemar_refuses_them():
    """Under a sampled protocol each puzzle's ``correct`` is a fraction of samples: the pooled test is the paired z
    of the seed-averaged per-puzzle differences (a loop reference), and McNemar, which would count any partly right
    puzzle as right, refuses such input instead of miscounting it."""
    from dgro_lib.analysis.probes import kk_size_table
    from dgro_lib.evaluate import mcnemar

    base, s0, s1 = [0.5, 0.0, 1.0, 0.5, 0.0], [1.0, 0.5, 1.0, 0.5, 0.0], [0.5, 0.5, 1.0, 1.0, 0.5]
    ev = pd.DataFrame([
        {"run": "base", "seed": float("nan"), "reward.scheme": None, "n": 5, "accuracy": sum(base) / 5,
         "correct": base},
        *[{"run": f"r{k}", "seed": k, "reward.scheme": "[-3,3]", "n": 5, "accuracy": sum(c) / 5, "correct": c}
          for k, c in ((0, s0), (1, s1))]])
    long, tests = kk_size_table({3: ev}, train_people=[3], labeler=_dgro_label, sampled=True)
    d = [((a - b) + (c - b)) / 2 for a, c, b in zip(s0, s1, base)]
    mean = sum(d) / len(d)
    sd = math.sqrt(sum((x - mean) ** 2 for x in d) / (len(d) - 1))
    t = tests.iloc[0]
    assert t["z"] == pytest.approx(mean / (sd / math.sqrt(len(d))))
    assert t["delta_points"] == pytest.approx(100 * mean) and math.isnan(t["fixed"])
    assert long.set_index("model").loc["DGRO [-3,3]", "pass@1"] == pytest.approx((sum(s0) + sum(s1)) / 10)
    with pytest.raises(ValueError, match=r"mcnemar: before holds 0\.5, not a 0/1 correctness"):
        mcnemar(base, s0)
    with pytest.raises(ValueError, match="mcnemar: before holds 0.5"):
        kk_size_table({3: ev}, train_people=[3], labeler=_dgro_label)  # read as greedy: refused, not miscounted
    assert mcnemar([True, False, 1, 0], [1, 1, 0, 0])["fixed"] == 1  # booleans and 0/1 both count


def _map_result(tmp_path):
    """A two-point map (two seeds each) with a sampled protocol (per-puzzle fractions in ``finals``) and a greedy
    second evaluation, on four puzzles."""
    from dgro_lib.runs.experiment import ExperimentResult

    points = [{"train.learning_rate": 1e-4}, {"train.learning_rate": 3e-4}]
    sampled = {("a", 0): [1.0, 0.5, 0.5, 0.0], ("a", 1): [1.0, 1.0, 0.5, 0.0],
               ("b", 0): [0.0, 0.5, 0.0, 0.0], ("b", 1): [0.5, 0.0, 0.0, 0.0]}
    greedy = {("a", 0): [1, 1, 0, 0], ("a", 1): [1, 1, 1, 0], ("b", 0): [0, 0, 0, 0], ("b", 1): [1, 0, 0, 0]}
    finals, metrics, listing, g_rows = [], [], [], []
    for name, point in zip("ab", points):
        for seed in (0, 1):
            run = f"{name}{seed}"
            c = sampled[(name, seed)]
            finals.append({"run": run, "seed": seed, **point, "accuracy": sum(c) / 4, "correct": c,
                           "train_seconds": 60.0})
            g_rows.append({"run": run, "seed": seed, "base_model": "m", "correct": greedy[(name, seed)]})
            listing.append({"run": run, "seed": seed, "key": run, "path": run, "sweep_point": json.dumps(point)})
            metrics += [{"run": run, "seed": seed, **point, "step": s, "kk_outcome/correct": 0.1 * s,
                         "frac_reward_zero_std": 0.5, "entropy": 0.2} for s in (1, 2)]
    pd.DataFrame(listing).to_csv(tmp_path / "runs.csv", index=False)
    base = {"summary": {"accuracy": 0.375}, "correct": [0.5, 0.5, 0.5, 0.0]}
    result = ExperimentResult(metrics=pd.DataFrame(metrics), heldout=pd.DataFrame(), finals=pd.DataFrame(finals),
                              base=base, out_dir=tmp_path, bases={"m": base})
    greedy_frame = pd.DataFrame([{"run": "base", "seed": float("nan"), "base_model": "m", "correct": [1, 0, 1, 0]},
                                 *g_rows])
    return result, greedy_frame, ["train.learning_rate"]


def test_the_map_reads_a_sampled_protocol_beside_a_greedy_second_evaluation(tmp_path):
    from dgro_lib.analysis.probes import protocol_frame, rl_map_table
    from dgro_lib.evaluate import mcnemar
    from dgro_lib.papers.miniature_map import map_claims

    result, greedy, keys = _map_result(tmp_path)
    sampled = protocol_frame(result)
    assert sampled[sampled["run"] == "base"]["correct"].iloc[0] == [0.5, 0.5, 0.5, 0.0]
    table = rl_map_table(result, sampled, keys, greedy=greedy, window=1).set_index("point")
    a = table.loc["learning_rate=0.0001"]
    assert a["sampled_delta_points"] == pytest.approx(100 * ((2.0 + 2.5) / 2 / 4 - 0.375))
    fixed = sum(mcnemar([1, 0, 1, 0], greedy.set_index("run").loc[r, "correct"])["fixed"] for r in ("a0", "a1"))
    broken = sum(mcnemar([1, 0, 1, 0], greedy.set_index("run").loc[r, "correct"])["broken"] for r in ("a0", "a1"))
    assert a["greedy_z"] == pytest.approx((fixed - broken) / math.sqrt(fixed + broken))
    assert a["greedy_delta_points"] == pytest.approx(100 * ((2 + 3) / 2 / 4 - 0.5))
    assert list(table.index) == ["learning_rate=0.0001", "learning_rate=0.0003"]  # the params' order
    rows = {r["claim"]: r for r in map_claims(result, sampled, keys, greedy=greedy)}
    assert rows["learning_rate=0.0003: sampled change (points)"]["value"] == pytest.approx(
        100 * ((0.5 + 0.5) / 2 / 4 - 0.375))
    assert rows["learning_rate=0.0003: greedy change (points)"]["value"] == pytest.approx(100 * (0.5 / 4 - 0.5))
    with pytest.raises(ValueError, match="mcnemar"):  # the sampled protocol read as greedy is refused
        rl_map_table(result, sampled, keys, window=1)


def test_kk_size_wide_and_claims():
    from dgro_lib.analysis.probes import DGRO_TABLE2_PAPER, kk_size_table, kk_size_wide
    from dgro_lib.papers.dgro_table2_kk import claims
    from dgro_lib.report.verdict import judge_family

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
    rows = {r["claim"]: r for r in claims(_size_evals(), labeler=_dgro_label, train_people=[3])}
    at = {p: rows[f"DGRO [-3,3], {p} people: pass@1 gain over base (points)"] for p in (3, 5, 8)}
    assert at[3]["note"] == "in training" and at[5]["note"] == "out of distribution"
    assert at[3]["value"] == pytest.approx(100 * ((4 / 6 + 5 / 6) / 2 - 2 / 6)) and at[3]["seeds_a"] == 2
    verdicts, _ = judge_family([r["_est"] for r in at.values()], ["higher"] * 3,
                               untestable=[r["_untestable"] for r in at.values()])
    assert verdicts[2] == "not testable at this scale"  # nobody solves 8 people


def test_run_labels_take_the_configs_scheme_when_the_sweep_varies_only_the_data():
    """DGRO Table 3 at ``paper`` sweeps data.math_train alone: the label's reward range is the config's."""
    from dgro_lib.analysis.math import run_labels

    df = pd.DataFrame({"data.math_train": ["deepscaler", "orz"]})
    got = run_labels(df, loss={"name": "dgro"}, keys=["data.math_train"], scheme="[-3,3]")
    assert got.tolist() == ["DGRO [-3,3] on deepscaler", "DGRO [-3,3] on orz"]
    swept = pd.DataFrame({"reward.scheme": ["[-5,5]"]})
    assert run_labels(swept, loss={"name": "dgro"}, keys=["reward.scheme"], scheme="[-3,3]").tolist() == ["DGRO [-5,5]"]
    with pytest.raises(ValueError, match="no `reward.scheme` column and no scheme="):
        run_labels(df, loss={"name": "dgro"}, keys=["data.math_train"])


def test_point_labels_keep_integers_in_an_all_numeric_frame():
    """A map's order comes from a frame of its sweep values alone; read row by row, an all-numeric row is upcast to
    float and ``prompts_per_step=4`` would become ``4.0``, a label no run carries."""
    from dgro_lib.analysis.probes import point_labels

    keys = ["train.learning_rate|train.prompts_per_step"]
    alone = pd.DataFrame([{"train.learning_rate": 1e-4, "train.prompts_per_step": 4}])
    with_text = alone.assign(run="r0")
    assert point_labels(alone, keys).tolist() == point_labels(with_text, keys).tolist() == [
        "learning_rate=0.0001, prompts_per_step=4"]


def test_sweep_point_labels_follow_the_params_order():
    from dgro_lib.analysis.probes import point_labels, sweep_point_labels
    from dgro_lib.config import find_params, load_config

    cfg = load_config(find_params("dgro_fig2_beta", "ci"))  # a joined sweep: (1, 0.01), (1, 0.1), (0.1, 0.01)
    keys = ["loss.kwargs.beta1", "loss.kwargs.beta2"]
    want = [point_labels(pd.DataFrame([{keys[0]: b1, keys[1]: b2}]), keys).iloc[0]
            for b1, b2 in cfg.sweep["loss.kwargs.beta1|loss.kwargs.beta2"]]
    assert sweep_point_labels(cfg, keys) == want == ["beta1=1.0, beta2=0.01", "beta1=1.0, beta2=0.1",
                                                     "beta1=0.1, beta2=0.01"]
