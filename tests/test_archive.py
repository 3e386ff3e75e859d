"""The run archive: finished runs' result files carried to another store, restored only for the same run from the
same base weights, and never an evaluation the archive does not hold."""

import json

import pandas as pd
import pytest

import dgro_lib.experiment as E
from dgro_lib.archive import ARCHIVED, archive_runs, restore_runs, weights_digest
from dgro_lib.config import apply_overrides, find_params, load_config
from dgro_lib.runstore import run_key

SAMPLED = ({"temperature": 1.0, "n_samples": 2, "ks": [1, 2]}, 3)


def _cfg(**overrides):
    return apply_overrides(load_config(find_params("dgro_fig1_reward_variance", "ci")),
                           {"train.max_steps": 1, "train.save_steps": 1, "train.eval_every": 0, "seeds": [0],
                            "data.n_eval": 6, "sweep": {}, **overrides})


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """One finished ci run (with a sampled evaluation) in a store, and its archive."""
    root = tmp_path_factory.mktemp("archive")
    cfg = _cfg()
    result = E.run_experiment(cfg, root / "exp", workers=1, store=root / "store", evaluations=[SAMPLED])
    keys = archive_runs(root / "store", root / "archive")
    return cfg, result, root, keys


def test_the_archive_holds_the_result_files_and_the_base_digest_but_no_weights(trained):
    cfg, result, root, keys = trained
    key = run_key(cfg, 0)
    assert keys == [key]  # the store's base/ folder is not a run
    archived = root / "archive" / key
    names = {p.relative_to(archived).as_posix() for p in archived.rglob("*") if p.is_file()}
    assert {"manifest.json", "metrics.csv", "heldout.csv", "final_eval.json", ARCHIVED} <= names
    assert any(n.startswith("evals/") for n in names)
    assert not any(n.startswith("trainer") or n.endswith((".safetensors", ".bin", ".pt", ".lock")) for n in names)
    assert sum(p.stat().st_size for p in archived.rglob("*") if p.is_file()) < 200_000
    meta = json.loads((archived / ARCHIVED).read_text())
    base_path = json.loads((root / "store" / key / "manifest.json").read_text())["model_path"]
    assert meta["base_weights_sha256"] == weights_digest(base_path) and meta["key"] == key
    with pytest.raises(FileNotFoundError, match="not a finished run"):
        archive_runs(root / "store", root / "archive2", ["nope"])


def test_an_archived_run_is_restored_instead_of_trained_and_read_back_whole(trained, tmp_path, monkeypatch):
    cfg, first, root, _ = trained
    monkeypatch.setattr("dgro_lib.training.DGROTrainer", lambda *a, **k: pytest.fail("trained an archived run"))
    again = E.run_experiment(cfg, tmp_path / "exp", workers=1, store=tmp_path / "store", archive=root / "archive",
                             evaluations=[SAMPLED])
    key = run_key(cfg, 0)
    assert not (tmp_path / "store" / key / "trainer").exists()
    assert pd.read_csv(tmp_path / "exp" / "runs.csv")["from_archive"].tolist() == [True]
    manifest = json.loads((tmp_path / "exp" / "manifest.json").read_text())
    assert manifest["runs"][0]["from_archive"] is True and manifest["run_archive"] == str(root / "archive")
    cols = ["run", "key", "accuracy", "correct"]
    pd.testing.assert_frame_equal(again.finals[cols], first.finals[cols])
    pd.testing.assert_frame_equal(again.metrics, first.metrics)
    # the sampled protocol the archive holds is read back; one it does not hold needs weights it does not have
    table = E.evaluate_runs(again, cfg, SAMPLED[0], n_puzzles=SAMPLED[1])
    assert table.set_index("run").loc[again.finals["run"].iloc[0], "n"] == SAMPLED[1] * 2
    with pytest.raises(FileNotFoundError, match="restored from the run archive"):
        E.evaluate_runs(again, cfg, {"temperature": 1.0, "n_samples": 3, "ks": [1]}, n_puzzles=2)


