"""The NVML sampler's thread and aggregation, fed recorded readings through its seam (the
real NVML calls run on a GPU machine)."""

from __future__ import annotations

import itertools
import time

import pytest

from orchestrator.nvml import NvmlProbe, Reading, Sampler, summarise

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
    assert fields["gpu_util_mean_pct"] == 95 and fields["gpu_power_mean_w"] == 300
    assert fields["gpu_sm_clock_mean_mhz"] == 1750 and fields["gpu_temp_max_c"] == 75
    assert fields["gpu_energy_j"] == pytest.approx(90.0)  # from the counter
    assert fields["nvml_used_peak_bytes"] == 9 << 30
    assert fields["throttle_reasons"] == ""  # 0x1 is idle, not a slowdown


def test_energy_without_a_counter_integrates_power():
    readings = [r._replace(energy_mj=None) for r in RECORDED]
    assert summarise(readings)["gpu_energy_j"] == pytest.approx(300 * 0.3)


def test_throttle_reasons_are_named():
    readings = [RECORDED[0], RECORDED[1]._replace(throttle_mask=0x4 | 0x40)]
    assert summarise(readings)["throttle_reasons"] == "sw_power_cap,hw_thermal"


def test_the_sampler_thread_and_probe_window():
    replay = itertools.cycle(RECORDED)

    def read() -> Reading:  # the seam: recorded values, stamped with the real clock
        return next(replay)._replace(t=time.monotonic())

    resets: list[float] = []

    def clock() -> float:
        resets.append(time.monotonic())
        return resets[-1]

    sampler = Sampler(read, interval_s=0.01)
    probe = NvmlProbe(sampler, clock=clock)
    time.sleep(0.1)
    probe.reset()  # a new epoch: the readings before it are out of its window
    time.sleep(0.2)
    fields = probe.read()
    sampler.stop()
    window = sampler.since(resets[-1])
    assert 10 <= len(window) <= 30  # about 100 Hz for 0.2 s, plus the probe's own reads
    assert len(sampler.since(0.0)) > len(window) + 5
    assert fields == summarise(window)
