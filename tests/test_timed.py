"""The README's measured costs come from recorded files (dgro_lib.cli.timed), never from a hand."""

import json
import sys

from dgro_lib.cli import timed


def test_a_successful_command_is_recorded_and_a_failing_one_is_not(tmp_path, monkeypatch):
    monkeypatch.setattr(timed, "OUTPUTS", tmp_path)
    monkeypatch.setattr(timed.record, "__defaults__", (tmp_path / "timings",))
    assert timed.main(["ok", "--", sys.executable, "-c", "pass"]) == 0
    data = json.loads((tmp_path / "timings" / "ok.json").read_text())
    assert data["name"] == "ok" and data["minutes"] >= 0 and data["cores"] >= 1 and data["commit"]
    assert timed.main(["bad", "--", sys.executable, "-c", "raise SystemExit(3)"]) == 3
    assert not (tmp_path / "timings" / "bad.json").exists()
    assert timed.main(["no-command"]) == 2


def test_the_costs_block_quotes_the_records_or_says_they_are_missing(tmp_path):
    assert timed.costs_block(tmp_path) == ("Measured: `make test` not recorded yet; "
                                           "`make reproduce` not recorded yet.")
    timed.record("test", 600.0, tmp_path)
    timed.record("reproduce-cpu", 390.0, tmp_path, notebooks=14, claims=210, identical=209)
    block = timed.costs_block(tmp_path)
    assert "`make test` 10.0 min" in block and "`make reproduce` 6.5 min for 14 notebooks, 209 of 210 claims" in block
