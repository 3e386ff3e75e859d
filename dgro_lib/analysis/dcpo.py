"""The DCPO experiments' measurements and verdicts, as the notebooks ``dcpo_fig1_grid`` (Table 1 / Fig. 1, J1-J4),
``dcpo_table2_main`` (Tables 2-3), ``dcpo_table4_h0`` (Table 4 / Fig. 2) and ``dcpo_table5_ablation`` (Table 5)
compute them.

* :func:`policy_entropy` measures a model's entropy on its own samples: how the miniature's H0 is calibrated
  (DCPO's H0 values, 0.25-1.0 nats per token, are for 7B models; the embedded math model's entropy is ~10x smaller).
* :func:`sweep_labels` names each run by the params' ``extra.labels`` (``GRPO``, ``DCPO w/o double IS``, ...).
* :func:`paired_tests_between` compares methods with each other, on the same held-out problems and seeds: greedy
  (McNemar) and sampled (avg@k, paired z of the per-problem differences).
* :func:`entropy_endpoints` / :func:`entropy_contrasts`: where each run's entropy ends, against a reference method.
* :func:`temperature_phases`: how often DCPO's temperature rule chose T_high (H <= H0), and its α.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd
import torch

__all__ = ["select_backbone", "MethodSweep", "method_sweep", "sweep_figures", "entropy_curves_figure",
           "per_benchmark", "pass_at_k_frame", "policy_entropy", "policy_entropy_key", "round_significant", "sweep_labels", "paired_tests_between", "entropy_endpoints",
           "entropy_contrasts", "temperature_phases"]


# ---------------------------------------------------------------------------------------------
# H0 calibration
# ---------------------------------------------------------------------------------------------

def policy_entropy(cfg, *, n_prompts: int = 64, n_samples: int = 8, seed: int = 0, batch_size: int = 128,
                   store: str | Path | None = None) -> dict[str, Any]:
    """The base model's entropy as DCPO's rule measures it, before any training: ``n_samples`` completions at the
    rollout temperature ``cfg.train.temperature`` (and ``train.top_p``) for each of the first ``n_prompts``
    training prompts, scored by the same model.

    Returns ``H_nll`` (token-mean −log π of the sampled tokens, EOS included: what the trainer logs as
    ``entropy_nll`` and DCPO's ``entropy_source="nll"`` reads), ``H_full`` (token-mean full-vocabulary entropy:
    ``entropy``), ``tokens``, ``completions`` and the model path. Sampling is seeded: the numbers are a function of
    the config, ``seed`` and the machine kind (another CPU vendor's kernels round the float32 sums otherwise, and
    may sample other tokens).

    ``store``: a run store. The measurement is then kept there as a base-model measurement
    (``store/base/<key>.json``, beside the base evaluations) and read back instead of redone; the store's run
    archive (:func:`~dgro_lib.runs.archive.archive_from_env`) archives it with the base evaluations and restores it
    for the same base weights, so a restore on any machine reads the number the reference was computed with.
    """
    from dgro_lib.runs.data_sources import resolve_model_path

    path = resolve_model_path(cfg)  # may build the embedded base (a training loop): outside no_grad
    settings = dict(n_prompts=n_prompts, n_samples=n_samples, seed=seed, batch_size=batch_size)
    if store is None:
        with torch.no_grad():
            return _policy_entropy(cfg, path, **settings)
    return _stored_policy_entropy(cfg, path, Path(store), settings)


def policy_entropy_key(cfg, model_path: str | Path, settings: dict[str, Any]) -> str:
    """12 hex digits naming a :func:`policy_entropy` measurement in the run store: the base model, the prompts (the
    task, the template and the training records measured on), the sampling settings and the measurement's own."""
    from dgro_lib.runs.data_sources import load_train_records, model_identity

    t = cfg.train
    records = load_train_records(cfg)[:settings["n_prompts"]]
    payload = {"measurement": "policy_entropy", "model": model_identity(cfg, str(model_path)),
               "task": cfg.data.task, "template": cfg.data.template,
               "records": hashlib.sha256(json.dumps(records, sort_keys=True, default=str).encode()).hexdigest(),
               "sampling": {"temperature": t.temperature, "top_p": t.top_p,
                            "max_new_tokens": t.max_completion_length},
               "settings": settings}  # batch_size too: padding and the sampler's draws follow the batches
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()[:12]


