"""Math rule-based reward (DGRO §4.1 Eq. 12 / Table 4 schemes on math problems; docs/design.md, reward rules).

Scoring a completion (the model's text after the prompt) takes three steps, in the same
shape as :mod:`dgro_lib.rewards.kk`.

1. **Format**: exactly one closed think block. ``</think>`` occurs exactly once. When
   ``think_in_prompt=True`` (the default: the prompt template ends with ``<think>``, as
   :data:`dgro_lib.data.math.PROMPT_TEMPLATES` and the K&K templates do), the completion
   must contain no ``<think>`` and the prompt's opening tag counts as present, exactly as
   :func:`dgro_lib.rewards.kk.check_format` does. With ``think_in_prompt=False`` the
   completion holds exactly one ``<think>``, before the ``</think>``. Tags are matched
   literally and are case-sensitive.
2. **Final answer**: searched only in the text after ``</think>``, so the think block is
   always before it. It is the content of the last ``\\boxed{...}`` whose braces balance
   (see :func:`extract_boxed`); when there is none, the content of the last
   ``<answer>...</answer>`` (:func:`dgro_lib.rewards.kk.extract_answer`). The content is
   stripped; an empty one counts as no answer.
3. **Outcome** (:class:`~dgro_lib.rewards.schemes.Outcome`):

   * format violated: ``BAD_FORMAT`` -> (r_f, r_corr, r_com) = (-1, -1, -1)
   * no final answer: ``INCOMPLETE`` -> (1, -1, -1)
   * math-verify says the answer is not equivalent to the reference: ``WRONG`` -> (1, -1, 1)
   * equivalent: ``CORRECT`` -> (1, 1, 1)

   Any scheme of :func:`~dgro_lib.rewards.schemes.get_scheme` maps the outcome to a float
   (DGRO Eq. 12 with the Table-4 coefficients, or Logic-RL's +1/-1 format plus
   +2/-1.5/-2 answer score; a missing answer is Logic-RL's "unparsable", -2).

**Accuracy only** (the ``"accuracy"`` scheme, DCPO's reward; ``require_format=False`` in
:func:`math_outcome`). DCPO's score function (597358816/DCPO, commit
33f8073e302db6cc04a1e064df89242ba8f236b0, ``examples/score_function/math.py``,
``math_compute_score``) is ``grade_answer(extract_boxed_content(response), answer)`` from
``mathruler``, with the format score commented out: the answer is the content of the last
``\\boxed{`` anywhere in the response, think block included, and no tags are required.
So here steps 1 and 2 become: the final answer is the content of the *last* ``\\boxed{``
anywhere in the completion (:func:`extract_last_box`); if that box never closes there is no
answer (mathruler returns "None" then), and the answer tag is not read. No answer gives
``INCOMPLETE``, otherwise ``CORRECT``/``WRONG`` as in step 3; ``BAD_FORMAT`` never occurs.
Deviations, both minor: equivalence is math-verify's (below), not mathruler's
``grade_answer``; braces are matched as TeX groups (``\\{`` is escaped) as in
:func:`extract_boxed`, where mathruler counts every brace character.

Equivalence (:func:`math_equivalent`) is HuggingFace math-verify's: both the reference
and the prediction go through ``math_verify.parse`` and are compared with
``math_verify.verify(gold, prediction)``. A string without math delimiters is wrapped as
``$...$`` first, so ``[1, 3)`` is read as an interval rather than as the number 3; a
string that already holds ``$``, ``\\(`` or ``\\[`` is parsed as it is. Facts about
math-verify 0.9.0 that matter here (tested in ``tests/test_math_reward.py``):
``\\frac{1}{2}``, ``1/2``, ``0.5`` and ``\\dfrac12`` are equal; numbers are compared after
rounding to 6 decimals, so ``0.333333`` equals ``\\frac{1}{3}`` but ``0.33`` does not;
intervals must agree on open and closed ends; ``x = 2`` equals ``2``; ``1,000`` equals
``1000``; a hedge such as ``1/2 or 1/3`` is read as a set and is wrong.

Totality: every function here is total on ``str`` completions. It never raises and the
reward lies inside the scheme's ``bounds``. The format check and the extraction are linear
scans. math-verify runs with a signal-based timeout of :data:`TIMEOUT_S` seconds per parse
and per comparison, which only works in the main thread; in any other thread (for
example TRL's async reward workers) it runs without a timeout, because ``signal.alarm``
cannot be used there. In both cases every exception math-verify raises (including its
``TimeoutException``, a ``BaseException``) makes the comparison False. A final answer
longer than :data:`MAX_ANSWER_CHARS` characters is judged wrong without calling
math-verify, which bounds the work per completion. Remaining risk, by design of
math-verify: outside the main thread an adversarial answer such as ``10^{10^{10}}`` can
take very long to compare, since no timeout can interrupt it there.

A reference answer is data, not model output, so a bad one raises: an ``answer`` that is not
a str (or int), is empty, or that math-verify cannot parse at all raises ValueError or
TypeError naming ``answer``. math-verify is an optional dependency (``pip install
dgro_lib[math]``); it is imported on first use and its absence raises ImportError.
"""

