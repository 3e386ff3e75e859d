"""Tests for dgro_lib.rewards: DGRO Eq. 12 / Table 4 schemes, Logic-RL's K&K reward, format rules, totality."""

from __future__ import annotations

import math
import pickle
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dgro_lib.rewards import (
    LOGIC_RL,
    SCHEMES,
    KKRewardFunc,
    LogicRLScheme,
    Outcome,
    RewardScheme,
    check_format,
    completion_text,
    extract_answer,
    get_scheme,
    kk_components,
    kk_is_correct,
    kk_outcome,
    kk_reward,
    kk_reward_func,
    parse_ground_truth,
)

NAMES = ["Zoey", "Oliver", "Ava"]
SOL = [False, True, True]  # True = knight (official K&K records)


def answer_block(roles: dict[str, str]) -> str:
    return "\n".join(f"({i + 1}) {n} is a {r}" for i, (n, r) in enumerate(roles.items()))


def completion(body: str, *, think_in_prompt: bool = True, reasoning: str = "Let me check each case.") -> str:
    head = "" if think_in_prompt else "<think>"
    return f"{head}{reasoning}</think>\n<answer>{body}</answer>"


RIGHT = completion(answer_block({"Zoey": "knave", "Oliver": "knight", "Ava": "knight"}))
WRONG = completion(answer_block({"Zoey": "knight", "Oliver": "knight", "Ava": "knight"}))
INCOMPLETE = completion(answer_block({"Zoey": "knave", "Oliver": "knight"}))
BAD_FORMAT = "Let me check each case. <answer>" + answer_block({"Zoey": "knave", "Oliver": "knight", "Ava": "knight"})
# Complete and right, but a fourth role word (Logic-RL's count check fails).
MISCOUNT = completion(answer_block({"Zoey": "knave", "Oliver": "knight", "Ava": "knight"}) + "\nAll knights agree.")

CASES = {"all_right": RIGHT, "wrong": WRONG, "incomplete": INCOMPLETE, "bad_format": BAD_FORMAT}
# Eq. 12 binary scores per Table-4 column (r_f, r_corr, r_com): the paper's §4.1 bullet list.
R_VECTORS = {
    "all_right": (1, 1, 1),
    "wrong": (1, -1, 1),
    "incomplete": (1, -1, -1),
    "bad_format": (-1, -1, -1),
}
# Table 4 of the DGRO paper, frozen on purpose as the published reference.
TABLE4 = {
    "[-1,1]": {"all_right": 1.0, "wrong": 0.0, "incomplete": -0.2, "bad_format": -1.0},
    "[-3,3]": {"all_right": 3.0, "wrong": -0.5, "incomplete": -1.0, "bad_format": -3.0},
    "[-5,5]": {"all_right": 5.0, "wrong": 0.0, "incomplete": -1.0, "bad_format": -5.0},
}
# Table 4 / Appendix G.1 coefficients (c_f, c_corr, c_com).
COEFS = {"[-1,1]": (0.4, 0.5, 0.1), "[-3,3]": (1.0, 1.75, 0.25), "[-5,5]": (2.0, 2.5, 0.5)}
# DGRO §4.3: "empirical variances of 0.5075, 4.6719, and 12.6875".
PAPER_VARIANCES = {"[-1,1]": 0.5075, "[-3,3]": 4.6719, "[-5,5]": 12.6875}


def eq12(coefs, r):
    return sum(c * x for c, x in zip(coefs, r))


# --------------------------------------------------------------------------------------
# Eq. 12 / Table 4
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("scheme", sorted(TABLE4))
@pytest.mark.parametrize("category", sorted(CASES))
def test_table4_values_follow_eq12(scheme, category):
    got = kk_reward(CASES[category], names=NAMES, solution=SOL, scheme=scheme)
    expected = eq12(COEFS[scheme], R_VECTORS[category])
    assert got == pytest.approx(expected, abs=1e-12)
    assert got == pytest.approx(TABLE4[scheme][category], abs=1e-12)
    assert kk_components(CASES[category], names=NAMES, solution=SOL) == R_VECTORS[category]


