"""The TRL trainer subclass: loss by name, true group statistics despite TRL's shuffle, beta2 and old log-probs."""

import math

import pytest
import torch
from datasets import Dataset
from trl import GRPOConfig

from dgro_lib.data import kk
from dgro_lib.models import EMBEDDED_PRESETS, build_embedded_tokenizer, build_tiny_model, sample
from dgro_lib.rewards import kk_reward_func
from dgro_lib.trainer import DGROTrainer, make_rollout_func

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def tokenizer():
    return build_embedded_tokenizer()


def make_trainer(tmp_path, tokenizer, *, num_iterations=1, loss_name="dgro", loss_kwargs=None, steps=2, fast=True,
                 callbacks=None, save_steps=100, prompts=2, G=4, reward=None):
    model = build_tiny_model(EMBEDDED_PRESETS["ci"], tokenizer=tokenizer)
    records = kk.generate(2, 20, seed=5)
    ds = Dataset.from_dict({
        "prompt": [kk.format_prompt(r) for r in records],
        "names": [list(r["names"]) for r in records],
        "solution": [list(r["solution"]) for r in records],
    })
    args = GRPOConfig(
        output_dir=str(tmp_path / "out"), per_device_train_batch_size=prompts * G, num_generations=G,
        num_iterations=num_iterations, max_steps=steps, learning_rate=1e-3, max_completion_length=12,
        beta=0.0, scale_rewards="none", logging_steps=1, save_steps=save_steps,
        report_to=[], use_cpu=True, bf16=False, seed=0, disable_tqdm=True,
    )
    return DGROTrainer(
        model=model, reward_funcs=reward or kk_reward_func("[-3,3]"), args=args, train_dataset=ds,
        processing_class=tokenizer, rollout_func=make_rollout_func(sample) if fast else None,
        loss_name=loss_name, loss_kwargs=loss_kwargs or {"beta1": 1.0, "beta2": 0.1}, callbacks=callbacks,
    )


def length_reward(completions, **kwargs):
    """A reward that varies within groups even for an untrained model (K&K rewards are all -3 there)."""
    return [float(len(c)) for c in completions]


def test_unknown_loss_lists_valid_names(tmp_path, tokenizer):
    with pytest.raises(KeyError, match="dgro"):
        make_trainer(tmp_path, tokenizer, loss_name="no_such_loss")


@pytest.mark.parametrize("fast", [True, False], ids=["kv_sampler", "model_generate"])
def test_training_logs_diagnostics(tmp_path, tokenizer, fast):
    trainer = make_trainer(tmp_path, tokenizer, fast=fast)
    trainer.train()
    logs = [h for h in trainer.state.log_history if "loss" in h]
    assert len(logs) == 2
    for h in logs:
        assert math.isfinite(h["loss"])
        for key in ("entropy", "reward_stats/reward/var", "reward_stats/reward/frac_zero_std_groups",
                    "dgro/grad_ratio_b2_b1", "completions/mean_length", "kk_outcome/correct"):
            assert key in h, f"{key} missing from {sorted(h)}"


def test_group_statistics_survive_the_shuffle(tmp_path, tokenizer):
    """Advantages are r - mean(r over the row's true group), though TRL shuffles rows before the loss sees them."""
    trainer = make_trainer(tmp_path, tokenizer, prompts=3, G=4, reward=length_reward)
    trainer.model.train()
    batch = trainer._generate_and_score_completions(
        [{"prompt": p, "names": n, "solution": s} for p, n, s in zip(
            *(trainer.train_dataset[:3][k] for k in ("prompt", "names", "solution"))) for _ in range(4)])
    perm = torch.randperm(12)
    r, g, a = batch["rewards"][perm], batch["group_ids"][perm], batch["advantages"][perm]
    for gid in g.unique():
        sel = g == gid
        assert sel.sum() == 4
        torch.testing.assert_close(a[sel], r[sel] - r[sel].mean())


def test_beta2_needs_several_updates_per_rollout(tmp_path, tokenizer):
    """With one update per rollout batch TRL passes no old log-probs: pi_old == pi_theta and beta2 has no gradient.

    With num_iterations=2 the second update sees old != current, so the beta2/beta1 gradient ratio is > 0.
    """
    on = make_trainer(tmp_path / "a", tokenizer, num_iterations=1, steps=2, reward=length_reward)
    on.train()
    ratios_on = [h["dgro/grad_ratio_b2_b1"] for h in on.state.log_history if "dgro/grad_ratio_b2_b1" in h]
    assert all(r == 0 for r in ratios_on), ratios_on
    assert any(h["dgro/grad_norm_b1"] > 0 for h in on.state.log_history if "dgro/grad_norm_b1" in h)
    off = make_trainer(tmp_path / "b", tokenizer, num_iterations=2, steps=2, reward=length_reward)
    off.train()
    ratios_off = [h["dgro/grad_ratio_b2_b1"] for h in off.state.log_history if "dgro/grad_ratio_b2_b1" in h]
    assert ratios_off[0] == 0 and ratios_off[1] > 0, ratios_off


def test_checkpoint_resume_continues(tmp_path, tokenizer):
    first = make_trainer(tmp_path, tokenizer, steps=2, save_steps=1)
    first.train()
    ckpt = tmp_path / "out" / "checkpoint-1"
    assert ckpt.is_dir()
    resumed = make_trainer(tmp_path, tokenizer, steps=2, save_steps=1)
    resumed.train(resume_from_checkpoint=str(ckpt))
    assert resumed.state.global_step == 2
    steps = [h["step"] for h in resumed.state.log_history if "loss" in h]
    assert steps == [1, 2] or steps == [2], steps  # the first step comes from the checkpoint's history
