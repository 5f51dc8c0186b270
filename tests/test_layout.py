"""The house stays walkable: no import cycle between the orchestrator's modules (counting
lazy and TYPE_CHECKING imports too), no module over the size a reader takes in, and the
worker package and the `matrix_bench` client import nothing of the driver's (they are the
code every stack image carries)."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import PROJECT

MAX_MODULE_LINES = 400
WORKER_MAY_IMPORT = ("orchestrator.worker", "orchestrator.errors")


def modules() -> dict[str, Path]:
    found = {}
    for path in sorted([*(PROJECT / "orchestrator").rglob("*.py"),
                        *(PROJECT / "matrix_bench").rglob("*.py")]):
        parts = path.relative_to(PROJECT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def imports_of(path: Path, known: dict[str, Path]) -> set[str]:
    """The orchestrator modules `path` imports, wherever the import statement stands."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        found |= {name for name in names if name in known}
    return found


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_cycle_finder_finds_a_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]


def test_no_import_cycle_between_the_orchestrators_modules():
    known = modules()
    graph = {name: imports_of(path, known) - {name} for name, path in known.items()}
    assert cycles(graph) == []


def test_no_module_is_longer_than_a_reader_takes_in():
    long = {name: n for name, path in modules().items()
            if (n := len(path.read_text().splitlines())) > MAX_MODULE_LINES}
    assert long == {}


def test_the_worker_package_imports_nothing_of_the_drivers():
    known = modules()
    for name, path in known.items():
        if name.startswith(("orchestrator.worker", "matrix_bench")):
            foreign = {m for m in imports_of(path, known)
                       if not m.startswith((*WORKER_MAY_IMPORT, "matrix_bench"))
                       and m != "orchestrator"}
            assert foreign == set(), name


def test_every_module_is_named_in_the_architectures_map():
    """docs/ARCHITECTURE.md's module map is how a newcomer finds where an idea lives: a
    module it does not name is one nobody finds (issue 47, item 5)."""
    layout = (PROJECT / "docs" / "ARCHITECTURE.md").read_text().split("```")[1]
    unnamed = [str(path.relative_to(PROJECT)) for path in sorted(
        (PROJECT / "orchestrator").rglob("*.py"))
        if path.name != "__init__.py" and path.name not in layout]
    assert unnamed == []
