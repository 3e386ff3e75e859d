"""run_training end to end on the ci profile: outputs, reuse of a finished run, and resume of a killed one."""

import json
import shutil

import pandas as pd

from dgro_lib.config import apply_overrides, find_params, load_config
import pytest

from dgro_lib.runs.experiment import _experiment_base_evaluation, config_diff, run_training
from dgro_lib.runs.store import run_key


def test_run_writes_outputs_and_resumes(tmp_path):
    cfg = apply_overrides(load_config(find_params("dgro_fig1_reward_variance", "ci")),
                          {"train.max_steps": 2, "train.save_steps": 1, "train.eval_every": 0, "sweep": {}})
    run_dir = tmp_path / "run"
    summary = run_training(cfg, 0, run_dir)
    for name in ("manifest.json", "metrics.csv", "heldout.csv", "final_eval.json"):
        assert (run_dir / name).is_file(), name
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["seed"] == 0 and manifest["packages"]["trl"] == "1.16.0"
    assert manifest["config"]["train"]["max_steps"] == 2 and "commit" in manifest["git"]
    assert pd.read_csv(run_dir / "metrics.csv")["step"].tolist() == [1, 2]
    assert 0.0 <= summary["accuracy"] <= 1.0
    protocol = json.loads((run_dir / "final_eval.json").read_text())["protocol"]
    assert (protocol["temperature"], protocol["n_samples"]) == (cfg.eval.temperature, cfg.eval.n_samples)
    assert protocol["template"] == cfg.data.template and protocol["max_new_tokens"] == cfg.eval.max_new_tokens
    assert protocol["n_puzzles"] == len(json.loads((run_dir / "final_eval.json").read_text())["correct"])

    # a finished run is reused, not retrained
    mtime = (run_dir / "metrics.csv").stat().st_mtime
    assert run_training(cfg, 0, run_dir) == summary
    assert (run_dir / "metrics.csv").stat().st_mtime == mtime

    # a run killed before its first checkpoint (save_total_limit 1 keeps only the last) starts again, and the rows
    # it had logged are not kept twice
    shutil.rmtree(run_dir / "trainer" / "checkpoint-2")
    (run_dir / "final_eval.json").unlink()
    run_training(cfg, 0, run_dir)
    assert pd.read_csv(run_dir / "metrics.csv")["step"].tolist() == [1, 2]
    timing = ("train_seconds", "wall_s")
    again = json.loads((run_dir / "final_eval.json").read_text())["summary"]
    assert {k: v for k, v in again.items() if k not in timing} == {k: v for k, v in summary.items() if k not in timing}


def _tiny(**overrides):
    return apply_overrides(load_config(find_params("dgro_fig1_reward_variance", "ci")),
                           {"train.save_steps": 1, "train.eval_every": 1, "train.eval_subset": 2, "sweep": {},
                            "eval.temperature": 0.0, "eval.n_samples": 1, "eval.ks": [1],  # greedy: one per puzzle
                            **overrides})


def test_a_run_made_with_other_params_is_refused_with_the_fields_named(tmp_path):
    run_dir = tmp_path / "run"
    run_training(_tiny(**{"train.max_steps": 1}), 0, run_dir)
    with pytest.raises(ValueError, match=r"loss\.kwargs: .*beta2.*run"):
        run_training(_tiny(**{"train.max_steps": 1, "loss.kwargs": {"beta1": 1.0, "beta2": 0.0}}), 0, run_dir)
    with pytest.raises(ValueError, match=r"seed: 0 -> 1"):
        run_training(_tiny(**{"train.max_steps": 1}), 1, run_dir)
    with pytest.raises(ValueError, match="constant"):  # extending needs the old steps to be the new run's first
        run_training(_tiny(**{"train.max_steps": 2, "train.lr_scheduler_type": "linear"}), 0, run_dir)
    # what does not change a run's computation is not compared
    assert config_diff({"description": "a", "seeds": [0], "workers": 1, "train": {"max_steps": 1}},
                       {"description": "b", "seeds": [0, 1], "workers": 2, "train": {"max_steps": 1}}) == {}
    # nor a speed knob (a run started without forward chunks resumes with them)
    assert config_diff({"train": {"max_steps": 1}}, {"train": {"max_steps": 1, "forward_chunk_rows": 8}}) == {}
    assert config_diff({"loss": {"kwargs": {"beta2": 0.1}}}, {"loss": {"kwargs": {"beta2": 0.0}}}) == {
        "loss.kwargs": ({"beta2": 0.1}, {"beta2": 0.0})}
    # a field the old manifest does not have yet: equal when the new value is its default
    assert config_diff({"train": {}}, {"train": {"lr_scheduler_type": "constant"}}) == {}
    assert config_diff({"train": {}}, {"train": {"lr_scheduler_type": "linear"}}) == {
        "train.lr_scheduler_type": (None, "linear")}


