"""Providers: where a sweep's nodes come from, registered by name like executors.

A provider will own everything about its nodes (issue 23, item 2): which hardware it
offers, at what price, how nodes are launched and torn down, and what a run leaves behind.
The first responsibility behind this seam is the registry credentials for stack images:
the Docker executor and the image push ask `registry_auth(reference)`, and the provider
whose registry it is answers, so that neither imports a cloud SDK. `aws` (ECR) is
registered below; a new provider is one module and one `register_provider` call.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol


class Provider(Protocol):
    """What the rest of the tool asks of a provider."""

    def registry_auth(self, reference: str, for_push: bool) -> dict[str, str] | None:
        """Docker credentials for `reference` (host/repository[:tag|@digest]) where it is
        this provider's registry, else None. A push may create the repository first. The
        credentials go to the engine only: never printed, logged or stored."""
        ...


@dataclass(frozen=True)
class ProviderKind:
    """A registered provider: its name and how to load it (imported only when asked)."""

    name: str
    load: Callable[[], Provider]


_REGISTRY: dict[str, ProviderKind] = {}


def register_provider(kind: ProviderKind) -> None:
    _REGISTRY[kind.name] = kind


def provider_names() -> list[str]:
    return sorted(_REGISTRY)


def registry_auth(reference: str, for_push: bool = True) -> dict[str, str] | None:
    """The credentials the provider owning `reference`'s registry gives, or None (a registry
    without login, such as a local one)."""
    for name in provider_names():
        auth = _REGISTRY[name].load().registry_auth(reference, for_push)
        if auth is not None:
            return auth
    return None


def _builtin(module: str) -> Callable[[], Provider]:
    def load() -> Provider:
        provider: Provider = importlib.import_module(module).PROVIDER
        return provider
    return load


register_provider(ProviderKind("aws", load=_builtin("orchestrator.cloud.provider")))