def _stored_policy_entropy(cfg, path, store: Path, settings: dict[str, Any]) -> dict[str, Any]:
    """:func:`policy_entropy` through the run store (``store/base/<key>.json``) and its archive."""
    from dgro_lib.runs.archive import BASE_EVALS, stored_measurement

    def measure() -> dict[str, Any]:
        with torch.no_grad():
            got = _policy_entropy(cfg, path, **settings)
        # ``model_path`` is what the archive digests the weights of (as for a base evaluation)
        return got | {"model_path": str(path), "settings": settings}

    target = store / BASE_EVALS / f"{policy_entropy_key(cfg, path, settings)}.json"
    stored = dict(stored_measurement(target, str(path), measure))
    stored.pop("settings", None)
    stored["model"] = stored.pop("model_path")
    return stored


def _policy_entropy(cfg, path, *, n_prompts, n_samples, seed, batch_size) -> dict[str, Any]:
    from dgro_lib.config import eval_placement
    from dgro_lib.runs.data_sources import load_train_records
    from dgro_lib.models.loading import load_model
    from dgro_lib.models.sampling import sample
    from dgro_lib.tasks import get_task

    device, dtype = eval_placement(cfg)  # the GPU on a GPU node
    model, tok = load_model(path, device=device, dtype=dtype)
    model.eval()
    task = get_task(cfg.data.task)
    records = load_train_records(cfg)[:n_prompts]
    if not records:
        raise ValueError(f"policy_entropy: {cfg.name}: no training records")
    prompts = [tok(task.prompt(r, cfg.data.template, tok), add_special_tokens=False)["input_ids"] for r in records]
    t = cfg.train
    comps = sample(model, tok, prompts, n=n_samples, temperature=t.temperature, top_p=t.top_p,
                   max_new_tokens=t.max_completion_length, seed=seed, batch_size=batch_size)
    rows = [p for p in prompts for _ in range(n_samples)]
    nll = full = n_tok = 0.0
    pad = tok.pad_token_id if tok.pad_token_id is not None else 0
    for i in range(0, len(rows), batch_size):
        P = [rows[j] for j in range(i, min(i + batch_size, len(rows)))]
        C = comps[i:i + len(P)]
        ids, attn, p_len = _pack(P, C, pad)
        pos = (attn.cumsum(-1) - 1).clamp(min=0)
        logits = model(input_ids=ids, attention_mask=attn, position_ids=pos).logits[:, p_len - 1:-1].float()
        logits = logits / t.temperature  # the trainer scores at the rollout temperature, as TRL does
        logp = torch.log_softmax(logits, -1)
        m = attn[:, p_len:].float()
        tok_lp = logp.gather(-1, ids[:, p_len:, None]).squeeze(-1)
        ent = -(logp.exp() * logp).sum(-1)
        nll += float(-(tok_lp * m).sum())
        full += float((ent * m).sum())
        n_tok += float(m.sum())
    return {"H_nll": nll / n_tok, "H_full": full / n_tok, "tokens": int(n_tok), "completions": len(rows),
            "prompts": len(records), "temperature": t.temperature, "model": str(path)}


def _pack(prompts: list[list[int]], comps: list[list[int]], pad: int):
    """Left-padded prompts, right-padded completions (as TRL lays a batch out): ids, attention mask, prompt width."""
    P, T = max(map(len, prompts)), max(1, max(map(len, comps)))
    ids = torch.full((len(prompts), P + T), pad, dtype=torch.long)
    attn = torch.zeros_like(ids)
    for i, (p, c) in enumerate(zip(prompts, comps)):
        ids[i, P - len(p):P], attn[i, P - len(p):P] = torch.tensor(p), 1
        if c:
            ids[i, P:P + len(c)], attn[i, P:P + len(c)] = torch.tensor(c), 1
    return ids, attn, P


def round_significant(x: float, digits: int = 2) -> float:
    """``x`` to ``digits`` significant digits: a calibrated H0 that a rerun on another CPU reproduces exactly."""
    if x == 0 or not math.isfinite(x):
        return x
    return round(x, digits - 1 - int(math.floor(math.log10(abs(x)))))


# ---------------------------------------------------------------------------------------------
# Labels and paired comparisons between methods
# ---------------------------------------------------------------------------------------------

