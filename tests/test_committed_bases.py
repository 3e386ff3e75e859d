"""Committed embedded bases: installed instead of built when the recipe matches, verified by digest, refused with
both digests named when a cache or a committed copy disagrees; the rebuild command's comparison; and the bases the
ci and cpu profiles start from are all committed."""

import json
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from dgro_lib import miniature
from dgro_lib import models as M
from dgro_lib.config import find_params, load_config
from dgro_lib.models.committed import (BASE_RECORD, BASES, BASES_ENV, CommittedBaseError, commit_base,
                                       committed_bases, weights_digest)
from dgro_lib.util.paths import PARAMS

TINY = M.EmbeddedModelConfig(hidden=32, layers=2, heads=4, kv_heads=2, intermediate=64, people=(2,), mix=(1.0,),
                             n_puzzles=24, trace_style="none", batch_size=4, max_steps=2, warmup_steps=1, seed=5)


@pytest.fixture
def committed(tmp_path, monkeypatch):
    """TINY built once and committed into a bases folder of its own, which is the one in force."""
    built = miniature.get_embedded_base_model(TINY, cache_dir=tmp_path / "build", progress=False)
    root = tmp_path / "bases"
    dest = commit_base("tiny", built, root)
    monkeypatch.setenv(BASES_ENV, str(root))
    return built, dest


def _no_warmup(monkeypatch):
    monkeypatch.setattr("dgro_lib.miniature.build.warmup", lambda *a, **k: pytest.fail("built a committed base"))


def test_a_committed_base_is_installed_not_built_and_is_the_same_bits(committed, tmp_path, monkeypatch):
    built, dest = committed
    meta = json.loads((dest / BASE_RECORD).read_text())
    assert meta["weights_sha256"] == weights_digest(built) and meta["config_hash"] == M.config_hash(TINY)
    assert meta["files"]["model.safetensors"] == (built / "model.safetensors").stat().st_size
    _no_warmup(monkeypatch)
    path = miniature.get_embedded_base_model(TINY, cache_dir=tmp_path / "cache", progress=False)
    assert path.name == built.name and weights_digest(path) == weights_digest(built)
    assert not (path / BASE_RECORD).exists()  # the cache folder is what a build leaves, nothing more
    assert miniature.get_embedded_base_model(TINY, cache_dir=tmp_path / "cache") == path  # cached now
    model, tok = M.load_model(path)
    assert type(model).__name__ == "LlamaForCausalLM"


def test_a_cache_with_other_weights_is_an_error_naming_both_digests(committed, tmp_path):
    built, dest = committed
    cache = tmp_path / "cache"
    local = shutil.copytree(built, cache / built.name)
    tensors = load_file(str(local / "model.safetensors"))
    name = sorted(tensors)[0]
    tensors[name] = tensors[name] + 1e-7  # another CPU's last bits
    save_file(tensors, str(local / "model.safetensors"), metadata={"format": "pt"})
    other = weights_digest(local)
    with pytest.raises(CommittedBaseError, match=f"has weights sha256 {other}.*has {weights_digest(built)}"):
        miniature.get_embedded_base_model(TINY, cache_dir=cache)
    # building from the recipe (committed=False) is the explicit way to use a local build
    assert miniature.get_embedded_base_model(TINY, cache_dir=cache, committed=False) == local


def test_a_damaged_or_stale_committed_base_is_refused(committed, tmp_path, monkeypatch):
    built, dest = committed
    _no_warmup(monkeypatch)
    (dest / "model.safetensors").write_bytes((dest / "model.safetensors").read_bytes()[:-4] + b"\0\0\0\0")
    with pytest.raises(CommittedBaseError, match="damaged"):
        miniature.get_embedded_base_model(TINY, cache_dir=tmp_path / "cache")
    assert not (tmp_path / "cache" / built.name).exists()  # nothing half-installed
    # a preset whose committed folder was made from another recipe: rebuild and commit it, never a silent build
    root = tmp_path / "bases2"
    stale = commit_base("ci", built, root)  # TINY's files under the ci preset's name
    monkeypatch.setenv(BASES_ENV, str(root))
    with pytest.raises(CommittedBaseError, match=f"'ci'.*recipe {M.config_hash(TINY)}.*now "
                                                 f"{M.config_hash(M.EMBEDDED_PRESETS['ci'])}"):
        miniature.get_embedded_base_model("ci", cache_dir=tmp_path / "cache")
    assert stale.is_dir()
    monkeypatch.setenv(BASES_ENV, "none")
    assert committed_bases() == {}


