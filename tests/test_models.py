"""dgro_lib.models and dgro_lib.data.kk.trace: tokenizer, traces, KV-cache sampler, cache, loading, LoRA.

Fast (tiny random models, a few seconds each); run with OMP_NUM_THREADS=1.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from typing import Sequence

import pytest
import torch

from dgro_lib import miniature
from dgro_lib import models as M
from dgro_lib.miniature import supervised as warmup_module
from dgro_lib.models import sampling as S
from dgro_lib.evaluate import accuracy as A
from dgro_lib.data import kk
from dgro_lib.data.kk.trace import build_trace, completion_text, header_words, reasoning_trace
from dgro_lib.tasks import get_task

torch.set_num_threads(1)


_ANSWER_RE = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)


def _local_kk_is_correct(completion: str, *, names: Sequence[str], solution: Sequence[bool]) -> bool:
    """A second, independent statement of the correctness rule, held against :func:`dgro_lib.rewards.kk_is_correct`
    (the rule evaluations use): tags </think>, <answer>, </answer> once each
    and in order (the prompt holds <think>), the last answer block names every person's role correctly, and it
    mentions knight/knave exactly once per person."""
    if completion.count("<think>") or any(completion.count(t) != 1 for t in ("</think>", "<answer>", "</answer>")):
        return False
    if not completion.index("</think>") < completion.index("<answer>") < completion.index("</answer>"):
        return False
    blocks = _ANSWER_RE.findall(completion)
    if not blocks:
        return False
    ans = blocks[-1]
    if len(re.findall(r"\b(knight|knave)\b", ans)) != len(names):
        return False
    for name, is_knight in zip(names, solution):
        m = re.search(rf"\b{re.escape(name)}\b\s+is\s+a\s+(knight|knave)", ans)
        if not m or (m.group(1) == "knight") != bool(is_knight):
            return False
    return True

TINY = M.EmbeddedModelConfig(hidden=32, layers=2, heads=4, kv_heads=2, intermediate=64, people=(2,), mix=(1.0,),
                             n_puzzles=24, trace_style="none", batch_size=4, max_steps=2, warmup_steps=1, seed=3)


@pytest.fixture(scope="module")
def tok():
    return M.build_embedded_tokenizer()


@pytest.fixture(scope="module")
def tiny_model(tok):
    model = miniature.build_tiny_model(M.EmbeddedModelConfig(hidden=32, layers=2, heads=4, kv_heads=2, intermediate=64),
                               tokenizer=tok)
    # At the default init the tied embeddings make greedy decoding repeat one token forever; larger
    # weights give varied outputs (and well-separated logits), so rows can stop at different steps.
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(8.0)
    return model


@pytest.fixture(scope="module")
def prompts():
    recs = kk.generate(3, 4, seed=11) + kk.generate(2, 3, seed=12)
    return [kk.format_prompt(r) for r in recs]


# ------------------------------------------------------------------ tokenizer

def test_tokenizer_round_trip_keeps_tags_and_words(tok):
    rec = kk.generate(3, 1, seed=5)[0]
    text = kk.format_prompt(rec) + " " + completion_text(rec)
    ids = tok(text, add_special_tokens=False)["input_ids"]
    assert tok.unk_token_id not in ids
    decoded = tok.decode(ids + [tok.eos_token_id], skip_special_tokens=True)
    for tag in M.TAG_TOKENS:  # non-special: survive skip_special_tokens (TRL's decode)
        assert decoded.count(tag) == 1
    assert "<eos>" not in decoded
    assert tok(decoded, add_special_tokens=False)["input_ids"] == ids  # word-for-word round trip
    assert decoded.split() == [t for t in tok.convert_ids_to_tokens(ids)]
    assert set(M.TAG_TOKENS).isdisjoint(tok.all_special_tokens)
    assert tok.eos_token == "<eos>" and tok.pad_token == "<pad>"


def test_generated_and_official_quizzes_have_no_unk(tok):
    recs = [r for p in range(2, 9) for r in kk.generate(p, 30, seed=4242 + p)]
    official = kk.find_official_dir()
    if official is not None:  # the official files (HF K-and-K/knights-and-knaves), when present
        split = official / "test" if (official / "test").is_dir() else official
        recs += [r for p in range(2, 9) for r in kk.load_kk(split, people=p, limit=15)]
    for r in recs:
        ids = tok(kk.format_prompt(r) + " " + kk.answer_text(r), add_special_tokens=False)["input_ids"]
        assert tok.unk_token_id not in ids, r["quiz"]
    for name in kk.NAMES:
        assert tok.convert_tokens_to_ids(name) != tok.unk_token_id


def test_tokenizer_save_load(tok, tmp_path):
    from transformers import AutoTokenizer

    tok.save_pretrained(tmp_path)
    tok2 = AutoTokenizer.from_pretrained(tmp_path)
    text = "Zoey is a knight </think> <answer> (1) Zoey is a knight </answer>"
    assert tok2(text)["input_ids"] == tok(text)["input_ids"]
    assert tok2.decode(tok2(text)["input_ids"], skip_special_tokens=True).count("</answer>") == 1


# ------------------------------------------------------------------ traces

@pytest.mark.parametrize("style", ["explicit", "named", "named_verbatim"])
@pytest.mark.parametrize("people", [2, 3, 4])
def test_trace_reaches_solution_and_is_judged_correct(tok, people, style):
    check = get_task("kk").is_correct  # the evaluation's correctness rule
    for rec in kk.generate(people, 40, seed=100 + people):
        t = build_trace(rec, style=style)
        assert list(t.assignment) == list(rec["solution"]) and not t.slipped
        comp = completion_text(rec, style=style)
        assert tok.unk_token_id not in tok(comp, add_special_tokens=False)["input_ids"]
        assert comp.endswith(" </think> <answer> " + kk.answer_text(rec) + " </answer>")
        # what TRL hands the reward: the decoded token ids (spaces around punctuation, no newlines)
        decoded = tok.decode(tok(comp, add_special_tokens=False)["input_ids"], skip_special_tokens=True)
        assert check(decoded, rec)
        assert _local_kk_is_correct(decoded, names=rec["names"], solution=rec["solution"])


@pytest.mark.parametrize("style", ["explicit", "named"])
def test_trace_steps_are_true_and_pruned(style):
    for rec in kk.generate(3, 30, seed=8):
        text = reasoning_trace(rec, style=style)
        assert text.count("try ") == build_trace(rec, style=style).n_tried
        # every "try" block but the last ends at its first "bad"; the last has one "ok" per person
        blocks = text.split("try ")[1:]
        for b in blocks[:-1]:
            assert b.count("bad") == 1 and b.rstrip().endswith("bad .")
        assert blocks[-1].count("ok") == 3 and "bad" not in blocks[-1]
        # every clause value "NAME ROLE T|F" is true under the assignment of its "try" line
        words, role, checked = text.split(), {}, 0
        for i, w in enumerate(words):
            if w == "try":
                role = {}
                j = i + 1
                while words[j] != ":":
                    role[words[j]] = words[j + 2]
                    j += 3
            elif w in ("T", "F") and words[i - 1] in ("knight", "knave"):
                negated = words[i - 2] == "not"
                person = words[i - 3] if negated else words[i - 2]
                assert ((role[person] == words[i - 1]) != negated) == (w == "T")
                checked += 1
        assert checked >= 2


def test_trace_headers():
    rec = kk.generate(3, 1, seed=5)[0]
    names, st = rec["names"], kk.parse_statements(rec["statements"])
    explicit, named, verbatim = (reasoning_trace(rec, style=s) for s in ("explicit", "named", "named_verbatim"))
    assert explicit.startswith(f"people (1) {names[0]} (2) {names[1]} (3) {names[2]} . (1) says ")
    assert named.startswith(f"{names[0]} says ") and "(1)" not in named and "people" not in named
    # verbatim: each header statement is the quiz's own wording of it
    for i, s in enumerate(st):
        assert f"{names[i]} says {kk.render_statement(s, names)} ." in verbatim
        assert kk.render_statement(s, names) in rec["quiz"]
    # the part before the first "try" is header_words, the same function the statement drills use
    for style, text in (("explicit", explicit), ("named", named), ("named_verbatim", verbatim)):
        assert text.split(" try ")[0].split() == header_words(st, names, style=style)


def test_statement_drill(tok):
    rng = random.Random(3)
    for _ in range(50):
        text = miniature.statement_drill_text(rng)
        assert tok.unk_token_id not in tok(text, add_special_tokens=False)["input_ids"]
        words = text.replace('"', " ").replace(",", " ").replace(".", " . ").split()
        first = next(i for i, w in enumerate(words) if w == "says")
        sentences, header = words[: first - 1], words[first - 1:]
        # every "NAME is (not) a ROLE" of the sentences, in order, is "NAME (not) ROLE" in the header
        said = [(w, sentences[i + 2] == "not", sentences[i + 3 + (sentences[i + 2] == "not")])
                for i, w in enumerate(sentences[:-3]) if w in kk.NAMES and sentences[i + 1] == "is"]
        claimed = [(w, header[i + 1] == "not", header[i + 1 + (header[i + 1] == "not")])
                   for i, w in enumerate(header[:-1]) if w in kk.NAMES and header[i + 1] != "says"]
        assert said == claimed and said
        assert 2 <= header.count("says") <= 3
    assert ". people (1) " in miniature.statement_drill_text(random.Random(0), style="explicit")  # legend, then labels


def test_trace_length_three_people():
    lens = [len(completion_text(r).split()) for r in kk.generate(3, 200, seed=9)]
    assert sum(lens) / len(lens) < 250


def test_slip_gives_consistent_wrong_answer():
    recs = kk.generate(3, 60, seed=21)
    slipped = 0
    for r in recs:
        t = build_trace(r, slip_rate=1.0, rng=random.Random(0))
        if t.slipped:
            slipped += 1
            assert list(t.assignment) != list(r["solution"])
            # the accepted assignment is the last "try" line, and the answer copies it
            last_try = t.text.split("try ")[-1].split(":")[0].split()
            assert [w for w in last_try if w in ("knight", "knave")] == [("knight" if a else "knave")
                                                                         for a in t.assignment]
            comp = completion_text(r, slip_rate=1.0, rng=random.Random(0))
            assert not _local_kk_is_correct(comp, names=r["names"], solution=r["solution"])
        else:
            assert list(t.assignment) == list(r["solution"])
    assert slipped > 20  # most 3-person puzzles have a near-miss assignment before the solution
    assert not any(build_trace(r, slip_rate=0.0).slipped for r in recs)
    # deterministic without an rng (seeded from the quiz)
    assert [reasoning_trace(r, slip_rate=0.5) for r in recs] == [reasoning_trace(r, slip_rate=0.5) for r in recs]


def test_unknown_trace_style():
    with pytest.raises(ValueError, match="explicit"):
        reasoning_trace(kk.generate(2, 1, seed=0)[0], style="compact")


# ------------------------------------------------------------------ sampler

def _generate_ref(model, tok, prompts, max_new_tokens, eos):
    enc = tok(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
    with torch.no_grad():
        g = model.generate(**enc, do_sample=False, max_new_tokens=max_new_tokens, eos_token_id=eos,
                           pad_token_id=tok.pad_token_id)
    out = []
    for row in g[:, enc["input_ids"].shape[1]:].tolist():
        out.append(row[: row.index(eos) + 1] if eos in row else row)
    return out


def _eos_with_spread(model, tok, prompts, max_new_tokens=30):
    """A token that greedy decoding emits at different steps per row: rows then finish at different times."""
    free = M.sample(model, tok, prompts, greedy=True, max_new_tokens=max_new_tokens, eos_token_id=[])
    for cand, _ in Counter(t for row in free for t in row[1:]).most_common():
        firsts = [row.index(cand) if cand in row else None for row in free]
        if len(set(firsts)) >= 3:
            return cand
    pytest.skip("random model found no token with a spread of stop positions")


def test_greedy_sampler_equals_generate(tiny_model, tok, prompts):
    eos = _eos_with_spread(tiny_model, tok, prompts)
    ours = M.sample(tiny_model, tok, prompts, greedy=True, max_new_tokens=30, eos_token_id=eos)
    ref = _generate_ref(tiny_model, tok, prompts, 30, eos)
    assert ours == ref
    assert len({len(o) for o in ours}) >= 2  # rows really finished at different steps
    # and with the tokenizer's real EOS (the random model rarely emits it: full-length rows)
    assert M.sample(tiny_model, tok, prompts, greedy=True, max_new_tokens=12) == \
        _generate_ref(tiny_model, tok, prompts, 12, tok.eos_token_id)


def test_sampler_drops_finished_rows_correctly(tiny_model, tok, prompts):
    eos = _eos_with_spread(tiny_model, tok, prompts)
    batched = M.sample(tiny_model, tok, prompts, greedy=True, max_new_tokens=30, eos_token_id=eos)
    for p, row in zip(prompts, batched):
        alone = M.sample(tiny_model, tok, [p], greedy=True, max_new_tokens=30, eos_token_id=eos)[0]
        assert row == alone
        assert (row[-1] == eos and eos not in row[:-1]) or (len(row) == 30 and eos not in row)
    # n copies per prompt, grouped prompt0 x n, prompt1 x n, ...; token-id prompts work too
    ids = [tok(p, add_special_tokens=False)["input_ids"] for p in prompts[:3]]
    rep = M.sample(tiny_model, tok, ids, n=3, greedy=True, max_new_tokens=30, eos_token_id=eos, batch_size=4)
    assert rep == [row for row in batched[:3] for _ in range(3)]


def test_growing_cache_samples_what_the_dynamic_cache_samples(tiny_model, tok, prompts, monkeypatch):
    """The sampler's in-place cache (spare capacity, doubled when full, rows dropped as they finish) gives the
    tokens transformers' DynamicCache gives, greedy and seeded, across several capacity doublings."""
    from transformers import DynamicCache

    eos = _eos_with_spread(tiny_model, tok, prompts)
    prompt_len = max(len(tok(p, add_special_tokens=False)["input_ids"]) for p in prompts)

    def runs():
        return (M.sample(tiny_model, tok, prompts, greedy=True, max_new_tokens=60, eos_token_id=eos),
                M.sample(tiny_model, tok, prompts[:3], n=4, seed=3, temperature=1.0, max_new_tokens=60,
                         eos_token_id=eos),
                # no stop token: prompt_len + 3 * prompt_len columns outgrow the first buffer twice
                M.sample(tiny_model, tok, prompts[:2], n=2, seed=4, temperature=1.0,
                         max_new_tokens=3 * prompt_len, eos_token_id=[]))

    ours = runs()
    cache = S._sampler_cache(tiny_model.config)
    assert {type(layer).__name__ for layer in cache.layers} == {"GrowingKVLayer"}
    monkeypatch.setattr("dgro_lib.models.sampling._sampler_cache", lambda config: DynamicCache(config=config))
    ref = runs()
    assert ours == ref
    assert len({len(r) for r in ref[0] + ref[1]}) >= 3  # rows finished at different steps (dropped from the cache)
    assert all(len(r) == 3 * prompt_len for r in ref[2])


