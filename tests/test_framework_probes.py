"""TensorFlow and JAX: device synchronisation and allocator peaks, as the harness reads them.

The real frameworks run here on the CPU. Their GPU memory counters exist only on a GPU, so
the reading logic is also driven through the probes' seam with recorded readings; the real
GPU calls run in the GPU validation issues.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

import orchestrator.worker.main as worker
from orchestrator.worker.measure import (
    FRAMEWORK_ENV,
    EpochMeter,
    JaxProbe,
    TensorflowProbe,
    jax_sync,
)
from tests.cells import make_cell

pytestmark = pytest.mark.slow  # sweeps, real training or fuzzing: not the fast tier

GiB = 1 << 30
ROOT = Path(__file__).resolve().parents[1]


class RecordedTfMemory:
    """`tf.config.experimental`'s memory calls, answering from recorded per-device peaks.

    A reset starts the next epoch's readings; a device in `without_statistics` answers as
    TensorFlow's CPU allocator does without oneDNN.
    """

    def __init__(self, peaks: dict[str, list[int]], without_statistics: set[str] = frozenset()
                 ) -> None:
        self.peaks, self.without_statistics = peaks, without_statistics
        self.resets: list[str] = []

    def reset_memory_stats(self, device: str) -> None:
        if device in self.without_statistics:
            raise ValueError(f"Cannot reset memory stats for device '{device}'")
        self.resets.append(device)

    def get_memory_info(self, device: str) -> dict[str, int]:
        if device in self.without_statistics:
            raise ValueError(f"Allocator stats not available for device '{device}'")
        epoch = max(self.resets.count(device) - 1, 0)
        return {"current": 0, "peak": self.peaks[device][epoch]}


def test_tensorflow_probe_resets_every_device_each_epoch_and_reports_the_largest_peak():
    api = RecordedTfMemory({"/device:GPU:0": [3 * GiB, 1 * GiB],
                            "/device:GPU:1": [2 * GiB, 5 * GiB]})
    probe = TensorflowProbe(["/device:GPU:0", "/device:GPU:1"], api=api)
    peaks = []
    for _ in range(2):
        meter = EpochMeter(warmup_steps=0, probes=[probe])
        with meter.step(items=1):
            pass
        peaks.append(meter.summary()["mem_alloc_peak_bytes"])
    assert peaks == [3 * GiB, 5 * GiB]
    assert api.resets == ["/device:GPU:0", "/device:GPU:1"] * 2


def test_a_tensorflow_device_without_allocator_statistics_reports_nothing_instead_of_failing():
    api = RecordedTfMemory({}, without_statistics={"/device:CPU:0"})
    meter = EpochMeter(warmup_steps=0, probes=[TensorflowProbe(["/device:CPU:0"], api=api)])
    with meter.step(items=1):
        pass
    assert "mem_alloc_peak_bytes" not in meter.summary()  # absent, never a false zero


# Run in a fresh interpreter: TF_ENABLE_ONEDNN_OPTS is read when TensorFlow loads, and it
# decides whether the CPU allocator keeps statistics (TensorFlow's default depends on the CPU).
_REAL_CPU_EPOCHS = """
import json
import tensorflow as tf
from orchestrator.worker.measure import EpochMeter, tensorflow_probes, tensorflow_sync

(probe,) = tensorflow_probes()
peaks = []
for rows in (4000, 1000):  # 16 MB, then 4 MB of float32 held during the epoch
    meter = EpochMeter(warmup_steps=0, sync=tensorflow_sync, probes=[probe])
    with meter.step(items=1):
        held = tf.ones((rows, 1000))
        tf.reduce_sum(held).numpy()
    del held
    peaks.append(meter.summary().get("mem_alloc_peak_bytes"))
print(json.dumps({"devices": probe.devices, "peaks": peaks}))
"""


def _real_cpu_epochs(onednn: str) -> dict:
    env = {**os.environ, "TF_ENABLE_ONEDNN_OPTS": onednn, "CUDA_VISIBLE_DEVICES": ""}
    done = subprocess.run([sys.executable, "-c", _REAL_CPU_EPOCHS], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_tensorflow_probe_reads_the_real_cpu_allocator_peak_of_each_epoch():
    result = _real_cpu_epochs(onednn="1")  # oneDNN's CPU allocator keeps statistics
    assert result["devices"] == ["/device:CPU:0"]  # no GPU here
    first, second = result["peaks"]
    assert 16e6 <= first < 40e6
    assert 4e6 <= second < 16e6, "the second epoch's peak must not carry the first's"


def test_tensorflow_probe_reports_no_peak_where_the_cpu_allocator_keeps_none():
    result = _real_cpu_epochs(onednn="0")  # TensorFlow's default on CPUs without AVX-512
    assert result == {"devices": [], "peaks": [None, None]}


class RecordedJaxDevice:
    def __init__(self, platform: str, stats: dict[str, int] | None) -> None:
        self.platform, self.stats = platform, stats

    def memory_stats(self) -> dict[str, int] | None:
        return self.stats


def test_jax_probe_reports_the_largest_peak_over_the_devices(monkeypatch):
    monkeypatch.setenv("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    probe = JaxProbe([RecordedJaxDevice("gpu", {"peak_bytes_in_use": 7 * GiB}),
                      RecordedJaxDevice("gpu", {"peak_bytes_in_use": 9 * GiB})])
    assert probe.read() == {"mem_alloc_peak_bytes": 9 * GiB}


def test_jax_probe_refuses_a_preallocating_gpu(monkeypatch):
    monkeypatch.delenv("XLA_PYTHON_CLIENT_PREALLOCATE", raising=False)
    with pytest.raises(RuntimeError, match="XLA_PYTHON_CLIENT_PREALLOCATE=false"):
        JaxProbe([RecordedJaxDevice("gpu", {"peak_bytes_in_use": 1})])


def test_jax_on_the_cpu_reports_no_allocator_peak():
    import jax
    assert JaxProbe(jax.devices()).read() == {}


def test_jax_sync_waits_for_work_dispatched_asynchronously():
    import jax
    import jax.numpy as jnp

    square = jax.jit(lambda a: a @ a @ a @ a)
    x = jnp.ones((2500, 2500))
    jax.block_until_ready(square(x))  # compiled outside the test's window
    y = square(x)
    assert not y.is_ready(), "JAX ran synchronously here: this test would prove nothing"
    jax_sync()
    assert y.is_ready()


def test_the_worker_sets_the_framework_memory_settings_before_the_workload_runs(
        tmp_path, monkeypatch):
    for name in FRAMEWORK_ENV:
        monkeypatch.delenv(name, raising=False)
    cell = tmp_path / "cell.json"
    cell.write_text(json.dumps(make_cell("sleep", {"seconds": 0.01, "steps": 1,
                                                   "fault": "none", "message": ""}, epochs=1)))
    assert worker.main([str(cell), str(tmp_path / "out.jsonl")]) == 0
    assert {name: os.environ.get(name) for name in FRAMEWORK_ENV} == {
        "TF_FORCE_GPU_ALLOW_GROWTH": "true", "XLA_PYTHON_CLIENT_PREALLOCATE": "false"}


def test_jax_probe_reports_cpu_stats_where_a_client_keeps_them():
    probe = JaxProbe([SimpleNamespace(platform="cpu",
                                      memory_stats=lambda: {"peak_bytes_in_use": 123})])
    assert probe.read() == {"mem_alloc_peak_bytes": 123}
