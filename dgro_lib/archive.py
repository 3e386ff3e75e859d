"""The run archive: the small result files of finished runs, committed under ``reference/<profile>/runs/``, so that
an experiment longer than one working session can be collected across sessions on machines that keep nothing.

A finished run in the run store (``outputs/<profile>/runs/<key>/``) holds everything a notebook reads from it in
small files: ``manifest.json`` (config, seed, commit, machine, timing), ``metrics.csv`` (per step), ``heldout.csv``,
``final_eval.json`` (per-puzzle correctness) and ``evals/<key>.json`` (its other evaluation protocols).
:func:`archive_runs` copies those files (no checkpoint, no weights: a few tens of kB per run) to
``reference/<profile>/runs/<key>/`` together with ``archived.json``, which names the base model the run started from
and the sha256 of its weights.

:func:`restore_runs` is the other direction and is opt-in (``python -m dgro_lib.reproduce --reuse-archived-runs``,
which sets ``DGRO_RUN_ARCHIVE`` for the notebooks' kernels, or ``run_experiment(..., archive=...)``): a run the local
store lacks is copied in from the archive instead of being trained, but only when the archived run was made with the
same params and seed and the locally built base model has the same weights, bit for bit, as the one it was trained
from; otherwise it is trained here and the reason is printed. A restored run has no checkpoint, so an evaluation
protocol the archive does not hold cannot be computed for it (the error says so). ``runs.csv`` and the experiment
manifest say which runs were restored. Plain ``make reproduce`` never reads the archive: it trains every run.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Iterable

from filelock import FileLock

from .config import ExperimentConfig, config_to_dict
from .manifest import git_info, write_json
from .runstore import config_diff

__all__ = ["ARCHIVE_ENV", "ARCHIVED", "archive_runs", "restore_runs", "weights_digest", "archive_from_env"]

ARCHIVE_ENV = "DGRO_RUN_ARCHIVE"
"""Environment variable naming the archive folder that :func:`dgro_lib.experiment.run_experiment` restores from."""
ARCHIVED = "archived.json"
"""The marker an archived (and a restored) run folder carries: its base model's identity and weights digest."""


def archive_from_env() -> Path | None:
    """The archive folder named by ``DGRO_RUN_ARCHIVE`` (None when unset or empty)."""
    value = os.environ.get(ARCHIVE_ENV, "")
    return Path(value) if value else None


def _result_files(run_dir: Path) -> list[Path]:
    """What a notebook reads from a finished run: its top-level JSON / CSV files and its stored evaluations."""
    top = [p for p in run_dir.iterdir() if p.is_file() and p.suffix in (".json", ".csv")]
    evals = sorted((run_dir / "evals").glob("*.json")) if (run_dir / "evals").is_dir() else []
    return sorted(top) + evals


