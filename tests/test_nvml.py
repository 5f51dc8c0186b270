"""The NVML sampler's thread and aggregation, fed recorded readings through its seam (the
real NVML calls run on a GPU machine), and its windows: the meter's timed steps."""

from __future__ import annotations

import inspect
import itertools
import sys
import time
from types import SimpleNamespace

import pytest

from orchestrator.worker.measure import EpochMeter
from orchestrator.worker.nvml import (
    NvmlProbe,
    Reading,
    Sampler,
    gpu_identity,
    nvml_reader,
    summarise,
)

# Four samples of a 300 W GPU at 0.1 s intervals; the energy counter rises 30 J per sample.
RECORDED = [
    Reading(t=10.0, util_pct=90, power_w=300, sm_clock_mhz=1800, temperature_c=70,
            throttle_mask=0x0, energy_mj=1_000_000, mem_used_bytes=8 << 30),
    Reading(t=10.1, util_pct=100, power_w=300, sm_clock_mhz=1800, temperature_c=72,
            throttle_mask=0x1, energy_mj=1_030_000, mem_used_bytes=9 << 30),
    Reading(t=10.2, util_pct=100, power_w=300, sm_clock_mhz=1700, temperature_c=75,
            throttle_mask=0x0, energy_mj=1_060_000, mem_used_bytes=9 << 30),
    Reading(t=10.3, util_pct=90, power_w=300, sm_clock_mhz=1700, temperature_c=74,
            throttle_mask=0x0, energy_mj=1_090_000, mem_used_bytes=7 << 30),
]


def test_an_epoch_summary_from_recorded_readings():
    fields = summarise(RECORDED)
    assert fields["gpu_util_mean_pct"] == 95
    assert fields["gpu_power_mean_w"] == pytest.approx(300)  # the counter's 90 J in 0.3 s
    assert fields["gpu_sm_clock_mean_mhz"] == 1750 and fields["gpu_temp_max_c"] == 75
    assert fields["gpu_energy_j"] == pytest.approx(90.0)  # from the counter
    assert fields["nvml_used_peak_bytes"] == 9 << 30
    assert fields["throttle_reasons"] == ""  # 0x1 is idle, not a slowdown


def test_energy_without_a_counter_is_the_mean_sampled_power_times_the_span():
    readings = [r._replace(energy_mj=None) for r in RECORDED]
    assert summarise(readings)["gpu_energy_j"] == pytest.approx(300 * 0.3)


def test_throttle_reasons_are_named():
    readings = [RECORDED[0], RECORDED[1]._replace(throttle_mask=0x4 | 0x40)]
    assert summarise(readings)["throttle_reasons"] == "sw_power_cap,hw_thermal"


def test_the_sampler_thread_and_probe_window():
    replay = itertools.cycle(RECORDED)

    def read() -> Reading:  # the seam: recorded values, stamped with the real clock
        return next(replay)._replace(t=time.perf_counter())

    resets: list[float] = []

    def clock() -> float:
        resets.append(time.perf_counter())
        return resets[-1]

    sampler = Sampler(read, interval_s=0.01)
    probe = NvmlProbe(sampler, clock=clock)
    time.sleep(0.1)
    probe.reset()  # a new epoch: the readings before it are out of its window
    time.sleep(0.2)
    fields = probe.read()  # no windows: the whole epoch
    sampler.stop()
    window = sampler.since(resets[-1])
    assert 10 <= len(window) <= 30  # about 100 Hz for 0.2 s, plus the probe's own reads
    assert len(sampler.since(0.0)) > len(window) + 5
    assert fields == summarise(window)


# Windows: the timed steps ------------------------------------------------------------------

GiB = 1 << 30


def reading(t: float, power_w: float = 300, energy_mj: float | None = None, util_pct: float = 90,
            mem: int = 8 * GiB) -> Reading:
    return Reading(t=t, util_pct=util_pct, power_w=power_w, sm_clock_mhz=1800,
                   temperature_c=70, throttle_mask=0, energy_mj=energy_mj, mem_used_bytes=mem)


