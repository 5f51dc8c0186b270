"""Clocks and probes for one epoch of training (docs/ARCHITECTURE.md: result records).

Time: a monotonic clock (`time.perf_counter`) read at step boundaries, the device
synchronised before each read, the first `warmup_steps` steps of each epoch excluded and
recorded as such; the whole epoch is timed too. Probes (memory peaks, the NVML sampler)
reset at the start of the epoch and read at its end, given the epoch's timed windows.
Stdlib only: frameworks are imported by the probes that need them, which only the
workloads that use them create.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Protocol

# The worker imports this module for every cell; dataclasses, statistics and pathlib would
# cost it about 10 ms of imports, more than all the rest of its bookkeeping.

Sync = Callable[[], None]
# (start, end) of a contiguous run of timed steps, in the meter's clock
Window = tuple[float, float]


def no_sync() -> None:
    """The CPU runs synchronously: nothing to wait for."""


class MemoryProbe(Protocol):
    """Reset at the start of an epoch, read at its end: memory peaks and device counters.

    `read` is given the epoch's timed windows (`EpochMeter.timed_windows`, in the meter's
    clock): a probe of rates (the NVML sampler) summarises what it saw inside them; memory
    probes report the epoch's peak and ignore them. `()` means no windows: the whole epoch.
    """

    def reset(self) -> None: ...
    def read(self, timed_windows: Sequence[Window] = ()) -> Mapping[str, float | int | str]: ...


class HostRssProbe:
    """Peak resident set size of this process during the epoch (Linux: VmHWM, reset per epoch)."""

    def reset(self) -> None:
        # "5" resets the process's peak RSS (proc(5), clear_refs); where that is not possible
        # (not Linux, not permitted) the peak since the process started is reported.
        with contextlib.suppress(OSError), open("/proc/self/clear_refs", "w") as handle:
            handle.write("5")

    def read(self, timed_windows: Sequence[Window] = ()) -> dict[str, int]:
        try:
            with open("/proc/self/status", encoding="utf-8") as handle:
                for line in handle:
                    if line.startswith("VmHWM:"):
                        return {"host_rss_peak_bytes": int(line.split()[1]) * 1024}
        except OSError:
            pass
        import resource

        return {"host_rss_peak_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}


class TorchCudaProbe:
    """Peak memory the torch caching allocator handed out (allocated) and held (reserved)."""

    def __init__(self, device: Any) -> None:  # a torch.device: torch is not imported here
        self.device = device

    def reset(self) -> None:
        import torch

        torch.cuda.synchronize(self.device)
        torch.cuda.reset_peak_memory_stats(self.device)

    def read(self, timed_windows: Sequence[Window] = ()) -> dict[str, int]:
        import torch

        torch.cuda.synchronize(self.device)
        return {
            "mem_alloc_peak_bytes": int(torch.cuda.max_memory_allocated(self.device)),
            "mem_reserved_peak_bytes": int(torch.cuda.max_memory_reserved(self.device)),
        }


# Set by the worker before any framework loads (docs/MEASUREMENT.md). With these, TensorFlow
# and JAX allocate as the model needs instead of grabbing (most of) the card, so their
# allocator peaks are the model's memory.
FRAMEWORK_ENV = {"TF_FORCE_GPU_ALLOW_GROWTH": "true", "XLA_PYTHON_CLIENT_PREALLOCATE": "false"}


class TensorflowProbe:
    """Peak bytes TensorFlow's allocator handed out on the cell's devices (memory growth on).

    With several replicas (MirroredStrategy) each GPU holds one, so the largest per-device
    peak is reported, as torch's per-device peak. On a CPU-only machine the device is the
    CPU, whose allocator keeps statistics only with oneDNN on (TensorFlow's default only on
    CPUs with AVX-512 VNNI/BF16 or AMX): a device without them is left out, so nothing is
    reported rather than the cell failing. `api` is `tf.config.experimental`; passing
    another is the seam for recorded readings.
    """

    def __init__(self, devices: Sequence[str], api: Any = None) -> None:
        if api is None:
            import tensorflow as tf

            api = tf.config.experimental
        self.api = api
        self.devices = [device for device in devices if self._keeps_statistics(device)]

    def _keeps_statistics(self, device: str) -> bool:
        try:
            self.api.get_memory_info(device)
        except ValueError:  # "Allocator stats not available for device ..."
            return False
        return True

    def reset(self) -> None:
        for device in self.devices:
            self.api.reset_memory_stats(device)

    def read(self, timed_windows: Sequence[Window] = ()) -> dict[str, int]:
        peaks = [int(self.api.get_memory_info(device)["peak"]) for device in self.devices]
        return {"mem_alloc_peak_bytes": max(peaks)} if peaks else {}


def tensorflow_probes() -> list[MemoryProbe]:
    """A TensorflowProbe over the visible GPUs, or over the CPU where there is none."""
    import tensorflow as tf

    devices = tf.config.list_logical_devices("GPU") or tf.config.list_logical_devices("CPU")[:1]
    return [TensorflowProbe([device.name for device in devices])]


def tensorflow_sync() -> None:
    """Wait for every op TensorFlow has queued on any device (its benchmarking barrier)."""
    import tensorflow as tf

    tf.test.experimental.sync_devices()


class JaxProbe:
    """`peak_bytes_in_use` of JAX's allocator, the largest over the given devices.

    XLA offers no reset of that peak: the figure is the peak since the worker started, which
    is the epoch's own peak whenever a later epoch needs no less memory than an earlier one
    (a steady training loop). The CPU client keeps no statistics (`memory_stats()` is None):
    then nothing is reported, never a false zero. A GPU with preallocation on would report
    the pool, not the model, so that is refused.
    """

    def __init__(self, devices: Sequence[Any]) -> None:
        self.devices = list(devices)
        on_gpu = any(device.platform == "gpu" for device in self.devices)
        if on_gpu and os.environ.get("XLA_PYTHON_CLIENT_PREALLOCATE", "").lower() != "false":
            raise RuntimeError("JAX preallocates the GPU: set XLA_PYTHON_CLIENT_PREALLOCATE="
                               "false before importing jax (the worker does)")

    def reset(self) -> None:
        """Nothing to reset (see the class docstring)."""

    def read(self, timed_windows: Sequence[Window] = ()) -> dict[str, int]:
        peaks = [stats["peak_bytes_in_use"] for device in self.devices
                 if (stats := device.memory_stats()) and "peak_bytes_in_use" in stats]
        return {"mem_alloc_peak_bytes": int(max(peaks))} if peaks else {}


def jax_sync() -> None:
    """Wait until every array JAX holds is computed: JAX dispatches asynchronously, on the
    CPU as on GPUs, so a clock read without this times the dispatch, not the work."""
    import jax

    jax.block_until_ready(jax.live_arrays())


class Evaluation:
    """Filled in by the workload inside `EpochMeter.evaluation()`."""

    def __init__(self) -> None:
        self.items = 0.0


class EpochMeter:
    """Times one epoch: its training steps, its evaluation and the whole of it; reads probes.

    Every clock read follows a device synchronisation. The meter reads the clock when it is
    created (`ctx.start_epoch()`, after the probes' reset) and when the summary is first
    taken: `epoch_s`, everything the user waits for in the epoch (warm-up with its
    compilation, timed steps, evaluation, whatever the loop does between), so
    `epoch_s >= warmup_s + train_s + eval_s`. Steps are timed boundary to boundary.

    Block timing (`block_steps` = N > 1): synchronising at every step serialises the host
    with the device and adds a launch latency to each step, a large share of a GPU step of
    tens of microseconds. The timed steps then synchronise and read the clock only at the
    end of each block of N steps, and at the end of a partial block when `evaluation()`
    starts or the summary is taken; each step of a block is recorded as the block's seconds
    over its steps. So `train_s`, `items` and `items_per_s` stay exact, while
    `step_s_median` and `step_s_p90` become statistics of block means (weighted by steps),
    blind to the spread inside a block; the summary says N as `timing_block_steps`.
    Warm-up steps are still timed one by one, so compilation stays in `warmup_s`, and the
    first timed block starts at the last warm-up step's synchronised end. Where
    synchronising costs nothing (a CPU, `no_sync`) N = 1 loses nothing.

    `timed_windows` are the contiguous runs of timed steps, (start, end) in the meter's
    clock: a run ends when evaluation starts, a later step opens a new one. Probes read
    them at summary time, so the NVML averages cover the timed steps, not warm-up or
    evaluation; a probe comparing timestamps with them must use the meter's clock.
    """

    def __init__(self, warmup_steps: int, sync: Sync = no_sync,
                 probes: Sequence[MemoryProbe] = (),
                 clock: Callable[[], float] = time.perf_counter, block_steps: int = 1) -> None:
        if block_steps < 1:
            raise ValueError(f"block_steps must be at least 1, not {block_steps}")
        self.warmup_steps = warmup_steps
        self.sync = sync
        self.probes = list(probes)
        self.clock = clock
        self.block_steps = block_steps
        self.step_s: list[float] = []  # every step, warm-up included
        self.step_items: list[float] = []
        self.eval_s: float | None = None
        self.eval_items: float | None = None
        self.timed_windows: list[Window] = []
        self._boundary: float | None = None
        self._block_items: list[float] = []  # the open block's steps, not yet timed
        self._in_window = False  # the last timed step ended the last window
        self._end: float | None = None
        self._summary: dict[str, float | int | str] | None = None
        for probe in self.probes:
            probe.reset()
        self.sync()
        self._start = self.clock()

    @contextmanager
    def step(self, items: float) -> Iterator[None]:
        """One training step that processes `items` real items (e.g. target words)."""
        if self._boundary is None:
            self.sync()
            self._boundary = self.clock()
        warmup = len(self.step_s) + len(self._block_items) < self.warmup_steps
        yield
        if warmup or self.block_steps == 1:
            self.sync()
            self._record([float(items)], self.clock(), timed=not warmup)
        else:
            self._block_items.append(float(items))
            if len(self._block_items) == self.block_steps:
                self.sync()
                self._flush(self.clock())

    def _record(self, items: list[float], now: float, timed: bool) -> None:
        """Steps from the last boundary to `now`, each its share of the interval."""
        start = self._boundary
        assert start is not None
        share = (now - start) / len(items)
        # Boundary to boundary: whatever the loop does between steps is training time too.
        self.step_s.extend([share] * len(items))
        self.step_items.extend(items)
        self._boundary = now
        if timed and self._in_window:
            self.timed_windows[-1] = (self.timed_windows[-1][0], now)
        elif timed:
            self.timed_windows.append((start, now))
            self._in_window = True

    def _flush(self, now: float) -> None:
        """Close the open block at `now`, a clock read that followed a synchronisation."""
        if self._block_items:
            self._record(self._block_items, now, timed=True)
            self._block_items = []

    @contextmanager
    def evaluation(self) -> Iterator[Evaluation]:
        """Evaluation after training, timed apart from it; set `.items` inside the block."""
        result = Evaluation()
        self.sync()
        start = self.clock()
        self._flush(start)  # a partial block of timed steps ends where evaluation starts
        yield result
        self.sync()
        self.eval_s = self.clock() - start
        self.eval_items = result.items
        self._boundary = None  # a later step starts a new timed region
        self._in_window = False

    def summary(self) -> dict[str, float | int | str]:
        """The epoch's measurement fields, computed once; ValueError if no step was timed.

        The first call ends the epoch: it synchronises, reads the clock (`epoch_s`) and
        closes a partial block there; later calls return the same fields."""
        if self._end is None:
            self.sync()
            self._end = self.clock()
            self._flush(self._end)
        if self._summary is None:
            self._summary = self._summarise()
        return self._summary

    def _summarise(self) -> dict[str, float | int | str]:
        timed = self.step_s[self.warmup_steps:]
        items = sum(self.step_items[self.warmup_steps:])
        if not timed or items <= 0:
            raise ValueError(f"epoch had {len(self.step_s)} steps, {self.warmup_steps} of them "
                             "warm-up: no timed step left (lower warmup_steps or grow the data)")
        train_s = sum(timed)
        assert self._end is not None
        fields: dict[str, float | int | str] = {
            "train_s": train_s,
            "items": items,
            "items_per_s": items / train_s,
            "steps": len(timed),
            "warmup_steps": min(self.warmup_steps, len(self.step_s)),
            "warmup_s": sum(self.step_s[: self.warmup_steps]),
            "epoch_s": self._end - self._start,
            "step_s_median": _percentile(timed, 0.5),
            "step_s_p90": _percentile(timed, 0.9),
        }
        if self.block_steps > 1:
            fields["timing_block_steps"] = self.block_steps
        if self.eval_s is not None and self.eval_items:
            fields["eval_s"] = self.eval_s
            fields["eval_items_per_s"] = self.eval_items / self.eval_s
        for probe in self.probes:
            fields.update(probe.read(list(self.timed_windows)))
        return fields


def _percentile(values: list[float], q: float) -> float:
    """Linear-interpolated percentile, as numpy's default."""
    ordered = sorted(values)
    position = (len(ordered) - 1) * q
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)