def test_extending_a_finished_run_equals_training_the_longer_run(tmp_path):
    """train.max_steps 1 -> 2 (constant lr) with a larger held-out set: the run continues from checkpoint-1, its
    old final evaluation is kept, the step-1 held-out row becomes the periodic (subset) one, the manifest records
    the extension, and the logged step-2 metrics equal those of a run trained for 2 steps from the start."""
    longer = _tiny(**{"train.max_steps": 2, "data.n_eval": 12})
    fresh = tmp_path / "fresh"
    run_training(longer, 0, fresh)
    ext = tmp_path / "ext"
    run_training(_tiny(**{"train.max_steps": 1}), 0, ext)
    run_training(longer, 0, ext)
    assert (ext / "final_eval-step1.json").is_file()
    assert json.loads((ext / "final_eval-step1.json").read_text())["protocol"]["n_puzzles"] == 8
    final = json.loads((ext / "final_eval.json").read_text())
    assert final["protocol"]["n_puzzles"] == 12 and len(final["correct"]) == 12
    history = json.loads((ext / "manifest.json").read_text())["history"]
    assert history[0]["extended"]["from_max_steps"] == 1 and history[0]["extended"]["to_max_steps"] == 2
    assert set(history[0]["extended"]["changed"]) == {"train.max_steps", "data.n_eval"}
    pd.testing.assert_frame_equal(pd.read_csv(ext / "heldout.csv").drop(columns="wall_s"),
                                  pd.read_csv(fresh / "heldout.csv").drop(columns="wall_s"))
    keep = ["step", "loss", "reward", "reward_std", "entropy", "completion_length"]
    a, b = (pd.read_csv(d / "metrics.csv") for d in (ext, fresh))
    keep = [c for c in keep if c in a.columns]
    pd.testing.assert_frame_equal(a[keep], b[keep], rtol=1e-5)
    assert final["correct"] == json.loads((fresh / "final_eval.json").read_text())["correct"]


def test_base_eval_made_under_another_protocol_is_kept_and_redone(tmp_path, capsys):
    cfg = _tiny()
    first = _experiment_base_evaluation(cfg, tmp_path)
    assert first["protocol"]["n_puzzles"] == 8 and first["model_path"]
    assert _experiment_base_evaluation(cfg, tmp_path) == first  # same settings: reused
    again = _experiment_base_evaluation(apply_overrides(cfg, {"data.n_eval": 12}), tmp_path)
    assert again["protocol"]["n_puzzles"] == 12 and again["correct"][:8] == first["correct"]
    kept = list(tmp_path.glob("base_eval-*.json"))
    assert len(kept) == 1 and json.loads(kept[0].read_text()) == first
    assert "n_puzzles" in capsys.readouterr().out


def test_sampled_eval_protocol_reports_pass_at_k(tmp_path):
    """eval.temperature > 0: n samples per puzzle, accuracy = avg@n = pass@1, pass@k for eval.ks, one paired
    entry per puzzle, and the protocol says so."""
    from dgro_lib.evaluate import evaluate_under_config as _evaluate
    from dgro_lib.evaluate import pass_at_k, per_item_correct
    from dgro_lib.evaluate import protocol_for_config as _protocol
    from dgro_lib.runs.experiment import load_eval_records, resolve_model_path
    from dgro_lib.models import load_model

    cfg = apply_overrides(load_config(find_params("dgro_fig1_reward_variance", "ci")),
                          {"eval.temperature": 1.0, "eval.n_samples": 4, "eval.ks": [1, 2, 4], "eval.max_new_tokens": 24})
    model, tok = load_model(resolve_model_path(cfg))
    records = load_eval_records(cfg)[:5]
    ev = _evaluate(model, tok, records, cfg)
    assert len(ev["correct"]) == 5 and len(ev["n_correct"]) == 5 and ev["n"] == 20
    assert ev["pass@1"] == ev["accuracy"] == sum(ev["n_correct"]) / 20
    assert ev["pass@4"] == sum(c > 0 for c in ev["n_correct"]) / 5
    assert ev["pass@2"] == sum(pass_at_k(4, c, 2) for c in ev["n_correct"]) / 5
    assert per_item_correct(ev) == [c / 4 for c in ev["n_correct"]]  # what a stored evaluation keeps per puzzle
    assert [bool(c) for c in ev["correct"]] == ev["correct"] and all(not f or c >= 1 for f, c in
                                                                     zip(ev["correct"], ev["n_correct"]))
    p = _protocol(cfg, 5)
    assert (p["temperature"], p["n_samples"], p["ks"], p["paired_metric"]) == (1.0, 4, [1, 2, 4], "first sample per puzzle")


