"""The math miniature: worked arithmetic problems, the digit-level math tokenizer, the math warm-up and its presets.

References are computed independently: the problem text is parsed back and evaluated with Python's integers, a
trace is replayed clause by clause, and the reward's own correctness rule judges the decoded completions."""

import random
import re

import pytest

from dgro_lib.config import ConfigError, apply_overrides, find_params, load_config
from dgro_lib.data import math as math_data
from dgro_lib.data.math.worked import _GENERATORS, WORKED_KINDS, is_reserved, worked_examples
from dgro_lib.rewards import math_is_correct

_PROBLEM = {
    "add": (r"Compute \$ (\d+) \+ (\d+) \$\.", lambda a, b: a + b),
    "mul": (r"Compute \$ (\d+) \\times (\d) \$\.", lambda a, d: a * d),
    "muladd": (r"Compute \$ (\d) \\times (\d) \+ (\d+) \$\.", lambda a, b, c: a * b + c),
}


def _reference(problem: str) -> int:
    """The problem's answer from its text alone."""
    m = re.fullmatch(r"Solve for \$x\$: \$ (\d)x \+ (\d+) = (\d+) \$\.", problem)
    if m:
        a, b, c = map(int, m.groups())
        assert (c - b) % a == 0
        return (c - b) // a
    for pattern, fn in _PROBLEM.values():
        m = re.fullmatch(pattern, problem)
        if m:
            return fn(*map(int, m.groups()))
    raise AssertionError(f"unparsed problem {problem!r}")


def _replay(trace: str) -> int:
    """Check every clause of a trace (``lhs = rhs`` evaluates true, a column's result feeds the next carry) and
    return the number after ``so`` (or the last ``x = ...``)."""
    for clause in re.split(r" , | : ", trace):
        if clause.startswith("so "):
            return int(clause[3:])
        if "=" not in clause:  # "42 + 45" announcing a column addition
            continue
        *lhs, rhs = [p.strip() for p in clause.split("=")]
        for expr in lhs:
            expr = expr.replace("\\times", "*").replace("/", "//")
            if re.fullmatch(r"\d+x", expr) or expr == "x":
                continue
            assert eval(expr) == int(rhs), clause  # noqa: S307 - digits and + - * // only
    return int(trace.rsplit("=", 1)[1])


def test_worked_traces_are_true_and_end_in_the_answer():
    pairs = worked_examples(400, seed=11)
    kinds = [r["source"] for r, _ in pairs]
    assert kinds[:4] == [f"synthetic/{k}" for k in WORKED_KINDS] and len({r["problem"] for r, _ in pairs}) == 400
    for rec, trace in pairs:
        assert set(rec) == {"problem", "answer", "source"}
        answer = _reference(rec["problem"])
        assert rec["answer"] == str(answer) and _replay(trace) == answer, (rec, trace)


def test_column_traces_match_the_documented_examples():
    from dgro_lib.data.math.worked import _column_add, _column_mul

    assert _column_add(478, 356) == (["8 + 6 = 14", "7 + 5 + 1 = 13", "4 + 3 + 1 = 8"], 834)
    assert _column_add(978, 56) == (["8 + 6 = 14", "7 + 5 + 1 = 13", "9 + 1 = 10"], 1034)
    assert _column_mul(347, 6) == (["7 \\times 6 = 42", "4 \\times 6 + 4 = 28", "3 \\times 6 + 2 = 20"], 2082)
    for a in range(10, 400, 7):
        for b in range(10, 999, 131):
            assert _column_add(a, b)[1] == a + b
        for d in range(2, 10):
            assert _column_mul(a, d)[1] == a * d


def _mul_carries(trace: str) -> tuple[int, int]:
    """(carries due, carries written) in a ``mul`` trace, read from its clauses alone: a clause whose result is >= 10
    makes a carry due in the next one, which writes it as ``+ c``."""
    due = written = 0
    pending = False
    for part in trace.split(" , ")[:-1]:  # the last part is "so N"
        lhs, rhs = part.split(" = ")
        due += pending
        written += pending and " + " in lhs
        pending = int(rhs) >= 10
    return due, written


