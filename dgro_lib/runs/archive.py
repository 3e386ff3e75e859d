"""The run archive: the small result files of finished runs, committed under ``reference/<profile>/runs/``, so that
an experiment longer than one working session can be collected across sessions and machines that keep nothing.

A finished run in the run store (``outputs/<profile>/runs/<key>/``) holds everything a notebook reads from it in
small files: ``manifest.json`` (config, seed, commit, machine, timing), ``metrics.csv`` (per step), ``heldout.csv``,
``final_eval.json`` (per-puzzle correctness) and ``evals/<key>.json`` (its other evaluation protocols).
:func:`archive_runs` copies those files (no checkpoint, no weights: a few tens of kB per run) to
``reference/<profile>/runs/<key>/`` together with ``archived.json``, which names the base model the run started from,
the sha256 of its weights, the sha256 of its per-item results and the machine it trained on (CPU vendor, model and
ISA flags, torch version and threads, the kernels in use).

**Replicates.** The same configuration and seed trained on another machine, or from another build of the base, is
another *replicate* of the run: kept beside the first under ``<key>/replicates/<id>/`` (same files), never refused
and never overwritten. ``<key>/`` itself holds the *reference replicate*, the one the notebooks restore by default:
the first one archived, unless a later one was trained from a committed base (:mod:`dgro_lib.models.committed`) and
it was not, in which case the later one takes its place and the earlier one moves to ``replicates/``. Re-archiving a
replicate with the same base and the same per-item results refreshes it in place (e.g. to add an evaluation). A
run trained again from the same base to the same outcomes (:func:`outcomes_digest`: the same text, other wall times
or sweep tags) is no new replicate either: the archived one is kept, any evaluation it lacks is added, and the
retraining is noted in its ``archived.json`` (``retrained_identical``) as a check that training is deterministic.
:func:`replicates` lists them for a statistical comparison across machines.

:func:`restore_runs` is the other direction (``python -m dgro_lib.cli.reproduce`` does it by default; ``--retrain``
trains everything here instead): a run the local store lacks is copied in from the archive instead of being trained,
but only when the archived replicate was made with the same params and seed from a base model with the same weights,
bit for bit, as the local one (the reference replicate first, then the others in name order); otherwise it is trained
here and the reason is printed. A restored run has no checkpoint, so an evaluation protocol the archive does not
hold cannot be computed for it (the error says so). ``runs.csv`` and the experiment manifest say which runs were
restored.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import time
from pathlib import Path
from typing import Iterable

import pandas as pd
from filelock import FileLock

from dgro_lib.config import ExperimentConfig, config_to_dict
from dgro_lib.util.manifest import git_info, machine_info
from dgro_lib.util.files import atomic_dir, atomic_path, write_json
from dgro_lib.models.committed import committed_bases, weights_digest
from dgro_lib.util.paths import OUTPUTS, REPO
from dgro_lib.runs.store import config_diff

__all__ = ["compare_replicates", "outcomes_digest", "ARCHIVE_ENV", "ARCHIVED", "REPLICATES", "BASE_EVALS", "archive_runs",
           "archive_base_evals", "stored_measurement", "needs_fractions", "restore_runs",
           "restore_base_eval", "replicates", "weights_digest", "archive_from_env", "machine_kind", "restorable"]

ARCHIVE_ENV = "DGRO_RUN_ARCHIVE"
"""Environment variable naming the archive folder that :func:`dgro_lib.runs.experiment.run_experiment` restores from;
``none`` restores nothing (``python -m dgro_lib.cli.reproduce --retrain`` sets it). Unset, a profile's run store
``outputs/<profile>/runs`` restores from ``reference/<profile>/runs`` (so a notebook opened in JupyterLab reads the
archived runs as ``make reproduce`` does), and any other store from nothing."""
ARCHIVED = "archived.json"
"""The marker an archived (and a restored) run folder carries: its base model's identity and weights digest."""


def archive_from_env(store: str | Path | None = None) -> Path | None:
    """The archive a run store restores from: the folder named by ``DGRO_RUN_ARCHIVE``; None when it says ``none``;
    unset, ``reference/<profile>/runs`` for the profile store ``outputs/<profile>/runs`` (when it exists), else
    None."""
    value = os.environ.get(ARCHIVE_ENV, "")
    if value.lower() == "none":
        return None
    if value:
        return Path(value)
    if store is None:
        return None
    store = Path(store).resolve()
    if store.name == "runs" and store.parent.parent == OUTPUTS.resolve():
        default = REPO / "reference" / store.parent.name / "runs"
        return default if default.is_dir() else None
    return None


