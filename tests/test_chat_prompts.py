"""Prompts for real checkpoints: the ``chat`` template (the model's own chat template), the refusal of hand-written
ChatML for a tokenizer without it, one BOS on every tokenization path, and the private TRL methods the trainer
overrides. Uses real Qwen tokenizers built offline (tests/real_tokenizers.py)."""

from __future__ import annotations

import inspect
from types import SimpleNamespace

import pytest

from real_tokenizers import build_tiny_model, build_tokenizer

from dgro_lib.data import kk
from dgro_lib.data import math as math_data
from dgro_lib.tasks import get_task

BOS_R1 = "<｜begin▁of▁sentence｜>"


@pytest.fixture(scope="module")
def qwen():
    return build_tokenizer("qwen2.5")


@pytest.fixture(scope="module")
def r1():
    return build_tokenizer("r1-distill")


@pytest.fixture(scope="module")
def records():
    return {"kk": kk.generate(3, 2, seed=7), "math": math_data.generate_math(2, seed=7)}


def test_the_fixture_is_qwens_tokenizer(qwen, r1):
    # the hub tokenizer's ids (Qwen2.5 and DeepSeek-R1-Distill-Qwen share the BPE ranks)
    assert qwen("Hello world", add_special_tokens=False)["input_ids"] == [9707, 1879]
    assert r1("Hello world", add_special_tokens=False)["input_ids"] == [9707, 1879]
    assert qwen.convert_tokens_to_ids(["<|endoftext|>", "<|im_start|>", "<|im_end|>"]) == [151643, 151644, 151645]
    assert len(qwen) == 151665
    assert r1.convert_tokens_to_ids(BOS_R1) == 151646 and "<|im_start|>" not in r1.get_vocab()
    assert r1("x")["input_ids"][0] == 151646  # this tokenizer adds its BOS itself


@pytest.mark.parametrize("task", ["kk", "math"])
def test_chat_template_on_a_chatml_model_gives_the_chatml_turns(qwen, records, task):
    t = get_task(task)
    rec = records[task][0]
    text = t.prompt(rec, "chat", qwen)
    assert text.startswith("<|im_start|>system\nYou are a helpful assistant.")
    assert text.endswith("<|im_end|>\n<|im_start|>assistant\n<think>")
    ids = qwen(text, add_special_tokens=False)["input_ids"]
    assert ids.count(151644) == 3 and ids.count(151645) == 2  # the markers are single special tokens
    # the hand-written ChatML of the `qwen` template holds the same turns (Logic-RL's adds a newline before im_end)
    hand = t.prompt(rec, "qwen", qwen)
    assert hand.replace("\n<|im_end|>", "<|im_end|>") == text.replace("\n<|im_end|>", "<|im_end|>")


@pytest.mark.parametrize("task", ["kk", "math"])
def test_handwritten_chatml_is_refused_for_a_model_without_it(r1, records, task):
    with pytest.raises(ValueError, match=r"data.template 'qwen'.*<\|im_start\|>.*'chat'"):
        get_task(task).prompt(records[task][0], "qwen", r1)


@pytest.mark.parametrize("task", ["kk", "math"])
def test_chat_template_on_r1_distill_writes_its_bos_once_and_one_think(r1, records, task):
    text = get_task(task).prompt(records[task][0], "chat", r1)
    assert text.startswith(BOS_R1 + "You are a helpful assistant.")
    assert text.rsplit("<｜Assistant｜>", 1)[1] == "<think>\n"  # the template's own opening, not a second one
    ids = r1(text, add_special_tokens=False)["input_ids"]
    assert ids[0] == 151646 and ids.count(151646) == 1
    assert "<|im_start|>" not in text


def test_chat_template_needs_a_tokenizer_with_one(records, qwen):
    with pytest.raises(ValueError, match="no tokenizer"):
        get_task("kk").prompt(records["kk"][0], "chat")
    bare = build_tokenizer("qwen2.5")
    bare.chat_template = None
    with pytest.raises(ValueError, match="has no chat template"):
        get_task("math").prompt(records["math"][0], "chat", bare)
    with pytest.raises(ValueError, match="valid: plain, formal, qwen, chat"):
        kk.format_prompt(records["kk"][0], template="chatml")


def test_trainer_tokenizes_text_prompts_as_they_are(r1, records):
    """TRL's own text path adds the tokenizer's special tokens, which doubles the BOS a chat template wrote."""
    from dgro_lib.rl.trainer import DGROTrainer

    prompts = [get_task("math").prompt(r, "chat", r1) for r in records["math"]]
    ids, images, fields = DGROTrainer._tokenize_prompts(SimpleNamespace(processing_class=r1), prompts)
    assert ids == [r1(p, add_special_tokens=False)["input_ids"] for p in prompts]
    assert all(x.count(151646) == 1 for x in ids) and images is None and fields == {}
    assert r1(prompts[0])["input_ids"].count(151646) == 2  # what TRL's path would have given


def test_every_private_trl_method_the_trainer_overrides_exists_in_trl():
    """The trainer overrides private TRL methods, so TRL is pinned; a release that renames one fails here."""
    from trl import GRPOTrainer

    from dgro_lib.rl.divergence import DivergenceGuard
    from dgro_lib.rl.trainer import DGROTrainer

    overridden = sorted({name for cls in (DGROTrainer, DivergenceGuard) for name, v in vars(cls).items()
                         if name.startswith("_") and not name.startswith("__") and callable(v)
                         and hasattr(GRPOTrainer, name)})
    ours_only = {name for cls in (DGROTrainer, DivergenceGuard) for name in vars(cls)
                 if name.startswith("_") and not name.startswith("__") and not hasattr(GRPOTrainer, name)}
    assert {"_generate_and_score_completions", "_compute_loss", "_calculate_rewards", "_tokenize_prompts",
            "_get_grad_norm", "_save_checkpoint", "_load_optimizer_and_scheduler"} <= set(overridden)
    doc = inspect.getdoc(__import__("dgro_lib.rl.trainer", fromlist=["x"]))
    for name in overridden:  # each one is named in the module's docstring
        assert f"``{name}``" in doc, name
    assert all(not hasattr(GRPOTrainer, n) for n in ours_only)


def test_a_random_qwen2_with_r1s_tokenizer_evaluates_under_the_chat_template(r1, records, tmp_path):
    """End to end on CPU: the evaluation builds chat prompts with the model's tokenizer and decodes."""
    from dgro_lib.evaluate import evaluate_greedy
    from dgro_lib.models.loading import load_model

    path = build_tiny_model(r1, tmp_path / "tiny-r1")
    model, tok = load_model(str(path))
    ev = evaluate_greedy(model, tok, records["math"], template="chat", max_new_tokens=3, batch_size=2,
                         task="math")
    assert ev["n"] == 2 and len(ev["completions"]) == 2 and all(n <= 3 for n in ev["lengths"])
