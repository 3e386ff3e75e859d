"""learning_curves: the held-out curve is on one set of puzzles at every step."""

from pathlib import Path

import pandas as pd

from dgro_lib.experiment import ExperimentResult
from dgro_lib.plots import learning_curves


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


def test_learning_curves_figure_panels_baseline_and_order():
    from dgro_lib.plots import learning_curves_figure

    fig = learning_curves_figure(_curves(), hue="scheme", hue_order=["[-1,1]", "[-3,3]", "[-5,5]"], title="t")
    axes = fig.axes
    assert [ax.get_ylabel() for ax in axes] == ["held-out greedy accuracy (first 4 puzzles)",
                                                "training accuracy (sampled)", "response length (tokens)",
                                                "entropy (nats/token)"]
    dashed = [line for line in axes[0].get_lines() if line.get_linestyle() == "--"]
    assert len(dashed) == 1 and list(dashed[0].get_ydata()) == [0.25, 0.25]  # the base model, at step 0
    assert not any(line.get_linestyle() == "--" for ax in axes[1:] for line in ax.get_lines())
    labels = [t.get_text() for t in axes[0].get_legend().get_texts()]
    assert labels[:2] == ["[-1,1]", "[-5,5]"]  # the preferred order, absent "[-3,3]" skipped
    assert fig._suptitle.get_text() == "t"


def test_success_rate_histogram_counts_every_puzzle():
    from dgro_lib.plots import success_rate_histogram

    rates = pd.DataFrame({"people": [2, 2, 2, 3, 3], "success_rate": [0.0, 0.5, 1.0, 0.0, 0.0]})
    fig = success_rate_histogram(rates, samples_per_prompt=2)
    ax = fig.axes[0]
    heights = [p.get_height() for p in ax.patches if p.get_height() > 0]
    assert sum(heights) == 5 and sorted(heights) == [1, 1, 1, 2]  # 3 people: both at rate 0, in one bar
    assert ax.get_xlabel() == "per-puzzle success rate over 2 samples (T=1)"
    assert ax.get_xlim()[0] <= 0 and ax.get_xlim()[1] >= 1
