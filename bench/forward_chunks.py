"""Forward/backward time of the loss with length-sorted forward chunks (``train.forward_chunk_rows``) vs one padded pass.

One rollout batch (4 prompts x G=16 = 64 rows, up to 448 tokens: the cpu recipe) is sampled once; then
``DGROTrainer._compute_loss`` + backward runs on that same batch with each chunk size, interleaved over repeats
to cancel drift, and the median times and their ratios to the single padded pass are printed, with the
batch's padding fraction (the gain grows with it). Default model: the cpu preset's architecture with fresh
weights (its completions end at random, ~5 % run to the cap); ``--model`` takes a trained one, e.g. the
embedded cpu base under outputs/models/.

    .venv/bin/python bench/forward_chunks.py [--model outputs/models/llama-...] [--chunks 4 8 16] [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

from datasets import Dataset
from trl import GRPOConfig

from dgro_lib.data import kk
from dgro_lib.models import sample
from dgro_lib.rewards import kk_reward_func
from dgro_lib.rl.trainer import DGROTrainer, make_rollout_func

from _common import bench_model  # noqa: E402  (bench/ is on sys.path when a script here runs)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default=None, help="a model directory (default: fresh weights, cpu preset shape)")
    p.add_argument("--chunks", type=int, nargs="+", default=[4, 8, 16])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--prompts", type=int, default=4)
    p.add_argument("--generations", type=int, default=16)
    p.add_argument("--max-len", type=int, default=448)
    p.add_argument("--threads", type=int, default=1)
    a = p.parse_args()
    model, tokenizer = bench_model(a.model, threads=a.threads)
    records = kk.generate(3, a.prompts, seed=11)
    ds = Dataset.from_dict({"prompt": [kk.format_prompt(r) for r in records],
                            "names": [list(r["names"]) for r in records],
                            "solution": [list(r["solution"]) for r in records]})
    rows = a.prompts * a.generations
    with tempfile.TemporaryDirectory() as out:
        args = GRPOConfig(output_dir=out, per_device_train_batch_size=rows, num_generations=a.generations,
                          max_steps=1, learning_rate=0.0, max_completion_length=a.max_len, beta=0.0,
                          scale_rewards="none", logging_steps=1, save_strategy="no", report_to=[], use_cpu=True,
                          bf16=False, seed=0, disable_tqdm=True)
        trainer = DGROTrainer(model=model, reward_funcs=[kk_reward_func("[-3,3]")], args=args, train_dataset=ds,
                              processing_class=tokenizer, rollout_func=make_rollout_func(sample), loss_name="dgro",
                              loss_kwargs={"beta1": 1.0, "beta2": 0.0, "aggregation": "token-mean"})
        trainer.model.train()
        batch = trainer._generate_and_score_completions(
            [{"prompt": r["prompt"], "names": r["names"], "solution": r["solution"]} for r in ds
             for _ in range(a.generations)])
        trainer.current_gradient_accumulation_steps = 1
        mask = batch["completion_mask"]
        lengths = mask.sum(1)
        print(f"batch: {rows} rows, completion lengths mean {lengths.float().mean():.0f} / max {int(lengths.max())}, "
              f"padding {1 - mask.float().mean():.0%} of the completion columns")
        settings = [None, *a.chunks]
        times: dict = {s: [] for s in settings}
        for rep in range(a.repeats + 1):  # the first round warms up the allocator
            for s in settings:
                trainer.forward_chunk_rows = s
                trainer.model.zero_grad()
                t0 = time.perf_counter()
                trainer._compute_loss(trainer.model, batch).backward()
                if rep:
                    times[s].append(time.perf_counter() - t0)
    base = statistics.median(times[None])
    print(f"one padded pass        median {base:7.2f} s")
    for s in a.chunks:
        med = statistics.median(times[s])
        print(f"chunks of {s:3d} rows     median {med:7.2f} s   speed-up x{base / med:.2f}")


if __name__ == "__main__":
    main()
