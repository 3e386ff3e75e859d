"""Math data: the generator against its own problem text, math-verify on equivalent and near-miss answer forms,
the loaders on local files with the Hub's field names, and the prompt templates."""

from __future__ import annotations

import json
import re
from fractions import Fraction

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dgro_lib.data import math as mdata
from dgro_lib.data.math import (
    KINDS,
    MATH_DATASETS,
    Interval,
    Surd,
    alternative_forms,
    format_prompt,
    generate_math,
    load_math,
    near_miss_forms,
    parse_exact,
    render_value,
    resolve_dataset,
)
from dgro_lib.rewards import math_equivalent

# -------------------------------------------------------------------------------------------
# generator
# -------------------------------------------------------------------------------------------


def test_generator_is_deterministic_prefix_stable_and_covers_every_kind():
    a = generate_math(60, seed=7)
    assert a == generate_math(60, seed=7)
    assert generate_math(25, seed=7) == a[:25]
    assert a != generate_math(60, seed=8)
    assert all(set(r) == {"problem", "answer", "source"} for r in a)
    assert [r["source"] for r in a[: len(KINDS)]] == [f"synthetic/{k}" for k in KINDS]
    assert len({r["problem"] for r in a}) == len(a)
    assert {r["source"] for r in generate_math(4, seed=0, kinds=["sqrt"])} == {"synthetic/sqrt"}
    assert generate_math(0) == []


@pytest.mark.parametrize("kwargs, exc, word", [
    (dict(n=-1), ValueError, "n must be"), (dict(n=2, kinds=[]), ValueError, "kinds is empty"),
    (dict(n=2, kinds=["calculus"]), ValueError, "calculus"), (dict(n=True), ValueError, "n must be"),
])
def test_generator_rejects_bad_arguments(kwargs, exc, word):
    with pytest.raises(exc, match=word):
        generate_math(**kwargs)


def _num(t: str) -> Fraction:
    return Fraction(t)


_LIN = r"(-?\d*)x(?: ([+-]) (\d+))?"


def _lin_coeffs(m_a: str, sign: str | None, b: str | None) -> tuple[int, int]:
    a = {"": 1, "-": -1}.get(m_a, None)
    a = int(m_a) if a is None else a
    bb = 0 if b is None else (int(b) if sign == "+" else -int(b))
    return a, bb


_OPS = {"<": lambda x, y: x < y, "\\le": lambda x, y: x <= y, ">": lambda x, y: x > y, "\\ge": lambda x, y: x >= y}


def _in_interval(x: Fraction, v: Interval) -> bool:
    lo_ok = v.lo is None or (x >= v.lo if v.lo_closed else x > v.lo)
    hi_ok = v.hi is None or (x <= v.hi if v.hi_closed else x < v.hi)
    return lo_ok and hi_ok


