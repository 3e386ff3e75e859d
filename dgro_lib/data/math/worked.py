"""Arithmetic problems with worked scratchpad traces: the math miniature's kinds.

The embedded math model (the ``math_mini`` presets of :mod:`dgro_lib.miniature.build`) learns arithmetic from a
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

*Carry slips* (``slip_rate`` of :func:`worked_examples`, the ``math_slip`` base): each carry the trace would add to
the next clause is left out with probability ``slip_rate``, independently (``7 + 5 = 12`` where ``7 + 5 + 1 = 13``
is right; ``4 \\times 6 = 24`` for ``4 \\times 6 + 4 = 28``). The rest of the trace follows the slipped clause, so the
trace stays self-consistent and its answer (the last word, which the warm-up boxes) is wrong. A base warmed up on
such traces writes the carry with probability about ``1 - slip_rate`` wherever one is due: greedy decoding keeps the
carry (for ``slip_rate < 0.5``), sampling drops it, and an outcome reward can teach the model to stop dropping it.
This is the math counterpart of the K&K traces' clause slips (:mod:`dgro_lib.data.kk.trace`). The slip decisions come
from their own random stream, so the problems (and, at ``slip_rate = 0``, the traces) are those of the slip-free
warm-up.

Contamination: the warm-up and the experiments draw from disjoint parts of each kind's problem space. A problem
belongs to the *reserved* part when the first byte of the sha256 of its text is below :data:`RESERVED_BYTE` (about
20 % of every kind); :func:`~dgro_lib.data.math.generate_math` yields only reserved problems of these kinds (RL
training and held-out sets), :func:`worked_examples` only the others (the warm-up), so no held-out problem was
ever a warm-up example.
"""

from __future__ import annotations

import hashlib
import random
import re
from fractions import Fraction
from typing import Callable, Optional, Sequence

__all__ = ["WORKED_KINDS", "RESERVED_BYTE", "is_reserved", "worked_examples", "draw_worked", "distinct_draws",
           "trace_answer", "carry_decisions"]

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


Drop = Optional[Callable[[], bool]]
"""Asked once per carry that is due: ``True`` leaves that carry out of the next clause (a carry slip)."""


def _column_add(a: int, b: int, drop: Drop = None) -> tuple[list[str], int]:
    """Clauses of ``a + b`` column by column (``8 + 6 = 14``, ``7 + 5 + 1 = 13``) and the result they reach: the sum,
    unless ``drop`` left a carry out."""
    da, db = _digits(a), _digits(b)
    clauses, carry, units, slipped = [], 0, [], False
    for i in range(max(len(da), len(db))):
        if carry and drop is not None and drop():
            carry, slipped = 0, True
        terms = [d[i] for d in (da, db) if i < len(d)] + ([carry] if carry else [])
        s = sum(terms)
        clauses.append(" + ".join(map(str, terms)) + f" = {s}")
        carry, unit = divmod(s, 10)
        units.append(unit)
    last = units[-1] + 10 * carry
    answer = int(str(last) + "".join(str(u) for u in reversed(units[:-1])))
    assert slipped or answer == a + b
    return clauses, answer


def _column_mul(a: int, d: int, drop: Drop = None) -> tuple[list[str], int]:
    """Clauses of ``a x d`` (``d`` one digit) digit by digit with the carry, and the result they reach: the product,
    unless ``drop`` left a carry out."""
    clauses, carry, units, slipped = [], 0, [], False
    for x in _digits(a):
        if carry and drop is not None and drop():
            carry, slipped = 0, True
        p = x * d + carry
        clauses.append(f"{x} \\times {d}" + (f" + {carry}" if carry else "") + f" = {p}")
        carry, unit = divmod(p, 10)
        units.append(unit)
    last = units[-1] + 10 * carry
    answer = int(str(last) + "".join(str(u) for u in reversed(units[:-1])))
    assert slipped or answer == a * d
    return clauses, answer


def _gen_add(rng: random.Random, drop: Drop = None) -> tuple[str, int, str]:
    a, b = rng.randint(10, 999), rng.randint(10, 999)
    clauses, s = _column_add(a, b, drop)
    return f"Compute $ {a} + {b} $.", a + b, " , ".join(clauses) + f" , so {s}"


def _gen_mul(rng: random.Random, drop: Drop = None) -> tuple[str, int, str]:
    a, d = rng.randint(12, 999), rng.randint(2, 9)
    clauses, p = _column_mul(a, d, drop)
    return f"Compute $ {a} \\times {d} $.", a * d, " , ".join(clauses) + f" , so {p}"


def _gen_muladd(rng: random.Random, drop: Drop = None) -> tuple[str, int, str]:
    a, b, c = rng.randint(2, 9), rng.randint(2, 9), rng.randint(10, 999)
    p = a * b
    clauses, s = _column_add(p, c, drop)
    trace = f"{a} \\times {b} = {p} , {p} + {c} : " + " , ".join(clauses) + f" , so {s}"
    return f"Compute $ {a} \\times {b} + {c} $.", p + c, trace


