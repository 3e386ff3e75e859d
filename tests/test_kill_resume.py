"""A run killed (SIGKILL) at an arbitrary point and started again ends bit-equal to an uninterrupted run."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml
from safetensors.torch import load_file

from dgro_lib.config import apply_overrides, config_to_dict, find_params, load_config

STEPS = 5
# columns that measure time, not what was computed
_TIMING = ("step_time", "train_runtime", "train_samples_per_second", "train_steps_per_second")


def _config(tmp_path: Path) -> Path:
    cfg = apply_overrides(load_config(find_params("dgro_fig1_reward_variance", "ci")),
                          {"train.max_steps": STEPS, "train.save_steps": 1, "train.eval_every": 2, "sweep": {}})
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config_to_dict(cfg), sort_keys=False))
    return path


def _start(config: Path, run_dir: Path) -> subprocess.Popen:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TRL_EXPERIMENTAL_SILENCE": "1"}
    return subprocess.Popen([sys.executable, "-m", "dgro_lib.runs.process_main", "--config", str(config), "--seed", "0",
                             "--run-dir", str(run_dir)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _finish(proc: subprocess.Popen) -> None:
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err.decode()[-3000:]


def _kill_when(proc: subprocess.Popen, ready) -> None:
    deadline = time.time() + 300
    while not ready():
        assert proc.poll() is None, f"the run ended before the kill point: {proc.stderr.read().decode()[-3000:]}"
        assert time.time() < deadline, "kill point never reached"
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.wait()


def _outputs(run_dir: Path) -> tuple:
    metrics = pd.read_csv(run_dir / "metrics.csv").drop(columns=list(_TIMING), errors="ignore")
    weights = load_file(str(run_dir / "trainer" / f"checkpoint-{STEPS}" / "model.safetensors"))
    final = json.loads((run_dir / "final_eval.json").read_text())
    return metrics, weights, final["correct"], pd.read_csv(run_dir / "heldout.csv").drop(columns=["wall_s"],
                                                                                          errors="ignore")


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("uninterrupted")
    proc = _start(_config(tmp), tmp / "run")
    _finish(proc)
    return _outputs(tmp / "run")


@pytest.mark.parametrize("where", ["before the first checkpoint", "while saving checkpoint-2", "after checkpoint-3",
                                   "at step 4", "in the final evaluation"])
def test_killed_run_resumes_to_the_same_numbers(tmp_path, reference, where):
    config, run_dir = _config(tmp_path), tmp_path / "run"
    trainer = run_dir / "trainer"
    ready = {
        "before the first checkpoint": lambda: (run_dir / "manifest.json").is_file(),
        # the last checkpoint is complete: what is left is the final evaluation and its files
        "in the final evaluation": lambda: (trainer / f"checkpoint-{STEPS}" / "trainer_state.json").is_file(),
        # the folder exists before its files: the kill lands inside the save
        "while saving checkpoint-2": lambda: (trainer / "checkpoint-2").is_dir(),
        "after checkpoint-3": lambda: (trainer / "checkpoint-3" / "trainer_state.json").is_file(),
        "at step 4": lambda: (run_dir / "metrics.csv").is_file() and len(pd.read_csv(run_dir / "metrics.csv")) >= 3,
    }[where]
    proc = _start(config, run_dir)
    _kill_when(proc, ready)
    if where != "in the final evaluation":  # that one may finish between the check and the signal
        assert not (run_dir / "final_eval.json").exists()
    _finish(_start(config, run_dir))
    metrics, weights, correct, heldout = _outputs(run_dir)
    ref_metrics, ref_weights, ref_correct, ref_heldout = reference
    pd.testing.assert_frame_equal(metrics, ref_metrics, check_exact=True)
    assert weights.keys() == ref_weights.keys()
    assert all(bool((weights[k] == ref_weights[k]).all()) for k in weights), "weights differ after the resume"
    assert correct == ref_correct
    pd.testing.assert_frame_equal(heldout, ref_heldout, check_exact=True)
