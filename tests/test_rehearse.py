"""The CPU rehearsal of a GPU profile (dgro_lib.cli.rehearse): the one override set, and notebooks executed with it."""

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
           ("eval", "ks"), ("eval", "batch_size"), ("eval", "engine")}


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
