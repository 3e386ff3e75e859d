"""Rebuild an embedded base from its recipe and compare it with the committed copy: ``make base PRESET=mini``.

``python -m dgro_lib.cli.rebuild_base PRESET`` warms the preset up from scratch (every stage it continues from too, or
only its last stage with ``--from-committed-parent``) in a fresh folder under ``outputs/rebuild/``, then reports
whether its weights equal the committed base (``reference/bases/PRESET/``, :mod:`dgro_lib.models.committed`) bit
for bit; if not, the largest absolute weight difference (and which tensor), and the greedy accuracy of both models
on the warm-up's held-out records with its difference. The report is printed and written as JSON beside the
rebuild. ``--write`` makes the rebuild the committed base (after a recipe change, or to add a preset);
``--from-cache DIR`` takes an existing build from the model cache ``DIR`` instead of rebuilding (to commit a base
built by an experiment). ``--check`` exits 1 when the rebuild is not bit-equal.

A rebuild on another CPU than the committed copy's is expected to differ in the last bits, and after two warm-up
stages those bits give another model (docs/reproducibility.md has the measured differences).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from dgro_lib.util.manifest import git_info, machine_info

from dgro_lib.util.files import write_json
from dgro_lib.models.committed import commit_base, committed_bases, weights_digest
from dgro_lib.miniature.build import get_embedded_base_model
from dgro_lib.models.presets import EMBEDDED_PRESETS, config_hash
from dgro_lib.miniature.supervised import warmup_heldout
from dgro_lib.util.paths import OUTPUTS

__all__ = ["compare_weights", "compare_accuracy", "rebuild", "main"]


def compare_weights(a: Path, b: Path) -> dict:
    """Bit equality of two model folders' weights and, tensor by tensor, the largest absolute difference."""
    from safetensors.torch import load_file

    da, db = weights_digest(a), weights_digest(b)
    out = {"bit_equal": da == db, "sha256": {"rebuilt": da, "committed": db}}
    if da == db:
        return out | {"max_abs_diff": 0.0, "tensor": None}
    ta, tb = load_file(str(a / "model.safetensors")), load_file(str(b / "model.safetensors"))
    if set(ta) != set(tb):
        return out | {"max_abs_diff": None, "tensor": None,
                      "different_tensors": sorted(set(ta) ^ set(tb))}
    worst, name, differing = 0.0, None, 0
    for k in sorted(ta):
        d = (ta[k].double() - tb[k].double()).abs().max().item() if ta[k].shape == tb[k].shape else float("inf")
        differing += d > 0
        if d > worst:
            worst, name = d, k
    return out | {"max_abs_diff": worst, "tensor": name, "tensors_differing": differing, "tensors": len(ta)}


def compare_accuracy(preset: str, a: Path, b: Path, n: int) -> dict:
    """Greedy accuracy of the models in ``a`` (rebuilt) and ``b`` (committed) on ``n`` held-out records per group of
    the preset's warm-up (:func:`~dgro_lib.miniature.supervised.warmup_heldout`), and the difference in points."""
    from dgro_lib.evaluate.accuracy import evaluate_greedy
    from dgro_lib.models.loading import load_model

    cfg = EMBEDDED_PRESETS[preset]
    out = {}
    for key, records, max_new in warmup_heldout(cfg, n):
        accs, agree = {}, None
        answers = {}
        for label, path in (("rebuilt", a), ("committed", b)):
            model, tok = load_model(path)
            ev = evaluate_greedy(model, tok, records, template=cfg.template, max_new_tokens=max_new,
                                 batch_size=64, task=cfg.task)
            accs[label], answers[label] = ev["accuracy"], ev["correct"]
        agree = sum(x == y for x, y in zip(answers["rebuilt"], answers["committed"])) / len(records)
        out[key] = {"n": len(records), "rebuilt": accs["rebuilt"], "committed": accs["committed"],
                    "diff_points": round(100 * (accs["rebuilt"] - accs["committed"]), 2),
                    "same_correctness": round(agree, 4)}
    return out


