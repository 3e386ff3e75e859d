"""Measurements that sit beside the figures: what a reward-range change does under Adam.

Adam is invariant to a constant factor on the loss, up to its epsilon. The [-5,5] scheme of DGRO Table 4 is
exactly 5x the [-1,1] scheme, and for DGRO's loss (Eq. 4) scaling rewards by c equals scaling the loss by c
with beta2 replaced by beta2/c. So under Adam a [-5,5] run equals a [-1,1] run with beta2/5, and with beta2
inert (one update per rollout batch) the two reward ranges give the same updates. :func:`adam_scale_check`
measures this on identical rollouts instead of asserting it; :func:`reward_range_verdict` states, from the
trained runs, whether the reward range made a difference beyond seed noise.

Also here: the base model's tables (:func:`base_model_info`, :func:`base_model_summary`).
"""

from __future__ import annotations

import copy
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd
import torch

from .data import kk
from .losses import compute_advantages, get_loss
from .rewards import get_scheme, kk_outcome
from .sampling import sample

__all__ = ["completion_logps", "adam_scale_check", "reward_range_verdict", "RewardRangeVerdict",
           "base_model_info", "base_model_summary"]


def completion_logps(model, prompt_ids: list[list[int]], completion_ids: list[list[int]], pad_id: int):
    """Per-token log-probs of each completion given its prompt.

    Returns ``(logps, mask)``, both (B, T) with T = the longest completion; prompts are left-padded and
    completions right-padded, as in TRL.
    """
    B = len(prompt_ids)
    P = max(len(p) for p in prompt_ids)
    T = max(1, max(len(c) for c in completion_ids))
    ids = torch.full((B, P + T), pad_id, dtype=torch.long)
    attn = torch.zeros((B, P + T), dtype=torch.long)
    for i, (p, c) in enumerate(zip(prompt_ids, completion_ids)):
        ids[i, P - len(p):P] = torch.tensor(p)
        attn[i, P - len(p):P] = 1
        if c:
            ids[i, P:P + len(c)] = torch.tensor(c)
            attn[i, P:P + len(c)] = 1
    position_ids = (attn.cumsum(-1) - 1).clamp(min=0)
    logits = model(input_ids=ids, attention_mask=attn, position_ids=position_ids).logits[:, P - 1:-1].float()
    logps = torch.log_softmax(logits, dim=-1).gather(-1, ids[:, P:].unsqueeze(-1)).squeeze(-1)
    return logps, attn[:, P:].to(logps.dtype)


def _flat_params(model) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1) for p in model.parameters() if p.requires_grad])


def adam_scale_check(
    model,
    tokenizer,
    records: Sequence[dict],
    *,
    num_generations: int = 8,
    updates: int = 5,
    beta2: float = 0.1,
    lr: float = 3e-5,
    loss_kwargs: dict[str, Any] | None = None,
    max_new_tokens: int = 320,
    template: str = "plain",
    seed: int = 0,
) -> pd.DataFrame:
    """Apply ``updates`` optimizer steps on ONE fixed rollout batch under several reward/beta2/optimizer settings
    and compare the resulting weight changes pairwise (norm ratio and cosine).

    Rows: the comparison, the optimizer, ``ratio`` = ||dW_a|| / ||dW_b|| and ``cosine``(dW_a, dW_b). The claim
    being checked is in the ``expect`` column.
    """
    torch.manual_seed(seed)
    prompts = [kk.format_prompt(r, template=template) for r in records]
    completion_ids = sample(model, tokenizer, prompts, n=num_generations, temperature=1.0,
                            max_new_tokens=max_new_tokens, seed=seed)
    rows = [r for r in records for _ in range(num_generations)]
    texts = tokenizer.batch_decode(completion_ids, skip_special_tokens=True)
    outcomes = [kk_outcome(t, names=r["names"], solution=r["solution"]) for t, r in zip(texts, rows)]
    prompt_ids = [tokenizer(kk.format_prompt(r, template=template), add_special_tokens=False)["input_ids"]
                  for r in rows]
    loss_fn = get_loss("dgro")
    kwargs = {"aggregation": "token-mean", **(loss_kwargs or {})}
    with torch.no_grad():
        old_logps, mask = completion_logps(model, prompt_ids, completion_ids, tokenizer.pad_token_id)
    theta0 = _flat_params(model)

    def delta(scheme: str, b2: float, optimizer: str) -> torch.Tensor:
        sch = get_scheme(scheme)
        rewards = torch.tensor([sch.score(o) for o in outcomes], dtype=torch.float32)
        adv = compute_advantages(rewards, num_generations, value="group_mean")
        m = copy.deepcopy(model)
        m.train()
        params = [p for p in m.parameters() if p.requires_grad]
        opt = (torch.optim.Adam(params, lr=lr, betas=(0.9, 0.99)) if optimizer == "adam"
               else torch.optim.SGD(params, lr=lr))
        for _ in range(updates):
            logps, _ = completion_logps(m, prompt_ids, completion_ids, tokenizer.pad_token_id)
            loss, _ = loss_fn(logps, old_logps, mask, adv, beta1=1.0, beta2=b2, **kwargs)
            opt.zero_grad()
            loss.backward()
            opt.step()
        return _flat_params(m) - theta0

    cases = [
        ("[-5,5] vs [-1,1], beta2=0", "adam", ("[-5,5]", 0.0), ("[-1,1]", 0.0), "identical (ratio 1, cosine 1)"),
        (f"[-5,5] vs [-1,1], beta2={beta2}", "adam", ("[-5,5]", beta2), ("[-1,1]", beta2), "differ"),
        (f"[-5,5] beta2={beta2} vs [-1,1] beta2={beta2 / 5:g}", "adam", ("[-5,5]", beta2), ("[-1,1]", beta2 / 5),
         "identical (ratio 1, cosine 1)"),
        ("[-5,5] vs [-1,1], beta2=0", "sgd", ("[-5,5]", 0.0), ("[-1,1]", 0.0), "ratio about 5 (exactly 5 for one step)"),
    ]
    cache: dict[tuple, torch.Tensor] = {}
    out = []
    for label, opt, a, b, expect in cases:
        for key in ((*a, opt), (*b, opt)):
            if key not in cache:
                cache[key] = delta(*key)
        da, db = cache[(*a, opt)], cache[(*b, opt)]
        out.append({
            "comparison": label,
            "optimizer": opt,
            "updates": updates,
            "ratio": float(da.norm() / db.norm().clamp_min(1e-30)),
            "cosine": float(torch.nn.functional.cosine_similarity(da, db, dim=0)),
            "expect": expect,
        })
    reward_var = {
        s: float(torch.tensor([get_scheme(s).score(o) for o in outcomes]).var(unbiased=False))
        for s in ("[-1,1]", "[-3,3]", "[-5,5]")
    }
    df = pd.DataFrame(out)
    df.attrs["reward_variance"] = reward_var
    return df


