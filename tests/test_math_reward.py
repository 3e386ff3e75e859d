"""Math reward: outcomes and Eq. 12 scores per scheme, answer extraction against a loop reference,
math-verify's real equivalence behaviour, totality (hypothesis, huge inputs, threads), the TRL adapter."""

from __future__ import annotations

import math
import pickle
import threading
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dgro_lib.rewards import (
    SCHEMES,
    MathRewardFunc,
    Outcome,
    RewardScheme,
    check_math_format,
    extract_boxed,
    extract_math_answer,
    get_scheme,
    math_components,
    math_equivalent,
    math_is_correct,
    math_outcome,
    math_reward,
    math_reward_func,
)
from dgro_lib.rewards import math as math_mod

ALL_SCHEMES = [get_scheme(n) for n in SCHEMES] + [get_scheme((0.3, 1.2, 0.7))]

GOLD = "\\frac{1}{2}"
CASES: dict[str, tuple[str, Outcome]] = {
    "boxed right": ("Half of one is a half.</think>\nThe answer is $\\boxed{\\frac{1}{2}}$.", Outcome.CORRECT),
    "boxed right other form": ("ok</think> \\boxed{0.5}", Outcome.CORRECT),
    "answer tag right": ("ok</think>\n<answer>1/2</answer>", Outcome.CORRECT),
    "answer tag with words": ("ok</think>\n<answer>The answer is $\\frac12$.</answer>", Outcome.CORRECT),
    "boxed inside answer tag": ("ok</think><answer>\\boxed{\\dfrac{1}{2}}</answer>", Outcome.CORRECT),
    "boxed wrong": ("ok</think> \\boxed{\\frac{1}{3}}", Outcome.WRONG),
    "hedged answer is wrong": ("ok</think> \\boxed{1/2 \\text{ or } 1/3}", Outcome.WRONG),
    "unparsable answer is wrong": ("ok</think> \\boxed{banana}", Outcome.WRONG),
    "no answer": ("I tried.</think> I could not finish.", Outcome.INCOMPLETE),
    "empty box": ("ok</think> \\boxed{ }", Outcome.INCOMPLETE),
    "unclosed box": ("ok</think> \\boxed{\\frac{1}{2}", Outcome.INCOMPLETE),
    "box only inside think": ("\\boxed{1/2} so</think> done", Outcome.INCOMPLETE),
    "empty answer tag": ("ok</think><answer> </answer>", Outcome.INCOMPLETE),
    "no closing think": ("The answer is \\boxed{1/2}", Outcome.BAD_FORMAT),
    "two closing think": ("a</think> b</think> \\boxed{1/2}", Outcome.BAD_FORMAT),
    "opening think repeated": ("<think>a</think> \\boxed{1/2}", Outcome.BAD_FORMAT),
    "empty completion": ("", Outcome.BAD_FORMAT),
}
# DGRO Table 4 (r_f, r_corr, r_com) per outcome: the paper's §4.1 rules.
R_VECTORS = {Outcome.CORRECT: (1, 1, 1), Outcome.WRONG: (1, -1, 1), Outcome.INCOMPLETE: (1, -1, -1),
             Outcome.BAD_FORMAT: (-1, -1, -1)}
# DGRO Table 4 columns (all right, wrong, incomplete, bad format) and Logic-RL's format + answer score.
TABLE4 = {
    "[-1,1]": {Outcome.CORRECT: 1.0, Outcome.WRONG: 0.0, Outcome.INCOMPLETE: -0.2, Outcome.BAD_FORMAT: -1.0},
    "[-3,3]": {Outcome.CORRECT: 3.0, Outcome.WRONG: -0.5, Outcome.INCOMPLETE: -1.0, Outcome.BAD_FORMAT: -3.0},
    "[-5,5]": {Outcome.CORRECT: 5.0, Outcome.WRONG: 0.0, Outcome.INCOMPLETE: -1.0, Outcome.BAD_FORMAT: -5.0},
    "logic-rl": {Outcome.CORRECT: 1 + 2, Outcome.WRONG: 1 - 1.5, Outcome.INCOMPLETE: 1 - 2, Outcome.BAD_FORMAT: -1 - 2},
}


