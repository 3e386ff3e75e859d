"""Reward schemes: DGRO's Eq. 12 weighted sum (Table 4 ranges) and Logic-RL's K&K reward.

DGRO (paper §4.1, Eq. 12; Appendix G.1, Table 4)::

    r = c_f * r_f + c_corr * r_corr + c_com * r_com,    r_f, r_corr, r_com in {-1, +1}

r_f is format correctness, r_corr answer correctness, r_com answer completeness. A
response with a bad format scores -1 on all three. Table 4 uses three coefficient
sets, which are the named schemes here:

=======  =====  ======  =====  =========  =====  ==========  ==========
scheme   c_f    c_corr  c_com  all right  wrong  incomplete  bad format
=======  =====  ======  =====  =========  =====  ==========  ==========
[-1,1]   0.4    0.5     0.1     1.0        0.0   -0.2        -1.0
[-3,3]   1.0    1.75    0.25    3.0       -0.5   -1.0        -3.0
[-5,5]   2.0    2.5     0.5     5.0        0.0   -1.0        -5.0
=======  =====  ======  =====  =========  =====  ==========  ==========

The paper (§4.3) reports "empirical variances" 0.5075, 4.6719, 12.6875 for the three
ranges. These are exactly the population variances of the four Table-4 values weighted
equally (one response of each category). They are not variances measured during
training. [-5,5] is exactly 5 x [-1,1], so its variance is exactly 25 times larger.
[-3,3] is not a multiple of [-1,1], so its ratio to [-1,1] depends on the mix of
categories (9.2 for the uniform mix).

Logic-RL's K&K reward ("logic-rl", Unakar/Logic-RL ``verl/utils/reward_score/kk.py``,
``compute_score``) is the reference DGRO compares against: a format score of +1 or -1,
plus an answer score of +2 when exactly right, -1.5 when parsed but wrong, and -2 when
the answer cannot be parsed or the format is bad. The total lies in [-3, 3].
"Unparsable" follows Logic-RL's ``parse_model_answer``: a person with no
"NAME is a knight/knave" statement, or a knight/knave word count that differs from the
number of people (see :class:`Outcome`). With the miscount counted as incomplete, the
``[-3,3]`` scheme and Logic-RL's reward agree on every outcome.

``"accuracy"`` (:class:`AccuracyScheme`) is DCPO's reward: 1.0 for a correct answer, 0.0
otherwise, with the format not judged (597358816/DCPO ``examples/score_function/math.py``).

Other modules can add outcome categories through :class:`Outcome`. Each scheme maps an
outcome to a float with ``score(outcome)``.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Mapping, Union

__all__ = [
    "Outcome",
    "outcome_components",
    "RewardScheme",
    "LogicRLScheme",
    "LOGIC_RL",
    "AccuracyScheme",
    "ACCURACY",
    "requires_format",
    "SCHEMES",
    "get_scheme",
    "Scheme",
]


class Outcome(str, enum.Enum):
    """How a response is classified by a rule-based verifier (ordered from best to worst).

    * ``CORRECT``: format ok, every person's role stated, and all roles right.
    * ``WRONG``: format ok and complete, but some stated role is wrong.
    * ``MISCOUNT``: format ok and every person's role stated, but the answer mentions
      "knight"/"knave" a different number of times than there are people (Logic-RL's
      extra check, e.g. a hedged or repeated answer). Eq. 12 counts it as *incomplete*
      (r_corr = r_com = -1), as Logic-RL counts it *unparsable* (-2); the reasons are in
      :mod:`dgro_lib.rewards.kk`.
    * ``INCOMPLETE``: format ok but at least one person has no stated role
      (r_corr = r_com = -1; Logic-RL: unparsable, -2).
    * ``BAD_FORMAT``: the tag structure is violated (all of r_f, r_corr, r_com = -1).
    """

    CORRECT = "correct"
    WRONG = "wrong"
    MISCOUNT = "miscount"
    INCOMPLETE = "incomplete"
    BAD_FORMAT = "bad_format"


_COMPONENTS: dict[Outcome, tuple[int, int, int]] = {
    Outcome.CORRECT: (1, 1, 1),
    Outcome.WRONG: (1, -1, 1),
    Outcome.MISCOUNT: (1, -1, -1),  # incomplete: see Outcome and dgro_lib.rewards.kk
    Outcome.INCOMPLETE: (1, -1, -1),
    Outcome.BAD_FORMAT: (-1, -1, -1),
}


def outcome_components(outcome: Outcome | str) -> tuple[int, int, int]:
    """The Eq. 12 binary scores ``(r_f, r_corr, r_com)`` of an outcome, each in {-1, +1}."""
    return _COMPONENTS[Outcome(outcome)]


def _check_coef(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) and not hasattr(value, "__float__"):
        raise TypeError(f"RewardScheme.{name} must be a real number, got {type(value).__name__}: {value!r}")
    v = float(value)
    if not math.isfinite(v):
        raise ValueError(f"RewardScheme.{name} must be finite, got {value!r}")
    if v < 0:
        raise ValueError(
            f"RewardScheme.{name} must be >= 0 (Eq. 12 weights; a negative weight would reward failure), got {value!r}"
        )
    return v


def _exact(v: float) -> Decimal:
    # The shortest decimal that round-trips to v. This keeps 0.4 - 0.5 + 0.1 at exactly 0.0.
    return Decimal(repr(v))


@dataclass(frozen=True)
class RewardScheme:
    """DGRO's Eq. 12 reward ``r = c_f*r_f + c_corr*r_corr + c_com*r_com`` (Table 4 when named).

    Coefficients must be finite and >= 0; a negative one raises ValueError naming the
    field. ``name`` is for display and logging only and is left out of equality, so
    ``RewardScheme(1, 1.75, 0.25) == SCHEMES["[-3,3]"]``. An unnamed scheme gets the name
    ``"(c_f,c_corr,c_com)"``.

    Deviation (numerics only): the weighted sum is computed exactly in decimal from the
    coefficients' shortest repr, then rounded once to float. Table-4 values therefore
    come out exact (``[-1,1]`` wrong answer = 0.0, not 1.4e-17), and every reward lies
    inside ``bounds``.
    """

    c_f: float
    c_corr: float
    c_com: float
    name: str = field(default="", compare=False)
    _table: dict = field(init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        for fname in ("c_f", "c_corr", "c_com"):
            object.__setattr__(self, fname, _check_coef(fname, getattr(self, fname)))
        if not isinstance(self.name, str):
            raise TypeError(f"RewardScheme.name must be a str, got {type(self.name).__name__}")
        if not self.name:
            object.__setattr__(self, "name", f"({self.c_f:g},{self.c_corr:g},{self.c_com:g})")
        coefs = (_exact(self.c_f), _exact(self.c_corr), _exact(self.c_com))
        table = {}
        for rf in (-1, 1):
            for rc in (-1, 1):
                for rm in (-1, 1):
                    table[(rf, rc, rm)] = float(coefs[0] * rf + coefs[1] * rc + coefs[2] * rm)
        object.__setattr__(self, "_table", table)

    @property
    def coefficients(self) -> tuple[float, float, float]:
        """``(c_f, c_corr, c_com)``."""
        return (self.c_f, self.c_corr, self.c_com)

    def reward(self, r_f: int, r_corr: int, r_com: int) -> float:
        """Eq. 12 for binary scores ``r_f, r_corr, r_com``, each -1 or +1 (ValueError otherwise)."""
        key = (r_f, r_corr, r_com)
        for argname, v in zip(("r_f", "r_corr", "r_com"), key):
            if isinstance(v, bool) or v not in (-1, 1):
                raise ValueError(f"{argname} must be -1 or +1 (Eq. 12 binary score), got {v!r}")
        return self._table[(int(r_f), int(r_corr), int(r_com))]

    def score(self, outcome: Outcome | str) -> float:
        """The reward of an :class:`Outcome` (its Eq. 12 components, weighted)."""
        return self._table[outcome_components(outcome)]

    @property
    def bounds(self) -> tuple[float, float]:
        """``(min, max)`` = (bad format, all right) = ``(-(c_f+c_corr+c_com), c_f+c_corr+c_com)``."""
        return (self._table[(-1, -1, -1)], self._table[(1, 1, 1)])

    def category_rewards(self) -> dict[str, float]:
        """The four Table-4 columns: ``all_right``, ``wrong``, ``incomplete``, ``bad_format``."""
        return {
            "all_right": self.score(Outcome.CORRECT),
            "wrong": self.score(Outcome.WRONG),
            "incomplete": self.score(Outcome.INCOMPLETE),
            "bad_format": self.score(Outcome.BAD_FORMAT),
        }


@dataclass(frozen=True)
class LogicRLScheme:
    """Logic-RL's K&K reward: format (+1 or -1) plus answer (+2 exact, -1.5 wrong, -2 unparsable).

    The rules follow Logic-RL's ``compute_score`` (Unakar/Logic-RL,
    ``verl/utils/reward_score/kk.py``):

    ==============  ======  ======  =====
    outcome         format  answer  total
    ==============  ======  ======  =====
    CORRECT          +1      +2      3.0
    WRONG            +1     -1.5    -0.5
    MISCOUNT         +1     -2      -1.0   (parse_model_answer returns None)
    INCOMPLETE       +1     -2      -1.0   (parse_model_answer returns None)
    BAD_FORMAT       -1     -2      -3.0   (answer never parsed)
    ==============  ======  ======  =====

    Deviation from the brief that introduced this scheme: that brief scored an incomplete
    answer as "parsed but wrong" (-1.5). Logic-RL's code returns ``None`` from
    ``parse_model_answer`` when a name is missing, so it scores -2, and that is followed
    here.
    """

    format_reward: float = 1.0
    correct_reward: float = 2.0
    wrong_reward: float = -1.5
    unparsable_reward: float = -2.0
    name: str = "logic-rl"

    def score(self, outcome: Outcome | str) -> float:
        """Format score plus answer score for an :class:`Outcome`."""
        o = Outcome(outcome)
        if o is Outcome.BAD_FORMAT:
            return float(_exact(-abs(self.format_reward)) + _exact(self.unparsable_reward))
        answer = {
            Outcome.CORRECT: self.correct_reward,
            Outcome.WRONG: self.wrong_reward,
        }.get(o, self.unparsable_reward)
        return float(_exact(self.format_reward) + _exact(answer))

    @property
    def bounds(self) -> tuple[float, float]:
        """``(min, max)`` over all outcomes; (-3.0, 3.0) with the defaults."""
        vals = [self.score(o) for o in Outcome]
        return (min(vals), max(vals))

    def category_rewards(self) -> dict[str, float]:
        """Totals for the Table-4 columns (plus ``miscount``, which Logic-RL scores as unparsable)."""
        return _columns(self)


LOGIC_RL = LogicRLScheme()


def _columns(scheme: Any) -> dict[str, float]:
    """A scheme's scores of the Table-4 columns, plus ``miscount``."""
    cols = {"all_right": Outcome.CORRECT, "wrong": Outcome.WRONG, "incomplete": Outcome.INCOMPLETE,
            "bad_format": Outcome.BAD_FORMAT, "miscount": Outcome.MISCOUNT}
    return {k: scheme.score(o) for k, o in cols.items()}


