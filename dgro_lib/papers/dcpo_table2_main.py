"""DCPO Tables 2-3 (the main comparison): the claims of ``notebooks/dcpo_table2_main``. DCPO beats every other
method (AEPO, Entropy-Reg, Entropy-Adv, GRPO) on sampled avg@k (the paper's metric) and on greedy pass@1, and
with contest benchmarks and ``k``, on pass@k there (Table 3)."""

from __future__ import annotations

from typing import Iterable, Sequence

from dgro_lib.analysis.dcpo import pass_at_k_frame
from dgro_lib.papers.common import arms, contrast_rows
from dgro_lib.papers.dcpo_common import accuracy_rows, sweep_arms

__all__ = ["claims"]


def claims(sweep, *, method: str = "DCPO", contest: Sequence[str] = (), k: int | None = None,
           seeds: Iterable[int] | None = None) -> list[dict]:
    greedy, sampled, _ = sweep_arms(sweep, seeds=seeds)
    pairs = [(method, p, "higher") for p in sweep.labels if p != method]
    rows = accuracy_rows(greedy, sampled, pairs)
    if contest and k:
        n = int(sweep.cfg.knobs.sampled_eval.n_samples)
        runs = sweep.sampled[sweep.sampled["run"] != "base"]
        idx = [i for i, s in enumerate(sweep.sources[:len(runs["correct"].iloc[0])]) if s.split("/", 1)[-1] in contest]
        if not idx:
            raise ValueError(f"contest benchmarks {list(contest)}: none among the evaluated problems")
        pk = pass_at_k_frame(runs, n, k)
        pk = pk.assign(correct=[[c[i] for i in idx] for c in pk["correct"]])
        rows += contrast_rows(arms(pk, "point", seeds=seeds, order=sweep.labels), pairs,
                              metric=f"pass@{k} on {', '.join(contest)}")
    return rows
