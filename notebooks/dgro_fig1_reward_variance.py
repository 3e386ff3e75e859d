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
# # DGRO Figure 1: reward variance
#
# **Paper claims** (DGRO §4.3, Fig. 1, Theorem 3.4), with DGRO (β1, β2) = (1, 0.1) and the reward ranges of
# Table 4 ([-1,1] / [-3,3] / [-5,5], empirical variances 0.5075 / 4.6719 / 12.6875):
# - "increasing reward variance generally accelerates learning, evidenced by sharper accuracy gains";
# - "accuracy improvements under DGRO do not lead to excessively long reasoning chains";
# - "all reward settings eventually converge to low-entropy solutions"; "the high-variance setting occasionally
#   shows entropy spikes".
#
# **What this notebook does**: trains DGRO with each reward range from the same base model, the same seeds each, and
# a fourth arm built to learn more slowly, the **positive control** (the [-3,3] recipe at a quarter of the learning
# rate). Each claim is tested on the training runs (`dgro_lib.papers.dgro_fig1_reward_variance`): speed claims on
# the learning-speed metric (the mean of the held-out accuracy curve over training, `dgro_lib.analysis.learning`),
# fixed before the runs, and on the final accuracy. The control must come out slower: if it does not, the seeds are
# too few for a null between the paper's arms to mean anything.
#
# **Which regime.** One optimizer update per rollout batch, as the paper's Table 5 gives it (4 prompts × 8 rollouts,
# PPO mini-batch 128): the log-ratio to π_old is then 0 at the update, so β2 has no gradient and only the
# policy-gradient term acts. That is the headline. `dgro_fig1_beta2_acting` is the variant with two updates per
# batch, where β2 acts.
#
# **Optimizer matters.** Adam is invariant to a constant factor on the loss (up to ε and gradient clipping), and
# [-5,5] is exactly 5 × [-1,1]. With β2 inert the two ranges then give nearly the same updates; [-3,3] differs in
# *shape* (a wrong answer scores −0.5, not 0). The last section measures this on one fixed rollout batch.

# %% tags=["parameters"]
import os

profile = os.environ.get("DGRO_PROFILE", "cpu")  # ci | cpu | gpu | paper
output_dir = None  # default: ../outputs/<profile>/dgro_fig1_reward_variance
workers = None  # parallel runs (default: the params file's `workers`)

# %%
from dgro_lib.analysis.learning import arm_summary
from dgro_lib.analysis.plots import learning_bands_figure, learning_curves, save_figure
from dgro_lib.analysis.probes import adam_scale_check
from dgro_lib.models import load_model
from dgro_lib.papers.dgro_fig1_reward_variance import claims
from dgro_lib.papers.learning import read_learning_runs
from dgro_lib.papers.notebook import draw_verdicts, model_label, open_notebook, show_claims
from dgro_lib.runs.experiment import evaluate_runs, run_experiment
from dgro_lib.runs.data_sources import load_eval_records, resolve_model_path

cfg, out = open_notebook("dgro_fig1_reward_variance", profile, output_dir)
t, k = cfg.train, cfg.knobs
print(f"profile={profile}  {len(cfg.seeds)} seeds x {len(k.labels)} arms: {', '.join(k.labels)}")
print(f"optimizer: Adam lr={t.learning_rate} betas=({t.adam_beta1}, {t.adam_beta2}) clip={t.max_grad_norm}; "
      f"{t.num_iterations} update(s) per rollout batch; loss={cfg.loss.name} {cfg.loss.kwargs}; "
      f"G={t.num_generations}, {t.prompts_per_step} prompts/step, {t.max_steps} steps at T = {t.temperature}")

# %% tags=["hide-output"]
greedy_protocol = k.greedy_eval.overrides()  # the second evaluation, computed beside the training
result = run_experiment(cfg, out, workers=workers, store=out.parent / "runs", evaluations=[(greedy_protocol, None)])
result, labelled, greedy, learning = read_learning_runs(cfg, result, evaluate_runs(result, cfg, greedy_protocol))
learning.to_csv(out / "fig1_runs.csv", index=False)  # one row per run: every figure below, per seed
base = result.base["summary"]
print(f"base model: held-out {cfg.eval.temperature and 'sampled pass@1' or 'greedy accuracy'} "
      f"{100 * base['accuracy']:.1f} % on {base['n']} puzzles")

# %% [markdown]
# ## Figure 1
# Each arm's mean over its seeds with a 95 % run-level band; the positive control dashed. Held-out accuracy is
# measured on the same puzzles at every point (step 0 is the base model).

# %%
curves = learning_curves(labelled, by="point", smooth_window=5)
fig = learning_bands_figure(curves, hue="point", order=k.labels, dashed=[k.control],
                            title=f"DGRO Fig. 1 on {model_label(cfg)} ({profile} profile)")
save_figure(fig, curves, out / "fig1_reward_variance")
fig

# %% [markdown]
# ## Verdicts
# The training run is the unit: each claim is a difference of run means (seed for seed where the arms share their
# seeds), with a 95 % interval over seeds (and held-out puzzles, for accuracy), judged by one rule
# (`dgro_lib.report.verdict`). Holm's correction runs over the paper's claims as one family and the project's checks
# (the positive control, the greedy reading) as another; a bounded claim ("at most") is tested one-sidedly against
# its margin inside the same family. MDE: the smallest difference these seeds detect with 80 % power.

# %%
schemes = [a for a in k.labels if a != k.control]  # the paper's arms, in increasing reward range
table = show_claims(out, claims(labelled.finals, result.base["correct"], greedy, learning, schemes=schemes,
                                control=k.control, reference=k.control_of))

# %%
draw_verdicts(out / "fig1_verdicts", labelled.finals, table, by="point", level_metric="sampled pass@1",
              order=k.labels, base=base["accuracy"],
              title=f"dgro_fig1_reward_variance: the claims at the run level ({profile} profile)")

# %% [markdown]
# ## Per arm
# Means over the seeds (s.d. beside them); every run's row is in `fig1_runs.csv`.

# %%
arm_summary(learning, by="point", order=k.labels).round(3)

# %% [markdown]
# ## Reward scale under Adam, measured (a check of the project's)
#
# One fixed rollout batch from the base model; `updates` optimizer steps with each setting; we compare the weight
# changes ΔW. Expected: [-5,5] ≡ [-1,1] when β2 = 0 (Adam); [-5,5] with β2 ≡ [-1,1] with β2/5 (Adam); with SGD the
# [-5,5] step is 5× larger.

# %%
model, tokenizer = load_model(resolve_model_path(cfg))
scale = adam_scale_check(
    model, tokenizer, load_eval_records(cfg)[: k.scale_check_prompts],
    num_generations=k.scale_check_generations, updates=k.scale_check_updates,
    beta2=k.scale_check_beta2, lr=t.learning_rate, max_new_tokens=t.max_completion_length,
    template=cfg.data.template,
)
scale.to_csv(out / "adam_scale_check.csv", index=False)
print("empirical reward variance on this batch:", {k: round(v, 4) for k, v in scale.attrs["reward_variance"].items()})
scale.round(5)