@pytest.mark.parametrize("scheme", sorted(TABLE4))
def test_scheme_objects(scheme):
    s = get_scheme(scheme)
    assert isinstance(s, RewardScheme)
    assert s is SCHEMES[scheme]
    assert s.name == scheme
    assert s.coefficients == COEFS[scheme]
    total = sum(COEFS[scheme])
    assert s.bounds == pytest.approx((-total, total))
    assert s.category_rewards() == pytest.approx(TABLE4[scheme])
    for cat, r in R_VECTORS.items():
        assert s.reward(*r) == pytest.approx(eq12(COEFS[scheme], r))
    # Exact decimal arithmetic: Table-4 zeros are exactly zero.
    assert s.score(Outcome.WRONG) == TABLE4[scheme]["wrong"]


def test_custom_tuple_and_mapping_schemes():
    s = get_scheme((1.0, 2.0, 0.5))
    assert isinstance(s, RewardScheme) and s.bounds == (-3.5, 3.5)
    assert kk_reward(WRONG, names=NAMES, solution=SOL, scheme=(1.0, 2.0, 0.5)) == pytest.approx(1 - 2 + 0.5)
    assert get_scheme({"c_f": 1, "c_corr": 2, "c_com": 0.5}) == s
    # A tuple equal to a Table-4 scheme resolves to the named one.
    assert get_scheme((1, 1.75, 0.25)) is SCHEMES["[-3,3]"]
    assert get_scheme([0.4, 0.5, 0.1]).name == "[-1,1]"
    assert get_scheme("[-3, 3]") is SCHEMES["[-3,3]"]
    assert get_scheme(s) is s
    assert RewardScheme(1, 1.75, 0.25) == SCHEMES["[-3,3]"]
    assert RewardScheme(0, 0, 0).bounds == (0.0, 0.0)
    with pytest.raises(AttributeError):  # frozen dataclass
        s.c_f = 3.0  # type: ignore[misc]


@pytest.mark.parametrize("field,args", [("c_f", (-1, 1, 1)), ("c_corr", (1, -0.5, 1)), ("c_com", (1, 1, -1e-9))])
def test_negative_coefficient_names_field(field, args):
    with pytest.raises(ValueError, match=field):
        RewardScheme(*args)
    with pytest.raises(ValueError, match=field):
        get_scheme(args)


def test_bad_scheme_specs():
    with pytest.raises(ValueError) as ei:
        get_scheme("[-2,2]")
    for name in SCHEMES:
        assert name in str(ei.value)
    with pytest.raises(ValueError):
        get_scheme((1, 2))
    with pytest.raises(ValueError):
        RewardScheme(float("nan"), 1, 1)
    with pytest.raises(TypeError):
        RewardScheme("1", 1, 1)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        get_scheme(3)
    with pytest.raises(ValueError):
        get_scheme({"c_f": 1, "c_corr": 1})
    with pytest.raises(ValueError, match="r_corr"):
        SCHEMES["[-3,3]"].reward(1, 0, 1)


# --------------------------------------------------------------------------------------
# Logic-RL's reward
# --------------------------------------------------------------------------------------


def test_logic_rl_scheme():
    assert SCHEMES["logic-rl"] == "logic-rl"
    s = get_scheme("logic-rl")
    assert s is LOGIC_RL and isinstance(s, LogicRLScheme)
    assert s.bounds == (-3.0, 3.0)
    fmt, right, wrong, unparsable = 1.0, 2.0, -1.5, -2.0
    expect = {
        RIGHT: fmt + right,
        WRONG: fmt + wrong,
        INCOMPLETE: fmt + unparsable,  # Logic-RL parse_model_answer -> None
        MISCOUNT: fmt + unparsable,  # count of knight/knave words != number of people -> None
        BAD_FORMAT: -fmt + unparsable,
        completion(""): fmt + unparsable,  # empty answer
        "": -fmt + unparsable,
    }
    for c, v in expect.items():
        assert kk_reward(c, names=NAMES, solution=SOL, scheme="logic-rl") == v
        assert kk_reward(c, names=NAMES, solution=SOL, scheme="Logic_RL") == v
    # On the four Table-4 columns Logic-RL's totals coincide with DGRO's [-3,3] scheme.
    assert {k: v for k, v in s.category_rewards().items() if k != "miscount"} == TABLE4["[-3,3]"]


