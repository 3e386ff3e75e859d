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
# # DCPO Table 5: without double importance sampling, without the REINFORCE term
#
# **Paper claim** (DCPO §4.2, Table 5, Qwen2.5-Math-7B): removing the double IS correction (ρ = 1: the
# regularizer's expectation stays under π_old instead of the temperature-T target) or the REINFORCE term (α = 0:
# plain GRPO on DCPO's update path) collapses the entropy and costs 3.9-4.4 average points against the full DCPO
# (55.77).
#
# **What this notebook does**: trains the full DCPO and the two ablations from one base (the full DCPO runs are
# Table 2's, from the shared run store), compares each ablation with the full method on the same held-out problems,
# seed-paired (avg@k at T = 0.5 and greedy), and compares where each run's entropy ends (the token-mean −log π of
# the sampled tokens, DCPO's H) with the full method's.

# %% tags=["parameters"]
import os

profile = os.environ.get("DGRO_PROFILE", "cpu")  # ci | cpu | gpu | paper
output_dir = None  # default: ../outputs/<profile>/dcpo_table5_ablation
workers = None  # parallel runs (default: the params file's `workers`)

# %%
from dgro_lib.papers.dcpo_table5_ablation import claims
from dgro_lib.papers.notebook import open_notebook, show_claims, draw_verdicts
from dgro_lib.analysis.dcpo import method_sweep, sweep_figures, temperature_phases
from dgro_lib.runs.experiment import evaluate_runs, run_experiment

cfg, out = open_notebook("dcpo_table5_ablation", profile, output_dir)
h0 = cfg.loss.kwargs["entropy_base"]
print(f"profile={profile}  {len(cfg.seeds)} seeds x {cfg.knobs.labels}; {cfg.train.max_steps} steps; H0 = {h0}")

# %% tags=["hide-output"]
protocol = (cfg.knobs.sampled_eval.overrides(), cfg.knobs.sampled_eval_puzzles)  # computed beside the training
result = run_experiment(cfg, out, workers=workers, store=out.parent / "runs", evaluations=[protocol])
sweep = method_sweep(cfg, result, evaluate_runs(result, cfg, protocol[0], n_puzzles=protocol[1]))
arms, fig, efig = sweep_figures(sweep, out, stem="table5", title=f"DCPO Table 5 ablations ({profile} profile)",
                                 entropy_base=h0)

# %%
fig

# %%
efig

# %% [markdown]
# ## Verdicts
# Each claim is a run-level comparison (`dgro_lib.papers.dcpo_table5_ablation`): the difference of run means with its 95 %
# interval over seeds and problems, judged by one rule (*reproduced* when the interval excludes 0 in the paper's
# direction, *contradicted* the other way, *inconclusive* when it holds 0), Holm-corrected over the notebook's
# claims, with the minimum detectable effect of these seeds. The pooled McNemar z is the items-only view.
# DCPO with α = 0 is GRPO's loss: the "w/o REINFORCE" runs are the GRPO runs of `dcpo_table2_main` bit
# for bit, so that row repeats Table 2's DCPO-vs-GRPO comparison with the sign flipped.

# %%
table = show_claims(out, claims(sweep, twins={"DCPO w/o REINFORCE": "GRPO in dcpo_table2_main"}))

# %% [markdown]
# ### The verdicts, drawn
# Left: each run's final greedy metric (a dot per seed) and the base
# model (dashed, where it is one model). Right: every claim tested, its estimate with the 95 % interval over seeds
# and items, coloured by verdict, the paper's direction beside it.

# %%
draw_verdicts(out / "table5_verdicts", sweep.finals, table, by="point", base=None,
              title=f"dcpo_table5_ablation: the claims at the run level ({profile} profile)")

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
phases.to_csv(out / "table5_temperature_phases.csv", index=False)
phases.round(4)
