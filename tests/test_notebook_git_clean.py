"""Stepping through a notebook leaves ``git status`` clean: git keeps only ``notebooks/<name>.py``; the ``.ipynb``
working copy that JupyterLab runs and saves (with its outputs) is ignored, and the paired ``.py`` that jupytext
rewrites on save comes out byte-identical. Checked on a copy of the repository's files committed to a new git
repository, through the same server JupyterLab talks to: the notebooks are written from their sources (``make
notebooks``), a Jupyter server (with the jupytext extension JupyterLab loads) is started on the copy, the notebook is
opened through its contents API, executed at the ``ci`` profile as Run All does, and saved back through the same API,
as JupyterLab's save does; then ``git status`` must be empty."""

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request

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
    port = _free_port()
    server = subprocess.Popen([sys.executable, "-m", "jupyter_server", "--no-browser", f"--port={port}", "--allow-root",
                               "--IdentityProvider.token=t", f"--ServerApp.root_dir={clone / 'notebooks'}"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=os.environ.copy())
    try:
        url = f"http://127.0.0.1:{port}/api/contents/dgro_theory.ipynb?token=t"
        model = _request(url, wait=60)  # the notebook as JupyterLab opens it
        nb = nbformat.from_dict(model["content"])
        NotebookClient(nb, kernel_name="python3", resources={"metadata": {"path": str(clone / "notebooks")}}).execute()
        assert any(c.get("outputs") for c in nb.cells)  # it ran
        _request(url, data={"type": "notebook", "format": "json", "content": nb})  # JupyterLab's save
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert (clone / "notebooks" / "dgro_theory.ipynb").stat().st_size > 10_000  # the outputs were saved
    assert _git(clone, "status", "--porcelain") == ""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _request(url: str, data: dict | None = None, wait: float = 0.0) -> dict:
    """GET (or PUT ``data`` to) the server's ``url``, retrying for ``wait`` seconds while it starts."""
    deadline = time.monotonic() + wait
    while True:
        req = urllib.request.Request(url, method="PUT" if data is not None else "GET",
                                     data=None if data is None else json.dumps(data).encode(),
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return json.loads(r.read())
        except (urllib.error.URLError, ConnectionError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
