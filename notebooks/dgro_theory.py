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
# # DGRO Section 3 and Appendices A–F, checked numerically
#
# DGRO replaces the soft value V(x, β) = β log E_{π_old}[exp(r/β)] of the KL-regularised objective by the group-mean
# reward r̄(x) (Eq. 6), and argues with Lemmas 3.1–3.2, Theorem 3.3 and Theorem E.1 that the error V − r̄ is small,
# and with Theorem 3.4 that the reward variance and (β1, β2) set the size of the policy gradient.
#
# **What this notebook does.** It checks each statement where it can be checked exactly, in float64:
#
# * **Section 3.1** on discrete reward distributions (π_src = π_sam = p, the paper's online setting): V − r̄
#   computed exactly for hundreds of random distributions over a grid of β, against each bound;
# * **Theorem 3.4** on an autoregressive softmax policy small enough to enumerate every response (3 tokens from
#   a 3-token vocabulary, logits W φ(prefix)): PG and Normaliser of Eq. 10 as exact expectations, by autograd and
#   by the closed form of Eq. 70, against the bounds of Eq. 11;
# * **Eq. 6 as implemented**: the gradient of the project's registered `dgro` loss on a bandit against its closed
#   form.
#
# Each statement gets a verdict computed from the numbers — *holds*, *holds only under its assumptions*, or *fails*
# with a counterexample — in the last cell. No model and no training: the same code and parameters at every
# profile, seconds on one CPU core.

# %% tags=["parameters"]
import os

profile = os.environ.get("DGRO_PROFILE", "cpu")  # ci | cpu | gpu | paper (the same computation in each)
output_dir = None  # default: ../outputs/<profile>/dgro_theory

# %%

import numpy as np
import pandas as pd

from dgro_lib.analysis import theory
from dgro_lib.papers.dgro_theory import claims
from dgro_lib.papers.notebook import open_notebook, statement_table
from dgro_lib.report.claims import write_claims
from dgro_lib.config import config_to_dict
from dgro_lib.util.manifest import finish_manifest, write_manifest
from dgro_lib.analysis.plots import gradient_bounds_figure, save_figure, soft_value_figure

cfg, out = open_notebook("dgro_theory", profile, output_dir)
out.mkdir(parents=True, exist_ok=True)
write_manifest(out / "manifest.json", config=config_to_dict(cfg), seed=cfg.seeds[0])
x = cfg.knobs  # the typed extra section (dgro_lib.config.knobs.TheoryKnobs)
low, high, n_beta = x.log10_beta
betas = np.logspace(low, high, int(n_beta))
pd.set_option("display.max_colwidth", 200)
print(f"profile={profile}: {x.n_problems} reward distributions x {len(betas)} betas; {x.n_policies} policies "
      f"of {x.policy}")

# %% [markdown]
# ## Section 3.1: how far is r̄ from V(x, β)?
#
# Three distributions drawn to show the shapes (a K&K-style reward that is right 10 % and 50 % of the time, and the
# [-3,3] scheme's four levels), then the bounds' violation counts over all random distributions.

# %%
examples = [
    {"problem": "binary, P(correct) = 0.1", "kind": "binary", "p": np.array([0.9, 0.1]), "r": np.array([0.0, 1.0])},
    {"problem": "binary, P(correct) = 0.5", "kind": "binary", "p": np.array([0.5, 0.5]), "r": np.array([0.0, 1.0])},
    {"problem": "[-3,3] levels, p = (.3,.1,.2,.4)", "kind": "levels", "p": np.array([0.3, 0.1, 0.2, 0.4]),
     "r": np.array([-3.0, -1.5, -0.5, 3.0])},
]
example_sweep = theory.value_sweep(examples, betas)
fig = soft_value_figure(example_sweep)
save_figure(fig, example_sweep, out / "soft_value_error")
fig

# %%
problems = theory.random_reward_problems(x.n_problems, seed=cfg.seeds[0])
sweep = theory.value_sweep(problems, betas)
violations = theory.bound_violations(sweep)
violations.to_csv(out / "bound_violations.csv", index=False)
violations

# %% [markdown]
# ## Lemmas 3.1, 3.2 and E.2

# %%
lemma31 = theory.lemma31_check(problems, np.logspace(low, 4, 29))
lemma32 = theory.lemma32_check(problems)
lemma_e2 = theory.lemma_e2_table(0.7, 0.9, np.logspace(1, 4, 13))
lemma_e2.to_csv(out / "lemma_e2.csv", index=False)
print("Lemma 3.1:", {k: float(f"{v:.4g}") for k, v in lemma31.items()})
print("Lemma 3.2:", lemma32)
lemma_e2

# %% [markdown]
# ## What Theorem 3.3 says about DGRO's Fig. 2
#
# Eq. 15 ties the decoupled coefficients to the soft value's temperature: β = 2β2/β1. The paper reads Theorem 3.3
# as "smaller β2 → smaller approximation error". The exact error at the β of each (β1, β2) of Fig. 2, for a
# correct/wrong reward at three accuracies:

# %%
grid = theory.beta_grid_error(x.beta_grid.beta1, x.beta_grid.beta2, x.beta_grid.accuracy)
grid.to_csv(out / "fig2_beta_error.csv", index=False)
grid.pivot_table(index=["beta1", "beta2", "beta"], columns="accuracy", values="error").round(4)

# %% [markdown]
# ## Theorem 3.4: the gradient terms and their bounds

# %%
pol = x.policy
cases = theory.theorem34_sweep(x.n_policies, vocab=pol.vocab, length=pol.length, dim=pol.dim,
                               seed=cfg.seeds[0])
variance = theory.variance_sweep(vocab=pol.vocab, length=pol.length, dim=pol.dim, seed=cfg.seeds[0])
fig = gradient_bounds_figure(cases, variance)
save_figure(fig, cases, out / "gradient_bounds")
variance.to_csv(out / "gradient_vs_variance.csv", index=False)
print(f"{len(cases)} cases; the reward range sweep (β1 = 1, β2 = 0.1):")
fig

# %%
variance[["reward_range", "variance", "pg_norm", "pg_bound", "pg_bound_mad", "normaliser_norm"]].round(5)

# %% [markdown]
# ## Eq. 6 as the project implements it

# %%
bandit = theory.bandit_gradient_check(seed=cfg.seeds[0])
bandit

# %% [markdown]
# ## Verdicts
# Computed from the numbers above (`dgro_lib.analysis.theory.verdicts`), one line per statement.

# %%
verdicts = theory.verdicts(violations=violations, sweep=sweep, lemma31=lemma31, lemma32=lemma32, lemma_e2=lemma_e2,
                           thm34=cases, bandit=bandit)
table = write_claims(out, claims(verdicts, violations, sweep, cases))  # one claims file: statements and numbers
finish_manifest(out / "manifest.json")
statement_table(verdicts)
