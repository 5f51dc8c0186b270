"""The CPU threads a cell computed with: the math libraries' settings it started with, and
the count its framework reports.

A CPU cell's time depends on its threads as much as on its cores: torch, oneDNN and the
BLAS libraries start one thread per core unless `OMP_NUM_THREADS` (or `MKL_*`,
`OPENBLAS_*` ...) says otherwise. So these settings are provenance: two rows timed on
different threads are not the same measurement, and `history regressions` names the change.
Stdlib only (torch is read only where the workload imported it).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping

# The variables that set how many threads the math libraries compute with
THREAD_PREFIXES = ("OMP_", "KMP_", "MKL_", "OPENBLAS_", "GOTO_", "BLIS_", "NUMEXPR_")


def thread_variables(source: Mapping[str, str]) -> dict[str, str]:
    """The variables of `source` that set the math libraries' threads."""
    return {name: value for name, value in sorted(source.items())
            if name.startswith(THREAD_PREFIXES)}


def framework_threads() -> int | None:
    """The intra-op threads torch computes with, where the workload imported torch; None
    for a framework that does not say (TensorFlow reports 0 for its default, JAX nothing)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    try:
        return int(torch.get_num_threads())
    except Exception:  # provenance is best effort, never a failure
        return None

