"""One launcher for a training run: in-process on CPU, ``accelerate launch`` for several processes.

A notebook must not hold training logic, and multi-GPU training cannot run inside a Jupyter kernel. So
:func:`launch_run` runs :func:`dgro_lib.runs.training.run_training` in the calling process when
``train.num_processes == 1`` (the ``ci``/``cpu`` profiles), and otherwise writes the run's concrete config to
``<run_dir>/config.yaml`` and starts::

    accelerate launch --num_processes N [--config_file trl/accelerate_configs/zero2.yaml | --cpu | --multi_gpu] \\
        -m dgro_lib.runs.process_main --config <run_dir>/config.yaml --seed S --run-dir <run_dir>

with TRL's own DeepSpeed ZeRO-2/ZeRO-3 and FSDP2 accelerate configs (``train.distributed``), and once those
processes have exited, evaluates the run here (:func:`dgro_lib.runs.training.evaluate_trained_run`): the periodic
snapshots, then the final checkpoint. The child's
output (TRL's logs, tqdm bars) is streamed into the caller (the notebook cell) as it arrives; a failing child
fails the call with its exit code and the tail of its output.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import IO, Any

import torch
import trl
import yaml

from dgro_lib.config.checks import deepspeed_on_cpu
from dgro_lib.config import ExperimentConfig, config_to_dict
from dgro_lib.runs.store import prepare_run
from dgro_lib.runs.training import TRAINED, evaluate_trained_run, run_training

__all__ = ["ACCELERATE_CONFIGS", "accelerate_command", "free_port", "launch_run", "trl_accelerate_config",
           "stream_command"]

# train.distributed -> the file TRL ships in trl/accelerate_configs/
ACCELERATE_CONFIGS = {"zero2": "zero2.yaml", "zero3": "zero3.yaml", "fsdp": "fsdp2.yaml"}


def trl_accelerate_config(distributed: str) -> Path:
    """Path of TRL's accelerate config for ``distributed`` (zero2, zero3, fsdp)."""
    if distributed not in ACCELERATE_CONFIGS:
        raise ValueError(f"train.distributed: no accelerate config for {distributed!r}; "
                         f"valid: {', '.join(ACCELERATE_CONFIGS)} (or none for plain DDP)")
    path = Path(trl.__file__).parent / "accelerate_configs" / ACCELERATE_CONFIGS[distributed]
    if not path.is_file():
        raise FileNotFoundError(f"TRL's accelerate config is missing: {path}")
    return path


def free_port() -> int:
    """A TCP port free right now on this host (torch.distributed's rendezvous; two runs must not share 29500)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def accelerate_command(cfg: ExperimentConfig, config_path: str | Path, seed: int, run_dir: str | Path,
                       point: dict | None = None, *, cuda: bool | None = None, port: int | None = None) -> list[str]:
    """The exact ``accelerate launch`` command line of a multi-process run (``train.num_processes > 1``)."""
    t = cfg.train
    if cuda is None:
        cuda = torch.cuda.is_available()
    cpu = t.cpu or not cuda
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--num_processes", str(t.num_processes),
           "--num_machines", "1", "--main_process_port", str(port if port is not None else free_port())]
    if t.distributed != "none":
        if cpu and not deepspeed_on_cpu(cfg):
            raise ValueError(f"train.distributed: {t.distributed} needs GPUs; on CPU use distributed: none (gloo DDP), "
                             "or train.cpu: true with zero2/zero3 (DeepSpeed's CPU accelerator)")
        cmd += ["--config_file", str(trl_accelerate_config(t.distributed))]
    else:
        # accelerate's --cpu takes its single-process path; --multi_gpu goes through torchrun, and without
        # CUDA the processes initialise gloo (MULTI_CPU)
        cmd += ["--multi_gpu"]
    cmd += ["--mixed_precision", "bf16" if (t.bf16 and not cpu) else "no"]
    cmd += ["-m", "dgro_lib.runs.process_main", "--config", str(config_path), "--seed", str(seed), "--run-dir", str(run_dir),
            "--point", json.dumps(point or {})]
    return cmd


def stream_command(cmd: list[str], *, env: dict[str, str] | None = None, cwd: str | Path | None = None,
                   out: IO[str] | None = None, tail_chars: int = 6000) -> None:
    """Run ``cmd``, copying its stdout+stderr to ``out`` (default sys.stdout) as it arrives (tqdm's carriage
    returns included). A non-zero exit raises RuntimeError with the exit code and the output's tail."""
    out = out or sys.stdout
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, cwd=cwd)
    tail = ""
    try:
        while True:
            chunk = os.read(proc.stdout.fileno(), 4096)
            if not chunk:
                break
            text = chunk.decode("utf-8", errors="replace")
            out.write(text)
            out.flush()
            tail = (tail + text)[-tail_chars:]
        code = proc.wait()
    except BaseException:  # the cell was interrupted: do not leave the training processes behind
        proc.kill()
        proc.wait()
        raise
    finally:
        proc.stdout.close()
    if code != 0:
        raise RuntimeError(f"command failed with exit code {code}: {' '.join(cmd[:8])} ...\n--- last output ---\n{tail}")


def launch_run(cfg: ExperimentConfig, seed: int, run_dir: str | Path, *, point: dict | None = None,
               out: IO[str] | None = None) -> dict[str, Any] | None:
    """Run one training run (in-process or under ``accelerate launch``) and return its final summary."""
    if cfg.train.num_processes == 1:
        return run_training(cfg, seed, run_dir, point=point)
    run_dir = Path(run_dir)
    final = run_dir / "final_eval.json"
    if prepare_run(cfg, seed, run_dir):  # here, before the ranks start, so they find the folder settled
        return json.loads(final.read_text())["summary"]
    run_dir.mkdir(parents=True, exist_ok=True)
    if not (run_dir / TRAINED).is_file():  # else killed in its evaluation: training is done, only that is redone
        config_path = run_dir / "config.yaml"
        config_path.write_text(yaml.safe_dump(config_to_dict(cfg), sort_keys=False))
        env = {**os.environ, "OMP_NUM_THREADS": str(cfg.train.threads), "PYTHONUNBUFFERED": "1"}
        if deepspeed_on_cpu(cfg):
            env["DS_ACCELERATOR"] = "cpu"  # DeepSpeed on CPU processes (gloo): what the ZeRO-3 CI test runs
        stream_command(accelerate_command(cfg, config_path, seed, run_dir, point), env=env, out=out)
    # The evaluation is a job of its own, here, after the training processes have exited: inside them only rank 0
    # would decode, and under ZeRO-3 its forward passes wait for ranks that sit in a barrier.
    return evaluate_trained_run(cfg, seed, run_dir, point=point)
