"""Lock files: every Python package of a stack image, pinned with a hash. A lock is checked
against the stack it builds: hashes present, the framework at the declared version, the
CUDA and cuDNN its NVIDIA wheels carry against the stack's `cuda` and `cudnn` (a major-only
pin, "12", matches any 12.x), and the Python and platform its header says it was made for
(resolver.py writes it; a lock from a wheelhouse says its Python where its wheels do).
`matrix lock` writes one with the resolver, or from a wheelhouse."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.images.ref import ImageError
from orchestrator.worker.stack_check import FRAMEWORK_DISTRIBUTIONS, version_matches

if TYPE_CHECKING:
    from orchestrator.spec.model import Stack

DEFAULT_PYTHON = "3.11"  # a stack's Python where it declares none (its base image's)
PLATFORM = "x86_64-manylinux_2_28"  # what stack images run on (uv's name for it)
# the NVIDIA wheels whose version is the CUDA runtime's, and cuDNN's ("-cu12" or none: 13)
CUDA_RUNTIME = re.compile(r"nvidia-cuda-runtime(-cu\d+)?")
CUDNN = re.compile(r"nvidia-cudnn(-cu\d+)?")


def check_lock(stack: Stack, lock: str, path: Path) -> None:
    pins = lock_pins(lock)
    unhashed = [line.split()[0] for line in _requirement_lines(lock) if "--hash=" not in line]
    if unhashed:
        raise ImageError(f"stack {stack.name}: {path} pins without --hash: "
                         f"{', '.join(unhashed[:5])}")
    if stack.framework and stack.framework_version:
        names = FRAMEWORK_DISTRIBUTIONS.get(stack.framework, (stack.framework,))
        pinned = next((pins[n] for n in names if n in pins), None)
        if pinned is None or not version_matches(stack.framework_version, pinned):
            raise ImageError(f"stack {stack.name} declares {stack.framework} "
                             f"{stack.framework_version}, its lock {path} pins "
                             f"{pinned or 'no ' + stack.framework}")
    for problem in (_cuda_problem(stack, pins), _made_for_problem(stack, lock)):
        if problem:
            raise ImageError(f"stack {stack.name}: its lock {path} {problem} (make it "
                             f"again: matrix lock MATRIX --stack {stack.name})")


def locked_cuda(pins: dict[str, str]) -> tuple[str | None, str | None]:
    """The CUDA runtime and cuDNN versions a lock's NVIDIA wheels carry (None: none)."""
    runtime = next((v for n, v in pins.items() if CUDA_RUNTIME.fullmatch(n)), None)
    cudnn = next((v for n, v in pins.items() if CUDNN.fullmatch(n)), None)
    return runtime, cudnn


def _cuda_problem(stack: Stack, pins: dict[str, str]) -> str | None:
    runtime, cudnn = locked_cuda(pins)
    if stack.cuda and runtime is None:
        return f"carries no CUDA runtime (nvidia-cuda-runtime), the stack declares {stack.cuda}"
    if stack.cuda and runtime and not version_matches(stack.cuda, runtime):
        variant = "cu" + "".join(stack.cuda.split(".")[:2])
        where = (f"; a CUDA build the package index does not serve by default is on "
                 f"PyTorch's: index_url: https://download.pytorch.org/whl/{variant}"
                 if stack.framework == "torch" and not stack.index_url else "")
        return f"carries CUDA {runtime}, the stack declares cuda {stack.cuda}{where}"
    if not stack.cuda and runtime:
        return (f"carries CUDA {runtime}, the stack declares no cuda (declare it, or lock "
                "the CPU build: index_url https://download.pytorch.org/whl/cpu)")
    if stack.cudnn and cudnn is None:
        return f"carries no cuDNN (nvidia-cudnn), the stack declares {stack.cudnn}"
    if stack.cudnn and cudnn and not version_matches(stack.cudnn, cudnn):
        return f"carries cuDNN {cudnn}, the stack declares cudnn {stack.cudnn}"
    return None


def _made_for_problem(stack: Stack, lock: str) -> str | None:
    """Where the lock's header says which Python and platform it was made for, they must be
    the stack's; a lock without such lines (written by hand) is not judged on them."""
    said = dict(re.findall(r"(?m)^# (python|platform): (\S+)$", lock))
    python = stack.python or DEFAULT_PYTHON
    if "python" in said and said["python"] != python:
        return f"was made for Python {said['python']}, the stack runs {python}"
    if "platform" in said and said["platform"] != PLATFORM:
        return f"was made for {said['platform']}, stack images run on {PLATFORM}"
    return None


def _requirement_lines(lock: str) -> list[str]:
    """Logical lines (backslash continuations joined), comments and blanks dropped."""
    joined = re.sub(r"\\\s*\n", " ", lock)
    return [line.strip() for line in joined.splitlines()
            if line.strip() and not line.strip().startswith("#")]


def lock_pins(lock: str) -> dict[str, str]:
    """{normalised distribution name: version} of a lock file's `name==version` lines."""
    pins = {}
    for line in _requirement_lines(lock):
        match = re.match(r"([A-Za-z0-9._-]+)(?:\[[^\]]*\])?==([^\s;]+)", line)
        if match:
            pins[normalise(match.group(1))] = match.group(2)
    return pins


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def lock_from_wheelhouse(wheelhouse: Path) -> str:
    """A lock file pinning every wheel of a folder (as `pip download -d` leaves it) by hash."""
    lines = []
    for wheel in sorted(wheelhouse.glob("*.whl")):
        name, version = wheel.name.split("-")[:2]
        sha = hashlib.sha256(wheel.read_bytes()).hexdigest()
        lines.append(f"{normalise(name)}=={version} --hash=sha256:{sha}")
    if not lines:
        raise ImageError(f"{wheelhouse} holds no wheels (fill it with pip download -d)")
    others = sorted(p.name for p in wheelhouse.iterdir() if p.suffix != ".whl")
    if others:
        raise ImageError(f"{wheelhouse} holds files that are not wheels: {', '.join(others)}")
    return "# Generated by `matrix lock` from a wheelhouse: every package, pinned by hash.\n" + \
        "\n".join(lines) + "\n"