@dataclass(frozen=True)
class AccuracyScheme:
    """Accuracy only: 1.0 when the answer is correct, 0.0 otherwise (wrong, incomplete, no answer).

    This is DCPO's reward. The authors' score function (597358816/DCPO, commit
    33f8073e302db6cc04a1e064df89242ba8f236b0, ``examples/score_function/math.py``,
    ``math_compute_score``, the one ``examples/config.yaml`` uses) returns
    ``overall = accuracy``; its format score is commented out. Its accuracy is
    ``grade_answer(extract_boxed_content(response), ground_truth)`` from ``mathruler``: the
    content of the *last* ``\\boxed{`` anywhere in the response (a box left open gives the
    string "None", so no answer), graded against the reference. No think or answer tags
    are required.

    With ``requires_format=False`` (the registered ``"accuracy"`` scheme) the reward
    functions follow that rule and do not judge the format:

    * math (:func:`dgro_lib.rewards.math.math_outcome` with ``require_format=False``): the
      last ``\\boxed{...}`` anywhere in the completion. A last box that never closes means
      no answer, and the answer tag is not read. Deviation: equivalence is math-verify's,
      as in the other schemes, not mathruler's ``grade_answer``.
    * K&K (:func:`dgro_lib.rewards.kk.kk_outcome` with ``require_format=False``): the
      last ``<answer>...</answer>`` block anywhere, parsed as usual. DCPO has no K&K
      scorer; this applies the same rule (answer only, format not judged).

    So 1.0 means the answer is right even when the think/answer tags are malformed.
    ``AccuracyScheme(requires_format=True)`` is the strict variant: 1.0 exactly when the
    outcome of the format-checking verifier is ``CORRECT``.
    """

    requires_format: bool = False
    name: str = "accuracy"

    def score(self, outcome: Outcome | str) -> float:
        """1.0 for ``CORRECT``, 0.0 for every other :class:`Outcome`."""
        return 1.0 if Outcome(outcome) is Outcome.CORRECT else 0.0

    @property
    def bounds(self) -> tuple[float, float]:
        """``(0.0, 1.0)``."""
        return (0.0, 1.0)

    def category_rewards(self) -> dict[str, float]:
        """Scores of the Table-4 columns, plus ``miscount``: 1.0 for ``all_right``, 0.0 otherwise."""
        return _columns(self)


