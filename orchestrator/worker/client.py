"""The client a command workload's script uses to report its steps (`import matrix_bench`):
a few added lines give it the measurement of a built-in workload, the same records, so the
same report, judging and comparison apply.

    import matrix_bench

    bench = matrix_bench.attach(framework="torch", device=device)
    for epoch in range(epochs):
        meter = bench.start_epoch(warmup_steps=2)
        for inputs, targets in loader:
            with meter.step(items=len(inputs)):   # the real items of the step
                train_step(inputs, targets)
        bench.end_epoch(meter)

Under matrix-bench (the worker sets `CELL_FILE_ENV` and `OUT_FILE_ENV`, worker/command.py)
`attach` reads the cell, and each `end_epoch` appends a measurement record; the device is
synchronised before every clock read (`device="cuda"` with torch, or any `sync` callable)
and the first `warmup_steps` steps are left out, as for a built-in (worker/measure.py). Run
by hand, the same script prints each epoch's rate to stderr and writes nothing. Stdlib
only: torch is used only when the script has imported it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

from orchestrator.worker.cell_file import read_cell_file
from orchestrator.worker.command import CELL_FILE_ENV, OUT_FILE_ENV
from orchestrator.worker.context import Context, RecordWriter
from orchestrator.worker.measure import EpochMeter, HostRssProbe, MemoryProbe, Sync, no_sync
from orchestrator.worker.records import ClientLine


class Bench:
    """One script's measurement: epochs opened and closed in turn, numbered from 1."""

    def __init__(self, ctx: Context | None, sync: Sync, probes: list[MemoryProbe]) -> None:
        self.ctx = ctx  # None: run by hand, outside matrix-bench
        self._sync = sync
        self._probes = probes
        self._epoch = 0

    @property
    def attached(self) -> bool:
        """Whether the script runs as a matrix-bench cell."""
        return self.ctx is not None

    @property
    def params(self) -> dict[str, Any]:
        """The cell's parameters ({} by hand): the command line carries them already."""
        return dict(self.ctx.params) if self.ctx else {}

    def epochs(self, default: int) -> int:
        """The cell's epochs (the matrix's `epochs:`), or `default` run by hand."""
        return self.ctx.epochs if self.ctx else default

    def start_epoch(self, warmup_steps: int = 1, block_steps: int = 1) -> EpochMeter:
        """The meter of the next epoch: time each training step in `with meter.step(items)`;
        `block_steps` > 1 synchronises once per block of steps (microsecond GPU steps)."""
        if self.ctx is not None:
            return self.ctx.start_epoch(warmup_steps, block_steps)
        return EpochMeter(warmup_steps=warmup_steps, sync=self._sync, probes=self._probes,
                          block_steps=block_steps)

    def end_epoch(self, meter: EpochMeter, **metrics: float) -> dict[str, Any]:
        """Close the epoch: its measurement record (with `metrics`, which the matrix entry
        declares under `metrics:`), appended to the cell's records or printed by hand."""
        self._epoch += 1
        if self.ctx is not None:
            return self.ctx.end_epoch(self._epoch, meter, **metrics).to_dict()
        summary = dict(meter.summary())
        print(f"matrix-bench: epoch {self._epoch}: {summary['items_per_s']:.6g} items/s over "
              f"{summary['steps']} timed steps ({summary['train_s']:.3g} s; not recorded: "
              "not run by matrix-bench)", file=sys.stderr)
        return summary


def attach(framework: str | None = None, device: Any = "cpu",
           sync: Callable[[], None] | None = None) -> Bench:
    """The script's Bench. `framework` ("torch", "tensorflow", "jax") is recorded with its
    version; with torch on a CUDA `device` the device is synchronised before each clock read
    and its allocator's peaks are recorded; `sync` overrides how to synchronise."""
    use_sync, probes, reported = _framework(framework, str(device), sync)
    cell_file, out_file = os.environ.get(CELL_FILE_ENV), os.environ.get(OUT_FILE_ENV)
    if not cell_file or not out_file:
        return Bench(None, use_sync, [HostRssProbe(), *probes])
    ctx = Context(cell=read_cell_file(cell_file), writer=RecordWriter(out_file))
    ctx.use_framework(framework, reported.get("framework_version"), use_sync, probes)
    ctx.writer.write(ClientLine(**reported))
    return Bench(ctx, use_sync, probes)


def _framework(framework: str | None, device: str, sync: Sync | None
               ) -> tuple[Sync, list[MemoryProbe], dict[str, Any]]:
    """(how to synchronise, the framework's memory probes, what to tell provenance)."""
    reported: dict[str, Any] = {}
    if framework is not None:
        reported["framework"] = framework
    probes: list[MemoryProbe] = []
    use_sync = sync or no_sync
    torch = sys.modules.get("torch")
    if framework == "torch" and torch is not None:
        reported |= {"framework_version": torch.__version__, "cuda": torch.version.cuda}
        if device.startswith("cuda") and torch.cuda.is_available():
            from orchestrator.worker.measure import TorchCudaProbe

            target = torch.device(device)
            use_sync = sync or (lambda: torch.cuda.synchronize(target))
            probes.append(TorchCudaProbe(target))
            reported |= {"gpu_model": torch.cuda.get_device_name(target),
                         "gpu_count": torch.cuda.device_count()}
            if torch.backends.cudnn.is_available():
                reported["cudnn"] = str(torch.backends.cudnn.version())
    elif framework is not None:
        module = sys.modules.get({"tensorflow": "tensorflow", "jax": "jax"}.get(framework, ""))
        if module is not None:
            reported["framework_version"] = str(getattr(module, "__version__", ""))
    return use_sync, probes, {k: v for k, v in reported.items() if v is not None}

