"""Tests of dgro_lib.data.kk: solver, generator, loader, prompts.

The official-data checks run on every record of ../shared/data/kk (or $DGRO_KK_DIR) and skip
when that folder is absent (users' clones do not have it).
"""

from __future__ import annotations

import itertools
import json
import os
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest

from dgro_lib.data import kk
from dgro_lib.data.kk import (
    NAMES,
    OFFICIAL_KEYS,
    SAYING_TEMPLATES,
    answer_text,
    chain_of_thought,
    evaluate,
    find_official_dir,
    format_prompt,
    numbered_quiz,
    generate,
    load_kk,
    parse_statements,
    render_quiz,
    solve,
)

REPO = Path(__file__).resolve().parents[1]


# ------------------------------------------------------------------ helpers

def _random_tree(rng: random.Random, n: int, depth: int, width: int) -> tuple:
    """Any tree of the grammar, including self-lies, so puzzles with 0 or many solutions occur too."""
    if depth <= 1 or rng.random() < 0.3:
        return (rng.choice(("telling-truth", "lying")), rng.randrange(n))
    op = rng.choice(("not", "and", "or", "->", "<=>"))
    if op == "not":
        return ("not", _random_tree(rng, n, depth - 1, width))
    k = rng.randint(2, width) if op in ("and", "or") else 2
    return (op,) + tuple(_random_tree(rng, n, depth - 1, width) for _ in range(k))


def _brute_force(statements) -> list[tuple[bool, ...]]:
    """Loop reference: every assignment in (True, False)-product order, checked statement by statement."""
    n = len(statements)
    out = []
    for assignment in itertools.product([True, False], repeat=n):
        if all(assignment[i] == evaluate(statements[i], assignment) for i in range(n)):
            out.append(assignment)
    return out


def _recover_template_ids(record) -> list[int] | None:
    """Which SAYING_TEMPLATES entry each person's sentence uses, or None if the quiz does not parse."""
    statements = parse_statements(record["statements"])
    names = record["names"]
    intro = render_quiz(names, (), ())
    intro = intro[: intro.index(" So who is")]
    quiz = record["quiz"]
    if not quiz.startswith(intro):
        return None
    pos, ids = len(intro), []
    for i, stmt in enumerate(statements):
        content = kk.render_statement(stmt, names)
        for t, tmpl in enumerate(SAYING_TEMPLATES):
            piece = " " + tmpl.format(name=names[i], content=content)
            if quiz.startswith(piece, pos):
                ids.append(t)
                pos += len(piece)
                break
        else:
            return None
    return ids


def _tokens(text: str) -> set[str]:
    return set(re.findall(r"\w+", text))


@pytest.fixture(scope="module")
def official_records():
    root = find_official_dir()
    if root is None:
        pytest.skip("official K&K data not found (../shared/data/kk next to the repo, or set DGRO_KK_DIR); "
                    "skipping the official-data checks")
    records = []
    for split in ("test", "train"):
        if (root / split).is_dir():
            records.extend(load_kk(root / split))
    if not records:
        pytest.skip(f"no peopleN_numM.jsonl files under {root}/test or {root}/train")
    return records


# ------------------------------------------------------------------ statements

def test_parse_accepts_string_tuple_and_list():
    text = "(('<=>', ('telling-truth', 1), ('lying', 1)), ('not', ('lying', 0)))"
    parsed = parse_statements(text)
    assert parsed == (("<=>", ("telling-truth", 1), ("lying", 1)), ("not", ("lying", 0)))
    assert parse_statements(parsed) == parsed
    as_json = json.loads(json.dumps(parsed))  # lists, as a JSON round trip gives
    assert parse_statements(as_json) == parsed
    assert repr(parsed) == text
    # Non-canonical spacing takes the exact ast path.
    assert parse_statements("( ('lying',1) , ('telling-truth',0) )") == (("lying", 1), ("telling-truth", 0))


