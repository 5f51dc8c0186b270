"""What counts as a change of a user's code: the hash that a `path:` or `command:`
workload's version carries (`1+<hash>`), and so every config_id of its cells.

The hash is of what the code says, not of its bytes: a comment, a docstring, blank lines or
formatting change nothing. A Python file counts by its syntax tree (docstrings left out),
written in a canonical form that leaves out empty fields, so the same source hashes the
same on Python 3.11 and later (whose trees gain fields such as `type_params`). A YAML or
JSON file counts by the data it holds; any other file, or one that does not parse, by its
bytes. Each file counts with its path relative to the workload's folder.

`git_revision` names the commit a folder's code is at, where it is in a git work tree: the
tool's own and a user's workload's, recorded as provenance beside the hash.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import json
import os
import subprocess
from collections.abc import Iterable
from pathlib import Path

import yaml

HASH_LENGTH = 12
SKIPPED_FIELDS = frozenset({"ctx", "kind", "type_comment"})  # no meaning of the code's


def code_hash(files: Iterable[Path], root: Path) -> str:
    """The hash of `files` (under `root`) by what they say."""
    digest = hashlib.sha256()
    for path in sorted(files):
        digest.update(Path(os.path.relpath(path, root)).as_posix().encode() + b"\0")
        digest.update(canonical(path) + b"\0")
    return digest.hexdigest()[:HASH_LENGTH]


def canonical(path: Path) -> bytes:
    """The file's content as the hash sees it."""
    data = path.read_bytes()
    try:
        if path.suffix == ".py":
            tree = ast.parse(data)
            return b"py\0" + json.dumps(_plain(_without_docstrings(tree))).encode()
        if path.suffix in (".yaml", ".yml"):
            return b"yaml\0" + json.dumps(yaml.safe_load(data), sort_keys=True,
                                          default=str).encode()
        if path.suffix == ".json":
            return b"json\0" + json.dumps(json.loads(data), sort_keys=True).encode()
    except (SyntaxError, ValueError, RecursionError, yaml.YAMLError):
        pass  # not what its name says: its bytes are what it is
    return b"bytes\0" + data


def _without_docstrings(tree: ast.Module) -> ast.Module:
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                node.body = body[1:]
    return tree


def _plain(node: object) -> object:
    """A syntax tree as lists and strings: each node's type and its non-empty fields."""
    if isinstance(node, ast.AST):
        return [type(node).__name__, {
            name: _plain(value) for name, value in ast.iter_fields(node)
            if name not in SKIPPED_FIELDS and value is not None and value != []}]
    if isinstance(node, list):
        return [_plain(item) for item in node]
    return repr(node)


def _git(folder: Path, *args: str) -> str:
    """git's output in `folder`; OSError or SubprocessError where git or a work tree is not."""
    return subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True,
                          check=True, timeout=30, errors="surrogateescape").stdout


@functools.cache
def git_revision(folder: Path) -> str | None:
    """The commit of the git work tree `folder` is in ("+dirty" where its tracked files
    changed since); None outside one, or without git."""
    try:
        revision = _git(folder, "rev-parse", "HEAD").strip()
        if _git(folder, "status", "--porcelain", "--untracked-files=no", "--", ".").strip():
            revision += "+dirty"
    except (OSError, subprocess.SubprocessError):
        return None
    return revision or None


def git_tracked(folder: Path) -> list[Path]:
    """The files under `folder` that git tracks, as paths relative to it; none outside a
    work tree or without git."""
    try:
        listed = _git(folder, "ls-files", "-z", "--", ".")
    except (OSError, subprocess.SubprocessError):
        return []
    return [Path(name) for name in listed.split("\0") if name]
