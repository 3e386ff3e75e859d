"""Every parameter is checked when the params file loads, before anything trains: each bad value below loaded
without a word before, and is now refused with a ConfigError naming the dotted field and the bad value."""

import copy
from pathlib import Path

import pytest
import yaml

from dgro_lib.config import ConfigError, check_runnable_here, expand_sweep, find_params, load_config

PARAMS = Path(__file__).resolve().parent.parent / "params"
BASE = yaml.safe_load((PARAMS / "ci" / "dgro_fig1_reward_variance.yaml").read_text())
NAN, INF = float("nan"), float("inf")

# (id, overrides of the ci base: dotted key -> value ("{tmp}" = the test's tmp_path), what the error must name:
#  the dotted field, then the bad value as the message writes it)
CASES = [
    ("lr-zero", {"train.learning_rate": 0.0}, "train.learning_rate", "0.0"),
    ("lr-negative", {"train.learning_rate": -3e-5}, "train.learning_rate", "-3e-05"),
    ("lr-nan", {"train.learning_rate": NAN}, "train.learning_rate", "nan"),
    ("temperature-inf", {"train.temperature": INF}, "train.temperature", "inf"),
    ("max-grad-norm", {"train.max_grad_norm": -1.0}, "train.max_grad_norm", "-1.0"),
    ("adam-beta1", {"train.adam_beta1": 1.0}, "train.adam_beta1", "1.0"),
    ("adam-beta2", {"train.adam_beta2": -0.1}, "train.adam_beta2", "-0.1"),
    ("weight-decay", {"train.weight_decay": -0.01}, "train.weight_decay", "-0.01"),
    ("warmup-negative", {"train.warmup_steps": -1}, "train.warmup_steps", "-1"),
    ("warmup-ignored", {"train.warmup_steps": 5}, "train.warmup_steps", "5"),
    ("scheduler-unknown", {"train.lr_scheduler_type": "cosine_annealing"}, "train.lr_scheduler_type",
     "'cosine_annealing'"),
    ("scheduler-needs-metric", {"train.lr_scheduler_type": "reduce_lr_on_plateau"}, "train.lr_scheduler_type",
     "'reduce_lr_on_plateau'"),
    ("group-of-one", {"train.num_generations": 1}, "train.num_generations", "got 1"),
    ("save-steps", {"train.save_steps": 0}, "train.save_steps", "0"),
    ("eval-every", {"train.eval_every": -1}, "train.eval_every", "-1"),
    ("eval-subset", {"train.eval_subset": 0}, "train.eval_subset", "0"),
    ("threads", {"train.threads": 0}, "train.threads", "0"),
    ("vllm-memory", {"train.vllm_gpu_memory_utilization": 1.5}, "train.vllm_gpu_memory_utilization", "1.5"),
    ("vllm-port", {"train.vllm_server_port": 70000}, "train.vllm_server_port", "70000"),
    ("gpu-memory", {"train.gpu_memory_gb": 0.0}, "train.gpu_memory_gb", "0.0"),
    ("max-prompt-length", {"train.max_prompt_length": 0}, "train.max_prompt_length", "0"),
    ("engine-one-process", {"train.distributed": "zero3"}, "train.distributed", "'zero3'"),
    ("cpu-and-vllm", {"train.cpu": True, "train.use_vllm": True}, "train.use_vllm", "True"),
    ("require-gpu-and-cpu", {"train.cpu": True, "train.require_gpu": True}, "train.require_gpu", "train.cpu is true"),
    # TRL applies its vLLM correction to its own losses only: a DGRO arm would go uncorrected beside a corrected GRPO
    ("vllm-correction-own-loss", {"train.use_vllm": True}, "train.vllm_importance_sampling_correction", "'dgro'"),
    ("extra-rollouts-split-groups", {"loss": {"name": "aepo"}, "train.prompts_per_step": 3,
                                     "train.num_processes": 2}, "train.prompts_per_step", "3"),
    ("reference-without-beta", {"loss": {"name": "grpo", "scale": "group_std"}, "train.rollout_policy": "reference"},
     "train.rollout_policy", "0.0"),
    ("eval-seed", {"eval.seed": -1}, "eval.seed", "-1"),
    ("seed-negative", {"seeds": [0, -1]}, "seeds", "-1"),
    ("seed-repeated", {"seeds": [0, 0]}, "seeds", "[0, 0]"),
    ("name-path", {"name": "a/b"}, "name", "'a/b'"),
    ("n-train", {"data.n_train": 0}, "data.n_train", "0"),
    ("n-eval", {"data.n_eval": 0}, "data.n_eval", "0"),
    ("train-people-one", {"data.train_people": [1]}, "data.train_people", "[1]"),
    ("train-people-empty", {"data.train_people": []}, "data.train_people", "[]"),
    ("eval-people-too-many", {"data.eval_people": [60]}, "data.eval_people", "[60]"),
    ("eval-people-repeated", {"data.eval_people": [2, 2]}, "data.eval_people", "[2, 2]"),
    ("hub-people", {"data.source": "hub", "data.eval_people": [2, 9]}, "data.eval_people", "[9]"),
    ("official-no-dir", {"data.source": "official"}, "data.official_dir", "'official'"),
    ("official-missing-dir", {"data.source": "official", "data.official_dir": "{tmp}/no_such_dir"},
     "data.official_dir", "no_such_dir"),
    ("official-missing-people", {"data.source": "official", "data.official_dir": "{tmp}/kk"},
     "data.train_people", "[2]"),
    ("official-dir-unread", {"data.official_dir": "{tmp}/kk"}, "data.official_dir", "'generated'"),
    ("template", {"data.template": "chatml"}, "data.template", "'chatml'"),
    ("math-train-on-kk", {"data.math_train": "deepscaler"}, "data.math_train", "'deepscaler'"),
    ("model-path", {"model.path": "no/such/model/dir"}, "model.path", "'no/such/model/dir'"),
    ("model-dir-not-hf", {"model.path": "{tmp}/kk"}, "model.path", "kk"),
    ("embedded-preset", {"model.embedded_preset": "gpu"}, "model.embedded_preset", "'gpu'"),
    ("peft-key", {"model.peft": {"rank": 8}}, "model.peft.rank", "rank"),
    ("peft-r", {"model.peft": {"r": 0}}, "model.peft.r", "0"),
    ("coefficients-unread", {"reward.coefficients": [1.0, 2.0, 3.0]}, "reward.coefficients", "[1.0, 2.0, 3.0]"),
    ("coefficient-nan", {"reward.scheme": "custom", "reward.coefficients": [1.0, NAN, 1.0]},
     "reward.coefficients[1]", "nan"),
    ("value-lr-unread", {"loss.value_lr": 1e-3}, "loss.value_lr", "0.001"),
    ("value-lr-zero", {"loss": {"name": "dro"}, "loss.value_lr": 0.0}, "loss.value_lr", "0.0"),
    ("dgro-beta1", {"loss.kwargs.beta1": -1.0}, "loss.kwargs.beta1", "-1.0"),
    ("dgro-beta2-nan", {"loss.kwargs.beta2": NAN}, "loss.kwargs.beta2", "nan"),
    ("dgro-beta1-string", {"loss.kwargs.beta1": "1.0"}, "loss.kwargs.beta1", "'1.0'"),
    ("dgro-ratio-level", {"loss.kwargs.ratio_level": "seq"}, "loss.kwargs.ratio_level", "'seq'"),
    ("dgro-aggregation", {"loss.kwargs.aggregation": "mean"}, "loss.kwargs.aggregation", "'mean'"),
    ("dgro-norm-len", {"loss.kwargs.norm_len": 0}, "loss.kwargs.norm_len", "0"),
    ("kimi-tau", {"loss": {"name": "kimi", "kwargs": {"tau": -0.1}}}, "loss.kwargs.tau", "-0.1"),
    ("dro-beta", {"loss": {"name": "dro", "kwargs": {"beta": -0.1}}}, "loss.kwargs.beta", "-0.1"),
    ("grpo-verl-epsilon", {"loss": {"name": "grpo_verl", "kwargs": {"epsilon": -0.2}}}, "loss.kwargs.epsilon",
     "-0.2"),
    ("grpo-verl-dual-clip", {"loss": {"name": "grpo_verl", "kwargs": {"dual_clip": 1.0}}}, "loss.kwargs.dual_clip",
     "1.0"),
    ("dcpo-combine", {"loss": {"name": "dcpo", "kwargs": {"combine": "mix"}}}, "loss.kwargs.combine", "'mix'"),
    ("dcpo-weight", {"loss": {"name": "dcpo", "kwargs": {"weight": "two"}}}, "loss.kwargs.weight", "'two'"),
    ("dcpo-entropy-source", {"loss": {"name": "dcpo", "kwargs": {"entropy_source": "exact"}}},
     "loss.kwargs.entropy_source", "'exact'"),
    ("dcpo-entropy-from", {"loss": {"name": "dcpo", "kwargs": {"entropy_from": "now"}}}, "loss.kwargs.entropy_from",
     "'now'"),
    ("dcpo-t-high", {"loss": {"name": "dcpo", "kwargs": {"t_high": 0.0}}}, "loss.kwargs.t_high", "0.0"),
    ("dcpo-alpha", {"loss": {"name": "dcpo", "kwargs": {"alpha": "auto"}}}, "loss.kwargs.alpha", "'auto'"),
    ("dcpo-double-is", {"loss": {"name": "dcpo", "kwargs": {"double_is": "yes"}}}, "loss.kwargs.double_is", "'yes'"),
    ("aepo-fraction", {"loss": {"name": "aepo", "kwargs": {"fraction": 1.5}}}, "loss.kwargs.fraction", "1.5"),
    ("aepo-row-cap", {"loss": {"name": "aepo", "kwargs": {"reinforce_sample_num": -1}}},
     "loss.kwargs.reinforce_sample_num", "-1"),
    ("j2-t-low", {"loss": {"name": "j2", "kwargs": {"t_low": -0.8}}}, "loss.kwargs.t_low", "-0.8"),
    ("j1-adaptive-alpha", {"loss": {"name": "j1", "kwargs": {"alpha": "adaptive"}}}, "loss.kwargs", "'adaptive'"),
    ("entropy-reg-coef", {"loss": {"name": "entropy_reg", "kwargs": {"coef": -0.03}}}, "loss.kwargs.coef", "-0.03"),
    ("entropy-adv-kappa", {"loss": {"name": "entropy_adv", "kwargs": {"kappa": 0.0}}}, "loss.kwargs.kappa", "0.0"),
    ("trl-epsilon", {"loss": {"name": "grpo", "kwargs": {"epsilon": -0.2}}}, "loss.kwargs.epsilon", "-0.2"),
    ("trl-shadows-train", {"loss": {"name": "grpo", "kwargs": {"learning_rate": 1e-3}}}, "loss.kwargs.learning_rate",
     "0.001"),
    ("sweep-point", {"sweep": {"loss.kwargs.beta2": [0.1, -0.1]}}, "loss.kwargs.beta2", "-0.1"),
    # optimizer steps a rollout batch feeds: passes (num_iterations) x mini-batches (updates_per_rollout)
    ("steps-per-batch", {"train.max_steps": 3, "train.updates_per_rollout": 2}, "train.max_steps", "3"),
]


