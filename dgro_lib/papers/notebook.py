"""The notebooks' façade: the three things every paper notebook does around its own computation, one call each.

* :func:`open_notebook` — the params file of a notebook and profile, loaded and checked, and its output folder;
* :func:`show_claims` — the claims judged and written to ``claims.csv``, their verdicts printed, the table shown;
* :func:`draw_verdicts` — the verdict figure drawn and saved as PNG beside the CSV it was drawn from.

A notebook's own cells then hold only what differs between notebooks: its sweep, its tables and its claims
(``papers/<notebook>.py``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import pandas as pd

from dgro_lib.analysis.plots import save_figure, verdict_figure
from dgro_lib.config import find_params, load_config
from dgro_lib.config.schema import ExperimentConfig
from dgro_lib.report.claims import claims_view, format_claims, write_claims

__all__ = ["open_notebook", "show_claims", "draw_verdicts"]


def open_notebook(name: str, profile: str, output_dir: str | Path | None = None) -> tuple[ExperimentConfig, Path]:
    """(config, output folder) of notebook ``name`` at ``profile``: ``params/<profile>/<name>.yaml`` loaded strictly
    (an error names the file and key), and ``output_dir`` or ``../outputs/<profile>/<name>`` (relative to the
    notebooks folder, where papermill runs a notebook)."""
    cfg = load_config(find_params(name, profile))
    return cfg, Path(output_dir or f"../outputs/{profile}/{name}")


def show_claims(out: str | Path, rows: Sequence[dict]) -> pd.DataFrame:
    """Judge ``rows`` (a notebook's claims, from ``papers/<notebook>.claims``), write ``out/claims.csv``, print one
    verdict line per claim and show the table's columns a reader needs; returns the whole table (for
    :func:`draw_verdicts`)."""
    table = write_claims(out, rows)
    print(format_claims(table, verdicts_only=True))
    _display(claims_view(table))
    return table


def draw_verdicts(stem: str | Path, finals: pd.DataFrame, table: pd.DataFrame, **kwargs):
    """The verdict figure (:func:`~dgro_lib.analysis.plots.verdict_figure`, ``kwargs`` passed on) of ``finals`` (one
    row per run) and the claims ``table``, saved as ``<stem>.png`` beside ``<stem>.csv``; returns the figure."""
    fig, drawn = verdict_figure(finals, table, **kwargs)
    save_figure(fig, drawn, stem)
    return fig


def _display(obj) -> None:
    try:
        from IPython.display import display
    except ImportError:  # outside Jupyter: the plain text form
        print(obj)
    else:
        display(obj)
