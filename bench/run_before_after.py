"""One K&K run of the DGRO Fig. 1 recipe timed before and after this recipe's speed-ups, on one machine, and the
ratio of each phase and of the whole run.

*Before*: the loss's forward/backward in one padded pass of the rollout batch (as TRL does it) and the sampler on
transformers' ``DynamicCache`` (it concatenates the whole KV cache at every decode step). *After*: the code as the
notebooks run it: length-sorted forward chunks of ``train.forward_chunk_rows`` rows and the sampler's growing KV
buffer. Both are ``bench/run_profile.py`` (same scheme, seed and steps), each in its own process with one torch
thread, one after the other, so both see the same machine; the order is a flag, to check that a drift of the
machine's speed is not what the ratio measures.

Numerics: the growing cache gives the same tokens as ``DynamicCache``; the chunked forward gives the same loss and
gradients up to float rounding (a sum over other rows in another order), so the two runs may part after some steps.
The script says whether they did (every puzzle's outcome and every logged training value), and, for a notebook's
seed, whether *after* is its archived twin bit for bit.

    OMP_NUM_THREADS=1 .venv/bin/python bench/run_before_after.py [--seed 0] [--steps 45] [--after-first]
        [--out outputs/bench/before_after]

A full run of each is ~6 + ~9 min on one idle core of this project's 2-core machine.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

from run_profile import same_training_log  # noqa: E402  (one rule for which logged columns must agree)

#: the phases of run_profile.py whose time the two variants can change, and the rest
PHASES = ("rollout generation", "forward/backward", "periodic evaluation", "final evaluation",
          "second (greedy) evaluation")


def ratios(before: dict, after: dict) -> list[tuple[str, float, float, float]]:
    """(phase, seconds before, seconds after, before / after) for each timed phase and the whole run."""
    rows = []
    for name in PHASES:
        b, a = before["phases_s"][name], after["phases_s"][name]
        rows.append((name, b, a, b / a if a > 0 else float("nan")))
    rows.append(("whole run (wall)", before["wall_s"], after["wall_s"], before["wall_s"] / after["wall_s"]))
    return rows


def profile(variant: str, args, out: Path) -> dict:
    path = out / f"{variant}.json"
    cmd = [sys.executable, str(REPO / "bench" / "run_profile.py"), "--scheme", args.scheme, "--seed", str(args.seed),
           "--json", str(path)] + (["--steps", str(args.steps)] if args.steps else []) + \
          (["--before"] if variant == "before" else [])
    print(f"--- {variant}: {' '.join(cmd[1:])}", flush=True)
    env = dict(os.environ, OMP_NUM_THREADS="1", TRL_EXPERIMENTAL_SILENCE="1")
    subprocess.run(cmd, check=True, env=env, cwd=REPO)
    return json.loads(path.read_text())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scheme", default="[-3,3]")
    parser.add_argument("--seed", type=int, default=0, help="0-15 are notebook seeds: 'after' is then checked "
                                                             "against its archived twin")
    parser.add_argument("--steps", type=int, default=None, help="train this many steps (default: the params')")
    parser.add_argument("--after-first", action="store_true", help="time 'after' first (default: 'before' first)")
    parser.add_argument("--out", type=Path, default=REPO / "outputs" / "bench" / "before_after")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    order = ("after", "before") if args.after_first else ("before", "after")
    res = {v: profile(v, args, args.out) for v in order}
    before, after = res["before"], res["after"]

    print(f"\none run of the Fig. 1 recipe ({args.scheme}, seed {args.seed}, {after['steps']} steps), 1 thread, "
          f"{' then '.join(order)}; load average at the end of each: before {before['load'][0]:.1f}, "
          f"after {after['load'][0]:.1f}")
    print(f"{'phase':26s} {'before s':>9s} {'after s':>9s} {'before/after':>13s}")
    table = ratios(before, after)
    for name, b, a, r in table:
        print(f"{name:26s} {b:9.1f} {a:9.1f} {r:13.2f}")
    same_items = before["correct"] == after["correct"]
    same_log, _ = same_training_log(before["training_log"], after["training_log"])
    print(f"the two runs: outcomes of the {len(after['correct'])} puzzles {'identical' if same_items else 'differ'} "
          f"(accuracy {before['accuracy']:.4f} before, {after['accuracy']:.4f} after); training log "
          f"{'identical' if same_log else 'differs'}")
    print(f"'after' against the archive: {after['archived_twin']['verdict']}")
    summary = {"order": order, "seed": args.seed, "scheme": args.scheme, "steps": after["steps"],
               "ratios": [{"phase": n, "before_s": b, "after_s": a, "before_over_after": r} for n, b, a, r in table],
               "same_outcomes": same_items, "same_training_log": same_log,
               "after_archived_twin": after["archived_twin"]["verdict"],
               "load": {"before": before["load"], "after": after["load"]}}
    (args.out / "summary.json").write_text(json.dumps(summary, indent=1))
    print(f"written: {args.out / 'summary.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
