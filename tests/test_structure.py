"""The package's shape: the tree in docs/architecture.md names every module, no module is over 700 lines, and the
imports between dgro_lib's top-level units (a module, or a package taken whole) form no cycle."""

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parent.parent / "dgro_lib"
DOC = PKG.parent / "docs" / "architecture.md"
MODULES = sorted(p for p in PKG.rglob("*.py") if p.name != "__init__.py")


def _unit(module: str) -> str:
    """dgro_lib.losses.dcpo -> losses (a package is one unit); dgro_lib.config -> config."""
    return module.split(".")[1]


def _imports(path: Path) -> set[str]:
    """Top-level dgro_lib units this file imports (module level or inside functions; not annotation-only imports)."""
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    here = parts[:-1]  # the package this file is in
    out = set()
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):  # imports under `if TYPE_CHECKING:` never run (annotations only): not an edge
        if isinstance(node, ast.If) and getattr(node.test, "id", getattr(node.test, "attr", None)) == "TYPE_CHECKING":
            node.body = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[: len(here) - node.level + 1]
                name = ".".join(base + ([node.module] if node.module else []))
                names = [name] if node.module else [f"{name}.{a.name}" for a in node.names]
            else:
                names = [node.module or ""]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        out |= {_unit(n) for n in names if n.startswith("dgro_lib.") and n.count(".") >= 1}
    return out


def _assert_acyclic(graph: dict[str, set[str]]) -> None:
    """Depth-first search; the first cycle found fails with its path."""
    state: dict[str, int] = {}

    def visit(u, stack):
        if state.get(u) == 1:
            raise AssertionError(f"import cycle: {' -> '.join(stack[stack.index(u):] + [u])}")
        if state.get(u) == 2:
            return
        state[u] = 1
        for v in sorted(graph.get(u, ())):
            visit(v, stack + [u])
        state[u] = 2

    for u in sorted(graph):
        visit(u, [])


def test_every_module_is_in_the_architecture_page():
    text = DOC.read_text()
    missing = [str(p.relative_to(PKG)) for p in MODULES if p.stem not in text]
    assert not missing, f"docs/architecture.md does not name {missing}"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PKG)))
def test_no_module_is_over_700_lines(path):
    assert len(path.read_text().splitlines()) <= 700


def test_top_level_units_import_without_cycles():
    graph: dict[str, set[str]] = {}
    for p in PKG.rglob("*.py"):
        rel = p.relative_to(PKG)
        unit = rel.parts[0].removesuffix(".py")
        if unit == "__init__":
            continue
        graph.setdefault(unit, set()).update(u for u in _imports(p) if u != unit)
    assert "losses" in graph["config"] and "config" in graph["experiment"], graph  # the parser sees imports at all
    _assert_acyclic(graph)
    # the sweep is the top: nothing imports it but split_half, an entry point above it (as the notebooks are)
    assert not any("experiment" in deps for unit, deps in graph.items() if unit != "split_half")


def _module_imports(path: Path) -> set[str]:
    """Full dgro_lib module names this file imports, at module level or inside functions (call-time imports are
    arrows of the design too); `if TYPE_CHECKING:` blocks left out. ``from pkg import name`` counts pkg.name when
    that is a module, else pkg."""
    rel = path.relative_to(PKG.parent).with_suffix("")
    here = list(rel.parts[:-1])  # the package this file is in
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", getattr(node.test, "attr", None)) == "TYPE_CHECKING":
            node.body = []
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = ".".join(here[: len(here) - node.level + 1] + ([node.module] if node.module else [])) \
                if node.level else (node.module or "")
            for a in node.names:
                sub = f"{base}.{a.name}"
                out.add(sub if (PKG.parent / Path(*sub.split("."))).with_suffix(".py").is_file() else base)
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
    return {m for m in out if m.startswith("dgro_lib.")}


def test_the_data_package_has_no_import_cycle_between_its_modules():
    """Inside data/ (K&K and math records, prompts, the miniature's trace), call-time imports included: trace renders
    from kk_logic / kk_render, and kk imports trace (the formal template), never the other way round."""
    files = {f"dgro_lib.data.{p.stem}": p for p in (PKG / "data").glob("*.py") if p.name != "__init__.py"}
    graph = {m: {d for d in _module_imports(p) if d in files and d != m} for m, p in files.items()}
    assert "dgro_lib.data.trace" in graph["dgro_lib.data.kk"]  # the parser sees the arrow at all
    _assert_acyclic(graph)
