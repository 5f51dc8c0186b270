"""The matrix's own checks, beyond the schema, that need nothing but the matrix and its
workloads: repeats in order, pins well formed, releases real, each workload's parameters
known to it, rules that match, the job's workload one of the matrix's. Each raises the first
problem as one located line (a SpecError from `doc.error`). The checks that ask the
registries, the images or the plan are the validation step's (orchestrator/validate/), which
runs all of them in the order a reader meets the file.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.errors import SpecWarning, UnknownWorkloadError
from orchestrator.spec.framework_builds import cuda_build_problem, release_problem
from orchestrator.spec.loaded import workloads_of
from orchestrator.spec.located_yaml import LocatedYaml, PathKey
from orchestrator.spec.model import (
    WORKER_PYTHON,
    MatrixSpec,
    RepeatPolicy,
    Rule,
    Stack,
    WorkloadEntry,
    entry_grid,
)
from orchestrator.workload_packages import WorkloadPackageError
from orchestrator.workload_registry import Scalar, WorkloadInfo
from orchestrator.workload_scope import Workloads

if TYPE_CHECKING:
    from orchestrator.spec.release_index import ReleaseIndex


def check_repeats(spec: MatrixSpec, doc: LocatedYaml) -> None:
    if isinstance(spec.repeats, RepeatPolicy) and spec.repeats.max < spec.repeats.min:
        raise doc.error(("repeats", "max"), f"must be at least min ({spec.repeats.min}), got "
                                            f"{spec.repeats.max}")


def check_stack_pins(stack: Stack, doc: LocatedYaml, loc: PathKey) -> None:
    """A stack's pins well formed: only what a version or an image reference holds."""
    for key, (shape, what) in PIN_SHAPES.items():
        given = getattr(stack, key)
        if given is not None and not re.fullmatch(shape, given, re.ASCII):
            raise doc.error((*loc, key), f"{given!r} is not {what}")


def check_stack_releases(stack: Stack, doc: LocatedYaml, loc: PathKey,
                         releases: ReleaseIndex | None) -> None:
    """A stack's Python one the worker runs on, its framework release real and its CUDA
    build one the framework published."""
    _check_releases(stack, doc, loc, releases)
    if stack.cuda and stack.framework:
        problem = cuda_build_problem(stack.framework, stack.framework_version, stack.cuda)
        if problem:
            raise doc.error((*loc, "cuda"), problem)


def check_image_files(spec: MatrixSpec, doc: LocatedYaml) -> None:
    """The images section's files there (its paths already absolute)."""
    for key in ("wheelhouse", "ca_bundle"):
        given = getattr(spec.images, key)
        if given and not (Path(given).is_dir() if key == "wheelhouse" else Path(given).is_file()):
            raise doc.error(("images", key), f"{given} does not exist")


def check_workloads(spec: MatrixSpec, doc: LocatedYaml) -> None:
    """Each workload known, its parameters its own; then the rules and the job."""
    workloads = workloads_of(spec)
    for index, entry in enumerate(spec.workloads):
        try:
            info = workloads.load(entry.name)
        except (UnknownWorkloadError, WorkloadPackageError) as exc:
            raise doc.error(("workloads", index, "name"), str(exc)) from None
        _check_params(entry, info, doc, ("workloads", index))
    names = {
        "hardware": {h.name for h in spec.hardware},
        "stack": {s.name for s in spec.stacks},
        "workload": {w.name for w in spec.workloads},
    }
    for section in ("include", "exclude"):
        for index, rule in enumerate(getattr(spec, section)):
            _check_rule(rule, names, doc, (section, index), needs_workload=section == "include",
                        scope=workloads)
    _check_job(spec, names["workload"], doc)


def _check_job(spec: MatrixSpec, workloads: set[str], doc: LocatedYaml) -> None:
    """The job's workload is one the matrix runs; it may go unnamed where there is one."""
    if spec.job is None:
        return
    if spec.job.workload is None and len(workloads) > 1:
        raise doc.error(("job",), f"name the job's workload (workload: one of "
                                  f"{', '.join(sorted(workloads))}): the matrix runs several")
    if spec.job.workload is not None and spec.job.workload not in workloads:
        raise doc.error(("job", "workload"), f"{spec.job.workload!r} is not a workload of "
                                             f"this matrix ({', '.join(sorted(workloads))})")


def _check_releases(stack: Stack, doc: LocatedYaml, loc: PathKey,
                    releases: ReleaseIndex | None) -> None:
    """A Python the worker cannot run on, or a framework version never released: refused;
    a framework version newer than the release table: looked up on `releases`, refused if it
    is not there, a warning if it could not be asked."""
    if stack.python and tuple(int(p) for p in stack.python.split(".")[:2]) < WORKER_PYTHON:
        raise doc.error((*loc, "python"), f"the worker runs on Python "
                                          f"{'.'.join(map(str, WORKER_PYTHON))} or newer, "
                                          f"so no cell could run on Python {stack.python}")
    if stack.framework and stack.framework_version:
        error, warning = release_problem(stack.framework, stack.framework_version)
        if error:
            raise doc.error((*loc, "framework_version"), error)
        if warning:
            answer = releases.released(stack.framework, stack.framework_version) if releases \
                else "unchecked"
            if answer == "absent":
                assert releases is not None
                raise doc.error((*loc, "framework_version"),
                                f"{stack.framework} {stack.framework_version} is not a "
                                f"release on the package index {releases.shown}")
            if answer == "unchecked":
                why = releases.why_unchecked if releases else "`matrix validate` asks the index"
                warnings.warn(str(doc.error((*loc, "framework_version"), f"{warning} ({why})")),
                              SpecWarning, stacklevel=2)


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
                needs_workload: bool, scope: Workloads) -> None:
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
            if not any(key in scope.load(w).params for w in workloads):
                raise doc.error((*loc, "params", key), f"no workload of this rule has "
                                                         f"a parameter {key!r}")
            if needs_workload:
                _check_values(key, values, scope.load(workloads[0]), doc, (*loc, "params", key))
