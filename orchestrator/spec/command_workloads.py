"""Workloads that are a user's own training script, run as it is (`command:` in a matrix):

    workloads:
      - name: my_script
        command: ["python", "train.py", "--batch-size", "{batch_size}"]
        params: {batch_size: [16, 32]}
        item_unit: sample

The matrix declares what a folder's `defaults.yaml` would: each parameter's type (inferred
from its values, or given in `param_types`) with its first value as the default, the item
unit, the script's own metrics. Placeholders name parameters (or `epochs`) and are filled
in as whole arguments, never through a shell. The command runs in `cwd` (default: the matrix
file's folder).

What identity hashes and what an image carries are two lists. The workload's version hashes
(code_identity.py, by what the code says) the files its `files:` globs name under `cwd`,
else the script its command names plus, in a git work tree, the tracked code files under
`cwd`: never a file the script writes, nor a matrix file. A stack image carries all of the
folder's code (`CWD_CODE`, outside `SKIPPED_FOLDERS`): the modules a script imports travel
with it whether or not they are declared.

The worker runs the command (worker/command.py); the script reports its steps through
`matrix_bench` (worker/client.py), or, without it, gets one row timed as a whole.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import shlex
import string
from collections.abc import Mapping, Sequence
from pathlib import Path

import yaml

from orchestrator.code_identity import HASH_LENGTH, code_hash, git_tracked
from orchestrator.errors import MatrixError
from orchestrator.flop_claims import FlopClaimError, flops_per_item, names_in
from orchestrator.spec.model import WorkloadEntry, entry_grid
from orchestrator.workload_registry import ParamDecl, Scalar, WorkloadInfo

COMMAND_VERSION = "command"  # the declared part of every command workload's version
BUILT_IN_PLACEHOLDERS = ("epochs",)  # filled in besides the parameters
CWD_CODE = (".py", ".sh", ".yaml", ".yml", ".toml", ".json", ".cfg", ".ini", ".txt")
# folders that hold no code of the script's, or that change on every run (reports/)
SKIPPED_FOLDERS = {"__pycache__", "reports", "node_modules", "venv", "build", "dist"}
MAX_CODE_FILES = 2000
MAX_CODE_BYTES = 50 * 2**20
MAX_CLAIM_CHECKS = 10_000  # combinations of a grid a FLOP expression is checked against


class CommandWorkloadError(MatrixError):
    """A command workload the matrix declares wrongly; `key` locates it in the entry."""

    def __init__(self, key: tuple[str | int, ...], problem: str) -> None:
        super().__init__(problem)
        self.key = key
        self.problem = problem


def declaration(entry: WorkloadEntry, cwd: Path,
                matrix_file: Path | None = None) -> tuple[WorkloadInfo, list[Path]]:
    """What the matrix declares of the command workload `entry`, run in `cwd`, and the code
    there its images carry (`cwd_code`, the matrix file itself left out: editing it moves no
    id and rebuilds no image); the version hashes the command, the declarations and the
    code `identity_files` names."""
    assert entry.command is not None
    params = {name: _param(name, values, entry.param_types.get(name))
              for name, values in entry_grid(entry).items()}
    for name in entry.param_types:
        if name not in params:
            raise CommandWorkloadError(("param_types", name), f"{name!r} is not a parameter of "
                                                              "this workload (params)")
    for index, argument in enumerate(entry.command):
        for name in placeholders(argument, ("command", index)):
            if name not in params and name not in BUILT_IN_PLACEHOLDERS:
                known = ", ".join([*params, *BUILT_IN_PLACEHOLDERS])
                raise CommandWorkloadError(("command", index), (
                    f"the placeholder {{{name}}} names no parameter (known: {known}); write "
                    "{{ and }} for literal braces"))
    if entry.flops_per_item is not None:
        _check_flop_claim(entry, params)
    declared = {"command": entry.command, "params": {k: d.type for k, d in params.items()},
                "item_unit": entry.item_unit, "metrics": entry.metrics}
    digest = hashlib.sha256(json.dumps(declared, sort_keys=True).encode())
    code = [p for p in cwd_code(cwd) if matrix_file is None or p != matrix_file.resolve()]
    its_code = code_hash(identity_files(entry, cwd, matrix_file), cwd)
    if entry.code_hash:
        digest.update(its_code.encode())
    # "+": a version that moves with the code (plan/identity.code_free_version); "-": one
    # that does not (code_hash: false), its declaration's hash alone
    joint = "+" if entry.code_hash else "-"
    return WorkloadInfo(
        name=entry.name, version=f"{COMMAND_VERSION}{joint}{digest.hexdigest()[:HASH_LENGTH]}",
        description=f"command: {shlex.join(entry.command)}",
        item_unit=entry.item_unit or "sample", params=params, metrics=tuple(entry.metrics),
        code_hash=entry.code_hash, code=its_code, flops_per_item=entry.flops_per_item), code


def _check_flop_claim(entry: WorkloadEntry, params: Mapping[str, ParamDecl]) -> None:
    """CommandWorkloadError unless `flops_per_item` reads only numeric parameters and
    gives a positive count for each of the entry's values (flop_claims.py)."""
    assert entry.flops_per_item is not None
    claim, key = entry.flops_per_item, ("flops_per_item",)
    try:
        for name in sorted(names_in(claim)):
            if name not in params or params[name].type not in ("int", "float"):
                numeric = ", ".join(n for n, d in params.items() if d.type in ("int", "float"))
                raise FlopClaimError(f"{name!r} names no numeric parameter of this workload "
                                     f"(numeric: {numeric or 'none'})")
        grid = entry_grid(entry)
        for values in itertools.islice(itertools.product(*grid.values()), MAX_CLAIM_CHECKS):
            flops_per_item(claim, dict(zip(grid, values, strict=True)))
    except FlopClaimError as exc:
        raise CommandWorkloadError(key, str(exc)) from None


