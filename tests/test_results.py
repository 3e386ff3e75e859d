"""The README's claims table and every table of docs/results.md are generated from the committed references
(make results) and must be current."""

import re
import shutil

import pytest

from dgro_lib.cli import results

REFERENCE = results.REPO / "reference" / "cpu"


@pytest.fixture
def copies(tmp_path):
    """Copies of the committed README, docs/results.md and docs/guide.md, and the arguments that point the command
    at them."""
    readme, doc, guide = tmp_path / "README.md", tmp_path / "results.md", tmp_path / "guide.md"
    shutil.copy(results.README, readme)
    shutil.copy(results.RESULTS, doc)
    shutil.copy(results.GUIDE, guide)
    return readme, doc, ["--readme", str(readme), "--results-doc", str(doc), "--guide", str(guide)]


def test_every_generated_block_matches_the_references():
    # fails when a reference changed and `make results` was not run (or a block was edited by hand)
    assert results.main(["--check"]) == 0


def test_every_notebook_with_a_claims_file_has_a_block_in_the_results_doc():
    text = results.RESULTS.read_text()
    with_claims = [n for n in results.NOTEBOOKS if (REFERENCE / n / "claims.csv").is_file()]
    assert len(with_claims) == 14
    assert all(results.markers(n)[0] in text for n in with_claims)


def test_splice_replaces_only_between_the_markers(tmp_path):
    text = f"intro\n{results.BEGIN}\nold\n{results.END}\noutro\n"
    assert results.splice(text, "new") == f"intro\n{results.BEGIN}\nnew\n{results.END}\noutro\n"
    with pytest.raises(ValueError, match="markers"):
        results.splice("no markers", "x")
    with pytest.raises(ValueError, match="repeated"):
        results.splice(text + text, "x")


def _bump_last_digit(text: str, name: str) -> str:
    """``text`` with the last digit inside block ``name`` changed (one of its table's numbers); a block without a
    digit gains a character."""
    begin, end = results.markers(name)
    head, rest = text.split(begin, 1)
    inner, tail = rest.split(end, 1)
    digits = [m.start() for m in re.finditer(r"\d", inner)]
    if digits:
        i = max(digits)
        inner = inner[:i] + str((int(inner[i]) + 1) % 10) + inner[i + 1:]
    else:
        inner = inner.rstrip("\n") + "x\n"
    return f"{head}{begin}{inner}{end}{tail}"


def tmp_guide(args: list[str]):
    from pathlib import Path
    return Path(args[args.index("--guide") + 1])


def test_a_changed_number_in_any_block_fails_the_check_naming_file_and_block(copies, capsys):
    readme, doc, args = copies
    generated = results.blocks(REFERENCE, readme, doc, tmp_guide(args))
    assert set(generated[doc]) == {"summary", *[n for n in results.NOTEBOOKS if (REFERENCE / n).is_dir()]}
    for path, blocks in generated.items():
        committed = path.read_text()
        for name in blocks:
            path.write_text(_bump_last_digit(committed, name))
            capsys.readouterr()
            assert results.main(["--check", *args]) == 1, (path.name, name)
            err = capsys.readouterr().err
            assert f"{path}: block {name} is out of date" in err and err.count("out of date") == 1
        path.write_text(committed)
    assert results.main(["--check", *args]) == 0


def test_writing_brings_the_blocks_up_to_date_and_leaves_the_prose(copies):
    readme, doc, args = copies
    edited = _bump_last_digit(doc.read_text(), "dcpo_table4_h0")
    doc.write_text(edited.replace("## Summary", "## Summary, hand-edited prose"))
    assert results.main(["--check", *args]) == 1
    assert results.main(args) == 0 and results.main(["--check", *args]) == 0
    assert "## Summary, hand-edited prose" in doc.read_text()


def test_a_missing_notebook_block_is_an_error_naming_the_notebook_and_the_file(copies):
    readme, doc, args = copies
    begin, end = results.markers("dgro_fig2_beta")
    doc.write_text(doc.read_text().replace(begin, "").replace(end, ""))
    with pytest.raises(ValueError, match=r"results\.md.*'dgro_fig2_beta'.*missing"):
        results.main(["--check", *args])
    stale = _bump_last_digit(readme.read_text(), "headline")
    readme.write_text(stale)
    with pytest.raises(ValueError, match="dgro_fig2_beta"):
        results.main(args)
    assert readme.read_text() == stale  # nothing is written while one file is in error