def test_eval_top_p_is_sampled_with_and_recorded(monkeypatch):
    """eval.top_p < 1 reaches the sampler and the protocol; greedy decoding records 1.0 (top_p does not apply)."""
    from dgro_lib import models as M
    from dgro_lib.evaluate import evaluate_under_config as _evaluate
    from dgro_lib.evaluate import protocol_for_config as _protocol
    from dgro_lib.runs.experiment import load_eval_records, resolve_model_path

    seen = []

    def recording_sample(*args, **kw):
        seen.append(kw["top_p"])
        return sample(*args, **kw)

    sample = M.sample
    cfg = apply_overrides(load_config(find_params("dgro_fig1_reward_variance", "ci")),
                          {"eval.temperature": 1.0, "eval.top_p": 0.7, "eval.n_samples": 2, "eval.ks": [1, 2],
                           "eval.max_new_tokens": 6})
    model, tok = M.load_model(resolve_model_path(cfg))
    monkeypatch.setattr("dgro_lib.evaluate.accuracy.sample", recording_sample)
    ev = _evaluate(model, tok, load_eval_records(cfg)[:3], cfg)
    assert seen and set(seen) == {0.7} and ev["n"] == 6
    assert _protocol(cfg, 3)["top_p"] == 0.7
    greedy = apply_overrides(cfg, {"eval.temperature": 0.0, "eval.n_samples": 1, "eval.ks": [1]})
    assert _protocol(greedy, 3)["top_p"] == 1.0


def test_eval_top_p_keeps_the_identity_of_runs_made_before_it():
    """A manifest written before eval.top_p existed matches a config at the default 1.0, not at another value."""
    old = {"eval": {"temperature": 0.0, "n_samples": 1}}
    assert config_diff(old, {"eval": {"temperature": 0.0, "n_samples": 1, "top_p": 1.0}}) == {}
    assert config_diff(old, {"eval": {"temperature": 0.0, "n_samples": 1, "top_p": 0.99}}) == {
        "eval.top_p": (None, 0.99)}


def test_dro_runs_offline_from_the_config(tmp_path):
    """loss dro + train.rollout_policy reference + loss.value_lr, straight from a params override."""
    cfg = apply_overrides(load_config(find_params("dgro_fig1_reward_variance", "ci")), {
        "train.max_steps": 1, "train.eval_every": 0, "sweep": {}, "loss.name": "dro", "loss.kwargs": {"beta": 0.1},
        "loss.value_lr": 0.01, "train.rollout_policy": "reference"})
    summary = run_training(cfg, 0, tmp_path / "run")
    metrics = pd.read_csv(tmp_path / "run" / "metrics.csv")
    assert "dro/value_loss" in metrics.columns and 0.0 <= summary["accuracy"] <= 1.0


