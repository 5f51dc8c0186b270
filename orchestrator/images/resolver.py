"""Locks made by a resolver: `matrix lock MATRIX [--stack NAME]` resolves each image stack's
packages with uv (`uv pip compile --generate-hashes`) for the stack's Python and the images'
platform, whatever machine it runs on, and writes `<locks>/<stack>.txt` with a header that
says how it was made. The package index serves the CUDA builds of torch and TensorFlow's
CUDA wheels for Linux with their hashes, so a CUDA stack is locked from it like any other;
a stack whose build lives elsewhere (PyTorch's CPU index, an older CUDA) names that index
in `index_url`, which the resolver and the image's pip both use.

What a stack needs: its framework at its version (TensorFlow with its CUDA extra where the
stack declares CUDA), numpy, nvidia-ml-py for the worker's GPU telemetry on a CUDA stack,
and what the matrix's workloads that can run on it declare in `requires` (keras for
keras_lstm). The lock is checked against the stack as any lock is (locks.py).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.images.locks import DEFAULT_PYTHON, PLATFORM, check_lock
from orchestrator.images.ref import ImageError
from orchestrator.spec.release_index import ReleaseIndex

if TYPE_CHECKING:
    from orchestrator.spec.model import MatrixSpec, Stack

# uv's own index settings, which would mix another index into a lock made from this one
INDEX_SETTINGS = ("UV_INDEX", "UV_INDEX_URL", "UV_EXTRA_INDEX_URL", "UV_DEFAULT_INDEX",
                  "UV_FIND_LINKS", "UV_NO_INDEX")
RESOLVE_TIMEOUT_S = 600  # a cold resolution of TensorFlow's CUDA set takes about 10 s


class LockError(ImageError):
    """A lock the resolver could not make: no uv, a stack without an image, no resolution."""


@dataclass(frozen=True)
class Made:
    stack: str
    path: Path
    packages: int


def stack_requirements(spec: MatrixSpec, stack: Stack) -> list[str]:
    """The requirements a stack's image installs (see the module's docstring)."""
    from orchestrator.spec.loaded import workloads_of

    version = f"=={stack.framework_version}" if stack.framework_version else ""
    framework = {
        "torch": [f"torch{version}"],
        "tensorflow": [f"tensorflow[and-cuda]{version}" if stack.cuda else
                       f"tensorflow{version}"],
        "jax": [f"jax[cuda{str(stack.cuda).split('.')[0]}]{version}" if stack.cuda else
                f"jax{version}"],
    }.get(str(stack.framework), [])
    needs = [*framework, "numpy", *(["nvidia-ml-py"] if stack.cuda else [])]
    for entry in spec.workloads:
        info = workloads_of(spec).load(entry.name)
        if info.framework in (None, stack.framework):
            needs += [r for r in info.requires if r not in needs]
    return needs


def make_locks(spec: MatrixSpec, names: list[str], say: Callable[[str], None]) -> list[Made]:
    """Resolve and write the lock of each image stack named (every one, if none is), each
    checked against its stack before it is written; LockError for a stack that is not one
    the matrix builds an image of, or a resolution that fails."""
    from orchestrator.registry.executors import needs_image

    stacks = {s.name: s for s in spec.stacks if needs_image(s)}
    if not stacks:  # once: exit 0, and not a word
        executors = sorted({s.effective_executor for s in spec.stacks})
        raise LockError(f"nothing to lock: no stack of matrix {spec.name!r} runs in an image "
                        f"(its stacks run with {', '.join(executors)}, in this Python)")
    unknown = [n for n in names if n not in stacks]
    if unknown:
        raise LockError(f"--stack {unknown[0]}: no stack of the matrix with that name runs in "
                        f"an image (those that do: {', '.join(stacks) or 'none'})")
    folder = Path(str(spec.images.locks))
    made = []
    for name in names or list(stacks):
        stack = stacks[name]
        lock = resolve(stack, stack_requirements(spec, stack), ReleaseIndex.here())
        path = folder / f"{name}.txt"
        check_lock(stack, lock, path)
        folder.mkdir(parents=True, exist_ok=True)
        path.write_text(lock, encoding="utf-8")
        count = sum(1 for line in lock.splitlines() if "==" in line and not line.startswith("#"))
        say(f"{path}: {count} packages pinned with their hashes, for Python "
            f"{stack.python or DEFAULT_PYTHON} on {PLATFORM}")
        made.append(Made(name, path, count))
    return made


def resolve(stack: Stack, requirements: list[str], index: ReleaseIndex) -> str:
    """The lock file's text: uv's hash-pinned resolution under a header of how it was made.
    The index URL reaches uv through its environment (a password in it never appears in
    a process list, the header, or an error)."""
    uv = uv_binary()
    python = stack.python or DEFAULT_PYTHON
    env = {k: v for k, v in os.environ.items() if k not in INDEX_SETTINGS}
    env["UV_DEFAULT_INDEX"] = index.url
    if stack.index_url:
        env["UV_INDEX"] = stack.index_url  # before the default: its builds win
    with tempfile.TemporaryDirectory(prefix="matrix-lock-") as scratch:
        wanted = Path(scratch) / "requirements.in"
        wanted.write_text("\n".join(requirements) + "\n", encoding="utf-8")
        try:
            done = subprocess.run(
                [uv, "pip", "compile", str(wanted), "--python-version", python,
                 "--python-platform", PLATFORM, "--generate-hashes", "--no-header",
                 "--no-config", "--quiet", "--index-strategy", "first-index"],
                capture_output=True, text=True, env=env, cwd=scratch,
                timeout=RESOLVE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise LockError(f"stack {stack.name}: uv did not resolve its packages in "
                            f"{RESOLVE_TIMEOUT_S} s (is the package index {index.shown} "
                            "reachable?)") from None
    if done.returncode != 0:
        problem = " ".join(done.stderr.split())[-600:] or f"exit code {done.returncode}"
        for secret in filter(None, (index.url, stack.index_url)):
            problem = problem.replace(secret, "<index>")
        raise LockError(f"stack {stack.name}: uv could not resolve {', '.join(requirements)}: "
                        f"{problem}")
    version = subprocess.run([uv, "--version"], capture_output=True, text=True,
                             timeout=30).stdout.split()[1:2] or ["?"]
    extra = f" and {ReleaseIndex(stack.index_url).shown}" if stack.index_url else ""
    today = datetime.now(UTC).date().isoformat()
    header = (f"# Made by `matrix lock` for stack {stack.name} on {today}:\n"
              f"# uv {version[0]} (`uv pip compile --generate-hashes`) from {index.shown}{extra}\n"
              f"# for: {', '.join(requirements)}\n"
              f"# python: {python}\n# platform: {PLATFORM}\n")
    return header + done.stdout


def uv_binary() -> str:
    """uv's executable: the one its Python package carries (a dependency of matrix-bench),
    else one on PATH."""
    try:
        from uv import find_uv_bin

        return str(find_uv_bin())
    except (ImportError, FileNotFoundError):
        found = shutil.which("uv")
        if found is None:
            raise LockError("uv is not installed here (pip install uv); or lock from a "
                            "folder of wheels: matrix lock --wheelhouse DIR -o FILE") from None
        return found
