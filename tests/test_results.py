"""The README's claims table is generated from the committed references (make results) and must be current."""

import pytest

from dgro_lib import results


def test_the_readme_claims_table_matches_the_references():
    # fails when a reference changed and `make results` was not run (or the README was edited between the markers)
    assert results.main(["--check"]) == 0


def test_splice_replaces_only_between_the_markers(tmp_path):
    text = f"intro\n{results.BEGIN}\nold\n{results.END}\noutro\n"
    assert results.splice(text, "new") == f"intro\n{results.BEGIN}\nnew\n{results.END}\noutro\n"
    with pytest.raises(ValueError, match="markers"):
        results.splice("no markers", "x")
    readme = tmp_path / "README.md"
    readme.write_text(text)
    assert results.main(["--check", "--readme", str(readme)]) == 1
    assert results.main(["--readme", str(readme)]) == 0 and results.main(["--check", "--readme", str(readme)]) == 0
