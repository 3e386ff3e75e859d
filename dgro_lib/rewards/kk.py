"""Knights & Knaves (K&K) rule-based reward (DGRO §4.1 Eq. 12 / Table 4, and Logic-RL's rules).

Scoring a completion (the model's text after the prompt) takes three steps.

1. **Format** (following Logic-RL's ``validate_response_structure``):
   ``<think>``, ``</think>``, ``<answer>`` and ``</answer>`` each occur exactly once,
   in that order. When ``think_in_prompt=True`` (the default: the prompt template
   ends with ``<think>``, as Logic-RL's and ours do), the completion must contain no
   ``<think>`` and the opening tag counts as present. Text and whitespace around and
   between the tags are not constrained. Tags are matched literally and are
   case-sensitive.
2. **Answer**: the content of the last ``<answer>...</answer>``. For each person, the
   first match of ``NAME\\s+is\\s+a\\s+(knight|knave)`` gives the stated role. The whole
   pattern is case-insensitive (names and role words, as Logic-RL's ``re.IGNORECASE``), so
   "ZOEY IS A KNAVE" states Zoey's role. NAME is matched literally (``re.escape``), with
   word boundaries written as ``(?<!\\w)``/``(?!\\w)`` so that names beginning or ending
   in punctuation still work.
3. **Outcome** (:class:`~dgro_lib.rewards.schemes.Outcome`):

   * bad format: ``BAD_FORMAT``
   * some person has no stated role: ``INCOMPLETE``
   * the "knight"/"knave" substring count (case-insensitive) differs from the number of
     people: ``MISCOUNT`` (Eq. 12 counts it as incomplete, see below)
   * some role wrong: ``WRONG``
   * otherwise ``CORRECT``

   A scheme maps the outcome to a float (Eq. 12, Logic-RL, or accuracy).

   With ``require_format=False`` (what the ``"accuracy"`` scheme uses, see
   :class:`~dgro_lib.rewards.schemes.AccuracyScheme`) step 1 is skipped: the answer is the
   last ``<answer>...</answer>`` anywhere, none gives ``INCOMPLETE``, and ``BAD_FORMAT``
   never occurs.

**Miscount is incomplete, not wrong.** DGRO (§4.1, Eq. 12; Appendix G.1) defines r_com only
as "answer completeness" and its cases as "correct format but incorrect answer" (-0.5
under [-3,3]) and "correct format but incomplete answer" (-1). Its Table-4 [-3,3] values are
exactly Logic-RL's totals (3 = 1+2, -0.5 = 1-1.5, -1 = 1-2, -3 = -1-2), so "incomplete" is
Logic-RL's answer score -2, returned whenever ``parse_model_answer`` gives None. That
function returns None for both a person with no statement and a role-word count that
differs from the number of people: the count check is part of Logic-RL's test that the
answer assigns exactly one role to each person. An answer with extra or hedged role
statements ("Zoey is a knave or a knight") does not give that complete assignment, while
"incorrect" means a complete assignment that disagrees with the solution. So MISCOUNT has
(r_f, r_corr, r_com) = (1, -1, -1): -1 under [-3,3] (Logic-RL's value), -0.2 under [-1,1].
It stays a separate :class:`~dgro_lib.rewards.schemes.Outcome` for logging.

Comparison with Logic-RL's ``compute_score`` (Unakar/Logic-RL, commit
9d2c457525ec14639e85afa12d49bb16efb053a4, ``verl/utils/reward_score/kk.py``). Followed:
the format rules, the last answer block, the first statement per name, the
``re.IGNORECASE`` name and role match with the role lowercased, and the
``.lower().count('knight')`` + ``.count('knave')`` check. Kept different where Logic-RL
is wrong:

* The completion alone is scored. Logic-RL's ``extract_solution`` splits the full
  prompt+response at the first "Assistant:" (tried before "<|im_start|>assistant"), so with
  a chat-template prompt an "Assistant:" written by the model cuts off everything before it,
  its ``</think>`` included. ``think_in_prompt`` stands in for the ``<think>`` that their
  prompt contributes.
* Word boundaries use lookarounds instead of ``\\b``. Logic-RL's ``\\bNAME\\b`` never
  matches a name ending in punctuation such as "A." followed by a space, and its
  ground-truth parser reads a name as ``[A-Za-z]+``, which misreads names with other
  characters ("Zoë", "Mary-Ann"). Here names come from the dataset's ``names`` column.
* Nothing is printed. Logic-RL printed every sample.

Every function is total on ``str`` input: it never raises and returns a value inside
the scheme's ``bounds``. All patterns are linear (no nested quantifiers), so a 1 MB
completion takes milliseconds. A completion that is not a ``str`` raises TypeError;
that is a caller bug. The TRL adapter :func:`kk_reward_func` also accepts
conversational completions (lists of ``{"role", "content"}`` messages).
"""