# ---------------------------------------------------------------------------------------------
# the verdict of DGRO Figure 1
# ---------------------------------------------------------------------------------------------


@dataclass
class RewardRangeVerdict:
    """What :func:`reward_range_verdict` concludes; ``str(verdict)`` is the text the notebook prints.

    ``per_scheme``: one row per reward scheme: final_mean / final_std (held-out accuracy over seeds, s.d. with
    ddof=1, NaN for one seed), seeds, delta_points (pooled, vs the base model) and z (pooled McNemar).
    ``gap_points``: 100 x (final_mean[high] - final_mean[low]); ``noise_points``: 100 x the largest seed s.d. of
    any scheme (0 when there is none); ``within_noise``: |gap| <= noise. The three are None when ``low`` or
    ``high`` was not run.
    """

    per_scheme: pd.DataFrame
    low: str
    high: str
    gap_points: float | None
    noise_points: float | None
    within_noise: bool | None

    def lines(self) -> list[str]:
        by = self.per_scheme.columns[0]
        out = [f"{r[by]}: {r['delta_points']:+.2f} points vs base (pooled McNemar z = {r['z']:+.2f})"
               for _, r in self.per_scheme.iterrows() if not math.isnan(r["delta_points"])]
        if self.gap_points is not None:
            out.append(
                f"{self.high} - {self.low} final accuracy: {self.gap_points:+.2f} points; largest seed s.d. "
                f"{self.noise_points:.2f} points -> "
                + ("within seed noise: no reward-range effect (as Adam's scale invariance predicts with beta2 inert)"
                   if self.within_noise else "a difference larger than the seed s.d."))
        return out

    def __str__(self) -> str:
        return "\n".join(self.lines())


def reward_range_verdict(table: pd.DataFrame, finals: pd.DataFrame, *, by: str = "reward.scheme",
                         low: str = "[-1,1]", high: str = "[-5,5]") -> RewardRangeVerdict:
    """Does the paper's reward-range effect (``high`` beats ``low``) show up beyond seed noise?

    ``table`` is :func:`dgro_lib.evaluate.paired_improvement_table` (its ``seed == "pooled"`` rows give each
    scheme's delta_points and z vs the base model); ``finals`` is :attr:`ExperimentResult.finals` (final held-out
    ``accuracy`` per run). The gap between the two schemes' mean final accuracies is compared with the largest
    seed standard deviation of any scheme: a gap no larger than that is "within seed noise". See
    :class:`RewardRangeVerdict` for what is returned.
    """
    final = finals.groupby(by, sort=False)["accuracy"].agg(final_mean="mean", final_std="std", seeds="size")
    pooled = table[table["seed"] == "pooled"].set_index(by)[["delta_points", "z"]]
    per_scheme = final.join(pooled, how="left").rename_axis(by).reset_index()
    gap = noise = within = None
    if {low, high} <= set(final.index):
        gap = 100 * float(final.loc[high, "final_mean"] - final.loc[low, "final_mean"])
        noise = 100 * max(float(final["final_std"].fillna(0).max()), 1e-9)
        within = abs(gap) <= noise
    return RewardRangeVerdict(per_scheme, low, high, gap, noise, within)