def test_growing_cache_layer_follows_dynamic_layer_operations():
    """Every cache operation generate may call (update, crop, row selection, repeat) leaves the growing layer with the
    keys/values a DynamicLayer has after the same operations."""
    from transformers.cache_utils import DynamicLayer

    ours, ref = S._growing_kv_layer_class()[1](), DynamicLayer()
    g = torch.Generator().manual_seed(0)

    def kv(b, n):
        return torch.randn(b, 2, n, 4, generator=g), torch.randn(b, 2, n, 4, generator=g)

    steps = [("update", kv(3, 5)), ("update", kv(3, 40)), ("crop", -7), ("update", kv(3, 1)),
             ("select", torch.tensor([2, 0])), ("repeat", 2), ("update", kv(4, 30)), ("crop", 50)]
    for op, arg in steps:
        for layer in (ours, ref):
            if op == "update":
                layer.update(*arg)
            elif op == "crop":
                layer.crop(arg)
            elif op == "select":
                layer.batch_select_indices(arg)
            else:
                layer.batch_repeat_interleave(arg)
        assert ours.get_seq_length() == ref.get_seq_length(), op
        torch.testing.assert_close(ours.keys, ref.keys, rtol=0, atol=0)
        torch.testing.assert_close(ours.values, ref.values, rtol=0, atol=0)