@pytest.fixture(autouse=True, scope="module")
def short_timeout():
    """math-verify gives up after 1 s instead of 5 s in these tests (random strings can build 9^{9^{9}})."""
    old = math_mod.TIMEOUT_S
    math_mod.TIMEOUT_S = 1
    yield
    math_mod.TIMEOUT_S = old


@pytest.mark.parametrize("name", list(CASES))
def test_outcome_components_and_every_scheme(name):
    text, expected = CASES[name]
    assert math_outcome(text, answer=GOLD) is expected
    comps = math_components(text, answer=GOLD)
    assert comps == R_VECTORS[expected]
    for scheme_name, table in TABLE4.items():
        assert math_reward(text, answer=GOLD, scheme=scheme_name) == pytest.approx(table[expected], abs=1e-12)
    custom = RewardScheme(0.3, 1.2, 0.7)
    r = math_reward(text, answer=GOLD, scheme=(0.3, 1.2, 0.7))
    assert r == pytest.approx(0.3 * comps[0] + 1.2 * comps[1] + 0.7 * comps[2])
    assert r == custom.reward(*comps)
    assert math_is_correct(text, answer=GOLD) is (expected is Outcome.CORRECT)


def test_default_scheme_is_minus3_3():
    text = CASES["boxed wrong"][0]
    assert math_reward(text, answer=GOLD) == math_reward(text, answer=GOLD, scheme="[-3,3]") == -0.5


def test_think_in_prompt_false_needs_one_opening_tag_before_the_closing_one():
    assert math_outcome("<think>a</think> \\boxed{1/2}", answer=GOLD, think_in_prompt=False) is Outcome.CORRECT
    assert math_outcome("a</think> \\boxed{1/2}", answer=GOLD, think_in_prompt=False) is Outcome.BAD_FORMAT
    assert math_outcome("</think><think> \\boxed{1/2}", answer=GOLD, think_in_prompt=False) is Outcome.BAD_FORMAT
    assert math_outcome("<think><think>a</think> \\boxed{1/2}", answer=GOLD, think_in_prompt=False) \
        is Outcome.BAD_FORMAT
    assert check_math_format("x</think>") and not check_math_format("x</think>", think_in_prompt=False)


def test_last_box_wins_and_box_beats_the_answer_tag():
    assert math_outcome("ok</think> \\boxed{1/3} no wait \\boxed{1/2}", answer=GOLD) is Outcome.CORRECT
    assert math_outcome("ok</think> \\boxed{1/2} no wait \\boxed{1/3}", answer=GOLD) is Outcome.WRONG
    assert math_outcome("ok</think> <answer>1/3</answer> \\boxed{1/2}", answer=GOLD) is Outcome.CORRECT
    assert math_outcome("ok</think> <answer>1/3</answer> <answer>1/2</answer>", answer=GOLD) is Outcome.CORRECT
    # an unclosed last box falls back to the last closed one
    assert math_outcome("ok</think> \\boxed{1/2} and \\boxed{1/3", answer=GOLD) is Outcome.CORRECT


def test_extract_boxed_examples():
    assert extract_boxed("\\boxed{\\frac{1}{2}}") == "\\frac{1}{2}"
    assert extract_boxed("\\boxed {5}") == "5"
    assert extract_boxed("\\boxed{\\{1, 3\\}}") == "\\{1, 3\\}"  # escaped braces are not groups
    assert extract_boxed("\\boxed{\\boxed{1}}") == "1"  # the innermost, last-opened box
    assert extract_boxed("\\boxed{a{b}") is None
    assert extract_boxed("\\boxed{}") == ""
    assert extract_boxed("no box {here}") is None
    assert extract_math_answer("ok</think> \\boxed{ 7 }") == "7"
    assert extract_math_answer("\\boxed{7}", require_format=False) == "7"
    assert extract_math_answer("\\boxed{7}") is None


