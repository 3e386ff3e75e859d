"""A local mirror of the Hub data sets, written by the project's own generators in each data set's record format.

``data.source: hub`` loads K&K from ``K-and-K/knights-and-knaves`` and the math sets from their Hub ids
(:data:`dgro_lib.data.math.MATH_DATASETS`). With ``$DGRO_HUB_MIRROR`` set (:data:`dgro_lib.util.paths.HUB_MIRROR_ENV`)
the same loaders read ``<mirror>/<hub id>[/<config>]/`` instead, with the same field mapping, so a data set
downloaded elsewhere (``huggingface-cli download --repo-type dataset <id> --local-dir <mirror>/<id>``) loads
unchanged on an offline node.

This module writes such a mirror from generated data, so the hub path (file layout, field names, nesting, answer
post-processing, deduplication) runs where the Hub cannot be reached: the ``paper`` profile's rehearsal
(:mod:`dgro_lib.cli.rehearse`) and the tests. Each record is the data set's own shape with generated content:

* K&K: ``<subset>/people<N>_num<M>.jsonl`` holding :func:`dgro_lib.data.kk.generate`'s records (the official
  fields: ``quiz``, ``names``, ``solution``, ``solution_text``, ``statements``, ...), train and test drawn from
  different seeds;
* math: one ``<split>.jsonl`` per data set, a generated problem and answer (:func:`dgro_lib.data.math.generate_math`)
  written back through the inverse of the data set's mapping (:func:`math_hub_record`): DAPO's chat ``prompt`` with
  its instruction text and ``reward_model.ground_truth``, GSM8K's worked solution ending in ``#### <answer>``,
  OlympiadBench's ``final_answer`` list of ``$...$``, ORZ's two-turn list, GPQA's correct and incorrect answers,
  MMLU-Pro's ``options`` and ``answer_index``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable, Sequence

from dgro_lib.data import kk
from dgro_lib.data.kk import KK_HUB_ID
from dgro_lib.util.files import atomic_write
from dgro_lib.util.paths import hub_copy_dir
from dgro_lib.data.math.datasets import MATH_DATASETS, resolve_dataset
from dgro_lib.data.math.generate import KINDS, generate_math
from dgro_lib.data.math.records import (
    _DAPO_PREFIX,
    _DAPO_SUFFIX,
    CHOICE_LETTERS,
    dapo_problem,
    gpqa_record,
    gsm8k_answer,
    mmlu_pro_record,
    olympiad_answer,
)

__all__ = ["math_hub_record", "write_kk_mirror", "write_math_mirror"]

def _set_path(record: Any, path: str, value: Any) -> Any:
    """``record`` with ``value`` at the dotted ``path`` (a digit segment indexes a list, created as needed); the
    inverse of the loader's field lookup."""
    segs = path.split(".")
    if record is None:
        record = [] if segs[0].isdigit() else {}
    cur = record
    for i, seg in enumerate(segs):
        last = i == len(segs) - 1
        nxt = None if last else ([] if segs[i + 1].isdigit() else {})
        if seg.isdigit():
            idx = int(seg)
            while len(cur) <= idx:
                cur.append({})
            if last:
                cur[idx] = value
            elif not cur[idx]:
                cur[idx] = nxt
            cur = cur[idx] if not last else cur
        else:
            if last:
                cur[seg] = value
            else:
                cur = cur.setdefault(seg, nxt)
    return record


