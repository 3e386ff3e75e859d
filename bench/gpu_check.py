"""GPU check: rollout tokens/s with HF ``generate`` vs vLLM, and the model FLOPs of the project's DGRO update step
(its utilisation, MFU), on one GPU, offline, with a Qwen2.5-0.5B-shaped model of random weights. Writes one JSON.

    bash bench/gpu_check.sh                 # on a GPU node: the full check (< 8 min on one H200)
    python bench/gpu_check.py --smoke       # anywhere: a tiny CPU run that checks the script itself
    python bench/gpu_check.py --require-cuda   # exits 1, naming the torch build, when this torch has no CUDA

Without ``--smoke`` it refuses a torch without CUDA before building anything (on the CPU the 0.5B check would only
run into the shell script's timeout). The JSON is rewritten after each measurement (``"complete": false`` until the
last), so a run killed part-way keeps the measurements it finished.

Targets: vLLM >= 10x HF generate (tokens/s, same prompts, same number of new tokens, EOS ignored);
MFU >= 30 % on an H200 (bf16 dense peak 989 TFLOP/s; 6·N·tokens + attention FLOPs per training step).
Random weights: the numbers measure the engines, not the model; generation is forced to the full length.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import torch

# bf16 dense tensor-core peak (TFLOP/s) by device-name fragment; MFU is reported only for known devices.
PEAK_TFLOPS = {"H200": 989.0, "H100": 989.0, "A100": 312.0, "L40S": 362.0, "A10G": 125.0}

QWEN25_05B = dict(hidden_size=896, intermediate_size=4864, num_hidden_layers=24, num_attention_heads=14,
                  num_key_value_heads=2, vocab_size=151936, max_position_embeddings=32768, tie_word_embeddings=True,
                  rope_theta=1000000.0, rms_norm_eps=1e-6)
SMOKE = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
             vocab_size=512, max_position_embeddings=1024, tie_word_embeddings=True)


def cuda_refusal() -> str | None:
    """Why this torch cannot run the check on a GPU (None when it can): a CPU-only build, or a CUDA build that sees
    no device."""
    if torch.version.cuda is None:
        return (f"torch {torch.__version__} has no CUDA (a CPU-only build, in {sys.executable}); run the check with "
                "the GPU stack's python (pip install -e .[vllm] into .venv, or PY=/path/to/python)")
    if not torch.cuda.is_available():
        return (f"torch {torch.__version__} (CUDA {torch.version.cuda}, in {sys.executable}) sees no CUDA device "
                "(torch.cuda.is_available() is False); check the driver and CUDA_VISIBLE_DEVICES")
    return None


def write_result(out: Path, result: dict) -> None:
    """``out/gpu_check.json`` through a temporary file and a rename: a kill leaves the previous version, not half a
    file."""
    from dgro_lib.util.files import write_json

    write_json(out / "gpu_check.json", result)


def build_model(shape: dict, path: Path, dtype: torch.dtype):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    model = Qwen2ForCausalLM(Qwen2Config(**shape, torch_dtype=dtype))
    model.to(dtype)
    model.save_pretrained(path)
    return model


def n_params(model) -> int:
    return sum(p.numel() for p in model.parameters())


def prompts(n: int, length: int, vocab: int) -> list[list[int]]:
    g = torch.Generator().manual_seed(1)
    return torch.randint(10, vocab - 10, (n, length), generator=g).tolist()


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def hf_generate(model, ids: list[list[int]], new_tokens: int, device, batch: int) -> dict:
    model.eval()
    produced, t0 = 0, None
    with torch.no_grad():
        for warm in (True, False):
            produced = 0
            sync(device)
            t0 = time.perf_counter()
            rows = ids[:batch] if warm else ids
            for s in range(0, len(rows), batch):
                x = torch.tensor(rows[s:s + batch], device=device)
                out = model.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=new_tokens if not warm else 4,
                                     min_new_tokens=new_tokens if not warm else 4, do_sample=True, temperature=1.0,
                                     top_p=1.0, pad_token_id=0)
                produced += (out.shape[1] - x.shape[1]) * x.shape[0]
            sync(device)
    dt = time.perf_counter() - t0
    return {"tokens": produced, "seconds": dt, "tokens_per_s": produced / dt}


def vllm_generate(path: Path, ids: list[list[int]], new_tokens: int, gpu_memory_utilization: float) -> dict:
    try:
        from vllm import LLM, SamplingParams
        from vllm.inputs import TokensPrompt
    except ImportError as e:
        return {"skipped": f"vllm not importable: {e}"}
    llm = LLM(model=str(path), skip_tokenizer_init=True, dtype="bfloat16", gpu_memory_utilization=gpu_memory_utilization,
              enforce_eager=False, seed=0)
    sp = SamplingParams(temperature=1.0, top_p=1.0, max_tokens=new_tokens, min_tokens=new_tokens, ignore_eos=True,
                        detokenize=False)
    llm.generate([TokensPrompt(prompt_token_ids=ids[0])], SamplingParams(max_tokens=4, detokenize=False))  # warm-up
    t0 = time.perf_counter()
    outs = llm.generate([TokensPrompt(prompt_token_ids=p) for p in ids], sp)
    dt = time.perf_counter() - t0
    produced = sum(len(o.outputs[0].token_ids) for o in outs)
    del llm
    return {"tokens": produced, "seconds": dt, "tokens_per_s": produced / dt}


def train_mfu(model, device, batch: int, seq: int, steps: int, peak: float | None) -> dict:
    """The project's DGRO update step, not a plain LM step: ``batch`` rows of ``seq`` tokens (the second half is the
    completion), per-token log-probs of the completion through TRL's ``selective_log_softmax`` on the logits (the
    path the trainer's forward takes), the registered ``dgro`` loss (beta1 1, beta2 0.1, token-mean) with the
    group-mean baseline over groups of 8, backward, AdamW. FLOPs = 6·N·T + 12·L·h·s·T (attention) over every token
    forwarded; tokens/s counts them too."""
    from trl.trainer.utils import selective_log_softmax

    from dgro_lib.losses import group_mean_baseline, loss_entry

    cfg = model.config
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-6)
    g = torch.Generator().manual_seed(0)
    x = torch.randint(10, cfg.vocab_size - 10, (batch, seq), generator=g).to(device)
    comp = seq // 2
    mask = torch.ones(batch, comp, device=device)
    group = 8 if batch % 8 == 0 else batch
    rewards = torch.randint(-3, 4, (batch,), generator=g).float().to(device)
    adv = rewards - group_mean_baseline(rewards, group)
    loss_fn = loss_entry("dgro").fn
    old = None
    times = []
    for i in range(steps + 2):
        sync(device)
        t0 = time.perf_counter()
        logits = model(input_ids=x).logits[:, seq - comp - 1:-1].float()
        logps = selective_log_softmax(logits, x[:, seq - comp:])
        old = logps.detach() if old is None else old  # pi_old: the first step's policy, so beta2 has a gradient
        loss, _ = loss_fn(logps, old, mask, adv, beta1=1.0, beta2=0.1, aggregation="token-mean")
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        sync(device)
        if i >= 2:  # skip warm-up steps
            times.append(time.perf_counter() - t0)
    tokens = batch * seq
    N = n_params(model)
    flops = 6 * N * tokens + 12 * cfg.num_hidden_layers * cfg.hidden_size * seq * tokens
    step = sorted(times)[len(times) // 2]
    achieved = flops / step / 1e12
    return {"step": "dgro update (registered loss, TRL log-probs)", "batch": batch, "seq": seq, "step_s": step,
            "tokens_per_s": tokens / step, "tflops_achieved": achieved, "peak_tflops": peak,
            "mfu": (achieved / peak) if peak else None, "params": N}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--smoke", action="store_true", help="tiny model on CPU: checks the script, not the machine")
    ap.add_argument("--out", default=os.environ.get("OUT", "outputs/bench"), help="directory of gpu_check.json")
    ap.add_argument("--prompts", type=int, default=256)
    ap.add_argument("--prompt-len", type=int, default=256)
    ap.add_argument("--new-tokens", type=int, default=512)
    ap.add_argument("--hf-batch", type=int, default=64)
    ap.add_argument("--train-batch", type=int, default=8)
    ap.add_argument("--train-seq", type=int, default=2048)
    ap.add_argument("--train-steps", type=int, default=10)
    ap.add_argument("--vllm-mem", type=float, default=0.5)
    ap.add_argument("--require-cuda", action="store_true", help="only check that this torch has CUDA (exit 1 if not)")
    a = ap.parse_args(argv)
    refusal = cuda_refusal() if a.require_cuda or not a.smoke else None
    if refusal:
        print(f"gpu_check: {refusal}", file=sys.stderr, flush=True)
        return 1
    if a.require_cuda:
        print(f"gpu_check: torch {torch.__version__} with CUDA {torch.version.cuda}: ok", flush=True)
        return 0
    if a.smoke:
        a.prompts, a.prompt_len, a.new_tokens, a.hf_batch, a.train_batch, a.train_seq, a.train_steps = 4, 8, 8, 4, 2, 32, 2
    device = torch.device("cuda" if torch.cuda.is_available() and not a.smoke else "cpu")
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    name = torch.cuda.get_device_name(0) if device.type == "cuda" else platform.processor() or "cpu"
    peak = next((v for k, v in PEAK_TFLOPS.items() if k in name), None) if device.type == "cuda" else None
    result = {"device": name, "torch": torch.__version__, "smoke": a.smoke, "shape": "smoke" if a.smoke else "Qwen2.5-0.5B",
              "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "complete": False,
              "targets": {"vllm_over_hf": 10.0, "mfu": 0.30}}
    out = Path(a.out)
    write_result(out, result)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model"
        model = build_model(SMOKE if a.smoke else QWEN25_05B, path, dtype).to(device)
        result["params"] = n_params(model)
        ids = prompts(a.prompts, a.prompt_len, model.config.vocab_size)
        result["hf_generate"] = hf_generate(model, ids, a.new_tokens, device, a.hf_batch)
        write_result(out, result)
        print(json.dumps({"hf_generate": result["hf_generate"]}), flush=True)
        if device.type == "cuda":
            model.cpu()
            torch.cuda.empty_cache()
            result["vllm"] = vllm_generate(path, ids, a.new_tokens, a.vllm_mem)
            model.to(device)
        else:
            result["vllm"] = {"skipped": "no CUDA device"}
        if "tokens_per_s" in result["vllm"]:
            result["vllm_over_hf"] = result["vllm"]["tokens_per_s"] / result["hf_generate"]["tokens_per_s"]
        write_result(out, result)
        print(json.dumps({"vllm": result["vllm"]}), flush=True)
        result["train"] = train_mfu(model, device, a.train_batch, a.train_seq, a.train_steps, peak)
    result["complete"] = True
    write_result(out, result)
    print(json.dumps({"train": result["train"]}), flush=True)
    print(json.dumps({k: result.get(k) for k in ("device", "vllm_over_hf")} | {"mfu": result["train"]["mfu"]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