# ---------------------------------------------------------------------------------------------
# the base model (notebooks/00_base_model)
# ---------------------------------------------------------------------------------------------


def base_model_info(path: str | Path, model, tokenizer) -> dict[str, Any]:
    """What the base model is: ``parameters`` (count), ``vocabulary`` (tokenizer size) and, for an embedded model,
    its build record (``embedded.json`` in ``path``: config, config hash, warm-up statistics; package versions
    left out)."""
    info: dict[str, Any] = {"path": str(path), "parameters": sum(p.numel() for p in model.parameters()),
                            "vocabulary": len(tokenizer)}
    record = Path(path) / "embedded.json"
    if record.exists():
        info.update({k: v for k, v in json.loads(record.read_text()).items() if k != "versions"})
    return info


def base_model_summary(greedy: pd.DataFrame, rates: pd.DataFrame) -> pd.DataFrame:
    """One row per people count: the greedy table (:func:`dgro_lib.evaluate.greedy_accuracy_by_people`) joined
    with the sampled success rates (:func:`dgro_lib.evaluate.sampled_success_by_people`) summarised as
    sampled_accuracy (mean per-puzzle success rate), frac_all_wrong (puzzles with rate 0) and frac_all_right
    (rate 1): the puzzles whose sample groups have zero reward variance. People counts missing from either table
    are dropped."""
    s = rates.groupby("people")["success_rate"]
    sampled = pd.DataFrame({
        "sampled_accuracy": s.mean(),
        "frac_all_wrong": s.apply(lambda r: float((r == 0).mean())),
        "frac_all_right": s.apply(lambda r: float((r == 1).mean())),
    }).reset_index()
    return greedy.merge(sampled, on="people")


# ---------------------------------------------------------------------------------------------
# the RL map of the miniature (notebooks/01_miniature_map)
# ---------------------------------------------------------------------------------------------


def point_labels(df: pd.DataFrame, keys: Sequence[str]) -> pd.Series:
    """A short label per row from its sweep-point columns: ``learning_rate=3e-05, temperature=1.0``; the keys of a
    joined sweep axis (``a|b``) may be given joined."""
    cols = [k for key in keys for k in key.split("|")]
    return df.apply(lambda r: ", ".join(f"{c.split('.')[-1]}={r[c]}" for c in cols), axis=1)


def rl_map_table(result, sampled: pd.DataFrame, keys: Sequence[str], *, window: int = 10,
                 labeler=None) -> pd.DataFrame:
    """One row per sweep point of an RL map, pooled over seeds: greedy accuracy (pooled McNemar z vs the base),
    sampled accuracy (avg@k; paired z on the seed-averaged per-puzzle differences), and from training: the sampled
    training accuracy over the first and last ``window`` steps, the mean fraction of zero-variance groups, the last
    entropy and the mean training time.

    ``result`` is :class:`~dgro_lib.experiment.ExperimentResult`; ``sampled`` is
    :func:`~dgro_lib.experiment.evaluate_runs` under the sampled protocol (its ``run == "base"`` rows are the base
    models). A sweep that changes the base model compares each run with its own base. ``labeler`` names the points
    (a function of a DataFrame with the sweep columns, returning one label per row; default :func:`point_labels`).
    """
    from .evaluate import paired_fraction_table, paired_improvement_table

    labeler = labeler or (lambda df: point_labels(df, keys))
    finals = result.finals.assign(point=labeler(result.finals))
    if "base_model" not in finals:
        finals["base_model"] = next(iter(result.bases), "base")
    bases = result.bases or {finals["base_model"].iloc[0]: result.base}
    runs = sampled[sampled["run"] != "base"].merge(finals[["run", "point"]], on="run")
    greedy, samp = [], []
    for ident, group in finals.groupby("base_model", sort=False):  # each run against its own base model
        greedy.append(paired_improvement_table(group, bases[ident]["correct"], by="point"))
        base_fraction = sampled.loc[(sampled["run"] == "base") & (sampled["base_model"] == ident), "correct"].iloc[0]
        samp.append(paired_fraction_table(runs[runs["base_model"] == ident], base_fraction, by="point"))
    greedy, samp = pd.concat(greedy), pd.concat(samp)
    greedy = greedy[greedy["seed"] == "pooled"].set_index("point")
    samp = samp[samp["seed"] == "pooled"].set_index("point")
    m = result.metrics.merge(finals[["run", "point"]], on="run")
    outcome = _outcome_column(m, "correct")
    train = m.groupby("point").apply(lambda g: pd.Series({
        "train_acc_first": g[g["step"] <= window][outcome].mean(),
        "train_acc_last": g[g["step"] > g["step"].max() - window][outcome].mean(),
        "frac_zero_std": g["frac_reward_zero_std"].mean(),
        "entropy_last": g[g["step"] > g["step"].max() - window]["entropy"].mean()}), include_groups=False)
    table = pd.DataFrame({
        "base_model": finals.groupby("point")["base_model"].first(),
        "seeds": finals.groupby("point").size(),
        "greedy_base": greedy["acc_before"], "greedy_after": greedy["acc_after"],
        "greedy_delta_points": greedy["delta_points"], "greedy_z": greedy["z"],
        "sampled_base": samp["acc_before"], "sampled_after": samp["acc_after"],
        "sampled_delta_points": samp["delta_points"], "sampled_z": samp["z"],
        "train_minutes": finals.groupby("point")["train_seconds"].mean() / 60,
    }).join(train)
    order = list(dict.fromkeys(labeler(pd.DataFrame(_points_in_order(result)))))
    return table.reindex(order).rename_axis("point").reset_index()


