"""pass@k against brute-force enumeration of k-subsets, avg@k, the papers' table layouts, and result files."""

from __future__ import annotations

import itertools
import json
import math
import random
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

from dgro_lib.evaluate import (
    avg_at_k,
    eval_protocol,
    pass_at_k,
    pass_at_k_table,
    per_problem_counts,
    read_results,
    write_results,
)


def brute_force_pass_at_k(n: int, c: int, k: int) -> Fraction:
    """Fraction of the k-subsets of n samples (c of them correct) that hold at least one correct sample."""
    samples = [True] * c + [False] * (n - c)
    subsets = list(itertools.combinations(range(n), k))
    return Fraction(sum(any(samples[i] for i in s) for s in subsets), len(subsets))


@pytest.mark.parametrize("n", range(1, 9))
def test_pass_at_k_equals_brute_force_enumeration(n):
    for c in range(n + 1):
        for k in range(1, n + 1):
            assert pass_at_k(n, c, k) == pytest.approx(float(brute_force_pass_at_k(n, c, k)), abs=1e-12)


def test_pass_at_k_matches_the_binomial_form_for_large_n():
    # The product form must agree with 1 - C(n-c, k)/C(n, k) evaluated exactly, where the naive
    # float binomials would overflow (C(1024, 512) ~ 1e306).
    for n, c, k in [(1024, 3, 512), (1024, 1, 1), (256, 0, 128), (256, 255, 2), (1000, 10, 100), (128, 5, 128)]:
        exact = 1 - Fraction(math.comb(n - c, k), math.comb(n, k))
        assert pass_at_k(n, c, k) == pytest.approx(float(exact), rel=1e-12, abs=1e-15)


def test_pass_at_k_special_cases():
    assert pass_at_k(10, 0, 5) == 0.0
    assert pass_at_k(10, 10, 1) == 1.0
    assert pass_at_k(10, 6, 5) == 1.0  # n - c < k: every k-subset holds a correct sample
    assert pass_at_k(7, 3, 1) == pytest.approx(3 / 7)  # pass@1 = c / n
    assert pass_at_k(np.int64(8), np.int64(2), np.int64(2)) == pytest.approx(1 - 15 / 28)


@pytest.mark.parametrize(
    "args, exc, words",
    [
        ((4, 2, 5), ValueError, ["k = 5", "n = 4"]),
        ((4, 5, 1), ValueError, ["c", "5", "n", "4"]),
        ((-1, 0, 1), ValueError, ["n", "-1"]),
        ((4, -1, 1), ValueError, ["c", "-1"]),
        ((4, 1, -2), ValueError, ["k", "-2"]),
        ((4, 1, 0), ValueError, ["k", "0"]),
        ((0, 0, 0), ValueError, ["n"]),
        ((4.0, 1, 1), TypeError, ["n", "float"]),
        ((4, True, 1), TypeError, ["c", "bool"]),
        ((4, 1, "2"), TypeError, ["k", "str"]),
    ],
)
def test_pass_at_k_errors_name_the_argument(args, exc, words):
    with pytest.raises(exc) as info:
        pass_at_k(*args)
    for w in words:
        assert w in str(info.value)


def test_avg_at_k_is_the_mean_of_per_problem_fractions_and_of_pass_at_1():
    rng = random.Random(0)
    m = [[rng.random() < 0.3 for _ in range(32)] for _ in range(30)]
    expected = sum(sum(r) / 32 for r in m) / 30
    assert avg_at_k(m) == pytest.approx(expected)
    assert avg_at_k(np.array(m)) == pytest.approx(expected)
    assert avg_at_k(m) == pytest.approx(np.mean([pass_at_k(32, sum(r), 1) for r in m]))
    assert avg_at_k([[1, 0], [0, 0]]) == 0.25


@pytest.mark.parametrize(
    "matrix, words",
    [([], ["empty"]), ([[]], ["row 0", "empty"]), ([[1, 0], [1]], ["ragged", "row 1"]), ([[1, 2]], ["[0][1]", "2"])],
)
def test_avg_at_k_errors(matrix, words):
    with pytest.raises(ValueError) as info:
        avg_at_k(matrix)
    for w in words:
        assert w in str(info.value)


# -------------------------------------------------------------------------------------------
# tables
# -------------------------------------------------------------------------------------------


def long_form(rng: random.Random, methods, columns, n_problems, n_samples, *, by="benchmark", p=0.4) -> pd.DataFrame:
    rows = []
    for m in methods:
        for b in columns:
            for pid in range(n_problems):
                # problem-dependent difficulty so that pass@k differs from 1-(1-p)^k
                q = rng.random() * p * 2
                for s in range(n_samples):
                    rows.append({"method": m, by: b, "problem_id": pid, "sample_idx": s, "correct": rng.random() < q})
    return pd.DataFrame(rows)


