"""vLLM code paths on CPU: the arguments handed to TRL and to `vllm serve`, and the health wait (no vLLM here)."""

import http.server
import sys
import threading

import pytest

from dgro_lib.config import apply_overrides, find_params, load_config
from dgro_lib.runs.experiment import grpo_config
from dgro_lib.rl.vllm_server import start_vllm_server, vllm_serve_command, wait_for_health


def cfg(**over):
    # with vLLM, a loss that is not TRL's own needs its correction off (the trainer would not apply it)
    vllm = {"train.vllm_importance_sampling_correction": False} if over.get("train.use_vllm") else {}
    return apply_overrides(load_config(find_params("dgro_fig1_reward_variance", "ci")), {"sweep": {}, **vllm, **over})


def test_grpo_config_receives_the_vllm_settings(tmp_path):
    a = grpo_config(cfg(**{"train.use_vllm": True, "train.vllm_mode": "server", "train.vllm_server_port": 8123,
                           "train.vllm_server_host": "10.0.0.2"}), 0, tmp_path)
    assert (a.use_vllm, a.vllm_mode, a.vllm_server_host, a.vllm_server_port) == (True, "server", "10.0.0.2", 8123)
    c = grpo_config(cfg(**{"train.use_vllm": True, "train.vllm_gpu_memory_utilization": 0.45}), 0, tmp_path)
    assert (c.use_vllm, c.vllm_mode, c.vllm_gpu_memory_utilization) == (True, "colocate", 0.45)
    assert grpo_config(cfg(), 0, tmp_path).use_vllm is False


def test_vllm_max_model_length_is_the_prompt_plus_completion_budget(tmp_path):
    """Unset, vLLM would reserve the model's whole context (1,010,000 tokens for Qwen2.5-7B-Instruct-1M)."""
    a = grpo_config(cfg(**{"train.use_vllm": True, "train.max_prompt_length": 400,
                           "train.max_completion_length": 4096}), 0, tmp_path)
    assert a.vllm_max_model_length == 4496
    paper = apply_overrides(load_config(find_params("dgro_fig1_reward_variance", "paper")), {"sweep": {}})
    assert grpo_config(paper, 0, tmp_path).vllm_max_model_length == 400 + 4096


def test_every_arm_of_dgro_fig3_gets_the_same_vllm_correction(tmp_path):
    """TRL corrects only its own losses for the vLLM sampler mismatch, so the paper's Fig. 3 turns it off for all
    four arms (DGRO [-5,5], DGRO [-3,3], GRPO, online DPO) rather than correct the GRPO arm alone."""
    from dgro_lib.config import expand_sweep

    fig3 = load_config(find_params("dgro_fig3_methods", "paper"))
    arms = {}
    for _point, _seed, c in expand_sweep(fig3):
        a = grpo_config(c, 0, tmp_path)
        assert a.use_vllm
        arms[(c.loss.name, c.reward.scheme)] = a.vllm_importance_sampling_correction
    assert sorted(arms) == [("dgro", "[-3,3]"), ("dgro", "[-5,5]"), ("grpo", "[-3,3]"), ("online_dpo", "[-3,3]")]
    assert set(arms.values()) == {False}


def test_serve_command_is_trls_with_processed_logprobs():
    cmd = vllm_serve_command("Qwen/Qwen2.5-7B-Instruct-1M", port=8001, tensor_parallel_size=2, max_model_len=4496)
    assert cmd[cmd.index("serve") + 1] == "Qwen/Qwen2.5-7B-Instruct-1M"
    assert cmd[cmd.index("--logprobs-mode") + 1] == "processed_logprobs"
    assert cmd[cmd.index("--port") + 1] == "8001" and cmd[cmd.index("--tensor-parallel-size") + 1] == "2"
    assert cmd[cmd.index("--max-model-len") + 1] == "4496" and "--weight-transfer-config" in cmd


class _Health(http.server.BaseHTTPRequestHandler):
    calls = 0

    def do_GET(self):
        type(self).calls += 1
        self.send_response(200 if self.path == "/health" and type(self).calls >= 2 else 503)
        self.end_headers()

    def log_message(self, *a):
        pass


def test_wait_for_health_and_a_dying_server(tmp_path):
    srv = http.server.HTTPServer(("127.0.0.1", 0), _Health)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        wait_for_health(f"http://127.0.0.1:{srv.server_port}", timeout=20, interval=0.1)
        assert _Health.calls >= 2
    finally:
        srv.shutdown()
    with pytest.raises(TimeoutError, match="did not answer"):
        wait_for_health("http://127.0.0.1:9", timeout=0.3, interval=0.1)
    log = tmp_path / "vllm.log"
    with pytest.raises(RuntimeError, match="exited with code 2"):
        start_vllm_server("m", port=9, log_path=log, timeout=30,
                          command=[sys.executable, "-c", "import sys; print('CUDA not found'); sys.exit(2)"])
    assert "CUDA not found" in log.read_text()


def test_gpu_check_script_runs_its_cpu_smoke(tmp_path):
    """bench/gpu_check.py is prepared for a GPU node; its --smoke mode exercises every code path but vLLM here."""
    import json
    import subprocess
    from pathlib import Path

    repo = Path(__file__).resolve().parent.parent
    r = subprocess.run([sys.executable, str(repo / "bench" / "gpu_check.py"), "--smoke", "--out", str(tmp_path)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    res = json.loads((tmp_path / "gpu_check.json").read_text())
    assert res["hf_generate"]["tokens"] == 4 * 8 and res["vllm"] == {"skipped": "no CUDA device"}
    assert res["train"]["step_s"] > 0 and res["targets"] == {"vllm_over_hf": 10.0, "mfu": 0.30}
