"""DCPO Tables 2-3 (the main comparison): the claims of ``notebooks/dcpo_table2_main``. DCPO beats every other
method (AEPO, Entropy-Reg, Entropy-Adv, GRPO) on sampled avg@k (the paper's metric) and on greedy pass@1, and
with contest benchmarks and ``k``, on pass@k there (Table 3)."""

from __future__ import annotations

from typing import Iterable, Sequence

from dgro_lib.analysis.dcpo import pass_at_k_frame
from dgro_lib.papers.common import arms, contrast_rows
from dgro_lib.papers.dcpo_common import accuracy_rows, sweep_arms

__all__ = ["claims", "benchmark_name"]


def benchmark_name(name: str) -> str:
    """The canonical name of a benchmark as a problem's ``source`` or a params file gives it: a hub data set by its
    registry key (``aime24``, ``aime_2024`` -> ``aime2024``, :func:`dgro_lib.data.math.resolve_dataset`), a
    generated kind as itself (``synthetic/mul`` -> ``mul``)."""
    from dgro_lib.data.math.datasets import resolve_dataset

    tail = name.split("/", 1)[-1]
    try:
        return resolve_dataset(tail)[0]
    except ValueError:  # a generated kind, not a hub data set
        return tail


def claims(sweep, *, method: str = "DCPO", contest: Sequence[str] = (), k: int | None = None,
           seeds: Iterable[int] | None = None) -> list[dict]:
    greedy, sampled, _ = sweep_arms(sweep, seeds=seeds)
    pairs = [(method, p, "higher") for p in sweep.labels if p != method]
    rows = accuracy_rows(greedy, sampled, pairs)
    if contest and k:
        n = int(sweep.cfg.knobs.sampled_eval.n_samples)
        runs = sweep.sampled[sweep.sampled["run"] != "base"]
        # a params file names a benchmark as the registry does (aime24), a hub record's source is its canonical key
        # (aime2024): compare canonical names
        wanted = {benchmark_name(c) for c in contest}
        sources = sweep.sources[:len(runs["correct"].iloc[0])]
        idx = [i for i, s in enumerate(sources) if benchmark_name(s) in wanted]
        if not idx:
            raise ValueError(f"contest benchmarks {list(contest)}: none among the evaluated problems "
                             f"(their sources: {sorted(set(sources))})")
        pk = pass_at_k_frame(runs, n, k)
        pk = pk.assign(correct=[[c[i] for i in idx] for c in pk["correct"]])
        rows += contrast_rows(arms(pk, "point", seeds=seeds, order=sweep.labels), pairs,
                              metric=f"pass@{k} on {', '.join(contest)}")
    return rows
