"""DCPO Table 4 / Fig. 2 (the H0 grid, "moderate exploration is best"): the claims of ``notebooks/dcpo_table4_h0``.
Raising H0 beyond the default lowers sampled avg@k (each larger H0 against the default), the default scores at
least as well as a smaller H0 (each smaller H0 against the default: no direction claimed), and the calibration
check: H0 calibrated from the base model's own entropy, rounded to 2 significant digits, equals the params'
default (an exact check)."""

from __future__ import annotations

from typing import Iterable, Sequence

from dgro_lib.report.claims import exact
from dgro_lib.papers.common import contrast_rows
from dgro_lib.papers.dcpo_common import sweep_arms

__all__ = ["claims"]


def claims(sweep, h0_values: Sequence[float], *, default: float, base_entropy: float, calibrated: float,
           seeds: Iterable[int] | None = None) -> list[dict]:
    """``h0_values`` in the order of the sweep's labels; ``base_entropy`` the base model's H (nats/token) and
    ``calibrated`` the H0 it rounds to."""
    _, sampled, _ = sweep_arms(sweep, seeds=seeds)
    label_of = dict(zip(h0_values, sweep.labels))
    pairs = [(label_of[h], label_of[default], "lower" if h > default else "none") for h in h0_values if h != default]
    rows = contrast_rows(sampled, pairs, metric="sampled avg@k")
    rows.append(exact("base H (nats/token)", base_entropy, metric="entropy", unit="nats/token",
                      note="exact: the base's entropy on its own seeded samples, measured once (no runs to spread "
                           "over) and kept in the run archive"))
    rows.append(exact("H0 calibrated from the base's entropy equals the params' default", calibrated,
                      metric="H0", unit="nats/token", holds=calibrated == default,
                      note=f"exact: the params use {default}"))
    return rows