from __future__ import annotations

import functools
import re
import threading
from typing import Any, Sequence

from dgro_lib.rewards.kk import THINK_CLOSE, THINK_OPEN, _require_str, completion_text, extract_answer
from dgro_lib.rewards.schemes import Outcome, Scheme, get_scheme, outcome_components, requires_format

__all__ = [
    "MAX_ANSWER_CHARS",
    "TIMEOUT_S",
    "check_math_format",
    "extract_boxed",
    "extract_last_box",
    "extract_math_answer",
    "math_equivalent",
    "math_outcome",
    "math_components",
    "math_reward",
    "math_is_correct",
    "MathRewardFunc",
    "math_reward_func",
]

#: A final answer longer than this many characters is judged wrong without calling math-verify.
MAX_ANSWER_CHARS = 1000
#: Seconds math-verify may spend on one parse and on one comparison (main thread only).
TIMEOUT_S = 5

# A backslash with the character after it (an escaped brace such as \{ is not a group), or a brace.
_BRACE_TOKEN = re.compile(r"\\.|[{}]", re.S)
# Every quantifier is followed by a literal, so a search is linear in len(text).
_BOXED_OPEN = re.compile(r"\\boxed\s*\{")
_MATH_DELIMITER = re.compile(r"(?<!\\)\$|\\\(|\\\[")


# ---------------------------------------------------------------------------------------
# format and answer extraction
# ---------------------------------------------------------------------------------------


def check_math_format(completion: str, *, think_in_prompt: bool = True) -> bool:
    """True if the completion closes exactly one think block (module docstring, step 1).

    With ``think_in_prompt=True`` the completion must hold no ``<think>`` and one
    ``</think>``; otherwise one ``<think>`` followed later by one ``</think>``.
    """
    s = _require_str(completion, "completion")
    if s.count(THINK_CLOSE) != 1:
        return False
    n_open = s.count(THINK_OPEN)
    if think_in_prompt:
        return n_open == 0
    return n_open == 1 and s.find(THINK_OPEN) < s.find(THINK_CLOSE)


def _closing_braces(s: str) -> dict[int, int]:
    """Map the index of every ``{`` that has a matching ``}`` to that ``}``'s index (one linear pass)."""
    stack: list[int] = []
    match: dict[int, int] = {}
    for m in _BRACE_TOKEN.finditer(s):
        tok = m.group()
        if tok == "{":
            stack.append(m.start())
        elif tok == "}" and stack:
            match[stack.pop()] = m.start()
    return match