def test_miscount_is_incomplete_under_eq12():
    # DGRO's [-3,3] column values are Logic-RL's totals, and Logic-RL's "incomplete" (-2 answer score) is
    # parse_model_answer returning None, which the role-word count check also does (see kk.py's docstring).
    assert kk_outcome(MISCOUNT, names=NAMES, solution=SOL) is Outcome.MISCOUNT
    assert kk_components(MISCOUNT, names=NAMES, solution=SOL) == (1, -1, -1)
    assert kk_reward(MISCOUNT, names=NAMES, solution=SOL, scheme="[-3,3]") == -1.0
    assert kk_reward(MISCOUNT, names=NAMES, solution=SOL, scheme="[-1,1]") == -0.2
    assert kk_reward(MISCOUNT, names=NAMES, solution=SOL, scheme="[-5,5]") == -1.0
    assert not kk_is_correct(MISCOUNT, names=NAMES, solution=SOL)
    # A hedged answer (two role words for one person) is incomplete, as in Logic-RL.
    hedge = completion("Zoey is a knave or a knight, Oliver is a knight, Ava is a knight")
    assert kk_reward(hedge, names=NAMES, solution=SOL, scheme="[-3,3]") == -1.0
    # With that choice [-3,3] and Logic-RL's reward agree on every outcome.
    assert all(get_scheme("[-3,3]").score(o) == LOGIC_RL.score(o) for o in Outcome)
    # Too few role words while every name is stated cannot happen; a missing name is incomplete,
    # even if the count happens to match.
    c = completion("Zoey is a knave, Oliver is a knight, and somebody is a knight")
    assert kk_outcome(c, names=NAMES, solution=SOL) is Outcome.INCOMPLETE


# --------------------------------------------------------------------------------------
# format
# --------------------------------------------------------------------------------------

A = answer_block({"Zoey": "knave", "Oliver": "knight", "Ava": "knight"})
FORMAT_CASES = [
    # (completion, think_in_prompt, format ok?)
    (f"r</think><answer>{A}</answer>", True, True),
    (f"  \n r \n</think>\n\n<answer>\n{A}\n</answer>\n  ", True, True),
    (f"</think><answer>{A}</answer> trailing text", True, True),
    (f"<think>r</think><answer>{A}</answer>", True, False),  # <think> already in the prompt
    (f"<think>r</think><answer>{A}</answer>", False, True),
    (f"r</think><answer>{A}</answer>", False, False),  # missing <think>
    (f"<think>r</think><think>r</think><answer>{A}</answer>", False, False),
    (f"r</think></think><answer>{A}</answer>", True, False),  # repeated close
    (f"r</think><answer>{A}</answer><answer>{A}</answer>", True, False),  # repeated answer
    (f"r<answer>{A}</answer>", True, False),  # missing </think>
    (f"r</think>{A}</answer>", True, False),  # missing <answer>
    (f"r</think><answer>{A}", True, False),  # missing </answer>
    (f"<answer>{A}</answer>r</think>", True, False),  # misordered
    (f"r</think></answer>{A}<answer>", True, False),  # answer tags reversed
    (f"</think><think>r<answer>{A}</answer>", False, False),  # think tags reversed
    (f"<think>r<answer>{A}</answer></think>", False, False),  # answer nested in think
    (f"r</think><answer><answer>{A}</answer></answer>", True, False),  # nested answers
    (f"r</THINK><ANSWER>{A}</ANSWER>", True, False),  # tags are case-sensitive
    ("", True, False),
    ("", False, False),
]


@pytest.mark.parametrize("text,tip,ok", FORMAT_CASES)
def test_format_rules(text, tip, ok):
    assert check_format(text, think_in_prompt=tip) is ok
    expected = (TABLE4["[-3,3]"]["all_right"] if ok else TABLE4["[-3,3]"]["bad_format"])
    assert kk_reward(text, names=NAMES, solution=SOL, think_in_prompt=tip) == pytest.approx(expected)
    assert kk_is_correct(text, names=NAMES, solution=SOL, think_in_prompt=tip) is ok


def test_think_in_prompt_false_whole_pipeline():
    c = completion(A, think_in_prompt=False)
    assert kk_reward(c, names=NAMES, solution=SOL, think_in_prompt=False, scheme="[-5,5]") == 5.0
    assert kk_reward(c, names=NAMES, solution=SOL, think_in_prompt=True, scheme="[-5,5]") == -5.0


# --------------------------------------------------------------------------------------
# answer parsing
# --------------------------------------------------------------------------------------


def test_extract_answer_takes_last_block():
    s = "<answer>first</answer> junk <answer> second </answer> tail"
    assert extract_answer(s) == "second"
    assert extract_answer("no tags") is None
    assert extract_answer("</answer><answer>") is None
    assert extract_answer("<answer></answer>") == ""