@pytest.mark.parametrize("bad, node", [
    ((("xor", ("lying", 1), ("lying", 0)), ("lying", 0)), "('xor', ('lying', 1), ('lying', 0))"),
    ((("not", ("lying", 1), ("lying", 0)), ("lying", 0)), "('not', ('lying', 1), ('lying', 0))"),
    ((("->", ("lying", 1)), ("lying", 0)), "('->', ('lying', 1))"),
    ((("<=>", ("lying", 1), ("lying", 0), ("lying", 1)), ("lying", 0)), "('<=>', ('lying', 1), ('lying', 0), ('lying', 1))"),
    ((("and", ("lying", 1)), ("lying", 0)), "('and', ('lying', 1))"),
    ((("lying", 2), ("lying", 0)), "('lying', 2)"),
    ((("lying", -1), ("lying", 0)), "('lying', -1)"),
    ((("lying", True), ("lying", 0)), "('lying', True)"),
    ((("lying", "1"), ("lying", 0)), "('lying', '1')"),
    ((("telling-truth", 1, 0), ("lying", 0)), "('telling-truth', 1, 0)"),
    ((("or", ("lying", 1), "lying"), ("lying", 0)), "'lying'"),
    ((("or", ("lying", 1), ()), ("lying", 0)), "()"),
])
def test_parse_rejects_bad_nodes_naming_them(bad, node):
    with pytest.raises(ValueError, match=re.escape(f"bad node {node}")):
        parse_statements(bad)
    with pytest.raises(ValueError, match=re.escape(f"bad node {node}")):
        parse_statements(repr(bad))


@pytest.mark.parametrize("bad", ["", "((", "(('lying', 1),", "__import__('os')", "()", "42", "[]"])
def test_parse_rejects_unparsable_text(bad):
    with pytest.raises(ValueError):
        parse_statements(bad)


def test_evaluate_truth_tables():
    a = (True, False)
    assert evaluate(("telling-truth", 0), a) and not evaluate(("telling-truth", 1), a)
    assert evaluate(("lying", 1), a) and not evaluate(("lying", 0), a)
    assert evaluate(("not", ("lying", 0)), a)
    for p, q in itertools.product([True, False], repeat=2):
        s, t = ("telling-truth", 0), ("telling-truth", 1)
        assert evaluate(("and", s, t), (p, q)) == (p and q)
        assert evaluate(("or", s, t), (p, q)) == (p or q)
        assert evaluate(("->", s, t), (p, q)) == ((not p) or q)
        assert evaluate(("<=>", s, t), (p, q)) == (p == q)
    assert evaluate(("and", ("telling-truth", 0), ("lying", 1), ("telling-truth", 2)), (True, False, True))
    assert not evaluate(("or", ("lying", 0), ("telling-truth", 1), ("lying", 2)), (True, False, True))


def test_evaluate_rejects_bad_nodes():
    with pytest.raises(ValueError, match=re.escape("bad node ('nand', ('lying', 0), ('lying', 1))")):
        evaluate(("nand", ("lying", 0), ("lying", 1)), (True, True))
    with pytest.raises(ValueError, match=re.escape("bad node ('->', ('lying', 0))")):
        evaluate(("->", ("lying", 0)), (True,))


def test_solve_matches_brute_force_on_random_trees():
    rng = random.Random(0)
    counts = {0: 0, 1: 0, "many": 0}
    for _ in range(400):
        n = rng.randint(1, 6)
        statements = tuple(_random_tree(rng, n, rng.randint(1, 3), rng.randint(2, 3)) for _ in range(n))
        got = solve(statements)
        assert got == _brute_force(statements), statements
        assert got == sorted(got, reverse=True)  # lexicographic, knight (True) first
        counts[len(got) if len(got) < 2 else "many"] += 1
    assert all(v > 0 for v in counts.values()), counts  # the reference saw every case


def test_solve_small_examples():
    # Person 0: "1 is a knave"; person 1: "0 and 1 are knights" -> only (knight, knave).
    assert solve((("lying", 1), ("and", ("telling-truth", 0), ("telling-truth", 1)))) == [(True, False)]
    assert solve((("lying", 0),)) == []  # "I am a knave": no consistent assignment
    assert solve((("telling-truth", 0),)) == [(True,), (False,)]
    assert solve("(('telling-truth', 1), ('telling-truth', 0))") == [(True, True), (False, False)]


# ------------------------------------------------------------------ official data

def test_every_official_record_has_exactly_its_solution(official_records):
    assert len(official_records) == 6900
    wrong = [r["index"] for r in official_records if solve(r["statements"]) != [tuple(r["solution"])]]
    assert not wrong, f"{len(wrong)} official records disagree with the solver"


def test_official_records_reproduced_by_renderer_and_cot(official_records):
    for r in official_records:
        assert set(r) >= set(OFFICIAL_KEYS)
        assert answer_text(r) == r["solution_text_format"]
        assert kk._solution_text(r["names"], r["solution"]) == r["solution_text"]
        ids = _recover_template_ids(r)
        assert ids is not None and render_quiz(r["names"], parse_statements(r["statements"]), ids) == r["quiz"], r["quiz"]
        assert chain_of_thought(r["statements"], r["names"]) == (r["cot_head"], r["cot_repeat_steps"], r["cot_foot"])