def _canon(x: Any) -> str:
    return json.dumps(json.loads(x) if isinstance(x, str) else x, sort_keys=True)


def sweep_labels(cfg, *, key: str = "loss"):
    """A labeler for a sweep over one key (default ``loss``), or one axis of joined keys (``"a|b"``, whose entries
    set ``a`` and ``b`` together): the row's value of ``key`` (of each joined key) -> the name at the same position
    of the params' ``labels`` knob. Returns ``fn(df) -> Series`` for the notebooks' ``labeler=`` arguments. A missing
    or mis-sized ``labels`` is an error naming both lengths. A ``seeds`` joined into ``key`` (an entry's own seeds)
    does not name the arm: it is not part of the point."""
    from dgro_lib.config import point_keys, sweep_entries

    values = cfg.sweep.get(key)
    labels = cfg.extra.get("labels")
    if values is None:
        raise ValueError(f"{cfg.name}: sweep has no {key!r} key (has {sorted(cfg.sweep)})")
    if not isinstance(labels, list) or len(labels) != len(values):
        raise ValueError(f"{cfg.name}: extra.labels must list one name per sweep.{key} value "
                         f"({len(values)} values, labels {labels!r})")
    if len(set(labels)) != len(labels):
        raise ValueError(f"{cfg.name}: extra.labels has duplicates: {labels}")
    parts = point_keys(key)
    names = {_canon([entry[k] for k in parts]): lab for entry, lab in zip(sweep_entries(cfg, key), labels)}

    def fn(df: pd.DataFrame) -> pd.Series:
        def one(row):
            c = _canon([json.loads(row[k]) if isinstance(row[k], str) and k == "loss" else row[k] for k in parts])
            if c not in names:
                raise ValueError(f"{key} {c} is not one of the sweep's values {sorted(names)}")
            return names[c]
        return df.apply(one, axis=1)
    return fn


def paired_tests_between(finals: pd.DataFrame, sampled: pd.DataFrame | None, pairs: Sequence[tuple[str, str]],
                         *, by: str = "point") -> pd.DataFrame:
    """Seed-paired tests of ``after`` against ``before`` for each pair of ``by`` values, on the held-out problems both
    were evaluated on. Greedy: pooled McNemar over the seeds both have (:func:`dgro_lib.analysis.probes.paired_between_points`).
    Sampled (``sampled``: :func:`dgro_lib.runs.experiment.evaluate_runs` rows with ``by`` and a per-problem fraction
    ``correct``): the per-problem difference averaged over those seeds, paired z (the conservative pooling of
    :func:`dgro_lib.evaluate.paired_fraction_table`). Columns: after, before, seeds, greedy_{after,before,delta_points,
    z}, sampled_{after,before,delta_points,z}."""
    from dgro_lib.analysis.probes import paired_between_points

    greedy = paired_between_points(finals, pairs, by=by)
    acc = {(r[by], r["seed"]): float(np.mean(r["correct"])) for _, r in finals.iterrows()}
    frac = ({} if sampled is None else {(r[by], r["seed"]): np.asarray(r["correct"], float)  # built once, not per pair
                                        for _, r in sampled[sampled["run"] != "base"].iterrows()})
    rows = []
    for g, (after, before) in zip(greedy.itertuples(), pairs):
        seeds = sorted(s for (p, s) in acc if p == after and (before, s) in acc)
        row = {"after": after, "before": before, "seeds": len(seeds),
               "greedy_after": np.mean([acc[(after, s)] for s in seeds]),
               "greedy_before": np.mean([acc[(before, s)] for s in seeds]),
               "greedy_delta_points": g.delta_points, "greedy_z": g.z}
        if sampled is not None:
            ss = sorted(s for (p, s) in frac if p == after and (before, s) in frac)
            if not ss:
                raise ValueError(f"sampled: no seed has both {after!r} and {before!r}")
            d = np.mean([frac[(after, s)] - frac[(before, s)] for s in ss], axis=0)
            sd = d.std(ddof=1) if len(d) > 1 else 0.0
            row |= {"sampled_after": float(np.mean([frac[(after, s)].mean() for s in ss])),
                    "sampled_before": float(np.mean([frac[(before, s)].mean() for s in ss])),
                    "sampled_delta_points": 100 * float(d.mean()),
                    "sampled_z": float(d.mean() / (sd / math.sqrt(len(d)))) if sd > 0 else 0.0}
        rows.append(row)
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------------------------------
# Entropy: where it ends, against a reference method; DCPO's temperature rule
# ---------------------------------------------------------------------------------------------