@pytest.mark.parametrize(
    "body,outcome",
    [
        ("Zoey is a knave, Oliver is a knight, Ava is a knight.", Outcome.CORRECT),
        ("Zoey  is\n a\tKNAVE; Oliver IS A Knight; Ava is a knight", Outcome.CORRECT),  # role words any case
        ("zoey is a knave, Oliver is a knight, Ava is a knight", Outcome.CORRECT),  # names any case (Logic-RL)
        ("ZOEY IS A KNAVE, OLIVER IS A KNIGHT, AVA IS A KNIGHT", Outcome.CORRECT),
        ("Zoey is an knave, Oliver is a knight, Ava is a knight", Outcome.INCOMPLETE),
        ("Zoey was a knave, Oliver is a knight, Ava is a knight", Outcome.INCOMPLETE),
        ("Zoey is a knavery, Oliver is a knight, Ava is a knight", Outcome.INCOMPLETE),  # (?!\w) after role
        ("Zoeyy is a knave, Oliver is a knight, Ava is a knight", Outcome.INCOMPLETE),  # word boundary
        ("Ava is a knight, Oliver is a knight, Zoey is a knave", Outcome.CORRECT),  # any order
        ("Zoey is a knight, Oliver is a knight, Ava is a knight", Outcome.WRONG),
        ("Zoey is a knave, Oliver is a knave, Ava is a knave", Outcome.WRONG),
        ("Zoey is a knave, Oliver is a knight, Ava is a knight, Zoey is a knight", Outcome.MISCOUNT),
        ("Zoey is a knave or a knight, Oliver is a knight, Ava is a knight", Outcome.MISCOUNT),
        ("", Outcome.INCOMPLETE),
        ("I cannot tell.", Outcome.INCOMPLETE),
    ],
)
def test_answer_parsing(body, outcome):
    assert kk_outcome(completion(body), names=NAMES, solution=SOL) is outcome


def test_first_statement_wins():
    names, sol = ["Zoey", "Oliver"], [True, False]
    c = completion("Zoey is a knight (Oliver is a knave)")
    assert kk_is_correct(c, names=names, solution=sol)
    c2 = completion("Oliver is a knight. Zoey is a knight")
    assert kk_outcome(c2, names=names, solution=sol) is Outcome.WRONG


def test_names_with_regex_special_characters_and_overlap():
    names = ["A.", "(x)", "a+b", "[", "\\d", "Ann", "Anna", "Zoë"]
    sol = [True, False, True, False, True, False, True, False]
    roles = {n: ("knight" if r else "knave") for n, r in zip(names, sol)}
    c = completion(answer_block(roles))
    assert kk_is_correct(c, names=names, solution=sol)
    # "(x)" must appear with its parentheses, and "\d" is literal, not a digit class.
    bad = completion(answer_block(roles).replace("(2) (x) is", "(2) x is").replace("\\d", "7"))
    assert kk_outcome(bad, names=names, solution=sol) is Outcome.INCOMPLETE
    # "Anna is a knight" does not state Ann's role.
    only_anna = {k: v for k, v in roles.items() if k != "Ann"}
    assert kk_outcome(completion(answer_block(only_anna)), names=names, solution=sol) is Outcome.INCOMPLETE


def test_names_and_roles_are_case_insensitive_like_logic_rl():
    # Logic-RL 9d2c457 kk.py parse_model_answer: re.compile(rf'\b{name}\b\s+is\s+a\s+\b(knight|knave)\b',
    # re.IGNORECASE), role lowercased: an all-caps correct answer scores 1 + 2 = 3 there.
    caps = completion("(1) ZOEY IS A KNAVE\n(2) OLIVER IS A KNIGHT\n(3) AVA IS A KNIGHT")
    assert kk_outcome(caps, names=NAMES, solution=SOL) is Outcome.CORRECT
    assert kk_reward(caps, names=NAMES, solution=SOL, scheme="logic-rl") == 3.0
    assert kk_reward(caps, names=NAMES, solution=SOL, scheme="[-3,3]") == 3.0
    wrong = completion("zoey is a KNIGHT, oLIVER is a knight, ava Is A Knight")
    assert kk_outcome(wrong, names=NAMES, solution=SOL) is Outcome.WRONG
    # Non-ASCII names fold too ("ZOË" states Zoë's role), and the answer parser reads the ground-truth text.
    assert kk_is_correct(completion("ZOË is a knave, ann is a knight"), names=["Zoë", "Ann"], solution=[False, True])
    assert parse_ground_truth(["Zoey"], "(1) ZOEY is a Knight") == (("Zoey",), (True,))
    # Word boundaries still hold: "ANNA is a knight" does not state Ann's role.
    assert kk_outcome(completion("ANNA is a knight"), names=["Ann"], solution=[True]) is Outcome.INCOMPLETE