def test_sampling_seeded_and_grouped(tiny_model, tok, prompts):
    a = M.sample(tiny_model, tok, prompts[:3], n=4, max_new_tokens=15, seed=0, temperature=1.0)
    b = M.sample(tiny_model, tok, prompts[:3], n=4, max_new_tokens=15, seed=0, temperature=1.0)
    c = M.sample(tiny_model, tok, prompts[:3], n=4, max_new_tokens=15, seed=1, temperature=1.0)
    assert a == b and a != c and len(a) == 12
    assert all(1 <= len(x) <= 15 for x in a)


class _LogitsRecorder(torch.nn.Module):
    """Wraps a model; records the next-token logits of every forward the sampler makes."""

    def __init__(self, inner):
        super().__init__()
        self.inner, self.config, self.seen = inner, inner.config, []

    def forward(self, **kw):
        out = self.inner(**kw)
        self.seen.append(out.logits[:, -1, :].detach().clone())
        return out


def _hf_top_p(logits, temperature, top_p):
    from transformers.generation.logits_process import TopPLogitsWarper

    return torch.softmax(TopPLogitsWarper(top_p)(None, logits.float() / temperature), dim=-1)


@pytest.mark.parametrize("top_p", [0.05, 0.5, 0.9, 0.99])
@pytest.mark.parametrize("temperature", [0.5, 1.0, 2.0])
def test_top_p_filter_equals_transformers_warper(top_p, temperature):
    logits = torch.randn(16, 300, generator=torch.Generator().manual_seed(7)) * 3
    ours = S._top_p_probs(torch.softmax(logits / temperature, dim=-1), top_p)
    ref = _hf_top_p(logits, temperature, top_p)
    assert torch.equal(ours > 0, ref > 0)  # the same nucleus
    torch.testing.assert_close(ours, ref, rtol=1e-5, atol=1e-7)
    assert torch.all((ours > 0).sum(-1) >= 1)


