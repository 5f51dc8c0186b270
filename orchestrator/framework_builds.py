"""Which CUDA versions each framework version is published for, so that a stack pinning a
pair no build exists for is a spec error at validation, not a failed image build an hour in.

PyTorch: the CUDA variants of its wheel index per release (pytorch.org, "previous
versions"). TensorFlow: the CUDA version of each release's tested build configuration
(tensorflow.org/install/source#gpu); its pip wheels bring that CUDA along. JAX: the CUDA
major of its `jax[cudaNN]` plugins. A framework version newer than the table is refused
only for a CUDA older than every build of the newest release listed (support moves forward);
anything else is left to the image build to confirm.
"""

from __future__ import annotations

TORCH_CUDA: dict[str, tuple[str, ...]] = {
    "2.0": ("11.7", "11.8"),
    "2.1": ("11.8", "12.1"),
    "2.2": ("11.8", "12.1"),
    "2.3": ("11.8", "12.1"),
    "2.4": ("11.8", "12.1", "12.4"),
    "2.5": ("11.8", "12.1", "12.4"),
    "2.6": ("11.8", "12.4", "12.6"),
    "2.7": ("11.8", "12.6", "12.8"),
    "2.8": ("12.6", "12.8", "12.9"),
    "2.9": ("12.6", "12.8", "13.0"),
}
TENSORFLOW_CUDA: dict[str, tuple[str, ...]] = {
    "2.12": ("11.8",), "2.13": ("11.8",), "2.14": ("11.8",), "2.15": ("12.2",),
    "2.16": ("12.3",), "2.17": ("12.3",), "2.18": ("12.5",), "2.19": ("12.5",),
    "2.20": ("12.5",),
}
JAX_CUDA_MAJORS = ("12", "13")


def cuda_build_problem(framework: str, version: str | None, cuda: str) -> str | None:
    """Why no build of `framework` `version` exists for CUDA `cuda`, or None."""
    wanted = _major_minor(cuda)
    if not all(part.isdigit() for part in wanted.split(".")):
        return f"{cuda!r} is not a CUDA version (e.g. 12.4)"
    if framework == "jax":
        if wanted.split(".")[0] not in JAX_CUDA_MAJORS:
            return f"JAX is built for CUDA {' and '.join(JAX_CUDA_MAJORS)} only, not {cuda}"
        return None
    table = {"torch": TORCH_CUDA, "tensorflow": TENSORFLOW_CUDA}.get(framework)
    if table is None or version is None:
        return None
    release = _major_minor(version)
    builds = table.get(release)
    if builds is not None:
        if wanted in builds or ("." not in wanted and any(  # "12": any 12.x build
                b.split(".")[0] == wanted for b in builds)):
            return None
        return (f"{framework} {version} is published for CUDA {', '.join(builds)}, "
                f"not {cuda}")
    newest = max(table, key=_order)
    if _order(release) <= _order(newest):
        return None  # a release between the table's rows: not judged
    # Newer than the table: releases drop old CUDA versions, never add them back, so only
    # a CUDA older than every build of the newest listed release is known not to fit.
    oldest = min(table[newest], key=_order)
    if _order(wanted) < _order(oldest.split(".")[0] if "." not in wanted else oldest):
        return (f"{framework} {version} is newer than the table of published builds, and "
                f"{framework} {newest} already needs CUDA {oldest} or later, not {cuda}")
    return None


def _major_minor(version: str) -> str:
    return ".".join(version.split(".")[:2])


def _order(version: str) -> tuple[int, ...]:
    return tuple(int(part) if part.isdigit() else 0 for part in version.split("."))