def test_kept_where_logic_rl_is_wrong():
    # Logic-RL 9d2c457 extract_solution splits on the first "Assistant:" in prompt+response; when the prompt is
    # a chat template ("<|im_start|>assistant") an "Assistant:" written by the model cuts off its own </think>.
    # We score the completion alone, so the text before it still counts.
    c = "As the Assistant: I reason step by step.</think>\n<answer>" + A + "</answer>"
    assert kk_reward(c, names=NAMES, solution=SOL, scheme="logic-rl") == 3.0
    # Logic-RL's \b{name}\b never matches a name ending in punctuation ("A." then a space); ours does.
    assert kk_reward(completion("A. is a knight, B is a knave"), names=["A.", "B"], solution=[True, False],
                     scheme="logic-rl") == 3.0


def test_ground_truth_forms():
    c = RIGHT
    for sol in (
        SOL,
        tuple(SOL),
        "[False, True, True]",
        ["knave", "knight", "Knight"],
        np.array(SOL),
        [0, 1, 1],
        "(1) Zoey is a knave\n(2) Oliver is a knight\n(3) Ava is a knight",
    ):
        assert kk_is_correct(c, names=NAMES, solution=sol), sol
    assert kk_is_correct(c, names="['Zoey', 'Oliver', 'Ava']", solution=SOL)
    assert kk_is_correct(c, names=np.array(NAMES), solution=SOL)
    assert parse_ground_truth(NAMES, "[False, True, True]") == (tuple(NAMES), (False, True, True))
    with pytest.raises(ValueError):
        parse_ground_truth(NAMES, [True, False])
    with pytest.raises(ValueError):
        parse_ground_truth(["A", "A"], [True, False])
    with pytest.raises(ValueError):
        parse_ground_truth(["A", ""], [True, False])
    with pytest.raises(ValueError):
        parse_ground_truth(["A"], ["maybe"])
    with pytest.raises(TypeError):
        parse_ground_truth("Zoey", [True])


def test_non_str_completion_is_type_error():
    for bad in (None, 3, b"bytes", [{"role": "assistant", "content": RIGHT}]):
        with pytest.raises(TypeError, match="completion"):
            kk_reward(bad, names=NAMES, solution=SOL)  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------
# TRL adapter
# --------------------------------------------------------------------------------------


def test_trl_reward_func_plain_and_conversational():
    f = kk_reward_func()
    assert f.__name__ == "kk_reward_[-3,3]"
    assert kk_reward_func("[-5,5]").__name__ == "kk_reward_[-5,5]"
    assert kk_reward_func("logic-rl").__name__ == "kk_reward_logic-rl"
    assert kk_reward_func((1, 2, 0.5)).__name__ == "kk_reward_(1,2,0.5)"
    comps = [RIGHT, WRONG, INCOMPLETE, BAD_FORMAT]
    conv = [[{"role": "assistant", "content": c}] for c in comps]
    parts = [[{"role": "assistant", "content": [{"type": "text", "text": c}]}] for c in comps]
    n = len(comps)
    expected = [TABLE4["[-3,3]"][k] for k in ("all_right", "wrong", "incomplete", "bad_format")]
    kw = dict(names=[NAMES] * n, solution=[SOL] * n, completion_ids=[[1]] * n, trainer_state=None)
    for cs in (comps, conv, parts):
        out = f(prompts=["p"] * n, completions=cs, **kw)
        assert isinstance(out, list) and all(isinstance(x, float) for x in out)
        assert out == pytest.approx(expected)
    # positional call, and solution as the string form
    assert f(["p"], [RIGHT], [NAMES], [str(SOL)]) == [3.0]
    # think_in_prompt=False
    g = kk_reward_func("[-1,1]", think_in_prompt=False)
    assert g(None, [completion(A, think_in_prompt=False), RIGHT], [NAMES] * 2, [SOL] * 2) == [1.0, -1.0]


