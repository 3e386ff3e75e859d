"""Loading any HF-format causal LM (a local directory or a hub id), optionally wrapped with LoRA adapters."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedTokenizerFast

from dgro_lib.util.paths import is_hub_id

__all__ = ["load_model", "load_tokenizer"]


def _source(path: str | Path) -> tuple[Path, str]:
    """(local path, what from_pretrained loads) for a local HF-format directory or a hub id; FileNotFoundError
    naming ``path`` otherwise."""
    p = Path(path).expanduser()
    if not p.exists() and (isinstance(path, Path) or not is_hub_id(str(path))):
        raise FileNotFoundError(f"model path does not exist: {str(path)!r}")
    if p.exists() and not (p / "config.json").exists():
        raise FileNotFoundError(f"not an HF model directory (no config.json): {str(p)!r}")
    return p, str(p) if p.exists() else str(path)


def _tokenizer(p: Path, src: str):
    if p.exists() and (p / "embedded.json").exists():
        # Our word-level tokenizer, loaded as saved: AutoTokenizer would swap in Qwen2Tokenizer for
        # qwen2-type configs (see EmbeddedModelConfig.arch).
        tokenizer = PreTrainedTokenizerFast.from_pretrained(src)
    else:
        tokenizer = AutoTokenizer.from_pretrained(src)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"
    return tokenizer


def load_tokenizer(path: str | Path):
    """The tokenizer :func:`load_model` would return, without loading the weights (a 7B checkpoint takes minutes and
    tens of GB): for a caller that first asks whether the model is one it can handle."""
    p, src = _source(path)
    try:
        return _tokenizer(p, src)
    except OSError as e:  # hub id unreachable or unknown
        raise FileNotFoundError(f"model {str(path)!r} is not a local directory and could not be loaded "
                                f"from the hub: {e}") from e


def load_model(path: str | Path, *, peft: dict | Any | None = None, dtype: torch.dtype = torch.float32,
               device: str | torch.device = "cpu"):
    """Load (model, tokenizer) from a local HF-format directory or a hub id, in ``dtype`` on ``device``.

    Training loads on the CPU in fp32 (the trainer places it); an evaluation passes the placement of
    :func:`dgro_lib.config.eval_placement` (the GPU, in bf16 where the config trains in bf16).

    peft: None, a ``peft.LoraConfig``, or a dict with ``r``, ``alpha``, ``target_modules`` (default
    "all-linear"), ``dropout`` -> the model is wrapped with ``get_peft_model``.
    The tokenizer gets a pad token (EOS when it has none) and left padding, as generation needs.
    Raises FileNotFoundError naming ``path`` when it is neither an existing directory nor loadable
    from the hub.
    """
    p, src = _source(path)
    try:
        # straight onto the GPU (no full host copy first); on the CPU, from_pretrained's own default placement
        on_cpu = torch.device(device).type == "cpu"
        model = AutoModelForCausalLM.from_pretrained(src, dtype=dtype, **({} if on_cpu else {"device_map": device}))
        tokenizer = _tokenizer(p, src)
    except OSError as e:  # hub id unreachable or unknown
        raise FileNotFoundError(f"model {str(path)!r} is not a local directory and could not be loaded "
                                f"from the hub: {e}") from e
    if peft is not None:
        from peft import LoraConfig, get_peft_model  # imported only when LoRA is asked for

        if isinstance(peft, dict):
            unknown = set(peft) - {"r", "alpha", "target_modules", "dropout"}
            if unknown:
                raise ValueError(f"unknown peft keys {sorted(unknown)}; valid: r, alpha, target_modules, dropout")
            peft = LoraConfig(r=peft.get("r", 8), lora_alpha=peft.get("alpha", 16),
                              target_modules=peft.get("target_modules", "all-linear"),
                              lora_dropout=peft.get("dropout", 0.0), task_type="CAUSAL_LM")
        model = get_peft_model(model, peft)
    model.eval()
    return model, tokenizer

