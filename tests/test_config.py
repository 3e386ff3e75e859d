"""Strict config loading: unknown keys, wrong types and bad values name the file and the dotted key."""

from pathlib import Path

import pytest
import yaml

from dgro_lib.config import (
    ConfigError,
    ExperimentConfig,
    apply_overrides,
    expand_sweep,
    find_params,
    load_config,
)

PARAMS = Path(__file__).resolve().parent.parent / "params"


def write(tmp_path, data, name="exp.yaml"):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize("path", sorted(PARAMS.glob("*/*.yaml")), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_shipped_params_file_loads(path):
    cfg = load_config(path)
    assert isinstance(cfg, ExperimentConfig)
    assert cfg.name == path.stem  # the notebook a params file belongs to is its file name


def test_unknown_key_names_file_and_dotted_key(tmp_path):
    path = write(tmp_path, {"name": "x", "train": {"max_step": 3}})
    with pytest.raises(ConfigError, match=r"exp\.yaml.*train\.max_step.*max_steps"):
        load_config(path)


def test_wrong_type_names_key(tmp_path):
    path = write(tmp_path, {"name": "x", "train": {"learning_rate": "fast"}})
    with pytest.raises(ConfigError, match=r"train\.learning_rate.*number"):
        load_config(path)
    path = write(tmp_path, {"name": "x", "seeds": [0, "one"]})
    with pytest.raises(ConfigError, match=r"seeds\[1\]"):
        load_config(path)
    path = write(tmp_path, {"name": "x", "train": {"max_steps": True}})
    with pytest.raises(ConfigError, match=r"train\.max_steps.*integer"):
        load_config(path)


def test_missing_required_and_bad_values(tmp_path):
    with pytest.raises(ConfigError, match="missing required key name"):
        load_config(write(tmp_path, {"seeds": [0]}))
    with pytest.raises(ConfigError, match="train.temperature"):
        load_config(write(tmp_path, {"name": "x", "train": {"temperature": 0.0}}))
    with pytest.raises(ConfigError, match="loss.value"):
        load_config(write(tmp_path, {"name": "x", "loss": {"value": "median"}}))
    with pytest.raises(ConfigError, match="train.forward_chunk_rows"):
        load_config(write(tmp_path, {"name": "x", "train": {"forward_chunk_rows": 0}}))
    with pytest.raises(ConfigError, match="reward.coefficients"):
        load_config(write(tmp_path, {"name": "x", "reward": {"scheme": "custom"}}))
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "nope.yaml")
    (tmp_path / "bad.yaml").write_text("name: [unclosed")
    with pytest.raises(ConfigError, match="bad.yaml.*YAML"):
        load_config(tmp_path / "bad.yaml")


def test_overrides_are_strict_and_typed(tmp_path):
    cfg = load_config(write(tmp_path, {"name": "x"}))
    new = apply_overrides(cfg, {"train.max_steps": 7, "loss.kwargs.beta2": 0.5})
    assert new.train.max_steps == 7 and new.loss.kwargs["beta2"] == 0.5
    assert cfg.train.max_steps != 7  # the original is not mutated
    with pytest.raises(ConfigError, match="train.max_stepz"):
        apply_overrides(cfg, {"train.max_stepz": 7})
    with pytest.raises(ConfigError, match="train.max_steps.*integer"):
        apply_overrides(cfg, {"train.max_steps": 1.5})


def test_sweep_expands_product_times_seeds(tmp_path):
    cfg = load_config(write(tmp_path, {
        "name": "x", "seeds": [0, 1, 2],
        "sweep": {"reward.scheme": ["[-1,1]", "[-5,5]"], "loss.kwargs.beta2": [0.0, 0.1]},
    }))
    runs = expand_sweep(cfg)
    assert len(runs) == 2 * 2 * 3
    seen = {(p["reward.scheme"], p["loss.kwargs.beta2"], s) for p, s, _ in runs}
    assert len(seen) == 12
    for point, seed, concrete in runs:
        assert concrete.reward.scheme == point["reward.scheme"]
        assert concrete.loss.kwargs["beta2"] == point["loss.kwargs.beta2"]
        assert concrete.sweep == {}
    with pytest.raises(ConfigError, match="sweep|unknown key"):
        load_config(write(tmp_path, {"name": "x", "sweep": {"train.nope": [1]}}))


def test_find_params_lists_available():
    assert find_params("dgro_fig1_reward_variance", "ci").is_file()
    with pytest.raises(ConfigError, match="available: .*ci/dgro_fig1_reward_variance.yaml"):
        find_params("nope", "ci")


@pytest.mark.parametrize("name", ["dgro", "kimi", "dcpo", "j3", "entropy_adv", "grpo", "dapo"])
def test_every_loss_is_reachable_by_name_from_yaml(tmp_path, name):
    cfg = load_config(write(tmp_path, {"name": "x", "loss": {"name": name, "kwargs": {}}}))
    assert cfg.loss.name == name


def test_unknown_loss_name_lists_the_registry(tmp_path):
    with pytest.raises(ConfigError, match=r"loss\.name.*'dpgo'.*dcpo.*dgro"):
        load_config(write(tmp_path, {"name": "x", "loss": {"name": "dpgo"}}))


@pytest.mark.parametrize("override,field", [
    ({"eval.temperature": 0.0, "eval.n_samples": 4}, "eval.n_samples"),
    ({"eval.temperature": -1.0}, "eval.temperature"),
    ({"eval.temperature": 1.0, "eval.n_samples": 2, "eval.ks": [1, 4]}, "eval.ks"),
])
def test_eval_protocol_is_validated(override, field):
    cfg = load_config(find_params("dgro_fig1_reward_variance", "ci"))
    with pytest.raises(ConfigError, match=field.replace(".", r"\.")):
        apply_overrides(cfg, override)