def test_energy_is_each_windows_average_power_times_its_length():
    readings = [
        reading(0.1, power_w=500, energy_mj=0, mem=20 * GiB),  # before the windows
        reading(0.25, power_w=210, energy_mj=50_000),
        reading(0.75, power_w=190, energy_mj=150_000),  # window 1: 100 J in 0.5 s, 200 W
        reading(2.1, power_w=310, energy_mj=400_000),
        reading(2.4, power_w=290, energy_mj=490_000),  # window 2: 90 J in 0.3 s, 300 W
        reading(3.0, power_w=50, energy_mj=600_000),  # after them
    ]
    windows = [(0.2, 1.0), (2.0, 2.5)]
    fields = summarise(readings, windows)
    assert fields["gpu_energy_j"] == pytest.approx(200 * 0.8 + 300 * 0.5)
    # the counter spans both windows: mean power is their energy over their length
    assert fields["gpu_power_mean_w"] == pytest.approx((200 * 0.8 + 300 * 0.5) / 1.3)
    assert fields["nvml_used_peak_bytes"] == 20 * GiB  # memory: the whole epoch's peak
    no_counter = [r._replace(energy_mj=None) for r in readings]  # the sampled power's mean
    assert summarise(no_counter, windows)["gpu_energy_j"] == pytest.approx(200 * 0.8
                                                                           + 300 * 0.5)
    assert summarise(no_counter, windows)["gpu_power_mean_w"] == 250  # the four inside
    # a window with no reading inside takes the timed readings' mean power (250 W)
    with_empty = summarise(readings, [*windows, (2.6, 2.8)])
    assert with_empty["gpu_energy_j"] == pytest.approx(310 + 250 * 0.2)


def test_mean_power_is_the_counters_where_the_sampled_average_lags_an_idle_start():
    # NVML's power reading averages the last second: a window starting from idle reads low
    # (an H200's first epoch: 350 W sampled where the counter rose 606 W x 0.48 s)
    readings = [reading(0.0, power_w=120, energy_mj=0),
                *(reading(0.1 * k, power_w=120 + 48 * k, energy_mj=60_000 * k)
                  for k in range(1, 6))]
    fields = summarise(readings, [(0.1, 0.5)])
    assert fields["gpu_power_mean_w"] == pytest.approx(600)
    assert fields["gpu_energy_j"] == pytest.approx(600 * 0.4)
    one_reading = summarise(readings, [(0.25, 0.35)])  # the counter spans no window
    assert one_reading["gpu_power_mean_w"] == 120 + 48 * 3


class FakeGpu:
    """A GPU on a fake clock that works in phases (utilisation, power, temperature, throttle,
    memory), sampled through the real Sampler's read_now every 0.1 s, between the meter's
    boundaries; its energy counter integrates the power."""

    def __init__(self) -> None:
        self.now, self.energy_mj, self.next_sample = 0.0, 0.0, 0.05
        self.state = {"util_pct": 0.0, "power_w": 50.0, "temperature_c": 40.0,
                      "throttle_mask": 0, "mem_used_bytes": GiB}
        self.sampler = Sampler(self.read, interval_s=3600)  # the thread's one reading
        while not self.sampler.since(-1.0):
            time.sleep(0.001)

    def clock(self) -> float:
        return self.now

    def read(self) -> Reading:  # the seam
        return Reading(t=self.now, sm_clock_mhz=1500, energy_mj=self.energy_mj, **self.state)

    def run(self, seconds: float, **state: float) -> None:
        self.state.update(state)
        end = self.now + seconds
        while self.next_sample < end:
            self._advance(self.next_sample)
            self.sampler.read_now()
            self.next_sample += 0.1
        self._advance(end)

    def _advance(self, t: float) -> None:
        self.energy_mj += self.state["power_w"] * (t - self.now) * 1000
        self.now = t


def _epoch(gpu: FakeGpu, timed_s: float, block_steps: int) -> dict:
    """Idle, then an epoch: 2 hot compiling warm-up steps (throttled, 20 GiB), 10 timed
    steps of `timed_s` at 80% and 250 W, then an evaluation at 10% and 100 W."""
    probe = NvmlProbe(gpu.sampler, clock=gpu.clock)
    gpu.run(0.3)
    meter = EpochMeter(warmup_steps=2, clock=gpu.clock, probes=[probe], block_steps=block_steps)
    for _ in range(2):
        with meter.step(items=1):
            gpu.run(1.0, util_pct=100, power_w=400, temperature_c=85, throttle_mask=0x4,
                    mem_used_bytes=20 * GiB)
    for _ in range(10):
        with meter.step(items=1):
            gpu.run(timed_s, util_pct=80, power_w=250, temperature_c=70, throttle_mask=0,
                    mem_used_bytes=8 * GiB)
    with meter.evaluation() as ev:
        gpu.run(1.0, util_pct=10, power_w=100, temperature_c=60)
        ev.items = 1
    summary = meter.summary()
    gpu.sampler.stop()
    return summary