def extract_boxed(text: str) -> str | None:
    """Content of the last ``\\boxed{...}`` whose opening brace has a matching closing brace.

    Braces are matched as TeX groups: ``\\{`` and ``\\}`` are escaped characters, not groups,
    so ``\\boxed{\\{1, 2\\}}`` gives ``\\{1, 2\\}``. A ``\\boxed{`` left open (for example a
    truncated generation) is skipped in favour of the last closed one before it; nested boxes
    give the innermost last one. The content is returned unstripped; None when no box closes.
    Linear time in ``len(text)``.
    """
    s = _require_str(text, "text")
    if "\\boxed" not in s:
        return None
    closing = _closing_braces(s)
    best: tuple[int, int] | None = None
    for m in _BOXED_OPEN.finditer(s):
        open_at = m.end() - 1
        close_at = closing.get(open_at)
        if close_at is not None:
            best = (open_at + 1, close_at)  # slice once at the end: slicing every nested box is quadratic
    return None if best is None else s[best[0] : best[1]]


def extract_last_box(text: str) -> str | None:
    """Content of the last ``\\boxed{`` in ``text``, stripped; None when there is none or it never closes.

    DCPO's extraction (mathruler's ``extract_boxed_content``, which takes ``rfind("\\boxed{")``):
    unlike :func:`extract_boxed`, a last box left open is not replaced by an earlier closed one.
    An empty box gives None. Linear time in ``len(text)``.
    """
    s = _require_str(text, "text")
    last = None
    for last in _BOXED_OPEN.finditer(s):
        pass
    if last is None:
        return None
    content = extract_boxed(s[last.start() :])  # the suffix holds exactly one box opener
    content = content.strip() if content is not None else None
    return content or None


def _final_answer(s: str) -> str | None:
    boxed = extract_boxed(s)
    if boxed is not None:
        return boxed.strip()
    return extract_answer(s)


def extract_math_answer(completion: str, *, think_in_prompt: bool = True, require_format: bool = True) -> str | None:
    """The final answer of a completion, stripped; None when none is given (module docstring, step 2).

    With ``require_format=True`` (what the reward uses) the answer is looked for only after the
    ``</think>`` of a well-formed completion, and None is returned for a bad format. With
    ``require_format=False`` the whole completion is searched (for evaluating models that do not
    write think tags). An empty answer (``\\boxed{}``, ``<answer> </answer>``) gives None.
    """
    s = _require_str(completion, "completion")
    if require_format:
        if not check_math_format(s, think_in_prompt=think_in_prompt):
            return None
        s = s[s.find(THINK_CLOSE) + len(THINK_CLOSE) :]
    ans = _final_answer(s)
    return ans if ans else None


# ---------------------------------------------------------------------------------------
# math-verify equivalence
# ---------------------------------------------------------------------------------------


def _math_verify():
    try:
        import math_verify
    except ImportError as exc:  # optional dependency
        raise ImportError(
            "the math reward needs the 'math-verify' package: pip install 'dgro_lib[math]' (or pip install math-verify)"
        ) from exc
    return math_verify


def _timeout() -> int | None:
    # math-verify's timeout uses signal.alarm, which raises ValueError outside the main thread.
    return TIMEOUT_S if threading.current_thread() is threading.main_thread() else None


def _as_latex(s: str) -> str:
    return s if _MATH_DELIMITER.search(s) else f"${s}$"


def _parse(s: str, timeout: int | None) -> list:
    mv = _math_verify()
    try:
        return list(mv.parse(_as_latex(s), parsing_timeout=timeout))
    except BaseException as exc:  # math-verify's TimeoutException is a BaseException
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        return []


@functools.lru_cache(maxsize=8192)
def _parse_gold(answer: str, timeout: int | None) -> tuple:
    parsed = _parse(answer, timeout)
    if not parsed:
        raise ValueError(f"answer {answer[:200]!r}: math-verify cannot parse this reference answer "
                         f"(no expression found, or parsing took longer than TIMEOUT_S={TIMEOUT_S} s)")
    return tuple(parsed)


def _gold_text(answer: Any) -> str:
    if isinstance(answer, bool) or not isinstance(answer, (str, int)):
        raise TypeError(f"answer must be a str (or int), got {type(answer).__name__}: {answer!r:.80}")
    text = str(answer).strip()
    if not text:
        raise ValueError("answer is empty: a math problem needs a reference answer")
    return text