def _result_files(run_dir: Path) -> list[Path]:
    """What a notebook reads from a finished run: its top-level JSON / CSV files and its stored evaluations."""
    top = [p for p in run_dir.iterdir() if p.is_file() and p.suffix in (".json", ".csv")]
    evals = sorted((run_dir / "evals").glob("*.json")) if (run_dir / "evals").is_dir() else []
    return sorted(top) + evals


def _add_missing_evaluations(folder: Path, run_dir: Path) -> None:
    """Copy the stored evaluations (``evals/*.json``) of ``run_dir`` that the archived ``folder`` lacks."""
    for f in sorted((run_dir / "evals").glob("*.json")) if (run_dir / "evals").is_dir() else []:
        target = folder / "evals" / f.name
        if not target.is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            with atomic_path(target) as tmp:
                shutil.copy2(f, tmp)


REPLICATES = "replicates"
"""The sub-folder of an archived run that holds its further replicates, one folder each."""

_KIND_FIELDS = ("cpu_vendor", "cpu_model", "cpu_isa", "torch", "torch_threads", "torch_cpu_capability")


def machine_kind(manifest: dict) -> dict:
    """What decides a CPU run's bits, from a run manifest: CPU vendor, model and ISA flags, torch version and threads,
    and the kernels torch ran (runs from before the vendor and flags were recorded get the vendor from the model
    name and ``cpu_isa`` None)."""
    m = manifest.get("machine", {})
    model = m.get("cpu_model") or ""
    vendor = m.get("cpu_vendor") or ("AuthenticAMD" if "AMD" in model else "GenuineIntel" if "Intel" in model
                                     else None)
    return {"cpu_vendor": vendor, "cpu_model": m.get("cpu_model"), "cpu_isa": m.get("cpu_isa"),
            "torch": manifest.get("packages", {}).get("torch"), "torch_threads": m.get("torch_threads"),
            "torch_cpu_capability": (m.get("cpu_numerics") or {}).get("torch_cpu_capability"),
            "gpus": m.get("gpus") or []}


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


OUTCOME_FIELDS = ("correct", "protocol", "evaluated_on")
"""The parts of ``final_eval.json`` that are the run's results; what :func:`outcomes_digest` hashes."""

OUTCOME_SUMMARY_FIELDS = ("accuracy", "n", "mean_length", "truncated", "format_rate")
"""The summary fields that are measured on the generated text. The rest are not results: the wall times
(``wall_s``, ``train_seconds``) differ between two trainings of the same run, and the sweep tags (``reward.scheme``,
``loss.kwargs.beta1``, ...) name the experiment that trained it, which another experiment sharing the run names
differently."""


def outcomes_digest(final_eval: str | Path) -> str:
    """sha256 of a run's results alone: its per-item outcomes, evaluation protocol and placement, and the summary
    fields measured on the text (:data:`OUTCOME_SUMMARY_FIELDS`), without wall times or sweep tags. Two trainings of
    one configuration and seed that generated the same text have the same digest, whatever their timings, and
    whichever experiment trained them."""
    d = json.loads(Path(final_eval).read_text())
    body = {k: d.get(k) for k in OUTCOME_FIELDS}
    body["summary"] = {k: d.get("summary", {}).get(k) for k in OUTCOME_SUMMARY_FIELDS}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def _replicate_id(meta: dict) -> str:
    vendor = {"AuthenticAMD": "amd", "GenuineIntel": "intel"}.get(meta["machine"].get("cpu_vendor"), "other")
    return f"{vendor}-{meta['base_weights_sha256'][:8]}-{meta['results_sha256'][:8]}"


def _meta(folder: Path) -> dict:
    """An archived replicate's ``archived.json``, with the fields older archives lack filled in from its files."""
    meta = json.loads((folder / ARCHIVED).read_text())
    if "results_sha256" not in meta:
        meta["results_sha256"] = _sha256(folder / "final_eval.json")
    if "machine" not in meta:
        meta["machine"] = machine_kind(json.loads((folder / "manifest.json").read_text()))
    return meta


