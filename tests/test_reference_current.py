"""The committed cpu references are current: each was saved from the runs its params file names today. A params
change (more seeds, another recipe) without a re-saved reference would make `make reproduce` compare a rerun with
an older experiment; a notebook that reads another notebook's runs (DGRO Fig. 4 reads Fig. 1's K&K runs) goes stale
when that other params file changes."""

import pandas as pd
import pytest

from dgro_lib.config import apply_overrides, expand_sweep, find_params, load_config
from dgro_lib.runs.store import run_key
from dgro_lib.util.paths import REPO

CPU = REPO / "reference" / "cpu"


@pytest.mark.parametrize("notebook", sorted(p.parent.name for p in CPU.glob("*/runs.csv")))
def test_a_reference_lists_the_runs_its_params_name(notebook):
    listed = set(pd.read_csv(CPU / notebook / "runs.csv", dtype={"key": str})["key"])
    named = {run_key(c, s) for _, s, c in expand_sweep(load_config(find_params(notebook, "cpu")))}
    assert listed == named, (f"{notebook}: the reference lists {len(listed - named)} run(s) the params no longer "
                             f"name and lacks {len(named - listed)}: re-save it (make reproduce ONLY={notebook} "
                             f"with --save-reference)")


def test_fig4s_reference_reads_every_kk_run_fig1_names():
    cfg = load_config(find_params("dgro_fig4_math_entropy", "cpu"))
    kk = apply_overrides(load_config(find_params(cfg.knobs.kk_params, "cpu")), {"sweep": cfg.knobs.kk_sweep})
    trend = pd.read_csv(CPU / "dgro_fig4_math_entropy" / "fig4_entropy_trend.csv")
    assert sorted(trend.loc[trend["task"] == "K&K", "seed"]) == sorted(s for _, s, _ in expand_sweep(kk)), (
        "Fig. 1's K&K seeds changed since Fig. 4's reference was saved: re-save dgro_fig4_math_entropy's")
    assert sorted(trend.loc[trend["task"] == "math", "seed"]) == sorted(s for _, s, _ in expand_sweep(cfg))
