"""What ``make reproduce`` is about to run and how long it should take, from the params and the run store.

A run's cost is its rollout batches (optimizer steps / ``train.updates_per_rollout``: the batch is split into that
many updates, so the rows trained on per rollout stay the same) x the seconds per rollout batch, and a rollout
batch's cost grows with its rollout tokens (prompts x generations x completion budget). The seconds per rollout
token come from the runs the store has already finished (train_seconds / rollout batches / tokens), so the estimate is this machine's own and gets better as runs finish; with none finished
it falls back to :data:`DEFAULT_SECONDS_PER_TOKEN`. Runs already finished cost nothing, a killed run costs its
remaining steps. The embedded base model's warm-up counts when it is not cached yet.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pandas as pd

from dgro_lib.runs.archive import restorable
from dgro_lib.config import ExperimentConfig, expand_sweep, find_params, load_config
from dgro_lib.runs.data_sources import expected_base_digest
from dgro_lib.util.paths import REPO
from dgro_lib.runs.store import latest_checkpoint, run_key

__all__ = ["DEFAULT_SECONDS_PER_TOKEN", "seconds_per_token", "plan_profile", "format_plan"]

# Measured on the 2-core development machine (2026-12-01, DGRO Fig. 1 from scratch): a 4 x 16 rollout batch with a
# 448-token budget took 13.2 s per step with two runs side by side (train_seconds 513-624 s for 45 steps; median
# 4.61e-4 s per budgeted rollout token), i.e. 13.2 / (64 * 448) s per budgeted rollout token.
DEFAULT_SECONDS_PER_TOKEN = 13.2 / (64 * 448)
# Warm-up of the embedded model, seconds per step (same build: 760.7 s + 592.9 s for the 2 x 900 steps of `mini`,
# batch 16, 2- and 3-person traces, two threads).
DEFAULT_WARMUP_SECONDS_PER_STEP = 0.75


def _budget_tokens(cfg: ExperimentConfig) -> int:
    t = cfg.train
    return t.prompts_per_step * t.num_generations * t.max_completion_length


def seconds_per_token(store: Path) -> tuple[float, int]:
    """Median seconds per budgeted rollout token over the finished runs in ``store`` (and how many there were);
    :data:`DEFAULT_SECONDS_PER_TOKEN` and 0 when none has finished."""
    rates = []
    for manifest_path in sorted(Path(store).glob("*/manifest.json")):
        m = json.loads(manifest_path.read_text())
        if (not m.get("train_seconds") or m.get("resumed_from") or m.get("history")
                or not (manifest_path.parent / "final_eval.json").exists()):  # only runs timed from start to end
            continue
        t = m["config"]["train"]
        rollouts = t["max_steps"] / t.get("updates_per_rollout", 1)
        tokens = t["prompts_per_step"] * t["num_generations"] * t["max_completion_length"]
        rates.append(m["train_seconds"] / max(rollouts, 1) / tokens)
    return (statistics.median(rates), len(rates)) if rates else (DEFAULT_SECONDS_PER_TOKEN, 0)


def _warmup_seconds(cfg: ExperimentConfig) -> float:
    """Seconds to build the embedded base model and every stage it continues from that is neither cached nor
    committed (a committed base is copied, not built: :mod:`dgro_lib.models.committed`)."""
    from dgro_lib.models.committed import committed_base
    from dgro_lib.models.presets import EMBEDDED_PRESETS, config_hash, preset_names

    if cfg.model.path != "embedded" or cfg.model.embedded_preset not in EMBEDDED_PRESETS:
        return 0.0
    cache_dir = Path(cfg.model.cache_dir)
    cache_dir = cache_dir if cache_dir.is_absolute() else REPO / cache_dir
    seconds, preset = 0.0, EMBEDDED_PRESETS[cfg.model.embedded_preset]
    while preset is not None:
        if (cache_dir / f"{preset.arch}-{config_hash(preset)}" / "embedded.json").exists() \
                or committed_base(preset_names(preset), config_hash(preset)) is not None:
            break
        seconds += preset.max_steps * DEFAULT_WARMUP_SECONDS_PER_STEP
        preset = EMBEDDED_PRESETS[preset.continue_from] if preset.continue_from else None
    return seconds


def plan_profile(profile: str, names: list[str], output_root: Path, *, archive: Path | None = None) -> pd.DataFrame:
    """One row per notebook: runs in its params, runs finished in the store (or, with ``archive``, restorable from
    the run archive: same params and seed, and a replicate from the base weights this machine has or will install,
    :func:`~dgro_lib.runs.archive.restorable`; ``archived`` counts those), steps left, and the
    estimated minutes (steps left x seconds per step / workers, plus an uncached base model's warm-up). Notebooks
    whose params have no training runs (``kind: eval`` or ``theory``) have 0 runs; a ``theory`` notebook needs no
    base model."""
    store = output_root / profile / "runs"
    rate, measured = seconds_per_token(store)
    rows, warmups, digests = [], set(), {}
    planned: set[str] = set()
    fate: dict[str, str] = {}  # run key -> "store", "archive" or "train": a run shared by notebooks counts once
    for name in names:
        cfg = load_config(find_params(name, profile))
        runs = expand_sweep(cfg) if cfg.kind == "train" else []
        done, archived, steps_left, seconds = 0, 0, 0, 0.0
        for _, seed, concrete in runs:
            run_dir = store / run_key(concrete, seed)
            if (run_dir / "final_eval.json").exists():
                done += 1
                fate.setdefault(run_dir.name, "store")
                continue
            if archive is not None:
                ident = (concrete.model.path, concrete.model.embedded_preset, concrete.model.cache_dir)
                if ident not in digests:
                    digests[ident] = expected_base_digest(concrete)
                if restorable(concrete, seed, archive, run_dir.name, digests[ident]):
                    done, archived = done + 1, archived + 1
                    fate.setdefault(run_dir.name, "archive")
                    continue
            if fate.setdefault(run_dir.name, "train") == "train" and run_dir.name in planned:
                continue  # an earlier notebook of the plan trains it
            planned.add(run_dir.name)
            ckpt = latest_checkpoint(run_dir / "trainer")
            left = concrete.train.max_steps - (int(ckpt.rsplit("-", 1)[-1]) if ckpt else 0)
            steps_left += left
            seconds += left / concrete.train.updates_per_rollout * rate * _budget_tokens(concrete)
        warm = 0.0
        if cfg.kind != "theory" and cfg.model.embedded_preset not in warmups:  # one build serves every notebook
            warm = _warmup_seconds(cfg)
            warmups.add(cfg.model.embedded_preset)
        rows.append({"notebook": name, "runs": len(runs), "finished": done, "archived": archived,
                     "steps_left": steps_left,
                     "minutes": round((seconds / max(cfg.workers, 1) + warm) / 60, 1)})
    out = pd.DataFrame(rows)
    out.attrs.update(seconds_per_token=rate, measured_runs=measured,
                     unique={k: sum(v == k for v in fate.values()) for k in ("store", "archive", "train")})
    return out


def format_plan(plan: pd.DataFrame, profile: str) -> str:
    """The lines ``make reproduce`` prints before it starts."""
    src = (f"median of {plan.attrs['measured_runs']} finished run(s) in the store" if plan.attrs["measured_runs"]
           else "the default measured on a 2-core machine: no run in the store has finished yet")
    lines = [f"[reproduce] plan for profile {profile} (seconds per rollout token: {plan.attrs['seconds_per_token']:.2e}, "
             f"{src}):"]
    for r in plan.itertuples():
        from_archive = f" ({r.archived} in the run archive)" if r.archived else ""
        lines.append(f"[reproduce]   {r.notebook:32s} {r.finished}/{r.runs} runs finished{from_archive}, "
                     f"{r.steps_left} steps left, ~{r.minutes} min")
    u = plan.attrs.get("unique", {})
    lines.append(f"[reproduce]   {u.get('archive', 0)} run(s) to restore from the run archive, {u.get('store', 0)} "
                 f"already in the store, {u.get('train', 0)} to train here (~{plan['minutes'].sum():.0f} min of "
                 "training and warm-up; evaluation not included; a run shared by notebooks counted once)")
    return "\n".join(lines)