def math_hub_record(name: str, problem: str, answer: str, *, distractors: Sequence[str] = ()) -> Any:
    """The record data set ``name`` would hold for ``problem`` and ``answer``: what its loader maps back to them.

    For the multiple-choice sets (GPQA-diamond, MMLU-Pro) the loader's problem is the question with lettered
    options and its answer is the letter of ``answer``; ``distractors`` are the wrong options (3 for GPQA, 1 to 9 for
    MMLU-Pro), all different from ``answer``.
    """
    canonical, spec = resolve_dataset(name)
    if spec.record_post is not None:
        if answer in distractors or len(set(distractors)) != len(distractors):
            raise ValueError(f"{canonical}: the distractors must differ from each other and from the answer "
                             f"{answer!r}, got {list(distractors)!r}")
        if spec.record_post is gpqa_record:
            if len(distractors) != 3:
                raise ValueError(f"{canonical}: GPQA has 3 incorrect answers, got {len(distractors)} distractors")
            return {"Question": problem, "Correct Answer": answer,
                    **{f"Incorrect Answer {i}": d for i, d in enumerate(distractors, start=1)}}
        if spec.record_post is mmlu_pro_record:
            if not 1 <= len(distractors) <= len(CHOICE_LETTERS) - 1:
                raise ValueError(f"{canonical}: MMLU-Pro needs 1 to 9 distractors, got {len(distractors)}")
            at = len(problem) % (len(distractors) + 1)  # where the correct option sits: varies with the question
            options = list(distractors[:at]) + [answer] + list(distractors[at:])
            return {"question": problem, "options": options, "answer_index": at, "answer": CHOICE_LETTERS[at]}
        raise ValueError(f"{canonical}: no writer for its record_post {spec.record_post.__name__}")
    raw_problem: Any = problem
    if spec.problem_post is dapo_problem:  # DAPO: a chat prompt whose user turn wraps the problem in instructions
        raw_problem = [{"role": "user", "content": _DAPO_PREFIX + problem + _DAPO_SUFFIX}]
    raw_answer: Any = answer
    if spec.answer_post is gsm8k_answer:
        raw_answer = f"The worked solution.\n#### {answer}"
    elif spec.answer_post is olympiad_answer:
        raw_answer = [f"${answer}$"]
    record = _set_path(None, spec.problem_field, raw_problem)
    return _set_path(record, spec.answer_field, raw_answer)


def _write_jsonl(path: Path, records: Iterable[Any]) -> Path:
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
    atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))  # a reader never sees half a file
    return path


def write_kk_mirror(root: str | Path, *, people: Iterable[int] = range(2, 9), n_train: int = 16, n_test: int = 8,
                    seed: int = 0) -> Path:
    """Write generated K&K puzzles as the Hub's ``K-and-K/knights-and-knaves`` holds them, under ``root``:
    ``train/people<N>_num<n_train>.jsonl`` and ``test/people<N>_num<n_test>.jsonl`` for each N in ``people``,
    the two splits drawn from different seeds. Returns the data set's folder."""
    base = hub_copy_dir(root, KK_HUB_ID)
    for p in people:
        for subset, n, offset in (("train", n_train, 0), ("test", n_test, 500)):
            _write_jsonl(base / subset / f"people{p}_num{n}.jsonl", kk.generate(p, n, seed=seed * 1000 + offset + p))
    return base


def write_math_mirror(root: str | Path, names: Iterable[str], *, n: int = 16, seed: int = 0) -> list[Path]:
    """Write ``n`` generated problems for each math data set of ``names`` (any name or alias of
    :data:`MATH_DATASETS`) in its Hub record format, as ``<root>/<hub id>[/<config>]/<split>.jsonl``; each data
    set's problems come from a seed of its own (GSM8K's are integer problems: its answers are numbers). Returns the
    files."""
    written = []
    for name in dict.fromkeys(resolve_dataset(x)[0] for x in names):  # each data set once, in order
        spec = MATH_DATASETS[name]
        # each data set from its own seed: a training set that repeated a held-out one would lose every record to
        # the held-out filter (dgro_lib.runs.data_sources)
        # GSM8K's answers are numbers (its loader drops thousands commas): integer problems only
        kinds = ("integer",) if spec.answer_post is gsm8k_answer else KINDS
        problems = generate_math(n, seed=seed * 100 + list(MATH_DATASETS).index(name), kinds=kinds)
        answers = list(dict.fromkeys(r["answer"] for r in problems))
        records = []
        for r in problems:
            wrong = [a for a in answers if a != r["answer"]]
            wanted = 3 if spec.record_post is gpqa_record else min(9, max(1, len(wrong)))
            wrong = (wrong + [f"{r['answer']} + {k}" for k in range(1, 10)])[:wanted]
            records.append(math_hub_record(name, r["problem"], r["answer"], distractors=wrong))
        written.append(_write_jsonl(hub_copy_dir(root, spec.hub_id, spec.config) / f"{spec.split}.jsonl", records))
    return written
