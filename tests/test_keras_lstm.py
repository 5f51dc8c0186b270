"""keras_lstm (seed 002): the seed's data preparation, every installed backend through the
real worker, the multi-device paths on CPU, the backend the stack must provide, and the
precision glossary on every backend (true fp32, bf16 as Keras's mixed policy, the GPU-only
labels refused here, never float32 timed under a half-precision label)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest

from orchestrator.plan.cells import expand, incompatibility
from orchestrator.validate import load_spec
from orchestrator.workload_registry import load_workload
from tests import cells as cell_files
from tests.conftest import PROJECT, SHARED_DATA, cell_records, journal, run_cli

pytestmark = pytest.mark.slow  # sweeps, real training or fuzzing: not the fast tier

BACKENDS = [b for b in ("tensorflow", "torch", "jax") if importlib.util.find_spec(b)]
DATA_ENV = {"MATRIX_BENCH_DATA": str(SHARED_DATA)}
# What each backend reports at fp32, read back after the workload set it: TF32 off.
FP32_SWITCHES = {
    "tensorflow": {"tf.tensor_float_32_execution": "False"},
    "torch": {"torch.backends.cuda.matmul.allow_tf32": "False",
              "torch.backends.cudnn.allow_tf32": "False",
              "torch.float32_matmul_precision": "highest"},
    "jax": {"jax_default_matmul_precision": "highest"},
}


def test_the_data_are_prepared_as_the_seed_prepared_nietzsche():
    from workloads.keras_lstm.workload import char_windows

    text = (SHARED_DATA / "nietzsche" / "nietzsche.txt").read_text(encoding="utf-8").lower()
    windows = char_windows(text, maxlen=40, step=3)
    assert (windows.characters, windows.symbols, len(windows.x)) == (600_893, 57, 200_285)
    assert windows.x.shape == (200_285, 40, 57) and windows.y.shape == (200_285, 57)
    assert (windows.x.sum(axis=2) == 1).all() and (windows.y.sum(axis=1) == 1).all()
    chars = sorted(set(text))
    assert chars[windows.y[0].argmax()] == text[40]  # the target is the next character
    assert "".join(chars[i] for i in windows.x[1].argmax(axis=1)) == text[3:43]


def test_wikitext2_characters_keep_only_the_seeds_tokens(tmp_path, monkeypatch):
    from tests.cells import context_for, make_cell
    from workloads.keras_lstm.workload import wikitext_text

    monkeypatch.setenv("MATRIX_BENCH_DATA", str(SHARED_DATA))
    ctx = context_for(make_cell("keras_lstm", {}, 1), tmp_path / "out")
    text = wikitext_text(ctx)
    assert set(text) <= set("abcdefghijklmnopqrstuvwxyz0123456789 ")
    assert text.startswith("valkyria chronicles iii")
    assert "wikitext-2/train.txt" in ctx.data_files


@pytest.fixture(scope="module")
def backend_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("keras")
    (root / "m.yaml").write_text(f"""
name: keras
hardware: [{{name: cpu, kind: local}}]
stacks: [{{name: here, executor: process}}]
workloads:
  - name: keras_lstm
    preset: tiny
    epochs: 2
    params: {{backend: {json.dumps(BACKENDS)}, dataset: nietzsche}}
include:
  - workload: keras_lstm
    params: {{backend: {json.dumps(BACKENDS)}, dataset: synthetic, devices: 2, unroll: false}}
  - workload: keras_lstm
    params: {{backend: {json.dumps(BACKENDS)}, dataset: synthetic, precision: bf16, samples: 512}}
""")
    done = run_cli("run", "m.yaml", "--no-ray", cwd=root, env=DATA_ENV)
    assert done.returncode == 0, done.stderr
    return root / "reports" / "keras"


def cells_of(run_dir, **params):
    return {c["param.backend"]: c for c in cell_records(run_dir)
            if all(c[f"param.{k}"] == v for k, v in params.items())}


def provenance_of(records, cell):
    return next(r for r in records if r["record"] == "provenance"
                and r["cell_id"] == cell["cell_id"])


def test_every_installed_backend_trains_and_records_its_epochs(backend_run):
    assert {"tensorflow", "torch"} <= set(BACKENDS)  # CI installs them (tf, jax extras)
    cells = cells_of(backend_run, dataset="nietzsche", precision="fp32")
    assert set(cells) == set(BACKENDS)
    records = journal(backend_run)
    for backend, cell in cells.items():
        assert cell["status"] == "ok", (backend, cell.get("log_tail"))
        provenance = provenance_of(records, cell)
        assert provenance["framework"] == backend
        # the model's device, read back from the backend: the CPU here
        assert "cpu" in provenance["compute_device"].lower(), provenance["compute_device"]
        assert provenance["precision_switches"] == {"keras.dtype_policy": "float32",
                                                    **FP32_SWITCHES[backend]}
        epochs = [r for r in records if r["record"] == "measurement"
                  and r["cell_id"] == cell["cell_id"]]
        assert [e["epoch"] for e in epochs] == [1, 2]
        for epoch in epochs:
            # 12,000 characters -> 3,987 windows -> 31 whole batches of 128, 2 of them warm-up
            assert epoch["steps"] == 29 and epoch["items"] == 29 * 128  # timed steps
            assert epoch["us_per_sample"] == pytest.approx(
                epoch["train_s"] / epoch["items"] * 1e6)
            assert epoch["epoch_s"] >= epoch["train_s"]


def test_the_multi_device_paths_run_on_cpu_devices_and_torch_says_unsupported(backend_run):
    cells = cells_of(backend_run, dataset="synthetic", precision="fp32")
    for backend in set(cells) - {"torch"}:
        assert cells[backend]["status"] == "ok", cells[backend].get("log_tail")
        log = (backend_run / "logs" / f"{cells[backend]['cell_id']}.log").read_text()
        assert "data parallel over 2 device(s)" in log, log[-2000:]
    assert cells["torch"]["status"] == "unsupported"
    assert "one device" in cells["torch"]["error"]


@pytest.mark.skipif(not importlib.util.find_spec("jax"), reason="JAX is not installed")
def test_jax_without_a_gpu_on_gpu_hardware_is_unsupported_not_a_cpu_run():
    # a JAX without its CUDA plugin lists only CPU devices, as JAX does on this machine
    from orchestrator.worker.context import Unsupported
    from workloads.keras_lstm.workload import _distribution

    with pytest.raises(Unsupported, match="JAX sees no GPU here"):
        _distribution("jax", 1, on_gpu=True)
    _scope, devices = _distribution("jax", 1, on_gpu=False)
    assert [d.platform for d in devices] == ["cpu"]


def test_a_backend_the_stack_does_not_pin_is_incompatible_at_plan_time(tmp_path):
    (tmp_path / "m.yaml").write_text("""