def reference_value(problem: str):
    """Recompute the answer from the problem text alone (an independent reading of the phrasing)."""
    m = re.fullmatch(r"Compute \$ (\d+) \\times (\d+) \+ (\d+) - (\d+) \$\.", problem)
    if m:
        a, b, c, d = map(int, m.groups())
        return Fraction(a * b + c - d)
    m = re.match(r"Compute \$ \\frac\{(\d+)\}\{(\d+)\} ([+-]) \\frac\{(\d+)\}\{(\d+)\} \$", problem)
    if m:
        x, y = Fraction(int(m[1]), int(m[2])), Fraction(int(m[4]), int(m[5]))
        return x + y if m[3] == "+" else x - y
    m = re.fullmatch(rf"Solve for \$x\$: \$ {_LIN} = (-?\d+) \$\.", problem)
    if m:
        a, b = _lin_coeffs(m[1], m[2], m[3])
        return Fraction(int(m[4]) - b, a)
    m = re.match(r"What is \$([\d.]+)\\%\$ of \$(\d+)\$", problem)
    if m:
        return _num(m[1]) * int(m[2]) / 100
    m = re.match(r"Find the positive solution of \$ x\^2 = (\d+) \$", problem)
    if m:
        return ("square", int(m[1]))
    m = re.match(r"A right triangle has legs of length \$(\d+)\$ and \$(\d+)\$", problem)
    if m:
        return ("square", int(m[1]) ** 2 + int(m[2]) ** 2)
    m = re.match(rf"Find all real \$x\$ such that \$ {_LIN} (<|\\le|>|\\ge) (-?\d+) \$", problem)
    if m:
        a, b = _lin_coeffs(m[1], m[2], m[3])
        return ("pred", lambda x: _OPS[m[4]](a * x + b, int(m[5])), [Fraction(int(m[5]) - b, a)])
    m = re.match(rf"Find all real \$x\$ such that \$ (-?\d+) (<|\\le) {_LIN} (<|\\le) (-?\d+) \$", problem)
    if m:
        a, b = _lin_coeffs(m[3], m[4], m[5])
        lo, hi = int(m[1]), int(m[7])
        return ("pred", lambda x: _OPS[m[2]](lo, a * x + b) and _OPS[m[6]](a * x + b, hi),
                [Fraction(lo - b, a), Fraction(hi - b, a)])
    raise AssertionError(f"unrecognised problem text: {problem!r}")


def test_generated_answers_match_the_problem_text():
    for rec in generate_math(300, seed=11):
        value = parse_exact(rec["answer"])
        ref = reference_value(rec["problem"])
        if isinstance(ref, Fraction):
            assert value == ref, rec
        elif ref[0] == "square":
            assert isinstance(value, Surd), rec
            assert value.coeff ** 2 * value.radicand == ref[1], rec
        else:
            _, pred, ends = ref
            assert isinstance(value, Interval), rec
            eps = Fraction(1, 1000)
            probes = [e + d for e in ends for d in (-1, -eps, 0, eps, 1)] + [Fraction(-10**6), Fraction(10**6)]
            for x in probes:
                assert pred(x) == _in_interval(x, value), (rec, x)


def test_answer_forms_by_kind():
    forms = {r["source"].split("/")[1]: r["answer"] for r in generate_math(60, seed=3)}
    assert re.fullmatch(r"-?\d+", forms["integer"])
    assert "\\frac{" in forms["fraction"]
    assert re.fullmatch(r"-?\d+/\d+", forms["slash"])
    assert re.fullmatch(r"-?\d+\.\d+", forms["decimal"])
    assert forms["interval"][0] in "[(" and forms["interval"][-1] in ")]"
    assert "\\sqrt{" in forms["sqrt"]
    answers = [r["answer"] for r in generate_math(120, seed=3, kinds=["interval"])]
    assert any("\\infty" in a for a in answers) and any("\\infty" not in a for a in answers)
    assert any(a.startswith("[") for a in answers) and any(a.endswith(")") for a in answers)


def test_render_and_parse_round_trip():
    values = [Fraction(1, 2), Fraction(-7, 3), Fraction(18), Fraction(-1, 8), Surd(2, 3), Surd(1, 5),
              Interval(Fraction(1), Fraction(3), True, False), Interval(None, Fraction(2, 3), False, True),
              Interval(Fraction(-5, 2), None, False, False)]
    for v in values:
        assert parse_exact(render_value(v)) == v
        for name, text in alternative_forms(v).items():
            if name not in ("text", "cdot", "power", "left_right"):  # outside parse_exact's grammar
                assert parse_exact(text) == v, (v, name, text)
    assert render_value(Fraction(9, 2), "decimal") == "4.5"
    assert render_value(Fraction(-1, 8), "decimal") == "-0.125"
    assert render_value(Interval(Fraction(1, 2), None, True, False), "decimal") == "[0.5, \\infty)"
    with pytest.raises(ValueError, match="no finite decimal"):
        render_value(Fraction(1, 3), "decimal")
    with pytest.raises(ValueError, match="not in the generator's grammar"):
        parse_exact("x^2")
    with pytest.raises(ValueError, match="radicand"):
        Surd(1, 12)
    with pytest.raises(ValueError, match="infinite lower end"):
        Interval(None, Fraction(1), True, False)


