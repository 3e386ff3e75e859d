"""Store every sample of a run's sampled final evaluation: ``python -m dgro_lib.cli.final_fractions --profile cpu``.

A sampled final evaluation (``eval.temperature`` > 0, ``n_samples`` > 1) reports avg@n as its accuracy. Runs
finished before 2026-12-07 kept per puzzle in ``final_eval.json`` only whether the *first* sample was right, so a
paired test of final accuracy used one sample of the n, while the base's evaluation and every second evaluation kept
the fraction of all n. This command re-derives the fractions of such runs from their last checkpoint
(``trainer/checkpoint-<max_steps>``, the weights the final evaluation ran on), under the protocol recorded in the
run's ``final_eval.json`` and with the same sampling seed, one torch thread per process as in training.

Nothing is taken on trust: the re-evaluation must reproduce the stored per-puzzle first-sample outcomes and the
stored accuracy exactly, or the run is reported as a mismatch and left as it is. When it does, ``correct`` becomes
the fraction of samples right (what :func:`dgro_lib.evaluate.per_item_correct` stores for a run finished today), in
the run store and in the run archive's copy of the same replicate, whose ``archived.json`` gets the new results
digest and a ``final_fractions`` note (when, at which commit, from which checkpoint). Greedy runs, runs already
stored as fractions, runs without the checkpoint and runs the archive holds as another replicate are skipped and
counted. Interrupted, it resumes where it stopped (a finished run is skipped)."""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import hashlib
import json
import multiprocessing as mp
import os
import sys
import time
from pathlib import Path

from tqdm.auto import tqdm

from dgro_lib.runs.archive import needs_fractions  # the archive refuses what this command converts

__all__ = ["needs_fractions", "rederive", "main"]


def rederive(run_dir: str | Path) -> tuple[str, dict | None]:
    """Evaluate the run in ``run_dir`` again from its last checkpoint under its final protocol; returns
    ``(status, final_eval with fractions)``: status ``ok`` (the first samples and the accuracy reproduced),
    ``mismatch: ...`` (with what differed; no document) or ``skip: ...``."""
    from dgro_lib.config.load import config_from_dict
    from dgro_lib.evaluate import per_item_correct
    from dgro_lib.runs.data_sources import load_eval_records
    from dgro_lib.runs.experiment import evaluate_checkpoint

    run_dir = Path(run_dir)
    final = json.loads((run_dir / "final_eval.json").read_text())
    if not needs_fractions(final):
        return "skip: not a sampled evaluation stored as first samples", None
    manifest = json.loads((run_dir / "manifest.json").read_text())
    # the evaluation reads the model, data, train and eval sections; a notebook's `extra` knobs (checked by its name,
    # and stricter today than when some runs were trained) play no part in it
    cfg = config_from_dict({**manifest["config"], "name": "final_fractions", "extra": {}},
                           source=str(run_dir / "manifest.json"))
    ckpt = run_dir / "trainer" / f"checkpoint-{cfg.train.max_steps}"
    if not ckpt.is_dir():
        return f"skip: no {ckpt.relative_to(run_dir)} (a restored run keeps no weights)", None
    records = load_eval_records(cfg)
    p = final["protocol"]
    if (len(records), cfg.eval.n_samples, cfg.eval.seed, cfg.eval.temperature) != (
            p["n_puzzles"], p["n_samples"], p["seed"], p["temperature"]):
        return (f"mismatch: the manifest's config gives {len(records)} puzzles, n_samples {cfg.eval.n_samples}, "
                f"seed {cfg.eval.seed}, temperature {cfg.eval.temperature}; final_eval.json's protocol {p}"), None
    ev, _ = evaluate_checkpoint(cfg, ckpt, records)
    first = list(map(bool, ev["correct"]))
    if first != final["correct"]:
        diff = sum(a != b for a, b in zip(first, final["correct"]))
        return f"mismatch: {diff} of {len(first)} first-sample outcomes differ", None
    if abs(ev["accuracy"] - final["summary"]["accuracy"]) > 1e-12:
        return f"mismatch: accuracy {ev['accuracy']} against the stored {final['summary']['accuracy']}", None
    return "ok", {**final, "correct": per_item_correct(ev),
                  "fractions_rederived": {"from": f"trainer/{ckpt.name}", "wall_s": ev["wall_s"]}}


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _job(run_dir: str) -> tuple[str, str, dict | None]:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    try:
        status, doc = rederive(run_dir)
    except Exception as exc:  # one broken run must not stop the others; it is reported
        status, doc = f"error: {type(exc).__name__}: {exc}", None
    return run_dir, status, doc


