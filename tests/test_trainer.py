"""The TRL trainer subclass: loss by name, true group statistics despite TRL's shuffle, beta2 and old log-probs."""

import math

import pytest
import torch
from datasets import Dataset
from trl import GRPOConfig

from dgro_lib.data import kk
from dgro_lib.models import EMBEDDED_PRESETS, build_embedded_tokenizer, sample
from dgro_lib.miniature import build_tiny_model
from dgro_lib.rewards import kk_reward_func
from dgro_lib.rl.trainer import DGROTrainer, make_rollout_func

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def tokenizer():
    return build_embedded_tokenizer()


def make_trainer(tmp_path, tokenizer, *, num_iterations=1, loss_name="dgro", loss_kwargs=None, steps=2, fast=True,
                 sampler=sample, rollout_policy="current", callbacks=None, save_steps=100, prompts=2, G=4, reward=None, grpo_kwargs=None, **trainer_kwargs):
    model = build_tiny_model(EMBEDDED_PRESETS["ci"], tokenizer=tokenizer)
    records = kk.generate(2, 20, seed=5)
    ds = Dataset.from_dict({
        "prompt": [kk.format_prompt(r) for r in records],
        "names": [list(r["names"]) for r in records],
        "solution": [list(r["solution"]) for r in records],
    })
    args = GRPOConfig(
        output_dir=str(tmp_path / "out"), num_generations=G,
        num_iterations=num_iterations, max_steps=steps, learning_rate=1e-3, max_completion_length=12,
        **{"per_device_train_batch_size": prompts * G, "beta": 0.0, "scale_rewards": "none", "logging_steps": 1, "save_steps": save_steps,
           "report_to": [], "use_cpu": True, "bf16": False, "seed": 0, "disable_tqdm": True, **(grpo_kwargs or {})},
    )
    if args.beta != 0.0:  # TRL builds its reference model from the model's path: give it one
        model.save_pretrained(tmp_path / "base")
        model = str(tmp_path / "base")
    return DGROTrainer(
        model=model, reward_funcs=reward or kk_reward_func("[-3,3]"), args=args, train_dataset=ds,
        processing_class=tokenizer, rollout_func=make_rollout_func(sampler, policy=rollout_policy) if fast else None,
        loss_name=loss_name, loss_kwargs={"beta1": 1.0, "beta2": 0.1} if loss_kwargs is None else loss_kwargs,
        callbacks=callbacks, **trainer_kwargs,
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


# ------------------------------------------------------------------ the whole loss family through the trainer

from dgro_lib import losses as L  # noqa: E402

# What each loss needs beyond the defaults to run (TRL's own KL and the DRO source policy need a reference model).
SMOKE = {
    "dgro": ({"beta1": 1.0, "beta2": 0.1}, {}),
    "kimi": ({"tau": 0.1}, {}),
    "dro": ({"beta": 0.1}, {"beta": 0.04}),
    "grpo": ({"beta": 0.04}, {}),  # k3 KL to the reference, through TRL
    "dcpo": ({"entropy_base": 0.5}, {}),
    "j1": ({"alpha": 0.1}, {}),
    "j3": ({"alpha": 0.1}, {}),
    "entropy_reg": ({"coef": 0.01}, {}),
    "entropy_adv": ({}, {}),
    "online_dpo": ({"beta": 0.1}, {"beta": 0.04}),  # TRL's beta > 0 makes it compute the reference log-probs
}
METRIC = {"dgro": "dgro/grad_ratio_b2_b1", "kimi": "dgro/pg_term", "dro": "dro/value_loss", "dcpo": "dcpo/alpha",
          "j1": "dcpo/alpha", "j3": "dcpo/rho_mean", "entropy_reg": "entropy_reg/entropy_term",
          "entropy_adv": "entropy_adv/bonus_mean", "online_dpo": "online_dpo/frac_groups_with_pair",
          "aepo": "aepo/frac_substituted", "j2": "j2/reg_loss", "j4": "j4/weight_mean"}
GRPO_SCALED = ("dcpo", "j1", "j2", "j3", "j4", "aepo")


@pytest.mark.parametrize("name", L.list_losses())
def test_every_registered_loss_trains_through_the_trainer(tmp_path, tokenizer, name):
    loss_kwargs, grpo_kwargs = SMOKE.get(name, ({}, {}))
    if L.loss_entry(name).trl_loss_type is not None:  # TRL's own: its kwargs are GRPOConfig fields, set by the trainer
        grpo_kwargs = dict(loss_kwargs)  # (also here only so that make_trainer saves the model for TRL's ref copy)
    trainer = make_trainer(tmp_path, tokenizer, loss_name=name, loss_kwargs=loss_kwargs, grpo_kwargs=grpo_kwargs,
                           reward=length_reward, scale="group_std" if name in GRPO_SCALED else None)
    trainer.train()
    logs = [h for h in trainer.state.log_history if "loss" in h]
    assert len(logs) == 2 and all(math.isfinite(h["loss"]) for h in logs)
    assert all("entropy" in h and "reward_stats/reward/var" in h for h in logs)
    if name in METRIC:
        assert all(math.isfinite(h[METRIC[name]]) for h in logs), logs
    if L.loss_entry(name).trl_loss_type is not None:
        assert trainer.loss_type == name and trainer.beta == loss_kwargs.get("beta", 0.0)
        assert all("clip_ratio/region_mean" in h for h in logs)  # TRL's own loss logged its own metrics


def test_trl_loss_kwargs_must_be_grpo_config_fields(tmp_path, tokenizer):
    with pytest.raises(ValueError, match="no_such_knob"):
        make_trainer(tmp_path, tokenizer, loss_name="dapo", loss_kwargs={"no_such_knob": 1})


def test_off_policy_updates_use_temperature_logps_of_pi_old(tmp_path, tokenizer):
    """With num_iterations=2 the second update runs after the policy moved: DCPO's rho must still use log pi_old^T,
    scored at generation time (equal to a fresh scoring of the rollout with the generation-time weights)."""
    trainer = make_trainer(tmp_path, tokenizer, loss_name="dcpo", loss_kwargs={}, num_iterations=2,
                           reward=length_reward, scale="group_std")
    trainer.model.train()
    batch = trainer._generate_and_score_completions(_rows(trainer, 2, 4))
    assert batch["old_temp_logps"].shape == (*batch["completion_ids"].shape, 2)
    m = batch["completion_mask"].bool()
    torch.testing.assert_close(trainer._old_temperature_logps(batch)[m], batch["old_temp_logps"][m])
    seen = {}
    orig = trainer.loss_fn

    def spy(*a, temp_logps, **k):
        seen["temp"] = {t: v.clone() for t, v in temp_logps.items()}
        return orig(*a, temp_logps=temp_logps, **k)

    trainer.loss_fn = spy
    with torch.no_grad():
        for p in trainer.model.parameters():  # the policy moves after generation
            p.add_(0.01 * torch.randn_like(p))
    assert not torch.allclose(trainer._old_temperature_logps(batch)[m], batch["old_temp_logps"][m])
    trainer.current_gradient_accumulation_steps = 1  # set by Trainer.train's loop
    trainer._compute_loss(trainer.model, batch)
    for k, t in enumerate(trainer.loss_temperatures):
        torch.testing.assert_close(seen["temp"][t], batch["old_temp_logps"][..., k])
    on_policy = make_trainer(tmp_path, tokenizer, loss_name="dcpo", loss_kwargs={}, reward=length_reward)
    on_policy.model.train()
    assert "old_temp_logps" not in on_policy._generate_and_score_completions(_rows(on_policy, 2, 4))


def test_grpo_through_the_registry_equals_stock_trl(tmp_path, tokenizer):
    """Same batch, same weights: DGROTrainer(loss 'dapo', scale group_std) == GRPOTrainer(loss_type 'dapo')."""
    from trl import GRPOTrainer

    ours = make_trainer(tmp_path / "a", tokenizer, loss_name="dapo", loss_kwargs={"epsilon_high": 0.28},
                        reward=length_reward, scale="group_std", grpo_kwargs={"scale_rewards": "group"})
    twin = build_tiny_model(EMBEDDED_PRESETS["ci"], tokenizer=tokenizer)  # seeded: the same initial weights
    stock = GRPOTrainer(model=twin, reward_funcs=length_reward, args=ours.args, train_dataset=ours.train_dataset,
                        processing_class=tokenizer, rollout_func=make_rollout_func(sample))
    assert stock.loss_type == "dapo" and stock.epsilon_high == 0.28
    ours.model.train()
    rows = [{"prompt": p, "names": n, "solution": s} for p, n, s in zip(
        *(ours.train_dataset[:2][k] for k in ("prompt", "names", "solution"))) for _ in range(4)]
    batch = ours._generate_and_score_completions(rows)
    ours.current_gradient_accumulation_steps = stock.current_gradient_accumulation_steps = 1  # set by train()
    a = ours._compute_loss(ours.model, batch)
    stock.model.train()
    b = stock._compute_loss(stock.model, batch)
    torch.testing.assert_close(a, b)


def test_temperature_logps_come_from_the_same_forward(tmp_path, tokenizer):
    """The trainer's log pi^T equal log_softmax(logits / T) of a plain forward pass."""
    trainer = make_trainer(tmp_path, tokenizer, loss_name="dcpo", loss_kwargs={"t_high": 1.3, "t_low": 0.7},
                           reward=length_reward, logprob_chunk_size=5)
    seen = {}
    orig = trainer.loss_fn

    def spy(*args, **kwargs):
        seen.update(kwargs["temp_logps"])
        return orig(*args, **kwargs)

    trainer.loss_fn = spy
    trainer.model.train()
    rows = [{"prompt": p, "names": n, "solution": s} for p, n, s in zip(
        *(trainer.train_dataset[:2][k] for k in ("prompt", "names", "solution"))) for _ in range(4)]
    batch = trainer._generate_and_score_completions(rows)
    trainer.current_gradient_accumulation_steps = 1  # set by train()
    trainer._compute_loss(trainer.model, batch)
    ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], 1)
    att = torch.cat([batch["prompt_mask"], batch["completion_mask"]], 1)
    C = batch["completion_ids"].size(1)
    with torch.no_grad():
        logits = trainer.model(input_ids=ids, attention_mask=att).logits[:, -C - 1:-1]
    m = batch["completion_mask"].bool()
    assert sorted(seen) == [0.7, 1.3]
    for t in (0.7, 1.3):
        ref = torch.log_softmax(logits.float() / t, -1).gather(-1, batch["completion_ids"][..., None]).squeeze(-1)
        torch.testing.assert_close(seen[t][m], ref[m], rtol=1e-4, atol=1e-4)



