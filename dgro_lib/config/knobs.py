"""The typed ``extra:`` section of each notebook's params: what a notebook reads beyond the experiment schema.

Every notebook (by its params ``name``) registers one dataclass in :data:`KNOBS`. Loading a params file of any
profile builds it strictly (:func:`dgro_lib.util.typed.build_dataclass`), so a missing or misspelled knob is a load
error naming the file and the key (``extra.sampled_eval``), not a ``KeyError`` in a notebook on a GPU node.
``ExperimentConfig.knobs`` returns the built section; ``ExperimentConfig.extra`` keeps the mapping as written (it is
what overrides edit, and it stays out of a run's identity). An experiment no notebook registers keeps a free-form
``extra``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

__all__ = ["EvalOverrides", "KNOBS", "knobs_class"]


@dataclass(frozen=True)
class EvalOverrides:
    """A second evaluation protocol: the ``eval:`` fields it changes (e.g. sampled avg@k beside a greedy final
    evaluation). ``overrides()`` is the mapping :func:`dgro_lib.runs.experiment.evaluate_runs` takes."""

    temperature: float
    n_samples: int
    ks: list[int]
    top_p: float | None = None
    max_new_tokens: int | None = None
    seed: int | None = None

    def overrides(self) -> dict[str, Any]:
        """The fields set, as ``eval`` overrides (unset ones keep the params' ``eval`` values)."""
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None}


@dataclass(frozen=True)
class Sampled:
    """The sampled reading beside the final evaluation, on the first ``sampled_eval_puzzles`` held-out items
    (null: all of them)."""

    sampled_eval: EvalOverrides
    sampled_eval_puzzles: int | None


@dataclass(frozen=True)
class BaseModelKnobs:
    """``00_base_model``: the success-rate histogram's prompts and samples per prompt."""

    sample_prompts: int
    samples_per_prompt: int


@dataclass(frozen=True)
class MiniatureMapKnobs:
    """``01_miniature_map``: the candidate bases compared first (greedy, ``greedy_eval``, and sampled,
    ``base_candidate_eval``, on the first ``base_candidate_puzzles`` held-out puzzles), and the greedy reading of
    every map point beside the params' sampled protocol."""

    base_candidates: list[str]
    base_candidate_puzzles: int
    base_candidate_eval: EvalOverrides
    greedy_eval: EvalOverrides


@dataclass(frozen=True)
class LearningKnobs:
    """A K&K notebook whose params' ``eval`` is the sampled protocol: one label per sweep entry (in order), and the
    greedy reading as a second evaluation on all held-out puzzles."""

    labels: list[str]
    greedy_eval: EvalOverrides


@dataclass(frozen=True)
class Fig1Knobs(LearningKnobs):
    """``dgro_fig1_reward_variance``: the arms' labels, the positive ``control`` arm and the arm it is the slowed
    copy of (``control_of``), the greedy second evaluation, and the Adam scale check (one fixed rollout batch of
    ``scale_check_prompts`` x ``scale_check_generations``, ``scale_check_updates`` optimizer steps)."""

    control: str
    control_of: str
    scale_check_prompts: int
    scale_check_generations: int
    scale_check_updates: int
    scale_check_beta2: float


@dataclass(frozen=True)
class Fig1bKnobs(LearningKnobs):
    """``dgro_fig1_beta2_acting``: the ranges' labels, the greedy second evaluation, and the arms whose runs another
    notebook reads and counts the gain of (``counted_elsewhere``: the [-3,3] arm is ``dgro_fig2_beta``'s (1, 0.1)
    point), so that the tally counts each once."""

    counted_elsewhere: list[str]


@dataclass(frozen=True)
class GridKnobs:
    """``dgro_fig2_beta``: a crossed sweep whose points are labelled by their values; the greedy reading is a second
    evaluation on all held-out puzzles beside the params' sampled protocol."""

    greedy_eval: EvalOverrides


@dataclass(frozen=True)
class Fig3Knobs(LearningKnobs):
    """``dgro_fig3_methods``: the arms' labels (every arm but the two baselines is a DGRO arm), the labels of the
    ``grpo`` and ``online_dpo`` baselines, and the greedy second evaluation."""

    grpo: str
    online_dpo: str


@dataclass(frozen=True)
class Fig4Knobs:
    """``dgro_fig4_math_entropy``: the K&K params whose runs the math entropy is set beside, and their sweep."""

    kk_params: str
    kk_sweep: dict[str, list[Any]]


@dataclass(frozen=True)
class Table2KKKnobs:
    """``dgro_table2_kk``: the people counts of the table's columns and the puzzles per count."""

    table_people: list[int]
    puzzles_per_size: int


@dataclass(frozen=True)
class TheoryPolicy:
    vocab: int
    length: int
    dim: int


@dataclass(frozen=True)
class TheoryBetaGrid:
    beta1: list[float]
    beta2: list[float]
    accuracy: list[float]


@dataclass(frozen=True)
class TheoryKnobs:
    """``dgro_theory``: the random settings of the exact checks (see the notebook)."""

    n_problems: int
    log10_beta: list[float]
    n_policies: int
    policy: TheoryPolicy
    beta_grid: TheoryBetaGrid


@dataclass(frozen=True)
class DCPOKnobs(Sampled):
    """The DCPO notebooks: one label per sweep entry (in order) and the sampled reading."""

    labels: list[str]


@dataclass(frozen=True)
class DCPOTable2Knobs(DCPOKnobs):
    """``dcpo_table2_main``: also the kinds that stand for Table 3's contest benchmarks."""

    contest_benchmarks: list[str]


@dataclass(frozen=True)
class Calibration:
    n_prompts: int
    n_samples: int
    seed: int


@dataclass(frozen=True)
class DCPOTable4Knobs(DCPOKnobs):
    """``dcpo_table4_h0``: also how the base's entropy H0 is calibrated."""

    calibration: Calibration


@dataclass(frozen=True)
class NoKnobs:
    """A params file whose notebook reads nothing beyond the schema."""


@dataclass(frozen=True)
class LearningPilotKnobs(LearningKnobs):
    """``kk_pilot`` and ``kk_beta2_pilot`` (``bench/kk_learning.py``): one label per sweep entry (in order) and the
    greedy reading beside the sampled protocol."""


KNOBS: dict[str, type] = {
    "00_base_model": BaseModelKnobs,
    "01_miniature_map": MiniatureMapKnobs,
    "dgro_fig1_reward_variance": Fig1Knobs,
    "dgro_fig1_beta2_acting": Fig1bKnobs,
    "dgro_fig2_beta": GridKnobs,
    "dgro_fig3_methods": Fig3Knobs,
    "dgro_fig4_math_entropy": Fig4Knobs,
    "dgro_table2_kk": Table2KKKnobs,
    "dgro_table3_math": Sampled,
    "dgro_theory": TheoryKnobs,
    "dcpo_fig1_grid": DCPOKnobs,
    "dcpo_table2_main": DCPOTable2Knobs,
    "dcpo_table3_passk": NoKnobs,
    "dcpo_table4_h0": DCPOTable4Knobs,
    "dcpo_table5_ablation": DCPOKnobs,
    "kk_pilot": LearningPilotKnobs,
    "kk_beta2_pilot": LearningPilotKnobs,
}
"""Experiment (params ``name``) -> its knobs dataclass."""


def knobs_class(name: str) -> type | None:
    """The knobs dataclass of experiment ``name``, or None for one no notebook registers (free-form ``extra``)."""
    return KNOBS.get(name)
