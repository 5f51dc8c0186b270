"""NVML sampler: GPU utilisation, power, SM clock, temperature, throttling, energy and memory
in a background thread at about 10 Hz, summarised per epoch over its timed steps.

Readings enter through one seam, a function that returns a `Reading` (`nvml_reader` makes the
real one), so the thread and the aggregation are tested on CPU with recorded readings and the
real calls run on a GPU machine. `NvmlProbe` fits the meter's probe interface: reset() opens
an epoch, read(timed_windows) summarises the readings inside the meter's timed windows.
Readings are stamped with `time.perf_counter()`, the meter's clock, so the two compare.
Imported by the worker only for cells with GPUs.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

SAMPLE_INTERVAL_S = 0.1

# Throttle reasons that slow a benchmark down (nvmlClocksThrottleReason*): not idle (0x1),
# application clock settings (0x2), sync boost (0x10) or display clocks (0x100).
THROTTLE_REASONS = {
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x20: "sw_thermal",
    0x40: "hw_thermal",
    0x80: "hw_power_brake",
}


class Reading(NamedTuple):
    """One sample over all the cell's GPUs (sums of power, energy and memory; means and
    maxima of the rest)."""

    t: float  # time.perf_counter() of the sample: the EpochMeter's clock
    util_pct: float  # mean GPU utilisation
    power_w: float  # total board power
    sm_clock_mhz: float  # mean SM clock
    temperature_c: float  # hottest GPU
    throttle_mask: int  # OR of the GPUs' throttle reason bits
    energy_mj: float | None  # total-energy counter, millijoules (None where unsupported)
    mem_used_bytes: int  # device memory used, all GPUs


Reader = Callable[[], Reading]
Window = tuple[float, float]  # (start, end) of a run of timed steps, as EpochMeter's


def summarise(readings: Sequence[Reading], windows: Sequence[Window] = ()
              ) -> dict[str, float | int | str]:
    """An epoch's measurement fields from its readings (empty dict without readings).

    Utilisation, power, SM clock, maximum temperature and throttle reasons are those of the
    readings inside the timed windows (bounds included), so warm-up (compilation) and
    evaluation do not move them; mean power is the energy over the windows' length where
    the counter spans every window. Energy is summed over the windows: each window's average
    power x its length, the average from the energy counter's rise between the window's
    first and last readings where the counter exists and the window holds two readings or
    more, else the mean of its sampled power; a window holding no reading takes the mean
    power of the timed readings. `nvml_used_peak_bytes` is the peak over the whole epoch.
    Without windows the epoch counts as one window from its first reading to its last.
    Where no reading falls inside any window (timed steps shorter than a sample interval),
    the epoch's readings stand in for the timed ones: today's epoch-wide averages, and the
    epoch's average power x the windows' length for the energy.
    """
    if not readings:
        return {}
    spans = list(windows) or [(readings[0].t, readings[-1].t)]
    groups = [[r for r in readings if start <= r.t <= end] for start, end in spans]
    timed = [r for group in groups for r in group]
    counted = all(_counted(group) for group in groups)
    if timed:
        fill_w = sum(r.power_w for r in timed) / len(timed)
    else:  # no sample inside the windows: the epoch's readings stand in
        timed, fill_w, counted = list(readings), _mean_power_w(readings), _counted(readings)
    count = len(timed)
    fields: dict[str, float | int | str] = {
        "gpu_util_mean_pct": sum(r.util_pct for r in timed) / count,
        "gpu_power_mean_w": sum(r.power_w for r in timed) / count,
        "gpu_sm_clock_mean_mhz": sum(r.sm_clock_mhz for r in timed) / count,
        "gpu_temp_max_c": max(r.temperature_c for r in timed),
        "nvml_used_peak_bytes": max(r.mem_used_bytes for r in readings),
    }
    timed_s = sum(end - start for start, end in spans)
    if timed_s > 0:
        energy_j = sum((end - start) * (_mean_power_w(group) if group else fill_w)
                       for (start, end), group in zip(spans, groups, strict=True))
        fields["gpu_energy_j"] = energy_j
        if counted:
            # NVML's power reading is a one-second average on Ampere and later, so it lags
            # a window that starts from idle (seen on an H200: 350 W sampled, 606 W counted
            # over 0.48 s); the counter's rise is the windows' own
            fields["gpu_power_mean_w"] = energy_j / timed_s
    mask = 0
    for reading in timed:
        mask |= reading.throttle_mask
    fields["throttle_reasons"] = ",".join(name for bit, name in THROTTLE_REASONS.items()
                                          if mask & bit)
    return fields


def _counted(readings: Sequence[Reading]) -> bool:
    """Whether the energy counter spans the readings (two or more, both ends counted)."""
    return (len(readings) >= 2 and readings[0].energy_mj is not None
            and readings[-1].energy_mj is not None and readings[-1].t > readings[0].t)


def _mean_power_w(readings: Sequence[Reading]) -> float:
    """Average power over the readings' span: from the energy counter where it exists and
    the span is not empty, else the mean of the sampled power."""
    first, last = readings[0], readings[-1]
    if _counted(readings):
        assert first.energy_mj is not None and last.energy_mj is not None
        return (last.energy_mj - first.energy_mj) / 1000 / (last.t - first.t)
    return sum(r.power_w for r in readings) / len(readings)


class Sampler:
    """Calls `read` every `interval_s` in a daemon thread and keeps the readings."""

    def __init__(self, read: Reader, interval_s: float = SAMPLE_INTERVAL_S) -> None:
        self._read = read
        self._interval = interval_s
        self._readings: list[Reading] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="nvml-sampler", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            reading = self._read()
            with self._lock:
                self._readings.append(reading)
            self._stop.wait(self._interval)

    def read_now(self) -> Reading:
        """A reading taken at once, outside the thread's rhythm."""
        reading = self._read()
        with self._lock:
            self._readings.append(reading)
        return reading

    def since(self, start: float) -> list[Reading]:
        """The readings taken at or after time `start` (the Reader's clock)."""
        with self._lock:
            return [r for r in self._readings if r.t >= start]

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


