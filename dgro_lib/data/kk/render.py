"""Knights & Knaves text in the official wording: statements, quizzes, solutions and the chain of thought.

The renderers reproduce the official records (Xie et al. 2024, Hugging Face ``K-and-K/knights-and-knaves``)
word for word: :func:`render_quiz` gives a record's ``quiz``, :func:`chain_of_thought` its ``cot_head``,
``cot_repeat_steps`` and ``cot_foot``, ``_solution_text`` / ``_solution_text_format`` its ``solution_text`` /
``solution_text_format``.
"""

from __future__ import annotations

from typing import Sequence

from dgro_lib.data.kk.logic import LEAF_OPERATORS, PersonStatement, _tables, _truth_table, parse_statements

__all__ = [
    "SAYING_TEMPLATES",
    "KNIGHT_KNAVE",
    "COT_HEAD",
    "COT_FOOT_SUCCESS",
    "COT_FOOT_FAIL",
    "render_statement",
    "render_quiz",
    "render_sayings",
    "chain_of_thought",
]

# The 18 speech templates of the official quizzes (each is used ~1/18 of the time there); the
# quoting differs between them (period inside vs outside the quotes, trailing attribution).
SAYING_TEMPLATES: tuple[str, ...] = (
    '{name} said that {content}.',
    '{name} told you that {content}.',
    '{name} said, "{content}."',
    '{name} stated, "{content}".',
    'According to {name}, "{content}".',
    "In {name}'s words: \"{content}\".",
    '{name} remarked, "{content}".',
    '"{content}," {name} declared.',
    '{name} was heard saying, "{content}".',
    '{name} expressed that {content}.',
    '"{content}" - {name}.',
    'As {name} put it, "{content}".',
    '{name} asserted: "{content}".',
    '"{content}," {name} mentioned.',
    '{name} commented, "{content}".',
    'In a statement by {name}: "{content}".',
    '{name} noted, "{content}".',
    '"{content}," {name} claimed.',
)

KNIGHT_KNAVE = {
    "knight": "knight", "knave": "knave", "a_knight": "a knight", "a_knave": "a knave",
    "Knight": "Knight", "Knave": "Knave",
}
COT_HEAD = ("Let's think step by step, by considering whether each person is lying and if that "
            "leads to contradiction.")
COT_FOOT_SUCCESS = "This leads to a feasible solution."
COT_FOOT_FAIL = "All the configurations lead to contradictions."


# --------------------------------------------------------------------------------------------
# Statements and quizzes
# --------------------------------------------------------------------------------------------

def _render_leaf(leaf: tuple, names: Sequence[str], negate: bool = False) -> str:
    role = KNIGHT_KNAVE["a_knight"] if leaf[0] == "telling-truth" else KNIGHT_KNAVE["a_knave"]
    return f"{names[leaf[1]]} is {'not ' if negate else ''}{role}"


def render_statement(statement: PersonStatement, names: Sequence[str], *, _nested: bool = False) -> str:
    """A statement in the official wording, e.g. ``"If Zoey is a knave then David is a knight"``.

    Depth <= 2 trees (all official data) render exactly as the official records: ``X is not a knight``,
    ``A and B``, ``A or B``, ``If A then B``, ``A if and only if B``. Deeper trees (only from
    ``generate(depth_constraint>2)``) have no official wording; there ``not`` of a compound reads
    ``it is false that ...`` and compound operands are parenthesised so the text stays unambiguous.
    """
    op = statement[0]
    if op in LEAF_OPERATORS:
        return _render_leaf(statement, names)
    if op == "not":
        inner = statement[1]
        if inner[0] in LEAF_OPERATORS:
            return _render_leaf(inner, names, negate=True)
        text = "it is false that " + _operand(inner, names)
        return text if _nested else text[0].upper() + text[1:]
    if op in ("and", "or"):
        return f" {op} ".join(_operand(s, names) for s in statement[1:])
    if op == "->":
        text = f"if {_operand(statement[1], names)} then {_operand(statement[2], names)}"
        return text if _nested else "I" + text[1:]
    if op == "<=>":
        return f"{_operand(statement[1], names)} if and only if {_operand(statement[2], names)}"
    raise ValueError(f"render_statement: bad node {statement!r}")


def _operand(statement: tuple, names: Sequence[str]) -> str:
    if statement[0] in LEAF_OPERATORS:
        return _render_leaf(statement, names)
    if statement[0] == "not" and statement[1][0] in LEAF_OPERATORS:
        return _render_leaf(statement[1], names, negate=True)
    return "(" + render_statement(statement, names, _nested=True) + ")"


def _join_names(items: Sequence[str]) -> str:
    # Official style: "A, B, and C" and also "A, and B" for two.
    if len(items) == 1:
        return items[0]
    return ", ".join(items[:-1]) + ", and " + items[-1]


