"""The DCPO notebooks' library: H0 calibration, labels, tests between methods, entropy contrasts, the temperature
rule's summary, and the params files' shared runs. References are loops or hand computations."""

import math

import numpy as np
import pandas as pd
import pytest
import torch

from dgro_lib.config import expand_sweep, find_params, load_config
from dgro_lib.analysis.dcpo import (entropy_contrasts, entropy_endpoints, paired_tests_between,
                                    pass_at_k_frame, per_benchmark, policy_entropy, round_significant,
                                    select_backbone, sweep_labels, temperature_phases)
from dgro_lib.evaluate import pass_at_k
from dgro_lib.runs.store import run_key

NOTEBOOKS = ("dcpo_fig1_grid", "dcpo_table2_main", "dcpo_table4_h0", "dcpo_table5_ablation")


def _keys(name, profile):
    cfg = load_config(find_params(name, profile))
    if "model.path|data.math_eval" in cfg.sweep:  # paper Table 2: the runs on Qwen2.5-Math-7B
        cfg = select_backbone(cfg, "Qwen/Qwen2.5-Math-7B")
    label = sweep_labels(cfg)
    return {(label(pd.DataFrame([point])).iloc[0], seed): run_key(concrete, seed)
            for point, seed, concrete in expand_sweep(cfg)}


@pytest.mark.parametrize("profile", ["ci", "cpu", "paper"])
def test_runs_shared_between_the_dcpo_notebooks_have_one_key(profile):
    # the notebooks may list different seeds (more seeds where a notebook's MDE needs them): a seed that two of
    # them list is one run for both
    keys = {n: _keys(n, profile) for n in NOTEBOOKS}
    seeds = {n: set(load_config(find_params(n, profile)).seeds) for n in NOTEBOOKS}
    h0 = load_config(find_params("dcpo_table2_main", profile)).loss.kwargs["entropy_base"]
    t4 = load_config(find_params("dcpo_table4_h0", profile))
    default = t4.extra["labels"][[p["kwargs"]["entropy_base"] for p in t4.sweep["loss"]].index(h0)]
    # (notebook, its label for the arm): the DCPO default run, and GRPO
    shared = [[("dcpo_table2_main", "DCPO"), ("dcpo_table5_ablation", "DCPO"), ("dcpo_table4_h0", default)],
              [("dcpo_table2_main", "GRPO"), ("dcpo_fig1_grid", "GRPO")]]
    twins = 0
    for group in shared:
        for seed in set().union(*(seeds[n] for n, _ in group)):
            here = {keys[n][(label, seed)] for n, label in group if seed in seeds[n]}
            assert len(here) == 1, (group, seed, here)
            twins += sum(seed in seeds[n] for n, _ in group) - 1
    assert twins >= 3 * len(set.intersection(*seeds.values()))
    # and nothing else coincides: every other arm is a run of its own
    every = [k for n in NOTEBOOKS for k in keys[n].values()]
    assert len(set(every)) == len(every) - twins


@pytest.mark.parametrize("profile", ["ci", "cpu", "paper"])
def test_the_h0_grid_keeps_the_papers_ratios_to_the_default(profile):
    cfg = load_config(find_params("dcpo_table4_h0", profile))
    h0 = cfg.loss.kwargs["entropy_base"]
    grid = [p["kwargs"]["entropy_base"] for p in cfg.sweep["loss"]]
    assert grid == pytest.approx([r * h0 for r in (0.5, 1.0, 1.5, 2.0)])  # the paper: 0.25, 0.5, 0.75, 1.0 / 0.5


def test_sweep_labels_name_each_arm_and_refuse_a_mismatch():
    cfg = load_config(find_params("dcpo_table5_ablation", "ci"))
    df = pd.DataFrame({"loss": list(reversed(cfg.sweep["loss"]))})
    assert list(sweep_labels(cfg)(df)) == list(reversed(cfg.extra["labels"]))
    with pytest.raises(ValueError, match="not one of the sweep's values"):
        sweep_labels(cfg)(pd.DataFrame({"loss": [{"name": "grpo"}]}))
    from dgro_lib.config import apply_overrides
    bad = apply_overrides(cfg, {"extra": {**cfg.extra, "labels": ["DCPO"]}})
    with pytest.raises(ValueError, match="one name per sweep.loss value"):
        sweep_labels(bad)


