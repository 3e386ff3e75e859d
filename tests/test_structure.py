"""The package's shape: packages in floors, each importing only from floors below it; no import cycle between any
two modules (call-time and ``TYPE_CHECKING`` imports included); ``report/`` free of torch; no module over 700 lines;
the tree in docs/architecture.md names every module."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parent.parent / "dgro_lib"
DOC = PKG.parent / "docs" / "architecture.md"
FILES = sorted(PKG.rglob("*.py"))
MODULES = [p for p in FILES if p.name != "__init__.py"]

# Lowest first. A package (or top-level module) imports only from its own package and from lower floors; the
# packages on one floor import nothing of each other. docs/architecture.md draws the same list.
FLOORS = [
    ["util"],
    ["losses", "rewards", "report"],
    ["data"],
    ["models"],
    ["config", "rl"],
    ["tasks"],
    ["evaluate"],
    ["miniature"],
    ["runs"],
    ["analysis"],
    ["papers"],
    ["cli"],
]
LEVEL = {unit: i for i, floor in enumerate(FLOORS) for unit in floor}
TORCH = ("torch", "transformers", "trl", "accelerate", "peft", "vllm", "deepspeed", "safetensors")


def module_name(path: Path) -> str:
    """dgro_lib/data/kk/__init__.py -> dgro_lib.data.kk; dgro_lib/tasks.py -> dgro_lib.tasks."""
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(name: str) -> bool:
    p = PKG.parent / Path(*name.split("."))
    return p.with_suffix(".py").is_file() or (p / "__init__.py").is_file()


def imports(path: Path) -> tuple[set[str], set[str]]:
    """(dgro_lib modules, other top-level distributions) this file imports: at module level, inside functions and
    under ``if TYPE_CHECKING:`` alike, since each is an arrow of the design. ``from pkg import name`` counts
    ``pkg.name`` when that is a module, else ``pkg`` (its face, ``__init__``)."""
    here = module_name(path).split(".")
    package = here if path.name == "__init__.py" else here[:-1]
    ours, theirs = set(), set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else [])) \
                if node.level else (node.module or "")
            for a in node.names:
                sub = f"{base}.{a.name}"
                ours.add(sub if _is_module(sub) else base)
        elif isinstance(node, ast.Import):
            ours |= {a.name for a in node.names}
    theirs = {m.split(".")[0] for m in ours if not m.startswith("dgro_lib")}
    return {m for m in ours if m == "dgro_lib" or m.startswith("dgro_lib.")}, theirs


GRAPH = {module_name(p): imports(p)[0] - {module_name(p)} for p in FILES}


def unit(module: str) -> str:
    """dgro_lib.losses.dcpo -> losses; dgro_lib.tasks -> tasks; dgro_lib -> '' (the root)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """The first cycle a depth-first search meets, as a path, or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(u):
        state[u] = 1
        stack.append(u)
        for v in sorted(graph.get(u, ())):
            if state.get(v) == 1:
                return stack[stack.index(v):] + [v]
            if state.get(v) is None and (found := visit(v)):
                return found
        stack.pop()
        state[u] = 2
        return None

    for u in sorted(graph):
        if state.get(u) is None and (found := visit(u)):
            return found
    return None


def floor_violations(graph: dict[str, set[str]]) -> list[str]:
    """Every arrow from one package to another on its own floor or above it. The root (``dgro_lib/__init__``: the
    version and the portable-numerics switch) imports util only, and any package may read it."""
    bad = []
    for src, deps in graph.items():
        for dst in deps:
            a, b = unit(src), unit(dst)
            if a == b:
                continue
            if (a == "" and b == "util") or b == "":
                continue
            if a == "" or LEVEL[b] >= LEVEL[a]:
                bad.append(f"{src} -> {dst} (floor {LEVEL.get(a, '?')} -> {LEVEL.get(b, '?')})")
    return sorted(bad)


def test_every_package_has_a_floor():
    units = {unit(m) for m in GRAPH} - {""}
    assert units == set(LEVEL), (units - set(LEVEL), set(LEVEL) - units)


def test_no_import_cycle_between_modules():
    assert "dgro_lib.data.kk.trace" in GRAPH["dgro_lib.data.kk"]  # the parser sees call-time arrows at all
    assert "dgro_lib.config.schema" in GRAPH["dgro_lib.config.checks"]  # and TYPE_CHECKING ones
    cycle = find_cycle(GRAPH)
    assert cycle is None, f"import cycle: {' -> '.join(cycle)}"


def test_imports_follow_the_floors():
    bad = floor_violations(GRAPH)
    assert not bad, "imports against the floor order:\n" + "\n".join(bad)


def test_the_checks_catch_a_cycle_and_an_arrow_upward():
    """The two graph checks above on graphs made to fail: a cycle inside one package, and a low floor reaching up."""
    assert find_cycle({"dgro_lib.data.a": {"dgro_lib.data.b"}, "dgro_lib.data.b": {"dgro_lib.data.a"}}) == [
        "dgro_lib.data.a", "dgro_lib.data.b", "dgro_lib.data.a"]
    assert find_cycle({"dgro_lib.data.a": {"dgro_lib.data.b"}, "dgro_lib.data.b": set()}) is None
    assert floor_violations({"dgro_lib.models.x": {"dgro_lib.runs.y"}}) == [
        "dgro_lib.models.x -> dgro_lib.runs.y (floor 3 -> 8)"]
    assert floor_violations({"dgro_lib.config.x": {"dgro_lib.rl.y"}})  # one floor: no arrow either way


def test_the_sweep_is_imported_by_commands_only():
    """runs.experiment (a whole notebook's sweep) is the top of the run floor: below the commands and the
    notebooks, nothing imports it."""
    users = {m for m, deps in GRAPH.items() if "dgro_lib.runs.experiment" in deps}
    assert users and all(unit(m) == "cli" for m in users), users


def test_report_imports_no_torch():
    """The verdict machinery reads CSVs: it imports neither torch nor any package built on it, directly or
    through the modules it imports, and importing it loads no torch."""
    seen, todo = set(), [m for m in GRAPH if unit(m) == "report"]
    while todo:
        m = todo.pop()
        if m not in seen:
            seen.add(m)
            todo += GRAPH.get(m, ())
    paths = {module_name(p): p for p in FILES}
    heavy = {m: sorted(set(imports(paths[m])[1]) & set(TORCH)) for m in seen}
    assert not any(heavy.values()), heavy
    code = ("import sys, dgro_lib.report.claims, dgro_lib.report.verdict, dgro_lib.report.inference; "
            f"print(sorted(set(sys.modules) & {set(TORCH)!r}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]", out


def tree_paths(text: str) -> set[str]:
    """The module paths the page's ``dgro_lib/`` tree names: each ``├── name`` entry at its depth, and the ``x.py``
    files a folder's line (and the lines continuing it) lists inline."""
    import re

    block = text[text.index("```\ndgro_lib/"):]
    block = block[: block.index("```", 4)]
    dirs: list[str] = []  # the folder at each depth
    context: list[str] = []  # the folder the inline names of the current line belong to
    out = set()
    for line in block.splitlines()[2:]:
        entry = re.search(r"[├└]── (\S+)", line)
        names = re.findall(r"\b([\w]+\.py)\b", line)
        if entry:
            depth = entry.start() // 4
            name = entry.group(1).rstrip(",")
            dirs = dirs[:depth]
            if name.endswith("/"):
                dirs.append(name.rstrip("/"))
                context = dirs[:]
            else:
                context = dirs[:]
        out |= {"/".join(context + [n]) for n in names}
    return out


def test_every_module_is_in_the_architecture_page():
    named = tree_paths(DOC.read_text())
    missing = [str(p.relative_to(PKG)) for p in MODULES if str(p.relative_to(PKG)) not in named]
    assert not missing, f"docs/architecture.md's tree does not name {missing}"
    stale = sorted(n for n in named if not (PKG / n).is_file())
    assert not stale, f"docs/architecture.md's tree names modules that do not exist: {stale}"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PKG)))
