#!/usr/bin/env bash
# One prepared GPU check, < 8 minutes on one H200: HF generate vs vLLM rollout tokens/s and the
# training step's MFU, Qwen2.5-0.5B-shaped random weights, offline. Writes $OUT/gpu_check.json (default
# outputs/bench/). Needs the GPU stack: `pip install -e .[vllm]` (vllm==0.31.0, torch==2.13.0).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-python}
export OUT=${OUT:-outputs/bench}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
timeout 460 "$PY" bench/gpu_check.py --out "$OUT" "$@"
cat "$OUT/gpu_check.json"