def _write(run_dir: Path, archive: Path | None, doc: dict) -> str:
    """Write ``doc`` as the run's final_eval.json in the store and, when the archive's reference replicate is this
    one (the same results digest as the store's before the change), there too; returns where it went."""
    from dgro_lib.runs.archive import ARCHIVED
    from dgro_lib.util.files import write_json
    from dgro_lib.util.manifest import git_info

    old = _sha256(run_dir / "final_eval.json")
    where = "store"
    target = archive / run_dir.name if archive is not None else None
    archived = target is not None and (target / "final_eval.json").is_file()
    if archived and _sha256(target / "final_eval.json") != old:
        archived = False
        where += " (the archive holds another replicate: left as it is)"
    write_json(run_dir / "final_eval.json", doc)
    if archived:
        write_json(target / "final_eval.json", doc)
        meta = json.loads((target / ARCHIVED).read_text())
        meta["final_fractions"] = {"rederived": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "at_commit": git_info()["commit"],
                                   "from": doc["fractions_rederived"]["from"], "results_sha256_before": old}
        meta["results_sha256"] = _sha256(target / "final_eval.json")
        write_json(target / ARCHIVED, meta)
        where += " + archive"
    return where


def main(argv: list[str] | None = None) -> int:
    from dgro_lib.util.paths import OUTPUTS, REPO

    ap = argparse.ArgumentParser(prog="python -m dgro_lib.cli.final_fractions", description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", default="cpu",
                    help="whose run store and archive (outputs/<p>/runs, reference/<p>/runs)")
    ap.add_argument("--workers", type=int, default=2, help="processes, one torch thread each")
    ap.add_argument("--keys", nargs="*", help="only these run keys")
    args = ap.parse_args(argv)
    store = OUTPUTS / args.profile / "runs"
    archive = REPO / "reference" / args.profile / "runs"
    if not store.is_dir():
        raise SystemExit(f"--profile {args.profile}: no run store at {store}")
    dirs = [store / k for k in args.keys] if args.keys else sorted(p for p in store.iterdir() if p.is_dir())
    missing = [str(d) for d in dirs if not (d / "final_eval.json").is_file()]
    if args.keys and missing:
        raise SystemExit(f"--keys: not finished runs (no final_eval.json): {missing}")
    todo = [d for d in dirs if (d / "final_eval.json").is_file()
            and needs_fractions(json.loads((d / "final_eval.json").read_text()))]
    print(f"[final_fractions] {len(todo)} of {len(dirs)} runs hold first-sample outcomes of a sampled evaluation",
          flush=True)
    counts: dict[str, int] = {}
    with cf.ProcessPoolExecutor(max_workers=max(1, args.workers), mp_context=mp.get_context("spawn")) as pool:
        futures = [pool.submit(_job, str(d)) for d in todo]
        for fut in tqdm(cf.as_completed(futures), total=len(futures), desc="final evaluations", mininterval=5):
            run_dir, status, doc = fut.result()
            kind = status.split(":")[0]
            counts[kind] = counts.get(kind, 0) + 1
            if doc is not None:
                status += ": " + _write(Path(run_dir), archive if archive.is_dir() else None, doc)
            print(f"[final_fractions] {Path(run_dir).name}: {status}", flush=True)
    print(f"[final_fractions] done: {counts}", flush=True)
    return 1 if counts.get("mismatch") or counts.get("error") else 0


if __name__ == "__main__":
    sys.exit(main())
