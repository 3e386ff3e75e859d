"""The claims file (one schema, one verdict rule) and the statistical reproduction check of make reproduce."""

import math

import numpy as np
import pandas as pd
import pytest

from dgro_lib.report.claims import (COLUMNS, claim, compare_claims, exact, format_comparison, read_claims,
                                    reproduction_status, runs_of, save_reference, split_half, write_claims)
from dgro_lib.report.inference import compare


def _arms(rng, n=4, items=2000, effect=0.08, sd_run=0.01):
    d = rng.uniform(0.3, 0.7, items)
    arm = lambda e: (rng.random((n, items)) < d + e + rng.normal(0, sd_run, (n, 1))).astype(float)  # noqa: E731
    return arm(effect), arm(0.0), (rng.random(items) < d).astype(float)


def test_write_claims_judges_one_family_and_keeps_exact_rows(tmp_path):
    a, b, base = _arms(np.random.default_rng(0))
    rows = [claim("A - B", compare(a, b), metric="greedy", direction="higher"),
            claim("B - A", compare(b, a), metric="greedy", direction="higher"),
            claim("A level", compare(a, scale=1.0), metric="greedy", unit="accuracy"),
            exact("identity residual", 1e-12, metric="residual", holds=True)]
    table = write_claims(tmp_path, rows).set_index("claim")
    assert list(read_claims(tmp_path).columns) == COLUMNS
    assert table.loc["A - B", "verdict"] == "reproduced" and table.loc["B - A", "verdict"] == "contradicted"
    assert "Holm over 2 paper claims" in table.loc["A - B", "note"]
    assert table.loc["A - B", "p_holm"] == pytest.approx(min(1.0, 2 * min(table.loc["A - B", "p"],
                                                                          table.loc["B - A", "p"])))
    assert table.loc["A level", "verdict"] == "estimate" and math.isnan(table.loc["A level", "p_holm"])
    assert table.loc["identity residual", "verdict"] == "reproduced" and math.isnan(table.loc["identity residual", "se"])
    assert table.loc["A - B", "seeds_a"] == 4 and table.loc["A - B", "mde"] > 0
    with pytest.raises(ValueError, match="duplicated"):
        write_claims(tmp_path, rows[:1] * 2)
    with pytest.raises(ValueError, match="direction"):
        claim("x", compare(a, b), metric="greedy", direction="up")


def test_reproduction_check_identical_consistent_differs(tmp_path):
    rng = np.random.default_rng(1)
    a, b, _ = _arms(rng)
    new, ref = tmp_path / "new", tmp_path / "ref"
    new.mkdir()
    base_rows = [claim("gain", compare(a, b), metric="greedy", direction="higher"),
                 exact("constant", 0.5, metric="c")]
    write_claims(new, base_rows + [exact("new claim", 1.0, metric="c")])
    (new / "fig.png").write_bytes(b"png")
    (new / "x.failed.ipynb").write_text("{}")
    copied = save_reference(new, ref)
    assert sorted(p.name for p in copied) == ["claims.csv", "fig.png"]
    import os
    os.utime(new / "fig.png", (1.0, 1.0))  # written by an earlier version of the notebook
    assert [p.name for p in save_reference(new, tmp_path / "ref2", since=100.0)] == ["claims.csv"]
    table = compare_claims(new, ref)
    assert set(table["status"]) == {"identical"} and reproduction_status(table) == "identical"
    # an honest rerun with other seeds: another estimate of the same effect
    a2, b2, _ = _arms(rng)
    write_claims(new, [claim("gain", compare(a2, b2), metric="greedy", direction="higher"),
                       exact("constant", 0.5 + 1e-12, metric="c"), exact("extra", 2.0, metric="c")])
    table = compare_claims(new, ref).set_index("claim")
    assert table.loc["gain", "status"] == "consistent"
    assert table.loc["gain", "allowed"] == pytest.approx(1.96 * math.hypot(table.loc["gain", "se"],
                                                                           table.loc["gain", "se_reference"]))
    assert table.loc["constant", "status"] == "consistent"  # exact: equal to rounding
    assert table.loc["extra", "status"] == "new only" and table.loc["new claim", "status"] == "reference only"
    assert reproduction_status(table.reset_index()) == "differs"  # a claim was lost
    # a different effect, or a different verdict, differs
    write_claims(new, [claim("gain", compare(b2, a2), metric="greedy", direction="higher"),
                       exact("constant", 0.6, metric="c"), exact("new claim", 1.0, metric="c")])
    table = compare_claims(new, ref)
    assert set(table.set_index("claim")["status"][["gain", "constant"]]) == {"differs"}
    text = format_comparison(table, "nb")
    assert text.endswith("nb: differs") and "(ref reproduced)" in text


