"""Measured costs of the project's commands, recorded where they run: ``python -m dgro_lib.cli.timed NAME -- CMD ...``
runs ``CMD`` and, when it succeeds, writes ``outputs/timings/NAME.json`` (wall minutes, the date, the commit, the
machine's cores; ``make test`` runs itself this way, ``make reproduce`` records its own with its claim counts).

A number the README quotes comes from a recorded file, never from a hand: the maintainer copies a fresh clone's
``outputs/timings/*.json`` to ``reference/timings/`` and ``make results`` writes the README's costs block from
there (:func:`costs_block`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import date
from pathlib import Path

from dgro_lib.util.files import atomic_write
from dgro_lib.util.manifest import git_info
from dgro_lib.util.paths import OUTPUTS, REPO

__all__ = ["record", "read_timing", "costs_block", "main", "TIMINGS"]

TIMINGS = REPO / "reference" / "timings"


def record(name: str, seconds: float, folder: Path = OUTPUTS / "timings", **extra) -> Path:
    """Write ``<folder>/<name>.json``: ``minutes`` (wall), ``date``, ``commit``, ``cores`` and ``extra``."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.json"
    commit = (git_info().get("commit") or "unknown")[:7]
    data = {"name": name, "minutes": round(seconds / 60, 1), "date": date.today().isoformat(), "commit": commit,
            "cores": os.cpu_count(), **extra}
    atomic_write(path, lambda tmp: tmp.write_text(json.dumps(data, indent=1) + "\n"))
    return path


def read_timing(name: str, folder: Path = TIMINGS) -> dict | None:
    path = folder / f"{name}.json"
    return json.loads(path.read_text()) if path.is_file() else None


def costs_block(folder: Path = TIMINGS) -> str:
    """The README's measured costs, one line per recorded command (``test``, ``reproduce-cpu``); a command never
    recorded says so."""
    lines = []
    test = read_timing("test", folder)
    lines.append(f"Measured: `make test` {test['minutes']} min in a clean clone after `make venv` ({test['cores']} cores, "
                 f"{test['date']}, commit {test['commit']})" if test else "Measured: `make test` not recorded yet")
    rep = read_timing("reproduce-cpu", folder)
    lines.append(f"`make reproduce` {rep['minutes']} min for {rep['notebooks']} notebooks, {rep['identical']} of "
                 f"{rep['claims']} claims identical to the reference ({rep['cores']} cores, {rep['date']}, "
                 f"commit {rep['commit']})." if rep else "`make reproduce` not recorded yet.")
    return "; ".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) < 3 or argv[1] != "--":
        print("usage: python -m dgro_lib.cli.timed NAME -- CMD [ARGS...]", file=sys.stderr)
        return 2
    name, cmd = argv[0], argv[2:]
    t0 = time.time()
    rc = subprocess.call(cmd)
    if rc == 0:
        path = record(name, time.time() - t0, command=" ".join(cmd))
        print(f"[timed] {name}: {(time.time() - t0) / 60:.1f} min -> {path}", file=sys.stderr)
    return rc


if __name__ == "__main__":
    sys.exit(main())
