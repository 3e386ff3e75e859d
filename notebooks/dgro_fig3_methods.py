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
# # DGRO Figure 3: DGRO against GRPO and online DPO
#
# **Paper claims** (DGRO §4.2, Fig. 3): on Knights-and-Knaves, DGRO ([-5,5] and [-3,3]) reaches a higher accuracy
# than GRPO, which beats online DPO; and DGRO does not lengthen its responses.
#
# **What this notebook does**: trains each method from the same base model on the same data and rollout budget,
# the same seeds for every method (the params list them; the paper averages seeds for DGRO only), and compares each
# with the base and with GRPO at the run level (the difference of run means, with a 95 % interval over seeds and the
# same held-out puzzles; the pooled McNemar z is the items-only view). The two DGRO arms are the
# DGRO Fig. 1 runs of the same reward range: the shared run store trains them once.
#
# **The methods as trained here.** DGRO: token-mean, β1 = 1, one update per rollout batch (β2 is inert there, so
# the paper's (1, 0.1) and (1, 0) are the same run). GRPO: TRL's loss (clipped importance ratio, advantages
# divided by the group's reward s.d., no KL). Online DPO: each group's best and worst sample as a preference
# pair against the frozen base model (β = 0.1). All share the sampler, reward and rollout batches.

# %% tags=["parameters"]
import os

profile = os.environ.get("DGRO_PROFILE", "cpu")  # ci | cpu | gpu | paper
output_dir = None  # default: ../outputs/<profile>/dgro_fig3_methods
workers = None  # parallel runs (default: the params file's `workers`)

# %%
from dgro_lib.analysis.probes import label_points, method_labels, rl_map_table
from dgro_lib.papers.dgro_fig3_methods import claims
from dgro_lib.papers.notebook import open_notebook, show_claims, draw_verdicts
from dgro_lib.runs.experiment import evaluate_runs, run_experiment
from dgro_lib.analysis.plots import learning_curves, learning_curves_figure, save_figure

cfg, out = open_notebook("dgro_fig3_methods", profile, output_dir)
t = cfg.train
keys = list(cfg.sweep)
print(f"profile={profile}  {len(cfg.seeds)} seeds x {len(next(iter(cfg.sweep.values())))} methods; "
      f"{t.max_steps} steps of {t.prompts_per_step} x {t.num_generations} at T = {t.temperature}, Adam lr "
      f"{t.learning_rate}")

# %%
sampled_protocol = (cfg.knobs.sampled_eval.overrides(), cfg.knobs.sampled_eval_puzzles)  # computed beside the training
result = run_experiment(cfg, out, workers=workers, store=out.parent / "runs", evaluations=[sampled_protocol])
sampled = evaluate_runs(result, cfg, sampled_protocol[0], n_puzzles=sampled_protocol[1])  # read back from the store
labelled = label_points(result, keys, labeler=method_labels)
base = result.base["summary"]
print(f"base model: held-out greedy accuracy {base['accuracy']:.3f} on {base['n']} puzzles, "
      f"mean response length {base['mean_length']:.1f} tokens")

# %% [markdown]
# ## Each method against the base model
# The items-only view, given these trained models (the verdicts below are run-level). Greedy: pooled McNemar z
# over seeds. Sampled (T = 1, avg@k on the first puzzles): paired z of the per-puzzle
# change.

# %%
table = rl_map_table(result, sampled, keys, labeler=method_labels).rename(columns={"point": "method"})
table.to_csv(out / "fig3_methods_vs_base.csv", index=False)
table.round(4)

# %% [markdown]
# ## Figure 3

# %%
curves = learning_curves(labelled, by="point", smooth_window=max(1, t.max_steps // 15)).rename(
    columns={"point": "method"})
fig = learning_curves_figure(curves, hue="method", hue_order=list(table["method"]),
                             title=f"DGRO Fig. 3 on the embedded miniature ({profile} profile)")
save_figure(fig, curves, out / "fig3_methods")
fig

# %% [markdown]
# ## Verdicts
# The paper's claims as run-level comparisons (`dgro_lib.papers.dgro_fig3_methods`): every DGRO arm against GRPO,
# GRPO against online DPO, every method against the base model, and each DGRO arm's held-out response length
# against the base's (a claim of no difference, within 10 % of the base's length). Each is the difference of run
# means with its 95 % interval over seeds and puzzles, judged by one rule, Holm-corrected over the notebook's
# claims, with the minimum detectable effect of these seeds; the pooled McNemar z is the items-only view. The
# method contrasts are read twice: in greedy accuracy, and in the sampled pass@1 estimate (avg@k at T = 1 on the
# first `sampled_eval_puzzles` puzzles), the paper's "pass@1" at its temperature, whose spread between seeds is a
# fraction of greedy's, so it is the reading that these seeds can power. It complements greedy and does not replace
# it: in it no method improves on the base (the sampled gains above), so its contrasts compare methods that did not
# move it.

# %%
table = show_claims(out, claims(labelled.finals, result.base, sampled))

# %% [markdown]
# ### The verdicts, drawn
# Left: each run's final greedy metric (a dot per seed), the arm's mean with its 95 % interval and the base
# model (dashed, where it is one model). Right: every claim tested, its estimate with the 95 % interval over seeds
# and items, coloured by verdict, the paper's direction beside it.

# %%
draw_verdicts(out / "fig3_verdicts", labelled.finals, table, by="point", base=result.base["summary"]["accuracy"],
              title=f"dgro_fig3_methods: the claims at the run level ({profile} profile)")