def test_no_module_is_over_700_lines(path):
    assert len(path.read_text().splitlines()) <= 700


def test_loading_a_config_and_the_presets_loads_no_transformers():
    """The models face is lazy: the config's checks read the embedded presets (plain data) without importing
    transformers' model classes, so loading a params file stays light (torch comes in with the losses)."""
    code = ("import sys; from dgro_lib.config import find_params, load_config; import dgro_lib.models.presets; "
            "load_config(find_params('dgro_fig1_reward_variance', 'cpu')); "
            "print(sorted(set(sys.modules) & {'transformers', 'trl', 'accelerate', 'peft', 'vllm'}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=PKG.parent).stdout.strip()
    assert out == "[]", out


def test_the_losses_package_exports_exactly_what_it_imports_and_lists_it_sorted():
    """``dgro_lib.losses.__all__`` is the package's public surface: every public name the package imports (each
    registered loss among them, ``j1_loss`` and ``j3_loss`` included), nothing else, in sorted order."""
    import inspect

    import dgro_lib.losses as losses
    from dgro_lib.losses.registry import list_losses, loss_entry

    public = {n for n, v in vars(losses).items() if not n.startswith("_") and not inspect.ismodule(v)
              and n != "annotations"}
    assert set(losses.__all__) == public, (sorted(public - set(losses.__all__)), sorted(set(losses.__all__) - public))
    assert losses.__all__ == sorted(losses.__all__)
    # every registered loss is a function the package exports under its own name
    exported = {getattr(losses, n) for n in losses.__all__}
    missing = [name for name in list_losses() if loss_entry(name).fn not in exported]
    assert not missing, f"registered losses whose function the package does not export: {missing}"
