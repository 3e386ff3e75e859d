"""bench/device_check.sh and bench/device_check.py without a GPU: the refusal names the torch build and is written
down before anything runs; the shortened notebook params change only the documented keys and load; the step
figures are the medians of the runs' own logs."""

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch
import yaml

from bench_scripts import load

from dgro_lib.config import load_config

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(torch.version.cuda is not None, reason="the refusal is of a CPU-only torch")
def test_device_check_refuses_a_cpu_torch_at_once_and_writes_why(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "OUT": str(tmp_path / "out"), "OMP_NUM_THREADS": "1",
           "PY": sys.executable}
    p = subprocess.run(["bash", str(REPO / "bench" / "device_check.sh")], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 1
    assert f"torch {torch.__version__} has no CUDA" in p.stderr
    got = json.loads((tmp_path / "out" / "device_check.json").read_text())
    assert got["complete"] is False and f"torch {torch.__version__}" in got["refused"]
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["device_check.json"]  # nothing else ran


def test_the_notebook_run_is_the_gpu_file_with_only_the_short_keys_changed(tmp_path):
    dc = load("device_check")
    path = dc.short_params(tmp_path)
    raw = yaml.safe_load((REPO / "params" / "gpu" / f"{dc.NOTEBOOK}.yaml").read_text())
    short = yaml.safe_load(path.read_text())
    for key in list(raw):
        if isinstance(raw[key], dict):
            changed = {k for k in raw[key] if raw[key][k] != short[key][k]}
            assert changed <= {k[1] for k in dc.SHORT if isinstance(k, tuple) and k[0] == key}, (key, changed)
        elif raw[key] != short[key]:
            assert key in dc.SHORT, key
    cfg = load_config(path)
    assert cfg.seeds == [0] and cfg.train.max_steps == 20 and cfg.train.require_gpu  # still the gpu profile's run
    assert sum(dc.LIMITS.values()) <= 9 * 60  # inside one device call's 10 minutes


def test_step_costs_are_the_medians_of_the_runs_logs(monkeypatch):
    dc = load("device_check")
    runs = sorted(p.parent for p in (REPO / "reference" / "cpu" / "runs").glob("*/metrics.csv"))[:2]
    assert runs
    monkeypatch.setattr(dc, "n_params", lambda path: 1_000_000)  # the archived runs' base folders are not here
    got = dc.step_costs(runs, peak_tflops=100.0)
    steps, toks = [], []
    for d in runs:  # the reference: each logged step's wall time and its own tokens, one at a time
        m = pd.read_csv(d / "metrics.csv")
        prev = 0.0
        for _, row in m.iterrows():
            if pd.isna(row["step_time"]):
                continue
            steps.append(row["step_time"])
            toks.append(row["num_tokens"] - prev)
            prev = row["num_tokens"]
    assert got["steps"] == len(steps) and got["runs"] == 2
    assert got["step_s_median"] == pytest.approx(float(pd.Series(steps).median()))
    assert got["tokens_per_step_median"] == pytest.approx(float(pd.Series(toks).median()))
    n = got["params"]
    assert got["mfu_median"] == pytest.approx(got["tflops_median"] / 100.0)
    per_step = pd.Series([6 * n * t / s / 1e12 for t, s in zip(toks, steps)])
    assert got["tflops_median"] == pytest.approx(float(per_step.median()))
    assert got["peak_memory_gib_max"] is None  # the CPU logs no GPU memory


def test_n_params_reads_the_safetensors_headers(tmp_path):
    dc = load("device_check")
    gc = load("gpu_check")
    model = gc.build_model(gc.SMOKE, tmp_path, torch.float32)
    assert dc.n_params(tmp_path) == sum(p.numel() for p in model.parameters())  # tied embeddings counted once
