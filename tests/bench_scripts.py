"""The scripts of ``bench/`` as modules, for the tests of their arithmetic (``bench/`` is not a package)."""

import importlib.util
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench"


def load(name: str):
    """``bench/<name>.py`` imported as a module named ``name``."""
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
