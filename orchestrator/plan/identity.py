"""A cell's identity (docs/ARCHITECTURE.md: cell identity): what `config_id` and `cell_id` hash.

`config_id` hashes everything that gives a result its meaning except the repeat index: the
hardware and stack entries, the workload and its version, its resolved parameters and the
epochs. `cell_id` hashes the config_id and the repeat. Resume skips the cells whose id has
an `ok` result and `matrix compare` matches configurations by id, so an id must never move
unless the meaning moves:

- The fields the hardware and stack models hashed when identities were pinned (PINNED)
  stay hashed in full, defaults included. A field added since enters the hash only when set
  to something other than its default, so adding one moves no id.
- A hardware entry's kind settings (Slurm's partition, EC2's spot: spec/entry_settings.py
  KindSettings) are hashed as flat fields beside the shared ones, as they were when they
  were the entry's own, under the same rule; `spot: false` is hashed for every kind, as it
  was pinned.
- A stack's executor settings (a plugin's priority: spec/entry_settings.py
  ExecutorSettings) are hashed flat beside its own keys under the same rule: a stack that
  sets none hashes as before they existed.
- Settings that do not change what a cell measures (NOT_IDENTITY: prices, say, and a kind's
  own `KindSettings.NOT_IDENTITY`) never enter.
- A workload parameter enters in full, unless its declaration says `in_identity:
  when_not_default` (a parameter added to a workload that already has results).

tests/test_identity.py pins the ids of the example matrices and of test matrices covering
every field.

`match_id` is the configuration as `compare` and `history` match it between runs: a user's
workload whose code changed is a new config_id (resume must rerun it) but the same
configuration to compare ("did my change make it faster?"); its declared version still
separates (a bump says the meaning changed).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from orchestrator.code_identity import HASH_LENGTH
from orchestrator.spec.model import Hardware, Stack
from orchestrator.workload_registry import ParamDecl, Scalar, WorkloadInfo

ID_LENGTH = 16

PINNED: dict[type[BaseModel], frozenset[str]] = {
    Hardware: frozenset({"name", "kind", "instance_type", "gpus"}),  # and spot (below)
    Stack: frozenset({"name", "executor", "framework", "framework_version", "cuda", "cudnn",
                      "python", "base_image"}),
}
NOT_IDENTITY: dict[type[BaseModel], frozenset[str]] = {
    # settings: flattened, below; net_gbps: a datasheet figure the judge reads
    Hardware: frozenset({"price_per_hour", "net_gbps", "settings", "node_counts"}),
    Stack: frozenset({"index_url", "settings"}),  # index_url: the lock pins what is installed
}


def content_hash(content: object) -> str:
    """Stable hash of JSON-able content, independent of key order."""
    canonical = json.dumps(content, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:ID_LENGTH]


def model_identity(model: BaseModel) -> dict[str, Any]:
    """The fields of a hardware or stack entry that its cells' identity hashes."""
    kind = next(k for k in PINNED if isinstance(model, k))
    fields = _hashed(model, PINNED[kind], NOT_IDENTITY[kind])
    if isinstance(model, Hardware):
        settings = model.settings
        # spot was a field of every entry when ids were pinned, hashed even when false
        return {"spot": False, **fields,
                **_hashed(settings, frozenset({"spot"}), type(settings).NOT_IDENTITY)}
    if isinstance(model, Stack):  # its executor's settings, as they were written: flat
        return {**fields, **_hashed(model.settings, frozenset(),
                                    type(model.settings).NOT_IDENTITY)}
    return fields


def _hashed(model: BaseModel, pinned: frozenset[str], not_identity: frozenset[str]
            ) -> dict[str, Any]:
    """`model`'s fields outside `not_identity`: the `pinned` ones always, the rest when set
    to other than their default."""
    fields = type(model).model_fields
    return {name: value for name, value in model.model_dump().items()
            if name not in not_identity
            and (name in pinned or value != fields[name].get_default(
                call_default_factory=True))}


