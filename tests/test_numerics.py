"""Portable CPU numerics: importing dgro_lib pins torch, MKL and oneDNN to their AVX2 kernels (where the CPU has
AVX2), unless the user chose otherwise; the manifests record the kernels."""

import json
import os
import subprocess
import sys

import pytest

from dgro_lib.util.numerics import NATIVE_ENV, PORTABLE_ENV, _cpu_has_avx2

pytestmark = pytest.mark.skipif(not _cpu_has_avx2(), reason="the CPU has no AVX2: dgro_lib leaves the kernels alone")

PROBE = ("import json, os, torch; import dgro_lib; "
         "print(json.dumps({'cap': torch.backends.cpu.get_cpu_capability(), "
         "'env': {k: os.environ.get(k) for k in %r}}))" % (list(PORTABLE_ENV),))


def _probe(**env):
    base = {k: v for k, v in os.environ.items() if k not in PORTABLE_ENV and k != NATIVE_ENV}
    out = subprocess.run([sys.executable, "-c", PROBE], env={**base, **env}, capture_output=True, text=True,
                         check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_importing_dgro_lib_pins_the_avx2_kernels_even_after_torch_was_imported():
    got = _probe()
    assert got["cap"] == "AVX2" and got["env"] == PORTABLE_ENV


def test_the_users_own_choice_wins():
    assert _probe(ATEN_CPU_CAPABILITY="default")["cap"] == "DEFAULT"
    native = _probe(**{NATIVE_ENV: "1"})
    assert native["env"] == {k: None for k in PORTABLE_ENV}


def test_a_manifest_records_the_kernels(tmp_path):
    from dgro_lib.util.manifest import machine_info

    info = machine_info()["cpu_numerics"]
    assert set(info) == {"torch_cpu_capability", *PORTABLE_ENV}
