"""How a stack image installs its lock: with uv where this machine has it, else with pip.

uv (a dependency of the tool) installs a lock several times faster than pip
(docs/PERFORMANCE.md). The build copies this machine's own uv binary into the image, so the
image fetches no installer; both installers require the lock's hashes. The installer is
part of the rendered Dockerfile, so of the tag: an image installed by pip and one installed
by uv are two images. `MATRIX_BENCH_IMAGE_INSTALLER=pip` chooses pip.

A stack delivered from a wheelhouse (`images.wheelhouse`) gets, at build time only, every
index pointed at the wheelhouse's loopback URL, so the build asks no index and the tag does
not depend on how the wheels arrive.
"""

from __future__ import annotations

import functools
import json
import os
from dataclasses import dataclass
from pathlib import Path

from orchestrator.spec.model import Stack

LOCK_IN_IMAGE = "/opt/matrix-bench/lock.txt"
UV_IN_IMAGE = "/usr/local/bin/uv"
CHOICE_VARIABLE = "MATRIX_BENCH_IMAGE_INSTALLER"

# Base images without Python (nvidia/cuda) get the distribution's; the worker then checks
# that it is the Python the stack declares.
_PYTHON_CHECK = {
    "pip": "RUN command -v python3 >/dev/null && python3 -m pip --version >/dev/null || \\\n"
           "    (apt-get update && apt-get install -y --no-install-recommends python3 "
           "python3-pip \\\n     && rm -rf /var/lib/apt/lists/*)\n",
    "uv": "RUN command -v python3 >/dev/null || \\\n"
          "    (apt-get update && apt-get install -y --no-install-recommends python3 \\\n"
          "     && rm -rf /var/lib/apt/lists/*)\n",
}


@dataclass(frozen=True)
class Installer:
    """The installer of an image's lock; `binary` is the uv copied into the build context."""

    name: str  # "uv" or "pip"
    binary: Path | None = None

    def dockerfile(self, stack: Stack) -> str:
        """The Dockerfile lines from the Python check to the lock's install (the lock is
        copied in before them)."""
        lines = _PYTHON_CHECK[self.name]
        if self.name == "pip":
            extra = "".join(f', "{arg}"' for arg in _pip_index_args(stack))
            return lines + (
                "# Set at build time only when the stack installs from a wheelhouse.\n"
                "ARG PIP_NO_INDEX\nARG PIP_FIND_LINKS\n"
                f'RUN ["python3", "-m", "pip", "install", "--require-hashes", "-r", '
                f'"{LOCK_IN_IMAGE}"{extra}]\n')
        extra_default = f"={json.dumps(stack.index_url)}" if stack.index_url else ""
        return lines + (
            f"COPY uv {UV_IN_IMAGE}\n"
            "# Set at build time only when the stack installs from a wheelhouse; the extra\n"
            "# index defaults to the stack's own (index_url).\n"
            f"ARG UV_INDEX_URL\nARG UV_FIND_LINKS\nARG UV_EXTRA_INDEX_URL{extra_default}\n"
            f'RUN ["uv", "pip", "install", "--system", "--break-system-packages", '
            f'"--require-hashes", "--no-cache", "-r", "{LOCK_IN_IMAGE}"]\n')

    def wheelhouse_args(self, url: str) -> dict[str, str]:
        """The build arguments that make the install take every wheel from `url` alone."""
        if self.name == "pip":
            return {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": url}
        # uv has no variable for --no-index: an index with no project pages finds nothing
        return {"UV_INDEX_URL": url, "UV_EXTRA_INDEX_URL": url, "UV_FIND_LINKS": url}


def _pip_index_args(stack: Stack) -> list[str]:
    """Where pip finds what the lock pins besides the package index: the stack's own
    `index_url` (PyTorch's CPU builds, an older CUDA variant), as its lock was made."""
    return ["--extra-index-url", stack.index_url] if stack.index_url else []


def image_installer() -> Installer:
    """uv, this machine's copy, unless pip is chosen or no uv binary is here."""
    if os.environ.get(CHOICE_VARIABLE, "uv") == "pip":
        return Installer("pip")
    binary = _uv_binary()
    return Installer("uv", binary) if binary else Installer("pip")


@functools.cache
def _uv_binary() -> Path | None:
    try:
        from uv import find_uv_bin
    except ImportError:
        return None
    try:
        return Path(find_uv_bin())
    except FileNotFoundError:
        return None
