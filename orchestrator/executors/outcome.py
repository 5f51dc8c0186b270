"""From a finished worker (exit status, OUT_FILE, log) to journal records and a status.

Shared by every executor, so `failed`, `crashed`, `oom`, `timeout` and `invalid_output` mean
the same wherever a cell ran. `oom` needs evidence: the worker's MemoryError or CUDA
out-of-memory record, such an error in the log, or the engine's OOMKilled.
"""

from __future__ import annotations

import contextlib
import json
import signal
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from orchestrator.code_identity import git_revision
from orchestrator.executors.ceilings import measured_here, node_name, remember
from orchestrator.executors.leftovers import leftover_reason
from orchestrator.executors.logs import cap_log, tail_of
from orchestrator.flop_claims import FlopClaimError
from orchestrator.flop_claims import flops_per_item as claim_flops
from orchestrator.hardware.peaks import cpu_peak_estimate, datasheet_peak
from orchestrator.plan.cells import declared
from orchestrator.registry.cell_run import Cell, ToolInfo
from orchestrator.results.columns import HW, STACK, as_param_columns, as_setting_columns
from orchestrator.results.records import (
    CellRecord,
    Flag,
    MeasurementRecord,
    ProvenanceRecord,
    Record,
    Status,
    condition_throttles,
)
from orchestrator.worker.cell_file import CELL_FILE_VERSION, FailureKind
from orchestrator.worker.records import (
    ErrorLine,
    MeasurementLine,
    ProvenanceLine,
    TimingLine,
    WorkerOutput,
    read_out_file,
)

FAILURE_STATUS: dict[str, Status] = {FailureKind.FAILED: Status.FAILED, FailureKind.OOM: Status.OOM,
                  FailureKind.UNSUPPORTED: Status.UNSUPPORTED,
                  FailureKind.STACK_MISMATCH: Status.STACK_MISMATCH,
                  FailureKind.DATA_UNAVAILABLE: Status.DATA_UNAVAILABLE}
OOM_EVIDENCE = ("MemoryError", "CUDA out of memory", "OutOfMemoryError", "RESOURCE_EXHAUSTED")
# A cell is `contended` where this many of its threads, on average, waited for a CPU while
# other processes used this many cores of its CPUs (worker/contention.py). Measured on 2
# cores (bench/contention_probe.py, docs/PERFORMANCE.md): torch's two threads alone wait
# 0.005 to 0.02; beside one or two busy loops 1.0 to 1.35 of them wait, and its steps take
# 6 to 9 times as long; one thread beside two loops, 0.35; a cell that sleeps, under 0.01.
CONTENDED_WAIT_CORES = 0.1
CONTENDED_OTHER_CORES = 0.25


@dataclass(frozen=True)
class WorkerExit:
    """How the worker process ended, as the executor saw it."""

    returncode: int | None  # None when it was killed for its timeout
    timed_out: bool
    started_at: str  # ISO 8601 UTC
    wall_s: float
    oom_killed: bool = False  # the engine said so (docker's State.OOMKilled)
    node_id: str | None = None
    leftovers: tuple[str, ...] = ()  # processes the cell left running, ended (leftovers.py)


@dataclass(frozen=True)
class CellFiles:
    """A cell's files in its run directory (docs/ARCHITECTURE.md: worker input and output)."""

    cell: Path  # cells/<cell_id>.json, the worker's input
    out: Path  # cells/<cell_id>.out.jsonl, the worker's records
    log: Path  # logs/<cell_id>.log, everything the worker printed
    started_at: str  # ISO 8601 UTC, when the files were laid out
    run_root: Path
    node_rank: int = 0  # a cell across nodes: whose files these are (node 0: the cell's)

    @classmethod
    def prepare(cls, cell: Cell, run_root: Path, node_rank: int = 0) -> CellFiles:
        """Write the cell file (with the ceilings this node has measured in the run) and
        clear a previous attempt's output. Node `node_rank` of a cell across nodes above 0
        has files of its own (`<cell_id>.node1.json` ...): node 0's are the cell's."""
        stem = cell_stem(cell, node_rank)
        files = cls(cell=run_root / "cells" / f"{stem}.json",
                    out=run_root / "cells" / f"{stem}.out.jsonl",
                    log=run_root / "logs" / f"{stem}.log",
                    started_at=datetime.now(UTC).isoformat(timespec="seconds"),
                    run_root=run_root, node_rank=node_rank)
        for folder in (files.cell.parent, files.log.parent):
            folder.mkdir(parents=True, exist_ok=True)
        content = cell_file_content(cell) | {"ceilings_measured": measured_here(cell, run_root)}
        files.cell.write_text(json.dumps(content, indent=2))
        files.out.unlink(missing_ok=True)
        return files


