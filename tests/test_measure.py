"""The epoch meter: synchronise before every clock read, exclude warm-up, count items, time
the whole epoch, time microsecond steps in blocks, and hand the timed windows to probes."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from orchestrator.worker.measure import EpochMeter

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
    # created at -1; boundaries at 0, 5 (warm-up step), 6, 7.5, 8.5; summary at 9
    meter, _ = meter_with([-1.0, 0.0, 5.0, 6.0, 7.5, 8.5, 9.0], warmup=1)
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
    assert summary["epoch_s"] == 10.0
    assert "timing_block_steps" not in summary  # one step per synchronisation


def test_the_device_is_synchronised_before_every_clock_read():
    meter, log = meter_with([0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0], warmup=0)
    for _ in range(2):
        with meter.step(items=1):
            pass
    with meter.evaluation() as ev:
        ev.items = 5
    meter.summary()
    reads = [i for i, entry in enumerate(log) if entry == "clock"]
    # creation, first step's start, two step ends, evaluation's start and end, summary
    assert len(reads) == 7 and all(log[i - 1] == "sync" for i in reads)


def test_evaluation_is_timed_apart_from_training():
    meter, _ = meter_with([-1.0, 0.0, 2.0, 10.0, 14.0, 15.0], warmup=0)
    with meter.step(items=8):
        pass
    with meter.evaluation() as ev:
        ev.items = 40
    summary = meter.summary()
    assert summary["train_s"] == 2.0 and summary["eval_s"] == 4.0
    assert summary["eval_items_per_s"] == 10.0
    assert summary["epoch_s"] == 16.0  # the 8 s between training and evaluation included


def test_an_epoch_with_only_warmup_is_an_error():
    meter, _ = meter_with([0.0, 0.0, 1.0, 2.0], warmup=3)
    with meter.step(items=1):
        pass
    with pytest.raises(ValueError, match="no timed step"):
        meter.summary()


# In a fresh interpreter with nothing else in it: in the test process (1 GB, framework
# threads), another thread freeing memory or the allocator reusing resident pages can hide
# a 64 MiB allocation. Fresh anonymous mappings, touched page by page, are real RSS.
_RSS_PEAKS = """
import json, mmap
from orchestrator.worker.measure import HostRssProbe

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


# The whole epoch, block timing and timed windows, on a fake device ---------------------------

class FakeDevice:
    """A device on a fake clock: work advances the clock, and the meter's synchronisations
    and clock reads are counted."""

    def __init__(self) -> None:
        self.now, self.syncs, self.reads = 0.0, 0, 0

    def run(self, seconds: float) -> None:
        self.now += seconds

    def sync(self) -> None:
        self.syncs += 1

    def clock(self) -> float:
        self.reads += 1
        return self.now

    def meter(self, warmup: int, block_steps: int = 1, probes=()) -> EpochMeter:
        return EpochMeter(warmup_steps=warmup, sync=self.sync, probes=probes, clock=self.clock,
                          block_steps=block_steps)


class WindowProbe:
    """A probe that keeps what the meter hands it at summary time."""

    def __init__(self) -> None:
        self.windows: list | None = None

    def reset(self) -> None:
        pass

    def read(self, timed_windows=()) -> dict:
        self.windows = list(timed_windows)
        return {}


def test_the_whole_epoch_runs_from_creation_to_the_summary_and_is_read_once():
    device = FakeDevice()
    device.run(1.0)
    meter = device.meter(warmup=1)  # the epoch starts here, at 1.0
    device.run(0.5)  # e.g. building the data loader: in the epoch, in no step
    for seconds in (4.0, 1.0, 1.0):  # a compiling warm-up step, two timed ones
        with meter.step(items=8):
            device.run(seconds)
        device.run(0.25)  # the loop between steps: in the steps (boundary to boundary)
    with meter.evaluation() as ev:
        device.run(2.0)
        ev.items = 16
    device.run(0.75)  # after evaluation, before the summary
    summary = meter.summary()
    assert summary["epoch_s"] == 0.5 + 3 * 0.25 + 6.0 + 2.0 + 0.75 == 10.0
    parts = summary["warmup_s"] + summary["train_s"] + summary["eval_s"]
    assert summary["epoch_s"] >= parts and parts == 4.25 + 1.25 + 1.0 + 2.0
    reads = device.reads
    device.run(5.0)
    assert meter.summary() == summary and device.reads == reads  # cached: one end read


def _run_steps(device: FakeDevice, meter: EpochMeter, seconds: list[float],
               items: list[float]) -> list[int]:
    """Run the steps; the device's synchronisations counted at the end of each."""
    syncs = []
    for step_seconds, step_items in zip(seconds, items, strict=True):
        with meter.step(items=step_items):
            device.run(step_seconds)
        syncs.append(device.syncs)
    return syncs


WARMUP_S = [4.0, 2.0]
TIMED_S = [0.25, 0.5, 0.75, 0.5, 1.0, 0.25, 0.25, 0.5, 0.75, 1.0, 0.5, 0.25]  # 12 steps
ITEMS = [3.0, 5.0, 7.0, 1.0, 2.0, 4.0, 6.0, 8.0, 9.0, 1.0, 2.0, 3.0]


