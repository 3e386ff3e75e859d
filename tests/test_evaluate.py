"""McNemar statistics and the paired table against hand-computed references; run ids; the reproduce CLI; format_rate
and the per-people tables on hand-made completions."""

import math
import random
from types import SimpleNamespace

import pandas as pd
import pytest

from dgro_lib.cli import reproduce
from dgro_lib.data import kk
from dgro_lib.evaluate import evaluate_greedy, evaluate_sampled, mcnemar, paired_improvement_table
from dgro_lib.evaluate.accuracy import greedy_accuracy_by_people, sampled_success_by_people
from dgro_lib.runs.experiment import run_id_for


def test_mcnemar_matches_a_loop_reference():
    rng = random.Random(0)
    before = [rng.random() < 0.6 for _ in range(400)]
    after = [rng.random() < 0.7 for _ in range(400)]
    m = mcnemar(before, after)
    fixed = broken = 0
    for b, a in zip(before, after):
        fixed += (not b) and a
        broken += b and (not a)
    assert (m["fixed"], m["broken"]) == (fixed, broken)
    assert m["z"] == pytest.approx((fixed - broken) / math.sqrt(fixed + broken))
    # two-sided normal p-value, computed independently through the CDF
    cdf = 0.5 * (1 + math.erf(abs(m["z"]) / math.sqrt(2)))
    assert m["p"] == pytest.approx(2 * (1 - cdf))
    assert m["acc_after"] - m["acc_before"] == pytest.approx((fixed - broken) / 400)


def test_mcnemar_edge_cases():
    assert mcnemar([True, False], [True, False])["z"] == 0.0
    with pytest.raises(ValueError, match="paired"):
        mcnemar([True], [True, False])


def test_pooled_row_sums_discordant_pairs_over_seeds():
    base = [False] * 5 + [True] * 5
    finals = pd.DataFrame([
        {"scheme": "a", "seed": 0, "correct": [True] * 3 + [False] * 2 + [True] * 4 + [False]},  # +3 -1
        {"scheme": "a", "seed": 1, "correct": [True] * 2 + [False] * 3 + [True] * 5},  # +2 -0
    ])
    t = paired_improvement_table(finals, base, by="scheme")
    pooled = t[t["seed"] == "pooled"].iloc[0]
    assert (pooled["fixed"], pooled["broken"]) == (5, 1)
    assert pooled["z"] == pytest.approx(4 / math.sqrt(6))


def test_run_ids_are_filesystem_safe_and_distinct():
    ids = {run_id_for({"reward.scheme": s}, seed) for s in ["[-1,1]", "[-3,3]", "[-5,5]"] for seed in range(3)}
    assert len(ids) == 9
    assert all("/" not in i and "[" not in i and "," not in i for i in ids)


def test_reproduce_cli_lists_and_rejects_bad_names(capsys):
    assert reproduce.main(["--profile", "ci", "--list"]) == 0
    out = capsys.readouterr().out
    assert "dgro_fig1_reward_variance" in out and "00_base_model" in out
    with pytest.raises(SystemExit):
        reproduce.main(["--profile", "nope"])
    assert "available: ci, cpu, gpu, paper" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        reproduce.main(["--profile", "ci", "--only", "no_such_notebook"])
    assert "unknown notebook" in capsys.readouterr().err


# ------------------------------------------------------------------ format_rate and the per-people tables
# A fake sampler and tokenizer: every prompt has a script of hand-made completions, so the evaluation's numbers can
# be computed by hand. Token ids: [text id, EOS] (two tokens, EOS-terminated), or [text id] for a truncated one.


class _FakeTokenizer:
    eos_token_id = pad_token_id = 0

    def __init__(self):
        self.texts = ["<eos>"]

    def ids(self, text: str, eos: bool = True) -> list[int]:
        self.texts.append(text)
        return [len(self.texts) - 1] + ([0] if eos else [])

    def batch_decode(self, ids, skip_special_tokens=True):
        return [" ".join(self.texts[i] for i in x if i != 0) for x in ids]


def _answer(rec, flip=False):
    return " ".join(f"({i + 1}) {n} is a {'knight' if s != flip else 'knave'}"
                    for i, (n, s) in enumerate(zip(rec["names"], rec["solution"])))


def _completions(rec):
    """Hand-made completions of one puzzle and, for each, (correct, well formatted) under the reward's rules with
    the prompt's <think> counted as the opening tag."""
    return [
        (f"so </think> <answer> {_answer(rec)} </answer>", True, True),
        (f"so </think> <answer> {_answer(rec, flip=True)} </answer>", False, True),  # wrong, tags fine
        (f"so <answer> {_answer(rec)} </answer>", False, False),  # no </think>
        (f"<think> so </think> <answer> {_answer(rec)} </answer>", False, False),  # second <think>
        (f"so </think> <answer> {_answer(rec)}", False, False),  # unclosed answer
        (f"<answer> {_answer(rec)} </answer> so </think>", False, False),  # tags out of order
        ("no tags at all", False, False),
        (f"so </think> <answer> x </answer> <answer> {_answer(rec)} </answer>", False, False),  # two answers
    ]


def _fake_sampler(tok, records, script):
    """``script[i]`` = indices into :func:`_completions` for record i, in sampling order."""
    by_prompt = {kk.format_prompt(r): (r, script[i]) for i, r in enumerate(records)}

    def fake_sample(model, tokenizer, prompts, *, n, **kw):
        out = []
        for p in prompts:
            rec, picks = by_prompt[p]
            out += [tok.ids(_completions(rec)[k][0]) for k in picks[:n]]
        return out

    return fake_sample


