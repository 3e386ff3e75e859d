"""Exact values of math answers: parsing, rendering, and equivalent or near-miss forms.

A value is a :class:`~fractions.Fraction`, a :class:`Surd` (``coeff * sqrt(radicand)``, square-free
radicand) or an :class:`Interval`. :func:`parse_exact` reads an answer string of the generator's grammar
(:mod:`.generate`) back into a value and :func:`render_value` writes one. :func:`alternative_forms`
renders a value in other, equivalent forms (``\\frac{1}{2}``, ``\\dfrac{1}{2}``, ``1/2``, ``0.5``,
``\\frac{2}{4}``, ...), and :func:`near_miss_forms` in forms that denote a different value (off by one, an
interval with a flipped end, a truncated decimal ``0.33`` for ``\\frac{1}{3}``), so tests can check what
math-verify accepts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Union

__all__ = ["Surd", "Interval", "ExactValue", "parse_exact", "render_value", "alternative_forms", "near_miss_forms"]


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
#: Largest radicand parse_exact factors (trial division up to 10**5, milliseconds; the generator uses at most 300).
_MAX_RADICAND = 10**10
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
    m = _RE_SLASH.match(t) or _RE_FRAC.match(t)
    if m:
        *sign, p, q = m.groups()
        if int(q) == 0:  # Fraction(p, 0) would raise ZeroDivisionError, outside parse_exact's contract
            raise ValueError(f"zero denominator: {text!r}")
        v = Fraction(int(p), int(q))
        return -v if sign and sign[0] else v
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
        k = int(m.group(2))
        if not 1 <= k <= _MAX_RADICAND or coeff < 1:
            # Trial division is O(sqrt(k)): an unbounded radicand would hang (a 20-digit prime takes hours).
            raise ValueError(f"answer {answer!r}: a surd needs a coefficient >= 1 and a radicand in "
                             f"[1, {_MAX_RADICAND}]")
        k_m, r = _square_free_split(k)
        if r == 1:
            return Fraction(coeff * k_m)
        return Surd(coeff * k_m, r)
    m = _RE_INTERVAL.match(t)
    if m:
        try:
            lo = None if m.group(2) == "-\\infty" else _parse_number(m.group(2))
            hi = None if m.group(3) == "\\infty" else _parse_number(m.group(3))
        except ValueError as exc:
            raise ValueError(f"answer {answer!r}: {exc}") from None
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
