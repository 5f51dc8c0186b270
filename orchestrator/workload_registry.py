"""The workload registry: a workload is a folder `workloads/<name>/` with a `defaults.yaml`.

`defaults.yaml` declares what the orchestrator must know without importing the workload's
framework: its version, item unit, the parameters it accepts (type, default, allowed values),
its presets, the metrics it reports and a rough time per epoch for plans.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from orchestrator.errors import UnknownWorkloadError

WORKLOADS_DIR = Path(__file__).resolve().parent.parent / "workloads"

Scalar = bool | int | float | str
ParamType = Literal["int", "float", "bool", "str"]
ItemUnit = Literal["word", "token", "sample", "example", "second"]

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
                if choice not in self.presets:
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


def device_param_columns(workloads: Iterable[str]) -> tuple[str, ...]:
    """`param.<name>` of each workload's device-count parameter (sets_devices)."""
    names = {load_workload(w).device_param for w in set(workloads)}
    return tuple(sorted(f"param.{name}" for name in names if name))


def available_workloads() -> list[str]:
    """Names of the folders under workloads/ that hold a defaults.yaml."""
    return sorted(p.parent.name for p in WORKLOADS_DIR.glob("*/defaults.yaml"))


@cache
def load_workload(name: str) -> WorkloadInfo:
    """The declaration of workload `name`; UnknownWorkloadError when there is none."""
    path = WORKLOADS_DIR / name / "defaults.yaml"
    if not name.isidentifier() or not path.is_file():
        known = ", ".join(available_workloads())
        raise UnknownWorkloadError(f"unknown workload {name!r} (known: {known})")
    raw = yaml.safe_load(path.read_text())
    try:
        return WorkloadInfo(name=name, **raw)
    except (ValidationError, TypeError) as exc:  # a broken defaults.yaml is the project's bug
        raise RuntimeError(f"{path} is not a valid workload declaration: {exc}") from exc