def entropy_endpoints(metrics: pd.DataFrame, *, by: str = "point", column: str = "entropy_nll",
                      fraction: float = 0.2) -> pd.DataFrame:
    """Per run: ``column``'s mean over the first and the last ``fraction`` of its logged steps (``first``,
    ``last``), their difference and ratio. ``entropy_nll`` (token-mean −log π of the sampled tokens, DCPO's H) by
    default. One row per run (``by``, seed, run, first, last, change, ratio)."""
    from dgro_lib.analysis.math import entropy_trend

    t = entropy_trend(metrics, by=by, column=column, fraction=fraction)
    return t.assign(ratio=t["last"] / t["first"]).drop(columns="relative")


def entropy_contrasts(ends: pd.DataFrame, reference: str, *, by: str = "point") -> pd.DataFrame:
    """Each ``by`` value's end-of-training entropy against ``reference``'s, paired by seed: mean ``last`` of both,
    the mean per-seed difference, its t statistic (n − 1 degrees of freedom; ±inf when every seed differs by the
    same amount), and the same for the change over training (``change``: last − first)."""
    ref = ends[ends[by] == reference].set_index("seed")
    if ref.empty:
        raise ValueError(f"entropy_contrasts: no run of {reference!r} (have {sorted(ends[by].unique())})")
    rows = []
    for point, g in ends.groupby(by, sort=False):
        g = g.set_index("seed")
        seeds = sorted(set(g.index) & set(ref.index))
        d = (g.loc[seeds, "last"] - ref.loc[seeds, "last"]).to_numpy()
        rows.append({by: point, "reference": reference, "seeds": len(seeds), "first": float(g["first"].mean()),
                     "last": float(g.loc[seeds, "last"].mean()), "reference_last": float(ref.loc[seeds, "last"].mean()),
                     "last_ratio": float(g.loc[seeds, "last"].mean() / ref.loc[seeds, "last"].mean()),
                     "last_diff": float(d.mean()), "t": _t(d), "change": float(g["change"].mean()),
                     "change_t": _t(g["change"].to_numpy())})
    return pd.DataFrame(rows)


def _t(d: np.ndarray) -> float:
    if len(d) < 2:
        return math.nan
    se = float(np.std(d, ddof=1) / math.sqrt(len(d)))
    return float(np.mean(d) / se) if se > 0 else math.copysign(math.inf, float(np.mean(d))) if np.mean(d) else 0.0