def declares_command(info: WorkloadInfo) -> bool:
    """Whether `info` is a command workload's declaration (a run's recorded one, say)."""
    return info.version.startswith((f"{COMMAND_VERSION}+", f"{COMMAND_VERSION}-"))


def placeholders(argument: str, key: tuple[str | int, ...] = ()) -> list[str]:
    """The parameter names `argument` holds as {name}; CommandWorkloadError for a field that
    is not a plain name ({}, {0}, {a.b}) or unbalanced braces."""
    try:
        fields = [field for _, field, _, _ in string.Formatter().parse(argument)
                  if field is not None]
    except ValueError as exc:
        raise CommandWorkloadError(key, f"{argument!r}: {exc} (write {{{{ and }}}} for "
                                        "literal braces)") from None
    for field in fields:
        if not field.isidentifier():
            raise CommandWorkloadError(key, f"{argument!r}: a placeholder names a parameter, "
                                            f"as {{batch_size}}; {{{field}}} does not")
    return fields


def substitute(command: Sequence[str], params: Mapping[str, Scalar],
               epochs: int) -> tuple[str, ...]:
    """The cell's argument list: each placeholder replaced by its value, each argument
    still one argument whatever the value holds (spaces, quotes, semicolons)."""
    values = {**params, "epochs": epochs}
    return tuple(string.Formatter().vformat(argument, (), values) for argument in command)


