"""Stack images: render a stack's Dockerfile, tag it by content, build it once, push it
(its lock file: locks.py; an offline build's wheels: wheels.py).

A stack that runs in an image (docs/ARCHITECTURE.md: executors) is rendered from
images/Dockerfile.template with its family's settings, its lock file (every Python package,
pinned with hashes) and the worker code the image carries. The tag is a hash of those three,
so the same stack gives the same tag on any machine, a changed pin gives a new one, and a
build runs only when the tag is missing. The Docker SDK is imported lazily.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from string import Template
from typing import Any

from orchestrator.images.engine import stopped_by_the_engine
from orchestrator.images.installer import Installer, image_installer
from orchestrator.images.locks import DEFAULT_PYTHON, check_lock, lock_from_wheelhouse, lock_pins
from orchestrator.images.ref import IMAGE_USER_WORKLOADS, BuildFailure, ImageError
from orchestrator.images.wheels import served
from orchestrator.registry.cell_run import ImageRef
from orchestrator.registry.executors import needs_image
from orchestrator.registry.providers import registry_auth
from orchestrator.spec.loaded import workloads_of
from orchestrator.spec.model import Images, MatrixSpec, Stack

__all__ = ["BuildFailure", "BuildStepStopped", "ImageError", "ImageRef", "Rendered",
           "build_image", "find_image", "image_problems", "lock_from_wheelhouse", "lock_pins",
           "push", "render", "worker_code"]

PROJECT_ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = PROJECT_ROOT / "images" / "Dockerfile.template"
REPOSITORY = "matrix-bench"
TAG_LENGTH = 16
# What the image carries besides workloads/: the worker package, and the two modules of the
# orchestrator it imports (the package's face and its error types).
WORKER_FILES = ("orchestrator/__init__.py", "orchestrator/errors.py")
WORKER_PACKAGE = "orchestrator/worker"
CLIENT_PACKAGE = "matrix_bench"  # what a command workload's script imports
PROXY_ARGS = ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy")


class BuildStepStopped(ImageError):
    """The engine stopped a build step's container (it shuts down, or someone stopped the
    container) or went away: the engine's doing, not the stack's."""


@dataclass(frozen=True)
class Rendered:
    """Everything a build needs; `tag` is fixed by the content alone."""

    stack: str
    dockerfile: str
    lock: str
    code: tuple[tuple[str, bytes], ...]  # (path under code/, content)
    ca_bundle: bytes | None
    wheelhouse: Path | None  # delivery only: the lock's hashes pin what it holds
    installer: Installer
    tag: str  # matrix-bench:<hash>


def render(stack: Stack, images: Images,
           own_workloads: Mapping[str, tuple[Path, list[Path]]] | None = None) -> Rendered:
    """The stack's build inputs and tag; ImageError for a lock that contradicts the stack.
    The image carries the worker, the built-in workloads and `own_workloads` (a matrix's
    own: `own_workload_files`), so their code is part of the tag."""
    lock_path = Path(str(images.locks)) / f"{stack.name}.txt"
    try:
        lock = lock_path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ImageError(f"stack {stack.name}: no lock file {lock_path} yet: pin its packages "
                         f"with hashes (`matrix lock MATRIX --stack {stack.name}`, or offline "
                         f"`matrix lock --wheelhouse DIR -o {lock_path}`; images/README.md)"
                         ) from None
    except OSError as exc:
        raise ImageError(f"stack {stack.name}: cannot read its lock file {lock_path}: "
                         f"{exc.strerror}") from None
    check_lock(stack, lock, lock_path)
    installer = image_installer()
    ca_bundle = Path(images.ca_bundle).read_bytes() if images.ca_bundle else None
    dockerfile = Template(TEMPLATE.read_text(encoding="utf-8")).substitute(
        base_image=base_image(stack),
        family_env=FAMILY_ENV.get(str(stack.framework), ""),
        ca_bundle=("COPY ca.pem /opt/matrix-bench/ca.pem\n"
                   "ENV PIP_CERT=/opt/matrix-bench/ca.pem REQUESTS_CA_BUNDLE="
                   "/opt/matrix-bench/ca.pem SSL_CERT_FILE=/opt/matrix-bench/ca.pem\n"
                   if ca_bundle else ""),
        install=installer.dockerfile(stack),
    )
    code = worker_code() + user_workload_code(own_workloads or {})
    digest = hashlib.sha256()
    for part in (dockerfile.encode(), lock.encode(), ca_bundle or b"",
                 *(p.encode() + b"\0" + c for p, c in code)):
        digest.update(hashlib.sha256(part).digest())
    wheelhouse = Path(images.wheelhouse) if images.wheelhouse else None
    return Rendered(stack=stack.name, dockerfile=dockerfile, lock=lock, code=code,
                    ca_bundle=ca_bundle, wheelhouse=wheelhouse, installer=installer,
                    tag=f"{REPOSITORY}:{digest.hexdigest()[:TAG_LENGTH]}")


FAMILY_ENV = {"tensorflow": " TF_CPP_MIN_LOG_LEVEL=1"}


def base_image(stack: Stack) -> str:
    """The stack's base image, or the official slim Python image of its Python."""
    return stack.base_image or f"python:{stack.python or DEFAULT_PYTHON}-slim-bookworm"


def image_problems(spec: MatrixSpec) -> list[str]:
    """Why a stack's image could not be rendered yet (a missing or contradicting lock)."""
    problems = []
    for stack in spec.stacks:
        if needs_image(stack):
            try:
                render(stack, spec.images, own_workload_files(spec))
            except ImageError as exc:
                problems.append(str(exc))
    return problems


