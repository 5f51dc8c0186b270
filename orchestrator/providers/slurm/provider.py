"""The `slurm` provider (orchestrator/providers/__init__.py): kind `slurm`.

Its cells run as the tasks of one job array per hardware entry, submitted from the login
node the sweep runs on and followed from there (group.py). It checks each entry (a
partition, a time limit Slurm can read), and before anything is submitted: that Slurm
answers, that each partition exists and offers the GPUs asked of it, and that the run
directory is somewhere the partition's nodes can read. `matrix cleanup` cancels the jobs
of runs no live sweep owns. Prices are the entries' own (`price_per_hour`).
"""

from __future__ import annotations

import math
import socket
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.executors import needs_image
from orchestrator.providers import BaseProvider, CellGroup, Launch, Say
from orchestrator.providers.slurm import commands
from orchestrator.providers.slurm.jobs import NAME_PREFIX, time_limit_s
from orchestrator.providers.slurm.settings import slurm_section, slurm_settings
from orchestrator.validate.output import filesystem_type

if TYPE_CHECKING:
    from orchestrator.hardware.local import LocalMachine
    from orchestrator.registry.cell_run import Cell
    from orchestrator.spec.model import Hardware, MatrixSpec

# Filesystems that live on one machine: a run directory on one is not shared with nodes
LOCAL_FILESYSTEMS = frozenset({"ext2", "ext3", "ext4", "xfs", "btrfs", "tmpfs", "overlay",
                               "zfs", "f2fs", "vfat", "ramfs", "bcachefs"})


class SlurmProvider(BaseProvider):
    launches = True
    relaunches = True  # a wave of repeats is one more job array

    def hardware_problem(self, hardware: Hardware) -> str | None:
        asks = slurm_settings(hardware)
        if not asks.partition:
            return "kind slurm needs a partition (e.g. partition: gpu)"
        if asks.time_limit is not None:
            limit = time_limit_s(asks.time_limit)
            if asks.time_limit.strip().upper() in ("UNLIMITED", "INFINITE") or limit == 0:
                # Slurm reads these (and `--time=0`) as no limit at all: a cost no plan bounds
                return (f"time_limit {asks.time_limit!r} means no limit to Slurm, and "
                        "matrix-bench plans no unbounded cost: give the most a cell may take "
                        "(e.g. \"02:00:00\")")
            if limit is None:
                return (f"time_limit {asks.time_limit!r} is not a Slurm time limit: minutes, "
                        "MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS (e.g. \"02:00:00\")")
        return None

    def skip_reason(self, cell: Cell, local: LocalMachine, launch: bool) -> str | None:
        """None: a Slurm cell runs as a Slurm job, which needs no Ray (`--no-ray` too)."""
        return None

    def plan_lines(self, spec: MatrixSpec, cells: list[Cell]) -> list[str]:
        """Per entry: its partition, the hours its tasks ask Slurm for (tasks x nodes x time
        limit) and what that costs where the entry has a price."""
        lines = []
        for hardware in {c.hardware.name: c.hardware for c in cells}.values():
            tasks = sum(c.hardware.name == hardware.name for c in cells)
            # a task of a cell across nodes holds all its nodes for as long
            node_tasks = sum(c.hardware.nodes for c in cells if c.hardware.name == hardware.name)
            settings = slurm_settings(hardware)
            limit = time_limit_s(settings.time_limit) if settings.time_limit else None
            asks = ", ".join(filter(None, [
                f"{hardware.gpus} GPU(s)" if hardware.gpus else "",
                f"{settings.cpus or 1} CPU(s)",
                f"{settings.mem_gb:g} GB" if settings.mem_gb else
                "its CPUs' share of a node's memory (mem_gb unset)"]))
            line = (f"slurm {hardware.name}: partition {settings.partition}, {tasks} task(s) "
                    f"of {asks}, ")
            if limit is None:
                line += "each up to the partition's time limit"
            else:
                hours = node_tasks * limit / 3600
                span = f"{limit // 3600}:{limit % 3600 // 60:02d}:{limit % 60:02d}"
                held = (f"{tasks} tasks holding {node_tasks} nodes" if node_tasks != tasks
                        else str(tasks))
                line += f"{hours:.2f} node-hours requested ({held} x {span})"
                if hardware.price_per_hour is not None:
                    line += (f", up to ${hours * hardware.price_per_hour:.2f} at "
                             f"${hardware.price_per_hour:g}/h")
            lines.append(line)
        return lines

    def check_launch(self, spec: MatrixSpec, cells: list[Cell], run_dir: Path,
                     say: Say) -> None:
        """Refuse before anything is built or submitted: no Slurm here, a partition that
        does not exist or offers fewer GPUs than asked, a run directory its nodes cannot
        read, an image its nodes cannot pull."""
        if not commands.available():
            raise commands.SlurmError("sbatch and squeue are not on PATH: run matrix on a "
                                      "Slurm login node for kind slurm hardware")
        run_dir = run_dir.resolve()
        if slurm_section(spec).outcomes == "sacct" and not commands.accounting_on():
            raise commands.SlurmError("slurm.outcomes is sacct, but this cluster keeps no "
                                      "accounting (AccountingStorageType): use auto")
        for hardware in {c.hardware.name: c.hardware for c in cells}.values():
            name = slurm_settings(hardware).partition
            assert name is not None  # hardware_problem refused an entry without one
            partition = commands.partition(name)
            if partition is None:
                raise commands.SlurmError(f"hardware {hardware.name}: Slurm has no partition "
                                          f"{name!r} (sinfo)")
            if hardware.gpus > partition.gpus:
                offers = f"{partition.gpus} GPU(s) per node" if partition.gpus else "no GPU"
                raise commands.SlurmError(
                    f"hardware {hardware.name}: gpus: {hardware.gpus}, but partition "
                    f"{name} offers {offers} (sinfo)")
            needed = max(c.hardware.nodes for c in cells if c.hardware.name == hardware.name)
            if needed > partition.nodes:
                raise commands.SlurmError(
                    f"hardware {hardware.name}: nodes: {needed}, but partition {name} has "
                    f"{partition.nodes} node(s) (sinfo)")
            _check_node_size(hardware, partition)
            if not _all_here(partition.hosts):
                _check_shared(run_dir, partition)
                if spec.images.registry is None and any(
                        needs_image(c.stack) for c in cells if c.hardware == hardware):
                    raise commands.SlurmError(
                        f"hardware {hardware.name}: partition {partition.name}'s nodes pull "
                        "each stack's image from a registry: set images.registry")

    def launch(self, launch: Launch) -> CellGroup:
        from orchestrator.providers.slurm.group import SlurmGroup

        return SlurmGroup(launch, slurm_section(launch.spec))

    def remove_leftovers(self, owned_runs: set[str], dry_run: bool, region: str | None
                         ) -> list[str]:
        """Cancel the queued and running jobs of runs that no live sweep owns."""
        if not commands.available():
            return []
        arrays: dict[str, tuple[str, list[str]]] = {}
        for task in commands.queued(NAME_PREFIX):
            run = task.name.removeprefix(NAME_PREFIX)
            if run not in owned_runs:
                array_id = task.job_id.partition("_")[0]
                arrays.setdefault(array_id, (run, []))[1].append(task.state)
        if not dry_run:
            commands.cancel(*arrays)
        return [f"cancel Slurm job {array_id} of run {run} ({len(states)} task(s): "
                f"{', '.join(sorted(set(states))).lower()})"
                for array_id, (run, states) in sorted(arrays.items())]