def render_quiz(names: Sequence[str], statements: Sequence[PersonStatement], template_ids: Sequence[int]) -> str:
    """The official quiz text; ``template_ids[i]`` picks person i's :data:`SAYING_TEMPLATES` entry."""
    kk = KNIGHT_KNAVE
    text = (f"A very special island is inhabited only by {kk['knight']}s and {kk['knave']}s. "
            f"{kk['Knight']}s always tell the truth, and {kk['knave']}s always lie. "
            f"You meet {len(names)} inhabitants: {_join_names(list(names))}.")
    if statements:
        text += " " + render_sayings(names, statements, template_ids)
    return text + f" So who is {kk['a_knight']} and who is {kk['a_knave']}?"


def render_sayings(names: Sequence[str], statements: Sequence[PersonStatement], template_ids: Sequence[int]) -> str:
    """The quiz's statement sentences alone: person i's statement in :data:`SAYING_TEMPLATES` ``[template_ids[i]]``."""
    return " ".join(SAYING_TEMPLATES[t].format(name=names[i], content=render_statement(stmt, names))
                    for i, (stmt, t) in enumerate(zip(statements, template_ids, strict=True)))


def _solution_text(names: Sequence[str], solution: Sequence[bool], kk: dict | None = None) -> str:
    kk = kk or KNIGHT_KNAVE
    return _join_names([f"{n} is {kk['a_knight'] if s else kk['a_knave']}" for n, s in zip(names, solution)]) + "."


def _solution_text_format(names: Sequence[str], solution: Sequence[bool], kk: dict | None = None) -> str:
    kk = kk or KNIGHT_KNAVE
    return "\n".join(f"({i + 1}) {n} is {kk['a_knight'] if s else kk['a_knave']}"
                     for i, (n, s) in enumerate(zip(names, solution)))


# --------------------------------------------------------------------------------------------
# Chain of thought (the official backtracking trace)
# --------------------------------------------------------------------------------------------

def _mentioned(statement: tuple) -> list[int]:
    if statement[0] in LEAF_OPERATORS:
        return [statement[1]]
    return [p for s in statement[1:] for p in _mentioned(s)]


def chain_of_thought(statements: str | Sequence, names: Sequence[str]) -> tuple[str, list[str], str]:
    """``(cot_head, cot_repeat_steps, cot_foot)`` as in the official records.

    The trace is a depth-first search: people are assigned one at a time, knight first; after a
    consistent assignment the people that person mentions are visited next (first mention first);
    an assignment is rejected when some assigned person's claim (or its negation, for a knave) can no
    longer hold under any completion of the unassigned people, and the lowest such person is named.
    On exhausting a person's options the search backtracks. This reproduces the official
    ``cot_repeat_steps`` verbatim (checked on all 6,900 official records).
    """
    parsed = parse_statements(statements)
    n = len(parsed)
    if len(names) != n:
        raise ValueError(f"{len(names)} names for {n} statements")
    knights = _tables(n)
    full = (1 << (1 << n)) - 1
    truth = [_truth_table(s, knights, full) for s in parsed]
    claims = [render_statement(s, names) for s in parsed]
    kk = KNIGHT_KNAVE

    def first_conflict(assign: list) -> int | None:
        compatible = full
        for q, v in enumerate(assign):
            if v is not None:
                compatible &= knights[q] if v else full & ~knights[q]
        for q, v in enumerate(assign):
            if v is not None and not ((truth[q] if v else full & ~truth[q]) & compatible):
                return q
        return None

    order = list(range(n))
    assign: list[bool | None] = [None] * n
    options = {p: [False, True] for p in range(n)}  # pop() takes knight first
    cursor = 0
    steps: list[str] = []
    while True:
        if cursor >= n:
            foot = COT_FOOT_SUCCESS
            break
        if not options[order[cursor]]:
            exhausted = []
            while cursor >= 0 and not options[order[cursor]]:
                q = order[cursor]
                options[q] = [False, True]
                assign[q] = None
                exhausted.append(q)
                cursor -= 1
            if cursor < 0:
                foot = COT_FOOT_FAIL
                break
            steps.append(f"We have exhausted all possibilities for {_join_exhausted([names[q] for q in exhausted])}, "
                         f"so let us go back and reconsider {names[order[cursor]]}.")
        p = order[cursor]
        value = options[p].pop()
        assign[p] = value
        role = kk["a_knight"] if value else kk["a_knave"]
        bad = first_conflict(assign)
        if bad is None:
            steps.append(f"Assume {names[p]} is {role}. No contradiction is found in their "
                         f"{'' if value else 'false '}claim that {claims[p]}.")
            cursor += 1
            front: list[int] = []
            for q in _mentioned(parsed[p]):
                if q in order[cursor:] and q not in front:
                    front.append(q)
            order = order[:cursor] + front + [q for q in order[cursor:] if q not in front]
        else:
            whose = "their own" if bad == p else names[bad]
            steps.append(f"{names[p]} cannot be {role}, because this would contradict the "
                         f"{'' if assign[bad] else 'false '}claim of {whose} that {claims[bad]}.")
    return COT_HEAD, steps, foot


def _join_exhausted(items: list[str]) -> str:
    if len(items) == 1:
        return items[0]
    if len(items) == 2:
        return " and ".join(items)
    return ", ".join(items[:-1]) + ", and " + items[-1]