def test_temperature_logps_gather_a_partitioned_lm_head(tmp_path, tokenizer, monkeypatch):
    """Under DeepSpeed ZeRO-3 a parameter outside its module's forward is a (0,)-shaped shard: DCPO's log pi^T read
    the head's weight there and failed ("weight must be (V, H=64), got (0,)"). A stand-in for ZeRO-3: the weight is
    empty except inside TRL's gather context, which the trainer must enter; the values equal the unpartitioned ones."""
    from contextlib import contextmanager

    from dgro_lib.rl import trainer as trainer_module
    from dgro_lib.models.logprobs import HiddenStateCapture

    trainer = make_trainer(tmp_path, tokenizer, loss_name="dcpo", loss_kwargs={"t_high": 1.3, "t_low": 0.7},
                           reward=length_reward)
    model = trainer.model
    ids = torch.tensor([[5, 6, 7, 8, 9, 10]])
    completion = ids[:, 3:]
    with torch.no_grad(), HiddenStateCapture(model) as cap:
        model(input_ids=ids)
    want = trainer._temperature_logps(cap, completion)
    head = cap.lm_head
    full = head.weight.data
    gathered = []

    @contextmanager
    def gather(*params):
        assert params[0] is head.weight
        head.weight.data = full
        gathered.append(True)
        try:
            yield
        finally:
            head.weight.data = torch.empty(0)

    head.weight.data = torch.empty(0)  # partitioned
    monkeypatch.setattr(trainer_module, "maybe_gather_lm_head_ctx", gather)
    try:
        got = trainer._temperature_logps(cap, completion)
    finally:
        head.weight.data = full
    assert gathered == [True]
    for t in want:
        torch.testing.assert_close(got[t], want[t])


