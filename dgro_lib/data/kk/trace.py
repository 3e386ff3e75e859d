"""Reasoning traces for Knights & Knaves, written so that a ~1M-parameter model can execute them.

The embedded base model (docs/embedded-model.md) only learned the logic when its warm-up completions
spelled out every step; a compact trace or no trace taught it the answer format and nothing else. The
``"explicit"`` trace below is designed so that every token can be produced from a few nearby
facts (one attention hop each), never from a global computation:

1. **Legend** — the people's labels, copied from the (numbered) list of the ``plain`` prompt
   (:func:`dgro_lib.data.kk.numbered_quiz`): ``people (1) Penelope (2) David (3) Zoey .``
   Labels are the answer's own ``(k)``, one token each. After the legend the trace names nobody: a
   first version that repeated names everywhere spent its warm-up learning *which* name to copy,
   whereas label tokens are shared by every puzzle and the "next person" is just k+1.
2. **Header** — each statement once, an in-order copy of the quiz's wording minus filler, names
   replaced by labels::

       (1) says (2) knight iff (2) knave . (2) says if (3) knave then (1) not knight . (3) says ...

   Clauses are ``(k) knight`` / ``(k) knave`` / ``(k) not knight`` ("k is not a knight"); operators
   ``and``, ``or``, ``if .. then``, ``iff``; a compound operand (deeper trees only) is bracketed.
3. **Enumeration** — candidate assignments in the solver's order (lexicographic, knight first: each
   ``try`` line is a binary increment of the previous one)::

       try (1) is knight (2) is knight (3) is knave :

   ``(k) is ROLE`` states the assignment under test (clauses never contain ``is``), so "the role of
   person 2 right now" is one unambiguous hop to the latest ``(2) is``.
4. **Checks** — for each person in order: their role (restated, so the verdict is local), their
   statement copied from the header with each clause's truth value right after it, ``= V`` after
   each operator, and the verdict (a knight needs ``T``, a knave ``F``)::

       (1) is knight : (2) knight T iff (2) knave F = F bad .

   Pruning: an assignment stops at its first ``bad`` person (the next line is the next ``try``); the
   trace stops at the first assignment whose people are all ``ok`` (the K&K generator only emits
   unique-solution puzzles). The answer block "(k) NAME is a ..." then copies each name from the
   token after the same label in the legend / prompt list (plain induction).

Why the labels: with bare numbers ``1 2 3`` as labels and an unnumbered prompt a 1M-parameter model learned every
part of the trace except the names, because copying "the k-th name of the list" needs a positional count and a bare
number is an ambiguous key in a trace full of numbers (docs/embedded-model.md has the measurements).

**The ``"named"`` style** is the same trace with the quiz's own names in place of the labels and no
legend (``Emily says if Matthew knave then Jackson knight . try Emily is knight Jackson is knight ...``;
``named_verbatim`` keeps the quiz's wording in the header). Each name is then copied from the line above or from
the quiz sentence it translates, which a tiny model learns far sooner than the labelled trace; the remaining
errors copy a statement's role word from the quiz, which statement drills
(:func:`dgro_lib.models.statement_drill_text`) address. docs/embedded-model.md has what each style and drill
share measured.

``slip_rate`` injects a *slip*: with that probability a trace flips one clause value in an
assignment checked before the solution, chosen so that the flip turns that assignment's only
inconsistent person ``ok`` — the trace then accepts a wrong assignment and the answer follows the
trace. A base model warmed up on such data samples both right and wrong solutions: a base whose
errors RL can fix. Puzzles without such a near-miss before the solution cannot slip;
:func:`build_trace` reports whether a slip happened. A clause slip stops the trace early (it accepts an assignment
tried before the solution), so a slipped trace is shorter than the right one.

``answer_slip_rate`` (:func:`slip_answer`) is the length-neutral alternative: the trace is right, and each
person's role in the answer block is written flipped with that probability, independently. The completion has
exactly as many tokens either way, so a policy that stops slipping does not change its length; the base learns the
rate as the probability of the other role word at each answer role token.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass
from typing import Sequence

from dgro_lib.data.kk.logic import parse_statements
from dgro_lib.data.kk.render import render_statement

__all__ = [
    "TRACE_VERSION",
    "STYLES",
    "Trace",
    "build_trace",
    "reasoning_trace",
    "completion_text",
    "format_answer",
    "slip_answer",
    "trace_vocabulary",
]

# Bump whenever the text of a trace changes: cached embedded models are keyed on it.
TRACE_VERSION = 3
STYLES = ("explicit", "named", "named_verbatim", "none")

_OP_WORD = {"and": "and", "or": "or", "<=>": "iff"}
# Every word a trace can contain besides names (the tokenizer's vocabulary is built from these).
_TRACE_WORDS = ("people", "says", "knight", "knave", "not", "and", "or", "if", "then", "iff", "(", ")", ".",
                "try", "is", ":", "T", "F", "=", "ok", "bad", *[str(i) for i in range(1, 10)])


@dataclass(frozen=True)
class Trace:
    """A rendered trace and what it concluded.

    text: the reasoning (no tags). assignment: the assignment the trace accepted (True = knight),
    which equals the solution unless ``slipped``. n_tried: assignments the trace tried.
    """

    text: str
    assignment: tuple[bool, ...]
    slipped: bool
    n_tried: int


def _role(is_knight: bool) -> str:
    return "knight" if is_knight else "knave"


def _is_leaf(node) -> bool:
    return node[0] in ("telling-truth", "lying")


def _render_claim(node, labels: Sequence[str]) -> list[str]:
    """Canonical words of a statement tree, without truth values (the header).

    Mirrors the quiz's own wording minus filler, so the header is an in-order copy of the quiz:
    "Zoey is not a knight" -> ``3 not knight``; "If A then B" -> ``if A then B``; "A if and only
    if B" -> ``A iff B``.
    """
    if _is_leaf(node):
        return [labels[node[1]], _leaf_role(node)]
    op, *children = node
    if op == "not" and _is_leaf(children[0]):
        return [labels[children[0][1]], "not", _leaf_role(children[0])]
    parts = []
    for c in children:
        w = _render_claim(c, labels)
        parts.append(w if _is_leaf(c) or _is_neg_leaf(c) else ["(", *w, ")"])
    if op == "not":
        return ["not", *parts[0]]
    if op == "->":
        return ["if", *parts[0], "then", *parts[1]]
    out: list[str] = []
    for i, p in enumerate(parts):
        if i:
            out.append(_OP_WORD[op])
        out.extend(p)
    return out


def _leaf_role(leaf) -> str:
    return "knight" if leaf[0] == "telling-truth" else "knave"


def _is_neg_leaf(node) -> bool:
    return node[0] == "not" and _is_leaf(node[1])


def _render_eval(node, labels, assignment, flip, _counter=None):
    """Words of a statement with every clause's truth value, and the statement's value.

    A clause (``2 knight`` or ``2 not knight``) is followed by its value; a compound by its parts
    and ``= V``. ``flip`` is the index (in reading order) of the one clause whose value is written
    flipped, or None; the flipped value propagates upward, exactly as a model that misread one
    clause would.
    """
    counter = _counter if _counter is not None else [0]
    if _is_leaf(node) or _is_neg_leaf(node):
        leaf = node if _is_leaf(node) else node[1]
        idx = counter[0]
        counter[0] += 1
        value = assignment[leaf[1]] == (leaf[0] == "telling-truth")
        if not _is_leaf(node):
            value = not value
        if flip is not None and idx == flip:
            value = not value
        return [*_render_claim(node, labels), "T" if value else "F"], value
    op, *children = node
    words: list[str] = []
    values: list[bool] = []
    for i, child in enumerate(children):
        w, v = _render_eval(child, labels, assignment, flip, counter)
        if not (_is_leaf(child) or _is_neg_leaf(child)):
            w = ["(", *w, ")"]
        if op == "not":
            words.append("not")
        elif op == "->":
            words.append("if" if i == 0 else "then")
        elif i:
            words.append(_OP_WORD[op])
        words.extend(w)
        values.append(v)
    if op == "not":
        value = not values[0]
    elif op == "and":
        value = all(values)
    elif op == "or":
        value = any(values)
    elif op == "->":
        value = (not values[0]) or values[1]
    elif op == "<=>":
        value = values[0] == values[1]
    else:  # parse_statements validates trees; this guards hand-made ones.
        raise ValueError(f"unknown operator {op!r} in statement node {node!r}")
    words += ["=", "T" if value else "F"]
    return words, value


def _n_leaves(node) -> int:
    """Clauses (leaves or negated leaves) of a statement: the places a slip can flip."""
    return 1 if _is_leaf(node) or _is_neg_leaf(node) else sum(_n_leaves(c) for c in node[1:])


def _assignments(n: int):
    """All assignments in the solver's order: lexicographic with knight (True) first."""
    for k in range(2 ** n):
        yield tuple(not ((k >> (n - 1 - i)) & 1) for i in range(n))