def test_lora_trains_only_the_adapters(tmp_path, monkeypatch):
    """model.peft in the params: the tiny model is wrapped with LoRA adapters, trained through the same trainer;
    the adapters move, the frozen base weights do not."""
    import torch

    from dgro_lib.rl import trainer as T

    cfg = apply_overrides(load_config(find_params("dgro_fig1_reward_variance", "ci")), {
        "train.max_steps": 3, "train.eval_every": 0, "sweep": {}, "train.learning_rate": 0.05,
        "model.peft": {"r": 4, "alpha": 8, "target_modules": ["q_proj", "v_proj"]}})
    seen = {}

    class Spy(T.DGROTrainer):
        def train(self, *a, **k):
            seen["before"] = {n: p.detach().clone() for n, p in self.model.named_parameters()}
            out = super().train(*a, **k)
            seen["after"] = {n: p.detach().clone() for n, p in self.model.named_parameters()}
            seen["trainable"] = {n for n, p in self.model.named_parameters() if p.requires_grad}
            return out

    monkeypatch.setattr("dgro_lib.runs.training.DGROTrainer", Spy)  # where run_training looks it up
    run_training(cfg, 0, tmp_path / "run")
    assert seen["trainable"] and all("lora_" in n for n in seen["trainable"])
    moved = {n for n in seen["before"] if not torch.equal(seen["before"][n], seen["after"][n])}
    assert moved and moved <= seen["trainable"]
    assert any("lora_B" in n for n in moved)


def test_math_from_an_unreachable_hub_fails_with_the_data_set_named_and_the_way_out(tmp_path, monkeypatch):
    import pytest

    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    cfg = apply_overrides(load_config(find_params("dgro_fig1_reward_variance", "ci")),
                          {"sweep": {}, "data.task": "math", "data.source": "hub", "data.math_train": "gsm8k",
                           "data.math_eval": ["math500"], "model.embedded_preset": "math_ci"})
    with pytest.raises(RuntimeError, match=r"could not load math data set 'gsm8k'.*local_path"):
        run_training(cfg, 0, tmp_path / "run")
    assert not (tmp_path / "run" / "final_eval.json").exists()


def test_collect_results_reads_only_the_runs_of_the_current_sweep(tmp_path):
    from dgro_lib.runs.experiment import collect_results

    for name, key in (("scheme_m1_1-seed0", "aaa"), ("scheme_m2_2-seed0", "bbb")):  # the second: an older sweep's
        run = tmp_path / "store" / key
        run.mkdir(parents=True)
        (run / "manifest.json").write_text(json.dumps({"seed": 0}))
        (run / "final_eval.json").write_text(json.dumps({"summary": {"accuracy": 0.5}, "correct": [True, False]}))
    pd.DataFrame([{"run": "scheme_m1_1-seed0", "seed": 0, "key": "aaa", "path": "store/aaa",
                   "sweep_point": json.dumps({"reward.scheme": "[-1,1]"})}]).to_csv(tmp_path / "runs.csv", index=False)
    base = {"summary": {"accuracy": 0.5}, "correct": [False, True]}
    finals = collect_results(tmp_path, base=base).finals
    assert finals["run"].tolist() == ["scheme_m1_1-seed0"] and finals["reward.scheme"].tolist() == ["[-1,1]"]
    with pytest.raises(ValueError, match="scheme_m2_2-seed0"):
        collect_results(tmp_path, base=base, runs=["scheme_m2_2-seed0"])


def test_two_experiments_share_a_run_of_the_same_config_and_a_changed_field_makes_a_new_one(tmp_path, monkeypatch):
    """The run store: a run is named by what it computes, so a second experiment (another notebook, another sweep
    that contains the same point) reuses it; a change of one run-relevant field is another run."""
    import dgro_lib.runs.experiment as E
    from dgro_lib.runs.store import run_key

    trained = []

    def fake_launch(cfg, seed, run_dir, *, point=None):  # records what would be trained and leaves a finished run
        if E.prepare_run(cfg, seed, run_dir):
            return json.loads((run_dir / "final_eval.json").read_text())["summary"]
        trained.append((cfg.reward.scheme, cfg.train.learning_rate, seed))
        run_dir.mkdir(parents=True)
        E.write_manifest(run_dir / "manifest.json", config=E.config_to_dict(cfg), seed=seed)
        E.write_json(run_dir / "final_eval.json", {"summary": {"accuracy": 0.5}, "correct": [True]})
        return {"accuracy": 0.5}

    monkeypatch.setattr(E, "launch_run", fake_launch)
    monkeypatch.setattr(E, "_experiment_base_evaluation", lambda cfg, out_dir, store=None, copy=True: {"summary": {}, "correct": [True]})
    monkeypatch.setattr(E, "_stored_evaluation", lambda *args: None)
    fig1 = apply_overrides(load_config(find_params("dgro_fig1_reward_variance", "ci")),
                           {"seeds": [0], "sweep": {"reward.scheme": ["[-1,1]", "[-5,5]"]}})
    store = tmp_path / "runs"
    first = E.run_experiment(fig1, tmp_path / "fig1", workers=1, store=store)
    assert len(trained) == len(fig1.sweep["reward.scheme"])
    # another notebook: another name, description and sweep, one of its points is fig1's [-5,5] run
    other = apply_overrides(fig1, {"name": "fig2", "description": "other", "sweep": {
        "train.learning_rate": [fig1.train.learning_rate, 2 * fig1.train.learning_rate]}, "reward.scheme": "[-5,5]"})
    second = E.run_experiment(other, tmp_path / "fig2", workers=1, store=store)
    assert trained[len(fig1.sweep["reward.scheme"]):] == [("[-5,5]", 2 * fig1.train.learning_rate, 0)]
    shared = first.finals.set_index("reward.scheme").loc["[-5,5]", "key"]
    assert shared in second.finals["key"].tolist() and len(list(store.glob("*/manifest.json"))) == len(fig1.sweep["reward.scheme"]) + 1
    # the same config under another seed, or a changed eval protocol, is a new key; a speed-only field is not
    assert run_key(fig1, 1) != run_key(fig1, 0)
    assert run_key(apply_overrides(fig1, {"eval.max_new_tokens": 17}), 0) != run_key(fig1, 0)
    assert run_key(apply_overrides(fig1, {"train.forward_chunk_rows": 3, "workers": 7}), 0) == run_key(fig1, 0)



