"""Files written whole or not at all: a killed process leaves the old file (or none), never half of one that a
resumed run would take for a result. Torch-free, so the report floor writes through it too."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable, Iterator

__all__ = ["atomic_path", "atomic_dir", "atomic_write", "write_json"]


@contextlib.contextmanager
def atomic_path(path: str | Path, *, suffix: str = ".tmp") -> Iterator[Path]:
    """Yield a temporary path in ``path``'s folder to write to; on a clean exit it replaces ``path`` (``os.replace``,
    atomic on one filesystem), on an exception it is removed and ``path`` is left as it was. A process killed
    while writing leaves the old file (or none) plus at most a hidden ``.<name>.*.tmp`` — never half a file under
    ``path``. The temp name ends in ``suffix``: writers that infer a format from it (savefig) need it explicitly."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=suffix, dir=path.parent)
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        with open(tmp, "rb+") as fh:  # the data is on disk before the rename makes it visible
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp makes 0600; give the file the mode a plain open() would
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


@contextlib.contextmanager
def atomic_dir(path: str | Path) -> Iterator[Path]:
    """Yield an empty temporary sibling folder of ``path`` to fill; on a clean exit it replaces ``path`` (an old
    folder there is removed, then the rename, atomic on one filesystem), on an exception it is removed and ``path``
    is left as it was. Readers see the old folder, then the new one, never half of one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.tmp-", dir=path.parent))
    try:
        yield tmp
        if path.exists():
            shutil.rmtree(path)
        os.rename(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _read_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_UMASK = _read_umask()  # read once at import: os.umask is process-wide, changing it later races other threads


def atomic_write(path: str | Path, writer: Callable[[Path], Any]) -> Path:
    """``writer(tmp)`` writes the whole file to ``tmp``; ``path`` then gets it atomically (see :func:`atomic_path`)."""
    with atomic_path(path) as tmp:
        writer(tmp)
    return Path(path)


def write_json(path: str | Path, obj: Any) -> None:
    """Write ``obj`` as JSON through a temporary file and a rename, so a killed process never leaves half a file
    that a resumed run would take for a result."""
    text = json.dumps(obj, indent=1, default=str)  # serialise first: a non-JSON object leaves nothing behind
    with atomic_path(path) as tmp:
        tmp.write_text(text)
