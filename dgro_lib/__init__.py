"""dgro_lib: a thin library behind reproducible DGRO / DCPO notebooks."""

__version__ = "0.1.0"
