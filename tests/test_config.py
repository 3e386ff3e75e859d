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


@pytest.mark.parametrize("path", sorted(PARAMS.glob("*/*.yaml")), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_params_file_has_its_notebooks_typed_knobs(path):
    from dgro_lib.config.knobs import KNOBS, EvalOverrides

    cfg = load_config(path)
    assert cfg.name in KNOBS, f"{path}: no typed knobs registered for {cfg.name}"
    knobs = cfg.knobs
    assert isinstance(knobs, KNOBS[cfg.name])
    raw = yaml.safe_load(path.read_text()).get("extra") or {}
    for key, value in vars(knobs).items():  # an evaluation protocol's overrides are exactly what the file says
        if isinstance(value, EvalOverrides):
            assert value.overrides() == raw[key], (path, key)


def test_a_missing_or_misspelled_knob_is_a_load_error_naming_the_file_and_the_key(tmp_path):
    # DGRO Fig. 1's paper params once lacked the second reading its notebook reads: a KeyError on the GPU node
    data = yaml.safe_load((PARAMS / "paper" / "dgro_fig1_reward_variance.yaml").read_text())
    del data["extra"]["greedy_eval"]
    with pytest.raises(ConfigError, match=r"fig1\.yaml: missing required key extra\.greedy_eval$"):
        load_config(write(tmp_path, data, "fig1.yaml"))
    data = yaml.safe_load((PARAMS / "paper" / "dgro_fig1_reward_variance.yaml").read_text())
    data["extra"]["control"] = "control: typo"  # an arm a knob names must be one of the labels
    with pytest.raises(ConfigError, match=r"extra\.control: 'control: typo' is not one of extra\.labels"):
        load_config(write(tmp_path, data, "fig1.yaml"))
    data = yaml.safe_load((PARAMS / "paper" / "dgro_fig1_beta2_acting.yaml").read_text())
    data["extra"]["counted_elsewhere"] = ["[-7,7]"]  # so does an arm another notebook counts
    with pytest.raises(ConfigError, match=r"extra\.counted_elsewhere: '\[-7,7\]' is not one of extra\.labels"):
        load_config(write(tmp_path, data, "fig1b.yaml"))
    data = yaml.safe_load((PARAMS / "cpu" / "01_miniature_map.yaml").read_text())
    data["extra"]["greedy_eval"]["temperature"] = 1.0  # the greedy reading is read as 0/1 correctness
    with pytest.raises(ConfigError, match=r"map\.yaml: extra\.greedy_eval\.temperature: the greedy reading must have"):
        load_config(write(tmp_path, data, "map.yaml"))
    data = yaml.safe_load((PARAMS / "cpu" / "dgro_table3_math.yaml").read_text())
    data["extra"]["sampled_eval_puzzle"] = data["extra"].pop("sampled_eval_puzzles")
    with pytest.raises(ConfigError, match=r"t3\.yaml: unknown key extra\.sampled_eval_puzzle "):
        load_config(write(tmp_path, data, "t3.yaml"))
    data["extra"]["sampled_eval_puzzles"] = data["extra"].pop("sampled_eval_puzzle")
    data["extra"]["sampled_eval"]["n_sample"] = 4
    with pytest.raises(ConfigError, match=r"unknown key extra\.sampled_eval\.n_sample "):
        load_config(write(tmp_path, data, "t3.yaml"))
    cfg = load_config(PARAMS / "cpu" / "dgro_table3_math.yaml")
    with pytest.raises(ConfigError, match=r"extra\.sampled_eval_puzzles: expected"):
        apply_overrides(cfg, {"extra.sampled_eval_puzzles": "all"})
    # an experiment no notebook registers keeps a free-form extra
    assert load_config(write(tmp_path, {"name": "my_own", "extra": {"anything": 1}})).knobs == {"anything": 1}


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
    ({"eval.temperature": 1.0, "eval.top_p": 0.0}, "eval.top_p"),
    ({"eval.temperature": 1.0, "eval.top_p": 1.5}, "eval.top_p"),
    ({"eval.temperature": 1.0, "eval.n_samples": 2, "eval.ks": [1, 4]}, "eval.ks"),
])
def test_eval_protocol_is_validated(override, field):
    cfg = load_config(find_params("dgro_fig1_reward_variance", "ci"))
    with pytest.raises(ConfigError, match=field.replace(".", r"\.")):
        apply_overrides(cfg, override)


