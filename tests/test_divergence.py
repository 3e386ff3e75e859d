"""Divergence stops with its evidence: a non-finite reward, loss or gradient norm stops the run at that step (or,
with skip_nonfinite, skips it) after saving the rollout batch; known NaN traps of the losses stay finite."""

import json
import math

import pytest
import torch
from transformers import TrainerCallback

from dgro_lib import losses as L
from dgro_lib.losses import aggregate, compute_advantages, dcpo_loss, dgro_loss, grpo_verl_loss, register_loss
from dgro_lib.rl.trainer import NonFiniteError

from test_trainer import length_reward, make_trainer, tokenizer  # noqa: F401  (tokenizer is a fixture)

torch.set_num_threads(1)


class Snapshots(TrainerCallback):
    """The model's parameters after every optimizer step, by global step (0 = before training)."""

    def __init__(self):
        self.params: dict[int, dict[str, torch.Tensor]] = {}
        self.trainer = None

    def _take(self, step, model):
        self.params[step] = {k: v.detach().clone() for k, v in model.named_parameters()}

    def on_train_begin(self, args, state, control, model=None, **kw):
        self._take(state.global_step, model)

    def on_step_end(self, args, state, control, model=None, **kw):
        self._take(state.global_step, model)


def current_params(trainer):
    return {k: v.detach().clone() for k, v in trainer.accelerator.unwrap_model(trainer.model).named_parameters()}


def assert_same_params(a, b):
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k


def assert_params_differ(a, b):
    assert any(not torch.equal(a[k], b[k]) for k in a)


def nan_reward_at(bad_step):
    """length_reward, but NaN for every completion of the rollout batch of optimizer step ``bad_step``."""
    def nan_reward(completions, trainer_state=None, **kwargs):
        if trainer_state is not None and trainer_state.global_step + 1 == bad_step:
            return [float("nan")] * len(completions)
        return length_reward(completions)
    return nan_reward


@pytest.fixture
def test_loss():
    """Registers ``_test_bad_loss``: a DGRO-like loss whose value (``kind="value"``: inf) or gradient (``kind="grad"``:
    NaN through sqrt at 0, the value stays finite) is non-finite on the ``bad_call``-th call (1-based)."""
    calls = {"n": 0}

    @register_loss("_test_bad_loss")
    def _bad(logps, old_logps, mask, advantages, *, bad_call=2, kind="value"):
        calls["n"] += 1
        loss = -(advantages[:, None] * logps * mask).sum() / mask.sum().clamp(min=1.0)
        if calls["n"] == bad_call:
            if kind == "value":
                loss = loss + float("inf")
            else:
                loss = loss + torch.sqrt(logps * 0.0).sum()  # value 0, gradient 0 * inf = NaN
        return loss, {}

    try:
        yield calls
    finally:
        L.unregister_loss("_test_bad_loss")


def test_nan_reward_stops_at_its_step_with_the_batch_saved(tmp_path, tokenizer):
    snaps = Snapshots()
    trainer = make_trainer(tmp_path, tokenizer, steps=3, reward=nan_reward_at(2), callbacks=[snaps], save_steps=1)
    with pytest.raises(NonFiniteError, match=r"non-finite reward at step 2.*reward function 'nan_reward'") as e:
        trainer.train()
    assert e.value.step == 2 and e.value.quantity == "reward"
    assert "checkpoint-1" in str(e.value)  # the last good checkpoint is named
    assert trainer.state.global_step == 1
    assert_same_params(current_params(trainer), snaps.params[1])  # step 2 applied no update
    assert_params_differ(snaps.params[1], snaps.params[0])  # (step 1 did)
    pt = tmp_path / "out" / "nonfinite_step2.pt"
    assert pt == e.value.path and pt.exists()
    ev = torch.load(pt, weights_only=True)
    assert ev["step"] == 2 and ev["quantity"] == "reward"
    rewards = ev["tensors"]["rewards_per_func"]
    assert rewards.shape == (8, 1) and torch.isnan(rewards).all()
    assert len(ev["tensors"]["completions"]) == 8 and len(ev["rows"]) == 8
    doc = json.loads(pt.with_suffix(".json").read_text())
    assert doc["step"] == 2 and all(r["rewards"]["nan_reward"] == "nan" for r in doc["rows"])
    assert all(isinstance(r["prompt"], str) and isinstance(r["completion"], str) for r in doc["rows"])


