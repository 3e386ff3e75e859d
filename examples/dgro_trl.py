"""DGRO in your own TRL script: a Hugging Face causal LM, Knights-and-Knaves records, DGRO's loss (DGRO Eq. 4/6,
(beta1, beta2) = (1, 0.1), V(x) = the group's mean reward) and the K&K reward (DGRO Eq. 12, the [-3,3] range of
Table 4), trained by TRL's GRPOConfig through DGROTrainer, a GRPOTrainer whose loss is looked up by name.

    python examples/dgro_trl.py MODEL DATA.jsonl [OUTPUT_DIR] [--max-steps N] [--max-completion-length N]

MODEL: a hub id or a local model directory (its tokenizer must carry a chat template). DATA.jsonl: one K&K puzzle
per line, in the format of the official K-and-K/knights-and-knaves files: ``quiz`` (the text), ``names`` (the
inhabitants, in order) and ``solution`` (one boolean per name, true for a knight); other keys are kept, unread.
"""
import argparse

import torch
from datasets import Dataset
from transformers import AutoTokenizer
from trl import GRPOConfig

from dgro_lib.data.kk import format_prompt, load_kk
from dgro_lib.rewards import kk_reward_func
from dgro_lib.rl.trainer import DGROTrainer

if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for name in ("model", "data"):
        ap.add_argument(name)
    ap.add_argument("output_dir", nargs="?", default="outputs/dgro_trl")
    ap.add_argument("--max-steps", type=int, default=1000)
    ap.add_argument("--max-completion-length", type=int, default=4096)
    a = ap.parse_args()
    records = load_kk(a.data)  # checks every record: a missing key or a bad solution is an error naming the line
    tokenizer = AutoTokenizer.from_pretrained(a.model)
    data = Dataset.from_dict({"prompt": [format_prompt(r, template="chat", tokenizer=tokenizer) for r in records],
                              "names": [r["names"] for r in records], "solution": [r["solution"] for r in records]})
    args = GRPOConfig(output_dir=a.output_dir, max_steps=a.max_steps, learning_rate=4e-7, num_generations=8,
                      per_device_train_batch_size=8, max_completion_length=a.max_completion_length, temperature=1.0,
                      beta=0.0, scale_rewards="none", logging_steps=1, report_to="none",
                      bf16=torch.cuda.is_available(), use_cpu=not torch.cuda.is_available())
    trainer = DGROTrainer(model=a.model, processing_class=tokenizer, args=args, train_dataset=data,
                          reward_funcs=kk_reward_func("[-3,3]"), loss_name="dgro",
                          loss_kwargs={"beta1": 1.0, "beta2": 0.1}, value="group_mean")
    trainer.train()
