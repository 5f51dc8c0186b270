"""`profile: true`: the last epoch of a torch cell under torch.profiler, a Chrome trace in
the run directory; a profiled cell is a configuration of its own; where there is nothing to
profile the log says so; a command's script is refused in one line."""

from __future__ import annotations

import json

import pytest

from orchestrator.plan.cells import expand
from orchestrator.validate import load_spec
from tests.conftest import cell_records, run_cli

MATRIX = """
name: profiled
hardware: [{name: cpu, kind: local}]
stacks: [{name: here, executor: process}]
workloads:
  - name: lstm_lm
    preset: tiny
    dataset: synthetic
    params: {synthetic_tokens: 20000, eval_tokens: 0}
    epochs: 2
    profile: true
  - name: sleep
    params: {seconds: 0.1}
    profile: true
"""


def test_a_profiled_cell_is_a_configuration_of_its_own(tmp_path):
    profiled = tmp_path / "p.yaml"
    profiled.write_text(MATRIX)
    plain = tmp_path / "q.yaml"
    plain.write_text(MATRIX.replace("    profile: true\n", ""))
    ids = {c.workload: c.config_id for c in expand(load_spec(profiled))}
    plain_ids = {c.workload: c.config_id for c in expand(load_spec(plain))}
    assert ids.keys() == plain_ids.keys() and not set(ids.values()) & set(plain_ids.values())
    assert all(c.profile for c in expand(load_spec(profiled)))


@pytest.mark.slow
def test_the_last_epoch_is_profiled_into_a_chrome_trace(tmp_path):
    (tmp_path / "m.yaml").write_text(MATRIX)
    done = run_cli("run", "m.yaml", "--no-ray", "--db", "none", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    run_dir = tmp_path / "reports" / "profiled"
    cells = {c["workload"]: c for c in cell_records(run_dir)}
    assert {c["status"] for c in cells.values()} == {"ok"}
    lstm = cells["lstm_lm"]["cell_id"]
    trace = json.loads((run_dir / "cells" / f"{lstm}.trace.json").read_text())
    names = {event.get("name", "") for event in trace["traceEvents"]}
    assert any("lstm" in name.lower() for name in names), sorted(names)[:50]
    log = (run_dir / "logs" / f"{lstm}.log").read_text()
    assert "epoch 2 profiled: Chrome trace" in log and "epoch 1 profiled" not in log
    sleep = cells["sleep"]["cell_id"]
    assert not (run_dir / "cells" / f"{sleep}.trace.json").exists()
    assert "profiles torch, which this cell does not use" in \
        (run_dir / "logs" / f"{sleep}.log").read_text()


def test_a_command_workload_cannot_be_profiled_by_the_worker(tmp_path):
    (tmp_path / "train.py").write_text("print('hi')\n")
    (tmp_path / "m.yaml").write_text("""
name: cmd
hardware: [{name: cpu, kind: local}]
stacks: [{name: here, executor: process}]
workloads:
  - name: mine
    command: [python, train.py]
    profile: true
""")
    done = run_cli("validate", "m.yaml", cwd=tmp_path)
    assert done.returncode == 2 and "profile" in done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