def test_top_p_sampler_draws_from_the_nucleus_of_each_step(tiny_model, tok, prompts, monkeypatch):
    """At every decode step the sampler draws from transformers' top-p distribution of that step's logits, and
    every sampled token lies in that step's nucleus (rows dropped as they finish included)."""
    eos = _eos_with_spread(tiny_model, tok, prompts)
    rec = _LogitsRecorder(tiny_model)
    drawn = []
    multinomial = torch.multinomial

    def recording_multinomial(probs, *a, **kw):
        out = multinomial(probs, *a, **kw)
        drawn.append((probs.clone(), out.squeeze(1).clone()))
        return out

    monkeypatch.setattr(torch, "multinomial", recording_multinomial)
    # n = 1 over distinct prompts: the recorded prefill logits are then row for row those the sampler draws from
    M.sample(rec, tok, prompts, seed=2, temperature=0.8, top_p=0.6, max_new_tokens=25, eos_token_id=eos)
    assert len(drawn) == len(rec.seen) >= 5
    sizes = []
    for logits, (probs, toks) in zip(rec.seen, drawn):
        ref = _hf_top_p(logits, 0.8, 0.6)
        assert torch.equal(probs > 0, ref > 0)
        torch.testing.assert_close(probs, ref, rtol=1e-5, atol=1e-7)
        assert bool(ref.gather(1, toks[:, None]).gt(0).all())  # never a token outside the nucleus
        sizes += (ref > 0).sum(-1).tolist()
    assert min(sizes) < tok.vocab_size // 2 and max(sizes) > 1  # the filter really cut, and not to greedy


