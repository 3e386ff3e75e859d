"""The math data sets: where each lives (:data:`MATH_DATASETS`) and how to load it (:func:`load_math`).

:data:`MATH_DATASETS` maps a name to its Hugging Face Hub id, configuration, split, problem and answer
fields (dotted paths into nested records) and answer post-processing (:mod:`.records`). Both papers'
sets are there: DGRO Table 3 (MATH-500, AIME 2024, AMC 2023, Minerva, OlympiadBench; training on DeepScaleR
and ORZ) and DCPO Tables 2-3 (adding AIME 2025, HMMT 2025, GSM8K, and for Qwen3-4B the multiple-choice
GPQA-diamond and MMLU-Pro, whose options are rendered into the problem with letters and whose gold answer is
the letter; training on DAPO-17K). ``local_path`` (a ``.jsonl``/``.json``/``.parquet``/``.csv`` file or a
directory of them) takes precedence over the Hub and is read with the same field mapping, so a downloaded
copy of a Hub data set loads unchanged.
"""

from __future__ import annotations

import csv
import io
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from dgro_lib.util.paths import hub_mirror_path
from dgro_lib.data.math.records import (
    _fields_of,
    dapo_problem,
    gpqa_record,
    gsm8k_answer,
    mmlu_pro_record,
    olympiad_answer,
    plain_answer,
    plain_problem,
)

__all__ = ["MathDatasetSpec", "MATH_DATASETS", "resolve_dataset", "load_math"]


@dataclass(frozen=True)
class MathDatasetSpec:
    """Where a math data set lives and how its records map to ``{"problem", "answer", "source"}``.

    ``problem_field`` and ``answer_field`` are dotted paths into a record: ``"problem"``,
    ``"reward_model.ground_truth"``, ``"1.ground_truth.value"`` (a digit indexes a list, or a
    dict key ``"1"``). ``dedupe`` keeps only the first record of each problem text.
    ``record_post``, when set, first maps the whole raw record to the record the two fields are read
    from (the multiple-choice sets build ``{"problem", "answer"}`` from several columns: :func:`gpqa_record`,
    :func:`mmlu_pro_record`); a ValueError it raises is reported with the data set, file and row.
    """

    hub_id: str
    config: str | None
    split: str
    problem_field: str
    answer_field: str
    answer_post: Callable[[Any], str] = plain_answer
    problem_post: Callable[[Any], str] = plain_problem
    dedupe: bool = False
    aliases: tuple[str, ...] = field(default=())
    note: str = ""
    record_post: Callable[[Any], Any] | None = None


#: The math data sets of DGRO (Table 3; training sets in its Section 4.2) and DCPO (Tables 2-3, Appendix B).
MATH_DATASETS: dict[str, MathDatasetSpec] = {
    "math500": MathDatasetSpec("HuggingFaceH4/MATH-500", None, "test", "problem", "answer",
                               aliases=("math-500", "math_500", "math")),
    "aime2024": MathDatasetSpec("HuggingFaceH4/aime_2024", None, "train", "problem", "answer",
                                aliases=("aime24", "aime_2024", "aime-2024")),
    "aime2025": MathDatasetSpec("MathArena/aime_2025", None, "train", "problem", "answer",
                                aliases=("aime25", "aime_2025", "aime-2025"),
                                note="DCPO cites MathArena (Balunovic et al., 2025)"),
    "hmmt2025": MathDatasetSpec("MathArena/hmmt_feb_2025", None, "train", "problem", "answer",
                                aliases=("hmmt25", "hmmt_2025", "hmmt-2025"), note="DCPO Tables 2-3 (Qwen3-4B)"),
    "gpqa_diamond": MathDatasetSpec("Idavidrein/gpqa", "gpqa_diamond", "train", "problem", "answer",
                                    record_post=gpqa_record, aliases=("gpqa", "gpqa-diamond", "gpqadiamond"),
                                    note="DCPO Table 2 (Qwen3-4B), 198 questions; gated on the Hub (accept its terms "
                                         "and log in, or pass local_path= to gpqa_diamond.csv); the raw data lists "
                                         "the correct answer first, gpqa_record shuffles the options by "
                                         "GPQA_SHUFFLE_SEED; gold = a letter A-D"),
    "mmlu_pro": MathDatasetSpec("TIGER-Lab/MMLU-Pro", None, "test", "problem", "answer",
                                record_post=mmlu_pro_record, aliases=("mmlupro", "mmlu-pro"),
                                note="DCPO Table 2 (Qwen3-4B), 12,032 questions, up to ten options; gold = a "
                                     "letter A-J"),
    "amc2023": MathDatasetSpec("math-ai/amc23", None, "test", "question", "answer",
                               aliases=("amc23", "amc_2023", "amc-2023", "amc")),
    "minerva": MathDatasetSpec("math-ai/minervamath", None, "test", "question", "answer",
                               aliases=("minervamath", "minerva_math", "minerva-math")),
    "olympiadbench": MathDatasetSpec("math-ai/olympiadbench", None, "test", "question", "final_answer",
                                     answer_post=olympiad_answer,
                                     aliases=("olympiad", "olympiad_bench", "olympiad-bench")),
    "gsm8k": MathDatasetSpec("openai/gsm8k", "main", "test", "question", "answer", answer_post=gsm8k_answer,
                             aliases=("gsm-8k", "gsm_8k")),
    "dapo17k": MathDatasetSpec("BytedTsinghua-SIA/DAPO-Math-17k", None, "train", "prompt",
                               "reward_model.ground_truth", problem_post=dapo_problem, dedupe=True,
                               aliases=("dapo", "dapo-17k", "dapo_17k", "dapo-math-17k", "dapo_math_17k"),
                               note="the Hub copy repeats each problem; dedupe keeps the first"),
    "deepscaler": MathDatasetSpec("agentica-org/DeepScaleR-Preview-Dataset", None, "train", "problem", "answer",
                                  aliases=("deepscaler-preview", "deepscaler_preview")),
    "orz": MathDatasetSpec("Open-Reasoner-Zero/orz_math_72k_collection_extended", None, "train", "0.value",
                           "1.ground_truth.value",
                           aliases=("open-reasoner-zero", "orz_math", "orz-math"),
                           note="records are [human turn, assistant turn with ground_truth]; the 57k json of the "
                                "ORZ repository has the same layout and loads through local_path"),
}