def reference_extract_boxed(s: str) -> str | None:
    """Quadratic reference: try each ``\\boxed{`` from the last, scan forward for its matching brace."""
    starts = []
    i = s.find("\\boxed")
    while i >= 0:
        j = i + len("\\boxed")
        while j < len(s) and s[j].isspace():
            j += 1
        if j < len(s) and s[j] == "{":
            starts.append(j)
        i = s.find("\\boxed", i + 1)
    # brace positions that are escaped (preceded by an odd run of backslashes) do not count
    escaped = set()
    k = 0
    while k < len(s):
        if s[k] == "\\" and k + 1 < len(s):
            escaped.add(k + 1)
            k += 2
        else:
            k += 1
    for start in reversed(starts):
        if start in escaped:
            continue
        depth = 0
        for p in range(start, len(s)):
            if p in escaped:
                continue
            if s[p] == "{":
                depth += 1
            elif s[p] == "}":
                depth -= 1
                if depth == 0:
                    return s[start + 1 : p]
    return None


_box_alphabet = st.sampled_from(["\\boxed{", "\\boxed {", "{", "}", "\\", "\\{", "\\}", "a", "1", " ", "\\\\"])


@settings(max_examples=1000, deadline=None, database=None)
@given(st.lists(_box_alphabet, max_size=25).map("".join))
def test_extract_boxed_matches_loop_reference(s):
    assert extract_boxed(s) == reference_extract_boxed(s)


# -------------------------------------------------------------------------------------------
# math-verify's equivalence, as it actually behaves (math-verify 0.9.0)
# -------------------------------------------------------------------------------------------

EQUIVALENT = [
    ("\\frac{1}{2}", "0.5"), ("\\frac{1}{2}", "1/2"), ("\\frac{1}{2}", "\\dfrac12"), ("0.5", "\\frac{1}{2}"),
    ("-7/3", "\\frac{-7}{3}"), ("-7/3", "-2\\frac{1}{3}"),  # a mixed number
    ("18", "18.0"), ("18", "\\text{18}"), ("1250", "1,250"), ("1250", "1{,}250"),
    ("[1, 3)", "[1,3)"), ("[\\frac{1}{2}, 3)", "[0.5, 3)"), ("[\\frac{1}{2}, 3)", "\\left[\\frac{1}{2}, 3\\right)"),
    ("(-\\infty, 2]", "(-\\infty,2]"), ("2\\sqrt{3}", "\\sqrt{12}"), ("2\\sqrt{3}", "2 \\cdot 3^{1/2}"),
    ("x = 2", "2"), ("2", "x = 2"),
    # numbers are compared after rounding to 6 decimals
    ("\\frac{1}{3}", "0.333333"), ("2\\sqrt{3}", "3.464102"),
]
NOT_EQUIVALENT = [
    ("\\frac{1}{3}", "0.33"), ("\\frac{1}{3}", "0.3333"), ("\\frac{2}{3}", "0.666666"), ("18", "18.00001"),
    ("[1, 3)", "[1, 3]"), ("[1, 3)", "(1, 3]"), ("(-\\infty, 2]", "(-oo, 2]"), ("(-\\infty, 2]", "x \\le 2"),
    ("2\\sqrt{3}", "3.4641"), ("\\frac{1}{2}", "1/2 \\text{ or } 1/3"), ("\\frac{1}{2}", ""),
]


@pytest.mark.parametrize("gold, pred", EQUIVALENT)
def test_math_verify_accepts(gold, pred):
    assert math_equivalent(pred, gold)


@pytest.mark.parametrize("gold, pred", NOT_EQUIVALENT)
def test_math_verify_rejects(gold, pred):
    assert not math_equivalent(pred, gold)


