"""The providers' registry: the light declaration of each provider (`ProviderKind`: its name,
the hardware kinds it offers, their own keys' model, how to load it), the interface an
implementation meets (`Provider`, with `BaseProvider`'s quiet answers) and what a launching
one is handed (`Launch`, `CellGroup`, `Price`). The plan, the images, the run and the
matrix's checks ask it; an implementation (orchestrator/providers/) is imported only when
asked for, by name, so this module imports none. `orchestrator.providers` re-exports all of
it for plugin authors; docs/ARCHITECTURE.md: providers says what each question is for."""

from __future__ import annotations

import functools
import importlib
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol

from orchestrator.errors import MatrixError
from orchestrator.plugins import PROVIDERS, load_plugins
from orchestrator.registry.executors import EXECUTOR_SETTINGS
from orchestrator.registry.prices import Price
from orchestrator.spec.entry_settings import (
    KindSettings,
    ProviderSection,
    SettingsCatalogue,
    settings_context,
)

if TYPE_CHECKING:
    from orchestrator.hardware.local import LocalMachine
    from orchestrator.registry.cell_run import Cell, ImageRef, ToolInfo
    from orchestrator.results.records import Record
    from orchestrator.spec.model import Hardware, MatrixSpec

Say = Callable[[str], None]


@dataclass(frozen=True)
class Launch:
    """What a launching provider is given to run a group of cells on its own nodes."""

    spec: MatrixSpec
    run_dir: Path  # the local run directory: its name is the run's id
    cells: list[Cell]
    images: dict[str, ImageRef]  # stack name -> the image its cells run in
    tool: ToolInfo
    prices: dict[str, Price]  # hardware name -> its price, from `prices`
    estimate_s: dict[str, float]  # cell id -> estimated seconds (for the budget)
    record: Callable[[Cell, list[Record]], None]  # each cell's records, as it ends
    say: Say
    options: dict[str, Any] = field(default_factory=dict)  # the provider's own (tests: a
    # launcher that brings nodes up locally)


class CellGroup(Protocol):
    """A launched group: inside the context its nodes are up and its cells run."""

    def __enter__(self) -> CellGroup: ...

    def wait(self) -> None:
        """Return once every cell of the group has its records (Ctrl-C interrupts)."""
        ...

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        """Tear the nodes down, however the block ended."""
        ...


class Provider(Protocol):
    """What the rest of the tool asks of a provider."""

    launches: bool  # its cells run on nodes it brings up (else here or at --ray-address)
    # a launching provider whose later waves (adaptive repeats, --until-decided) launch
    # again in the sweep: cheap where a launch submits a job (Slurm), not a new cluster
    relaunches: bool

    def hardware_problem(self, hardware: Hardware) -> str | None:
        """Why this entry of one of its kinds cannot be had (a missing or unknown instance
        type, a setting of another kind), or None. Shown at the entry's line."""
        ...

    def host_memory_gib(self, instance_type: str) -> float | None:
        """The memory of a machine size its catalogue has (an EC2 instance type), else
        None: what the judge holds a row's host RSS against (report/judge.py)."""
        ...

    def host_gpus(self, instance_type: str) -> int | None:
        """The GPUs of a machine size its catalogue has, else None: how far `matrix
        advise` may project a count of GPUs on it (report/projection.py)."""
        ...

    def host_network_gbps(self, instance_type: str) -> float | None:
        """The network bandwidth of a machine size its catalogue has, Gbit/s, else None:
        what the judge holds a cell across nodes' bus bandwidth to (report/bounds.py)."""
        ...

    def matrix_problem(self, spec: MatrixSpec) -> tuple[tuple[str | int, ...], str] | None:
        """(where in the matrix, what is wrong) for a setting the provider needs, or None:
        asked of every provider, so its own section is checked whether or not used."""
        ...

    def skip_reason(self, cell: Cell, local: LocalMachine, launch: bool) -> str | None:
        """Why the plan cannot run `cell` of one of its kinds on its nodes, or None.
        `launch`: whether the sweep may bring nodes up (not with --no-ray). Asked once per
        configuration: the answer holds for each of its repeats."""
        ...

    def prices(self, spec: MatrixSpec, hardware: list[Hardware], warn: Say
               ) -> dict[str, Price]:
        """Hardware name -> its price per hour, for the entries that have one."""
        ...

    def plan_lines(self, spec: MatrixSpec, cells: list[Cell]) -> list[str]:
        """What `matrix plan` should say of `cells` (of its kinds) beyond the grid: where
        they would run and what they would ask for."""
        ...

    def check_launch(self, spec: MatrixSpec, cells: list[Cell], run_dir: Path,
                     say: Say) -> None:
        """Refuse (a user error) before anything is built when `cells` cannot be launched:
        quotas, a missing SDK, a run directory (`run_dir`) the nodes cannot read."""
        ...

    def launch(self, launch: Launch) -> CellGroup:
        """The group that runs `launch.cells` on nodes brought up for them."""
        ...

    def after_run(self, spec: MatrixSpec, run_dir: Path, say: Say) -> None:
        """Deliver a whole run's results where the provider keeps them (S3), if asked to."""
        ...

    def remove_leftovers(self, owned_runs: set[str], dry_run: bool, region: str | None
                         ) -> list[str]:
        """Remove what runs no live sweep owns left on the provider's nodes (instances,
        keys); one line per thing done (or that would be, if `dry_run`)."""
        ...

    def registry_auth(self, reference: str, for_push: bool) -> dict[str, str] | None:
        """Docker credentials for `reference` (host/repository[:tag|@digest]) where it is
        this provider's registry, else None. A push may create the repository first. The
        credentials go to the engine only: never printed, logged or stored."""
        ...


