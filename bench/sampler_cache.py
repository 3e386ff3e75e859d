"""Rollout time of ``dgro_lib.models.sample`` with its in-place growing KV cache vs transformers' DynamicCache.

Samples one rollout batch of the cpu recipe (4 prompts x 16, up to 448 tokens, temperature 1, seeded, so both
caches produce the same tokens) with each cache, interleaved over repeats, and prints the median times and the
ratio. Also the time of one decode step at 64 rows with ~400 cached tokens, where ``torch.cat`` hurts most.
Default model: the cpu preset's shape with fresh weights; ``--model`` takes a trained one (outputs/models/...).

    .venv/bin/python bench/sampler_cache.py [--model outputs/models/llama-...] [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import time
from unittest import mock

import torch
from transformers import DynamicCache

from dgro_lib.models import sampling as M  # the module whose _sampler_cache sample() looks up
from dgro_lib.data import kk

from _common import bench_model  # noqa: E402  (bench/ is on sys.path when a script here runs)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default=None)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--max-len", type=int, default=448)
    p.add_argument("--threads", type=int, default=1)
    a = p.parse_args()
    model, tok = bench_model(a.model, threads=a.threads)
    prompts = [kk.format_prompt(r) for r in kk.generate(3, 4, seed=11)]
    caches = {"growing (ours)": M._sampler_cache, "DynamicCache": lambda config: DynamicCache(config=config)}
    times: dict = {k: [] for k in caches}
    outs = {}
    for rep in range(a.repeats):
        for name, factory in caches.items():
            with mock.patch.object(M, "_sampler_cache", factory):
                t0 = time.perf_counter()
                outs[name] = M.sample(model, tok, prompts, n=16, temperature=1.0, max_new_tokens=a.max_len, seed=rep)
                times[name].append(time.perf_counter() - t0)
    lengths = [len(o) for o in outs["DynamicCache"]]
    print(f"rollouts: {len(lengths)} x up to {a.max_len} tokens, mean {statistics.mean(lengths):.0f}; same tokens with "
          f"both caches: {outs['DynamicCache'] == outs['growing (ours)']}")
    med = {k: statistics.median(v) for k, v in times.items()}
    for k, v in med.items():
        print(f"{k:16s} median {v:6.2f} s per rollout batch")
    print(f"speed-up x{med['DynamicCache'] / med['growing (ours)']:.2f}")
    ids = torch.tensor([tok(prompts[0], add_special_tokens=False)["input_ids"]] * 64)
    for name, factory in caches.items():
        cache = factory(model.config)
        with torch.no_grad():
            model(input_ids=ids, past_key_values=cache, use_cache=True, logits_to_keep=1)
            for _ in range(400 - ids.shape[1]):
                model(input_ids=ids[:, -1:], past_key_values=cache, use_cache=True)
            t0 = time.perf_counter()
            for _ in range(50):
                model(input_ids=ids[:, -1:], past_key_values=cache, use_cache=True)
        print(f"{name:16s} one decode step, 64 rows, ~{cache.get_seq_length()} cached: "
              f"{(time.perf_counter() - t0) / 50 * 1000:.1f} ms")


if __name__ == "__main__":
    main()