class NvmlProbe:
    """Per-epoch summary of a Sampler, through the meter's probe interface.

    `clock` must be the meter's clock and the Reader's timestamps too (time.perf_counter by
    default, as nvml_reader stamps them): the meter's timed windows select readings by time.
    """

    def __init__(self, sampler: Sampler,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.sampler = sampler
        self.clock = clock
        self._start = clock()

    def reset(self) -> None:
        self._start = self.clock()
        self.sampler.read_now()  # the epoch's first reading, for the energy counter

    def read(self, timed_windows: Sequence[Window] = ()) -> dict[str, float | int | str]:
        """The epoch's fields over its timed windows (`summarise`); without windows, over
        the whole epoch."""
        self.sampler.read_now()  # so an epoch shorter than the interval is not empty
        return summarise(self.sampler.since(self._start), timed_windows)


def visible_gpu_ids() -> list[str]:
    """The NVML identities of the GPUs this process may use: CUDA_VISIBLE_DEVICES entries
    (indices or UUIDs), or every GPU when it is unset."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        import pynvml

        return [str(i) for i in range(pynvml.nvmlDeviceGetCount())]
    return [entry.strip() for entry in visible.split(",") if entry.strip()]


def nvml_reader(gpu_ids: Sequence[str]) -> Reader:
    """The real seam: a Reader over the given GPUs (indices or UUIDs) through nvidia-ml-py."""
    import pynvml

    pynvml.nvmlInit()
    handles = [pynvml.nvmlDeviceGetHandleByUUID(g) if g.startswith(("GPU-", "MIG-"))
               else pynvml.nvmlDeviceGetHandleByIndex(int(g)) for g in gpu_ids]

    def energy(handle: object) -> float | None:
        try:
            return float(pynvml.nvmlDeviceGetTotalEnergyConsumption(handle))
        except pynvml.NVMLError:
            return None

    def read() -> Reading:
        utils = [pynvml.nvmlDeviceGetUtilizationRates(h).gpu for h in handles]
        energies = [energy(h) for h in handles]
        mask = 0
        for handle in handles:
            mask |= pynvml.nvmlDeviceGetCurrentClocksThrottleReasons(handle)
        return Reading(
            t=time.perf_counter(),
            util_pct=sum(utils) / len(utils),
            power_w=sum(pynvml.nvmlDeviceGetPowerUsage(h) for h in handles) / 1000,
            sm_clock_mhz=sum(pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM)
                             for h in handles) / len(handles),
            temperature_c=max(pynvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU)
                              for h in handles),
            throttle_mask=mask,
            energy_mj=None if None in energies else sum(e for e in energies if e is not None),
            mem_used_bytes=sum(pynvml.nvmlDeviceGetMemoryInfo(h).used for h in handles),
        )

    return read


def gpu_identity(gpu_ids: Sequence[str], nvml: Any = None) -> dict[str, str | int | float]:
    """What the driver says of the cell's GPUs, for the provenance record: the model name
    the peak table is looked up by, how many, the driver, each card's memory and its
    enforced power limit (the first GPU's: a cell's GPUs are of one model). The same for
    every framework, so a JAX or Keras cell is identified as a torch cell is. `nvml` is
    the pynvml module; passing another is the seam for recorded readings."""
    if nvml is None:
        import pynvml

        nvml = pynvml
    nvml.nvmlInit()
    handles = [nvml.nvmlDeviceGetHandleByUUID(g) if g.startswith(("GPU-", "MIG-"))
               else nvml.nvmlDeviceGetHandleByIndex(int(g)) for g in gpu_ids]
    if not handles:
        return {}
    first = handles[0]

    def text(value: str | bytes) -> str:
        return value.decode() if isinstance(value, bytes) else value

    identity: dict[str, str | int | float] = {
        "gpu_model": text(nvml.nvmlDeviceGetName(first)),
        "gpu_count": len(handles),
        "driver": text(nvml.nvmlSystemGetDriverVersion()),
        "gpu_memory_bytes": int(nvml.nvmlDeviceGetMemoryInfo(first).total),
    }
    with contextlib.suppress(nvml.NVMLError):  # some boards (and MIG slices) do not say
        identity["gpu_power_limit_w"] = nvml.nvmlDeviceGetEnforcedPowerLimit(first) / 1000
    return identity
