"""The house stays walkable: no import cycle between the orchestrator's modules (counting
lazy and TYPE_CHECKING imports too), no folder importing one above it in the cell's order
(LAYERS), no module over the size a reader takes in, and the worker package and the
`matrix_bench` client import nothing of the driver's (they are the code every stack image
carries)."""

from __future__ import annotations

import ast
import itertools
import re
from pathlib import Path

from tests.conftest import PROJECT

MAX_MODULE_LINES = 400
WORKER_MAY_IMPORT = ("orchestrator.worker", "orchestrator.errors")

# orchestrator/'s folders and top-level modules, lowest first, in the order of a cell's path
# (docs/ARCHITECTURE.md: the cell's path through the folders): each may import, at run time
# (lazily too, or under TYPE_CHECKING to name a type), only what stands before it, so no
# loop between folders can come back and no arrow runs back up. The registries sit low so
# the plan, the images and the run ask them without importing an executor or a provider;
# the types their interfaces name (registry/cell_run.py) sit with them.
LAYERS = (
    "errors", "worker", "redact", "failpoints", "plugins", "code_identity", "flop_claims",
    "hardware", "workload_packages", "results", "workload_registry", "workload_scope",
    "workload_declarations", "spec", "registry", "plan", "images", "validate", "executors",
    "report", "database", "run", "providers", "dashboard", "scaffold", "cli",
)


def modules() -> dict[str, Path]:
    found = {}
    for path in sorted([*(PROJECT / "orchestrator").rglob("*.py"),
                        *(PROJECT / "matrix_bench").rglob("*.py")]):
        parts = path.relative_to(PROJECT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def imports_of(path: Path, known: dict[str, Path]) -> set[str]:
    """The orchestrator modules `path` imports, wherever the import statement stands (under
    `if TYPE_CHECKING:` too)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        found |= {name for name in names if name in known}
    return found


def layer_of(module: str) -> str | None:
    """The folder or top-level module of orchestrator/ that `module` belongs to (None for
    the package itself and for matrix_bench)."""
    parts = module.split(".")
    return parts[1] if parts[0] == "orchestrator" and len(parts) > 1 else None


def upward_imports(graph: dict[str, set[str]], layers: tuple[str, ...]) -> list[str]:
    """'importer -> imported' for each import of a layer that stands above the importer's."""
    rank = {layer: index for index, layer in enumerate(layers)}
    return sorted(f"{source} -> {target}" for source, targets in graph.items()
                  for target in targets
                  if (a := layer_of(source)) and (b := layer_of(target)) and a != b
                  and rank[b] > rank[a])


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


def test_the_layer_rule_finds_an_upward_import():
    graph = {"orchestrator.plan.cells": {"orchestrator.spec.model"},
             "orchestrator.spec.load": {"orchestrator.plan.cells"}}
    assert upward_imports(graph, ("spec", "plan")) == [
        "orchestrator.spec.load -> orchestrator.plan.cells"]


def test_no_folder_imports_one_above_it_in_the_cells_order():
    known = modules()
    layers = {layer for name in known if (layer := layer_of(name))}
    assert layers - set(LAYERS) == set(), "place each new folder or module in LAYERS"
    graph = {name: imports_of(path, known) for name, path in known.items()}
    assert upward_imports(graph, LAYERS) == []


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


# a file the docs name in backquotes, and a name in it after `::`
DOC_PATH = re.compile(r"`((?:orchestrator|workloads|bench|scripts|tests|matrix_bench)/"
                      r"[A-Za-z0-9_/.-]+\.(?:py|sh))(?:::([A-Za-z_][A-Za-z0-9_]*))?")


def defined_names(path: Path) -> set[str]:
    """The functions, classes and module-level names a Python file defines."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = {node.name for node in ast.walk(tree)
             if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)}
    for node in ast.walk(tree):
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, ast.AnnAssign) else []
        names |= {t.id for t in targets if isinstance(t, ast.Name)}
    return names


def test_every_file_and_name_the_docs_point_to_exists():
    """The docs once placed add_cost_columns in run/costs.py and the waves in sweep.py's
    _Waves after both had moved; a path, and a name after `::`, must be where they say."""
    docs = [*sorted((PROJECT / "docs").glob("*.md")), PROJECT / "README.md",
            PROJECT / "CONTRIBUTING.md"]
    missing = []
    for doc in docs:
        for path, name in DOC_PATH.findall(doc.read_text(encoding="utf-8")):
            target = PROJECT / path
            if not target.is_file():
                missing.append(f"{doc.name}: {path}")
            elif name and target.suffix == ".py" and name not in defined_names(target):
                missing.append(f"{doc.name}: {path}::{name}")
    assert missing == []


SHARED_FIELDS_LIMIT = 9  # two models sharing this many fields are one written twice


def own_fields() -> dict[str, set[str]]:
    """Each class of orchestrator/ with fields of its own (annotated names in its body, not
    ClassVars), by `path:Class`: what it declares itself, not what it inherits."""
    found = {}
    for path in sorted((PROJECT / "orchestrator").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                names = {statement.target.id for statement in node.body
                         if isinstance(statement, ast.AnnAssign)
                         and isinstance(statement.target, ast.Name)
                         and "ClassVar" not in ast.unparse(statement.annotation)}
                if names:
                    found[f"{path.relative_to(PROJECT)}:{node.name}"] = names
    return found


def test_no_model_is_declared_twice():
    """The driver's models of what crosses the worker's boundary (the cell, its
    measurements and provenance) take the worker's fields by inheritance, and a history
    regression is a comparison: no two classes declare the same fields side by side, to be
    kept in step by hand (issue 57, item 4)."""
    fields = own_fields()
    twice = [f"{a} and {b}: {sorted(fields[a] & fields[b])}"
             for a, b in itertools.combinations(sorted(fields), 2)
             if len(fields[a] & fields[b]) >= SHARED_FIELDS_LIMIT]
    assert twice == []
