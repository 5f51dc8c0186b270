"""`python -m orchestrator.worker CELL_FILE OUT_FILE`: run one cell and append its records.

Runs inside the stack's container or Python environment. It first checks that the
environment is the stack the cell declares, then imports the workload and nothing heavy of
its own; stdout and stderr belong to the cell's log. Exit 0 when the cell ran; otherwise it
appends an `error` record and exits 1, so the executor can tell `failed` from `oom`,
`unsupported` and `stack_mismatch` (docs/ARCHITECTURE.md: worker input and output).
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
import traceback
from typing import Any

from orchestrator.worker.ceiling import ceiling_provenance
from orchestrator.worker.cell_file import FailureKind, read_cell_file
from orchestrator.worker.command import CommandFailed, run_command
from orchestrator.worker.context import Context, RecordWriter, Unsupported
from orchestrator.worker.host import cpu_model, hostname, python_version
from orchestrator.worker.measure import FRAMEWORK_ENV
from orchestrator.worker.records import ErrorLine, ProvenanceLine, TimingLine
from orchestrator.worker.stack_check import cudnn_version_string, stack_mismatch
from orchestrator.worker.threads import framework_threads, thread_variables, usable_cpus
from orchestrator.worker.workload_code import workload_module

EXIT_WORKLOAD_ERROR = 1


class StackMismatch(Exception):
    """This environment is not the stack the cell declares; nothing was run."""


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m orchestrator.worker CELL_FILE OUT_FILE", file=sys.stderr)
        return 2
    writer = RecordWriter(argv[1])
    os.environ.update(FRAMEWORK_ENV)  # before the workload imports its framework
    start = time.perf_counter()
    code = 0
    ctx: Context | None = None
    reported: dict[str, Any] = {}  # what a command's script told of its framework
    try:
        cell = read_cell_file(argv[0])
        ctx = Context(cell=cell, writer=writer)
        print(_start_line(ctx), flush=True)
        mismatch = stack_mismatch(cell.stack)
        if mismatch:
            raise StackMismatch(mismatch)
        if cell.command:
            reported = run_command(ctx, argv[0])
        else:
            module = workload_module(cell.workload_package, "workload")
            module.run(ctx)
    except CommandFailed as exc:  # the script's own traceback is in the log already
        writer.write(_error_record(exc))
        code = EXIT_WORKLOAD_ERROR
    except BaseException as exc:  # every failure becomes a record
        traceback.print_exc()
        writer.write(_error_record(exc))
        code = EXIT_WORKLOAD_ERROR
    workload_s = time.perf_counter() - start
    writer.write(TimingLine(workload_s=workload_s))
    provenance = dataclasses.replace(_provenance(ctx), **reported)
    if code == 0 and ctx is not None and ctx.node.times:  # node 0 speaks for the cell
        provenance = dataclasses.replace(
            provenance, **ceiling_provenance(ctx, elapsed_s=time.perf_counter() - start))
    writer.write(provenance)
    print(_end_line(provenance, workload_s, code), flush=True)
    return code


def _start_line(ctx: Context) -> str:
    cell = ctx.cell
    params = " ".join(f"{k}={v}" for k, v in cell.params.items())
    where = f"{cell.hardware.gpus} GPU(s)" if cell.hardware.gpus else "CPU"
    node = ctx.node
    if node.spans_nodes:
        where += f", node {node.node_rank} of {node.nodes}, rendezvous {node.addr}:{node.port}"
    return (f"matrix-bench: cell {cell.cell_id} (repeat {cell.repeat}), {cell.workload} "
            f"{cell.workload_version}: {params or 'defaults'}; {cell.epochs} epoch(s) on "
            f"{cell.hardware.name} ({where}), stack {cell.stack.name}")


def _end_line(provenance: ProvenanceLine, workload_s: float, code: int) -> str:
    built = " ".join(name for name in (provenance.framework, provenance.framework_version)
                     if name)
    cuda = f", CUDA {provenance.cuda}" if provenance.cuda and provenance.gpu_model else ""
    device = provenance.gpu_model or provenance.cpu_model or "this machine"
    ended = "ran" if code == 0 else "failed"
    return (f"matrix-bench: {ended} with {built or 'no framework declared'}{cuda} on "
            f"{device}, Python {provenance.python}; {workload_s:.3g} s in the worker")


def _error_record(exc: BaseException) -> ErrorLine:
    name = type(exc).__name__
    message = str(exc)
    oom = isinstance(exc, MemoryError) or name == "OutOfMemoryError" or (
        "out of memory" in message.lower() and "cuda" in message.lower())
    # the dataset module (urllib, http) is the workload's to import: none that did not
    # import it raised its DataUnavailable
    datasets = sys.modules.get("orchestrator.worker.datasets")
    kind = (FailureKind.UNSUPPORTED if isinstance(exc, Unsupported) else
            FailureKind.STACK_MISMATCH if isinstance(exc, StackMismatch) else
            FailureKind.DATA_UNAVAILABLE if datasets is not None and
            isinstance(exc, datasets.DataUnavailable) else
            FailureKind.OOM if oom else FailureKind.FAILED)
    return ErrorLine(kind=kind, type=name, message=message[:2000])


def _provenance(ctx: Context | None) -> ProvenanceLine:
    """Where the cell ran; what the workload declared, where it got that far."""
    host = ProvenanceLine(python=python_version(), hostname=hostname(), cpu_model=cpu_model(),
                          cpu_count=os.cpu_count(), cpus_usable=usable_cpus(),
                          cpu_threads=framework_threads(),
                          thread_settings=thread_variables(os.environ))
    if ctx is None:
        return host
    return dataclasses.replace(
        host, framework=ctx.framework, framework_version=ctx.framework_version,
        data_sha256=ctx.data_files,
        precision_switches={str(k): str(v) for k, v in ctx.precision_switches.items()},
        compute_device=ctx.compute_device or None, devices_used=ctx.devices_used or None,
        nodes=ctx.node.nodes, **ctx.group,
        net_link_gbps=ctx.cell.hardware.net_gbps if ctx.node.spans_nodes else None,
        **(_gpu_provenance() if ctx.gpus > 0 else {}))


def _gpu_provenance() -> dict[str, Any]:
    """The cell's GPUs as the driver names them (NVML, whatever the framework), and the CUDA
    and cuDNN torch used, where the workload imported torch. Only for cells on GPU hardware:
    a CUDA build of torch on a CPU-only cell used neither (its framework_version, e.g.
    2.13.0+cu130, still names the build)."""
    record: dict[str, Any] = {}
    try:
        from orchestrator.worker.nvml import gpu_identity, visible_gpu_ids

        record |= gpu_identity(visible_gpu_ids())
    except Exception as exc:  # provenance is best effort, never a failure
        print(f"matrix-bench: no GPU identity from NVML ({type(exc).__name__}: {exc})",
              file=sys.stderr)
    torch = sys.modules.get("torch")  # only if the workload imported it
    if torch is not None and torch.cuda.is_available():
        record["cuda"] = torch.version.cuda
        if torch.backends.cudnn.is_available():
            record["cudnn"] = cudnn_version_string(torch.backends.cudnn.version())
        record.setdefault("gpu_model", torch.cuda.get_device_name(0))
        record.setdefault("gpu_count", torch.cuda.device_count())
        record.setdefault("gpu_memory_bytes", torch.cuda.get_device_properties(0).total_memory)
    return record
