"""How a K&K experiment's runs learned, one row per run: what DGRO Figs. 1-3 claim about learning speed, entropy,
response length and training cost, read from the run store.

The learning-speed metric (``speed``) is fixed before the runs and the same in every notebook: **the mean of the
held-out accuracy curve over the periodic evaluations during training**, in points. The periodic evaluations run
every ``train.eval_every`` steps on the first ``train.eval_subset`` held-out puzzles under the params' evaluation
protocol; the base model (step 0) and the final evaluation are left out, so every arm is read at the same steps.
It is the area under the learning curve divided by its length: of two arms that end at the same accuracy, the one
that got there sooner scores higher, which is what the paper's "accelerates learning" and "steeper accuracy curve"
say.

The rollout figures are means over the first and the last ``window`` optimizer steps (10: the issue's comparison of
the start and the end of training), read from each run's ``metrics.csv`` (TRL's logged columns): training
accuracy on the T = 1 rollouts (``kk_outcome/correct``), response length (``completions/mean_length``), entropy
(``entropy``, nats per token) and the share of rollouts cut at ``train.max_completion_length``
(``completions/clipped_ratio``).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

__all__ = ["ROLLOUT_COLUMNS", "SUMMARY_COLUMNS", "run_learning", "entropy_spike", "entropy_fluctuation",
           "arm_summary"]

# per-step rollout columns of metrics.csv (TRL's names and the K&K reward's) -> the names used here
ROLLOUT_COLUMNS = {"kk_outcome/correct": "train_accuracy", "completions/mean_length": "length", "entropy": "entropy",
                   "completions/clipped_ratio": "clipped"}


def entropy_spike(entropy: pd.Series, *, window: int = 9) -> float:
    """The largest excursion of a run's per-step rollout entropy above its running median (``window`` steps,
    centred), in nats per token: how far the run's entropy "spikes" above its own trend. 0 for a flat curve."""
    e = entropy.reset_index(drop=True).astype(float)
    return float((e - e.rolling(window, center=True, min_periods=1).median()).max())


def entropy_fluctuation(entropy: pd.Series) -> float:
    """How much a run's per-step rollout entropy jumps: the s.d. of its step-to-step differences, in nats per token
    (a steady trend contributes little, a jump a lot). NaN for a run of fewer than 3 steps."""
    d = entropy.reset_index(drop=True).astype(float).dropna().diff().dropna()
    return float(d.std(ddof=1)) if len(d) > 1 else math.nan


def _wall_minutes(run_dir: Path) -> float:
    """A run's wall time on its core: training (the periodic evaluations run inside it) plus its final and
    second evaluations (the base model's evaluation, shared by every run, is not counted)."""
    manifest = json.loads((run_dir / "manifest.json").read_text())
    seconds = float(manifest.get("train_seconds", math.nan))
    for f in [run_dir / "final_eval.json", *sorted((run_dir / "evals").glob("*.json"))]:
        if f.is_file():
            seconds += float(json.loads(f.read_text())["summary"].get("wall_s", 0.0))
    return seconds / 60


def run_learning(result, *, max_steps: int, window: int = 10) -> pd.DataFrame:
    """One row per run of ``result`` (:class:`~dgro_lib.runs.experiment.ExperimentResult`), with its ``run``,
    ``seed`` and sweep-point columns (as ``result.finals`` has them) and:

    * ``speed``: the learning-speed metric (module docstring), points;
    * ``final``: the final held-out accuracy under the params' protocol, points;
    * ``<x>_first`` / ``<x>_last`` for ``x`` in train_accuracy (points), length (tokens), entropy (nats/token) and
      clipped (points): the mean over the first / last ``window`` optimizer steps; ``<x>_rise`` = last - first;
    * ``entropy_spike`` and ``entropy_fluctuation``: :func:`entropy_spike` and :func:`entropy_fluctuation` of the
      run's per-step entropy;
    * ``minutes``: the run's wall time on one core (training with its periodic evaluations, plus its own final
      evaluations), read from the run store.

    ``max_steps``: the runs' training length; held-out rows at that step are the final evaluation and are left out
    of ``speed``. A run with no periodic evaluation is an error naming it."""
    listing = pd.read_csv(result.out_dir / "runs.csv", dtype={"key": str}).set_index("run")
    rows = []
    for fin in result.finals.itertuples(index=False):
        run = fin.run
        held = result.heldout[(result.heldout["run"] == run) & (result.heldout["step"] < max_steps)]
        if held.empty:
            raise ValueError(f"run {run}: no periodic held-out evaluation before step {max_steps} "
                             "(train.eval_every must be set for the learning-speed metric)")
        m = result.metrics[result.metrics["run"] == run].sort_values("step")
        missing = sorted(set(ROLLOUT_COLUMNS) - set(m.columns))
        if missing:
            raise ValueError(f"run {run}: metrics.csv lacks {missing}")
        row = {"speed": 100 * float(held["accuracy"].mean()), "final": 100 * float(fin.accuracy)}
        for col, name in ROLLOUT_COLUMNS.items():
            scale = 100.0 if name in ("train_accuracy", "clipped") else 1.0
            first, last = (scale * float(m[col].head(window).mean()), scale * float(m[col].tail(window).mean()))
            row.update({f"{name}_first": first, f"{name}_last": last, f"{name}_rise": last - first})
        row["entropy_spike"] = entropy_spike(m["entropy"])
        row["entropy_fluctuation"] = entropy_fluctuation(m["entropy"])
        row["minutes"] = _wall_minutes(result.out_dir / listing.loc[run, "path"])
        rows.append(row)
    tags = result.finals.drop(columns=[c for c in ("correct",) if c in result.finals])
    keep = [c for c in tags.columns if c in ("run", "seed", "key", "point", "arm", "loss") or "." in c]
    out = pd.concat([tags[keep].reset_index(drop=True), pd.DataFrame(rows)], axis=1)
    if not np.isfinite(out["minutes"]).all():
        raise ValueError("a run's manifest.json has no train_seconds: "
                         f"{out.loc[~np.isfinite(out['minutes']), 'run'].tolist()}")
    return out


SUMMARY_COLUMNS = ["final", "speed", "train_accuracy_first", "train_accuracy_last", "length_first", "length_last",
                   "entropy_first", "entropy_last", "entropy_spike", "clipped_last", "minutes"]


def arm_summary(per_run: pd.DataFrame, *, by: str = "point", order: list[str] | None = None) -> pd.DataFrame:
    """One row per arm of :func:`run_learning`'s table: its seeds, and the mean and s.d. over them of
    :data:`SUMMARY_COLUMNS` (``<column>`` and ``<column>_sd``)."""
    order = order or list(dict.fromkeys(per_run[by]))
    g = per_run.groupby(by)[SUMMARY_COLUMNS]
    out = g.mean().join(g.std().add_suffix("_sd")).reindex(order)
    out.insert(0, "seeds", per_run.groupby(by)["seed"].nunique().reindex(order))
    return out[["seeds", *[c for col in SUMMARY_COLUMNS for c in (col, f"{col}_sd")]]]
