"""The embedded miniature's surface options, the shared run store's bookkeeping, the plan and the claims."""

import json
import math
import os
import time

import numpy as np
import pandas as pd
import pytest

from dgro_lib.config import ConfigError, apply_overrides, expand_sweep, find_params, load_config
from dgro_lib.data import kk
from dgro_lib.data.kk.trace import header_words


# --- positional names and the formal prompt --------------------------------------------------------------------


def test_positional_names_keep_the_puzzles_and_rename_person_k_to_the_kth_name():
    rand = kk.generate(4, 30, seed=7)
    pos = kk.generate(4, 30, seed=7, name_order="positional")
    for r, p in zip(rand, pos):
        assert p["statements"] == r["statements"] and p["solution"] == r["solution"]
        assert p["names"] == list(kk.NAMES[:4])
        # the quiz and the official solution text speak of the positional names only
        for name in set(r["names"]) - set(p["names"]):
            assert name not in p["quiz"] and name not in p["solution_text"]
        assert kk.solve(p["statements"]) == [tuple(p["solution"])]
    with pytest.raises(ValueError, match="name_order"):
        kk.generate(3, 1, seed=0, name_order="alphabetical")


def test_formal_prompt_is_the_explicit_trace_header_and_ends_in_think():
    rec = kk.generate(3, 1, seed=3, name_order="positional")[0]
    text = kk.format_prompt(rec, template="formal")
    head = " ".join(header_words(kk.parse_statements(rec["statements"]), rec["names"], style="explicit"))
    assert text == f"{head}\nAnswer with each person's role.\n<think>"
    assert "formal" in kk.PROMPT_TEMPLATES


def test_embedded_surface_fields_are_checked_and_default_configs_keep_their_hashes():
    from dgro_lib.models import EMBEDDED_PRESETS, EmbeddedModelConfig

    with pytest.raises(ValueError, match="name_order"):
        EmbeddedModelConfig(name_order="shuffled")
    with pytest.raises(ValueError, match="template"):
        EmbeddedModelConfig(template="qwen")
    # fields at their defaults stay out of the hashed dict, so the caches of earlier presets stay valid
    assert "name_order" not in EMBEDDED_PRESETS["cpu"].to_dict() and "template" not in EMBEDDED_PRESETS["cpu"].to_dict()
    mini = EMBEDDED_PRESETS["mini"].to_dict()
    assert mini["name_order"] == "positional" and mini["template"] == "formal"


def test_warmup_examples_use_the_presets_surface():
    from dgro_lib.models import EMBEDDED_PRESETS
    from dgro_lib.miniature.supervised import heldout_records, warmup_records

    cfg = apply_overrides_embedded(EMBEDDED_PRESETS["mini_stage1"], n_puzzles=40)
    recs = warmup_records(cfg)
    assert all(r["names"] == list(kk.NAMES[:len(r["names"])]) for r in recs)
    held = heldout_records(3, 10, exclude=recs, name_order="positional")
    assert all(r["names"] == list(kk.NAMES[:3]) for r in held)
    assert not {r["statements"] for r in held} & {r["statements"] for r in recs}


def test_own_vocabulary_covers_the_presets_prompts_and_is_shared_by_its_stages(tmp_path, monkeypatch):
    from dgro_lib.models import presets
    from dgro_lib.models import EMBEDDED_PRESETS, EmbeddedModelConfig
    from dgro_lib.miniature import embedded_tokenizer, get_embedded_base_model

    with pytest.raises(ValueError, match="vocabulary"):
        EmbeddedModelConfig(vocabulary="tiny")
    assert "vocabulary" not in EMBEDDED_PRESETS["mini"].to_dict()  # default: the hashes of earlier presets hold
    small, full = embedded_tokenizer("mini_small_vocab"), embedded_tokenizer("mini")
    assert len(small) < len(full) and set(small.get_vocab()) < set(full.get_vocab())
    unk = small.unk_token_id
    for p in range(2, 9):  # every size's prompt and answer, on puzzles the vocabulary was not built from
        for rec in kk.generate(p, 5, seed=4242 + p, name_order="positional"):
            ids = small(kk.format_prompt(rec, template="formal") + " " + kk.answer_text(rec))["input_ids"]
            assert unk not in ids
    english = kk.generate(3, 1, seed=5)[0]
    assert unk in small(kk.format_prompt(english, template="plain"))["input_ids"]  # not its template: unknown words
    # a second stage continues its parent's tokenizer, so the vocabulary must match like the architecture
    parent = apply_overrides_embedded(EMBEDDED_PRESETS["ci"], max_steps=1, n_puzzles=10)
    monkeypatch.setitem(presets.EMBEDDED_PRESETS, "_test_parent", parent)
    child = apply_overrides_embedded(parent, continue_from="_test_parent", vocabulary="own")
    with pytest.raises(ValueError, match="vocabulary 'own' != 'all'"):
        get_embedded_base_model(child, tmp_path)
    assert not list(tmp_path.glob("*/embedded.json"))  # checked before any build


