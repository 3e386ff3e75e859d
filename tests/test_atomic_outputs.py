"""Outputs are atomic (a writer that dies leaves the old file or none, never half a file) and attributable (every
manifest says which commit, packages, seed, config, machine and wall time made it)."""

from __future__ import annotations

import ast
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import types
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import pytest

from dgro_lib.util.manifest import finish_manifest, write_manifest

from dgro_lib.util.files import atomic_path, atomic_write, write_json

PKG = Path(__file__).resolve().parents[1] / "dgro_lib"


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(".") or ".tmp" in p.name)


@pytest.mark.parametrize("existed", [True, False])
def test_a_writer_that_raises_leaves_the_old_file_or_none_and_no_temp(tmp_path, existed):
    target = tmp_path / "metrics.csv"
    if existed:
        target.write_text("step,loss\n1,0.5\n")

    def dies_half_way(tmp: Path) -> None:
        with open(tmp, "w") as fh:
            fh.write("step,loss\n1,0.5\n2,")
        raise RuntimeError("killed mid-write")

    with pytest.raises(RuntimeError):
        atomic_write(target, dies_half_way)
    assert target.exists() == existed
    if existed:
        assert target.read_text() == "step,loss\n1,0.5\n"
    assert _leftovers(tmp_path) == []
    # the context-manager form behaves the same
    with pytest.raises(KeyboardInterrupt), atomic_path(target) as tmp:
        pd.DataFrame({"a": [1]}).to_csv(tmp)
        raise KeyboardInterrupt
    assert target.exists() == existed and _leftovers(tmp_path) == []


def test_a_successful_write_replaces_the_file_with_a_plain_mode(tmp_path):
    target = tmp_path / "sub" / "x.csv"
    atomic_write(target, lambda tmp: pd.DataFrame({"a": [1, 2]}).to_csv(tmp, index=False))
    atomic_write(target, lambda tmp: pd.DataFrame({"a": [3]}).to_csv(tmp, index=False))
    assert pd.read_csv(target)["a"].tolist() == [3]
    umask = os.umask(0)
    os.umask(umask)
    assert target.stat().st_mode & 0o777 == 0o666 & ~umask  # not mkstemp's 0600
    assert _leftovers(target.parent) == []


def test_sigkill_while_writing_a_large_csv_leaves_the_old_file(tmp_path):
    target = tmp_path / "metrics.csv"
    old = pd.DataFrame({"step": [1, 2], "loss": [0.5, 0.4]})
    old.to_csv(target, index=False)
    ready = tmp_path / "ready"
    child = textwrap.dedent(f"""
        import itertools, pandas as pd
        from pathlib import Path
        from dgro_lib.util.files import atomic_write
        chunk = pd.DataFrame({{"step": range(200_000), "loss": [0.123456789] * 200_000}})
        def writer(tmp):
            with open(tmp, "w") as fh:
                chunk.to_csv(fh, index=False)
                fh.flush()
                Path({str(ready)!r}).touch()   # half-way: the temp file holds part of the table
                for _ in itertools.count():    # ... and the writer keeps going until killed
                    chunk.to_csv(fh, index=False, header=False)
        atomic_write({str(target)!r}, writer)
    """)
    proc = subprocess.Popen([sys.executable, "-c", child], env={**os.environ, "OMP_NUM_THREADS": "1"})
    try:
        deadline = time.time() + 60
        while not ready.exists():
            assert proc.poll() is None, "the writer exited before it was killed"
            assert time.time() < deadline, "the writer never started"
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
        assert proc.wait(timeout=30) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    pd.testing.assert_frame_equal(pd.read_csv(target), old)  # the old file, whole
    # the killed writer's temp (hidden, never under the output's name) is all that may remain
    assert all(name.startswith(".metrics.csv.") for name in _leftovers(tmp_path))


