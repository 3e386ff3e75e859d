"""When finished rows leave the sampler's batch: at once (``COMPACT_AT = 0``, the sampler before this change) or once
they are a fraction of it (``dgro_lib.models.sampling.COMPACT_AT``). Dropping a row copies every layer's whole KV
cache; a finished row left in the batch costs its share of each step until the next compaction.

On the trained ``cpu`` base of the DGRO Fig. 1 recipe (params/cpu/dgro_fig1_reward_variance), interleaved, in one
process with one thread: (1) a final-evaluation chunk, 100 held-out puzzles greedy, 640 new tokens at most; (2) a
rollout batch, 4 prompts x 16 completions at T = 1 from a seeded generator, 448 new tokens at most. Prints the
median time of each setting against ``0`` and whether every completion's tokens are the same as with ``0`` (the
claim that the numerics did not change).

    OMP_NUM_THREADS=1 .venv/bin/python bench/sampler_compaction.py [--repeats 3] [--fractions 0.125,0.25]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--fractions", default="0.125,0.25")
    parser.add_argument("--puzzles", type=int, default=100)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)

    from dgro_lib.config import find_params, load_config
    from dgro_lib.models import load_model, sampling
    from dgro_lib.runs.inputs import load_eval_records, load_train_records, resolve_model_path
    from dgro_lib.tasks import get_task

    cfg = load_config(find_params("dgro_fig1_reward_variance", "cpu"))
    model, tok = load_model(resolve_model_path(cfg))
    task = get_task(cfg.data.task)
    evals = [task.prompt(r, cfg.data.template, tok) for r in load_eval_records(cfg)[: args.puzzles]]
    rollout = [task.prompt(r, cfg.data.template, tok) for r in load_train_records(cfg)[: cfg.train.prompts_per_step]]
    cases = {
        "evaluation (greedy)": lambda: sampling.sample(model, tok, evals, greedy=True,
                                                       max_new_tokens=cfg.eval.max_new_tokens),
        "rollout (T = 1)": lambda: sampling.sample(model, tok, rollout, n=cfg.train.num_generations, temperature=1.0,
                                                   seed=1234, max_new_tokens=cfg.train.max_completion_length),
    }
    fractions = [0.0] + [float(f) for f in args.fractions.split(",")]
    default = sampling.COMPACT_AT
    times = {(c, f): [] for c in cases for f in fractions}
    tokens: dict = {}
    try:
        for _ in range(args.repeats):
            for case, fn in cases.items():
                for f in fractions:  # interleaved: a slow minute of the machine hits every setting alike
                    sampling.COMPACT_AT = f
                    t0 = time.perf_counter()
                    out = fn()
                    times[case, f].append(time.perf_counter() - t0)
                    tokens.setdefault((case, f), out)
                    assert tokens[case, f] == out, "the sampler is not deterministic"
    finally:
        sampling.COMPACT_AT = default
    print(f"sampler compaction, {args.repeats} repeats, 1 thread (current default COMPACT_AT = {default})")
    for case in cases:
        base = statistics.median(times[case, 0.0])
        n_tok = sum(len(x) for x in tokens[case, 0.0])
        print(f"{case}: {len(tokens[case, 0.0])} completions, {n_tok} tokens; at once {base:.2f} s")
        for f in fractions[1:]:
            med = statistics.median(times[case, f])
            same = tokens[case, f] == tokens[case, 0.0]
            print(f"  COMPACT_AT = {f:<5}  {med:.2f} s  at once / this = {base / med:.3f}  "
                  f"tokens {'identical' if same else 'DIFFER'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
