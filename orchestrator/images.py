"""Stack images: render a stack's Dockerfile, tag it by content, build it once, push it.

A stack that runs in an image (Contracts: executors) is rendered from
images/Dockerfile.template with its family's settings, its lock file (every Python package,
pinned with hashes) and the worker code the image carries. The tag is a hash of those three,
so the same stack gives the same tag on any machine, a changed pin gives a new one, and a
build runs only when the tag is missing. The Docker SDK is imported lazily.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import http.server
import os
import re
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from string import Template
from typing import Any

from orchestrator.engine import stopped_by_the_engine
from orchestrator.errors import MatrixError
from orchestrator.executors import needs_image
from orchestrator.providers import registry_auth
from orchestrator.spec import Images, MatrixSpec, Stack
from orchestrator.stack_check import FRAMEWORK_DISTRIBUTIONS, version_matches

PROJECT_ROOT = Path(__file__).resolve().parent.parent
TEMPLATE = PROJECT_ROOT / "images" / "Dockerfile.template"
REPOSITORY = "matrix-bench"
TAG_LENGTH = 16
DEFAULT_PYTHON = "3.11"
# What the image carries: the worker and everything it and the workloads import.
WORKER_MODULES = ("__init__", "cell_file", "context", "datasets", "errors", "host", "measure",
                  "nvml", "stack_check", "worker")
PROXY_ARGS = ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy")


class ImageError(MatrixError):
    """A stack image that cannot be rendered, built, found or pushed."""


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
    tag: str  # matrix-bench:<hash>


@dataclass(frozen=True)
class ImageRef:
    """A built image as cells and provenance see it."""

    stack: str
    tag: str
    image_id: str
    size_bytes: int
    repo_digest: str | None = None  # registry/repo@sha256:..., once pushed


@dataclass(frozen=True)
class BuildFailure:
    """A stack whose image could not be had: its cells become `image_failed` rows."""

    stack: str
    reason: str
    log_tail: str
    engine_unavailable: bool = False  # the engine was gone or stopped the build: not the stack


def render(stack: Stack, images: Images) -> Rendered:
    """The stack's build inputs and tag; ImageError for a lock that contradicts the stack."""
    lock_path = Path(str(images.locks)) / f"{stack.name}.txt"
    try:
        lock = lock_path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ImageError(f"stack {stack.name}: no lock file {lock_path} yet: pin its packages "
                         f"with hashes (`matrix lock WHEELHOUSE -o {lock_path}`, "
                         "images/README.md)") from None
    except OSError as exc:
        raise ImageError(f"stack {stack.name}: cannot read its lock file {lock_path}: "
                         f"{exc.strerror}") from None
    _check_lock(stack, lock, lock_path)
    ca_bundle = Path(images.ca_bundle).read_bytes() if images.ca_bundle else None
    dockerfile = Template(TEMPLATE.read_text(encoding="utf-8")).substitute(
        base_image=base_image(stack),
        family_env=FAMILY_ENV.get(str(stack.framework), ""),
        ca_bundle=("COPY ca.pem /opt/matrix-bench/ca.pem\n"
                   "ENV PIP_CERT=/opt/matrix-bench/ca.pem REQUESTS_CA_BUNDLE="
                   "/opt/matrix-bench/ca.pem SSL_CERT_FILE=/opt/matrix-bench/ca.pem\n"
                   if ca_bundle else ""),
        index_args="".join(f', "{arg}"' for arg in index_args(stack)),
    )
    code = worker_code()
    digest = hashlib.sha256()
    for part in (dockerfile.encode(), lock.encode(), ca_bundle or b"",
                 *(p.encode() + b"\0" + c for p, c in code)):
        digest.update(hashlib.sha256(part).digest())
    wheelhouse = Path(images.wheelhouse) if images.wheelhouse else None
    return Rendered(stack=stack.name, dockerfile=dockerfile, lock=lock, code=code,
                    ca_bundle=ca_bundle, wheelhouse=wheelhouse,
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
                render(stack, spec.images)
            except ImageError as exc:
                problems.append(str(exc))
    return problems


def index_args(stack: Stack) -> list[str]:
    """Where pip finds the framework's build: PyTorch publishes its CPU and CUDA builds on
    its own index (cu121 for CUDA 12.1); TensorFlow and JAX are on PyPI."""
    if stack.framework != "torch":
        return []
    variant = "cu" + "".join(str(stack.cuda).split(".")[:2]) if stack.cuda else "cpu"
    return ["--extra-index-url", f"https://download.pytorch.org/whl/{variant}"]


def _check_lock(stack: Stack, lock: str, path: Path) -> None:
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


@functools.cache
def worker_code() -> tuple[tuple[str, bytes], ...]:
    """The files the image carries, with their bytes: the worker's modules and workloads/."""
    files = [PROJECT_ROOT / "orchestrator" / f"{name}.py" for name in WORKER_MODULES]
    workloads = PROJECT_ROOT / "workloads"
    files += sorted(p for p in workloads.rglob("*") if p.suffix in (".py", ".yaml")
                    and "__pycache__" not in p.parts)
    return tuple((str(p.relative_to(PROJECT_ROOT)), p.read_bytes()) for p in files)


STEP_CONTAINER = re.compile(r"\s*---> Running in ([0-9a-f]{12,64})")  # the classic builder's


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
        with _serve(rendered.wheelhouse) as wheel_url:
            buildargs = {k: os.environ[k] for k in PROXY_ARGS if k in os.environ}
            if wheel_url:
                buildargs.update(PIP_NO_INDEX="1", PIP_FIND_LINKS=wheel_url)
            stream = client.api.build(
                path=context, tag=rendered.tag, rm=True, forcerm=True, decode=True,
                network_mode="host", buildargs=buildargs,
                labels={"matrix-bench.stack": rendered.stack})
            error = None
            for chunk in stream:
                text = chunk.get("stream") or chunk.get("status") or ""
                if step := STEP_CONTAINER.match(text):
                    step_container = step.group(1)
                if "error" in chunk:
                    error = str(chunk["error"]).strip()
                    text = f"ERROR: {error}\n"
                if text:
                    log.write(text)
                    log.flush()
                    on_line(text.rstrip())
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
    for relative, content in rendered.code:
        target = folder / "code" / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)


@contextlib.contextmanager
def _serve(wheelhouse: Path | None) -> Iterator[str | None]:
    """Serve a wheelhouse on loopback for the build's pip (the build runs with the host's
    network): no copy of the wheels enters a layer or the build context."""
    if wheelhouse is None:
        yield None
        return
    handler = functools.partial(_QuietHandler, directory=str(wheelhouse))
    server = _WheelServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


class _WheelServer(http.server.ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client gone mid-download (its build step was stopped) is no error of ours."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


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