def _outcome_column(metrics: pd.DataFrame, outcome: str) -> str:
    """The logged training-outcome column of the task's reward (``kk_outcome/correct``, ``math_outcome/correct``);
    the extra rollouts' own (``extra_rollouts/math_outcome/correct``, AEPO / J2 / J4) are not the policy's."""
    cols = [c for c in metrics.columns if c.endswith(f"_outcome/{outcome}") and c.count("/") == 1]
    if len(cols) != 1:
        raise ValueError(f"expected one '*_outcome/{outcome}' column in the training metrics, found {cols}")
    return cols[0]


def _points_in_order(result) -> list[dict]:
    """The sweep points in the order the params list them (runs.csv keeps it)."""
    listing = pd.read_csv(result.out_dir / "runs.csv")
    return [json.loads(p) for p in dict.fromkeys(listing["sweep_point"])]


# ---------------------------------------------------------------------------------------------
# the claims each notebook writes (dgro_lib.claims compares them with the reference results)
# ---------------------------------------------------------------------------------------------


def base_model_claims(summary: pd.DataFrame) -> list[dict]:
    """Greedy accuracy per people count, with its binomial standard error as the spread."""
    return [{"claim": f"{int(r.people)} people: greedy accuracy", "value": r.greedy_accuracy,
             "spread": math.sqrt(max(r.greedy_accuracy * (1 - r.greedy_accuracy), 1e-12) / max(r.n, 1))}
            for r in summary.itertuples()]


def fig1_claims(verdict: RewardRangeVerdict) -> list[dict]:
    """Per scheme: the final accuracy (spread: its seed s.d.) and the pooled gain over the base in points (spread:
    the gain / z, its standard error); the high - low gap (spread: the largest seed s.d.)."""
    by = verdict.per_scheme.columns[0]
    rows = []
    for _, r in verdict.per_scheme.iterrows():
        rows.append({"claim": f"{r[by]}: final accuracy", "value": r["final_mean"], "spread": r["final_std"]})
        rows.append({"claim": f"{r[by]}: greedy gain over base (points)", "value": r["delta_points"],
                     "spread": abs(r["delta_points"] / r["z"]) if r["z"] else math.nan})
    if verdict.gap_points is not None:
        rows.append({"claim": f"{verdict.high} - {verdict.low} (points)", "value": verdict.gap_points,
                     "spread": verdict.noise_points})
    return rows


def rl_map_claims(table: pd.DataFrame) -> list[dict]:
    """Per map point: the greedy and the sampled change in points (spread: change / z, its standard error)."""
    rows = []
    for _, r in table.iterrows():
        for metric in ("greedy", "sampled"):
            d, z = r[f"{metric}_delta_points"], r[f"{metric}_z"]
            rows.append({"claim": f"{r['point']}: {metric} change (points)", "value": d,
                         "spread": abs(d / z) if z else math.nan})
    return rows


def pooled_gain_claims(table: pd.DataFrame, *, by: str, metric: str) -> list[dict]:
    """The pooled rows of a paired table (:func:`~dgro_lib.evaluate.paired_improvement_table` or
    :func:`~dgro_lib.evaluate.paired_fraction_table`): ``<value>: <metric> gain over base (points)``, spread the
    gain / z (its standard error)."""
    pooled = table[table["seed"] == "pooled"]
    return [{"claim": f"{r[by]}: {metric} gain over base (points)", "value": r["delta_points"],
             "spread": abs(r["delta_points"] / r["z"]) if r["z"] else math.nan} for _, r in pooled.iterrows()]


# ---------------------------------------------------------------------------------------------
# DGRO Fig. 2: the (beta1, beta2) grid (notebooks/dgro_fig2_beta)
# ---------------------------------------------------------------------------------------------


def label_points(result, keys: Sequence[str], *, labeler=None):
    """A copy of an :class:`~dgro_lib.experiment.ExperimentResult` whose metrics, heldout and finals carry a
    ``point`` column (``labeler`` of each frame, default :func:`point_labels` of ``keys``), the one hue a figure of
    a multi-key sweep needs."""
    labeler = labeler or (lambda df: point_labels(df, keys))
    out = copy.copy(result)
    for name in ("metrics", "heldout", "finals"):
        df = getattr(result, name)
        if not df.empty:
            setattr(out, name, df.assign(point=labeler(df)))
    return out