def params_identity(declared: Mapping[str, ParamDecl],
                    params: dict[str, Scalar]) -> dict[str, Scalar]:
    """The resolved parameters that the identity hashes (all, but for those `declared`
    `in_identity: when_not_default` while at their default)."""
    return {name: value for name, value in params.items()
            if name not in declared or declared[name].in_identity == "always"
            or value != declared[name].default}


def config_id_of(hardware: Hardware, stack: Stack, workload: WorkloadInfo,
                 params: dict[str, Scalar], epochs: int, profile: bool = False) -> str:
    """`workload` is the declaration the matrix resolved (its name, version and parameters'
    `in_identity`). A profiled cell (`profile: true`) times its last epoch under the
    profiler, so it is another configuration; an unprofiled one hashes exactly as before the
    option existed."""
    return config_hash(model_identity(hardware), model_identity(stack), workload, params,
                       epochs, profile)


def config_hash(hardware: dict[str, Any], stack: dict[str, Any], workload: WorkloadInfo,
                params: dict[str, Scalar], epochs: int, profile: bool = False) -> str:
    """`config_id_of` from the hardware's and stack's `model_identity`, which a grid's
    expansion takes once per (hardware, stack) rather than dumping both models for each of
    its configurations."""
    content = {
        "hardware": hardware,
        "stack": stack,
        "workload": workload.name,
        "workload_version": workload.version,
        "params": params_identity(workload.params, params),
        "epochs": epochs,
    }
    return content_hash({**content, "profile": True} if profile else content)


def cell_id_of(config_id: str, repeat: int) -> str:
    """`content_hash({"config_id": config_id, "repeat": repeat})`, its canonical JSON
    written out: a 10,000-cell grid hashes one per cell, and the generic encoder cost
    most of that (tests/test_identity.py holds the two equal)."""
    if type(repeat) is not int or type(config_id) is not str:  # the encoder's own spelling
        return content_hash({"config_id": config_id, "repeat": repeat})
    canonical = f'{{"config_id":{json.dumps(config_id)},"repeat":{repeat}}}'
    return hashlib.sha256(canonical.encode()).hexdigest()[:ID_LENGTH]


CODE_VERSION = re.compile(rf"(?P<declared>[^+]+)\+[0-9a-f]{{{HASH_LENGTH}}}")


def code_free_version(version: str) -> str:
    """A workload's version without the hash of its code (`1+3fa2...` -> `1`); a built-in's
    or a package's as it is."""
    found = CODE_VERSION.fullmatch(version)
    return found["declared"] if found else version


def match_id(config_id: str, version: object, names: tuple[str, str, str],
             params: Mapping[str, object], settings: Mapping[str, object] | None = None) -> str:
    """`config_id`, but for a workload whose `version` carries a code hash: there a hash of
    the (hardware, stack, workload) `names`, the declared version, the parameters and the
    hardware's and executor's recorded `settings` (their columns, `hw.partition`), the same
    whatever the code, so two runs of edited code match, and two partitions do not."""
    if not isinstance(version, str) or code_free_version(version) == version:
        return config_id
    hardware, stack, workload = names
    matched = {"hardware": hardware, "stack": stack, "workload": workload,
               "code_free_version": code_free_version(version),
               "params": {k: _plain(v) for k, v in params.items() if not _missing(v)}}
    recorded = {k: _plain(v) for k, v in (settings or {}).items() if not _missing(v)}
    if recorded:  # none recorded: the id a configuration without settings always had
        matched["settings"] = recorded
    return content_hash(matched)


def _missing(value: object) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value)) \
        or type(value).__name__ == "NAType"  # pandas' missing value


def _plain(value: object) -> object:
    """A parameter as JSON holds it, whichever column type pandas read it into (8.0 for an
    integer column beside a gap, numpy scalars)."""
    value = getattr(value, "item", lambda: value)()
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value