def cell_stem(cell: Cell, node_rank: int = 0) -> str:
    """The name of a cell's files in its run directory: its id, and for a node above 0 of a
    cell across nodes, that node's rank."""
    return cell.cell_id if node_rank == 0 else f"{cell.cell_id}.node{node_rank}"


def records_for(cell: Cell, exit: WorkerExit, files: CellFiles, tool: ToolInfo,
                extra_provenance: dict[str, Any] | None = None,
                status_override: tuple[Status, str] | None = None) -> list[Record]:
    """The attempt's batch: provenance, measurements, and the cell record last. A ceiling
    the worker measured is remembered for the node's next cells (ceilings.py)."""
    identity = _identity(cell)
    out_file, log_file = files.out, files.log
    output = read_out_file(str(out_file))
    extra = {**(extra_provenance or {}), "workload_version": cell.workload_version,
             "node": node_name()}
    if cell.workload_dir is not None:
        extra["workload_dir"] = cell.workload_dir
    if (code := cell.workload_dir or cell.command_cwd) and (
            revision := git_revision(Path(code))):
        extra["workload_revision"] = revision  # beside the code hash: which commit it was
    if cell.workload_info is not None and cell.workload_info.code is not None:
        extra["workload_code"] = cell.workload_info.code  # in its version, or opted out
    provenance, refused = _provenance(identity, output, tool, extra)
    warnings = [*_kept_with_problems(output), *refused]
    remember(cell, files.run_root, provenance)
    measurements, invalid = _measurements(cell, identity, output, provenance)
    error = output.first(ErrorLine)
    timing = output.first(TimingLine)
    cap_log(log_file)
    log_tail = tail_of(log_file)

    message: str | None
    if status_override is not None:
        status, message = status_override
    else:
        status, message = _classify(cell, exit, error and error[1], log_tail, measurements,
                                    next(iter(output.unreadable), None) or invalid,
                                    files.node_rank)
    flags, reasons = _flags(measurements)
    oversubscribed = _oversubscribed(cell, provenance)
    if oversubscribed:
        flags.append(Flag.OVERSUBSCRIBED)
        reasons.append(oversubscribed)
    if exit.leftovers:
        flags.append(Flag.LEFT_PROCESSES)
        reasons.append(leftover_reason(list(exit.leftovers)))
    if short := _fewer_epochs(cell, measurements):
        flags.append(Flag.FEWER_EPOCHS)
        reasons.append(short)
    if reasons and status is Status.OK:
        message = "; ".join(reasons)
    if warnings:  # kept records with a field left out: said wherever the cell ended
        message = "; ".join(filter(None, [message, *warnings]))
    cell_record = CellRecord(
        **identity,
        status=status,
        flags=flags,
        started_at=exit.started_at,
        wall_s=exit.wall_s,
        workload_s=timing[1].workload_s if timing else None,
        node_id=exit.node_id,
        hardware=cell.hardware.name,
        stack=cell.stack.name,
        workload=cell.workload,
        error=message,
        log_tail=None if status is Status.OK else log_tail,
        inputs=cell.inputs,
        **_setting_columns(cell),
    )
    kept: list[Record] = list(measurements) if status is Status.OK else []
    return [provenance, *kept, cell_record]


def not_run_records(cell: Cell, status: Status, error: str, attempts: int = 1,
                    log_tail: str | None = None,
                    provenance: dict[str, Any] | None = None) -> list[Record]:
    """The batch of a cell that never reached a worker: its image failed, its node was lost."""
    identity = _identity(cell)
    return [
        ProvenanceRecord(**identity, **(provenance or {})),
        CellRecord(**identity, status=status,
                   started_at=datetime.now(UTC).isoformat(timespec="seconds"), wall_s=0.0,
                   attempts=attempts, hardware=cell.hardware.name, stack=cell.stack.name,
                   workload=cell.workload, error=error, log_tail=log_tail,
                   inputs=cell.inputs, **_setting_columns(cell)),
    ]


def cell_file_content(cell: Cell) -> dict[str, Any]:
    """The content of `cell`'s file (worker/cell_file.py reads it): the cell with the file's
    version and its parameters' declared types."""
    types = {name: decl.type for name, decl in declared(cell).params.items()}
    # a stack's executor settings are how its executor starts the worker, not the worker's
    return {"version": CELL_FILE_VERSION, **cell.model_dump(mode="json", exclude={
        "workload_info": True, "inputs": True, "stack": {"settings"}}),
            "param_types": {name: types[name] for name in cell.params if name in types}}


def _identity(cell: Cell) -> dict[str, Any]:
    """The fields every record of the cell carries (records.py: the record identity)."""
    return {"run": cell.run, "cell_id": cell.cell_id, "config_id": cell.config_id,
            "repeat": cell.repeat}