def cwd_code(cwd: Path) -> list[Path]:
    """The code in the command's folder (CWD_CODE files, hidden and SKIPPED_FOLDERS left
    out): what its version hashes and what a stack image carries. CommandWorkloadError when
    the folder holds more than a script's worth (MAX_CODE_FILES, MAX_CODE_BYTES)."""
    found: list[Path] = []
    size = 0
    for root, folders, files in os.walk(cwd):
        folders[:] = sorted(f for f in folders if not f.startswith((".", "_"))
                            and f not in SKIPPED_FOLDERS and not f.endswith(".egg-info"))
        for name in sorted(files):
            path = Path(root) / name
            if path.suffix in CWD_CODE and not name.startswith(".") and path.is_file():
                found.append(path)
                size += path.stat().st_size
        if len(found) > MAX_CODE_FILES or size > MAX_CODE_BYTES:
            raise CommandWorkloadError(("cwd",), (
                f"{cwd} holds more than {MAX_CODE_FILES} code files or "
                f"{MAX_CODE_BYTES // 2**20} MB of them: give the command a folder of its own "
                "(cwd:), which is hashed into its version and carried into images"))
    return found


def identity_files(entry: WorkloadEntry, cwd: Path,
                   matrix_file: Path | None = None) -> list[Path]:
    """The files a command workload's version hashes: those its `files:` globs name under
    `cwd`, else the script its command names plus, in a git work tree, the tracked code
    files under `cwd`; a matrix file never. CommandWorkloadError for a glob that leaves
    `cwd` or matches nothing."""
    found: set[Path] = set()
    for index, pattern in enumerate(entry.files):
        if Path(pattern).is_absolute() or ".." in Path(pattern).parts:
            raise CommandWorkloadError(("files", index), f"{pattern!r}: a glob under the "
                                                         f"command's folder {cwd}, without '..'")
        matched = {p for p in cwd.glob(pattern) if p.is_file()}
        if not matched:
            raise CommandWorkloadError(("files", index), f"{pattern!r} matches no file in {cwd}")
        found |= matched
    if not entry.files:
        assert entry.command is not None
        found = {cwd / a for a in entry.command if Path(a).suffix in CWD_CODE and "{" not in a
                 and (cwd / a).is_file()} | _tracked_code(cwd)
    skipped = {matrix_file.resolve()} if matrix_file else set()
    chosen = sorted(p for p in found if p.resolve() not in skipped and not _is_matrix(p))
    if len(chosen) > MAX_CODE_FILES or sum(p.stat().st_size for p in chosen) > MAX_CODE_BYTES:
        raise CommandWorkloadError(("files",), (
            f"the command's code is more than {MAX_CODE_FILES} files or "
            f"{MAX_CODE_BYTES // 2**20} MB: name the script's own files (files:)"))
    return chosen


def _tracked_code(cwd: Path) -> set[Path]:
    """The code files under `cwd` that git tracks (CWD_CODE, outside SKIPPED_FOLDERS)."""
    return {cwd / name for name in git_tracked(cwd) if name.suffix in CWD_CODE
            and not set(name.parts[:-1]) & SKIPPED_FOLDERS and (cwd / name).is_file()}


def _is_matrix(path: Path) -> bool:
    """Whether `path` is a matrix file (a mapping with hardware and workloads), which is
    what the script is run by, not its code."""
    if path.suffix not in (".yaml", ".yml"):
        return False
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return False
    return isinstance(data, dict) and {"hardware", "workloads"} <= data.keys()


def _param(name: str, values: list[Scalar], given: str | None) -> ParamDecl:
    kinds = {bool if isinstance(v, bool) else type(v) for v in values}
    inferred = ("bool" if kinds == {bool} else "int" if kinds == {int} else
                "float" if kinds <= {int, float} else "str" if kinds == {str} else None)
    if given is None and inferred is None:
        raise CommandWorkloadError(("params", name), (
            f"its values mix types ({', '.join(sorted(k.__name__ for k in kinds))}): give "
            f"its type in param_types"))
    kind = given or inferred
    probe = ParamDecl.model_construct(type=kind, default=values[0])
    for value in values:
        if problem := probe.problem_with(value):
            raise CommandWorkloadError(("params", name), f"param_types says {kind}: {problem}")
    return ParamDecl(type=kind, default=values[0])  # type: ignore[arg-type]
