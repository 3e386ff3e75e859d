"""What an experiment starts from: the base model's path and its training / held-out puzzles."""

from __future__ import annotations

from pathlib import Path

from .config import ExperimentConfig
from .data import kk
from .models import EMBEDDED_PRESETS, get_embedded_base_model
from .paths import REPO

__all__ = ["resolve_model_path", "load_train_records", "load_eval_records", "puzzle_key"]


def resolve_model_path(cfg: ExperimentConfig) -> str:
    """The base model's path: the embedded model is built (or reused from its cache) here."""
    if cfg.model.path != "embedded":
        return cfg.model.path
    if cfg.model.embedded_preset not in EMBEDDED_PRESETS:
        raise ValueError(
            f"model.embedded_preset: {cfg.model.embedded_preset!r} is not one of {sorted(EMBEDDED_PRESETS)}"
        )
    cache_dir = Path(cfg.model.cache_dir)
    if not cache_dir.is_absolute():  # relative to the repository, not to the notebook's working directory
        cache_dir = REPO / cache_dir
    return str(get_embedded_base_model(EMBEDDED_PRESETS[cfg.model.embedded_preset], cache_dir=cache_dir))


def _records(cfg: ExperimentConfig, split: str) -> list[dict]:
    """Training or held-out puzzles of ``cfg``; training puzzles that also occur in the held-out set are dropped."""
    d = cfg.data
    people = d.train_people if split == "train" else d.eval_people
    n = d.n_train if split == "train" else d.n_eval
    seed = d.train_seed if split == "train" else d.eval_seed
    out: list[dict] = []
    for p in people:
        if d.source == "generated":
            out += kk.generate(p, n, seed=seed * 100 + p, name_order=d.name_order)
        elif d.source == "official":
            if d.official_dir is None:
                raise ValueError("data.official_dir: required when data.source is 'official'")
            out += kk.load_kk(Path(d.official_dir) / ("train" if split == "train" else "test"), people=p, limit=n)
        else:
            out += kk.load_kk_hub(subset="train" if split == "train" else "test", split=p, limit=n)
    if split == "train":
        held_out = {puzzle_key(r) for r in _records(cfg, "eval")}
        out = [r for r in out if puzzle_key(r) not in held_out]
    return out


def puzzle_key(record: dict) -> tuple:
    """What identifies a puzzle: its names and statements."""
    return (tuple(record["names"]), str(record["statements"]))


def load_train_records(cfg: ExperimentConfig) -> list[dict]:
    """The training puzzles of ``cfg`` (deterministic from ``data.train_seed``), none of them held out."""
    return _records(cfg, "train")


def load_eval_records(cfg: ExperimentConfig) -> list[dict]:
    """The held-out puzzles of ``cfg`` (deterministic from ``data.eval_seed``)."""
    return _records(cfg, "eval")
