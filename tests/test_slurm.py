"""Sweeps on `kind: slurm` hardware against a real one-node Slurm (tests/slurm_cluster.py):
job arrays, Slurm's outcomes as statuses, Ctrl-C, SIGKILL and adoption, a drained node,
cleanup, and the bad input refused before anything is submitted."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import PROJECT, cell_records, journal, run_cli, write
from tests.slurm_cluster import NODE_CPUS, NODE_MEMORY_MB, SlurmCluster

pytestmark = pytest.mark.slow


def start_sweep(path: Path, cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "orchestrator.cli", "run", str(path)],
                            cwd=cwd, env={**os.environ, "COLUMNS": "200"}, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def wait_for(predicate, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = predicate()
        if found:
            return found
        time.sleep(0.3)
    raise AssertionError(f"waited {timeout_s} s for {what}")


def tasks_of(slurm: SlurmCluster, run: str) -> dict[str, str]:
    """Task id -> state, for the queued and running tasks of the run's jobs."""
    done = subprocess.run(["squeue", "-h", "-r", "--name", f"matrix-bench-{run}", "-o",
                           "%i %T"], env={**os.environ, **slurm.env()}, capture_output=True,
                          text=True, check=True)
    return dict(line.split() for line in done.stdout.splitlines())


def arrays_submitted(output: str) -> list[tuple[str, int]]:
    return [(m.group(1), int(m.group(2)))
            for m in re.finditer(r"slurm: job array (\d+): (\d+) cell\(s\)", output)]


def running_task(slurm: SlurmCluster, comment: str, index: int) -> str | None:
    """The array id of task `index` of the job whose comment holds `comment`, once it runs."""
    for line in slurm.scontrol("show", "job", "-o").splitlines():
        if comment in line and f" ArrayTaskId={index} " in line and \
                " JobState=RUNNING " in line:
            return re.search(r"ArrayJobId=(\d+)", line).group(1)
    return None


def manifest_index(run_dir: Path, hardware: str, **params) -> int:
    (manifest,) = run_dir.glob(f"slurm/{hardware}-*/manifest.json")
    cells = json.loads(manifest.read_text())["cells"]
    return next(i for i, c in enumerate(cells)
                if all(c["params"][k] == v for k, v in params.items()))


def by_seconds(run_dir: Path) -> dict[float, dict]:
    return {c["param.seconds"]: c for c in cell_records(run_dir)}


def sleep_matrix(root: Path, name: str, seconds: list[float], **slurm: float) -> Path:
    """A matrix of sleep cells of these lengths on the debug partition, one CPU each."""
    settings = ", ".join(f"{k}: {v}" for k, v in {"poll_s": 0.5, **slurm}.items())
    return write(root / "m.yaml", f"""
        name: {name}
        hardware: [{{name: node, kind: slurm, partition: debug, cpus: 1}}]
        stacks: [{{name: env, executor: process}}]
        workloads: [{{name: sleep, params: {{seconds: {seconds}}}}}]
        slurm: {{{settings}}}
        """)


