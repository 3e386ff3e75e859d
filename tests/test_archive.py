"""The run archive: finished runs' result files carried to another store, restored only for the same run from the
same base weights, and never an evaluation the archive does not hold."""

import hashlib
import json
from pathlib import Path

import pandas as pd
import pytest

import dgro_lib.runs.experiment as E
from dgro_lib.runs.archive import ARCHIVED, REPLICATES, archive_runs, replicates, restorable, restore_runs, weights_digest
from dgro_lib.config import apply_overrides, find_params, load_config
from dgro_lib.runs.store import run_key

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
    monkeypatch.setattr("dgro_lib.runs.training.DGROTrainer", lambda *a, **k: pytest.fail("trained an archived run"))
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
    import dgro_lib.cli.reproduce as R
    from dgro_lib.cli.estimate import plan_profile

    cfg, _, root, _ = trained
    (tmp_path / "ci" / "runs").mkdir(parents=True)
    plain = plan_profile("ci", ["dgro_fig1_reward_variance"], tmp_path).iloc[0]
    assert plain["finished"] == 0 and plain["archived"] == 0
    # an archive holding one of the notebook's runs: it counts as finished, and as archived
    full = load_config(find_params("dgro_fig1_reward_variance", "ci"))
    _, seed, concrete = E.expand_sweep(full)[0]
    import shutil

    from dgro_lib.config import config_to_dict
    from dgro_lib.runs.data_sources import expected_base_digest

    archive = tmp_path / "archive"
    fake = shutil.copytree(root / "archive" / run_key(cfg, 0), archive / run_key(concrete, seed))
    manifest = json.loads((fake / "manifest.json").read_text())
    (fake / "manifest.json").write_text(json.dumps({**manifest, "config": config_to_dict(concrete), "seed": seed}))
    meta = json.loads((fake / ARCHIVED).read_text())
    (fake / ARCHIVED).write_text(json.dumps({**meta, "base_weights_sha256": "0" * 64}))
    row = plan_profile("ci", ["dgro_fig1_reward_variance"], tmp_path, archive=archive).iloc[0]
    assert row["finished"] == 0 and row["archived"] == 0  # archived, but from other base weights: trained here
    (fake / ARCHIVED).write_text(json.dumps({**meta, "base_weights_sha256": expected_base_digest(concrete)}))
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


def _as_other_machine(folder, digest="0" * 64, vendor="GenuineIntel"):
    """Make the archived copy in ``folder`` look trained on another machine from other base weights."""
    meta = json.loads((folder / ARCHIVED).read_text())
    meta.update(base_weights_sha256=digest, machine={**meta["machine"], "cpu_vendor": vendor})
    (folder / ARCHIVED).write_text(json.dumps(meta))
    fe = json.loads((folder / "final_eval.json").read_text())
    fe["correct"] = [not c for c in fe["correct"]]  # its own per-item results
    (folder / "final_eval.json").write_text(json.dumps(fe))
    meta["results_sha256"] = hashlib.sha256((folder / "final_eval.json").read_bytes()).hexdigest()
    (folder / ARCHIVED).write_text(json.dumps(meta))
    return meta


def test_a_run_from_another_machine_is_kept_as_a_replicate_never_replaced(trained, tmp_path, monkeypatch):
    import shutil

    from dgro_lib.models.committed import BASES_ENV

    monkeypatch.setenv(BASES_ENV, "none")  # neither side's base is committed: the first archived stays the reference
    cfg, _, root, _ = trained
    key = run_key(cfg, 0)
    archive = tmp_path / "archive"
    shutil.copytree(root / "archive", archive)
    meta = json.loads((archive / key / ARCHIVED).read_text())
    assert meta["machine"]["cpu_vendor"] and meta["machine"]["torch"].startswith("2.")
    assert "torch_threads" in meta["machine"] and "cpu_isa" in meta["machine"]
    other = _as_other_machine(archive / key)
    other_bytes = (archive / key / "final_eval.json").read_bytes()
    assert archive_runs(root / "store", archive) == [key]  # the store's run, from its own base: a second replicate
    found = replicates(archive, key)
    assert [m["base_weights_sha256"] for _, _, m in found] == ["0" * 64, meta["base_weights_sha256"]]
    assert (archive / key / "final_eval.json").read_bytes() == other_bytes  # the first one is left as it was
    rid = found[1][0]
    assert rid.startswith(f"{ {'AuthenticAMD': 'amd', 'GenuineIntel': 'intel'}.get(meta['machine']['cpu_vendor'], 'other')}-")
    assert (archive / key / REPLICATES / rid / "final_eval.json").is_file()
    # archiving the same replicate again refreshes it in place, it adds nothing
    assert archive_runs(root / "store", archive) == [key]
    assert len(replicates(archive, key)) == 2
    # restoring takes the replicate from this machine's base, whichever folder holds it
    base = E.resolve_model_path(cfg)
    out = restore_runs([(cfg, 0, tmp_path / "s" / key, base)], archive)
    assert out == {key: f"restored replicate {rid}"}
    assert (tmp_path / "s" / key / "final_eval.json").read_bytes() == (root / "store" / key /
                                                                       "final_eval.json").read_bytes()
    assert restorable(cfg, 0, archive, key, weights_digest(base))
    assert not restorable(cfg, 0, archive, key, "1" * 64) and not restorable(cfg, 1, archive, key, "0" * 64)


