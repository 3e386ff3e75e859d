"""DGRO Fig. 3 (methods compared on Knights-and-Knaves): the claims of ``notebooks/dgro_fig3_methods``, as the paper
states them (DGRO Section 4.3, "Comparisons of existing methods"), on runs whose held-out protocol is sampled
pass@1 at T = 1.

The paper's claims (``source = paper``, one Holm family):

* "DGRO consistently outperforms GRPO and Online DPO under both the [-3,3] and [-5,5] reward ranges": every DGRO
  arm against GRPO and against online DPO, on the learning-speed metric (:mod:`dgro_lib.analysis.learning`) and on
  the final sampled pass@1 (``higher``);
* RL improves on the base model: GRPO's and online DPO's sampled gains (``higher``). The DGRO arms' gains are
  DGRO Fig. 1's claims on the same runs, counted there once;
* "DGRO remains efficient ... without extra training cost": each DGRO arm's wall time per run minus GRPO's stays at
  most ``cost_margin`` x GRPO's (``at most``);
* "DGRO does not lead to increased response length during training": each DGRO arm's length rise (last 10 steps
  minus first 10) minus GRPO's stays at most ``length_margin`` x GRPO's final length (``at most``). On
  ``mini_guess`` responses lengthen by construction as the policy reasons more often, so the claim is read between
  arms; each arm's own rise is an estimate.

The project's checks (``source = project``): GRPO against online DPO (an ordering the paper's text never states),
and the greedy second evaluation's gains."""

from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np
import pandas as pd

from dgro_lib.papers.common import arms, contrast_rows, gain_rows, level_rows, greedy_gain_rows
from dgro_lib.papers.learning import learning_contrast_rows, learning_level_rows

__all__ = ["claims"]


def claims(finals: pd.DataFrame, base_correct, greedy: pd.DataFrame | None, learning: pd.DataFrame, *,
           dgro: Sequence[str], grpo: str, online_dpo: str, by: str = "point", cost_margin: float = 0.10,
           length_margin: float = 0.10, seeds: Iterable[int] | None = None) -> list[dict]:
    """The claim rows. ``finals``, ``base_correct``, ``greedy`` and ``learning`` as in
    :func:`dgro_lib.papers.dgro_fig1_reward_variance.claims`; ``dgro``: the DGRO arms' labels, ``grpo`` and
    ``online_dpo`` the baselines'."""
    seeds = list(seeds) if seeds is not None else None
    dgro = list(dgro)
    order = [*dgro, grpo, online_dpo]
    sampled = arms(finals, by, seeds=seeds, order=order)
    base = np.asarray(base_correct, dtype=float)
    metric = "sampled pass@1"
    pairs = [(d, other, "higher") for other in (grpo, online_dpo) for d in dgro]
    rows = level_rows(sampled, metric=metric)
    baselines = sampled.subset((grpo, online_dpo))
    rows += gain_rows(baselines, base, metric=metric)
    rows += learning_contrast_rows(learning, pairs, column="speed", metric="learning speed", unit="points", by=by,
                                   seeds=seeds)
    rows += contrast_rows(sampled, pairs, metric=metric)
    per_grpo = learning[learning[by] == grpo]
    if seeds is not None:
        per_grpo = per_grpo[per_grpo["seed"].isin(seeds)]
    cost = cost_margin * float(per_grpo["minutes"].mean())
    rows += learning_contrast_rows(learning, [(d, grpo, "at most", cost) for d in dgro], column="minutes",
                                   metric="training cost", unit="minutes", by=by, seeds=seeds,
                                   note=f"margin {100 * cost_margin:g} % of GRPO's {cost / cost_margin:.2f} min a run "
                                        "(one core)")
    length = length_margin * float(per_grpo["length_last"].mean())
    rows += learning_contrast_rows(learning, [(d, grpo, "at most", length) for d in dgro], column="length_rise",
                                   metric="response length", unit="tokens", by=by, seeds=seeds,
                                   note=f"margin {100 * length_margin:g} % of GRPO's final {length / length_margin:.1f}"
                                        " tokens")
    rows += learning_level_rows(learning, order, column="length_rise", metric="response length", unit="tokens",
                                name="{arm}: response length, last 10 steps - first 10 (tokens)", by=by,
                                seeds=seeds, note="rises by construction on mini_guess (reasoning is longer than "
                                                  "guessing): an estimate, not a test")
    # the project's checks
    rows += learning_contrast_rows(learning, [(grpo, online_dpo, "higher")], column="speed", metric="learning speed",
                                   unit="points", by=by, seeds=seeds, source="project")
    rows += contrast_rows(baselines, [(grpo, online_dpo, "higher")], metric=metric, source="project")
    if greedy is not None:
        rows += greedy_gain_rows(greedy, by, seeds=seeds, order=order)
    return rows