def test_evaluations_asked_of_run_experiment_are_computed_once_and_read_back_by_evaluate_runs(tmp_path, monkeypatch):
    """A second protocol given to run_experiment is computed by the worker right after its run (and for the base, as
    a job of the pool); evaluate_runs with the same arguments then finds every evaluation in the store."""
    import dgro_lib.runs.experiment as E

    cfg = _tiny(**{"train.max_steps": 1, "train.eval_every": 0, "seeds": [0], "data.n_eval": 6})
    sampled = ({"temperature": 1.0, "n_samples": 2, "ks": [1, 2]}, 3)
    other_size = ({}, None, {"eval_people": [3], "n_eval": 2})  # another held-out set: 3 people (the runs train on 2)
    calls = []
    real = E._evaluate_model
    monkeypatch.setattr(E, "_evaluate_model", lambda *a: calls.append(a[2]) or real(*a))
    result = E.run_experiment(cfg, tmp_path / "exp", workers=1, evaluations=[sampled, other_size])
    # base greedy, base sampled, base on 3 people; then the run: sampled, 3 people
    assert [len(records) for records in calls] == [6, 3, 2, 3, 2]
    assert {len(r["solution"]) for r in calls[2] + calls[4]} == {3} and {len(r["solution"]) for r in calls[0]} == {2}
    assert result.base["summary"]["n"] == 6 and len(result.finals) == 1
    monkeypatch.setattr(E, "_evaluate_model", lambda *a: pytest.fail("evaluated twice"))
    table = E.evaluate_runs(result, cfg, sampled[0], n_puzzles=sampled[1])
    assert table["run"].tolist() == ["base", result.finals["run"].iloc[0]]
    assert table["n"].tolist() == [3 * 2, 3 * 2]  # generations: 3 puzzles x 2 samples
    assert all(len(c) == 3 for c in table["correct"])
    by_size = E.evaluate_runs(result, cfg, {}, data_overrides=other_size[2])
    assert by_size["n"].tolist() == [2, 2] and run_key(cfg, 0) == result.finals["key"].iloc[0]
    with pytest.raises(ValueError, match="n_puzzles"):
        E.run_experiment(cfg, tmp_path / "exp", workers=1, evaluations=[({},)])


@pytest.mark.parametrize("profile", ["ci", "cpu", "gpu"])
def test_fig3_dgro_arms_are_fig1_runs(profile):
    """The shared run store's promise for DGRO Fig. 3: its DGRO arms have the configs of Fig. 1's runs of the same
    reward range and seed, so they are trained once."""
    from dgro_lib.config import expand_sweep
    from dgro_lib.runs.store import run_key

    fig1, fig3 = (load_config(find_params(n, profile)) for n in ("dgro_fig1_reward_variance", "dgro_fig3_methods"))
    # by range, learning rate (Fig. 1's positive control is its [-3,3] recipe at a quarter of it) and seed
    keys1 = {(c.reward.scheme, c.train.learning_rate, s): run_key(c, s) for _, s, c in expand_sweep(fig1)}
    shared = [(c.reward.scheme, s) for _, s, c in expand_sweep(fig3)
              if c.loss.name == "dgro" and keys1.get((c.reward.scheme, c.train.learning_rate, s)) == run_key(c, s)]
    expected = [(c.reward.scheme, s) for _, s, c in expand_sweep(fig3)
                if c.loss.name == "dgro" and (c.reward.scheme, c.train.learning_rate, s) in keys1]
    assert shared == expected and len(shared) >= 2