def paired_between_points(finals: pd.DataFrame, pairs: Sequence[tuple[str, str]], *, by: str = "point"
                          ) -> pd.DataFrame:
    """Seed-paired McNemar tests between sweep points: for each ``(after, before)`` pair of ``by`` values, each
    seed both have compares the two runs on the same held-out puzzles, and the pooled row sums the discordant
    counts over those seeds. Columns: after, before, seeds, delta_points (mean over seeds), fixed, broken, z, p."""
    from .evaluate import mcnemar, mcnemar_z

    runs = {(r[by], r["seed"]): r["correct"] for _, r in finals.iterrows()}
    rows = []
    for after, before in pairs:
        seeds = sorted(s for (p, s) in runs if p == after and (before, s) in runs)
        if not seeds:
            raise ValueError(f"{by}: no seed has both {after!r} and {before!r}")
        tests = [mcnemar(runs[(before, s)], runs[(after, s)]) for s in seeds]
        fixed, broken = sum(t["fixed"] for t in tests), sum(t["broken"] for t in tests)
        z, p = mcnemar_z(fixed, broken)
        rows.append({"after": after, "before": before, "seeds": len(seeds),
                     "delta_points": 100 * sum(t["acc_after"] - t["acc_before"] for t in tests) / len(tests),
                     "fixed": fixed, "broken": broken, "z": z, "p": p})
    return pd.DataFrame(rows)


def entropy_fluctuation(metrics: pd.DataFrame, *, by: str = "point", column: str = "entropy") -> pd.DataFrame:
    """How much the per-step ``column`` jumps within a run: the s.d. of its step-to-step differences (a trend
    contributes little, a spike a lot). One row per run (``by``, seed, fluctuation)."""
    rows = []
    for (point, seed, run), g in metrics.groupby([by, "seed", "run"], sort=False):
        d = g.sort_values("step")[column].dropna().diff().dropna()
        rows.append({by: point, "seed": seed, "run": run, "fluctuation": float(d.std(ddof=1)) if len(d) > 1
                     else math.nan})
    return pd.DataFrame(rows)


def _label(b1: float, b2: float, keys: Sequence[str]) -> str:
    return point_labels(pd.DataFrame([{keys[0]: b1, keys[1]: b2}]), keys).iloc[0]