def test_math_verify_on_the_briefs_examples():
    half = alternative_forms(Fraction(1, 2))
    assert {half["frac"], half["slash"], half["decimal"]} == {"\\frac{1}{2}", "1/2", "0.5"}
    for a in half.values():
        for b in half.values():
            assert math_equivalent(a, b), (a, b)
    third = near_miss_forms(Fraction(1, 3))
    assert third["truncated"] == "0.33"
    assert not math_equivalent("0.33", "\\frac{1}{3}")
    # math-verify compares numbers after rounding to 6 decimals, so six 3s do count as 1/3:
    assert math_equivalent("0.333333", "\\frac{1}{3}")


def test_math_verify_on_generated_alternative_and_near_miss_forms():
    for rec in generate_math(24, seed=2):
        gold = rec["answer"]
        for name, alt in alternative_forms(gold).items():
            assert math_equivalent(alt, gold), (rec, name, alt)
        for name, miss in near_miss_forms(gold).items():
            assert not math_equivalent(miss, gold), (rec, name, miss)


# -------------------------------------------------------------------------------------------
# loaders (local files; the Hub is unreachable here)
# -------------------------------------------------------------------------------------------


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def write_parquet(path, rows):
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def test_registry_covers_both_papers_sets():
    for name in ["math500", "aime2024", "aime2025", "amc2023", "minerva", "olympiadbench", "gsm8k", "dapo17k",
                 "deepscaler", "orz", "hmmt2025"]:
        assert name in MATH_DATASETS
    assert resolve_dataset("MATH-500")[0] == "math500"
    assert resolve_dataset("aime24")[0] == "aime2024"
    assert resolve_dataset("DAPO-Math-17k")[0] == "dapo17k"
    assert MATH_DATASETS["gsm8k"].hub_id == "openai/gsm8k" and MATH_DATASETS["gsm8k"].config == "main"
    with pytest.raises(ValueError, match=r"unknown math data set 'mathh'.*math500"):
        load_math("mathh")


def test_math500_jsonl(tmp_path):
    rows = [{"problem": "What is $1+1$?", "solution": "...", "answer": "2", "subject": "Algebra", "level": 1,
             "unique_id": "test/algebra/1.json"},
            {"problem": "Find $x$.", "solution": "...", "answer": "\\frac{1}{2}", "subject": "Algebra", "level": 2,
             "unique_id": "test/algebra/2.json"}]
    recs = load_math("math500", local_path=write_jsonl(tmp_path / "test.jsonl", rows))
    assert recs == [{"problem": "What is $1+1$?", "answer": "2", "source": "math500"},
                    {"problem": "Find $x$.", "answer": "\\frac{1}{2}", "source": "math500"}]
    assert load_math("math500", local_path=tmp_path / "test.jsonl", limit=1) == recs[:1]
    for r in recs:  # the reference answers parse through math-verify
        assert math_equivalent(r["answer"], r["answer"])


def test_gsm8k_answer_after_hashes(tmp_path):
    rows = [{"question": "Natalia sold 48 clips...", "answer": "She sold 48/2 = 24.\n#### 72"},
            {"question": "Big?", "answer": "so\n#### 1,234"}]
    recs = load_math("gsm8k", local_path=write_jsonl(tmp_path / "gsm.jsonl", rows))
    assert [r["answer"] for r in recs] == ["72", "1234"]
    with pytest.raises(ValueError, match=r"gsm8k: .*row 0: bad answer field 'answer'.*####"):
        load_math("gsm8k", local_path=write_jsonl(tmp_path / "bad.jsonl", [{"question": "q", "answer": "72"}]))


