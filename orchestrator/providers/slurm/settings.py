"""A `kind: slurm` hardware entry's own keys (docs/slurm.md): the partition, required, and
what a task asks Slurm for. Declared here, where the provider lives; the core gathers them
from the entry's flat keys (spec/model.py: `Hardware.settings`). Pydantic only: validating
a matrix imports this, never Slurm's commands."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from orchestrator.spec.entry_settings import KindSettings
from orchestrator.spec.model import Name


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