@pytest.mark.parametrize("block_steps", [1, 4])
def test_warmup_and_evaluation_do_not_move_the_timed_averages(block_steps: int):
    gpu = FakeGpu()
    summary = _epoch(gpu, timed_s=0.2, block_steps=block_steps)
    assert summary["train_s"] == pytest.approx(2.0)
    assert summary["gpu_util_mean_pct"] == 80
    assert summary["gpu_power_mean_w"] == pytest.approx(250)
    assert summary["gpu_temp_max_c"] == 70
    assert summary["throttle_reasons"] == ""  # the warm-up's power cap is not the timed steps'
    assert summary["gpu_energy_j"] == pytest.approx(250 * 2.0)
    assert summary["nvml_used_peak_bytes"] == 20 * GiB  # the epoch's peak, warm-up's
    whole = summarise(gpu.sampler.since(0.3))  # what the epoch-wide summary would say
    assert whole["gpu_util_mean_pct"] < 75 and whole["throttle_reasons"] == "sw_power_cap"


def test_timed_steps_shorter_than_a_sample_fall_back_to_the_epochs_readings():
    gpu = FakeGpu()
    summary = _epoch(gpu, timed_s=0.003, block_steps=1)  # 30 ms: no sample inside
    epoch = gpu.sampler.since(0.3)
    assert not [r for r in epoch if 2.3 <= r.t <= 2.33]
    whole = summarise(epoch)
    for name in ("gpu_util_mean_pct", "gpu_power_mean_w", "gpu_temp_max_c", "throttle_reasons"):
        assert summary[name] == whole[name], name
    epoch_power_w = (epoch[-1].energy_mj - epoch[0].energy_mj) / 1000 / (epoch[-1].t
                                                                          - epoch[0].t)
    assert summary["gpu_energy_j"] == pytest.approx(epoch_power_w * summary["train_s"])


def test_readings_are_stamped_with_the_meters_clock(monkeypatch):
    fake = SimpleNamespace(
        NVMLError=Exception, NVML_CLOCK_SM=0, NVML_TEMPERATURE_GPU=0, nvmlInit=lambda: None,
        nvmlDeviceGetHandleByIndex=lambda index: index,
        nvmlDeviceGetUtilizationRates=lambda handle: SimpleNamespace(gpu=50),
        nvmlDeviceGetTotalEnergyConsumption=lambda handle: 1_000,
        nvmlDeviceGetCurrentClocksThrottleReasons=lambda handle: 0,
        nvmlDeviceGetPowerUsage=lambda handle: 100_000,
        nvmlDeviceGetClockInfo=lambda handle, clock: 1500,
        nvmlDeviceGetTemperature=lambda handle, sensor: 60,
        nvmlDeviceGetMemoryInfo=lambda handle: SimpleNamespace(used=GiB))
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    read = nvml_reader(["0"])
    before = time.perf_counter()
    stamped = read()
    assert before <= stamped.t <= time.perf_counter()
    assert stamped.power_w == 100 and stamped.energy_mj == 1_000
    for timed in (EpochMeter, NvmlProbe):
        assert inspect.signature(timed).parameters["clock"].default is time.perf_counter


class RecordedNvml:
    """What nvidia-ml-py answered on an H100 SXM node (driver 580.159.04), for gpu_identity."""

    class NVMLError(Exception):
        pass

    def __init__(self, power_limit: bool = True) -> None:
        self.power_limit = power_limit

    def nvmlInit(self) -> None:
        pass

    def nvmlDeviceGetHandleByIndex(self, index: int) -> str:
        return f"gpu{index}"

    def nvmlDeviceGetHandleByUUID(self, uuid: str) -> str:
        return uuid

    def nvmlDeviceGetName(self, handle: str) -> bytes:
        return b"NVIDIA H100 80GB HBM3"  # older nvidia-ml-py releases answer bytes

    def nvmlSystemGetDriverVersion(self) -> str:
        return "580.159.04"

    def nvmlDeviceGetMemoryInfo(self, handle: str) -> SimpleNamespace:
        return SimpleNamespace(total=85_520_809_984, used=0)

    def nvmlDeviceGetEnforcedPowerLimit(self, handle: str) -> int:
        if not self.power_limit:
            raise self.NVMLError("Not Supported")
        return 700_000  # milliwatts


def test_gpu_identity_is_what_the_driver_says_for_every_framework():
    identity = gpu_identity(["0", "GPU-8f1c"], nvml=RecordedNvml())
    assert identity == {"gpu_model": "NVIDIA H100 80GB HBM3", "gpu_count": 2,
                        "driver": "580.159.04", "gpu_memory_bytes": 85_520_809_984,
                        "gpu_power_limit_w": 700.0}
    assert "gpu_power_limit_w" not in gpu_identity(["0"], nvml=RecordedNvml(power_limit=False))
    assert gpu_identity([], nvml=RecordedNvml()) == {}