def test_olympiadbench_parquet_with_list_answers(tmp_path):
    rows = [{"id": 1, "question": "Q1", "final_answer": ["$\\frac{1}{2}$"], "modality": "Text-only"},
            {"id": 2, "question": "Q2", "final_answer": ["$1$", "$3$"], "modality": "Text-only"}]
    recs = load_math("olympiadbench", local_path=write_parquet(tmp_path / "test-00000-of-00001.parquet", rows))
    assert [r["answer"] for r in recs] == ["\\frac{1}{2}", "1, 3"]


def test_amc_float_answers_and_aime_int_answers(tmp_path):
    recs = load_math("amc23", local_path=write_jsonl(tmp_path / "a.jsonl", [{"question": "q", "answer": 27.0},
                                                                            {"question": "r", "answer": 2.5}]))
    assert [r["answer"] for r in recs] == ["27", "2.5"]
    recs = load_math("aime25", local_path=write_parquet(tmp_path / "b.parquet", [{"problem_idx": 1, "problem": "p",
                                                                                  "answer": 70}]))
    assert recs == [{"problem": "p", "answer": "70", "source": "aime2025"}]


def test_dapo_nested_fields_prompt_cleanup_and_dedupe(tmp_path):
    prompt = ("Solve the following math problem step by step. The last line of your response should be of the form "
              "Answer: $Answer (without quotes) where $Answer is the answer to the problem.\n\nFind $n$.\n\n"
              'Remember to put your answer on its own line after "Answer:".')
    row = {"data_source": "math_dapo", "prompt": [{"content": prompt, "role": "user"}], "ability": "MATH",
           "reward_model": {"ground_truth": "34", "style": "rule-lighteval/MATH_v2"},
           "extra_info": {"index": "a"}}
    other = {**row, "prompt": [{"content": "Find $m$.", "role": "user"}], "reward_model": {"ground_truth": "5",
                                                                                           "style": "rule"}}
    recs = load_math("dapo17k", local_path=write_parquet(tmp_path / "dapo-math-17k.parquet", [row, row, other, row]))
    assert recs == [{"problem": "Find $n$.", "answer": "34", "source": "dapo17k"},
                    {"problem": "Find $m$.", "answer": "5", "source": "dapo17k"}]


def test_orz_json_array_of_turn_pairs_and_hub_style_parquet(tmp_path):
    pairs = [[{"from": "human", "value": "How many cards for $n$ levels?"},
              {"from": "assistant", "ground_truth": {"value": "\\frac{n(3n+1)}{2}"}}]]
    (tmp_path / "orz_math_57k_collected.json").write_text(json.dumps(pairs), encoding="utf-8")
    recs = load_math("orz", local_path=tmp_path / "orz_math_57k_collected.json")
    assert recs == [{"problem": "How many cards for $n$ levels?", "answer": "\\frac{n(3n+1)}{2}", "source": "orz"}]
    hub_rows = [{"0": pairs[0][0], "1": pairs[0][1]}]
    assert load_math("orz", local_path=write_parquet(tmp_path / "train.parquet", hub_rows)) == recs


def test_json_lines_under_a_json_name_and_directory_split_selection(tmp_path):
    d = tmp_path / "MATH-500"
    d.mkdir()
    # Dataset.to_json writes JSON lines even under a .json name
    write_jsonl(d / "test.json", [{"problem": "t", "answer": "1"}])
    write_jsonl(d / "train.jsonl", [{"problem": "tr", "answer": "2"}])
    assert [r["problem"] for r in load_math("math500", local_path=d)] == ["t"]  # spec split: test
    assert [r["problem"] for r in load_math("math500", local_path=d, split="train")] == ["tr"]
    with pytest.raises(FileNotFoundError, match=r"no file for split 'validation'"):
        load_math("math500", local_path=d, split="validation")
    flat = tmp_path / "flat"
    flat.mkdir()
    write_jsonl(flat / "part1.jsonl", [{"problem": "a", "answer": "1"}])
    write_jsonl(flat / "part2.jsonl", [{"problem": "b", "answer": "2"}])
    assert [r["problem"] for r in load_math("math500", local_path=flat)] == ["a", "b"]


