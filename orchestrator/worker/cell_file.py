"""The cell file: what the driver hands the worker (docs/ARCHITECTURE.md: worker input),
typed on the worker's side, and the failure kinds the worker hands back.

The driver writes `cells/<cell_id>.json` from its `Cell` (`executors/outcome.py`:
`cell_file_content`); the worker reads it into a `CellFile` (`read_cell_file`), a frozen
dataclass whose parameters already have the types their workload declares (a float
parameter given as `1` is `1.0`), so a workload never casts them. The file carries its
format version: a worker refuses a file of a version it does not know, in one line, instead
of misreading it. Stdlib only: the worker imports this for every cell.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from enum import StrEnum
from typing import Annotated, Any, Literal

from orchestrator.worker.bounds import NAME, NOT_NEGATIVE, POSITIVE, Bound
from orchestrator.worker.units import ITEM_UNIT_PATTERN
from orchestrator.worker.workload_code import workload_package

CELL_FILE_VERSION = 2
# Version history: 1, the first typed one (the same fields as the untyped file before it,
# plus `version` and `param_types`); 2, a hardware entry's kind-specific keys (Slurm's
# partition, EC2's spot) in its `settings` block, as its provider's model declares them.

Scalar = bool | int | float | str
_CONVERT = {"int": int, "float": float, "bool": bool, "str": str}


class FailureKind(StrEnum):
    """Why a workload did not finish, as the worker reports it in its `error` record; the
    executor maps each to the cell's status (executors/outcome.py)."""

    FAILED = "failed"  # the workload raised
    OOM = "oom"  # MemoryError, CUDA out of memory
    UNSUPPORTED = "unsupported"  # the workload cannot run this configuration
    STACK_MISMATCH = "stack_mismatch"  # the environment is not the declared stack
    DATA_UNAVAILABLE = "data_unavailable"  # its dataset could not be had (datasets.py)


class CellFileError(ValueError):
    """A cell file this worker cannot read: another version, or a missing field."""


@dataclass
class HardwareFields:
    """The fields every hardware kind shares, declared once: the matrix's `Hardware`
    (spec/model.py) and the worker's `CellHardware` inherit them, each with its kind's
    settings as it holds them. Not frozen, for the reason `CellStack` says."""

    name: Annotated[str, NAME]
    kind: Annotated[str, NAME]  # a kind a registered provider offers: local, ec2, slurm
    instance_type: str | None = None  # a machine size: EC2's instance type, required there
    gpus: Annotated[int, NOT_NEGATIVE] = 0  # GPUs a cell of it uses (0 = CPU only)
    # the GPU as its driver names it ("NVIDIA H100 80GB HBM3"), for hardware no catalogue
    # knows (a Slurm partition, a machine): what a stack's CUDA must drive. An EC2 entry's
    # is its instance type's. In identity only when set.
    gpu_model: Annotated[str | None, Bound(min_length=1, max_length=100)] = None
    # What an hour of this hardware costs where no provider prices it (a cluster that
    # charges back, a machine's amortised cost); it overrides a provider's price.
    price_per_hour: Annotated[float | None, NOT_NEGATIVE] = None
    # the nodes one cell spans (worker/nodes.py: one worker per node, all ranks in one
    # group); in identity only above 1. A price is per node: a cell pays for all of them.
    nodes: Annotated[int, POSITIVE] = 1
    # the link between nodes as its datasheet states it, Gbit/s per node, where no catalogue
    # knows it (EC2's does): what a measured bus bandwidth is judged against. Not identity.
    net_gbps: Annotated[float | None, POSITIVE] = None


@dataclass
class CellHardware(HardwareFields):
    """A hardware entry as the worker reads it, and its kind's own block: the settings its
    provider declares (spec/entry_settings.py KindSettings), as that model dumps them (kind
    slurm: partition, cpus, mem_gb...; kind ec2: spot). No workload needs them: provenance."""

    settings: dict[str, Any] = field(default_factory=dict)


@dataclass
class CellStack:
    """A stack as the worker reads it, and the fields of the matrix's `Stack` (spec/model.py
    inherits them, declared once, and adds its executor's settings). Not frozen, unlike the
    worker's other records: a frozen dataclass base would oblige every model of the spec to
    declare itself frozen to the type checker; the worker never changes one."""

    name: Annotated[str, NAME]
    executor: Annotated[str | None, NAME] = None  # a registered executor: docker when pinned
    framework: Literal["torch", "tensorflow", "jax"] | None = None
    framework_version: str | None = None
    cuda: str | None = None
    cudnn: str | None = None
    python: str | None = None
    base_image: str | None = None
    # an index besides the package index where its build lives (PyTorch's CPU builds, an
    # older CUDA variant): its lock is made from it and its image installs from it. Not
    # part of identity: the lock pins what is installed.
    index_url: str | None = None