def test_write_json_is_atomic_and_save_figure_writes_a_real_png(tmp_path):
    from dgro_lib.analysis.plots import save_figure

    write_json(tmp_path / "a.json", {"x": 1})
    assert json.loads((tmp_path / "a.json").read_text()) == {"x": 1}
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1])
    csv, png = save_figure(fig, pd.DataFrame({"x": [0, 1]}), tmp_path / "fig")
    plt.close(fig)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"  # format explicit although the temp name is not .png
    assert pd.read_csv(csv)["x"].tolist() == [0, 1]
    assert _leftovers(tmp_path) == []


def test_write_results_leaves_no_temp(tmp_path):
    from dgro_lib.evaluate.metrics import read_results, write_results

    table = pd.DataFrame({"acc": [0.5]}, index=pd.Index(["m"], name="model"))
    write_results(table, {"k": 1}, tmp_path / "res")
    back, protocol = read_results(tmp_path / "res")
    assert protocol == {"k": 1} and back["acc"].tolist() == [0.5]
    assert _leftovers(tmp_path) == []


def _fake_papermill(monkeypatch, fail: bool):
    def execute_notebook(src, out, **kw):  # src: the notebook read from its .py source
        assert not out.endswith(".ipynb") or ".tmp" in out  # never the final name
        Path(out).write_text('{"cells": ["first"]}')  # papermill writes the output as cells run
        if fail:
            raise RuntimeError("cell 2 failed")
        Path(out).write_text('{"cells": ["first", "second"]}')

    monkeypatch.setitem(sys.modules, "papermill", types.SimpleNamespace(execute_notebook=execute_notebook))


def test_run_notebook_renames_on_success_and_keeps_a_failed_notebook_aside(tmp_path, monkeypatch):
    from dgro_lib.cli.reproduce import list_notebooks, run_notebook

    name = list_notebooks()[0]
    out_dir = tmp_path / "cpu" / name
    _fake_papermill(monkeypatch, fail=False)
    executed = run_notebook(name, "cpu", output_root=tmp_path, progress=False)
    assert executed == out_dir / f"{name}.ipynb" and "second" in executed.read_text()

    _fake_papermill(monkeypatch, fail=True)
    with pytest.raises(RuntimeError, match="cell 2"):
        run_notebook(name, "cpu", output_root=tmp_path, progress=False)
    assert "second" in executed.read_text()  # the last good run is untouched
    assert (out_dir / f"{name}.failed.ipynb").read_text() == '{"cells": ["first"]}'
    assert _leftovers(out_dir) == []

    _fake_papermill(monkeypatch, fail=False)
    run_notebook(name, "cpu", output_root=tmp_path, progress=False)
    assert not (out_dir / f"{name}.failed.ipynb").exists()  # a later success supersedes the failure


# ---- every output write in dgro_lib goes through the helper -------------------------------------------------

# Writes that are not run outputs, or not written by us, each with the reason. Keyed by (file, call).
ALLOWED = {
    ("rl/trainer.py", "open"): "the rank log: one JSON line appended per step (an append is not a rewrite)",
    ("rl/vllm_server.py", "open"): "the vLLM server's log stream, appended while it runs",
    ("runs/launch.py", "write_text"): "config.yaml handed to `accelerate launch`, rewritten before every launch",
    ("rl/divergence.py", "open"): "a debugging dump beside the torch.save'd tensors, written when a run diverges",
    ("rl/divergence.py", "dump"): "the same debugging dump (json.dump onto that file)",
    ("miniature/build.py", "write_text"): "inside a temporary model folder that is renamed into place whole",
    ("runs/experiment.py", "open"): "experiment.log: one line appended per finished run (an append is not a rewrite)",
    ("cli/site.py", "write_text"): "the site's MkDocs sources in build/site-src/, a folder deleted and written whole at "
                                   "every build (the site is built from it after)",
}
WRITERS = {"to_csv", "savefig", "write_text", "write_bytes", "to_json", "to_parquet", "dump", "open"}
TEMP_NAMES = {"tmp", "fh"}  # the helper's temp path, and a file opened on it