def test_inf_loss_stops_before_backward(tmp_path, tokenizer, test_loss):
    snaps = Snapshots()
    trainer = make_trainer(tmp_path, tokenizer, steps=3, loss_name="_test_bad_loss", loss_kwargs={"bad_call": 2},
                           reward=length_reward, callbacks=[snaps])
    with pytest.raises(NonFiniteError, match=r"non-finite loss at step 2") as e:
        trainer.train()
    assert e.value.quantity == "loss" and "_test_bad_loss" in str(e.value)
    assert_same_params(current_params(trainer), snaps.params[1])
    ev = torch.load(e.value.path, weights_only=True)
    (batch,) = ev["batches"]
    for key in ("prompt_ids", "completion_ids", "completion_mask", "advantages", "rewards", "group_ids"):
        assert key in batch, key
    assert batch["completion_ids"].shape[0] == 8 and ev["tensors"]["logps"].shape == batch["completion_ids"].shape
    doc = json.loads(e.value.path.with_suffix(".json").read_text())
    assert len(doc["rows"]) == 8 and {"completion", "prompt", "rewards", "advantages"} <= set(doc["rows"][0])


def test_nan_gradient_norm_stops_before_the_optimizer_step(tmp_path, tokenizer, test_loss):
    """A finite loss with a NaN gradient: caught on the (pre-clip) gradient norm, before optimizer.step()."""
    snaps = Snapshots()
    trainer = make_trainer(tmp_path, tokenizer, steps=3, loss_name="_test_bad_loss",
                           loss_kwargs={"bad_call": 2, "kind": "grad"}, reward=length_reward, callbacks=[snaps])
    with pytest.raises(NonFiniteError, match=r"non-finite gradient norm at step 2") as e:
        trainer.train()
    assert_same_params(current_params(trainer), snaps.params[1])
    ev = torch.load(e.value.path, weights_only=True)
    assert ev["quantity"] == "gradient norm" and len(ev["batches"]) == 1


@pytest.mark.parametrize("kind", ["value", "grad"])
def test_skip_nonfinite_skips_the_step_and_counts_it(tmp_path, tokenizer, test_loss, kind):
    snaps = Snapshots()
    trainer = make_trainer(tmp_path, tokenizer, steps=3, loss_name="_test_bad_loss",
                           loss_kwargs={"bad_call": 2, "kind": kind}, reward=length_reward, callbacks=[snaps],
                           skip_nonfinite=True)
    trainer.train()
    assert trainer.state.global_step == 3
    assert_same_params(snaps.params[2], snaps.params[1])  # the bad step moved nothing (Adam moments included)
    assert_params_differ(snaps.params[3], snaps.params[2])  # and training went on
    logs = {h["step"]: h for h in trainer.state.log_history if "loss" in h}
    assert [logs[s]["nonfinite/skipped"] for s in (1, 2, 3)] == [0.0, 1.0, 1.0]
    assert all(math.isfinite(h["loss"]) for h in logs.values())
    assert (tmp_path / "out" / "nonfinite_step2.pt").exists()


def test_skip_nonfinite_reward_skips_the_rollout_batch(tmp_path, tokenizer):
    snaps = Snapshots()
    trainer = make_trainer(tmp_path, tokenizer, steps=3, reward=nan_reward_at(2), callbacks=[snaps],
                           skip_nonfinite=True)
    trainer.train()
    assert_same_params(snaps.params[2], snaps.params[1])
    assert_params_differ(snaps.params[3], snaps.params[2])
    assert [h["nonfinite/skipped"] for h in trainer.state.log_history if "loss" in h] == [0.0, 1.0, 1.0]
    assert (tmp_path / "out" / "nonfinite_step2.pt").exists()