# --- zipped sweep keys: "a.b|c.d" varies several dotted keys together -----------------------------------

MODEL_BENCH = "model.path|data.math_eval"


def _math(sweep, **extra):
    # a hub model: the embedded K&K presets are refused for math (their tokenizer has K&K's words only)
    return {"name": "x", "model": {"path": "Qwen/Qwen2.5-7B"},
            "data": {"task": "math", "source": "hub", "math_train": "dapo17k", "math_eval": ["aime24"]},
            "sweep": sweep, **extra}


def test_zipped_sweep_key_sets_its_keys_together_and_crosses_the_others(tmp_path):
    cfg = load_config(write(tmp_path, _math({
        MODEL_BENCH: [["Qwen/Qwen2.5-7B", ["aime24", "gsm8k"]], ["Qwen/Qwen3-4B", ["aime24", "gpqa_diamond"]]],
        "loss.name": ["grpo", "dcpo"],
    }, seeds=[0, 1])))
    runs = expand_sweep(cfg)
    assert len(runs) == 2 * 2 * 2  # 2 zipped (model, benchmarks) pairs x 2 losses x 2 seeds, not 2 x 2 x 2 x 2
    pairs = {(c.model.path, tuple(c.data.math_eval), c.loss.name) for _, _, c in runs}
    assert pairs == {("Qwen/Qwen2.5-7B", ("aime24", "gsm8k"), "grpo"), ("Qwen/Qwen2.5-7B", ("aime24", "gsm8k"), "dcpo"),
                     ("Qwen/Qwen3-4B", ("aime24", "gpqa_diamond"), "grpo"),
                     ("Qwen/Qwen3-4B", ("aime24", "gpqa_diamond"), "dcpo")}
    for point, _, concrete in runs:  # every dotted key named separately, in the order of the sweep
        assert list(point) == [k for skey in cfg.sweep for k in skey.split("|")]
        assert point == {"model.path": concrete.model.path, "data.math_eval": concrete.data.math_eval,
                         "loss.name": concrete.loss.name}
        assert concrete.sweep == {}
    # spaces around "|" are allowed
    spaced = load_config(write(tmp_path, _math({"model.path | data.math_eval": [["m", ["gsm8k"]]]})))
    assert expand_sweep(spaced)[0][0] == {"model.path": "m", "data.math_eval": ["gsm8k"]}


def test_a_sweep_entry_may_carry_its_own_seeds(tmp_path):
    # an arm with a larger run spread gets more seeds; the others keep the top-level list
    cfg = load_config(write(tmp_path, _math({"loss.name|seeds": [["grpo", [0, 1, 2, 3]], ["dcpo", None]],
                                             "reward.scheme": ["[-1,1]", "[-3,3]"]}, seeds=[0, 1])))
    runs = expand_sweep(cfg)
    got = {}
    for point, seed, concrete in runs:
        assert "seeds" not in point  # how many runs a point has is not what a run computes
        got.setdefault((point["loss.name"], point["reward.scheme"]), []).append(seed)
        assert concrete.seeds == ([0, 1, 2, 3] if point["loss.name"] == "grpo" else [0, 1])
    assert got == {("grpo", "[-1,1]"): [0, 1, 2, 3], ("grpo", "[-3,3]"): [0, 1, 2, 3],
                   ("dcpo", "[-1,1]"): [0, 1], ("dcpo", "[-3,3]"): [0, 1]}
    # what a notebook prints per arm, in sweep order
    from dgro_lib.papers.notebook import arms_and_seeds, seeds_per_point
    assert seeds_per_point(cfg) == [4, 4, 2, 2]
    assert arms_and_seeds(list("abcd"), cfg) == "a (4), b (4), c (2), d (2)"
    with pytest.raises(ValueError, match="3 labels .* for 4 sweep points"):
        arms_and_seeds(list("abc"), cfg)
    # a point's own seeds do not change its runs: seed 1 of grpo / [-1,1] is the run a plain sweep names
    from dgro_lib.runs.store import run_key
    keys = {(p["loss.name"], p["reward.scheme"], s): run_key(c, s) for p, s, c in runs}
    plain = load_config(write(tmp_path, _math({"loss.name": ["grpo"], "reward.scheme": ["[-1,1]"]}, seeds=[1])))
    (_, s, c), = expand_sweep(plain)
    assert run_key(c, s) == keys[("grpo", "[-1,1]", 1)]