def _profile_presets() -> dict[str, set[str]]:
    """Preset -> the params files (ci and cpu) that start from it, sweeps over the base included."""
    from dgro_lib.config import expand_sweep

    out: dict[str, set[str]] = {}
    for profile in ("ci", "cpu"):
        for path in sorted((PARAMS / profile).glob("*.yaml")):
            cfg = load_config(find_params(path.stem, profile))
            if cfg.kind == "theory" or cfg.model.path != "embedded":
                continue
            names = {cfg.model.embedded_preset}
            if cfg.kind == "train":
                names |= {c.model.embedded_preset for _, _, c in expand_sweep(cfg)}
            names |= set(cfg.extra.get("base_candidates", []))
            for n in names:
                out.setdefault(n, set()).add(f"{profile}/{path.stem}")
    return out


def test_every_base_the_ci_and_cpu_profiles_start_from_is_committed_and_intact(monkeypatch):
    monkeypatch.delenv(BASES_ENV, raising=False)
    bases = committed_bases()
    needed = _profile_presets()
    assert {"mini", "math_slip", "ci"} <= set(needed)
    missing = {p: sorted(f) for p, f in needed.items() if p not in bases}
    assert not missing, f"no committed base in {BASES} for {missing}"
    for preset, meta in bases.items():
        assert meta["config_hash"] == M.config_hash(M.EMBEDDED_PRESETS[preset]), preset
        assert weights_digest(meta["path"]) == meta["weights_sha256"], preset
        assert meta["files"]["model.safetensors"] < 8_000_000  # ~1M parameters in fp32
        assert {"config.json", "tokenizer.json", "embedded.json"} <= set(meta["files"]), preset


def test_the_rebuild_reports_bit_equality_or_the_difference(committed, tmp_path, capsys):
    from dgro_lib.cli.rebuild_base import compare_weights

    built, dest = committed
    same = compare_weights(built, dest)
    assert same["bit_equal"] and same["max_abs_diff"] == 0.0
    other = shutil.copytree(built, tmp_path / "other")
    tensors = load_file(str(other / "model.safetensors"))
    name = sorted(tensors)[1]
    tensors[name] = tensors[name].clone()
    tensors[name].view(-1)[0] += 0.25
    save_file(tensors, str(other / "model.safetensors"), metadata={"format": "pt"})
    diff = compare_weights(other, dest)
    assert not diff["bit_equal"] and diff["tensor"] == name and diff["tensors_differing"] == 1
    assert diff["max_abs_diff"] == pytest.approx(0.25, abs=1e-6)


def test_make_base_rebuilds_the_ci_preset_and_compares_it(tmp_path, monkeypatch, capsys):
    """The command on a real preset (ci builds in seconds): it rebuilds from the recipe and compares with the
    committed copy; bit-equal on the machine kind that committed it, else the difference and both accuracies."""
    import dgro_lib.cli.rebuild_base as RB

    monkeypatch.delenv(BASES_ENV, raising=False)
    monkeypatch.setattr(RB, "OUTPUTS", tmp_path)
    assert RB.main(["ci", "--heldout", "8"]) == 0
    out = capsys.readouterr().out
    report = json.loads(next((tmp_path / "rebuild").glob("*/ci.rebuild.json")).read_text())
    assert report["recipe_hash"] == M.config_hash(M.EMBEDDED_PRESETS["ci"]) and report["machine"]["cpu_model"]
    if report["weights"]["bit_equal"]:
        assert "equals the committed base bit for bit" in out
    else:
        assert "DIFFERS" in out and report["weights"]["max_abs_diff"] > 0
        assert set(report["greedy"]["3"]) >= {"rebuilt", "committed", "diff_points"}