def test_a_run_with_other_params_or_another_base_is_trained_not_restored(trained, tmp_path, capsys):
    cfg, _, root, _ = trained
    key = run_key(cfg, 0)
    base = E.resolve_model_path(cfg)
    # train.max_steps is not in the key under a constant lr (runs extend in place), but it is another run
    longer = _cfg(**{"train.max_steps": 2})
    assert run_key(longer, 0) == key
    out = restore_runs([(longer, 0, tmp_path / "a" / key, base)], root / "archive")
    assert out[key].startswith("made with other params (train.max_steps: 1 -> 2")
    assert not (tmp_path / "a" / key).exists()
    assert restore_runs([(cfg, 1, tmp_path / "b" / key, base)], root / "archive")[key].startswith(
        "made with other params (seed: 0 -> 1")
    # the same run, but this machine's base has other weights (another CPU, another build)
    other = tmp_path / "archive"
    archive_runs(root / "store", other)
    meta = json.loads((other / key / ARCHIVED).read_text())
    (other / key / ARCHIVED).write_text(json.dumps({**meta, "base_weights_sha256": "0" * 64}))
    out = restore_runs([(cfg, 0, tmp_path / "c" / key, base)], other)
    assert "with weights sha256 000000000000" in out[key] and not (tmp_path / "c" / key).exists()
    assert "it is trained here" in capsys.readouterr().out
    # restored when everything matches; a run already in the store is left alone
    assert restore_runs([(cfg, 0, tmp_path / "d" / key, base)], root / "archive") == {key: "restored"}
    assert restore_runs([(cfg, 0, tmp_path / "d" / key, base)], root / "archive") == {key: "in the store"}
    assert restore_runs([(cfg, 0, tmp_path / "e" / "fff", base)], root / "archive") == {"fff": "not archived"}


def test_the_plan_counts_archived_runs_and_reproduce_archives_the_store(trained, tmp_path, monkeypatch):
    import dgro_lib.reproduce as R
    from dgro_lib.estimate import plan_profile

    cfg, _, root, _ = trained
    (tmp_path / "ci" / "runs").mkdir(parents=True)
    plain = plan_profile("ci", ["dgro_fig1_reward_variance"], tmp_path).iloc[0]
    assert plain["finished"] == 0 and plain["archived"] == 0
    # an archive holding one of the notebook's runs: it counts as finished, and as archived
    full = load_config(find_params("dgro_fig1_reward_variance", "ci"))
    _, seed, concrete = E.expand_sweep(full)[0]
    archive = tmp_path / "archive"
    (archive / run_key(concrete, seed)).mkdir(parents=True)
    (archive / run_key(concrete, seed) / "final_eval.json").write_text("{}")
    row = plan_profile("ci", ["dgro_fig1_reward_variance"], tmp_path, archive=archive).iloc[0]
    assert row["finished"] == 1 and row["archived"] == 1
    assert row["steps_left"] == plain["steps_left"] - concrete.train.max_steps

    monkeypatch.setattr(R, "OUTPUTS", root.parent / root.name / "outputs")
    monkeypatch.setattr(R, "REFERENCE", tmp_path / "reference")
    (root / "outputs" / "ci").mkdir(parents=True, exist_ok=True)
    store = root / "outputs" / "ci" / "runs"
    if not store.exists():
        store.symlink_to(root / "store")
    assert R.main(["--profile", "ci", "--archive-runs"]) == 0
    assert (tmp_path / "reference" / "ci" / "runs" / run_key(cfg, 0) / "final_eval.json").is_file()


def test_archiving_never_replaces_a_run_archived_from_other_base_weights(trained, tmp_path):
    import shutil

    cfg, _, root, _ = trained
    key = run_key(cfg, 0)
    archive = tmp_path / "archive"
    shutil.copytree(root / "archive", archive)
    marker = archive / key / ARCHIVED
    meta = json.loads(marker.read_text())
    archived_bytes = (archive / key / "final_eval.json").read_bytes()
    marker.write_text(json.dumps({**meta, "base_weights_sha256": "0" * 64}))  # as if trained on another machine
    with pytest.raises(ValueError, match=f"not archived.*{key} \\(archived from base weights 000000000000"):
        archive_runs(root / "store", archive)
    assert json.loads(marker.read_text())["base_weights_sha256"] == "0" * 64  # left as it was
    assert (archive / key / "final_eval.json").read_bytes() == archived_bytes
    marker.write_text(json.dumps(meta))  # the same base: replaced as before
    assert archive_runs(root / "store", archive) == [key]