@functools.cache
def worker_code() -> tuple[tuple[str, bytes], ...]:
    """The files the image carries, with their bytes: the worker's modules and workloads/."""
    files = [PROJECT_ROOT / name for name in WORKER_FILES]
    for folder in (PROJECT_ROOT / WORKER_PACKAGE, PROJECT_ROOT / "workloads",
                   PROJECT_ROOT / CLIENT_PACKAGE):
        files += sorted(p for p in folder.rglob("*") if p.suffix in (".py", ".yaml")
                        and "__pycache__" not in p.parts)
    return tuple((str(p.relative_to(PROJECT_ROOT)), p.read_bytes()) for p in files)


def own_workload_files(spec: MatrixSpec) -> dict[str, tuple[Path, list[Path]]]:
    """Each of the matrix's own workloads (spec/loaded.py): its folder (a `path:` one's, a
    command's `cwd`) and the code files of it a stack image carries."""
    workloads = workloads_of(spec)
    return {name: (folder, workloads.code_files(name, folder))
            for name, folder in spec.workload_folders().items()}


def user_workload_code(own: Mapping[str, tuple[Path, list[Path]]]
                       ) -> tuple[tuple[str, bytes], ...]:
    """The code of the user's workload folders and command folders, as the image carries
    it (`image_workload_dir`)."""
    return tuple((f"{IMAGE_USER_WORKLOADS}/{name}/{path.relative_to(folder).as_posix()}",
                  path.read_bytes())
                 for name, (folder, files) in sorted(own.items()) for path in files)


STEP_CONTAINER = re.compile(r"\s*---> Running in ([0-9a-f]{12,64})")  # the classic builder's
ENGINE_COLOUR = re.compile(r"\x1b\[[0-9;]*m")


def find_image(client: Any, stack: str, tag: str) -> ImageRef | None:
    """The local image of `tag`, or None."""
    import docker

    try:
        image = client.images.get(tag)
    except docker.errors.ImageNotFound:
        return None
    digests = image.attrs.get("RepoDigests") or []
    return ImageRef(stack=stack, tag=tag, image_id=image.id, size_bytes=image.attrs["Size"],
                    repo_digest=digests[0] if digests else None)


def build_image(client: Any, rendered: Rendered, log_path: Path,
                on_line: Callable[[str], None] = lambda line: None) -> ImageRef:
    """Build the stack's image, its log streamed to `log_path` and to `on_line`;
    ImageError on failure, BuildStepStopped where the engine stopped the failing step.
    Callers build only a tag that `find_image` does not find."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    since, step_container = datetime.now(UTC), None
    with open(log_path, "w", encoding="utf-8") as log, \
            tempfile.TemporaryDirectory(prefix="matrix-build-") as context:
        _write_context(Path(context), rendered)
        with served(rendered.wheelhouse) as wheel_url:
            buildargs = {k: os.environ[k] for k in PROXY_ARGS if k in os.environ}
            if wheel_url:
                buildargs.update(rendered.installer.wheelhouse_args(wheel_url))
            stream = client.api.build(
                path=context, tag=rendered.tag, rm=True, forcerm=True, decode=True,
                network_mode="host", buildargs=buildargs,
                labels={"matrix-bench.stack": rendered.stack})
            error, pending = None, ""
            for chunk in stream:
                # the engine colours a step's stderr (uv writes there) in pieces: the log
                # keeps the text, and `on_line` gets whole lines
                text = ENGINE_COLOUR.sub("", chunk.get("stream") or chunk.get("status") or "")
                if step := STEP_CONTAINER.match(text):
                    step_container = step.group(1)
                if "error" in chunk:
                    error = str(chunk["error"]).strip()
                    text = f"ERROR: {error}\n"
                if text:
                    log.write(text)
                    log.flush()
                    *lines, pending = (pending + text).split("\n")
                    for line in lines:
                        on_line(line.rstrip())
    if error is not None:
        stopped = step_container and stopped_by_the_engine(
            client, step_container, since, "the build step",
            f" while preparing the image of {rendered.stack}")
        if stopped:  # an engine shutting down kills the step before its API goes away
            raise BuildStepStopped(f"{stopped}; the step said: {error}")
        raise ImageError(f"stack {rendered.stack}: image build failed: {error}")
    built = find_image(client, rendered.stack, rendered.tag)
    if built is None:
        raise ImageError(f"stack {rendered.stack}: the build ended without an image")
    return built


def _write_context(folder: Path, rendered: Rendered) -> None:
    (folder / "Dockerfile").write_text(rendered.dockerfile, encoding="utf-8")
    (folder / "lock.txt").write_text(rendered.lock, encoding="utf-8")
    if rendered.ca_bundle is not None:
        (folder / "ca.pem").write_bytes(rendered.ca_bundle)
    if rendered.installer.binary is not None:
        shutil.copy2(rendered.installer.binary, folder / "uv")
    for relative, content in rendered.code:
        target = folder / "code" / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)


def push(client: Any, ref: ImageRef, registry: str) -> ImageRef:
    """Push the image to `registry` (host[:port]/repository) and return it with its digest."""
    tag = ref.tag.split(":", 1)[1]
    image = client.images.get(ref.image_id)
    image.tag(registry, tag=tag)
    auth = registry_auth(registry, for_push=True)
    for chunk in client.images.push(registry, tag=tag, stream=True, decode=True,
                                    auth_config=auth):
        if "error" in chunk:
            raise ImageError(f"stack {ref.stack}: push to {registry} failed: {chunk['error']}")
    image.reload()
    digest = next((d for d in image.attrs.get("RepoDigests", []) if d.startswith(registry + "@")),
                  None)
    if digest is None:
        raise ImageError(f"stack {ref.stack}: {registry} returned no digest for the push")
    return ImageRef(stack=ref.stack, tag=ref.tag, image_id=ref.image_id,
                    size_bytes=ref.size_bytes, repo_digest=digest)