def temperature_phases(metrics: pd.DataFrame, *, by: str = "point", entropy_base: float | dict | None = None
                       ) -> pd.DataFrame:
    """How DCPO's temperature rule behaved in each run that logs it (``dcpo/T``, ``dcpo/H``, ``dcpo/alpha``: DCPO and
    the J1/J3 presets): the share of rollout batches at T_high (the larger T logged), the number of switches
    between the two temperatures, mean α, and H over the first and last fifth of the batches against H0
    (``entropy_base``: one value, or {``by`` value: H0}). Runs that do not log ``dcpo/T`` are left out."""
    if "dcpo/T" not in metrics:
        return pd.DataFrame(columns=[by, "seed", "run"])
    rows = []
    for (point, seed, run), g in metrics.groupby([by, "seed", "run"], sort=False):
        v = g.sort_values("step")[["step", "dcpo/T", "dcpo/H", "dcpo/alpha"]].dropna()
        if v.empty:
            continue
        T = v["dcpo/T"].to_numpy()
        k = max(1, len(v) // 5)
        h0 = entropy_base.get(point) if isinstance(entropy_base, dict) else entropy_base
        rows.append({by: point, "seed": seed, "run": run, "H0": h0, "steps": len(v),
                     "frac_T_high": float((T == T.max()).mean()) if T.min() != T.max() else
                     float(T.max() > 1.0), "T_values": ", ".join(f"{x:g}" for x in sorted(set(T))),
                     "switches": int((np.diff(T) != 0).sum()), "alpha_mean": float(v["dcpo/alpha"].mean()),
                     "H_first": float(v["dcpo/H"].iloc[1:k + 1].mean()),  # the first batch's H is 0 (no step yet)
                     "H_last": float(v["dcpo/H"].iloc[-k:].mean())})
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------------------------------
# Tables 2-3: avg@k and pass@k per benchmark
# ---------------------------------------------------------------------------------------------

def pass_at_k_frame(frame: pd.DataFrame, n: int, k: int) -> pd.DataFrame:
    """``frame`` (rows with ``correct``: per problem the fraction of ``n`` samples that were right, as
    :func:`dgro_lib.runs.experiment.evaluate_runs` returns) with ``correct`` replaced by each problem's unbiased pass@k
    estimate (:func:`dgro_lib.evaluate.pass_at_k` of its ``round(fraction * n)`` right samples)."""
    from dgro_lib.evaluate import pass_at_k

    if not 1 <= k <= n:
        raise ValueError(f"pass@k: k = {k} must be in [1, n = {n}]")
    return frame.assign(correct=[[pass_at_k(n, int(round(f * n)), k) for f in c] for c in frame["correct"]])


def per_benchmark(frame: pd.DataFrame, sources: Sequence[str], *, value: str, by: str = "point",
                  base_label: str = "base model") -> pd.DataFrame:
    """One row per (model, benchmark) from per-problem values (``correct``: a list per run, in the order of
    ``sources``, the ``source`` of each evaluated problem; its first ``len(correct)`` entries): n problems, seeds,
    the mean of ``value`` over seeds and its s.d. Rows with ``run == "base"`` are the base model (``base_label``).
    ``all`` covers every problem. The layout of :func:`dgro_lib.analysis.math.math_benchmark_table`'s ``long``,
    for :func:`dgro_lib.analysis.math.math_benchmark_wide` with ``value=``."""
    from dgro_lib.analysis.math import _benchmark_name

    n = len(frame["correct"].iloc[0])
    if len(sources) < n:
        raise ValueError(f"sources: {len(sources)} entries for {n} evaluated problems")
    src = list(sources)[:n]
    groups = {_benchmark_name(s): [i for i, x in enumerate(src) if x == s] for s in dict.fromkeys(src)}
    groups["all"] = list(range(n))
    label = frame.apply(lambda r: base_label if r.get("run") == "base" else r[by], axis=1)
    rows = []
    for bench, idx in groups.items():
        for model in dict.fromkeys(label):
            vals = [float(np.mean([c[i] for i in idx])) for c in frame.loc[label == model, "correct"]]
            rows.append({"model": model, "benchmark": bench, "n": len(idx), "seeds": len(vals),
                         value: float(np.mean(vals)), "std": float(np.std(vals, ddof=1)) if len(vals) > 1 else 0.0})
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------------------------------
# One sweep over methods, trained and evaluated twice (greedy; DCPO's sampled protocol)
# ---------------------------------------------------------------------------------------------

BACKBONE_KEY = "model.path|data.math_eval"


def select_backbone(cfg, backbone: str | None = None, *, key: str = BACKBONE_KEY):
    """``cfg`` narrowed to one backbone when its sweep pairs several models with their benchmark suites (``key``,
    the DCPO Table 2 ``paper`` params): the entry whose model is ``backbone`` (default: the first), its values set,
    the key dropped from the sweep, so a notebook compares methods on one model per execution (the runs are those of
    the full sweep: same configs, same run keys). A config without the key is returned as it is; asking it for a
    backbone is an error."""
    from dgro_lib.config import apply_overrides

    if key not in cfg.sweep:
        if backbone is not None:
            raise ValueError(f"{cfg.name}: backbone={backbone!r}, but the sweep has no {key!r} key")
        return cfg
    entries = cfg.sweep[key]
    models = [e[0] for e in entries]
    if backbone is not None and backbone not in models:
        raise ValueError(f"{cfg.name}: backbone {backbone!r} is not one of the sweep's models {models}")
    entry = entries[models.index(backbone) if backbone is not None else 0]
    return apply_overrides(cfg, {**dict(zip(key.split("|"), entry)),
                                 "sweep": {k: v for k, v in cfg.sweep.items() if k != key}},
                           source=f"backbone {entry[0]}")


@dataclass
class MethodSweep:
    """What the four DCPO notebooks start from: the config, the experiment (``labelled``: every frame with a
    ``point`` column of :func:`sweep_labels`), the sampled evaluation (``sampled``, base rows included, ``point`` =
    "base model" there), the labels in sweep order, and the held-out problems' ``sources``."""

    cfg: Any
    result: Any
    labelled: Any
    sampled: pd.DataFrame
    labels: list[str]
    sources: list[str]

    @property
    def finals(self) -> pd.DataFrame:
        return self.labelled.finals


def method_sweep(cfg, result, sampled: pd.DataFrame) -> MethodSweep:
    """Label a trained sweep: ``result`` of :func:`dgro_lib.runs.experiment.run_experiment` on ``cfg`` (greedy final
    evaluations) and ``sampled`` of :func:`dgro_lib.runs.experiment.evaluate_runs` under ``cfg.knobs.sampled_eval``
    (base rows included). The notebooks run both (this module does not import the sweep runner)."""
    from dgro_lib.analysis.probes import label_points
    from dgro_lib.runs.data_sources import load_eval_records

    labeler = sweep_labels(cfg)
    is_base = sampled["run"] == "base"
    point = pd.Series("base model", index=sampled.index, dtype=object)
    point[~is_base] = labeler(sampled[~is_base])
    return MethodSweep(cfg, result, label_points(result, list(cfg.sweep), labeler=labeler),
                       sampled.assign(point=point), list(cfg.knobs.labels),
                       [r["source"] for r in load_eval_records(cfg)])


def entropy_curves_figure(sweep: MethodSweep, *, title: str, entropy_base: float | None = None):
    """Per-step entropy of every run (token-mean −log π of the sampled tokens, DCPO's H, and the full-vocabulary
    entropy), mean ± 1 s.d. over seeds, smoothed within each run; H0 as a dashed line. Returns (figure, data)."""
    from dgro_lib.analysis.plots import smooth, training_curves

    m = sweep.labelled.metrics
    cols = ["entropy_nll", "entropy"]
    data = m[["point", "run", "seed", "step", *cols]].dropna(subset=cols, how="all")
    data = smooth(data, cols, max(1, sweep.cfg.train.max_steps // 15), by=["run"])
    fig = training_curves(data, {"entropy_nll": "H: -log pi of sampled tokens (nats/token)",
                                 "entropy": "full-vocabulary entropy (nats/token)"}, hue="point",
                          hue_order=sweep.labels, title=title,
                          baseline={"entropy_nll": entropy_base} if entropy_base is not None else None)
    if entropy_base is not None:
        fig.axes[0].lines[-1].set_label("H0")
    return fig, data


def sweep_figures(sweep: MethodSweep, out, *, stem: str, title: str, entropy_base: float | None = None):
    """The tables and figures every DCPO notebook shows, written under ``out``: ``<stem>_vs_base.csv`` (each arm
    against the base model, greedy and sampled: :func:`dgro_lib.analysis.probes.rl_map_table`), ``<stem>_training``
    (the four learning-curve panels) and ``<stem>_entropy`` (:func:`entropy_curves_figure`), each PNG beside its
    CSV. Returns (vs-base table, learning-curve figure, entropy figure)."""
    from pathlib import Path

    from dgro_lib.analysis.probes import rl_map_table
    from dgro_lib.util.files import atomic_write
    from dgro_lib.analysis.plots import learning_curves, learning_curves_figure, save_figure

    out = Path(out)
    labeler = sweep_labels(sweep.cfg)
    table = rl_map_table(sweep.result, sweep.sampled.drop(columns="point"), list(sweep.cfg.sweep), labeler=labeler)
    atomic_write(out / f"{stem}_vs_base.csv", lambda tmp: table.to_csv(tmp, index=False))
    curves = learning_curves(sweep.labelled, by="point", smooth_window=max(1, sweep.cfg.train.max_steps // 15))
    fig = learning_curves_figure(curves, hue="point", hue_order=sweep.labels, title=title)
    save_figure(fig, curves, out / f"{stem}_training")
    efig, edata = entropy_curves_figure(sweep, title=f"{title}: entropy", entropy_base=entropy_base)
    save_figure(efig, edata, out / f"{stem}_entropy")
    return table, fig, efig


# ---------------------------------------------------------------------------------------------
