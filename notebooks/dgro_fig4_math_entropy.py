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
# # DGRO Figure 4: entropy during math training
#
# **Paper claim** (DGRO Appendix, Fig. 4): on math the policy's entropy keeps rising during DGRO training
# (DeepSeek-R1-Distill-Qwen-7B on ORZ and on DeepScaleR), while on the simpler K&K logic task it converges quickly
# (the ablations' entropy panels); the paper reads the rise as continued exploration.
#
# **What this notebook does**: reads the per-step entropy (mean token entropy of the sampled completions under the
# policy being trained) of DGRO Table 3's math runs and of DGRO Fig. 1's K&K runs of the same reward range; the
# shared run store trains each once, whichever notebook asks first. Per run, the entropy over the last fifth of the
# steps is compared with the first fifth; a task's verdict is *rises* / *falls* when every seed moves that way and
# the seed mean is more than two standard errors from zero, *no clear trend* otherwise.

# %% tags=["parameters"]
import os

profile = os.environ.get("DGRO_PROFILE", "cpu")  # ci | cpu | gpu | paper
output_dir = None  # default: ../outputs/<profile>/dgro_fig4_math_entropy
workers = None  # parallel runs (default: the params file's `workers`)

# %%
from pathlib import Path

import pandas as pd

from dgro_lib.papers.dgro_fig4_math_entropy import claims
from dgro_lib.papers.notebook import model_label, show_claims
from dgro_lib.config import apply_overrides, find_params, load_config
from dgro_lib.runs.experiment import run_experiment
from dgro_lib.analysis.math import entropy_trend
from dgro_lib.analysis.plots import save_figure, smooth, training_curves

cfg = load_config(find_params("dgro_fig4_math_entropy", profile))  # the math runs: Table 3's configuration
kk_cfg = apply_overrides(load_config(find_params(cfg.knobs.kk_params, profile)), {"sweep": cfg.knobs.kk_sweep})
out = Path(output_dir or f"../outputs/{profile}/dgro_fig4_math_entropy")
print(f"profile={profile}  math: {cfg.model.embedded_preset if cfg.model.path == 'embedded' else cfg.model.path}, "
      f"{cfg.train.max_steps} steps x {len(cfg.seeds)} seeds; K&K: {cfg.knobs.kk_params} {cfg.knobs.kk_sweep}, "
      f"{kk_cfg.train.max_steps} steps x {len(kk_cfg.seeds)} seeds")

# %% tags=["hide-output"]
math_result = run_experiment(cfg, out / "math", workers=workers, store=out.parent / "runs")
kk_result = run_experiment(kk_cfg, out / "kk", workers=workers, store=out.parent / "runs")
steps = pd.concat([math_result.metrics.assign(task="math"), kk_result.metrics.assign(task="K&K")],
                  ignore_index=True)[["task", "run", "seed", "step", "entropy"]].dropna(subset=["entropy"])
steps["run"] = steps["task"] + " " + steps["run"]  # the two sweeps name their runs alike (scheme_m3_3-seed0)

# %% [markdown]
# ## Figure 4
# Entropy per optimizer step (mean ± 1 s.d. over seeds, smoothed within each run); the two tasks run different step
# counts, so the x axis is the fraction of training done.

# %%
curves = steps.assign(progress=steps["step"] / steps.groupby("task")["step"].transform("max"))
curves = smooth(curves.sort_values(["run", "step"]), ["entropy"], max(1, cfg.train.max_steps // 15), by=["run"])
curves = curves.assign(step=curves["progress"].round(2))
fig = training_curves(curves, {"entropy": "entropy (nats/token)"}, hue="task",
                      title=f"DGRO Fig. 4: math on {model_label(cfg)}, K&K on {model_label(kk_cfg)} ({profile} profile)")
fig.axes[0].set_xlabel("fraction of training")
save_figure(fig, curves, out / "fig4_entropy")
fig

# %% [markdown]
# ## Verdicts
# The paper: entropy rises on math and falls on K&K. Per run, the mean entropy over the last fifth of training minus
# the first fifth; per task, the mean over runs with its 95 % interval (a run-level t at n - 1 df), judged by one
# rule (*reproduced* / *contradicted* / *inconclusive*), Holm-corrected over the two tasks.

# %%
trend = entropy_trend(steps, by="task")
trend.to_csv(out / "fig4_entropy_trend.csv", index=False)
table = show_claims(out, claims(trend))