def test_a_retrained_twin_is_noted_not_kept_as_a_replicate(trained, tmp_path):
    """The same run trained again from the same base (another wall time, another experiment's sweep tag) generates
    the same text: no second replicate, the retraining noted, an evaluation the archive lacked added. A run whose
    outcomes differ in one item is a replicate."""
    import shutil

    from dgro_lib.runs.archive import outcomes_digest

    cfg, _, root, _ = trained
    key = run_key(cfg, 0)
    archive, store = tmp_path / "archive", tmp_path / "store"
    shutil.copytree(root / "archive", archive)
    shutil.copytree(root / "store" / key, store / key)
    (store / key / ARCHIVED).unlink(missing_ok=True)  # a fresh training, not a restored copy
    final = json.loads((store / key / "final_eval.json").read_text())
    final["summary"] |= {"wall_s": final["summary"]["wall_s"] + 7.5, "train_seconds": 1.0, "loss.kwargs.beta1": 0.1}
    (store / key / "final_eval.json").write_text(json.dumps(final))
    assert outcomes_digest(store / key / "final_eval.json") == outcomes_digest(archive / key / "final_eval.json")
    lacking = sorted((archive / key / "evals").glob("*.json"))[0]
    lacking.unlink()
    before = (archive / key / "final_eval.json").read_bytes()
    assert archive_runs(store, archive) == [key]
    assert len(replicates(archive, key)) == 1 and not (archive / key / REPLICATES).exists()
    assert (archive / key / "final_eval.json").read_bytes() == before  # the archived copy is kept as it was
    assert lacking.is_file()
    meta = json.loads((archive / key / ARCHIVED).read_text())
    assert len(meta["retrained_identical"]) == 1 and meta["retrained_identical"][0]["machine"]["cpu_vendor"]
    # one item's outcome differs: another replicate
    final["correct"][0] = not final["correct"][0]
    (store / key / "final_eval.json").write_text(json.dumps(final))
    assert outcomes_digest(store / key / "final_eval.json") != outcomes_digest(archive / key / "final_eval.json")
    archive_runs(store, archive)
    assert len(replicates(archive, key)) == 2


def test_a_replicate_from_a_committed_base_becomes_the_reference(trained, tmp_path, monkeypatch):
    import shutil

    from dgro_lib.models.committed import BASES_ENV, commit_base

    cfg, _, root, _ = trained
    key = run_key(cfg, 0)
    archive = tmp_path / "archive"
    shutil.copytree(root / "archive", archive)
    _as_other_machine(archive / key, digest="2" * 64)
    base = E.resolve_model_path(cfg)
    commit_base("ci", Path(base), tmp_path / "bases")  # this store's base is the committed one
    monkeypatch.setenv(BASES_ENV, str(tmp_path / "bases"))
    archive_runs(root / "store", archive)
    found = replicates(archive, key)
    assert found[0][0] == "reference" and found[0][2]["base_weights_sha256"] == weights_digest(base)
    assert [m["base_weights_sha256"] for _, _, m in found[1:]] == ["2" * 64]  # the old reference, kept
    assert E.restore_runs([(cfg, 0, tmp_path / "s" / key, base)], archive) == {key: "restored"}


def test_base_evaluations_are_archived_per_base_digest_and_restored(trained, tmp_path, monkeypatch):
    from dgro_lib.runs.archive import BASE_EVALS, archive_base_evals, restore_base_eval

    cfg, _, root, _ = trained
    stored = sorted((root / "store" / "base").glob("*.json"))
    assert stored  # the greedy and the sampled protocol of the base
    base = E.resolve_model_path(cfg)
    digest = weights_digest(base)[:16]
    for p in stored:
        assert (root / "archive" / BASE_EVALS / p.stem / f"{digest}.json").is_file()
    assert archive_base_evals(root / "store", root / "archive") == []  # the same numbers: nothing added
    # a fresh store restores them instead of evaluating the base again
    monkeypatch.setattr(E, "_evaluate_model", lambda *a, **k: pytest.fail("evaluated an archived base evaluation"))
    again = E.run_experiment(cfg, tmp_path / "exp", workers=1, store=tmp_path / "store", archive=root / "archive",
                             evaluations=[SAMPLED])
    for p in stored:
        got = json.loads((tmp_path / "store" / "base" / p.name).read_text())
        want = json.loads(p.read_text())
        assert got == want | {"model_path": base}
    assert again.base["correct"] == json.loads(stored[0].read_text())["correct"] or len(stored) > 1
    # another base's weights find nothing to restore
    assert not restore_base_eval(str(tmp_path), tmp_path / "x" / "base" / stored[0].name, root / "archive")


