"""examples/dgro_trl.py, the README's "DGRO in your own TRL script", run as a user runs it: a tiny random-weight Qwen2
with the real Qwen2.5 tokenizer (its chat template), K&K records in the official file format, one optimizer step."""

import json
import os
import subprocess
import sys

import pytest

from dgro_lib.util.paths import REPO
from real_tokenizers import build_tiny_model, build_tokenizer


@pytest.mark.slow
def test_the_trl_example_trains_a_qwen2_on_kk_records(tmp_path):
    from dgro_lib.data.kk.generate import generate

    model = build_tiny_model(build_tokenizer("qwen2.5"), tmp_path / "qwen2-tiny")
    data = tmp_path / "kk.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in generate(2, 8, seed=0)))
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": "", "TRL_EXPERIMENTAL_SILENCE": "1"}
    out = subprocess.run([sys.executable, str(REPO / "examples" / "dgro_trl.py"), str(model), str(data),
                          str(tmp_path / "run"), "--max-steps", "1", "--max-completion-length", "12"],
                         capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    state = json.loads((tmp_path / "run" / "checkpoint-1" / "trainer_state.json").read_text())
    logged = state["log_history"][0]
    assert state["global_step"] == 1 and "dgro/pg_term" in logged and "rewards/kk_reward_[-3,3]/mean" in logged


def test_the_trl_example_refuses_a_bad_record_naming_the_line(tmp_path):
    data = tmp_path / "kk.jsonl"
    data.write_text(json.dumps({"quiz": "A says B is a knave.", "names": ["A", "B"]}) + "\n")
    out = subprocess.run([sys.executable, str(REPO / "examples" / "dgro_trl.py"), str(tmp_path / "no-model"),
                          str(data)], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert out.returncode != 0 and "missing required key(s) 'solution'" in out.stderr