def test_a_sweep_runs_as_one_named_array_with_the_records_of_a_local_run(slurm, tmp_path):
    sweep = write(tmp_path / "slurm.yaml", """
        name: onslurm
        hardware:
          - {name: node, kind: slurm, partition: debug, cpus: 1, mem_gb: 0.5,
             time_limit: "00:05:00"}
        stacks: [{name: env, executor: process}]
        workloads: [{name: sleep, params: {seconds: [0.3, 0.6, 0.9]}}]
        slurm: {poll_s: 0.5, max_parallel: 2}
        """)
    done = run_cli("run", str(sweep), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    run_dir = tmp_path / "reports" / "onslurm"
    cells = cell_records(run_dir)
    assert [c["status"] for c in cells] == ["ok"] * 3
    assert {c["node_id"] for c in cells} == {f"slurm:{slurm.node}"}
    ((array, count),) = arrays_submitted(done.stdout)
    assert count == 3
    tasks = [line for line in slurm.scontrol("show", "job", "-o", array).splitlines()]
    assert len(tasks) == 3
    for task in tasks:  # named and commented so the run's jobs can be found again
        assert "JobName=matrix-bench-onslurm " in task
        assert f"Comment=matrix-bench run={run_dir.resolve()} submission=node-" in task
        assert "ArrayTaskThrottle=2" in task and "Partition=debug" in task
        assert "MinMemoryNode=512M" in task and "TimeLimit=00:05:00" in task
        assert "JobState=COMPLETED" in task
    # the same records as the same cells run here
    local = write(tmp_path / "local.yaml", sweep.read_text().replace(
        "name: onslurm", "name: here").replace(
        '{name: node, kind: slurm, partition: debug, cpus: 1, mem_gb: 0.5,\n'
        '     time_limit: "00:05:00"}', "{name: node, kind: local}"))
    assert run_cli("run", str(local), "--no-ray", cwd=tmp_path).returncode == 0
    here = journal(tmp_path / "reports" / "here")
    # but the wait in Slurm's queue and the entry's own settings, which a local one has none of
    slurm_only = {"queued_s", "hw.partition", "hw.cpus", "hw.mem_gb"}
    for kind in ("provenance", "measurement", "cell"):
        assert {frozenset(r) - slurm_only for r in journal(run_dir) if r["record"] == kind} \
            == {frozenset(r) for r in here if r["record"] == kind}, kind
    assert all(0 <= c["queued_s"] < 60 for c in cells)  # what a job there waits to start
    # the settings that make what the cell ran on, not time_limit (what a task may use)
    assert {(c["hw.partition"], c["hw.cpus"], c["hw.mem_gb"]) for c in cells} == {
        ("debug", 1, 0.5)} and not any("hw.time_limit" in c for c in cells)
    report = (run_dir / "report.md").read_text()
    assert re.search(r"\| node \| env \| 0\.9 \| 1 \(1x\) \|", report), report


@pytest.mark.parametrize("source", ["sacct", "controller"])
def test_slurm_outcomes_become_statuses_and_the_other_cells_complete(slurm, tmp_path, source):
    """Read from sacct (slurmdbd keeps the jobs) and from the controller and the tasks' own
    files (as where accounting is off): the same statuses."""
    path = write(tmp_path / "m.yaml", """
        name: outcomes
        hardware:
          - {name: short, kind: slurm, partition: debug, cpus: 1, time_limit: "1"}
          - {name: small, kind: slurm, partition: debug, cpus: 1, mem_gb: 0.25}
        stacks: [{name: env, executor: process}]
        workloads:
          - name: sleep
            params: {seconds: 0.5}
            memory_limit_mb: 3000  # far above Slurm's 256 MB: Slurm kills first
        exclude: [{hardware: [short, small]}]
        include:
          - {hardware: short, workload: sleep, params: {seconds: 300}}
          - {hardware: small, workload: sleep, params: {seconds: 2, fault: oom}}
          - {hardware: small, workload: sleep, params: {seconds: 120}}
          - {hardware: small, workload: sleep, params: {seconds: 1}}
        slurm: {poll_s: 0.5, outcomes: SOURCE}
        """.replace("SOURCE", source))
    sweep = start_sweep(path, tmp_path)
    run_dir = tmp_path / "reports" / "outcomes"
    try:
        wait_for(lambda: list(run_dir.glob("slurm/small-*/manifest.json")), 60, "a submission")
        index = manifest_index(run_dir, "small", seconds=120)
        array = wait_for(lambda: running_task(slurm, "submission=small-", index), 60,
                         "the 120 s cell to run")
        time.sleep(1.0)
        subprocess.run(["scancel", f"{array}_{index}"], check=True)  # someone else's cancel
        output, _ = sweep.communicate(timeout=240)
    finally:
        sweep.kill()
    assert sweep.returncode == 0, output
    cells = by_seconds(run_dir)
    assert cells[1]["status"] == "ok"
    assert cells[300]["status"] == "timeout" and "time limit" in cells[300]["error"]
    assert cells[300]["wall_s"] >= 60  # Slurm's elapsed time, not 0
    assert cells[2]["status"] == "oom", cells[2]
    assert "Exceeded job memory limit" in cells[2]["log_tail"]  # Slurm's kill, not MemoryError
    assert cells[120]["status"] == "crashed", cells[120]
    assert "cancelled outside this sweep" in cells[120]["error"]
    if source == "sacct":  # who cancelled it, as only accounting keeps it
        assert "ended CANCELLED by 0" in cells[120]["error"], cells[120]["error"]
    assert tasks_of(slurm, "outcomes") == {}


def test_ctrl_c_cancels_every_job_of_the_run_and_journals_none(slurm, tmp_path):
    path = sleep_matrix(tmp_path, "interrupted", [100, 101, 102, 103, 104, 105], max_parallel=3)
    sweep = start_sweep(path, tmp_path)
    try:
        wait_for(lambda: list(tasks_of(slurm, "interrupted").values()).count("RUNNING") == 3,
                 60, "three running tasks")
        sweep.send_signal(signal.SIGINT)
        output, _ = sweep.communicate(timeout=60)
    finally:
        sweep.kill()
    assert "cancelled 6 task(s) of this run" in output, output
    # A cancelled task may show COMPLETING for a moment while slurmd reaps its processes
    # (seen on a loaded 2-core CI machine): it must leave the queue, not be there at once.
    wait_for(lambda: tasks_of(slurm, "interrupted") == {}, 60, "the cancelled tasks to go")
    run_dir = tmp_path / "reports" / "interrupted"
    assert not (run_dir / "results.jsonl").exists() or cell_records(run_dir) == []


def test_a_rerun_after_sigkill_adopts_live_tasks_and_submits_only_the_rest(slurm, tmp_path):
    path = sleep_matrix(tmp_path, "adopted", [1, 1.5, 14, 15], max_parallel=2)
    run_dir = tmp_path / "reports" / "adopted"
    sweep = start_sweep(path, tmp_path)
    try:
        wait_for(lambda: tasks_of(slurm, "adopted"), 60, "the array")
        sweep.kill()  # SIGKILL: no driver follows the tasks any more
        sweep.wait(30)
    finally:
        sweep.kill()
    # the short cells end unjournalled, the long ones run; one long one is lost for good
    wait_for(lambda: list(tasks_of(slurm, "adopted").values()) == ["RUNNING", "RUNNING"],
             60, "the two long cells to run")
    assert not (run_dir / "results.jsonl").exists() or cell_records(run_dir) == []
    lost = manifest_index(run_dir, "node", seconds=15)
    (array,) = {task.split("_")[0] for task in tasks_of(slurm, "adopted")}
    subprocess.run(["scancel", f"{array}_{lost}"], check=True)
    done = run_cli("run", str(path), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 task(s) of this run still queued or running are followed again, and 2 " \
           "finished while no driver followed them" in done.stdout, done.stdout
    assert [count for _, count in arrays_submitted(done.stdout)] == [1]  # the lost one only
    cells = cell_records(run_dir)
    assert sorted(c["param.seconds"] for c in cells) == [1, 1.5, 14, 15]  # each once
    assert {c["status"] for c in cells} == {"ok"}


def test_a_lost_node_ends_its_task_node_lost_and_the_cell_runs_once_more(slurm, tmp_path):
    path = sleep_matrix(tmp_path, "lost", [30])
    sweep = start_sweep(path, tmp_path)
    try:
        wait_for(lambda: list(tasks_of(slurm, "lost").values()) == ["RUNNING"], 60,
                 "the task to run")
        (first,) = tasks_of(slurm, "lost")
        slurm.scontrol("update", f"nodename={slurm.node}", "state=down", "reason=matrix-test")
        wait_for(lambda: set(tasks_of(slurm, "lost")) - {first}, 60, "the cell again")
        slurm.resume()
        output, _ = sweep.communicate(timeout=120)
    finally:
        sweep.kill()
    assert sweep.returncode == 0, output
    assert f"slurm: Slurm task {first} ended NODE_FAIL" in output, output
    (cell,) = cell_records(tmp_path / "reports" / "lost")
    assert (cell["status"], cell["attempts"]) == ("ok", 2)


def test_a_priced_entry_stops_what_the_budget_cannot_afford(slurm, tmp_path):
    """$3600/h and the sleep workload's 600 s timeout: each cell may cost $600, so with
    budget_usd 1000 the plan is refused, and past the refusal the running cell leaves no
    room for the next: the two waiting behind it end budget_stopped. (Cells of 10 s: sacct
    learns of a start from slurmdbd a moment late, and must see the first one run.)"""
    path = write(tmp_path / "m.yaml", """
        name: priced
        hardware: [{name: node, kind: slurm, partition: debug, cpus: 1, price_per_hour: 3600}]
        stacks: [{name: env, executor: process}]
        workloads: [{name: sleep, params: {seconds: [10, 10.1, 10.2]}}]
        budget_usd: 1000
        slurm: {poll_s: 0.5, max_parallel: 1}
        """)
    refused = run_cli("run", str(path), cwd=tmp_path)
    assert refused.returncode == 2 and "over budget_usd 1000" in refused.stderr
    assert tasks_of(slurm, "priced") == {}
    done = run_cli("run", str(path), "--allow-over-budget", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    cells = by_seconds(tmp_path / "reports" / "priced")
    assert sorted(c["status"] for c in cells.values()) == ["budget_stopped"] * 2 + ["ok"]
    assert all("budget_usd 1000 reached" in c["error"] for c in cells.values()
               if c["status"] == "budget_stopped")


def test_a_drained_node_makes_cells_wait_until_their_queue_timeout(slurm, tmp_path):
    slurm.scontrol("update", f"nodename={slurm.node}", "state=drain", "reason=matrix-test")
    path = sleep_matrix(tmp_path, "drained", [1, 2], queue_timeout_s=4)
    start = time.monotonic()
    done = run_cli("run", str(path), cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert time.monotonic() - start < 60
    cells = cell_records(tmp_path / "reports" / "drained")
    assert [c["status"] for c in cells] == ["queue_timeout"] * 2
    assert all("in Slurm's queue" in c["error"] and "queue_timeout_s 4" in c["error"]
               for c in cells)
    assert tasks_of(slurm, "drained") == {}
    # the wait is said, with Slurm's reason, not 9.5 minutes of silence (said again where
    # Slurm's reason changes while they wait, as a drained node's may on a loaded machine)
    said = [line for line in done.stdout.splitlines() if "pending, reason" in line]
    assert said and re.search(r"slurm: job array \d+: 2 task\(s\) pending, reason \w+.*; "
                              r"waited \d+ s of slurm.queue_timeout_s 4$", said[0]), said


def test_without_mem_gb_a_task_asks_its_cpus_share_and_no_ray_still_submits_it(slurm,
                                                                                tmp_path):
    """Without mem_gb a job asked nothing and Slurm gave it the whole node's memory (where
    no DefMemPerCPU is set), so it waited while any other job held any; and `--no-ray`
    skipped every Slurm cell, ran nothing and exited 0."""
    path = sleep_matrix(tmp_path, "share", [0.3])
    done = run_cli("run", str(path), "--no-ray", cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    (cell,) = cell_records(tmp_path / "reports" / "share")
    assert cell["status"] == "ok" and cell["node_id"] == f"slurm:{slurm.node}", cell
    ((array, _),) = arrays_submitted(done.stdout)
    share_mb = NODE_MEMORY_MB // NODE_CPUS  # cpus: 1 of the node's
    assert f"{share_mb / 1024:.3g} GB each" in done.stdout
    (task,) = slurm.scontrol("show", "job", "-o", array).splitlines()
    assert f"MinMemoryNode={share_mb // 1024}G " in task, task


def test_cleanup_cancels_the_jobs_of_a_run_no_sweep_owns(slurm, tmp_path):
    path = sleep_matrix(tmp_path, "leftover", [100, 101])
    sweep = start_sweep(path, tmp_path)
    try:
        wait_for(lambda: tasks_of(slurm, "leftover"), 60, "the array")
        sweep.kill()
        sweep.wait(30)
    finally:
        sweep.kill()
    (array,) = {task.split("_")[0] for task in tasks_of(slurm, "leftover")}
    listed = run_cli("cleanup", "--dry-run", "--provider", "slurm", "--reports", "reports",
                     cwd=tmp_path)
    assert f"would cancel Slurm job {array} of run leftover (2 task(s)" in listed.stdout
    assert len(tasks_of(slurm, "leftover")) == 2
    done = run_cli("cleanup", "--provider", "slurm", "--reports", "reports", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"cancel Slurm job {array} of run leftover" in done.stdout
    wait_for(lambda: tasks_of(slurm, "leftover") == {}, 30, "the jobs to go")
    # a run a live sweep owns keeps its jobs; a provider that cannot be asked says so
    unreachable = run_cli("cleanup", "--provider", "slurm", cwd=tmp_path,
                          env={"SLURM_CONF": str(tmp_path / "no-such.conf")})
    assert unreachable.returncode == 1
    assert unreachable.stderr.startswith("slurm: not checked: squeue")


@pytest.mark.docker
def test_an_image_stack_runs_in_its_container_on_the_node(slurm, image_env, tmp_path):
    path = write(tmp_path / "m.yaml", f"""
        name: imaged
        hardware: [{{name: node, kind: slurm, partition: debug, cpus: 1}}]
        stacks: [{image_env.stack("torch-cpu")}]
        workloads: [{{name: sleep, params: {{seconds: 0.5}}}}]
        slurm: {{poll_s: 0.5}}
        {image_env.images_section()}""")
    done = run_cli("run", str(path), cwd=tmp_path, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    run_dir = tmp_path / "reports" / "imaged"
    (cell,) = cell_records(run_dir)
    assert cell["status"] == "ok", cell
    (provenance,) = [r for r in journal(run_dir) if r["record"] == "provenance"]
    assert provenance["image_tag"].startswith("matrix-bench:")
    assert cell["node_id"] == f"slurm:{slurm.node}"


@pytest.mark.parametrize(("hardware", "problem"), [
    ("{name: n, kind: slurm, partition: gpu, gpus: 1}",
     "hardware n: gpus: 1, but partition gpu offers no GPU (sinfo)"),
    ("{name: n, kind: slurm, partition: nowhere}", "Slurm has no partition 'nowhere' (sinfo)"),
    # once PENDING until queue_timeout_s (6 hours by default): issue 42
    ("{name: n, kind: slurm, partition: gpu, cpus: 512}",
     "hardware n: cpus: 512, but partition gpu offers at most"),
    ("{name: n, kind: slurm, partition: gpu, mem_gb: 100000}",
     "hardware n: mem_gb: 100000, but partition gpu offers at most"),
    ("{name: n, kind: slurm, partition: remote}", "cannot read it: put the run on a filesystem"),
])
def test_what_slurm_says_no_to_is_refused_before_anything_is_submitted(slurm, tmp_path,
                                                                       hardware, problem):
    path = write(tmp_path / "m.yaml", f"""
        name: refused
        hardware: [{hardware}]
        stacks: [{{name: env, executor: process}}]
        workloads: [{{name: sleep, params: {{seconds: 1}}}}]
        """)
    done = run_cli("run", str(path), cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert problem in line, line
    assert tasks_of(slurm, "refused") == {}
    assert not list((tmp_path / "reports").glob("*/slurm/*"))


def test_slurm_docs_name_what_the_code_does():
    text = (PROJECT / "docs" / "slurm.md").read_text()
    for needed in ("queue_timeout_s", "max_parallel", "squeue", "sacct", "scancel",
                   "matrix cleanup", "Apptainer", "Pyxis", "shared filesystem"):
        assert needed in text, needed


def test_a_noisy_configuration_gets_its_adaptive_repeats_in_the_same_sweep(slurm, tmp_path):
    """`repeats: {until_cv}` on Slurm: a configuration whose sleeps jitter (each 1 to 4
    times as long, at random) stays above the target, so after the first array each wave
    of repeats is one more job array of this sweep, up to `max`. Before, its repeats
    waited for the next `matrix run`. (Three repeats of the jittery one fall within 5% of
    each other about once in a thousand sweeps; the quiet one's sleeps overshoot by far
    less than 5%, but a loaded machine may give it its fourth too.)"""
    path = write(tmp_path / "m.yaml", """
        name: noisy
        hardware: [{name: node, kind: slurm, partition: debug, cpus: 1}]
        stacks: [{name: env, executor: process}]
        workloads: [{name: sleep, params: {seconds: 0.4, steps: 2, jitter: [0.0, 3.0]}}]
        repeats: {min: 3, max: 4, until_cv: 0.05}
        slurm: {poll_s: 0.5}
        """)
    done = run_cli("run", str(path), "--db", "none", cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    repeats: dict[float, list[int]] = {}
    for cell in cell_records(tmp_path / "reports" / "noisy"):
        assert cell["status"] == "ok", cell
        repeats.setdefault(cell["param.jitter"], []).append(cell["repeat"])
    assert sorted(repeats[3.0]) == [1, 2, 3, 4], repeats
    assert sorted(repeats[0.0]) in ([1, 2, 3], [1, 2, 3, 4]), repeats
    arrays = [cells for _, cells in arrays_submitted(done.stdout)]
    assert arrays[0] == 6 and len(arrays) == 2, done.stdout  # the first wave, then one more
    assert sum(arrays) == len(repeats[0.0]) + len(repeats[3.0])
    assert "above until_cv 5.0%: one more repeat each" in done.stdout