def beta_grid_verdicts(finals: pd.DataFrame, metrics: pd.DataFrame, *, keys: Sequence[str] = (
        "loss.kwargs.beta1", "loss.kwargs.beta2"), z_threshold: float = 3.0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """DGRO Fig. 2's claims tested on a (β1, β2) grid (``finals`` / ``metrics`` of :func:`label_points`, with the
    sweep columns ``keys``). Returns (verdicts, tests): one row per claim (statement, verdict, evidence) and the
    seed-paired tests they rest on (:func:`paired_between_points`).

    * Theorem 3.3's reading: at the largest β1, accuracy falls as β2 grows — tested between the smallest and the
      largest positive β2 (pooled paired z), with the means' order reported;
    * β2 = 0.01 at β1 = 1 fluctuates most in entropy (:func:`entropy_fluctuation` against every other point);
    * under Adam only β2/β1 matters (the loss at (cβ1, cβ2) is c times the loss at (β1, β2), and Adam is
      invariant to a constant factor up to ε and clipping): points of equal ratio compared seed by seed;
    * what β2 does: each point against β2 = 0 at its β1 (helps / hurts / no detectable effect, |z| > threshold).
    """
    b1s = sorted(finals[keys[0]].unique())
    b2s = sorted(finals[keys[1]].unique())
    label = {(b1, b2): _label(b1, b2, keys) for b1 in b1s for b2 in b2s}
    acc = finals.groupby("point")["accuracy"].agg(["mean", "std"])
    pairs = []
    top = b1s[-1]
    positive = [b for b in b2s if b > 0]
    if len(positive) >= 2:
        pairs.append((label[(top, positive[0])], label[(top, positive[-1])]))
    for b1 in b1s:
        pairs += [(label[(b1, b2)], label[(b1, 0.0)]) for b2 in positive if 0.0 in b2s]
    ratio = {}
    for b1, b2 in label:
        ratio.setdefault(round(b2 / b1, 12), []).append(label[(b1, b2)])
    same = [tuple(v[:2]) for v in ratio.values() if len(v) >= 2]
    pairs += same
    tests = paired_between_points(finals, pairs)
    t = tests.set_index(["after", "before"])
    rows = []
    if len(positive) >= 2:
        lo, hi = label[(top, positive[0])], label[(top, positive[-1])]
        r = t.loc[(lo, hi)]
        means = [acc.loc[label[(top, b)], "mean"] for b in positive]
        ordered = all(a >= b for a, b in zip(means, means[1:]))
        verdict = ("reproduced" if r.z > z_threshold and ordered else "reversed" if r.z < -z_threshold
                   else "not established")
        rows.append({"statement": f"smaller β2 → higher accuracy when β1 is not small (β1 = {top:g}; DGRO §4.3, "
                                  "Theorem 3.3)", "verdict": verdict,
                     "evidence": f"β2 = {positive[0]:g} vs {positive[-1]:g}: {r.delta_points:+.2f} points, pooled "
                                 f"paired z {r.z:+.2f} ({int(r.fixed)} / {int(r.broken)}); means by β2 "
                                 + ", ".join(f"{b:g}: {100 * m:.2f} %" for b, m in zip(positive, means))
                                 + ("" if ordered else " (not in order)")})
    fl = entropy_fluctuation(metrics)
    f = fl.groupby("point")["fluctuation"].agg(["mean", "std"])
    key = label.get((1.0, 0.01))
    if key is not None and key in f.index:
        others = f.drop(index=key)
        margin = 2 * float(f["std"].fillna(0).max())
        verdict = ("reproduced" if f.loc[key, "mean"] > others["mean"].max() + margin
                   else "not reproduced" if f.loc[key, "mean"] < others["mean"].max() else "not established")
        rows.append({"statement": "(β1, β2) = (1, 0.01) shows entropy fluctuations (DGRO Fig. 2c)", "verdict": verdict,
                     "evidence": f"s.d. of step-to-step entropy change: {f.loc[key, 'mean']:.4f} against "
                                 f"{others['mean'].min():.4f}–{others['mean'].max():.4f} at the other points "
                                 f"(largest seed s.d. {f['std'].max():.4f})"})
    for a, b in same:
        r = t.loc[(a, b)]
        gap = abs(acc.loc[a, "mean"] - acc.loc[b, "mean"]) * 100
        noise = 100 * float(acc["std"].fillna(0).max())
        rows.append({"statement": f"only β2/β1 matters under Adam: {a} ≡ {b}",
                     "verdict": "holds" if abs(r.z) < z_threshold and gap <= max(noise, 1e-9) else "differs",
                     "evidence": f"{r.delta_points:+.2f} points, pooled paired z {r.z:+.2f}, "
                                 f"{int(r.fixed + r.broken)} discordant puzzles over {int(r.seeds)} seeds; mean gap "
                                 f"{gap:.2f} points vs seed s.d. {noise:.2f}"})
    for b1 in b1s:
        for b2 in positive:
            if 0.0 not in b2s:
                break
            r = t.loc[(label[(b1, b2)], label[(b1, 0.0)])]
            effect = "helps" if r.z > z_threshold else "hurts" if r.z < -z_threshold else "no detectable effect"
            rows.append({"statement": f"β2 = {b2:g} against β2 = 0 at β1 = {b1:g}", "verdict": effect,
                         "evidence": f"{r.delta_points:+.2f} points, pooled paired z {r.z:+.2f} "
                                     f"({int(r.fixed)} / {int(r.broken)})"})
    return pd.DataFrame(rows), tests


__all__ += ["label_points", "paired_between_points", "entropy_fluctuation", "beta_grid_verdicts"]


# ---------------------------------------------------------------------------------------------
# DGRO Fig. 3: methods compared (notebooks/dgro_fig3_methods)
# ---------------------------------------------------------------------------------------------

METHOD_NAMES = {"dgro": "DGRO", "grpo": "GRPO", "online_dpo": "Online DPO", "kimi": "Kimi k1.5", "dro": "DRO"}


def method_labels(df: pd.DataFrame, *, loss: dict | None = None) -> pd.Series:
    """One label per row of a sweep over ``loss`` (a dict per row, as the sweep point stores it) and
    ``reward.scheme``: the method's name, with the reward range for the reward-scale-sensitive DGRO family
    (``DGRO [-5,5]``); GRPO normalises by the group's s.d. and online DPO only ranks, so their scheme is not named.
    ``loss``: the config's loss section, for rows of a sweep that does not vary it."""
    def one(r) -> str:
        # a metrics row's own `loss` is TRL's logged loss value (a float), not the sweep point's loss section
        value = r["loss"] if "loss" in r.index and isinstance(r["loss"], (dict, str)) else loss
        if value is None:
            raise ValueError("method_labels: the rows have no `loss` column and no loss= was given")
        loss_ = value if isinstance(value, dict) else json.loads(value)
        name = METHOD_NAMES.get(loss_["name"], loss_["name"])
        return f"{name} {r['reward.scheme']}" if loss_["name"] in ("dgro", "kimi", "dro") else name
    return df.apply(one, axis=1)


def method_verdicts(finals: pd.DataFrame, base: dict, *, reference: str = "GRPO", weakest: str = "Online DPO",
                    z_threshold: float = 3.0, length_tolerance: float = 0.10) -> tuple[pd.DataFrame, pd.DataFrame]:
    """DGRO Fig. 3's claims from the trained methods (``finals`` with a ``point`` column of :func:`method_labels`
    and each run's held-out ``mean_length``; ``base`` the base model's evaluation). Returns (verdicts, tests):

    * every DGRO arm against ``reference`` (GRPO), and ``reference`` against ``weakest`` (online DPO): seed-paired
      McNemar pooled over seeds (:func:`paired_between_points`); *reproduced* when z > ``z_threshold``,
      *reversed* when z < −threshold, else *not established*;
    * "DGRO does not lengthen responses": each DGRO arm's mean held-out greedy response length against the base
      model's on the same puzzles; *holds* when no longer than (1 + ``length_tolerance``) × the base's.
    """
    dgro = [p for p in dict.fromkeys(finals["point"]) if p.startswith("DGRO")]
    pairs = [(p, reference) for p in dgro] + [(reference, weakest)]
    tests = paired_between_points(finals, pairs)
    rows = []
    for r in tests.itertuples():
        verdict = "reproduced" if r.z > z_threshold else "reversed" if r.z < -z_threshold else "not established"
        rows.append({"statement": f"{r.after} > {r.before}", "verdict": verdict,
                     "evidence": f"{r.delta_points:+.2f} points, pooled paired z {r.z:+.2f} ({int(r.fixed)} / "
                                 f"{int(r.broken)} over {int(r.seeds)} seeds)"})
    base_len = float(base["summary"]["mean_length"])
    lengths = finals.groupby("point")["mean_length"].agg(["mean", "std"])
    for p in dgro:
        ratio = lengths.loc[p, "mean"] / base_len
        rows.append({"statement": f"{p} does not lengthen responses", "verdict":
                     "holds" if ratio <= 1 + length_tolerance else "fails",
                     "evidence": f"held-out greedy response length {lengths.loc[p, 'mean']:.1f} ± "
                                 f"{lengths.loc[p, 'std']:.1f} tokens against the base's {base_len:.1f} "
                                 f"(× {ratio:.3f})"})
    return pd.DataFrame(rows), tests


__all__ += ["METHOD_NAMES", "method_labels", "method_verdicts"]


# ---------------------------------------------------------------------------------------------
# DGRO Table 2: pass@1 by number of people (notebooks/dgro_table2_kk)
# ---------------------------------------------------------------------------------------------

# DGRO paper, Table 2 (pass@1 on the K&K test set, 100 puzzles per size): quoted, not measured here. Columns are
# people counts; the paper trains on 3-7 people, so 2 and 8 are its out-of-distribution columns.
DGRO_TABLE2_PAPER = pd.DataFrame(
    [["o3-mini-high", 0.98, 0.97, 0.95, 0.94, 0.89, 0.99, 0.83],
     ["o1-2024-12-17", 0.51, 0.38, 0.38, 0.35, 0.30, 0.83, 0.20],
     ["Deepseek-R1", 0.73, 0.77, 0.78, 0.75, 0.88, 0.91, 0.83],
     ["GPT-4o", 0.57, 0.49, 0.32, 0.23, 0.21, 0.68, 0.11],
     ["GPT-4o-mini", 0.42, 0.34, 0.17, 0.09, 0.10, 0.63, 0.01],
     ["NuminaMath-7B-CoT", 0.13, 0.12, 0.05, 0.01, 0.00, 0.28, 0.00],
     ["Deepseek-Math-7B", 0.21, 0.08, 0.06, 0.02, 0.00, 0.35, 0.00],
     ["Qwen2.5-Base-7B", 0.34, 0.16, 0.09, 0.01, 0.00, 0.41, 0.00],
     ["Qwen2.5-7B-Instruct-1M", 0.40, 0.25, 0.11, 0.06, 0.02, 0.49, 0.01],
     ["+Logic-RL", 0.99, 0.94, 0.92, 0.91, 0.80, 0.99, 0.67],
     ["+DGRO [-3,3]", 0.98, 0.99, 0.95, 0.89, 0.90, 0.96, 0.82],
     ["+DGRO [-5,5]", 1.0, 1.0, 0.98, 0.98, 0.95, 1.0, 0.87]],
    columns=["model", 3, 4, 5, 6, 7, 2, 8])


def kk_size_table(evals: dict[int, pd.DataFrame], *, train_people: Sequence[int], labeler
                  ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """DGRO Table 2 from per-size evaluations: ``evals[people]`` is :func:`~dgro_lib.experiment.evaluate_runs` on
    that people count's held-out puzzles (its ``run == "base"`` row the base model). ``labeler`` names the runs'
    sweep points (e.g. ``DGRO [-3,3]``).

    Returns (long, tests). ``long``: one row per (model, people): n puzzles, seeds, pass@1 mean and s.d. over seeds,
    and ``in_training`` (the size is one the model was trained on; the others are out of distribution *for this
    model*, whatever the paper's split). ``tests``: each run label against the base at each size, McNemar pooled
    over seeds (:func:`~dgro_lib.evaluate.paired_improvement_table`).
    """
    from .evaluate import paired_improvement_table

    long, tests = [], []
    for people, ev in evals.items():
        base = ev[ev["run"] == "base"]
        if len(base) != 1:
            raise ValueError(f"{people} people: expected one base-model row, found {len(base)}")
        runs = ev[ev["run"] != "base"].assign(point=lambda d: labeler(d))
        rows = [("base model", base)] + list(runs.groupby("point", sort=False))
        for label, g in rows:
            long.append({"model": label, "people": people, "n": int(g["n"].iloc[0]), "seeds": len(g),
                         "pass@1": g["accuracy"].mean(), "std": g["accuracy"].std(ddof=1) if len(g) > 1 else 0.0,
                         "in_training": people in train_people})
        t = paired_improvement_table(runs, base["correct"].iloc[0], by="point")
        tests.append(t[t["seed"] == "pooled"].drop(columns="seed").assign(people=people))
    tests = pd.concat(tests, ignore_index=True).rename(columns={"point": "model"})
    return pd.DataFrame(long), tests[["model", "people", "acc_before", "acc_after", "delta_points", "fixed",
                                      "broken", "z", "p"]]


def kk_size_wide(long: pd.DataFrame, *, paper: pd.DataFrame | None = DGRO_TABLE2_PAPER) -> pd.DataFrame:
    """``long`` of :func:`kk_size_table` in Table 2's layout: one row per model, one column per people count in the
    paper's order (3-7, then 2 and 8), each ``mean`` (± s.d. over seeds where there are several), and the average
    over the columns; ``paper``'s rows appended, marked ``source = quoted from the paper`` (their average over the
    same columns: the paper's own Avg. when all seven are measured)."""
    order = [p for p in (3, 4, 5, 6, 7, 2, 8) if p in set(long["people"])] + sorted(
        set(long["people"]) - {3, 4, 5, 6, 7, 2, 8})
    cell = long.assign(cell=[f"{m:.2f}" + (f" ± {s:.2f}" if k > 1 else "") for m, s, k in
                             zip(long["pass@1"], long["std"], long["seeds"])])
    wide = cell.pivot(index="model", columns="people", values="cell").reindex(
        index=list(dict.fromkeys(long["model"])), columns=order)
    wide["Avg."] = long.pivot(index="model", columns="people", values="pass@1")[order].mean(axis=1).map("{:.3f}".format)
    wide = wide.reset_index().assign(source="measured here")
    if paper is not None:
        shown = [c for c in order if c in paper]  # the average over the columns measured here, as for our rows
        quoted = paper.assign(**{"Avg.": paper[shown].mean(axis=1).map("{:.3f}".format)})
        quoted = quoted[["model", *shown, "Avg."]].astype({c: str for c in shown})
        wide = pd.concat([wide, quoted.assign(source="quoted from the paper")], ignore_index=True)
    wide.columns = [f"{c} people" if isinstance(c, (int, np.integer)) else c for c in wide.columns]
    return wide


def table2_verdicts(tests: pd.DataFrame, long: pd.DataFrame, *, z_threshold: float = 3.0) -> pd.DataFrame:
    """One verdict per (model, people) (:func:`paired_verdict`: *not testable at this scale* where the base and the
    model score 0, a size the miniature cannot solve); the size's place in training (in / out of distribution for
    this model) beside it."""
    rows = []
    for r in tests.itertuples():
        model_row = long[(long["model"] == r.model) & (long["people"] == r.people)].iloc[0]
        rows.append({"model": r.model, "people": r.people,
                     "split": "in training" if model_row["in_training"] else "out of distribution",
                     "verdict": paired_verdict(r, model_row["pass@1"], z_threshold=z_threshold),
                     "evidence": paired_evidence(r)})
    return pd.DataFrame(rows)


def paired_verdict(test, accuracy: float, *, z_threshold: float = 3.0) -> str:
    """The verdict of one pooled paired test against the base (a row with ``acc_before`` and ``z``; ``accuracy`` the
    model's mean over seeds): *improves* / *hurts* when z passes ±threshold, *no change* otherwise, and *not testable
    at this scale* when the base and the model both score 0, or both 1 (no room either way)."""
    if {test.acc_before, accuracy} <= {0.0} or {test.acc_before, accuracy} <= {1.0}:
        return "not testable at this scale"
    return "improves" if test.z > z_threshold else "hurts" if test.z < -z_threshold else "no change"


def paired_evidence(test) -> str:
    """``"42.0 % -> 50.0 % (+8.00 points, pooled z +2.50, 12 / 4)"`` for a pooled paired-test row."""
    return (f"{100 * test.acc_before:.1f} % -> {100 * test.acc_after:.1f} % ({test.delta_points:+.2f} points, "
            f"pooled z {test.z:+.2f}, {int(test.fixed)} / {int(test.broken)})")


__all__ += ["DGRO_TABLE2_PAPER", "kk_size_table", "kk_size_wide", "table2_verdicts", "paired_verdict",
            "paired_evidence"]