def test_bad_reference_answers_raise_naming_answer():
    with pytest.raises(ValueError, match="answer is empty"):
        math_reward("ok</think> \\boxed{1}", answer="  ")
    with pytest.raises(TypeError, match="answer must be a str"):
        math_reward("ok</think> \\boxed{1}", answer=None)
    with pytest.raises(TypeError, match="answer must be a str"):
        math_reward("ok</think> \\boxed{1}", answer=True)
    with pytest.raises(ValueError, match="answer .*cannot parse"):
        math_reward("ok</think> \\boxed{1}", answer="$$")
    assert math_reward("ok</think> \\boxed{18}", answer=18) == 3.0  # an int reference is fine
    with pytest.raises(TypeError, match="completion must be a str"):
        math_reward(b"bytes", answer="1")


def test_over_long_answers_are_wrong_without_parsing(monkeypatch):
    calls = []
    real = math_mod._parse
    monkeypatch.setattr(math_mod, "_parse", lambda s, t: calls.append(s) or real(s, t))
    math_outcome("ok</think> \\boxed{7}", answer="7")  # caches the reference's parse
    calls.clear()
    text = "ok</think> <answer>" + "1+" * math_mod.MAX_ANSWER_CHARS + "1</answer>"
    assert math_outcome(text, answer="7") is Outcome.WRONG
    assert calls == []  # the reference is cached, and the over-long answer is never parsed


def test_runs_outside_the_main_thread():
    text = "ok</think> \\boxed{0.5}"
    results: list = []

    def work():
        try:
            results.append(math_reward(text, answer="\\frac{1}{2}"))
            results.append(MathRewardFunc()(completions=[text, "x"], answer=["1/2", "1/2"]))
        except BaseException as exc:  # pragma: no cover - reported below
            results.append(exc)

    th = threading.Thread(target=work)
    th.start()
    th.join(60)
    assert results == [3.0, [3.0, -3.0]]


# -------------------------------------------------------------------------------------------
# totality
# -------------------------------------------------------------------------------------------

_FRAGMENTS = ["<think>", "</think>", "<answer>", "</answer>", "\\boxed{", "\\boxed", "{", "}", "\\", "$", "\\(",
              "\\frac{1}{2}", "1/2", "0.5", "[1, 3)", "(-\\infty, 2]", "\\sqrt{", "^", "^{", "2", "-", "x=",
              "\\infty", "∞", "½", "😀", "\x00", "\n", " ", "e", "\\text{", "\\left(", ",", "</think><answer>",
              "</think> \\boxed{"]
tag_soup = st.lists(st.one_of(st.sampled_from(_FRAGMENTS), st.text(max_size=6)), max_size=30).map("".join)
any_text = st.one_of(st.text(max_size=200), tag_soup)


def _check_total(text: str, gold: str, tip: bool) -> None:
    outcome = math_outcome(text, answer=gold, think_in_prompt=tip)
    assert isinstance(outcome, Outcome) and outcome is not Outcome.MISCOUNT
    comps = math_components(text, answer=gold, think_in_prompt=tip)
    assert comps == R_VECTORS[outcome]
    for s in ALL_SCHEMES:
        r = s.score(outcome)
        lo, hi = s.bounds
        assert isinstance(r, float) and math.isfinite(r) and lo <= r <= hi
    r = math_reward(text, answer=gold, scheme="[-5,5]", think_in_prompt=tip)
    assert -5.0 <= r <= 5.0
    if outcome is not Outcome.BAD_FORMAT:
        assert check_math_format(text, think_in_prompt=tip)


