"""The notebooks' one source in git: ``notebooks/<name>.py`` (jupytext ``py:percent``).

The ``.ipynb`` beside each source is a local working copy that git ignores. ``make notebooks`` (run by ``make
venv`` and ``make test``; ``python -m dgro_lib.util.notebooks``) writes the copies that are missing and brings
the inputs of those older than their source up to date, keeping their outputs (``jupytext --sync``). In
JupyterLab the pair stays in step: saving a notebook rewrites its ``.py`` (unchanged unless a cell was edited),
and its outputs stay in the ignored ``.ipynb``, so stepping through a notebook leaves ``git status`` clean.
Executed notebooks that the project keeps live under ``outputs/`` and ``reference/``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from dgro_lib.util.paths import NOTEBOOKS

__all__ = ["notebook_names", "notebook_source", "read_notebook", "sync_notebooks"]


def notebook_names(folder: Path = NOTEBOOKS) -> list[str]:
    """Notebook names in run order (``00_*`` first: later notebooks reuse the base model it builds)."""
    return sorted(p.stem for p in folder.glob("*.py"))


def notebook_source(name: str, folder: Path = NOTEBOOKS) -> Path:
    """``<folder>/<name>.py``; a name without a source is a FileNotFoundError listing the notebooks."""
    path = folder / f"{name}.py"
    if not path.is_file():
        raise FileNotFoundError(f"no notebook source {path} (notebooks: {', '.join(notebook_names(folder))})")
    return path


def read_notebook(name: str, folder: Path = NOTEBOOKS):
    """Notebook ``name`` read from its source (an ``nbformat.NotebookNode`` without outputs): what papermill runs,
    whatever a local ``.ipynb`` holds."""
    import jupytext

    return jupytext.read(notebook_source(name, folder))


def _inputs(nb) -> list[tuple[str, str, list]]:
    return [(c.cell_type, c.source, list(c.get("metadata", {}).get("tags", []))) for c in nb.cells]


def sync_notebooks(folder: Path = NOTEBOOKS, *, quiet: bool = True) -> list[Path]:
    """Write every missing ``<name>.ipynb`` of ``folder`` from its source and bring the inputs of those whose cells
    differ from it up to date (outputs kept; ``jupytext --sync``); returns the notebooks written."""
    import jupytext
    from jupytext.cli import jupytext as jupytext_cli

    written = []
    for name in notebook_names(folder):
        py, ipynb = folder / f"{name}.py", folder / f"{name}.ipynb"
        if ipynb.exists() and _inputs(jupytext.read(py)) == _inputs(jupytext.read(ipynb)):
            continue  # (jupytext's timestamps are no guide: a sync leaves the .py the newer file)
        jupytext_cli(["--sync", *(["--quiet"] if quiet else []), str(py)])
        written.append(ipynb)
    return written


if __name__ == "__main__":
    done = sync_notebooks()
    print(f"[notebooks] {len(done)} of {len(notebook_names())} notebooks written from their .py sources"
          + (f": {', '.join(p.name for p in done)}" if done else " (all current)"), file=sys.stderr)
