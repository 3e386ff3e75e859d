"""Multi-process training through the launcher: `accelerate launch` of `python -m dgro_lib.runs.process_main`, 2 CPU processes
(gloo DDP), a group split across the two ranks."""

import json
import sys
from collections import defaultdict

import pandas as pd
import pytest

from dgro_lib.config import apply_overrides, find_params, load_config
from dgro_lib.runs.launch import accelerate_command, launch_run, trl_accelerate_config


def ci_cfg(**over):
    return apply_overrides(load_config(find_params("dgro_fig1_reward_variance", "ci")),
                           {"train.eval_every": 0, "sweep": {}, **over})


@pytest.mark.slow
def test_two_cpu_processes_agree_and_gather_group_statistics(tmp_path):
    """1 prompt x G=4 over 2 processes: each rank holds half of the group. Every rank must see advantages
    r - mean(r over the WHOLE group), the loss averaged over ranks must be the same on both, and DDP must keep
    the parameters identical; the main process alone writes the run's files."""
    cfg = ci_cfg(**{"train.max_steps": 4, "train.prompts_per_step": 1, "train.num_generations": 4,
                    "train.num_processes": 2, "train.rank_logs": True, "train.save_steps": 100})
    run = tmp_path / "run"
    summary = launch_run(cfg, 0, run)
    assert summary is not None and 0.0 <= summary["accuracy"] <= 1.0
    logs = {r: [json.loads(x) for x in (run / "ranks" / f"rank{r}.jsonl").read_text().splitlines()] for r in (0, 1)}
    assert [len(logs[0]), len(logs[1])] == [4, 4]
    varied = 0
    for s0, s1 in zip(logs[0], logs[1]):
        assert s0["world"] == s1["world"] == 2 and s0["step"] == s1["step"]
        # float32 all-reduce: relative tolerances, so the check does not depend on the loss's scale
        assert s0["loss_mean"] == pytest.approx(s1["loss_mean"], rel=1e-6, abs=1e-9)
        assert s0["loss_mean"] == pytest.approx((s0["loss_local"] + s1["loss_local"]) / 2, rel=1e-5, abs=1e-8)
        assert s0["param_checksum"] == s1["param_checksum"]
        assert len(s0["rewards"]) == len(s1["rewards"]) == 2
        groups = defaultdict(list)
        for s in (s0, s1):
            for r, g, a in zip(s["rewards"], s["group_ids"], s["advantages"]):
                groups[g].append((r, a))
        assert len(groups) == 1  # the one group is split across the two ranks
        for rows in groups.values():
            mean = sum(r for r, _ in rows) / len(rows)
            assert all(a == pytest.approx(r - mean, abs=1e-6) for r, a in rows)
            varied += len({r for r, _ in rows}) > 1
    assert varied >= 1, "no step had reward variance within the split group: the check above was vacuous"
    files = {p.name for p in run.iterdir()}
    assert {"config.yaml", "manifest.json", "metrics.csv", "final_eval.json"} <= files
    assert json.loads((run / "manifest.json").read_text())["num_processes"] == 2


def test_accelerate_command_for_each_engine(tmp_path):
    cfg = ci_cfg(**{"train.num_processes": 2})
    cmd = accelerate_command(cfg, tmp_path / "c.yaml", 3, tmp_path / "r", {"reward.scheme": "[-1,1]"}, cuda=False)
    assert cmd[:3] == [sys.executable, "-m", "accelerate.commands.launch"]
    assert cmd[cmd.index("--num_processes") + 1] == "2" and "--multi_gpu" in cmd
    assert 0 < int(cmd[cmd.index("--main_process_port") + 1]) < 65536  # a free port: parallel runs do not collide
    assert cmd[cmd.index("-m", 3):][:2] == ["-m", "dgro_lib.runs.process_main"]
    assert json.loads(cmd[cmd.index("--point") + 1]) == {"reward.scheme": "[-1,1]"}
    for engine, fname in (("zero2", "zero2.yaml"), ("zero3", "zero3.yaml"), ("fsdp", "fsdp2.yaml")):
        c = accelerate_command(apply_overrides(cfg, {"train.distributed": engine, "train.bf16": True}),
                               "c.yaml", 0, "r", cuda=True)
        assert c[c.index("--config_file") + 1] == str(trl_accelerate_config(engine)) and c[c.index("--config_file") + 1].endswith(fname)
        assert c[c.index("--mixed_precision") + 1] == "bf16"
    with pytest.raises(ValueError, match="needs GPUs"):
        accelerate_command(apply_overrides(cfg, {"train.distributed": "zero3"}), "c.yaml", 0, "r", cuda=False)


