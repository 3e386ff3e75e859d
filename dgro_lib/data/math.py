"""Math problems: an offline generator with exact answers, loaders for the benchmark sets, and prompts.

Every record, generated or loaded, has exactly three keys::

    {"problem": "Solve for $x$: $3x + 2 = 7$.", "answer": "5/3", "source": "synthetic/slash"}

``answer`` is the reference final answer as a string (LaTeX or plain), the form
:func:`dgro_lib.rewards.math.math_reward` compares against through math-verify.

**Generator** (:func:`generate_math`). Offline arithmetic and algebra problems whose phrasing is
derived from an exactly computed answer (``fractions.Fraction``; radicals as
``coeff * sqrt(radicand)`` with a square-free radicand). The answers come in several forms so
that math-verify's equivalence is exercised, one per kind (:data:`KINDS`):

==========  ================================  ===========================
kind        problem                           answer form
==========  ================================  ===========================
integer     ``a \\times b + c - d``             ``18``
fraction    ``\\frac{a}{b} \\pm \\frac{c}{d}``    ``\\frac{7}{12}``, ``-\\frac{1}{6}``
slash       solve ``ax + b = c``              ``5/3``, ``-7/2``
decimal     ``p\\%`` of ``N``                  ``4.5``, ``0.125``
interval    a linear inequality               ``[1, 3)``, ``(-\\infty, \\frac{2}{3}]``
sqrt        ``x^2 = k`` or a hypotenuse       ``2\\sqrt{3}``, ``\\sqrt{5}``
==========  ================================  ===========================

:func:`alternative_forms` renders a generated answer in other, equivalent forms
(``\\frac{1}{2}``, ``\\dfrac{1}{2}``, ``1/2``, ``0.5``, ``\\frac{2}{4}``, ...), and
:func:`near_miss_forms` in forms that denote a different value (off by one, an interval with a
flipped end, a truncated decimal ``0.33`` for ``\\frac{1}{3}``), so tests can check what
math-verify accepts.

**Loaders** (:func:`load_math`). :data:`MATH_DATASETS` maps a name to its Hugging Face Hub id,
configuration, split, problem and answer fields (dotted paths into nested records) and answer
post-processing. Both papers' sets are there: DGRO Table 3 (MATH-500, AIME 2024, AMC 2023,
Minerva, OlympiadBench; training on DeepScaleR and ORZ) and DCPO Tables 2-3 (adding AIME 2025,
HMMT 2025, GSM8K, and for Qwen3-4B the multiple-choice GPQA-diamond and MMLU-Pro, whose options
are rendered into the problem with letters and whose gold answer is the letter; training on
DAPO-17K). ``local_path`` (a ``.jsonl``/``.json``/``.parquet``/``.csv`` file or a directory of
them) takes precedence over the Hub and is read with the same field mapping, so a downloaded
copy of a Hub data set loads unchanged.

**Prompts** (:func:`format_prompt`). ``plain`` and ``qwen`` templates as in
:func:`dgro_lib.data.kk.format_prompt`; both end with ``<think>`` so that the reward's format
check counts the prompt's opening tag (DESIGN §4).
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence, Union

__all__ = [
    "KINDS",
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
    "format_prompt",
]

KINDS: tuple[str, ...] = ("integer", "fraction", "slash", "decimal", "interval", "sqrt")


# --------------------------------------------------------------------------------------------
# Exact values
# --------------------------------------------------------------------------------------------


def _square_free_split(k: int) -> tuple[int, int]:
    """``k = m**2 * r`` with ``r`` square-free; returns ``(m, r)`` for ``k >= 1``."""
    m, r = 1, k
    f = 2
    while f * f <= r:
        while r % (f * f) == 0:
            r //= f * f
            m *= f
        f += 1
    return m, r


@dataclass(frozen=True)
class Surd:
    """The value ``coeff * sqrt(radicand)``: ``coeff`` a positive integer, ``radicand`` square-free and > 1."""

    coeff: int
    radicand: int

    def __post_init__(self) -> None:
        if not isinstance(self.coeff, int) or self.coeff < 1:
            raise ValueError(f"Surd.coeff must be an int >= 1, got {self.coeff!r}")
        if not isinstance(self.radicand, int) or self.radicand < 2 or _square_free_split(self.radicand)[0] != 1:
            raise ValueError(f"Surd.radicand must be a square-free int >= 2, got {self.radicand!r}")


@dataclass(frozen=True)
class Interval:
    """A real interval; ``lo=None`` is -infinity and ``hi=None`` is +infinity (never closed there)."""

    lo: Fraction | None
    hi: Fraction | None
    lo_closed: bool
    hi_closed: bool

    def __post_init__(self) -> None:
        if self.lo is None and self.lo_closed:
            raise ValueError("Interval: an infinite lower end cannot be closed")
        if self.hi is None and self.hi_closed:
            raise ValueError("Interval: an infinite upper end cannot be closed")
        if self.lo is not None and self.hi is not None and not self.lo < self.hi:
            raise ValueError(f"Interval: lo must be < hi, got lo={self.lo}, hi={self.hi}")


ExactValue = Union[Fraction, Surd, Interval]


def _terminates(q: Fraction) -> bool:
    d = q.denominator
    for p in (2, 5):
        while d % p == 0:
            d //= p
    return d == 1


def _decimal(q: Fraction) -> str:
    """Exact decimal expansion of a terminating fraction (``Fraction(9, 2)`` -> ``"4.5"``)."""
    if not _terminates(q):
        raise ValueError(f"{q} has no finite decimal expansion")
    sign = "-" if q < 0 else ""
    q = abs(q)
    digits = 0
    while (q * 10**digits).denominator != 1:
        digits += 1
    scaled = int(q * 10**digits)
    if digits == 0:
        return f"{sign}{scaled}"
    whole, frac = divmod(scaled, 10**digits)
    return f"{sign}{whole}.{frac:0{digits}d}"


def _frac_latex(q: Fraction, command: str = "frac") -> str:
    if q.denominator == 1:
        return str(q.numerator)
    sign = "-" if q < 0 else ""
    return f"{sign}\\{command}{{{abs(q.numerator)}}}{{{q.denominator}}}"


def _render_number(q: Fraction, form: str) -> str:
    if form == "int":
        if q.denominator != 1:
            raise ValueError(f"form 'int' needs an integer, got {q}")
        return str(q.numerator)
    if form in ("frac", "dfrac"):
        return _frac_latex(q, form)
    if form == "slash":
        return str(q.numerator) if q.denominator == 1 else f"{q.numerator}/{q.denominator}"
    if form == "decimal":
        text = _decimal(q)
        return text if "." in text else text + ".0"
    raise ValueError(f"unknown number form {form!r} (valid: int, frac, dfrac, slash, decimal)")


def _render_endpoint(v: Fraction | None, lower: bool, form: str) -> str:
    if v is None:
        return "-\\infty" if lower else "\\infty"
    return _render_number(v, "int" if v.denominator == 1 else form)


def render_value(value: ExactValue, form: str = "canonical") -> str:
    """Render an exact value as an answer string.

    Forms: for a :class:`~fractions.Fraction` ``canonical`` (integer or ``\\frac``), ``int``,
    ``frac``, ``dfrac``, ``slash`` and ``decimal`` (only when the expansion terminates); for a
    :class:`Surd` ``canonical`` (``2\\sqrt{3}``); for an :class:`Interval` ``canonical``
    (``\\frac`` endpoints), ``slash`` or ``decimal`` endpoints. An unknown form, or a form the
    value cannot take, raises ValueError naming it.
    """
    if isinstance(value, Fraction):
        return _frac_latex(value) if form == "canonical" else _render_number(value, form)
    if isinstance(value, Surd):
        if form != "canonical":
            raise ValueError(f"unknown form {form!r} for a Surd (valid: canonical)")
        return ("" if value.coeff == 1 else str(value.coeff)) + f"\\sqrt{{{value.radicand}}}"
    if isinstance(value, Interval):
        nform = {"canonical": "frac", "slash": "slash", "decimal": "decimal"}.get(form)
        if nform is None:
            raise ValueError(f"unknown form {form!r} for an Interval (valid: canonical, slash, decimal)")
        left = "[" if value.lo_closed else "("
        right = "]" if value.hi_closed else ")"
        return (f"{left}{_render_endpoint(value.lo, True, nform)}, "
                f"{_render_endpoint(value.hi, False, nform)}{right}")
    raise TypeError(f"value must be a Fraction, Surd or Interval, got {type(value).__name__}")


_INT = r"-?\d+"
_NUM = r"-?\d+(?:\.\d+)?|-?\\d?frac\{-?\d+\}\{\d+\}|-?\d+/\d+"
_RE_INT = re.compile(rf"^{_INT}$")
_RE_DEC = re.compile(r"^-?\d+\.\d+$")
_RE_SLASH = re.compile(r"^(-?\d+)/(\d+)$")
_RE_FRAC = re.compile(r"^(-?)\\d?frac\{(-?\d+)\}\{(\d+)\}$")
_RE_SURD = re.compile(r"^(\d*)\\sqrt\{(\d+)\}$")
_RE_INTERVAL = re.compile(rf"^([\[(])\s*(-\\infty|{_NUM})\s*,\s*(\\infty|{_NUM})\s*([\])])$")


def _parse_number(text: str) -> Fraction:
    t = text.strip()
    if _RE_INT.match(t) or _RE_DEC.match(t):
        return Fraction(t)
    m = _RE_SLASH.match(t)
    if m:
        return Fraction(int(m.group(1)), int(m.group(2)))
    m = _RE_FRAC.match(t)
    if m:
        q = Fraction(int(m.group(2)), int(m.group(3)))
        return -q if m.group(1) else q
    raise ValueError(f"not a number in the generator's grammar: {text!r}")


def parse_exact(answer: str) -> ExactValue:
    """Read back an answer string in the generator's grammar as an exact value.

    The grammar: integers, decimals, ``p/q``, ``\\frac{p}{q}``/``\\dfrac{p}{q}`` (a minus sign
    before the command or on ``p``), ``m\\sqrt{r}``, and intervals of those with ``\\infty`` ends. Anything else raises
    ValueError naming the answer; this is not a general LaTeX parser (math-verify is).
    """
    if not isinstance(answer, str):
        raise TypeError(f"answer must be a str, got {type(answer).__name__}")
    t = answer.strip()
    m = _RE_SURD.match(t)
    if m:
        coeff = int(m.group(1)) if m.group(1) else 1
        k_m, r = _square_free_split(int(m.group(2)))
        if r == 1:
            return Fraction(coeff * k_m)
        return Surd(coeff * k_m, r)
    m = _RE_INTERVAL.match(t)
    if m:
        lo = None if m.group(2) == "-\\infty" else _parse_number(m.group(2))
        hi = None if m.group(3) == "\\infty" else _parse_number(m.group(3))
        return Interval(lo, hi, m.group(1) == "[", m.group(4) == "]")
    try:
        return _parse_number(t)
    except ValueError:
        raise ValueError(f"answer {answer!r} is not in the generator's grammar (integer, decimal, p/q, "
                         "\\frac{p}{q}, m\\sqrt{r}, or an interval of those)") from None


def _as_value(answer_or_value: str | ExactValue) -> ExactValue:
    return parse_exact(answer_or_value) if isinstance(answer_or_value, str) else answer_or_value


def alternative_forms(answer: str | ExactValue) -> dict[str, str]:
    """Equivalent renderings of one value, keyed by form name (all denote exactly the same value).

    * a number: ``frac``, ``dfrac``, ``slash``, ``decimal`` (when it terminates), ``unreduced``
      (``\\frac{2p}{2q}``), ``negated_numerator`` (``\\frac{-p}{q}`` for a negative value),
      ``int``/``decimal``/``text`` (``\\text{18}``) for an integer;
    * a :class:`Surd`: ``canonical``, ``single_root`` (``\\sqrt{12}`` for ``2\\sqrt{3}``),
      ``cdot`` (``2 \\cdot \\sqrt{3}``), ``power`` (``2 \\cdot 3^{1/2}``);
    * an :class:`Interval`: ``canonical``, ``slash`` and ``decimal`` endpoints (when they
      terminate), ``compact`` (no space after the comma), ``left_right`` (``\\left[ ... \\right)``).

    ``answer`` is a string in :func:`parse_exact`'s grammar or an exact value.
    """
    v = _as_value(answer)
    out: dict[str, str] = {}
    if isinstance(v, Fraction):
        if v.denominator == 1:
            n = v.numerator
            out.update(int=str(n), decimal=f"{n}.0", text=f"\\text{{{n}}}", unreduced=_unreduced(v))
        else:
            out.update(frac=_frac_latex(v), dfrac=_frac_latex(v, "dfrac"), slash=_render_number(v, "slash"),
                       unreduced=_unreduced(v))
            if _terminates(v):
                out["decimal"] = _decimal(v)
            if v < 0:
                out["negated_numerator"] = f"\\frac{{{v.numerator}}}{{{v.denominator}}}"
    elif isinstance(v, Surd):
        out.update(canonical=render_value(v), single_root=f"\\sqrt{{{v.coeff ** 2 * v.radicand}}}",
                   cdot=f"{v.coeff} \\cdot \\sqrt{{{v.radicand}}}", power=f"{v.coeff} \\cdot {v.radicand}^{{1/2}}")
    elif isinstance(v, Interval):
        canonical = render_value(v)
        out.update(canonical=canonical, slash=render_value(v, "slash"), compact=canonical.replace(", ", ","),
                   left_right=f"\\left{canonical[0]}{canonical[1:-1]}\\right{canonical[-1]}")
        if all(e is None or _terminates(e) for e in (v.lo, v.hi)):
            out["decimal"] = render_value(v, "decimal")
    else:
        raise TypeError(f"value must be a Fraction, Surd or Interval, got {type(v).__name__}")
    return out


def _unreduced(q: Fraction) -> str:
    sign = "-" if q < 0 else ""
    return f"{sign}\\frac{{{2 * abs(q.numerator)}}}{{{2 * q.denominator}}}"


def near_miss_forms(answer: str | ExactValue) -> dict[str, str]:
    """Renderings of values that differ from ``answer`` (each should be judged wrong).

    * a number: ``plus_one``; ``truncated`` (two decimals, cut off) when that differs from the
      value by more than math-verify's 6-decimal rounding;
    * a :class:`Surd`: ``plus_one`` (coefficient + 1), ``squared`` (the radicand times coeff squared,
      without the root);
    * an :class:`Interval`: ``flip_lo`` / ``flip_hi`` (a finite end toggled open/closed),
      ``shift`` (both finite ends + 1).
    """
    v = _as_value(answer)
    out: dict[str, str] = {}
    if isinstance(v, Fraction):
        out["plus_one"] = render_value(v + 1)
        cut = Fraction(int(v * 100), 100)  # truncation toward zero
        if abs(cut - v) > Fraction(1, 10**5):
            out["truncated"] = _render_number(cut, "decimal")
    elif isinstance(v, Surd):
        out["plus_one"] = render_value(Surd(v.coeff + 1, v.radicand))
        out["squared"] = str(v.coeff ** 2 * v.radicand)
    elif isinstance(v, Interval):
        if v.lo is not None:
            out["flip_lo"] = render_value(Interval(v.lo, v.hi, not v.lo_closed, v.hi_closed))
        if v.hi is not None:
            out["flip_hi"] = render_value(Interval(v.lo, v.hi, v.lo_closed, not v.hi_closed))
        lo = None if v.lo is None else v.lo + 1
        hi = None if v.hi is None else v.hi + 1
        out["shift"] = render_value(Interval(lo, hi, v.lo_closed, v.hi_closed))
    else:
        raise TypeError(f"value must be a Fraction, Surd or Interval, got {type(v).__name__}")
    return out


# --------------------------------------------------------------------------------------------
# Generator
# --------------------------------------------------------------------------------------------


def _signed(term: int, first: bool = False) -> str:
    if first:
        return str(term)
    return f"+ {term}" if term >= 0 else f"- {-term}"


def _linear(a: int, b: int) -> str:
    """``ax + b`` as LaTeX (``a != 0``)."""
    lead = "x" if a == 1 else "-x" if a == -1 else f"{a}x"
    return lead if b == 0 else f"{lead} {_signed(b)}"


def _gen_integer(rng: random.Random) -> tuple[str, ExactValue, str]:
    a, b = rng.randint(2, 20), rng.randint(2, 20)
    c, d = rng.randint(1, 60), rng.randint(1, 60)
    value = Fraction(a * b + c - d)
    return f"Compute $ {a} \\times {b} + {c} - {d} $.", value, render_value(value, "int")


def _gen_fraction(rng: random.Random) -> tuple[str, ExactValue, str]:
    while True:
        b, d = rng.randint(2, 12), rng.randint(2, 12)
        a, c = rng.randint(1, b - 1), rng.randint(1, d - 1)
        op = rng.choice("+-")
        value = Fraction(a, b) + Fraction(c, d) if op == "+" else Fraction(a, b) - Fraction(c, d)
        if value.denominator != 1:
            break
    problem = (f"Compute $ \\frac{{{a}}}{{{b}}} {op} \\frac{{{c}}}{{{d}}} $. "
               "Give your answer as a fraction in lowest terms.")
    return problem, value, render_value(value, "frac")


def _gen_slash(rng: random.Random) -> tuple[str, ExactValue, str]:
    while True:
        a = rng.choice([k for k in range(-9, 10) if k not in (-1, 0, 1)])
        b, c = rng.randint(-20, 20), rng.randint(-20, 20)
        value = Fraction(c - b, a)
        if value.denominator != 1:
            break
    return f"Solve for $x$: $ {_linear(a, b)} = {c} $.", value, render_value(value, "slash")


def _gen_decimal(rng: random.Random) -> tuple[str, ExactValue, str]:
    while True:
        p = rng.choice([5, 10, 12.5, 15, 20, 25, 30, 35, 40, 45, 50, 60, 62.5, 75, 80, 87.5, 90])
        n = rng.randint(2, 200)
        value = Fraction(p) * n / 100
        if value.denominator != 1:
            break
    pct = _decimal(Fraction(p))
    return f"What is ${pct}\\%$ of ${n}$? Give your answer as a decimal.", value, render_value(value, "decimal")


_INEQ = {"<": "<", "<=": "\\le", ">": ">", ">=": "\\ge"}


def _gen_interval(rng: random.Random) -> tuple[str, ExactValue, str]:
    if rng.random() < 0.5:
        # half-line: a x + b (op) c
        a = rng.choice([k for k in range(-6, 7) if k != 0])
        b, c = rng.randint(-15, 15), rng.randint(-15, 15)
        op = rng.choice(list(_INEQ))
        bound = Fraction(c - b, a)
        upper = op in ("<", "<=")  # x (op) bound before dividing by a
        closed = op in ("<=", ">=")
        if a < 0:
            upper = not upper
        value = Interval(None, bound, False, closed) if upper else Interval(bound, None, closed, False)
        problem = (f"Find all real $x$ such that $ {_linear(a, b)} {_INEQ[op]} {c} $. "
                   "Express your answer in interval notation.")
    else:
        # bounded: l (op1) a x + b (op2) h with a > 0
        a = rng.randint(1, 5)
        b = rng.randint(-10, 10)
        lo_v = rng.randint(-20, 10)
        hi_v = lo_v + rng.randint(1, 20)
        op1, op2 = rng.choice(["<", "<="]), rng.choice(["<", "<="])
        value = Interval(Fraction(lo_v - b, a), Fraction(hi_v - b, a), op1 == "<=", op2 == "<=")
        problem = (f"Find all real $x$ such that $ {lo_v} {_INEQ[op1]} {_linear(a, b)} {_INEQ[op2]} {hi_v} $. "
                   "Express your answer in interval notation.")
    return problem, value, render_value(value)


def _gen_sqrt(rng: random.Random) -> tuple[str, ExactValue, str]:
    while True:
        if rng.random() < 0.5:
            k = rng.randint(2, 300)
            problem = f"Find the positive solution of $ x^2 = {k} $. Express your answer in simplest radical form."
        else:
            p, q = rng.randint(1, 12), rng.randint(1, 12)
            k = p * p + q * q
            problem = (f"A right triangle has legs of length ${p}$ and ${q}$. What is the length of its "
                       "hypotenuse? Express your answer in simplest radical form.")
        m, r = _square_free_split(k)
        if r > 1:
            break
    value = Surd(m, r)
    return problem, value, render_value(value)


_GENERATORS: dict[str, Callable[[random.Random], tuple[str, ExactValue, str]]] = {
    "integer": _gen_integer,
    "fraction": _gen_fraction,
    "slash": _gen_slash,
    "decimal": _gen_decimal,
    "interval": _gen_interval,
    "sqrt": _gen_sqrt,
}
_MAX_REPEATS = 1000


def generate_math(n: int, *, seed: int = 0, kinds: Sequence[str] = KINDS) -> list[dict]:
    """Generate ``n`` distinct problems with exact reference answers, deterministically from ``seed``.

    Record ``i`` has kind ``kinds[i % len(kinds)]`` (see the module docstring for the kinds and
    their answer forms); ``source`` is ``"synthetic/<kind>"``. Everything comes from one
    ``random.Random(seed)``, so the output is a pure function of the arguments and
    ``generate_math(k, seed=s)`` is a prefix of ``generate_math(m, seed=s)`` for ``k <= m``.
    Use :func:`parse_exact` on an answer to get its exact value back.

    Raises:
      ValueError: ``n < 0``, an empty ``kinds``, or an unknown kind (the message lists the valid ones).
      RuntimeError: no new distinct problem of a kind after many draws (its space is exhausted).
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"n must be an int >= 0, got {n!r}")
    kinds = tuple(kinds)
    if not kinds:
        raise ValueError("kinds is empty")
    unknown = [k for k in kinds if k not in _GENERATORS]
    if unknown:
        raise ValueError(f"unknown kind(s) {unknown} (valid: {', '.join(KINDS)})")
    rng = random.Random(seed)
    seen: set[str] = set()
    out: list[dict] = []
    for i in range(n):
        kind = kinds[i % len(kinds)]
        for _ in range(_MAX_REPEATS):
            problem, _value, answer = _GENERATORS[kind](rng)
            if problem not in seen:
                break
        else:
            raise RuntimeError(f"no new distinct {kind!r} problem after {_MAX_REPEATS} draws "
                               f"({len(out)} of {n} generated)")
        seen.add(problem)
        out.append({"problem": problem, "answer": answer, "source": f"synthetic/{kind}"})
    return out


