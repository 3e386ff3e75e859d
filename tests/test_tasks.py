"""The task registry: math trains and evaluates through the same runner as K&K, with its own records, prompt,
reward columns and correctness rule; K&K's protocols (and so the keys of stored evaluations) are unchanged."""

import json

import pandas as pd
import pytest

import dgro_lib.evaluate.accuracy as A
from dgro_lib.config import ConfigError, apply_overrides, find_params, load_config
from dgro_lib.data.math import generate_math
from dgro_lib.evaluate import evaluate_greedy, evaluate_sampled, protocol_for_config
from dgro_lib.runs.data_sources import load_eval_records, load_train_records
from dgro_lib.tasks import TASKS, get_task, puzzle_key

MATH = {"data.task": "math", "data.math_train": "synthetic", "data.math_eval": ["synthetic"],
        "model.embedded_preset": "math_ci"}


def _cfg(**overrides):
    return apply_overrides(load_config(find_params("dgro_fig1_reward_variance", "ci")),
                           {"sweep": {}, "seeds": [0], **overrides})


def test_an_unknown_task_lists_the_valid_ones():
    with pytest.raises(ValueError, match="is not one of kk, math"):
        get_task("chess")
    with pytest.raises(ConfigError, match="data.task"):
        _cfg(**{"data.task": "chess"})


def test_math_data_settings_are_checked_when_the_config_loads():
    with pytest.raises(ConfigError, match="data.math_eval: task 'math' needs at least one"):
        _cfg(**{**MATH, "data.math_eval": []})
    with pytest.raises(ConfigError, match=r"data.math_train: 'synthetic' with data.source 'hub'"):
        _cfg(**{**MATH, "data.source": "hub"})
    with pytest.raises(ConfigError, match=r"data.math_eval: 'math500' with data.source 'generated'"):
        _cfg(**{**MATH, "data.math_eval": ["synthetic", "math500"]})
    with pytest.raises(ConfigError, match="data.math_eval"):
        _cfg(**{**MATH, "data.source": "hub", "data.math_train": "deepscaler", "data.math_eval": ["nope"]})
    assert _cfg(**{**MATH, "data.source": "hub", "data.math_train": "deepscaler",
                   "data.math_eval": ["math500", "aime24"]}).data.math_eval == ["math500", "aime24"]


def test_math_records_come_from_the_generator_and_held_out_problems_never_train():
    cfg = _cfg(**MATH, **{"data.n_train": 40, "data.n_eval": 12})
    train, held = load_train_records(cfg), load_eval_records(cfg)
    assert held == generate_math(12, seed=cfg.data.eval_seed)
    assert train == generate_math(40, seed=cfg.data.train_seed)  # disjoint seeds: nothing to drop here
    same_seed = apply_overrides(cfg, {"data.train_seed": cfg.data.eval_seed})
    assert load_train_records(same_seed) == generate_math(40, seed=cfg.data.eval_seed)[12:]  # the 12 held out dropped
    assert puzzle_key(held[0]) == (held[0]["problem"], held[0]["answer"])
    assert TASKS["math"].columns(held[:2]) == {"answer": [held[0]["answer"], held[1]["answer"]]}


def test_the_kk_protocol_keeps_its_fields_and_a_math_protocol_names_its_sets():
    kk = protocol_for_config(_cfg(), 8)
    assert kk["people"] == [2] and "task" not in kk and "math_eval" not in kk
    math = protocol_for_config(_cfg(**MATH), 8)
    assert math["task"] == "math" and math["math_eval"] == ["synthetic"] and "people" not in math