def replicates(archive: str | Path, key: str) -> list[tuple[str, Path, dict]]:
    """The archived replicates of run ``key``: ``(id, folder, archived.json)``, the reference replicate first (id
    ``reference``), then ``replicates/<id>/`` in name order; empty when the archive lacks the run."""
    top = Path(archive) / key
    out = []
    if (top / "final_eval.json").is_file():
        out.append(("reference", top, _meta(top)))
    if (top / REPLICATES).is_dir():
        out += [(d.name, d, _meta(d)) for d in sorted((top / REPLICATES).iterdir())
                if (d / "final_eval.json").is_file()]
    return out


def needs_fractions(final: dict) -> bool:
    """Whether a ``final_eval.json`` (as a dict) is a sampled evaluation stored as first-sample bools: what a run
    finished before every sample was kept wrote. :func:`archive_runs` refuses such a run, because its paired tests
    would read one sample per puzzle where its summary's accuracy reads all of them;
    ``python -m dgro_lib.cli.final_fractions`` re-derives the fractions from the run's last checkpoint."""
    p = final.get("protocol", {})
    return (p.get("temperature", 0) > 0 and p.get("n_samples", 1) > 1
            and all(isinstance(c, bool) for c in final["correct"]))


def archive_runs(store: str | Path, archive: str | Path, keys: Iterable[str] | None = None) -> list[str]:
    """Copy the result files of every finished run in ``store`` (or of the runs named by ``keys``) into the archive;
    returns the keys archived.

    A run the archive lacks goes to ``archive/<key>/``. One it holds with the same base weights and the same per-item
    results (``final_eval.json``) is the same replicate, refreshed in place. Any other is a new replicate, kept under
    ``archive/<key>/replicates/<id>/`` (id: CPU vendor, base digest, results digest), or promoted to the reference
    replicate when it starts from a committed base and the reference does not (the old reference then moves to
    ``replicates/``). Nothing archived is ever lost. The store's base-model evaluations are archived too
    (:func:`archive_base_evals`).

    A run is finished when its ``final_eval.json`` exists; one that is not (or a key the store lacks) is an error
    when named in ``keys`` and skipped otherwise. A run restored from an archive keeps its ``archived.json``; any
    other gets one naming its base model and that model's weights digest, so a later restore can check that it
    starts from the same base. Raises when the base model's weights cannot be read (the digest is what makes a
    restored run comparable with a base built elsewhere), and, before copying anything, when a run's sampled final
    evaluation keeps only the first sample per puzzle (:func:`needs_fractions`)."""
    store, archive = Path(store), Path(archive)
    named = keys is not None
    candidates = [store / k for k in keys] if named else sorted(p for p in store.iterdir() if p.is_dir()
                                                                 and p.name != BASE_EVALS)
    # checked before anything is copied, so a refusal leaves the archive as it was
    unconverted = [d.name for d in candidates if (d / "final_eval.json").is_file()
                   and needs_fractions(json.loads((d / "final_eval.json").read_text()))]
    if unconverted:
        raise ValueError(f"{store}: {len(unconverted)} run(s) hold a sampled final evaluation stored as the first "
                         f"sample's outcome per puzzle (as runs finished before every sample was kept): "
                         f"{unconverted}; nothing archived. `python -m dgro_lib.cli.final_fractions --keys "
                         f"{' '.join(unconverted)}` re-derives the fractions from each run's last checkpoint; "
                         "archive after that")
    pinned = {m["weights_sha256"] for m in committed_bases().values()}
    done = []
    for run_dir in candidates:
        if not (run_dir / "final_eval.json").is_file():
            if named:
                raise FileNotFoundError(f"{run_dir}: not a finished run (no final_eval.json); nothing to archive")
            continue
        manifest = json.loads((run_dir / "manifest.json").read_text())
        marker = run_dir / ARCHIVED
        if marker.is_file():
            meta = _meta(run_dir)
        else:
            model_path = manifest.get("model_path", "")
            digest = weights_digest(model_path)
            if digest is None:
                raise FileNotFoundError(f"{run_dir}: its base model {model_path!r} has no local weights to digest; "
                                        "archive a run on the machine whose store built it")
            meta = {"key": run_dir.name, "base_model": Path(model_path).name, "base_weights_sha256": digest,
                    "results_sha256": _sha256(run_dir / "final_eval.json"), "machine": machine_kind(manifest),
                    "archived": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "archived_at_commit": git_info()["commit"],
                    "trained_at_commit": manifest.get("git", {}).get("commit")}
        top = archive / run_dir.name
        existing = replicates(archive, run_dir.name)
        same = [(rid, folder) for rid, folder, m in existing
                if (m["base_weights_sha256"], m["results_sha256"]) == (meta["base_weights_sha256"],
                                                                       meta["results_sha256"])]
        outcomes = outcomes_digest(run_dir / "final_eval.json")
        twins = [(rid, folder, m) for rid, folder, m in existing if not same
                 and m["base_weights_sha256"] == meta["base_weights_sha256"]
                 and outcomes_digest(folder / "final_eval.json") == outcomes]
        if same:  # the same replicate again (e.g. with a new evaluation): it keeps when it was first archived
            first = next(m for rid, _, m in existing if rid == same[0][0])
            meta = {**meta, **{k: first[k] for k in ("archived", "archived_at_commit") if k in first}}
            _replace_dir(same[0][1], run_dir, meta)
        elif twins:  # trained again from the same base, to the same outcomes: a check of determinism, no replicate
            rid, folder, first = twins[0]
            _add_missing_evaluations(folder, run_dir)
            seen = {"trained_at_commit": meta["trained_at_commit"], "machine": meta["machine"],
                    "archived": meta["archived"]}
            write_json(folder / ARCHIVED, {**first, "retrained_identical": [*first.get("retrained_identical", []),
                                                                            seen]})
            print(f"[archive] {run_dir.name}: trained again with the same outcomes as replicate {rid} "
                  "(only its timings or sweep tags differ); noted in its archived.json, no new replicate", flush=True)
        elif not existing:
            _replace_dir(top, run_dir, meta)
        elif meta["base_weights_sha256"] in pinned and existing[0][2]["base_weights_sha256"] not in pinned:
            old = existing[0][2]
            _replace_dir(top / REPLICATES / _replicate_id(old), top, old)  # the old reference becomes a replicate
            _replace_dir(top, run_dir, meta, keep=(REPLICATES,))
            print(f"[archive] {run_dir.name}: the reference replicate is now the one from the committed base "
                  f"{meta['base_weights_sha256'][:12]}; the one from {old['base_weights_sha256'][:12]} is kept as "
                  f"replicate {_replicate_id(old)}", flush=True)
        else:
            _replace_dir(top / REPLICATES / _replicate_id(meta), run_dir, meta)
            print(f"[archive] {run_dir.name}: kept as replicate {_replicate_id(meta)} beside the reference",
                  flush=True)
        done.append(run_dir.name)
    archive_base_evals(store, archive)
    return done


