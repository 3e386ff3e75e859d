"""Committed embedded bases: the pinned output of a warm-up recipe, like a released checkpoint.

The warm-up (:mod:`dgro_lib.miniature.supervised`) is the documented, tested way to make an embedded base, but its output depends on
the CPU it ran on: an Intel Xeon and an AMD EPYC build ``mini`` with other weights even with the AVX2 pin of
:mod:`dgro_lib.util.numerics` (docs/reproducibility.md has the measured digests). A run trained from one build can never
be restored on top of the other, so the bases every ``ci`` and ``cpu`` profile starts from are committed, in
safetensors, under ``reference/bases/<preset>/``: the ``save_pretrained`` files, the build's ``embedded.json`` and
``base.json`` (:data:`BASE_RECORD`), which names the preset, its recipe hash (:func:`~.embedded.config_hash`), the
sha256 of its weights (:func:`weights_digest`) and the machine that built it.

:func:`~.embedded.get_embedded_base_model` copies a committed base into the model cache instead of building it when
the recipe hash matches, and verifies the copy's digest. A cached model whose weights differ from the committed
copy, a committed copy whose files do not match its recorded digest, and a preset whose committed copy was made from
another recipe are errors that name the preset and both digests (or hashes): never a silent rebuild.
``python -m dgro_lib.cli.rebuild_base PRESET`` (``make base PRESET=...``) rebuilds a base from its recipe and reports
whether it equals the committed weights bit for bit.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any

from dgro_lib.util.files import atomic_dir, atomic_write
from dgro_lib.util.paths import REPO

__all__ = ["BASES", "BASE_RECORD", "BASES_ENV", "weights_digest", "bases_root", "committed_base", "committed_bases",
           "install_committed", "check_matches_committed", "commit_base", "CommittedBaseError"]

BASES = REPO / "reference" / "bases"
"""Where the committed bases live: ``reference/bases/<preset>/``."""
BASES_ENV = "DGRO_COMMITTED_BASES"
"""Environment variable: another folder of committed bases, or ``none`` to use none (every preset is built)."""
BASE_RECORD = "base.json"
"""The record beside a committed base's files: preset, recipe hash, weights digest, build machine and time."""


class CommittedBaseError(ValueError):
    """A committed base that cannot be used as it is: the message names the preset and both digests or hashes."""


@functools.lru_cache(maxsize=32)
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
    """sha256 over a local model folder's weight files (``*.safetensors``, ``*.bin``, names and bytes, in name order);
    None for a hub id, a missing folder or one without weights."""
    path = Path(model_path)
    if not path.is_dir():
        return None
    stamp = tuple((p.name, p.stat().st_mtime_ns, p.stat().st_size) for p in sorted(path.iterdir()) if p.is_file())
    return _digest(str(path.resolve()), stamp)


def bases_root() -> Path | None:
    """The folder of committed bases in force: ``DGRO_COMMITTED_BASES`` if set (``none`` = no committed bases),
    else :data:`BASES`."""
    value = os.environ.get(BASES_ENV, "")
    if value.lower() == "none":
        return None
    return Path(value) if value else BASES


def committed_bases(root: Path | None = None) -> dict[str, dict[str, Any]]:
    """Preset name -> its committed ``base.json`` record (with ``path``), for every folder of ``root``."""
    root = bases_root() if root is None else root
    if root is None or not root.is_dir():
        return {}
    out = {}
    for record in sorted(root.glob(f"*/{BASE_RECORD}")):
        meta = json.loads(record.read_text())
        out[record.parent.name] = {**meta, "path": record.parent}
    return out


def committed_base(preset_names: list[str], recipe_hash: str, root: Path | None = None) -> dict[str, Any] | None:
    """The committed record of a recipe (``recipe_hash``), or None when none is committed.

    ``preset_names`` are the preset names whose recipe this is (empty for a config that is no preset): a committed
    folder under one of those names made from *another* recipe is stale, and that is a
    :class:`CommittedBaseError` (rebuild and commit it), not a silent build of a model nobody committed."""
    bases = committed_bases(root)
    for meta in bases.values():
        if meta["config_hash"] == recipe_hash:
            return meta
    stale = [n for n in preset_names if n in bases]
    if stale:
        name = stale[0]
        raise CommittedBaseError(
            f"embedded preset {name!r}: its committed base {bases[name]['path']} was built from recipe "
            f"{bases[name]['config_hash']}, the preset's recipe is now {recipe_hash}. Rebuild and commit it "
            f"(python -m dgro_lib.cli.rebuild_base {name} --write), or set {BASES_ENV}=none to build every base here")
    return None


def _check_record(meta: dict[str, Any], folder: Path) -> None:
    got = weights_digest(folder)
    if got != meta["weights_sha256"]:
        raise CommittedBaseError(
            f"embedded preset {meta['preset']!r}: the weights in {folder} have sha256 {got}, its {BASE_RECORD} "
            f"records {meta['weights_sha256']}: the committed base is damaged (git checkout it again)")


def _copy_folder(src: Path, dest: Path, *, finish=None) -> Path:
    """``dest`` becomes a copy of ``src``'s files (not :data:`BASE_RECORD`), whole or not at all: copied into a
    temporary sibling, ``finish(tmp)`` run on it (a check, or a record to add), then renamed into place. Files are
    copied without their permission bits, so a read-only checkout still gives a writable cache."""
    with atomic_dir(dest) as tmp:
        for f in sorted(src.iterdir()):
            if f.is_file() and f.name != BASE_RECORD:
                shutil.copyfile(f, tmp / f.name)
        if finish is not None:
            finish(tmp)
    return dest


def install_committed(meta: dict[str, Any], final: Path) -> Path:
    """Copy the committed base ``meta`` into the cache folder ``final`` (through a temporary sibling, renamed into
    place), after checking the committed files against their digest and the copy against it again."""
    _check_record(meta, Path(meta["path"]))
    return _copy_folder(Path(meta["path"]), final, finish=lambda tmp: _check_record(meta, tmp))


def check_matches_committed(meta: dict[str, Any], cached: Path) -> None:
    """A cached model of a committed recipe must hold the committed weights; else a :class:`CommittedBaseError`
    naming the preset and both digests (the cache then holds a local build, e.g. from another CPU)."""
    got = weights_digest(cached)
    if got != meta["weights_sha256"]:
        raise CommittedBaseError(
            f"embedded preset {meta['preset']!r}: the cached model {cached} has weights sha256 {got}, the committed "
            f"base {meta['path']} has {meta['weights_sha256']}. The cache holds a build made here (another CPU "
            f"builds other bits). Delete {cached} to use the committed base, or compare the two with "
            f"python -m dgro_lib.cli.rebuild_base {meta['preset']}")


def commit_base(preset: str, built: Path, root: Path | None = None, *, extra: dict[str, Any] | None = None) -> Path:
    """Write the built model folder ``built`` as the committed base of ``preset`` (``root/<preset>/``, replaced
    whole), with its :data:`BASE_RECORD`; returns the folder."""
    root = BASES if root is None else root
    emb = json.loads((built / "embedded.json").read_text())
    meta = {"preset": preset, "config_hash": emb["config_hash"], "folder": built.name,
            "weights_sha256": weights_digest(built),
            "files": {f.name: f.stat().st_size for f in sorted(built.iterdir()) if f.is_file()},
            **(extra or {})}
    text = json.dumps(meta, indent=1, sort_keys=True) + "\n"
    return _copy_folder(built, root / preset,
                        finish=lambda tmp: atomic_write(tmp / BASE_RECORD, lambda tmp: tmp.write_text(text)))
