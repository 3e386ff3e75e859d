"""Arithmetic problems with worked scratchpad traces: the math miniature's kinds.

The embedded math model (the ``math_mini`` presets of :mod:`dgro_lib.models.embedded`) learns arithmetic from a
trace that spells out one small step per clause, the way the K&K miniature learns the logic from its trace. Every
step needs one memorable fact (a one-digit sum or product, plus a carry) and a look-up of a digit in the problem, so
a ~1M-parameter model can learn each step, and a wrong fact or a misread digit makes the answer wrong: the model can
be right or wrong on a problem, and sampling explores.

==========  ==============================================  =============================================================
kind        problem                                         worked trace (before ``</think> \\boxed{...}``)
==========  ==============================================  =============================================================
add         ``Compute $ 478 + 356 $.``                      ``8 + 6 = 14 , 7 + 5 + 1 = 13 , 4 + 3 + 1 = 8 , so 834``
mul         ``Compute $ 347 \\times 6 $.``                  ``7 \\times 6 = 42 , 4 \\times 6 + 4 = 28 , 3 \\times 6 + 2 =
                                                            20 , so 2082``
muladd      ``Compute $ 6 \\times 7 + 45 $.``               ``6 \\times 7 = 42 , 42 + 45 : 2 + 5 = 7 , 4 + 4 = 8 , so 87``
linear      ``Solve for $x$: $ 7x + 12 = 89 $.``            ``7x = 89 - 12 = 77 , x = 77 / 7 = 11``
==========  ==============================================  =============================================================

Column arithmetic runs from the units digit left; each clause's result is written whole, and ``so`` is followed by
the answer: the last clause's result, then the units digits of the earlier clauses, last to first. ``linear``
subtracts and divides in one step each (no column trace): its two facts are the hard part of the mix.

Contamination: the warm-up and the experiments draw from disjoint parts of each kind's problem space. A problem
belongs to the *reserved* part when the first byte of the sha256 of its text is below :data:`RESERVED_BYTE` (about
20 % of every kind); :func:`~dgro_lib.data.math.generate_math` yields only reserved problems of these kinds (RL
training and held-out sets), :func:`worked_examples` only the others (the warm-up), so no held-out problem was
ever a warm-up example.
"""

from __future__ import annotations

import hashlib
import random
from fractions import Fraction
from typing import Callable, Sequence

__all__ = ["WORKED_KINDS", "RESERVED_BYTE", "is_reserved", "worked_examples", "draw_worked", "distinct_draws"]

WORKED_KINDS: tuple[str, ...] = ("add", "mul", "muladd", "linear")

RESERVED_BYTE = 51
"""sha256(problem)[0] < 51 (51/256 = 19.9 %): the part of the space kept for RL training and evaluation."""

_MAX_REPEATS = 1000


def is_reserved(problem: str) -> bool:
    """Whether ``problem`` is in the part of the space the warm-up never sees (module docstring)."""
    return hashlib.sha256(problem.encode()).digest()[0] < RESERVED_BYTE


def _digits(n: int) -> list[int]:
    """Digits of ``n >= 0``, units first."""
    return [int(c) for c in reversed(str(n))]


def _column_add(a: int, b: int) -> tuple[list[str], int]:
    """Clauses of ``a + b`` column by column (``8 + 6 = 14``, ``7 + 5 + 1 = 13``) and the sum."""
    da, db = _digits(a), _digits(b)
    clauses, carry, units = [], 0, []
    for i in range(max(len(da), len(db))):
        terms = [d[i] for d in (da, db) if i < len(d)] + ([carry] if carry else [])
        s = sum(terms)
        clauses.append(" + ".join(map(str, terms)) + f" = {s}")
        carry, unit = divmod(s, 10)
        units.append(unit)
    last = units[-1] + 10 * carry
    answer = int(str(last) + "".join(str(u) for u in reversed(units[:-1])))
    assert answer == a + b
    return clauses, answer


def _column_mul(a: int, d: int) -> tuple[list[str], int]:
    """Clauses of ``a x d`` (``d`` one digit) digit by digit with the carry, and the product."""
    clauses, carry, units = [], 0, []
    for x in _digits(a):
        p = x * d + carry
        clauses.append(f"{x} \\times {d}" + (f" + {carry}" if carry else "") + f" = {p}")
        carry, unit = divmod(p, 10)
        units.append(unit)
    last = units[-1] + 10 * carry
    answer = int(str(last) + "".join(str(u) for u in reversed(units[:-1])))
    assert answer == a * d
    return clauses, answer


def _gen_add(rng: random.Random) -> tuple[str, int, str]:
    a, b = rng.randint(10, 999), rng.randint(10, 999)
    clauses, s = _column_add(a, b)
    return f"Compute $ {a} + {b} $.", s, " , ".join(clauses) + f" , so {s}"


