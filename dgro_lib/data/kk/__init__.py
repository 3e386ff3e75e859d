"""Knights & Knaves (K&K) puzzles: the official record format, its loaders and the prompt formats.

The official data set (Xie et al. 2024, "On memorization of large language models in logical
reasoning"; Hugging Face ``K-and-K/knights-and-knaves``) stores one puzzle per JSON line::

    {"quiz": "A very special island is inhabited only by knights and knaves. ... So who is a knight and who is a knave?",
     "names": ["Penelope", "David", "Zoey"],
     "knight_knave": {"knight": "knight", "knave": "knave", "a_knight": "a knight", "a_knave": "a knave",
                      "Knight": "Knight", "Knave": "Knave"},
     "solution": [false, false, true],                       # True = knight, one entry per name
     "solution_text": "Penelope is a knave, David is a knave, and Zoey is a knight.",
     "solution_text_format": "(1) Penelope is a knave\\n(2) David is a knave\\n(3) Zoey is a knight",
     "cot_head": "Let's think step by step, ...",
     "cot_repeat_steps": ["Penelope cannot be a knight, because ...", ...],
     "cot_foot": "This leads to a feasible solution.",
     "statements": "(('<=>', ('telling-truth', 1), ('lying', 1)), ...)",   # Python literal, one tree per person
     "index": 0}

Files are named ``peopleN_numM.jsonl`` (N people per puzzle, M puzzles) under ``test/`` and ``train/``.

This module loads such records (:func:`load_kk`, :func:`load_kk_hub`) and turns them into prompts and
targets (:func:`format_prompt`, :func:`answer_text`). The rest lives in one module per job, and every name is
re-exported here (``kk.solve``, ``kk.generate``, ...):

* :mod:`.logic` -- the statement grammar (``statements``), evaluation and the solver;
* :mod:`.render` -- the official wording: statements, quizzes, solutions and the chain of thought;
* :mod:`.generate` -- the generator of unique-solution puzzles in this format.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Iterable, Sequence

from dgro_lib.util.paths import REPO, hub_mirror_path

# Re-exports: the names below were all defined in this module before the split; callers keep using ``kk.<name>``.
# ``_solution_text`` is reached by the tests.
from dgro_lib.data.chat import CHAT, render_chat, require_chatml
from dgro_lib.data.kk.generate import NAME_ORDERS, NAMES, generate, random_statements
from dgro_lib.data.kk.logic import LEAF_OPERATORS, OPERATORS, PersonStatement, evaluate, parse_statements, solve
from dgro_lib.data.kk.render import (
    COT_FOOT_FAIL,
    COT_FOOT_SUCCESS,
    COT_HEAD,
    KNIGHT_KNAVE,
    SAYING_TEMPLATES,
    _solution_text,
    _solution_text_format,
    chain_of_thought,
    render_quiz,
    render_sayings,
    render_statement,
)
from dgro_lib.data.kk.trace import header_words  # the formal template's quiz; trace renders from logic / render

__all__ = [
    "KK_HUB_ID",
    "PersonStatement",
    "OPERATORS",
    "OFFICIAL_KEYS",
    "REQUIRED_KEYS",
    "NAMES",
    "NAME_ORDERS",
    "SAYING_TEMPLATES",
    "PROMPT_TEMPLATES",
    "TEMPLATES",
    "chat_messages",
    "parse_statements",
    "evaluate",
    "solve",
    "render_statement",
    "render_quiz",
    "render_sayings",
    "random_statements",
    "chain_of_thought",
    "generate",
    "find_official_dir",
    "load_kk",
    "load_kk_hub",
    "format_prompt",
    "numbered_quiz",
    "answer_text",
]

OFFICIAL_KEYS = (
    "quiz", "names", "knight_knave", "solution", "solution_text", "solution_text_format",
    "cot_head", "cot_repeat_steps", "cot_foot", "statements", "index",
)
# Only what the library reads (prompts, rewards, evaluation); the other official keys are optional so
# that hand-made files in the same format still load.
REQUIRED_KEYS = ("quiz", "names", "solution")

_QWEN_SYSTEM = (
    "You are a helpful assistant. The assistant first thinks about the reasoning process in the mind "
    "and then provides the user with the answer. The reasoning process and answer are enclosed within "
    "<think> </think> and<answer> </answer> tags, respectively, i.e., <think> reasoning process here "
    "</think><answer> answer here </answer>.  Now the user asks you to solve a logical reasoning "
    "problem. After thinking, when you finally reach a conclusion, clearly state the identity of each "
    "character within <answer> </answer> tags. List the identity of each person one by one, for "
    "example, <answer> (1) Zoey is a knight\n(2) Oliver is a knight\n(3)... </answer>.\n"
)
# Both end in "<think>": the reward's format check (each of <think>, </think>, <answer>, </answer> exactly
# once and in order) then counts the prompt's "<think>" as the completion's opening tag.
PROMPT_TEMPLATES: dict[str, str] = {
    "plain": "{quiz}\nAnswer with each person's role.\n<think>",
    # The quiz in the trace's own words ("people (1) Abigail (2) Aiden . (1) says (2) knave . ..."): the
    # embedded miniature's simplification, a prompt whose header the trace copies verbatim.
    "formal": "{quiz}\nAnswer with each person's role.\n<think>",
    "qwen": ("<|im_start|>system\n" + _QWEN_SYSTEM.replace("{", "{{").replace("}", "}}")
             + "<|im_end|>\n<|im_start|>user\n{quiz}\n<|im_end|>\n<|im_start|>assistant\n<think>"),
}
TEMPLATES = (*PROMPT_TEMPLATES, CHAT)
"""Every prompt template name: the format strings above and ``chat`` (the tokenizer's chat template)."""


# --------------------------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------------------------

_FILE_RE = re.compile(r"^people(\d+)_num(\d+)\.jsonl$")


def find_official_dir() -> Path | None:
    """The official K&K folder (holding ``test/`` and ``train/``), or None.

    ``$DGRO_KK_DIR`` wins when set (a set-but-missing folder raises FileNotFoundError rather than
    silently falling back); otherwise ``<repo>/../shared/data/kk`` next to this checkout, which exists
    only on the development machines.
    """
    env = os.environ.get("DGRO_KK_DIR")
    if env:
        path = Path(env).expanduser()
        if not path.is_dir():
            raise FileNotFoundError(f"DGRO_KK_DIR={env!r} is not a directory")
        return path
    candidate = REPO.parent / "shared" / "data" / "kk"
    return candidate if candidate.is_dir() else None


def _people_set(people: int | Sequence[int] | None) -> set[int] | None:
    if people is None:
        return None
    if isinstance(people, int):
        return {people}
    return {int(p) for p in people}


def _check_record(record: Any, where: str) -> None:
    if not isinstance(record, dict):
        raise ValueError(f"{where}: expected a JSON object, got {type(record).__name__}")
    missing = [k for k in REQUIRED_KEYS if k not in record]
    if missing:
        raise ValueError(f"{where}: record is missing required key(s) {', '.join(map(repr, missing))} "
                         f"(required: {', '.join(REQUIRED_KEYS)})")
    names, solution = record["names"], record["solution"]
    if not isinstance(names, list) or not all(isinstance(x, str) for x in names):
        raise ValueError(f"{where}: 'names' must be a list of strings, got {names!r}")
    if (not isinstance(solution, list) or not all(isinstance(x, bool) for x in solution)
            or len(solution) != len(names)):
        raise ValueError(f"{where}: 'solution' must be a list of {len(names)} booleans (one per name), "
                         f"got {solution!r}")


def _read_jsonl(path: Path) -> Iterable[dict]:
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            where = f"{path}:{lineno}"
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{where}: invalid JSON: {exc}") from exc
            _check_record(record, where)
            yield record


def load_kk(path: str | Path, *, people: int | Sequence[int] | None = None,
            limit: int | None = None) -> list[dict]:
    """Load official-format K&K records.

    Args:
      path: one ``.jsonl`` file, or a directory holding ``peopleN_numM.jsonl`` files directly
        (e.g. ``<official>/test``; the parent with ``test/`` and ``train/`` is rejected so that
        splits are never mixed by accident).
      people: keep only puzzles with this many people (int or several). For a directory, each
        requested count must have a file.
      limit: at most this many records *per people count*, in file order (matches
        ``DataConfig.n_train``/``n_eval``, which count per people count).

    Returns:
      The records as dicts, in order of people count then file order. Every record has at least
      :data:`REQUIRED_KEYS`, ``names`` a list of str and ``solution`` a same-length list of bool.

    Raises:
      FileNotFoundError: missing path, or a directory without matching files.
      ValueError: a bad line; the message reads ``<file>:<line>: ...`` and names a missing key.
    """
    path = Path(path)
    wanted = _people_set(people)
    if limit is not None and limit < 0:
        raise ValueError(f"limit must be >= 0, got {limit}")
    if path.is_dir():
        found = []
        for f in path.iterdir():
            m = _FILE_RE.match(f.name)
            if m and f.is_file():
                found.append((int(m.group(1)), int(m.group(2)), f))
        if not found:
            subdirs = sorted(d.name for d in path.iterdir() if d.is_dir())
            hint = f" (it has sub-folders {subdirs}: pass one of them)" if subdirs else ""
            raise FileNotFoundError(f"no peopleN_numM.jsonl files in {path}{hint}")
        found.sort()
        if wanted is not None:
            available = {n for n, _, _ in found}
            absent = sorted(wanted - available)
            if absent:
                raise FileNotFoundError(f"no file for people={absent} in {path} (available: {sorted(available)})")
            found = [x for x in found if x[0] in wanted]
        files = [f for _, _, f in found]
    elif path.is_file():
        files = [path]
    else:
        raise FileNotFoundError(f"K&K data not found: {path}")

    counts: dict[int, int] = {}
    out: list[dict] = []
    for f in files:
        for record in _read_jsonl(f):
            k = len(record["names"])
            if wanted is not None and k not in wanted:
                continue
            if limit is not None and counts.get(k, 0) >= limit:
                continue
            counts[k] = counts.get(k, 0) + 1
            out.append(record)
    if len(files) == 1 and path.is_file():
        out.sort(key=lambda r: len(r["names"]))  # stable: file order within a people count
    return out


KK_HUB_ID = "K-and-K/knights-and-knaves"
"""The K&K data set's Hub id."""


def load_kk_hub(name: str = KK_HUB_ID, subset: str = "test", split: str | int = "3ppl",
                *, limit: int | None = None) -> list[dict]:
    """Load one split of the K&K data set from the Hugging Face Hub via ``datasets.load_dataset``, or from the
    local copy under ``$DGRO_HUB_MIRROR`` when that is set (:func:`dgro_lib.util.paths.hub_mirror_path`).

    Args:
      name: the Hub data set.
      subset: configuration, ``"test"`` or ``"train"``.
      split: ``"2ppl"`` ... ``"8ppl"``; an int N means ``f"{N}ppl"``.
      limit: keep the first ``limit`` records.

    Raises:
      RuntimeError: ``datasets`` is missing, or the Hub cannot be reached / the data is not cached
        (offline machines: copy the jsonl files and use :func:`load_kk`).
    """
    if isinstance(split, int):
        split = f"{split}ppl"
    local = hub_mirror_path(name)
    if local is not None:  # a local copy of the Hub repository: <subset>/people<N>_num<M>.jsonl, as the Hub has it
        m = re.fullmatch(r"(\d+)ppl", split)
        if m is None:
            raise ValueError(f"split {split!r}: expected '<N>ppl' (2ppl ... 8ppl) or an int")
        return load_kk(local / subset, people=int(m.group(1)), limit=limit)
    try:
        import datasets  # lazy: optional and slow to import, only the Hub needs it
    except ImportError as exc:
        raise RuntimeError("load_kk_hub needs the 'datasets' package (pip install datasets)") from exc
    try:
        ds = datasets.load_dataset(name, subset, split=split)
    except Exception as exc:  # network, offline mode, missing config: all mean "use a local copy"
        raise RuntimeError(
            f"could not load {name!r} (subset {subset!r}, split {split!r}) from the Hugging Face Hub: "
            f"{type(exc).__name__}: {exc}. Offline? Use load_kk() on a local copy of the jsonl files "
            f"(find_official_dir() / $DGRO_KK_DIR).") from exc
    records = []
    for i, row in enumerate(ds):
        if limit is not None and i >= limit:
            break
        record = dict(row)
        _check_record(record, f"{name}/{subset}/{split} row {i}")
        records.append(record)
    return records


# --------------------------------------------------------------------------------------------
# Prompts and targets
# --------------------------------------------------------------------------------------------

def chat_messages(record: dict) -> list[dict[str, str]]:
    """The ``qwen`` template's turns as chat messages (Logic-RL's system message, the quiz as the user turn), for the
    ``chat`` template to render with the model's own chat template."""
    return [{"role": "system", "content": _QWEN_SYSTEM}, {"role": "user", "content": record["quiz"]}]


def format_prompt(record: dict, *, template: str = "plain", tokenizer=None) -> str:
    """Prompt text for one record; every template ends with ``<think>``.

    ``plain`` (embedded word-level model): ``"{quiz}\\nAnswer with each person's role.\\n<think>"``.
    ``formal`` (the embedded miniature): the same, with the quiz replaced by the header of the ``explicit``
    reasoning trace (:func:`dgro_lib.data.kk.trace.header_words`): the statements in the trace's own words.
    ``qwen`` (real chat checkpoints): Logic-RL's chat prompt, system message then the quiz as the
    user turn, then ``<|im_start|>assistant\\n<think>``; refused for a ``tokenizer`` without ChatML's tokens.
    ``chat`` (real checkpoints): the same turns through ``tokenizer``'s own chat template
    (:func:`dgro_lib.data.chat.render_chat`), which it requires.
    """
    if template == CHAT:
        return render_chat(tokenizer, chat_messages(record))
    if template not in PROMPT_TEMPLATES:
        raise ValueError(f"unknown prompt template {template!r} (valid: {', '.join(TEMPLATES)})")
    if template == "qwen":
        require_chatml(tokenizer)
    if template == "formal":
        quiz = " ".join(header_words(parse_statements(record["statements"]), list(record["names"])))
    else:
        quiz = numbered_quiz(record) if template == "plain" else record["quiz"]
    return PROMPT_TEMPLATES[template].format(quiz=quiz)


_INTRO_RE = re.compile(r"inhabitants: ([^.]*)\.")


def numbered_quiz(record: dict) -> str:
    """The quiz with its list of inhabitants numbered as in the answer: "inhabitants: (1) Emily, (2) Jackson, and
    (3) Matthew." (the rest of the text unchanged).

    Used by the ``plain`` template of the embedded model: the answer format "(k) NAME is a ..." then has a key
    that occurs only in that list, so a tiny model can copy names by plain induction instead of counting
    positions in a list whose names recur throughout the quiz (measured: without it, a 1M-parameter model
    learned every other part of the trace and never the names). The puzzle itself is unchanged.
    Raises ValueError naming the record's index when the quiz has no "inhabitants: ... ." sentence listing
    every name in order.
    """
    quiz, names = record["quiz"], list(record["names"])
    m = _INTRO_RE.search(quiz)
    intro = m.group(1) if m else ""
    out, pos = [], 0
    for k, name in enumerate(names, 1):
        hit = re.search(rf"\b{re.escape(name)}\b", intro[pos:])
        if hit is None:
            raise ValueError(f"record {record.get('index', '?')}: the quiz does not list inhabitant {name!r} after "
                             "'inhabitants:' (cannot number the list)")
        out.append(intro[pos:pos + hit.start()] + f"({k}) {name}")
        pos += hit.end()
    out.append(intro[pos:])
    return quiz[:m.start(1)] + "".join(out) + quiz[m.end(1):]


def answer_text(record: dict) -> str:
    """The target answer block ``"(1) NAME is a knight\\n(2) NAME is a knave ..."``.

    Built from ``names`` and ``solution`` (equal to the official ``solution_text_format``), so it also
    works for records that lack that key.
    """
    return _solution_text_format(record["names"], record["solution"], record.get("knight_knave"))