# --------------------------------------------------------------------------------------------
# Loaders
# --------------------------------------------------------------------------------------------


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


@dataclass(frozen=True)
class MathDatasetSpec:
    """Where a math data set lives and how its records map to ``{"problem", "answer", "source"}``.

    ``problem_field`` and ``answer_field`` are dotted paths into a record: ``"problem"``,
    ``"reward_model.ground_truth"``, ``"1.ground_truth.value"`` (a digit indexes a list, or a
    dict key ``"1"``). ``dedupe`` keeps only the first record of each problem text.
    ``record_post``, when set, first maps the whole raw record to the record the two fields are read
    from (the multiple-choice sets build ``{"problem", "answer"}`` from several columns: :func:`gpqa_record`,
    :func:`mmlu_pro_record`); a ValueError it raises is reported with the data set, file and row.
    """

    hub_id: str
    config: str | None
    split: str
    problem_field: str
    answer_field: str
    answer_post: Callable[[Any], str] = plain_answer
    problem_post: Callable[[Any], str] = plain_problem
    dedupe: bool = False
    aliases: tuple[str, ...] = field(default=())
    note: str = ""
    record_post: Callable[[Any], Any] | None = None


#: The math data sets of DGRO (Table 3, training sets §4.2) and DCPO (Tables 2-3, Appendix B).
MATH_DATASETS: dict[str, MathDatasetSpec] = {
    "math500": MathDatasetSpec("HuggingFaceH4/MATH-500", None, "test", "problem", "answer",
                               aliases=("math-500", "math_500", "math")),
    "aime2024": MathDatasetSpec("HuggingFaceH4/aime_2024", None, "train", "problem", "answer",
                                aliases=("aime24", "aime_2024", "aime-2024")),
    "aime2025": MathDatasetSpec("MathArena/aime_2025", None, "train", "problem", "answer",
                                aliases=("aime25", "aime_2025", "aime-2025"),
                                note="DCPO cites MathArena (Balunovic et al., 2025)"),
    "hmmt2025": MathDatasetSpec("MathArena/hmmt_feb_2025", None, "train", "problem", "answer",
                                aliases=("hmmt25", "hmmt_2025", "hmmt-2025"), note="DCPO Tables 2-3 (Qwen3-4B)"),
    "gpqa_diamond": MathDatasetSpec("Idavidrein/gpqa", "gpqa_diamond", "train", "problem", "answer",
                                    record_post=gpqa_record, aliases=("gpqa", "gpqa-diamond", "gpqadiamond"),
                                    note="DCPO Table 2 (Qwen3-4B), 198 questions; gated on the Hub (accept its terms "
                                         "and log in, or pass local_path= to gpqa_diamond.csv); the raw data lists "
                                         "the correct answer first, gpqa_record shuffles the options by "
                                         "GPQA_SHUFFLE_SEED; gold = a letter A-D"),
    "mmlu_pro": MathDatasetSpec("TIGER-Lab/MMLU-Pro", None, "test", "problem", "answer",
                                record_post=mmlu_pro_record, aliases=("mmlupro", "mmlu-pro"),
                                note="DCPO Table 2 (Qwen3-4B), 12,032 questions, up to ten options; gold = a "
                                     "letter A-J"),
    "amc2023": MathDatasetSpec("math-ai/amc23", None, "test", "question", "answer",
                               aliases=("amc23", "amc_2023", "amc-2023", "amc")),
    "minerva": MathDatasetSpec("math-ai/minervamath", None, "test", "question", "answer",
                               aliases=("minervamath", "minerva_math", "minerva-math")),
    "olympiadbench": MathDatasetSpec("math-ai/olympiadbench", None, "test", "question", "final_answer",
                                     answer_post=olympiad_answer,
                                     aliases=("olympiad", "olympiad_bench", "olympiad-bench")),
    "gsm8k": MathDatasetSpec("openai/gsm8k", "main", "test", "question", "answer", answer_post=gsm8k_answer,
                             aliases=("gsm-8k", "gsm_8k")),
    "dapo17k": MathDatasetSpec("BytedTsinghua-SIA/DAPO-Math-17k", None, "train", "prompt",
                               "reward_model.ground_truth", problem_post=dapo_problem, dedupe=True,
                               aliases=("dapo", "dapo-17k", "dapo_17k", "dapo-math-17k", "dapo_math_17k"),
                               note="the Hub copy repeats each problem; dedupe keeps the first"),
    "deepscaler": MathDatasetSpec("agentica-org/DeepScaleR-Preview-Dataset", None, "train", "problem", "answer",
                                  aliases=("deepscaler-preview", "deepscaler_preview")),
    "orz": MathDatasetSpec("Open-Reasoner-Zero/orz_math_72k_collection_extended", None, "train", "0.value",
                           "1.ground_truth.value",
                           aliases=("open-reasoner-zero", "orz_math", "orz-math"),
                           note="records are [human turn, assistant turn with ground_truth]; the 57k json of the "
                                "ORZ repository has the same layout and loads through local_path"),
}


