"""Every figure a notebook saves is shown in it: an ``image/png`` output per PNG it writes, when it runs under
papermill (the inline backend, no import-time backend switch) and in every committed reference notebook."""

import json
from pathlib import Path

import pytest

from dgro_lib.util.notebooks import read_notebook
from dgro_lib.util.paths import REPO

REFERENCE = REPO / "reference" / "cpu"


def _images(notebook: Path) -> int:
    cells = json.loads(notebook.read_text())["cells"]
    return sum("image/png" in out.get("data", {}) for c in cells for out in c.get("outputs", []))


def test_a_notebook_run_under_papermill_shows_every_figure_it_saves(tmp_path, monkeypatch):
    import papermill

    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    out = tmp_path / "outputs" / "ci" / "dgro_fig1_reward_variance"
    executed = tmp_path / "executed.ipynb"
    papermill.execute_notebook(read_notebook("dgro_fig1_reward_variance"), str(executed),
                               parameters={"profile": "ci", "output_dir": str(out), "workers": 1},
                               cwd=str(REPO / "notebooks"), progress_bar=False, kernel_name="python3")
    saved = sorted(out.glob("*.png"))
    assert len(saved) == 2  # Figure 1 and its verdicts
    assert _images(executed) == len(saved)


@pytest.mark.parametrize("folder", sorted(p.parent.name for p in REFERENCE.glob("*/*.ipynb")))
def test_every_reference_notebook_shows_the_figures_it_saved(folder):
    notebooks = list((REFERENCE / folder).glob("*.ipynb"))
    pngs = list((REFERENCE / folder).glob("*.png"))
    assert _images(notebooks[0]) >= len(pngs), (f"{folder}: {len(pngs)} PNG(s) saved, "
                                                f"{_images(notebooks[0])} shown in {notebooks[0].name}")