def test_every_official_quiz_gets_a_numbered_list(official_records):
    for r in official_records:
        q = numbered_quiz(r)
        assert all(f"({k}) {n}" in q for k, n in enumerate(r["names"], 1)), r["index"]


def test_official_names_are_NAMES(official_records):
    assert {n for r in official_records for n in r["names"]} == set(NAMES)
    assert len(NAMES) == len(set(NAMES)) == 51


def test_generated_quiz_vocabulary_within_official(official_records):
    official = set()
    for r in official_records:
        official |= _tokens(r["quiz"])
    generated = set()
    for p in range(3, 8):
        for r in generate(p, 40, seed=100 + p):
            generated |= _tokens(r["quiz"])
    assert generated <= official, generated - official


def test_load_kk_official_filters(official_records):
    root = find_official_dir()
    recs = load_kk(root / "train", people=[3, 5], limit=7)
    assert [len(r["names"]) for r in recs] == [3] * 7 + [5] * 7
    one = load_kk(root / "test" / "people4_num100.jsonl", limit=3)
    assert [r["index"] for r in one] == [0, 1, 2]


# ------------------------------------------------------------------ generator

@pytest.fixture(scope="module")
def generated():
    return {p: generate(p, 60, seed=p) for p in range(2, 9)}


def test_generated_records_round_trip(generated):
    for p, records in generated.items():
        assert len(records) == 60
        assert len({r["statements"] for r in records}) == 60  # no repeated puzzle
        for i, r in enumerate(records):
            assert tuple(r) == OFFICIAL_KEYS
            assert r["index"] == i
            statements = parse_statements(r["statements"])
            assert repr(statements) == r["statements"]
            assert len(statements) == p == len(r["names"]) == len(r["solution"])
            assert solve(r["statements"]) == [tuple(r["solution"])]
            assert all(isinstance(x, bool) for x in r["solution"])
            assert len(set(r["names"])) == p and set(r["names"]) <= set(NAMES)
            assert r["solution_text_format"] == answer_text(r)
            assert r["cot_foot"] == "This leads to a feasible solution."
            assert _recover_template_ids(r) is not None, r["quiz"]
            # The official grammar: depth <= 2, width 2, no ('lying', self) leaf.
            for speaker, s in enumerate(statements):
                nodes = [s] + [c for c in s[1:] if isinstance(c, tuple)]
                assert all(c[0] in ("telling-truth", "lying") for c in s[1:] if isinstance(c, tuple))
                assert all(len(c) == 3 for c in nodes if c[0] in ("and", "or"))
                leaves = [c for c in nodes if c[0] in ("telling-truth", "lying")]
                assert ("lying", speaker) not in leaves


def test_generate_is_deterministic(generated):
    assert generate(4, 60, seed=4) == generated[4]
    assert generate(4, 25, seed=4) == generated[4][:25]  # a prefix for a smaller n
    other = generate(4, 60, seed=5)
    assert other != generated[4]
    assert [r["statements"] for r in other] != [r["statements"] for r in generated[4]]


def test_generate_deeper_and_wider():
    for r in generate(4, 10, seed=3, depth_constraint=3, width_constraint=3):
        assert solve(r["statements"]) == [tuple(r["solution"])]
        assert r["quiz"].endswith("So who is a knight and who is a knave?")


def test_generate_custom_names_and_errors():
    recs = generate(3, 5, seed=0, names=("Ann", "Bob", "Cy"))
    assert all(sorted(r["names"]) == ["Ann", "Bob", "Cy"] for r in recs)
    with pytest.raises(ValueError, match="n_people"):
        generate(1, 1, seed=0)
    with pytest.raises(ValueError, match="names"):
        generate(3, 1, seed=0, names=("Ann", "Bob"))
    with pytest.raises(ValueError, match="width_constraint"):
        generate(2, 1, seed=0, width_constraint=4)
    assert generate(3, 0, seed=0) == []


# ------------------------------------------------------------------ loading

def _write_jsonl(path: Path, records) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_load_kk_file_and_directory(tmp_path):
    for p in (2, 3):
        _write_jsonl(tmp_path / f"people{p}_num5.jsonl", generate(p, 5, seed=p))
    (tmp_path / "notes.txt").write_text("ignored")
    everything = load_kk(tmp_path)
    assert [len(r["names"]) for r in everything] == [2] * 5 + [3] * 5
    assert load_kk(tmp_path, people=3) == generate(3, 5, seed=3)
    assert len(load_kk(tmp_path, limit=2)) == 4  # the limit is per people count
    assert load_kk(tmp_path / "people2_num5.jsonl", limit=1) == generate(2, 1, seed=2)
    with pytest.raises(FileNotFoundError, match=r"people=\[4\]"):
        load_kk(tmp_path, people=[3, 4])