def test_the_evaluation_scores_each_completion_against_its_own_problem(monkeypatch):
    """A stand-in sampler returns known completions: right for every other problem (boxed answer after the think
    block), wrong otherwise; the evaluation must score them with the math rule, problem by problem and sample by
    sample, and break the accuracy down by benchmark."""
    records = generate_math(6, seed=3)

    def completion(rec, right):
        return f" work </think> The answer is \\boxed{{{rec['answer'] if right else '123456789'}}}"

    class Tok:
        eos_token_id = 0

        def batch_decode(self, ids, skip_special_tokens=True):
            return [text for text, in ids]

    def fake_sample(model, tokenizer, prompts, *, n, **kw):
        assert all(p.rstrip().endswith("<think>") and "boxed" in p for p in prompts)  # the math prompt
        out = []
        for p in prompts:
            i = next(k for k, r in enumerate(records) if r["problem"] in p)
            out += [(completion(records[i], right=(i % 2 == 0) != (j == 1)),) for j in range(n)]
        return out

    monkeypatch.setattr(A, "sample", fake_sample)
    monkeypatch.setattr(A, "eos_ids", lambda tokenizer, model: [0])
    ev = evaluate_greedy(None, Tok(), records, task="math", batch_size=4)
    assert ev["correct"] == [True, False] * 3 and ev["accuracy"] == 0.5
    assert ev["checker"] == "dgro_lib.rewards.math_is_correct" and ev["format_rate"] == 1.0
    assert ev["by_source"] == {r["source"]: float(i % 2 == 0) for i, r in enumerate(records)}
    sampled = evaluate_sampled(None, Tok(), records, n=2, task="math", batch_size=4)
    assert sampled["per_prompt"] == [0.5] * 6  # sample 0 as greedy, sample 1 the opposite
    assert sampled["correct"] == [x for i in range(6) for x in ((i % 2 == 0), (i % 2 == 1))]


def test_math_trains_end_to_end_through_the_runner(tmp_path):
    """data.task: math through run_experiment at ci: the math reward scores the rollouts (its outcome mix is logged
    per step), the held-out problems are evaluated by the math rule, and the run lands in the store with a math
    protocol."""
    from dgro_lib.runs.experiment import run_experiment

    cfg = _cfg(**MATH, **{"train.max_steps": 2, "train.save_steps": 1, "train.eval_every": 1,
                          "train.eval_subset": 3, "data.n_eval": 6})
    result = run_experiment(cfg, tmp_path / "exp", workers=1, store=tmp_path / "runs")
    metrics = result.metrics
    assert metrics["step"].tolist() == [1, 2]
    outcomes = [c for c in metrics.columns if c.startswith("math_outcome/")]
    assert sorted(outcomes) == ["math_outcome/bad_format", "math_outcome/correct", "math_outcome/incomplete",
                                "math_outcome/wrong"]
    assert metrics[outcomes].sum(axis=1).round(6).eq(1.0).all()
    assert any(c.startswith("rewards/math_reward_") for c in metrics.columns)
    final = result.finals.iloc[0]
    assert len(final["correct"]) == 6 and final["checker"] == "dgro_lib.rewards.math_is_correct"
    assert set(final["by_source"]) <= {f"synthetic/{k}" for k in ("integer", "fraction", "slash", "decimal",
                                                                   "interval", "sqrt")}
    run = tmp_path / "runs" / final["key"]
    protocol = json.loads((run / "final_eval.json").read_text())["protocol"]
    assert protocol["task"] == "math" and protocol["n_puzzles"] == 6
    assert result.base["protocol"] == protocol and len(result.base["correct"]) == 6
    assert pd.read_csv(run / "heldout.csv")["subset"].tolist() == [3, 6]


def test_official_math_data_needs_its_directory_when_the_config_loads(tmp_path):
    official = {**MATH, "model.path": "Qwen/Qwen2.5-7B", "data.source": "official", "data.math_train": "gsm8k",
                "data.math_eval": ["math500"]}
    with pytest.raises(ConfigError, match="data.official_dir: required when data.source is 'official'"):
        _cfg(**official)
    with pytest.raises(ConfigError, match="data.official_dir: .* is not a directory"):
        _cfg(**official, **{"data.official_dir": str(tmp_path / "absent")})
    assert _cfg(**official, **{"data.official_dir": str(tmp_path)}).data.official_dir == str(tmp_path)