def _set(data: dict, key: str, value) -> None:
    node = data
    *parents, last = key.split(".")
    for part in parents:
        node = node.setdefault(part, {})
    node[last] = value


def _fill(value, tmp: Path):
    return value.replace("{tmp}", str(tmp)) if isinstance(value, str) else value


@pytest.mark.parametrize("overrides, field, bad", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_bad_value_is_refused_at_load_naming_the_field_and_the_value(tmp_path, overrides, field, bad):
    (tmp_path / "kk" / "train").mkdir(parents=True)  # an official copy with 3-person files only (no config.json)
    (tmp_path / "kk" / "test").mkdir()
    for split in ("train", "test"):
        (tmp_path / "kk" / split / "people3_num10.jsonl").write_text("")
    data = copy.deepcopy(BASE)
    for key, value in overrides.items():
        _set(data, key, _fill(value, tmp_path))
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError) as e:
        load_config(path)
    msg = str(e.value)
    assert str(path) in msg and field in msg and _fill(bad, tmp_path) in msg, msg


@pytest.mark.parametrize("path", sorted(PARAMS.glob("*/*.yaml")), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_shipped_params_file_and_sweep_point_still_loads(path):
    cfg = load_config(path)
    assert expand_sweep(cfg)


def test_check_runnable_here_names_what_this_machine_lacks():
    paper = load_config(find_params("dgro_fig1_reward_variance", "paper"))
    with pytest.raises(ConfigError, match=r"train\.use_vllm: true needs a CUDA GPU"):
        check_runnable_here(paper, cuda=False)
    with pytest.raises(ConfigError, match=r"train\.use_vllm: .*vllm package is not installed"):
        check_runnable_here(paper, cuda=True, gpus=4, vllm_installed=False)
    with pytest.raises(ConfigError, match=r"train\.num_processes: 4 processes .* 2 GPU"):
        check_runnable_here(paper, cuda=True, gpus=2, vllm_installed=True)
    with pytest.raises(ConfigError, match=r"train\.bf16: true, but .* does not support bf16"):
        check_runnable_here(paper, cuda=True, gpus=4, vllm_installed=True, bf16_supported=False)
    assert check_runnable_here(paper, cuda=True, gpus=4, vllm_installed=True, bf16_supported=True) == []
    from dgro_lib.config import apply_overrides

    no_vllm = apply_overrides(paper, {"train.use_vllm": False})
    with pytest.raises(ConfigError, match=r"train\.distributed: 'zero3' over train\.num_processes = 4 needs CUDA"):
        check_runnable_here(no_vllm, cuda=False)
    ddp_cpu = apply_overrides(no_vllm, {"train.distributed": "none", "eval.engine": "hf"})
    bf16_note = "train.bf16: true is ignored on CPU (the run trains in float32)"
    assert check_runnable_here(ddp_cpu, cuda=False) == [bf16_note]
    assert check_runnable_here(load_config(find_params("dgro_fig1_reward_variance", "ci")), cuda=False) == []
    # an evaluation-only notebook trains nothing: its vLLM engine needs a GPU, and with the HF sampler only the note
    base = load_config(find_params("00_base_model", "paper"))
    with pytest.raises(ConfigError, match=r"eval\.engine: vllm needs a CUDA GPU"):
        check_runnable_here(base, cuda=False)
    assert check_runnable_here(apply_overrides(base, {"eval.engine": "hf"}), cuda=False) == [bf16_note]


def test_the_gpu_profile_refuses_a_machine_without_cuda_and_the_cpu_profiles_still_run(monkeypatch, tmp_path):
    """A one-process `gpu` run used to train on the CPU, without a word, when torch has no CUDA."""
    from dgro_lib.runs import experiment

    for path in sorted((PARAMS / "gpu").glob("*.yaml")):
        cfg = load_config(path)
        if cfg.kind != "train":
            continue
        assert cfg.train.require_gpu, path
        with pytest.raises(ConfigError, match=r"train\.require_gpu: true, but this machine has no CUDA GPU \(torch "):
            check_runnable_here(cfg, cuda=False)
        assert check_runnable_here(cfg, cuda=True, gpus=1) == []
    for profile in ("ci", "cpu"):
        for path in sorted((PARAMS / profile).glob("*.yaml")):
            assert not load_config(path).train.require_gpu
            check_runnable_here(load_config(path), cuda=False)  # no error
    # the notebooks' entry point stops before it builds or trains anything (this machine's torch has no CUDA)
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    monkeypatch.setattr(experiment, "resolve_model_path", lambda *a, **k: pytest.fail("got past the check"))
    with pytest.raises(ConfigError, match=r"train\.require_gpu"):
        experiment.run_experiment(load_config(find_params("dgro_fig1_reward_variance", "gpu")), tmp_path / "exp")
    assert not (tmp_path / "exp").exists()


def test_the_hub_id_rule_is_the_loaders():
    """The config check and the model loader decide "hub id or local path" by the same rule (one definition)."""
    from dgro_lib.config import checks
    from dgro_lib.models import loading
    from dgro_lib.util.paths import is_hub_id

    assert checks.is_hub_id is loading.is_hub_id is is_hub_id
    assert is_hub_id("Qwen/Qwen2.5-7B") and is_hub_id("gpt2")
    assert not any(is_hub_id(p) for p in ("./model", "/abs/model", "~/m", "a/b/c"))
