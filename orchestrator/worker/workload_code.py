"""Importing a workload's code, wherever it lives: a built-in under `workloads/<name>/`, an
installed distribution's package (its module path), or a user's folder (`path:` in the
matrix), which becomes the package `matrix_bench_workloads.<name>_<folder digest>` so that
its modules may import each other, relatively or by their plain names, and two folders of
one name (two runs reported together) are two packages. Stdlib only: the worker imports
this for every cell."""

from __future__ import annotations

import hashlib
import importlib
import sys
import types
from types import ModuleType

USER_PACKAGE = "matrix_bench_workloads"


def workload_package(name: str, folder: str | None, module: str | None = None) -> str:
    """The importable name of workload `name`'s package: `module` for an installed
    package's workload, else made on first use for a folder, else the built-in's."""
    if module is not None:
        return module
    if folder is None:
        return f"workloads.{name}"
    digest = hashlib.sha256(folder.encode()).hexdigest()[:12]
    package = f"{USER_PACKAGE}.{name}_{digest}"
    if package not in sys.modules:
        if USER_PACKAGE not in sys.modules:
            sys.modules[USER_PACKAGE] = _namespace(USER_PACKAGE, [])
        sys.modules[package] = _namespace(package, [folder])
        if folder not in sys.path:  # `import model` beside workload.py works too
            sys.path.insert(0, folder)
    return package


def workload_module(package: str, part: str) -> ModuleType:
    """The module `part` (workload, flops, views, datasets) of a workload's `package`
    (`workload_package`); ModuleNotFoundError where it has none."""
    return importlib.import_module(f"{package}.{part}")


def optional_module(name: str) -> ModuleType | None:
    """The module `name`, or None where there is none (a workload's optional flops.py,
    checks.py, views.py); one that exists but needs something missing raises."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name != name:
            raise
        return None


def _namespace(name: str, path: list[str]) -> ModuleType:
    module = types.ModuleType(name)
    module.__path__ = path
    return module