def reference_cell(df, m, b, k, by="benchmark"):
    """Loop reference: mean over problems of the brute-force pass@k (or the plain rate for k=1)."""
    g = df[(df["method"] == m) & (df[by] == b)]
    vals = []
    for _, pg in g.groupby("problem_id"):
        n, c = len(pg), int(pg["correct"].sum())
        vals.append(float(brute_force_pass_at_k(n, c, k)))
    return sum(vals) / len(vals)


def test_dgro_table2_layout_kk_people_counts():
    rng = random.Random(1)
    people = [3, 4, 5, 6, 7, 2, 8]  # DGRO Table 2 column order: in-distribution, then OOD 2 and 8
    df = long_form(rng, ["Qwen2.5-7B-Instruct-1M", "+Logic-RL", "+DGRO [-3,3]"], [2, 3, 4, 5, 6, 7, 8], 5, 1,
                   by="people")
    table = pass_at_k_table(df, 1, by="people", columns=people)
    assert list(table.index) == ["Qwen2.5-7B-Instruct-1M", "+Logic-RL", "+DGRO [-3,3]"]
    assert list(table.columns) == people + ["Avg."]
    for m in table.index:
        for b in people:
            assert table.loc[m, b] == pytest.approx(reference_cell(df, m, b, 1, by="people"))
        assert table.loc[m, "Avg."] == pytest.approx(np.mean([table.loc[m, b] for b in people]))


def test_dgro_table2_avg_is_the_unweighted_column_mean_of_the_paper():
    # DGRO Table 2, o3-mini-high: 0.98 0.97 0.95 0.94 0.89 0.99 0.83 -> Avg. 0.935 (printed truncated).
    # 100 problems per column, one greedy sample each, the paper's accuracy of them solved.
    accs = {3: 98, 4: 97, 5: 95, 6: 94, 7: 89, 2: 99, 8: 83}
    rows = [{"method": "o3-mini-high", "people": p, "problem_id": i, "correct": i < a}
            for p, a in accs.items() for i in range(100)]
    table = pass_at_k_table(pd.DataFrame(rows), 1, by="people", columns=list(accs), sample=None)
    assert table.loc["o3-mini-high", "Avg."] == pytest.approx(6.55 / 7)
    assert math.floor(table.loc["o3-mini-high", "Avg."] * 1000) / 1000 == 0.935


def test_dcpo_tables_avg_and_pass_at_k_with_two_column_levels():
    rng = random.Random(2)
    benches = ["AIME24", "AIME25", "HMMT25"]
    df = long_form(rng, ["GRPO", "DCPO"], benches, 6, 8)
    table = pass_at_k_table(df, [1, 4, 8], columns=benches)
    assert table.columns.names == ["metric", "benchmark"]
    assert list(table.columns.get_level_values(0).unique()) == ["pass@1", "pass@4", "pass@8"]
    for m in ["GRPO", "DCPO"]:
        for k in (1, 4, 8):
            for b in benches:
                assert table.loc[m, (f"pass@{k}", b)] == pytest.approx(reference_cell(df, m, b, k))
            assert table.loc[m, (f"pass@{k}", "Avg.")] == pytest.approx(
                np.mean([table.loc[m, (f"pass@{k}", b)] for b in benches]))
    avg = pass_at_k_table(df, 8, metric="avg", columns=benches)
    p1 = pass_at_k_table(df, 1, columns=benches)
    pd.testing.assert_frame_equal(avg, p1)  # avg@k over exactly k samples = mean c/n = unbiased pass@1
    # pass@k is non-decreasing in k
    assert (table["pass@8"].values >= table["pass@4"].values - 1e-12).all()
    assert (table["pass@4"].values >= table["pass@1"].values - 1e-12).all()


def test_table_missing_cells_are_nan_and_so_is_their_avg():
    rng = random.Random(3)
    df = long_form(rng, ["A"], ["MATH 500"], 3, 2)
    df = pd.concat([df, long_form(rng, ["B"], ["MATH 500", "AIME 2024"], 3, 2)])
    table = pass_at_k_table(df, 1, columns=["AIME 2024", "MATH 500"], methods=["B", "A"])
    assert list(table.index) == ["B", "A"]
    assert math.isnan(table.loc["A", "AIME 2024"]) and math.isnan(table.loc["A", "Avg."])
    assert not math.isnan(table.loc["B", "Avg."])
    with pytest.raises(ValueError, match=r"\['C'\] not found in df\['method'\]"):
        pass_at_k_table(df, 1, methods=["A", "C"])
    with pytest.raises(ValueError, match=r"\['2'\] not found in df\['benchmark'\]"):
        pass_at_k_table(df, 1, columns=["MATH 500", "2"])