def apply_overrides_embedded(cfg, **kw):
    import dataclasses

    return dataclasses.replace(cfg, **kw)


def test_an_experiment_on_a_preset_must_use_its_surface_and_positional_names_need_generated_data():
    base = load_config(find_params("01_miniature_map", "cpu"))
    assert base.data.name_order == "positional" and base.data.template == "formal"
    with pytest.raises(ConfigError, match="data.name_order"):
        apply_overrides(base, {"data.name_order": "random"})
    with pytest.raises(ConfigError, match="data.template"):
        apply_overrides(base, {"data.template": "plain"})
    fig1_ci = load_config(find_params("dgro_fig1_reward_variance", "ci"))
    with pytest.raises(ConfigError, match="data.name_order"):
        apply_overrides(fig1_ci, {"data.name_order": "positional", "data.source": "hub"})
    with pytest.raises(ConfigError, match="data.name_order"):
        apply_overrides(fig1_ci, {"data.name_order": "sorted"})


# --- paired test on sampled accuracy ---------------------------------------------------------------------------


def test_paired_fraction_table_matches_a_loop_reference():
    from dgro_lib.evaluate import paired_fraction_table

    rng = np.random.default_rng(0)
    base = rng.integers(0, 5, 50) / 4
    runs = [rng.integers(0, 5, 50) / 4 for _ in range(3)]
    finals = pd.DataFrame([{"k": "a", "seed": s, "correct": list(r)} for s, r in enumerate(runs)])
    table = paired_fraction_table(finals, list(base), by="k")

    def z_ref(d):
        n = len(d)
        mean = sum(d) / n
        var = sum((x - mean) ** 2 for x in d) / (n - 1)
        return mean / math.sqrt(var / n)

    for s, r in enumerate(runs):
        row = table[table["seed"] == s].iloc[0]
        assert row["z"] == pytest.approx(z_ref([a - b for a, b in zip(r, base)]), rel=1e-12)
        assert row["delta_points"] == pytest.approx(100 * (r.mean() - base.mean()), rel=1e-12)
    pooled = table[table["seed"] == "pooled"].iloc[0]
    avg = [sum(r[i] for r in runs) / 3 - base[i] for i in range(50)]
    assert pooled["z"] == pytest.approx(z_ref(avg), rel=1e-12)
    with pytest.raises(ValueError, match="puzzles"):
        paired_fraction_table(finals.assign(correct=[[1.0]] * 3), list(base), by="k")


# --- the plan and the claims -----------------------------------------------------------------------------------


def _finished_run(store, cfg, seed, seconds, *, final=True):
    from dgro_lib.config import config_to_dict
    from dgro_lib.runs.store import run_key

    run = store / run_key(cfg, seed)
    run.mkdir(parents=True)
    (run / "manifest.json").write_text(json.dumps({"config": config_to_dict(cfg), "seed": seed,
                                                   "train_seconds": seconds}))
    if final:
        (run / "final_eval.json").write_text("{}")
    return run


def test_plan_counts_finished_runs_as_free_and_times_the_rest_from_the_stores_own_runs(tmp_path):
    from dgro_lib.config import expand_sweep
    from dgro_lib.cli.estimate import DEFAULT_SECONDS_PER_TOKEN, plan_profile

    cfg = load_config(find_params("dgro_fig1_reward_variance", "ci"))
    runs = expand_sweep(cfg)
    store = tmp_path / "ci" / "runs"
    plan = plan_profile("ci", ["dgro_fig1_reward_variance"], tmp_path)
    assert plan.attrs["measured_runs"] == 0 and plan.attrs["seconds_per_token"] == DEFAULT_SECONDS_PER_TOKEN
    row = plan.iloc[0]
    assert row["runs"] == len(runs) and row["finished"] == 0 and row["steps_left"] == len(runs) * cfg.train.max_steps

    t = cfg.train
    tokens = t.prompts_per_step * t.num_generations * t.max_completion_length
    _finished_run(store, runs[0][2], runs[0][1], seconds=2.0 * t.max_steps * tokens)  # 2 s per token
    run = _finished_run(store, runs[1][2], runs[1][1], seconds=0, final=False)  # killed after its first checkpoint
    (run / "trainer" / "checkpoint-1").mkdir(parents=True)
    (run / "trainer" / "checkpoint-1" / "trainer_state.json").write_text("{}")  # a complete checkpoint
    plan = plan_profile("ci", ["dgro_fig1_reward_variance"], tmp_path)
    row = plan.iloc[0]
    assert plan.attrs["measured_runs"] == 1 and plan.attrs["seconds_per_token"] == pytest.approx(2.0)
    left = (len(runs) - 1) * t.max_steps - 1
    assert row["finished"] == 1 and row["steps_left"] == left
    assert row["minutes"] == pytest.approx(round(left * 2.0 * tokens / cfg.workers / 60, 1), abs=0.05)


