"""The matrix file: strict pydantic models, semantic checks against the workload registry,
and JSON Schema export for editors.

`load_spec(path)` is the only way in; every problem becomes a SpecError naming the file,
the line and the field, and saying what was expected.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from orchestrator.errors import SpecWarning, UnknownWorkloadError
from orchestrator.executors import executor_names, needs_image
from orchestrator.framework_builds import cuda_build_problem, release_problem
from orchestrator.providers import hardware_kinds, provider_for, providers
from orchestrator.registry import Scalar, WorkloadInfo, load_workload
from orchestrator.spec_errors import schema_error
from orchestrator.spec_yaml import LocatedYaml, PathKey, read_yaml

Name = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$", max_length=80)]
ScalarOrList = Scalar | list[Scalar]
NamesOrOne = Name | list[Name]

DEFAULT_TIMEOUT_S = 3600.0
# max_cells may be raised this far and no further: a million cells is years of sweeping,
# and the grid is counted from its axes, never built, until it is known to fit.
HARD_MAX_CELLS = 1_000_000
WORKER_PYTHON = (3, 11)  # the oldest Python orchestrator.worker runs on (requires-python)
MAX_TIMEOUT_S = 30 * 24 * 3600.0  # a longer cell is a slip; 1e308 overflows the timers
MAX_MEMORY_LIMIT_MB = 2**24  # 16 TiB, past any machine; passed on in bytes (64 bits)
PROJECT_ROOT = Path(__file__).resolve().parent.parent


class _Strict(BaseModel):
    # strict: "3" is not an int and 1 is not a bool; extra="forbid": typos are errors.
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, allow_inf_nan=False)


class Hardware(_Strict):
    """A kind of machine cells run on; cells are pinned to it through the Ray resource hw:<name>.
    Its `kind` names the provider that offers it (providers/__init__.py), which judges the
    rest of the entry."""

    name: Name
    kind: Name  # a kind a registered provider offers: local, ec2
    instance_type: str | None = None  # EC2 instance type, required for kind ec2
    gpus: int = Field(default=0, ge=0)  # GPUs a cell of this hardware uses (0 = CPU only)
    spot: bool = False  # EC2 spot capacity


class Stack(_Strict):
    """A software stack: the current environment (process) or a pinned image (docker)."""

    name: Name
    executor: Name | None = None  # a registered executor; default: docker when pinned
    framework: Literal["torch", "tensorflow", "jax"] | None = None
    framework_version: str | None = None
    cuda: str | None = None
    cudnn: str | None = None
    python: str | None = None
    base_image: str | None = None

    @property
    def effective_executor(self) -> str:
        """The Contracts' rule: a stack with pins is an image unless it says otherwise."""
        if self.executor:
            return self.executor
        pinned = (self.framework_version, self.cuda, self.cudnn, self.python, self.base_image)
        return "docker" if any(pinned) else "process"


class Images(_Strict):
    """How stack images are built and shared. Delivery only, never part of a cell's identity:
    the image tag is (a hash of the Dockerfile, the lock file and the worker code)."""

    locks: str | None = None  # folder of <stack>.txt lock files; default: the project's
    wheelhouse: str | None = None  # install from this folder of wheels, offline
    ca_bundle: str | None = None  # extra CA certificates (PEM) for a proxy's TLS
    registry: str | None = None  # push built images here, e.g. localhost:5000/matrix-bench


class Aws(_Strict):
    """Where and how EC2 hardware runs: one region per matrix (docs/aws.md)."""

    region: str = "us-east-1"
    ami: str | None = None  # default: the Deep Learning Base AMI (NVIDIA driver, Docker)
    instance_profile: str | None = None  # the nodes' IAM instance profile, name or ARN
    subnet_id: str | None = None
    head_instance_type: str = "m5.large"
    max_workers: int = Field(default=8, ge=1)  # per EC2 hardware entry
    idle_timeout_minutes: int = Field(default=10, ge=1)
    max_lifetime_hours: float = Field(default=12.0, gt=0, le=24 * 30)  # then nodes shut down
    ssh_cidr: str | None = None  # SSH ingress; default: this machine's address only
    results_uri: str | None = None  # s3://bucket/prefix for the run's results