def test_an_old_schema_reference_reads_without_a_standard_error(tmp_path):
    pd.DataFrame({"claim": ["a"], "value": [0.5], "spread": [0.01]}).to_csv(tmp_path / "claims.csv", index=False)
    table = read_claims(tmp_path)
    assert math.isnan(table.loc[0, "se"]) and table.loc[0, "value"] == 0.5
    (tmp_path / "bad.csv").write_text("x,y\n1,2\n")
    with pytest.raises(ValueError, match="not a claims file"):
        read_claims(tmp_path / "bad.csv")


def test_runs_of_orders_by_seed_and_names_what_is_missing():
    finals = pd.DataFrame({"arm": ["x", "x", "y"], "seed": [1, 0, 0], "correct": [[1, 1], [0, 1], [0, 0]]})
    assert runs_of(finals, "arm", "x").tolist() == [[0, 1], [1, 1]]
    assert runs_of(finals, "arm", "x", seeds=[1]).tolist() == [[1, 1]]
    with pytest.raises(KeyError, match="seeds \\[2\\]"):
        runs_of(finals, "arm", "x", seeds=[2])
    with pytest.raises(KeyError, match="no runs"):
        runs_of(finals, "arm", "z")


def test_split_half_of_one_recipe_reads_consistent():
    rng = np.random.default_rng(2)
    d = rng.uniform(0.3, 0.7, 600)
    runs = {arm: (rng.random((6, 600)) < d + eff + rng.normal(0, 0.02, (6, 1))).astype(float)
            for arm, eff in (("x", 0.05), ("y", 0.0))}

    def build(seeds):
        rows = [claim("x - y", compare(runs["x"][seeds], runs["y"][seeds]), metric="greedy", direction="higher"),
                claim("x", compare(runs["x"][seeds], scale=1.0), metric="greedy", unit="accuracy")]
        return pd.DataFrame([{k: v for k, v in r.items() if not k.startswith("_")} | {"verdict": "estimate"}
                             for r in rows])

    table = split_half(build, list(range(6)))
    assert set(table["status"]) <= {"consistent", "identical"} and len(table) == 2
    assert table.attrs["halves"] == ([0, 1, 2], [3, 4, 5])
    with pytest.raises(ValueError, match="at least 4 seeds"):
        split_half(build, [0, 1, 2])


@pytest.mark.parametrize("to_train", [0, 2])
def test_save_reference_executes_a_notebook_that_trained_again_from_the_store(to_train, tmp_path, monkeypatch):
    """The reference of a notebook that trained runs is the notebook executed again once they are in the store (no
    training logs in it); a notebook whose runs were all in the store or the archive runs once."""
    import dgro_lib.cli.reproduce as R

    def plan(profile, names, root, *, archive=None):
        out = pd.DataFrame([{"notebook": n, "runs": 3, "finished": 3 - to_train, "archived": 0,
                             "steps_left": 10 * to_train, "minutes": 1.0} for n in names])
        out.attrs.update(seconds_per_token=1e-4, measured_runs=1, unique={"store": 3 - to_train, "archive": 0,
                                                                          "train": to_train})
        return out

    executed, saved = [], []

    def run(name, profile, **_):
        executed.append(name)
        out = tmp_path / "outputs" / profile / name
        out.mkdir(parents=True, exist_ok=True)
        return out / f"{name}.ipynb"

    monkeypatch.setattr(R, "plan_profile", plan)
    monkeypatch.setattr(R, "run_notebook", run)
    monkeypatch.setattr(R, "OUTPUTS", tmp_path / "outputs")
    monkeypatch.setattr(R, "REFERENCE", tmp_path / "reference")
    monkeypatch.setattr(R, "save_reference", lambda src, dst, since: saved.append(src) or [])
    monkeypatch.setattr(R, "archive_runs", lambda *a, **k: [])
    assert R.main(["--profile", "cpu", "--only", "dgro_fig2_beta", "--save-reference"]) == 0
    assert executed == ["dgro_fig2_beta"] * (2 if to_train else 1) and len(saved) == 1
    executed.clear()
    R.main(["--profile", "cpu", "--only", "dgro_fig2_beta"])  # a plain reproduction keeps the one execution
    assert executed == ["dgro_fig2_beta"]