def rebuild(preset: str, *, from_committed_parent: bool = False, from_cache: Path | None = None,
            n_heldout: int = 200, progress: bool = True) -> tuple[Path, dict]:
    """Rebuild ``preset`` (or take it from ``from_cache``) and compare it with its committed base."""
    if preset not in EMBEDDED_PRESETS:
        raise SystemExit(f"unknown preset {preset!r}; valid: {', '.join(sorted(EMBEDDED_PRESETS))}")
    cfg = EMBEDDED_PRESETS[preset]
    t0 = time.time()
    if from_cache is not None:
        built = Path(from_cache) / f"{cfg.arch}-{config_hash(cfg)}"
        if not (built / "embedded.json").is_file():
            raise SystemExit(f"--from-cache: no build of {preset!r} in {built}")
    else:
        folder = OUTPUTS / "rebuild" / f"{preset}-{time.strftime('%Y%m%dT%H%M%S')}"
        if from_committed_parent:
            if cfg.continue_from is None:
                raise SystemExit(f"--from-committed-parent: preset {preset!r} continues from no other preset")
            get_embedded_base_model(cfg.continue_from, folder, progress=progress)  # the committed parent
        built = get_embedded_base_model(cfg, folder, committed=False, force=True, progress=progress)
    report = {"preset": preset, "recipe_hash": config_hash(cfg), "rebuilt": str(built),
              "rebuild_seconds": round(time.time() - t0, 1) if from_cache is None else None,
              "from_committed_parent": from_committed_parent, "machine": machine_info(),
              "commit": git_info()["commit"]}
    pinned = committed_bases().get(preset)
    if pinned is None:
        report["committed"] = None
    elif pinned["config_hash"] != config_hash(cfg):
        report["committed"] = f"stale: committed recipe {pinned['config_hash']}, preset's {config_hash(cfg)}"
    else:
        report["weights"] = compare_weights(built, Path(pinned["path"]))
        if not report["weights"]["bit_equal"] and n_heldout > 0:
            report["greedy"] = compare_accuracy(preset, built, Path(pinned["path"]), n_heldout)
    return built, report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("preset", help="an embedded preset (dgro_lib.models.EMBEDDED_PRESETS)")
    parser.add_argument("--from-committed-parent", action="store_true",
                        help="start from the committed base of the preset's continue_from (rebuild the last stage)")
    parser.add_argument("--from-cache", type=Path, help="take the build from this model cache instead of rebuilding")
    parser.add_argument("--heldout", type=int, default=200,
                        help="held-out records per group for the greedy comparison when the weights differ")
    parser.add_argument("--write", action="store_true", help="make the rebuild the committed base")
    parser.add_argument("--check", action="store_true", help="exit 1 when the rebuild is not bit-equal")
    args = parser.parse_args(argv)
    built, report = rebuild(args.preset, from_committed_parent=args.from_committed_parent,
                            from_cache=args.from_cache, n_heldout=args.heldout)
    weights = report.get("weights")
    if weights is None:
        print(f"[base] {args.preset}: no committed base to compare with ({report['committed']})", flush=True)
    elif weights["bit_equal"]:
        print(f"[base] {args.preset}: the rebuild equals the committed base bit for bit "
              f"(sha256 {weights['sha256']['committed'][:12]})", flush=True)
    else:
        print(f"[base] {args.preset}: the rebuild DIFFERS from the committed base: sha256 "
              f"{weights['sha256']['rebuilt'][:12]} vs {weights['sha256']['committed'][:12]}, largest weight "
              f"difference {weights['max_abs_diff']:.3g} ({weights['tensor']})", flush=True)
        for key, g in report.get("greedy", {}).items():
            print(f"[base]   greedy on {g['n']} held-out ({key}): rebuilt {100 * g['rebuilt']:.2f} %, committed "
                  f"{100 * g['committed']:.2f} % ({g['diff_points']:+.2f} points; same correctness on "
                  f"{100 * g['same_correctness']:.1f} % of records)", flush=True)
    where = built.parent if args.from_cache is None else OUTPUTS / "rebuild"  # never into the model cache itself
    where.mkdir(parents=True, exist_ok=True)
    write_json(where / f"{args.preset}.rebuild.json", report)
    if args.write:
        m = report["machine"]
        dest = commit_base(args.preset, built, extra={
            "built_on": {k: m.get(k) for k in ("cpu_vendor", "cpu_model", "cpu_isa", "torch_threads",
                                                 "cpu_numerics")},
            "warmup_seconds_last_stage": json.loads((built / "embedded.json").read_text())["stats"].get("wall_s"),
            "committed_at_commit": report["commit"]})
        print(f"[base] {args.preset}: committed as {dest} (sha256 {weights_digest(dest)[:12]})", flush=True)
    return 1 if args.check and not (weights and weights["bit_equal"]) else 0


if __name__ == "__main__":
    sys.exit(main())