def test_a_failing_child_fails_the_call_with_its_error(tmp_path):
    from dgro_lib.runs.launch import stream_command
    import io

    buf = io.StringIO()
    with pytest.raises(RuntimeError, match="exit code 3") as e:
        stream_command([sys.executable, "-c", "import sys; print('boom: bad thing'); sys.exit(3)"], out=buf)
    assert "boom: bad thing" in str(e.value) and "boom: bad thing" in buf.getvalue()


def test_num_processes_must_divide_the_rollout_batch():
    from dgro_lib.config import ConfigError

    with pytest.raises(ConfigError, match="train.num_processes"):
        ci_cfg(**{"train.num_processes": 3})
    with pytest.raises(ConfigError, match="train.distributed"):
        ci_cfg(**{"train.distributed": "zero4"})
    with pytest.raises(ConfigError, match="workers"):
        ci_cfg(**{"train.num_processes": 2, "workers": 2})


def test_batch_arithmetic_reaches_trl(tmp_path):
    """512 prompts x 5 over 8 processes, 4 updates per rollout batch, micro-batches of 4 rows (the DCPO authors'
    setting): TRL gets per-device 4, accumulation 20, 80 micro-batches per generation = 4 optimizer steps."""
    from dgro_lib.runs.experiment import grpo_config

    cfg = ci_cfg(**{"train.prompts_per_step": 512, "train.num_generations": 5, "train.num_processes": 8,
                    "train.updates_per_rollout": 4, "train.micro_batch_size": 4, "train.max_steps": 4})
    a = grpo_config(cfg, 0, tmp_path)
    assert (a.per_device_train_batch_size, a.gradient_accumulation_steps, a.steps_per_generation) == (4, 20, 80)
    assert a.per_device_train_batch_size * 8 * a.steps_per_generation == 512 * 5
    assert a.steps_per_generation // a.gradient_accumulation_steps == 4
    b = grpo_config(ci_cfg(), 0, tmp_path)  # the ci default: one micro-batch, one update per rollout batch
    assert (b.gradient_accumulation_steps, b.steps_per_generation) == (1, 1)
    from dgro_lib.config import ConfigError

    with pytest.raises(ConfigError, match="train.micro_batch_size"):
        ci_cfg(**{"train.micro_batch_size": 3})


def _rank_logs(run):
    return {r: [json.loads(x) for x in (run / "ranks" / f"rank{r}.jsonl").read_text().splitlines()] for r in (0, 1)}