@dataclass(frozen=True, kw_only=True)
class CellFields:
    """What a cell is on both sides of the cell file, declared once: the driver's `Cell`
    (registry/cell_run.py) takes these fields from here and adds its hardware and stack
    entries as the matrix has them; the worker's `CellFile` reads them from the file."""

    run: str  # the run's name
    cell_id: str
    config_id: str
    repeat: int  # 1-based
    workload: str
    workload_version: str
    item_unit: Annotated[str, Bound(pattern=ITEM_UNIT_PATTERN)]  # any plain word (units.py)
    # resolved: declared defaults < preset < matrix values; in a CellFile, each of its
    # declared type
    params: dict[str, Scalar]
    epochs: int
    timeout_s: float
    memory_limit_mb: int | None
    # a user's workload folder (`path:`) the worker imports the workload from; None for a
    # built-in (workloads/<name>/). Not hashed: the folder's code is, through
    # `workload_version`.
    workload_dir: str | None = None
    # an installed package's workload: the package the worker imports it from; its version
    # (hashed) names the distribution's release
    workload_module: str | None = None
    # a command workload: the script's argument list, placeholders filled in, and its folder
    command: tuple[str, ...] | None = None
    command_cwd: str | None = None
    # time the last epoch under torch's profiler (Context.start_epoch), its trace into
    # cells/<cell_id>.trace.json
    profile: bool = False


@dataclass(frozen=True, kw_only=True)
class CellFile(CellFields):
    """One cell as its worker sees it: the shared fields, with its hardware and stack as
    the worker reads them, the file's version and its parameters' declared types."""

    version: int
    param_types: dict[str, str]  # parameter -> "int", "float", "bool" or "str"
    hardware: CellHardware
    stack: CellStack
    # the frameworks whose ceiling at the cell's precision this node, hardware and stack
    # have measured in this run (executors/ceilings.py); the worker measures its own
    # framework's where it is not among them (worker/ceiling.py)
    ceilings_measured: tuple[str, ...] = ()

    @property
    def workload_package(self) -> str:
        """The package the workload's modules are imported from."""
        return workload_package(self.workload, self.workload_dir, self.workload_module)

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> CellFile:
        """The cell file's content as a CellFile; CellFileError if it is not one."""
        version = raw.get("version")
        if version != CELL_FILE_VERSION:
            raise CellFileError(f"cell file version {version!r}: this worker reads version "
                                f"{CELL_FILE_VERSION} (driver and worker come from different "
                                "versions of matrix-bench: rebuild the stack's image)")
        try:
            types = dict(raw["param_types"])
            values = {name: _typed(value, types.get(name)) for name, value in
                      raw["params"].items()}
            given = {f.name: raw.get(f.name, f.default) if f.name in _OPTIONAL else raw[f.name]
                     for f in fields(cls)}
            return cls(**{**given, "params": values,
                          "ceilings_measured": tuple(given["ceilings_measured"]),
                          "command": None if given["command"] is None
                          else tuple(given["command"]),
                          "param_types": types,
                          "hardware": _only_known(CellHardware, raw["hardware"]),
                          "stack": _only_known(CellStack, raw["stack"])})
        except KeyError as exc:
            raise CellFileError(f"cell file without {exc.args[0]!r}") from None


# absent from a built-in workload's file
_OPTIONAL = ("workload_dir", "workload_module", "command", "command_cwd", "profile",
             "ceilings_measured")


def _typed(value: Scalar, declared: str | None) -> Scalar:
    """`value` as its declared type: JSON keeps 1 and 1.0 apart, a float parameter is float."""
    if declared == "float" and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if declared in _CONVERT and not isinstance(value, _CONVERT[declared]):
        raise CellFileError(f"parameter value {value!r} is not of its declared type {declared}")
    return value


def _only_known(kind: type, raw: dict[str, Any]) -> Any:
    """A hardware or stack dataclass from its entry, without the fields this worker does not
    use (a newer driver may add some)."""
    known = {f.name for f in fields(kind)}
    return kind(**{k: v for k, v in raw.items() if k in known})


def read_cell_file(path: str) -> CellFile:
    with open(path, encoding="utf-8") as handle:
        return CellFile.from_dict(json.load(handle))

