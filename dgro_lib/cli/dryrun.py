"""Validate paper-scale params without a GPU: ``python -m dgro_lib.cli.reproduce --profile paper --dry-run``.

For every ``params/<profile>/*.yaml`` and every sweep point: the config parses and validates; the model's
architecture resolves (its ``config.json`` from a local directory or the Hugging Face cache when present,
else this module's table of the papers' checkpoints, else an error); the batch arithmetic is consistent
(prompts x G rows over processes x updates_per_rollout optimizer steps x micro-batches); and it
prints, per rank, an estimate of GPU memory and the optimizer updates per rollout batch, with warnings — in
particular where DGRO's beta2 would be inert (one on-policy update per rollout batch).

The memory model (bytes per parameter, mixed precision as DeepSpeed/FSDP run it): bf16 weights 2, bf16
gradients 2, fp32 master weights + Adam moments 12; ZeRO-2 partitions gradients and optimizer states over
the ranks, ZeRO-3 and FSDP (full shard) the weights too, plain DDP nothing; LoRA trains only the adapters.
Activations (Korthikanti et al. 2022, flash attention): 34·s·h bytes per token per layer without
checkpointing; with checkpointing 2·s·h per layer plus one layer's 34·s·h. The LM head's fp32 logits are
counted for one chunk of 4096 tokens (TRL 1.16 computes log-probs through a chunked fused head). The
generation KV cache is 2·layers·kv_heads·head_dim·2 bytes per token for all rows of a rank (HF generate) or
the vLLM share of the GPU (colocate). With vLLM colocated, the KV cache of one sequence of the context vLLM
reserves (``vllm_max_model_length``: prompt + completion lengths, else the model's whole ``max_position_embeddings``)
must fit in that share less vLLM's bf16 copy of the weights, or vLLM refuses to start: such a config fails the dry
run. DeepSpeed ZeRO in bf16 adds an fp32 gradient partition (4 bytes per trainable parameter over the ranks), and
ZeRO-3 the layers it gathers for a forward pass (up to ``stage3_max_live_parameters``, 1e9, in bf16). Extra rollouts
appended to the batch (DCPO's J2/J4) lengthen every micro-batch and the generation by their share of the prompts.
The evaluations after training hold the whole model and the KV cache of one ``eval.batch_size`` batch per GPU
(with ``eval.engine: vllm``, the engine's fixed share of the GPU, in which one sequence of prompt + budget must fit); the
host RAM per rank is the fp32 model while it loads (partitioned as it loads under ZeRO-3, a full copy per rank
otherwise), and per node that times the ranks. These are estimates to catch configs that cannot fit, not a
profiler.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from huggingface_hub import try_to_load_from_cache
from transformers import AutoConfig

from dgro_lib.config import ExperimentConfig, expand_sweep, load_config, uses_reference_model, vllm_max_model_length
from dgro_lib.evaluate.vllm_engine import VLLM_GPU_MEMORY_UTILIZATION
from dgro_lib.losses import loss_entry
from dgro_lib.util.paths import PARAMS

__all__ = ["KNOWN_ARCHITECTURES", "Architecture", "resolve_architecture", "estimate", "dry_run"]

GiB = 1024 ** 3


@dataclass(frozen=True)
class Architecture:
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    intermediate: int
    vocab: int
    tied: bool
    qkv_bias: bool = True
    explicit_head_dim: int | None = None
    source: str = ""
    max_positions: int | None = None
    """``max_position_embeddings``: the context vLLM reserves when its max model length is not set."""

    @property
    def head_dim(self) -> int:
        return self.explicit_head_dim or self.hidden // self.heads

    def n_params(self) -> int:
        h, q, kv = self.hidden, self.heads * self.head_dim, self.kv_heads * self.head_dim
        attn = h * q + 2 * h * kv + q * h + ((q + 2 * kv) if self.qkv_bias else 0)
        mlp = 3 * h * self.intermediate
        per_layer = attn + mlp + 2 * h
        emb = self.vocab * h
        return self.layers * per_layer + emb * (1 if self.tied else 2) + h


# The papers' checkpoints, from their config.json files (hidden, layers, heads, kv heads, intermediate, vocab, tied,
# max_position_embeddings).
KNOWN_ARCHITECTURES: dict[str, Architecture] = {
    "Qwen/Qwen2.5-7B-Instruct-1M": Architecture(3584, 28, 28, 4, 18944, 152064, False, max_positions=1010000),
    "Qwen/Qwen2.5-7B": Architecture(3584, 28, 28, 4, 18944, 152064, False, max_positions=131072),
    "Qwen/Qwen2.5-7B-Instruct": Architecture(3584, 28, 28, 4, 18944, 152064, False, max_positions=32768),
    "Qwen/Qwen2.5-Math-7B": Architecture(3584, 28, 28, 4, 18944, 152064, False, max_positions=4096),
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-7B": Architecture(3584, 28, 28, 4, 18944, 152064, False,
                                                            max_positions=131072),
    "Qwen/Qwen3-4B": Architecture(2560, 36, 32, 8, 9728, 151936, True, qkv_bias=False, explicit_head_dim=128,
                                  max_positions=40960),
    "Qwen/Qwen2.5-0.5B": Architecture(896, 24, 14, 2, 4864, 151936, True, max_positions=32768),
}


def _from_hf_config(c: Any, source: str) -> Architecture:
    c = c.get_text_config() if hasattr(c, "get_text_config") else c
    return Architecture(
        hidden=c.hidden_size, layers=c.num_hidden_layers, heads=c.num_attention_heads,
        kv_heads=getattr(c, "num_key_value_heads", None) or c.num_attention_heads,
        intermediate=c.intermediate_size, vocab=c.vocab_size, tied=bool(getattr(c, "tie_word_embeddings", False)),
        qkv_bias=bool(getattr(c, "attention_bias", c.model_type.startswith("qwen2"))),
        explicit_head_dim=getattr(c, "head_dim", None), source=source,
        max_positions=getattr(c, "max_position_embeddings", None),
    )


def resolve_architecture(path: str) -> Architecture:
    """The architecture of ``model.path``: a local directory's config.json, the HF cache's, or the table above."""
    p = Path(path).expanduser()
    if p.is_dir():
        if not (p / "config.json").is_file():
            raise FileNotFoundError(f"model.path {path!r} is a directory without config.json")
        return _from_hf_config(AutoConfig.from_pretrained(str(p)), f"{p}/config.json")
    try:
        cached = try_to_load_from_cache(path, "config.json")
    except Exception:  # not a valid repo id, or no cache
        cached = None
    if isinstance(cached, str) and Path(cached).is_file():
        return _from_hf_config(AutoConfig.from_pretrained(str(Path(cached).parent)), f"HF cache ({cached})")
    if path in KNOWN_ARCHITECTURES:
        a = KNOWN_ARCHITECTURES[path]
        return Architecture(**{**a.__dict__, "source": "dgro_lib.cli.dryrun.KNOWN_ARCHITECTURES"})
    raise ValueError(f"model.path {path!r}: no local config.json, not in the HF cache, and not one of the known "
                     f"architectures ({', '.join(KNOWN_ARCHITECTURES)}); download its config.json to check it")


def _lora_params(arch: Architecture, peft: dict) -> int:
    r = int(peft.get("r", 8))
    targets = peft.get("target_modules", "all-linear")
    h, q, kv, i = arch.hidden, arch.heads * arch.head_dim, arch.kv_heads * arch.head_dim, arch.intermediate
    shapes = {"q_proj": (h, q), "k_proj": (h, kv), "v_proj": (h, kv), "o_proj": (q, h),
              "gate_proj": (h, i), "up_proj": (h, i), "down_proj": (i, h)}
    names = list(shapes) if targets == "all-linear" else list(targets)
    return arch.layers * sum(r * (shapes[n][0] + shapes[n][1]) for n in names if n in shapes)


def estimate(cfg: ExperimentConfig, arch: Architecture) -> dict[str, Any]:
    """Batch arithmetic and per-rank GPU memory (GiB) of one concrete config; see the module docstring."""
    t = cfg.train
    rows = t.prompts_per_step * t.num_generations
    n = t.num_processes
    micro = t.micro_batch_size or rows // (n * t.updates_per_rollout)
    updates = t.num_iterations * t.updates_per_rollout
    P = arch.n_params()
    trainable = _lora_params(arch, cfg.model.peft) if cfg.model.peft else P
    wbytes = 2 if t.bf16 else 4
    shard_w = n if t.distributed in ("zero3", "fsdp") else 1
    shard_go = n if t.distributed in ("zero2", "zero3", "fsdp") else 1
    weights = P * wbytes / shard_w
    grads = trainable * wbytes / shard_go
    optim = trainable * 12 / shard_go
    uses_ref = uses_reference_model(cfg)
    ref = (P * wbytes / shard_w) if (uses_ref and not cfg.model.peft) else 0.0
    prompt_len = t.max_prompt_length or 512
    s = prompt_len + t.max_completion_length
    h, L = arch.hidden, arch.layers
    # Extra rollouts appended to the batch (DCPO's J2/J4: a second sampling of a share of the prompts) make every
    # micro-batch that much longer; AEPO's replace them and keep its size.
    spec = loss_entry(cfg.loss.name).extra_rollouts(cfg.loss.kwargs) if cfg.kind == "train" else None
    extra = 0.0
    if spec is not None and spec.placement == "append":
        extra = spec.fraction if spec.max_rows is None else min(spec.fraction, spec.max_rows / rows)
    fwd_rows = micro * (1 + extra)
    if t.gradient_checkpointing:
        act = fwd_rows * s * h * (2 * L + 34)
    else:
        act = fwd_rows * s * h * 34 * L
    logits = min(fwd_rows * s, 4096) * arch.vocab * 4
    kv_per_token = 2 * L * arch.kv_heads * arch.head_dim * 2
    # DeepSpeed ZeRO with bf16 keeps an fp32 gradient partition for the optimizer beside the bf16 gradients
    # (grad_accum_dtype fp32); ZeRO-3 also gathers whole layers for each forward, up to stage3_max_live_parameters
    # (1e9 by default) at once.
    zero_fp32_grads = trainable * 4 / shard_go if t.distributed in ("zero2", "zero3") and t.bf16 else 0.0
    zero3_live = min(P, 1e9) * wbytes if t.distributed == "zero3" else 0.0
    # Host RAM of one rank while the model loads: fp32 weights, partitioned as they load under ZeRO-3 (zero.Init;
    # the run builds TrainingArguments before the model), a full copy per rank otherwise.
    host = P * 4 / (n if t.distributed == "zero3" else 1)
    if t.use_vllm and t.vllm_mode == "colocate":
        gen = t.vllm_gpu_memory_utilization * t.gpu_memory_gb * GiB
        gen_note = f"vLLM colocate share {t.vllm_gpu_memory_utilization:.2f}"
    elif t.use_vllm:
        gen, gen_note = 0.0, "vLLM server (separate GPUs)"
    else:
        gen = kv_per_token * s * (rows // n) * (1 + extra)
        gen_note = "HF generate KV cache"
    if cfg.kind == "eval":  # inference only: weights and the generation cache of one eval batch
        grads = optim = ref = act = logits = 0.0
        updates = 0
        micro = min(cfg.eval.batch_size * cfg.eval.n_samples, cfg.eval.batch_size)
        s = prompt_len + cfg.eval.max_new_tokens
        if not t.use_vllm:
            gen, gen_note = kv_per_token * s * micro, "HF generate KV cache (eval batch)"
    if cfg.kind == "eval":
        zero_fp32_grads = zero3_live = 0.0
        host = P * wbytes
    total = weights + grads + optim + zero_fp32_grads + zero3_live + ref + act + logits + gen
    # The evaluations after training (separate processes, one model per GPU, bf16 with train.bf16): the whole model
    # and the KV cache of one evaluation batch of prompts.
    e = cfg.eval
    eval_mem = P * wbytes + kv_per_token * (prompt_len + e.max_new_tokens) * e.batch_size
    if e.engine == "vllm":  # vLLM's engine takes its fixed share and batches within it
        eval_share = VLLM_GPU_MEMORY_UTILIZATION * t.gpu_memory_gb * GiB
        eval_ctx = prompt_len + e.max_new_tokens
        if kv_per_token * eval_ctx > eval_share - 2 * P:
            raise ValueError(f"eval.engine vllm: the KV cache of one {eval_ctx:,}-token sequence "
                             f"(train.max_prompt_length + eval.max_new_tokens) needs "
                             f"{kv_per_token * eval_ctx / GiB:.1f} GiB, more than the engine's share of the GPU "
                             f"leaves after the weights ({(eval_share - 2 * P) / GiB:.1f} GiB)")
        eval_mem = eval_share
    vllm_kv = _vllm_kv_cache(cfg, arch, P, kv_per_token, gen) if t.use_vllm and cfg.kind == "train" else {}
    warnings = []
    inert = loss_entry(cfg.loss.name).on_policy_inert(cfg.loss.kwargs)
    if inert and updates == 1:
        warnings.append(f"{', '.join(inert)} {'is' if len(inert) == 1 else 'are'} inert: one on-policy update per rollout batch (num_iterations x "
                        f"updates_per_rollout = 1), so the term it weighs (distance to pi_old) has zero gradient")
    if total > t.gpu_memory_gb * GiB:
        warnings.append(f"estimated {total / GiB:.1f} GiB per rank exceeds train.gpu_memory_gb = {t.gpu_memory_gb}")
    if eval_mem > t.gpu_memory_gb * GiB:
        warnings.append(f"the evaluation needs an estimated {eval_mem / GiB:.1f} GiB (weights and the KV cache of "
                        f"eval.batch_size = {e.batch_size} prompts), more than train.gpu_memory_gb = "
                        f"{t.gpu_memory_gb}: lower eval.batch_size")
    if n == 1 and P > 1e9 and cfg.kind == "train":
        warnings.append("a > 1B-parameter model on one process: set train.num_processes / train.distributed")
    if t.max_prompt_length is None:
        warnings.append("train.max_prompt_length unset: activations estimated with 512 prompt tokens")
    return {
        "params_B": P / 1e9, "trainable_B": trainable / 1e9, "rows_per_rollout": rows, "processes": n,
        "micro_batch_per_rank": micro, "updates_per_rollout": updates, "seq_len": s,
        "weights_GiB": weights / GiB, "grads_GiB": grads / GiB, "optim_GiB": optim / GiB, "ref_GiB": ref / GiB,
        "activations_GiB": act / GiB, "logits_GiB": logits / GiB, "generation_GiB": gen / GiB,
        "extra_rows": extra, "zero_fp32_grads_GiB": zero_fp32_grads / GiB, "zero3_live_GiB": zero3_live / GiB,
        "eval_GiB": eval_mem / GiB, "host_GiB_per_rank": host / GiB, "host_GiB_node": host * n / GiB,
        "generation": gen_note, "total_GiB": total / GiB, "gpu_GiB": t.gpu_memory_gb, **vllm_kv, "warnings": warnings,
    }


def _vllm_kv_cache(cfg: ExperimentConfig, arch: Architecture, n_params: int, kv_per_token: int,
                   share: float) -> dict[str, Any]:
    """vLLM's KV cache for one sequence of the context it reserves, against the room a colocate share leaves.

    vLLM refuses to start when the cache of one max-length sequence does not fit in its share of the GPU after its
    own bf16 copy of the weights (tensor parallel 1, as TRL colocates it); its activation peak and CUDA graphs come
    on top, so passing this is necessary, not sufficient. A server (``vllm_mode: server``) sizes its own context
    (``--max-model-len``), so only the need is reported. Raises ValueError naming the settings when it cannot fit."""
    t = cfg.train
    context, setting = vllm_max_model_length(cfg), "train.max_prompt_length + train.max_completion_length"
    if context is None:
        context, setting = arch.max_positions, "the model's max_position_embeddings: train.max_prompt_length is unset"
    if context is None:
        raise ValueError("train.use_vllm: the context vLLM reserves is unknown (train.max_prompt_length unset and no "
                         f"max_position_embeddings for {cfg.model.path!r}); set train.max_prompt_length")
    need = kv_per_token * context
    out = {"vllm_context": context, "vllm_kv_GiB": need / GiB}
    if t.vllm_mode != "colocate":
        return out
    room = share - 2 * n_params
    out["vllm_kv_room_GiB"] = room / GiB
    if need > room:
        raise ValueError(
            f"vLLM colocate: the KV cache of one {context:,}-token sequence ({setting}) needs {need / GiB:.1f} GiB, "
            f"but train.vllm_gpu_memory_utilization {t.vllm_gpu_memory_utilization} x train.gpu_memory_gb "
            f"{t.gpu_memory_gb} = {share / GiB:.1f} GiB less the bf16 weights ({2 * n_params / GiB:.1f} GiB) leaves "
            f"{room / GiB:.1f} GiB, so vLLM would not start; set train.max_prompt_length (vLLM's max model length is "
            "it plus train.max_completion_length), shorten them, or raise train.vllm_gpu_memory_utilization")
    return out


def _embedded_architecture(preset: str) -> Architecture:
    """The embedded preset's architecture: its committed base's config.json when that base is the preset's recipe
    (the real vocabulary, a few hundred pieces), else the preset's shape with a vocabulary of 512 assumed (the size
    is only known once the tokenizer is built)."""
    from dgro_lib.models.committed import committed_bases
    from dgro_lib.models.presets import EMBEDDED_PRESETS, config_hash

    e = EMBEDDED_PRESETS[preset]
    base = committed_bases().get(preset)
    if base is not None and base.get("config_hash") == config_hash(e) and (base["path"] / "config.json").is_file():
        a = resolve_architecture(str(base["path"]))
        return Architecture(**{**a.__dict__, "source": f"committed base {base['path'].name}/config.json"})
    return Architecture(e.hidden, e.layers, e.heads, e.kv_heads, e.intermediate, 512, True,
                        max_positions=e.max_position, source="embedded preset (vocabulary of 512 assumed)")


def _gib(x: float) -> str:
    """A table cell: one decimal, except for sizes under 0.05 (the miniature's weights are a few MiB), which keep two
    significant digits instead of printing as 0.0; an exact zero (nothing of that kind is held) prints as 0."""
    if x == 0:
        return "0"
    return f"{x:.1f}" if abs(x) >= 0.05 else f"{x:.2g}"


def _label(point: dict) -> str:
    """Short label of a sweep point: ``model.path=Qwen/Qwen3-4B loss=dcpo``."""
    parts = []
    for k, v in point.items():
        v = v.get("name", v) if isinstance(v, dict) else v
        if isinstance(v, list) and len(v) > 2:  # a benchmark list: its size and ends keep the table readable
            v = f"[{v[0]}..{v[-1]}]({len(v)})"
        parts.append(f"{k.split('.')[-1]}={v}")
    return " ".join(parts)


def dry_run(profile: str = "paper", *, params_root: str | Path | None = None, out=None) -> list[dict[str, Any]]:
    """Validate every params file of ``profile`` (each sweep point) and print one table row per point.

    Returns the rows; raises ValueError listing every file that failed, after printing all of them.
    """
    out = out or sys.stdout
    root = Path(params_root) if params_root is not None else PARAMS
    files = sorted((root / profile).glob("*.yaml"))
    if not files:
        raise ValueError(f"no params files under {root / profile}")
    rows, failures = [], []
    for f in files:
        try:
            cfg = load_config(f)
            if cfg.kind == "theory":  # no model to size: loading validated it
                continue
            seen = set()
            for point, _seed, concrete in expand_sweep(cfg):
                key = json.dumps(point, sort_keys=True)
                if key in seen:
                    continue
                seen.add(key)
                arch = resolve_architecture(concrete.model.path) if concrete.model.path != "embedded" else None
                if arch is None:
                    arch = _embedded_architecture(concrete.model.embedded_preset)
                est = estimate(concrete, arch)
                rows.append({"file": f.name, "point": _label(point), "model": concrete.model.path,
                             "arch_source": arch.source, "loss": concrete.loss.name, **est})
        except Exception as e:  # report every file, then fail
            failures.append(f"{f.name}: {type(e).__name__}: {e}")
    if rows:
        df = pd.DataFrame(rows)
        cols = ["file", "point", "params_B", "processes", "rows_per_rollout", "micro_batch_per_rank", "extra_rows",
                "updates_per_rollout", "weights_GiB", "grads_GiB", "optim_GiB", "zero_fp32_grads_GiB",
                "zero3_live_GiB", "ref_GiB", "activations_GiB", "logits_GiB", "generation_GiB", "total_GiB",
                "eval_GiB", "gpu_GiB", "host_GiB_per_rank", "host_GiB_node"]
        with pd.option_context("display.width", 250, "display.max_columns", 40, "display.max_colwidth", 40,
                               "display.float_format", _gib):
            print(df[cols].to_string(index=False), file=out)
        for r in rows:
            for w in r["warnings"]:
                print(f"WARNING {r['file']} {r['point']}: {w}", file=out)
        for r in sorted({(r["model"], r["arch_source"]) for r in rows}):
            print(f"architecture of {r[0]}: {r[1]}", file=out)
    if failures:
        print("\n".join(f"FAILED {x}" for x in failures), file=out)
        raise ValueError(f"{len(failures)} params file(s) of profile {profile!r} failed: " + "; ".join(failures))
    return rows
