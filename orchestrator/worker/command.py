"""A command workload's cell (orchestrator/spec/command_workloads.py): the user's training script
runs as a child of the worker, in its folder, with the cell's environment.

The script finds the cell through two variables (`CELL_FILE_ENV`, `OUT_FILE_ENV`), which
`matrix_bench.attach()` reads (worker/client.py): with the client, the script writes the
same measurement records as a built-in workload, one per epoch, and what it knows of its
framework (a `client` record). Without it, the script is timed as a whole: one measurement
with `timing: whole` (its wall time, the peak memory of its largest process, the NVML
telemetry of the cell's GPUs over all of it) and no throughput, since nothing says what it
trained. A script that exits non-zero fails the cell. Stdlib only.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from typing import Any

from orchestrator.worker.context import Context
from orchestrator.worker.records import ClientLine, MeasurementLine, read_out_file

CELL_FILE_ENV = "MATRIX_BENCH_CELL_FILE"
OUT_FILE_ENV = "MATRIX_BENCH_OUT_FILE"
STACK_PYTHON = ("python", "python3")  # run as the stack's own interpreter, the worker's
CODE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class CommandFailed(Exception):
    """The script exited non-zero, or could not be started."""


def run_command(ctx: Context, cell_path: str) -> dict[str, Any]:
    """Run the cell's script to its end; the provenance its client reported, if any."""
    import resource  # only a command's cell pays for these imports
    import shutil
    import subprocess

    command = list(ctx.cell.command or ())
    cwd = ctx.cell.command_cwd or "."
    if not os.path.isdir(cwd):
        raise CommandFailed(f"the command's folder {cwd} is not here")
    path = os.pathsep.join(p for p in (os.path.dirname(sys.executable),
                                       os.environ.get("PATH")) if p)
    env = {**os.environ, CELL_FILE_ENV: os.path.abspath(cell_path),
           OUT_FILE_ENV: os.path.abspath(ctx.out_path), "PATH": path,
           # the client: `import matrix_bench`
           "PYTHONPATH": os.pathsep.join(p for p in (CODE_ROOT, os.environ.get("PYTHONPATH"))
                                         if p)}
    if command[0] in STACK_PYTHON:  # an image may have no `python`, a venv no `python3`
        program: str | None = sys.executable
    elif os.sep in command[0]:
        program = os.path.join(cwd, command[0])
    else:
        program = shutil.which(command[0], path=path)
    if program is None or not os.access(program, os.X_OK):
        raise CommandFailed(f"no program {command[0]!r} on the stack's PATH ({path})")
    probes = ctx.gpu_probes()
    for probe in probes:
        probe.reset()
    start = time.perf_counter()
    try:
        returncode = subprocess.run([program, *command[1:]], cwd=cwd, env=env,
                                    check=False).returncode
    except OSError as exc:  # not an executable format, say
        raise CommandFailed(f"cannot start {command[0]!r}: {exc.strerror}") from None
    wall_s = time.perf_counter() - start
    if returncode != 0:
        raise CommandFailed(f"the command exited with {_exit_text(returncode)}")
    # what the script's client wrote so far (a line that is no record is the executor's
    # to judge)
    written = read_out_file(ctx.out_path)
    if not written.all(MeasurementLine):
        telemetry: dict[str, Any] = {}
        for probe in probes:
            telemetry.update(probe.read())
        ctx.writer.write(MeasurementLine(
            epoch=1, timing="whole", item_unit=ctx.cell.item_unit, epoch_s=wall_s,
            # ru_maxrss of the children: the largest process's peak, in KiB on Linux
            host_rss_peak_bytes=resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024,
            **telemetry))
    reported = written.last(ClientLine)  # each of its fields is one of provenance's
    return {} if reported is None else reported.fields()


def _exit_text(returncode: int) -> str:
    if returncode < 0:
        try:
            return f"signal {signal.Signals(-returncode).name}"
        except ValueError:
            return f"signal {-returncode}"
    return f"code {returncode}"
