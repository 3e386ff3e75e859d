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
# Every notebook of this project trains RL from the same embedded base model, and a figure about *how* DGRO learns
# is only informative where RL learns at all. This notebook maps it: from the Fig. 1 recipe it changes one knob at a
# time (learning rate, rollout temperature, prompts x generations per step, the base model) and measures, for each
# point, what RL did to the model on the same held-out puzzles:
#
# * **greedy accuracy** (the final evaluation; pooled McNemar z against the base),
# * **sampled accuracy** (avg@k at T = 1; paired z of the per-puzzle differences),
# * from training: the sampled training accuracy at the start and the end, the fraction of zero-variance groups
#   (all G answers equally rewarded: no learning signal) and the entropy.
#
# The two accuracies can disagree in sign on this model (RL sharpens the sampling policy while greedy decoding
# gets worse), so both are reported. The map's settings are `params/<profile>/01_miniature_map.yaml`; runs go to the
# profile's shared run store, so a point with the Fig. 1 settings *is* a Fig. 1 run, trained once.
# The first section compares the candidate base models themselves.

# %% tags=["parameters"]
import os

profile = os.environ.get("DGRO_PROFILE", "cpu")  # ci | cpu | paper
output_dir = None  # default: ../outputs/<profile>/01_miniature_map
workers = None  # parallel runs (default: the params file's `workers`)

# %%
from dgro_lib.analysis.probes import rl_map_table
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
bases = evaluate_base_candidates(cfg, cfg.knobs.base_candidates, store, cfg.knobs.base_candidate_eval.overrides(),
                                 n_puzzles=cfg.knobs.base_candidate_puzzles)
atomic_write(out / "base_candidates.csv", lambda tmp: bases.to_csv(tmp, index=False))
bases.round(4)

# %% [markdown]
# ## The map

# %% tags=["hide-output"]
result = run_experiment(cfg, out, workers=workers, store=store, evaluations=[(cfg.knobs.sampled_eval.overrides(), None)])
sampled = evaluate_runs(result, cfg, cfg.knobs.sampled_eval.overrides())  # computed beside the training: read back
table = rl_map_table(result, sampled, list(cfg.sweep))
atomic_write(out / "rl_map.csv", lambda tmp: table.to_csv(tmp, index=False))

# %%
fig = rl_map_figure(table, title=f"RL map of the miniature ({profile} profile; base {cfg.model.embedded_preset})")
save_figure(fig, table, out / "rl_map")
fig

# %% [markdown]
# ## Estimates
# Each point's greedy and sampled change against its own base model, as a run-level estimate: the difference of run
# means with its 95 % interval over seeds and puzzles (`dgro_lib.report.inference`). A map has no paper direction,
# so these are estimates, not verdicts; the pooled McNemar z beside them is the items-only view.

# %%
claims = show_claims(out, map_claims(result, sampled, list(cfg.sweep)))  # claims.csv: compared by `make reproduce`

# %% [markdown]
# ## How it was computed

# %% [markdown]
# ### The map's table
# Each point's greedy and sampled accuracy against its base, and its training figures (the map above).

# %%
table.round(4)