def _rows(trainer, n_prompts, G):
    ds = trainer.train_dataset[:n_prompts]
    return [{"prompt": p, "names": n, "solution": s}
            for p, n, s in zip(ds["prompt"], ds["names"], ds["solution"]) for _ in range(G)]


@pytest.mark.parametrize("name,H0,expected_T", [("j2", 0.5, 1.2), ("j4", -1.0, 0.8), ("aepo", 0.5, 1.2)])
def test_extra_rollouts_are_sampled_at_the_chosen_temperature(tmp_path, tokenizer, name, H0, expected_T):
    """The extra rollouts of AEPO/J2/J4 go through the same sampler at T (T_high while H_prev <= H0, else T_low);
    J2/J4 append them, AEPO substitutes them for the first rows with advantage 1; their logs stay apart."""
    temps = []

    def recording_sample(model, tok, prompts, **kw):
        temps.append((len(prompts), kw["temperature"]))
        return sample(model, tok, prompts, **kw)

    kwargs = {"fraction": 0.5, "entropy_base": H0}
    if name == "aepo":
        kwargs["min_advantage"] = -1e9  # keep every extra row, so the substitution is visible
    trainer = make_trainer(tmp_path, tokenizer, loss_name=name, loss_kwargs=kwargs, prompts=2, G=4,
                           reward=length_reward, scale="group_std", sampler=recording_sample)
    trainer.model.train()
    batch = trainer._generate_and_score_completions(_rows(trainer, 2, 4))
    assert temps == [(8, 1.0), (4, expected_T)]  # the on-policy batch at T=1, then 1 of 2 prompts x G at T
    assert trainer.temperature == 1.0  # restored
    flags, tmp = batch["rollout_flags"], batch["rollout_temps"]
    if name == "aepo":
        assert batch["completion_ids"].shape[0] == 8 and flags.tolist() == [1.0] * 4 + [0.0] * 4
        assert torch.all(batch["advantages"][:4] == 1.0)
    else:
        assert batch["completion_ids"].shape[0] == 12 and flags.tolist() == [0.0] * 8 + [1.0] * 4
        assert batch["group_ids"][8:].tolist() == [2] * 4  # a group id of its own
    assert tmp[flags > 0].tolist() == pytest.approx([expected_T] * 4) and torch.all(tmp[flags == 0] == 1.0)
    assert int(batch["num_items_in_batch"]) == int(batch["completion_mask"].sum())
    m = trainer._metrics["train"]
    assert m["extra_rollouts/T"] == [expected_T] and len(m["extra_rollouts/completions/mean_length"]) == 1
    assert len(m["completions/mean_length"]) == 1  # the on-policy statistics are not mixed with the extra ones


