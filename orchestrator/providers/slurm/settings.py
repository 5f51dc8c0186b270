"""A `kind: slurm` hardware entry's own keys (docs/slurm.md): the partition, required, and
what a task asks Slurm for; and the matrix's `slurm:` section, how a sweep uses Slurm.
Declared here, where the provider lives; the core gathers them (spec/entry_settings.py).
Pydantic only: validating a matrix imports this, never Slurm's commands."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from orchestrator.spec.entry_settings import KindSettings, ProviderSection
from orchestrator.spec.model import MAX_TIMEOUT_S, MatrixSpec, Name


class SlurmSettings(KindSettings):
    """The partition is required (the provider says so, at the entry's line); the rest
    default to what the partition gives. mem_gb is what the job asks Slurm for."""

    NOT_IDENTITY: ClassVar[frozenset[str]] = frozenset({"time_limit", "account", "qos"})

    partition: Name | None = None
    cpus: int | None = Field(default=None, ge=1)
    mem_gb: float | None = Field(default=None, gt=0, le=2**20)
    time_limit: str | None = None  # minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS
    account: Name | None = None
    qos: Name | None = None
    constraint: str | None = Field(default=None, min_length=1, max_length=200)


def slurm_settings(hardware: object) -> SlurmSettings:
    """A `kind: slurm` entry's settings, typed (the provider is only asked of its kind)."""
    settings = getattr(hardware, "settings", None)
    if not isinstance(settings, SlurmSettings):
        raise TypeError(f"{getattr(hardware, 'name', hardware)!r} is not a kind slurm entry")
    return settings


class SlurmSection(ProviderSection):
    """The matrix's `slurm:` section (docs/slurm.md): the settings of every `kind: slurm`
    entry's sweep."""

    max_parallel: int = Field(default=8, ge=1, le=100_000)  # array tasks running at once
    queue_timeout_s: float = Field(default=6 * 3600.0, gt=0, le=MAX_TIMEOUT_S)  # then cancelled
    poll_s: float = Field(default=10.0, ge=0.2, le=600)  # how often the driver asks Slurm
    # Where a task's end is read: sacct where accounting runs (auto), or the controller
    # (scontrol, which forgets a job MinJobAge after it ends) and the task's own files.
    outcomes: Literal["auto", "sacct", "controller"] = "auto"
    # The Python the array tasks run the worker with, on the nodes (a path on the shared
    # filesystem); default: the one running `matrix run`.
    python: str | None = None


def slurm_section(spec: MatrixSpec) -> SlurmSection:
    """The matrix's `slurm:` section, its defaults where it has none."""
    found = spec.section("slurm")
    return found if isinstance(found, SlurmSection) else SlurmSection()
