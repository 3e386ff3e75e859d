#!/usr/bin/env bash
# The one prepared device check (< 10 minutes on one H100/H200): bench/gpu_check.sh (vLLM rollouts against HF
# generate, the DGRO update step's MFU), then one short gpu-profile run of DGRO Fig. 1's notebook and its step time,
# MFU and peak memory (bench/device_check.py says how each is measured). Writes $OUT/device_check.json (default
# outputs/device_check/), rewritten after each stage. Without CUDA it stops at once, naming the torch build.
# Needs the GPU stack (`make venv-gpu`: requirements/cuda.txt) or a python that has it: PY=/path/to/python.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ -z "${PY:-}" ]]; then
  if [[ -x .venv/bin/python ]]; then PY=.venv/bin/python; else PY=python; fi
fi
export OUT=${OUT:-outputs/device_check} PY PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || true
timeout 560 "$PY" bench/device_check.py --out "$OUT"