def _norm_name(name: str) -> str:
    return re.sub(r"[\s_\-]", "", name.lower())


def resolve_dataset(name: str) -> tuple[str, MathDatasetSpec]:
    """``(canonical name, spec)`` for a name or alias of :data:`MATH_DATASETS` (case, ``-``, ``_`` ignored)."""
    if not isinstance(name, str):
        raise TypeError(f"name must be a str, got {type(name).__name__}")
    key = _norm_name(name)
    for canonical, spec in MATH_DATASETS.items():
        if key == _norm_name(canonical) or key in {_norm_name(a) for a in spec.aliases}:
            return canonical, spec
    raise ValueError(f"unknown math data set {name!r} (valid: {', '.join(MATH_DATASETS)})")


_MISSING = object()


def _get_path(record: Any, path: str) -> Any:
    cur = record
    for seg in path.split("."):
        if isinstance(cur, Mapping) and seg in cur:
            cur = cur[seg]
        elif isinstance(cur, (list, tuple)) and seg.isdigit() and int(seg) < len(cur):
            cur = cur[int(seg)]
        else:
            return _MISSING
    return cur


def _normalise(record: Any, name: str, spec: MathDatasetSpec, where: str) -> dict:
    if spec.record_post is not None:
        try:
            record = spec.record_post(record)
        except ValueError as exc:
            raise ValueError(f"{name}: {where}: bad record: {exc}") from None
    out = {}
    for key, path, post in (("problem", spec.problem_field, spec.problem_post),
                            ("answer", spec.answer_field, spec.answer_post)):
        raw = _get_path(record, path)
        if raw is _MISSING:
            raise ValueError(f"{name}: {where}: missing {key} field {path!r} (the record has {_fields_of(record)})")
        try:
            value = post(raw)
        except ValueError as exc:
            raise ValueError(f"{name}: {where}: bad {key} field {path!r}: {exc}") from None
        if not value:
            raise ValueError(f"{name}: {where}: empty {key} field {path!r}")
        out[key] = value
    out["source"] = name
    return out


_SUFFIXES = (".jsonl", ".json", ".parquet", ".csv")
_SPLIT_WORDS = {"train", "test", "validation", "valid", "val", "dev", "eval"}


def _read_json_lines(path: Path, lines: Iterable[str]) -> list:
    out = []
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}:{lineno}: invalid JSON: {exc}") from exc
    return out


def _read_file(path: Path, split: str) -> list:
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        import pyarrow.parquet as pq  # lazy: an optional dependency (installed with datasets), only parquet needs it

        return pq.read_table(path).to_pylist()
    text = path.read_text(encoding="utf-8")
    if suffix == ".csv":  # GPQA ships as csv (gpqa_diamond.csv); every value is read as a string
        return list(csv.DictReader(io.StringIO(text, newline="")))
    if suffix == ".jsonl":
        return _read_json_lines(path, text.splitlines())
    if suffix == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            if "Extra data" not in str(exc):
                raise ValueError(f"{path}: invalid JSON: {exc}") from exc
            # ``Dataset.to_json`` writes JSON lines even under a .json name.
            return _read_json_lines(path, text.splitlines())
        if isinstance(data, list):
            return data
        if isinstance(data, dict):
            if isinstance(data.get(split), list):
                return data[split]
            return [data]  # one object: the one line of a JSON-lines file
        raise ValueError(f"{path}: expected a JSON array of records, an object with a {split!r} array, or JSON "
                         f"lines; got a top-level {type(data).__name__}")
    raise ValueError(f"{path}: unsupported file type {suffix!r} (use {', '.join(_SUFFIXES)})")