@pytest.mark.parametrize("profile", ["ci", "cpu", "gpu", "paper"])
def test_table2_runs_are_fig1_runs(profile):
    """DGRO Table 2 evaluates Fig. 1's runs: every run it asks for has the key of Fig. 1's run of the same reward
    range and seed (so it is trained once), and its extra evaluations change the held-out set, not the runs."""
    from dgro_lib.config import expand_sweep
    from dgro_lib.runs.store import run_key

    fig1, table2 = (load_config(find_params(n, profile)) for n in ("dgro_fig1_reward_variance", "dgro_table2_kk"))
    assert table2.model == fig1.model and table2.eval == fig1.eval  # the same base, read under the same protocol
    keys1 = {(c.reward.scheme, c.train.learning_rate, s): run_key(c, s) for _, s, c in expand_sweep(fig1)}
    keys2 = {(c.reward.scheme, c.train.learning_rate, s): run_key(c, s) for _, s, c in expand_sweep(table2)}
    assert keys2 and all(keys1.get(k) == v for k, v in keys2.items())
    assert table2.data.train_people == fig1.data.train_people and table2.extra["table_people"]


@pytest.mark.parametrize("profile", ["ci", "cpu", "gpu", "paper"])
def test_fig1_beta2_part_shares_fig2_runs(profile):
    """Fig. 1's second part trains its [-3,3] runs once with DGRO Fig. 2: the same (1, 0.1) point and training.

    The two notebooks may list different seeds (Fig. 1's arms are powered first, and a Fig. 2 point may list its own
    seeds in its sweep entry); every seed both list for that point is one run."""
    from dgro_lib.config import expand_sweep
    from dgro_lib.runs.store import run_key

    fig2, fig1b = (load_config(find_params(n, profile)) for n in ("dgro_fig2_beta", "dgro_fig1_beta2_acting"))
    assert fig1b.train.updates_per_rollout * fig1b.train.num_iterations >= 2  # beta2 acts
    keys2 = {run_key(c, s) for _, s, c in expand_sweep(fig2)}
    shared = [(c.reward.scheme, s) for _, s, c in expand_sweep(fig1b) if run_key(c, s) in keys2]
    if "[-3,3]" in fig1b.sweep["reward.scheme"]:
        point_seeds = {s for _, s, c in expand_sweep(fig2) if c.loss.kwargs == fig1b.loss.kwargs}  # its (1, 0.1)
        common = [s for s in fig1b.seeds if s in point_seeds]
        assert common, "the two notebooks share no seed, so no run is trained once for both"
        assert shared == [("[-3,3]", s) for s in common]


@pytest.mark.parametrize("profile", ["cpu", "gpu"])
def test_the_maps_reference_and_quarter_rate_points_are_fig1_runs(profile):
    """The RL map starts from Fig. 1's recipe: its reference point is Fig. 1's DGRO [-3,3] arm and its quarter learning
    rate Fig. 1's positive control, the same runs (one key per seed), so the run store trains them once."""
    from dgro_lib.config import expand_sweep
    from dgro_lib.runs.store import run_key

    fig1, rl_map = (load_config(find_params(n, profile)) for n in ("dgro_fig1_reward_variance", "01_miniature_map"))
    fig1_keys = {run_key(c, s) for _, s, c in expand_sweep(fig1) if c.reward.scheme == "[-3,3]"}
    shared = [(p["train.learning_rate"], s) for p, s, c in expand_sweep(rl_map) if run_key(c, s) in fig1_keys]
    lrs = sorted({lr for lr, _ in shared})
    assert lrs == [fig1.train.learning_rate / 4, fig1.train.learning_rate]
    assert len(shared) == 2 * len(set(rl_map.seeds) & set(fig1.seeds))
