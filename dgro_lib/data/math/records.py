"""From a benchmark's raw record to the problem text and the reference answer.

The per-field post-processing that :class:`~dgro_lib.data.math.datasets.MathDatasetSpec` names
(:func:`plain_problem`, :func:`plain_answer`, :func:`gsm8k_answer`, :func:`olympiad_answer`,
:func:`dapo_problem`), and the multiple-choice sets, whose options are rendered into the problem with
letters (:func:`multiple_choice_problem`, :func:`gpqa_record`, :func:`mmlu_pro_record`).
"""

from __future__ import annotations

import random
from typing import Any, Mapping, Sequence

__all__ = [
    "plain_answer",
    "gsm8k_answer",
    "olympiad_answer",
    "plain_problem",
    "dapo_problem",
    "CHOICE_LETTERS",
    "GPQA_SHUFFLE_SEED",
    "multiple_choice_problem",
    "gpqa_record",
    "mmlu_pro_record",
]


def _scalar_answer(x: Any) -> str:
    if isinstance(x, bool):
        raise ValueError(f"a boolean is not a math answer: {x!r}")
    if isinstance(x, int):
        return str(x)
    if isinstance(x, float):
        if x != x or x in (float("inf"), float("-inf")):
            raise ValueError(f"answer is not finite: {x!r}")
        return str(int(x)) if x.is_integer() else repr(x)
    if isinstance(x, str):
        return x.strip()
    raise ValueError(f"answer must be a str or a number, got {type(x).__name__}: {x!r:.80}")


def plain_answer(x: Any) -> str:
    """Default answer post-processing: a str stripped; an int as is; an integral float without ``.0``.

    A list (OlympiadBench's ``final_answer``) of one element gives that element; of several, the
    elements joined by ``", "``.
    """
    if isinstance(x, (list, tuple)):
        if not x:
            return ""
        return ", ".join(_scalar_answer(e) for e in x)
    return _scalar_answer(x)


def gsm8k_answer(x: Any) -> str:
    """GSM8K: the text after the last ``####`` of the worked solution, thousands commas removed."""
    if not isinstance(x, str) or "####" not in x:
        raise ValueError(f"GSM8K answer must be a worked solution ending in '#### <number>', got {x!r:.120}")
    return x.rsplit("####", 1)[1].strip().replace(",", "")


def olympiad_answer(x: Any) -> str:
    """OlympiadBench: ``final_answer`` is a list of ``$...$`` strings; delimiters stripped, joined by ``", "``."""
    items = list(x) if isinstance(x, (list, tuple)) else [x]
    parts = []
    for e in items:
        s = _scalar_answer(e)
        if len(s) >= 2 and s.startswith("$") and s.endswith("$"):
            s = s.strip("$").strip()
        parts.append(s)
    return ", ".join(parts)


_DAPO_PREFIX = ("Solve the following math problem step by step. The last line of your response should be of the "
                "form Answer: $Answer (without quotes) where $Answer is the answer to the problem.\n\n")
_DAPO_SUFFIX = '\n\nRemember to put your answer on its own line after "Answer:".'


def plain_problem(x: Any) -> str:
    """Default problem post-processing: the string, stripped."""
    if not isinstance(x, str):
        raise ValueError(f"problem must be a str, got {type(x).__name__}: {x!r:.80}")
    return x.strip()


def dapo_problem(x: Any) -> str:
    """DAPO-Math-17k: the first user message of the chat ``prompt``, without DAPO's instruction text."""
    if isinstance(x, (list, tuple)):
        users = [m for m in x if isinstance(m, Mapping) and m.get("role") == "user"]
        if not users:
            raise ValueError(f"DAPO prompt has no user message: {x!r:.120}")
        x = users[0].get("content")
    text = plain_problem(x)
    return text.removeprefix(_DAPO_PREFIX.strip()).removesuffix(_DAPO_SUFFIX.strip()).strip()


# Multiple-choice sets (DCPO's Qwen3-4B suite: GPQA-diamond, MMLU-Pro). The options are rendered into the
# problem text with letters and the reference answer is the letter, so ``\boxed{C}`` is judged by math-verify
# like any other answer (tests/test_math_data.py checks that it accepts C for C and rejects B, for A-J).

