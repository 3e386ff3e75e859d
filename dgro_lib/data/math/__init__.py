"""Math problems: the record format, the prompt formats, and one import for the math data modules.

Every record, generated or loaded, has exactly three keys::

    {"problem": "Solve for $x$: $3x + 2 = 7$.", "answer": "5/3", "source": "synthetic/slash"}

``answer`` is the reference final answer as a string (LaTeX or plain), the form
:func:`dgro_lib.rewards.math.math_reward` compares against through math-verify.

This module formats prompts (:func:`format_prompt`); the rest lives in one module per job, and every name is
re-exported here (``math.load_math``, ``math.generate_math``, ...):

* :mod:`.values` -- exact values: parsing and rendering answers, their equivalent and near-miss forms;
* :mod:`.generate` -- the offline generator of problems with exact answers (:func:`generate_math`);
* :mod:`.worked` -- the math miniature's arithmetic kinds with worked traces (:func:`worked_examples`);
* :mod:`.records` -- a benchmark's raw record to problem and answer, the multiple-choice sets included;
* :mod:`.datasets` -- the registry of benchmark and training sets and their loader (:func:`load_math`).

**Prompts** (:func:`format_prompt`). ``plain`` and ``qwen`` templates as in
:func:`dgro_lib.data.kk.format_prompt`; both end with ``<think>``, so that the reward's format check counts
the prompt's ``<think>`` as the completion's opening tag.
"""

from __future__ import annotations

from typing import Any, Mapping

# Re-exports: the names below were all defined in this module before the split; callers keep using
# ``dgro_lib.data.math.<name>``.
from dgro_lib.data.chat import CHAT, render_chat, require_chatml
from dgro_lib.data.math.datasets import MATH_DATASETS, MathDatasetSpec, load_math, resolve_dataset
from dgro_lib.data.math.generate import ALL_KINDS, KINDS, generate_math
from dgro_lib.data.math.records import (
    CHOICE_LETTERS,
    GPQA_SHUFFLE_SEED,
    dapo_problem,
    gpqa_record,
    gsm8k_answer,
    mmlu_pro_record,
    multiple_choice_problem,
    olympiad_answer,
    plain_answer,
    plain_problem,
)
from dgro_lib.data.math.worked import WORKED_KINDS, worked_examples
from dgro_lib.data.math.values import ExactValue, Interval, Surd, alternative_forms, near_miss_forms, parse_exact, render_value

SYNTHETIC = "synthetic"
"""The name that stands for :func:`generate_math` where a data set name is expected (``data.math_train`` /
``data.math_eval`` of an experiment with ``data.source: generated``); its records' ``source`` is
``synthetic/<kind>``."""

__all__ = [
    "SYNTHETIC",
    "KINDS",
    "ALL_KINDS",
    "WORKED_KINDS",
    "worked_examples",
    "Surd",
    "Interval",
    "ExactValue",
    "generate_math",
    "parse_exact",
    "render_value",
    "alternative_forms",
    "near_miss_forms",
    "MathDatasetSpec",
    "CHOICE_LETTERS",
    "GPQA_SHUFFLE_SEED",
    "multiple_choice_problem",
    "gpqa_record",
    "mmlu_pro_record",
    "MATH_DATASETS",
    "resolve_dataset",
    "load_math",
    "PROMPT_TEMPLATES",
    "TEMPLATES",
    "chat_messages",
    "format_prompt",
]


# --------------------------------------------------------------------------------------------
# Prompts
# --------------------------------------------------------------------------------------------

_INSTRUCTION = "Please reason step by step, and put your final answer within \\boxed{{}}."
_QWEN_SYSTEM = (
    "You are a helpful assistant. The assistant first thinks about the reasoning process in the mind and then "
    "provides the user with the answer. The reasoning process is enclosed within <think> </think> tags, and the "
    "final answer follows the closing tag within \\boxed{{}}, i.e., <think> reasoning process here </think> "
    "The answer is \\boxed{{answer here}}.\n"
)
# Both end in "<think>": the reward's format check then counts the prompt's "<think>" as the completion's opening tag.
PROMPT_TEMPLATES: dict[str, str] = {
    "plain": "{problem}\n" + _INSTRUCTION + "\n<think>",
    "qwen": ("<|im_start|>system\n" + _QWEN_SYSTEM + "<|im_end|>\n<|im_start|>user\n{problem}\n" + _INSTRUCTION
             + "<|im_end|>\n<|im_start|>assistant\n<think>"),
}


TEMPLATES = (*PROMPT_TEMPLATES, CHAT)
"""Every prompt template name: the format strings above and ``chat`` (the tokenizer's chat template)."""


def chat_messages(record: Mapping[str, Any]) -> list[dict[str, str]]:
    """The ``qwen`` template's turns as chat messages (the system message, then the problem and the instruction as
    the user turn), for the ``chat`` template to render with the model's own chat template."""
    unescape = lambda t: t.replace("{{", "{").replace("}}", "}")  # noqa: E731 (the templates are format strings)
    return [{"role": "system", "content": unescape(_QWEN_SYSTEM)},
            {"role": "user", "content": f"{record['problem']}\n{unescape(_INSTRUCTION)}"}]


def format_prompt(record: Mapping[str, Any], *, template: str = "plain", tokenizer=None) -> str:
    """Prompt text for one math record; every template ends with ``<think>``.

    ``plain``: ``"{problem}\\nPlease reason step by step, and put your final answer within
    \\boxed{}.\\n<think>"``. ``qwen``: a system message describing the think/boxed format, the
    problem and the same instruction as the user turn, then ``<|im_start|>assistant\\n<think>``
    (mirrors :func:`dgro_lib.data.kk.format_prompt`); refused for a ``tokenizer`` without ChatML's tokens.
    ``chat``: the same turns through ``tokenizer``'s own chat template (:func:`dgro_lib.data.chat.render_chat`),
    which it requires: DeepSeek-R1-Distill-Qwen-7B, the paper's math model, has no ChatML tokens.
    """
    if template not in TEMPLATES:
        raise ValueError(f"unknown prompt template {template!r} (valid: {', '.join(TEMPLATES)})")
    if "problem" not in record:
        raise ValueError(f"record has no 'problem' field (fields: {sorted(map(str, record))})")
    if template == CHAT:
        return render_chat(tokenizer, chat_messages(record))
    if template == "qwen":
        require_chatml(tokenizer)
    return PROMPT_TEMPLATES[template].format(problem=record["problem"])
