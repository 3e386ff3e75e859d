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


def rl_map_table(result, sampled: pd.DataFrame, keys: Sequence[str], *, window: int = 10) -> pd.DataFrame:
    """One row per sweep point of an RL map, pooled over seeds: greedy accuracy (pooled McNemar z vs the base),
    sampled accuracy (avg@k; paired z on the seed-averaged per-puzzle differences), and from training: the sampled
    training accuracy over the first and last ``window`` steps, the mean fraction of zero-variance groups, the last
    entropy and the mean training time.

    ``result`` is :class:`~dgro_lib.experiment.ExperimentResult`; ``sampled`` is
    :func:`~dgro_lib.experiment.evaluate_runs` under the sampled protocol (its ``run == "base"`` rows are the base
    models). A sweep that changes the base model compares each run with its own base.
    """
    from .evaluate import paired_fraction_table, paired_improvement_table

    finals = result.finals.assign(point=point_labels(result.finals, keys))
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
    train = m.groupby("point").apply(lambda g: pd.Series({
        "train_acc_first": g[g["step"] <= window]["kk_outcome/correct"].mean(),
        "train_acc_last": g[g["step"] > g["step"].max() - window]["kk_outcome/correct"].mean(),
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
    order = list(dict.fromkeys(point_labels(pd.DataFrame(_points_in_order(result)), keys)))
    return table.reindex(order).rename_axis("point").reset_index()


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