def test_format_rate_counts_completions_with_valid_tags(monkeypatch):
    records = kk.generate(2, 8, seed=5)
    tok = _FakeTokenizer()
    script = [[i] for i in range(8)]  # record i gets completion i: exactly one correct, two well formatted
    monkeypatch.setattr("dgro_lib.evaluate.accuracy.sample", _fake_sampler(tok, records, script))
    ev = evaluate_greedy(object(), tok, records, batch_size=3)
    expected = [_completions(r)[i][1:] for i, r in enumerate(records)]
    assert ev["correct"] == [c for c, _ in expected]
    assert ev["well_formatted"] == [f for _, f in expected] == [True, True] + [False] * 6
    assert (ev["accuracy"], ev["format_rate"], ev["mean_length"], ev["truncated"]) == (1 / 8, 2 / 8, 2.0, 0.0)

    # sampled: 4 samples per puzzle, per puzzle a different mix
    script = [[0, 0, 1, 2], [1, 3, 4, 5], [6, 7, 0, 1]]
    monkeypatch.setattr("dgro_lib.evaluate.accuracy.sample", _fake_sampler(tok, records[:3], script))
    sv = evaluate_sampled(object(), tok, records[:3], n=4, batch_size=4)
    assert sv["format_rate"] == pytest.approx((3 + 1 + 2) / 12)  # picks 0, 0, 1 / 1 / 0, 1 are well formatted
    assert sv["accuracy"] == pytest.approx(3 / 12) and sv["per_prompt"] == [0.5, 0.0, 0.25]
    assert sv["frac_all_wrong"] == pytest.approx(1 / 3)


def test_greedy_accuracy_and_sampled_success_by_people(monkeypatch):
    records = kk.generate(2, 3, seed=1) + kk.generate(3, 2, seed=2)
    tok = _FakeTokenizer()
    # greedy uses the first pick: 2 people -> correct, wrong (tags ok), no tags; 3 people -> correct, second <think>
    script = [[0, 0, 1], [1, 6, 7], [6, 6, 6], [0, 1, 0], [3, 4, 0]]
    monkeypatch.setattr("dgro_lib.evaluate.accuracy.sample", _fake_sampler(tok, records, script))
    cfg = SimpleNamespace(data=SimpleNamespace(eval_people=[3, 2], template="plain"),
                          eval=SimpleNamespace(max_new_tokens=8, batch_size=4))
    greedy = greedy_accuracy_by_people(object(), tok, records, cfg)
    expected = pd.DataFrame({"people": [3, 2], "n": [2, 3], "greedy_accuracy": [1 / 2, 1 / 3],
                             "format_ok": [1 / 2, 2 / 3], "mean_length": [2.0, 2.0]})
    pd.testing.assert_frame_equal(greedy, expected)

    rates = sampled_success_by_people(object(), tok, records, cfg, prompts=2, samples=3)
    # the first 2 puzzles of each count, 3 samples each (the third 2-people puzzle is not sampled):
    # 3 people: picks 0,1,0 -> 2/3 correct, 3,4,0 -> 1/3; 2 people: 0,0,1 -> 2/3, 1,6,7 -> 0
    assert rates.to_dict("list") == {"people": [3, 3, 2, 2], "success_rate": [2 / 3, 1 / 3, 2 / 3, 0.0]}

    cfg.data.eval_people = [2, 4]
    with pytest.raises(ValueError, match="no record with 4 people"):
        greedy_accuracy_by_people(object(), tok, records, cfg)


def test_evaluation_stops_at_every_eos_id_of_the_generation_config():
    """TRL's trainer ends a completion at the tokenizer's EOS or any id of the model's generation_config.eos_token_id;
    the evaluation stopped only at the tokenizer's. A tiny model whose generation config adds, as an EOS id, a token
    it greedily emits mid-completion: the evaluation now ends there, not max_new_tokens later."""
    from dgro_lib.models import load_model
    from dgro_lib.util.paths import REPO
    from dgro_lib.models.sampling import eos_ids, sample
    from dgro_lib.tasks import get_task

    model, tok = load_model(REPO / "reference" / "bases" / "ci")
    records = kk.generate(2, 2, seed=5, name_order="positional")
    prompts = [get_task("kk").prompt(r, "plain") for r in records]
    free = sample(model, tok, prompts, greedy=True, max_new_tokens=12, eos_token_id=[])
    extra = free[0][3]  # a token the model writes inside its first completion
    assert extra != tok.eos_token_id
    assert eos_ids(tok, model) == [tok.eos_token_id]
    model.generation_config.eos_token_id = [extra, tok.eos_token_id]  # an int list, the tokenizer's EOS in it too
    assert eos_ids(tok, model) == [tok.eos_token_id, extra]
    model.generation_config.eos_token_id = extra  # an int
    assert eos_ids(tok, model) == [tok.eos_token_id, extra]
    ev = evaluate_greedy(model, tok, records, max_new_tokens=12)

    def stop(ids):  # where the trainer ends a completion: its first id of the union, else the budget
        return next((i + 1 for i, t in enumerate(ids) if t in (tok.eos_token_id, extra)), len(ids))

    assert ev["lengths"] == [stop(f) for f in free]
    assert free[0][ev["lengths"][0] - 1] == extra and ev["lengths"][0] < 12  # stopped by the generation config's id
