"""dgro_lib: a thin library behind reproducible DGRO / DCPO notebooks."""

from dgro_lib.util.numerics import use_portable_cpu_numerics as _use_portable_cpu_numerics

_use_portable_cpu_numerics()  # before anything imports torch: see dgro_lib.util.numerics

__version__ = "0.1.0"
