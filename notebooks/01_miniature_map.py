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
# # Where RL improves the embedded miniature: the RL map
#
# Every K&K notebook of this project trains RL from the same embedded base model, and a figure about *how* DGRO
# learns is only informative where RL learns at all. This notebook maps it: from DGRO Fig. 1's recipe it changes one
# knob at a time (learning rate, rollout temperature, prompts x generations per step) and measures, for each point,
# what RL did to the model on the same held-out puzzles:
#
# * **sampled pass@1** at T = 1 (avg@k; the params' protocol, as in Figs. 1-3; paired z of the per-puzzle
#   differences against the base),
# * **greedy accuracy** (the second evaluation; pooled McNemar z against the base),
# * the learning-speed metric of Figs. 1-3 (the mean of the held-out curve during training, points),
# * from training: the sampled training accuracy over the first and the last 10 steps, the fraction of
#   zero-variance groups (all G answers equally rewarded: no learning signal) and the entropy.
#
# The map's settings are `params/<profile>/01_miniature_map.yaml`; runs go to the profile's shared run store, so a
# point with Fig. 1's settings *is* a Fig. 1 run, trained once (at `cpu`: the reference point is Fig. 1's DGRO
# [-3,3] arm, the quarter learning rate its positive control). The first section compares the candidate base
# models themselves.

# %% tags=["parameters"]
import os

profile = os.environ.get("DGRO_PROFILE", "cpu")  # ci | cpu | gpu
output_dir = None  # default: ../outputs/<profile>/01_miniature_map
workers = None  # parallel runs (default: the params file's `workers`)

# %%
from dgro_lib.analysis.learning import run_learning
from dgro_lib.analysis.probes import protocol_frame, rl_map_table
from dgro_lib.papers.miniature_map import map_claims
from dgro_lib.papers.notebook import open_notebook, show_claims
from dgro_lib.runs.experiment import evaluate_base_candidates, evaluate_runs, run_experiment
from dgro_lib.util.files import atomic_write
from dgro_lib.analysis.plots import rl_map_figure, save_figure

cfg, out = open_notebook("01_miniature_map", profile, output_dir)
store = out.parent / "runs"  # the profile's shared run store
out.mkdir(parents=True, exist_ok=True)
print(f"profile={profile}  base={cfg.model.embedded_preset}  {len(cfg.seeds)} seed(s) x {cfg.sweep}")

# %% [markdown]
# ## The candidate bases
# Greedy and sampled accuracy of each candidate, and the fraction of puzzles whose samples are all right or all
# wrong: a base RL can improve samples both right and wrong answers to the same puzzle.

# %%
bases = evaluate_base_candidates(cfg, cfg.knobs.base_candidates, store, greedy=cfg.knobs.greedy_eval.overrides(),
                                 sampled=cfg.knobs.base_candidate_eval.overrides(),
                                 n_puzzles=cfg.knobs.base_candidate_puzzles)
atomic_write(out / "base_candidates.csv", lambda tmp: bases.to_csv(tmp, index=False))
bases.round(4)

# %% [markdown]
# ## The map

# %% tags=["hide-output"]
greedy_protocol = cfg.knobs.greedy_eval.overrides()  # the second evaluation, computed beside the training
result = run_experiment(cfg, out, workers=workers, store=store, evaluations=[(greedy_protocol, None)])
greedy = evaluate_runs(result, cfg, greedy_protocol)  # read back from the store
sampled = protocol_frame(result)  # the params' own protocol: each run's final evaluation
learning = run_learning(result, max_steps=cfg.train.max_steps)  # per run: the learning-speed metric, rises
table = rl_map_table(result, sampled, list(cfg.sweep), greedy=greedy, learning=learning)
atomic_write(out / "rl_map.csv", lambda tmp: table.to_csv(tmp, index=False))

# %%
fig = rl_map_figure(table, title=f"RL map of the miniature ({profile} profile; base {cfg.model.embedded_preset})")
save_figure(fig, table, out / "rl_map")
fig

# %% [markdown]
# ## Estimates
# Each point's greedy and sampled change against its own base model, as a run-level estimate: the difference of run
# means with its 95 % interval over seeds and puzzles (`dgro_lib.report.inference`). A map has no paper direction,
# so these are estimates, not verdicts; the pooled z beside them in the table is the items-only view.

# %%
claims = show_claims(out, map_claims(result, sampled, list(cfg.sweep), greedy=greedy))  # compared by `make reproduce`

# %% [markdown]
# ## How it was computed

# %% [markdown]
# ### The map's table
# Each point's greedy and sampled accuracy against its base, and its training figures (the map above).

# %%
table.round(4)