CHOICE_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
#: Seed of GPQA's option shuffle (:func:`gpqa_record`); changing it changes every gold letter.
GPQA_SHUFFLE_SEED = 0
_GPQA_FIELDS = ("Question", "Correct Answer", "Incorrect Answer 1", "Incorrect Answer 2", "Incorrect Answer 3")


def _require_fields(record: Any, fields: Sequence[str]) -> Mapping:
    if not isinstance(record, Mapping):
        raise ValueError(f"expected a record with fields {list(fields)}, got {_fields_of(record)}")
    missing = [f for f in fields if f not in record or record[f] is None]
    if missing:
        raise ValueError(f"missing field {missing[0]!r} (the record has {_fields_of(record)})")
    return record


def multiple_choice_problem(question: Any, options: Sequence[Any]) -> str:
    """The question, then one ``(A) option`` line per option, then the instruction to answer with the letter.

    Raises ValueError for an empty question, fewer than two options, more than 26, or an empty option.
    """
    text = plain_problem(question)
    if not text:
        raise ValueError("empty question")
    if isinstance(options, (str, bytes)) or not isinstance(options, Sequence) or not 2 <= len(options) <= 26:
        raise ValueError(f"options must be a list of 2 to 26 strings, got {options!r:.120}")
    lines = []
    for letter, opt in zip(CHOICE_LETTERS, options):
        if not isinstance(opt, str) or not opt.strip():
            raise ValueError(f"option {letter} is empty or not a str: {opt!r:.80}")
        lines.append(f"({letter}) {opt.strip()}")
    last = CHOICE_LETTERS[len(options) - 1]
    return (f"{text}\n\n" + "\n".join(lines)
            + f"\n\nAnswer with the letter of the correct option (A-{last}).")


def gpqa_record(record: Any, *, seed: int = GPQA_SHUFFLE_SEED) -> dict:
    """GPQA (``Idavidrein/gpqa``): ``{"problem", "answer"}`` with the four options shuffled and a letter as gold.

    The raw record lists ``Correct Answer`` before ``Incorrect Answer 1-3``; the order of the options is a
    permutation drawn from ``random.Random`` seeded by ``seed`` and the question text, so it is the same in
    every run and process, independent of row order, ``limit`` and the machine, and different across
    questions. The gold answer is the letter the correct option lands on.
    """
    r = _require_fields(record, _GPQA_FIELDS)
    question = plain_problem(r["Question"])
    choices = [r[f] for f in _GPQA_FIELDS[1:]]  # choices[0] is the correct one
    order = list(range(len(choices)))
    random.Random(f"gpqa:{seed}:{question}").shuffle(order)
    options = [choices[j] for j in order]
    return {"problem": multiple_choice_problem(question, options), "answer": CHOICE_LETTERS[order.index(0)]}


def mmlu_pro_record(record: Any) -> dict:
    """MMLU-Pro (``TIGER-Lab/MMLU-Pro``): options in the data set's order (up to ten, A-J), gold = the letter of
    ``answer_index``, which must agree with the record's ``answer`` letter when present."""
    r = _require_fields(record, ("question", "options", "answer_index"))
    options = r["options"]
    if not isinstance(options, (list, tuple)):
        raise ValueError(f"options must be a list, got {type(options).__name__}")
    idx = r["answer_index"]
    if isinstance(idx, bool) or not isinstance(idx, int) or not 0 <= idx < len(options):
        raise ValueError(f"answer_index {idx!r} is not an index into the {len(options)} options")
    letter = CHOICE_LETTERS[idx]
    given = r.get("answer")
    if given is not None and str(given).strip() != letter:
        raise ValueError(f"answer {given!r} disagrees with answer_index {idx} (letter {letter})")
    return {"problem": multiple_choice_problem(r["question"], options), "answer": letter}


def _fields_of(record: Any) -> str:
    if isinstance(record, Mapping):
        return f"fields {sorted(map(str, record))}"
    if isinstance(record, (list, tuple)):
        return f"a list of {len(record)} items"
    return f"a {type(record).__name__}"