def _setting_columns(cell: Cell) -> dict[str, Any]:
    """The cell's parameters, its hardware kind's and its executor's recorded settings as
    the cell record's `param.<name>`, `hw.<key>` and `stack.<key>` fields; `hw.nodes` for a
    cell across nodes, so its configuration is told from its one-node twin's everywhere."""
    hardware = cell.hardware
    spans = {"nodes": hardware.nodes} if hardware.nodes > 1 else {}  # NODES_COLUMN
    return {**as_param_columns(cell.params),
            **as_setting_columns(HW, {**hardware.settings.recorded(), **spans}),
            **as_setting_columns(STACK, cell.stack.settings.recorded())}


def _provenance(identity: dict[str, Any], output: WorkerOutput, tool: ToolInfo,
                extra: dict[str, Any]) -> tuple[ProvenanceRecord, list[str]]:
    """The stored provenance (the worker's fields and the driver's), and a located warning
    for each field the record refuses: that field is left out, never the record, so where
    the cell ran is kept."""
    found = output.first(ProvenanceLine)
    fields = {**(found[1].fields() if found else {}), **extra,
              "tool_version": tool.version, "git_revision": tool.git_revision}
    try:
        return ProvenanceRecord(**{**fields, **identity}), []
    except ValidationError as exc:  # what the worker's types let through, or the driver's
        refused = {str(error["loc"][0]): error["msg"] for error in exc.errors()}
    where = f"output line {found[0].number}: " if found else ""
    kept = {k: v for k, v in fields.items() if k not in refused}
    return ProvenanceRecord(**{**kept, **identity}), [
        f"{where}provenance field {name!r}: {why} (left out)" for name, why in refused.items()]


def _kept_with_problems(output: WorkerOutput) -> list[str]:
    """The output's located warnings: lines skipped, and each field left out of a record
    that is kept (a measurement's are invalid output instead: `_measurements`)."""
    return [*output.notes, *(warning for read in output.reads
                             if not isinstance(read.record, MeasurementLine)
                             for warning in read.located())]


def _measurements(cell: Cell, identity: dict[str, Any], output: WorkerOutput,
                  provenance: ProvenanceRecord) -> tuple[list[MeasurementRecord], str | None]:
    """The worker's measurements, or why they are invalid output (a figure left out of a
    measurement is no figure to publish: unlike provenance, the cell is not kept ok)."""
    metrics = set(declared(cell).metrics)
    records: list[MeasurementRecord] = []
    for read, entry in output.all(MeasurementLine):
        where = f"output line {read.number}"
        if read.problems:
            return [], f"{where}: invalid measurement record: {read.problems[0]}"
        unknown = set(entry.metrics) - metrics
        if unknown:
            declare = "metrics: in the matrix" if cell.command else "defaults.yaml"
            return [], f"{where}: undeclared metrics {sorted(unknown)} (declare them in {declare})"
        try:
            record = MeasurementRecord(**entry.fields(), **identity)
        except ValidationError as exc:
            error = exc.errors()[0]
            field = ".".join(str(part) for part in error["loc"])
            return [], (f"{where}: invalid measurement record: "
                        f"{field + ': ' if field else ''}{error['msg']}")
        records.append(_with_peak(record, cell, provenance))
    return records, None


def _with_peak(record: MeasurementRecord, cell: Cell,
               provenance: ProvenanceRecord) -> MeasurementRecord:
    """The record with its FLOP/s against the node's peak, where it has a FLOP count: the
    worker's (from the workload's FLOP model), else the workload's own claim
    (`flops_per_item:` of a command workload, flop_claims.py)."""
    claim = declared(cell).flops_per_item
    if record.flops_per_item is None and claim is not None and record.items_per_s is not None:
        with contextlib.suppress(FlopClaimError):  # checked per configuration at load
            record = record.model_copy(
                update={"flops_per_item": claim_flops(claim, cell.params)})
    if record.flops_per_item is None or record.items_per_s is None:
        return record
    achieved = record.flops_per_item * record.items_per_s
    update: dict[str, Any] = {"achieved_flops": achieved}
    precision = str(cell.params.get("precision", "fp32"))
    # Judged on the node that ran the cell (the executor runs there): its GPUs or its CPU,
    # times the nodes of a cell across nodes (their ranks' items are all counted).
    nodes = cell.hardware.nodes
    peak = (datasheet_peak(provenance.gpu_model, precision, cell.hardware.gpus * nodes)
            if cell.hardware.gpus else cpu_peak_estimate(precision))
    if peak is not None and not cell.hardware.gpus and nodes > 1:
        peak = replace(peak, flops=peak.flops * nodes)
    if peak is not None:
        update.update(peak_flops=peak.flops, peak_source=peak.source,
                      peak_fraction=achieved / peak.flops)
    return record.model_copy(update=update)