BASE_EVALS = "base"
"""The archive's folder of base-model evaluations: ``base/<evaluation key>/<weights digest, 16 hex>.json``."""


def archive_base_evals(store: str | Path, archive: str | Path) -> list[str]:
    """Copy the store's base-model evaluations (``store/base/<key>.json``, per-item results included) into
    ``archive/base/<key>/<digest>.json``, one per base weights digest, so a fresh clone reads them instead of
    evaluating its (identical, committed) base again; returns the keys added. An archived evaluation is never
    replaced: one with other numbers for the same weights (another machine kind) is kept beside it as
    ``<digest>-<sha256 of the file, 8 hex>.json``."""
    store, archive = Path(store), Path(archive)
    added = []
    for path in sorted((store / "base").glob("*.json")) if (store / "base").is_dir() else []:
        ev = json.loads(path.read_text())
        digest = weights_digest(ev.get("model_path", ""))
        if digest is None:  # a hub id or a model no longer on this machine: nothing to check a restore against
            continue
        dest = archive / BASE_EVALS / path.stem / f"{digest[:16]}.json"
        body = path.read_bytes()
        if dest.is_file():
            if _same_evaluation(dest.read_bytes(), body):
                continue
            dest = dest.with_name(f"{digest[:16]}-{hashlib.sha256(body).hexdigest()[:8]}.json")
            if dest.is_file():
                continue
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_name(f".{dest.name}.tmp")
        tmp.write_bytes(body)
        os.replace(tmp, dest)
        added.append(path.stem)
    return added


def _same_evaluation(a: bytes, b: bytes) -> bool:
    """Two stored evaluations with the same numbers (the model path, where each machine keeps the base, aside)."""
    ja, jb = json.loads(a), json.loads(b)
    ja.pop("model_path", None), jb.pop("model_path", None)
    return ja == jb


