"""Executors and providers from installed distributions, found by entry point wherever the
registries are read: the process that plans, a Ray worker, a Slurm task, an EC2 head driver.
A registration in the user's own code reaches only the process that made it; an entry point
reaches every process whose Python has the distribution installed (docs/ARCHITECTURE.md:
plugins).

    [project.entry-points."matrix_bench.executors"]
    niced = "acme_plugins.niced:KIND"        # an orchestrator.executors.ExecutorKind
    [project.entry-points."matrix_bench.providers"]
    pool = "acme_plugins.pool:KIND"          # an orchestrator.providers.ProviderKind

The value is the registration itself (or a callable returning it), imported when the
registry is first read; the implementation it names is imported only when a cell needs it.
A plugin that cannot be loaded is a warning naming it, never a failure of the rest.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import TypeVar

from orchestrator.errors import MatrixWarning, first_line

EXECUTORS = "matrix_bench.executors"
PROVIDERS = "matrix_bench.providers"

Kind = TypeVar("Kind")


def load_plugins(group: str, kind: type[Kind], taken: Callable[[], list[str]],
                 register: Callable[[Kind], None]) -> list[str]:
    """Register every entry point of `group` whose object is a `kind` (or makes one), under
    a name not `taken` yet (a built-in's stays the built-in's); the names registered. The
    first distribution wins a name two provide."""
    from importlib.metadata import distributions

    seen: set[str] = set()
    registered = []
    for dist in distributions():
        for entry in dist.entry_points:
            if entry.group != group or entry.name in seen:
                continue
            seen.add(entry.name)
            where = (f"the {group} entry point {entry.name} = {entry.value!r} of "
                     f"{dist.metadata['Name']}=={dist.version}")
            try:
                found = entry.load()
                made = found if isinstance(found, kind) or not callable(found) else found()
            except (Exception, SystemExit) as exc:  # its own bug, a missing dependency,
                # or its sys.exit() at import: the plugin's failure, not the command's
                warnings.warn(f"{where} cannot be loaded: {type(exc).__name__}: "
                              f"{first_line(exc)}", MatrixWarning, stacklevel=2)
                continue
            if not isinstance(made, kind):
                warnings.warn(f"{where} is not a {kind.__name__}", MatrixWarning, stacklevel=2)
            elif getattr(made, "name", None) in taken():
                warnings.warn(f"{where} registers {getattr(made, 'name', '')!r}, a name already "
                              "taken: left out", MatrixWarning, stacklevel=2)
            else:
                register(made)
                registered.append(entry.name)
    return sorted(registered)
