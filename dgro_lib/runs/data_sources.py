"""What an experiment starts from: the base model's path and its training / held-out records (K&K puzzles or math
problems, :mod:`dgro_lib.tasks`)."""

from __future__ import annotations

from pathlib import Path

from dgro_lib.config.schema import ExperimentConfig
from dgro_lib.config.checks import eval_placement
from dgro_lib.models import EMBEDDED_PRESETS, config_hash, load_model, load_tokenizer
from dgro_lib.models.presets import preset_names
from dgro_lib.miniature import get_embedded_base_model
from dgro_lib.models.committed import committed_base, weights_digest
from dgro_lib.util.paths import REPO
from dgro_lib.tasks import get_task, puzzle_key

__all__ = ["resolve_model_path", "model_identity", "expected_base_digest", "load_train_records", "load_eval_records",
           "load_eval_model", "close_eval_model", "puzzle_key"]


def model_identity(cfg: ExperimentConfig, model_path: str) -> str:
    """What names the base model in a store key: the embedded cache folder's name (arch + recipe hash), or the
    path / hub id as given."""
    return Path(model_path).name if cfg.model.path == "embedded" else model_path


def resolve_model_path(cfg: ExperimentConfig) -> str:
    """The base model's path: the embedded model is built (or reused from its cache) here."""
    if cfg.model.path != "embedded":
        return cfg.model.path
    if cfg.model.embedded_preset not in EMBEDDED_PRESETS:
        raise ValueError(
            f"model.embedded_preset: {cfg.model.embedded_preset!r} is not one of {sorted(EMBEDDED_PRESETS)}"
        )
    return str(get_embedded_base_model(EMBEDDED_PRESETS[cfg.model.embedded_preset], cache_dir=_cache_dir(cfg)))


def _cache_dir(cfg: ExperimentConfig) -> Path:
    cache_dir = Path(cfg.model.cache_dir)
    return cache_dir if cache_dir.is_absolute() else REPO / cache_dir  # not the notebook's working directory


def expected_base_digest(cfg: ExperimentConfig) -> str | None:
    """The weights digest the base model of ``cfg`` has, or will have once built, without building it: a local
    model folder's own; for the embedded model the cached build's, else its committed base's (None when it would be
    built here, or for a hub id)."""
    if cfg.model.path != "embedded":
        return weights_digest(cfg.model.path)
    preset = EMBEDDED_PRESETS.get(cfg.model.embedded_preset)
    if preset is None:
        return None
    cached = _cache_dir(cfg) / f"{preset.arch}-{config_hash(preset)}"
    if (cached / "embedded.json").is_file():
        return weights_digest(cached)
    pinned = committed_base(preset_names(preset), config_hash(preset))
    return None if pinned is None else pinned["weights_sha256"]


def _records(cfg: ExperimentConfig, split: str) -> list[dict]:
    """Training or held-out records of ``cfg`` (its task's loader); training records that also occur in the held-out
    set are dropped."""
    task = get_task(cfg.data.task)
    out = task.load(cfg, split)
    if split == "train":
        held_out = {puzzle_key(r) for r in task.load(cfg, "eval")}
        out = [r for r in out if puzzle_key(r) not in held_out]
    return out


def load_train_records(cfg: ExperimentConfig) -> list[dict]:
    """The training records of ``cfg`` (deterministic from ``data.train_seed``), none of them held out."""
    return _records(cfg, "train")


def load_eval_records(cfg: ExperimentConfig) -> list[dict]:
    """The held-out records of ``cfg`` (deterministic from ``data.eval_seed``)."""
    return _records(cfg, "eval")


def load_eval_model(cfg: ExperimentConfig, path: str | Path):
    """(model, tokenizer) that an evaluation outside the trainer runs on, under ``cfg.eval.engine``: ``hf`` loads
    the checkpoint where :func:`~dgro_lib.config.checks.eval_placement` puts it (the GPU in bf16 with ``train.bf16``, else
    the CPU in fp32); ``vllm`` starts vLLM's offline engine on it
    (:class:`~dgro_lib.evaluate.vllm_engine.VLLMEvalModel`, ``max_model_len`` = ``train.max_prompt_length +
    eval.max_new_tokens``). Release it with :func:`close_eval_model` before the next one starts."""
    device, dtype = eval_placement(cfg)
    if cfg.eval.engine == "vllm":
        from dgro_lib.evaluate.vllm_engine import VLLMEvalModel  # vLLM is imported only when this engine is asked for

        model = VLLMEvalModel(str(path), max_model_len=cfg.train.max_prompt_length + cfg.eval.max_new_tokens,
                              dtype="bfloat16" if cfg.train.bf16 else "float32", seed=cfg.eval.seed)
        return model, load_tokenizer(str(path))
    return load_model(path, device=device, dtype=dtype)


def close_eval_model(model) -> None:
    """Free what :func:`load_eval_model` returned (an engine's GPU memory; an HF model is left to the collector)."""
    close = getattr(model, "close", None)
    if callable(close):
        close()
