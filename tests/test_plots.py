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
