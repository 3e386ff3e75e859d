"""Measurements that sit beside the figures: what a reward-range change does under Adam.

Adam is invariant to a constant factor on the loss, up to its epsilon. The [-5,5] scheme of DGRO Table 4 is
exactly 5x the [-1,1] scheme, and for DGRO's loss (Eq. 4) scaling rewards by c equals scaling the loss by c
with beta2 replaced by beta2/c. So under Adam a [-5,5] run equals a [-1,1] run with beta2/5, and with beta2
inert (one update per rollout batch) the two reward ranges give the same updates. :func:`adam_scale_check`
measures this on identical rollouts instead of asserting it; whether the reward range made a difference in the
trained runs is a claim of :mod:`dgro_lib.papers.dgro_fig1_reward_variance`.

Also here: the base model's tables (:func:`base_model_info`, :func:`base_model_summary`).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd
import torch

from dgro_lib.data import kk
from dgro_lib.losses import compute_advantages, loss_entry
from dgro_lib.rewards import get_scheme, kk_outcome
from dgro_lib.models.sampling import sample

__all__ = ["completion_logps", "adam_scale_check",
           "base_model_card", "base_model_info", "base_model_summary"]


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
    prompts = [kk.format_prompt(r, template=template, tokenizer=tokenizer) for r in records]
    completion_ids = sample(model, tokenizer, prompts, n=num_generations, temperature=1.0,
                            max_new_tokens=max_new_tokens, seed=seed)
    rows = [r for r in records for _ in range(num_generations)]
    texts = tokenizer.batch_decode(completion_ids, skip_special_tokens=True)
    outcomes = [kk_outcome(t, names=r["names"], solution=r["solution"]) for t, r in zip(texts, rows)]
    prompt_ids = [tokenizer(kk.format_prompt(r, template=template, tokenizer=tokenizer),
                            add_special_tokens=False)["input_ids"]
                  for r in rows]
    loss_fn = loss_entry("dgro").fn
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


def base_model_card(info: dict[str, Any]) -> pd.DataFrame:
    """The few facts of :func:`base_model_info` a reader looks for first, as a two-column table (field, value):
    parameters, vocabulary, architecture and size, the config hash and the warm-up's steps, tokens, wall time and
    final loss (an embedded model's; a hub checkpoint has only the first two). The whole record is a JSON file."""
    cfg, stats = info.get("cfg", {}), info.get("stats", {})
    rows = {"model": Path(info["path"]).name, "parameters": f"{info['parameters']:,}", "vocabulary": info["vocabulary"]}
    if cfg:
        rows["architecture"] = (f"{cfg.get('arch')}: {cfg.get('layers')} layers, hidden {cfg.get('hidden')}, "
                                f"{cfg.get('heads')} heads")
        rows["config hash"] = info.get("config_hash")
    if stats:
        rows["warm-up"] = (f"{stats.get('steps')} steps, {stats.get('tokens', 0):,} tokens, "
                           f"{stats.get('wall_s', 0) / 60:.1f} min, final loss {stats.get('loss', float('nan')):.4f}")
    return pd.DataFrame({"field": list(rows), "value": [str(v) for v in rows.values()]})


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

__all__ += ["point_labels", "rl_map_table", "protocol_frame", "base_models"]


def point_labels(df: pd.DataFrame, keys: Sequence[str]) -> pd.Series:
    """A short label per row from its sweep-point columns: ``learning_rate=3e-05, temperature=1.0``; the keys of a
    joined sweep axis (``a|b``) may be given joined, and a sweep key's ``seeds`` is not a column
    (:func:`~dgro_lib.config.point_keys`)."""
    from dgro_lib.config import point_keys

    cols = point_keys(*keys)
    # column by column: a row of an all-numeric frame is upcast to float (prompts_per_step=4 would read 4.0)
    parts = [[f"{c.split('.')[-1]}={v}" for v in df[c].tolist()] for c in cols]
    return pd.Series([", ".join(row) for row in zip(*parts)] if cols else [""] * len(df), index=df.index,
                     dtype=object)


def sweep_point_labels(cfg, keys: Sequence[str]) -> list[str]:
    """The :func:`point_labels` of ``cfg``'s sweep points in the params' order (as
    :func:`~dgro_lib.config.expand_sweep` lists them), each once: the order a figure's legend follows."""
    from dgro_lib.config import expand_sweep

    points = pd.DataFrame([point for point, _, _ in expand_sweep(cfg)])
    return list(dict.fromkeys(point_labels(points, keys)))


def rl_map_table(result, sampled: pd.DataFrame, keys: Sequence[str], *, greedy: pd.DataFrame | None = None,
                 learning: pd.DataFrame | None = None, window: int = 10, labeler=None) -> pd.DataFrame:
    """One row per sweep point of an RL map, pooled over seeds: greedy accuracy (pooled McNemar z vs the base),
    sampled accuracy (avg@k; paired z on the seed-averaged per-puzzle differences), and from training: the sampled
    training accuracy over the first and last ``window`` steps, the mean fraction of zero-variance groups, the last
    entropy and the mean training time.

    ``result`` is :class:`~dgro_lib.runs.experiment.ExperimentResult`; ``sampled`` and ``greedy`` are
    :func:`~dgro_lib.runs.experiment.evaluate_runs` frames (their ``run == "base"`` rows are the base models). Without
    ``greedy``, the params' own protocol is the greedy one and ``result``'s final evaluations are read as it; a
    sampled protocol passes ``sampled=protocol_frame(result)`` and the greedy second evaluation as ``greedy``. A sweep
    that changes the base model compares each run with its own base. ``labeler`` names the points (a function of a
    DataFrame with the sweep columns, returning one label per row; default :func:`point_labels`). ``learning``
    (:func:`~dgro_lib.analysis.learning.run_learning` of ``result``) adds each point's mean learning speed
    (``speed``, points: the mean of the held-out curve during training).
    """
    from dgro_lib.evaluate import paired_fraction_table, paired_improvement_table

    labeler = labeler or (lambda df: point_labels(df, keys))
    finals, _ = base_models(result)
    finals = finals.assign(point=labeler(finals))
    greedy = protocol_frame(result) if greedy is None else greedy

    def labelled(frame):
        return frame[frame["run"] != "base"].drop(columns="point", errors="ignore").merge(
            finals[["run", "point"]], on="run")

    def base_of(frame, ident):
        return frame.loc[(frame["run"] == "base") & (frame["base_model"] == ident), "correct"].iloc[0]

    g_runs, s_runs = labelled(greedy), labelled(sampled)
    g_tables, s_tables = [], []
    for ident in dict.fromkeys(finals["base_model"]):  # each run against its own base model
        g_tables.append(paired_improvement_table(g_runs[g_runs["base_model"] == ident], base_of(greedy, ident),
                                                 by="point"))
        s_tables.append(paired_fraction_table(s_runs[s_runs["base_model"] == ident], base_of(sampled, ident),
                                              by="point"))
    g, samp = pd.concat(g_tables), pd.concat(s_tables)
    g = g[g["seed"] == "pooled"].set_index("point")
    samp = samp[samp["seed"] == "pooled"].set_index("point")
    m = result.metrics.merge(finals[["run", "point"]], on="run")
    outcome = _outcome_column(m, "correct")
    train = m.groupby("point").apply(lambda d: pd.Series({
        "train_acc_first": d[d["step"] <= window][outcome].mean(),
        "train_acc_last": d[d["step"] > d["step"].max() - window][outcome].mean(),
        "frac_zero_std": d["frac_reward_zero_std"].mean(),
        "entropy_last": d[d["step"] > d["step"].max() - window]["entropy"].mean()}), include_groups=False)
    table = pd.DataFrame({
        "base_model": finals.groupby("point")["base_model"].first(),
        "seeds": finals.groupby("point").size(),
        "greedy_base": g["acc_before"], "greedy_after": g["acc_after"],
        "greedy_delta_points": g["delta_points"], "greedy_z": g["z"],
        "sampled_base": samp["acc_before"], "sampled_after": samp["acc_after"],
        "sampled_delta_points": samp["delta_points"], "sampled_z": samp["z"],
        "train_minutes": finals.groupby("point")["train_seconds"].mean() / 60,
    }).join(train)
    if learning is not None:
        table["speed"] = labelled(learning).groupby("point")["speed"].mean()
    order = list(dict.fromkeys(labeler(pd.DataFrame(_points_in_order(result)))))
    return table.reindex(order).rename_axis("point").reset_index()


def protocol_frame(result) -> pd.DataFrame:
    """``result``'s own final evaluations (the params' ``eval`` protocol) as an
    :func:`~dgro_lib.runs.experiment.evaluate_runs` frame: one row per run (``run``, ``seed``, ``base_model``,
    ``correct``) and one per base model (``run == "base"``)."""
    finals, bases = base_models(result)
    runs = finals[["run", "seed", "base_model", "correct"]]
    base_rows = pd.DataFrame([{"run": "base", "seed": float("nan"), "base_model": ident, "correct": b["correct"]}
                              for ident, b in bases.items()])
    return pd.concat([runs, base_rows], ignore_index=True)


def base_models(result) -> tuple[pd.DataFrame, dict[str, dict[str, Any]]]:
    """``result``'s finals with a ``base_model`` column (a sweep that never changes the model has one base, named
    by ``result.bases`` or ``"base"``) and every base model's evaluation by that name."""
    finals = result.finals
    if "base_model" not in finals:
        finals = finals.assign(base_model=next(iter(result.bases), "base"))
    return finals, result.bases or {finals["base_model"].iloc[0]: result.base}


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
# DGRO Fig. 2: the (beta1, beta2) grid (notebooks/dgro_fig2_beta)
# ---------------------------------------------------------------------------------------------


def label_points(result, keys: Sequence[str], *, labeler=None):
    """A copy of an :class:`~dgro_lib.runs.experiment.ExperimentResult` whose metrics, heldout and finals carry a
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
    from dgro_lib.evaluate import mcnemar, mcnemar_z

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


__all__ += ["label_points", "paired_between_points", "sweep_point_labels"]


# ---------------------------------------------------------------------------------------------
# DGRO Fig. 3: methods compared (notebooks/dgro_fig3_methods)
# ---------------------------------------------------------------------------------------------

METHOD_NAMES = {"dgro": "DGRO", "grpo": "GRPO", "online_dpo": "Online DPO", "kimi": "Kimi k1.5", "dro": "DRO"}


def method_labels(df: pd.DataFrame, *, loss: dict | None = None, scheme: str | None = None) -> pd.Series:
    """One label per row of a sweep over ``loss`` (a dict per row, as the sweep point stores it) and
    ``reward.scheme``: the method's name, with the reward range for the reward-scale-sensitive DGRO family
    (``DGRO [-5,5]``); GRPO normalises by the group's s.d. and online DPO only ranks, so their scheme is not named.
    ``loss`` and ``scheme``: the config's loss section and reward scheme, for rows of a sweep that does not vary
    them (DGRO Table 3 at ``paper`` sweeps only the training set)."""
    def one(r) -> str:
        # a metrics row's own `loss` is TRL's logged loss value (a float), not the sweep point's loss section
        value = r["loss"] if "loss" in r.index and isinstance(r["loss"], (dict, str)) else loss
        if value is None:
            raise ValueError("method_labels: the rows have no `loss` column and no loss= was given")
        loss_ = value if isinstance(value, dict) else json.loads(value)
        name = METHOD_NAMES.get(loss_["name"], loss_["name"])
        if loss_["name"] not in ("dgro", "kimi", "dro"):
            return name
        range_ = r["reward.scheme"] if "reward.scheme" in r.index else scheme
        if range_ is None:
            raise ValueError("method_labels: the rows have no `reward.scheme` column and no scheme= was given")
        return f"{name} {range_}"
    return df.apply(one, axis=1)


__all__ += ["METHOD_NAMES", "method_labels"]


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


def kk_size_table(evals: dict[int, pd.DataFrame], *, train_people: Sequence[int], labeler, sampled: bool = False
                  ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """DGRO Table 2 from per-size evaluations: ``evals[people]`` is :func:`~dgro_lib.runs.experiment.evaluate_runs` on
    that people count's held-out puzzles (its ``run == "base"`` row the base model). ``labeler`` names the runs'
    sweep points (e.g. ``DGRO [-3,3]``).

    Returns (long, tests). ``long``: one row per (model, people): n puzzles, seeds, pass@1 mean and s.d. over seeds,
    and ``in_training`` (the size is one the model was trained on; the others are out of distribution *for this
    model*, whatever the paper's split). ``tests``: each run label against the base at each size, McNemar pooled
    over seeds (:func:`~dgro_lib.evaluate.paired_improvement_table`) for a greedy protocol; for a sampled one
    (``sampled``: ``correct`` holds each puzzle's fraction of correct samples) the paired z of the per-puzzle
    differences (:func:`~dgro_lib.evaluate.paired_fraction_table`), whose ``fixed`` / ``broken`` are left empty.
    """
    from dgro_lib.evaluate import paired_fraction_table, paired_improvement_table

    paired = paired_fraction_table if sampled else paired_improvement_table

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
        t = paired(runs, base["correct"].iloc[0], by="point")
        tests.append(t[t["seed"] == "pooled"].drop(columns="seed").assign(people=people))
    tests = pd.concat(tests, ignore_index=True).rename(columns={"point": "model"})
    return pd.DataFrame(long), tests.reindex(columns=["model", "people", "acc_before", "acc_after", "delta_points",
                                                      "fixed", "broken", "z", "p"])


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


__all__ += ["DGRO_TABLE2_PAPER", "kk_size_table", "kk_size_wide"]

