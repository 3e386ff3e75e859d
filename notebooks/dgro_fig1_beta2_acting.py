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
# **Paper claims** (DGRO §4.3, Fig. 1), as in the first part: "increasing reward variance generally accelerates
# learning, evidenced by sharper accuracy gains"; responses "not excessively long"; entropy "converges to
# low-entropy solutions", with "occasional entropy spikes" in the high-variance setting.
#
# **Why a second part.** The first part (`dgro_fig1_reward_variance`) trains with Adam and one optimizer update per
# rollout batch. Adam is invariant to a constant factor on the loss, and with one update β2's term has no
# gradient, so [-5,5] (= 5 × [-1,1]) gives nearly the same updates as [-1,1]. With β2 acting the range can
# matter: DGRO's loss (Eq. 4) at rewards c·r and (β1, β2) is c times the loss at rewards r and (β1, β2/c), so under
# Adam [-5,5] with β2 is [-1,1] with β2/5, a weaker pull towards π_old. This is the one setting in which the
# paper's Fig. 1 mechanism can exist under Adam.
#
# **What this notebook does**: the three ranges with (β1, β2) = (1, 0.1) and each rollout batch split into two
# optimizer updates (the second is off-policy, so β2 acts; the logged β2/β1 gradient ratio shows it) at half
# Fig. 1's learning rate, otherwise Fig. 1's recipe, and the claims of Fig. 1
# (`dgro_lib.papers.dgro_fig1_beta2_acting`): speed on the learning-speed metric and on the final accuracy, entropy
# and length. Halving the rate keeps each rollout batch's Adam budget at Fig. 1's, so the anchor to π_old is the
# only new thing; at the full rate some runs drift after learning and the spread over seeds grows several-fold.
# The headline is the first part, the paper's regime (one update per rollout batch); this part is the variant in
# which β2 acts. There is no positive control here: Fig. 1's shows that the miniature and its speed metric detect a
# slower arm. The [-3,3] runs are DGRO Fig. 2's (1, 0.1) point (the shared run store trains them once); their gain
# over the base is counted there.

# %% tags=["parameters"]
import os

profile = os.environ.get("DGRO_PROFILE", "cpu")  # ci | cpu | gpu | paper
output_dir = None  # default: ../outputs/<profile>/dgro_fig1_beta2_acting
workers = None  # parallel runs (default: the params file's `workers`)

# %%
from dgro_lib.analysis.learning import arm_summary
from dgro_lib.analysis.plots import grad_ratio_figure, learning_bands_figure, learning_curves, save_figure
from dgro_lib.papers.dgro_fig1_beta2_acting import claims
from dgro_lib.papers.learning import read_learning_runs
from dgro_lib.papers.notebook import arms_and_seeds, draw_verdicts, model_label, open_notebook, show_claims
from dgro_lib.runs.experiment import evaluate_runs, run_experiment

cfg, out = open_notebook("dgro_fig1_beta2_acting", profile, output_dir)
t, k = cfg.train, cfg.knobs
print(f"profile={profile}  {len(k.labels)} arms (seeds): {arms_and_seeds(k.labels, cfg)}")
print(f"optimizer: Adam lr={t.learning_rate}; {t.updates_per_rollout} update(s) per rollout batch of "
      f"{t.prompts_per_step} x {t.num_generations}; {t.max_steps} optimizer steps at T = {t.temperature}; "
      f"loss={cfg.loss.name} {cfg.loss.kwargs}")

# %% tags=["hide-output"]
greedy_protocol = k.greedy_eval.overrides()  # the second evaluation, computed beside the training
result = run_experiment(cfg, out, workers=workers, store=out.parent / "runs", evaluations=[(greedy_protocol, None)])
result, labelled, greedy, learning = read_learning_runs(cfg, result, evaluate_runs(result, cfg, greedy_protocol))
learning.to_csv(out / "fig1b_runs.csv", index=False)  # one row per run: every figure below, per seed
base = result.base["summary"]
print(f"base model: held-out {cfg.eval.temperature and 'sampled pass@1' or 'greedy accuracy'} "
      f"{100 * base['accuracy']:.1f} % on {base['n']} puzzles")

# %% [markdown]
# ## Figure 1 with β2 acting
# Each range's mean over its seeds with a 95 % run-level band. Held-out accuracy is measured on the same puzzles at
# every point (step 0 is the base model).

# %%
curves = learning_curves(labelled, by="point", smooth_window=max(1, t.max_steps // 16))
fig = learning_bands_figure(curves, hue="point", order=k.labels,
                            title=f"DGRO Fig. 1 with β2 = {cfg.loss.kwargs['beta2']} acting on {model_label(cfg)} "
                                  f"({profile} profile)")
save_figure(fig, curves, out / "fig1b_reward_variance_beta2")
fig

# %% [markdown]
# ## Verdicts
# As in the first part: the training run is the unit, each claim a difference of run means seed for seed (on the
# seeds both ranges hold) with a 95 % interval over seeds (and puzzles, for accuracy), one rule
# (`dgro_lib.report.verdict`), Holm over the paper's claims and, separately, over the project's (the greedy reading);
# MDE: the smallest difference these seeds detect with 80 % power.

# %%
table = show_claims(out, claims(labelled.finals, result.base["correct"], greedy, learning, schemes=k.labels,
                                counted_elsewhere=k.counted_elsewhere))

# %%
draw_verdicts(out / "fig1b_verdicts", labelled.finals, table, by="point", level_metric="sampled pass@1",
              order=k.labels, base=base["accuracy"],
              title=f"dgro_fig1_beta2_acting: the claims at the run level ({profile} profile)")

# %% [markdown]
# ## Per range
# Means over the seeds (s.d. beside them); every run's row is in `fig1b_runs.csv`.

# %%
arm_summary(learning, by="point", order=k.labels).round(3)

# %% [markdown]
# ## Did β2 act? The ratio of the β2 term's gradient to the β1 term's
# Logged by the loss at every update (`dgro/grad_ratio_b2_b1`): zero on the first update of each rollout batch,
# positive on the second.

# %%
fig, ratio = grad_ratio_figure(labelled.metrics, hue_order=k.labels)
save_figure(fig, ratio, out / "fig1b_grad_ratio")
print(ratio.groupby("point")["grad_ratio_b2_b1"].agg(["mean", "max"]).reindex(k.labels).round(4))
fig
