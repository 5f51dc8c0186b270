"""What a workload sees inside the worker: its cell, its device, and the means to report.

A workload module defines `run(ctx: Context) -> None`. It reads `ctx.params`, trains on
`ctx.device`, and for each epoch opens `ctx.start_epoch()`, times its steps with the
returned meter and hands it to `ctx.end_epoch()`, which appends the measurement record.
Stdlib only, so the worker costs nothing beyond the workload's own imports.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from typing import Any

from orchestrator.worker.cell_file import CellFile
from orchestrator.worker.contention import ContentionProbe
from orchestrator.worker.measure import EpochMeter, HostRssProbe, MemoryProbe, Sync, no_sync
from orchestrator.worker.nodes import NodePlace, node_place
from orchestrator.worker.profiling import EpochProfiler
from orchestrator.worker.records import Line, MeasurementLine
from orchestrator.worker.units import plural
from orchestrator.worker.workload_code import optional_module


class Unsupported(Exception):
    """The workload cannot run this configuration (status `unsupported`, not `failed`)."""


class RecordWriter:
    """Appends the worker's records to OUT_FILE, one JSON object per line.

    Each line is flushed, so a crash after it loses nothing; no fsync: the executor reads
    the file once the process has ended, and the journal it writes is what gets fsync'd.
    """

    def __init__(self, path: str) -> None:
        self.path = path

    def write(self, record: Line) -> None:
        """Append `record`, typed (worker/records.py): the driver reads it back the same."""
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write(record.to_json() + "\n")


def host_probes() -> list[MemoryProbe]:
    """What every epoch reads of the host: the worker's peak memory, and whether the cell
    had its CPUs to itself (contention.py)."""
    return [HostRssProbe(), ContentionProbe()]


class Context:
    """The running cell as a workload sees it."""

    def __init__(self, cell: CellFile, writer: RecordWriter) -> None:
        self.cell = cell  # the cell file (cell_file.py): ids, repeat, hardware, stack, limits
        self.writer = writer
        self.framework: str | None = None  # set by the workload through use_framework()
        self.framework_version: str | None = None
        self.data_files: dict[str, str] = {}  # data file name -> sha256
        # precision switch -> its value as text, read back from the framework once the
        # workload has set them (e.g. torch.backends.cudnn.allow_tf32 -> "False")
        self.precision_switches: dict[str, str] = {}
        # where the framework put the model, read back from it (ran_on): "cuda:0", "gpu:0",
        # "cpu"; a framework that quietly fell back to the CPU shows here
        self.compute_device: str | None = None
        # set by the workload (uses_devices): the GPUs it trains on, or its ranks or devices
        # where it counts them on a CPU too; absent, the report counts the node's GPUs
        self.devices_used: int | None = None
        # a cell across nodes: this worker's node among them (nodes.py), and what its group
        # recorded (record_group): ranks in all, each rank's host, the network's bus bandwidth
        self.node: NodePlace = node_place(cell.hardware.nodes, cell.timeout_s)
        self.group: dict[str, Any] = {}
        self._sync: Sync = no_sync
        self._probes: list[MemoryProbe] = host_probes()
        self._epochs_started = 0
        self._profiler = EpochProfiler(writer.path) if cell.profile else None

    @property
    def params(self) -> dict[str, Any]:
        """The resolved parameters, each of the type `defaults.yaml` declares."""
        return self.cell.params

    @property
    def epochs(self) -> int:
        return self.cell.epochs

    @property
    def repeat(self) -> int:
        """The 1-based repeat of the cell's configuration (a seed may follow it)."""
        return self.cell.repeat

    @property
    def gpus(self) -> int:
        """The GPUs the cell's hardware gives it (0: CPU only)."""
        return self.cell.hardware.gpus

    @property
    def memory_limit_mb(self) -> int | None:
        """The hard memory limit the cell runs under, if the matrix set one."""
        return self.cell.memory_limit_mb

    @property
    def device(self) -> str:
        """"cuda" when the cell's hardware has GPUs, else "cpu"."""
        return "cuda" if self.gpus > 0 else "cpu"

    @property
    def out_path(self) -> str:
        return self.writer.path

    def use_framework(self, name: str | None, version: str | None, sync: Sync = no_sync,
                      probes: Sequence[MemoryProbe] = ()) -> None:
        """Declare the framework, how to synchronise its device, and its memory probes
        (a command's script may give only the last two)."""
        self.framework, self.framework_version, self._sync = name, version, sync
        self._probes = [*host_probes(), *probes, *self.gpu_probes()]

    def ran_on(self, device: str) -> None:
        """Record the device the framework really holds the model on (a parameter's device,
        read back once the model is built), for the provenance record: a cell on GPU
        hardware whose framework found no GPU would otherwise pass as a GPU row."""
        self.compute_device = device

    def uses_devices(self, count: int) -> None:
        """Record how many devices the workload trains on (GPUs, or ranks on a CPU), for the
        provenance record: the row's peak is theirs, not the node's."""
        self.devices_used = count

    def record_group(self, world_size: int, rank_hosts: list[str],
                     busbw_gbs: float | None = None, probe_bytes: int | None = None,
                     rendezvous_s: float | None = None) -> None:
        """Record, for the provenance record, the process group of a cell across nodes: its
        ranks in all, the host of each in rank order, the all-reduce bus bandwidth its
        network probe measured (GB/s) at its largest size (bytes), and how long its ranks
        took to meet."""
        self.group = {"world_size": world_size, "rank_hosts": list(rank_hosts),
                      "net_busbw_gbs": busbw_gbs, "net_probe_bytes": probe_bytes,
                      "rendezvous_s": rendezvous_s}

    def gpu_probes(self) -> list[MemoryProbe]:
        """The NVML sampler over the cell's GPUs, where there are GPUs and NVML answers."""
        if self.gpus == 0:
            return []
        try:
            from orchestrator.worker.nvml import NvmlProbe, Sampler, nvml_reader, visible_gpu_ids

            return [NvmlProbe(Sampler(nvml_reader(visible_gpu_ids())))]
        except Exception as exc:  # no nvidia-ml-py or no driver: measure without it, say so
            print(f"matrix-bench: NVML sampling off ({type(exc).__name__}: {exc})",
                  file=sys.stderr)
            return []

    def epoch_range(self) -> Iterator[int]:
        """1-based epoch numbers."""
        return iter(range(1, self.epochs + 1))

    def start_epoch(self, warmup_steps: int, block_steps: int = 1) -> EpochMeter:
        """The meter of one epoch (or timed round): resets the probes, synchronises and reads
        the clock (the start of `epoch_s`), then times; `block_steps` > 1 times the timed
        steps in synchronised blocks of that many (EpochMeter: block timing)."""
        self._epochs_started += 1
        if self._profiler is not None and self._epochs_started == self.epochs:
            self._profiler.start()  # the last epoch (profiling.py says why)
        return EpochMeter(warmup_steps=warmup_steps, sync=self._sync, probes=self._probes,
                          block_steps=block_steps)

    def timer(self, warmup_steps: int, block_steps: int = 1) -> EpochMeter:
        """A meter for a second timed region inside an epoch (e.g. forward-only passes):
        the same device synchronisation, no probes (the epoch's meter has them)."""
        return EpochMeter(warmup_steps=warmup_steps, sync=self._sync, block_steps=block_steps)

    def end_epoch(self, epoch: int, meter: EpochMeter, **metrics: float) -> MeasurementLine:
        """Append the epoch's measurement record, with workload metrics named with units
        (ValueError for a metric named as a measurement field)."""
        figures: dict[str, Any] = dict(meter.summary())  # each a MeasurementLine field
        record = MeasurementLine(epoch=epoch, timing="steps", item_unit=self.cell.item_unit,
                                 flops_per_item=self.flops_per_item(), metrics=metrics,
                                 **figures)
        if self._profiler is not None and self._epochs_started == self.epochs:
            self._profiler.stop(epoch)  # after the figures: the export is not timed
        self.writer.write(record)
        print(epoch_line(record, self.epochs), flush=True)  # the cell's log
        return record

    def flops_per_item(self) -> float | None:
        """From the workload's FLOP model (`workloads/<name>/flops.py`), where it has one."""
        if self.cell.command:
            return None  # a command's script has no FLOP model
        return model_flops_per_item(self.cell.workload_package, self.params)


def epoch_line(record: MeasurementLine, epochs: int) -> str:
    """One epoch's figures as the cell's log shows them."""
    unit = record.item_unit
    line = (f"matrix-bench: epoch {record.epoch}/{epochs}: "
            f"{record.items_per_s:,.4g} {plural(unit)}/s over {record.steps} timed steps "
            f"({record.items:,.0f} {plural(unit)} in {record.train_s:.4g} s; "
            f"{record.warmup_steps} warm-up steps in {record.warmup_s or 0:.3g} s; "
            f"epoch {record.epoch_s:.4g} s)")
    peak = record.mem_alloc_peak_bytes
    if peak is not None:
        line += f", device memory peak {peak / 2**20:,.0f} MiB"
    return line


def model_flops_per_item(package: str, params: dict[str, Any]) -> float | None:
    """Training FLOPs per item from the `flops.py` of a workload's `package` (pure Python),
    or None for a workload without a FLOP model. The worker records it; the report's judge
    (judge.py) derives it again for rows recorded without it."""
    module = optional_module(f"{package}.flops")
    return None if module is None else float(module.flops_per_item(params))
