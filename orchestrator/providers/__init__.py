"""Providers: where a sweep's nodes come from, registered by name like executors.

A provider offers one or more hardware kinds (`kind:` of a matrix's hardware entry) and
owns everything about their nodes: which entries are valid, what the plan cannot run on
them, what they cost, how nodes come up for a set of cells and go again, the credentials
of its image registry, and what a run may leave behind. The core asks; only the
provider's own package knows its cloud. Two are built in:

- `local` (`providers/local.py`): kind `local`, this machine. Its cells run here, serially
  or on an embedded Ray, or on the existing Ray cluster given with `--ray-address`: that
  cluster takes the place of every provider's nodes and decides which hardware exists.
- `aws` (`providers/aws/provider.py`): kind `ec2`. Its cells run on a Ray cluster it launches for
  the sweep, with a driver on the head; prices, quotas, ECR, S3 and cleanup are its own.
- `slurm` (`providers/slurm/provider.py`): kind `slurm`. Its cells run as the tasks of a
  job array per hardware entry, submitted from here; their files travel through the run
  directory on a filesystem the nodes share.

A provider that `launches` gets its cells as a `Launch` and returns a `CellGroup`: a
context manager inside which its nodes are up and its cells run, handing each cell's
records to `Launch.record`; leaving it tears the nodes down however the block ends. That
fits a scheduler that takes batch jobs (Slurm: submit an array, follow its files) as well
as one that brings nodes up (KubeRay). A new provider is one module and one
`register_provider` call, or, from an installed distribution, one entry point
(`matrix_bench.providers`, orchestrator/plugins.py), which every process that reads the
registry finds. The registry (orchestrator/registry/providers.py, re-exported here for
plugin authors) holds light declarations, so validating a matrix loads a provider's
settings model but never its SDK.
"""

from __future__ import annotations

from orchestrator.registry.cell_run import Cell, ImageRef, ToolInfo
from orchestrator.registry.prices import Price
from orchestrator.registry.providers import (
    BaseProvider,
    CellGroup,
    Launch,
    Provider,
    ProviderKind,
    Say,
    UnknownProvider,
    hardware_kinds,
    provider_for,
    provider_named,
    provider_names,
    providers,
    register_provider,
    registered_for,
    registry_auth,
    remove_leftovers,
    setting_owners,
    settings_of,
)

__all__ = ["BaseProvider", "Cell", "CellGroup", "ImageRef", "Launch", "Price", "Provider",
           "ProviderKind", "Say", "ToolInfo", "UnknownProvider", "hardware_kinds",
           "provider_for", "provider_named", "provider_names", "providers",
           "register_provider", "registered_for", "registry_auth", "remove_leftovers",
           "setting_owners", "settings_of"]