def test_plan_charges_rollout_batches_not_optimizer_steps(tmp_path, monkeypatch):
    """Splitting each rollout batch into 2 updates doubles the optimizer steps, not the rollouts: such a run's
    measured rate is per rollout batch, and its estimate equals the one-update run's with the same rollouts."""
    from dgro_lib.cli import estimate

    one, two = (apply_overrides(load_config(find_params("dgro_fig1_reward_variance", "ci")),
                                {"sweep": {}, "seeds": [0], "train.max_steps": 4 * u, "train.updates_per_rollout": u})
                for u in (1, 2))
    t = one.train
    tokens = t.prompts_per_step * t.num_generations * t.max_completion_length
    store = tmp_path / "ci" / "runs"
    _finished_run(store, two, 0, seconds=4 * 3.0 * tokens)  # 4 rollout batches at 3 s per rollout token
    assert estimate.seconds_per_token(store) == (pytest.approx(3.0), 1)
    minutes = {}
    for cfg in (one, two):
        monkeypatch.setattr(estimate, "find_params", lambda name, profile: name)
        monkeypatch.setattr(estimate, "load_config", lambda path, cfg=cfg: apply_overrides(cfg, {"seeds": [1]}))
        minutes[cfg.train.updates_per_rollout] = estimate.plan_profile("ci", ["x"], tmp_path).iloc[0]
    assert minutes[1]["steps_left"] == 4 and minutes[2]["steps_left"] == 8
    assert minutes[1]["minutes"] == minutes[2]["minutes"] > 0


# --- two processes asking for the same run or the same embedded model ------------------------------------------


def _race(target, args_list):
    """Start one forked process per args (module state, e.g. monkeypatches, is inherited) and wait for all."""
    import multiprocessing as mp

    ctx = mp.get_context("fork")
    procs = [ctx.Process(target=target, args=args) for args in args_list]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert all(p.exitcode == 0 for p in procs), [p.exitcode for p in procs]


def test_two_processes_racing_for_one_run_train_it_once(tmp_path, monkeypatch):
    import dgro_lib.runs.experiment as E

    marks = tmp_path / "trained"
    marks.mkdir()

    def slow_launch(cfg, seed, run_dir, *, point=None):
        if (run_dir / "final_eval.json").exists():
            return json.loads((run_dir / "final_eval.json").read_text())["summary"]
        (marks / str(os.getpid())).touch()
        time.sleep(0.5)  # the other process arrives while this one trains
        run_dir.mkdir(parents=True)
        E.write_json(run_dir / "final_eval.json", {"summary": {"accuracy": 1.0}})
        return {"accuracy": 1.0}

    monkeypatch.setattr(E, "launch_run", slow_launch)
    cfg = load_config(find_params("dgro_fig1_reward_variance", "ci"))
    (tmp_path / "runs").mkdir()
    _race(E._worker, [((cfg, 0, tmp_path / "runs" / "abc", {}, []),)] * 2)
    assert len(list(marks.iterdir())) == 1
    assert json.loads((tmp_path / "runs" / "abc" / "final_eval.json").read_text())["summary"] == {"accuracy": 1.0}


def test_two_processes_building_one_embedded_model_build_it_once(tmp_path, monkeypatch):
    import dgro_lib.miniature.build as emb
    from dgro_lib.models import presets

    marks = tmp_path / "built"
    marks.mkdir()
    real = emb.warmup

    def counting_warmup(model, tokenizer, cfg, *, progress=True):
        (marks / str(os.getpid())).touch()
        time.sleep(0.3)  # the second builder arrives while the first one trains
        return real(model, tokenizer, cfg, progress=False)

    monkeypatch.setattr(emb, "warmup", counting_warmup)
    cfg = apply_overrides_embedded(presets.EMBEDDED_PRESETS["ci"], max_steps=2, n_puzzles=20)
    _race(emb.get_embedded_base_model, [(cfg, tmp_path / "models")] * 2)
    assert len(list(marks.iterdir())) == 1
    assert len(list((tmp_path / "models").glob("*/embedded.json"))) == 1


def _points(cfg) -> list:
    return list(dict.fromkeys(json.dumps(p, sort_keys=True) for p, _, _ in expand_sweep(cfg)))


