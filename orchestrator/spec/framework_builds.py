"""Which versions of each framework were released, and which CUDA versions each is
published for, so that a stack pinning a version that never existed, or a pair no build
exists for, is a spec error at validation, not a failed image build an hour in.

The release lists are PyPI's (final releases, as of 2026-11-23; JAX 0.4.32 was yanked). A
version newer than the newest listed is a warning (this table is older than it), never an
error; so is a patch newer than the last listed of one of the two newest minors. A version
older than a list's first is not judged.

PyTorch: the CUDA variants of its wheel index per release (pytorch.org, "previous
versions"). TensorFlow: the CUDA version of each release's tested build configuration
(tensorflow.org/install/source#gpu); its pip wheels bring that CUDA along. JAX: the CUDA
major of its `jax[cudaNN]` plugins. A framework version newer than the table is refused
only for a CUDA older than every build of the newest release listed (support moves forward);
anything else is left to the image build to confirm.
"""

from __future__ import annotations

import re

from orchestrator.worker.stack_check import version_matches

TORCH_RELEASES = (
    "2.0.0", "2.0.1", "2.1.0", "2.1.1", "2.1.2", "2.2.0", "2.2.1", "2.2.2", "2.3.0", "2.3.1",
    "2.4.0", "2.4.1", "2.5.0", "2.5.1", "2.6.0", "2.7.0", "2.7.1", "2.8.0", "2.9.0", "2.9.1",
    "2.10.0", "2.11.0", "2.12.0", "2.12.1", "2.13.0", "2.14.0", "2.14.1", "2.15.0")
TENSORFLOW_RELEASES = (
    "2.12.0", "2.12.1", "2.13.0", "2.13.1", "2.14.0", "2.14.1", "2.15.0", "2.15.0.post1",
    "2.15.1", "2.16.1", "2.16.2", "2.17.0", "2.17.1", "2.18.0", "2.18.1", "2.19.0", "2.19.1",
    "2.20.0", "2.21.0")  # there is no 2.16.0
JAX_RELEASES = (
    "0.4.30", "0.4.31", "0.4.33", "0.4.34", "0.4.35", "0.4.36", "0.4.37", "0.4.38", "0.5.0",
    "0.5.1", "0.5.2", "0.5.3", "0.6.0", "0.6.1", "0.6.2", "0.7.0", "0.7.1", "0.7.2", "0.8.0",
    "0.8.1", "0.8.2", "0.8.3", "0.9.0", "0.9.0.1", "0.9.1", "0.9.2", "0.10.0", "0.10.1",
    "0.10.2", "0.11.0", "0.11.1", "0.11.2", "0.12.0", "0.12.0.1")
RELEASES = {"torch": TORCH_RELEASES, "tensorflow": TENSORFLOW_RELEASES, "jax": JAX_RELEASES}
PRE_RELEASE = re.compile(r"(a|b|rc|dev)\d*", re.IGNORECASE)

# The wheels' CUDA variants per release (PyTorch's release compatibility matrix, stable and
# experimental). 2.15's is not settled in any source yet: newer than the table, below.
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
    "2.10": ("12.6", "12.8", "13.0"),
    "2.11": ("12.6", "12.8", "13.0"),
    "2.12": ("12.6", "13.0", "13.2"),
    "2.13": ("12.6", "13.0", "13.2"),
    "2.14": ("12.6", "13.0", "13.2"),
}
TENSORFLOW_CUDA: dict[str, tuple[str, ...]] = {
    "2.12": ("11.8",), "2.13": ("11.8",), "2.14": ("11.8",), "2.15": ("12.2",),
    "2.16": ("12.3",), "2.17": ("12.3",), "2.18": ("12.5",), "2.19": ("12.5",),
    "2.20": ("12.5",), "2.21": ("12.5",),
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


def release_problem(framework: str, version: str) -> tuple[str | None, str | None]:
    """(why `framework` `version` was never released, or None; why it cannot be checked,
    or None). "2.13" stands for any 2.13.x; a local suffix ("+cpu") and pre-releases, which
    the lists leave out, are not judged."""
    releases = RELEASES.get(framework)
    public = version.split("+")[0]
    if releases is None or PRE_RELEASE.search(public):
        return None, None
    if any(version_matches(public, r) for r in releases) or \
            _order(public) < _order(min(releases, key=_order)):  # older than the lists
        return None, None
    newest = max(releases, key=_order)
    minor = _major_minor(public)
    of_minor = [r for r in releases if _major_minor(r) == minor]
    recent = sorted({_major_minor(r) for r in releases}, key=_order)[-2:]
    if _order(public) > _order(newest) or (
            minor in recent and _order(public) > _order(max(of_minor, key=_order))):
        return None, (f"{framework} {version} is newer than the releases this matrix-bench "
                      f"knows (to {newest}): not checked")
    known = f"; {minor} has {', '.join(of_minor)}" if of_minor else ""
    return f"{framework} {version} was never released (or was yanked){known}", None


def _major_minor(version: str) -> str:
    return ".".join(version.split(".")[:2])


def _order(version: str) -> tuple[int, ...]:
    return tuple(int(part) if part.isdigit() else 0 for part in version.split("."))
