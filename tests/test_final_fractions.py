"""A sampled final evaluation keeps every sample: a run finished today stores per-puzzle fractions, and
``python -m dgro_lib.cli.final_fractions`` re-derives them for a run stored with first-sample outcomes only, from its
last checkpoint, only when the re-evaluation reproduces what was stored."""

import hashlib
import json
import shutil

import numpy as np
import pytest

import dgro_lib.runs.experiment as E
from dgro_lib.cli.final_fractions import _write, needs_fractions, rederive
from dgro_lib.config import apply_overrides, find_params, load_config
from dgro_lib.evaluate import per_item_correct
from dgro_lib.runs.archive import ARCHIVED, archive_runs, replicates
from dgro_lib.runs.store import run_key


def _cfg():
    return apply_overrides(load_config(find_params("dgro_fig1_reward_variance", "ci")),
                           {"train.max_steps": 1, "train.save_steps": 1, "train.eval_every": 0, "seeds": [0],
                            "data.n_eval": 6, "eval.temperature": 1.0, "eval.n_samples": 3, "eval.ks": [1, 3],
                            "sweep": {}})


def _first_sample_only(ev):
    """What a final evaluation stored before every sample was kept: the first sample's outcome per puzzle."""
    return list(map(bool, ev["correct"]))


@pytest.fixture(scope="module")
def old_and_new(tmp_path_factory):
    """The same ci run trained twice: once as before (first samples stored) in an archived store, once as now."""
    root = tmp_path_factory.mktemp("fractions")
    cfg = _cfg()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("dgro_lib.runs.training.per_item_correct", _first_sample_only)
        E.run_experiment(cfg, root / "old", workers=1, store=root / "store_old")
        # an archive holding the old run, as archives made before the fractions did (archive_runs now refuses one)
        mp.setattr("dgro_lib.runs.archive.needs_fractions", lambda final: False)
        archive_runs(root / "store_old", root / "archive")
    shutil.copytree(root / "store_old" / run_key(cfg, 0), root / "pristine")  # as stored, for the mismatch test
    E.run_experiment(cfg, root / "new", workers=1, store=root / "store_new")
    key = run_key(cfg, 0)
    return root, key, root / "store_old" / key, root / "store_new" / key


def test_per_item_correct_keeps_every_sample():
    assert per_item_correct({"correct": [1, 0, True]}) == [True, False, True]  # greedy: the answer's correctness
    ev = {"correct": [True, False], "n_correct": [1, 2], "n": 6}  # 3 samples per puzzle
    assert per_item_correct(ev) == [1 / 3, 2 / 3]


def test_a_run_finished_now_stores_fractions_whose_mean_is_its_accuracy(old_and_new):
    _, _, old_dir, new_dir = old_and_new
    new = json.loads((new_dir / "final_eval.json").read_text())
    old = json.loads((old_dir / "final_eval.json").read_text())
    assert not needs_fractions(new) and needs_fractions(old)
    assert set(new["correct"]) <= {0.0, 1 / 3, 2 / 3, 1.0} and len(new["correct"]) == 6
    assert np.mean(new["correct"]) == pytest.approx(new["summary"]["accuracy"])
    assert old["summary"]["accuracy"] == new["summary"]["accuracy"]  # the same run, the same samples
    # the first sample right <=> at least one of three right is necessary; fractions of 0 give a first sample wrong
    assert all(not o for o, f in zip(old["correct"], new["correct"]) if f == 0.0)


def test_rederive_reproduces_the_first_samples_then_stores_the_fractions(old_and_new):
    root, key, old_dir, new_dir = old_and_new
    status, doc = rederive(old_dir)
    assert status == "ok"
    new = json.loads((new_dir / "final_eval.json").read_text())
    assert doc["correct"] == new["correct"]
    assert doc["summary"] == json.loads((old_dir / "final_eval.json").read_text())["summary"]
    assert doc["fractions_rederived"]["from"] == "trainer/checkpoint-1"

    before = hashlib.sha256((old_dir / "final_eval.json").read_bytes()).hexdigest()
    assert _write(old_dir, root / "archive", doc) == "store + archive"
    archived = root / "archive" / key
    stored = json.loads((old_dir / "final_eval.json").read_text())
    assert json.loads((archived / "final_eval.json").read_text()) == stored and stored["correct"] == new["correct"]
    meta = json.loads((archived / ARCHIVED).read_text())
    assert meta["final_fractions"]["results_sha256_before"] == before
    assert meta["results_sha256"] == hashlib.sha256((archived / "final_eval.json").read_bytes()).hexdigest()
    archive_runs(root / "store_old", root / "archive")  # archiving the store again: the same replicate, no new one
    assert [rid for rid, _, _ in replicates(root / "archive", key)] == ["reference"]
    assert rederive(old_dir)[0].startswith("skip: not a sampled evaluation stored as first samples")


def test_a_stored_outcome_the_checkpoint_does_not_reproduce_is_left_as_it_is(old_and_new, tmp_path):
    root, _, _, _ = old_and_new
    forged = tmp_path / "run"
    shutil.copytree(root / "pristine", forged)
    doc = json.loads((forged / "final_eval.json").read_text())
    doc["correct"][0] = not doc["correct"][0]
    (forged / "final_eval.json").write_text(json.dumps(doc))
    status, out = rederive(forged)
    assert status == "mismatch: 1 of 6 first-sample outcomes differ" and out is None
    assert json.loads((forged / "final_eval.json").read_text()) == doc  # left as it is
    shutil.rmtree(forged / "trainer")
    assert rederive(forged)[0].startswith("skip: no trainer/checkpoint-1")


def test_the_archive_refuses_a_run_stored_as_first_samples_and_names_the_command(old_and_new, tmp_path):
    root, key, _, new_dir = old_and_new
    store = tmp_path / "store"
    shutil.copytree(root / "pristine", store / key)  # the old run, as stored before the fractions
    shutil.copytree(new_dir, store / "a_converted_run")  # another run, fine on its own
    with pytest.raises(ValueError, match=rf"1 run\(s\).*\['{key}'\].*final_fractions --keys {key}"):
        archive_runs(store, tmp_path / "archive")
    assert not (tmp_path / "archive").exists()  # refused before anything was copied
