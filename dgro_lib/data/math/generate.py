"""Offline math problems with exact answers, one kind per answer form.

The phrasing of each problem is derived from an exactly computed answer (``fractions.Fraction``; radicals as
``coeff * sqrt(radicand)`` with a square-free radicand, :mod:`.values`). The answers come in several forms
so that math-verify's equivalence is exercised, one per kind (:data:`KINDS`):

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
"""

from __future__ import annotations

import random
from fractions import Fraction
from typing import Callable, Sequence

from dgro_lib.data.math.values import ExactValue, Interval, Surd, _decimal, _square_free_split, render_value
from dgro_lib.data.math.worked import WORKED_KINDS, distinct_draws, draw_worked

__all__ = ["KINDS", "ALL_KINDS", "generate_math"]

KINDS: tuple[str, ...] = ("integer", "fraction", "slash", "decimal", "interval", "sqrt")
"""The default kinds: one per answer form."""
ALL_KINDS: tuple[str, ...] = KINDS + WORKED_KINDS
"""Also the math miniature's arithmetic kinds (:mod:`.worked`), whose problems come from the part of their space
the miniature's warm-up never sees."""


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
    **{kind: (lambda rng, kind=kind: draw_worked(kind, rng, reserved=True)[:3]) for kind in WORKED_KINDS},
}


def generate_math(n: int, *, seed: int = 0, kinds: Sequence[str] = KINDS) -> list[dict]:
    """Generate ``n`` distinct problems with exact reference answers, deterministically from ``seed``.

    Record ``i`` has kind ``kinds[i % len(kinds)]`` (see the module docstring for the kinds and
    their answer forms, and :mod:`.worked` for the miniature's ``add``, ``mul``, ``muladd`` and ``linear``,
    whose integer answers are written plainly); ``source`` is ``"synthetic/<kind>"``. Everything comes from one
    ``random.Random(seed)``, so the output is a pure function of the arguments and
    ``generate_math(k, seed=s)`` is a prefix of ``generate_math(m, seed=s)`` for ``k <= m``.
    Use :func:`parse_exact` on an answer to get its exact value back.

    Raises:
      ValueError: ``n < 0``, an empty ``kinds``, or an unknown kind (the message lists the valid ones).
      RuntimeError: no new distinct problem of a kind after many draws (its space is exhausted).
    """
    draws = distinct_draws(n, seed, kinds, lambda kind, rng: _GENERATORS[kind](rng), known=ALL_KINDS,
                           unknown_message="unknown kind(s) {}")
    return [{"problem": problem, "answer": answer, "source": f"synthetic/{kind}"}
            for kind, (problem, _value, answer) in draws]

