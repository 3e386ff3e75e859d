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
# # DGRO Figure 1, second part: the reward range with β2 acting
#
# **Paper claim** (DGRO §4, Fig. 1): a larger reward range ([-5,5] > [-3,3] > [-1,1]) trains faster and to a
# higher accuracy.
#
# **Why a second part.** The first part (`dgro_fig1_reward_variance`) trains with Adam and one optimizer update per
# rollout batch. Adam is invariant to a constant factor on the loss, and with one update β2's term has no
# gradient, so [-5,5] (= 5 × [-1,1]) gives the same updates as [-1,1]: the reward range *cannot* matter there.
# With β2 acting it can: DGRO's loss (Eq. 4) at rewards c·r and (β1, β2) is c times the loss at rewards r and
# (β1, β2/c), so under Adam [-5,5] with β2 is [-1,1] with β2/5 — a weaker pull towards π_old. This is the one
# setting in which the paper's Fig. 1 mechanism can exist under Adam.
#
# **What this notebook does**: the three ranges again, 16 seeds each, with (β1, β2) = (1, 0.1) and each rollout
# batch split into two optimizer updates (the second is off-policy, so β2 acts; the logged β2/β1 gradient ratio
# shows it). The [-3,3] runs are DGRO Fig. 2's (1, 0.1) point (the shared run store trains them once). Each range
# is tested against the base and against [-1,1] on the same held-out puzzles, greedy and sampled.

# %% tags=["parameters"]
import os

profile = os.environ.get("DGRO_PROFILE", "cpu")  # ci | cpu | gpu | paper
output_dir = None  # default: ../outputs/<profile>/dgro_fig1_beta2_acting
workers = None  # parallel runs (default: the params file's `workers`)

# %%
from dgro_lib.analysis.probes import label_points, rl_map_table
from dgro_lib.papers.dgro_fig1_beta2_acting import claims
from dgro_lib.papers.notebook import open_notebook, show_claims, draw_verdicts
from dgro_lib.runs.experiment import evaluate_runs, run_experiment
from dgro_lib.analysis.plots import grad_ratio_figure, learning_curves, learning_curves_figure, save_figure

cfg, out = open_notebook("dgro_fig1_beta2_acting", profile, output_dir)
t = cfg.train
schemes = cfg.sweep["reward.scheme"]
print(f"profile={profile}  runs={len(cfg.seeds)} seeds x {cfg.sweep}")
print(f"optimizer: Adam lr={t.learning_rate}; {t.updates_per_rollout} update(s) per rollout batch of "
      f"{t.prompts_per_step} x {t.num_generations}; {t.max_steps} optimizer steps; loss={cfg.loss.name} "
      f"{cfg.loss.kwargs}")

# %% tags=["hide-output"]
sampled_protocol = (cfg.knobs.sampled_eval.overrides(), cfg.knobs.sampled_eval_puzzles)  # computed beside the training
result = run_experiment(cfg, out, workers=workers, store=out.parent / "runs", evaluations=[sampled_protocol])
sampled = evaluate_runs(result, cfg, sampled_protocol[0], n_puzzles=sampled_protocol[1])  # read back from the store
labelled = label_points(result, ["reward.scheme"], labeler=lambda df: df["reward.scheme"])
ranges = rl_map_table(result, sampled, ["reward.scheme"], labeler=lambda df: df["reward.scheme"]).rename(
    columns={"point": "reward.scheme"})  # each range against the base model, shown below
ranges.to_csv(out / "fig1b_ranges_vs_base.csv", index=False)
base = result.base["summary"]
print(f"base model: held-out greedy accuracy {base['accuracy']:.3f} on {base['n']} puzzles")

# %% [markdown]
# ## Figure 1 with β2 acting

# %%
curves = learning_curves(result, by="reward.scheme", smooth_window=max(1, t.max_steps // 15))
fig = learning_curves_figure(curves, hue="reward.scheme", hue_order=schemes,
                             title=f"DGRO Fig. 1 with β2 = {cfg.loss.kwargs['beta2']} acting ({profile} profile)")
save_figure(fig, curves, out / "fig1b_reward_variance_beta2")
fig

# %% [markdown]
# ## Verdicts
# The paper's ordering as run-level contrasts (every wider range against every narrower one) and each range
# against the base model: the difference of run means with its 95 % interval over seeds and puzzles, judged by
# one rule (*reproduced* / *contradicted* / *inconclusive*), Holm-corrected over the notebook's claims, with the
# minimum detectable effect of these seeds. The pooled McNemar z is the items-only view, given these models.

# %%
table = show_claims(out, claims(result.finals, result.base["correct"], sampled, schemes=schemes))

# %% [markdown]
# ### The verdicts, drawn
# Left: each run's final greedy metric (a dot per seed), the arm's mean with its 95 % interval and the base
# model (dashed, where it is one model). Right: every claim tested, its estimate with the 95 % interval over seeds
# and items, coloured by verdict, the paper's direction beside it.

# %%
draw_verdicts(out / "fig1b_verdicts", result.finals, table, by="reward.scheme", base=result.base["summary"]["accuracy"],
              title=f"dgro_fig1_beta2_acting: the claims at the run level ({profile} profile)")

# %% [markdown]
# ## How it was computed

# %% [markdown]
# ### Each range against the base model
# The items-only view, given these trained models (the verdicts below are run-level). Greedy: pooled McNemar z
# over seeds. Sampled (T = 1, avg@k on the first puzzles): paired z of the per-puzzle
# change.

# %%
ranges.round(4)

# %% [markdown]
# ### Did β2 act? ‖β2 term‖ / ‖β1 term‖ per update
# Zero on the first update of each rollout batch (π_θ = π_old), positive on the second. The ratio is larger for
# [-1,1]: its policy-gradient term is 5 × smaller than [-5,5]'s, while the β2 term does not depend on the reward.

# %%
fig, ratio = grad_ratio_figure(labelled.metrics, hue_order=schemes)
save_figure(fig, ratio, out / "fig1b_grad_ratio")
print(ratio.groupby("point")["grad_ratio_b2_b1"].agg(["mean", "max"]).reindex(schemes).round(4))
fig
