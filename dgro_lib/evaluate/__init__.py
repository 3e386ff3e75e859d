"""Evaluation, in one place.

Modules:

* :mod:`.metrics` — pass@k, avg@k, paired McNemar tests, the papers' result tables, results files
  (:func:`write_results` / :func:`read_results`).
* :mod:`.protocol` — :func:`eval_protocol` (how a number was measured, written beside it) and
  :func:`protocol_for_config` (the protocol of an experiment config's ``eval:`` section).
* :mod:`.accuracy` — K&K accuracy of a model, greedy (:func:`evaluate_greedy`) or sampled
  (:func:`evaluate_sampled`), and :func:`evaluate_under_config`, the held-out evaluation under a config's ``eval:``
  protocol (with :func:`eval_summary`, its scalar fields).
"""

from dgro_lib.evaluate.accuracy import (eval_summary, evaluate_greedy, evaluate_sampled, evaluate_under_config, greedy_eval,
                                        per_item_correct)
from dgro_lib.evaluate.metrics import (
    avg_at_k,
    mcnemar,
    mcnemar_z,
    paired_fraction_table,
    paired_improvement_table,
    pass_at_k,
    pass_at_k_table,
    per_problem_counts,
    read_results,
    write_results,
)
from dgro_lib.evaluate.protocol import eval_protocol, protocol_for_config

__all__ = [
    "mcnemar",
    "mcnemar_z",
    "paired_improvement_table",
    "paired_fraction_table",
    "pass_at_k",
    "avg_at_k",
    "per_problem_counts",
    "pass_at_k_table",
    "eval_protocol",
    "write_results",
    "read_results",
    "protocol_for_config",
    "evaluate_greedy",
    "greedy_eval",
    "evaluate_sampled",
    "evaluate_under_config",
    "eval_summary",
    "per_item_correct",
]