@pytest.mark.slow
def test_dcpo_statistics_and_the_aepo_row_cap_span_both_processes(tmp_path):
    """The DCPO authors compute H, T, the correct fraction and alpha once per rollout batch on the driver, and cap
    AEPO's substituted rows (reinforce_sample_num) over the whole batch. Over 2 processes (1 prompt x G=4 each):
    DCPO's statistics are the same on both ranks and equal those of the two ranks' rewards together; AEPO with a
    cap of 1 and every extra row qualifying substitutes exactly 1 row per step over both ranks (a per-process cap
    would substitute 2)."""
    base = {"train.max_steps": 3, "train.prompts_per_step": 2, "train.num_generations": 4, "train.num_processes": 2,
            "train.rank_logs": True, "train.save_steps": 100, "loss.scale": "group_std"}
    # correct_threshold -2.5: every answer but a bad-format one counts as R = 1, so the fraction varies early on
    dcpo = ci_cfg(**{**base, "loss.name": "dcpo", "loss.kwargs": {"correct_threshold": -2.5}})
    logs = _rank_logs(_launched(dcpo, tmp_path / "dcpo"))
    differ = 0
    for s0, s1 in zip(logs[0], logs[1]):
        assert s0["batch_stats"] == s1["batch_stats"]
        rewards = s0["rewards"] + s1["rewards"]
        frac = sum(r > -2.5 for r in rewards) / len(rewards)
        assert s0["batch_stats"]["frac_correct"] == pytest.approx(frac)
        local = [sum(r > -2.5 for r in s["rewards"]) / len(s["rewards"]) for s in (s0, s1)]
        differ += local[0] != local[1]
    assert logs[0][0]["batch_stats"]["H"] == 0.0  # no previous step yet: the authors start at 0
    assert len({s["batch_stats"]["H"] for s in logs[0]}) > 1
    assert differ, "the two ranks never disagreed on their local correct fraction: the check was vacuous"

    aepo = ci_cfg(**{**base, "loss.name": "aepo", "loss.kwargs": {"min_advantage": -100.0, "reinforce_sample_num": 1,
                                                                  "entropy_base": 100.0}})
    logs = _rank_logs(_launched(aepo, tmp_path / "aepo"))
    for s0, s1 in zip(logs[0], logs[1]):
        assert s0["extra_candidates"] == s1["extra_candidates"] == [4, 4]  # both ranks had rows to offer
        assert sum(s0["rollout_flags"]) + sum(s1["rollout_flags"]) == 1
        assert sum(s0["rollout_flags"]) == 1  # filled in process order, as the first rows of the global batch


def _launched(cfg, run):
    summary = launch_run(cfg, 0, run)
    assert summary is not None
    return run


def test_training_arguments_exist_before_the_model_loads(tmp_path, monkeypatch):
    """ZeRO-3 partitions weights as they load only if the TrainingArguments (which register the DeepSpeed config)
    were built first; a model loaded before them is a full fp32 copy on every rank."""
    import dgro_lib.runs.training as training

    order = []
    real_grpo_config = training.grpo_config
    monkeypatch.setattr(training, "grpo_config", lambda *a, **k: (order.append("args"), real_grpo_config(*a, **k))[1])

    class Loaded(Exception):
        pass

    def load_model(*a, **k):
        order.append("model")
        raise Loaded

    monkeypatch.setattr(training, "load_model", load_model)
    with pytest.raises(Loaded):
        training.run_training(ci_cfg(), 0, tmp_path / "run")
    assert order == ["args", "model"]


def test_evaluations_outside_the_trainer_go_to_the_gpu_when_there_is_one():
    from dgro_lib.config import eval_placement
    import torch

    cfg = ci_cfg()
    assert eval_placement(cfg, cuda=False) == ("cpu", torch.float32)  # what every CPU reference was evaluated under
    assert eval_placement(cfg, cuda=True) == ("cuda", torch.float32)
    assert eval_placement(apply_overrides(cfg, {"train.bf16": True}), cuda=True) == ("cuda", torch.bfloat16)
    assert eval_placement(apply_overrides(cfg, {"train.bf16": True}), cuda=False) == ("cpu", torch.float32)
    assert eval_placement(apply_overrides(cfg, {"train.cpu": True}), cuda=True) == ("cpu", torch.float32)


def _zero3_run(cfg, run_dir):
    """Train ``cfg`` through launch_run over 2 CPU processes under TRL's own ZeRO-3 accelerate config (DeepSpeed's CPU
    accelerator, ``train.cpu: true``); launch_run then evaluates in this process, after they have exited."""
    cfg = apply_overrides(cfg, {"train.distributed": "zero3", "train.cpu": True})
    import io

    return launch_run(cfg, 0, run_dir, out=io.StringIO())


