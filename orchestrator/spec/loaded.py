"""A matrix as `load_spec` returns it: the validated MatrixSpec with the workloads it
declares (workload_scope.Workloads) and what is derived from it once (its expansion).

The loaded matrix carries these rather than the process keeping them, so two matrices
loaded in one process stay apart: each resolves its own `path:` and `command:` workloads,
and each expands once however often load, validate and plan ask for its cells.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Self, TypeVar, cast

from pydantic import PrivateAttr

from orchestrator.spec.model import MatrixSpec
from orchestrator.workload_scope import Workloads

T = TypeVar("T")


class LoadedMatrix(MatrixSpec):
    """A MatrixSpec with its own workloads; any other field is MatrixSpec's."""

    _workloads: Workloads = PrivateAttr(default_factory=Workloads)
    _memo: dict[str, Any] = PrivateAttr(default_factory=dict)  # remembered(), by key

    def model_copy(self, *, update: Mapping[str, Any] | None = None,
                   deep: bool = False) -> Self:
        """A copy with the same workloads; it derives afresh, as `update` may change any
        field its expansion depends on."""
        copied = super().model_copy(update=update, deep=deep)
        copied._memo = {}
        return copied


def loaded(spec: MatrixSpec, workloads: Workloads) -> LoadedMatrix:
    """`spec` (validated already) carrying `workloads`."""
    matrix = LoadedMatrix.model_construct(_fields_set=spec.model_fields_set, **dict(spec))
    matrix._workloads = workloads
    return matrix


def workloads_of(spec: MatrixSpec) -> Workloads:
    """The workloads `spec` can name: a loaded matrix's own over the shared ones; the shared
    ones (built-ins, installed packages) alone for a spec that `load_spec` did not make."""
    return spec._workloads if isinstance(spec, LoadedMatrix) else Workloads()


def remembered(spec: MatrixSpec, key: str, make: Callable[[], T]) -> T:
    """`make()` once per loaded matrix (under `key`), every time for another spec: the
    matrix is frozen, so what is derived from it alone stays true."""
    if not isinstance(spec, LoadedMatrix):
        return make()
    if key not in spec._memo:
        spec._memo[key] = make()
    return cast(T, spec._memo[key])