def test_trl_reward_func_misc():
    f = kk_reward_func("[-1,1]")
    assert isinstance(f, KKRewardFunc)
    g = pickle.loads(pickle.dumps(f))
    assert g.__name__ == f.__name__ and g(None, [RIGHT], [NAMES], [SOL]) == [1.0]
    with pytest.raises(ValueError):
        f(None, [RIGHT, WRONG], [NAMES], [SOL, SOL])
    with pytest.raises(TypeError, match="completions"):
        f(None, [3], [NAMES], [SOL])
    logged = {}
    out = f(None, [RIGHT, WRONG, WRONG, BAD_FORMAT], [NAMES] * 4, [SOL] * 4,
            log_metric=lambda k, v: logged.__setitem__(k, v))
    assert out == pytest.approx([1.0, 0.0, 0.0, -1.0])
    assert logged["kk_outcome/correct"] == 0.25 and logged["kk_outcome/wrong"] == 0.5
    assert sum(logged.values()) == pytest.approx(1.0)
    assert completion_text({"role": "assistant", "content": "x"}) == "x"
    assert completion_text([{"role": "system", "content": "s"}, {"role": "assistant", "content": "a"}]) == "a"
    assert completion_text([{"role": "assistant", "content": None}]) == ""


# --------------------------------------------------------------------------------------
# reward variance (DGRO §4.3, Table 4, Theorem 3.4)
# --------------------------------------------------------------------------------------


def _mix(counts: dict[str, int]) -> list[str]:
    return [CASES[k] for k, n in counts.items() for _ in range(n)]


def _variance_from_coefficients(coefs, counts) -> float:
    vals = np.array([eq12(coefs, R_VECTORS[k]) for k, n in counts.items() for _ in range(n)])
    return float(vals.var())


@pytest.mark.parametrize(
    "counts",
    [
        {"all_right": 1, "wrong": 1, "incomplete": 1, "bad_format": 1},  # uniform: the paper's numbers
        {"all_right": 3, "wrong": 2, "incomplete": 1, "bad_format": 2},  # one group of G=8
        {"all_right": 10, "wrong": 5, "incomplete": 3, "bad_format": 14},
    ],
)
def test_reward_variance_scales_with_coefficients(counts):
    comps = _mix(counts)
    var = {}
    for name in COEFS:
        r = np.array(kk_reward_func(name)(None, comps, [NAMES] * len(comps), [SOL] * len(comps)))
        var[name] = float(r.var())
        assert var[name] == pytest.approx(_variance_from_coefficients(COEFS[name], counts), rel=1e-12)
    # [-5,5] = 5 x [-1,1] coefficient-wise, so the variance ratio is exactly 5**2.
    k = COEFS["[-5,5]"][0] / COEFS["[-1,1]"][0]
    assert all(math.isclose(a / b, k) for a, b in zip(COEFS["[-5,5]"], COEFS["[-1,1]"]))
    assert var["[-5,5]"] / var["[-1,1]"] == pytest.approx(k**2, rel=1e-9)
    # [-3,3] is not a multiple of [-1,1]; its ratio is "9-ish" (range ratio 3**2 = 9), mix-dependent.
    assert 6.0 < var["[-3,3]"] / var["[-1,1]"] < 12.0
    assert var["[-1,1]"] < var["[-3,3]"] < var["[-5,5]"]
    if set(counts.values()) == {1}:
        # The paper's "empirical variances" are the population variances of the four Table-4 values.
        for name, v in PAPER_VARIANCES.items():
            assert var[name] == pytest.approx(v, abs=1e-4)


# --------------------------------------------------------------------------------------
# totality: any string, in range, never raises, linear time
# --------------------------------------------------------------------------------------

ALL_SCHEMES = [get_scheme(n) for n in SCHEMES] + [get_scheme((0.3, 2.0, 0.0))]
PROP_NAMES = ["Zoey", "Oliver", "A.", "(x)", "a+b", "\\d", "Zoë", "[", "*", "Ann", "Anna"]
FRAGMENTS = [
    "<think>", "</think>", "<answer>", "</answer>", "<answer", "answer>", "</", "<", ">", " is a ",
    "knight", "knave", "Knight", "KNAVE", "knights", " is ", " a ", "\n", " ", "\t", "(1) ", ",", ".",
    "\\", "\\b", "(?", "*", "+", "[", "]", "{0,}", "\u00a0", "\u200b", "é", "\U0001f600", "\x00",
] + PROP_NAMES