@settings(max_examples=2000, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(text=any_text, gold=st.sampled_from(["\\frac{1}{2}", "[1, 3)", "18", "2\\sqrt{3}"]), tip=st.booleans())
def test_property_total_and_in_range_on_any_string(text, gold, tip):
    _check_total(text, gold, tip)


@settings(max_examples=300, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(reasoning=st.text(max_size=20), body=tag_soup, boxed=st.booleans())
def test_property_total_on_well_formed_completions_with_random_answers(reasoning, body, boxed):
    # These reach math-verify: one closing think tag, then a box or an answer tag around random text.
    head = reasoning.replace("think>", "") + "</think>"
    text = head + (f"\\boxed{{{body}}}" if boxed else f"<answer>{body}</answer>")
    _check_total(text, "\\frac{1}{2}", True)


@pytest.mark.parametrize(
    "build",
    [
        lambda n: "x" * n,
        lambda n: "\U0001f600" * n,
        lambda n: "ok</think>" + "{" * n,
        lambda n: "ok</think>" + "\\boxed{" * (n // 7),
        lambda n: "ok</think>" + "}" * n,
        lambda n: "ok</think>" + "\\boxed{1}" * (n // 9),
        lambda n: "ok</think>" + "\\" * n,
        lambda n: "ok</think><answer>" + "9^{" * (n // 3) + "</answer>",
        lambda n: "</think>" * (n // 8),
        lambda n: "<think>" * (n // 7) + "</think>\\boxed{1}",
        lambda n: "Let me think. " * (n // 14) + "</think>\\boxed{\\frac{1}{2}}",
    ],
)
def test_megabyte_inputs_are_fast(build):
    text = build(1_000_000)
    t0 = time.perf_counter()
    for tip in (True, False):
        r = math_reward(text, answer="\\frac{1}{2}", scheme="[-1,1]", think_in_prompt=tip)
        assert -1.0 <= r <= 1.0
    MathRewardFunc()(completions=[[{"role": "assistant", "content": text}]], answer=["1/2"])
    assert time.perf_counter() - t0 < 5.0  # linear scans, and math-verify sees at most MAX_ANSWER_CHARS


def test_megabyte_correct_answer_after_long_reasoning():
    text = "Let me think. " * 75_000 + "</think> so \\boxed{\\frac{1}{2}}"
    assert math_reward(text, answer="0.5", scheme="[-5,5]") == 5.0


# -------------------------------------------------------------------------------------------
# TRL adapter
# -------------------------------------------------------------------------------------------


def test_reward_func_plain_and_conversational_completions_and_logging():
    f = math_reward_func("[-1,1]")
    assert f.__name__ == "math_reward_[-1,1]"
    completions = [
        "ok</think> \\boxed{1/2}",
        [{"role": "assistant", "content": "ok</think> \\boxed{1/3}"}],
        [{"role": "assistant", "content": [{"type": "text", "text": "ok</think> nothing"}]}],
        "no think",
    ]
    logged = {}
    rewards = f(prompts=["p"] * 4, completions=completions, answer=["0.5"] * 4,
                log_metric=lambda k, v: logged.__setitem__(k, v))
    assert rewards == [1.0, 0.0, -0.2, -1.0]
    assert logged == {"math_outcome/correct": 0.25, "math_outcome/wrong": 0.25, "math_outcome/incomplete": 0.25,
                      "math_outcome/bad_format": 0.25}
    assert f.outcomes(completions, ["0.5"] * 4) == [Outcome.CORRECT, Outcome.WRONG, Outcome.INCOMPLETE,
                                                     Outcome.BAD_FORMAT]


def test_reward_func_is_picklable_and_checks_its_inputs():
    f = pickle.loads(pickle.dumps(MathRewardFunc("logic-rl", think_in_prompt=False)))
    assert f.__name__ == "math_reward_logic-rl" and not f.think_in_prompt
    assert f(completions=["<think>a</think>\\boxed{2}"], answer=["2"]) == [3.0]
    with pytest.raises(ValueError, match="one entry per completion"):
        f(completions=["a", "b"], answer=["1"])
    with pytest.raises(TypeError, match="needs completions and answer"):
        f(completions=["a"])
    with pytest.raises(ValueError, match="unknown reward scheme"):
        MathRewardFunc("[-2,2]")


def test_prompt_then_completion_round_trip():
    from dgro_lib.data.math import format_prompt, generate_math

    for rec in generate_math(6, seed=5):
        for template in ("plain", "qwen"):
            prompt = format_prompt(rec, template=template)
            assert prompt.endswith("<think>") and rec["problem"] in prompt
        completion = f"Working.</think>\nSo the answer is $\\boxed{{{rec['answer']}}}$."
        assert math_reward(completion, answer=rec["answer"], scheme="[-5,5]") == 5.0
        assert math_is_correct("<think>" + completion, answer=rec["answer"], think_in_prompt=False)


def test_require_format_false_reads_the_last_box_anywhere():
    assert math_is_correct("The answer is \\boxed{0.5}.", answer=GOLD, require_format=False)
    assert not math_is_correct("The answer is \\boxed{0.5}.", answer=GOLD)
    assert not math_is_correct("no answer here", answer=GOLD, require_format=False)


# -------------------------------------------------------------------------------------------
# accuracy-only scheme: DCPO's reward (597358816/DCPO 33f8073 examples/score_function/math.py,
# math_compute_score = math_acc_reward: mathruler's extract_boxed_content on the whole response,
# grade_answer against the reference; the format score is commented out)
# -------------------------------------------------------------------------------------------

ACCURACY_CASES = {
    # completion: 1[correct] under DCPO's rule (last \boxed{} anywhere, no format needed)
    "Half.</think>\nThe answer is $\\boxed{\\frac{1}{2}}$.": 1.0,
    "The answer is \\boxed{0.5}": 1.0,  # no think block (bad format elsewhere)
    "<think>a</think> \\boxed{1/2}": 1.0,  # repeated opening tag (bad format with think_in_prompt)
    "a</think> b</think> \\boxed{1/2}": 1.0,
    "\\boxed{1/2} so</think> done": 1.0,  # the box inside the think block is the last box
    "ok</think> \\boxed{1/3} no wait \\boxed{1/2}": 1.0,
    "ok</think> \\boxed{1/2} no wait \\boxed{1/3}": 0.0,
    "ok</think> \\boxed{1/3}": 0.0,
    "ok</think> \\boxed{banana}": 0.0,
    "ok</think>\n<answer>1/2</answer>": 0.0,  # DCPO reads boxes only
    "ok</think> \\boxed{1/2} then \\boxed{1/3": 0.0,  # the last box is open: mathruler gives "None"
    "ok</think> \\boxed{ }": 0.0,
    "I could not finish.</think>": 0.0,
    "": 0.0,
    "}{ \\boxed \x00 \U0001f600 $": 0.0,
}


def test_accuracy_scheme_on_math_completions():
    for text, expected in ACCURACY_CASES.items():
        r = math_reward(text, answer=GOLD, scheme="accuracy")
        assert type(r) is float and r == expected, text
        assert math_outcome(text, answer=GOLD, require_format=False) in (
            (Outcome.CORRECT,) if expected else (Outcome.WRONG, Outcome.INCOMPLETE))
    # Strict variant: format required, then exactly 1[math_is_correct].
    from dgro_lib.rewards import AccuracyScheme

    strict = AccuracyScheme(requires_format=True)
    for text in ACCURACY_CASES:
        assert math_reward(text, answer=GOLD, scheme=strict) == float(math_is_correct(text, answer=GOLD))
    # Other schemes still require the format.
    assert math_reward("The answer is \\boxed{0.5}", answer=GOLD, scheme="[-1,1]") == -1.0


def test_accuracy_reward_func():
    f = math_reward_func("accuracy")
    assert f.__name__ == "math_reward_accuracy"
    texts = list(ACCURACY_CASES)
    logged = {}
    rewards = f(completions=texts, answer=[GOLD] * len(texts), log_metric=lambda k, v: logged.__setitem__(k, v))
    assert rewards == list(ACCURACY_CASES.values())
    assert logged["math_outcome/bad_format"] == 0.0  # the format is not judged
    assert logged["math_outcome/correct"] == pytest.approx(sum(ACCURACY_CASES.values()) / len(texts))
    f2 = pickle.loads(pickle.dumps(f))
    assert f2(completions=[[{"role": "assistant", "content": "\\boxed{2}"}]], answer=["2"]) == [1.0]


@settings(max_examples=300, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(text=any_text, gold=st.sampled_from(["\\frac{1}{2}", "[1, 3)", "18"]), tip=st.booleans())
def test_property_accuracy_is_binary(text, gold, tip):
    r = math_reward(text, answer=gold, scheme="accuracy", think_in_prompt=tip)
    assert type(r) is float and r in (0.0, 1.0)