def test_extra_rollouts_refuse_vllm_importance_correction(tmp_path, tokenizer):
    args = GRPOConfig(output_dir=str(tmp_path), use_vllm=True, vllm_importance_sampling_correction=True,
                      per_device_train_batch_size=4, num_generations=4, use_cpu=True, report_to=[])
    with pytest.raises(ValueError, match="vllm_importance_sampling_correction"):
        DGROTrainer(model=build_tiny_model(EMBEDDED_PRESETS["ci"], tokenizer=tokenizer), args=args,
                    reward_funcs=length_reward, loss_name="j2")


def test_dro_learns_a_value_head_on_samples_of_the_reference_policy(tmp_path, tokenizer):
    """DRO: the rollouts come from the frozen reference model (a fixed mu), V_phi(x) is a trained head with its
    own learning rate, and the policy and the head both move."""
    used = []

    def recording_sample(model, tok, prompts, **kw):
        used.append(model)
        return sample(model, tok, prompts, **kw)

    trainer = make_trainer(tmp_path, tokenizer, loss_name="dro", loss_kwargs={"beta": 0.1}, grpo_kwargs={"beta": 0.04},
                           reward=length_reward, sampler=recording_sample, rollout_policy="reference", value_lr=0.05,
                           steps=3)
    head = getattr(trainer.model, DGROTrainer.VALUE_HEAD)
    assert float(head.weight.detach().abs().sum()) == 0.0
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters() if "value_head" not in n}
    trainer.train()
    assert used and all(m is trainer.ref_model for m in used)
    assert float(head.weight.detach().abs().sum()) > 0.0
    assert any(not torch.equal(p, before[n]) for n, p in trainer.model.named_parameters() if n in before)
    assert 0.05 in {g["initial_lr"] for g in trainer.optimizer.param_groups}  # the head's own group
    logs = [h for h in trainer.state.log_history if "dro/value_loss" in h]
    assert len(logs) == 3 and all(math.isfinite(h["dro/value_mean"]) for h in logs)


