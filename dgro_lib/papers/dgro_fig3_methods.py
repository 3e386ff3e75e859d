"""DGRO Fig. 3 (methods compared on Knights-and-Knaves): the claims of ``notebooks/dgro_fig3_methods``.

* every method against the base model, greedy and sampled (the paper: RL improves on it);
* every DGRO arm beats GRPO, and GRPO beats online DPO, in greedy held-out accuracy and in the sampled pass@1
  estimate (avg@k at T = 1, the paper's pass@1 at its temperature: 16 seeds power it, but no method improves on
  the base in it, so it complements the greedy contrast and does not replace it);
* DGRO does not lengthen responses: each DGRO arm's mean held-out greedy response length against the base model's,
  a claim of no difference within ``length_margin`` x the base's length."""

from __future__ import annotations

from typing import Iterable

import numpy as np
import pandas as pd

from dgro_lib.report.claims import claim
from dgro_lib.report.inference import compare
from dgro_lib.papers.common import arms, contrast_rows, gain_rows, level_rows, readings

__all__ = ["claims"]


def claims(finals: pd.DataFrame, base: dict, sampled: pd.DataFrame | None, *, reference: str = "GRPO",
           weakest: str = "Online DPO", length_margin: float = 0.10, seeds: Iterable[int] | None = None
           ) -> list[dict]:
    """The claim rows from ``finals`` labelled by :func:`~dgro_lib.analysis.probes.method_labels` (a ``point`` column,
    each run's held-out ``mean_length``) and ``base``, the base model's evaluation."""
    seeds = list(seeds) if seeds is not None else None
    order = list(dict.fromkeys(finals["point"]))
    reads = readings(finals, base["correct"], sampled, "point", seeds=seeds, order=order)
    greedy = reads[0].scores
    dgro = [p for p in order if p.startswith("DGRO")]
    pairs = [(p, reference, "higher") for p in dgro if reference in greedy] + (
        [(reference, weakest, "higher")] if {reference, weakest} <= set(greedy) else [])
    rows = level_rows(greedy, metric="greedy accuracy")
    for r in reads:
        rows += gain_rows(r.scores, r.base, metric=r.metric)
    for r in reads:
        rows += contrast_rows(r.scores, pairs, metric=r.metric)
    base_len = float(base["summary"]["mean_length"])
    lengths = arms(finals, "point", column="mean_length", seeds=seeds, order=dgro)
    for p, runs in lengths.items():
        rows.append(claim(f"{p} does not lengthen responses: length - the base's (tokens)",
                          compare(runs, base=np.float64(base_len), scale=1.0), metric="response length",
                          unit="tokens", direction="equal", margin=length_margin * base_len,
                          note=f"margin {100 * length_margin:g} % of the base's {base_len:.1f} tokens"))
    return rows