def _norm_name(name: str) -> str:
    return re.sub(r"[\s_\-]", "", name.lower())


def resolve_dataset(name: str) -> tuple[str, MathDatasetSpec]:
    """``(canonical name, spec)`` for a name or alias of :data:`MATH_DATASETS` (case, ``-``, ``_`` ignored)."""
    if not isinstance(name, str):
        raise TypeError(f"name must be a str, got {type(name).__name__}")
    key = _norm_name(name)
    for canonical, spec in MATH_DATASETS.items():
        if key == _norm_name(canonical) or key in {_norm_name(a) for a in spec.aliases}:
            return canonical, spec
    raise ValueError(f"unknown math data set {name!r} (valid: {', '.join(MATH_DATASETS)})")


_MISSING = object()


def _get_path(record: Any, path: str) -> Any:
    cur = record
    for seg in path.split("."):
        if isinstance(cur, Mapping) and seg in cur:
            cur = cur[seg]
        elif isinstance(cur, (list, tuple)) and seg.isdigit() and int(seg) < len(cur):
            cur = cur[int(seg)]
        else:
            return _MISSING
    return cur


def _fields_of(record: Any) -> str:
    if isinstance(record, Mapping):
        return f"fields {sorted(map(str, record))}"
    if isinstance(record, (list, tuple)):
        return f"a list of {len(record)} items"
    return f"a {type(record).__name__}"


