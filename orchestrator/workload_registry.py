"""The workload registry: a workload is a folder with a `defaults.yaml` and a `workload.py`:
a built-in one under `workloads/<name>/`, a user's folder anywhere that a matrix names
(`path:`), read into that matrix's own workloads when it is loaded (workload_scope.py), or
a package an installed distribution provides (workload_packages.py). Only the built-ins'
and packages' declarations are kept per process (`load_workload`): they are the same for
every matrix; a user's folder or command is known to the matrix that names it alone.

`defaults.yaml` declares what the orchestrator must know without importing the workload's
framework: its version, item unit, the parameters it accepts (type, default, allowed values),
its presets, the metrics it reports and a rough time per epoch for plans. A user folder's
version is its declared one plus a hash of its code (`FOLDER_CODE`), so a result's identity
moves when the code changes, and only then.
"""

from __future__ import annotations

import functools
import math
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from orchestrator.code_identity import code_hash
from orchestrator.errors import MatrixError, UnknownWorkloadError
from orchestrator.worker.units import ITEM_UNIT_PATTERN
from orchestrator.workload_packages import WorkloadPackageError, package_workloads

WORKLOADS_DIR = Path(__file__).resolve().parent.parent / "workloads"
FOLDER_CODE = ("*.py", "defaults.yaml")  # what a user folder's code hash covers

Scalar = bool | int | float | str
ParamType = Literal["int", "float", "bool", "str"]
# any plain word (worker/units.py): word, token, sample, image, frame, graph, molecule...
ItemUnit = Annotated[str, Field(pattern=ITEM_UNIT_PATTERN)]

_PY_TYPES: dict[str, tuple[type, ...]] = {
    "int": (int,),
    "float": (float, int),
    "bool": (bool,),
    "str": (str,),
}