def _check_node_size(hardware: Hardware, partition: commands.Partition) -> None:
    """Refuse CPUs or memory no node of the partition has: such a job would wait PENDING
    until `queue_timeout_s` (hours), never to run."""
    asks = slurm_settings(hardware)
    if asks.cpus and partition.cpus and asks.cpus > partition.cpus:
        raise commands.SlurmError(
            f"hardware {hardware.name}: cpus: {asks.cpus}, but partition "
            f"{asks.partition} offers at most {partition.cpus} CPUs per node (sinfo)")
    wanted_mb = math.ceil(asks.mem_gb * 1024) if asks.mem_gb else 0
    if wanted_mb and partition.mem_mb and wanted_mb > partition.mem_mb:
        raise commands.SlurmError(
            f"hardware {hardware.name}: mem_gb: {asks.mem_gb:g}, but partition "
            f"{asks.partition} offers at most {partition.mem_mb / 1024:.3g} GB per node "
            "(sinfo)")


def _all_here(hosts: tuple[str, ...]) -> bool:
    """Whether every node is this machine (a one-machine cluster shares every folder)."""
    here = {socket.gethostname(), socket.getfqdn(), socket.gethostname().split(".")[0]}
    return all(host in here or host.split(".")[0] in here for host in hosts)


def _check_shared(run_dir: Path, partition: commands.Partition) -> None:
    kind = filesystem_type(run_dir)
    if kind in LOCAL_FILESYSTEMS:
        hosts = ", ".join(partition.hosts[:3]) + (", ..." if len(partition.hosts) > 3 else "")
        raise commands.SlurmError(
            f"the run directory {run_dir} is on {kind}, local to this machine, and the nodes "
            f"of partition {partition.name} ({hosts}) cannot read it: put the run on a "
            "filesystem they share (output: in the matrix, or --output)")


PROVIDER = SlurmProvider()