def test_carry_slips_leave_carries_out_at_the_rate_and_keep_the_trace_consistent():
    from dgro_lib.data.math.worked import _column_add, _column_mul, trace_answer

    # one slip by hand: the carry of 8 + 6 left out of the second column, the rest follows the slipped clause
    assert _column_add(478, 356, drop=iter([True, False]).__next__) == (["8 + 6 = 14", "7 + 5 = 12",
                                                                          "4 + 3 + 1 = 8"], 824)
    assert _column_mul(347, 6, drop=iter([False, True]).__next__) == (["7 \\times 6 = 42", "4 \\times 6 + 4 = 28",
                                                                        "3 \\times 6 = 18"], 1882)
    clean = worked_examples(3000, seed=7)
    slipped = worked_examples(3000, seed=7, slip_rate=0.4)
    assert worked_examples(3000, seed=7, slip_rate=0.0) == clean
    assert [r for r, _ in slipped] == [r for r, _ in clean]  # the problems and their answers do not depend on slips
    due = written = wrong = 0
    for (rec, trace), (_, clean_trace) in zip(slipped, clean):
        assert trace_answer(clean_trace) == rec["answer"]
        kind = rec["source"].split("/")[1]
        if kind == "linear":
            assert trace == clean_trace
            continue
        wrong += trace_answer(trace) != rec["answer"]
        if kind == "mul":  # every carry of a product is visible; count them
            d, w = _mul_carries(trace)
            due, written = due + d, written + w
    assert 0.35 < 1 - written / due < 0.45, (due, written)  # left out at about the rate
    assert 600 < wrong < 1500  # wrong answers follow (a carry of 0 never comes up: a result >= 10 carries >= 1)
    with pytest.raises(ValueError, match="slip_rate must be a probability"):
        worked_examples(3, slip_rate=1.5)


def test_math_slip_warm_up_boxes_the_answer_its_trace_reaches():
    import dataclasses

    from dgro_lib.data.math.worked import trace_answer
    from dgro_lib.models import EMBEDDED_PRESETS, EmbeddedModelConfig
    from dgro_lib.miniature.supervised import _math_corpus

    cfg = dataclasses.replace(EMBEDDED_PRESETS["math_ci"], n_puzzles=200, slip_rate=0.5)
    corpus = _math_corpus(cfg)
    answers = [c.rsplit("\\boxed{", 1)[1].rstrip("}") for c in corpus.completions]
    traces = [c.split(" </think>")[0].strip() for c in corpus.completions]
    assert answers == [trace_answer(t) for t in traces]
    assert corpus.slipped == sum(a != r["answer"] for a, r in zip(answers, corpus.records)) > 20
    assert _math_corpus(dataclasses.replace(cfg, slip_rate=0.0)).slipped == 0
    with pytest.raises(ValueError, match="slip_rate must be a probability in \\[0, 1\\]"):
        EmbeddedModelConfig(task="math", slip_rate=-0.1)


def test_warm_up_and_experiment_problems_come_from_disjoint_parts():
    warm = {r["problem"] for r, _ in worked_examples(2000, seed=3)}
    held = math_data.generate_math(2000, seed=3, kinds=WORKED_KINDS)
    assert not warm & {r["problem"] for r in held}
    assert all(is_reserved(r["problem"]) for r in held) and not any(map(is_reserved, warm))
    for r in held:
        assert r["answer"] == str(_reference(r["problem"]))
    # the reserved part is about a fifth of each kind's space
    rng = random.Random(0)
    frac = sum(is_reserved(_GENERATORS["add"](rng)[0]) for _ in range(4000)) / 4000
    assert 0.17 < frac < 0.23


def test_worked_examples_refuse_bad_arguments():
    with pytest.raises(ValueError, match="no worked trace.*add, mul, muladd, linear"):
        worked_examples(3, kinds=["sqrt"])
    with pytest.raises(ValueError, match="n must be"):
        worked_examples(-1)
    with pytest.raises(ValueError, match="unknown kind.*linear"):
        math_data.generate_math(3, kinds=["nope"])
    assert worked_examples(5, seed=2) == worked_examples(9, seed=2)[:5]