def _normalise(record: Any, name: str, spec: MathDatasetSpec, where: str) -> dict:
    if spec.record_post is not None:
        try:
            record = spec.record_post(record)
        except ValueError as exc:
            raise ValueError(f"{name}: {where}: bad record: {exc}") from None
    out = {}
    for key, path, post in (("problem", spec.problem_field, spec.problem_post),
                            ("answer", spec.answer_field, spec.answer_post)):
        raw = _get_path(record, path)
        if raw is _MISSING:
            raise ValueError(f"{name}: {where}: missing {key} field {path!r} (the record has {_fields_of(record)})")
        try:
            value = post(raw)
        except ValueError as exc:
            raise ValueError(f"{name}: {where}: bad {key} field {path!r}: {exc}") from None
        if not value:
            raise ValueError(f"{name}: {where}: empty {key} field {path!r}")
        out[key] = value
    out["source"] = name
    return out


_SUFFIXES = (".jsonl", ".json", ".parquet", ".csv")
_SPLIT_WORDS = {"train", "test", "validation", "valid", "val", "dev", "eval"}


def _read_json_lines(path: Path, lines: Iterable[str]) -> list:
    out = []
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}:{lineno}: invalid JSON: {exc}") from exc
    return out


def _read_file(path: Path, split: str) -> list:
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        import pyarrow.parquet as pq  # installed with datasets

        return pq.read_table(path).to_pylist()
    text = path.read_text(encoding="utf-8")
    if suffix == ".csv":  # GPQA ships as csv (gpqa_diamond.csv); every value is read as a string
        import csv
        import io

        return list(csv.DictReader(io.StringIO(text, newline="")))
    if suffix == ".jsonl":
        return _read_json_lines(path, text.splitlines())
    if suffix == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            if "Extra data" not in str(exc):
                raise ValueError(f"{path}: invalid JSON: {exc}") from exc
            # ``Dataset.to_json`` writes JSON lines even under a .json name.
            return _read_json_lines(path, text.splitlines())
        if isinstance(data, list):
            return data
        if isinstance(data, dict):
            if isinstance(data.get(split), list):
                return data[split]
            return [data]  # one object: the one line of a JSON-lines file
        raise ValueError(f"{path}: expected a JSON array of records, an object with a {split!r} array, or JSON "
                         f"lines; got a top-level {type(data).__name__}")
    raise ValueError(f"{path}: unsupported file type {suffix!r} (use {', '.join(_SUFFIXES)})")