fragment_text = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=4)), max_size=40).map("".join)
wrapped = st.tuples(st.text(max_size=20), fragment_text, st.text(max_size=20)).map(
    lambda t: f"{t[0]}</think> <answer>{t[1]}</answer>{t[2]}"
)
huge = st.tuples(
    st.one_of(fragment_text, st.text(max_size=8)),
    st.one_of(st.integers(1, 2000), st.just(100_000)),
).map(lambda t: ((t[0] or "x") * t[1])[:1_100_000])
any_text = st.one_of(st.text(), st.text(alphabet=st.characters(), max_size=200), fragment_text, wrapped, huge)


_names_st = st.lists(st.sampled_from(PROP_NAMES), min_size=1, max_size=5, unique=True)
_role_st = st.sampled_from(["knight", "knave"] * 4 + ["Knight", "KNAVE", "knights", "knavish"])
_sep_st = st.sampled_from([" "] * 6 + ["  ", "\n", "\t", "\u00a0", "", "_"])
_join_st = st.one_of(
    st.sampled_from(["\n", ", "] * 3),
    st.sampled_from(["; ", " and ", " or a knave ", " (not a knight) "]),
    fragment_text,
)
_head_st = {
    True: st.sampled_from([""] * 6 + ["<think>", "<answer>x</answer>"]),
    False: st.sampled_from(["<think>"] * 6 + ["", "<answer>x</answer>"]),
}
_mid_st = st.sampled_from(["</think>\n<answer>"] * 4 + ["</think><answer>", "<answer>", "</think>"])
_tail_st = st.sampled_from(["</answer>"] * 4 + ["", "</answer></answer>", "</answer> knight"])
_short_text = st.text(max_size=10)


@st.composite
def kk_case(draw):
    """(completion, names, solution, think_in_prompt): arbitrary text, or an answer built from the puzzle's names."""
    names = draw(_names_st)
    sol = draw(st.lists(st.booleans(), min_size=len(names), max_size=len(names)))
    tip = draw(st.booleans())
    if draw(st.booleans()):
        return draw(any_text), names, sol, tip
    pieces = [draw(_head_st[tip]), draw(_short_text), draw(_mid_st)]
    for n in names:
        if draw(st.integers(0, 9)) == 9:
            continue  # leave someone out -> incomplete
        pieces.append(f"{n}{draw(_sep_st)}is a {draw(_role_st)}")
        pieces.append(draw(_join_st))
    pieces.append(draw(_tail_st))
    return "".join(pieces), names, sol, tip