name: pinned
hardware: [{name: cpu, kind: local}]
stacks: [{name: tf, framework: tensorflow, framework_version: "2.21.0"}]
workloads:
  - {name: keras_lstm, params: {backend: [tensorflow, jax]}}
  - {name: lstm_lm}
""")
    reasons = {c.params.get("backend", c.workload): incompatibility(c)
               for c in expand(load_spec(tmp_path / "m.yaml"))}
    assert reasons["tensorflow"] is None
    assert reasons["jax"] == "backend=jax needs a stack with jax; stack tf pins tensorflow"
    assert reasons["lstm_lm"] == "lstm_lm runs on torch; stack tf pins tensorflow"


def test_bf16_runs_as_mixed_bfloat16_on_every_backend_of_this_cpu(backend_run):
    # Keras's policy casts the LSTM's inputs and weights to bfloat16 itself, and every
    # backend has bfloat16 CPU kernels for what the layer does, so the CPU's own bf16
    # support (AVX512_BF16, AMX) changes the speed here, not whether the cell runs.
    cells = cells_of(backend_run, dataset="synthetic", precision="bf16")
    assert set(cells) == set(BACKENDS)
    records = journal(backend_run)
    for backend, cell in cells.items():
        assert cell["status"] == "ok", (backend, cell.get("log_tail"))
        provenance = provenance_of(records, cell)
        assert provenance["precision_switches"] == {"keras.dtype_policy": "mixed_bfloat16",
                                                    **FP32_SWITCHES[backend]}
        assert [r["epoch"] for r in records if r["record"] == "measurement"
                and r["cell_id"] == cell["cell_id"]] == [1, 2]


def worker_run(tmp_path, env=None, **given):
    """One tiny synthetic keras_lstm cell through the real worker, in a process of its own."""
    params = load_workload("keras_lstm").resolve({"preset": "tiny", "dataset": "synthetic",
                                                  **given})
    return cell_files.run_worker(tmp_path, cell_files.make_cell("keras_lstm", params, 1),
                                 env={**DATA_ENV, **(env or {})})


@pytest.mark.parametrize("precision", ["tf32", "fp16"])
def test_gpu_only_precisions_are_unsupported_on_the_cpu_with_the_reason(tmp_path, precision):
    done, records = worker_run(tmp_path, precision=precision)
    assert done.returncode == 1
    [error] = [r for r in records if r["record"] == "error"]
    assert error["kind"] == "unsupported"
    assert error["message"] == f"precision {precision} needs a GPU"
    assert not [r for r in records if r["record"] == "measurement"]


@pytest.mark.skipif("torch" not in BACKENDS, reason="the torch backend is not installed")
def test_bf16_on_the_torch_backend_needs_no_onednn_bf16_lstm(tmp_path):
    # Unlike torch's own nn.LSTM (tests/test_lstm_lm.py), Keras's LSTM on the torch backend
    # of a CPU is its own loop of matmuls: with oneDNN capped at AVX2 (no bf16 LSTM
    # primitive) it still runs in bf16.
    done, records = worker_run(tmp_path, env={"ONEDNN_MAX_CPU_ISA": "AVX2"}, backend="torch",
                               precision="bf16", samples=512, hidden=16)
    assert done.returncode == 0, done.stderr[-3000:]
    [provenance] = [r for r in records if r["record"] == "provenance"]
    assert provenance["precision_switches"]["keras.dtype_policy"] == "mixed_bfloat16"
    assert [r["record"] for r in records].count("measurement") == 1


REFUSAL = """
import os, sys
os.environ["KERAS_BACKEND"] = sys.argv[1]
import keras
from orchestrator.worker.context import Unsupported
from workloads.keras_lstm.workload import require_compute_dtype
keras.config.set_dtype_policy("mixed_bfloat16")
require_compute_dtype(keras, "bf16", 4, False, where="this CPU")  # computes in bf16: passes
keras.config.set_dtype_policy("float32")  # a layer left in float32 under a bf16 label
try:
    require_compute_dtype(keras, "bf16", 4, False, where="this CPU")
except Unsupported as exc:
    print(exc)
"""


def test_a_half_precision_label_whose_lstm_computes_in_float32_is_refused():
    done = subprocess.run([sys.executable, "-c", REFUSAL, BACKENDS[0]], cwd=PROJECT,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == (
        "precision bf16: Keras runs its LSTM in float32 on this CPU, so this cell would time "
        "float32, not bf16")
