"""Knights & Knaves statements: the grammar, its validation, truth values and the solver.

A statement tree (``PersonStatement``) is a nested tuple:

* ``('telling-truth', j)`` -- "person j is a knight"; ``('lying', j)`` -- "person j is a knave" (j 0-based);
* ``('not', s)``; ``('and', s1, s2, ...)``; ``('or', s1, s2, ...)`` (two or more operands);
* ``('->', s1, s2)`` (implication); ``('<=>', s1, s2)`` (equivalence).

Person i says statement i, and person i is a knight iff statement i is true under the assignment.
A well-posed puzzle has exactly one consistent assignment.
"""

from __future__ import annotations

import ast
import json
from typing import Any, Sequence

__all__ = ["PersonStatement", "LEAF_OPERATORS", "OPERATORS", "parse_statements", "evaluate", "solve"]

PersonStatement = tuple  # nested tuples, see the module docstring

LEAF_OPERATORS = ("telling-truth", "lying")
OPERATORS = ("telling-truth", "lying", "not", "and", "or", "->", "<=>")


def _validate(node: Any, n_people: int | None, where: str) -> tuple:
    """Return ``node`` as nested tuples, or raise ValueError naming the offending node."""
    if not isinstance(node, (tuple, list)) or len(node) == 0:
        raise ValueError(f"{where}: bad node {node!r}: expected a non-empty tuple (operator, ...)")
    op = node[0]
    if op not in OPERATORS:
        raise ValueError(f"{where}: bad node {node!r}: unknown operator {op!r} "
                         f"(valid: {', '.join(OPERATORS)})")
    args = node[1:]
    if op in LEAF_OPERATORS:
        if len(args) != 1:
            raise ValueError(f"{where}: bad node {node!r}: {op!r} takes exactly one person index, "
                             f"got {len(args)} arguments")
        idx = args[0]
        # bool is an int subclass; ('lying', True) is almost surely a bug, not person 1.
        if not isinstance(idx, int) or isinstance(idx, bool):
            raise ValueError(f"{where}: bad node {node!r}: person index must be an int, got {idx!r}")
        if idx < 0 or (n_people is not None and idx >= n_people):
            bound = f"0..{n_people - 1}" if n_people is not None else ">= 0"
            raise ValueError(f"{where}: bad node {node!r}: person index {idx} out of range ({bound})")
        return (op, idx)
    if op == "not":
        want_ok, want = len(args) == 1, "exactly 1 operand"
    elif op in ("and", "or"):
        want_ok, want = len(args) >= 2, "2 or more operands"
    else:
        want_ok, want = len(args) == 2, "exactly 2 operands"
    if not want_ok:
        raise ValueError(f"{where}: bad node {node!r}: {op!r} takes {want}, got {len(args)}")
    return (op,) + tuple(_validate(a, n_people, where) for a in args)


def _tuplify(x: Any) -> Any:
    return tuple(_tuplify(c) for c in x) if isinstance(x, list) else x


def _fast_literal(text: str) -> Any:
    """``ast.literal_eval(text)`` for canonical statement strings, ~10x faster; None otherwise.

    Official strings are exactly ``repr`` of the tuple, so a JSON reading whose repr reproduces the
    text is provably what literal_eval would return; anything else takes the slow exact path.
    """
    try:
        value = _tuplify(json.loads(text.replace("(", "[").replace(")", "]").replace("'", '"')))
    except (ValueError, RecursionError):
        return None
    return value if repr(value) == text else None


def parse_statements(statements: str | Sequence) -> tuple[PersonStatement, ...]:
    """Parse and validate the statements of one puzzle.

    Args:
      statements: the official Python-literal string (``"(('lying', 1), ('not', ('telling-truth', 0)))"``)
        or the already-parsed nested tuples/lists (e.g. from JSON).

    Returns:
      One validated tree per person, as nested tuples. Person indices must lie in ``0..n_people-1``
      where ``n_people = len(statements)``.

    Raises:
      ValueError: unparsable text, or a node with an unknown operator, wrong arity or bad index
        (the message names the person and the node).
    """
    if isinstance(statements, str):
        text = statements
        statements = _fast_literal(text)
        if statements is None:
            try:
                statements = ast.literal_eval(text)
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError) as exc:
                raise ValueError(f"cannot parse statements {text[:200]!r}: {exc}") from exc
    if not isinstance(statements, (tuple, list)) or len(statements) == 0:
        raise ValueError(f"statements must be a non-empty tuple with one tree per person, got {statements!r}")
    n = len(statements)
    return tuple(_validate(s, n, f"statement of person {i}") for i, s in enumerate(statements))


