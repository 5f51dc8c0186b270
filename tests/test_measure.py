"""The epoch meter: synchronise before every clock read, exclude warm-up, count items."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from orchestrator.measure import EpochMeter

PROJECT = Path(__file__).resolve().parents[1]


class ScriptedClock:
    """A clock that returns given times and logs each read next to the syncs."""

    def __init__(self, times: list[float], log: list[str]) -> None:
        self.times, self.log = iter(times), log

    def __call__(self) -> float:
        self.log.append("clock")
        return next(self.times)


def meter_with(times: list[float], warmup: int):
    log: list[str] = []
    meter = EpochMeter(warmup_steps=warmup, sync=lambda: log.append("sync"),
                       clock=ScriptedClock(times, log))
    return meter, log


def test_warmup_steps_are_excluded_and_counted():
    # boundaries at 0, 5 (warm-up step), 6, 7.5, 8.5
    meter, _ = meter_with([0.0, 5.0, 6.0, 7.5, 8.5], warmup=1)
    for items in (100, 10, 20, 30):
        with meter.step(items=items):
            pass
    summary = meter.summary()
    assert summary["warmup_steps"] == 1 and summary["warmup_s"] == 5.0
    assert summary["steps"] == 3
    assert summary["items"] == 60 and summary["train_s"] == pytest.approx(3.5)
    assert summary["items_per_s"] == pytest.approx(60 / 3.5)
    assert summary["step_s_median"] == pytest.approx(1.0)
    assert summary["step_s_p90"] == pytest.approx(1.4)  # between 1.0 and 1.5


def test_the_device_is_synchronised_before_every_clock_read():
    meter, log = meter_with([0.0, 1.0, 2.0, 3.0, 4.0], warmup=0)
    for _ in range(2):
        with meter.step(items=1):
            pass
    with meter.evaluation() as ev:
        ev.items = 5
    reads = [i for i, entry in enumerate(log) if entry == "clock"]
    assert len(reads) == 5 and all(log[i - 1] == "sync" for i in reads)


def test_evaluation_is_timed_apart_from_training():
    meter, _ = meter_with([0.0, 2.0, 10.0, 14.0], warmup=0)
    with meter.step(items=8):
        pass
    with meter.evaluation() as ev:
        ev.items = 40
    summary = meter.summary()
    assert summary["train_s"] == 2.0 and summary["eval_s"] == 4.0
    assert summary["eval_items_per_s"] == 10.0


def test_an_epoch_with_only_warmup_is_an_error():
    meter, _ = meter_with([0.0, 1.0], warmup=3)
    with meter.step(items=1):
        pass
    with pytest.raises(ValueError, match="no timed step"):
        meter.summary()


# In a fresh interpreter with nothing else in it: in the test process (1 GB, framework
# threads), another thread freeing memory or the allocator reusing resident pages can hide
# a 64 MiB allocation. Fresh anonymous mappings, touched page by page, are real RSS.
_RSS_PEAKS = """
import json, mmap
from orchestrator.measure import HostRssProbe

MiB = 1 << 20
def touched(size):
    block = mmap.mmap(-1, size)
    for offset in range(0, size, mmap.PAGESIZE):
        block[offset] = 1
    return block

probe = HostRssProbe()
touched(128 * MiB).close()  # an earlier epoch's peak, then freed
before_reset = probe.read()["host_rss_peak_bytes"]
probe.reset()
after_reset = probe.read()["host_rss_peak_bytes"]
block = touched(64 * MiB)
after_allocation = probe.read()["host_rss_peak_bytes"]
print(json.dumps([before_reset, after_reset, after_allocation]))
"""


def test_host_rss_peak_follows_a_real_allocation_and_resets_per_epoch():
    done = subprocess.run([sys.executable, "-c", _RSS_PEAKS], cwd=PROJECT, capture_output=True,
                          text=True, timeout=60, check=True)
    before_reset, after_reset, after_allocation = json.loads(done.stdout)
    mib = 1 << 20
    assert before_reset - after_reset > 120 * mib, "the reset must drop the freed block's peak"
    assert 63 * mib < after_allocation - after_reset < 80 * mib


class AsyncDevice:
    """A fake slow device: launching work returns at once, like a CUDA kernel launch, and
    sync() waits until everything launched has run (torch.cuda.synchronize)."""

    def __init__(self) -> None:
        self.busy_until = time.perf_counter()

    def launch(self, seconds: float) -> None:
        self.busy_until = max(self.busy_until, time.perf_counter()) + seconds

    def sync(self) -> None:
        time.sleep(max(0.0, self.busy_until - time.perf_counter()))


def test_epoch_time_matches_the_device_time_of_the_timed_steps():
    device = AsyncDevice()
    meter = EpochMeter(warmup_steps=2, sync=device.sync)
    step_s = [0.20, 0.20, 0.05, 0.05, 0.05, 0.05]  # two slow warm-up steps, four timed
    for seconds in step_s:
        with meter.step(items=32):
            device.launch(seconds)  # returns at once: only the sync makes the clock honest
    summary = meter.summary()
    assert summary["train_s"] == pytest.approx(0.20, abs=0.02)
    assert summary["warmup_s"] == pytest.approx(0.40, abs=0.03)
    assert summary["items"] == 4 * 32 and summary["steps"] == 4
    assert summary["step_s_median"] == pytest.approx(0.05, abs=0.01)