def _equivalent(prediction: str, gold: tuple, timeout: int | None) -> bool:
    if len(prediction) > MAX_ANSWER_CHARS:
        return False
    pred = _parse(prediction, timeout)
    if not pred:
        return False
    mv = _math_verify()
    try:
        return bool(mv.verify(list(gold), pred, timeout_seconds=timeout))
    except BaseException as exc:
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        return False


def math_equivalent(prediction: str, answer: Any) -> bool:
    """True iff math-verify judges ``prediction`` equivalent to the reference ``answer``.

    Both are bare answers (``"\\frac{1}{2}"``, ``"[1, 3)"``), not whole completions. The
    reference is parsed once and cached. Total in ``prediction`` (any str gives a bool); a bad
    ``answer`` raises (see the module docstring).
    """
    pred = _require_str(prediction, "prediction")
    timeout = _timeout()
    gold = _parse_gold(_gold_text(answer), timeout)
    return _equivalent(pred, gold, timeout)


# ---------------------------------------------------------------------------------------
# scoring
# ---------------------------------------------------------------------------------------


def _outcome(s: str, gold: tuple, think_in_prompt: bool, timeout: int | None, require_format: bool = True) -> Outcome:
    if not require_format:  # DCPO's accuracy-only rule (module docstring)
        ans = extract_last_box(s)
        if ans is None:
            return Outcome.INCOMPLETE
        return Outcome.CORRECT if _equivalent(ans, gold, timeout) else Outcome.WRONG
    if not check_math_format(s, think_in_prompt=think_in_prompt):
        return Outcome.BAD_FORMAT
    ans = extract_math_answer(s, think_in_prompt=think_in_prompt)
    if ans is None:
        return Outcome.INCOMPLETE
    return Outcome.CORRECT if _equivalent(ans, gold, timeout) else Outcome.WRONG


def math_outcome(completion: str, *, answer: Any, think_in_prompt: bool = True,
                 require_format: bool = True) -> Outcome:
    """Classify a completion as ``CORRECT``, ``WRONG``, ``INCOMPLETE`` or ``BAD_FORMAT`` (module docstring).

    ``require_format=False`` is DCPO's accuracy-only rule (the ``"accuracy"`` scheme): the answer is
    the last ``\\boxed{}`` anywhere (:func:`extract_last_box`) and the result is never ``BAD_FORMAT``.
    This differs from :func:`extract_math_answer`'s ``require_format=False`` (an evaluation helper that
    also reads the answer tag and skips an unclosed last box).
    """
    s = _require_str(completion, "completion")
    timeout = _timeout()
    gold = _parse_gold(_gold_text(answer), timeout)
    return _outcome(s, gold, bool(think_in_prompt), timeout, bool(require_format))


def math_components(completion: str, *, answer: Any, think_in_prompt: bool = True) -> tuple[int, int, int]:
    """DGRO Eq. 12 binary scores ``(r_f, r_corr, r_com)``, each in {-1, +1}.

    * correct: (1, 1, 1)
    * wrong: (1, -1, 1)
    * incomplete (no final answer): (1, -1, -1)
    * bad format: (-1, -1, -1)
    """
    return outcome_components(math_outcome(completion, answer=answer, think_in_prompt=think_in_prompt))


def math_reward(completion: str, *, answer: Any, scheme: Any = "[-3,3]", think_in_prompt: bool = True) -> float:
    """The math reward of one completion under ``scheme`` (default DGRO Table 4 ``[-3,3]``).

    ``r = c_f*r_f + c_corr*r_corr + c_com*r_com`` (DGRO Eq. 12) with the components of
    :func:`math_components`. ``scheme`` takes anything
    :func:`~dgro_lib.rewards.schemes.get_scheme` accepts: a Table-4 name, ``"logic-rl"``,
    ``"accuracy"`` (DCPO: 1.0 iff the last box anywhere is right, format not checked), a
    ``(c_f, c_corr, c_com)`` tuple, or a scheme object. The result always lies in
    ``get_scheme(scheme).bounds``.
    """
    sch = get_scheme(scheme)
    return sch.score(math_outcome(completion, answer=answer, think_in_prompt=think_in_prompt,
                                  require_format=requires_format(sch)))