def _fake_replicate(folder, correct, digest, vendor):
    folder.mkdir(parents=True)
    body = json.dumps({"summary": {"accuracy": sum(correct) / len(correct)}, "correct": correct})
    (folder / "final_eval.json").write_text(body)
    (folder / "manifest.json").write_text("{}")
    (folder / ARCHIVED).write_text(json.dumps({
        "base_weights_sha256": digest, "results_sha256": hashlib.sha256(body.encode()).hexdigest(),
        "machine": {"cpu_vendor": vendor}}))


def test_replicates_compare_by_seed_spread_identical_consistent_or_differs(tmp_path):
    import random

    from dgro_lib.runs.archive import compare_replicates

    rng = random.Random(0)
    rows = []
    # arm A: the other machine's replicates are bit-equal; B: other runs of the same accuracy; C: 30 points lower
    for arm, shift in (("A", None), ("B", 0.0), ("C", -0.3)):
        for seed in range(3):
            key = f"{arm}{seed}"
            p = 0.5 + 0.05 * seed
            ref = [rng.random() < p for _ in range(400)]
            _fake_replicate(tmp_path / "archive" / key, ref, "a" * 64, "AuthenticAMD")
            alt = ref if shift is None else [rng.random() < p + shift for _ in range(400)]
            _fake_replicate(tmp_path / "archive" / key / REPLICATES / f"intel-{seed}", alt, "b" * 64, "GenuineIntel")
            rows.append({"run": key, "seed": seed, "key": key, "sweep_point": json.dumps({"arm": arm})})
    rows.append({"run": "D0", "seed": 0, "key": "D0", "sweep_point": json.dumps({"arm": "D"})})  # never archived
    pd.DataFrame(rows).to_csv(tmp_path / "runs.csv", index=False)
    table = compare_replicates(tmp_path / "archive", tmp_path / "runs.csv").set_index("sweep_point")
    status = {json.loads(k)["arm"]: v for k, v in table["status"].items()}
    assert status == {"A": "identical", "B": "consistent", "C": "differs", "D": "no replicate"}
    a = table.loc[json.dumps({"arm": "A"})]
    assert a["diff_points"] == 0 and a["same_items"] == 1 and a["seeds"] == 3
    c = table.loc[json.dumps({"arm": "C"})]
    assert c["diff_points"] < -20 and abs(c["diff_points"]) > 1.96 * c["se_points"]
    # the seed spread, not the item count, sets the standard error (seeds at 50 / 55 / 60 %)
    b = table.loc[json.dumps({"arm": "B"})]
    assert b["se_points"] > 2.5 and b["other"].startswith("intel")


def test_a_profile_store_restores_from_its_reference_archive_by_default(monkeypatch, tmp_path):
    """A notebook opened in JupyterLab (no DGRO_RUN_ARCHIVE) reads the archived runs as make reproduce does;
    ``none`` (make reproduce RETRAIN=1) and a store outside outputs/<profile>/ restore nothing."""
    from dgro_lib.runs.archive import ARCHIVE_ENV, archive_from_env
    from dgro_lib.util.paths import OUTPUTS, REPO

    monkeypatch.delenv(ARCHIVE_ENV, raising=False)
    assert archive_from_env(OUTPUTS / "cpu" / "runs") == REPO / "reference" / "cpu" / "runs"
    assert archive_from_env(tmp_path / "runs") is None and archive_from_env() is None
    assert archive_from_env(OUTPUTS / "no_such_profile" / "runs") is None
    monkeypatch.setenv(ARCHIVE_ENV, "none")
    assert archive_from_env(OUTPUTS / "cpu" / "runs") is None
    monkeypatch.setenv(ARCHIVE_ENV, str(tmp_path))
    assert archive_from_env(OUTPUTS / "cpu" / "runs") == tmp_path


def test_the_base_model_notebook_tables_are_stored_once_and_restored(tmp_path, monkeypatch):
    from dgro_lib.runs.archive import ARCHIVE_ENV, archive_base_evals

    cfg = apply_overrides(load_config(find_params("00_base_model", "ci")), {"data.n_eval": 4})
    greedy, rates = E.base_model_tables(cfg, tmp_path / "a" / "runs", prompts=2, samples=2)
    assert list(greedy["people"]) == list(cfg.data.eval_people) and len(rates) == 2 * len(cfg.data.eval_people)
    assert archive_base_evals(tmp_path / "a" / "runs", tmp_path / "archive")
    monkeypatch.setenv(ARCHIVE_ENV, str(tmp_path / "archive"))
    monkeypatch.setattr("dgro_lib.evaluate.accuracy.greedy_accuracy_by_people",
                        lambda *a, **k: pytest.fail("evaluated an archived base"))
    g2, r2 = E.base_model_tables(cfg, tmp_path / "b" / "runs", prompts=2, samples=2)
    pd.testing.assert_frame_equal(g2, greedy)
    pd.testing.assert_frame_equal(r2, rates)
