"""Knights & Knaves puzzle generator: random statement trees in the official grammar, unique-solution records.

:func:`generate` returns records in the official format (the keys of :data:`dgro_lib.data.kk.OFFICIAL_KEYS`),
worded by :mod:`.render` and solved by :mod:`.logic`.
"""

from __future__ import annotations

import random
from typing import Sequence

from dgro_lib.data.kk.logic import LEAF_OPERATORS, _mask_to_assignments, _solution_mask
from dgro_lib.data.kk.render import KNIGHT_KNAVE, SAYING_TEMPLATES, chain_of_thought, render_quiz
from dgro_lib.data.kk.render import _solution_text, _solution_text_format  # the record's two solution texts

__all__ = ["NAMES", "NAME_ORDERS", "random_statements", "generate"]

# How generate() names the people of a puzzle: drawn at random (the official data) or person k = NAMES[k].
NAME_ORDERS = ("random", "positional")

# The 51 distinct names of the official records (test + train, people 2-8), alphabetical.
NAMES: tuple[str, ...] = (
    "Abigail", "Aiden", "Alexander", "Amelia", "Aria", "Aurora", "Ava", "Avery", "Benjamin",
    "Charlotte", "Chloe", "Daniel", "David", "Elizabeth", "Ella", "Emily", "Emma", "Ethan",
    "Evelyn", "Grace", "Harper", "Henry", "Isabella", "Jack", "Jackson", "Jacob", "James",
    "Joseph", "Liam", "Lily", "Logan", "Lucas", "Luke", "Mason", "Matthew", "Mia", "Michael",
    "Noah", "Oliver", "Olivia", "Owen", "Penelope", "Riley", "Samuel", "Scarlett", "Sebastian",
    "Sofia", "Sophia", "Victoria", "William", "Zoey",
)


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
             names: Sequence[str] = NAMES, name_order: str = "random") -> list[dict]:
    """Generate ``n`` unique-solution puzzles in the official record format.

    Statement trees follow the official grammar (see :class:`_Sampler`), puzzles are rejection-sampled
    until exactly one assignment is consistent, and a puzzle (its statement trees) never repeats within
    one call. Each person's name is drawn without replacement from ``names`` and each speech
    template uniformly from :data:`SAYING_TEMPLATES`. ``name_order="positional"`` names person k
    ``names[k]`` in every puzzle instead (the embedded miniature's simplification: a 1M-parameter model
    spends most of an hour of warm-up learning to copy arbitrary names; the statements, solutions and
    random draws are those of ``"random"``, so the two orders give the same puzzles under other names). Everything comes from one ``random.Random(seed)``,
    so the output is a pure function of the arguments, and ``generate(k, m, seed=s)`` is a prefix of
    ``generate(k, m', seed=s)`` for ``m <= m'``. Different seeds give independent puzzle streams, which
    can still share a puzzle by chance for 2-3 people (deduplicate across splits when that matters).

    Returns:
      ``n`` dicts with exactly :data:`dgro_lib.data.kk.OFFICIAL_KEYS` (``solution`` a list of bool,
      ``statements`` the Python-literal string, ``index`` 0..n-1).

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
    if name_order not in NAME_ORDERS:
        raise ValueError(f"name_order must be one of {', '.join(NAME_ORDERS)}, got {name_order!r}")
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
        chosen = rng.sample(names, n_people)  # drawn in both orders, so the rng stream is the same
        if name_order == "positional":
            chosen = names[:n_people]
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


def random_statements(rng: random.Random, n_people: int, *, depth: int = 2, width: int = 2) -> tuple:
    """One statement tree per person, drawn as :func:`generate` draws them, without the unique-solution filter."""
    return _Sampler(rng, n_people, depth, width).puzzle()
