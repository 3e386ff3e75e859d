"""Totality of every reward function and answer parser (complements the property tests in
test_rewards.py and test_math_reward.py, which drive the outcome/score path on tag soup).

Here each public parser is called directly on arbitrary text (any unicode without surrogates,
control characters, RTL marks, emoji, nested/repeated/unbalanced tags and boxes), every named
scheme goes through ``kk_reward``/``math_reward`` (the accuracy scheme's format-free path
included), and megabyte inputs built from adversarial fragments must finish in bounded time.

Examples per property: ``DGRO_HYPOTHESIS_EXAMPLES`` (default 2,500, ``make test``'s budget: 10,000 took about
3.5 min of one core for this file, 29 tests, and 2,000 ~40 s). ``pytest -m nightly tests/test_reward_totality.py``
reruns them all at 100,000 examples (``DGRO_NIGHTLY_EXAMPLES``), about half an hour of one core.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dgro_lib.data.math import Interval, Surd, parse_exact
from dgro_lib.rewards import SCHEMES, Outcome, get_scheme
from dgro_lib.rewards.kk import check_format, extract_answer, kk_is_correct, kk_outcome, kk_reward, parse_roles
from dgro_lib.rewards.math import (
    MAX_ANSWER_CHARS,
    TIMEOUT_S,
    extract_boxed,
    extract_math_answer,
    math_is_correct,
    math_outcome,
    math_reward,
)

N = int(os.environ.get("DGRO_HYPOTHESIS_EXAMPLES", "2500"))  # make test's budget; nightly: 100,000
SLOW_N = max(20, N // 100)  # megabyte examples: ~10-100 ms each
PROP = settings(max_examples=N, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example])
PROP_SLOW = settings(PROP, max_examples=SLOW_N)

SCHEME_NAMES = list(SCHEMES)  # "[-1,1]", "[-3,3]", "[-5,5]", "logic-rl", "accuracy"
NAMES = ["Emily", "Zoë", "A.", "(x)", "\u05d3\u05d5\u05d3", "Ann", "Anna"]  # regex-special, non-ASCII, RTL, prefix
SOL = [True, False, True, False, True, False, True]
GOLDS = ["\\frac{1}{2}", "[1, 3)", "18", "2\\sqrt{3}", "x = 2"]

FRAGMENTS = [
    "<think>", "</think>", "<answer>", "</answer>", "<think", "</answer", "<<answer>>", "<ANSWER>",
    "\\boxed{", "\\boxed {", "\\boxed", "{", "}", "\\{", "\\}", "\\", "$", "$$", "\\(", "\\)", "\\[", "\\]",
    " is a ", "knight", "knave", "KNIGHT", "Knave", "Emily is a ", "Zoë is a knave", "(1) ", "\n", "\r\n", "\t",
    "\x00", "\x1b[31m", "\x7f", "\u0085", "\u2028", "\u200b", "\u200f", "\u202e", "\ufeff", "\U0001f600",
    "\U0001f468\u200d\U0001f469\u200d\U0001f467", "\u0645\u0631\u062d\u0628\u0627", "\\frac{1}{2}", "1/2", "0.5",
    "\\sqrt{", "^{", "\\infty", "\\text{", "\\left(", "-", ",", "x=",
] + NAMES
fragment_text = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=5)), max_size=40).map("".join)
any_text = st.one_of(
    st.text(),  # any code point except surrogates
    st.text(st.characters(codec="utf-8"), max_size=300),
    st.text(st.characters(categories=["Cc", "Cf", "Zl", "Zp", "Zs"]), max_size=50),  # control, bidi, separators
    fragment_text,
)


@st.composite
def nested(draw):
    """Tags and boxes nested and repeated: <answer><answer>..</answer>, \\boxed{\\boxed{..}, <think> inside <answer>."""
    depth = draw(st.integers(0, 12))
    opens = draw(st.lists(st.sampled_from(["<think>", "<answer>", "\\boxed{", "{", "</think>"]), min_size=depth,
                          max_size=depth))
    closes = draw(st.lists(st.sampled_from(["</think>", "</answer>", "}", "", "<answer>"]), min_size=0,
                           max_size=depth + 2))
    return draw(st.text(max_size=5)) + "".join(opens) + draw(fragment_text) + "".join(closes) + draw(st.text(max_size=5))


completions = st.one_of(any_text, nested())


def _in_bounds(r, scheme) -> None:
    lo, hi = get_scheme(scheme).bounds
    assert isinstance(r, float) and math.isfinite(r) and lo <= r <= hi, (scheme, r)


# ------------------------------------------------------------------------------------------
# Knights and Knaves
# ------------------------------------------------------------------------------------------

@PROP
@given(text=completions, tip=st.booleans(), k=st.integers(1, len(NAMES)))
def test_kk_reward_every_scheme_in_bounds(text, tip, k):
    names, sol = NAMES[:k], SOL[:k]
    for scheme in SCHEME_NAMES:
        _in_bounds(kk_reward(text, names=names, solution=sol, scheme=scheme, think_in_prompt=tip), scheme)
    for rf in (True, False):
        out = kk_outcome(text, names=names, solution=sol, think_in_prompt=tip, require_format=rf)
        assert isinstance(out, Outcome)
        assert rf or out is not Outcome.BAD_FORMAT
    ok = kk_is_correct(text, names=names, solution=sol, think_in_prompt=tip)
    assert ok is (kk_outcome(text, names=names, solution=sol, think_in_prompt=tip) is Outcome.CORRECT)


@PROP
@given(text=completions, tip=st.booleans(), names=st.lists(st.one_of(st.sampled_from(NAMES), st.text(min_size=1,
                                                                                                    max_size=6)),
                                                        max_size=5))
def test_kk_parsers_total(text, tip, names):
    ok = check_format(text, think_in_prompt=tip)
    assert isinstance(ok, bool)
    if ok:
        assert text.count("</think>") == text.count("<answer>") == text.count("</answer>") == 1
        assert text.count("<think>") == (0 if tip else 1)
    ans = extract_answer(text)
    assert ans is None or (isinstance(ans, str) and ans in text and "<answer>" not in ans)
    if ans is not None:
        roles = parse_roles(ans, names)
    else:
        roles = parse_roles(text, names)  # arbitrary answer text, arbitrary (even regex-special) names
    assert set(roles) == set(names) and all(v in (True, False, None) for v in roles.values())


# ------------------------------------------------------------------------------------------
# Math
# ------------------------------------------------------------------------------------------

@PROP
@given(text=completions, tip=st.booleans(), gold=st.sampled_from(GOLDS))
def test_math_reward_every_scheme_in_bounds(text, tip, gold):
    for scheme in SCHEME_NAMES:
        _in_bounds(math_reward(text, answer=gold, scheme=scheme, think_in_prompt=tip), scheme)
    for rf in (True, False):
        out = math_outcome(text, answer=gold, think_in_prompt=tip, require_format=rf)
        assert isinstance(out, Outcome) and out is not Outcome.MISCOUNT
        assert rf or out is not Outcome.BAD_FORMAT
        assert isinstance(math_is_correct(text, answer=gold, think_in_prompt=tip, require_format=rf), bool)


@PROP
@given(text=completions, tip=st.booleans(), rf=st.booleans())
def test_math_parsers_total(text, tip, rf):
    box = extract_boxed(text)
    assert box is None or (isinstance(box, str) and box in text)
    ans = extract_math_answer(text, think_in_prompt=tip, require_format=rf)
    assert ans is None or (isinstance(ans, str) and ans and ans == ans.strip() and ans in text)


# ------------------------------------------------------------------------------------------
# parse_exact: a value or ValueError (its documented contract), nothing else
# ------------------------------------------------------------------------------------------

_num = st.one_of(st.integers(-10**6, 10**6).map(str), st.sampled_from(["0", "-0", "00", "1.5", "-2.25", "1.", ".5"]))
grammarish = st.one_of(
    st.tuples(_num, _num).map(lambda t: f"{t[0]}/{t[1]}"),
    st.tuples(st.sampled_from(["", "-"]), st.sampled_from(["frac", "dfrac", "tfrac"]), _num, _num).map(
        lambda t: f"{t[0]}\\{t[1]}{{{t[2]}}}{{{t[3]}}}"),
    st.tuples(st.sampled_from(["", "0", "1", "3", "007"]), st.one_of(st.integers(0, 10**30).map(str), _num)).map(
        lambda t: f"{t[0]}\\sqrt{{{t[1]}}}"),
    st.tuples(st.sampled_from("[("), st.sampled_from(["-\\infty", "1", "1/0", "\\frac{1}{0}", "-3/2", "x"]),
              st.sampled_from(["\\infty", "2", "0/0", "\\dfrac{5}{0}", "-\\infty"]), st.sampled_from("])")).map(
        lambda t: f"{t[0]}{t[1]}, {t[2]}{t[3]}"),
)


@PROP
@given(answer=st.one_of(any_text, grammarish, st.tuples(grammarish, st.text(max_size=3)).map("".join)))
def test_parse_exact_value_or_value_error(answer):
    t0 = time.perf_counter()
    try:
        v = parse_exact(answer)
    except ValueError:
        pass
    else:
        assert isinstance(v, (int, Surd, Interval)) or type(v).__name__ == "Fraction"
    assert time.perf_counter() - t0 < 1.0


# ------------------------------------------------------------------------------------------
# Megabyte inputs: bounded time (a catastrophically backtracking regex is a DoS in a reward server)
# ------------------------------------------------------------------------------------------

# Every scan here is linear and math-verify only ever sees MAX_ANSWER_CHARS characters, so a 1 MB
# case takes 10-300 ms on a 2-core dev box. The 2 s bound is ~7x that margin for a slower CI core,
# yet well under what even a quadratic scan of 1 MB takes (~10**12 steps: hours), so any
# super-linear regression still fails. math-verify's own timeout (TIMEOUT_S) would only bound one
# parse at several seconds, so the bound also checks that it is never the thing that stops us.
MB = 1_000_000
BOUND_S = 2.0
assert MAX_ANSWER_CHARS * 100 < MB and TIMEOUT_S >= BOUND_S

BIG_BUILDERS = {
    "a": lambda: "a" * MB,
    "answer_open": lambda: "<answer>" * (MB // 8),
    "answer_close": lambda: "</answer>" * (MB // 9),
    "answer_pairs": lambda: "</think>" + "<answer></answer>" * (MB // 17),
    "boxed_open": lambda: "</think>" + "\\boxed{" * (MB // 7),
    "boxed_nested_closed": lambda: "</think>" + "\\boxed{" * (MB // 8) + "}" * (MB // 8),
    "boxed_unbalanced": lambda: "</think>" + "\\boxed{1}}{" * (MB // 11),
    "boxed_space": lambda: "</think>\\boxed" + " " * MB + "{1}",
    "emily": lambda: "</think><answer>" + "Emily is a " * (MB // 11) + "</answer>",
    "emily_spaces": lambda: "</think><answer>Emily" + " " * MB + "is</answer>",
    "think_open": lambda: "<think>" * (MB // 7) + "</think><answer>x</answer>",
    "dollars": lambda: "</think><answer>" + "$" * MB + "</answer>",
    "escapes": lambda: "</think>\\boxed{" + "\\" * MB + "}",
    "emoji_rtl": lambda: "\u202e\U0001f600" * (MB // 2),
    "control": lambda: "\x00\x1b\u2028" * (MB // 3),
    "long_answer": lambda: "</think>\\boxed{" + "1+" * (MB // 2) + "1}",
    "knights": lambda: "</think><answer>" + "knight knave " * (MB // 13) + "</answer>",
}


def _timed(fn, *a, **kw):
    t0 = time.perf_counter()
    out = fn(*a, **kw)
    dt = time.perf_counter() - t0
    assert dt < BOUND_S, (fn.__name__, dt)
    return out


@pytest.mark.parametrize("name", sorted(BIG_BUILDERS))
def test_megabyte_inputs_bounded_time(name):
    text = BIG_BUILDERS[name]()
    assert len(text) >= MB - 20
    for scheme in SCHEME_NAMES:
        _in_bounds(_timed(kk_reward, text, names=NAMES, solution=SOL, scheme=scheme), scheme)
        _in_bounds(_timed(math_reward, text, answer="\\frac{1}{2}", scheme=scheme), scheme)
    _timed(kk_is_correct, text, names=NAMES, solution=SOL, think_in_prompt=False)
    _timed(math_is_correct, text, answer="18", require_format=False)
    _timed(check_format, text)
    _timed(extract_answer, text)
    _timed(parse_roles, text, NAMES)
    _timed(extract_boxed, text)
    _timed(extract_math_answer, text, require_format=False)
    try:
        _timed(parse_exact, text)
    except ValueError:
        pass


@PROP_SLOW
@given(frags=st.lists(st.sampled_from(FRAGMENTS), min_size=1, max_size=4), tip=st.booleans())
def test_megabyte_random_fragment_repeats_bounded_time(frags, tip):
    unit = "".join(frags)
    text = unit * (MB // len(unit) + 1)
    t0 = time.perf_counter()
    _in_bounds(kk_reward(text, names=NAMES, solution=SOL, scheme="accuracy", think_in_prompt=tip), "accuracy")
    _in_bounds(kk_reward(text, names=NAMES, solution=SOL, scheme="logic-rl", think_in_prompt=tip), "logic-rl")
    _in_bounds(math_reward(text, answer="2\\sqrt{3}", scheme="accuracy", think_in_prompt=tip), "accuracy")
    _in_bounds(math_reward(text, answer="2\\sqrt{3}", scheme="[-5,5]", think_in_prompt=tip), "[-5,5]")
    parse_roles(text, NAMES)
    extract_math_answer(text, think_in_prompt=tip, require_format=False)
    assert time.perf_counter() - t0 < 2 * BOUND_S  # eight calls on 1 MB


@pytest.mark.parametrize("answer", ["\\sqrt{" + "9" * 4000 + "}", "\\sqrt{99999999999999999989}",
                                    "\\sqrt{" + "1" * MB + "}", "1" * MB + "/" + "0" * MB, "[" + "1/0, 2]",
                                    "\\frac{1}{" + "0" * 100 + "}"])
def test_parse_exact_adversarial_answers(answer):
    t0 = time.perf_counter()
    with pytest.raises(ValueError):
        parse_exact(answer)
    assert time.perf_counter() - t0 < BOUND_S


@pytest.mark.nightly
def test_every_property_at_nightly_scale():
    """Every test of this file again, at DGRO_NIGHTLY_EXAMPLES (default 100,000) examples per property."""
    env = {**os.environ, "DGRO_HYPOTHESIS_EXAMPLES": os.environ.get("DGRO_NIGHTLY_EXAMPLES", "100000")}
    done = subprocess.run([sys.executable, "-m", "pytest", __file__, "-q", "-p", "no:cacheprovider", "-m", "not nightly"],
                          env=env)
    assert done.returncode == 0
