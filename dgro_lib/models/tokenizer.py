"""The word-level tokenizers of the embedded models and their fixed vocabularies.

K&K (:func:`build_embedded_tokenizer`): every word of the prompts, answers and reasoning traces is one token, so a
~1M-parameter model spends its capacity on the logic instead of on spelling. Person labels "(1)".."(9)" are one
word each: they are the key the answer "(k) NAME" copies a name by.

Math (:func:`build_math_tokenizer`): a word or a punctuation character is one token, together with the space before
it; a digit is a token alone (a space before a number is a token of its own); decoding concatenates the tokens, so a number is a digit sequence the model computes digit
by digit and ``decode(encode(text)) == text`` for any text made of the vocabulary's pieces (the reward has to read
``\\boxed{834}`` exactly as written).
"""

from __future__ import annotations

import functools
from typing import Iterable

from tokenizers import AddedToken, Regex, Tokenizer, decoders, pre_tokenizers
from tokenizers.models import WordLevel
from transformers import PreTrainedTokenizerFast

from dgro_lib.data import kk
from dgro_lib.data.kk.trace import trace_vocabulary

__all__ = ["SPECIAL_TOKENS", "TAG_TOKENS", "build_tokenizer", "embedded_vocabulary", "build_embedded_tokenizer",
           "MATH_PIECE_PATTERN", "math_vocabulary", "build_math_tokenizer"]

PAD, UNK, EOS = "<pad>", "<unk>", "<eos>"
SPECIAL_TOKENS = (PAD, UNK, EOS)
# Added as NON-special tokens: TRL decodes completions with skip_special_tokens=True and the reward
# needs to see the tags.
TAG_TOKENS = ("<think>", "</think>", "<answer>", "</answer>")

# The vocabulary is a fixed function of these (independent of any model cfg).
_VOCAB_SEED = 12_345
_VOCAB_PUZZLES_PER_PEOPLE = 300


def _pre_tokenizer():
    # Whitespace, then every punctuation character on its own ('"Zoey,' -> '"', 'Zoey', ','), except a person
    # label "(k)", k one digit, which stays one word: it is the key the answer "(k) NAME" copies by.
    return pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(),
                                    pre_tokenizers.Split(Regex(r"\(\d\)|[^\w\s]|_"), "isolated")])


def build_tokenizer(words: Iterable[str], *, model_max_length: int = 8192):
    """A word-level ``PreTrainedTokenizerFast`` whose vocabulary is every word of ``words``.

    words: words or whole texts (split with the tokenizer's own pre-tokenizer: whitespace, then each
    punctuation character alone, except person labels "(1)".."(9)", one word each); the tags in
    :data:`TAG_TOKENS` inside texts are recognised.
    Ids: <pad>=0, <unk>=1, <eos>=2 (special), the four tags 3..6 (added, non-special), then the
    words in sorted order. No BOS/EOS is added on encode; decode joins tokens with single spaces
    (newlines are not kept: they only separate words).
    """
    # No decoder: the tokenizers library then joins tokens with spaces.
    return _word_level(words, _pre_tokenizer(), None, model_max_length)


def _word_level(texts: Iterable[str], pre, decoder, model_max_length: int):
    """A WordLevel ``PreTrainedTokenizerFast`` over every piece ``pre`` cuts ``texts`` into (tags removed first):
    <pad>=0, <unk>=1, <eos>=2 (special), the four tags 3..6 (added, non-special), then the pieces sorted."""
    pieces: set[str] = set()
    for text in texts:
        for tag in TAG_TOKENS:
            text = text.replace(tag, " ")
        pieces.update(w for w, _ in pre.pre_tokenize_str(text))
    pieces -= set(SPECIAL_TOKENS) | set(TAG_TOKENS)
    ordered = [*SPECIAL_TOKENS, *TAG_TOKENS, *sorted(pieces)]
    tok = Tokenizer(WordLevel({w: i for i, w in enumerate(ordered)}, unk_token=UNK))
    tok.pre_tokenizer = pre
    if decoder is not None:
        tok.decoder = decoder
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS])
    tok.add_tokens([AddedToken(t, special=False, normalized=False, single_word=False) for t in TAG_TOKENS])
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token=PAD,
        unk_token=UNK,
        eos_token=EOS,
        padding_side="left",  # generation pads prompts on the left
        model_max_length=model_max_length,
        clean_up_tokenization_spaces=False,  # keep decode(encode(x)) word-for-word
    )


