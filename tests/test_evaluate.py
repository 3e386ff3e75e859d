"""McNemar statistics and the paired table against hand-computed references; run ids; the reproduce CLI."""

import math
import random

import pandas as pd
import pytest

from dgro_lib import reproduce
from dgro_lib.evaluate import mcnemar, paired_improvement_table
from dgro_lib.experiment import run_id_for


def test_mcnemar_matches_a_loop_reference():
    rng = random.Random(0)
    before = [rng.random() < 0.6 for _ in range(400)]
    after = [rng.random() < 0.7 for _ in range(400)]
    m = mcnemar(before, after)
    fixed = broken = 0
    for b, a in zip(before, after):
        fixed += (not b) and a
        broken += b and (not a)
    assert (m["fixed"], m["broken"]) == (fixed, broken)
    assert m["z"] == pytest.approx((fixed - broken) / math.sqrt(fixed + broken))
    # two-sided normal p-value, computed independently through the CDF
    cdf = 0.5 * (1 + math.erf(abs(m["z"]) / math.sqrt(2)))
    assert m["p"] == pytest.approx(2 * (1 - cdf))
    assert m["acc_after"] - m["acc_before"] == pytest.approx((fixed - broken) / 400)


def test_mcnemar_edge_cases():
    assert mcnemar([True, False], [True, False])["z"] == 0.0
    with pytest.raises(ValueError, match="paired"):
        mcnemar([True], [True, False])


def test_pooled_row_sums_discordant_pairs_over_seeds():
    base = [False] * 5 + [True] * 5
    finals = pd.DataFrame([
        {"scheme": "a", "seed": 0, "correct": [True] * 3 + [False] * 2 + [True] * 4 + [False]},  # +3 -1
        {"scheme": "a", "seed": 1, "correct": [True] * 2 + [False] * 3 + [True] * 5},  # +2 -0
    ])
    t = paired_improvement_table(finals, base, by="scheme")
    pooled = t[t["seed"] == "pooled"].iloc[0]
    assert (pooled["fixed"], pooled["broken"]) == (5, 1)
    assert pooled["z"] == pytest.approx(4 / math.sqrt(6))


def test_run_ids_are_filesystem_safe_and_distinct():
    ids = {run_id_for({"reward.scheme": s}, seed) for s in ["[-1,1]", "[-3,3]", "[-5,5]"] for seed in range(3)}
    assert len(ids) == 9
    assert all("/" not in i and "[" not in i and "," not in i for i in ids)


def test_reproduce_cli_lists_and_rejects_bad_names(capsys):
    assert reproduce.main(["--profile", "ci", "--list"]) == 0
    out = capsys.readouterr().out
    assert "dgro_fig1_reward_variance" in out and "00_base_model" in out
    with pytest.raises(SystemExit):
        reproduce.main(["--profile", "nope"])
    assert "available: ci, cpu, paper" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        reproduce.main(["--profile", "ci", "--only", "no_such_notebook"])
    assert "unknown notebook" in capsys.readouterr().err
