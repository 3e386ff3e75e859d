"""The statistical reproduction check on a notebook's own runs: ``python -m dgro_lib.cli.split_half <notebook>
--seeds 0,1,2,3``. Its claims are computed on the first half of the seeds and on the second half, and compared as
two independent estimates by the rule of ``make reproduce`` (:func:`dgro_lib.report.claims.compare_tables`): a
claim is *consistent* when the halves differ by under 1.96 x sqrt(se_1^2 + se_2^2) and reach the same verdict.
Every run must be finished in the profile's run store (or restorable from the run archive): this trains nothing.
Writes ``outputs/<profile>/split_half/<notebook>.csv`` and prints one line per claim."""

from __future__ import annotations

import argparse
import dataclasses
import sys
import tempfile

from dgro_lib.config import find_params, load_config, point_keys
from dgro_lib.util.files import atomic_write
from dgro_lib.util.paths import OUTPUTS

__all__ = ["NOTEBOOKS", "split_half_check", "main"]

# the K&K learning notebooks: claims from the runs under the sampled protocol, the learning table and the greedy reading
NOTEBOOKS = ("dgro_fig1_reward_variance", "dgro_fig1_beta2_acting", "dgro_fig2_beta", "dgro_fig3_methods")


def _builder(name, cfg, result):
    """``fn(seeds) -> claims table`` of notebook ``name`` from its runs (the params' sampled protocol, the greedy
    reading stored beside each run, the learning table: :func:`dgro_lib.papers.learning.read_learning_runs`)."""
    from dgro_lib.papers import dgro_fig1_beta2_acting, dgro_fig1_reward_variance, dgro_fig2_beta, dgro_fig3_methods
    from dgro_lib.papers.learning import read_learning_runs
    from dgro_lib.report.claims import judge_claims
    from dgro_lib.runs.experiment import evaluate_runs

    keys = point_keys(*cfg.sweep)
    greedy = evaluate_runs(result, cfg, cfg.knobs.greedy_eval.overrides())  # stored beside each run: read back
    _, lab, greedy, learning = read_learning_runs(cfg, result, greedy)
    k, base = cfg.knobs, result.base["correct"]
    if name == "dgro_fig2_beta":
        return lambda seeds: judge_claims(dgro_fig2_beta.claims(lab.finals, base, greedy, learning, keys=keys,
                                                                seeds=seeds))
    if name == "dgro_fig1_beta2_acting":
        return lambda seeds: judge_claims(dgro_fig1_beta2_acting.claims(
            lab.finals, base, greedy, learning, schemes=k.labels, counted_elsewhere=k.counted_elsewhere,
            seeds=seeds))
    if name == "dgro_fig1_reward_variance":
        return lambda seeds: judge_claims(dgro_fig1_reward_variance.claims(
            lab.finals, base, greedy, learning, control=k.control, schemes=[a for a in k.labels if a != k.control],
            reference=k.control_of, seeds=seeds))
    return lambda seeds: judge_claims(dgro_fig3_methods.claims(
        lab.finals, base, greedy, learning, seeds=seeds, grpo=k.grpo, online_dpo=k.online_dpo,
        dgro=[a for a in k.labels if a not in (k.grpo, k.online_dpo)]))


def split_half_check(name: str, seeds: list[int], *, profile: str = "cpu"):
    """The split-half table of :func:`dgro_lib.report.claims.split_half` for notebook ``name`` on ``seeds``."""
    from dgro_lib.runs.experiment import run_experiment
    from dgro_lib.report.claims import split_half
    from dgro_lib.runs.store import run_key
    from dgro_lib.config import expand_sweep

    if name not in NOTEBOOKS:
        raise ValueError(f"split_half: {name!r} is not one of {NOTEBOOKS}")
    cfg = dataclasses.replace(load_config(find_params(name, profile)), seeds=list(seeds))
    store = OUTPUTS / profile / "runs"
    missing = [f"{point} seed {seed}" for point, seed, c in expand_sweep(cfg)
               if not (store / run_key(c, seed) / "final_eval.json").is_file()]
    if missing:
        raise FileNotFoundError(f"split_half: {len(missing)} run(s) not finished in {store}: {missing[:6]} "
                                "(train them first; this check trains nothing)")
    with tempfile.TemporaryDirectory() as tmp:
        result = run_experiment(cfg, tmp, workers=1, store=store,
                                evaluations=[(cfg.knobs.greedy_eval.overrides(), None)])
        return split_half(_builder(name, cfg, result), list(seeds))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebook", choices=NOTEBOOKS)
    parser.add_argument("--seeds", required=True, help="comma-separated, at least 4 (e.g. 0,1,2,3)")
    parser.add_argument("--profile", default="cpu")
    args = parser.parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",")]
    table = split_half_check(args.notebook, seeds, profile=args.profile)
    first, second = table.attrs["halves"]
    out = OUTPUTS / args.profile / "split_half" / f"{args.notebook}.csv"
    out.parent.mkdir(parents=True, exist_ok=True)
    written = table.assign(first_half=",".join(map(str, first)), second_half=",".join(map(str, second)))
    atomic_write(out, lambda tmp: written.to_csv(tmp, index=False))
    for r in table.itertuples():
        print(f"[split-half] {r.claim:60s} {r.value:+9.3f} vs {r.reference:+9.3f}  allowed {r.allowed:7.3f}  "
              f"{r.status:10s} {r.verdict} / {r.verdict_reference}")
    counts = table["status"].value_counts().to_dict()
    print(f"[split-half] {args.notebook}: seeds {first} vs {second}: {counts} -> {out}")
    return 0 if set(table["status"]) <= {"consistent", "identical"} else 1


if __name__ == "__main__":
    sys.exit(main())