def _local_files(path: Path, split: str, name: str) -> list[Path]:
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise FileNotFoundError(f"{name}: local_path {str(path)!r} does not exist")
    files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in _SUFFIXES)
    if not files:
        raise FileNotFoundError(f"{name}: no {', '.join(_SUFFIXES)} files under {path}")
    tokens = {p: set(re.split(r"[^a-z0-9]+", p.stem.lower())) for p in files}
    with_split = [p for p in files if split.lower() in tokens[p]]
    if with_split:
        return with_split
    if any(tokens[p] & _SPLIT_WORDS for p in files):
        raise FileNotFoundError(f"{name}: no file for split {split!r} under {path} "
                                f"(files: {[p.name for p in files][:20]})")
    return files


def load_math(name: str, *, split: str | None = None, limit: int | None = None,
              local_path: str | Path | None = None) -> list[dict]:
    """Load a math data set as ``{"problem", "answer", "source"}`` records (``source`` = canonical name).

    Args:
      name: a key or alias of :data:`MATH_DATASETS` (``"math500"``, ``"aime24"``, ``"gsm8k"``, ...).
      split: overrides the spec's split (Hub split, or the file-name token picked in a directory).
      limit: keep the first ``limit`` records (after ``dedupe``).
      local_path: a ``.jsonl``, ``.json`` (array, or JSON lines), ``.parquet`` or ``.csv`` file, or a directory
        of them, holding records with the Hub's field names. It takes precedence over the Hub. In a
        directory, files whose name has the split as a token (``test.jsonl``,
        ``test-00000-of-00001.parquet``) are used; when no file names a split, all files are used;
        when files name other splits only, FileNotFoundError.

    Raises:
      ValueError: unknown ``name`` (lists the valid ones), a bad ``limit``, or a record whose
        problem/answer field is missing or empty (the message names the data set, the file or Hub
        id, the row and the field, and lists the fields the record has).
      FileNotFoundError: ``local_path`` is missing or holds no usable file.
      RuntimeError: the Hub cannot be reached or the data set is not cached (names the data set and
        the Hub id, and says to pass ``local_path``).
    """
    canonical, spec = resolve_dataset(name)
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise ValueError(f"limit must be an int >= 0 or None, got {limit!r}")
    split = spec.split if split is None else split
    if local_path is not None:
        rows: Iterable[tuple[str, Any]] = (
            (f"{f}: row {i}", r) for f in _local_files(Path(local_path), split, canonical)
            for i, r in enumerate(_read_file(f, split)))
    else:
        rows = _hub_rows(canonical, spec, split)
    out: list[dict] = []
    seen: set[str] = set()
    for where, record in rows:
        if limit is not None and len(out) >= limit:
            break
        rec = _normalise(record, canonical, spec, where)
        if spec.dedupe:
            if rec["problem"] in seen:
                continue
            seen.add(rec["problem"])
        out.append(rec)
    return out