def restore_base_eval(model_path: str, path: Path, archive: str | Path | None) -> bool:
    """Fill the store's base evaluation ``path`` (``store/base/<key>.json``) from the archive when it holds that
    evaluation for a base with the weights of ``model_path``; returns whether it did."""
    if archive is None or path.is_file():
        return False
    digest = weights_digest(model_path)
    src = Path(archive) / BASE_EVALS / path.stem / f"{str(digest)[:16]}.json"
    if digest is None or not src.is_file():
        return False
    ev = json.loads(src.read_text())
    ev["model_path"] = str(model_path)  # where this machine keeps the (same) base
    write_json(path, ev)
    return True


def stored_measurement(path: Path, model_path: str, measure) -> dict:
    """``path``'s JSON, made once: a second process asking for it waits on a lock and reads it; a base-model
    measurement (``<store>/base/<key>.json``) the store's archive holds for these weights is restored
    (:func:`restore_base_eval`); otherwise ``measure()`` computes it and it is written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(path) + ".lock"):
        if not path.exists() and path.parent.name == BASE_EVALS:
            restore_base_eval(model_path, path, archive_from_env(path.parent.parent))
        if not path.exists():
            write_json(path, measure())
    return json.loads(path.read_text())


def restore_runs(jobs: Iterable[tuple[ExperimentConfig, int, Path, str]], archive: str | Path) -> dict[str, str]:
    """For each ``(config, seed, run_dir, base model path)`` whose run is not in the local store, copy an archived
    replicate of ``run_dir.name`` into ``run_dir`` when it is the same run: same params and seed
    (:func:`~dgro_lib.runs.store.config_diff`), and a base model whose weights digest equals the local one's; the
    reference replicate is tried first.

    Returns run key -> what happened: ``restored`` (the reference replicate), ``restored replicate <id>``, or why not
    (``not archived``, ``in the store``, a local partial run, other params, another base model). Every refusal of
    an archived run is printed, so a run trained here although the archive had it is never a surprise."""
    archive = Path(archive)
    outcome = {}
    for cfg, seed, run_dir, model_path in jobs:
        key = run_dir.name
        if (run_dir / "final_eval.json").is_file():
            outcome[key] = "in the store"
            continue
        found = replicates(archive, key)
        if not found:
            outcome[key] = "not archived"
            continue
        local = weights_digest(model_path)
        reasons = [(rid, folder, _mismatch(cfg, seed, folder, local)) for rid, folder, _ in found]
        match = next(((rid, folder) for rid, folder, why in reasons if why is None), None)
        why = None if match is not None else reasons[0][2] + (
            f" (nor do its {len(found) - 1} other replicate(s))" if len(found) > 1 else "")
        if why is None and (run_dir / "manifest.json").exists():
            why = "a partial run of it is in the local store (it resumes from its checkpoint instead)"
        if why is None:
            rid, folder = match
            with FileLock(str(run_dir) + ".lock"):  # the same lock as a worker training this run
                if not (run_dir / "final_eval.json").is_file():
                    _replace_dir(run_dir, folder, _meta(folder))
            outcome[key] = "restored" if rid == "reference" else f"restored replicate {rid}"
        else:
            outcome[key] = why
            print(f"[archive] {key}: not restored from {archive}: {why}; it is trained here", flush=True)
    return outcome


def restorable(cfg: ExperimentConfig, seed: int, archive: str | Path, key: str, base_digest: str | None) -> bool:
    """Whether :func:`restore_runs` would restore run ``key`` (``cfg``, ``seed``) on a base with ``base_digest``."""
    return any(_mismatch(cfg, seed, folder, base_digest) is None for _, folder, _ in replicates(archive, key))


def _mismatch(cfg: ExperimentConfig, seed: int, src: Path, local: str | None) -> str | None:
    """Why the archived replicate ``src`` is not the run ``cfg``/``seed`` from a base with weights digest ``local``
    (None if it is)."""
    manifest = json.loads((src / "manifest.json").read_text())
    diff = config_diff(manifest["config"], config_to_dict(cfg))
    if manifest.get("seed") != seed:
        diff["seed"] = (manifest.get("seed"), seed)
    if diff:
        return "made with other params (" + "; ".join(f"{k}: {a!r} -> {b!r}" for k, (a, b) in diff.items()) + ")"
    meta = json.loads((src / ARCHIVED).read_text()) if (src / ARCHIVED).is_file() else {}
    if local is None or local != meta.get("base_weights_sha256"):
        return (f"trained from base {meta.get('base_model')!r} with weights sha256 "
                f"{str(meta.get('base_weights_sha256'))[:12]}, this machine's base has {str(local)[:12]}")
    return None


def _replace_dir(dest: Path, src_run: Path, meta: dict, keep: tuple[str, ...] = (REPLICATES,)) -> None:
    """``dest`` becomes a copy of ``src_run``'s result files plus ``archived.json`` (``meta``), whole or not at all:
    the copy is made in a temporary sibling folder and renamed into place. The sub-folders ``keep`` of an existing
    ``dest`` (its further replicates) are carried over."""
    with atomic_dir(dest) as tmp:
        for f in _result_files(src_run):
            if f.name == ARCHIVED:
                continue
            target = tmp / f.relative_to(src_run)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(f, target)
        write_json(tmp / ARCHIVED, meta)
        for name in keep:  # copied, not moved: a failure before the rename leaves dest whole
            if (dest / name).is_dir():
                shutil.copytree(dest / name, tmp / name)


def compare_replicates(archive: str | Path, runs_csv: str | Path, *, other: str | None = None) -> pd.DataFrame:
    """The reference replicates of a notebook's runs (``runs.csv``) against another replicate of each, from the run
    archive (:func:`dgro_lib.runs.archive.replicates`): one row per sweep point (arm) with both sides' greedy held-out
    accuracy over seeds (mean, s.d., seeds), the difference of the means in points, its standard error from the
    seed spread (sqrt(s_a^2 / n_a + s_b^2 / n_b), in points), the fraction of held-out items with the same
    correctness run by run, and ``status``: ``identical`` (every per-item result bit-equal), ``consistent``
    (|difference| <= 1.96 x its standard error), ``differs``, or ``no replicate``.

    ``other`` picks the replicate by id prefix (e.g. ``intel``); by default the first one that is not the
    reference. Both sides of one arm must have the same seeds; a seed with only one side is left out of both.
    This is the seed-level check of a reproduction on another machine; the training run is the unit, so it is
    only as sharp as the seed count allows."""
    runs = pd.read_csv(runs_csv, dtype={"key": str})
    per_run = []
    for r in runs.itertuples():
        found = replicates(archive, r.key)
        ref = next((f for f in found if f[0] == "reference"), None)
        alt = next((f for f in found if f[0] != "reference" and (other is None or f[0].startswith(other))), None)
        row = {"sweep_point": r.sweep_point, "seed": r.seed, "key": r.key}
        if ref is None or alt is None:
            per_run.append(row | {"paired": False})
            continue
        ea, eb = (json.loads((f[1] / "final_eval.json").read_text()) for f in (ref, alt))
        same = sum(x == y for x, y in zip(ea["correct"], eb["correct"])) / max(len(ea["correct"]), 1)
        per_run.append(row | {"paired": True, "a": ea["summary"]["accuracy"], "b": eb["summary"]["accuracy"],
                              "identical": ref[2]["results_sha256"] == alt[2]["results_sha256"],
                              "same_items": same, "other": alt[0]})
    table = pd.DataFrame(per_run)
    rows = []
    for point, g in table.groupby("sweep_point", sort=False):
        g = g[g["paired"]] if "paired" in g else g.iloc[:0]
        if g.empty:
            rows.append({"sweep_point": point, "seeds": 0, "status": "no replicate"})
            continue
        n = len(g)
        sd_a, sd_b = (g[c].std(ddof=1) if n > 1 else math.nan for c in ("a", "b"))
        diff = 100 * (g["b"].mean() - g["a"].mean())
        se = 100 * math.sqrt(sd_a ** 2 / n + sd_b ** 2 / n) if n > 1 else math.nan
        status = ("identical" if g["identical"].all() else "consistent" if n > 1 and abs(diff) <= 1.96 * se
                  else "differs")
        rows.append({"sweep_point": point, "seeds": n, "reference_mean": g["a"].mean(), "reference_sd": sd_a,
                     "other_mean": g["b"].mean(), "other_sd": sd_b, "diff_points": diff, "se_points": se,
                     "same_items": g["same_items"].mean(), "other": g["other"].iloc[0], "status": status})
    return pd.DataFrame(rows)
