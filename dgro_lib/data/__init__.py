"""Data: Knights & Knaves puzzles and math problems, and the reasoning traces of the embedded model.

* :mod:`.kk` -- K&K records: loaders and prompt formats; it re-exports :mod:`.kk_logic` (statement grammar,
  solver), :mod:`.kk_render` (official wording, chain of thought) and :mod:`.kk_generate` (puzzle generator).
  The names below are its public ones.
* :mod:`.math` -- math records and prompt formats; it re-exports :mod:`.math_values` (exact answers),
  :mod:`.math_generate` (offline problems), :mod:`.math_records` (raw benchmark records, multiple choice)
  and :mod:`.math_datasets` (the registry and :func:`~dgro_lib.data.math.load_math`).
* :mod:`.trace` -- the K&K reasoning traces of the embedded model's warm-up.
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