def test_math_tokenizer_is_lossless_digit_by_digit_and_the_reward_reads_its_output():
    from dgro_lib.models.tokenizer import build_math_tokenizer

    tok = build_math_tokenizer()
    assert tok.convert_ids_to_tokens([0, 1, 2, 3, 4]) == ["<pad>", "<unk>", "<eos>", "<think>", "</think>"]
    for rec, trace in worked_examples(200, seed=5):
        completion = f" {trace} </think> \\boxed{{{rec['answer']}}}"
        text = math_data.format_prompt(rec) + completion
        ids = tok(text, add_special_tokens=False)["input_ids"]
        assert tok.unk_token_id not in ids
        assert tok.decode(ids) == text
        c_ids = tok(completion, add_special_tokens=False)["input_ids"]
        decoded = tok.decode(c_ids + [tok.eos_token_id], skip_special_tokens=True)  # as TRL decodes
        assert decoded == completion and math_is_correct(decoded, answer=rec["answer"])
    # every digit is one token, so a number is spelled digit by digit
    assert tok.tokenize(" 1234") == [" ", "1", "2", "3", "4"]  # one embedding per digit, wherever it stands
    assert tok.tokenize(" \\boxed{-35}") == [" \\", "boxed", "{", "-", "3", "5", "}"]


def test_math_embedded_config_is_checked_and_kk_hashes_keep_their_fields():
    from dgro_lib.models import EMBEDDED_PRESETS, EmbeddedModelConfig

    with pytest.raises(ValueError, match="math_kinds must be"):
        EmbeddedModelConfig(task="math", math_kinds=("add", "sqrt"))
    with pytest.raises(ValueError, match="task must be"):
        EmbeddedModelConfig(task="chess")
    with pytest.raises(ValueError, match="math_kinds applies to task 'math' only"):
        EmbeddedModelConfig(math_kinds=("add",))
    with pytest.raises(ValueError, match="K&K warm-up fields"):
        EmbeddedModelConfig(task="math", copy_drill_every=4)
    for name, preset in EMBEDDED_PRESETS.items():
        d = preset.to_dict()
        assert ("task" in d) == (preset.task == "math"), name  # K&K configs hash as before the task field
    assert EMBEDDED_PRESETS["math_ci"].task == "math"


def _math_cfg(**overrides):
    base = {"sweep": {}, "seeds": [0], "data.task": "math", "data.math_train": "synthetic",
            "data.math_eval": ["synthetic"], "model.embedded_preset": "math_ci"}
    return apply_overrides(load_config(find_params("dgro_fig1_reward_variance", "ci")), {**base, **overrides})


def test_experiment_math_kinds_and_the_presets_task_are_checked():
    from dgro_lib.runs.data_sources import load_eval_records

    cfg = _math_cfg(**{"data.math_kinds": ["add", "linear"], "data.n_eval": 6})
    assert [r["source"] for r in load_eval_records(cfg)] == ["synthetic/add", "synthetic/linear"] * 3
    with pytest.raises(ConfigError, match="data.math_kinds: .* must be a non-empty list of"):
        _math_cfg(**{"data.math_kinds": ["add", "chess"]})
    with pytest.raises(ConfigError, match="data.math_kinds: only read by the 'synthetic' math generator"):
        apply_overrides(load_config(find_params("dgro_fig1_reward_variance", "ci")), {"data.math_kinds": ["add"]})
    with pytest.raises(ConfigError, match="data.task: 'math', but model.embedded_preset 'ci' was warmed up on task"):
        _math_cfg(**{"model.embedded_preset": "ci"})
    with pytest.raises(ConfigError, match="data.task: 'kk', but model.embedded_preset 'math_ci'"):
        apply_overrides(load_config(find_params("dgro_fig1_reward_variance", "ci")),
                        {"model.embedded_preset": "math_ci"})


