"""Evaluation protocols: how a number was measured, recorded with it (:func:`eval_protocol`), and the protocol of an
experiment config's ``eval:`` section (:func:`protocol_for_config`)."""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # annotations only: dgro_lib.config imports the model checks, which import this package
    from dgro_lib.config.schema import ExperimentConfig

__all__ = ["eval_protocol", "protocol_for_config"]


def eval_protocol(*, temperature: float, n_samples: int, max_new_tokens: int, template: str,
                  top_p: float = 1.0, **extra: Any) -> dict[str, Any]:
    """The evaluation protocol that produced a result table, as a validated plain dict.

    Written into every result file by :func:`write_results`, so a number is never separated from
    how it was measured. ``temperature`` 0 means greedy decoding and then ``n_samples`` must be 1
    (more greedy samples are copies of the first). ``extra`` holds anything else worth recording
    (model, checkpoint, data set revision, ``metric``, ``ks``); values must be JSON-serialisable.

    Raises ValueError naming the field for a negative or non-finite temperature, ``top_p`` outside
    (0, 1], ``n_samples`` or ``max_new_tokens`` < 1, an empty ``template``, or greedy decoding with
    ``n_samples > 1``; TypeError for a value that JSON cannot hold.
    """
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or not math.isfinite(temperature) \
            or temperature < 0:
        raise ValueError(f"temperature must be a finite number >= 0, got {temperature!r}")
    if isinstance(top_p, bool) or not isinstance(top_p, (int, float)) or not 0 < top_p <= 1:
        raise ValueError(f"top_p must be in (0, 1], got {top_p!r}")
    for fname, v in (("n_samples", n_samples), ("max_new_tokens", max_new_tokens)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{fname} must be an int >= 1, got {v!r}")
    if not isinstance(template, str) or not template:
        raise ValueError(f"template must be a non-empty str, got {template!r}")
    if temperature == 0 and n_samples != 1:
        raise ValueError(f"n_samples must be 1 with greedy decoding (temperature 0), got {n_samples}")
    protocol = {"temperature": float(temperature), "top_p": float(top_p), "n_samples": n_samples,
                "max_new_tokens": max_new_tokens, "template": template, **extra}
    try:
        json.dumps(protocol, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"eval protocol values must be JSON-serialisable: {exc}") from exc
    return protocol


def protocol_for_config(cfg: ExperimentConfig, n_records: int) -> dict[str, Any]:
    """How the held-out numbers of an experiment were measured (:func:`eval_protocol` of ``cfg.eval``, the data
    settings and ``n_records`` puzzles; written next to them in base_eval.json / final_eval.json). Greedy
    decoding records top_p 1.0 (and no seed): neither applies to it. A K&K protocol names the people counts; a
    math protocol the task and its evaluation sets instead (K&K protocols keep the fields they had before math
    was a task, so the stored evaluations they key stay found).

    ``paired_metric`` is part of every stored evaluation's key, so its value stays what it was when the first
    evaluations were stored: "first sample per puzzle" for a sampled protocol. What the stored evaluations keep per
    puzzle under a sampled protocol is the fraction of the ``n_samples`` that were right
    (:func:`~dgro_lib.evaluate.per_item_correct`), in ``final_eval.json`` as in the second and base evaluations."""
    e = cfg.eval
    d = cfg.data
    held_out = {"people": list(d.eval_people)} if d.task == "kk" else {"task": d.task, "math_eval": list(d.math_eval)}
    return eval_protocol(temperature=e.temperature, top_p=e.top_p if e.temperature > 0 else 1.0,
                         n_samples=e.n_samples, max_new_tokens=e.max_new_tokens, template=cfg.data.template,
                         ks=list(e.ks), seed=e.seed if e.temperature > 0 else None,
                         **held_out, n_puzzles=n_records, data_source=cfg.data.source,
                         eval_seed=cfg.data.eval_seed,
                         paired_metric="greedy answer" if e.temperature == 0 else "first sample per puzzle",
                         # named only when it is not the default, so the stored evaluations of hf protocols stay found
                         **({"engine": e.engine} if e.engine != "hf" else {}))