ACCURACY = AccuracyScheme()

Scheme = Union[RewardScheme, LogicRLScheme, AccuracyScheme]


def requires_format(scheme: Any) -> bool:
    """Whether the reward functions check the format before judging the answer for ``scheme``.

    True for every scheme except an :class:`AccuracyScheme` built with ``requires_format=False``
    (such as the registered ``"accuracy"``).
    """
    return bool(getattr(scheme, "requires_format", True))

#: Named schemes. Table 4's three DGRO ranges, ``"logic-rl"``, and ``"accuracy"`` (DCPO's
#: accuracy-only reward, :data:`ACCURACY`). The Logic-RL entry
#: is the marker string ``"logic-rl"``; ``get_scheme`` turns it into :data:`LOGIC_RL`.
SCHEMES: dict[str, Union[RewardScheme, AccuracyScheme, str]] = {
    "[-1,1]": RewardScheme(0.4, 0.5, 0.1, name="[-1,1]"),
    "[-3,3]": RewardScheme(1.0, 1.75, 0.25, name="[-3,3]"),
    "[-5,5]": RewardScheme(2.0, 2.5, 0.5, name="[-5,5]"),
    "logic-rl": "logic-rl",
    "accuracy": ACCURACY,
}


def _normalise_name(name: str) -> str:
    return "".join(name.split()).lower().replace("_", "-")