def test_math_warm_up_builds_a_model_on_the_math_tokenizer(tmp_path):
    import dataclasses
    import json

    from dgro_lib.models import EMBEDDED_PRESETS, load_model

    from dgro_lib.miniature import get_embedded_base_model

    cfg = dataclasses.replace(EMBEDDED_PRESETS["math_ci"], max_steps=8, eval_puzzles=8, time_budget_min=None)
    path = get_embedded_base_model(cfg, tmp_path, progress=False)
    stats = json.loads((path / "embedded.json").read_text())["stats"]
    assert stats["steps"] == 8 and set(stats["mean_len_by_kind"]) == set(WORKED_KINDS)
    ev = stats["eval"]["math"]
    assert ev["n"] == 8 and set(ev["by_source"]) == {f"synthetic/{k}" for k in WORKED_KINDS}
    model, tok = load_model(path)
    assert tok.tokenize(" 907") == [" ", "9", "0", "7"]  # the saved tokenizer is the math one, decoder included
    assert tok.decode(tok(" 9x = 18", add_special_tokens=False)["input_ids"]) == " 9x = 18"


# --- DGRO Table 3 / Fig. 4 computations ----------------------------------------------------------------------


def test_math_benchmark_table_against_a_hand_count():
    import pandas as pd

    from dgro_lib.analysis.math import math_benchmark_table, math_benchmark_wide
    from dgro_lib.papers.dgro_table3_math import claims

    sources = ["synthetic/add", "synthetic/add", "synthetic/mul", "synthetic/mul", "synthetic/mul"]
    base = {"correct": [True, False, False, False, True]}
    finals = pd.DataFrame({"point": ["D", "D"], "seed": [0, 1],
                           "correct": [[True, True, False, True, True], [True, True, False, False, False]]})
    long, tests = math_benchmark_table(finals, base, sources)
    got = {(r.model, r.benchmark): round(r._5, 6) for r in long.itertuples()}  # pass@1
    assert got == {("base model", "add"): 0.5, ("D", "add"): 1.0, ("base model", "mul"): round(1 / 3, 6),
                   ("D", "mul"): round(1 / 3, 6), ("base model", "all"): 0.4, ("D", "all"): 0.6}
    t = tests.set_index(["model", "benchmark"])
    # pooled over the two seeds: add fixed 1 + 1, broken 0; mul seed 0 fixes 1, seed 1 breaks 1
    assert (t.loc[("D", "add"), "fixed"], t.loc[("D", "add"), "broken"]) == (2, 0)
    assert (t.loc[("D", "mul"), "fixed"], t.loc[("D", "mul"), "broken"]) == (1, 1)
    wide = math_benchmark_wide(long).set_index("model")
    assert list(wide.columns) == ["add", "mul", "Avg.", "all", "source"]
    assert wide.loc["base model", "Avg."] == f"{(0.5 + 1 / 3) / 2:.3f}" and wide.loc["D", "add"] == "1.000 ± 0.000"
    rows = {r["claim"]: r for r in claims(finals, base["correct"], None, sources)}
    assert rows["D, add: greedy pass@1 gain over base (points)"]["value"] == pytest.approx(50.0)
    assert rows["D, all: greedy pass@1 gain over base (points)"]["value"] == pytest.approx(20.0)
    assert rows["D, mul: greedy pass@1 gain over base (points)"]["seeds_a"] == 2
    with pytest.raises(ValueError, match="sources: 4 entries"):
        math_benchmark_table(finals, base, sources[:4])