def test_top_p_one_samples_exactly_what_plain_sampling_samples(tiny_model, tok, prompts, monkeypatch):
    """top_p = 1.0 hands the untouched softmax(logits / T) to multinomial: the tokens and the random stream of the
    sampler without top_p (seeded tests and cached results stay the same)."""
    eos = _eos_with_spread(tiny_model, tok, prompts)
    kw = dict(seed=5, temperature=0.7, max_new_tokens=20, eos_token_id=eos)
    plain = M.sample(tiny_model, tok, prompts, **kw)
    grouped = M.sample(tiny_model, tok, prompts[:3], n=3, **kw)  # shared prefills, rows copied
    assert M.sample(tiny_model, tok, prompts[:3], n=3, top_p=1.0, **kw) == grouped
    rec = _LogitsRecorder(tiny_model)
    drawn = []
    multinomial = torch.multinomial

    def recording_multinomial(probs, *a, **kw):
        drawn.append(probs.clone())
        return multinomial(probs, *a, **kw)

    monkeypatch.setattr(torch, "multinomial", recording_multinomial)
    monkeypatch.setattr("dgro_lib.models.sampling._top_p_probs", lambda *a: pytest.fail("top_p 1.0 must not filter"))
    assert M.sample(rec, tok, prompts, top_p=1.0, **kw) == plain
    assert len(drawn) == len(rec.seen)
    for logits, probs in zip(rec.seen, drawn):
        assert torch.equal(probs, torch.softmax(logits.float() / 0.7, dim=-1))


class _FixedLogits(torch.nn.Module):
    """A 'model' whose next-token distribution is the same at every position (no cache needed)."""

    def __init__(self, config, logits):
        super().__init__()
        self.config, self.logits, self.w = config, logits, torch.nn.Parameter(torch.zeros(1))

    def forward(self, input_ids, **kw):
        from types import SimpleNamespace

        return SimpleNamespace(logits=self.logits.expand(input_ids.shape[0], input_ids.shape[1], -1))


