"""bench/run_before_after.py's arithmetic and its log comparison, on made-up profiles (the script itself trains two
runs and is a benchmark, not a test)."""


import pytest

from bench_scripts import load


def _module():
    return load("run_before_after")


def _profile(scale: float, wall: float) -> dict:
    phases = {name: (i + 1) * 10.0 * scale for i, name in enumerate(_module().PHASES)}
    return {"phases_s": phases | {"reward scoring": 0.1}, "wall_s": wall}


def test_ratios_are_before_over_after_for_each_phase_and_the_wall():
    m = _module()
    rows = m.ratios(_profile(3.0, 600.0), _profile(1.5, 400.0))
    assert [r[0] for r in rows] == list(m.PHASES) + ["whole run (wall)"]
    for name, before, after, ratio in rows[:-1]:
        assert ratio == pytest.approx(before / after) == pytest.approx(2.0)
    assert rows[-1][1:] == (600.0, 400.0, pytest.approx(1.5))


def test_the_training_logs_compare_values_and_ignore_timings():
    m = _module()
    a = "step,loss,reward,step_time,train_runtime\n1,0.5,1.0,3.2,10\n2,0.25,1.5,3.1,20\n"
    slower = "step,loss,reward,step_time,train_runtime\n1,0.5,1.0,9.9,30\n2,0.25,1.5,9.8,60\n"
    rounded = "step,loss,reward,step_time,train_runtime\n1,0.5,1.0,3.2,10\n2,0.2500001,1.5,3.1,20\n"
    assert m.same_training_log(a, slower)[0]
    assert not m.same_training_log(a, rounded)[0]