def test_table_errors_name_the_problem():
    df = pd.DataFrame([{"method": "A", "benchmark": "AIME", "problem_id": 7, "sample_idx": s, "correct": True}
                       for s in range(3)])
    with pytest.raises(ValueError, match=r"pass@4 needs at least 4 .*problem_id=7.* has 3"):
        pass_at_k_table(df, 4)
    with pytest.raises(ValueError, match=r"avg@2 needs exactly 2 .*problem_id=7.* has 3"):
        pass_at_k_table(df, 2, metric="avg")
    with pytest.raises(ValueError, match=r"missing column\(s\) \['correct'\]"):
        pass_at_k_table(df.drop(columns="correct"), 1)
    with pytest.raises(ValueError, match=r"duplicated sample.*sample_idx=0"):
        pass_at_k_table(pd.concat([df, df.iloc[:1]]), 1)
    bad = df.copy()
    bad["correct"] = bad["correct"].astype(object)
    bad.loc[1, "correct"] = "yes"
    with pytest.raises(ValueError, match=r"df\['correct'\] at row 1 .*'yes'"):
        pass_at_k_table(bad, 1)
    with pytest.raises(ValueError, match="metric"):
        pass_at_k_table(df, 1, metric="best")
    with pytest.raises(ValueError, match="ks is empty"):
        pass_at_k_table(df, [])


def test_per_problem_counts():
    df = pd.DataFrame({"method": ["a"] * 5, "benchmark": ["x"] * 5, "problem_id": [0, 0, 0, 1, 1],
                       "sample_idx": [0, 1, 2, 0, 1], "correct": [1, 0, 1, True, False]})
    counts = per_problem_counts(df)
    assert counts[["problem_id", "n", "c"]].values.tolist() == [[0, 3, 2], [1, 2, 1]]


# -------------------------------------------------------------------------------------------
# protocol and result files
# -------------------------------------------------------------------------------------------


def test_eval_protocol_validates_and_records_fields():
    p = eval_protocol(temperature=1.0, n_samples=32, max_new_tokens=8192, template="qwen", model="R1-Distill-7B",
                      metric="avg", ks=[32])
    assert p == {"temperature": 1.0, "top_p": 1.0, "n_samples": 32, "max_new_tokens": 8192, "template": "qwen",
                 "model": "R1-Distill-7B", "metric": "avg", "ks": [32]}
    assert eval_protocol(temperature=0, n_samples=1, max_new_tokens=10, template="plain")["temperature"] == 0.0
    cases = [
        (dict(temperature=-1.0), "temperature"), (dict(temperature=float("nan")), "temperature"),
        (dict(n_samples=0), "n_samples"), (dict(max_new_tokens=0), "max_new_tokens"), (dict(template=""), "template"),
        (dict(top_p=0.0), "top_p"), (dict(temperature=0.0, n_samples=4), "greedy"),
    ]
    base = dict(temperature=0.6, n_samples=4, max_new_tokens=100, template="plain")
    for override, word in cases:
        with pytest.raises(ValueError, match=word):
            eval_protocol(**{**base, **override})
    with pytest.raises(TypeError, match="JSON"):
        eval_protocol(**base, model=object())


@pytest.mark.parametrize("ks", [1, [1, 4]])
def test_write_results_round_trip_and_protocol_in_both_files(tmp_path, ks):
    rng = random.Random(4)
    df = long_form(rng, ["GRPO", "DCPO"], ["AIME24", "MATH500"], 4, 4)
    df = pd.concat([df, long_form(rng, ["Base"], ["MATH500"], 4, 4)])  # Base has no AIME24 cell: NaN
    table = pass_at_k_table(df, ks, columns=["AIME24", "MATH500"])
    assert table.isna().any().any()
    protocol = eval_protocol(temperature=0.6, n_samples=4, max_new_tokens=4096, template="qwen")
    csv_path, json_path = write_results(table, protocol, tmp_path / "sub" / "table3.csv")
    assert csv_path.name == "table3.csv" and json_path.name == "table3.json"
    first = csv_path.read_text().splitlines()[0]
    assert first.startswith("# protocol: ") and json.loads(first[len("# protocol: "):]) == protocol
    assert json.loads(json_path.read_text())["protocol"] == protocol
    back, proto = read_results(tmp_path / "sub" / "table3")
    assert proto == protocol
    pd.testing.assert_frame_equal(back, table)
    if ks == 1:
        flat = pd.read_csv(csv_path, skiprows=1, index_col=0)
        np.testing.assert_allclose(flat.values, table.values)
