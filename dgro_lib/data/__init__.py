"""Data: Knights & Knaves puzzles and math problems, and the reasoning traces of the embedded model.

* :mod:`.kk` -- K&K records: loaders and prompt formats; it re-exports :mod:`.kk.logic` (statement grammar,
  solver), :mod:`.kk.render` (official wording, chain of thought) and :mod:`.kk.generate` (puzzle generator);
  :mod:`.kk.trace` is the embedded model's reasoning trace.
  The names below are its public ones.
* :mod:`.math` -- math records and prompt formats; it re-exports :mod:`.math.values` (exact answers),
  :mod:`.math.generate` (offline problems), :mod:`.math.records` (raw benchmark records, multiple choice)
  and :mod:`.math.datasets` (the registry and :func:`~dgro_lib.data.math.load_math`).
* :mod:`.chat` -- prompts through a tokenizer's own chat template, and the ChatML check.
"""

from dgro_lib.data.kk import (
    NAMES,
    OFFICIAL_KEYS,
    OPERATORS,
    PROMPT_TEMPLATES,
    REQUIRED_KEYS,
    SAYING_TEMPLATES,
    PersonStatement,
    answer_text,
    chain_of_thought,
    evaluate,
    find_official_dir,
    format_prompt,
    generate,
    load_kk,
    load_kk_hub,
    parse_statements,
    render_quiz,
    render_statement,
    solve,
)

__all__ = [
    "NAMES",
    "OFFICIAL_KEYS",
    "OPERATORS",
    "PROMPT_TEMPLATES",
    "REQUIRED_KEYS",
    "SAYING_TEMPLATES",
    "PersonStatement",
    "answer_text",
    "chain_of_thought",
    "evaluate",
    "find_official_dir",
    "format_prompt",
    "generate",
    "load_kk",
    "load_kk_hub",
    "parse_statements",
    "render_quiz",
    "render_statement",
    "solve",
]
