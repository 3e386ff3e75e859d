"""Seaborn figures in the papers' layout. Every figure is saved as PNG beside the CSV it was drawn from."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Sequence

# No backend is forced here: a Jupyter kernel (JupyterLab, papermill, nbval) uses its inline backend, so a notebook
# shows the figure it returns, and a script without a display gets matplotlib's headless default (or MPLBACKEND).
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from dgro_lib.util.files import atomic_write

__all__ = ["save_figure", "arm_bands_figure", "learning_bands_figure", "LEARNING_BAND_PANELS", "training_curves", "smooth", "learning_curves", "learning_curves_figure",
           "success_rate_histogram", "rl_map_figure", "soft_value_figure", "gradient_bounds_figure",
           "kk_size_figure", "grad_ratio_figure", "verdict_figure", "wrap_label", "VERDICT_COLORS"]


def save_figure(fig: plt.Figure, data: pd.DataFrame, stem: str | Path) -> tuple[Path, Path]:
    """Write ``<stem>.csv`` (the data drawn) and ``<stem>.png``; returns both paths. The figure is closed in pyplot
    (it still draws): a notebook shows it once, by returning it from the cell, and not a second time when the
    inline backend flushes the figures left open at the cell's end."""
    stem = Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    csv, png = stem.with_suffix(".csv"), stem.with_suffix(".png")
    atomic_write(csv, lambda tmp: data.to_csv(tmp, index=False))
    # the temp file's suffix is not .png: the format is given explicitly
    atomic_write(png, lambda tmp: fig.savefig(tmp, format="png", dpi=130, bbox_inches="tight"))
    plt.close(fig)
    return csv, png


def smooth(df: pd.DataFrame, columns: Sequence[str], window: int, by: Sequence[str]) -> pd.DataFrame:
    """Centered rolling mean of ``columns`` within each run (``by``), for noisy per-step curves."""
    if window <= 1:
        return df
    df = df.sort_values([*by, "step"]).copy()
    for c in columns:
        df[c] = df.groupby(list(by))[c].transform(lambda s: s.rolling(window, min_periods=1, center=True).mean())
    return df


def training_curves(
    data: pd.DataFrame,
    panels: dict[str, str],
    *,
    hue: str,
    title: str | None = None,
    baseline: dict[str, float] | None = None,
    hue_order: Sequence[str] | None = None,
) -> plt.Figure:
    """One panel per metric (``panels``: column -> axis label), x = step, mean line with a +-1 s.d. band over seeds.

    ``baseline`` draws a dashed horizontal line per panel column (e.g. the base model's accuracy).
    """
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.4), squeeze=False)
    for ax, (column, label) in zip(axes[0], panels.items()):
        sub = data.dropna(subset=[column])
        sns.lineplot(sub, x="step", y=column, hue=hue, hue_order=hue_order, errorbar="sd", ax=ax, marker="o"
                     if sub["step"].nunique() < 15 else None, markersize=4)
        if baseline and column in baseline:
            ax.axhline(baseline[column], color="gray", ls="--", lw=1, label="base model")
        ax.set_xlabel("training step")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
        if ax is not axes[0][0] and ax.get_legend() is not None:
            ax.get_legend().remove()
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


LEARNING_CURVE_PANELS = {
    "accuracy": "held-out greedy accuracy\n({heldout_puzzles} puzzles, the same\nat every point)",
    "train_accuracy": "training accuracy\n(sampled rollouts{window})",
    "response_length": "response length\n(tokens{window})",
    "entropy": "entropy\n(nats/token{window})",
}


