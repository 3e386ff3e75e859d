"""The embedded default model: its config and presets, construction, and the on-disk model cache.

The ``cpu`` profile must run offline on two cores, so the project ships an *embedded* base model: the word-level
tokenizer of :mod:`dgro_lib.models.tokenizer`, a ~1M-parameter Llama (or Qwen2) model, and a supervised warm-up (:mod:`.supervised`)
on generated puzzles with explicit reasoning traces (:mod:`dgro_lib.data.kk.trace`). :func:`get_embedded_base_model`
builds it once and caches it as an ordinary ``save_pretrained`` directory, so everything downstream loads it exactly
like a real checkpoint via :func:`~dgro_lib.models.loading.load_model`. docs/embedded-model.md describes the
presets and what each recipe measured.
"""

from __future__ import annotations

import json
import platform
from pathlib import Path

import tokenizers
import torch
import transformers
from filelock import FileLock
from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

from dgro_lib import __version__
from dgro_lib.models.committed import check_matches_committed, committed_base, install_committed
from dgro_lib.models.loading import load_model
from dgro_lib.models.presets import (ARCH_FIELDS, EmbeddedModelConfig, config_hash, preset_names,
                                     resolve_preset)
from dgro_lib.models.tokenizer import build_embedded_tokenizer, build_math_tokenizer
from dgro_lib.util.files import atomic_dir
from dgro_lib.miniature.supervised import warmup

__all__ = ["build_tiny_model", "embedded_tokenizer", "get_embedded_base_model"]

def build_tiny_model(cfg: EmbeddedModelConfig, vocab_size: int | None = None, tokenizer=None):
    """A randomly initialised Qwen2ForCausalLM / LlamaForCausalLM (tied embeddings), seeded by cfg.seed.

    vocab_size defaults to ``len(tokenizer)``; the tokenizer also supplies pad/eos ids.
    """
    if vocab_size is None:
        if tokenizer is None:
            raise ValueError("build_tiny_model needs vocab_size or tokenizer")
        vocab_size = len(tokenizer)
    ids = {}
    if tokenizer is not None:
        ids = {"pad_token_id": tokenizer.pad_token_id, "eos_token_id": tokenizer.eos_token_id, "bos_token_id": None}
    kw = dict(vocab_size=vocab_size, hidden_size=cfg.hidden, intermediate_size=cfg.intermediate,
              num_hidden_layers=cfg.layers, num_attention_heads=cfg.heads, num_key_value_heads=cfg.kv_heads,
              max_position_embeddings=cfg.max_position, tie_word_embeddings=True, **ids)
    torch.manual_seed(cfg.seed)  # init is the first thing the seed decides
    if cfg.arch == "qwen2":
        model = Qwen2ForCausalLM(Qwen2Config(**kw))  # q/k/v biases are built in
    else:
        model = LlamaForCausalLM(LlamaConfig(attention_bias=cfg.attention_bias, **kw))
    if tokenizer is not None:
        model.generation_config.pad_token_id = tokenizer.pad_token_id
        model.generation_config.eos_token_id = tokenizer.eos_token_id
        model.generation_config.bos_token_id = None
    return model


def embedded_tokenizer(cfg: EmbeddedModelConfig | str):
    """The tokenizer a cfg (or preset name) builds its model on (see ``EmbeddedModelConfig.vocabulary``)."""
    cfg = resolve_preset(cfg)
    if cfg.task == "math":
        return build_math_tokenizer(cfg.template)
    if cfg.vocabulary == "own":
        return build_embedded_tokenizer(cfg.template, cfg.name_order)
    return build_embedded_tokenizer()


def _versions() -> dict[str, str]:
    return {"torch": torch.__version__, "transformers": transformers.__version__,
            "tokenizers": tokenizers.__version__, "dgro_lib": __version__,
            "python": platform.python_version()}


def get_embedded_base_model(cfg: EmbeddedModelConfig | str = "cpu", cache_dir: str | Path = "outputs/models", *,
                            force: bool = False, progress: bool = True, committed: bool = True) -> Path:
    """The embedded model's directory: cached, else copied from its committed base, else built and warmed up.

    The directory ``cache_dir/<arch>-<config_hash(cfg)>`` holds ``save_pretrained`` model and tokenizer
    files plus ``embedded.json`` (cfg, warm-up stats, library versions). When ``committed`` and the recipe has a
    committed base (:mod:`dgro_lib.models.committed`, ``reference/bases/<preset>/``), that copy is installed instead of a build, and
    a cached model of that recipe must hold the committed weights (an error naming both digests otherwise).
    ``force`` or ``committed=False`` builds this stage from its recipe (:mod:`dgro_lib.cli.rebuild_base`); with
    ``committed=False`` an uncached stage it continues from is built too. Concurrent builders of the same cfg serialize on a file lock; a build is written
    to a temporary directory and renamed into place, so a crash never leaves a half-written model that looks
    complete. ``cfg`` may be a preset name.
    """
    cfg = resolve_preset(cfg)
    cache_dir = Path(cache_dir)
    cache_dir.mkdir(parents=True, exist_ok=True)
    final = cache_dir / f"{cfg.arch}-{config_hash(cfg)}"
    marker = final / "embedded.json"
    pinned = committed_base(preset_names(cfg), config_hash(cfg)) if committed and not force else None
    if marker.exists() and not force:
        if pinned is not None:
            check_matches_committed(pinned, final)
        return final
    with FileLock(str(final) + ".lock"):
        if marker.exists() and not force:  # another process built it while we waited
            if pinned is not None:
                check_matches_committed(pinned, final)
            return final
        if pinned is not None:
            if progress:
                print(f"[embedded] {cfg.arch}-{config_hash(cfg)}: the committed base {pinned['path']} "
                      f"(weights sha256 {pinned['weights_sha256'][:12]}), not rebuilt", flush=True)
            return install_committed(pinned, final)
        if cfg.continue_from is None:
            tokenizer = embedded_tokenizer(cfg)
            model = build_tiny_model(cfg, tokenizer=tokenizer)
        else:  # a second warm-up stage on top of the parent preset's model
            parent = resolve_preset(cfg.continue_from)
            diff = [f for f in ARCH_FIELDS if getattr(parent, f) != getattr(cfg, f)]
            if diff:
                raise ValueError(f"continue_from={cfg.continue_from!r}: architecture fields differ from the parent's: "
                                 + ", ".join(f"{f} {getattr(cfg, f)!r} != {getattr(parent, f)!r}" for f in diff))
            model, tokenizer = load_model(get_embedded_base_model(parent, cache_dir, progress=progress,
                                                                  committed=committed))
        stats = warmup(model, tokenizer, cfg, progress=progress)
        with atomic_dir(final) as tmp:  # replaces a folder left by force=True, or a stale one without a marker
            model.save_pretrained(tmp)
            tokenizer.save_pretrained(tmp)
            (tmp / "embedded.json").write_text(json.dumps(
                {"cfg": cfg.to_dict(), "config_hash": config_hash(cfg), "stats": stats,
                 "versions": _versions()}, indent=1))
    return final
