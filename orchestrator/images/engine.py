"""The Docker engine as a client sees it: reached, pinged, and judged when it goes away.

Every executor and build call goes through `docker_client`, which answers only for an
engine that answers a ping. When something ends badly, these say whose doing it was: the
engine's (gone, hung, shutting down: `engine_lost`, `stopped_by_the_engine`) or the
container's own (`engine_keeps_answering` after a kill from outside). The Docker SDK is
imported lazily.
"""

from __future__ import annotations

import functools
import os
import time
from datetime import datetime
from typing import Any

from orchestrator.errors import MatrixError, first_line


class EngineUnavailable(MatrixError):
    """No Docker engine answers."""


PROBE_TIMEOUT_S = 10  # an engine that does not answer a ping this fast is not usable
API_TIMEOUT_S = 30  # any other call but builds, which have none (steps may be silent)
SHUTDOWN_SETTLE_S = 3.0  # an engine that kills its containers to shut down is gone by then


def engine_name() -> str:
    """The engine the SDK talks to, as messages name it."""
    return os.environ.get("DOCKER_HOST") or "the default Docker socket"


def docker_client() -> Any:
    """A client of the engine at DOCKER_HOST (or the default socket), checked to answer."""
    try:
        import docker
    except ImportError:
        raise EngineUnavailable("the docker SDK is not installed (pip install docker)") from None
    try:
        client = docker.from_env(timeout=PROBE_TIMEOUT_S)
        client.ping()
    except Exception as exc:  # the SDK raises DockerException subclasses and requests errors
        raise EngineUnavailable(f"no Docker engine answers at {engine_name()}: "
                                f"{first_line(exc)}") from None
    client.api.timeout = API_TIMEOUT_S
    return client


def check_engine(client: Any) -> None:
    """Raise one of `engine_lost_errors()` unless the engine answers a ping at once."""
    client.api.get(f"{client.api.base_url}/_ping", timeout=PROBE_TIMEOUT_S).raise_for_status()


@functools.cache
def engine_lost_errors() -> tuple[type[BaseException], ...]:
    """What the SDK raises when its engine is gone or hangs: requests' errors, urllib3's
    (streams read the raw response) and a socket's own."""
    try:
        import requests
        import urllib3
    except ImportError:
        return ()
    return (requests.exceptions.RequestException, urllib3.exceptions.HTTPError,
            ConnectionError)


@functools.cache
def engine_errors() -> tuple[type[BaseException], ...]:
    """What the SDK raises when the engine is gone, hangs or refuses."""
    try:
        import docker
    except ImportError:
        return ()
    return (*engine_lost_errors(), docker.errors.DockerException)


def stopped_by_the_engine(client: Any, container_id: str, since: datetime, what: str,
                          when: str) -> str | None:
    """Why a container that ended by a signal was stopped by its engine (it shuts down, or
    someone stopped the container) rather than by its own process, or None: the engine's
    `kill` events for it since `since` say so."""
    # `until` to the nanosecond: the SDK cuts a datetime to whole seconds, which misses a
    # kill in the current second (6 of 6 such queries did).
    until = f"{time.time():.9f}"
    try:
        kills = list(client.events(since=since, until=until, decode=True,
                                   filters={"container": container_id, "event": "kill"}))
    except engine_errors() as exc:
        return engine_lost(exc, when)
    if not kills:
        return None
    signals = ", ".join(k.get("Actor", {}).get("Attributes", {}).get("signal", "?")
                        for k in kills)
    return (f"the Docker engine at {engine_name()} stopped {what}{when} (signals {signals}), "
            f"as it does when it shuts down")


def engine_keeps_answering(client: Any, settle_s: float = SHUTDOWN_SETTLE_S) -> bool:
    """Whether the engine still answers `settle_s` after it killed a container: one that
    shuts down has stopped answering by then, while a `docker kill` from outside leaves it
    running as before."""
    deadline = time.monotonic() + settle_s
    while True:
        try:
            check_engine(client)
        except engine_errors():
            return False
        if time.monotonic() >= deadline:
            return True
        time.sleep(0.25)


def engine_lost(exc: BaseException, when: str = "") -> str:
    """Why a cell or a build lost its engine, in one line."""
    return f"the Docker engine at {engine_name()} stopped answering{when}: {first_line(exc)}"