class WorkloadEntry(_Strict):
    """A workload and its parameter grid: any value in `params` may be a list (an axis)."""

    name: Name
    params: dict[str, ScalarOrList] = Field(default_factory=dict)
    epochs: int | None = Field(default=None, ge=1)  # default: the workload's own
    dataset: ScalarOrList | None = None  # shorthand for params.dataset
    preset: ScalarOrList | None = None  # shorthand for params.preset
    timeout_s: float | None = Field(default=None, gt=0, le=MAX_TIMEOUT_S)  # default: workload's
    memory_limit_mb: int | None = Field(default=None, gt=0, le=MAX_MEMORY_LIMIT_MB)  # hard limit


class Rule(_Strict):
    """Matches cells: every key given must match (a list means any of its values)."""

    hardware: NamesOrOne | None = None
    stack: NamesOrOne | None = None
    workload: NamesOrOne | None = None
    params: dict[str, ScalarOrList] = Field(default_factory=dict)


class RepeatPolicy(BaseModel):
    """`repeats: {min, max, until_cv}`: each configuration runs `min` repeats, then one more
    at a time until the coefficient of variation of its per-repeat throughput is at most
    `until_cv`, or it has `max` (orchestrator/repeats.py). All three keys are required."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, allow_inf_nan=False)

    min: int = Field(ge=2, le=HARD_MAX_CELLS)  # a coefficient of variation needs two repeats
    max: int = Field(ge=2, le=HARD_MAX_CELLS)
    until_cv: float = Field(gt=0, lt=1)


class MatrixSpec(_Strict):
    """A whole matrix file."""

    name: Name  # the run's name and directory, reports/<name>/
    hardware: list[Hardware] = Field(min_length=1)
    stacks: list[Stack] = Field(min_length=1)
    workloads: list[WorkloadEntry] = Field(min_length=1)
    include: list[Rule] = Field(default_factory=list)  # extra cells beyond the cross product
    exclude: list[Rule] = Field(default_factory=list)  # cells removed from the cross product
    # A number: that many repeats per configuration; a mapping: repeats until the noise is
    # bounded (RepeatPolicy).
    repeats: Annotated[int, Field(ge=1)] | RepeatPolicy = 1
    output: str | None = None  # run directory; default reports/<name>
    budget_usd: float | None = Field(default=None, gt=0)
    images: Images = Field(default_factory=Images)
    aws: Aws | None = None  # needed by EC2 hardware
    max_cells: int = Field(default=10_000, ge=1, le=HARD_MAX_CELLS, description=(
        "The most cells the matrix may expand to (after repeats and include rules); a "
        "bigger grid is refused as a likely slip. Raise it when you mean it."))

    def workload_entry(self, name: str) -> WorkloadEntry:
        return next(w for w in self.workloads if w.name == name)

    @property
    def min_repeats(self) -> int:
        """The repeats every configuration gets."""
        return self.repeats.min if isinstance(self.repeats, RepeatPolicy) else self.repeats

    @property
    def max_repeats(self) -> int:
        """The most repeats a configuration may get (what max_cells counts)."""
        return self.repeats.max if isinstance(self.repeats, RepeatPolicy) else self.repeats

    @property
    def target_cv(self) -> float | None:
        """The coefficient of variation repeats run until, or None for a fixed number."""
        return self.repeats.until_cv if isinstance(self.repeats, RepeatPolicy) else None


def json_schema() -> dict:
    """JSON Schema of the matrix file, for editors."""
    schema = MatrixSpec.model_json_schema()
    schema["title"] = "matrix-bench matrix file"
    # the executors registered when the schema is made, for editors to offer
    schema["$defs"]["Stack"]["properties"]["executor"]["anyOf"][0]["enum"] = executor_names()
    schema["$defs"]["Hardware"]["properties"]["kind"]["enum"] = hardware_kinds()
    return schema


def load_spec(path: Path | str) -> MatrixSpec:
    """Read, validate and check a matrix file; SpecError on the first problem found."""
    doc = read_yaml(Path(path))
    if not isinstance(doc.data, dict):
        kind = "empty" if doc.data is None else "a list" if isinstance(doc.data, list) \
            else "a single value"
        raise doc.error((), f"the top level must be a mapping of keys (name, hardware, ...), "
                            f"but the file is {kind}")
    try:
        spec = MatrixSpec.model_validate(doc.data)
    except ValidationError as exc:
        raise schema_error(doc, exc, MatrixSpec) from None
    spec = spec.model_copy(update={"images": resolve_image_paths(spec.images, doc.path.parent)})
    _check_semantics(spec, doc)
    return spec


def _check_semantics(spec: MatrixSpec, doc: LocatedYaml) -> None:
    if isinstance(spec.repeats, RepeatPolicy) and spec.repeats.max < spec.repeats.min:
        raise doc.error(("repeats", "max"), f"must be at least min ({spec.repeats.min}), got "
                                            f"{spec.repeats.max}")
    for section in ("hardware", "stacks", "workloads"):
        seen: set[str] = set()
        for index, item in enumerate(getattr(spec, section)):
            if item.name in seen:
                raise doc.error((section, index, "name"), f"duplicate name {item.name!r}")
            seen.add(item.name)
    for index, stack in enumerate(spec.stacks):
        if stack.effective_executor not in executor_names():
            raise doc.error(("stacks", index, "executor"),
                            f"unknown executor {stack.effective_executor!r} (registered: "
                            f"{', '.join(executor_names())})")
    kinds = hardware_kinds()
    for index, hardware in enumerate(spec.hardware):
        if hardware.kind not in kinds:
            raise doc.error(("hardware", index, "kind"),
                            f"{hardware.kind!r} is not allowed: expected "
                            f"{' or '.join(repr(k) for k in kinds)} (the kinds the registered "
                            "providers offer)")
        if problem := provider_for(hardware.kind).hardware_problem(hardware):
            raise doc.error(("hardware", index), problem)
    for provider in providers():
        if found := provider.matrix_problem(spec):
            raise doc.error(*found)
    images = spec.images  # its paths already absolute
    for index, stack in enumerate(spec.stacks):
        _check_pins(stack, doc, ("stacks", index))
        if needs_image(stack):
            _check_image_stack(stack, images, doc, ("stacks", index))
        _check_releases(stack, doc, ("stacks", index))
        if stack.cuda and stack.framework:
            problem = cuda_build_problem(stack.framework, stack.framework_version, stack.cuda)
            if problem:
                raise doc.error(("stacks", index, "cuda"), problem)
    for key in ("wheelhouse", "ca_bundle"):
        given = getattr(images, key)
        if given and not (Path(given).is_dir() if key == "wheelhouse" else Path(given).is_file()):
            raise doc.error(("images", key), f"{given} does not exist")
    for index, entry in enumerate(spec.workloads):
        try:
            info = load_workload(entry.name)
        except UnknownWorkloadError as exc:
            raise doc.error(("workloads", index, "name"), str(exc)) from None
        _check_params(entry, info, doc, ("workloads", index))
    names = {
        "hardware": {h.name for h in spec.hardware},
        "stack": {s.name for s in spec.stacks},
        "workload": {w.name for w in spec.workloads},
    }
    for section in ("include", "exclude"):
        for index, rule in enumerate(getattr(spec, section)):
            _check_rule(rule, names, doc, (section, index), needs_workload=section == "include")
    from orchestrator.matrix import check_grid  # matrix builds on this module

    check_grid(spec, doc)


def resolve_image_paths(images: Images, base: Path) -> Images:
    """The images section with its paths made absolute, relative ones against `base` (the
    matrix file's folder), and the project's lock folder where none is given."""
    def absolute(path: str | None) -> str | None:
        return None if path is None else str((base / Path(path).expanduser()).resolve())

    return images.model_copy(update={
        "locks": absolute(images.locks) or str(PROJECT_ROOT / "images" / "locks"),
        "wheelhouse": absolute(images.wheelhouse), "ca_bundle": absolute(images.ca_bundle)})


def _check_releases(stack: Stack, doc: LocatedYaml, loc: PathKey) -> None:
    """A Python the worker cannot run on, or a framework version never released: refused;
    a framework version newer than the release table: a warning."""
    if stack.python and tuple(int(p) for p in stack.python.split(".")[:2]) < WORKER_PYTHON:
        raise doc.error((*loc, "python"), f"the worker runs on Python "
                                          f"{'.'.join(map(str, WORKER_PYTHON))} or newer, "
                                          f"so no cell could run on Python {stack.python}")
    if stack.framework and stack.framework_version:
        error, warning = release_problem(stack.framework, stack.framework_version)
        if error:
            raise doc.error((*loc, "framework_version"), error)
        if warning:
            warnings.warn(str(doc.error((*loc, "framework_version"), warning)), SpecWarning,
                          stacklevel=2)


# Pins end up in a Dockerfile and a pip index URL: only what a version or an image
# reference can hold, so nothing else can ride along (a newline, a quote, a `;`).
PIN_SHAPES: dict[str, tuple[str, str]] = {
    "framework_version": (r"\d+(\.\d+)*([a-z]+\d*|\.(post|dev)\d+)*(\+[\w.]+)?",
                          "a version (e.g. 2.5.1)"),
    "cuda": (r"\d+(\.\d+){0,2}", "a CUDA version (e.g. 12.4)"),
    "cudnn": (r"\d+(\.\d+){0,3}", "a cuDNN version (e.g. 9.1)"),
    "python": (r"\d+(\.\d+){0,2}", "a Python version (e.g. 3.11)"),
    "base_image": (r"([\w.-]+(:\d+)?/)?"  # registry host
                   r"[a-z0-9]+([._-]+[a-z0-9]+)*(/[a-z0-9]+([._-]+[a-z0-9]+)*)*"  # path
                   r"(:\w[\w.-]{0,127})?(@sha256:[0-9a-f]{64})?",  # tag, digest
                   "an image reference (e.g. nvidia/cuda:12.4.1-runtime-ubuntu22.04)"),
}


def _check_pins(stack: Stack, doc: LocatedYaml, loc: PathKey) -> None:
    for key, (shape, what) in PIN_SHAPES.items():
        given = getattr(stack, key)
        if given is not None and not re.fullmatch(shape, given, re.ASCII):
            raise doc.error((*loc, key), f"{given!r} is not {what}")


def _check_image_stack(stack: Stack, images: Images, doc: LocatedYaml, loc: PathKey) -> None:
    if stack.framework is None:
        raise doc.error((*loc, "name"), "a stack that runs in an image names its framework "
                                        "(torch, tensorflow or jax)")
    if stack.cuda and not stack.base_image:
        raise doc.error((*loc, "cuda"), "a CUDA stack names its base_image, e.g. "
                                        "nvidia/cuda:12.4.1-cudnn-runtime-ubuntu22.04")
    # The lock file is a build input, checked where the image is rendered (plan shows it,
    # validate notes it): an example matrix stays readable before its lock is written.


def entry_grid(entry: WorkloadEntry) -> dict[str, list[Scalar]]:
    """The entry's parameter axes, with `dataset` and `preset` folded into params."""
    grid = {k: v if isinstance(v, list) else [v] for k, v in entry.params.items()}
    for key in ("dataset", "preset"):
        value = getattr(entry, key)
        if value is not None:
            grid[key] = value if isinstance(value, list) else [value]
    return grid


def _check_params(entry: WorkloadEntry, info: WorkloadInfo, doc: LocatedYaml,
                  loc: PathKey) -> None:
    for key in ("dataset", "preset"):
        if getattr(entry, key) is not None and key in entry.params:
            raise doc.error((*loc, key), f"{key} is given twice: here and in params")
    for key, values in entry_grid(entry).items():
        where = (*loc, "params", key) if key in entry.params else (*loc, key)
        _check_values(key, values, info, doc, where)


def _check_values(key: str, values: list[Scalar], info: WorkloadInfo, doc: LocatedYaml,
                  loc: PathKey) -> None:
    decl = info.params.get(key)
    if decl is None:
        known = ", ".join(info.params)
        raise doc.error(loc, f"workload {info.name!r} has no parameter {key!r} (known: {known})")
    if not values:
        raise doc.error(loc, "empty list: give at least one value")
    if len(set(map(repr, values))) != len(values):
        raise doc.error(loc, "the list repeats a value")
    for i, value in enumerate(values):
        problem = decl.problem_with(value)
        if problem:
            raise doc.error(loc if len(values) == 1 else (*loc, i), problem)


def _check_rule(rule: Rule, names: dict[str, set[str]], doc: LocatedYaml, loc: PathKey,
                needs_workload: bool) -> None:
    for key, known in names.items():
        given = getattr(rule, key)
        for name in [] if given is None else given if isinstance(given, list) else [given]:
            if name not in known:
                raise doc.error((*loc, key), f"no {key} named {name!r} in this matrix")
    if needs_workload and (rule.workload is None or isinstance(rule.workload, list)):
        raise doc.error((*loc, "workload"), "an include rule names exactly one workload")
    if rule.params:
        workloads = [rule.workload] if isinstance(rule.workload, str) else (
            rule.workload or sorted(names["workload"]))
        for key, value in rule.params.items():
            values = value if isinstance(value, list) else [value]
            if not values:
                raise doc.error((*loc, "params", key), "empty list: give at least one value")
            if not any(key in load_workload(w).params for w in workloads):
                raise doc.error((*loc, "params", key), f"no workload of this rule has "
                                                         f"a parameter {key!r}")
            if needs_workload:
                _check_values(key, values, load_workload(workloads[0]), doc, (*loc, "params", key))
