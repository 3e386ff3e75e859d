#!/usr/bin/env bash
# One prepared GPU check, < 8 minutes on one H200: HF generate vs vLLM rollout tokens/s and the
# DGRO update step's MFU (the registered loss on TRL's log-probs), Qwen2.5-0.5B-shaped random weights, offline. Writes $OUT/gpu_check.json (default
# outputs/bench/) after each measurement, so a run cut short keeps what it measured. Needs the GPU stack:
# `make venv-gpu` (requirements/cuda.txt: torch 2.13.0 CUDA build, vllm==0.31.0).
set -euo pipefail
cd "$(dirname "$0")/.."
# The project's interpreter: an explicit $PY, else the venv's python (the one `make` builds), else python on PATH.
# A python from PATH may be another environment's, and a CPU build of torch would run the check on the CPU until
# the timeout below kills it, before any JSON is written.
if [[ -z "${PY:-}" ]]; then
  if [[ -x .venv/bin/python ]]; then PY=.venv/bin/python; else PY=python; fi
fi
export OUT=${OUT:-outputs/bench}
# Refuse a torch without CUDA (a +cpu build, or no device visible) by name, before anything else runs.
"$PY" bench/gpu_check.py --require-cuda
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
rc=0
timeout 460 "$PY" bench/gpu_check.py --out "$OUT" "$@" || rc=$?
[[ -f "$OUT/gpu_check.json" ]] && cat "$OUT/gpu_check.json"
exit $rc