def _consistent(statements, assignment, person, flip=None) -> bool:
    value = _render_eval(statements[person], [""] * len(assignment), assignment, flip)[1]
    return value == assignment[person]


def _slip_candidates(statements, solution) -> list[tuple[tuple[bool, ...], int, int]]:
    """(assignment, person, leaf) triples whose flipped leaf makes the trace accept a wrong answer.

    Only assignments tried before the solution qualify, with exactly one inconsistent person whose
    statement value flips when that leaf flips.
    """
    out = []
    for a in _assignments(len(solution)):
        if a == tuple(solution):
            break
        bad = [p for p in range(len(a)) if not _consistent(statements, a, p)]
        if len(bad) != 1:
            continue
        p = bad[0]
        for leaf in range(_n_leaves(statements[p])):
            if _consistent(statements, a, p, flip=leaf):
                out.append((a, p, leaf))
    return out


def _record_rng(record) -> random.Random:
    # Deterministic per puzzle when the caller passes no rng (reproducible warm-up data).
    digest = hashlib.sha256(str(record.get("quiz", record.get("statements"))).encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "little"))


def _labels(names: Sequence[str], style: str) -> list[str]:
    # explicit: the answer's own labels "(k)", one token each; named: the quiz's own names
    return [f"({i + 1})" for i in range(len(names))] if style == "explicit" else list(names)