def _classify(cell: Cell, exit: WorkerExit, error: ErrorLine | None, log_tail: str,
              measurements: list[MeasurementRecord], invalid: str | None,
              node_rank: int = 0) -> tuple[Status, str | None]:
    """The attempt's status and why. Another node than node 0 of a cell across nodes
    measures nothing: it ran if it exited 0 without an error."""
    if exit.timed_out:
        return Status.TIMEOUT, (f"no result within the cell's timeout_s of {cell.timeout_s:g} s "
                                f"(stopped after {exit.wall_s:.1f} s, the kill included)")
    if exit.oom_killed:
        return Status.OOM, "killed by the container engine for exceeding its memory limit"
    if error is not None:
        if error.kind == FailureKind.STACK_MISMATCH:
            return Status.STACK_MISMATCH, str(error.message)
        return FAILURE_STATUS[error.kind], f"{error.type}: {error.message}"
    if exit.returncode != 0:
        if any(evidence in log_tail for evidence in OOM_EVIDENCE):
            return Status.OOM, f"out of memory (exit status {exit.returncode}, see log)"
        if exit.returncode is not None and exit.returncode < 0:
            name = signal.Signals(-exit.returncode).name
            return Status.CRASHED, f"worker killed by {name}"
        return Status.CRASHED, f"worker exited with status {exit.returncode} and no error record"
    if invalid:
        return Status.INVALID_OUTPUT, invalid
    if not measurements and node_rank == 0:
        return Status.INVALID_OUTPUT, "worker exited 0 without any measurement record"
    return Status.OK, None


def _flags(measurements: list[MeasurementRecord]) -> tuple[list[Flag], list[str]]:
    flags: list[Flag] = []
    reasons: list[str] = []
    over = [m for m in measurements if m.peak_fraction is not None and m.peak_fraction > 1]
    if over:
        flags.append(Flag.IMPLAUSIBLE)
        worst = max(over, key=lambda m: m.peak_fraction or 0)
        reasons.append(f"implausible: epoch {worst.epoch} achieves "
                       f"{worst.peak_fraction:.0%} of the device's {worst.peak_source} peak")
    # Every epoch, not any: a first epoch that compiles or autotunes is warm-up doing its job.
    if measurements and all(m.warmup_s is not None and m.train_s is not None
                            and m.warmup_s > m.train_s for m in measurements):
        flags.append(Flag.WARMUP_DOMINATED)
    contended = [m for m in measurements if _contended(m)]
    if contended:
        worst = max(contended, key=lambda m: m.cpu_wait_cores or 0)
        flags.append(Flag.CONTENDED)
        reasons.append(f"contended: in epoch {worst.epoch}, {worst.cpu_wait_cores:.2f} of its "
                       f"threads on average waited for a CPU while other processes used "
                       f"{worst.other_cpu_cores:.2f} cores of the CPUs it ran on")
    throttled = sorted({reason for m in measurements
                        for reason in condition_throttles(m.throttle_reasons)})
    if throttled:
        flags.append(Flag.THROTTLED)
        reasons.append(f"throttled while timing: {', '.join(throttled)}")
    return flags, reasons


def _contended(m: MeasurementRecord) -> bool:
    """Whether an epoch's time was partly another process's: the cell's threads waited for
    a CPU, and others used the cell's CPUs meanwhile (either alone is no proof: a cell can
    wait on its own threads, and others can use cores it did not need)."""
    return (m.cpu_wait_cores is not None and m.other_cpu_cores is not None
            and m.cpu_wait_cores >= CONTENDED_WAIT_CORES
            and m.other_cpu_cores >= CONTENDED_OTHER_CORES)


def _fewer_epochs(cell: Cell, measurements: list[MeasurementRecord]) -> str | None:
    """Why a command's script, timed by its client, ran fewer epochs than the cell asked
    (one that ignores {epochs} ends ok with less work than its configuration says)."""
    timed = {m.epoch for m in measurements if m.timing == "steps"}
    if cell.command is None or not timed or len(timed) >= cell.epochs:
        return None
    return (f"fewer_epochs: the script reported {len(timed)} of the {cell.epochs} epoch(s) "
            "asked (does its command pass {epochs}?)")


def _oversubscribed(cell: Cell, provenance: ProvenanceRecord) -> str | None:
    """Why the cell's CPU workers outnumber the cores it had, or None: such workers share
    cores, so neither their time nor a speedup measured from it is what the workload
    would show on a machine that gave each its own."""
    name = declared(cell).device_param
    value = cell.params.get(name) if name else None
    workers = value if isinstance(value, int) and not isinstance(value, bool) else 0
    cores = provenance.cpus_usable or provenance.cpu_count  # the CPUs it may use, if known
    if cell.hardware.gpus or workers <= 1 or not cores or workers <= cores:
        return None
    return f"oversubscribed: {workers} workers on {cores} CPU cores"