def test_a_reward_function_returning_none_next_to_a_finite_one_is_not_divergence(tmp_path, tokenizer):
    """TRL's convention: None (NaN) means "this reward function does not apply"; another's finite reward counts."""
    def sometimes_none(completions, **kwargs):
        return [None] * len(completions)
    trainer = make_trainer(tmp_path, tokenizer, steps=1, reward=[length_reward, sometimes_none])
    trainer.train()
    assert trainer.state.global_step == 1


# ------------------------------------------------------------------ known NaN traps stay finite


def _batch(B=4, T=5, *, empty_row=None, seed=0):
    g = torch.Generator().manual_seed(seed)
    logps = (-torch.rand(B, T, generator=g) - 0.1).requires_grad_(True)
    old = (logps.detach() + 0.05 * torch.randn(B, T, generator=g))
    mask = torch.ones(B, T)
    mask[:, -1] = 0
    if empty_row is not None:
        mask[empty_row] = 0
        with torch.no_grad():  # what padding may hold
            logps[empty_row] = -float("inf")
            old[empty_row] = -float("inf")
    return logps, old, mask


def _assert_finite_loss_and_grad(loss, logps):
    assert torch.isfinite(loss), loss
    (grad,) = torch.autograd.grad(loss, logps)
    assert torch.isfinite(grad).all(), grad


def test_dcpo_without_a_correct_sample_is_finite():
    """The DCPO authors' alpha divides by the correct fraction; with rewards all 0 it is 0 here."""
    logps, old, mask = _batch()
    adv = torch.zeros(4)
    rewards = torch.zeros(4)
    loss, metrics = dcpo_loss(logps, old, mask, adv, rewards=rewards, temp_logps={1.2: old, 0.8: old})
    assert metrics["dcpo/alpha"] == 0.0 and metrics["dcpo/frac_correct"] == 0.0
    _assert_finite_loss_and_grad(loss, logps)


def test_zero_variance_group_under_group_std_is_finite():
    rewards = torch.tensor([1.0, 1.0, 1.0, 1.0, 0.0, 1.0, 0.5, 2.0])
    adv = compute_advantages(rewards, 4, scale="group_std")
    assert torch.isfinite(adv).all() and torch.equal(adv[:4], torch.zeros(4))
    adv1 = compute_advantages(torch.tensor([3.0, -1.0]), 1, scale="group_std")  # groups of one: std 0 too
    assert torch.isfinite(adv1).all()
    logps, old, mask = _batch(B=8)
    loss, _ = dgro_loss(logps, old, mask, adv, beta1=1.0, beta2=0.1)
    _assert_finite_loss_and_grad(loss, logps)


@pytest.mark.parametrize("name", ["dgro", "dcpo", "grpo_verl", "aggregate"])
@pytest.mark.parametrize("mode", ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum",
                                  "seq-mean-token-sum-norm"])
def test_an_all_padding_row_is_finite(name, mode):
    """A row whose mask is all 0 (and whose padding log-probs are -inf) contributes nothing and no NaN."""
    logps, old, mask = _batch(empty_row=1)
    adv = torch.tensor([1.0, -2.0, 0.5, -0.5])
    if name == "dgro":
        loss, _ = dgro_loss(logps, old, mask, adv, beta1=1.0, beta2=0.1, aggregation=mode)
    elif name == "dcpo":
        loss, _ = dcpo_loss(logps, old, mask, adv, rewards=torch.tensor([1.0, 1.0, 0.0, 0.0]),
                            temp_logps={1.2: old, 0.8: old}, aggregation=mode)
    elif name == "grpo_verl":
        loss, _ = grpo_verl_loss(logps, old, mask, adv, aggregation=mode)
    else:
        loss = aggregate(torch.where(mask > 0, logps, 0.0) * adv[:, None], mask, mode)
    _assert_finite_loss_and_grad(loss, logps)


