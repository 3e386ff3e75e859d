"""Start a vLLM server for ``train.vllm_mode: server`` and wait until it answers (GPU nodes, ``pip install .[vllm]``).

The command line is TRL's own (``trl.scripts.vllm_serve.build_command``), so it carries what TRL 1.16's
client needs: ``--logprobs-mode processed_logprobs`` (the importance-sampling correction compares processed,
temperature-scaled log-probs), ``--weight-transfer-config {"backend": "nccl"}`` (weight sync from the trainer),
``--max-logprobs -1`` and, with vLLM >= 0.30, ``--enable-scale-out``; the environment gets
``VLLM_SERVER_DEV_MODE=1`` (the weight-transfer endpoints live behind it). Pinned: ``vllm==0.31.0`` (torch
2.13.0, transformers < 5.18); reward curves are known to move across vLLM versions.

Typical use on a node with 8 GPUs (server on the last one, training on the other seven)::

    proc = start_vllm_server("Qwen/Qwen2.5-7B-Instruct-1M", port=8000, cuda_visible_devices="7")
    ...  # train with train.use_vllm: true, train.vllm_mode: server, train.num_processes: 7
    proc.terminate()
"""

from __future__ import annotations

import os
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Sequence

from trl.scripts.vllm_serve import ScriptArguments, build_command

__all__ = ["vllm_serve_command", "start_vllm_server", "wait_for_health"]


def vllm_serve_command(model: str, *, host: str = "0.0.0.0", port: int = 8000, tensor_parallel_size: int = 1,
                       data_parallel_size: int = 1, gpu_memory_utilization: float = 0.9, dtype: str = "auto",
                       max_model_len: int | None = None, enable_prefix_caching: bool | None = None,
                       extra_args: Sequence[str] = ()) -> list[str]:
    """The ``vllm serve`` command line TRL 1.16 expects, built by TRL's own ``build_command``."""
    args = ScriptArguments(model=model, host=host, port=port, tensor_parallel_size=tensor_parallel_size,
                           data_parallel_size=data_parallel_size, gpu_memory_utilization=gpu_memory_utilization,
                           dtype=dtype, max_model_len=max_model_len, enable_prefix_caching=enable_prefix_caching)
    return build_command(args, list(extra_args))


def wait_for_health(base_url: str, *, proc: subprocess.Popen | None = None, timeout: float = 900.0,
                    interval: float = 2.0, log_path: str | Path | None = None) -> None:
    """Poll ``{base_url}/health`` until it returns 200. Raises RuntimeError (with the server log's tail) if
    ``proc`` exits first, TimeoutError after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    url = base_url.rstrip("/") + "/health"
    while True:
        if proc is not None and proc.poll() is not None:
            tail = Path(log_path).read_text(errors="replace")[-4000:] if log_path and Path(log_path).exists() else ""
            raise RuntimeError(f"the vLLM server exited with code {proc.returncode} before {url} answered\n{tail}")
        try:
            with urllib.request.urlopen(url, timeout=interval) as r:
                if r.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
            pass
        if time.monotonic() >= deadline:
            raise TimeoutError(f"{url} did not answer within {timeout:.0f} s")
        time.sleep(interval)


def start_vllm_server(model: str, *, host: str = "0.0.0.0", port: int = 8000, timeout: float = 900.0,
                      log_path: str | Path = "outputs/vllm_server.log", cuda_visible_devices: str | None = None,
                      command: Sequence[str] | None = None, **kwargs) -> subprocess.Popen:
    """Start ``vllm serve`` (see :func:`vllm_serve_command`; ``kwargs`` go there) in the background, logging to
    ``log_path``, and return the process once ``/health`` answers. ``command`` overrides the command line."""
    cmd = list(command) if command is not None else vllm_serve_command(model, host=host, port=port, **kwargs)
    env = {**os.environ, "VLLM_SERVER_DEV_MODE": "1"}
    if cuda_visible_devices is not None:
        env["CUDA_VISIBLE_DEVICES"] = cuda_visible_devices
    log_path = Path(log_path)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    log = open(log_path, "w")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
    log.close()
    try:
        wait_for_health(f"http://{'127.0.0.1' if host == '0.0.0.0' else host}:{port}", proc=proc, timeout=timeout,
                        log_path=log_path)
    except BaseException:
        proc.terminate()
        raise
    return proc