def evaluate(statement: PersonStatement, assignment: Sequence[bool]) -> bool:
    """Truth value of one statement tree; ``assignment[i]`` is True when person i is a knight.

    Raises ValueError on a malformed node (unknown operator or wrong arity), IndexError when a
    person index is outside ``assignment``.
    """
    op = statement[0] if isinstance(statement, (tuple, list)) and statement else None
    n_args = len(statement) - 1 if op is not None else -1
    if op == "telling-truth" and n_args == 1:
        return bool(assignment[statement[1]])
    if op == "lying" and n_args == 1:
        return not assignment[statement[1]]
    if op == "not" and n_args == 1:
        return not evaluate(statement[1], assignment)
    if op == "and" and n_args >= 2:
        return all(evaluate(s, assignment) for s in statement[1:])
    if op == "or" and n_args >= 2:
        return any(evaluate(s, assignment) for s in statement[1:])
    if op == "->" and n_args == 2:
        return (not evaluate(statement[1], assignment)) or evaluate(statement[2], assignment)
    if op == "<=>" and n_args == 2:
        return evaluate(statement[1], assignment) == evaluate(statement[2], assignment)
    # Reuse the validator's wording for the error.
    _validate(statement, None, "evaluate")
    raise ValueError(f"evaluate: bad node {statement!r}")  # unreachable for valid nodes


# Truth tables as bitsets: bit k of a table is the statement's value under assignment number k,
# where assignment k makes person i a knight iff bit (n-1-i) of k is 0. Ascending k is then the
# lexicographic order with knight (True) first, the order of the official solver, and one
# big-int operation evaluates a node under all 2**n assignments at once.

def _person_tables(n: int) -> list[int]:
    # Person i is a knight in blocks of 2**b assignments alternating with blocks where they are a
    # knave (b = n-1-i); multiplying one block by a repeat-pattern tiles it over all 2**n bits.
    size = 1 << n
    tables = []
    for i in range(n):
        block_len = 1 << (n - 1 - i)
        period = 2 * block_len
        block = (1 << block_len) - 1
        repeat = ((1 << size) - 1) // ((1 << period) - 1)
        tables.append(block * repeat)
    return tables


_TABLE_CACHE: dict[int, list[int]] = {}


def _tables(n: int) -> list[int]:
    if n not in _TABLE_CACHE:
        _TABLE_CACHE[n] = _person_tables(n)
    return _TABLE_CACHE[n]


def _truth_table(statement: tuple, knights: list[int], full: int) -> int:
    op = statement[0]
    if op == "telling-truth":
        return knights[statement[1]]
    if op == "lying":
        return full & ~knights[statement[1]]
    if op == "not":
        return full & ~_truth_table(statement[1], knights, full)
    subs = [_truth_table(s, knights, full) for s in statement[1:]]
    if op == "and":
        out = full
        for s in subs:
            out &= s
        return out
    if op == "or":
        out = 0
        for s in subs:
            out |= s
        return out
    if op == "->":
        return (full & ~subs[0]) | subs[1]
    if op == "<=>":
        return full & ~(subs[0] ^ subs[1])
    raise ValueError(f"bad node {statement!r}")


def _solution_mask(statements: tuple, n: int) -> int:
    knights = _tables(n)
    full = (1 << (1 << n)) - 1
    consistent = full
    for i, s in enumerate(statements):
        consistent &= full & ~(knights[i] ^ _truth_table(s, knights, full))
        if not consistent:
            break
    return consistent


def _mask_to_assignments(mask: int, n: int) -> list[tuple[bool, ...]]:
    out = []
    while mask:
        low = mask & -mask
        k = low.bit_length() - 1
        out.append(tuple(not (k >> (n - 1 - i)) & 1 for i in range(n)))
        mask ^= low
    return out


def solve(statements: str | Sequence) -> list[tuple[bool, ...]]:
    """Every consistent assignment (person i is a knight iff statement i is true).

    Args:
      statements: as accepted by :func:`parse_statements` (validated here).

    Returns:
      Assignments as tuples of bool (True = knight), in lexicographic order with knight first,
      e.g. ``[(True, False, True)]`` for a well-posed 3-person puzzle.
    """
    parsed = parse_statements(statements)
    n = len(parsed)
    return _mask_to_assignments(_solution_mask(parsed, n), n)
