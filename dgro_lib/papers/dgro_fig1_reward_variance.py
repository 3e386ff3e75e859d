"""DGRO Fig. 1 (reward variance; Theorem 3.4): the claims of ``notebooks/dgro_fig1_reward_variance``, as the paper
states them (DGRO Section 4.3, "Reward variance"), on runs whose held-out protocol is sampled pass@1 at T = 1.

The paper's claims (``source = paper``, one Holm family):

* RL improves on the base model: each arm's sampled pass@1 gain over the base (``higher``);
* "increasing reward variance generally accelerates learning, evidenced by sharper accuracy gains": every wider
  range against every narrower one, on the learning-speed metric (:mod:`dgro_lib.analysis.learning`) and on the
  final sampled pass@1 (``higher``);
* "all reward settings eventually converge to low-entropy solutions": each arm's rollout entropy, last 10 steps
  minus first 10 (``lower``);
* "the high-variance setting occasionally shows entropy spikes": the widest range minus the narrowest in
  :func:`~dgro_lib.analysis.learning.entropy_spike` (``higher``);
* "accuracy improvements under DGRO do not lead to excessively long reasoning chains": each arm's share of
  rollouts cut at the completion budget over the last 10 steps stays at most ``clip_margin`` points (``at most``).
  The length itself is an estimate only: on ``mini_guess`` a reasoning response is ~4x a guess, so responses
  lengthen by construction as RL makes the policy reason more often, and the rise cannot test the claim.

The project's checks (``source = project``, a Holm family of their own): the positive control (the reference arm
against the same recipe at a quarter of the learning rate, on speed and final accuracy: it must be detected, or a
null between the paper's arms is no evidence), the control's own gain, and the greedy second evaluation's gains.

``dgro_fig1_beta2_acting`` (the same claims with beta2 acting) calls :func:`claims` without a control.
"""

from __future__ import annotations

from itertools import combinations
from typing import Iterable, Sequence

import numpy as np
import pandas as pd

from dgro_lib.papers.common import arms, contrast_rows, gain_rows, level_rows, greedy_gain_rows
from dgro_lib.papers.learning import learning_contrast_rows, learning_level_rows

__all__ = ["claims"]

SPEED = "learning speed"


def claims(finals: pd.DataFrame, base_correct, greedy: pd.DataFrame | None, learning: pd.DataFrame, *,
           schemes: Sequence[str], control: str | None = None, reference: str | None = None, by: str = "point",
           clip_margin: float = 5.0, counted_elsewhere: Sequence[str] = (),
           seeds: Iterable[int] | None = None) -> list[dict]:
    """The claim rows.

    ``finals``: one row per run (``by`` its arm label, ``correct`` the per-item fraction of correct samples under
    the params' sampled protocol); ``base_correct``: the base model's, on the same items; ``greedy``: the second
    evaluation (:func:`~dgro_lib.runs.experiment.evaluate_runs`, labelled by ``by``; None: left out);
    ``learning``: :func:`~dgro_lib.analysis.learning.run_learning`'s per-run table, labelled by ``by``.
    ``schemes``: the paper's arms in increasing reward range (every later one is claimed to beat every earlier one);
    ``control``: the positive control's arm, ``reference`` the arm it is the slowed copy of (None: a notebook
    without a control, ``dgro_fig1_beta2_acting``). ``counted_elsewhere``: arms whose runs another notebook reads
    and whose gain over the base it counts (``dgro_fig1_beta2_acting``'s [-3,3] arm is ``dgro_fig2_beta``'s
    (1, 0.1) point): their gain is left out here, so that the tally counts it once. ``seeds`` restricts every arm
    to those seeds (the split-half check)."""
    if (control is None) != (reference is None):
        raise ValueError(f"claims: control and reference go together (control={control!r}, reference={reference!r})")
    unknown = sorted(set(counted_elsewhere) - set(schemes))
    if unknown:
        raise ValueError(f"claims: counted_elsewhere names no arm of schemes {list(schemes)}: {unknown}")
    seeds = list(seeds) if seeds is not None else None
    order = [*schemes, *([control] if control is not None else [])]
    sampled = arms(finals, by, seeds=seeds, order=order)
    base = np.asarray(base_correct, dtype=float)
    paper = sampled.subset(schemes)
    gained = sampled.subset(a for a in schemes if a not in counted_elsewhere)
    pairs = [(wide, narrow, "higher") for narrow, wide in combinations(schemes, 2)]
    metric = "sampled pass@1"
    rows = level_rows(sampled, metric=metric)
    rows += gain_rows(gained, base, metric=metric)
    rows += learning_contrast_rows(learning, pairs, column="speed", metric=SPEED, unit="points", by=by, seeds=seeds)
    rows += contrast_rows(paper, pairs, metric=metric)
    rows += learning_level_rows(learning, schemes, column="entropy_rise", metric="entropy", unit="nats/token",
                                name="{arm}: entropy, last 10 steps - first 10 (nats/token)", direction="lower",
                                by=by, seeds=seeds, note="falls partly by construction on mini_guess (a guess is a "
                                                        "high-entropy token, a trace a low-entropy one)")
    rows += learning_contrast_rows(learning, [(schemes[-1], schemes[0], "higher")], column="entropy_spike",
                                   metric="entropy spike", unit="nats/token", by=by, seeds=seeds)
    rows += learning_level_rows(learning, schemes, column="clipped_last", metric="truncated rollouts",
                                unit="points", name="{arm}: rollouts cut at the length budget, last 10 steps (%)",
                                direction="at most", margin=clip_margin, by=by, seeds=seeds,
                                note=f"'not excessively long': at most {clip_margin:g} % of rollouts run into "
                                     "the completion budget")
    rows += learning_level_rows(learning, schemes, column="length_rise", metric="response length",
                                unit="tokens", name="{arm}: response length, last 10 steps - first 10 (tokens)",
                                by=by, seeds=seeds, note="rises by construction on mini_guess (reasoning is "
                                                         "longer than guessing): an estimate, not a test")
    # the project's checks: the positive control, and the greedy second evaluation
    if control is not None:
        rows += learning_contrast_rows(learning, [(reference, control, "higher")], column="speed", metric=SPEED,
                                       unit="points", by=by, seeds=seeds, source="project")
        rows += contrast_rows(sampled, [(reference, control, "higher")], metric=metric, source="project")
        rows += gain_rows({control: sampled[control]}, base, metric=metric, source="project")
    if greedy is not None:
        rows += greedy_gain_rows(greedy, by, seeds=seeds, order=[a for a in order if a not in counted_elsewhere])
    return rows