class ParamDecl(BaseModel):
    """One parameter a workload accepts."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: ParamType
    default: Scalar
    choices: tuple[Scalar, ...] | None = None  # allowed values; None means any of the type
    min: float | None = None  # inclusive lower bound for numbers
    max: float | None = None  # inclusive upper bound, where a larger value cannot make sense
    gpu_only: tuple[Scalar, ...] = ()  # values that need a GPU (e.g. precision fp16)
    stack_framework: bool = False  # the value names a framework the cell's stack must pin
    # the value is the count of devices (GPUs or CPU workers) the workload trains on, 0 for
    # the cell's GPUs: speedups compare configurations that differ only in it
    sets_devices: bool = False
    # "when_not_default": hashed into config_id only when set otherwise (identity.py), for a
    # parameter added to a workload that already has results, so their ids do not move
    in_identity: Literal["always", "when_not_default"] = "always"
    help: str = ""

    def problem_with(self, value: object) -> str | None:
        """Why `value` is not acceptable, or None when it is."""
        # bool is an int in Python; a flag must not pass as a count, nor a count as a flag.
        if isinstance(value, bool) and self.type != "bool":
            return f"expected {self.type}, got a boolean ({value!r})"
        if not isinstance(value, _PY_TYPES[self.type]):
            return f"expected {self.type}, got {type(value).__name__} ({value!r})"
        if isinstance(value, float) and not math.isfinite(value):
            return f"expected a finite number, got {value!r}"
        if self.choices is not None and value not in self.choices:
            allowed = ", ".join(str(c) for c in self.choices)
            return f"{value!r} is not one of: {allowed}"
        if self.min is not None and isinstance(value, int | float) and value < self.min:
            return f"{value!r} is below the minimum {self.min:g}"
        if self.max is not None and isinstance(value, int | float) and value > self.max:
            return f"{value!r} is above the maximum {self.max:g}"
        return None

    @model_validator(mode="after")
    def _default_is_valid(self) -> ParamDecl:
        problem = self.problem_with(self.default)
        if problem:
            raise ValueError(f"default: {problem}")
        return self


class WorkloadInfo(BaseModel):
    """What `defaults.yaml` declares about one workload."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    version: str  # bumped when a result's meaning changes; part of config_id
    description: str
    item_unit: ItemUnit
    framework: Literal["torch", "tensorflow", "jax"] | None = None  # None: any, or a param's
    params: dict[str, ParamDecl]
    presets: dict[str, dict[str, Scalar]] = Field(default_factory=dict)
    epochs: int = Field(default=1, ge=1)  # default epochs (or timed rounds) per cell
    timeout_s: float = Field(default=3600, gt=0)
    metrics: tuple[str, ...] = ()  # workload-specific measurement columns, units in their names
    estimate_s_per_epoch: dict[str, float] = Field(default_factory=dict)  # by preset, for plans
    # packages a stack image needs for it besides its framework (`matrix lock` adds them)
    requires: tuple[str, ...] = ()
    # a user's workload: whether the hash of its code joins its version (and so its ids);
    # false: the declared version alone is its identity, the hash only provenance
    code_hash: bool = True
    code: str | None = None  # the hash of its code (code_identity.py), filled in when found
    # a command workload's own FLOP count per item (flop_claims.py: a number or an
    # expression of its parameters); a folder or package has a FLOP model (flops.py)
    flops_per_item: float | str | None = None
    # whether a cell of it may span nodes (hardware `nodes` above 1): its ranks join one
    # group across them (workloads/torch_ranks.py); one that runs alone on each node would
    # measure one node while its hardware prices them all
    spans_nodes: bool = False

    @model_validator(mode="before")
    @classmethod
    def _presets_are_choosable(cls, raw: Any) -> Any:
        """A workload with presets and no `preset` parameter of its own gets one, so that
        `preset: tiny` works from `presets:` alone: "" (none) by default, in the identity
        only when set, so no id of an earlier run moves."""
        if isinstance(raw, dict) and raw.get("presets") and isinstance(raw.get("params"), dict) \
                and "preset" not in raw["params"]:
            presets = [str(name) for name in raw["presets"]]
            raw = {**raw, "params": {**raw["params"], "preset": {
                "type": "str", "default": "", "choices": ["", *presets],
                "in_identity": "when_not_default",
                "help": f"one of the presets ({', '.join(presets)}), or none"}}}
        return raw

    @property
    def device_param(self) -> str | None:
        """The parameter that sets the count of devices the workload trains on, if any."""
        return next((name for name, decl in self.params.items() if decl.sets_devices), None)

    @model_validator(mode="after")
    def _presets_are_valid(self) -> WorkloadInfo:
        if sum(decl.sets_devices for decl in self.params.values()) > 1:
            raise ValueError("at most one parameter may set the device count (sets_devices)")
        for preset, values in self.presets.items():
            for key, value in values.items():
                if key not in self.params:
                    raise ValueError(f"preset {preset!r} sets undeclared parameter {key!r}")
                problem = self.params[key].problem_with(value)
                if problem:
                    raise ValueError(f"preset {preset!r}, {key}: {problem}")
        if "preset" in self.params:
            for choice in self.params["preset"].choices or ():
                if choice not in self.presets and choice != "":  # "": none
                    raise ValueError(f"preset {choice!r} is a choice but has no entry in presets")
        return self

    def resolve(self, given: dict[str, Scalar]) -> dict[str, Scalar]:
        """Declared defaults, overridden by the chosen preset's values, overridden by `given`."""
        resolved = {name: decl.default for name, decl in self.params.items()}
        preset = given.get("preset", resolved.get("preset"))
        if isinstance(preset, str):
            resolved.update(self.presets.get(preset, {}))
        resolved.update(given)
        return dict(sorted(resolved.items()))


class WorkloadFolderError(MatrixError):
    """A folder a matrix names as a workload that is not one."""


# the built-ins' and installed packages' declarations, read once: the same for every matrix
_SHARED: dict[str, WorkloadInfo] = {}


def available_workloads() -> list[str]:
    """Names of the folders under workloads/ that hold a defaults.yaml (the built-ins)."""
    return sorted(_built_ins())


@functools.cache
def _built_ins() -> frozenset[str]:
    """The built-ins, looked up once per process: expansion asks for every cell."""
    return frozenset(p.parent.name for p in WORKLOADS_DIR.glob("*/defaults.yaml"))


