"""Reading a matrix file: with line numbers, against the schema (model.py), names unique,
image paths and a user's workload folders made absolute, and the matrix's own workloads read
into the `Workloads` it carries (spec/loaded.py). `read_spec` gives the matrix and its
located document; the whole validation, which asks the registries, the images and the plan
too, is orchestrator/validate/'s `load_spec`, the only way a command takes a matrix in.
Every problem becomes a SpecError naming the file, the line and the field.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from orchestrator.spec.command_workloads import CommandWorkloadError
from orchestrator.spec.command_workloads import declaration as command_declaration
from orchestrator.spec.loaded import loaded
from orchestrator.spec.located_yaml import LocatedYaml, PathKey, read_yaml
from orchestrator.spec.model import MatrixSpec, WorkloadEntry, resolve_image_paths
from orchestrator.spec.schema_errors import schema_error
from orchestrator.workload_registry import WorkloadFolderError
from orchestrator.workload_scope import Workloads


def read_spec(path: Path | str, context: dict[str, Any]) -> tuple[MatrixSpec, LocatedYaml]:
    """The matrix file as its schema reads it, its entries' own keys by the registries'
    `context` (registry/providers.py: validation_context), with its own workloads, and its
    document (for located errors); SpecError on the first problem found."""
    doc = read_yaml(Path(path))
    if not isinstance(doc.data, dict):
        kind = "empty" if doc.data is None else "a list" if isinstance(doc.data, list) \
            else "a single value"
        raise doc.error((), f"the top level must be a mapping of keys (name, hardware, ...), "
                            f"but the file is {kind}")
    try:
        spec = MatrixSpec.model_validate(doc.data, context=context)
    except ValidationError as exc:
        raise schema_error(doc, exc, MatrixSpec, context) from None
    spec = spec.model_copy(update={"images": resolve_image_paths(spec.images, doc.path.parent)})
    _check_unique_names(spec, doc)
    return _with_workload_folders(spec, doc), doc


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


def _check_unique_names(spec: MatrixSpec, doc: LocatedYaml) -> None:
    for section in ("hardware", "stacks", "workloads"):
        seen: set[str] = set()
        for index, item in enumerate(getattr(spec, section)):
            if item.name in seen:
                raise doc.error((section, index, "name"), f"duplicate name {item.name!r}")
            seen.add(item.name)