def get_scheme(name_or_tuple: Any) -> Scheme:
    """Resolve a scheme specification into a :class:`RewardScheme`, :class:`LogicRLScheme` or :class:`AccuracyScheme`.

    Accepted inputs:

    * a name from :data:`SCHEMES` (``"[-1,1]"``, ``"[-3,3]"``, ``"[-5,5]"``, ``"logic-rl"``,
      ``"accuracy"``). Whitespace, case and ``_``/``-`` are ignored, so ``"[-3, 3]"`` and
      ``"Logic_RL"`` work too.
    * a ``(c_f, c_corr, c_com)`` tuple or list, or a mapping with those keys. When the
      coefficients equal a Table-4 scheme, that named scheme is returned.
    * a :class:`RewardScheme`, :class:`LogicRLScheme` or :class:`AccuracyScheme` instance,
      returned unchanged.

    An unknown name raises ValueError listing the valid names. A malformed tuple raises
    ValueError or TypeError, and a negative coefficient raises ValueError naming the field.
    """
    if isinstance(name_or_tuple, (RewardScheme, LogicRLScheme, AccuracyScheme)):
        return name_or_tuple
    if isinstance(name_or_tuple, str):
        key = _normalise_name(name_or_tuple)
        for k, v in SCHEMES.items():
            if _normalise_name(k) == key:
                if isinstance(v, str):
                    if v == "logic-rl":
                        return LOGIC_RL
                    return get_scheme(v)
                return v
        raise ValueError(f"unknown reward scheme {name_or_tuple!r}; valid names: {sorted(SCHEMES)} "
                         "or a (c_f, c_corr, c_com) tuple")
    if isinstance(name_or_tuple, Mapping):
        missing = {"c_f", "c_corr", "c_com"} - set(name_or_tuple)
        extra = set(name_or_tuple) - {"c_f", "c_corr", "c_com", "name"}
        if missing or extra:
            raise ValueError(
                f"a scheme mapping needs exactly the keys c_f, c_corr, c_com (optional name); "
                f"missing {sorted(missing)}, unknown {sorted(map(str, extra))}"
            )
        scheme = RewardScheme(**dict(name_or_tuple))
    elif isinstance(name_or_tuple, (tuple, list)):
        if len(name_or_tuple) != 3:
            raise ValueError(
                f"a scheme tuple must be (c_f, c_corr, c_com), got {len(name_or_tuple)} values: {name_or_tuple!r}"
            )
        scheme = RewardScheme(*name_or_tuple)
    else:
        raise TypeError(
            f"scheme must be a name {sorted(SCHEMES)}, a (c_f, c_corr, c_com) tuple, or a RewardScheme; "
            f"got {type(name_or_tuple).__name__}"
        )
    if isinstance(name_or_tuple, Mapping) and name_or_tuple.get("name"):
        return scheme
    for v in SCHEMES.values():
        if isinstance(v, RewardScheme) and v == scheme:
            return v
    return scheme