def test_entropy_trend_reads_rises_falls_and_noise():
    import numpy as np
    import pandas as pd

    from dgro_lib.analysis.math import entropy_trend
    from dgro_lib.papers.dgro_fig4_math_entropy import PAPER, claims
    from dgro_lib.report.verdict import judge

    rows = []
    for task, slope in (("up", 0.01), ("down", -0.01), ("flat", 0.0)):
        for seed in range(3):
            noise = np.random.default_rng(seed).normal(0, 0.001 if slope else 0.05, 50)
            rows += [{"task": task, "seed": seed, "run": f"{task}{seed}", "step": s + 1,
                      "entropy": 1.0 + slope * s + noise[s]} for s in range(50)]
    trend = entropy_trend(pd.DataFrame(rows), by="task")
    up = trend[trend["task"] == "up"].iloc[0]
    assert up["first"] == pytest.approx(1.0 + 0.01 * 4.5, abs=0.002) and up["last"] == pytest.approx(
        1.0 + 0.01 * 44.5, abs=0.002)  # means over steps 1-10 and 41-50
    rows = {r["claim"].split(":")[0]: r for r in claims(trend)}
    assert rows["up"]["value"] == pytest.approx(trend[trend["task"] == "up"]["change"].mean())
    assert rows["up"]["unit"] == "nats/token" and rows["up"]["seeds_a"] == 3 and rows["up"]["seeds_b"] == 0
    assert judge(rows["up"]["_est"], "higher") == "reproduced" and judge(rows["down"]["_est"], "higher") == "contradicted"
    assert judge(rows["flat"]["_est"], "higher") == "inconclusive"
    assert PAPER == {"math": "higher", "K&K": "lower"}


def test_fig4_reads_the_runs_of_table3_at_every_profile():
    """The Fig. 4 params repeat Table 3's run configuration, so the shared store trains those runs once."""
    from dgro_lib.config import expand_sweep
    from dgro_lib.runs.store import run_key

    for profile in ("ci", "cpu"):
        keys = [sorted(run_key(c, seed) for _, seed, c in expand_sweep(load_config(find_params(name, profile))))
                for name in ("dgro_table3_math", "dgro_fig4_math_entropy")]
        assert keys[0] == keys[1] and len(keys[0]) >= 2, profile


def test_train_optim_reaches_trl_only_when_set(tmp_path):
    from transformers import TrainingArguments

    from dgro_lib.runs.store import run_key
    from dgro_lib.runs.training import grpo_config

    cfg = _math_cfg()
    default = TrainingArguments.__dataclass_fields__["optim"].default
    assert grpo_config(cfg, 0, tmp_path).optim == default  # the runs made before the field keep their optimizer
    sgd = apply_overrides(cfg, {"train.optim": "sgd"})
    assert grpo_config(sgd, 0, tmp_path).optim == "sgd"
    assert run_key(sgd, 0) != run_key(cfg, 0)
    with pytest.raises(ConfigError, match="train.optim: 'lion' is not one of"):
        apply_overrides(cfg, {"train.optim": "lion"})


def test_carry_decisions_and_the_models_carry_probabilities_against_a_loop():
    import torch

    from dgro_lib.data.math.worked import carry_decisions
    from dgro_lib.analysis.math import carry_probabilities
    from dgro_lib.models import EMBEDDED_PRESETS
    from dgro_lib.miniature import build_tiny_model
    from dgro_lib.models.tokenizer import build_math_tokenizer

    assert carry_decisions("Compute $ 478 + 356 $.") == ["8 + 6 = 14 , 7 + 5", "8 + 6 = 14 , 7 + 5 + 1 = 13 , 4 + 3"]
    assert carry_decisions("Compute $ 978 + 56 $.")[1] == "8 + 6 = 14 , 7 + 5 + 1 = 13 , 9"  # carry into a lone digit
    assert carry_decisions("Compute $ 347 \\times 6 $.") == ["7 \\times 6 = 42 , 4 \\times 6",
                                                              "7 \\times 6 = 42 , 4 \\times 6 + 4 = 28 , 3 \\times 6"]
    assert carry_decisions("Compute $ 9 \\times 3 + 826 $.") == ["9 \\times 3 = 27 , 27 + 826 : 7 + 6 = 13 , 2 + 2"]
    assert carry_decisions("Compute $ 6 \\times 7 + 45 $.") == [] == carry_decisions("Solve for $x$: $ 7x + 12 = 89 $.")
    with pytest.raises(ValueError, match="not a problem of the column kinds"):
        carry_decisions("Compute $ 2 - 1 $.")
    # every decision is where a slip-free trace writes " +" and a trace with that carry left out writes " ="
    for rec, trace in worked_examples(200, seed=4):
        for prefix in carry_decisions(rec["problem"]):
            assert trace.startswith(prefix + " + ")

    tok = build_math_tokenizer()
    torch.manual_seed(0)
    model = build_tiny_model(EMBEDDED_PRESETS["math_ci"], tokenizer=tok)
    records = [r for r, _ in worked_examples(24, seed=9)]
    got = carry_probabilities(model, tok, records, batch_size=5)
    assert len(got) == sum(len(carry_decisions(r["problem"])) for r in records) > 5
    plus, equals = tok.convert_tokens_to_ids([" +", " ="])
    with torch.no_grad():
        for row in got.itertuples():
            prefix = carry_decisions(row.problem)[row.decision]
            ids = tok(math_data.format_prompt({"problem": row.problem}) + " " + prefix,
                      add_special_tokens=False)["input_ids"]
            p = model(input_ids=torch.tensor([ids])).logits[0, -1].softmax(-1)
            assert abs(p[plus].item() - row.p_write) < 1e-5 and abs(p[equals].item() - row.p_leave_out) < 1e-5