@pytest.mark.parametrize("seeds, match", [
    ([0, 0], r"sweep point .*\(its seeds\).*seeds: repeated seed in \[0, 0\]"),
    ([0, -1], r"sweep point .*\(its seeds\).*seeds.*-1"),
])
def test_a_sweep_entrys_seeds_are_validated_like_the_top_level_list(tmp_path, seeds, match):
    with pytest.raises(ConfigError, match=match):
        load_config(write(tmp_path, _math({"loss.name|seeds": [["grpo", seeds]]})))


def test_seeds_alone_is_not_a_sweep_axis(tmp_path):
    with pytest.raises(ConfigError, match=r"sweep\.seeds: seeds vary only with a point's other keys"):
        load_config(write(tmp_path, _math({"seeds": [[0], [1]]})))


@pytest.mark.parametrize("sweep, match", [
    ({"model.path|data.math_evl": [["m", ["aime24"]]]}, r"sweep\.model\.path\|data\.math_evl: unknown key data\.math_evl"),
    ({"model.path|": [["m"]]}, r"sweep\.model\.path\|: empty dotted key"),
    ({MODEL_BENCH: [["m", ["aime24"]], ["m2"]]}, r"sweep\.model\.path\|data\.math_eval\[1\]: expected a list of 2 values.*"
                                                 r"model\.path, data\.math_eval.*\['m2'\]"),
    ({MODEL_BENCH: ["m"]}, r"sweep\.model\.path\|data\.math_eval\[0\]: expected a list of 2 values"),
    ({MODEL_BENCH: [["m", ["aime24"], 3]]}, r"sweep\.model\.path\|data\.math_eval\[0\]: expected a list of 2"),
    ({MODEL_BENCH: [["m", ["aime24"]]], "model.path": ["n"]}, r"sweep\.model\.path\S*: model\.path is already "
                                                              r"swept by sweep\.model\.path"),
    ({"loss": [{"name": "grpo"}], "loss.kwargs.coef": [0.1]}, r"sweep\.loss\.kwargs\.coef: .*already swept by sweep\.loss"),
    ({"reward.scheme|reward.scheme": [["[-1,1]", "[-5,5]"]]}, r"reward\.scheme is already swept"),
    ({"reward.scheme": []}, r"sweep\.reward\.scheme: empty list"),
])
def test_bad_sweep_keys_name_the_sweep_key(tmp_path, sweep, match):
    with pytest.raises(ConfigError, match=match):
        load_config(write(tmp_path, _math(sweep)))


def test_a_zipped_value_is_validated_like_the_key_itself(tmp_path):
    # every sweep point is validated when the file loads, not only when the sweep is expanded
    with pytest.raises(ConfigError, match=r"sweep point .*data\.math_eval.*no_such_benchmark"):
        load_config(write(tmp_path, _math({MODEL_BENCH: [["m", ["aime24", "no_such_benchmark"]]]})))


