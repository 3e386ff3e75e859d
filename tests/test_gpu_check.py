"""bench/gpu_check.sh and bench/gpu_check.py without a GPU: the script runs the project's interpreter and refuses a
torch without CUDA by name before measuring anything; the JSON is written after each measurement."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from bench_scripts import load

REPO = Path(__file__).resolve().parents[1]


def _gpu_check():
    return load("gpu_check")


@pytest.mark.skipif(torch.version.cuda is not None, reason="the refusal is of a CPU-only torch")
def test_gpu_check_sh_refuses_a_cpu_torch_by_name_at_once(tmp_path):
    """With only the system's directories on PATH (no venv there), the script still finds the project's venv and
    stops with the torch version named, in seconds, where it used to run the 0.5B check on the CPU."""
    if Path(sys.executable).parent != REPO / ".venv" / "bin":
        pytest.skip("the script's default interpreter is the repository's .venv, and this is another python")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "OUT": str(tmp_path / "out"), "OMP_NUM_THREADS": "1"}
    p = subprocess.run(["bash", str(REPO / "bench" / "gpu_check.sh")], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=60)
    assert p.returncode != 0
    assert f"torch {torch.__version__} has no CUDA" in p.stderr
    assert str(REPO / ".venv" / "bin" / "python") in p.stderr  # the venv's interpreter, not PATH's
    assert not (tmp_path / "out").exists()  # refused before anything ran


@pytest.mark.skipif(torch.version.cuda is not None, reason="the refusal is of a CPU-only torch")
def test_gpu_check_py_refuses_without_smoke_and_names_the_build(tmp_path, capsys):
    gc = _gpu_check()
    assert gc.main(["--out", str(tmp_path)]) == 1
    assert gc.main(["--require-cuda"]) == 1
    assert f"torch {torch.__version__} has no CUDA" in capsys.readouterr().err
    assert not (tmp_path / "gpu_check.json").exists()


def test_gpu_check_json_survives_a_failure_after_the_first_measurement(tmp_path, monkeypatch):
    """A run killed (here: failing) in the training step keeps the rollout measurements already made."""
    gc = _gpu_check()

    def killed(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(gc, "train_mfu", killed)
    with pytest.raises(KeyboardInterrupt):
        gc.main(["--smoke", "--out", str(tmp_path)])
    got = json.loads((tmp_path / "gpu_check.json").read_text())
    assert got["complete"] is False and got["hf_generate"]["tokens"] > 0 and "vllm" in got and "train" not in got
    assert not any(p.name.endswith(".tmp") for p in tmp_path.iterdir())
    monkeypatch.undo()
    assert gc.main(["--smoke", "--out", str(tmp_path)]) == 0
    done = json.loads((tmp_path / "gpu_check.json").read_text())
    assert done["complete"] is True and "mfu" in done["train"]


def test_gpu_check_smoke_measures_the_projects_dgro_step(tmp_path):
    """The training measurement is the project's DGRO update (the registered loss on TRL's per-token log-probs),
    not a plain LM step, and its tokens/s and FLOP figures come out finite."""
    gc = _gpu_check()
    assert gc.main(["--smoke", "--out", str(tmp_path)]) == 0
    got = json.loads((tmp_path / "gpu_check.json").read_text())
    assert got["complete"] is True and got["train"]["step"].startswith("dgro update")
    assert got["train"]["tokens_per_s"] > 0 and got["train"]["tflops_achieved"] > 0