def test_gpu_profile_validates_without_a_gpu_and_mirrors_the_cpu_profile():
    from dgro_lib.cli.dryrun import dry_run
    from dgro_lib.util.paths import PARAMS

    rows = dry_run("gpu", out=open("/dev/null", "w"))
    assert rows
    for path in sorted((PARAMS / "gpu").glob("*.yaml")):
        gpu, cpu = load_config(path), load_config(PARAMS / "cpu" / path.name)
        # the same sweep points (a point's own seeds, like the top-level seeds, are the profile's to choose)
        assert gpu.model.embedded_preset == cpu.model.embedded_preset and _points(gpu) == _points(cpu), path.name
        if gpu.kind == "train":
            assert gpu.train.cpu is False and gpu.train.learning_rate == cpu.train.learning_rate


def test_answer_slips_flip_roles_at_the_rate_keep_the_length_and_leave_other_configs_unchanged():
    import dataclasses
    import random

    from dgro_lib.data.kk.trace import slip_answer
    from dgro_lib.models import EMBEDDED_PRESETS, EmbeddedModelConfig
    from dgro_lib.miniature.supervised import _kk_corpus

    # the rate is a per-person probability: 3,000 x 3 draws at 0.3 (s.d. of the mean ~0.005)
    rng = random.Random(0)
    flips = [slip_answer((True, False, True), 0.3, rng)[1] for _ in range(3000)]
    assert abs(sum(flips) / 9000 - 0.3) < 0.02
    assert slip_answer((True, False), 0.0, rng) == ((True, False), 0)
    assert slip_answer((True, False), 1.0, rng) == ((False, True), 2)
    with pytest.raises(ValueError, match="answer_slip_rate must be a probability"):
        slip_answer((True,), 1.5, rng)
    with pytest.raises(ValueError, match="answer_slip_rate must be a probability"):
        EmbeddedModelConfig(answer_slip_rate=-0.1)
    with pytest.raises(ValueError, match="kk' only"):
        EmbeddedModelConfig(task="math", answer_slip_rate=0.1)

    # the default stays out of the hashed dict (earlier bases keep their cache keys)
    assert "answer_slip_rate" not in EMBEDDED_PRESETS["mini"].to_dict()
    assert EMBEDDED_PRESETS["mini_answer_slip"].to_dict()["answer_slip_rate"] == 0.3

    cfg = dataclasses.replace(EMBEDDED_PRESETS["mini_answer_slip"], n_puzzles=300)
    slipped, clean = _kk_corpus(cfg), _kk_corpus(dataclasses.replace(cfg, answer_slip_rate=0.0))
    assert slipped.prompts == clean.prompts
    differ = 0
    for a, b in zip(slipped.completions, clean.completions):
        trace_a, answer_a = a.split("</think>")
        trace_b, answer_b = b.split("</think>")
        assert trace_a == trace_b  # the trace is right either way
        assert len(a.split()) == len(b.split())  # length-neutral: only role words change
        changed = [(x, y) for x, y in zip(answer_a.split(), answer_b.split()) if x != y]
        assert all({x, y} == {"knight", "knave"} for x, y in changed)
        differ += bool(changed)
    assert slipped.slipped == differ
    # 1 - 0.7^k per puzzle of k people: 2-3 people at 0.3 -> ~0.51-0.66 of the completions
    assert 0.45 < differ / len(clean.completions) < 0.72


def test_guesses_skip_the_trace_with_a_uniform_assignment_and_leave_the_rest_unchanged():
    import dataclasses

    from dgro_lib.data.kk.trace import completion_text
    from dgro_lib.models import EMBEDDED_PRESETS, EmbeddedModelConfig
    from dgro_lib.miniature.supervised import _kk_corpus
    from dgro_lib.rewards.kk import kk_is_correct

    with pytest.raises(ValueError, match="guess_rate must be a probability"):
        EmbeddedModelConfig(guess_rate=2.0)
    assert "guess_rate" not in EMBEDDED_PRESETS["mini"].to_dict()
    cfg = dataclasses.replace(EMBEDDED_PRESETS["mini_guess"], n_puzzles=600)
    corpus = _kk_corpus(cfg)
    clean = _kk_corpus(dataclasses.replace(cfg, guess_rate=0.0))
    guesses = [i for i, c in enumerate(corpus.completions) if c.startswith("</think>")]
    assert abs(len(guesses) / len(corpus.completions) - cfg.guess_rate) < 0.05
    traced = [i for i in range(len(corpus.completions)) if i not in set(guesses)]
    # every non-guess is the right trace, as without guesses
    assert all(corpus.completions[i] == clean.completions[i] for i in traced)
    assert all(corpus.completions[i] == completion_text(corpus.records[i], style=cfg.trace_style) for i in traced)
    # a guess is right about as often as chance (2^-n for n people)
    right = [kk_is_correct(corpus.completions[i], names=corpus.records[i]["names"],
                           solution=corpus.records[i]["solution"]) for i in guesses]
    chance = sum(0.5 ** len(corpus.records[i]["names"]) for i in guesses)
    assert abs(sum(right) - chance) < 4 * chance ** 0.5 + 1