def _gen_linear(rng: random.Random, drop: Drop = None) -> tuple[str, int, str]:  # no carries: drop is never asked
    a, x, b = rng.randint(2, 9), rng.randint(2, 30), rng.randint(10, 99)
    c = a * x + b
    trace = f"{a}x = {c} - {b} = {a * x} , x = {a * x} / {a} = {x}"
    return f"Solve for $x$: $ {a}x + {b} = {c} $.", x, trace


_GENERATORS: dict[str, Callable[..., tuple[str, int, str]]] = {
    "add": _gen_add, "mul": _gen_mul, "muladd": _gen_muladd, "linear": _gen_linear,
}


def draw_worked(kind: str, rng: random.Random, *, reserved: bool, drop: Drop = None) -> tuple[str, Fraction, str, str]:
    """One problem of ``kind`` from its reserved (``True``) or warm-up (``False``) part:
    ``(problem, exact value, answer string, worked trace)``; ``drop`` decides carry slips (module docstring), which
    change the trace and its last word, never the problem or its answer."""
    gen = _GENERATORS[kind]
    for _ in range(_MAX_REPEATS):
        problem, value, trace = gen(rng, drop)
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


def trace_answer(trace: str) -> str:
    """The answer a worked trace reaches: its last word (``... , so 834``, ``x = 77 / 7 = 11``). It is the record's
    answer unless the trace slipped."""
    return trace.rsplit(" ", 1)[-1]


def worked_examples(n: int, *, seed: int = 0, kinds: Sequence[str] = WORKED_KINDS,
                    slip_rate: float = 0.0) -> list[tuple[dict, str]]:
    """``n`` distinct warm-up problems (never reserved ones) with their worked traces: ``(record, trace)`` pairs,
    record ``i`` of kind ``kinds[i % len(kinds)]``, records in the format of :mod:`dgro_lib.data.math` (``source``
    ``synthetic/<kind>``). Deterministic from ``seed``; a prefix of a longer call with the same seed.

    ``slip_rate``: probability that each due carry is left out of a trace (module docstring). The records (problems
    and true answers) do not depend on it; a slipped trace ends in another answer (:func:`trace_answer`).

    Raises:
      ValueError: ``n < 0``, an empty ``kinds``, a kind that has no worked trace (the message lists the valid ones),
        ``slip_rate`` outside [0, 1].
      RuntimeError: a kind's warm-up space is exhausted.
    """
    if isinstance(slip_rate, bool) or not isinstance(slip_rate, (int, float)) or not 0.0 <= slip_rate <= 1.0:
        raise ValueError(f"slip_rate must be a probability in [0, 1], got {slip_rate!r}")
    drop: Drop = None
    if slip_rate > 0:
        slips = random.Random(f"carry-slips-{seed}")  # its own stream: the problems stay those of slip_rate = 0
        drop = lambda: slips.random() < slip_rate  # noqa: E731
    draws = distinct_draws(n, seed, kinds, lambda kind, rng: draw_worked(kind, rng, reserved=False, drop=drop),
                           known=WORKED_KINDS, unknown_message="kind(s) {} have no worked trace")
    return [({"problem": problem, "answer": answer, "source": f"synthetic/{kind}"}, trace)
            for kind, (problem, _value, answer, trace) in draws]


_PROBLEM_PATTERNS = {
    "add": re.compile(r"Compute \$ (\d+) \+ (\d+) \$\."),
    "mul": re.compile(r"Compute \$ (\d+) \\times (\d) \$\."),
    "muladd": re.compile(r"Compute \$ (\d) \\times (\d) \+ (\d+) \$\."),
}


def carry_decisions(problem: str) -> list[str]:
    """The places where the slip-free trace of ``problem`` writes a carry: for each, the trace up to that point
    (``"8 + 6 = 14 , 7 + 5"``), after which the trace goes on with `` +`` (the carry written) where a slipped
    trace goes on with `` =`` (the carry left out). ``[]`` for a problem without carries, or of a kind without
    columns (``linear``); a text of no worked kind raises ValueError naming it."""
    for kind, pattern in _PROBLEM_PATTERNS.items():
        m = pattern.fullmatch(problem)
        if m:
            break
    else:
        if problem.startswith("Solve for $x$:"):
            return []
        raise ValueError(f"not a problem of the column kinds add / mul / muladd: {problem!r}")
    nums = [int(g) for g in m.groups()]
    head = ""
    if kind == "add":
        clauses, _ = _column_add(*nums)
    elif kind == "mul":
        clauses, _ = _column_mul(*nums)
    else:
        p = nums[0] * nums[1]
        head = f"{nums[0]} \\times {nums[1]} = {p} , {p} + {nums[2]} : "
        clauses, _ = _column_add(p, nums[2])
    out = []
    for k in range(1, len(clauses)):
        if int(clauses[k - 1].rsplit(" = ", 1)[1]) >= 10:  # the previous column carries into this one
            lhs = clauses[k].split(" = ")[0]
            out.append(head + " , ".join(clauses[:k]) + " , " + lhs.rsplit(" + ", 1)[0])
    return out
