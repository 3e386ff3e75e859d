"""Portable CPU numerics: the same floating-point results on AVX2 and AVX-512 machines (measured on AMD EPYC ones),
but not on every x86 CPU (an Intel Xeon builds other weights; below).

torch picks its own vectorised kernels (softmax, norms, activations, the optimizer's updates) for the widest SIMD
the CPU has, and MKL (its BLAS) and oneDNN do the same for matrix products; AVX2 and AVX-512 kernels add up in
different orders, so their results differ in the last bits. On the embedded miniature those bits decide a lot: the
`mini` base built with AVX-512 kernels is a different model from the one built with AVX2 kernels (measured: the
AVX-512 build's RL runs land ~27 points above the AVX2 build's on the same puzzles), and a run trained on one kind
of machine could never be compared with, or restored on, the other.

So before torch is imported, :func:`use_portable_cpu_numerics` (called by ``import dgro_lib``) pins the three
libraries to their AVX2 code paths, unless the user set them already or sets ``DGRO_NATIVE_CPU_NUMERICS=1``:

* ``ATEN_CPU_CAPABILITY=avx2`` (torch's own kernels),
* ``MKL_CBWR=AVX2`` (MKL's conditional numerical reproducibility mode, AVX2 branch),
* ``ONEDNN_MAX_CPU_ISA=AVX2`` (oneDNN's kernels).

Measured on an AVX-512 machine (2026-12-02): with the three set, the first 25 warm-up steps of `mini`'s second
stage average a loss of 0.13666122198104858, the value an AVX2-only machine printed the day before, to the last
bit; without them the stage-1 loss is 0.1405 instead of 0.1093. A CPU without AVX2 is left alone. GPUs are not
affected. :func:`cpu_numerics` says what a process runs with; every manifest records it.

Not across CPU vendors: on an Intel Xeon with AVX-512 (2026-12-02), with the three set, `mini` came out with other
weights than on the AMD machines (the run archive's weights digest ``462b4a99...`` against ``e4de0a27...``), and so
did `math_mini` (``7488da0a...`` against ``e735e2f6...``; there the same with and without the setting). Which
library takes another path on that CPU is not separated. The run archive checks the base's weights digest before it
restores a run, and never replaces an archived run trained from other weights (:mod:`dgro_lib.runs.archive`).
"""

from __future__ import annotations

import os
import sys
import warnings

__all__ = ["PORTABLE_ENV", "NATIVE_ENV", "use_portable_cpu_numerics", "cpu_numerics"]

PORTABLE_ENV = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"}
NATIVE_ENV = "DGRO_NATIVE_CPU_NUMERICS"
"""Set to 1 to let torch, MKL and oneDNN use the widest kernels the CPU has (results then depend on the CPU)."""


def _cpu_has_avx2() -> bool:
    try:
        with open("/proc/cpuinfo") as fh:
            return any(line.startswith("flags") and " avx2" in line for line in fh)
    except OSError:
        return False


def use_portable_cpu_numerics() -> dict[str, str]:
    """Set :data:`PORTABLE_ENV` in ``os.environ`` where unset (child processes inherit it), unless
    ``DGRO_NATIVE_CPU_NUMERICS=1`` or the CPU has no AVX2; returns what it set. Warns when torch was imported before
    with wider kernels: the setting then only reaches child processes."""
    if os.environ.get(NATIVE_ENV, "") not in ("", "0") or not _cpu_has_avx2():
        return {}
    done = {k: v for k, v in PORTABLE_ENV.items() if k not in os.environ}
    os.environ.update(done)
    if done and "torch" in sys.modules:
        capability = sys.modules["torch"].backends.cpu.get_cpu_capability()
        if capability != "AVX2":
            warnings.warn(f"torch was imported before dgro_lib and runs {capability} kernels: this process's CPU "
                          "results differ from an AVX2 machine's (import dgro_lib first, or start Python with "
                          + " ".join(f"{k}={v}" for k, v in PORTABLE_ENV.items()) + ")", stacklevel=3)
    return done


def cpu_numerics() -> dict[str, str | None]:
    """The kernels this process computes with: torch's CPU capability and the three settings."""
    import torch

    return {"torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
            **{k: os.environ.get(k) for k in PORTABLE_ENV}}