@settings(max_examples=2000, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(case=kk_case())
def test_property_total_and_in_range(case):
    text, names, sol, tip = case
    outcome = kk_outcome(text, names=names, solution=sol, think_in_prompt=tip)
    assert isinstance(outcome, Outcome)
    comps = kk_components(text, names=names, solution=sol, think_in_prompt=tip)
    assert all(c in (-1, 1) for c in comps)
    assert isinstance(kk_is_correct(text, names=names, solution=sol, think_in_prompt=tip), bool)
    for s in ALL_SCHEMES:
        r = s.score(outcome)
        lo, hi = s.bounds
        assert isinstance(r, float) and math.isfinite(r) and lo <= r <= hi
        if isinstance(s, RewardScheme):
            assert r == s.reward(*comps)
    r = kk_reward(text, names=names, solution=sol, scheme="[-5,5]", think_in_prompt=tip)
    assert -5.0 <= r <= 5.0
    if outcome is Outcome.CORRECT:
        assert check_format(text, think_in_prompt=tip)


def _timed(text: str, names=NAMES, sol=SOL) -> float:
    t0 = time.perf_counter()
    for name in ("[-1,1]", "logic-rl"):
        r = kk_reward(text, names=names, solution=sol, scheme=name)
        lo, hi = get_scheme(name).bounds
        assert lo <= r <= hi
    kk_reward_func()(None, [[{"role": "assistant", "content": text}]], [names], [sol])
    return time.perf_counter() - t0


@pytest.mark.parametrize(
    "build",
    [
        lambda n: "x" * n,
        lambda n: "\U0001f600" * n,
        lambda n: "Zoey" + " " * n,  # \s+ with no "is" afterwards
        lambda n: "</think><answer>Zoey is" + " " * n + "</answer>",
        lambda n: "</think><answer>" + "Zoey is a " * (n // 10) + "</answer>",
        lambda n: "</think><answer>" + "Zoey " * (n // 5) + "</answer>",
        lambda n: "<answer>" * (n // 8),
        lambda n: "</think><answer>" + "knight" * (n // 6) + "</answer>",
        lambda n: "</think><answer>" + "A. " * (n // 3) + "</answer>",
    ],
)
def test_megabyte_inputs_are_fast(build):
    text = build(1_000_000)
    names = NAMES + ["A."]
    sol = SOL + [True]
    assert _timed(text, names, sol) < 5.0  # linear scans: milliseconds in practice


def test_megabyte_correct_answer_after_long_reasoning():
    text = "Let me think. " * 75_000 + "</think>\n<answer>" + A + "</answer>"
    assert len(text) > 1_000_000
    assert kk_reward(text, names=NAMES, solution=SOL, scheme="[-5,5]") == 5.0


# --------------------------------------------------------------------------------------
# accuracy-only scheme (DCPO's reward: 597358816/DCPO examples/score_function/math.py)
# --------------------------------------------------------------------------------------

KK_ACCURACY_CASES = {
    # completion: 1[correct]
    RIGHT: 1.0,
    completion(A, think_in_prompt=False): 1.0,  # an extra <think>: bad format, right answer
    f"<answer>{A}</answer>": 1.0,  # no think block at all: format is not judged
    f"r</think><answer>{A}</answer><answer>{A}</answer>": 1.0,  # repeated answer block: the last one counts
    completion("ZOEY IS A KNAVE, OLIVER IS A KNIGHT, AVA IS A KNIGHT"): 1.0,
    WRONG: 0.0,
    INCOMPLETE: 0.0,
    MISCOUNT: 0.0,
    BAD_FORMAT: 0.0,  # no closing </answer>: no answer at all
    f"r</think>{A}": 0.0,  # no answer tags
    completion(""): 0.0,
    "": 0.0,
    "\x00\U0001f600 <answer></answer> knight knave }{": 0.0,
}


def test_accuracy_scheme_is_registered_and_binary():
    from dgro_lib.rewards import ACCURACY, AccuracyScheme

    s = get_scheme("accuracy")
    assert s is ACCURACY and isinstance(s, AccuracyScheme) and s.name == "accuracy"
    assert get_scheme(" Accuracy ") is s and "accuracy" in SCHEMES
    assert s.bounds == (0.0, 1.0)
    assert not s.requires_format
    assert {o: s.score(o) for o in Outcome} == {o: float(o is Outcome.CORRECT) for o in Outcome}
    assert s.category_rewards() == {"all_right": 1.0, "wrong": 0.0, "incomplete": 0.0, "bad_format": 0.0,
                                    "miscount": 0.0}
    # Other schemes are unchanged by its registration.
    assert get_scheme("[-1,1]").category_rewards() == TABLE4["[-1,1]"]


def test_accuracy_scheme_on_kk_completions():
    for c, expected in KK_ACCURACY_CASES.items():
        r = kk_reward(c, names=NAMES, solution=SOL, scheme="accuracy")
        assert type(r) is float and r == expected, c
    # Strict variant: format required, then exactly 1[kk_is_correct].
    from dgro_lib.rewards import AccuracyScheme

    strict = AccuracyScheme(requires_format=True)
    for c in KK_ACCURACY_CASES:
        assert kk_reward(c, names=NAMES, solution=SOL, scheme=strict) == float(
            kk_is_correct(c, names=NAMES, solution=SOL))
    f = kk_reward_func("accuracy")
    assert f.__name__ == "kk_reward_accuracy"
    cs = list(KK_ACCURACY_CASES)
    assert f(None, cs, [NAMES] * len(cs), [SOL] * len(cs)) == list(KK_ACCURACY_CASES.values())
    f2 = pickle.loads(pickle.dumps(f))
    assert f2(None, [RIGHT, WRONG], [NAMES] * 2, [SOL] * 2) == [1.0, 0.0]


@settings(max_examples=300, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(case=kk_case())
def test_property_accuracy_is_binary(case):
    text, names, sol, tip = case
    r = kk_reward(text, names=names, solution=sol, scheme="accuracy", think_in_prompt=tip)
    assert r in (0.0, 1.0) and type(r) is float
    if kk_is_correct(text, names=names, solution=sol, think_in_prompt=tip):
        assert r == 1.0  # format-free accuracy only adds correct answers


def test_dcpo_params_use_the_accuracy_scheme():
    from pathlib import Path

    from dgro_lib.config import load_config

    path = Path(__file__).resolve().parents[1] / "params" / "paper" / "dcpo_table2_main.yaml"
    cfg = load_config(str(path))
    assert cfg.reward.scheme == "accuracy"
    assert get_scheme(cfg.reward.scheme).bounds == (0.0, 1.0)
