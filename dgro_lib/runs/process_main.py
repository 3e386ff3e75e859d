"""Entry point of one training run in its own process(es): ``python -m dgro_lib.runs.process_main --config run/config.yaml``.

:mod:`dgro_lib.runs.launch` starts it under ``accelerate launch`` for multi-process training (each process runs
:func:`dgro_lib.runs.training.run_training`; the main one writes the files). It reads the run's concrete config
(sweep point already applied), so a run can also be restarted by hand with the same command.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import torch.distributed as dist

from dgro_lib.config import load_config
from dgro_lib.runs.training import run_training


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", required=True, help="params YAML of this run (the concrete config)")
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--run-dir", required=True)
    p.add_argument("--point", default="{}", help="the sweep point as JSON (recorded in the manifest)")
    args = p.parse_args(argv)
    try:
        point = json.loads(args.point)
    except json.JSONDecodeError as e:
        p.error(f"--point is not JSON: {e}")
    summary = run_training(load_config(args.config), args.seed, args.run_dir, point=point)
    if summary is not None:
        print(json.dumps({"final": summary}), flush=True)
    if dist.is_available() and dist.is_initialized():
        # The other ranks return while the main one still evaluates; a process that exits with the process group's
        # threads alive aborts ("terminate called without an active exception", exit -6): wait, then tear down.
        dist.barrier()
        dist.destroy_process_group()
        # Even then a rank could still abort in interpreter teardown (seen once in the two-process tests, exit -6),
        # when a C++ thread that the process group or a library started is joinable as its destructor runs. Every
        # file this run writes is closed by now (atomic writes), so leave without the teardown.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
