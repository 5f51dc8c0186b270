"""The contention probe (orchestrator/worker/contention.py) on the kernel's own counters:
each case is a real process in a session of its own, as a worker is, pinned to one CPU,
with or without a busy process of another session on that CPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from orchestrator.worker.contention import ContentionProbe, Counters, contention
from tests.conftest import PROJECT

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/self/schedstat"),
                                reason="the kernel keeps no schedstat (not Linux)")
CPU = min(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 0
CELL = """
import json, os, resource, subprocess, sys, time
os.sched_setaffinity(0, {int(sys.argv[2])})
from orchestrator.worker.contention import ContentionProbe
probe = ContentionProbe()
probe.reset()
began = time.monotonic()
end = began + 1.5
if sys.argv[1] == "spin":
    while time.monotonic() < end:
        pass
elif sys.argv[1] == "sleep":
    time.sleep(1.5)
else:  # a child of the cell's (a rank, a data loader) spins while the worker waits for it
    spin = "import time\\nend = time.monotonic() + 1.5\\nwhile time.monotonic() < end: pass"
    if sys.argv[1] == "child":  # alive when the probe reads, as a rank is
        child = subprocess.Popen([sys.executable, "-c", spin.replace("1.5", "3")])
        time.sleep(1.5)
    else:  # reaped before the probe reads, as a data loader's worker at an epoch's end
        subprocess.run([sys.executable, "-c", spin], check=True)
child_s = 0.0  # the CPU seconds the child had, by its own counters
if sys.argv[1] == "child":
    fields = open(f"/proc/{child.pid}/stat").read().rsplit(")", 1)[1].split()
    child_s = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
elif sys.argv[1] == "reaped child":
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    child_s = used.ru_utime + used.ru_stime
figures = probe.read()
print(json.dumps({**figures, "interval_s": time.monotonic() - began, "child_s": child_s}))
if sys.argv[1] == "child":
    child.kill()
"""


def cell(kind: str) -> dict[str, float]:
    """The probe's figures for a 1.5 s cell of `kind`, run as a worker is: its own session."""
    done = subprocess.run([sys.executable, "-c", CELL, kind, str(CPU)], capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": str(PROJECT)}, timeout=60,
                          start_new_session=True, check=True)
    figures: dict[str, float] = json.loads(done.stdout)
    return figures


@contextmanager
def busy_process_on_the_cpu() -> Iterator[None]:
    """A process of another session that spins on the cell's CPU."""
    hog = subprocess.Popen([sys.executable, "-c", f"import os\nos.sched_setaffinity(0, {{{CPU}}})"
                            "\nwhile True: pass"], start_new_session=True)
    try:
        time.sleep(0.3)
        yield
    finally:
        hog.kill()
        hog.wait()


def test_a_cell_sharing_its_cpu_with_a_busy_process_waits_and_sees_it():
    with busy_process_on_the_cpu():
        figures = cell("spin")
    # the scheduler shares the one CPU about evenly: each ran about half the time
    assert figures["cpu_wait_cores"] >= 0.2, figures
    assert figures["other_cpu_cores"] >= 0.25, figures
    assert figures["cell_cpu_cores"] <= 0.8, figures


def test_a_cell_that_sleeps_waits_for_nothing_beside_a_busy_process():
    with busy_process_on_the_cpu():
        figures = cell("sleep")
    assert figures["cpu_wait_cores"] < 0.05 and figures["cell_cpu_cores"] < 0.05, figures
    assert figures["other_cpu_cores"] >= 0.5, figures  # the busy process, seen as another's


@pytest.mark.parametrize("kind", ["child", "reaped child"])
def test_a_cells_child_process_counts_as_the_cell_not_as_another(kind):
    """Whatever share of the CPU the child got (a loaded machine gives it little), the
    probe counts that share as the cell's: counted as another's, the cell's would be the
    parent's alone, about 0. (An absolute floor of 0.25 cores failed 9 of 12 times at load
    8-15 on 2 cores.)"""
    figures = cell(kind)
    assert figures["child_s"] > 0.02, figures  # it ran at all
    cell_s = figures["cell_cpu_cores"] * figures["interval_s"]
    assert cell_s >= 0.8 * figures["child_s"] - 0.02, figures  # a clock tick of rounding


def test_the_figures_are_means_over_the_interval_in_cores():
    before = Counters(at=100.0, cell_run_s=10.0, cell_wait_s=1.0, cpus_busy_s=50.0)
    after = Counters(at=102.0, cell_run_s=12.0, cell_wait_s=2.5, cpus_busy_s=54.5)
    assert contention(before, after, cpus=2) == pytest.approx(
        {"cell_cpu_cores": 1.0, "cpu_wait_cores": 0.75, "other_cpu_cores": 1.25})
    # the two clocks round differently: never fewer than none, nor more cores than there are
    assert contention(before, Counters(102.0, 20.0, 1.0, 51.0), cpus=2) == pytest.approx(
        {"cell_cpu_cores": 2.0, "cpu_wait_cores": 0.0, "other_cpu_cores": 0.0})
    assert contention(before, before, cpus=2) == {}  # no time passed: nothing to say


def test_a_probe_read_before_its_reset_says_nothing():
    assert ContentionProbe().read() == {}