@functools.lru_cache(maxsize=16)
def _digest(path: str, stamp: tuple) -> str | None:
    files = sorted(p for p in Path(path).iterdir() if p.suffix in (".safetensors", ".bin") and p.is_file())
    if not files:
        return None
    h = hashlib.sha256()
    for f in files:
        h.update(f.name.encode())
        with open(f, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()


def weights_digest(model_path: str | Path) -> str | None:
    """sha256 over a local model folder's weight files (``*.safetensors``, ``*.bin``); None for a hub id, a missing
    folder or one without weights."""
    path = Path(model_path)
    if not path.is_dir():
        return None
    stamp = tuple((p.name, p.stat().st_mtime_ns, p.stat().st_size) for p in sorted(path.iterdir()) if p.is_file())
    return _digest(str(path.resolve()), stamp)


def archive_runs(store: str | Path, archive: str | Path, keys: Iterable[str] | None = None) -> list[str]:
    """Copy the result files of every finished run in ``store`` (or of the runs named by ``keys``) into
    ``archive/<key>/``, replacing an older copy of the same run; returns the keys archived.

    An archived copy trained from *other* base weights is never replaced: the same config and seed on a base built
    on another machine can be another model (CPU builds are not bit-identical across every machine), and replacing
    would lose the archived results. Such runs are left out, the others archived, and then a ValueError names them.

    A run is finished when its ``final_eval.json`` exists; one that is not (or a key the store lacks) is an error
    when named in ``keys`` and skipped otherwise. A run restored from an archive keeps its ``archived.json``; any
    other gets one naming its base model and that model's weights digest, so a later restore can check that it
    starts from the same base. Raises when the base model's weights cannot be read (the digest is what makes a
    restored run comparable with a base built elsewhere)."""
    store, archive = Path(store), Path(archive)
    named = keys is not None
    candidates = [store / k for k in keys] if named else sorted(p for p in store.iterdir() if p.is_dir()
                                                                 and p.name != "base")
    done, conflicts = [], []
    for run_dir in candidates:
        if not (run_dir / "final_eval.json").is_file():
            if named:
                raise FileNotFoundError(f"{run_dir}: not a finished run (no final_eval.json); nothing to archive")
            continue
        manifest = json.loads((run_dir / "manifest.json").read_text())
        marker = run_dir / ARCHIVED
        if marker.is_file():
            meta = json.loads(marker.read_text())
        else:
            model_path = manifest.get("model_path", "")
            digest = weights_digest(model_path)
            if digest is None:
                raise FileNotFoundError(f"{run_dir}: its base model {model_path!r} has no local weights to digest; "
                                        "archive a run on the machine whose store built it")
            meta = {"key": run_dir.name, "base_model": Path(model_path).name, "base_weights_sha256": digest,
                    "archived": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "archived_at_commit": git_info()["commit"],
                    "trained_at_commit": manifest.get("git", {}).get("commit")}
        old_marker = archive / run_dir.name / ARCHIVED
        if old_marker.is_file():
            old = json.loads(old_marker.read_text()).get("base_weights_sha256")
            if old != meta["base_weights_sha256"]:
                conflicts.append(f"{run_dir.name} (archived from base weights {str(old)[:12]}, this store's from "
                                 f"{meta['base_weights_sha256'][:12]})")
                continue
        _replace_dir(archive / run_dir.name, run_dir, meta)
        done.append(run_dir.name)
    if conflicts:
        raise ValueError(f"{len(conflicts)} run(s) not archived: the archive holds the same run trained from other "
                         f"base weights, which would be lost: {'; '.join(conflicts)} ({len(done)} other run(s) "
                         f"archived). Remove {archive}/<key> by hand to replace one on purpose.")
    return done


def restore_runs(jobs: Iterable[tuple[ExperimentConfig, int, Path, str]], archive: str | Path) -> dict[str, str]:
    """For each ``(config, seed, run_dir, base model path)`` whose run is not in the local store, copy the archived
    run ``archive/<run_dir.name>`` into ``run_dir`` when it is the same run: same params and seed
    (:func:`~dgro_lib.runstore.config_diff`), and a base model whose weights digest equals the local one's.

    Returns run key -> what happened: ``restored``, or why not (``not archived``, ``in the store``, a local partial
    run, other params, another base model). Every refusal of an archived run is printed, so a run trained here
    although the archive had it is never a surprise."""
    archive = Path(archive)
    outcome = {}
    for cfg, seed, run_dir, model_path in jobs:
        key, src = run_dir.name, archive / run_dir.name
        if (run_dir / "final_eval.json").is_file():
            outcome[key] = "in the store"
            continue
        if not (src / "final_eval.json").is_file():
            outcome[key] = "not archived"
            continue
        why = _mismatch(cfg, seed, src, model_path)
        if why is None and (run_dir / "manifest.json").exists():
            why = "a partial run of it is in the local store (it resumes from its checkpoint instead)"
        if why is None:
            with FileLock(str(run_dir) + ".lock"):  # the same lock as a worker training this run
                if not (run_dir / "final_eval.json").is_file():
                    _replace_dir(run_dir, src, json.loads((src / ARCHIVED).read_text()))
            outcome[key] = "restored"
        else:
            outcome[key] = why
            print(f"[archive] {key}: not restored from {archive}: {why}; it is trained here", flush=True)
    return outcome


def _mismatch(cfg: ExperimentConfig, seed: int, src: Path, model_path: str) -> str | None:
    """Why the archived run ``src`` is not the run ``cfg``/``seed`` from the base at ``model_path`` (None if it is)."""
    manifest = json.loads((src / "manifest.json").read_text())
    diff = config_diff(manifest["config"], config_to_dict(cfg))
    if manifest.get("seed") != seed:
        diff["seed"] = (manifest.get("seed"), seed)
    if diff:
        return "made with other params (" + "; ".join(f"{k}: {a!r} -> {b!r}" for k, (a, b) in diff.items()) + ")"
    meta = json.loads((src / ARCHIVED).read_text()) if (src / ARCHIVED).is_file() else {}
    local = weights_digest(model_path)
    if local is None or local != meta.get("base_weights_sha256"):
        return (f"trained from base {meta.get('base_model')!r} with weights sha256 "
                f"{str(meta.get('base_weights_sha256'))[:12]}, this machine's base {Path(model_path).name!r} has "
                f"{str(local)[:12]}")
    return None


def _replace_dir(dest: Path, src_run: Path, meta: dict) -> None:
    """``dest`` becomes a copy of ``src_run``'s result files plus ``archived.json`` (``meta``), whole or not at all:
    the copy is made in a temporary sibling folder and renamed into place."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.tmp-", dir=dest.parent))
    try:
        for f in _result_files(src_run):
            if f.name == ARCHIVED:
                continue
            target = tmp / f.relative_to(src_run)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(f, target)
        write_json(tmp / ARCHIVED, meta)
        if dest.exists():
            shutil.rmtree(dest)
        os.rename(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