def test_missing_fields_name_the_dataset_file_row_and_field(tmp_path):
    f = write_jsonl(tmp_path / "amc.jsonl", [{"question": "q", "answer": "1"}, {"problem": "q2", "answer": "2"}])
    with pytest.raises(ValueError) as info:
        load_math("amc23", local_path=f)
    msg = str(info.value)
    for part in ["amc2023", str(f), "row 1", "missing problem field 'question'", "['answer', 'problem']"]:
        assert part in msg
    g = write_jsonl(tmp_path / "d.jsonl", [{"prompt": [{"role": "user", "content": "x"}], "reward_model": {}}])
    with pytest.raises(ValueError,
                       match=r"dapo17k: .*d\.jsonl: row 0: missing answer field 'reward_model\.ground_truth'"):
        load_math("dapo17k", local_path=g)
    h = write_jsonl(tmp_path / "e.jsonl", [{"problem": "p", "answer": "  "}])
    with pytest.raises(ValueError, match=r"math500: .*e\.jsonl: row 0: empty answer field 'answer'"):
        load_math("math500", local_path=h)
    bad = tmp_path / "broken.jsonl"
    bad.write_text('{"problem": "p", "answer": "1"}\n{oops\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"broken\.jsonl:2: invalid JSON"):
        load_math("math500", local_path=bad)
    with pytest.raises(FileNotFoundError, match=r"math500: local_path .*nowhere"):
        load_math("math500", local_path=tmp_path / "nowhere")
    with pytest.raises(ValueError, match="limit"):
        load_math("math500", local_path=h, limit=-1)


def test_hub_failure_is_a_runtime_error_that_says_to_pass_local_path(monkeypatch):
    import datasets

    def offline(*args, **kwargs):
        raise ConnectionError("Couldn't reach 'HuggingFaceH4/MATH-500' on the Hub (LocalEntryNotFoundError)")

    monkeypatch.setattr(datasets, "load_dataset", offline)
    with pytest.raises(RuntimeError) as info:
        load_math("math500")
    msg = str(info.value)
    assert "'math500'" in msg and "HuggingFaceH4/MATH-500" in msg and "local_path" in msg


def test_hub_rows_use_the_same_field_mapping(monkeypatch):
    import datasets

    seen = {}

    def fake(hub_id, config, split):
        seen.update(hub_id=hub_id, config=config, split=split)
        return [{"question": "q", "answer": "work\n#### 5"}]

    monkeypatch.setattr(datasets, "load_dataset", fake)
    assert load_math("gsm8k") == [{"problem": "q", "answer": "5", "source": "gsm8k"}]
    assert seen == {"hub_id": "openai/gsm8k", "config": "main", "split": "test"}


# -------------------------------------------------------------------------------------------
# prompts
# -------------------------------------------------------------------------------------------


def test_prompt_templates():
    rec = {"problem": "Compute $1+1$.", "answer": "2", "source": "x"}
    plain = format_prompt(rec)
    assert plain.startswith("Compute $1+1$.") and plain.endswith("<think>") and "\\boxed{}" in plain
    qwen = format_prompt(rec, template="qwen")
    assert qwen.startswith("<|im_start|>system\n") and qwen.endswith("<|im_start|>assistant\n<think>")
    assert qwen.count("<|im_end|>") == 2 and "Compute $1+1$." in qwen
    with pytest.raises(ValueError, match="unknown prompt template 'chatml'"):
        format_prompt(rec, template="chatml")
    with pytest.raises(ValueError, match="no 'problem' field"):
        format_prompt({"quiz": "x"})
    assert set(mdata.PROMPT_TEMPLATES) == {"plain", "qwen"}


# -------------------------------------------------------------------------------------------
# multiple choice: GPQA-diamond and MMLU-Pro (DCPO's Qwen3-4B suite)
# -------------------------------------------------------------------------------------------


def gpqa_row(i, correct="right"):
    return {"Pre-Revision Question": "old", "Question": f"Question {i}: which one?", "Correct Answer": f" {correct}{i}\n",
            "Incorrect Answer 1": f"wrong1-{i}", "Incorrect Answer 2": f"wrong2-{i}", "Incorrect Answer 3": f"wrong3-{i}",
            "Explanation": "because", "Subdomain": "Physics"}


def _options(problem):
    return dict(re.findall(r"^\(([A-Z])\) (.*)$", problem, flags=re.M))


def test_registry_has_the_multiple_choice_sets_with_their_hub_ids():
    assert resolve_dataset("GPQA-diamond")[0] == "gpqa_diamond" and resolve_dataset("gpqa")[0] == "gpqa_diamond"
    assert resolve_dataset("MMLU-Pro")[0] == "mmlu_pro" and resolve_dataset("mmlupro")[0] == "mmlu_pro"
    g, m = MATH_DATASETS["gpqa_diamond"], MATH_DATASETS["mmlu_pro"]
    assert (g.hub_id, g.config, g.split) == ("Idavidrein/gpqa", "gpqa_diamond", "train")
    assert (m.hub_id, m.config, m.split) == ("TIGER-Lab/MMLU-Pro", None, "test")


def test_gpqa_options_are_shuffled_deterministically_and_the_gold_is_the_letter(tmp_path):
    rows = [gpqa_row(i) for i in range(200)]
    recs = load_math("gpqa_diamond", local_path=write_parquet(tmp_path / "gpqa_diamond.parquet", rows))
    assert len(recs) == 200 and {r["source"] for r in recs} == {"gpqa_diamond"}
    for i, r in enumerate(recs):
        opts = _options(r["problem"])
        assert r["problem"].startswith(f"Question {i}: which one?\n\n")
        assert r["problem"].rstrip().endswith("(A-D).")
        assert sorted(opts) == ["A", "B", "C", "D"]
        assert opts[r["answer"]] == f"right{i}"  # stripped, and the gold letter points at it
        assert sorted(opts.values()) == sorted([f"right{i}", f"wrong1-{i}", f"wrong2-{i}", f"wrong3-{i}"])
    # the correct answer is not left first: every letter holds it for some questions, none for most
    counts = {L: sum(r["answer"] == L for r in recs) for L in "ABCD"}
    assert all(25 <= c <= 75 for c in counts.values()), counts
    # deterministic: same file, other row order, a limit, another reader (jsonl) give the same letters per question
    again = load_math("gpqa_diamond", local_path=write_jsonl(tmp_path / "g.jsonl", rows[::-1]))
    assert {r["problem"]: r["answer"] for r in again} == {r["problem"]: r["answer"] for r in recs}
    assert load_math("gpqa_diamond", local_path=tmp_path / "gpqa_diamond.parquet", limit=3) == recs[:3]
    # the seed is what decides the order
    other = [mdata.gpqa_record(row, seed=1) for row in rows]
    assert sum(o["answer"] != r["answer"] for o, r in zip(other, recs)) > 100


def test_gpqa_loads_from_the_csv_the_hub_ships(tmp_path):
    import csv

    rows = [gpqa_row(i) for i in range(3)]
    path = tmp_path / "gpqa_diamond.csv"
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    recs = load_math("gpqa_diamond", local_path=path)
    assert recs == load_math("gpqa_diamond", local_path=write_jsonl(tmp_path / "g.jsonl", rows))


def test_gpqa_bad_records_name_the_row_and_field(tmp_path):
    bad = gpqa_row(0)
    del bad["Incorrect Answer 2"]
    f = write_jsonl(tmp_path / "g.jsonl", [gpqa_row(1), bad])
    with pytest.raises(ValueError, match=r"gpqa_diamond: .*g\.jsonl: row 1: bad record: missing field "
                                         r"'Incorrect Answer 2'"):
        load_math("gpqa_diamond", local_path=f)
    empty = {**gpqa_row(0), "Incorrect Answer 1": "  "}
    with pytest.raises(ValueError, match=r"row 0: bad record: option . is empty"):
        load_math("gpqa_diamond", local_path=write_jsonl(tmp_path / "e.jsonl", [empty]))


def mmlu_row(i, n_opts=10, idx=3):
    return {"question_id": i, "question": f"Q{i}?", "options": [f"opt{j}" for j in range(n_opts)],
            "answer": "ABCDEFGHIJ"[idx], "answer_index": idx, "cot_content": "", "category": "math", "src": "x"}


def test_mmlu_pro_letters_follow_answer_index(tmp_path):
    rows = [mmlu_row(0), mmlu_row(1, n_opts=4, idx=0), mmlu_row(2, n_opts=10, idx=9)]
    recs = load_math("mmlu_pro", local_path=write_parquet(tmp_path / "test-00000-of-00001.parquet", rows))
    assert [r["answer"] for r in recs] == ["D", "A", "J"]
    assert _options(recs[0]["problem"]) == {L: f"opt{j}" for j, L in enumerate("ABCDEFGHIJ")}
    assert recs[0]["problem"].startswith("Q0?\n\n(A) opt0\n") and recs[0]["problem"].endswith("(A-J).")
    assert sorted(_options(recs[1]["problem"])) == list("ABCD") and recs[1]["problem"].endswith("(A-D).")
    with pytest.raises(ValueError, match=r"mmlu_pro: .*row 0: bad record: answer 'B' disagrees with answer_index 3"):
        load_math("mmlu_pro", local_path=write_jsonl(tmp_path / "a.jsonl", [{**mmlu_row(0), "answer": "B"}]))
    with pytest.raises(ValueError, match=r"answer_index 4 is not an index into the 4 options"):
        load_math("mmlu_pro", local_path=write_jsonl(tmp_path / "b.jsonl", [mmlu_row(0, n_opts=4, idx=4)]))


def test_multiple_choice_hub_rows_use_the_spec(monkeypatch):
    import datasets

    seen = {}

    def fake(hub_id, config, split):
        seen[hub_id] = (config, split)
        return [gpqa_row(0)] if hub_id == "Idavidrein/gpqa" else [mmlu_row(0)]

    monkeypatch.setattr(datasets, "load_dataset", fake)
    assert load_math("gpqa")[0]["answer"] in "ABCD"
    assert load_math("mmlu-pro")[0]["answer"] == "D"
    assert seen == {"Idavidrein/gpqa": ("gpqa_diamond", "train"), "TIGER-Lab/MMLU-Pro": (None, "test")}


@pytest.mark.parametrize("gold", list("ABCDEFGHIJ"))
def test_math_reward_judges_a_boxed_letter(gold):
    from dgro_lib.rewards import math_reward
    from dgro_lib.rewards.math import math_is_correct

    for pred in "ABCDEFGHIJ":
        completion = f"Option {gold} fits.</think> The answer is \\boxed{{{pred}}}."
        assert math_is_correct(completion, answer=gold) == (pred == gold), (gold, pred)
    assert math_reward(f"x</think> \\boxed{{{gold}}}", answer=gold, scheme="[-1,1]") == 1.0
    wrong = "B" if gold != "B" else "C"
    assert math_reward(f"x</think> \\boxed{{{wrong}}}", answer=gold, scheme="[-1,1]") == 0.0