@pytest.mark.slow
@pytest.mark.parametrize("loss", ["dgro", "dcpo", "aepo"])
def test_zero3_over_two_processes_trains_and_evaluates_without_hanging(tmp_path, loss):
    """Under ZeRO-3 a forward pass needs every rank: evaluating on rank 0 alone hung every multi-process run at its
    periodic and final evaluations, and DCPO's temperature-scaled log-probs read the partitioned (0,)-shaped LM head.
    Here both ranks train, save the periodic snapshot collectively, exit, and this process evaluates. AEPO adds the
    extra rollouts at another temperature, generated on both ranks and capped over the whole batch."""
    over = {"train.max_steps": 2, "train.prompts_per_step": 1, "train.num_generations": 4, "train.num_processes": 2,
            "train.save_steps": 100, "train.eval_every": 1, "train.eval_subset": 4, "loss.name": loss}
    if loss == "dcpo":
        over.update({"loss.kwargs": {"correct_threshold": -2.5}, "loss.scale": "group_std"})
    if loss == "aepo":  # whole groups per rank (2 prompts); every extra row qualifies, one kept over both ranks
        over.update({"loss.kwargs": {"min_advantage": -100.0, "reinforce_sample_num": 1, "entropy_base": 100.0},
                     "loss.scale": "group_std", "train.prompts_per_step": 2})
    run = tmp_path / loss
    cfg = ci_cfg(**over)
    summary = _zero3_run(cfg, run)
    assert 0.0 <= summary["accuracy"] <= 1.0
    heldout = pd.read_csv(run / "heldout.csv")
    assert list(heldout["step"]) == [1, 2] and list(heldout["subset"])[0] == 4  # the snapshot, then the final one
    assert not any((run / "snapshots").iterdir())  # each snapshot is removed once evaluated
    final = json.loads((run / "final_eval.json").read_text())
    # one score per held-out puzzle (a fraction of correct samples under a sampled protocol)
    assert final["evaluated_on"]["device"] == "cpu" and len(final["correct"]) == cfg.data.n_eval
    # the processes ran under DeepSpeed ZeRO-3, as the run's manifest records (the launcher checks it too)
    engine = json.loads((run / "manifest.json").read_text())["engine"]
    assert engine == {"distributed_type": "DEEPSPEED", "num_processes": 2, "zero_stage": 3}


def test_the_engine_that_runs_is_the_one_asked_for():
    """accelerate falls back without an error (TRL's FSDP2 config on CPU processes runs them as independent single
    processes, no gradient exchange): the trainer refuses any engine but the one train.distributed names."""
    from dgro_lib.config import ConfigError, check_runnable_here
    from dgro_lib.runs.training import check_engine

    cfg = ci_cfg(**{"train.num_processes": 2})
    ddp, z3 = cfg, apply_overrides(cfg, {"train.distributed": "zero3", "train.cpu": True})
    check_engine(ddp, {"distributed_type": "MULTI_CPU", "num_processes": 2}, 2)
    check_engine(z3, {"distributed_type": "DEEPSPEED", "num_processes": 2, "zero_stage": 3}, 2)
    check_engine(z3, {"distributed_type": "NO", "num_processes": 1}, 1)  # one process: nothing to check
    for c, engine in ((z3, {"distributed_type": "DEEPSPEED", "num_processes": 2, "zero_stage": 2}),
                      (z3, {"distributed_type": "MULTI_CPU", "num_processes": 2}),
                      (ddp, {"distributed_type": "NO", "num_processes": 1}),
                      (ddp, {"distributed_type": "DEEPSPEED", "num_processes": 2, "zero_stage": 3})):
        with pytest.raises(RuntimeError, match=f"train.distributed: '{c.train.distributed}' over 2 processes"):
            check_engine(c, engine, 2)
    # FSDP has no CPU path: refused before launch, on a CPU machine and with train.cpu
    fsdp = apply_overrides(cfg, {"train.distributed": "fsdp"})
    with pytest.raises(ConfigError, match="FSDP has no CPU path"):
        check_runnable_here(fsdp, cuda=False)
    with pytest.raises(ConfigError, match="needs GPUs, but train.cpu is true"):
        apply_overrides(fsdp, {"train.cpu": True})
