"""Peak extra memory of log-probs at a second temperature: chunked (ours) vs naive full logits.

Qwen-scale vocabulary (152,064) x 8,192 tokens, bf16 hidden states and LM head (random), CPU. Each variant
runs in a fresh subprocess; "extra" is the peak resident memory (ru_maxrss) minus the resident memory
after the inputs were allocated, so it counts only what the computation itself allocates. The hidden size
is small (the cost being measured is the (tokens x vocab) logits, not the projection's FLOPs).
Target: chunked <= 1 GB extra.

    .venv/bin/python bench/logprob_memory.py [--tokens 8192] [--vocab 152064] [--chunk 256]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time


def _rss_kb() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS in /proc/self/status")


def child(variant: str, tokens: int, vocab: int, hidden: int, chunk: int) -> None:
    import torch

    from dgro_lib.models.logprobs import chunked_logprobs, naive_logprobs

    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(0)
    h = torch.randn(tokens, hidden, generator=g).to(torch.bfloat16)
    w = (torch.randn(vocab, hidden, generator=g) * 0.05).to(torch.bfloat16)
    y = torch.randint(0, vocab, (tokens,), generator=g)
    base = _rss_kb()
    t0 = time.perf_counter()
    if variant == "chunked":
        out = chunked_logprobs(h, w, y, temperatures=(1.2, 0.8), chunk_size=chunk, compute_entropy=True)
        lp = out[1.2][0]
    else:
        lp, _ = naive_logprobs(h, w, y, temperature=1.2)
        lp2, _ = naive_logprobs(h, w, y, temperature=0.8)
    wall = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # kB on Linux
    print(json.dumps({"variant": variant, "extra_gb": (peak - base) / 2**20, "wall_s": wall,
                      "checksum": float(lp.float().sum())}))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tokens", type=int, default=8192)
    p.add_argument("--vocab", type=int, default=152_064)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--chunk", type=int, default=256)
    p.add_argument("--child", choices=["chunked", "naive"])
    a = p.parse_args()
    if a.child:
        child(a.child, a.tokens, a.vocab, a.hidden, a.chunk)
        return
    res = {}
    for variant in ("chunked", "naive"):
        out = subprocess.run([sys.executable, __file__, "--child", variant, "--tokens", str(a.tokens), "--vocab",
                              str(a.vocab), "--hidden", str(a.hidden), "--chunk", str(a.chunk)],
                             capture_output=True, text=True, check=True)
        res[variant] = json.loads(out.stdout.strip().splitlines()[-1])
    c, n = res["chunked"], res["naive"]
    print(f"{a.tokens} tokens x vocab {a.vocab}, bf16 inputs, 2 temperatures (+ entropy for chunked), chunk {a.chunk}")
    print(f"naive   (full logits)  peak extra {n['extra_gb']:6.2f} GB   {n['wall_s']:6.1f} s")
    print(f"chunked (ours)         peak extra {c['extra_gb']:6.2f} GB   {c['wall_s']:6.1f} s   (target <= 1 GB)")
    print(f"ratio naive/chunked memory = {n['extra_gb'] / max(c['extra_gb'], 1e-9):.1f}x;  "
          f"same log-probs: {abs(c['checksum'] - n['checksum']) <= 1e-3 * abs(n['checksum'])}")


if __name__ == "__main__":
    main()
