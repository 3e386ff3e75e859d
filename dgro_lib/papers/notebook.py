"""The notebooks' façade: the three things every paper notebook does around its own computation, one call each.

* :func:`open_notebook` — the params file of a notebook and profile, loaded and checked, and its output folder;
* :func:`show_claims` — the claims judged and written to ``claims.csv``, and the verdict table shown;
* :func:`draw_verdicts` — the verdict figure drawn and saved as PNG beside the CSV it was drawn from.

A notebook's own cells then hold only what differs between notebooks: its sweep, its tables and its claims
(``papers/<notebook>.py``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import pandas as pd

from dgro_lib.analysis.plots import save_figure, verdict_figure
from dgro_lib.config import expand_sweep, find_params, load_config
from dgro_lib.config.schema import ExperimentConfig
from dgro_lib.models.standins import standin_record
from dgro_lib.report.claims import claims_display, write_claims

__all__ = ["open_notebook", "model_label", "seeds_per_point", "arms_and_seeds", "show_claims", "verdict_table",
           "statement_table", "draw_verdicts"]


def open_notebook(name: str, profile: str, output_dir: str | Path | None = None) -> tuple[ExperimentConfig, Path]:
    """(config, output folder) of notebook ``name`` at ``profile``: ``params/<profile>/<name>.yaml`` loaded strictly
    (an error names the file and key), and ``output_dir`` or ``../outputs/<profile>/<name>`` (relative to the
    notebooks folder, where papermill runs a notebook)."""
    cfg = load_config(find_params(name, profile))
    return cfg, Path(output_dir or f"../outputs/{profile}/{name}")


def model_label(cfg: ExperimentConfig) -> str:
    """What a figure's title calls the base model of ``cfg``: "the embedded miniature", the hub id, a local folder's
    name, or for a rehearsal's stand-in (:mod:`dgro_lib.models.standins`) "a stand-in for <hub id>"."""
    path = cfg.model.path
    if path == "embedded":
        return "the embedded miniature"
    if (record := standin_record(path)) is not None:
        return f"a stand-in for {record['stands_in_for']}"
    return Path(path).name if Path(path).is_dir() else path


def seeds_per_point(cfg: ExperimentConfig) -> list[int]:
    """How many seeds each sweep point of ``cfg`` runs, in sweep order: the top-level ``seeds`` unless the point's
    sweep entry carries its own (a sweep key joined with ``seeds``), so a notebook says what it trains per arm."""
    counts: dict[str, int] = {}
    for point, _seed, _cfg in expand_sweep(cfg):
        key = repr(sorted(point.items()))
        counts[key] = counts.get(key, 0) + 1
    return list(counts.values())


def arms_and_seeds(labels: Sequence[str], cfg: ExperimentConfig) -> str:
    """``"label (seeds), ..."``: each arm's label beside its :func:`seeds_per_point`, the line a notebook prints
    before training. ``labels`` name the sweep points in order; a count that differs is an error naming both."""
    counts = seeds_per_point(cfg)
    if len(labels) != len(counts):
        raise ValueError(f"{cfg.name}: {len(labels)} labels {list(labels)!r} for {len(counts)} sweep points")
    return ", ".join(f"{a} ({n})" for a, n in zip(labels, counts))


def show_claims(out: str | Path, rows: Sequence[dict]) -> pd.DataFrame:
    """Judge ``rows`` (a notebook's claims, from ``papers/<notebook>.claims``), write ``out/claims.csv`` and show
    the verdict table a reader needs (:func:`~dgro_lib.report.claims.claims_display`: claim, paper direction,
    estimate [95 % CI], seeds, MDE, Holm p, verdict; the file keeps every column); returns the whole table (for
    :func:`draw_verdicts`)."""
    table = write_claims(out, rows)
    _display(verdict_table(table))
    return table


# the verdict cell's colour: a reader finds the contradicted rows at a glance
_VERDICT_COLOURS = {"reproduced": "#d9f2d9", "contradicted": "#f8d7d7", "inconclusive": "#eeeeee",
                    "not testable at this scale": "#fff3cd"}


def verdict_table(table: pd.DataFrame):
    """The claims ``table`` as a styled table for a notebook: every column of
    :func:`~dgro_lib.report.claims.claims_display`, no index, claims left-aligned and never cut, the verdict
    coloured. Its plain-text form (outside Jupyter) is the same table."""
    shown = claims_display(table)
    return _styled(shown, text=["claim"])


def statement_table(verdicts: pd.DataFrame) -> None:
    """Show the theory notebook's statements (``dgro_lib.analysis.theory.verdicts``: statement, verdict, evidence,
    counterexample) as one styled table, the verdict coloured."""
    _display(_styled(verdicts[["statement", "verdict", "evidence", "counterexample"]],
                     text=["statement", "evidence", "counterexample"]))


def _styled(frame: pd.DataFrame, *, text: Sequence[str]):
    colours = {**_VERDICT_COLOURS, "holds": _VERDICT_COLOURS["reproduced"], "fails": _VERDICT_COLOURS["contradicted"]}
    return (frame.style.hide(axis="index")
            .map(lambda v: f"background-color: {colours.get(v, 'transparent')}", subset=["verdict"])
            .set_properties(subset=list(text), **{"text-align": "left", "white-space": "normal"}))


def draw_verdicts(stem: str | Path, finals: pd.DataFrame, table: pd.DataFrame, **kwargs):
    """The verdict figure (:func:`~dgro_lib.analysis.plots.verdict_figure`, ``kwargs`` passed on) of ``finals`` (one
    row per run) and the claims ``table``, saved as ``<stem>.png`` beside ``<stem>.csv``; returns the figure."""
    fig, drawn = verdict_figure(finals, table, **kwargs)
    save_figure(fig, drawn, stem)
    return fig


def _display(obj) -> None:
    try:
        from IPython import get_ipython
        from IPython.display import display
    except ImportError:
        get_ipython = lambda: None  # noqa: E731
    if get_ipython() is None:  # outside Jupyter (a plain script): the plain text form
        print(obj.data.to_string(index=False) if hasattr(obj, "data") else obj)
    else:
        display(obj)
