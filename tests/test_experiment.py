"""run_training end to end on the ci profile: outputs, reuse of a finished run, and resume of a killed one."""

import json
import shutil

import pandas as pd

from dgro_lib.config import apply_overrides, find_params, load_config
from dgro_lib.experiment import run_training


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
    assert protocol["temperature"] == 0.0 and protocol["n_samples"] == 1
    assert protocol["template"] == cfg.data.template and protocol["max_new_tokens"] == cfg.eval.max_new_tokens
    assert protocol["n_puzzles"] == len(json.loads((run_dir / "final_eval.json").read_text())["correct"])

    # a finished run is reused, not retrained
    mtime = (run_dir / "metrics.csv").stat().st_mtime
    assert run_training(cfg, 0, run_dir) == summary
    assert (run_dir / "metrics.csv").stat().st_mtime == mtime

    # a run killed after its first checkpoint (here: one that stopped at step 1) resumes from checkpoint-1
    shutil.rmtree(run_dir)
    run_training(apply_overrides(cfg, {"train.max_steps": 1}), 0, run_dir)
    assert [p.name for p in (run_dir / "trainer").glob("checkpoint-*")] == ["checkpoint-1"]
    (run_dir / "final_eval.json").unlink()
    run_training(cfg, 0, run_dir)
    assert pd.read_csv(run_dir / "metrics.csv")["step"].tolist() == [1, 2]
    assert (run_dir / "final_eval.json").is_file()


def test_sampled_eval_protocol_reports_pass_at_k(tmp_path):
    """eval.temperature > 0: n samples per puzzle, accuracy = avg@n = pass@1, pass@k for eval.ks, one paired
    entry per puzzle, and the protocol says so."""
    from dgro_lib.evaluate import pass_at_k
    from dgro_lib.experiment import _evaluate, _protocol, load_eval_records, resolve_model_path
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
    p = _protocol(cfg, 5)
    assert (p["temperature"], p["n_samples"], p["ks"], p["paired_metric"]) == (1.0, 4, [1, 2, 4], "first sample per puzzle")


def test_dro_runs_offline_from_the_config(tmp_path):
    """loss dro + train.rollout_policy reference + loss.value_lr, straight from a params override."""
    cfg = apply_overrides(load_config(find_params("dgro_fig1_reward_variance", "ci")), {
        "train.max_steps": 1, "train.eval_every": 0, "sweep": {}, "loss.name": "dro", "loss.kwargs": {"beta": 0.1},
        "loss.value_lr": 0.01, "train.rollout_policy": "reference"})
    summary = run_training(cfg, 0, tmp_path / "run")
    metrics = pd.read_csv(tmp_path / "run" / "metrics.csv")
    assert "dro/value_loss" in metrics.columns and 0.0 <= summary["accuracy"] <= 1.0


def test_lora_trains_only_the_adapters(tmp_path):
    """model.peft in the params: the tiny model is wrapped with LoRA adapters, trained through the same trainer;
    the adapters move, the frozen base weights do not."""
    import torch

    import dgro_lib.trainer
    from dgro_lib import trainer as T

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

    saved = dgro_lib.trainer.DGROTrainer
    dgro_lib.trainer.DGROTrainer = Spy
    try:
        run_training(cfg, 0, tmp_path / "run")
    finally:
        dgro_lib.trainer.DGROTrainer = saved
    assert seen["trainable"] and all("lora_" in n for n in seen["trainable"])
    moved = {n for n in seen["before"] if not torch.equal(seen["before"][n], seen["after"][n])}
    assert moved and moved <= seen["trainable"]
    assert any("lora_B" in n for n in moved)


def test_math_task_is_refused_by_the_runner_with_the_field_named(tmp_path):
    import pytest

    cfg = apply_overrides(load_config(find_params("dgro_fig1_reward_variance", "ci")),
                          {"sweep": {}, "data.task": "math", "data.math_train": "gsm8k"})
    with pytest.raises(ValueError, match="data.task"):
        run_training(cfg, 0, tmp_path / "run")
    assert not (tmp_path / "run").exists()