def test_top_p_never_samples_outside_the_nucleus_and_renormalises(tiny_model, tok):
    """p = 0.5, 0.3, 0.15 on three tokens and 0.05 spread over the rest: top_p 0.9 keeps exactly the three
    (0.8 < 0.9 <= 0.95) and draws them with p / 0.95; top_p 1.0 does draw the rest; a tiny top_p is greedy."""
    V = tiny_model.config.vocab_size
    a, b, c = 7, 11, 13
    p = torch.full((V,), 0.05 / (V - 3))
    p[[a, b, c]] = torch.tensor([0.5, 0.3, 0.15])
    model = _FixedLogits(tiny_model.config, p.log())
    kw = dict(n=4000, max_new_tokens=1, eos_token_id=[], seed=0)
    toks = Counter(row[0] for row in M.sample(model, tok, [[1, 2]], top_p=0.9, **kw))
    assert set(toks) == {a, b, c}
    for t, q in ((a, 0.5), (b, 0.3), (c, 0.15)):
        assert toks[t] / 4000 == pytest.approx(q / 0.95, abs=0.03)
    plain = Counter(row[0] for row in M.sample(model, tok, [[1, 2]], top_p=1.0, **kw))
    assert sum(v for t, v in plain.items() if t not in (a, b, c)) > 100  # ~200 expected: the test can fail
    assert set(row[0] for row in M.sample(model, tok, [[1, 2]], top_p=1e-6, **kw)) == {a}
    # the nucleus is taken after the temperature: top_p 0.6 keeps a and b at T = 1, a alone at T = 0.5 (where a has
    # 0.5^2 / sum p^2 ~ 0.69 of the mass)
    assert set(row[0] for row in M.sample(model, tok, [[1, 2]], top_p=0.6, **kw)) == {a, b}
    assert float((p.pow(2) / p.pow(2).sum())[a]) > 0.6
    assert set(row[0] for row in M.sample(model, tok, [[1, 2]], top_p=0.6, temperature=0.5, **kw)) == {a}


@pytest.mark.parametrize("bad", [0.0, -0.1, 1.5, float("nan"), True])
def test_top_p_out_of_range_is_refused(tiny_model, tok, bad):
    with pytest.raises(ValueError, match="top_p"):
        M.sample(tiny_model, tok, ["a"], top_p=bad, max_new_tokens=1)


def test_evaluate_sampled_passes_top_p(tiny_model, tok, monkeypatch):
    seen = []
    sample = M.sample

    def recording(*a, **kw):
        seen.append(kw["top_p"])
        return sample(*a, **kw)

    monkeypatch.setattr("dgro_lib.evaluate.accuracy.sample", recording)
    A.evaluate_sampled(tiny_model, tok, kk.generate(2, 3, seed=3), n=2, top_p=0.3, max_new_tokens=4, batch_size=2)
    assert seen and set(seen) == {0.3}


def test_evaluate_greedy_shapes(tiny_model, tok):
    recs = kk.generate(2, 5, seed=3)
    ev = A.evaluate_greedy(tiny_model, tok, recs, max_new_tokens=8, batch_size=2)
    assert ev["n"] == 5 and len(ev["correct"]) == 5 and len(ev["completions"]) == 5
    assert 0.0 <= ev["accuracy"] <= 1.0 and ev["mean_length"] <= 8
    assert ev["checker"] == "dgro_lib.rewards.kk_is_correct"
    sv = A.evaluate_sampled(tiny_model, tok, recs[:2], n=3, max_new_tokens=8, batch_size=6)
    assert sv["n"] == 6 and len(sv["per_prompt"]) == 2


def test_local_checker():
    names, sol = ["Zoey", "Owen"], [True, False]
    ok = "x </think> <answer> (1) Zoey is a knight\n(2) Owen is a knave </answer>"
    assert _local_kk_is_correct(ok, names=names, solution=sol)
    assert not _local_kk_is_correct(ok.replace("knave", "knight"), names=names, solution=sol)
    assert not _local_kk_is_correct(ok.replace("</think>", ""), names=names, solution=sol)
    assert not _local_kk_is_correct("", names=names, solution=sol)


# ------------------------------------------------------------------ cache, loading, LoRA