def test_table3_sampled_claims_against_a_direct_computation():
    import numpy as np
    import pandas as pd

    from dgro_lib.papers.dgro_table3_math import claims

    rng = np.random.default_rng(0)
    sources = ["synthetic/add"] * 30 + ["synthetic/mul"] * 30 + ["synthetic/linear"] * 5  # the protocol reads 60
    base = rng.integers(0, 5, 60) / 4
    after = {0: np.clip(base + rng.integers(0, 3, 60) / 4, 0, 1), 1: np.clip(base + rng.integers(-1, 3, 60) / 4, 0, 1)}
    sampled = pd.DataFrame({"run": ["base", "r0", "r1"], "seed": [None, 0, 1],
                            "correct": [list(base), list(after[0]), list(after[1])]})
    finals = pd.DataFrame({"run": ["r0", "r1"], "point": ["D", "D"], "seed": [0, 1],
                           "correct": [[1] * 65, [0] * 65]})
    got = {r["claim"]: r for r in claims(finals, [0] * 65, sampled, sources) if "sampled" in r["claim"]}
    assert list(got) == [f"D, {b}: sampled pass@1 gain over base (points)" for b in ("add", "mul", "all")]
    for bench, sl in (("add", slice(0, 30)), ("mul", slice(30, 60)), ("all", slice(0, 60))):
        d = (after[0][sl] - base[sl] + after[1][sl] - base[sl]) / 2
        run_gain = [100 * (after[s][sl] - base[sl]).mean() for s in (0, 1)]
        row = got[f"D, {bench}: sampled pass@1 gain over base (points)"]
        assert row["value"] == pytest.approx(100 * d.mean())
        assert row["se_runs"] == pytest.approx(np.std(run_gain, ddof=1) / np.sqrt(2))
    with pytest.raises(ValueError, match="sources: 10 entries"):
        claims(finals, [0] * 65, sampled, sources[:10])


def test_carry_table_summarises_carry_probabilities_per_benchmark(tmp_path):
    import torch

    from dgro_lib.analysis.math import carry_probabilities, carry_table
    from dgro_lib.models import EMBEDDED_PRESETS
    from dgro_lib.miniature import build_tiny_model
    from dgro_lib.models.tokenizer import build_math_tokenizer

    tok = build_math_tokenizer()
    torch.manual_seed(0)
    model = build_tiny_model(EMBEDDED_PRESETS["math_ci"], tokenizer=tok)
    model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    records = [r for r, _ in worked_examples(40, seed=3)]
    got = carry_table({"m": str(tmp_path), "restored": None}, records)
    ref = carry_probabilities(model, tok, records)
    row = got[(got["model"] == "m") & (got["benchmark"] == "all")].iloc[0]
    assert row["decisions"] == len(ref) and abs(row["p_leave_out"] - ref["p_leave_out"].mean()) < 1e-5
    assert abs(row["greedy_leaves_out"] - (ref["p_leave_out"] > ref["p_write"]).mean()) < 1e-9
    mul = got[(got["model"] == "m") & (got["benchmark"] == "mul")].iloc[0]
    assert mul["decisions"] == (ref["source"] == "synthetic/mul").sum()
    assert got[got["model"] == "restored"]["summary"].tolist() == ["absent"]


