"""DCPO Table 5 (ablations): the claims of ``notebooks/dcpo_table5_ablation``. Each ablation loses accuracy against
the full DCPO (sampled avg@k and greedy pass@1) and collapses entropy (its end-of-training H below DCPO's, per
run). An ablation whose runs are another arm's twins (DCPO with alpha = 0 is GRPO, bit for bit) is a repeat of that
comparison, not new evidence: ``twins`` names them, and their rows say so."""

from __future__ import annotations

from typing import Iterable

from dgro_lib.papers.dcpo_common import accuracy_rows, entropy_rows, sweep_arms

__all__ = ["claims"]


def claims(sweep, *, full: str = "DCPO", twins: dict[str, str] | None = None,
           seeds: Iterable[int] | None = None) -> list[dict]:
    greedy, sampled, entropy = sweep_arms(sweep, seeds=seeds)
    pairs = [(p, full, "lower") for p in sweep.labels if p != full]
    rows = accuracy_rows(greedy, sampled, pairs) + entropy_rows(entropy, pairs)
    for row in rows:
        arm = row["claim"].split(" - ")[0]
        if twins and arm in twins:
            row["note"] = f"the runs of {arm} are those of {twins[arm]}: a repeat of that comparison"
    return rows