def test_embedded_cache_returns_same_path_without_rebuilding(tmp_path, monkeypatch):
    path = miniature.get_embedded_base_model(TINY, cache_dir=tmp_path, progress=False)
    assert path.name == f"llama-{M.config_hash(TINY)}" and (path / "embedded.json").exists()
    assert not list(tmp_path.glob(".*tmp-*"))  # the temporary build directory was renamed away

    def boom(*a, **k):
        raise AssertionError("rebuilt a cached model")

    monkeypatch.setattr("dgro_lib.miniature.build.warmup", boom)
    assert miniature.get_embedded_base_model(TINY, cache_dir=tmp_path) == path
    other = M.EmbeddedModelConfig(**{**TINY.to_dict(), "people": (2,), "mix": (1.0,), "seed": 4})
    assert M.config_hash(other) != M.config_hash(TINY)
    with pytest.raises(AssertionError, match="rebuilt"):
        miniature.get_embedded_base_model(other, cache_dir=tmp_path)
    assert not (tmp_path / f"llama-{M.config_hash(other)}").exists()  # a failed build leaves nothing

    from transformers import AutoTokenizer

    model, tok = M.load_model(path)
    assert type(model).__name__ == "LlamaForCausalLM" and model.config.tie_word_embeddings
    assert tok.convert_tokens_to_ids("</answer>") != tok.unk_token_id
    assert set(M.TAG_TOKENS).isdisjoint(tok.all_special_tokens)
    # the saved directory is an ordinary checkpoint: AutoTokenizer gives the same word-level ids
    text = kk.format_prompt(kk.generate(3, 1, seed=2)[0])
    assert AutoTokenizer.from_pretrained(path)(text)["input_ids"] == tok(text)["input_ids"] == \
        M.build_embedded_tokenizer()(text)["input_ids"]


def test_qwen2_embedded_dir_loads_word_level_tokenizer(tmp_path):
    cfg = M.EmbeddedModelConfig(**{**TINY.to_dict(), "arch": "qwen2"})
    path = miniature.get_embedded_base_model(cfg, cache_dir=tmp_path, progress=False)
    model, tok = M.load_model(path)
    assert type(model).__name__ == "Qwen2ForCausalLM"
    text = kk.format_prompt(kk.generate(2, 1, seed=2)[0])
    assert tok(text)["input_ids"] == M.build_embedded_tokenizer()(text)["input_ids"]


def test_presets_exist():
    assert set(M.EMBEDDED_PRESETS) >= {"ci", "cpu"}
    assert M.config_hash(M.EMBEDDED_PRESETS["ci"]) != M.config_hash(M.EMBEDDED_PRESETS["cpu"])


def test_lora_wrap_trains(tmp_path, tok):
    model = miniature.build_tiny_model(M.EmbeddedModelConfig(hidden=32, layers=2, heads=4, kv_heads=2, intermediate=64,
                                                     arch="llama"), tokenizer=tok)
    model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    model, tok2 = M.load_model(tmp_path, peft={"r": 4, "alpha": 8, "target_modules": ["q_proj", "v_proj"],
                                               "dropout": 0.0})
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n for n in trainable)
    frozen_before = {n: p.detach().clone() for n, p in model.named_parameters() if not p.requires_grad}
    rec = kk.generate(2, 2, seed=1)
    text = [kk.format_prompt(r) + " " + completion_text(r) for r in rec]
    batch = tok2(text, return_tensors="pt", padding=True, add_special_tokens=False)
    labels = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=3e-2)
    model.train()
    losses = []
    for _ in range(8):
        loss = model(**batch, labels=labels).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    assert losses[-1] < losses[0] - 0.05
    for n, p in model.named_parameters():
        if n in frozen_before:
            assert torch.equal(p, frozen_before[n])
    # the LoRA model samples through the same KV-cache loop
    out = M.sample(model, tok2, [kk.format_prompt(rec[0])], greedy=True, max_new_tokens=5)
    assert len(out) == 1 and len(out[0]) <= 5


def test_load_model_missing_path_names_it(tmp_path):
    missing = tmp_path / "no" / "such" / "model"
    with pytest.raises(FileNotFoundError, match=re.escape(str(missing))):
        M.load_model(str(missing))
    with pytest.raises(FileNotFoundError, match="config.json"):
        M.load_model(tmp_path)


# ------------------------------------------------------------------ warm-up recipe pieces

