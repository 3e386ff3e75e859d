"""learning_curves: the held-out curve is on one set of puzzles at every step."""

from pathlib import Path

import pandas as pd

from dgro_lib.runs.experiment import ExperimentResult
from dgro_lib.analysis.plots import learning_curves


def test_heldout_curve_uses_the_periodic_subset_at_step_0_and_at_the_end():
    base_correct = [True, False, False, False] + [True] * 6  # 25 % on the first 4, 70 % on all 10
    final_correct = [True, True, True, False] + [False] * 6  # 75 % on the first 4, 30 % on all 10
    metrics = pd.DataFrame({"step": [1, 2, 3, 4], "kk_outcome/correct": [0.1, 0.2, 0.3, 0.4],
                            "completions/mean_length": [9.0] * 4, "entropy": [0.5] * 4})
    metrics = metrics.assign(run="r", seed=0, scheme="[-1,1]")
    heldout = pd.DataFrame({"step": [2, 4], "subset": [4, 10], "accuracy": [0.5, 0.3]}).assign(
        run="r", seed=0, scheme="[-1,1]")
    finals = pd.DataFrame([{"run": "r", "seed": 0, "scheme": "[-1,1]", "accuracy": 0.3, "correct": final_correct}])
    result = ExperimentResult(metrics=metrics, heldout=heldout, finals=finals,
                              base={"summary": {"accuracy": 0.7}, "correct": base_correct}, out_dir=Path("."))
    curves = learning_curves(result, by="scheme")
    acc = curves.dropna(subset=["accuracy"]).set_index("step")["accuracy"]
    assert acc.to_dict() == {0: 0.25, 2: 0.5, 4: 0.75}
    assert curves.attrs["heldout_puzzles"] == 4
    assert curves.set_index("step").loc[3, "train_accuracy"] == 0.3


def _curves():
    rows = []
    for scheme, acc in (("[-5,5]", 0.6), ("[-1,1]", 0.4)):
        for seed in (0, 1):
            rows += [{"run": f"{scheme}{seed}", "seed": seed, "scheme": scheme, "step": 0, "accuracy": 0.25},
                     {"run": f"{scheme}{seed}", "seed": seed, "scheme": scheme, "step": 2, "accuracy": acc,
                      "train_accuracy": acc, "response_length": 9.0, "entropy": 0.5}]
    curves = pd.DataFrame(rows)
    curves.attrs["heldout_puzzles"] = 4
    return curves


def test_learning_curves_figure_small_multiples_seed_lines_baseline_and_order():
    from dgro_lib.analysis.plots import learning_curves_figure

    curves = _curves()
    curves.attrs.update(smooth_window=3, final_puzzles=1200)
    fig = learning_curves_figure(curves, hue="scheme", hue_order=["[-1,1]", "[-3,3]", "[-5,5]"], title="t")
    axes = [fig.axes[i:i + 2] for i in range(0, 8, 2)]  # 4 panel rows x 2 arm columns
    assert len(fig.axes) == 8
    assert [row[0].get_ylabel() for row in axes] == [
        "held-out greedy accuracy\n(4 puzzles, the same\nat every point)",
        "training accuracy\n(sampled rollouts; 3-step mean)", "response length\n(tokens; 3-step mean)",
        "entropy\n(nats/token; 3-step mean)"]
    # the preferred order, absent "[-3,3]" skipped; each column says its seeds
    assert [ax.get_title() for ax in axes[0]] == ["[-1,1]\n(2 seeds)", "[-5,5]\n(2 seeds)"]
    for r, row in enumerate(axes):
        for ax in row:
            dashed = [line for line in ax.get_lines() if line.get_linestyle() == "--"]
            if r == 0:  # the base model, at step 0, in every held-out cell only
                assert len(dashed) == 1 and list(dashed[0].get_ydata()) == [0.25, 0.25]
            else:
                assert not dashed
    # held-out cell of [-5,5]: 1 grey line (the other arm's mean), 2 thin seed lines, 1 bold mean at 0.6
    solid = [line for line in axes[0][1].get_lines() if line.get_linestyle() == "-"]
    assert [line.get_linewidth() for line in solid] == [1, 0.7, 0.7, 2]
    assert list(solid[-1].get_ydata()) == [0.25, 0.6] and list(solid[0].get_ydata()) == [0.25, 0.4]
    assert fig._suptitle.get_text().startswith("t\nthin: one seed each")
    assert "all 1200 held-out puzzles" in " ".join(fig._suptitle.get_text().split())


def test_success_rate_histogram_counts_every_puzzle():
    from dgro_lib.analysis.plots import success_rate_histogram

    rates = pd.DataFrame({"people": [2, 2, 2, 3, 3], "success_rate": [0.0, 0.5, 1.0, 0.0, 0.0]})
    fig = success_rate_histogram(rates, samples_per_prompt=2)
    ax = fig.axes[0]
    heights = [p.get_height() for p in ax.patches if p.get_height() > 0]
    assert sum(heights) == 5 and sorted(heights) == [1, 1, 1, 2]  # 3 people: both at rate 0, in one bar
    assert ax.get_xlabel() == "per-puzzle success rate over 2 samples (T=1)"
    assert ax.get_xlim()[0] <= 0 and ax.get_xlim()[1] >= 1


def test_wrap_label_keeps_every_word_so_metric_twins_stay_distinct():
    from dgro_lib.analysis.plots import wrap_label

    head = "smaller beta2 is better at beta1 = 1: beta1=1.0, beta2=0.01 - beta1=1.0, beta2=1.0"
    greedy, sampled = wrap_label(head + " (points)"), wrap_label(head + ": sampled (points)")
    assert greedy.replace("\n", " ") == head + " (points)" and sampled.replace("\n", " ") == head + ": sampled (points)"
    assert max(len(line) for line in greedy.split("\n")) <= 48 and greedy != sampled
    assert wrap_label("short claim (points)") == "short claim (points)"


def test_the_verdict_figure_draws_every_tested_claim_one_panel_per_unit():
    from dgro_lib.analysis.plots import verdict_figure
    from dgro_lib.report.claims import write_claims
    from dgro_lib.report.inference import compare

    import numpy as np
    import tempfile
    from dgro_lib.report.claims import claim

    rng = np.random.default_rng(0)
    a, b = rng.normal(5, 1, 6), rng.normal(3, 1, 6)
    rows = [claim("A - B: accuracy (points)", compare(a, b, scale=1.0), metric="acc", direction="higher"),
            claim("A - B: length (tokens)", compare(a, b, scale=1.0), metric="len", unit="tokens", direction="at most", margin=9.0),
            claim("A: entropy change (nats/token)", compare(a - 5, scale=1.0), metric="ent", unit="nats/token",
                  direction="lower",
                  source="project"),
            claim("A: a level", compare(a, scale=1.0), metric="acc", unit="points")]
    with tempfile.TemporaryDirectory() as tmp:
        table = write_claims(tmp, rows)
    finals = pd.DataFrame({"point": ["A"] * 6 + ["B"] * 6, "seed": list(range(6)) * 2,
                           "accuracy": np.r_[a, b] / 100})
    fig, drawn = verdict_figure(finals, table, by="point")
    claims_drawn = drawn[drawn["kind"] == "claim"]
    assert set(claims_drawn["claim"]) == {r["claim"] for r in rows[:3]}  # the estimate is not a test
    assert len(fig.axes) == 1 + 3  # the runs, then one panel per unit
    ticks = [t.get_text() for ax in fig.axes[1:] for t in ax.get_yticklabels()]
    assert "A - B: length (tokens)" in [t.replace("\n", " ") for t in ticks]
