"""Where the time of one K&K training run goes: the DGRO Fig. 1 recipe (``params/cpu/dgro_fig1_reward_variance``,
one reward scheme, one seed), trained and evaluated as the notebook does it, with a timer on each phase.

Phases (seconds, and a share of the run's wall time):

* ``rollout generation``: the KV-cache sampler called by the trainer's rollout function;
* ``reward scoring``: the reward function over the decoded completions (TRL's ``_calculate_rewards``);
* ``rollout batch (rest)``: the rest of TRL's generation-and-scoring (tokenising, advantages, group statistics);
* ``forward/backward``: the trainer's ``training_step`` less its generation and scoring;
* ``optimizer, logging, checkpoints``: the rest of ``trainer.train``;
* ``periodic evaluation``: the held-out subset every ``eval_every`` steps;
* ``final evaluation`` (the params' protocol: sampled pass@1, T = 1, avg@2 on 400 puzzles, which the claims rest
  on) and ``second (greedy) evaluation`` (the notebook's second reading, on the same puzzles).

Throughput: tokens per second of each phase (generated tokens for sampling; prompt + completion tokens of the
rollout batch for the forward/backward), and FLOP/s from the usual count (2 N per token forward, 6 N forward and
backward, N the parameters a token passes through, attention's 4 d L_ctx per layer added), set against this
CPU's peak two ways: the theoretical one core FP32 peak at the numerics the project pins (AVX2: two 8-lane FMA
units, 32 FLOP per cycle) and a measured one-thread 1024 x 1024 float32 matmul.

    OMP_NUM_THREADS=1 .venv/bin/python bench/run_profile.py [--scheme "[-3,3]"] [--seed 1000] [--steps 45]
        [--json outputs/bench/run_profile.json] [--archive reference/cpu/runs] [--before]

``--before`` times the code without the two speed-ups this recipe runs with: the loss's forward/backward in one
padded pass (``train.forward_chunk_rows`` null, as TRL does it) and the sampler on transformers' ``DynamicCache``
(a ``torch.cat`` of the whole cache at every decode step) instead of its growing buffer. ``bench/run_before_after.py``
runs both and prints the ratios.

With a seed the notebook trains (0-15), the run is the archived one's twin, and the profile also says whether this
code reproduces it bit for bit (every puzzle's outcome and every logged training value).

The run trains in a temporary folder (seed 1000 by default, a seed no notebook uses), so it never touches the
run store. A full run is ~8.5 min on one idle core of this project's 2-core machine.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import re
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


class Phases:
    """Inclusive wall time, calls and token counts per phase name; ``timed(obj, attr, phase)`` wraps a method."""

    def __init__(self):
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self.tokens: dict[str, int] = defaultdict(int)
        self.context: list[str] = []

    @contextlib.contextmanager
    def phase(self, name: str):
        self.context.append(name)
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] += time.perf_counter() - t0
            self.calls[name] += 1
            self.context.pop()

    def timed(self, owner, attr: str, name: str) -> None:
        inner = getattr(owner, attr)
        phases = self

        def wrapper(*args, **kwargs):
            with phases.phase(name):
                return inner(*args, **kwargs)

        setattr(owner, attr, wrapper)


def n_params(model) -> tuple[int, int]:
    """(parameters a token passes through: every matrix but the input embedding, model width * layers)."""
    cfg = model.config
    total = sum(p.numel() for n, p in model.named_parameters() if "embed_tokens" not in n)
    if cfg.tie_word_embeddings:  # the LM head is the embedding matrix: a token passes through it once
        total += cfg.vocab_size * cfg.hidden_size
    return total, cfg.hidden_size * cfg.num_hidden_layers


def measured_peak(seconds: float = 2.0) -> float:
    """FLOP/s of a one-thread 1024 x 1024 float32 matmul (the practical roof of this core)."""
    a, b = torch.randn(1024, 1024), torch.randn(1024, 1024)
    for _ in range(3):
        a @ b
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        a @ b
        n += 1
    return 2 * 1024 ** 3 * n / (time.perf_counter() - t0)


def theoretical_peak() -> tuple[float, float]:
    """(GHz read from /proc/cpuinfo, one core's FP32 peak FLOP/s at AVX2: 2 FMA units x 8 lanes x 2 FLOP)."""
    try:
        mhz = max(float(m) for m in re.findall(r"cpu MHz\s*:\s*([\d.]+)", Path("/proc/cpuinfo").read_text()))
    except ValueError:
        mhz = float("nan")
    return mhz / 1e3, mhz * 1e6 * 32


def same_training_log(a: str, b: str) -> tuple[bool, list[str]]:
    """Whether two runs' ``metrics.csv`` texts hold the same values in every shared column that is not a timing,
    and those columns."""
    import io

    import pandas as pd

    x, y = pd.read_csv(io.StringIO(a)), pd.read_csv(io.StringIO(b))
    cols = [c for c in x.columns if c in y.columns and not any(t in c for t in ("time", "runtime", "per_second"))]
    return bool(x[cols].equals(y[cols])), cols


def compare_with_archive(cfg, seed: int, final: dict, metrics: str, archive: Path) -> dict:
    """The archived run with the same run key (the notebook's run for this scheme and seed), if any: whether its
    per-puzzle outcomes and its training log (rewards, losses, lengths of every step; timings left out) are
    the ones this run produced, i.e. whether the code measured here computes bit for bit what the archive holds."""
    from dgro_lib.runs.store import run_key

    key = run_key(cfg, seed)
    ref = archive / key / "final_eval.json"
    if not ref.is_file():
        return {"key": key, "verdict": f"none in {archive} (seed {seed} is not a notebook's seed)"}
    old = json.loads(ref.read_text())
    same_items = old["correct"] == final["correct"]
    same_log, cols = same_training_log((archive / key / "metrics.csv").read_text(), metrics)
    verdict = ("identical: every puzzle's outcome and every logged training value" if same_items and same_log else
               f"differs: outcomes {'same' if same_items else 'differ'}, training log {'same' if same_log else 'differs'}")
    return {"key": key, "verdict": verdict, "same_outcomes": same_items, "same_training_log": same_log,
            "archived_accuracy": old["summary"]["accuracy"], "compared_columns": len(cols)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scheme", default="[-3,3]")
    parser.add_argument("--seed", type=int, default=1000)
    parser.add_argument("--steps", type=int, default=None, help="train this many steps (default: the params')")
    parser.add_argument("--json", type=Path, default=REPO / "outputs" / "bench" / "run_profile.json")
    parser.add_argument("--archive", type=Path, default=REPO / "reference" / "cpu" / "runs",
                        help="with a notebook's seed: compare the run with its archived twin, item by item")
    parser.add_argument("--before", action="store_true",
                        help="without the speed-ups: one padded forward pass, transformers' DynamicCache")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)

    from transformers import DynamicCache

    from dgro_lib.models import sampling

    from dgro_lib.runs import training
    from dgro_lib.config import apply_overrides, find_params, load_config
    from dgro_lib.evaluate import accuracy, evaluate_under_config
    from dgro_lib.runs.experiment import _eval_setup
    from dgro_lib.runs.data_sources import resolve_model_path
    from dgro_lib.models import load_model
    from dgro_lib.rl.trainer import DGROTrainer
    from trl import GRPOTrainer

    cfg = load_config(find_params("dgro_fig1_reward_variance", "cpu"))
    over = {"reward.scheme": args.scheme, "sweep": {}} | ({"train.max_steps": args.steps} if args.steps else {})
    if args.before:
        over["train.forward_chunk_rows"] = None  # not part of the run key: the same run, timed the old way
        sampling._sampler_cache = lambda config: DynamicCache(config=config)
    cfg = dataclasses.replace(apply_overrides(cfg, over, source="run_profile"), seeds=[args.seed])
    ph = Phases()

    # the sampler, attributed to the phase that called it; tokens counted from what it returns
    inner_sample = sampling.sample

    def counted_sample(model, tokenizer, prompts, **kw):
        out = inner_sample(model, tokenizer, prompts, **kw)
        where = ph.context[-1] if ph.context else "other"
        ph.tokens[f"{where}: generated"] += sum(len(x) for x in out)
        return out

    training.sample = counted_sample  # the rollout function is built from this name
    accuracy.sample = counted_sample  # the evaluations call this one
    ph.timed(DGROTrainer, "_generate_and_score_completions", "rollout batch")
    ph.timed(GRPOTrainer, "_calculate_rewards", "reward scoring")
    ph.timed(DGROTrainer, "training_step", "training_step")
    ph.timed(training.RunRecorder, "on_step_end", "periodic evaluation")
    ph.timed(DGROTrainer, "_save_checkpoint", "checkpoints")
    ph.timed(DGROTrainer, "train", "train")
    inner_rollout = training.make_rollout_func

    def timed_rollout_func(*a, **kw):
        fn = inner_rollout(*a, **kw)

        def rollout(prompts, trainer):
            with ph.phase("rollout generation"):
                out = fn(prompts, trainer)
            ph.tokens["rollout: prompt+completion"] += sum(len(p) + len(c) for p, c in
                                                            zip(out["prompt_ids"], out["completion_ids"]))
            return out
        return rollout

    training.make_rollout_func = timed_rollout_func
    inner_eval = training.evaluate_under_config

    def final_eval(*a, **kw):  # run_training's final evaluation; the periodic one runs inside on_step_end
        if ph.context and ph.context[-1] == "periodic evaluation":
            return inner_eval(*a, **kw)
        with ph.phase("final evaluation"):
            return inner_eval(*a, **kw)

    training.evaluate_under_config = final_eval

    peak_meas = measured_peak()
    ghz, peak_theory = theoretical_peak()
    t_start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "run"
        training.run_training(cfg, args.seed, run_dir, point={"reward.scheme": args.scheme})
        ckpt = run_dir / "trainer" / f"checkpoint-{cfg.train.max_steps}"
        model, tokenizer = load_model(str(ckpt))
        ecfg, records, _ = _eval_setup(cfg, cfg.knobs.greedy_eval.overrides(), None)  # the notebook's second one
        with ph.phase("second (greedy) evaluation"):
            evaluate_under_config(model, tokenizer, records, ecfg)
        final = json.loads((run_dir / "final_eval.json").read_text())
        metrics = (run_dir / "metrics.csv").read_text()
    wall = time.perf_counter() - t_start
    twin = compare_with_archive(cfg, args.seed, final, metrics, args.archive)

    s = ph.seconds
    fwd_bwd = s["training_step"] - s["rollout batch"]
    rows = {
        "rollout generation": s["rollout generation"],
        "reward scoring": s["reward scoring"],
        "rollout batch (rest)": s["rollout batch"] - s["rollout generation"] - s["reward scoring"],
        "forward/backward": fwd_bwd,
        "optimizer, logging, checkpoints": s["train"] - s["training_step"] - s["periodic evaluation"],
        "periodic evaluation": s["periodic evaluation"],
        "final evaluation": s["final evaluation"],
        "second (greedy) evaluation": s["second (greedy) evaluation"],
    }
    rows["model loading, data, other"] = wall - sum(rows.values())

    model, _ = load_model(resolve_model_path(cfg))
    N, dL = n_params(model)
    tok = ph.tokens
    train_tokens = tok["rollout: prompt+completion"]
    gen_rollout = tok["rollout generation: generated"]
    # a decoded token attends to ~half the context on average: 4 d L_ctx per layer at L_ctx ~ 300 (prompt ~110 +
    # half of a ~190-token completion); the forward/backward sees whole rows, so its mean context is half a row
    ctx = 300
    flops = {
        "rollout generation": gen_rollout * (2 * N + 4 * dL * ctx),
        "forward/backward": 3 * train_tokens * (2 * N + 4 * dL * ctx),
        "final evaluation": tok["final evaluation: generated"] * (2 * N + 4 * dL * ctx),
        "second (greedy) evaluation": tok["second (greedy) evaluation: generated"] * (2 * N + 4 * dL * ctx),
        "periodic evaluation": tok["periodic evaluation: generated"] * (2 * N + 4 * dL * ctx),
    }
    token_counts = {"rollout generation": gen_rollout, "forward/backward": train_tokens,
                    "final evaluation": tok["final evaluation: generated"],
                    "second (greedy) evaluation": tok["second (greedy) evaluation: generated"],
                    "periodic evaluation": tok["periodic evaluation: generated"]}
    print(f"\none K&K run of the Fig. 1 recipe ({args.scheme}, seed {args.seed}, {cfg.train.max_steps} steps, "
          f"{N / 1e6:.2f} M parameters per token, 1 thread): {wall:.0f} s wall")
    print(f"CPU peak: theoretical {peak_theory / 1e9:.1f} GFLOP/s ({ghz:.2f} GHz x 32 FLOP/cycle, AVX2 FP32), "
          f"measured matmul {peak_meas / 1e9:.1f} GFLOP/s")
    print(f"{'phase':34s} {'seconds':>8s} {'share':>6s} {'tokens':>9s} {'tokens/s':>9s} {'GFLOP/s':>8s} "
          f"{'of matmul':>9s}")
    for name, sec in rows.items():
        tokens = token_counts.get(name)
        rate = f"{tokens / sec:9.0f}" if tokens and sec > 0 else f"{'':9s}"
        gf = flops.get(name, 0) / sec / 1e9 if sec > 0 and name in flops else None
        print(f"{name:34s} {sec:8.1f} {sec / wall:6.1%} {tokens or '':>9} {rate} "
              f"{'' if gf is None else f'{gf:8.3f}'} {'' if gf is None else f'{gf * 1e9 / peak_meas:9.2%}'}")
    report = {"variant": "before" if args.before else "after", "forward_chunk_rows": cfg.train.forward_chunk_rows,
              "scheme": args.scheme, "seed": args.seed, "steps": cfg.train.max_steps, "wall_s": wall,
              "phases_s": rows, "tokens": token_counts, "flops": flops, "params_per_token": N,
              "peak_flops": {"theoretical_avx2_fp32": peak_theory, "measured_matmul": peak_meas, "ghz": ghz},
              "load": os.getloadavg(), "accuracy": final["summary"]["accuracy"], "archived_twin": twin,
              "correct": final["correct"], "training_log": metrics}
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, indent=1, default=float))
    print(f"final accuracy {final['summary']['accuracy']:.4f}; archived twin: {twin['verdict']}")
    print(f"written: {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