def test_copy_drill_is_a_numbered_list_and_its_legend(tok):
    rng = random.Random(0)
    for _ in range(50):
        text = miniature.copy_drill_text(rng)
        m = re.fullmatch(r"You meet (\d) inhabitants: (.*)\. people (.*) \.", text)
        assert m, text
        k, listed, legend = int(m.group(1)), m.group(2), m.group(3)
        pairs = re.findall(r"\((\d)\) (\w+)", legend)
        assert [int(i) for i, _ in pairs] == list(range(1, k + 1))
        assert re.findall(r"\((\d)\) (\w+)", listed) == pairs and len({n for _, n in pairs}) == k
        ids = tok(text, add_special_tokens=False)["input_ids"]
        assert tok.unk_token_id not in ids
        assert tok.convert_ids_to_tokens(ids).count("(1)") == 2  # the label is one token: the copy key


def test_warmup_with_prompt_loss_drills_and_name_weight_runs(tok):
    import dataclasses

    cfg = dataclasses.replace(TINY, trace_style="explicit", prompt_loss=True, copy_drill_every=2, copy_drill_batch=4,
                              name_loss_weight=4.0, max_steps=4)
    model = miniature.build_tiny_model(cfg, tokenizer=tok)
    before = [p.detach().clone() for p in model.parameters()]
    stats = miniature.warmup(model, tok, cfg, progress=False)
    assert stats["steps"] == 4 and all(map(lambda c: c[1] == c[1], stats["loss_curve"]))
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))
    assert M.config_hash(cfg) != M.config_hash(TINY)


def test_named_warmup_with_statement_drills(tok):
    import dataclasses

    cfg = dataclasses.replace(TINY, trace_style="named", copy_drill_every=2, copy_drill_batch=4, statement_drills=0.5,
                              max_steps=4)
    assert "statement_drills" in cfg.to_dict() and "statement_drills" not in TINY.to_dict()  # old hashes kept
    assert M.config_hash(cfg) != M.config_hash(dataclasses.replace(cfg, statement_drills=0.0))
    stats = miniature.warmup(miniature.build_tiny_model(cfg, tokenizer=tok), tok, cfg, progress=False)
    assert stats["steps"] == 4
    with pytest.raises(ValueError, match="statement_drills"):
        dataclasses.replace(cfg, statement_drills=2.0)

    class Recorder(torch.nn.Module):  # what one drill step feeds the model
        def forward(self, input_ids, labels):
            self.rows = [tok.decode([i for i in r if i != tok.pad_token_id]) for r in input_ids.tolist()]
            return type("Out", (), {"loss": torch.zeros(())})()

    rec = Recorder()
    warmup_module._drill_step(rec, tok, random.Random(0), 6, tok.pad_token_id, statement_fraction=0.5, style="named")
    statement = [r for r in rec.rows if " says " in r]
    assert len(statement) == 3 and all("people" in r for r in rec.rows if r not in statement)


def test_continued_warmup_starts_from_the_parent_preset(tmp_path):
    """continue_from: the second stage loads the parent's cached model (building it first), trains on, and is
    cached under a hash that includes the parent's; an architecture mismatch is refused by name."""
    import dataclasses

    import torch

    from dgro_lib.models import EMBEDDED_PRESETS, config_hash, load_model

    from dgro_lib.miniature import get_embedded_base_model

    ci = EMBEDDED_PRESETS["ci"]
    stage2 = dataclasses.replace(ci, continue_from="ci", max_steps=3, seed=1, time_budget_min=None)
    path = get_embedded_base_model(stage2, tmp_path, progress=False)
    parent = tmp_path / f"llama-{config_hash(ci)}"
    assert (parent / "embedded.json").exists() and path != parent
    assert config_hash(stage2) != config_hash(dataclasses.replace(stage2, continue_from=None))
    a, _ = load_model(parent)
    b, _ = load_model(path)
    pa, pb = dict(a.named_parameters()), dict(b.named_parameters())
    assert pa.keys() == pb.keys() and any(not torch.equal(pa[k], pb[k]) for k in pa)
    diffs = max(float((pa[k] - pb[k]).abs().max()) for k in pa)
    assert diffs < 1.0  # three small steps on top of the parent, not a fresh random model
    with pytest.raises(ValueError, match="hidden"):
        get_embedded_base_model(dataclasses.replace(stage2, hidden=64, heads=2, kv_heads=2), tmp_path, progress=False)
