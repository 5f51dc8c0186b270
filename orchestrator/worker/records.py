"""The worker's records: what it appends to OUT_FILE, typed on both sides of the boundary.

The worker writes one JSON object a line (docs/ARCHITECTURE.md: worker input and output):
`measurement` per epoch, `client` (what a command's script told of its framework), `error`
with a `FailureKind`, `timing` and `provenance`. Each is a frozen dataclass here and is
written only through `to_json` (by `context.RecordWriter`), so no hand-made dict crosses
the boundary; the driver (`executors/outcome.py`) reads the same file back through
`read_out`, the reader the worker itself uses for its client's records. This pairs with
`cell_file.py`, the typed input, as the typed output.

A line's `record` names its kind and `version` the format it was written in. Reading is
forgiving where a record stays useful: a field of the wrong type is left out of the record
and named in a located problem (which line, which field, why), the rest of the record
kept; a field this reader does not know is ignored (a newer worker may add some), except on
a measurement, where every unknown field is a workload metric (a number) that the driver
holds against the metrics the workload declares. A line that is no record at all (not a
JSON object, a measurement without its epoch) is `unreadable`. Stdlib only.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import MISSING, dataclass, field, fields
from typing import (
    Annotated,
    Any,
    ClassVar,
    Literal,
    Self,
    TypeVar,
    get_type_hints,
)

from orchestrator.worker.bounds import NOT_NEGATIVE, POSITIVE, Bound
from orchestrator.worker.cell_file import FailureKind
from orchestrator.worker.json_types import as_declared, mismatch
from orchestrator.worker.units import ITEM_UNIT_PATTERN

RECORDS_VERSION = 1
# Version history: 1, the first typed one (the same lines as the untyped output before it,
# each with `version`; a line without one is read as version 1).
ENVELOPE = ("record", "version")  # on every line, beside the record's own fields


class RecordLineError(ValueError):
    """A line that is no record this reader can keep: the message says why."""


class UnknownKind(Exception):
    """A record of a kind this reader does not know (a newer worker's): skipped."""


class _Line:
    """What every record of the worker's output does: its kind, its line, its reading."""

    KIND: ClassVar[str]
    __dataclass_fields__: ClassVar[dict[str, Any]]  # each subclass is a dataclass

    def fields(self) -> dict[str, Any]:
        """The record's fields that are set (None is left out, as the line leaves it)."""
        return {f.name: getattr(self, f.name) for f in fields(self)
                if getattr(self, f.name) is not None}

    def to_dict(self) -> dict[str, Any]:
        return {"record": self.KIND, "version": RECORDS_VERSION, **self.fields()}

    def to_json(self) -> str:
        """The record as its line in OUT_FILE (without the newline)."""
        return json.dumps(self.to_dict(), separators=(",", ":"))

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> tuple[Self, list[str]]:
        """The line's object as this record, and a problem for each field left out."""
        kept, problems = cls.known(raw)
        return cls(**kept), problems

    @classmethod
    def known(cls, raw: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
        """The fields of `raw` this record has, each of its declared type, and a problem
        (`field 'x' ...`) for each left out; RecordLineError where a required one is."""
        hints = get_type_hints(cls)
        kept: dict[str, Any] = {}
        problems: list[str] = []
        for spec in fields(cls):
            required = spec.default is MISSING and spec.default_factory is MISSING
            if spec.name not in raw:
                if required:
                    raise RecordLineError(f"a {cls.KIND} record without {spec.name!r}")
                continue
            why = mismatch(raw[spec.name], hints[spec.name])
            if why is None:
                kept[spec.name] = as_declared(raw[spec.name], hints[spec.name])
            elif required:
                raise RecordLineError(f"{cls.KIND} field {spec.name!r} {why}")
            else:
                problems.append(f"{cls.KIND} field {spec.name!r} {why}")
        return kept, problems


@dataclass(frozen=True)
class MeasurementFields:
    """One epoch's (or timed round's) figures, with their bounds, declared once: the
    worker's line has them (MeasurementLine) and the driver's stored record takes them from
    here (results/records.py: MeasurementRecord), which holds them to their bounds."""

    epoch: Annotated[int, Bound(ge=1)]
    item_unit: Annotated[str, Bound(pattern=ITEM_UNIT_PATTERN)]  # any plain word (units.py)
    # "steps": timed step by step (the rest of the fields); "whole": a command's script
    # without the client, timed as a whole: epoch_s and probes, no steps, items or rate
    timing: Literal["steps", "whole"] = "steps"
    train_s: Annotated[float | None, POSITIVE] = None
    items: Annotated[float | None, POSITIVE] = None
    items_per_s: Annotated[float | None, POSITIVE] = None
    steps: int | None = None
    warmup_steps: Annotated[int | None, NOT_NEGATIVE] = None
    warmup_s: float | None = None
    epoch_s: float | None = None  # the whole epoch: warm-up, timed steps, evaluation, between
    step_s_median: float | None = None
    step_s_p90: float | None = None
    timing_block_steps: int | None = None  # steps per synchronised block (block timing)
    eval_s: float | None = None
    eval_items_per_s: float | None = None
    mem_alloc_peak_bytes: int | None = None
    mem_reserved_peak_bytes: int | None = None
    nvml_used_peak_bytes: int | None = None
    host_rss_peak_bytes: int | None = None
    # the contention probe's (contention.py), over the epoch: its threads running (mean),
    # its threads waiting for a CPU, and others' use of its CPUs
    cell_cpu_cores: Annotated[float | None, NOT_NEGATIVE] = None
    cpu_wait_cores: Annotated[float | None, NOT_NEGATIVE] = None
    other_cpu_cores: Annotated[float | None, NOT_NEGATIVE] = None
    gpu_util_mean_pct: float | None = None
    gpu_power_mean_w: float | None = None
    gpu_sm_clock_mean_mhz: float | None = None
    gpu_temp_max_c: float | None = None
    gpu_energy_j: float | None = None
    throttle_reasons: str | None = None  # comma-separated NVML reasons seen in the epoch
    flops_per_item: float | None = None


@dataclass(frozen=True)
class MeasurementLine(MeasurementFields, _Line):
    """One epoch (or timed round): `EpochMeter.summary()`'s figures, the probes' peaks,
    the FLOP model's count, and the workload's own metrics (flattened on the line)."""

    KIND: ClassVar[str] = "measurement"

    metrics: dict[str, float] = field(default_factory=dict)  # the workload's, with units

    def __post_init__(self) -> None:
        taken = sorted(set(self.metrics) & {*ENVELOPE, *(f.name for f in fields(self))})
        if taken:
            raise ValueError(f"metric names {taken} are measurement fields: name the "
                             "workload's metrics with their units (e.g. ms_per_step)")

    def fields(self) -> dict[str, Any]:
        own = super().fields()
        return {**{k: v for k, v in own.items() if k != "metrics"}, **self.metrics}

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> tuple[Self, list[str]]:
        """The line's measurement, and its problems; its unknown fields are its metrics."""
        kept, problems = cls.known(raw)
        names = {f.name for f in fields(cls)} | set(ENVELOPE)
        metrics = {}
        for name, value in raw.items():
            if name in names or value is None:  # a metric not measured this epoch
                continue
            if why := mismatch(value, float):
                problems.append(f"measurement metric {name!r} {why}")
            elif not math.isfinite(value):
                problems.append(f"measurement metric {name!r} is {value!r}, not a finite number")
            else:
                metrics[name] = value
        return cls(**kept, metrics=metrics), problems


@dataclass(frozen=True)
class ClientLine(_Line):
    """What a command's script told `matrix_bench.attach()` of its framework (client.py),
    for the worker to put in the provenance record (command.py), field by field."""

    KIND: ClassVar[str] = "client"

    framework: str | None = None
    framework_version: str | None = None
    cuda: str | None = None
    cudnn: str | None = None
    gpu_model: str | None = None
    gpu_count: int | None = None


@dataclass(frozen=True)
class ErrorLine(_Line):
    """Why the cell did not finish: the executor maps `kind` to its status."""

    KIND: ClassVar[str] = "error"

    kind: FailureKind = FailureKind.FAILED
    type: str | None = None  # the exception's class name
    message: str | None = None


@dataclass(frozen=True)
class TimingLine(_Line):
    """The worker's own time in the workload, imports included (CellRecord.workload_s)."""

    KIND: ClassVar[str] = "timing"

    workload_s: float | None = None


@dataclass(frozen=True)
class ProvenanceFields:
    """Where the cell ran and with what, as the worker sees it, declared once: the worker's
    line has these fields (ProvenanceLine), and the driver's stored record takes them from
    here and adds its own (results/records.py: ProvenanceRecord)."""

    python: str | None = None
    hostname: str | None = None  # the worker's (a container's own under docker)
    cpu_model: str | None = None
    cpu_count: int | None = None
    # the threads it computed with: the framework's count (torch's; None where the framework
    # does not say) and the math libraries' settings it started with (threads.py: OMP_NUM_
    # THREADS ...; {} where none was set, None in a record made before they were recorded)
    cpu_threads: Annotated[int | None, Bound(ge=1)] = None
    thread_settings: dict[str, str] | None = None
    # the CPUs the worker could compute on (threads.py: usable_cpus), which `cpu_count` (the
    # machine's) overstates under taskset, a cgroup quota or Slurm's --cpus-per-task
    cpus_usable: Annotated[int | None, Bound(ge=1)] = None
    framework: str | None = None
    framework_version: str | None = None
    data_sha256: dict[str, str] | None = None  # data file name -> sha256
    # precision switch -> its value as text, as the framework reported it after the
    # workload set it
    precision_switches: dict[str, str] | None = None
    # the device the framework held the model on, read back ("cuda:0", "gpu:0", "cpu")
    compute_device: str | None = None
    # the devices the cell trained on (GPUs, or ranks on a CPU): its peak is theirs, which
    # may be fewer than the node's gpu_count (gpt_lm with workers: 1 on an 8-GPU node)
    devices_used: int | None = None
    cuda: str | None = None
    cudnn: str | None = None
    driver: str | None = None
    gpu_model: str | None = None
    gpu_count: int | None = None
    gpu_memory_bytes: int | None = None  # each card's memory, as the driver reports it
    gpu_power_limit_w: float | None = None  # the enforced power limit of one card
    # the node's measured ceiling at the cell's precision (ceiling.py), where this cell
    # measured it: FLOP/s of one device, the probe, its cost; or why none was measured
    ceiling_flops: float | None = None
    ceiling_precision: str | None = None
    ceiling_probe: str | None = None
    ceiling_cost_s: float | None = None
    ceiling_gap: str | None = None
    # a cell across nodes (worker/nodes.py): the nodes and ranks its group had, the host of
    # each rank in rank order, and the all-reduce bus bandwidth measured between them before
    # the workload (GB/s, as nccl-tests reports busbw) at the largest size measured
    nodes: Annotated[int | None, Bound(ge=1)] = None
    world_size: Annotated[int | None, Bound(ge=1)] = None
    rank_hosts: list[str] | None = None
    net_busbw_gbs: Annotated[float | None, Bound(gt=0)] = None
    net_probe_bytes: Annotated[int | None, Bound(gt=0)] = None
    # how long node 0 waited for every rank to join (the rendezvous): a start-up a job
    # across nodes pays once, which `matrix advise` counts
    rendezvous_s: Annotated[float | None, Bound(ge=0)] = None
    # the link between its nodes as its hardware entry states it (net_gbps), Gbit/s per node:
    # what the judge holds net_busbw_gbs to, where no catalogue knows the instance type's
    net_link_gbps: Annotated[float | None, Bound(gt=0)] = None


@dataclass(frozen=True)
class ProvenanceLine(ProvenanceFields, _Line):
    """Where the cell ran and with what, as the worker saw it; the driver adds its own
    fields (image, node, tool, price) into the stored `ProvenanceRecord`."""

    KIND: ClassVar[str] = "provenance"


Line = MeasurementLine | ClientLine | ErrorLine | TimingLine | ProvenanceLine
LINE_TYPES: dict[str, type[Line]] = {kind.KIND: kind for kind in (
    MeasurementLine, ClientLine, ErrorLine, TimingLine, ProvenanceLine)}
L = TypeVar("L", bound=_Line)


def read_line(raw: dict[str, Any]) -> tuple[Line, list[str]]:
    """One line's object as its record, and the problems of the fields left out of it;
    RecordLineError for an object that is no record, UnknownKind for a kind not known here."""
    kind = raw.get("record")
    if not isinstance(kind, str):
        raise RecordLineError("an object without its record kind")
    if kind not in LINE_TYPES:
        raise UnknownKind(kind)
    return LINE_TYPES[kind].from_dict(raw)


@dataclass(frozen=True)
class Read:
    """One record of the output with its 1-based line and the fields left out of it."""

    number: int
    record: Line
    problems: tuple[str, ...] = ()

    def located(self) -> list[str]:
        return [f"output line {self.number}: {problem} (left out)" for problem in self.problems]


@dataclass(frozen=True)
class WorkerOutput:
    """A worker's OUT_FILE as records: what was read, what was not, and where."""

    reads: tuple[Read, ...] = ()
    unreadable: tuple[str, ...] = ()  # located: lines that are no record
    notes: tuple[str, ...] = ()  # located: lines skipped, a newer worker's version

    def all(self, kind: type[L]) -> list[tuple[Read, L]]:
        return [(read, read.record) for read in self.reads if isinstance(read.record, kind)]

    def first(self, kind: type[L]) -> tuple[Read, L] | None:
        return next(iter(self.all(kind)), None)

    def last(self, kind: type[L]) -> L | None:
        found = self.all(kind)
        return found[-1][1] if found else None


def read_out(lines: Iterable[str]) -> WorkerOutput:
    """The worker's output, line by line: each line a record, an unreadable line, or a note
    (a kind this reader does not know is skipped, as a newer worker may write one)."""
    reads: list[Read] = []
    unreadable: list[str] = []
    notes: list[str] = []
    newer = False
    for number, text in enumerate(lines, start=1):
        try:
            raw = json.loads(text)
            if not isinstance(raw, dict):
                raise RecordLineError("not a JSON object")
            version = raw.get("version", 1)
            if isinstance(version, int) and version > RECORDS_VERSION and not newer:
                newer = True  # said once: every line of that worker is of its version
                notes.append(f"output line {number}: record version {version}, newer than "
                             f"this reader's {RECORDS_VERSION}: fields it added are not read")
            record, problems = read_line(raw)
        except UnknownKind as exc:
            notes.append(f"output line {number}: a {exc.args[0]!r} record, a kind this "
                         "reader does not know (skipped)")
            continue
        except ValueError as exc:  # json's errors and RecordLineError
            unreadable.append(f"output line {number} is not a record ({exc}): {text[:80]!r}")
            continue
        reads.append(Read(number, record, tuple(problems)))
    return WorkerOutput(tuple(reads), tuple(unreadable), tuple(notes))


def read_out_file(path: str) -> WorkerOutput:
    """`read_out` of the file at `path`; an empty output where there is none yet."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return read_out(handle.read().splitlines())
    except FileNotFoundError:
        return WorkerOutput()
