"""The notebooks' computations on finished runs and models: :mod:`.probes` (K&K: the Adam scale check, summaries,
tables against the base), :mod:`.math` and :mod:`.dcpo` (the math and DCPO notebooks), :mod:`.theory` (DGRO
Section 3 computed exactly) and :mod:`.plots` (every figure a PNG beside its CSV)."""