def test_load_kk_errors_name_file_line_and_key(tmp_path):
    good = generate(3, 2, seed=0)
    bad = dict(good[1])
    del bad["solution"]
    f = tmp_path / "people3_num3.jsonl"
    f.write_text(json.dumps(good[0]) + "\n\n" + json.dumps(bad) + "\n")
    with pytest.raises(ValueError, match=re.escape(f"{f}:3:") + r".*missing required key\(s\) 'solution'"):
        load_kk(f)

    f.write_text(json.dumps(good[0]) + "\n{not json\n")
    with pytest.raises(ValueError, match=re.escape(f"{f}:2: invalid JSON")):
        load_kk(f)

    short = dict(good[0], solution=[True])
    f.write_text(json.dumps(short) + "\n")
    with pytest.raises(ValueError, match=re.escape(f"{f}:1:") + ".*'solution' must be a list of 3 booleans"):
        load_kk(f)

    with pytest.raises(FileNotFoundError, match="not found"):
        load_kk(tmp_path / "missing.jsonl")
    (tmp_path / "test").mkdir()
    f.unlink()
    with pytest.raises(FileNotFoundError, match="sub-folders"):
        load_kk(tmp_path)


def test_find_official_dir_env(tmp_path, monkeypatch):
    monkeypatch.setenv("DGRO_KK_DIR", str(tmp_path))
    assert find_official_dir() == tmp_path
    monkeypatch.setenv("DGRO_KK_DIR", str(tmp_path / "nope"))
    with pytest.raises(FileNotFoundError, match="DGRO_KK_DIR"):
        find_official_dir()
    monkeypatch.delenv("DGRO_KK_DIR")
    found = find_official_dir()
    assert found is None or found == REPO.parent / "shared" / "data" / "kk"


def test_load_kk_hub_offline_fails_clearly(tmp_path):
    pytest.importorskip("datasets")
    code = ("from dgro_lib.data.kk import load_kk_hub\n"
            "try:\n    load_kk_hub(subset='test', split=3)\n"
            "except RuntimeError as e:\n    print('RUNTIME_ERROR', e)\n")
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", HF_HOME=str(tmp_path / "hf"),
               PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert "RUNTIME_ERROR" in proc.stdout, proc.stdout + proc.stderr
    assert "K-and-K/knights-and-knaves" in proc.stdout and "load_kk()" in proc.stdout


# ------------------------------------------------------------------ prompts

def test_format_prompt_and_answer_text():
    r = generate(3, 1, seed=9)[0]
    plain = format_prompt(r)
    numbered = numbered_quiz(r)
    assert plain == numbered + "\nAnswer with each person's role.\n<think>"
    # only the list of inhabitants changes: "(k) NAME" in order, the rest of the quiz word for word
    intro = f"inhabitants: (1) {r['names'][0]}, (2) {r['names'][1]}, and (3) {r['names'][2]}."
    assert intro in numbered
    assert numbered.replace(intro, "") == r["quiz"].replace(
        f"inhabitants: {r['names'][0]}, {r['names'][1]}, and {r['names'][2]}.", "")
    qwen = format_prompt(r, template="qwen")
    assert qwen.startswith("<|im_start|>system\nYou are a helpful assistant.")
    assert "<think> </think> and<answer> </answer> tags" in qwen
    assert "<answer> (1) Zoey is a knight\n(2) Oliver is a knight\n(3)... </answer>.\n<|im_end|>" in qwen
    assert qwen.endswith(f"<|im_start|>user\n{r['quiz']}\n<|im_end|>\n<|im_start|>assistant\n<think>")
    with pytest.raises(ValueError, match="plain"):
        format_prompt(r, template="llama")
    expected = "\n".join(f"({i + 1}) {n} is {'a knight' if s else 'a knave'}"
                         for i, (n, s) in enumerate(zip(r["names"], r["solution"])))
    assert answer_text(r) == expected == r["solution_text_format"]
    assert answer_text({"names": ["A", "B"], "solution": [False, True]}) == "(1) A is a knave\n(2) B is a knight"



def test_numbered_quiz_on_every_people_count_and_bad_input():
    for p in range(2, 9):
        for r in generate(p, 5, seed=40 + p):
            q = numbered_quiz(r)
            for k, name in enumerate(r["names"], 1):
                assert f"({k}) {name}" in q
            assert q.count("(") == p
    bad = dict(generate(3, 1, seed=1)[0], quiz="No list here.", index=77)
    with pytest.raises(ValueError, match="record 77.*inhabitant"):
        numbered_quiz(bad)
