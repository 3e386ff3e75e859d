"""Batch-reproduce the notebooks headless with papermill: ``python -m dgro_lib.cli.reproduce --profile cpu``.

Each notebook, read from its source ``notebooks/<name>.py`` (:mod:`dgro_lib.util.notebooks`), runs with the papermill parameters ``profile`` and ``output_dir``
into ``outputs/<profile>/<name>/``, where it leaves the executed notebook, its CSVs, its figures (PNG
beside the CSV they were drawn from), a manifest and ``claims.csv`` (its headline numbers). Before it starts it prints
the plan (runs, steps left, estimated minutes: :mod:`dgro_lib.cli.estimate`); after each notebook it prints its claims
beside the reference results committed under ``reference/<profile>/<notebook>/`` (:mod:`dgro_lib.report.claims`),
and it ends with one line per notebook: ``identical``, ``consistent`` (every claim within 1.96 x the combined
standard error of the two estimates, with the same verdict) or ``differs``; the exit status is 1 when any notebook
differs, so a batch job can rely on it. A notebook runs only if ``params/<profile>/<name>.yaml`` exists; notebooks
without params for the profile are listed as skipped, never silently dropped.

The run archive (:mod:`dgro_lib.runs.archive`, ``reference/<profile>/runs/``) carries finished runs' results from one
machine to the next. By default the notebooks restore every archived run whose identity matches (same params and
seed, a replicate trained from a base with the same weights: with the committed bases of ``reference/bases/`` that
is every machine) instead of training it, so a fresh clone renders every ``cpu`` notebook in minutes; the plan says
how many runs are restored and how many will be trained. ``--retrain`` trains every run here instead (a reproduction
of the training itself). ``--archive-runs`` copies every finished run of the profile's store into the archive (a run
the archive holds from another machine or base is kept as a replicate beside it), and ``--save-reference`` also
archives the runs of each notebook it saves. A notebook that trains runs prints their training logs into its cells;
with ``--save-reference`` such a notebook is executed a second time, from the store (minutes), so that the
reference notebook holds the results and the store's progress lines, not the logs of one machine's training.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import pandas as pd

from dgro_lib.runs.archive import ARCHIVE_ENV, archive_runs
from dgro_lib.report.claims import REFERENCE, compare_claims, format_comparison, reproduction_status, save_reference
from dgro_lib.cli.dryrun import dry_run
from dgro_lib.cli.estimate import format_plan, plan_profile
from dgro_lib.cli.timed import record
from dgro_lib.util.files import atomic_path
from dgro_lib.util.notebooks import notebook_names, read_notebook
from dgro_lib.util.paths import NOTEBOOKS, OUTPUTS, PARAMS
from dgro_lib.cli.preflight import check_here, needs_gpu, profile_configs

__all__ = ["list_notebooks", "run_notebook", "main"]


def list_notebooks() -> list[str]:
    """Notebook names in run order (``00_*`` first: later notebooks reuse the base model it builds)."""
    return notebook_names()


def run_notebook(name: str, profile: str, *, output_root: Path = OUTPUTS, progress: bool = True,
                 parameters: dict | None = None, variant: str = "") -> Path:
    """Execute one notebook with papermill; returns the executed notebook's path. Errors propagate.

    ``parameters`` are papermill parameters beside ``profile`` and ``output_dir`` (e.g. DCPO Table 2's
    ``backbone``); ``variant`` is appended to the output folder's name, so that executions with other parameters
    keep their own results (``<name><variant>/``).

    papermill writes its output notebook cell by cell, so it writes to a temporary file that becomes
    ``<name>.ipynb`` only when the notebook finished; a notebook that fails is kept as ``<name>.failed.ipynb``
    (the cells up to the error, for debugging) and an earlier successful ``<name>.ipynb`` is left as it was."""
    import papermill as pm  # an optional dependency (the notebooks extra), needed only to run notebooks

    src = read_notebook(name)  # from the .py source: a local .ipynb's outputs or edits play no part
    out_dir = output_root / profile / f"{name}{variant}"
    out_dir.mkdir(parents=True, exist_ok=True)
    executed = out_dir / f"{name}.ipynb"
    failed = out_dir / f"{name}.failed.ipynb"
    with atomic_path(executed, suffix=".tmp.ipynb") as tmp:  # papermill warns on a path not ending in .ipynb
        try:
            pm.execute_notebook(
                src,
                str(tmp),
                parameters={"profile": profile, "output_dir": str(out_dir), **(parameters or {})},
                cwd=str(NOTEBOOKS),
                progress_bar=progress,
                kernel_name="python3",
            )
        except BaseException:
            if tmp.exists() and tmp.stat().st_size:
                os.replace(tmp, failed)  # atomic_path then finds no temp file to remove
            raise
    failed.unlink(missing_ok=True)  # an earlier failure of this notebook is superseded
    return executed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="cpu", help="params profile: ci, cpu or paper (default cpu)")
    parser.add_argument("--only", action="append", help="run only this notebook (repeatable)")
    parser.add_argument("--list", action="store_true", help="list notebooks and whether the profile has params")
    parser.add_argument("--dry-run", action="store_true",
                        help="validate every params file of the profile (config, architecture, batch arithmetic, "
                             "estimated GPU memory per rank) without running anything")
    parser.add_argument("--save-reference", action="store_true",
                        help="after each notebook, copy its small outputs to reference/<profile>/<notebook>/ (the "
                             "repository's reference results) instead of comparing with them")
    parser.add_argument("--archive-runs", action="store_true",
                        help="copy the result files of every finished run in outputs/<profile>/runs/ to the run "
                             "archive reference/<profile>/runs/ (no weights), then stop")
    parser.add_argument("--retrain", action="store_true",
                        help="train every run here; by default a run is restored from reference/<profile>/runs/ "
                             "when the archive holds the same run from a base model with the same weights "
                             "(runs.csv says which were restored)")
    parser.add_argument("--reuse-archived-runs", action="store_true",
                        help="restore archived runs (the default; kept so that older command lines still work)")
    args = parser.parse_args(argv)
    archive = REFERENCE / args.profile / "runs"
    if args.archive_runs:
        store = OUTPUTS / args.profile / "runs"
        keys = archive_runs(store, archive) if store.is_dir() else []
        print(f"[reproduce] {len(keys)} finished run(s) of {store} archived in {archive}", flush=True)
        return 0
    if args.retrain and args.reuse_archived_runs:
        parser.error("--retrain and --reuse-archived-runs contradict each other")
    reuse = not args.retrain
    if args.dry_run:
        try:
            dry_run(args.profile)
        except ValueError as e:
            print(f"[reproduce] dry run failed: {e}", file=sys.stderr)
            return 1
        return 0

    names = list_notebooks()
    if args.only:
        unknown = [n for n in args.only if n not in names]
        if unknown:
            parser.error(f"unknown notebook(s) {', '.join(unknown)}; available: {', '.join(names)}")
        names = [n for n in names if n in args.only]
    if not (PARAMS / args.profile).is_dir():
        have = sorted(p.name for p in PARAMS.iterdir() if p.is_dir())
        parser.error(f"unknown profile {args.profile!r}; available: {', '.join(have)}")

    runnable = [n for n in names if (PARAMS / args.profile / f"{n}.yaml").is_file()]
    skipped = [n for n in names if n not in runnable]
    if args.list:
        for n in names:
            print(f"{n:40s} {'ready' if n in runnable else 'no params for ' + args.profile}")
        return 0
    for n in skipped:
        print(f"[reproduce] skip {n}: no params/{args.profile}/{n}.yaml", flush=True)
    if runnable and not args.save_reference:
        # A GPU profile on a machine that cannot run it stops here, every problem listed, before any notebook
        # (notebook 00 alone is an hour of a GPU node) rather than in the first run that needs the GPU.
        configs = profile_configs(args.profile, runnable)
        gpu = {k: c for k, c in configs.items() if needs_gpu(c)}
        if gpu and not check_here(gpu):
            return 1
    if reuse:
        os.environ[ARCHIVE_ENV] = str(archive)  # inherited by the notebooks' kernels
    else:
        os.environ[ARCHIVE_ENV] = "none"  # the notebooks would otherwise restore from the default archive
    plan = plan_profile(args.profile, runnable, OUTPUTS, archive=archive if reuse else None)
    print(format_plan(plan, args.profile), flush=True)
    timings, outcome = {}, {}
    for n in runnable:
        print(f"[reproduce] {n} (profile {args.profile})", flush=True)
        t0 = time.time()
        trains = (plan_profile(args.profile, [n], OUTPUTS, archive=archive if reuse else None).attrs["unique"]["train"]
                  if args.save_reference else 0)
        executed = run_notebook(n, args.profile)
        if args.save_reference and trains:
            print(f"[reproduce] {n}: trained {trains} run(s) in {(time.time() - t0) / 60:.1f} min; executing it again "
                  "from the store, so that the reference holds no training logs", flush=True)
            executed = run_notebook(n, args.profile)
        timings[n] = time.time() - t0
        runs_csv = executed.parent / "runs.csv"
        used = pd.read_csv(runs_csv) if runs_csv.is_file() else None
        restored = 0 if used is None else int(used["from_archive"].sum())
        how = ("" if used is None else f", {restored} of {len(used)} run(s) restored from the run archive"
               if restored else f", its {len(used)} run(s) trained or found in the store")
        print(f"[reproduce] {n}: {timings[n] / 60:.1f} min{how} -> {executed.parent}", flush=True)
        reference = REFERENCE / args.profile / n
        if args.save_reference:
            copied = save_reference(executed.parent, reference, since=t0)
            keys = pd.read_csv(runs_csv, dtype={"key": str})["key"].tolist() if runs_csv.is_file() else []
            archive_runs(OUTPUTS / args.profile / "runs", archive, keys)
            print(f"[reproduce] {n}: {len(copied)} files saved as the reference in {reference}, its {len(keys)} "
                  f"run(s) in {archive}", flush=True)
        elif (reference / "claims.csv").is_file() and (executed.parent / "claims.csv").is_file():
            table = compare_claims(executed.parent, reference)
            print(format_comparison(table, n), flush=True)
            counts = table["status"].value_counts()
            outcome[n] = (reproduction_status(table), ", ".join(f"{v} {k}" for k, v in counts.items()))
        else:
            outcome[n] = ("ran", f"the {args.profile} profile keeps no reference results to compare with"
                          if not reference.parent.is_dir() else f"no {reference / 'claims.csv'} to compare with")
    total = sum(timings.values())
    print(f"[reproduce] profile {args.profile}: {len(timings)} notebook(s) in {total / 60:.1f} min", flush=True)
    if args.save_reference:
        return 0
    compared = [compare_claims(OUTPUTS / args.profile / n, REFERENCE / args.profile / n) for n in outcome
                if outcome[n][0] != "ran"]
    if len(timings) == len(list_notebooks()) and compared:  # a whole profile's run: its cost, for the README
        every = pd.concat(compared)
        record(f"reproduce-{args.profile}", total, notebooks=len(timings), claims=len(every),
               identical=int((every["status"] == "identical").sum()), retrain=bool(args.retrain))
    for n, (status, detail) in outcome.items():
        print(f"[reproduce] {n:32s} {status:12s} ({detail})", flush=True)
    differs = [n for n, (status, _) in outcome.items() if status == "differs"]
    if differs:
        print(f"[reproduce] {len(differs)} notebook(s) differ from the reference: {', '.join(differs)}", flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