def check_own_name(name: str) -> None:
    """WorkloadFolderError (one line) unless `name` may name a user's own workload: an
    identifier that no built-in or installed package has."""
    if not name.isidentifier():
        raise WorkloadFolderError(f"{name!r} is not a Python identifier, which a workload "
                                  "name must be (it names the workload's package)")
    if name in available_workloads():
        raise WorkloadFolderError(f"{name!r} is a built-in workload: give yours another name")
    if name in package_workloads():
        raise WorkloadFolderError(f"{name!r} is a workload of the installed "
                                  f"{package_workloads()[name].source}: give yours another name")


def folder_declaration(name: str, folder: Path) -> WorkloadInfo:
    """The declaration of the workload folder `folder` named `name`, its version joined with
    the hash of its code; WorkloadFolderError (one line) when the name shadows a built-in or
    the folder is no workload."""
    check_own_name(name)
    if not folder.is_dir():
        raise WorkloadFolderError(f"{folder} is not a folder")
    for needed in ("defaults.yaml", "workload.py"):
        if not (folder / needed).is_file():
            raise WorkloadFolderError(f"{folder} is not a workload folder: it has no {needed}")
    info = _read_declaration(name, folder / "defaults.yaml", WorkloadFolderError)
    return with_code(info, folder_code_hash(folder))


def folder_code(folder: Path) -> list[Path]:
    """A user workload folder's code (FOLDER_CODE, recursively; caches and the folder's own
    tests left out): what its version hashes and what a stack image carries of it."""
    return sorted({p for pattern in FOLDER_CODE for p in folder.rglob(pattern)
                   if "__pycache__" not in p.parts and p.is_file()
                   and not p.name.startswith("test_") and p.name != "conftest.py"})


def with_code(info: WorkloadInfo, code: str) -> WorkloadInfo:
    """`info` with the hash of its code: joined to its version unless it opted out."""
    version = f"{info.version}+{code}" if info.code_hash else info.version
    return info.model_copy(update={"version": version, "code": code})


def folder_code_hash(folder: Path) -> str:
    """A hash of what the folder's code says (code_identity.py): the part of a user
    workload's version that moves with its code, and only with it."""
    return code_hash(folder_code(folder), folder)


def is_built_in(name: str) -> bool:
    """Whether `name` is a built-in workload (a folder under workloads/)."""
    return name in _built_ins()


def load_workload(name: str) -> WorkloadInfo:
    """The declaration of built-in or installed package workload `name`; UnknownWorkloadError
    when there is none, WorkloadPackageError for an installed package's entry point that is
    no workload. A user's own workload is its matrix's (workload_scope.Workloads.load)."""
    if name in _SHARED:
        return _SHARED[name]
    path = WORKLOADS_DIR / name / "defaults.yaml"
    if name.isidentifier() and path.is_file():
        # a broken built-in defaults.yaml is the project's bug, not the user's
        _SHARED[name] = _read_declaration(name, path, RuntimeError)
    elif name in package_workloads():
        _SHARED[name] = _package_declaration(name)
    else:
        known = ", ".join([*available_workloads(), *package_workloads()])
        raise UnknownWorkloadError(f"unknown workload {name!r} (known: {known})")
    return _SHARED[name]


def _package_declaration(name: str) -> WorkloadInfo:
    """A package workload's declaration, its version joined with its distribution's."""
    package = package_workloads()[name]
    info = _read_declaration(name, package.folder() / "defaults.yaml", WorkloadPackageError)
    version = f"{info.version}+{package.distribution}-{package.distribution_version}"
    return info.model_copy(update={"version": version})


def _read_declaration(name: str, path: Path, error: type[Exception]) -> WorkloadInfo:
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
        if not isinstance(raw, dict):
            raise TypeError("the file is not a mapping of keys (version, item_unit, params...)")
        return WorkloadInfo(name=name, **raw)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(part) for part in e['loc']) or 'the file'}: "
                             f"{e['msg']}" for e in exc.errors()[:3])
        raise error(f"{path} is not a valid workload declaration: {problems}") from exc
    except (TypeError, yaml.YAMLError, UnicodeDecodeError) as exc:
        problem = " ".join(str(exc).split())[:300]
        raise error(f"{path} is not a valid workload declaration: {problem}") from exc