def test_block_timing_synchronises_once_per_block_and_keeps_the_totals_exact():
    per_step, blocks = FakeDevice(), FakeDevice()
    meters = {"per_step": per_step.meter(warmup=2), "blocks": blocks.meter(warmup=2,
                                                                           block_steps=5)}
    runs = {}
    for name, device in (("per_step", per_step), ("blocks", blocks)):
        meter = meters[name]
        warm = _run_steps(device, meter, WARMUP_S, [10.0, 10.0])
        timed = _run_steps(device, meter, TIMED_S, ITEMS)
        runs[name] = (warm, timed, meter.summary(), device.syncs)

    warm, timed, summary, total = runs["per_step"]
    assert [b - a for a, b in itertools.pairwise([warm[-1], *timed])] == [1] * 12
    # creation, first step's start, 2 warm-up steps, 12 timed steps, the summary
    assert total == 1 + 1 + 2 + 12 + 1

    warm, timed, summary, total = runs["blocks"]
    assert warm == [3, 4]  # creation, first step's start, then one per warm-up step
    assert [b - a for a, b in itertools.pairwise([warm[-1], *timed])] == [
        0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0]  # one per block of 5, none for the partial 2
    assert total == 4 + 2 + 1  # the summary closes the partial block with its own sync
    step_s = meters["blocks"].step_s
    assert step_s[:2] == WARMUP_S  # warm-up still timed step by step
    block_sums = [sum(TIMED_S[0:5]), sum(TIMED_S[5:10]), sum(TIMED_S[10:12])]
    assert step_s[2:] == pytest.approx([block_sums[0] / 5] * 5 + [block_sums[1] / 5] * 5
                                       + [block_sums[2] / 2] * 2)
    assert summary["train_s"] == pytest.approx(sum(block_sums))
    assert summary["train_s"] == pytest.approx(runs["per_step"][2]["train_s"])
    assert summary["items"] == sum(ITEMS) and summary["steps"] == 12
    assert summary["items_per_s"] == pytest.approx(sum(ITEMS) / sum(TIMED_S))
    assert summary["warmup_s"] == sum(WARMUP_S)
    assert summary["timing_block_steps"] == 5
    # the median and p90 are those of the block means, weighted by their steps
    # (0.6 x 5, 0.55 x 5, 0.375 x 2 steps)
    assert summary["step_s_median"] == pytest.approx(block_sums[1] / 5)
    assert summary["step_s_p90"] == pytest.approx(block_sums[0] / 5)
    assert meters["blocks"].timed_windows == [(6.0, 6.0 + sum(TIMED_S))]


def test_a_partial_block_is_closed_when_evaluation_starts_and_windows_split_there():
    device, probe = FakeDevice(), WindowProbe()
    meter = device.meter(warmup=1, block_steps=4, probes=[probe])
    _run_steps(device, meter, [3.0, 1.0, 1.0, 1.0, 1.0, 0.5, 1.5], [1.0] * 7)  # 4 + 2 open
    syncs = device.syncs
    with meter.evaluation() as ev:
        assert device.syncs == syncs + 1  # evaluation's start, which ends the open block
        device.run(10.0)
        ev.items = 100
    device.run(2.0)  # between evaluation and the next steps: in no window
    _run_steps(device, meter, [0.5, 0.5, 0.5], [2.0] * 3)
    summary = meter.summary()
    assert meter.step_s[1:] == [1.0] * 4 + [1.0, 1.0] + [0.5] * 3
    assert summary["eval_s"] == 10.0 and summary["train_s"] == 7.5
    assert summary["items"] == 6 + 6 and summary["steps"] == 9
    assert meter.timed_windows == [(3.0, 9.0), (21.0, 22.5)]
    assert probe.windows == meter.timed_windows
    assert summary["epoch_s"] == 22.5 >= (summary["warmup_s"] + summary["train_s"]
                                         + summary["eval_s"])


def test_per_step_windows_cover_the_timed_steps_only():
    device, probe = FakeDevice(), WindowProbe()
    meter = device.meter(warmup=2, probes=[probe])
    _run_steps(device, meter, [5.0, 5.0, 1.0, 1.0], [1.0] * 4)
    with meter.evaluation() as ev:
        device.run(3.0)
        ev.items = 1
    _run_steps(device, meter, [1.0], [1.0])
    meter.summary()
    assert probe.windows == [(10.0, 12.0), (15.0, 16.0)]


def test_a_block_size_below_one_is_refused():
    with pytest.raises(ValueError, match="block_steps must be at least 1"):
        EpochMeter(warmup_steps=0, block_steps=0)


def test_block_timing_of_an_asynchronous_device_times_its_work():
    device = AsyncDevice()
    meter = EpochMeter(warmup_steps=2, sync=device.sync, block_steps=4)
    for seconds in [0.10, 0.10] + [0.02] * 10:  # two warm-up steps, 10 timed (4 + 4 + 2)
        with meter.step(items=16):
            device.launch(seconds)  # returns at once: only the block's sync waits
    summary = meter.summary()
    assert summary["warmup_s"] == pytest.approx(0.20, abs=0.03)
    assert summary["train_s"] == pytest.approx(0.20, abs=0.03)
    assert summary["items"] == 160 and summary["steps"] == 10
    assert summary["epoch_s"] >= summary["warmup_s"] + summary["train_s"]