def _mode(call: ast.Call, position: int) -> str:
    args = [*call.args[position:position + 1], *(k.value for k in call.keywords if k.arg == "mode")]
    return args[0].value if args and isinstance(args[0], ast.Constant) else "r"


def _unsafe_writes(path: Path) -> list[tuple[str, int]]:
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
        if name not in WRITERS:
            continue
        if name == "open":  # open(p, "w") or p.open("w")
            receiver = node.args[0] if isinstance(func, ast.Name) and node.args else getattr(func, "value", None)
            mode = _mode(node, 1 if isinstance(func, ast.Name) else 0)
            if not any(c in mode for c in "wax+"):
                continue
            target = receiver
        elif name in ("write_text", "write_bytes"):
            target = func.value
        elif name == "dump":  # json.dump(obj, fh)
            target = node.args[1] if len(node.args) > 1 else None
        else:  # df.to_csv(target) / fig.savefig(target)
            target = node.args[0] if node.args else None
        if isinstance(target, ast.Name) and target.id in TEMP_NAMES:
            continue
        out.append((name, node.lineno))
    return out


def test_every_output_write_in_the_package_goes_through_the_helper():
    unsafe, used = [], set()
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG).as_posix()
        for name, line in _unsafe_writes(path):
            if (rel, name) in ALLOWED:
                used.add((rel, name))
            else:
                unsafe.append(f"{rel}:{line} {name}(...) writes without dgro_lib.util.files.atomic_path/atomic_write")
    assert unsafe == []
    assert used == set(ALLOWED), f"stale allow-list entries: {set(ALLOWED) - used}"


def test_the_ast_check_catches_a_bare_write(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("def f(df, fig, p):\n    df.to_csv(p)\n    fig.savefig(p)\n    p.write_text('x')\n"
                   "    open(p, 'w')\n    open(p)\n    with atomic_path(p) as tmp:\n        df.to_csv(tmp)\n")
    assert [n for n, _ in _unsafe_writes(bad)] == ["to_csv", "savefig", "write_text", "open"]


# ---- manifests ---------------------------------------------------------------------------------------------


def test_a_manifest_records_commit_versions_seed_config_machine_and_wall_time(tmp_path):
    path = tmp_path / "manifest.json"
    write_manifest(path, config={"train": {"lr": 1e-6}}, seed=7, extra={"sweep_point": {"scheme": "a"}})
    m = finish_manifest(path, train_seconds=1.5)
    assert m == json.loads(path.read_text())
    assert set(m["git"]) == {"commit", "dirty"}
    assert m["git"]["commit"] is None or len(m["git"]["commit"]) == 40
    assert {"torch", "transformers", "trl", "pandas"} <= set(m["packages"])
    assert m["seed"] == 7 and m["config"] == {"train": {"lr": 1e-6}} and m["sweep_point"] == {"scheme": "a"}
    assert {"hostname", "platform", "cpu_model", "cpu_count", "torch_threads", "cuda", "gpus"} <= set(m["machine"])
    assert isinstance(m["machine"]["torch_threads"], int) and m["machine"]["cpu_model"]
    wall = m["wall_time"]
    assert wall["started"] and wall["finished"] and wall["wall_seconds"] >= 0
    assert m["train_seconds"] == 1.5


def test_atomic_dir_replaces_a_folder_whole_or_not_at_all(tmp_path):
    from dgro_lib.util.files import atomic_dir

    dest = tmp_path / "run"
    dest.mkdir()
    (dest / "old.txt").write_text("old")
    with pytest.raises(RuntimeError):
        with atomic_dir(dest) as tmp:
            (tmp / "new.txt").write_text("new")
            raise RuntimeError("killed while writing")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]  # no temporary folder left
    assert sorted(p.name for p in dest.iterdir()) == ["old.txt"]
    with atomic_dir(dest) as tmp:
        (tmp / "new.txt").write_text("new")
    assert sorted(p.name for p in dest.iterdir()) == ["new.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]