@functools.lru_cache(maxsize=4)
def embedded_vocabulary(template: str = "plain", name_order: str = "random") -> tuple[str, ...]:
    """Texts whose words form the embedded vocabulary: generated quizzes and answers for 2-8 people (prompts in
    ``template``, people named by ``name_order``), every official name, and the trace words. Deterministic (fixed
    seed). The defaults give the one vocabulary every prompt template of the embedded model can be written in;
    ``("formal", "positional")`` gives the miniature's own, smaller one (see :func:`build_embedded_tokenizer`)."""
    texts: list[str] = []
    for p in range(2, 9):
        for rec in kk.generate(p, _VOCAB_PUZZLES_PER_PEOPLE, seed=_VOCAB_SEED + p, name_order=name_order):
            texts += [kk.format_prompt(rec, template=template), kk.answer_text(rec)]
    texts += list(kk.NAMES) + list(trace_vocabulary())
    return tuple(texts)


def build_embedded_tokenizer(template: str = "plain", name_order: str = "random"):
    """The embedded model's tokenizer (:func:`build_tokenizer` over :func:`embedded_vocabulary`).

    The default (153 tokens) covers the English quiz, so one tokenizer serves every template. A model that only
    ever sees the formal prompt can be built on the vocabulary of that prompt alone (104 tokens: no English quiz
    words): ``EmbeddedModelConfig.vocabulary = "own"``. The vocabulary fixes the embedding matrix and so the
    random initialisation that follows it; docs/embedded-model.md has what the two measured.
    """
    return build_tokenizer(embedded_vocabulary(template, name_order))


MATH_PIECE_PATTERN = r" ?[A-Za-z]+| ?[^\sA-Za-z\d]|\d|\s+"
"""A math token: a word or one non-digit character, each with at most one space before it; one digit (never with a
space: a digit has one embedding wherever it stands in a number, and a space before a number is a token of its own);
or a run of whitespace (newlines included)."""
_MATH_VOCAB_SEED = 54_321
_MATH_VOCAB_PROBLEMS = 400


def _math_pre_tokenizer():
    return pre_tokenizers.Split(Regex(MATH_PIECE_PATTERN), "isolated")


@functools.lru_cache(maxsize=2)
def math_vocabulary(template: str = "plain") -> tuple[str, ...]:
    """Texts whose pieces form the math tokenizer's vocabulary: generated miniature problems in ``template`` with
    their worked traces and boxed answers (fixed seed), and every digit and sign with and without a space before
    it."""
    from dgro_lib.data import math as math_data  # the data package imports nothing from models

    texts = []
    for rec, trace in math_data.worked_examples(_MATH_VOCAB_PROBLEMS, seed=_MATH_VOCAB_SEED):
        texts += [math_data.format_prompt(rec, template=template), f" {trace} ", f" \\boxed{{{rec['answer']}}}"]
    texts += [" ".join("0123456789+-") + " " + "".join("0123456789+-")]
    return tuple(texts)


def build_math_tokenizer(template: str = "plain", *, model_max_length: int = 8192):
    """The embedded math model's tokenizer (module docstring): ids <pad>=0, <unk>=1, <eos>=2 (special), the four
    tags 3..6 (added, non-special), then the pieces of :func:`math_vocabulary` in sorted order; decoding concatenates
    the pieces (they carry their own spaces)."""
    return _word_level(math_vocabulary(template), _math_pre_tokenizer(), decoders.Fuse(), model_max_length)
