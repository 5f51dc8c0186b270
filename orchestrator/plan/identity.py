"""A cell's identity (docs/ARCHITECTURE.md: cell identity): what `config_id` and `cell_id` hash.

`config_id` hashes everything that gives a result its meaning except the repeat index: the
hardware and stack entries, the workload and its version, its resolved parameters and the
epochs. `cell_id` hashes the config_id and the repeat. Resume skips the cells whose id has
an `ok` result and `matrix compare` matches configurations by id, so an id must never move
unless the meaning moves:

- The fields the hardware and stack models hashed when identities were pinned (PINNED)
  stay hashed in full, defaults included. A field added since enters the hash only when set
  to something other than its default, so adding one moves no id.
- Settings that do not change what a cell measures (NOT_IDENTITY: prices, say) never enter.
- A workload parameter enters in full, unless its declaration says `in_identity:
  when_not_default` (a parameter added to a workload that already has results).

tests/test_identity.py pins the ids of the example matrices and of test matrices covering
every field.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from pydantic import BaseModel

from orchestrator.spec.model import Hardware, Stack
from orchestrator.workload_registry import Scalar, load_workload

ID_LENGTH = 16

PINNED: dict[type[BaseModel], frozenset[str]] = {
    Hardware: frozenset({"name", "kind", "instance_type", "gpus", "spot"}),
    Stack: frozenset({"name", "executor", "framework", "framework_version", "cuda", "cudnn",
                      "python", "base_image"}),
}
NOT_IDENTITY: dict[type[BaseModel], frozenset[str]] = {
    # what a Slurm job is allowed or billed to, not what it runs on
    Hardware: frozenset({"price_per_hour", "time_limit", "account", "qos"}),
    Stack: frozenset(),
}


def content_hash(content: object) -> str:
    """Stable hash of JSON-able content, independent of key order."""
    canonical = json.dumps(content, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:ID_LENGTH]


def model_identity(model: BaseModel) -> dict[str, Any]:
    """The fields of a hardware or stack entry that its cells' identity hashes."""
    kind = next(k for k in PINNED if isinstance(model, k))
    fields = type(model).model_fields
    return {name: value for name, value in model.model_dump().items()
            if name not in NOT_IDENTITY[kind]
            and (name in PINNED[kind] or value != fields[name].get_default(
                call_default_factory=True))}


def params_identity(workload: str, params: dict[str, Scalar]) -> dict[str, Scalar]:
    """The resolved parameters that the identity hashes (all, but for those declared
    `in_identity: when_not_default` while at their default)."""
    declared = load_workload(workload).params
    return {name: value for name, value in params.items()
            if name not in declared or declared[name].in_identity == "always"
            or value != declared[name].default}


def config_id_of(hardware: Hardware, stack: Stack, workload: str, version: str,
                 params: dict[str, Scalar], epochs: int, profile: bool = False) -> str:
    """A profiled cell (`profile: true`) times its last epoch under the profiler, so it is
    another configuration; an unprofiled one hashes exactly as before the option existed."""
    content = {
        "hardware": model_identity(hardware),
        "stack": model_identity(stack),
        "workload": workload,
        "workload_version": version,
        "params": params_identity(workload, params),
        "epochs": epochs,
    }
    return content_hash({**content, "profile": True} if profile else content)


def cell_id_of(config_id: str, repeat: int) -> str:
    return content_hash({"config_id": config_id, "repeat": repeat})