def test_fast_sampler_rollouts_use_the_configured_top_p(tmp_path, tokenizer):
    """GRPOConfig.top_p reaches our KV-cache sampler as TRL's model.generate path would apply it (it was dropped)."""
    seen = []

    def recording_sample(model, tok, prompts, **kw):
        seen.append((kw["temperature"], kw["top_p"]))
        return sample(model, tok, prompts, **kw)

    trainer = make_trainer(tmp_path, tokenizer, sampler=recording_sample, grpo_kwargs={"top_p": 0.8})
    assert trainer.top_p == 0.8
    trainer.model.train()
    trainer._generate_and_score_completions(_rows(trainer, 2, 4))
    assert seen == [(1.0, 0.8)]


def test_reference_rollouts_need_a_reference_model(tmp_path, tokenizer):
    with pytest.raises(ValueError, match="policy"):
        make_rollout_func(sample, policy="behaviour")
    trainer = make_trainer(tmp_path, tokenizer, rollout_policy="reference", steps=1)
    with pytest.raises(ValueError, match="beta != 0"):
        trainer.train()


CHUNKED = [n for n in L.list_losses() if L.loss_entry(n).trl_loss_type is None]  # TRL's own losses run TRL's forward


@pytest.mark.parametrize("loss_name", CHUNKED + ["dgro-sequence"])
def test_length_sorted_forward_chunks_equal_one_padded_forward(tmp_path, tokenizer, loss_name):
    """forward_chunk_rows only changes how the loss's forward pass is cut: for every registered loss the loss, every
    logged metric and every gradient equal those of TRL's single padded pass, on a batch whose rows end at
    different lengths (one empty). Covers DCPO's temperature log-probs and DRO's value head too."""
    if loss_name == "dgro-sequence":
        loss_name, (loss_kwargs, grpo_kwargs) = "dgro", ({"beta1": 1.0, "beta2": 0.1, "ratio_level": "sequence"}, {})
    else:
        loss_kwargs, grpo_kwargs = SMOKE.get(loss_name, ({}, {}))
    trainer = make_trainer(tmp_path, tokenizer, loss_name=loss_name, loss_kwargs=loss_kwargs, grpo_kwargs=grpo_kwargs,
                           reward=length_reward, scale="group_std" if loss_name in GRPO_SCALED else None)
    head = getattr(trainer.model, DGROTrainer.VALUE_HEAD, None)
    if head is not None:  # zero-initialised: give it weights, so a row mix-up in the values would show
        with torch.no_grad():
            head.weight.copy_(torch.randn(head.weight.shape, generator=torch.Generator().manual_seed(1)))
    trainer.model.train()
    batch = trainer._generate_and_score_completions(_rows(trainer, 2, 4))
    B, C = batch["completion_ids"].shape
    lengths = torch.tensor([C, 0, 3, C - 1, 1, 5, C, 2] * (B // 8 + 1))[:B]  # as if EOS had come at these positions
    keep = torch.arange(C)[None, :] < lengths[:, None]
    batch["completion_mask"] = batch["completion_mask"] * keep
    batch["completion_ids"] = batch["completion_ids"].masked_fill(~keep, tokenizer.pad_token_id)
    trainer.current_gradient_accumulation_steps = 1
    results = []
    for rows in (None, 3):
        trainer.forward_chunk_rows = rows
        trainer._metrics["train"].clear()
        trainer.model.zero_grad()
        loss = trainer._compute_loss(trainer.model, batch)
        loss.backward()
        grads = {n: p.grad.detach().clone() for n, p in trainer.model.named_parameters() if p.grad is not None}
        results.append((loss.detach(), {k: list(v) for k, v in trainer._metrics["train"].items()}, grads))
    (loss_a, met_a, grad_a), (loss_b, met_b, grad_b) = results
    torch.testing.assert_close(loss_b, loss_a, rtol=1e-5, atol=1e-6)
    assert met_a.keys() == met_b.keys()
    for key in met_a:
        assert met_b[key] == pytest.approx(met_a[key], rel=1e-4, abs=1e-6), key
    assert grad_a.keys() == grad_b.keys() and grad_a
    # Chunks reorder float32 sums (a weight's gradient is one GEMM over all tokens vs 3 chunks added up, with other
    # BLAS blockings), so a single element that cancels to ~0 can differ by 1e-4 relative (seen on another CPU:
    # 2e-6 on an element ~1e-2 of o_proj.bias, whose gradient has norm ~80). Compare each parameter's gradient as a
    # whole: ||g_chunked - g_padded|| <= tol ||g_padded||. Reordering a float32 sum of n terms moves it by at most
    # ~n u sum|terms| in the worst case, ~sqrt(n) eps with random rounding (eps = 2u = 1.2e-7); here n ~ 8 rows x ~100
    # tokens = 800 for the gradient accumulation (after reductions over width <= 64 and vocab 153): sqrt(n) eps ~ 3e-6.
    # Measured <= 4.4e-7 under AVX2, no SIMD (ATEN_CPU_CAPABILITY=default), MKL_CBWR=COMPATIBLE, 2 threads: 1e-5 leaves
    # a 3x / 25x margin; breaking _policy_forward moves some gradient by far more: prompts' left padding attended
    # 2e-2, logps' row order not undone or last token trimmed: the loss by > 1e-2, DRO values' order not undone 7e-4
    # (only across groups: a group's rows share the prompt, hence the value).
    tol = 1e-5
    for name in grad_a:
        err, ref = (grad_b[name] - grad_a[name]).norm().item(), grad_a[name].norm().item()
        assert err <= tol * ref, f"{name}: ||diff|| {err:.3g} > {tol} * ||grad|| {ref:.3g}"


def test_forward_chunk_rows_must_be_positive(tmp_path, tokenizer):
    with pytest.raises(ValueError, match="forward_chunk_rows"):
        make_trainer(tmp_path, tokenizer, forward_chunk_rows=0)


# ------------------------------------------------------------------ statistics of the whole rollout batch (DCPO)


def parity_reward(completions, **kwargs):
    """1 for an odd-length completion, else 0: some rows 'correct' (R = 1[r > 0.05]), some not, for any model."""
    return [float(len(c) % 2) for c in completions]


def _recording_loss(trainer):
    calls = []
    orig = trainer.loss_fn

    def spy(logps, old_logps, mask, advantages, **kw):
        with torch.no_grad():
            calls.append({"step": trainer.state.global_step, "stats": dict(kw["batch_stats"]),
                          "rewards": kw["rewards"].clone(), "nll_sum": float(-(logps * mask).sum()),
                          "tokens": float(mask.sum())})
        return orig(logps, old_logps, mask, advantages, **kw)

    trainer.loss_fn = spy
    return calls


@pytest.mark.parametrize("entropy_from", ["previous_step", "rollout"])
def test_dcpo_statistics_are_those_of_the_whole_rollout_batch(tmp_path, tokenizer, entropy_from):
    """One rollout batch of 2 prompts x G=4 = 8 rows in 4 micro-batches of 2 (one optimizer step): every micro-batch
    gets the same H, T, correct fraction and alpha, computed from all 8 raw rewards; H is the previous step's
    in-update -log pi (mean of its micro-batches' token means; 0 at the first step, the authors' lag) or, with
    entropy_from='rollout', this batch's token mean under pi_old."""
    trainer = make_trainer(tmp_path, tokenizer, loss_name="dcpo", loss_kwargs={"entropy_from": entropy_from},
                           reward=parity_reward, scale="group_std", steps=3,
                           grpo_kwargs={"per_device_train_batch_size": 2, "gradient_accumulation_steps": 4,
                                        "steps_per_generation": 4})
    calls = _recording_loss(trainer)
    trainer.train()
    steps = sorted({c["step"] for c in calls})
    assert len(steps) == 3 and all(sum(c["step"] == s for c in calls) == 4 for s in steps)
    mixed = 0
    prev_h = 0.0
    for s in steps:
        cs = [c for c in calls if c["step"] == s]
        stats = cs[0]["stats"]
        assert all(c["stats"] == stats for c in cs)  # one set of statistics for the whole rollout batch
        rewards = torch.cat([c["rewards"] for c in cs])
        frac = float((rewards > 0.05).float().mean())
        assert stats["frac_correct"] == pytest.approx(frac)
        if entropy_from == "previous_step":
            assert stats["H"] == pytest.approx(prev_h, rel=1e-5, abs=1e-7)
        else:  # the micro-batches of one optimizer step all see pi_old: their token sums make the batch's mean
            assert stats["H"] == pytest.approx(sum(c["nll_sum"] for c in cs) / sum(c["tokens"] for c in cs),
                                               rel=1e-4)
        assert stats["T"] == (1.2 if stats["H"] <= 0.5 else 0.8)
        assert stats["alpha"] == pytest.approx(L.dcpo_alpha(stats["H"], frac, entropy_base=0.5))
        local = [float((c["rewards"] > 0.05).float().mean()) for c in cs]
        mixed += len(set(local)) > 1  # micro-batches alone would have disagreed
        prev_h = sum(c["nll_sum"] / c["tokens"] for c in cs) / len(cs)
    assert mixed, "no step had micro-batches with different correct fractions: the check was vacuous"
    logs = [h for h in trainer.state.log_history if "batch_stats/alpha" in h]
    assert len(logs) == 3


def test_loss_kwargs_are_validated_against_the_loss(tmp_path, tokenizer):
    """A typo is refused with the key and the valid ones named (it used to be swallowed); the soft value baseline
    uses the beta the loss declares (Kimi: tau) instead of reading DGRO's parameter names."""
    with pytest.raises(ValueError, match=r"'beta_2'.*beta2"):
        make_trainer(tmp_path, tokenizer, loss_kwargs={"beta1": 1.0, "beta_2": 0.1})
    with pytest.raises(ValueError, match="soft"):
        make_trainer(tmp_path, tokenizer, loss_name="dcpo", loss_kwargs={}, value="soft")
    kimi = make_trainer(tmp_path, tokenizer, loss_name="kimi", loss_kwargs={"tau": 0.3}, value="soft")
    assert kimi.soft_beta == pytest.approx(0.3)
    dgro = make_trainer(tmp_path, tokenizer, loss_kwargs={"beta1": 0.5}, value="soft")
    assert dgro.soft_beta == pytest.approx(2 * 0.1 / 0.5)  # dgro's own default beta2 = 0.1, not the trainer's


def test_resume_keeps_the_previous_step_entropy(tmp_path, tokenizer):
    """DCPO's T and alpha at the first step after a resume use the entropy measured before the checkpoint (saved with
    it), not the 0 of a fresh start: a resumed run sees the statistics of an uninterrupted one."""
    kw = dict(loss_name="dcpo", loss_kwargs={}, reward=parity_reward, scale="group_std", steps=2, save_steps=1)
    whole = make_trainer(tmp_path / "a", tokenizer, **kw)
    calls = _recording_loss(whole)
    whole.train()
    h = {c["step"]: c["stats"]["H"] for c in calls}
    assert h[0] == 0.0 and h[1] > 0.0
    ckpt = tmp_path / "a" / "out" / "checkpoint-1"
    assert (ckpt / DGROTrainer.ENTROPY_STATE).is_file()
    resumed = make_trainer(tmp_path / "a", tokenizer, **kw)
    again = _recording_loss(resumed)
    resumed.train(resume_from_checkpoint=str(ckpt))
    assert [c["step"] for c in again] == [1]
    assert again[0]["stats"]["H"] == pytest.approx(h[1], rel=1e-6)