class BaseProvider:
    """The answers of a provider with nothing to say: subclass it and override what yours
    does (a provider need not price, launch or clean up)."""

    launches = relaunches = False

    def hardware_problem(self, hardware: Hardware) -> str | None:
        return None

    def host_memory_gib(self, instance_type: str) -> float | None:
        return None

    def host_gpus(self, instance_type: str) -> int | None:
        return None

    def host_network_gbps(self, instance_type: str) -> float | None:
        return None

    def matrix_problem(self, spec: MatrixSpec) -> tuple[tuple[str | int, ...], str] | None:
        return None

    def skip_reason(self, cell: Cell, local: LocalMachine, launch: bool) -> str | None:
        return None

    def prices(self, spec: MatrixSpec, hardware: list[Hardware], warn: Say
               ) -> dict[str, Price]:
        return {}

    def plan_lines(self, spec: MatrixSpec, cells: list[Cell]) -> list[str]:
        return []

    def check_launch(self, spec: MatrixSpec, cells: list[Cell], run_dir: Path,
                     say: Say) -> None:
        return None

    def launch(self, launch: Launch) -> CellGroup:
        raise NotImplementedError(f"{type(self).__name__} runs its cells here; it launches "
                                  "no nodes")

    def after_run(self, spec: MatrixSpec, run_dir: Path, say: Say) -> None:
        return None

    def remove_leftovers(self, owned_runs: set[str], dry_run: bool, region: str | None
                         ) -> list[str]:
        return []

    def registry_auth(self, reference: str, for_push: bool) -> dict[str, str] | None:
        return None


@dataclass(frozen=True)
class ProviderKind:
    """A registered provider: its name, the hardware kinds it offers, and how to load it
    (imported only when asked)."""

    name: str
    hardware_kinds: tuple[str, ...]
    load: Callable[[], Provider]
    # the keys only its kinds' entries take (spec/entry_settings.py: KindSettings), and its
    # own section of the matrix file, under its name (`aws:`), each a model or the
    # "module:Class" naming it (a built-in's, imported when first asked); light: validating
    # a matrix imports them, never the provider's SDK
    settings: type[KindSettings] | str = KindSettings
    section: type[ProviderSection] | str | None = None

    def settings_model(self) -> type[KindSettings]:
        model: type[KindSettings] = _named(self.settings)
        return model

    def section_model(self) -> type[ProviderSection] | None:
        return None if self.section is None else _named(self.section)


def _named(model: type[Any] | str) -> Any:
    """A model, or the one "module:Class" names (imported now)."""
    if isinstance(model, str):
        module, _, name = model.partition(":")
        return getattr(importlib.import_module(module), name)
    return model


class UnknownProvider(MatrixError):
    """No registered provider offers a hardware kind (the matrix was not validated), or
    has a name asked for."""


_REGISTRY: dict[str, ProviderKind] = {}


def register_provider(kind: ProviderKind) -> None:
    _REGISTRY[kind.name] = kind


@functools.cache
def _plugins() -> list[str]:
    """The providers installed distributions declare, registered once per process."""
    return load_plugins(PROVIDERS, ProviderKind, lambda: list(_REGISTRY), register_provider)


def _registry() -> dict[str, ProviderKind]:
    _plugins()
    return _REGISTRY


def provider_names() -> list[str]:
    return sorted(_registry())


def hardware_kinds() -> list[str]:
    """Every hardware kind some provider offers, in the order they were registered."""
    return [kind for provider in _registry().values() for kind in provider.hardware_kinds]


def registered_for(hardware_kind: str) -> ProviderKind:
    """The registration of the provider that offers `hardware_kind`."""
    for provider in _registry().values():
        if hardware_kind in provider.hardware_kinds:
            return provider
    raise UnknownProvider(hardware_kind)


def settings_of(hardware_kind: str) -> type[KindSettings] | None:
    """The settings model of the provider that offers `hardware_kind`, or None."""
    try:
        return registered_for(hardware_kind).settings_model()
    except UnknownProvider:
        return None