def test_an_entrys_own_seeds_do_not_enter_its_label():
    # Fig. 3 gives online DPO more seeds through "loss|reward.scheme|seeds": the arms keep their names
    from dgro_lib.analysis.probes import point_labels
    from dgro_lib.config import apply_overrides

    cfg = load_config(find_params("dgro_fig3_methods", "ci"))
    (key, entries), = cfg.sweep.items()
    own = [[*e, [0, 1, 2][:i + 1]] for i, e in enumerate(entries)]
    joined = apply_overrides(cfg, {"sweep": {f"{key}|seeds": own}})
    rows = pd.DataFrame([point for point, _, _ in expand_sweep(joined)])
    want = [lab for i, lab in enumerate(cfg.extra["labels"]) for _ in range(min(i + 1, 3))]
    assert list(sweep_labels(joined, key=f"{key}|seeds")(rows)) == want
    assert list(sweep_labels(cfg, key=key)(rows)) == want  # the same runs, named alike with or without own seeds
    assert point_labels(rows, list(joined.sweep)).tolist() == point_labels(rows, list(cfg.sweep)).tolist()


def test_select_backbone_narrows_to_one_model_with_the_same_runs():
    cfg = load_config(find_params("dcpo_table2_main", "paper"))
    full = {run_key(c, s) for _, s, c in expand_sweep(cfg) if c.model.path == "Qwen/Qwen3-4B"}
    one = select_backbone(cfg, "Qwen/Qwen3-4B")
    assert "model.path|data.math_eval" not in one.sweep and one.model.path == "Qwen/Qwen3-4B"
    assert {run_key(c, s) for _, s, c in expand_sweep(one)} == full
    assert select_backbone(cfg).model.path == "Qwen/Qwen2.5-7B"  # the first
    with pytest.raises(ValueError, match="not one of the sweep's models"):
        select_backbone(cfg, "Qwen/Qwen2.5-0.5B")
    ci = load_config(find_params("dcpo_table2_main", "ci"))
    assert select_backbone(ci) is ci
    with pytest.raises(ValueError, match="has no"):
        select_backbone(ci, "Qwen/Qwen3-4B")


