"""`load_spec`: a matrix file read and checked, every check in the order a reader meets the
file (repeats, hardware and stacks, workloads, rules, the job, the grid, its
configurations); the first problem is one located line (SpecError). The checks that need
only the matrix are spec/checks.py's; those that ask the registries, the images or the plan
are here.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.images.locks import lock_pins, normalise
from orchestrator.plan.cells import check_grid, expand
from orchestrator.registry.cell_run import Cell
from orchestrator.registry.executors import executor_names, needs_image
from orchestrator.registry.providers import (
    ProviderLoadError,
    hardware_kinds,
    provider_for,
    providers,
    validation_context,
)
from orchestrator.spec.checks import (
    check_image_files,
    check_repeats,
    check_stack_pins,
    check_stack_releases,
    check_workloads,
)
from orchestrator.spec.load import read_spec
from orchestrator.spec.loaded import workloads_of
from orchestrator.spec.located_yaml import LocatedYaml, PathKey
from orchestrator.spec.model import Images, MatrixSpec, Stack
from orchestrator.workload_packages import package_workloads

if TYPE_CHECKING:
    from orchestrator.spec.release_index import ReleaseIndex


def load_spec(path: Path | str, releases: ReleaseIndex | None = None) -> MatrixSpec:
    """Read, validate and check a matrix file; SpecError on the first problem found. With
    `releases`, a framework version newer than the release tables is looked up there."""
    spec, doc = read_spec(path, validation_context())
    check_repeats(spec, doc)
    _check_registered(spec, doc)
    for provider in providers():
        if found := provider.matrix_problem(spec):
            raise doc.error(*found)
    for index, stack in enumerate(spec.stacks):
        check_stack_pins(stack, doc, ("stacks", index))
        if needs_image(stack):
            _check_image_stack(stack, spec.images, doc, ("stacks", index))
        check_stack_releases(stack, doc, ("stacks", index), releases)
    check_image_files(spec, doc)
    check_workloads(spec, doc)
    check_grid(spec, doc)
    cells = expand(spec)
    _check_configurations(spec, cells, doc)
    _check_package_locks(spec, cells, doc)
    return spec


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
        try:
            provider = provider_for(hardware.kind)
        except ProviderLoadError as exc:  # a broken plugin refuses only its own kinds
            raise doc.error(("hardware", index, "kind"), str(exc)) from None
        if problem := provider.hardware_problem(hardware):
            raise doc.error(("hardware", index), problem)


def _check_configurations(spec: MatrixSpec, cells: list[Cell], doc: LocatedYaml) -> None:
    """Each configuration as its workload's own checks (checks.py) judge it: the first one
    refused is one line, at the parameter the matrix sets (or the workload's entry)."""
    seen: set[str] = set()
    workloads = workloads_of(spec)
    checks = {name: workloads.configuration_check(name) for name in {c.workload for c in cells}}
    for cell in cells:
        check = checks[cell.workload]
        if check is None or cell.config_id in seen:
            continue
        seen.add(cell.config_id)
        found = check(cell.params, cell.hardware.gpus, cell.hardware.nodes)
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


def _check_image_stack(stack: Stack, images: Images, doc: LocatedYaml, loc: PathKey) -> None:
    if stack.framework is None:
        raise doc.error((*loc, "name"), "a stack that runs in an image names its framework "
                                        "(torch, tensorflow or jax)")
    if stack.cuda and not stack.base_image:
        raise doc.error((*loc, "cuda"), "a CUDA stack names its base_image, e.g. "
                                        "nvidia/cuda:12.4.1-cudnn-runtime-ubuntu22.04")
    # The lock file is a build input, checked where the image is rendered (plan shows it,
    # validate notes it): an example matrix stays readable before its lock is written.