def setting_owners(key: str) -> list[str]:
    """The hardware kinds whose settings take `key` (`partition`: slurm), for the line that
    says a key was set on an entry of another kind."""
    return [kind for provider in _registry().values()
            if key in provider.settings_model().model_fields for kind in provider.hardware_kinds]


KINDS = SettingsCatalogue(settings=settings_of, owners=setting_owners)


def section_of(name: str) -> type[ProviderSection] | None:
    """The model of the matrix section `name`: the section of the provider so named."""
    provider = _registry().get(name)
    return provider.section_model() if provider is not None else None


SECTIONS = SettingsCatalogue(settings=section_of, owners=lambda key: [], names=lambda: [
    name for name, provider in _registry().items() if provider.section is not None])


def validation_context() -> dict[str, Any]:
    """The context a hardware entry and a stack are validated with, so their owners' keys
    are read as the owner's settings model (a hardware kind's provider's, a stack
    executor's): `Cell.model_validate_json(text, context=validation_context())`
    (spec/entry_settings.py: gather_settings)."""
    return settings_context(KINDS, EXECUTOR_SETTINGS, SECTIONS)


class ProviderLoadError(MatrixError):
    """A registered provider whose implementation cannot be loaded (its SDK missing, its
    own bug), asked for by a matrix that uses one of its hardware kinds."""


def provider_for(hardware_kind: str) -> Provider:
    """The provider that offers `hardware_kind`; ProviderLoadError where it cannot load."""
    return provider_named(registered_for(hardware_kind).name)


def provider_named(name: str) -> Provider:
    """The provider registered as `name`; ProviderLoadError where it cannot load."""
    loaded = _loaded(_registry()[name])
    if isinstance(loaded, str):
        raise ProviderLoadError(loaded)
    return loaded


def providers() -> list[Provider]:
    """Every provider that loads: one that cannot is a warning naming it (once), and is
    left out of the questions every provider is asked, so a broken plugin refuses only the
    matrices that use its kinds (provider_for), never the rest."""
    return [p for name in provider_names()
            if not isinstance(p := _loaded(_registry()[name]), str)]


@functools.cache
def _loaded(kind: ProviderKind) -> Provider | str:
    """The provider `kind` registers, or the one line that says why it cannot be loaded
    (warned the first time). SystemExit is caught too: a plugin's `sys.exit()` at import
    is its failure, not the command's."""
    from orchestrator.errors import MatrixWarning, first_line

    try:
        return kind.load()
    except (Exception, SystemExit) as exc:
        why = (f"the provider {kind.name!r} (hardware kind "
               f"{', '.join(kind.hardware_kinds)}) cannot be loaded: {type(exc).__name__}: "
               f"{first_line(exc)}")
        warnings.warn(why, MatrixWarning, stacklevel=2)
        return why


def remove_leftovers(names: list[str], owned_runs: set[str], dry_run: bool, region: str
                     ) -> tuple[list[str], list[str]]:
    """Each named provider's `remove_leftovers`: (what was done, one line per provider that
    could not be asked: no credentials, no Slurm). One failing does not stop the others."""
    from orchestrator.errors import first_line

    if unknown := sorted(set(names) - set(_registry())):
        raise UnknownProvider(f"no provider {', '.join(unknown)} (there are "
                              f"{', '.join(provider_names())})")
    actions, failures = [], []
    for name in names:
        try:
            actions += provider_named(name).remove_leftovers(owned_runs, dry_run, region)
        except Exception as exc:  # an SDK's or a command's error, whatever the provider
            failures.append(f"{name}: not checked: {first_line(exc)}")
    return actions, failures


def registry_auth(reference: str, for_push: bool = True) -> dict[str, str] | None:
    """The credentials the provider owning `reference`'s registry gives, or None (a registry
    without login, such as a local one)."""
    for provider in providers():
        auth = provider.registry_auth(reference, for_push)
        if auth is not None:
            return auth
    return None


def _builtin(module: str) -> Callable[[], Provider]:
    def load() -> Provider:
        provider: Provider = importlib.import_module(module).PROVIDER
        return provider
    return load



register_provider(ProviderKind("local", ("local",), _builtin("orchestrator.providers.local")))
# a built-in kind's settings model is its provider's, named here and imported when asked
register_provider(ProviderKind("aws", ("ec2",), _builtin("orchestrator.providers.aws.provider"),
                               "orchestrator.providers.aws.settings:Ec2Settings",
                               "orchestrator.providers.aws.settings:AwsSection"))
register_provider(ProviderKind("slurm", ("slurm",),
                               _builtin("orchestrator.providers.slurm.provider"),
                               "orchestrator.providers.slurm.settings:SlurmSettings",
                               "orchestrator.providers.slurm.settings:SlurmSection"))