def _hub_rows(name: str, spec: MathDatasetSpec, split: str) -> Iterable[tuple[str, Any]]:
    where = f"{spec.hub_id}" + (f" (config {spec.config!r})" if spec.config else "") + f", split {split!r}"
    try:
        import datasets  # heavy import, only needed here
    except ImportError as exc:
        raise RuntimeError(f"{name}: loading {spec.hub_id} needs the 'datasets' package; "
                           "or pass local_path= to a local copy") from exc
    try:
        ds = datasets.load_dataset(spec.hub_id, spec.config, split=split)
    except Exception as exc:  # network, offline mode, missing config: all mean "use a local copy"
        raise RuntimeError(
            f"could not load math data set {name!r} from the Hugging Face Hub ({where}): "
            f"{type(exc).__name__}: {exc}. Offline? Download it elsewhere and pass "
            f"local_path= (a .jsonl/.json/.parquet/.csv file or a folder of them, with the Hub's field names).") from exc
    return ((f"{where}: row {i}", row) for i, row in enumerate(ds))


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
# Both end in "<think>" so the reward's format check counts the prompt's opening tag (DESIGN §4).
PROMPT_TEMPLATES: dict[str, str] = {
    "plain": "{problem}\n" + _INSTRUCTION + "\n<think>",
    "qwen": ("<|im_start|>system\n" + _QWEN_SYSTEM + "<|im_end|>\n<|im_start|>user\n{problem}\n" + _INSTRUCTION
             + "<|im_end|>\n<|im_start|>assistant\n<think>"),
}


def format_prompt(record: Mapping[str, Any], *, template: str = "plain") -> str:
    """Prompt text for one math record; both templates end with ``<think>``.

    ``plain``: ``"{problem}\\nPlease reason step by step, and put your final answer within
    \\boxed{}.\\n<think>"``. ``qwen``: a system message describing the think/boxed format, the
    problem and the same instruction as the user turn, then ``<|im_start|>assistant\\n<think>``
    (mirrors :func:`dgro_lib.data.kk.format_prompt`).
    """
    if template not in PROMPT_TEMPLATES:
        raise ValueError(f"unknown prompt template {template!r} (valid: {', '.join(PROMPT_TEMPLATES)})")
    if "problem" not in record:
        raise ValueError(f"record has no 'problem' field (fields: {sorted(map(str, record))})")
    return PROMPT_TEMPLATES[template].format(problem=record["problem"])