def test_dcpo_table2_gives_each_model_its_own_benchmarks():
    cfg = load_config(find_params("dcpo_table2_main", "paper"))
    suite = {}
    for _, _, c in expand_sweep(cfg):
        suite.setdefault(c.model.path, set()).add(tuple(c.data.math_eval))
    qwen25 = {("aime24", "aime25", "amc23", "gsm8k", "math500", "minerva", "olympiadbench")}  # DCPO §B.2
    assert suite == {"Qwen/Qwen2.5-7B": qwen25, "Qwen/Qwen2.5-Math-7B": qwen25,
                     "Qwen/Qwen3-4B": {("aime24", "aime25", "hmmt25", "minerva", "olympiadbench", "gpqa_diamond",
                                        "mmlu_pro")}}
    # the authors' validation sampling (597358816/DCPO examples/config.yaml, val_override_config): temperature 0.5
    assert cfg.eval.temperature == 0.5 and cfg.eval.n_samples == 32 and 32 in cfg.eval.ks
    # ... which keeps the rollout top_p 0.99 (the override replaces only temperature and n)
    assert cfg.eval.top_p == cfg.train.top_p == 0.99


def test_dcpo_table3_is_pass_at_128_on_the_contest_sets_with_qwen3_4b():
    cfg = load_config(find_params("dcpo_table3_passk", "paper"))
    table2 = load_config(find_params("dcpo_table2_main", "paper"))
    runs = expand_sweep(cfg)
    assert {c.model.path for _, _, c in runs} == {"Qwen/Qwen3-4B"}
    assert cfg.data.math_eval == ["aime24", "aime25", "hmmt25"]
    assert cfg.eval.n_samples == 128 and cfg.eval.ks[0] == 1 and cfg.eval.ks[-1] == 128
    assert cfg.eval.temperature == table2.eval.temperature == 0.5
    assert cfg.eval.top_p == table2.eval.top_p == 0.99
    assert [c.loss.name for _, _, c in runs] == ["grpo_verl", "entropy_reg", "entropy_adv", "aepo", "dcpo"]
    assert cfg.sweep["loss"] == table2.sweep["loss"]  # the same five trained methods as Table 2
    assert cfg.train == table2.train and cfg.reward == table2.reward and cfg.data.math_train == table2.data.math_train


def test_loss_kwargs_and_reward_scheme_are_checked_when_the_config_loads():
    """A misspelt loss argument or an unknown reward scheme is refused at load time with the key named (both used
    to load without a word: the loss swallowed the key, the scheme failed only when the reward was built)."""
    from dgro_lib.config import ConfigError, apply_overrides, find_params, load_config

    cfg = load_config(find_params("dgro_fig1_reward_variance", "ci"))
    with pytest.raises(ConfigError, match=r"loss\.kwargs\.beta_2.*valid.*beta2"):
        apply_overrides(cfg, {"loss.kwargs.beta_2": 0.1})
    with pytest.raises(ConfigError, match=r"loss\.kwargs\.no_such_knob"):  # TRL's own loss: GRPOConfig fields
        apply_overrides(cfg, {"loss.name": "grpo", "loss.kwargs": {"no_such_knob": 1}})
    assert apply_overrides(cfg, {"loss.name": "grpo", "loss.kwargs": {"epsilon_high": 0.28}}).loss.kwargs
    with pytest.raises(ConfigError, match=r"loss\.value.*soft"):  # DCPO declares no soft-value temperature
        apply_overrides(cfg, {"loss.name": "dcpo", "loss.kwargs": {}, "loss.value": "soft"})
    with pytest.raises(ConfigError, match=r"reward\.scheme.*\[-4,4\]"):
        apply_overrides(cfg, {"reward.scheme": "[-4,4]"})
    # AEPO's spec keys are accepted though the loss function does not take them
    assert apply_overrides(cfg, {"loss.name": "aepo", "loss.kwargs": {"fraction": 0.25, "reinforce_sample_num": 8}})
