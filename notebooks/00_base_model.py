# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # The embedded base model
#
# Real DGRO runs start from Qwen checkpoints; this project must also run offline on a 2-core CPU, so it builds its
# own tiny base model: a word-level tokenizer and a small Qwen2-architecture model, warmed up on generated
# Knights-and-Knaves puzzles with an explicit reasoning trace (`dgro_lib.data.trace`). The model is saved with
# `save_pretrained` under `outputs/models/` and reused by every other notebook (keyed by its config).
#
# This notebook builds (or reuses) it and evaluates it: greedy accuracy per people count, and sampled accuracy,
# which is what RL can work with — RL reweights behaviours the base already samples.

# %% tags=["parameters"]
import os

profile = os.environ.get("DGRO_PROFILE", "cpu")  # ci | cpu | paper
output_dir = None  # default: ../outputs/<profile>/00_base_model

# %%
import json
from pathlib import Path

import pandas as pd

from dgro_lib.config import find_params, load_config
from dgro_lib.evaluate import evaluate_greedy, evaluate_sampled
from dgro_lib.experiment import load_eval_records, resolve_model_path
from dgro_lib.models import load_model
from dgro_lib.plots import save_figure

cfg = load_config(find_params("00_base_model", profile))
out = Path(output_dir or f"../outputs/{profile}/00_base_model")
out.mkdir(parents=True, exist_ok=True)
path = resolve_model_path(cfg)
model, tokenizer = load_model(path)
info_file = Path(path) / "embedded.json"
if info_file.exists():
    info = json.loads(info_file.read_text())
    print(json.dumps({k: info[k] for k in info if k != "versions"}, indent=1)[:3000])
print(f"{sum(p.numel() for p in model.parameters()):,} parameters, vocabulary {len(tokenizer)}")

# %% [markdown]
# ## Greedy accuracy per people count (held-out generated puzzles, disjoint seeds from the warm-up data)

# %%
records = load_eval_records(cfg)
rows = []
for people in cfg.data.eval_people:
    subset = [r for r in records if len(r["names"]) == people]
    ev = evaluate_greedy(model, tokenizer, subset, template=cfg.data.template,
                         max_new_tokens=cfg.eval.max_new_tokens, batch_size=cfg.eval.batch_size)
    rows.append({"people": people, "n": ev["n"], "greedy_accuracy": ev["accuracy"],
                 "format_ok": ev.get("format_rate"), "mean_length": ev["mean_length"]})
greedy = pd.DataFrame(rows)
greedy

# %% [markdown]
# ## Sampled accuracy (T = 1): the spread of per-puzzle success rates is what group-based RL learns from

# %%
import matplotlib.pyplot as plt
import seaborn as sns

sampled_rows = []
for people in cfg.data.eval_people:
    subset = [r for r in records if len(r["names"]) == people][: cfg.extra["sample_prompts"]]
    ev = evaluate_sampled(model, tokenizer, subset, n=cfg.extra["samples_per_prompt"], temperature=1.0,
                          template=cfg.data.template, max_new_tokens=cfg.eval.max_new_tokens)
    for rate in ev["per_prompt"]:
        sampled_rows.append({"people": people, "success_rate": rate})
sampled = pd.DataFrame(sampled_rows)
summary = greedy.merge(sampled.groupby("people")["success_rate"].agg(
    sampled_accuracy="mean", frac_all_wrong=lambda s: (s == 0).mean(), frac_all_right=lambda s: (s == 1).mean()
).reset_index(), on="people")
summary.to_csv(out / "base_model_accuracy.csv", index=False)
fig, ax = plt.subplots(figsize=(6, 3.2))
sns.histplot(sampled, x="success_rate", hue="people", multiple="dodge", bins=9, ax=ax, shrink=0.8)
ax.set_xlabel(f"per-puzzle success rate over {cfg.extra['samples_per_prompt']} samples (T=1)")
save_figure(fig, sampled, out / "base_model_success_rates")
summary.round(3)
