"""`matrix advise` on a workload whose right answer is known (issue 54): simulated training
with a known speed per machine and a known serial fraction, on two machines at workers 1
and 2, run for real. Every surface must name the measured fastest configuration, no twin of
another machine may be judged implausible, and a projection never silently beats a
measurement.

The workload sleeps 10 items' worth per step at rate(machine, w) = speed(machine) x w /
(1 + s (w - 1)), s = 0.2: the laptop at 400 items/s and the workstation at 640 on one
worker; at two, 667 and 1,067. So the fastest is the workstation at 2 workers, and the
cheapest per item the laptop at 2 ($0.10/h over 667/s against $0.50/h over 1,067/s).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.cli.runs import local_run
from orchestrator.report.advise import PER_MILLION, Job, advise
from orchestrator.report.frame import run_frame
from tests.conftest import run_cli, write

pytestmark = pytest.mark.slow

DEFAULTS = """
version: "1"
description: "Simulated training: a known speed per machine and a known serial fraction."
item_unit: sample
epochs: 1
params:
  workers: {type: int, default: 1, min: 1, sets_devices: true}
  serial: {type: float, default: 0.2, min: 0.0, max: 1.0}
  steps: {type: int, default: 8, min: 1}
"""
WORKLOAD = """
import time

SPEED = {"laptop": 400.0, "workstation": 640.0}  # samples/s on one worker


def run(ctx):
    w, s = ctx.params["workers"], ctx.params["serial"]
    rate = SPEED[ctx.cell.hardware.name] * w / (1 + s * (w - 1))
    ctx.uses_devices(w)
    for epoch in ctx.epoch_range():
        meter = ctx.start_epoch(warmup_steps=0)
        for _ in range(ctx.params["steps"]):
            with meter.step(items=10):
                time.sleep(10 / rate)
        ctx.end_epoch(epoch, meter)
"""
FASTEST, CHEAPEST = "workstation workers=2", "laptop workers=2"


@pytest.fixture(scope="module")
def known(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("known")
    folder = root / "simulated"
    folder.mkdir()
    write(folder / "defaults.yaml", DEFAULTS)
    write(folder / "workload.py", WORKLOAD)
    write(root / "m.yaml", """
        name: known
        hardware:
          - {name: laptop, kind: local, price_per_hour: 0.10}
          - {name: workstation, kind: local, price_per_hour: 0.50}
        stacks: [{name: here, executor: process}]
        workloads:
          - {name: simulated, path: ./simulated, params: {workers: [1, 2]}}
        repeats: 3
        job: {items: 1.0e6, budget: 100}
        """)
    done = run_cli("run", "m.yaml", "--no-ray", "--db", f"sqlite:///{root / 'store.db'}", cwd=root)
    assert done.returncode == 0, done.stdout + done.stderr
    return root


def test_the_known_fastest_and_cheapest_are_picked_and_no_twin_is_implausible(known):
    rows = run_frame(local_run(str(known / "reports" / "known"), None))
    assert not rows["flags"].fillna("").str.contains("implausible").any(), \
        rows["judgement"].dropna().tolist()
    # the workstation's speed-up over the laptop is no scaling: each machine is its own
    # (a loaded machine wakes the sleeps late, so the figures are at most what was told)
    workers2 = rows[rows["param.workers"] == 2].groupby("hardware")[
        "parallel_efficiency_fraction"].median()
    assert set(workers2.index) == {"laptop", "workstation"}
    assert all(0.6 < efficiency < 0.95 for efficiency in workers2)  # told: 2 / 1.2 / 2
    found = advise(rows, PER_MILLION)
    assert found.fastest.label == FASTEST and found.cheapest.label == CHEAPEST
    rates = {p.label: p.items_per_s for p in found.projections}
    assert 0.6 * 640 * 2 / 1.2 < rates[FASTEST] < 1.02 * 640 * 2 / 1.2
    assert 0.6 * 400 * 2 / 1.2 < rates[CHEAPEST] < 1.02 * 400 * 2 / 1.2


def test_every_surface_names_the_same_pick(known):
    run = str(known / "reports" / "known")
    picks = {}
    for name, args in (("run", [run]), ("store", ["--db", f"sqlite:///{known / 'store.db'}"])):
        done = run_cli("advise", *args, "--items", "1e6", "--format", "json", cwd=known)
        assert done.returncode == 0, done.stderr
        answer = json.loads(done.stdout)
        picks[name] = (answer["picks"]["fastest"]["configuration"],
                       answer["picks"]["cheapest"]["configuration"])
    assert picks == {"run": (FASTEST, CHEAPEST), "store": (FASTEST, CHEAPEST)}
    report = (known / "reports" / "known" / "report.md").read_text()
    choices = report.split("## Best choices")[1].split("\n## ")[0]
    assert f"| simulated | fastest | {FASTEST} |" in choices
    assert f"| simulated | cheapest per million samples | {CHEAPEST} |" in choices
    job = report.split("## Your job")[1].split("\n## ")[0]
    assert f"fastest within the budget: {FASTEST}," in job


def test_a_projection_stays_on_the_machines_cores_and_never_wins_unsaid(known):
    rows = run_frame(local_run(str(known / "reports" / "known"), None))
    cores = int(rows["cpu_count"].max())
    # a deadline that two workers miss on either machine: 1e6 samples at 1,067/s is 937 s
    found = advise(rows, Job(items=1e6, deadline_s=600))
    for p in found.projections:
        if p.projected:
            devices = int(p.label.split(" at ")[1].split()[0])
            assert 2 < devices <= min(cores, 4)  # the machine's cores, twice the largest
            assert p.usd_per_hour in (0.10, 0.50)  # the whole machine, not a share per worker
    if found.fastest is not None and found.fastest.projected:
        assert any(note.startswith("projected, not measured: the fastest measured is "
                                   f"{FASTEST}") for note in found.notes["fastest"])
    if cores <= 2:  # this machine has no third core to project onto
        assert not any(p.projected for p in found.projections)


def test_the_dashboard_names_the_same_pick_and_draws_a_line_per_machine(known, browser):
    store = f"sqlite:///{known / 'store.db'}"
    best = run_cli("history", "best", "--db", store, "--format", "json", cwd=known)
    assert best.returncode == 0, best.stderr
    named = {(r["best"], r["configuration"]) for r in json.loads(best.stdout)}
    assert {("fastest", FASTEST), ("cheapest", CHEAPEST)} <= named
    done = run_cli("dashboard", "-o", str(known / "site"), "--db", store, cwd=known)
    assert done.returncode == 0, done.stdout + done.stderr
    browser.open(known / "site" / "workload-simulated.html")
    choices = browser.js("return [...document.querySelectorAll('#choices-simulated tbody tr')]"
                         ".map(tr => [...tr.cells].map(td => td.textContent));")
    assert [(row[1], row[2]) for row in choices] == [("fastest", FASTEST),
                                                     ("cheapest", CHEAPEST)]
    lines = dict(browser.js("return window.matrixCharts['scaling-simulated'].data.datasets"
                            ".map(d => [d.label, d.data.map(p => p.x)]);"))
    assert lines["laptop/here (CPU)"] == [1, 2] and lines["workstation/here (CPU)"] == [1, 2]