def test_policy_entropy_is_the_mean_nll_of_the_models_own_samples():
    from dgro_lib.analysis.probes import completion_logps
    from dgro_lib.runs.data_sources import load_train_records, resolve_model_path
    from dgro_lib.models.loading import load_model
    from dgro_lib.models.sampling import sample
    from dgro_lib.tasks import get_task

    cfg = load_config(find_params("dcpo_table4_h0", "ci"))
    got = policy_entropy(cfg, n_prompts=3, n_samples=2, seed=5, batch_size=4)
    assert got == policy_entropy(cfg, n_prompts=3, n_samples=2, seed=5, batch_size=4)  # seeded
    model, tok = load_model(resolve_model_path(cfg))
    prompts = [tok(get_task("math").prompt(r, cfg.data.template), add_special_tokens=False)["input_ids"]
               for r in load_train_records(cfg)[:3]]
    comps = sample(model, tok, prompts, n=2, temperature=cfg.train.temperature,
                   max_new_tokens=cfg.train.max_completion_length, seed=5, batch_size=4)
    nll, n = 0.0, 0
    with torch.no_grad():
        for i, c in enumerate(comps):  # one row at a time: no padding at all
            lp, m = completion_logps(model, [prompts[i // 2]], [c], tok.pad_token_id)
            nll -= float((lp * m).sum())
            n += int(m.sum())
    assert got["tokens"] == n and got["completions"] == 6
    assert got["H_nll"] == pytest.approx(nll / n, rel=1e-4)
    assert 0 < got["H_full"] < math.log(len(tok))


def test_round_significant():
    assert round_significant(0.061683) == 0.062
    assert round_significant(1.98573) == 2.0
    assert round_significant(123.4, 3) == 123.0
    assert round_significant(0.0) == 0.0


def test_pass_at_k_frame_and_per_benchmark_against_hand_values():
    frame = pd.DataFrame([{"run": "base", "point": "base model", "seed": 0, "correct": [0.5, 0.0, 1.0, 0.25]},
                          {"run": "a-seed0", "point": "A", "seed": 0, "correct": [1.0, 0.25, 1.0, 0.0]},
                          {"run": "a-seed1", "point": "A", "seed": 1, "correct": [0.5, 0.5, 0.0, 0.0]}])
    pk = pass_at_k_frame(frame, 4, 2)
    assert pk["correct"].iloc[0] == [pass_at_k(4, 2, 2), 0.0, 1.0, pass_at_k(4, 1, 2)]
    with pytest.raises(ValueError, match="must be in"):
        pass_at_k_frame(frame, 4, 5)
    sources = ["synthetic/add", "synthetic/mul", "synthetic/add", "synthetic/mul", "synthetic/add"]
    long = per_benchmark(frame, sources, value="avg@4").set_index(["model", "benchmark"])
    assert long.loc[("base model", "add"), "avg@4"] == 0.75
    assert long.loc[("A", "add"), "avg@4"] == pytest.approx(np.mean([1.0, 0.25]))  # seeds: 1.0 and (0.5+0)/2
    assert long.loc[("A", "mul"), "std"] == pytest.approx(np.std([0.125, 0.25], ddof=1))
    assert long.loc[("A", "all"), "n"] == 4


def test_paired_tests_between_against_a_hand_computation():
    finals = pd.DataFrame([{"point": p, "seed": s, "correct": c} for p, s, c in [
        ("A", 0, [1, 1, 0, 1]), ("B", 0, [0, 1, 0, 0]), ("A", 1, [1, 0, 1, 1]), ("B", 1, [1, 0, 0, 1])]])
    sampled = pd.DataFrame([{"run": f"{p}{s}", "point": p, "seed": s, "correct": c} for p, s, c in [
        ("A", 0, [1.0, 0.5, 0.5, 0.0]), ("B", 0, [0.5, 0.5, 0.0, 0.0]),
        ("A", 1, [1.0, 1.0, 0.5, 0.5]), ("B", 1, [0.5, 0.5, 0.5, 0.5])]])
    t = paired_tests_between(finals, sampled, [("A", "B")]).iloc[0]
    assert t.seeds == 2 and t.greedy_delta_points == pytest.approx(100 * (2 / 4 + 1 / 4) / 2)
    d = np.array([0.5, 0.25, 0.25, 0.0])  # per problem, averaged over the two seeds
    assert t.sampled_delta_points == pytest.approx(100 * d.mean())
    assert t.sampled_z == pytest.approx(d.mean() / (d.std(ddof=1) / 2))


def _metrics(points):
    rows = []
    for point, seed, values, T in points:
        for step, (v, t) in enumerate(zip(values, T), 1):
            rows.append({"point": point, "seed": seed, "run": f"{point}-{seed}", "step": step, "entropy_nll": v,
                         "dcpo/T": t, "dcpo/H": v, "dcpo/alpha": 0.05})
    return pd.DataFrame(rows)


def test_entropy_contrasts_and_temperature_phases():
    up, flat = [1.0] * 5 + [2.0] * 5, [1.0] * 10
    m = _metrics([("J3", 0, up, [1.2] * 10), ("J3", 1, [x + 0.5 for x in up], [1.2] * 10),
                  ("GRPO", 0, flat, [0.8] * 10), ("GRPO", 1, [1.1] * 10, [0.8] * 5 + [1.2] * 5)])
    ends = entropy_endpoints(m)
    c = entropy_contrasts(ends, "GRPO").set_index("point")
    assert c.loc["J3", "last"] == pytest.approx(2.25) and c.loc["J3", "reference_last"] == pytest.approx(1.05)
    d = np.array([2.0 - 1.0, 2.5 - 1.1])
    assert c.loc["J3", "t"] == pytest.approx(d.mean() / (d.std(ddof=1) / math.sqrt(2)))
    assert c.loc["GRPO", "last_diff"] == 0.0
    with pytest.raises(ValueError, match="no run of"):
        entropy_contrasts(ends, "J4")
    ph = temperature_phases(m, entropy_base=1.5).set_index("run")
    assert ph.loc["GRPO-1", "frac_T_high"] == 0.5 and ph.loc["GRPO-1", "switches"] == 1
    assert ph.loc["J3-0", "frac_T_high"] == 1.0 and ph.loc["GRPO-0", "frac_T_high"] == 0.0
    assert ph.loc["J3-0", "H_last"] == 2.0 and ph.loc["J3-0", "H0"] == 1.5


def test_policy_entropy_through_a_store_is_archived_and_restored_not_recomputed(tmp_path, monkeypatch):
    # a restore on another machine must read the number the reference was computed with (a CPU of another vendor
    # rounds the float32 sums otherwise), so the measurement travels with the base evaluations
    import dgro_lib.analysis.dcpo as dcpo
    from dgro_lib.runs.archive import ARCHIVE_ENV, archive_base_evals

    cfg = load_config(find_params("dcpo_table4_h0", "ci"))
    settings = dict(n_prompts=3, n_samples=2, seed=5, batch_size=4)
    monkeypatch.setenv(ARCHIVE_ENV, str(tmp_path / "archive"))
    fresh = policy_entropy(cfg, **settings)
    first = policy_entropy(cfg, **settings, store=tmp_path / "a")
    assert first == fresh  # the store changes where the number is kept, not the number
    assert len(list((tmp_path / "a" / "base").glob("*.json"))) == 1
    assert archive_base_evals(tmp_path / "a", tmp_path / "archive")

    def must_not_measure(*args, **kwargs):
        raise AssertionError("measured again although the archive holds the measurement")

    monkeypatch.setattr(dcpo, "_policy_entropy", must_not_measure)
    assert policy_entropy(cfg, **settings, store=tmp_path / "b") == first  # restored from the archive
    assert policy_entropy(cfg, **settings, store=tmp_path / "a") == first  # read back from the store
    with pytest.raises(AssertionError, match="measured again"):  # other settings: another measurement
        policy_entropy(cfg, **(settings | {"seed": 6}), store=tmp_path / "b")
