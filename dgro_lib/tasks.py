"""The tasks the experiment runner trains and evaluates on, one registry entry each: Knights-and-Knaves (``kk``) and
math (``math``). Everything that differs between them lives here, so the runner, the trainer and the evaluation
never branch on the task's name: where its records come from, what identifies a record, its prompt, the dataset
columns the reward reads, the reward function, the correctness and format rules of the evaluation, and how results
are grouped (K&K by people count, math by benchmark).

Records: K&K as :mod:`dgro_lib.data.kk` makes them (``names``, ``statements``, ``solution``, ...); math as
:mod:`dgro_lib.data.math` makes them (``problem``, ``answer``, ``source``).

Math data (``data.task: math``): ``data.source: generated`` reads the reserved name ``synthetic`` in
``data.math_train`` / ``data.math_eval`` as the offline generator (:func:`dgro_lib.data.math.generate_math`, seeded
by ``data.train_seed`` / ``data.eval_seed``); ``hub`` loads registry names from the Hub and ``official`` from local
copies under ``data.official_dir/<name>`` (:func:`dgro_lib.data.math.load_math`). ``data.n_train`` / ``data.n_eval``
cap each set.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from dgro_lib.data import kk
from dgro_lib.data import math as math_data
from dgro_lib.rewards import check_format, check_math_format, kk_is_correct, kk_reward_func, math_is_correct, math_reward_func

if TYPE_CHECKING:  # annotations only: dgro_lib.config's checks import this module
    from dgro_lib.config.schema import ExperimentConfig

__all__ = ["Task", "TASKS", "get_task", "puzzle_key"]

SYNTHETIC = math_data.SYNTHETIC

# Both tasks' prompt templates end in "<think>", so the correctness and format rules count the prompt's "<think>"
# as the completion's opening tag.
_THINK_IN_PROMPT = True


@dataclass(frozen=True)
class Task:
    """What the runner needs to know of a task; every field is a function of records or of the config."""

    name: str
    load: Callable[["ExperimentConfig", str], list[dict]]
    """(cfg, ``"train"`` | ``"eval"``) -> the split's records, before training records that are held out are
    dropped (:func:`dgro_lib.runs.data_sources.load_train_records` drops them by :func:`puzzle_key`)."""
    prompt: Callable[..., str]
    """(record, template, tokenizer=None) -> prompt text (every template ends in ``<think>``); the ``chat`` template
    renders with ``tokenizer``'s chat template and needs it, and ``qwen`` is refused for a tokenizer without ChatML's
    tokens."""
    columns: Callable[[list[dict]], dict[str, list]]
    """records -> the dataset columns besides ``prompt``, which TRL hands the reward function per completion."""
    reward_func: Callable[[Any], Any]
    """scheme (a name or ``(c_f, c_corr, c_com)``) -> the picklable TRL reward function."""
    is_correct: Callable[[str, dict], bool]
    """(completion, record) -> whether the answer is right (the reward's own rule)."""
    well_formatted: Callable[[str], bool]
    """completion -> whether its tags pass the reward's format rule."""
    group: Callable[[dict], Any]
    """record -> the group results are broken down by (``group_name`` in an evaluation)."""
    group_name: str
    checker: str
    """The correctness rule's name, recorded with every evaluation."""


def _kk_load(cfg: "ExperimentConfig", split: str) -> list[dict]:
    d = cfg.data
    people = d.train_people if split == "train" else d.eval_people
    n = d.n_train if split == "train" else d.n_eval
    seed = d.train_seed if split == "train" else d.eval_seed
    out: list[dict] = []
    for p in people:
        if d.source == "generated":
            out += kk.generate(p, n, seed=seed * 100 + p, name_order=d.name_order)
        elif d.source == "official":
            if d.official_dir is None:
                raise ValueError("data.official_dir: required when data.source is 'official'")
            out += kk.load_kk(Path(d.official_dir) / ("train" if split == "train" else "test"), people=p, limit=n)
        else:
            out += kk.load_kk_hub(subset="train" if split == "train" else "test", split=p, limit=n)
    return out


def _math_load(cfg: "ExperimentConfig", split: str) -> list[dict]:
    d = cfg.data
    names = [d.math_train] if split == "train" else list(d.math_eval)
    n = d.n_train if split == "train" else d.n_eval
    out: list[dict] = []
    # the config's checks have paired the names with the source: synthetic <-> generated, a data set <-> hub / official
    for name in names:
        if name == SYNTHETIC:
            kinds = math_data.KINDS if d.math_kinds is None else d.math_kinds
            out += math_data.generate_math(n, seed=d.train_seed if split == "train" else d.eval_seed, kinds=kinds)
        elif d.source == "official":
            out += math_data.load_math(name, limit=n, local_path=Path(d.official_dir) / name)
        else:
            out += math_data.load_math(name, limit=n)
    return out


TASKS: dict[str, Task] = {
    "kk": Task(
        name="kk", load=_kk_load,
        prompt=lambda r, template, tokenizer=None: kk.format_prompt(r, template=template, tokenizer=tokenizer),
        columns=lambda recs: {"names": [list(r["names"]) for r in recs],
                              "solution": [list(r["solution"]) for r in recs]},
        reward_func=kk_reward_func,
        is_correct=lambda c, r: bool(kk_is_correct(c, names=r["names"], solution=r["solution"],
                                                   think_in_prompt=_THINK_IN_PROMPT)),
        well_formatted=lambda c: check_format(c, think_in_prompt=_THINK_IN_PROMPT),
        group=lambda r: len(r["names"]), group_name="by_people", checker="dgro_lib.rewards.kk_is_correct"),
    "math": Task(
        name="math", load=_math_load,
        prompt=lambda r, template, tokenizer=None: math_data.format_prompt(r, template=template,
                                                                         tokenizer=tokenizer),
        columns=lambda recs: {"answer": [r["answer"] for r in recs]},
        reward_func=math_reward_func,
        is_correct=lambda c, r: bool(math_is_correct(c, answer=r["answer"], think_in_prompt=_THINK_IN_PROMPT)),
        well_formatted=lambda c: check_math_format(c, think_in_prompt=_THINK_IN_PROMPT),
        group=lambda r: r["source"], group_name="by_source", checker="dgro_lib.rewards.math_is_correct"),
}


def get_task(name: str) -> Task:
    """The registry entry of ``data.task``; an unknown name lists the valid ones."""
    if name not in TASKS:
        raise ValueError(f"data.task: {name!r} is not one of {', '.join(TASKS)}")
    return TASKS[name]


def puzzle_key(record: dict) -> tuple:
    """What identifies a record: a K&K puzzle's names and statements, a math problem's text and answer. (The two
    record formats share no field, so the record itself says which task it is.)"""
    if "problem" in record:
        return (record["problem"], str(record["answer"]))
    return (tuple(record["names"]), str(record["statements"]))