def header_words(statements, names: Sequence[str], *, style: str = "explicit") -> list[str]:
    """The words of a trace before its first ``try``: for ``explicit`` the legend ``people (1) NAME ...
    .``, then every person's statement ``LABEL says CLAIM .`` (the quiz's wording minus filler;
    ``named_verbatim`` keeps the quiz's wording)."""
    labels = _labels(names, style)
    words: list[str] = []
    if style == "explicit":
        words.append("people")
        for lab, name in zip(labels, names):
            words += [lab, name]
        words.append(".")
    for i, st in enumerate(statements):
        claim = render_statement(st, names).split() if style == "named_verbatim" else _render_claim(st, labels)
        words += [labels[i], "says", *claim, "."]
    return words


def build_trace(record: dict, *, style: str = "explicit", slip_rate: float = 0.0,
                rng: random.Random | None = None) -> Trace:
    """Render the reasoning trace of one K&K record (official keys: names, statements, solution).

    style: "explicit" (see the module docstring) or "none" (empty trace: the answer only).
    slip_rate: probability of injecting one answer-changing clause slip (see module docstring).
    rng: random.Random used for the slip decision; default: seeded from the quiz text.
    """
    if style not in STYLES:
        raise ValueError(f"unknown trace style {style!r}; valid: {', '.join(STYLES)}")
    names = list(record["names"])
    solution = tuple(bool(x) for x in record["solution"])
    statements = parse_statements(record["statements"])
    if len(statements) != len(names):
        raise ValueError(f"record has {len(names)} names but {len(statements)} statements")

    slip = None
    if slip_rate > 0:
        rng = rng if rng is not None else _record_rng(record)
        # Draw the decision first so the slip rate does not depend on the candidates' count.
        if rng.random() < slip_rate:
            candidates = _slip_candidates(statements, solution)
            if candidates:
                slip = candidates[rng.randrange(len(candidates))]
    if style == "none":
        return Trace("", slip[0] if slip else solution, slip is not None, 0)

    labels = _labels(names, style)
    words = header_words(statements, names, style=style)
    n_tried = 0
    accepted = None
    for a in _assignments(len(names)):
        n_tried += 1
        words.append("try")
        for i, r in enumerate(a):
            words += [labels[i], "is", _role(r)]
        words.append(":")
        all_ok = True
        for p in range(len(names)):
            flip = slip[2] if slip is not None and slip[0] == a and slip[1] == p else None
            w, value = _render_eval(statements[p], labels, a, flip)
            ok = value == a[p]
            words += [labels[p], "is", _role(a[p]), ":", *w, "ok" if ok else "bad", "."]
            if not ok:
                all_ok = False
                break  # prune: the first contradiction rules the assignment out
        if all_ok:
            accepted = a
            break
    if accepted is None:  # impossible for unique-solution puzzles; guards malformed records
        raise ValueError(f"no consistent assignment for statements {record['statements']!r}")
    if slip is None and accepted != solution:
        raise ValueError(f"record's solution {solution} disagrees with its statements ({accepted})")
    return Trace(" ".join(words), accepted, slip is not None, n_tried)