def test_a_block_that_no_claims_file_fills_is_an_error(copies):
    readme, doc, args = copies
    begin, end = results.markers("no_such_notebook")
    doc.write_text(doc.read_text() + f"\n{begin}\n{end}\n")
    with pytest.raises(ValueError, match="no_such_notebook"):
        results.main(["--check", *args])


def test_a_notebook_block_shows_estimates_levels_and_one_seed_points():
    base = results.notebook_block(REFERENCE, "00_base_model")
    assert "reference/cpu/00_base_model/claims.csv" in base and "**estimate**" in base
    assert "75.00 [" in base and "] % | 1 model |" in base  # a level in percent, one fixed model
    rl_map = results.notebook_block(REFERENCE, "01_miniature_map")
    assert "(exact)" not in rl_map and "(1 seed)" not in rl_map and "] points | 2 |" in rl_map  # 2 seeds a point
    import numpy as np

    from dgro_lib.report.claims import claim, claim_cells, judge_claims
    from dgro_lib.report.inference import compare

    one = judge_claims([claim("A: greedy change (points)", compare(np.array([[1.0, 0, 1, 1]]),
                                                                   base=np.array([0.0, 0, 1, 1])), metric="greedy")])
    assert claim_cells(next(one.itertuples()))[2:4] == ["+25.00 points (1 seed)", "1"]  # one run: no interval
    theory = results.notebook_block(REFERENCE, "dgro_theory")
    assert "| 0 (exact) | — | — | — | **contradicted** |" in theory
    with pytest.raises(FileNotFoundError, match="no_such_notebook"):
        results.notebook_block(REFERENCE, "no_such_notebook")


def test_seeds_needed_counts_only_judged_arm_vs_arm_claims_against_the_inference_rule():
    import math

    import pandas as pd

    from dgro_lib.report.inference import seeds_for_mde

    rows = [  # claim, metric, unit, verdict, se, se_runs, seeds_a, seeds_b, n_items, df
        ("A - B: greedy (points)", "greedy", "points", "inconclusive", 2.0, 1.9, 9, 9, 1200, 16.5),
        ("A - C: greedy (points)", "greedy", "points", "reproduced", 1.0, 0.9, 9, 9, 1200, 19.0),
        ("A - B: sampled (points)", "sampled", "points", "inconclusive", 0.6, 0.5, 9, 9, 400, 9.5),  # one arm spreads
        ("A: greedy gain over base (points)", "greedy", "points", "reproduced", 1.5, 0.7, 9, 0, 1200, 40.0),  # vs base
        ("A - B: entropy (nats/token)", "entropy", "nats/token", "inconclusive", 0.1, 0.1, 9, 9, 0, 16.0),  # not points
        ("A - D: greedy (points)", "greedy", "points", "not testable at this scale", 0.0, 0.0, 9, 9, 1200, 16.0),
        ("A - E: greedy (points)", "greedy", "points", "inconclusive", 2.0, 0.5, 9, 9, 1200, 900.0),  # items too big
        ("A - F: sampled (points)", "sampled", "points", "estimate", 0.9, 0.8, 9, 9, 400, 16.0),  # tests nothing
    ]
    claims = pd.DataFrame(rows, columns=["claim", "metric", "unit", "verdict", "se", "se_runs", "seeds_a", "seeds_b",
                                         "n_items", "df"])
    need = results.seeds_needed(claims)
    assert list(need.index) == [0, 1, 2, 6]
    for i in need.index:
        r = claims.loc[i]
        assert need[i] == seeds_for_mde(r.se, r.se_runs, r.seeds_a, r.seeds_b, r.n_items, results.MDE_TARGET,
                                        df=r.df)
    assert math.isinf(need[6]) and need[1] <= need[0]
    assert results._seeds_cell(claims, need) == f"greedy ∞; sampled {need[2]:.0f}"
    assert results._seeds_cell(claims, results.seeds_needed(claims.iloc[3:6])) == "—"
    # a seed-paired claim is the level of one per-seed difference: it projects as against a fixed comparator
    paired = claims.assign(paired=[True] + [False] * (len(claims) - 1))
    assert results.seeds_needed(paired)[0] == seeds_for_mde(2.0, 1.9, 9, 0, 1200, results.MDE_TARGET, df=16.5)
    assert results.seeds_needed(paired)[1] == need[1]
