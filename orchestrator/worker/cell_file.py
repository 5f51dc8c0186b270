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
from typing import Any

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


@dataclass(frozen=True)
class CellHardware:
    """The fields every hardware kind shares, and its kind's own block: the settings its
    provider declares (spec/entry_settings.py KindSettings), as that model dumps them (kind slurm:
    partition, cpus, mem_gb...; kind ec2: spot). No workload needs them: provenance."""

    name: str
    kind: str
    gpus: int  # GPUs the cell uses (0: CPU only)
    instance_type: str | None = None
    gpu_model: str | None = None  # as the matrix names it, for hardware no catalogue knows
    price_per_hour: float | None = None
    settings: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class CellStack:
    name: str
    executor: str | None = None
    framework: str | None = None
    framework_version: str | None = None
    cuda: str | None = None
    cudnn: str | None = None
    python: str | None = None
    base_image: str | None = None
    index_url: str | None = None  # where its build came from (the image's business)


@dataclass(frozen=True)
class CellFile:
    """One cell as its worker sees it."""

    version: int
    run: str
    cell_id: str
    config_id: str
    repeat: int  # 1-based
    workload: str
    workload_version: str
    item_unit: str
    params: dict[str, Scalar]  # resolved, each of its declared type
    param_types: dict[str, str]  # parameter -> "int", "float", "bool" or "str"
    epochs: int
    timeout_s: float
    memory_limit_mb: int | None
    hardware: CellHardware
    stack: CellStack
    workload_dir: str | None = None  # a user's workload folder; None: workloads/<name>/
    workload_module: str | None = None  # an installed package's workload: its package
    command: list[str] | None = None  # a command workload: the script's arguments, filled in
    command_cwd: str | None = None  # ... and the folder it runs in
    profile: bool = False  # the last epoch under torch.profiler (Context.start_epoch)
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

