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
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # The embedded base model
#
# Real DGRO runs start from Qwen checkpoints; this project must also run offline on a 2-core CPU, so it builds its
# own tiny base model: a word-level tokenizer and a small Qwen2-architecture model, warmed up on generated
# Knights-and-Knaves puzzles with an explicit reasoning trace (`dgro_lib.data.kk.trace`). The model is saved with
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

from dgro_lib.analysis.probes import base_model_card, base_model_info, base_model_summary
from dgro_lib.papers.miniature_map import base_model_claims
from dgro_lib.papers.notebook import open_notebook
from dgro_lib.report.claims import write_claims
from dgro_lib.runs.experiment import base_model_tables
from dgro_lib.runs.data_sources import resolve_model_path
from dgro_lib.models import load_model
from dgro_lib.analysis.plots import save_figure, success_rate_histogram

cfg, out = open_notebook("00_base_model", profile, output_dir)
out.mkdir(parents=True, exist_ok=True)
path = resolve_model_path(cfg)
model, tokenizer = load_model(path)
info = base_model_info(path, model, tokenizer)
(out / "base_model_info.json").write_text(json.dumps(info, indent=1))  # the whole build record
base_model_card(info)

# %% [markdown]
# ## Greedy accuracy per people count (held-out generated puzzles, disjoint seeds from the warm-up data)
#
# `format_ok` is the fraction of completions whose think/answer tags pass the reward's own format rule
# (`dgro_lib.rewards.kk.check_format`); a correct answer needs it, so it bounds the accuracy from above.

# %%
# both tables (this one and the sampled one below) are computed once per base model and kept in the run store,
# which the run archive carries: a fresh clone reads them instead of sampling the base again
greedy, rates = base_model_tables(cfg, out.parent / "runs", prompts=cfg.knobs.sample_prompts,
                                  samples=cfg.knobs.samples_per_prompt)
greedy

# %% [markdown]
# ## Sampled accuracy (T = 1): the spread of per-puzzle success rates is what group-based RL learns from
#
# A puzzle solved by none (or all) of its samples gives a group with zero reward variance: no learning signal.

# %%
summary = base_model_summary(greedy, rates)
summary.to_csv(out / "base_model_accuracy.csv", index=False)
write_claims(out, base_model_claims(summary))  # what `make reproduce` compares with the reference results
summary.round(3)

# %%
fig = success_rate_histogram(rates, samples_per_prompt=cfg.knobs.samples_per_prompt)
save_figure(fig, rates, out / "base_model_success_rates")
fig