def test_a_runs_carry_summary_is_kept_with_the_run_and_read_back_without_weights(tmp_path):
    import json

    import pandas as pd
    import torch

    from dgro_lib.analysis.math import carry_summary_path, carry_table, run_carry_table
    from dgro_lib.models import EMBEDDED_PRESETS
    from dgro_lib.miniature import build_tiny_model
    from dgro_lib.models.tokenizer import build_math_tokenizer

    tok = build_math_tokenizer()
    base = tmp_path / "base"
    torch.manual_seed(0)
    build_tiny_model(EMBEDDED_PRESETS["math_ci"], tokenizer=tok).save_pretrained(base)
    tok.save_pretrained(base)
    store = tmp_path / "runs"
    ckpt = store / "abc123" / "trainer" / "checkpoint-4"  # a finished run's last checkpoint: other weights
    torch.manual_seed(1)
    build_tiny_model(EMBEDDED_PRESETS["math_ci"], tokenizer=tok).save_pretrained(ckpt)
    tok.save_pretrained(ckpt)
    (ckpt / "trainer_state.json").write_text("{}")  # transformers writes it last: the checkpoint is complete
    records = [r for r, _ in worked_examples(40, seed=3)]
    finals = pd.DataFrame({"key": ["abc123"], "point": ["DGRO [-3,3]"], "seed": [0]})

    trained = run_carry_table(finals, store, str(base), records)
    keep = carry_summary_path(store / "abc123", records)
    assert keep.parent.name == "evals" and keep.name.startswith("carries-") and keep.is_file()
    # the run's own weights, read directly, give its rows
    direct = carry_table({"DGRO [-3,3] seed 0": str(ckpt)}, records)
    pd.testing.assert_frame_equal(trained[trained["model"] == "DGRO [-3,3] seed 0"].reset_index(drop=True), direct)
    # the weights gone (a run restored from the archive): the same table, read from the kept summary
    import shutil

    shutil.rmtree(store / "abc123" / "trainer")
    pd.testing.assert_frame_equal(run_carry_table(finals, store, str(base), records), trained)
    # another problem set or template is another file: absent, not the wrong summary
    assert carry_summary_path(store / "abc123", records[:10]) != keep
    assert carry_summary_path(store / "abc123", records, template="qwen") != keep
    assert run_carry_table(finals, store, str(base), records[:10]).query("model != 'base model'")[
        "summary"].tolist() == ["absent"]
    # a file that is not this summary is refused, naming it
    keep.write_text(json.dumps({"analysis": "carry_table", "problems": 3, "rows": []}))
    with pytest.raises(ValueError, match="not a carry_table summary of these 40 problems"):
        run_carry_table(finals, store, str(base), records)


def test_carry_table_skips_a_real_models_tokenizer_without_loading_its_weights(tmp_path, capsys):
    """At the `paper` profile the base is a real checkpoint: its byte-level BPE tokenizer has no ' +' / ' =' tokens
    (it spells them 'Ġ+' or splits them), so the carry table is skipped with a note instead of failing the notebook
    after training. The folder holds no weights, so loading them would fail: the skip never tries."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen2Config

    from dgro_lib.analysis.math import carry_table, has_carry_tokens

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    records = [r for r, _ in worked_examples(10, seed=3)]
    bpe.train_from_iterator([r["problem"] for r in records] * 5,
                            trainers.BpeTrainer(vocab_size=300, special_tokens=["<|endoftext|>"]))
    tok = PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|endoftext|>")
    assert not has_carry_tokens(tok) and "Ġ+" in tok.get_vocab()
    real = tmp_path / "real"
    tok.save_pretrained(real)
    Qwen2Config(hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
                num_key_value_heads=1, vocab_size=300).save_pretrained(real)
    got = carry_table({"base model": str(real), "run seed 0": str(real), "restored": None}, records)
    assert got.empty and list(got.columns) == ["model", "benchmark", "summary", "decisions", "p_leave_out",
                                               "greedy_leaves_out"]
    assert "carry_table: skipped" in capsys.readouterr().out
