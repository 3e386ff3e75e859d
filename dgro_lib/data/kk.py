"""Knights & Knaves (K&K) puzzles: solver, generator, loader and prompt formats.

The official data set (Xie et al. 2024, "On memorization of large language models in logical
reasoning"; Hugging Face ``K-and-K/knights-and-knaves``) stores one puzzle per JSON line::

    {"quiz": "A very special island is inhabited only by knights and knaves. ... So who is a knight and who is a knave?",
     "names": ["Penelope", "David", "Zoey"],
     "knight_knave": {"knight": "knight", "knave": "knave", "a_knight": "a knight", "a_knave": "a knave",
                      "Knight": "Knight", "Knave": "Knave"},
     "solution": [false, false, true],                       # True = knight, one entry per name
     "solution_text": "Penelope is a knave, David is a knave, and Zoey is a knight.",
     "solution_text_format": "(1) Penelope is a knave\\n(2) David is a knave\\n(3) Zoey is a knight",
     "cot_head": "Let's think step by step, ...",
     "cot_repeat_steps": ["Penelope cannot be a knight, because ...", ...],
     "cot_foot": "This leads to a feasible solution.",
     "statements": "(('<=>', ('telling-truth', 1), ('lying', 1)), ...)",   # Python literal, one tree per person
     "index": 0}

Files are named ``peopleN_numM.jsonl`` (N people per puzzle, M puzzles) under ``test/`` and ``train/``.

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
import os
import random
import re
from pathlib import Path
from typing import Any, Iterable, Sequence

__all__ = [
    "PersonStatement",
    "OPERATORS",
    "OFFICIAL_KEYS",
    "REQUIRED_KEYS",
    "NAMES",
    "SAYING_TEMPLATES",
    "PROMPT_TEMPLATES",
    "parse_statements",
    "evaluate",
    "solve",
    "render_statement",
    "render_quiz",
    "render_sayings",
    "random_statements",
    "chain_of_thought",
    "generate",
    "find_official_dir",
    "load_kk",
    "load_kk_hub",
    "format_prompt",
    "numbered_quiz",
    "answer_text",
]

PersonStatement = tuple  # nested tuples, see the module docstring

LEAF_OPERATORS = ("telling-truth", "lying")
OPERATORS = ("telling-truth", "lying", "not", "and", "or", "->", "<=>")

OFFICIAL_KEYS = (
    "quiz", "names", "knight_knave", "solution", "solution_text", "solution_text_format",
    "cot_head", "cot_repeat_steps", "cot_foot", "statements", "index",
)
# Only what the library reads (prompts, rewards, evaluation); the other official keys are optional so
# that hand-made files in the same format still load.
REQUIRED_KEYS = ("quiz", "names", "solution")

# The 51 distinct names of the official records (test + train, people 2-8), alphabetical.
NAMES: tuple[str, ...] = (
    "Abigail", "Aiden", "Alexander", "Amelia", "Aria", "Aurora", "Ava", "Avery", "Benjamin",
    "Charlotte", "Chloe", "Daniel", "David", "Elizabeth", "Ella", "Emily", "Emma", "Ethan",
    "Evelyn", "Grace", "Harper", "Henry", "Isabella", "Jack", "Jackson", "Jacob", "James",
    "Joseph", "Liam", "Lily", "Logan", "Lucas", "Luke", "Mason", "Matthew", "Mia", "Michael",
    "Noah", "Oliver", "Olivia", "Owen", "Penelope", "Riley", "Samuel", "Scarlett", "Sebastian",
    "Sofia", "Sophia", "Victoria", "William", "Zoey",
)

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

_QWEN_SYSTEM = (
    "You are a helpful assistant. The assistant first thinks about the reasoning process in the mind "
    "and then provides the user with the answer. The reasoning process and answer are enclosed within "
    "<think> </think> and<answer> </answer> tags, respectively, i.e., <think> reasoning process here "
    "</think><answer> answer here </answer>.  Now the user asks you to solve a logical reasoning "
    "problem. After thinking, when you finally reach a conclusion, clearly state the identity of each "
    "character within <answer> </answer> tags. List the identity of each person one by one, for "
    "example, <answer> (1) Zoey is a knight\n(2) Oliver is a knight\n(3)... </answer>.\n"
)
# Both end in "<think>" so the reward's format check counts the prompt's opening tag (DESIGN §4).
PROMPT_TEMPLATES: dict[str, str] = {
    "plain": "{quiz}\nAnswer with each person's role.\n<think>",
    "qwen": ("<|im_start|>system\n" + _QWEN_SYSTEM.replace("{", "{{").replace("}", "}}")
             + "<|im_end|>\n<|im_start|>user\n{quiz}\n<|im_end|>\n<|im_start|>assistant\n<think>"),
}


# --------------------------------------------------------------------------------------------
# Statements: parsing, validation, evaluation, solving
# --------------------------------------------------------------------------------------------

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


# --------------------------------------------------------------------------------------------
# Natural-language rendering (the official phrasing)
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


def random_statements(rng: random.Random, n_people: int, *, depth: int = 2, width: int = 2) -> tuple:
    """One statement tree per person, drawn as :func:`generate` draws them, without the unique-solution filter."""
    return _Sampler(rng, n_people, depth, width).puzzle()


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


# --------------------------------------------------------------------------------------------
# Generator
# --------------------------------------------------------------------------------------------

class _Sampler:
    """Random statement trees with the official grammar.

    Each node is a leaf with probability 1/6 (always at depth 1), else one of not / and / or / -> /
    <=> with probability 1/6 each; and/or take 2..width operands; operands of one node are distinct;
    a leaf never reads ('lying', self), which would make the speaker's statement unsatisfiable on its own.
    """

    def __init__(self, rng: random.Random, n_people: int, depth: int, width: int):
        self.rng, self.n, self.depth, self.width = rng, n_people, depth, width

    def statement(self, speaker: int, depth: int) -> tuple:
        dice = self.rng.randrange(6)
        if depth == 1 or dice == 0:
            while True:
                kind = self.rng.choice(LEAF_OPERATORS)
                person = self.rng.randrange(self.n)
                if not (kind == "lying" and person == speaker):
                    return (kind, person)
        if dice == 1:
            return ("not", self.statement(speaker, depth - 1))
        if dice in (2, 3):
            return (("and", "or")[dice - 2],) + self.operands(speaker, depth, self.rng.randint(2, self.width))
        return (("->", "<=>")[dice - 4],) + self.operands(speaker, depth, 2)

    def operands(self, speaker: int, depth: int, count: int) -> tuple:
        out: list[tuple] = []
        while len(out) < count:
            s = self.statement(speaker, depth - 1)
            if s not in out:
                out.append(s)
        return tuple(out)

    def puzzle(self) -> tuple:
        return tuple(self.statement(i, self.depth) for i in range(self.n))


_MAX_CONSECUTIVE_REJECTS = 20_000


def generate(n_people: int, n: int, *, seed: int, depth_constraint: int = 2, width_constraint: int = 2,
             names: Sequence[str] = NAMES) -> list[dict]:
    """Generate ``n`` unique-solution puzzles in the official record format.

    Statement trees follow the official grammar (see :class:`_Sampler`), puzzles are rejection-sampled
    until exactly one assignment is consistent, and a puzzle (its statement trees) never repeats within
    one call. Each person's name is drawn without replacement from ``names`` and each speech
    template uniformly from :data:`SAYING_TEMPLATES`. Everything comes from one ``random.Random(seed)``,
    so the output is a pure function of the arguments, and ``generate(k, m, seed=s)`` is a prefix of
    ``generate(k, m', seed=s)`` for ``m <= m'``. Different seeds give independent puzzle streams, which
    can still share a puzzle by chance for 2-3 people (deduplicate across splits when that matters).

    Returns:
      ``n`` dicts with exactly :data:`OFFICIAL_KEYS` (``solution`` a list of bool, ``statements`` the
      Python-literal string, ``index`` 0..n-1).

    Raises:
      ValueError: bad arguments (fewer than 2 people, too few distinct names, a width that cannot be
        filled with distinct leaves).
      RuntimeError: no new unique-solution puzzle after many tries (the puzzle space is exhausted,
        e.g. thousands of 2-person puzzles).
    """
    if not isinstance(n_people, int) or n_people < 2:
        raise ValueError(f"n_people must be an int >= 2, got {n_people!r}")
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    if depth_constraint < 1:
        raise ValueError(f"depth_constraint must be >= 1, got {depth_constraint}")
    if width_constraint < 2:
        raise ValueError(f"width_constraint must be >= 2, got {width_constraint}")
    names = list(names)
    if len(set(names)) != len(names):
        raise ValueError("names must be distinct")
    if len(names) < n_people:
        raise ValueError(f"need at least {n_people} names, got {len(names)}")
    # With depth 2 the operands are leaves; a speaker has 2*n_people-1 distinct leaves, and the
    # distinct-operand loop would never end if the width asked for more.
    if depth_constraint == 2 and width_constraint > 2 * n_people - 1:
        raise ValueError(f"width_constraint={width_constraint} exceeds the {2 * n_people - 1} distinct "
                         f"leaves available to a speaker with {n_people} people at depth 2")

    rng = random.Random(seed)
    sampler = _Sampler(rng, n_people, depth_constraint, width_constraint)
    seen: set[tuple] = set()
    records: list[dict] = []
    while len(records) < n:
        for _ in range(_MAX_CONSECUTIVE_REJECTS):
            statements = sampler.puzzle()
            if statements in seen:
                continue
            mask = _solution_mask(statements, n_people)
            if mask and not mask & (mask - 1):  # exactly one bit set: a unique solution
                break
        else:
            raise RuntimeError(f"no new unique-solution {n_people}-person puzzle after "
                               f"{_MAX_CONSECUTIVE_REJECTS} tries ({len(records)} of {n} generated); "
                               f"the puzzle space is probably exhausted")
        seen.add(statements)
        solution = list(_mask_to_assignments(mask, n_people)[0])
        chosen = rng.sample(names, n_people)
        template_ids = [rng.randrange(len(SAYING_TEMPLATES)) for _ in range(n_people)]
        head, steps, foot = chain_of_thought(statements, chosen)
        records.append({
            "quiz": render_quiz(chosen, statements, template_ids),
            "names": chosen,
            "knight_knave": dict(KNIGHT_KNAVE),
            "solution": solution,
            "solution_text": _solution_text(chosen, solution),
            "solution_text_format": _solution_text_format(chosen, solution),
            "cot_head": head,
            "cot_repeat_steps": steps,
            "cot_foot": foot,
            "statements": repr(statements),
            "index": len(records),
        })
    return records


# --------------------------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------------------------

_FILE_RE = re.compile(r"^people(\d+)_num(\d+)\.jsonl$")


def find_official_dir() -> Path | None:
    """The official K&K folder (holding ``test/`` and ``train/``), or None.

    ``$DGRO_KK_DIR`` wins when set (a set-but-missing folder raises FileNotFoundError rather than
    silently falling back); otherwise ``<repo>/../shared/data/kk`` next to this checkout, which exists
    only on the development machines.
    """
    env = os.environ.get("DGRO_KK_DIR")
    if env:
        path = Path(env).expanduser()
        if not path.is_dir():
            raise FileNotFoundError(f"DGRO_KK_DIR={env!r} is not a directory")
        return path
    candidate = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "kk"
    return candidate if candidate.is_dir() else None


def _people_set(people: int | Sequence[int] | None) -> set[int] | None:
    if people is None:
        return None
    if isinstance(people, int):
        return {people}
    return {int(p) for p in people}


def _check_record(record: Any, where: str) -> None:
    if not isinstance(record, dict):
        raise ValueError(f"{where}: expected a JSON object, got {type(record).__name__}")
    missing = [k for k in REQUIRED_KEYS if k not in record]
    if missing:
        raise ValueError(f"{where}: record is missing required key(s) {', '.join(map(repr, missing))} "
                         f"(required: {', '.join(REQUIRED_KEYS)})")
    names, solution = record["names"], record["solution"]
    if not isinstance(names, list) or not all(isinstance(x, str) for x in names):
        raise ValueError(f"{where}: 'names' must be a list of strings, got {names!r}")
    if (not isinstance(solution, list) or not all(isinstance(x, bool) for x in solution)
            or len(solution) != len(names)):
        raise ValueError(f"{where}: 'solution' must be a list of {len(names)} booleans (one per name), "
                         f"got {solution!r}")


def _read_jsonl(path: Path) -> Iterable[dict]:
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            where = f"{path}:{lineno}"
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{where}: invalid JSON: {exc}") from exc
            _check_record(record, where)
            yield record


def load_kk(path: str | Path, *, people: int | Sequence[int] | None = None,
            limit: int | None = None) -> list[dict]:
    """Load official-format K&K records.

    Args:
      path: one ``.jsonl`` file, or a directory holding ``peopleN_numM.jsonl`` files directly
        (e.g. ``<official>/test``; the parent with ``test/`` and ``train/`` is rejected so that
        splits are never mixed by accident).
      people: keep only puzzles with this many people (int or several). For a directory, each
        requested count must have a file.
      limit: at most this many records *per people count*, in file order (matches
        ``DataConfig.n_train``/``n_eval``, which count per people count).

    Returns:
      The records as dicts, in order of people count then file order. Every record has at least
      :data:`REQUIRED_KEYS`, ``names`` a list of str and ``solution`` a same-length list of bool.

    Raises:
      FileNotFoundError: missing path, or a directory without matching files.
      ValueError: a bad line; the message reads ``<file>:<line>: ...`` and names a missing key.
    """
    path = Path(path)
    wanted = _people_set(people)
    if limit is not None and limit < 0:
        raise ValueError(f"limit must be >= 0, got {limit}")
    if path.is_dir():
        found = []
        for f in path.iterdir():
            m = _FILE_RE.match(f.name)
            if m and f.is_file():
                found.append((int(m.group(1)), int(m.group(2)), f))
        if not found:
            subdirs = sorted(d.name for d in path.iterdir() if d.is_dir())
            hint = f" (it has sub-folders {subdirs}: pass one of them)" if subdirs else ""
            raise FileNotFoundError(f"no peopleN_numM.jsonl files in {path}{hint}")
        found.sort()
        if wanted is not None:
            available = {n for n, _, _ in found}
            absent = sorted(wanted - available)
            if absent:
                raise FileNotFoundError(f"no file for people={absent} in {path} (available: {sorted(available)})")
            found = [x for x in found if x[0] in wanted]
        files = [f for _, _, f in found]
    elif path.is_file():
        files = [path]
    else:
        raise FileNotFoundError(f"K&K data not found: {path}")

    counts: dict[int, int] = {}
    out: list[dict] = []
    for f in files:
        for record in _read_jsonl(f):
            k = len(record["names"])
            if wanted is not None and k not in wanted:
                continue
            if limit is not None and counts.get(k, 0) >= limit:
                continue
            counts[k] = counts.get(k, 0) + 1
            out.append(record)
    if len(files) == 1 and path.is_file():
        out.sort(key=lambda r: len(r["names"]))  # stable: file order within a people count
    return out


def load_kk_hub(name: str = "K-and-K/knights-and-knaves", subset: str = "test", split: str | int = "3ppl",
                *, limit: int | None = None) -> list[dict]:
    """Load one split of the K&K data set from the Hugging Face Hub via ``datasets.load_dataset``.

    Args:
      name: the Hub data set.
      subset: configuration, ``"test"`` or ``"train"``.
      split: ``"2ppl"`` ... ``"8ppl"``; an int N means ``f"{N}ppl"``.
      limit: keep the first ``limit`` records.

    Raises:
      RuntimeError: ``datasets`` is missing, or the Hub cannot be reached / the data is not cached
        (offline machines: copy the jsonl files and use :func:`load_kk`).
    """
    if isinstance(split, int):
        split = f"{split}ppl"
    try:
        import datasets  # heavy import, only needed here
    except ImportError as exc:
        raise RuntimeError("load_kk_hub needs the 'datasets' package (pip install datasets)") from exc
    try:
        ds = datasets.load_dataset(name, subset, split=split)
    except Exception as exc:  # network, offline mode, missing config: all mean "use a local copy"
        raise RuntimeError(
            f"could not load {name!r} (subset {subset!r}, split {split!r}) from the Hugging Face Hub: "
            f"{type(exc).__name__}: {exc}. Offline? Use load_kk() on a local copy of the jsonl files "
            f"(find_official_dir() / $DGRO_KK_DIR).") from exc
    records = []
    for i, row in enumerate(ds):
        if limit is not None and i >= limit:
            break
        record = dict(row)
        _check_record(record, f"{name}/{subset}/{split} row {i}")
        records.append(record)
    return records


# --------------------------------------------------------------------------------------------
# Prompts and targets
# --------------------------------------------------------------------------------------------

def format_prompt(record: dict, *, template: str = "plain") -> str:
    """Prompt text for one record; both templates end with ``<think>``.

    ``plain`` (embedded word-level model): ``"{quiz}\\nAnswer with each person's role.\\n<think>"``.
    ``qwen`` (real chat checkpoints): Logic-RL's chat prompt, system message then the quiz as the
    user turn, then ``<|im_start|>assistant\\n<think>``.
    """
    if template not in PROMPT_TEMPLATES:
        raise ValueError(f"unknown prompt template {template!r} (valid: {', '.join(PROMPT_TEMPLATES)})")
    quiz = numbered_quiz(record) if template == "plain" else record["quiz"]
    return PROMPT_TEMPLATES[template].format(quiz=quiz)


_INTRO_RE = re.compile(r"inhabitants: ([^.]*)\.")


def numbered_quiz(record: dict) -> str:
    """The quiz with its list of inhabitants numbered as in the answer: "inhabitants: (1) Emily, (2) Jackson, and
    (3) Matthew." (the rest of the text unchanged).

    Used by the ``plain`` template of the embedded model: the answer format "(k) NAME is a ..." then has a key
    that occurs only in that list, so a tiny model can copy names by plain induction instead of counting
    positions in a list whose names recur throughout the quiz (measured: without it, a 1M-parameter model
    learned every other part of the trace and never the names). The puzzle itself is unchanged.
    Raises ValueError naming the record's index when the quiz has no "inhabitants: ... ." sentence listing
    every name in order.
    """
    quiz, names = record["quiz"], list(record["names"])
    m = _INTRO_RE.search(quiz)
    intro = m.group(1) if m else ""
    out, pos = [], 0
    for k, name in enumerate(names, 1):
        hit = re.search(rf"\b{re.escape(name)}\b", intro[pos:])
        if hit is None:
            raise ValueError(f"record {record.get('index', '?')}: the quiz does not list inhabitant {name!r} after "
                             "'inhabitants:' (cannot number the list)")
        out.append(intro[pos:pos + hit.start()] + f"({k}) {name}")
        pos += hit.end()
    out.append(intro[pos:])
    return quiz[:m.start(1)] + "".join(out) + quiz[m.end(1):]


def answer_text(record: dict) -> str:
    """The target answer block ``"(1) NAME is a knight\\n(2) NAME is a knave ..."``.

    Built from ``names`` and ``solution`` (equal to the official ``solution_text_format``), so it also
    works for records that lack that key.
    """
    return _solution_text_format(record["names"], record["solution"], record.get("knight_knave"))