def _local_files(path: Path, split: str, name: str) -> list[Path]:
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise FileNotFoundError(f"{name}: local_path {str(path)!r} does not exist")
    files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in _SUFFIXES)
    if not files:
        raise FileNotFoundError(f"{name}: no {', '.join(_SUFFIXES)} files under {path}")
    tokens = {p: set(re.split(r"[^a-z0-9]+", p.stem.lower())) for p in files}
    with_split = [p for p in files if split.lower() in tokens[p]]
    if with_split:
        return with_split
    if any(tokens[p] & _SPLIT_WORDS for p in files):
        raise FileNotFoundError(f"{name}: no file for split {split!r} under {path} "
                                f"(files: {[p.name for p in files][:20]})")
    return files


def load_math(name: str, *, split: str | None = None, limit: int | None = None,
              local_path: str | Path | None = None) -> list[dict]:
    """Load a math data set as ``{"problem", "answer", "source"}`` records (``source`` = canonical name).

    Args:
      name: a key or alias of :data:`MATH_DATASETS` (``"math500"``, ``"aime24"``, ``"gsm8k"``, ...).
      split: overrides the spec's split (Hub split, or the file-name token picked in a directory).
      limit: keep the first ``limit`` records (after ``dedupe``).
      local_path: a ``.jsonl``, ``.json`` (array, or JSON lines), ``.parquet`` or ``.csv`` file, or a directory
        of them, holding records with the Hub's field names. It takes precedence over the Hub. In a
        directory, files whose name has the split as a token (``test.jsonl``,
        ``test-00000-of-00001.parquet``) are used; when no file names a split, all files are used;
        when files name other splits only, FileNotFoundError. Without it, ``$DGRO_HUB_MIRROR`` (when set) names
        the copy: ``<mirror>/<hub id>[/<config>]`` (:func:`dgro_lib.util.paths.hub_mirror_path`).

    Raises:
      ValueError: unknown ``name`` (lists the valid ones), a bad ``limit``, or a record whose
        problem/answer field is missing or empty (the message names the data set, the file or Hub
        id, the row and the field, and lists the fields the record has).
      FileNotFoundError: ``local_path`` is missing or holds no usable file.
      RuntimeError: the Hub cannot be reached or the data set is not cached (names the data set and
        the Hub id, and says to pass ``local_path``).
    """
    canonical, spec = resolve_dataset(name)
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise ValueError(f"limit must be an int >= 0 or None, got {limit!r}")
    split = spec.split if split is None else split
    if local_path is None:  # a local copy of the Hub repository, when $DGRO_HUB_MIRROR is set
        local_path = hub_mirror_path(spec.hub_id, spec.config)
    if local_path is not None:
        rows: Iterable[tuple[str, Any]] = (
            (f"{f}: row {i}", r) for f in _local_files(Path(local_path), split, canonical)
            for i, r in enumerate(_read_file(f, split)))
    else:
        rows = _hub_rows(canonical, spec, split)
    out: list[dict] = []
    seen: set[str] = set()
    for where, record in rows:
        if limit is not None and len(out) >= limit:
            break
        rec = _normalise(record, canonical, spec, where)
        if spec.dedupe:
            if rec["problem"] in seen:
                continue
            seen.add(rec["problem"])
        out.append(rec)
    return out


def _hub_rows(name: str, spec: MathDatasetSpec, split: str) -> Iterable[tuple[str, Any]]:
    where = f"{spec.hub_id}" + (f" (config {spec.config!r})" if spec.config else "") + f", split {split!r}"
    try:
        import datasets  # lazy: optional and slow to import, only the Hub needs it
    except ImportError as exc:
        raise RuntimeError(f"{name}: loading {spec.hub_id} needs the 'datasets' package; "
                           "or pass local_path= to a local copy") from exc
    try:
        ds = datasets.load_dataset(spec.hub_id, spec.config, split=split)
    except Exception as exc:  # network, offline mode, missing config: all mean "use a local copy"
        raise RuntimeError(
            f"could not load math data set {name!r} from the Hugging Face Hub ({where}): "
            f"{type(exc).__name__}: {exc}. Offline? Download it elsewhere and pass "
            f"local_path= (a .jsonl/.json/.parquet/.csv file or a folder of them, with the Hub's field names).") from exc
    return ((f"{where}: row {i}", row) for i, row in enumerate(ds))
