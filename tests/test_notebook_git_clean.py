"""Stepping through a notebook leaves ``git status`` clean: git keeps only ``notebooks/<name>.py``; the ``.ipynb``
working copy that JupyterLab runs and saves (with its outputs) is ignored, and the paired ``.py`` that jupytext
rewrites on save comes out byte-identical. Checked on a copy of the repository's files committed to a new git
repository: the notebook is synced from its source (``make notebooks``), executed in place at the ``ci`` profile
as Run All does, saved, and the pair synced as jupytext's contents manager does on save."""

import os
import shutil
import subprocess
import sys

import nbformat
from nbclient import NotebookClient

from dgro_lib.util.paths import REPO


def _git(cwd, *args) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def test_run_all_and_save_leaves_git_status_clean(tmp_path, monkeypatch):
    clone = tmp_path / "clone"
    files = _git(REPO, "ls-files", "--cached", "--others", "--exclude-standard", "-z").split("\0")
    for rel in filter(None, files):
        src = REPO / rel
        if src.is_file():  # a file deleted from the working tree but still in the index is not copied
            (clone / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, clone / rel)
    _git(clone, "init", "-q")
    _git(clone, "add", "-A")
    _git(clone, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "copy")
    assert not list((clone / "notebooks").glob("*.ipynb")), "git must keep no .ipynb under notebooks/"

    monkeypatch.setenv("PYTHONPATH", str(clone))  # the kernel and the commands below import the copy's dgro_lib
    monkeypatch.setenv("DGRO_PROFILE", "ci")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    subprocess.run([sys.executable, "-m", "dgro_lib.util.notebooks"], cwd=clone, check=True, env=os.environ.copy())
    path = clone / "notebooks" / "dgro_theory.ipynb"
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}).execute()
    assert any(c.get("outputs") for c in nb.cells)  # it ran
    nbformat.write(nb, path)  # JupyterLab's save
    subprocess.run([sys.executable, "-m", "jupytext", "--sync", "--quiet", str(path)], check=True)  # the pairing
    assert _git(clone, "status", "--porcelain") == ""
