"""What the Docker tests share, made once per machine or per session: a base image built
with debootstrap (no registry is reachable), a wheelhouse with CPU torch, and lock files.

The base image is cached by its tag in the engine, the wheelhouse in the user's cache, so a
second test session starts in seconds; CI builds both once per run.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from orchestrator.images.engine import EngineUnavailable, docker_client
from orchestrator.images.stack_image import lock_from_wheelhouse

BASE_TAG = "matrix-bench-test-base:bookworm-py3"
DEBIAN_MIRROR = os.environ.get("MATRIX_BENCH_DEBIAN_MIRROR", "http://deb.debian.org/debian")
TORCH_REQUIREMENTS = ("torch==2.13.0", "numpy")
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "matrix-bench-tests"


def engine_or_skip():
    """The engine's client; skip with the reason where none answers, unless CI demands one."""
    try:
        return docker_client()
    except EngineUnavailable as exc:
        if os.environ.get("MATRIX_BENCH_REQUIRE_DOCKER"):
            pytest.fail(f"MATRIX_BENCH_REQUIRE_DOCKER is set but {exc}")
        pytest.skip(f"needs a Docker engine ({exc}); scripts/docker_engine.sh starts one")


def ensure_base_image(client) -> str:
    """A Debian minbase with python3 and pip, imported as BASE_TAG once per machine."""
    import docker

    try:
        client.images.get(BASE_TAG)
        return BASE_TAG
    except docker.errors.ImageNotFound:
        pass
    if shutil.which("debootstrap") is None:
        pytest.fail("debootstrap is missing (apt-get install debootstrap)")
    with tempfile.TemporaryDirectory(prefix="matrix-base-") as root:
        subprocess.run(["debootstrap", "--variant=minbase", "--include=python3,python3-pip",
                        "bookworm", root, DEBIAN_MIRROR], check=True, capture_output=True)
        tar = subprocess.Popen(["tar", "-C", root, "-c", "."], stdout=subprocess.PIPE)
        subprocess.run(["docker", "import", "-", BASE_TAG], stdin=tar.stdout, check=True,
                       capture_output=True)
        tar.wait()
    return BASE_TAG


def torch_wheelhouse() -> Path:
    """CPU torch and numpy with their dependencies as wheels (pip takes CPU torch from the
    local disk here), cached across sessions."""
    folder = CACHE / "wheelhouse-torch-2.13.0-cp311"
    complete = folder.with_name(folder.name + ".complete")
    if not complete.exists():
        shutil.rmtree(folder, ignore_errors=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "-d", str(folder),
                        *TORCH_REQUIREMENTS, "--python-version", "3.11", "--only-binary=:all:"],
                       check=True, capture_output=True)
        complete.touch()
    return folder


def write_locks(folder: Path, wheelhouse: Path) -> Path:
    """Lock files for the test stacks: `torch-cpu` (the wheelhouse) and `broken` (a package
    that exists nowhere, so its build fails in pip)."""
    folder.mkdir(parents=True, exist_ok=True)
    lock = lock_from_wheelhouse(wheelhouse)
    (folder / "torch-cpu.txt").write_text(lock)
    (folder / "broken.txt").write_text(lock + "no-such-package-matrix-bench==1.0 "
                                       "--hash=sha256:" + "0" * 64 + "\n")
    return folder
