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

# %%

# %% [markdown]
# # DCPO Table 1 / Fig. 1: samples or distributions? The J1-J4 regularizers on top of GRPO
#
# **Paper claim** (DCPO §3.2, Table 1, Fig. 1): add to GRPO a REINFORCE regularizer α·E[R·∇log π] estimated four
# ways: J1 on samples from π_old, weight 1; J2 on extra samples from the temperature-T distribution π_old^T, weight 1
# (AEPO's); J3 on samples from π_old reweighted by ρ = π_old^T/π_old (an expectation under π_old^T without new
# samples: DCPO's); J4 on samples from π_old^T reweighted by 1/ρ (an expectation under π_old from hot samples).
# What keeps the entropy is the distribution the expectation is taken under, not where the samples came from: **J3
# holds the entropy, J4 collapses it** despite its exploratory samples.
#
# **What this notebook does**: trains GRPO and the four variants from one base (α = 0.1 fixed, T chosen each
# rollout batch by DCPO's rule from the previous step's entropy against H0; J2 and J4 draw a second group per prompt
# at T), and compares where each run's entropy ends with GRPO's and J3's with J4's, seed-paired; accuracy against
# GRPO beside it. At `cpu` H0 is the miniature's calibrated value (`dcpo_table4_h0`).

# %% tags=["parameters"]
import os

profile = os.environ.get("DGRO_PROFILE", "cpu")  # ci | cpu | gpu | paper
output_dir = None  # default: ../outputs/<profile>/dcpo_fig1_grid
workers = None  # parallel runs (default: the params file's `workers`)

# %%
from dgro_lib.papers.dcpo_fig1_grid import claims
from dgro_lib.papers.notebook import open_notebook, show_claims, draw_verdicts
from dgro_lib.analysis.dcpo import method_sweep, sweep_figures, temperature_phases
from dgro_lib.runs.experiment import evaluate_runs, run_experiment

cfg, out = open_notebook("dcpo_fig1_grid", profile, output_dir)
h0 = cfg.loss.kwargs["entropy_base"]
print(f"profile={profile}  {len(cfg.seeds)} seeds x {cfg.knobs.labels}; {cfg.train.max_steps} steps; H0 = {h0}")

# %% tags=["hide-output"]
protocol = (cfg.knobs.sampled_eval.overrides(), cfg.knobs.sampled_eval_puzzles)  # computed beside the training
result = run_experiment(cfg, out, workers=workers, store=out.parent / "runs", evaluations=[protocol])
sweep = method_sweep(cfg, result, evaluate_runs(result, cfg, protocol[0], n_puzzles=protocol[1]))
arms, fig, efig = sweep_figures(sweep, out, stem="fig1", title=f"DCPO Fig. 1 grid ({profile} profile)",
                                 entropy_base=h0)

# %% [markdown]
# ## Fig. 1: entropy and accuracy

# %%
efig

# %%
fig

# %% [markdown]
# ## Verdicts
# Each claim is a run-level comparison (`dgro_lib.papers.dcpo_fig1_grid`): the difference of run means with its 95 %
# interval over seeds and problems, judged by one rule (*reproduced* when the interval excludes 0 in the paper's
# direction, *contradicted* the other way, *inconclusive* when it holds 0), Holm-corrected over the notebook's
# claims, with the minimum detectable effect of these seeds. The pooled McNemar z is the items-only view.
# Entropy: each run's mean H over the last fifth of training (per-run scalars).

# %%
table = show_claims(out, claims(sweep))

# %% [markdown]
# ### The verdicts, drawn
# Left: each run's final greedy accuracy (a dot per seed) and the base
# model (dashed, where it is one model). Right: every claim tested, its estimate with the 95 % interval over seeds
# and items, coloured by verdict, the paper's direction beside it.

# %%
draw_verdicts(out / "fig1_verdicts", sweep.finals, table, by="point", base=None,
              title=f"dcpo_fig1_grid: the claims at the run level ({profile} profile)")

# %% [markdown]
# ## How it was computed

# %% [markdown]
# ### Per arm
# Each arm's means over its seeds; every run's row is in the CSVs beside this notebook.

# %%
arms.round(4)

# %% [markdown]
# ### DCPO's temperature rule in each run
# The share of rollout batches at T_high (H ≤ H0), the number of switches, the mean α, and H early and late.

# %%
phases = temperature_phases(sweep.labelled.metrics, entropy_base=h0)
phases.to_csv(out / "fig1_temperature_phases.csv", index=False)
phases.round(4)
