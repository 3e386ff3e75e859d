"""DCPO Table 1 / Fig. 1 (the J1-J4 grid): the claims of ``notebooks/dcpo_fig1_grid``. J3 holds the entropy above
GRPO's, J4 collapses it below, J3 ends with more entropy than J4 (end-of-training H, per run); and every J against
GRPO in accuracy, sampled avg@k and greedy (the paper's figure plots accuracy too; no direction is claimed for
each)."""

from __future__ import annotations

from typing import Iterable

from dgro_lib.papers.dcpo_common import accuracy_rows, entropy_rows, sweep_arms

__all__ = ["claims"]


def claims(sweep, *, reference: str = "GRPO", holds: str = "J3", collapses: str = "J4",
           seeds: Iterable[int] | None = None) -> list[dict]:
    greedy, sampled, entropy = sweep_arms(sweep, seeds=seeds)
    rows = entropy_rows(entropy, [(holds, reference, "higher"), (collapses, reference, "lower"),
                                  (holds, collapses, "higher")])
    rows += accuracy_rows(greedy, sampled, [(p, reference, "none") for p in sweep.labels if p != reference])
    return rows