@pytest.mark.parametrize("mode", ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum",
                                  "seq-mean-token-sum-norm"])
def test_an_all_padding_batch_is_finite(mode):
    logps, old, mask = _batch()
    mask.zero_()
    for loss in (dgro_loss(logps, old, mask, torch.ones(4), beta1=1.0, beta2=0.1, aggregation=mode)[0],
                 grpo_verl_loss(logps, old, mask, torch.ones(4), aggregation=mode)[0],
                 aggregate(logps * 1.0, mask, mode)):
        _assert_finite_loss_and_grad(loss, logps)


def test_trl_own_loss_gets_the_same_check(tmp_path, tokenizer, monkeypatch):
    """TRL's own losses (registry entries with trl_loss_type, e.g. grpo) go through GRPOTrainer._compute_loss: a
    non-finite value there stops the run the same way, before backward."""
    from trl import GRPOTrainer

    original, calls = GRPOTrainer._compute_loss, {"n": 0}

    def inf_on_second_call(self, model, inputs):
        calls["n"] += 1
        loss = original(self, model, inputs)
        return loss + float("inf") if calls["n"] == 2 else loss

    monkeypatch.setattr(GRPOTrainer, "_compute_loss", inf_on_second_call)
    snaps = Snapshots()
    trainer = make_trainer(tmp_path, tokenizer, steps=3, loss_name="grpo", loss_kwargs={}, reward=length_reward,
                           callbacks=[snaps])
    with pytest.raises(NonFiniteError, match=r"non-finite loss at step 2: loss 'grpo' = inf"):
        trainer.train()
    assert_same_params(current_params(trainer), snaps.params[1])
    assert (tmp_path / "out" / "nonfinite_step2.pt").exists()


@pytest.mark.parametrize("skip", [False, True], ids=["stop", "skip"])
def test_run_training_stops_or_skips_per_train_skip_nonfinite(tmp_path, monkeypatch, skip):
    """train.skip_nonfinite reaches the trainer through run_training; a stopped run keeps its metrics rows."""
    import pandas as pd

    import dataclasses

    import dgro_lib.runs.training as T
    from dgro_lib.config import apply_overrides, find_params, load_config
    from dgro_lib.tasks import TASKS

    real = TASKS["kk"].reward_func

    def kk_reward_with_nan(scheme):
        inner = real(scheme)

        def kk_nan(completions, trainer_state=None, **kw):
            if trainer_state is not None and trainer_state.global_step + 1 == 2:
                return [float("nan")] * len(completions)
            return inner(completions=completions, trainer_state=trainer_state, **kw)
        return kk_nan

    monkeypatch.setitem(TASKS, "kk", dataclasses.replace(TASKS["kk"], reward_func=kk_reward_with_nan))
    cfg = apply_overrides(load_config(find_params("dgro_fig1_reward_variance", "ci")),
                          {"train.max_steps": 3, "train.save_steps": 1, "train.eval_every": 0, "sweep": {},
                           "train.skip_nonfinite": skip})
    run_dir = tmp_path / "run"
    if skip:
        T.run_training(cfg, 0, run_dir)
        metrics = pd.read_csv(run_dir / "metrics.csv")
        assert metrics["nonfinite/skipped"].tolist() == [0.0, 1.0, 1.0]
    else:
        with pytest.raises(NonFiniteError, match=r"non-finite reward at step 2.*'kk_nan'.*checkpoint-1"):
            T.run_training(cfg, 0, run_dir)
        assert pd.read_csv(run_dir / "metrics.csv")["step"].tolist() == [1]
        assert not (run_dir / "final_eval.json").exists()
    assert (run_dir / "trainer" / "nonfinite_step2.pt").is_file()
