"""Flags the executor derives from a worker's records: implausible (beyond the device's
peak), throttled (NVML reasons while timing), contended (its threads waited for CPUs others
held); and the CPU's peak estimate."""

from __future__ import annotations

import json

import pytest

from orchestrator.executors.outcome import CellFiles, WorkerExit, records_for
from orchestrator.hardware.peaks import cpu_peak_estimate
from orchestrator.plan.cells import expand
from orchestrator.registry.cell_run import ToolInfo
from orchestrator.results.records import Flag, Status
from orchestrator.validate import load_spec

MATRIX = """
name: flags
hardware: [{name: box, kind: local}]
stacks: [{name: here, executor: process}]
workloads: [{name: lstm_lm, preset: tiny, dataset: synthetic}]
"""


def outcome(matrix_file, tmp_path, **measurement):
    (cell,) = expand(load_spec(matrix_file(MATRIX)))
    files = CellFiles.prepare(cell, tmp_path)
    out = files.out
    record = {"record": "measurement", "epoch": 1, "item_unit": "word", "train_s": 1.0,
              "items": 1000.0, "items_per_s": 1000.0, **measurement}
    out.write_text(json.dumps(record) + "\n" + json.dumps({"record": "provenance"}) + "\n")
    exit = WorkerExit(returncode=0, timed_out=False, started_at="2026-11-22T00:00:00+00:00",
                      wall_s=2.0)
    return records_for(cell, exit, files, ToolInfo("t", None))


def test_beyond_the_peak_is_implausible_with_its_reason(matrix_file, tmp_path):
    peak = cpu_peak_estimate()
    assert peak is not None
    # 1000 items/s at a FLOP count that needs twice this CPU's peak
    records = outcome(matrix_file, tmp_path, flops_per_item=2 * peak.flops / 1000)
    measurement, cell = records[1], records[-1]
    assert measurement.peak_source == "estimate"
    assert measurement.peak_fraction == 2.0
    assert cell.status == Status.OK and Flag.IMPLAUSIBLE in cell.flags
    assert "200% of the device's estimate peak" in cell.error


def test_within_the_peak_is_not_flagged(matrix_file, tmp_path):
    records = outcome(matrix_file, tmp_path, flops_per_item=1000.0)
    assert records[-1].flags == [] and records[1].peak_fraction < 1


def test_throttling_while_timing_is_flagged(matrix_file, tmp_path):
    records = outcome(matrix_file, tmp_path, throttle_reasons="sw_thermal")
    assert Flag.THROTTLED in records[-1].flags and "sw_thermal" in records[-1].error


def test_the_power_cap_alone_is_the_card_at_work_not_a_condition(matrix_file, tmp_path):
    # a datacenter GPU under a heavy load runs at its cap by design
    records = outcome(matrix_file, tmp_path, throttle_reasons="sw_power_cap")
    assert Flag.THROTTLED not in records[-1].flags and records[-1].error is None
    both = outcome(matrix_file, tmp_path / "hot", throttle_reasons="sw_power_cap,hw_thermal")
    assert Flag.THROTTLED in both[-1].flags and both[-1].error == \
        "throttled while timing: hw_thermal"


def test_threads_waiting_for_cpus_others_held_are_contended_with_how_much(matrix_file,
                                                                         tmp_path):
    records = outcome(matrix_file, tmp_path, cell_cpu_cores=1.0, cpu_wait_cores=0.99,
                      other_cpu_cores=1.35)
    assert records[-1].status == Status.OK and Flag.CONTENDED in records[-1].flags
    assert records[-1].error == ("contended: in epoch 1, 0.99 of its threads on average "
                                 "waited for a CPU while other processes used 1.35 cores of "
                                 "the CPUs it ran on")


@pytest.mark.parametrize(("waiting", "others"), [
    (0.99, 0.0),  # its own threads outnumber its cores: oversubscribed, if anything
    (0.01, 2.0),  # others busy on cores it did not need (a cell that sleeps: 0.008)
    (0.09, 2.0),  # just under the wait that counts
    (1.0, 0.24),  # just under the others' use that counts
])
def test_waiting_or_others_alone_is_not_contended(matrix_file, tmp_path, waiting, others):
    records = outcome(matrix_file, tmp_path, cell_cpu_cores=1.0, cpu_wait_cores=waiting,
                      other_cpu_cores=others)
    assert Flag.CONTENDED not in records[-1].flags and records[-1].error is None


def test_a_contention_figure_beyond_physics_is_refused(matrix_file, tmp_path):
    records = outcome(matrix_file, tmp_path, cpu_wait_cores=-0.5)
    assert records[-1].status == Status.INVALID_OUTPUT and "cpu_wait_cores" in records[-1].error


def test_cpu_peak_estimate_from_cpuinfo():
    cpuinfo = "processor\t: 0\ncpu MHz\t\t: 2000.0\nflags\t\t: fpu sse avx avx2 fma\n"
    # "cpu MHz" may be a base clock below turbo: the bound allows twice it
    assert cpu_peak_estimate("fp32", cpuinfo, cpus=4).flops == 4 * 2 * 2000e6 * 32
    avx512 = cpuinfo.replace("fma", "fma avx512f")
    assert cpu_peak_estimate("fp32", avx512, cpus=1, max_mhz=3000).flops == 3000e6 * 64
    assert cpu_peak_estimate("bf16", avx512, cpus=1, max_mhz=3000).flops == 3000e6 * 64
    amx = avx512.replace("avx512f", "avx512f avx512_bf16 amx_bf16")
    assert cpu_peak_estimate("bf16", amx, cpus=1, max_mhz=3000).flops == 3000e6 * 1024
    assert cpu_peak_estimate("fp32", amx, cpus=1, max_mhz=3000).flops == 3000e6 * 64