from __future__ import annotations

import ast
import functools
import re
from collections import Counter
from typing import Any, Iterable, Sequence

from dgro_lib.rewards.schemes import Outcome, Scheme, get_scheme, outcome_components, requires_format

__all__ = [
    "check_format",
    "extract_answer",
    "parse_roles",
    "parse_ground_truth",
    "kk_outcome",
    "kk_components",
    "kk_reward",
    "kk_is_correct",
    "completion_text",
    "KKRewardFunc",
    "kk_reward_func",
]

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
ANSWER_OPEN, ANSWER_CLOSE = "<answer>", "</answer>"


def _require_str(value: Any, argname: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{argname} must be a str, got {type(value).__name__}")
    return value


# ---------------------------------------------------------------------------------------
# format and answer extraction
# ---------------------------------------------------------------------------------------


def check_format(completion: str, *, think_in_prompt: bool = True) -> bool:
    """True if the think/answer tags occur exactly once each, in order (Logic-RL's format rule).

    With ``think_in_prompt=True`` the completion must contain no ``<think>``: the prompt
    already opened the block. The tags do not overlap as strings, so ``str.count`` and
    ``str.find`` decide this in linear time.
    """
    s = _require_str(completion, "completion")
    if s.count(THINK_CLOSE) != 1 or s.count(ANSWER_OPEN) != 1 or s.count(ANSWER_CLOSE) != 1:
        return False
    n_open = s.count(THINK_OPEN)
    if think_in_prompt:
        if n_open != 0:
            return False
        start = -1
    else:
        if n_open != 1:
            return False
        start = s.find(THINK_OPEN)
    return start < s.find(THINK_CLOSE) < s.find(ANSWER_OPEN) < s.find(ANSWER_CLOSE)


def extract_answer(completion: str) -> str | None:
    """Content of the last ``<answer>...</answer>`` block, stripped; None if there is none."""
    s = _require_str(completion, "completion")
    end = s.rfind(ANSWER_CLOSE)
    if end < 0:
        return None
    start = s.rfind(ANSWER_OPEN, 0, end)
    if start < 0:
        return None
    return s[start + len(ANSWER_OPEN) : end].strip()


@functools.lru_cache(maxsize=4096)
def _role_pattern(name: str) -> re.Pattern[str]:
    # Every quantifier is followed by a literal, so a search is linear in len(text).
    # Case-insensitive throughout, as Logic-RL's re.IGNORECASE (Unakar/Logic-RL 9d2c457, kk.py).
    return re.compile(r"(?<!\w)" + re.escape(name) + r"(?!\w)\s+is\s+a\s+(knight|knave)(?!\w)", re.IGNORECASE)


def parse_roles(answer: str, names: Sequence[str]) -> dict[str, bool | None]:
    """Stated role per name (True knight, False knave, None when no statement is found).

    The first statement for each name wins, as in Logic-RL's ``pattern.search``.
    """
    a = _require_str(answer, "answer")
    out: dict[str, bool | None] = {}
    for name in names:
        m = _role_pattern(name).search(a)
        out[name] = None if m is None else (m.group(1).lower() == "knight")
    return out


def _role_word_count(answer: str) -> int:
    low = answer.lower()
    return low.count("knight") + low.count("knave")


# ---------------------------------------------------------------------------------------
# ground truth
# ---------------------------------------------------------------------------------------


def _maybe_literal(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return ast.literal_eval(value.strip())
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            return value
    return value


def _to_role(x: Any, i: int) -> bool:
    if isinstance(x, str):
        low = x.strip().lower()
        if low in ("knight", "true"):
            return True
        if low in ("knave", "false"):
            return False
        raise ValueError(f"solution[{i}] must be a bool or 'knight'/'knave', got {x!r}")
    if hasattr(x, "item") and not isinstance(x, (bool, int)):  # numpy / torch scalars
        x = x.item()
    if isinstance(x, bool) or (isinstance(x, int) and x in (0, 1)):
        return bool(x)
    raise ValueError(f"solution[{i}] must be a bool (True = knight), got {x!r}")


def parse_ground_truth(names: Any, solution: Any) -> tuple[tuple[str, ...], tuple[bool, ...]]:
    """Normalise the dataset's ``names`` and ``solution`` columns.

    ``names`` may be a sequence of str or its string form (``"['Zoey', 'Oliver']"``).
    ``solution`` may be a sequence of bools (True = knight, as in the official K&K
    records), the string form of one (``"[False, True]"``), a sequence of
    "knight"/"knave" strings, or the ``solution_text_format`` text
    (``"(1) Zoey is a knave\\n(2) Oliver is a knight"``).

    Malformed ground truth (empty, duplicate names, length mismatch) raises ValueError
    or TypeError. That is a data bug, unlike a malformed completion.
    """
    nm = _maybe_literal(names)
    if isinstance(nm, str) or not isinstance(nm, Iterable):
        raise TypeError(f"names must be a sequence of str, got {type(names).__name__}: {names!r:.80}")
    nm = tuple(nm)
    if not nm:
        raise ValueError("names is empty")
    for i, n in enumerate(nm):
        if not isinstance(n, str) or not n.strip():
            raise ValueError(f"names[{i}] must be a non-empty str, got {n!r}")
    if len(set(nm)) != len(nm):
        dups = sorted(n for n, c in Counter(nm).items() if c > 1)
        raise ValueError(f"names contains duplicates: {dups}")

    sol = _maybe_literal(solution)
    if isinstance(sol, str):
        stated = parse_roles(sol, nm)
        missing = [n for n, r in stated.items() if r is None]
        if missing:
            raise ValueError(f"solution text states no role for {missing}: {solution!r:.200}")
        roles = tuple(bool(stated[n]) for n in nm)
    else:
        if isinstance(sol, Iterable) and not isinstance(sol, (bytes, dict)):
            roles = tuple(_to_role(x, i) for i, x in enumerate(sol))
        else:
            raise TypeError(f"solution must be a sequence of bools, got {type(solution).__name__}")
    if len(roles) != len(nm):
        raise ValueError(f"names has {len(nm)} entries but solution has {len(roles)}")
    return nm, roles


# ---------------------------------------------------------------------------------------
# scoring
# ---------------------------------------------------------------------------------------


def _outcome(s: str, nm: tuple[str, ...], roles: tuple[bool, ...], think_in_prompt: bool,
             require_format: bool = True) -> Outcome:
    if require_format and not check_format(s, think_in_prompt=think_in_prompt):
        return Outcome.BAD_FORMAT
    answer = extract_answer(s)
    if answer is None:  # only without the format check (unreachable once the format is ok)
        return Outcome.INCOMPLETE
    stated = parse_roles(answer, nm)
    if any(r is None for r in stated.values()):
        return Outcome.INCOMPLETE
    if _role_word_count(answer) != len(nm):
        return Outcome.MISCOUNT
    if all(stated[n] == r for n, r in zip(nm, roles)):
        return Outcome.CORRECT
    return Outcome.WRONG


def kk_outcome(completion: str, *, names: Any, solution: Any, think_in_prompt: bool = True,
               require_format: bool = True) -> Outcome:
    """Classify a completion as an :class:`~dgro_lib.rewards.schemes.Outcome` (see the module docstring).

    ``require_format=False`` skips the format check (the ``"accuracy"`` scheme's rule): the answer is
    the last ``<answer>...</answer>`` block anywhere, and the result is never ``BAD_FORMAT``.
    """
    s = _require_str(completion, "completion")
    nm, roles = parse_ground_truth(names, solution)
    return _outcome(s, nm, roles, bool(think_in_prompt), bool(require_format))


def kk_components(
    completion: str, *, names: Any, solution: Any, think_in_prompt: bool = True
) -> tuple[int, int, int]:
    """Eq. 12 binary scores ``(r_f, r_corr, r_com)``, each in {-1, +1}.

    * all right: (1, 1, 1)
    * wrong: (1, -1, 1)
    * incomplete (including MISCOUNT, see the module docstring): (1, -1, -1)
    * bad format: (-1, -1, -1)
    """
    return outcome_components(
        kk_outcome(completion, names=names, solution=solution, think_in_prompt=think_in_prompt)
    )


def kk_reward(
    completion: str,
    *,
    names: Any,
    solution: Any,
    scheme: Any = "[-3,3]",
    think_in_prompt: bool = True,
) -> float:
    """The K&K reward of one completion under ``scheme`` (default DGRO Table 4 ``[-3,3]``).

    ``scheme`` takes anything :func:`~dgro_lib.rewards.schemes.get_scheme` accepts: a
    Table-4 name, ``"logic-rl"``, ``"accuracy"`` (format not checked, see
    :func:`kk_outcome`), a ``(c_f, c_corr, c_com)`` tuple, or a scheme object.
    The result always lies in ``get_scheme(scheme).bounds``.
    """
    sch = get_scheme(scheme)
    return sch.score(kk_outcome(completion, names=names, solution=solution, think_in_prompt=think_in_prompt,
                                require_format=requires_format(sch)))


def kk_is_correct(completion: str, *, names: Any, solution: Any, think_in_prompt: bool = True) -> bool:
    """True iff the format is ok and the answer is exactly right (for evaluation; pass@k uses this)."""
    return kk_outcome(completion, names=names, solution=solution, think_in_prompt=think_in_prompt) is Outcome.CORRECT


# ---------------------------------------------------------------------------------------
# TRL adapter
# ---------------------------------------------------------------------------------------


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, (list, tuple)):  # multimodal-style parts: [{"type": "text", "text": ...}]
        parts = []
        for p in content:
            if isinstance(p, str):
                parts.append(p)
            elif isinstance(p, dict) and p.get("type", "text") == "text" and isinstance(p.get("text"), str):
                parts.append(p["text"])
        return "".join(parts)
    raise TypeError(f"completions: message content must be a str or a list of text parts, got {type(content).__name__}")


def completion_text(completion: Any) -> str:
    """The text of a TRL completion, either plain (``str``) or conversational.

    A conversational completion is a list of messages such as
    ``[{"role": "assistant", "content": "..."}]``. The contents of the assistant
    messages are concatenated; when no message carries ``role == "assistant"``, every
    message is used. Anything else raises TypeError naming ``completions``.
    """
    if isinstance(completion, str):
        return completion
    if isinstance(completion, dict):
        completion = [completion]
    if isinstance(completion, (list, tuple)):
        msgs = list(completion)
        for m in msgs:
            if not isinstance(m, (dict, str)):
                raise TypeError(f"completions: a conversational completion must hold message dicts, got {type(m).__name__}")
        has_assistant = any(isinstance(m, dict) and m.get("role") == "assistant" for m in msgs)
        parts = []
        for m in msgs:
            if isinstance(m, str):
                parts.append(m)
            elif not has_assistant or m.get("role") == "assistant":
                parts.append(_content_text(m.get("content")))
        return "".join(parts)
    raise TypeError(
        f"completions: each completion must be a str or a list of chat messages, got {type(completion).__name__}"
    )


class KKRewardFunc:
    """A picklable TRL reward function: ``(prompts, completions, names, solution, **kwargs) -> list[float]``.

    TRL's GRPOTrainer passes the dataset columns as keyword lists, one entry per
    completion, so ``names`` and ``solution`` are the K&K record's columns. ``__name__``
    is ``"kk_reward_<scheme name>"`` (for example ``"kk_reward_[-3,3]"``); TRL logs the
    reward under that name. When TRL provides ``log_metric`` (trl >= 1.16) and
    ``log_outcomes`` is true, the fraction of each outcome in the batch is logged as
    ``kk_outcome/<outcome>``.
    """

    def __init__(self, scheme: Any = "[-3,3]", think_in_prompt: bool = True, log_outcomes: bool = True):
        self.scheme: Scheme = get_scheme(scheme)
        self.think_in_prompt = bool(think_in_prompt)
        self.log_outcomes = bool(log_outcomes)
        self.__name__ = f"kk_reward_{self.scheme.name}"
        self.__qualname__ = self.__name__

    def __repr__(self) -> str:
        return f"KKRewardFunc(scheme={self.scheme.name!r}, think_in_prompt={self.think_in_prompt})"

    def outcomes(self, completions: Sequence[Any], names: Sequence[Any], solution: Sequence[Any]) -> list[Outcome]:
        """Per-completion outcomes (same inputs as ``__call__``); the format is not checked under ``"accuracy"``."""
        completions, names, solution = list(completions), list(names), list(solution)
        if not (len(completions) == len(names) == len(solution)):
            raise ValueError(
                "completions, names and solution must have one entry per completion; got lengths "
                f"{len(completions)}, {len(names)}, {len(solution)}"
            )
        out = []
        for c, n, sol in zip(completions, names, solution):
            nm, roles = parse_ground_truth(n, sol)
            out.append(_outcome(completion_text(c), nm, roles, self.think_in_prompt, requires_format(self.scheme)))
        return out

    def __call__(self, prompts: Any = None, completions: Any = None, names: Any = None, solution: Any = None,
                 **kwargs: Any) -> list[float]:
        if completions is None or names is None or solution is None:
            raise TypeError(f"{self.__name__} needs completions, names and solution (dataset columns)")
        outs = self.outcomes(completions, names, solution)
        log_metric = kwargs.get("log_metric")
        if self.log_outcomes and callable(log_metric) and outs:
            for o in Outcome:
                log_metric(f"kk_outcome/{o.value}", sum(x is o for x in outs) / len(outs))
        return [self.scheme.score(o) for o in outs]


def kk_reward_func(scheme: Any = "[-3,3]", think_in_prompt: bool = True, *, log_outcomes: bool = True) -> KKRewardFunc:
    """Build the TRL reward function for ``scheme`` (see :class:`KKRewardFunc`)."""
    return KKRewardFunc(scheme, think_in_prompt=think_in_prompt, log_outcomes=log_outcomes)