def arm_bands_figure(curves: pd.DataFrame, panels: dict[str, str], *, hue: str, order: Sequence[str],
                     dashed: Sequence[str] = (), title: str | None = None) -> plt.Figure:
    """The paper's layout: one panel per metric (``panels``: column -> axis label), each arm's mean curve over its
    seeds with a run-level band (the 95 % t-interval of the seed means at each step), every arm in one panel.

    ``curves``: long table with ``hue``, ``seed``, ``step`` and the panel columns (per-step values of each run).
    ``dashed``: arms drawn dashed (a positive control), so that the paper's arms stay the solid lines."""
    from scipy import stats

    colors = dict(zip(order, sns.color_palette(n_colors=len(order))))
    fig, axes = plt.subplots(1, len(panels), figsize=(3.6 * len(panels), 3.4), squeeze=False)
    for ax, (column, label) in zip(axes[0], panels.items()):
        sub = curves.dropna(subset=[column])
        for arm in order:
            g = sub[sub[hue] == arm].groupby("step")[column]
            mean, n, sd = g.mean(), g.count(), g.std()
            half = sd / n.pow(0.5) * stats.t.ppf(0.975, (n - 1).clip(lower=1))
            ax.plot(mean.index, mean.values, color=colors[arm], lw=1.8, ls="--" if arm in dashed else "-",
                    label=f"{arm} ({int(n.max())} seeds)")
            ax.fill_between(mean.index, (mean - half).values, (mean + half).values, color=colors[arm], alpha=0.18,
                            lw=0)
        ax.set_xlabel("step")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=min(3, len(order)), frameon=False,
               bbox_to_anchor=(0.5, -0.02 - 0.06 * ((len(order) - 1) // 3)))
    if title:
        fig.suptitle(title)
    fig.tight_layout(rect=(0, 0.08 + 0.06 * ((len(order) - 1) // 3), 1, 1))
    return fig


LEARNING_BAND_PANELS = {
    "accuracy": "held-out accuracy (%)\n({heldout_puzzles} puzzles, the same at every point)",
    "train_accuracy": "training accuracy (%)\n(T = 1 rollouts{window})",
    "response_length": "response length\n(tokens{window})",
    "entropy": "entropy\n(nats/token{window})",
}


def learning_bands_figure(curves: pd.DataFrame, *, hue: str, order: Sequence[str], dashed: Sequence[str] = (),
                          title: str | None = None) -> plt.Figure:
    """A :func:`learning_curves` table in the paper's layout (:func:`arm_bands_figure`): held-out accuracy,
    training accuracy, response length and entropy, each arm's mean over its seeds with a 95 % run-level band,
    accuracies in percent; ``dashed`` arms (a positive control) drawn dashed."""
    curves = curves.copy()
    curves[["accuracy", "train_accuracy"]] *= 100
    window = curves.attrs.get("smooth_window", 1)
    fill = {"heldout_puzzles": curves.attrs.get("heldout_puzzles", "?"),
            "window": f"; {window}-step mean" if window > 1 else ""}
    panels = {c: label.format(**fill) for c, label in LEARNING_BAND_PANELS.items()}
    return arm_bands_figure(curves, panels, hue=hue, order=order, dashed=dashed, title=title)


def learning_curves_figure(curves: pd.DataFrame, *, hue: str, hue_order: Sequence[str] | None = None,
                           title: str | None = None) -> plt.Figure:
    """Small multiples of a :func:`learning_curves` table: one row per panel of :data:`LEARNING_CURVE_PANELS`
    (held-out accuracy, training accuracy, response length, entropy), one column per ``hue`` value (an arm).

    Each cell draws every seed as a thin line and their mean as a bold one, with the other arms' means in light
    grey behind it, so that seed spread is visible without one arm's band hiding another's (overlaid +-1 s.d.
    bands of 4-8 arms blur into one). The held-out row says how many puzzles each point rests on (the periodic
    subset; the verdicts rest on the full final evaluation, whose count is in the caption when known) and draws the
    base model's accuracy on those puzzles (the step-0 value) as a dashed line. Rows share their y-axis.

    ``hue_order``: the preferred order of the ``hue`` values; values absent from ``curves`` are skipped (values
    present but not listed follow, sorted).
    """
    present = list(dict.fromkeys(curves[hue]))
    order = [h for h in (hue_order or []) if h in present] + sorted(h for h in present if h not in (hue_order or []))
    attrs = curves.attrs
    window = attrs.get("smooth_window", 1)
    fill = {"heldout_puzzles": attrs.get("heldout_puzzles", "?"),
            "window": f"; {window}-step mean" if window > 1 else ""}
    panels = {c: label.format(**fill) for c, label in LEARNING_CURVE_PANELS.items() if c in curves}
    start = curves.loc[curves["step"] == 0, "accuracy"].dropna() if "accuracy" in curves else pd.Series(dtype=float)
    colors = dict(zip(order, sns.color_palette(n_colors=len(order))))
    fig, axes = plt.subplots(len(panels), len(order), figsize=(2.5 * len(order) + 0.8, 2.0 * len(panels) + 0.9),
                             squeeze=False, sharex=True, sharey="row")
    for r, (column, label) in enumerate(panels.items()):
        sub = curves.dropna(subset=[column])
        means = {arm: sub[sub[hue] == arm].groupby("step")[column].mean() for arm in order}
        few = sub["step"].nunique() < 15
        for c, arm in enumerate(order):
            ax = axes[r][c]
            for other, m in means.items():
                if other != arm and len(m):
                    ax.plot(m.index, m.values, color="0.82", lw=1, zorder=1)
            for _, run in sub[sub[hue] == arm].groupby("run"):
                ax.plot(run["step"], run[column], color=colors[arm], lw=0.7, alpha=0.35, zorder=2)
            m = means[arm]
            ax.plot(m.index, m.values, color=colors[arm], lw=2, marker="o" if few else None, markersize=3.5,
                    zorder=3)
            if column == "accuracy" and len(start):
                ax.axhline(float(start.iloc[0]), color="gray", ls="--", lw=1, zorder=0)
            ax.grid(alpha=0.3)
            if r == 0:
                seeds = curves.loc[curves[hue] == arm, "seed"].nunique()
                ax.set_title(f"{arm}\n({seeds} seed{'s' * (seeds != 1)})", fontsize=9)
            if c == 0:
                ax.set_ylabel(label, fontsize=9)
            if r == len(panels) - 1:
                ax.set_xlabel("training step")
    caption = ("thin: one seed each; bold: their mean; grey: the other arms' means; dashed: the base model on the "
               "same puzzles")
    if attrs.get("final_puzzles"):
        caption += f"; the verdicts rest on the final evaluation of all {attrs['final_puzzles']} held-out puzzles"
    caption = textwrap.fill(caption, width=max(70, 34 * len(order)))  # within the figure's width
    fig.suptitle(f"{title}\n{caption}" if title else caption, fontsize=10)
    fig.tight_layout()
    return fig


def success_rate_histogram(rates: pd.DataFrame, *, samples_per_prompt: int, temperature: float = 1.0) -> plt.Figure:
    """Histogram of per-puzzle success rates (:func:`dgro_lib.evaluate.sampled_success_by_people`: columns people,
    success_rate), one dodged bar colour per people count, 9 bins over [0, 1]."""
    fig, ax = plt.subplots(figsize=(6, 3.2))
    sns.histplot(rates, x="success_rate", hue="people", multiple="dodge", bins=9, binrange=(0, 1), ax=ax,
                 shrink=0.8)
    ax.set_xlabel(f"per-puzzle success rate over {samples_per_prompt} samples (T={temperature:g})")
    return fig


def learning_curves(result, *, by: str, smooth_window: int = 1) -> pd.DataFrame:
    """Long table (run, seed, ``by``, step) of held-out accuracy, training accuracy, length and entropy.

    Held-out accuracy is measured on one set of puzzles at every step: the periodic evaluations use the
    first ``train.eval_subset`` held-out puzzles, so the base model (step 0) and the final full-set evaluation
    are restricted to those same puzzles here (their per-puzzle results are stored); the full-set numbers are
    what :func:`dgro_lib.evaluate.paired_improvement_table` tests. ``curves.attrs["heldout_puzzles"]`` is that
    count, ``attrs["final_puzzles"]`` the size of the final evaluation and ``attrs["smooth_window"]`` the window.
    Per-step training metrics are smoothed within each run with a centred window of ``smooth_window`` steps.
    """
    keys = ["run", "seed", by, "step"]
    outcome = {c: "train_accuracy" for c in result.metrics.columns if c.endswith("_outcome/correct")
               and c.count("/") == 1}  # the task's
    m = result.metrics.rename(columns={**outcome, "completions/mean_length": "response_length"})
    m = smooth(m, ["train_accuracy", "response_length", "entropy"], smooth_window, by=["run"])
    h = result.heldout
    base_correct = result.base["correct"]
    n = int(h["subset"].min()) if not h.empty and "subset" in h else len(base_correct)
    start = m.drop_duplicates("run")[["run", "seed", by]].assign(step=0, accuracy=_mean(base_correct[:n]))
    if not h.empty:
        h = h.copy()
        finals = {} if result.finals.empty else dict(zip(result.finals["run"], result.finals["correct"]))
        wide = h["subset"] > n  # a final full-set row: the same puzzles as the others, from its stored answers
        h.loc[wide, "accuracy"] = [_mean(finals[r][:n]) for r in h.loc[wide, "run"]]
    heldout = pd.concat([start, h[keys + ["accuracy"]]], ignore_index=True) if not h.empty else start
    curves = heldout[keys + ["accuracy"]].merge(
        m[keys + ["train_accuracy", "response_length", "entropy"]], on=keys, how="outer"
    ).sort_values(keys, ignore_index=True)
    curves.attrs["heldout_puzzles"] = n
    curves.attrs["smooth_window"] = smooth_window
    if not result.finals.empty and "correct" in result.finals:
        curves.attrs["final_puzzles"] = int(result.finals["correct"].map(len).max())
    return curves


def _mean(scores) -> float:
    """The mean of per-puzzle scores: 0/1 flags (greedy) or fractions of correct samples (sampled avg@k)."""
    return float(np.mean(np.asarray(scores, dtype=float))) if len(scores) else float("nan")


def rl_map_figure(table: pd.DataFrame, *, title: str) -> plt.Figure:
    """The RL map (:func:`dgro_lib.analysis.probes.rl_map_table`): change in greedy and in sampled held-out accuracy per
    point (percentage points vs the base), each bar labelled with its pooled z."""
    long = pd.concat([
        pd.DataFrame({"point": table["point"], "metric": metric, "delta_points": table[f"{metric}_delta_points"],
                      "z": table[f"{metric}_z"]}) for metric in ("greedy", "sampled")], ignore_index=True)
    fig, ax = plt.subplots(figsize=(12, 0.6 * len(table) + 1.8))
    sns.barplot(long, y="point", x="delta_points", hue="metric", ax=ax, orient="h")
    for container, metric in zip(ax.containers, ("greedy", "sampled")):
        zs = long[long["metric"] == metric]["z"].tolist()
        ax.bar_label(container, labels=[f"z={z:+.1f}" for z in zs], fontsize=8, padding=3)
    ax.axvline(0, color="black", linewidth=0.8)
    ax.margins(x=0.15)  # room for the z labels at both ends
    sns.move_legend(ax, "upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)  # outside: bars fill the axes
    ax.set_xlabel("held-out accuracy change vs the base (points)")
    ax.set_ylabel("")
    ax.set_title(title)
    fig.tight_layout()
    return fig


def soft_value_figure(sweep: pd.DataFrame) -> plt.Figure:
    """DGRO Section 3.1: the error V − r̄ of the mean-reward baseline against β, one panel per reward
    distribution (:func:`dgro_lib.analysis.theory.value_sweep`), with the upper bounds of Theorem 3.3, Theorem E.1 and
    Hoeffding's lemma, and the β → 0 limit m − r̄ of Lemma 3.2."""
    names = list(dict.fromkeys(sweep["problem"]))
    fig, axes = plt.subplots(1, len(names), figsize=(4.6 * len(names), 3.8), squeeze=False)
    styles = {"error": ("V − r̄ (exact)", "black", "-"), "bound_thm33": ("Theorem 3.3 bound", "tab:blue", "--"),
              "bound_e1": ("Theorem E.1 'bound' Var/2β", "tab:red", ":"),
              "bound_hoeffding": ("Hoeffding (max−min)²/8β", "tab:green", "-.")}
    for ax, name in zip(axes[0], names):
        d = sweep[sweep["problem"] == name].sort_values("beta")
        for col, (label, color, ls) in styles.items():
            ax.plot(d["beta"], d[col], label=label, color=color, linestyle=ls)
        ax.axhline(d["limit_beta0"].iloc[0], color="grey", linewidth=0.8, label="m − r̄ (β → 0 limit)")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_ylim(max(d["error"].min() * 0.3, 1e-6), d["limit_beta0"].iloc[0] * 30)
        ax.set_xlabel("β (= 2β2/β1)")
        ax.set_title(str(name), fontsize=10)
    axes[0][0].set_ylabel("approximation error")
    axes[0][-1].legend(fontsize=7, loc="lower left")
    fig.tight_layout()
    return fig


def gradient_bounds_figure(cases: pd.DataFrame, variance: pd.DataFrame) -> plt.Figure:
    """DGRO Theorem 3.4 on an enumerable softmax policy (:func:`dgro_lib.analysis.theory.theorem34_sweep` and
    :func:`~dgro_lib.analysis.theory.variance_sweep`): (a) ‖PG‖ against its bound, (b) ‖Normaliser‖ against its bound, both
    with the line measured = bound; (c) ‖PG‖ and its bound against the reward variance as the reward range grows."""
    fig, axes = plt.subplots(1, 3, figsize=(14, 4))
    for ax, (norm, bound, title) in zip(axes[:2], (("pg_norm", "pg_bound", "(a) ‖PG‖ vs (4r_max+2)Nβ1γVar^1/3"),
                                                  ("normaliser_norm", "normaliser_bound", "(b) ‖Normaliser‖ vs 4Nηβ2γ"))):
        d = cases[(cases[norm] > 1e-12) & (cases[bound] > 0)]  # zero-variance rewards: a zero gradient up to rounding
        sns.scatterplot(d, x=bound, y=norm, hue="reward_kind", s=12, ax=ax, alpha=0.6)
        lo, hi = min(d[bound].min(), d[norm].min()), max(d[bound].max(), d[norm].max())
        ax.plot([lo, hi], [lo, hi], color="black", linewidth=0.8, label="measured = bound")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("bound")
        ax.set_ylabel("measured norm")
        ax.set_title(title, fontsize=10)
        ax.legend(fontsize=7)
    ax = axes[2]
    ax.plot(variance["variance"], variance["pg_norm"], "o-", color="black", label="‖PG‖ (exact)")
    ax.plot(variance["variance"], variance["pg_bound"], "s--", color="tab:blue", label="Eq. 11 bound")
    ax.plot(variance["variance"], variance["pg_bound_mad"], "^:", color="tab:green", label="2Nβ1γ E|r − r̄|")
    for row in variance.itertuples():
        ax.annotate(row.reward_range, (row.variance, row.pg_norm), fontsize=7, xytext=(3, -10),
                    textcoords="offset points")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("reward variance under π_old")
    ax.set_ylabel("norm")
    ax.set_title("(c) ‖PG‖ as the reward range grows", fontsize=10)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def kk_size_figure(long: pd.DataFrame, *, title: str | None = None, protocol: str) -> plt.Figure:
    """DGRO Table 2 as bars: pass@1 per people count (x, the table's column order), one bar per model, the seed
    s.d. as an error bar; sizes outside the models' training data shaded. ``long``:
    :func:`~dgro_lib.analysis.probes.kk_size_table`'s first table; ``protocol`` names how pass@1 was read (the
    y label: "greedy", "sampled, T = 1, avg@2")."""
    sizes = list(dict.fromkeys(long["people"]))
    models = list(dict.fromkeys(long["model"]))
    fig, ax = plt.subplots(figsize=(1.2 * len(sizes) + 3, 3.8))
    width = 0.8 / len(models)
    for i, model in enumerate(models):
        d = long[long["model"] == model].set_index("people").reindex(sizes)
        xs = [j + (i - (len(models) - 1) / 2) * width for j in range(len(sizes))]
        ax.bar(xs, d["pass@1"], width, yerr=d["std"], capsize=2, label=model,
               color=sns.color_palette()[i % 10])
    trained = long.groupby("people")["in_training"].any()
    for j, people in enumerate(sizes):
        if not trained[people]:
            ax.axvspan(j - 0.45, j + 0.45, color="0.92", zorder=0)
    ax.set_xticks(range(len(sizes)), [f"{p}" + ("" if trained[p] else "\n(OOD)") for p in sizes])
    ax.set_xlabel("people in the puzzle")
    ax.set_ylabel(f"pass@1 ({protocol})")
    ax.set_ylim(0, 1)
    ax.legend(frameon=False, fontsize=8)
    if title:
        ax.set_title(title, fontsize=9)
    fig.tight_layout()
    return fig


def grad_ratio_figure(metrics: pd.DataFrame, *, hue: str = "point", hue_order: Sequence[str] | None = None
                      ) -> tuple[plt.Figure, pd.DataFrame]:
    """Whether β2 acted: the DGRO loss's logged ‖β2 term‖ / ‖β1 term‖ (``dgro/grad_ratio_b2_b1``, gradient norms
    with respect to the log-probabilities) per update, one line per ``hue`` value. Returns the figure and the
    table it is drawn from (run, seed, ``hue``, step, grad_ratio_b2_b1)."""
    ratio = metrics[["run", "seed", hue, "step", "dgro/grad_ratio_b2_b1"]].rename(
        columns={"dgro/grad_ratio_b2_b1": "grad_ratio_b2_b1"})
    fig = training_curves(ratio, {"grad_ratio_b2_b1": "‖β2 term‖ / ‖β1 term‖ (per update)"}, hue=hue,
                          hue_order=hue_order)
    return fig, ratio


VERDICT_COLORS = {"reproduced": "#1b7837", "contradicted": "#b2182b", "inconclusive": "#737373",
                  "not testable at this scale": "#bdbdbd", "estimate": "#4d4d4d"}


def wrap_label(text: str, width: int = 48) -> str:
    """``text`` wrapped onto lines of at most ``width`` characters, whole: a claim's head names the comparison and its
    tail the metric (greedy / sampled twins differ only there), so no part of it is cut."""
    return "\n".join(textwrap.wrap(str(text), width=width, break_long_words=False)) or str(text)


TESTED = ("higher", "lower", "equal", "at most")


def verdict_figure(finals: pd.DataFrame, claims: pd.DataFrame, *, by: str, value: str = "accuracy",
                   level_metric: str = "greedy accuracy", order: Sequence[str] | None = None, title: str = "",
                   base: float | None = None) -> tuple[plt.Figure, pd.DataFrame]:
    """The figure of a notebook's verdicts. Left: the final ``value`` of every run as a dot per seed, per arm
    (``by``), with the arm's mean and 95 % interval (the claims' ``"<arm>: <level_metric>"`` rows). Right: every
    tested claim (:func:`dgro_lib.report.claims.write_claims`'s table), one panel per unit (points, nats/token,
    tokens, minutes, ...), as its estimate with the 95 % interval, coloured by verdict, the paper's direction and the
    claim's source beside it; labels are wrapped, never cut. ``base``: the base model's ``value`` (a dashed line on
    the left). Returns the figure and the data drawn (runs, levels and claims, one ``kind`` each) for
    :func:`save_figure`."""
    arms = list(order) if order is not None else list(dict.fromkeys(finals[by]))
    runs = finals[[by, "seed", value]].rename(columns={by: "arm"}).assign(kind="run", value=lambda d: 100 * d[value])
    lv = claims.set_index("claim")
    levels = pd.DataFrame([{"arm": a, "kind": "level", "value": 100 * lv.loc[f"{a}: {level_metric}", "value"],
                            "ci_low": 100 * lv.loc[f"{a}: {level_metric}", "ci_low"],
                            "ci_high": 100 * lv.loc[f"{a}: {level_metric}", "ci_high"]}
                           for a in arms if f"{a}: {level_metric}" in lv.index])
    tests = claims[claims["direction"].isin(TESTED)].assign(kind="claim")
    keep = ["claim", "kind", "unit", "value", "ci_low", "ci_high", "verdict", "direction", "margin"]
    tests = tests[keep + (["source"] if "source" in tests else [])]
    units = list(dict.fromkeys(tests["unit"].fillna("")))
    labels = {c: wrap_label(c) for c in tests["claim"]}
    heights = [sum(labels[c].count("\n") + 1.4 for c in tests.loc[tests["unit"].fillna("") == u, "claim"]) + 1.6
               for u in units] or [4.0]
    fig = plt.figure(figsize=(15, max(4.0, 0.2 * sum(heights) + 1.0)))
    grid = fig.add_gridspec(len(heights), 2, width_ratios=[1, 1.7], height_ratios=heights)
    ax1 = fig.add_subplot(grid[:, 0])
    for i, a in enumerate(arms):
        r = runs[runs["arm"] == a]
        ax1.scatter(i + 0.12 * (r["seed"].rank().to_numpy() - (len(r) + 1) / 2) / max(len(r), 1), r["value"],
                    color="#4393c3", s=28, zorder=3, label="one run (seed)" if i == 0 else None)
        if not levels.empty and a in set(levels["arm"]):
            m = levels[levels["arm"] == a].iloc[0]
            ax1.errorbar(i + 0.3, m["value"], yerr=[[m["value"] - m["ci_low"]], [m["ci_high"] - m["value"]]],
                         fmt="D", color="black", capsize=4, label="mean, 95 % CI" if i == 0 else None)
    if base is not None:
        ax1.axhline(100 * base, color="#888888", ls="--", lw=1, label="base model")
    ax1.set_xticks(range(len(arms)), [wrap_label(a, 22) for a in arms], rotation=30, ha="right")
    ax1.set_ylabel(f"final {level_metric} (%)")
    ax1.legend(fontsize=8, loc="best")
    ax1.set_title("per run, and per arm")
    for row, unit in enumerate(units):
        ax = fig.add_subplot(grid[row, 1])
        sub = tests[tests["unit"].fillna("") == unit]
        y = list(range(len(sub)))[::-1]
        for yi, r in zip(y, sub.itertuples()):
            ax.errorbar(r.value, yi, xerr=[[r.value - r.ci_low], [r.ci_high - r.value]], fmt="o",
                        color=VERDICT_COLORS.get(r.verdict, "black"), capsize=3)
            mark = {"higher": "paper > 0", "lower": "paper < 0", "equal": f"paper ≈ 0 (±{r.margin:g})",
                    "at most": f"paper ≤ {r.margin:g}"}[r.direction]
            if getattr(r, "source", "paper") == "project":
                mark = "project check: " + mark[len("paper "):]
            ax.annotate(f"{mark}: {r.verdict}", (1.01, yi), xycoords=("axes fraction", "data"), fontsize=7,
                        va="center", color=VERDICT_COLORS.get(r.verdict, "black"), annotation_clip=False)
            if r.direction in ("equal", "at most"):
                for bound in ((-r.margin, r.margin) if r.direction == "equal" else (r.margin,)):
                    ax.plot([bound, bound], [yi - 0.35, yi + 0.35], color="#888888", lw=1, ls=":")
        ax.axvline(0, color="black", lw=0.8)
        ax.set_yticks(y, [labels[c] for c in sub["claim"]], fontsize=7)
        ax.set_ylim(-0.7, len(sub) - 0.3)
        ax.set_xlabel(f"estimate, {unit or 'no unit'} (95 % CI; verdicts after Holm)", fontsize=8)
        if row == 0:
            ax.set_title("the claims tested")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig, pd.concat([runs.drop(columns=[value]), levels, tests], ignore_index=True)