def math_is_correct(completion: str, *, answer: Any, think_in_prompt: bool = True,
                    require_format: bool = True) -> bool:
    """True iff the final answer is math-verify equivalent to ``answer`` (for evaluation; pass@k uses this).

    With ``require_format=True`` this is ``math_outcome(...) is Outcome.CORRECT``. With
    ``require_format=False`` the think block is not required and the final answer is the last
    box (else answer tag) anywhere in the completion (see :func:`extract_math_answer`).
    """
    s = _require_str(completion, "completion")
    timeout = _timeout()
    gold = _parse_gold(_gold_text(answer), timeout)
    ans = extract_math_answer(s, think_in_prompt=think_in_prompt, require_format=require_format)
    return ans is not None and _equivalent(ans, gold, timeout)


# ---------------------------------------------------------------------------------------
# TRL adapter
# ---------------------------------------------------------------------------------------

_LOGGED_OUTCOMES = (Outcome.CORRECT, Outcome.WRONG, Outcome.INCOMPLETE, Outcome.BAD_FORMAT)


class MathRewardFunc:
    """A picklable TRL reward function: ``(prompts, completions, answer, **kwargs) -> list[float]``.

    TRL's GRPOTrainer passes the dataset columns as keyword lists, one entry per completion,
    so ``answer`` is the column of :func:`dgro_lib.data.math.load_math` records. Completions
    may be plain strings or conversational (lists of ``{"role", "content"}`` messages, see
    :func:`~dgro_lib.rewards.kk.completion_text`). ``__name__`` is
    ``"math_reward_<scheme name>"``; TRL logs the reward under that name. When TRL provides
    ``log_metric`` and ``log_outcomes`` is true, the fraction of each outcome in the batch is
    logged as ``math_outcome/<outcome>``.
    """

    def __init__(self, scheme: Any = "[-3,3]", think_in_prompt: bool = True, log_outcomes: bool = True):
        self.scheme: Scheme = get_scheme(scheme)
        self.think_in_prompt = bool(think_in_prompt)
        self.log_outcomes = bool(log_outcomes)
        self.__name__ = f"math_reward_{self.scheme.name}"
        self.__qualname__ = self.__name__

    def __repr__(self) -> str:
        return f"MathRewardFunc(scheme={self.scheme.name!r}, think_in_prompt={self.think_in_prompt})"

    def outcomes(self, completions: Sequence[Any], answer: Sequence[Any]) -> list[Outcome]:
        """Per-completion outcomes (same inputs as ``__call__``); DCPO's format-free rule under ``"accuracy"``."""
        completions, answer = list(completions), list(answer)
        if len(completions) != len(answer):
            raise ValueError(
                "completions and answer must have one entry per completion; got lengths "
                f"{len(completions)} and {len(answer)}"
            )
        timeout = _timeout()
        out = []
        for c, a in zip(completions, answer):
            gold = _parse_gold(_gold_text(a), timeout)
            out.append(_outcome(completion_text(c), gold, self.think_in_prompt, timeout, requires_format(self.scheme)))
        return out

    def __call__(self, prompts: Any = None, completions: Any = None, answer: Any = None, **kwargs: Any) -> list[float]:
        if completions is None or answer is None:
            raise TypeError(f"{self.__name__} needs completions and answer (the dataset's answer column)")
        outs = self.outcomes(completions, answer)
        log_metric = kwargs.get("log_metric")
        if self.log_outcomes and callable(log_metric) and outs:
            for o in _LOGGED_OUTCOMES:
                log_metric(f"math_outcome/{o.value}", sum(x is o for x in outs) / len(outs))
        return [self.scheme.score(o) for o in outs]


def math_reward_func(scheme: Any = "[-3,3]", think_in_prompt: bool = True, *,
                     log_outcomes: bool = True) -> MathRewardFunc:
    """Build the TRL reward function for ``scheme`` (see :class:`MathRewardFunc`)."""
    return MathRewardFunc(scheme, think_in_prompt=think_in_prompt, log_outcomes=log_outcomes)
