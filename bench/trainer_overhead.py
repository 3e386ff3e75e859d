"""Step-time overhead of DGROTrainer (DGRO and DCPO losses) over stock trl.GRPOTrainer, same model, data and batch.

Both trainers generate with ``model.generate`` and use learning rate 0, so they sample the same completions
(same seed, same model) and the only difference is our loss path: raw-reward capture, group statistics and
the registry loss; for DCPO also the log-probs at two more temperatures (T_high, T_low) from the captured
hidden states, chunked. Runs are interleaved (A B C A B C ...) to cancel drift; prints the median step-time
ratios. Targets: DGRO <= 1.05, DCPO <= 1.10.

    .venv/bin/python bench/trainer_overhead.py [--steps 12] [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

import torch
from datasets import Dataset
from transformers import TrainerCallback
from transformers.trainer_callback import PrinterCallback
from trl import GRPOConfig, GRPOTrainer

from dgro_lib.data import kk
from dgro_lib.models import EmbeddedModelConfig, build_embedded_tokenizer
from dgro_lib.miniature import build_tiny_model
from dgro_lib.rewards import kk_reward_func
from dgro_lib.rl.trainer import DGROTrainer


class StepTimer(TrainerCallback):
    def __init__(self):
        self.times, self._t = [], None

    def on_step_begin(self, args, state, control, **kw):
        self._t = time.perf_counter()

    def on_step_end(self, args, state, control, **kw):
        self.times.append(time.perf_counter() - self._t)


def run(kind: str, steps: int, tokenizer, ds, model_cfg, G: int, prompts: int, max_len: int) -> list[float]:
    timer = StepTimer()
    model = build_tiny_model(model_cfg, tokenizer=tokenizer)
    with tempfile.TemporaryDirectory() as out:
        args = GRPOConfig(output_dir=out, per_device_train_batch_size=prompts * G, num_generations=G,
                          max_steps=steps, learning_rate=0.0, max_completion_length=max_len, beta=0.0,
                          scale_rewards="none", loss_type="bnpo", logging_steps=1, save_strategy="no",
                          report_to=[], use_cpu=True, bf16=False, seed=0, disable_tqdm=True)
        common = dict(model=model, reward_funcs=[kk_reward_func("[-3,3]")], args=args, train_dataset=ds,
                      processing_class=tokenizer, callbacks=[timer])
        if kind == "stock":
            trainer = GRPOTrainer(**common)
        elif kind == "dgro":
            trainer = DGROTrainer(**common, loss_name="dgro",
                                  loss_kwargs={"beta1": 1.0, "beta2": 0.1, "aggregation": "token-mean"})
        else:
            trainer = DGROTrainer(**common, loss_name="dcpo", loss_kwargs={}, scale="group_std")
        trainer.remove_callback(PrinterCallback)  # keep the output to the result lines
        trainer.train()
    return timer.times[2:]  # drop warm-up steps


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    tokenizer = build_embedded_tokenizer()
    model_cfg = EmbeddedModelConfig(hidden=128, layers=4, heads=4, kv_heads=4, intermediate=512)
    records = kk.generate(3, 64, seed=11)
    ds = Dataset.from_dict({"prompt": [kk.format_prompt(r) for r in records],
                            "names": [list(r["names"]) for r in records],
                            "solution": [list(r["solution"]) for r in records]})
    times = {"stock": [], "dgro": [], "dcpo": []}
    for _ in range(a.repeats):
        for kind in times:
            times[kind] += run(kind, a.steps, tokenizer, ds, model_cfg, G=8, prompts=4, max_len=64)
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"stock GRPOTrainer  median step {med['stock'] * 1000:8.1f} ms  ({len(times['stock'])} steps)")
    for kind, target in (("dgro", 1.05), ("dcpo", 1.10)):
        print(f"DGROTrainer ({kind}) median step {med[kind] * 1000:8.1f} ms  ({len(times[kind])} steps)")
    for kind, target in (("dgro", 1.05), ("dcpo", 1.10)):
        print(f"ratio {kind}/stock = {med[kind] / med['stock']:.3f}  (target <= {target:.2f})")


if __name__ == "__main__":
    main()
