"""Prompts rendered by the model's own chat template (the ``chat`` prompt template of both tasks).

A hand-written ChatML prompt (the ``qwen`` templates) is right only for tokenizers that have ChatML's special
tokens. DeepSeek-R1-Distill-Qwen-7B's tokenizer, for one, has no ``<|im_start|>``: the ChatML markers become
literal text and its ``<｜begin▁of▁sentence｜>`` is never written. ``chat`` asks the tokenizer instead:
``tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)``, so each model sees its
own turn markers and BOS, then the completion opens with ``<think>`` (appended unless the template's generation
prompt already ends with it, as DeepSeek-R1's newer templates do).

The rendered text is the *whole* prompt: every path that tokenizes it (the trainer's rollouts, TRL's vLLM path,
the evaluations) does so with ``add_special_tokens=False``, so a BOS the template writes is not doubled.
"""

from __future__ import annotations

from typing import Any, Sequence

__all__ = ["CHAT", "CHATML_MARKERS", "render_chat", "require_chatml"]

CHAT = "chat"
"""The template name that renders with the tokenizer's chat template."""
CHATML_MARKERS = ("<|im_start|>", "<|im_end|>")
"""The special tokens a hand-written ChatML prompt relies on."""


def _name(tokenizer: Any) -> str:
    return str(getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__)


def render_chat(tokenizer: Any, messages: Sequence[dict[str, str]]) -> str:
    """``messages`` (``[{"role", "content"}, ...]``, without the assistant turn) through ``tokenizer``'s chat
    template with the generation prompt, ending in ``<think>``.

    Raises ValueError naming ``data.template`` when no tokenizer is given or it has no chat template."""
    if tokenizer is None:
        raise ValueError("data.template 'chat' renders prompts with the model's chat template, but no tokenizer "
                         "was given")
    if not getattr(tokenizer, "chat_template", None):
        raise ValueError(f"data.template 'chat': the tokenizer of {_name(tokenizer)} has no chat template; use a "
                         "model with one, or a hand-written template ('qwen' for ChatML models, 'plain')")
    text = tokenizer.apply_chat_template(list(messages), tokenize=False, add_generation_prompt=True)
    # A template whose generation prompt opens the thought already ("<｜Assistant｜><think>\n") keeps it as it is.
    return text if text.rstrip().endswith("<think>") else text + "<think>"


def require_chatml(tokenizer: Any) -> None:
    """Refuse a hand-written ChatML prompt for a tokenizer without ChatML's special tokens (it would reach the model
    as literal text). No tokenizer: nothing to check."""
    if tokenizer is None:
        return
    vocab = tokenizer.get_vocab()
    missing = [m for m in CHATML_MARKERS if m not in vocab]
    if missing:
        raise ValueError(f"data.template 'qwen' writes ChatML, but the tokenizer of {_name(tokenizer)} has no "
                         f"{', '.join(missing)} token: the markers would be literal text. Use data.template "
                         "'chat' (the model's own chat template)")
