"""DGRO Section 3 and Appendices B-F (the theory): the claims of ``notebooks/dgro_theory``. Exact checks, no
sampling error: one row per statement (:func:`dgro_lib.analysis.theory.verdicts`: *holds* is reproduced, *fails*
contradicted, *holds only under its assumptions* reproduced with that note) and the numbers they rest on."""

from __future__ import annotations

import pandas as pd

from dgro_lib.report.claims import exact

__all__ = ["claims"]


def claims(verdicts: pd.DataFrame, violations: pd.DataFrame, sweep: pd.DataFrame, cases: pd.DataFrame) -> list[dict]:
    v = violations.set_index("bound")
    rows = [exact(r.statement, 0.0 if r.verdict == "fails" else 1.0, metric="statement", holds=r.verdict != "fails",
                  note="exact: " + ("holds only under its assumptions" if r.verdict.startswith("holds only") else
                                    r.verdict)) for r in verdicts.itertuples()]
    rows += [exact("Theorem 3.3: (problem, beta) rows above the bound", v.loc["Theorem 3.3", "violations"],
                   metric="count"),
             exact("Theorem E.1: fraction of rows above the bound", v.loc["Theorem E.1", "violations"] / len(sweep),
                   metric="fraction"),
             exact("Hoeffding: rows above the bound", v.loc["Hoeffding", "violations"], metric="count"),
             exact("Theorem 3.4: largest policy-gradient norm / bound", float((cases.pg_norm / cases.pg_bound).max()),
                   metric="ratio"),
             exact("Eq. 10 with its printed sign: largest error", float(cases.eq10_minus_sign_error.max()),
                   metric="error")]
    return rows
