"""keras_lstm (seed 002): the seed's data preparation, every installed backend through the
real worker, the multi-device paths on CPU, and the backend the stack must provide."""

from __future__ import annotations

import importlib.util
import json

import pytest

from orchestrator.matrix import expand, incompatibility
from orchestrator.spec import load_spec
from tests.conftest import SHARED_DATA, cell_records, journal, run_cli

BACKENDS = [b for b in ("tensorflow", "torch", "jax") if importlib.util.find_spec(b)]
DATA_ENV = {"MATRIX_BENCH_DATA": str(SHARED_DATA)}


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
    from orchestrator.context import Context, RecordWriter
    from tests.cells import make_cell
    from workloads.keras_lstm.workload import wikitext_text

    monkeypatch.setenv("MATRIX_BENCH_DATA", str(SHARED_DATA))
    ctx = Context(make_cell("keras_lstm", {}, 1), RecordWriter(str(tmp_path / "out")))
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
""")
    done = run_cli("run", "m.yaml", "--no-ray", cwd=root, env=DATA_ENV)
    assert done.returncode == 0, done.stderr
    return root / "reports" / "keras"


def cells_of(run_dir, **params):
    return {c["param.backend"]: c for c in cell_records(run_dir)
            if all(c[f"param.{k}"] == v for k, v in params.items())}


def test_every_installed_backend_trains_and_records_its_epochs(backend_run):
    assert {"tensorflow", "torch"} <= set(BACKENDS)  # CI installs them (tf, jax extras)
    cells = cells_of(backend_run, dataset="nietzsche")
    assert set(cells) == set(BACKENDS)
    records = journal(backend_run)
    for backend, cell in cells.items():
        assert cell["status"] == "ok", (backend, cell.get("log_tail"))
        provenance = next(r for r in records if r["record"] == "provenance"
                          and r["cell_id"] == cell["cell_id"])
        assert provenance["framework"] == backend
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
    cells = cells_of(backend_run, dataset="synthetic")
    for backend in set(cells) - {"torch"}:
        assert cells[backend]["status"] == "ok", cells[backend].get("log_tail")
        log = (backend_run / "logs" / f"{cells[backend]['cell_id']}.log").read_text()
        assert "data parallel over 2 device(s)" in log, log[-2000:]
    assert cells["torch"]["status"] == "unsupported"
    assert "one device" in cells["torch"]["error"]


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