def _gen_mul(rng: random.Random) -> tuple[str, int, str]:
    a, d = rng.randint(12, 999), rng.randint(2, 9)
    clauses, p = _column_mul(a, d)
    return f"Compute $ {a} \\times {d} $.", p, " , ".join(clauses) + f" , so {p}"


def _gen_muladd(rng: random.Random) -> tuple[str, int, str]:
    a, b, c = rng.randint(2, 9), rng.randint(2, 9), rng.randint(10, 999)
    p = a * b
    clauses, s = _column_add(p, c)
    trace = f"{a} \\times {b} = {p} , {p} + {c} : " + " , ".join(clauses) + f" , so {s}"
    return f"Compute $ {a} \\times {b} + {c} $.", s, trace


def _gen_linear(rng: random.Random) -> tuple[str, int, str]:
    a, x, b = rng.randint(2, 9), rng.randint(2, 30), rng.randint(10, 99)
    c = a * x + b
    trace = f"{a}x = {c} - {b} = {a * x} , x = {a * x} / {a} = {x}"
    return f"Solve for $x$: $ {a}x + {b} = {c} $.", x, trace


_GENERATORS: dict[str, Callable[[random.Random], tuple[str, int, str]]] = {
    "add": _gen_add, "mul": _gen_mul, "muladd": _gen_muladd, "linear": _gen_linear,
}


def draw_worked(kind: str, rng: random.Random, *, reserved: bool) -> tuple[str, Fraction, str, str]:
    """One problem of ``kind`` from its reserved (``True``) or warm-up (``False``) part:
    ``(problem, exact value, answer string, worked trace)``."""
    gen = _GENERATORS[kind]
    for _ in range(_MAX_REPEATS):
        problem, value, trace = gen(rng)
        if is_reserved(problem) == reserved:
            return problem, Fraction(value), str(value), trace
    raise RuntimeError(f"no {'reserved' if reserved else 'warm-up'} {kind!r} problem after {_MAX_REPEATS} draws")


def distinct_draws(n: int, seed: int, kinds: Sequence[str], draw: Callable[[str, random.Random], tuple], *,
                   known: Sequence[str], unknown_message: str) -> list[tuple[str, tuple]]:
    """``n`` draws ``draw(kind, rng)`` whose first element (the problem text) is new, draw ``i`` of kind
    ``kinds[i % len(kinds)]``, all from one ``random.Random(seed)``: ``[(kind, draw), ...]``. The generators of
    :func:`~dgro_lib.data.math.generate_math` and :func:`worked_examples` share it.

    Raises ValueError (``n < 0``, empty ``kinds``, a kind not in ``known``: ``unknown_message`` followed by the
    valid ones) and RuntimeError (no new problem of a kind after many draws: its space is exhausted)."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"n must be an int >= 0, got {n!r}")
    kinds = tuple(kinds)
    if not kinds:
        raise ValueError("kinds is empty")
    unknown = [k for k in kinds if k not in known]
    if unknown:
        raise ValueError(f"{unknown_message.format(unknown)} (valid: {', '.join(known)})")
    rng = random.Random(seed)
    seen: set[str] = set()
    out: list[tuple[str, tuple]] = []
    for i in range(n):
        kind = kinds[i % len(kinds)]
        for _ in range(_MAX_REPEATS):
            drawn = draw(kind, rng)
            if drawn[0] not in seen:
                break
        else:
            raise RuntimeError(f"no new distinct {kind!r} problem after {_MAX_REPEATS} draws ({len(out)} of {n} "
                               "generated)")
        seen.add(drawn[0])
        out.append((kind, drawn))
    return out


def worked_examples(n: int, *, seed: int = 0, kinds: Sequence[str] = WORKED_KINDS) -> list[tuple[dict, str]]:
    """``n`` distinct warm-up problems (never reserved ones) with their worked traces: ``(record, trace)`` pairs,
    record ``i`` of kind ``kinds[i % len(kinds)]``, records in the format of :mod:`dgro_lib.data.math` (``source``
    ``synthetic/<kind>``). Deterministic from ``seed``; a prefix of a longer call with the same seed.

    Raises:
      ValueError: ``n < 0``, an empty ``kinds`` or a kind that has no worked trace (the message lists the valid ones).
      RuntimeError: a kind's warm-up space is exhausted.
    """
    draws = distinct_draws(n, seed, kinds, lambda kind, rng: draw_worked(kind, rng, reserved=False),
                           known=WORKED_KINDS, unknown_message="kind(s) {} have no worked trace")
    return [({"problem": problem, "answer": answer, "source": f"synthetic/{kind}"}, trace)
            for kind, (problem, _value, answer, trace) in draws]
