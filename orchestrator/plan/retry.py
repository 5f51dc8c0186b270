"""Which cells a resumed sweep runs again, from how each ended (records.py: `Status`).

A cell that ended `ok` is kept. One whose status is an outcome of its configuration (the
same inputs end the same way: `unsupported`, `oom`, `stack_mismatch`, `image_failed`,
`failed`, `invalid_output`) is kept too, while the inputs that shaped that end are the
same, or until the user names its status with `--retry`. A failure of the run (`crashed`,
`timeout`, `executor_unavailable`, `node_lost`, `budget_stopped`, `queue_timeout`,
`data_unavailable`) is run again. The workload's code is in the cell's id already (its
version carries a hash of it), so a changed workload is a new cell; the rest of the inputs
is the cell's `inputs` fingerprint, recorded with its end: its timeout, its memory limit
and the stack's lock file, where it has one (what its image installs).
"""

from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path

from orchestrator.errors import MatrixError
from orchestrator.results.records import CellRecord, Status
from orchestrator.spec.model import Stack


class RetryError(MatrixError):
    """A --retry that names no status."""


def parse_retry(texts: list[str] | None) -> frozenset[Status]:
    """`--retry unsupported,oom` (repeatable) as statuses; one line for a name that is none."""
    names = [name.strip() for text in texts or [] for name in text.split(",") if name.strip()]
    known = {status.value: status for status in Status}
    unknown = [name for name in names if name not in known]
    if unknown:
        outcomes = ", ".join(s.value for s in Status if s.is_outcome() and s is not Status.OK)
        raise RetryError(f"--retry {unknown[0]!r}: not a status; the statuses kept until "
                         f"their inputs change are {outcomes} (crashed, timeout and the other "
                         "failures of the run run again anyway)")
    return frozenset(known[name] for name in names)


def outcome_inputs(stack: Stack, timeout_s: float, memory_limit_mb: int | None,
                   locks: str | None) -> str:
    """The fingerprint of what shapes a cell's end besides its id. The lock is the stack's
    file in the locks folder where there is one: an image stack's (one without its lock
    fails to build); a process stack has none."""
    path = None if locks is None else Path(locks) / f"{stack.name}.txt"
    lock = None
    if path is not None and path.is_file():
        stat = path.stat()
        lock = _digest(str(path), stat.st_mtime_ns, stat.st_size)
    content = {"timeout_s": timeout_s, "memory_limit_mb": memory_limit_mb, "lock": lock}
    return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()[:16]


@functools.lru_cache(maxsize=256)
def _digest(path: str, mtime_ns: int, size: int) -> str:
    """A lock file's hash, read once per version of it (a grid reads it for every cell)."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def kept_reason(inputs: str | None, ended: CellRecord | None,
                retry: frozenset[Status]) -> str | None:
    """Why a resumed sweep keeps a cell whose final attempt is `ended` (None: it runs)."""
    if ended is None:
        return None
    if ended.status is Status.OK:
        return "already done (ok in the journal; --rerun to redo)"
    if not ended.status.is_outcome() or ended.status in retry:
        return None
    if ended.inputs is None or ended.inputs != inputs:
        return None  # recorded before inputs were, or its timeout, memory or lock changed
    return (f"ended {ended.status.value} with the same inputs (its configuration's outcome; "
            f"--retry {ended.status.value} to run it again)")