def reasoning_trace(record: dict, *, style: str = "explicit", slip_rate: float = 0.0,
                    rng: random.Random | None = None) -> str:
    """The reasoning text (between the prompt's ``<think>`` and ``</think>``); see build_trace."""
    return build_trace(record, style=style, slip_rate=slip_rate, rng=rng).text


def format_answer(names: Sequence[str], assignment: Sequence[bool]) -> str:
    """"(1) NAME is a knight\\n(2) ..." — the same format as kk.answer_text / solution_text_format."""
    return "\n".join(f"({i + 1}) {n} is a {_role(r)}" for i, (n, r) in enumerate(zip(names, assignment)))


def completion_text(record: dict, *, style: str = "explicit", slip_rate: float = 0.0,
                    rng: random.Random | None = None) -> str:
    """Warm-up target after a prompt ending in ``<think>``:
    ``TRACE </think> <answer> (1) ... </answer>``, the answer agreeing with the (maybe slipped) trace."""
    t = build_trace(record, style=style, slip_rate=slip_rate, rng=rng)
    head = f"{t.text} " if t.text else ""
    return f"{head}</think> <answer> {format_answer(record['names'], t.assignment)} </answer>"


def slip_answer(assignment: Sequence[bool], rate: float, rng: random.Random) -> tuple[tuple[bool, ...], int]:
    """The answer a slipping writer copies from the trace's accepted ``assignment``: each role flipped with
    probability ``rate``, independently (one ``rng.random()`` draw per person, always, so the stream does not
    depend on the outcome). Returns the written assignment and how many roles were flipped."""
    if isinstance(rate, bool) or not 0.0 <= float(rate) <= 1.0:
        raise ValueError(f"answer_slip_rate must be a probability in [0, 1], got {rate!r}")
    flips = [rng.random() < rate for _ in assignment]
    return tuple(bool(r) != f for r, f in zip(assignment, flips)), sum(flips)


def trace_vocabulary() -> tuple[str, ...]:
    """The words traces use besides person names."""
    return _TRACE_WORDS
