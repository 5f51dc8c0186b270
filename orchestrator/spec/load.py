"""Loading a matrix file: read it with line numbers, validate it against the schema
(model.py), then check what the schema cannot: names unique, executors and hardware kinds
registered, each provider's settings whole, pins and releases real, parameters known to
their workload, rules that match, and a grid within `max_cells`.

`load_spec(path)` is the only way in; every problem becomes a SpecError naming the file,
the line and the field, and saying what was expected. The schema for editors is
json_schema.py's.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import ValidationError

from orchestrator.command_workloads import CommandWorkloadError
from orchestrator.command_workloads import declaration as command_declaration
from orchestrator.errors import SpecWarning, UnknownWorkloadError
from orchestrator.executors import executor_names, needs_image
from orchestrator.images.locks import lock_pins, normalise
from orchestrator.plan.cells import Cell, check_grid, expand
from orchestrator.providers import hardware_kinds, provider_for, providers
from orchestrator.spec.framework_builds import cuda_build_problem, release_problem
from orchestrator.spec.loaded import loaded, workloads_of
from orchestrator.spec.located_yaml import LocatedYaml, PathKey, read_yaml
from orchestrator.spec.model import (
    WORKER_PYTHON,
    Images,
    MatrixSpec,
    RepeatPolicy,
    Rule,
    Stack,
    WorkloadEntry,
    entry_grid,
    resolve_image_paths,
)
from orchestrator.spec.schema_errors import schema_error
from orchestrator.workload_packages import WorkloadPackageError, package_workloads
from orchestrator.workload_registry import Scalar, WorkloadFolderError, WorkloadInfo
from orchestrator.workload_scope import Workloads

if TYPE_CHECKING:
    from orchestrator.spec.release_index import ReleaseIndex


def load_spec(path: Path | str, releases: ReleaseIndex | None = None) -> MatrixSpec:
    """Read, validate and check a matrix file; SpecError on the first problem found. With
    `releases`, a framework version newer than the release tables is looked up there."""
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
    _check_unique_names(spec, doc)
    spec = _with_workload_folders(spec, doc)
    _check_semantics(spec, doc, releases)
    return spec


def _with_workload_folders(spec: MatrixSpec, doc: LocatedYaml) -> MatrixSpec:
    """Read each `path:` and `command:` workload (its folder made absolute, against the
    matrix file's folder) into the matrix's own workloads, which the spec carries from here
    on (spec/loaded.py): the checks below and everything after know it, no other matrix."""
    entries = []
    workloads = Workloads()
    for index, entry in enumerate(spec.workloads):
        if entry.command is not None:
            entry, workloads = _with_command(entry, doc, ("workloads", index), workloads)
        else:
            for key in COMMAND_ONLY:
                if getattr(entry, key) != WorkloadEntry.model_fields[key].get_default(
                        call_default_factory=True):
                    raise doc.error(("workloads", index, key), "only a command workload "
                                    "(command:) takes this: a folder or package declares it "
                                    "in its defaults.yaml")
        if entry.path is not None:
            folder = _resolved(doc.path.parent / Path(entry.path).expanduser(), doc,
                               ("workloads", index, "path"))
            try:
                workloads = workloads.with_folder(entry.name, folder)
            except WorkloadFolderError as exc:
                raise doc.error(("workloads", index, "path"), str(exc)) from None
            entry = entry.model_copy(update={"path": str(folder)})
        entries.append(entry)
    return loaded(spec.model_copy(update={"workloads": entries}), workloads)


COMMAND_ONLY = ("cwd", "files", "code_hash", "item_unit", "param_types", "metrics",
                "flops_per_item")


def _resolved(path: Path, doc: LocatedYaml, loc: PathKey) -> Path:
    """`path` made absolute, links followed; a located error for a link loop."""
    try:
        return path.resolve()
    except (RuntimeError, OSError) as exc:  # "Symlink loop from ...", ELOOP
        raise doc.error(loc, f"{path} cannot be followed: a loop of links ({exc})") from None


def _with_command(entry: WorkloadEntry, doc: LocatedYaml, loc: PathKey,
                  workloads: Workloads) -> tuple[WorkloadEntry, Workloads]:
    """A command workload's entry with its folder made absolute, and `workloads` with its
    declaration."""
    if entry.path is not None:
        raise doc.error((*loc, "command"), "a workload is a folder (path:) or a command "
                                           "(command:), not both")
    if entry.profile:
        raise doc.error((*loc, "profile"), "the worker profiles the epochs it times itself: "
                                           "a command's script runs its own loop (profile it "
                                           "with torch.profiler in the script)")
    cwd = _resolved(doc.path.parent / Path(entry.cwd or ".").expanduser(), doc, (*loc, "cwd"))
    if not cwd.is_dir():
        raise doc.error((*loc, "cwd"), f"{cwd} is not a folder")
    try:
        workloads = workloads.with_command(*command_declaration(entry, cwd, doc.path))
    except CommandWorkloadError as exc:
        raise doc.error((*loc, *exc.key), exc.problem) from None
    except WorkloadFolderError as exc:
        raise doc.error((*loc, "name"), str(exc)) from None
    return entry.model_copy(update={"cwd": str(cwd)}), workloads


def _check_semantics(spec: MatrixSpec, doc: LocatedYaml,
                     releases: ReleaseIndex | None) -> None:
    """What the schema cannot say, in the order a reader meets it; the first problem is
    raised as one located line."""
    if isinstance(spec.repeats, RepeatPolicy) and spec.repeats.max < spec.repeats.min:
        raise doc.error(("repeats", "max"), f"must be at least min ({spec.repeats.min}), got "
                                            f"{spec.repeats.max}")
    _check_registered(spec, doc)
    for provider in providers():
        if found := provider.matrix_problem(spec):
            raise doc.error(*found)
    _check_stacks(spec, doc, releases)
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
    check_grid(spec, doc)
    cells = expand(spec)
    _check_configurations(spec, cells, doc)
    _check_package_locks(spec, cells, doc)


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


def _check_configurations(spec: MatrixSpec, cells: list[Cell], doc: LocatedYaml) -> None:
    """Each configuration as its workload's own checks (checks.py) judge it: the first one
    refused is one line, at the parameter the matrix sets (or the workload's entry)."""
    seen: set[str] = set()
    for cell in cells:
        if cell.config_id in seen:
            continue
        seen.add(cell.config_id)
        found = workloads_of(spec).configuration_problem(cell.workload, cell.params,
                                                         cell.hardware.gpus)
        if found is not None:
            param, problem = found
            index = next(i for i, w in enumerate(spec.workloads) if w.name == cell.workload)
            entry = spec.workloads[index]
            loc: PathKey = ("workloads", index, "params", param) if param in entry.params \
                else ("workloads", index, param) if param in ("preset", "dataset") and \
                getattr(entry, param) is not None else ("workloads", index)
            raise doc.error(loc, f"{problem} (on {cell.hardware.name})")


def _check_package_locks(spec: MatrixSpec, cells: list[Cell], doc: LocatedYaml) -> None:
    """An installed package's workload runs in an image stack only if the stack's lock pins
    the very release whose version its results carry. A lock not written yet is left to the
    image's own check (validate notes it)."""
    packages = {name: package_workloads()[name] for name in
                {w.name for w in spec.workloads}
                if workloads_of(spec).package_module(name) is not None}
    if not packages:
        return
    pairs = {(c.stack, c.workload) for c in cells if c.workload in packages}
    for stack, workload in sorted(pairs, key=lambda p: (p[0].name, p[1])):
        lock_path = Path(str(spec.images.locks)) / f"{stack.name}.txt"
        if not needs_image(stack) or not lock_path.is_file():
            continue
        package = packages[workload]
        pinned = lock_pins(lock_path.read_text(encoding="utf-8")).get(
            normalise(package.distribution))
        if pinned != package.distribution_version:
            found = f"pins {pinned}" if pinned else "does not pin it"
            index = next(i for i, w in enumerate(spec.workloads) if w.name == workload)
            raise doc.error(("workloads", index, "name"), (
                f"{workload} comes from the installed {package.source}, which stack "
                f"{stack.name}'s lock {lock_path} {found}: add "
                f"{package.distribution}=={package.distribution_version} with its hash to the "
                "lock, so the image runs the release the results are named after"))


def _check_unique_names(spec: MatrixSpec, doc: LocatedYaml) -> None:
    for section in ("hardware", "stacks", "workloads"):
        seen: set[str] = set()
        for index, item in enumerate(getattr(spec, section)):
            if item.name in seen:
                raise doc.error((section, index, "name"), f"duplicate name {item.name!r}")
            seen.add(item.name)


def _check_registered(spec: MatrixSpec, doc: LocatedYaml) -> None:
    """Every stack's executor and every hardware kind registered; each hardware entry as
    its provider judges it."""
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


def _check_stacks(spec: MatrixSpec, doc: LocatedYaml, releases: ReleaseIndex | None) -> None:
    """Pins well formed, releases real, images buildable, the images section's files there."""
    images = spec.images  # its paths already absolute
    for index, stack in enumerate(spec.stacks):
        _check_pins(stack, doc, ("stacks", index))
        if needs_image(stack):
            _check_image_stack(stack, images, doc, ("stacks", index))
        _check_releases(stack, doc, ("stacks", index), releases)
        if stack.cuda and stack.framework:
            problem = cuda_build_problem(stack.framework, stack.framework_version, stack.cuda)
            if problem:
                raise doc.error(("stacks", index, "cuda"), problem)
    for key in ("wheelhouse", "ca_bundle"):
        given = getattr(images, key)
        if given and not (Path(given).is_dir() if key == "wheelhouse" else Path(given).is_file()):
            raise doc.error(("images", key), f"{given} does not exist")


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
