"""Is this environment the stack the cell was promised? Run by the worker, wherever it runs.

A stack declares pins (Python, framework version, CUDA, cuDNN); the worker compares each
with what it finds before the workload starts (and a CUDA stack's with the node's NVIDIA
driver, where the node has one: cuda_support.py), inside the container as in a plain process
(docs/ARCHITECTURE.md: statuses and flags). A declared version matches when every component it gives
equals the actual one: "2.13" matches "2.13.0+cpu". Stdlib only, but for the framework,
which is imported to read the CUDA and cuDNN it was built with, and only when they are pinned.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from orchestrator.worker.cuda_support import driver_problem, node_driver_version

if TYPE_CHECKING:
    from orchestrator.worker.cell_file import CellStack

FRAMEWORK_DISTRIBUTIONS = {
    "torch": ("torch",),
    "tensorflow": ("tensorflow", "tensorflow-cpu"),
    "jax": ("jax",),
}


def stack_mismatch(stack: CellStack) -> str | None:
    """Why this environment is not `stack` (the cell file's stack), or None."""
    name = stack.name
    here = ".".join(str(part) for part in sys.version_info[:3])
    if stack.python and not version_matches(stack.python, here):
        return f"stack {name} declares Python {stack.python}, this environment has {here}"
    driver = node_driver_version() if stack.cuda else None
    if driver and stack.cuda and (too_old := driver_problem(driver, stack.cuda)):
        return f"stack {name}: {too_old}"
    framework = stack.framework
    if not framework:
        return None
    if stack.framework_version:
        installed = installed_version(framework)
        if installed is None:
            return (f"stack {name} declares {framework} {stack.framework_version}, "
                    "which is not installed here")
        if not version_matches(stack.framework_version, installed):
            return (f"stack {name} declares {framework} {stack.framework_version}, "
                    f"this environment has {installed}")
    for library in ("cuda", "cudnn"):
        declared = getattr(stack, library)
        if declared:
            built = built_with(framework).get(library)
            if built is None or not version_matches(declared, built):
                have = f"{framework} built with {library} {built}" if built else \
                    f"{framework} built without {library}"
                return f"stack {name} declares {library} {declared}, this environment " \
                       f"has {have}"
    return None


def version_matches(declared: str, actual: str) -> bool:
    """Every component of `declared` equals that of `actual` (local suffix ignored)."""
    wanted = declared.split(".")
    have = actual.split("+")[0].split(".")
    return have[: len(wanted)] == wanted


def installed_version(framework: str) -> str | None:
    # Imported here: importlib.metadata costs the worker ~30 ms, and most cells pin nothing.
    from importlib import metadata

    for distribution in FRAMEWORK_DISTRIBUTIONS.get(framework, (framework,)):
        try:
            return metadata.version(distribution)
        except metadata.PackageNotFoundError:
            continue
    return None


def built_with(framework: str) -> dict[str, str]:
    """The CUDA and cuDNN versions the installed framework was built with, as far as it says."""
    if framework == "torch":
        import torch

        versions = {"cuda": torch.version.cuda}
        if torch.backends.cudnn.is_available():
            versions["cudnn"] = cudnn_version_string(torch.backends.cudnn.version())
        return {k: v for k, v in versions.items() if v}
    if framework == "tensorflow":
        import tensorflow as tf

        info = tf.sysconfig.get_build_info()
        return {k: str(info[f"{k}_version"]) for k in ("cuda", "cudnn")
                if info.get(f"{k}_version")}
    return {}  # jax: its CUDA plugin reports no build versions to check against


def cudnn_version_string(number: int | None) -> str | None:
    """torch's integer cuDNN version as dotted text: 8902 -> 8.9.2, 90100 -> 9.1.0."""
    if not number:
        return None
    if number >= 10000:  # cuDNN 9 and later: major * 10000 + minor * 100 + patch
        return f"{number // 10000}.{number // 100 % 100}.{number % 100}"
    return f"{number // 1000}.{number // 100 % 10}.{number % 100}"
