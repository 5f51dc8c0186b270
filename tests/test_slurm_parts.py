"""The Slurm provider's pieces that need no cluster: time limits, array indices, scontrol's
one-line form, the status rules, job comments, entry checks and the plan's lines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.providers.slurm.commands import _fields, _gres_gpus
from orchestrator.providers.slurm.jobs import _ranges, comment, parse_comment, time_limit_s
from orchestrator.providers.slurm.outcomes import TaskState, _indices, ended_status, merged
from orchestrator.results.records import Status
from orchestrator.validate.output import filesystem_type
from tests.conftest import run_cli, write


@pytest.mark.parametrize(("text", "seconds"), [
    ("90", 5400), ("5:30", 330), ("02:00:00", 7200), ("1-12", 129600),
    ("1-00:30", 88200), ("2-01:02:03", 176523), ("bad", None), ("2h", None), ("1:2:3:4", None),
])
def test_slurm_time_limits_in_every_form_slurm_takes(text, seconds):
    assert time_limit_s(text) == seconds


def test_array_indices_read_and_written_as_slurm_lists_them():
    assert _indices("4") == [4]
    assert _indices("5-9%2") == [5, 6, 7, 8, 9]
    assert _indices("[3,5-7]") == [3, 5, 6, 7]
    assert _indices("") == []
    assert _ranges([0, 1, 2, 5, 7, 8]) == "0-2,5,7-8"


def state(name: str, detail: str = "") -> TaskState:
    return TaskState(-1, name, detail)


@pytest.mark.parametrize("order", ["own line first", "range first"])
def test_a_started_tasks_own_line_wins_over_a_stale_range_cancelled_around_it(order):
    """Seen in CI: task 0 of `%1` array 25 ran; the sweep cancelled 1 and 2, which the
    budget could not afford; sacct still listed the pending range with 0 in it, now
    CANCELLED, and the running cell was journalled as cancelled outside the sweep."""
    lines = [("0", state("RUNNING")), ("[0-2%1]", state("CANCELLED", "by 0"))]
    found = merged(lines if order == "own line first" else lines[::-1])
    assert {i: s.state for i, s in found.items()} == {
        0: "RUNNING", 1: "CANCELLED", 2: "CANCELLED"}
    assert [s.index for s in found.values()] == list(found)


def test_between_lines_of_one_kind_the_state_past_pending_wins():
    ranges = merged([("[0-3]", state("PENDING")), ("[2-3]", state("CANCELLED", "by 0")),
                     ("[3]", state("PENDING"))])
    assert {i: s.state for i, s in ranges.items()} == {
        0: "PENDING", 1: "PENDING", 2: "CANCELLED", 3: "CANCELLED"}
    own = merged([("4", state("COMPLETED")), ("4", state("PENDING"))])
    assert own[4].state == "COMPLETED"
    # a whole pending array cancelled by someone else: its range alone ends its tasks
    assert {s.state for s in merged([("[0-1]", state("CANCELLED", "by 1000"))]).values()} \
        == {"CANCELLED"}


def test_scontrol_fields_keep_values_with_spaces():
    line = ("JobId=3 ArrayJobId=1 ArrayTaskId=1 JobState=FAILED Reason=JobLaunchFailure "
            "Command=/tmp/x/t.py arg1 arg two WorkDir=/tmp/x Comment=matrix-bench run=/r "
            "submission=n-1  StdErr=/tmp/x/1_1.log")
    fields = _fields(line)
    assert fields["Command"] == "/tmp/x/t.py arg1 arg two"
    assert fields["Comment"] == "matrix-bench run=/r submission=n-1"
    assert fields["JobState"] == "FAILED" and fields["StdErr"] == "/tmp/x/1_1.log"


def test_gpus_counted_from_a_nodes_gres():
    assert _gres_gpus("gpu:a100:4(S:0-1),shard:8") == 4
    assert _gres_gpus("gpu:2") == 2
    assert _gres_gpus("(null)") == 0


def test_a_comment_names_the_run_and_its_submission(tmp_path):
    assert parse_comment(comment(tmp_path, "node-1a2b3c4d")) == (str(tmp_path.resolve()),
                                                                  "node-1a2b3c4d")
    assert parse_comment("someone else's job") is None


@pytest.mark.parametrize(("state", "log", "status", "words"), [
    (TaskState(0, "TIMEOUT"), "", Status.TIMEOUT, "time limit"),
    (TaskState(0, "CANCELLED"), "*** JOB 4 CANCELLED DUE TO TIME LIMIT ***", Status.TIMEOUT,
     "time limit"),
    (TaskState(0, "OUT_OF_MEMORY"), "", Status.OOM, "memory request"),
    (TaskState(0, "FAILED", exit_code="0:9"), "error: Exceeded job memory limit",
     Status.OOM, "memory request"),
    (TaskState(0, "NODE_FAIL", node="n7"), "", Status.NODE_LOST, "node was lost on n7"),
    (TaskState(0, "PREEMPTED"), "", Status.NODE_LOST, "node was lost"),
    (TaskState(0, "CANCELLED", detail="by 1001", exit_code="0:15"), "", Status.CRASHED,
     "CANCELLED by 1001 (exit code 0:15): cancelled outside this sweep"),
    (TaskState(0, "FAILED", exit_code="1:0"), "", Status.CRASHED, "without the worker's"),
])
def test_slurms_word_becomes_a_status_with_its_reason(state, log, status, words):
    found, message = ended_status(state, "12_0", log)
    assert found is status and words in message and message.startswith("Slurm task 12_0")


def test_the_filesystem_of_a_path_is_read_from_the_mount_table(tmp_path):
    assert filesystem_type(Path("/proc/self")) == "proc"
    assert filesystem_type(tmp_path / "not" / "yet") == filesystem_type(tmp_path) != ""


@pytest.mark.parametrize(("entry", "where", "problem"), [
    ("{name: n, kind: slurm}", "hardware[0]", "kind slurm needs a partition"),
    ("{name: n, kind: slurm, partition: p, time_limit: 2h}", "hardware[0]",
     "time_limit '2h' is not a Slurm time limit"),
    # Slurm reads both as no limit (sbatch --time=0 too): planned as 0.00 node-hours before,
    # and UNLIMITED was refused as a form "Slurm cannot read"
    ("{name: n, kind: slurm, partition: p, time_limit: '0'}", "hardware[0]",
     "time_limit '0' means no limit to Slurm, and matrix-bench plans no unbounded cost"),
    ("{name: n, kind: slurm, partition: p, time_limit: UNLIMITED}", "hardware[0]",
     "time_limit 'UNLIMITED' means no limit to Slurm"),
    ("{name: n, kind: local, partition: p}", "hardware[0].partition",
     "partition applies to kind slurm only"),
    ("{name: n, kind: ec2, instance_type: p3.2xlarge, mem_gb: 4}", "hardware[0].mem_gb",
     "mem_gb applies to kind slurm only"),
    ("{name: n, kind: slurm, partition: p, mem_gb: 0}", "hardware[0].mem_gb",
     "greater than 0"),
])
def test_a_bad_slurm_entry_is_one_located_line_at_validate(tmp_path, entry, where, problem):
    path = write(tmp_path / "m.yaml", f"""
        name: bad
        hardware:
          - {entry}
        stacks: [{{name: env, executor: process}}]
        workloads: [{{name: sleep}}]
        """)
    done = run_cli("validate", str(path), cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"error: {path}:3: {where}: ") and problem in line, line


def test_the_plan_says_partition_node_hours_and_cost_per_slurm_entry(tmp_path):
    path = write(tmp_path / "m.yaml", """
        name: planned
        hardware:
          - {name: a100, kind: slurm, partition: gpu, gpus: 1, mem_gb: 64,
             time_limit: "02:00:00", price_per_hour: 2.5}
          - {name: cpu, kind: slurm, partition: debug}
        stacks: [{name: env, executor: process}]
        workloads: [{name: sleep, params: {seconds: [1, 2, 3]}}]
        """)
    done = run_cli("plan", str(path), cwd=tmp_path, env={"COLUMNS": "80"})
    assert done.returncode == 0, done.stderr
    assert max(len(line) for line in done.stdout.splitlines()
               if not line.startswith("run directory: ")) <= 80  # a path is never cut
    words = " ".join(done.stdout.split()).replace("node- hours", "node-hours")  # wrapped at 80
    assert ("slurm a100: partition gpu, 3 task(s) of 1 GPU(s), 1 CPU(s), 64 GB, 6.00 node-hours "
            "requested (3 x 2:00:00), up to $15.00 at $2.5/h") in words
    assert "slurm cpu: partition debug, 3 task(s) of 1 CPU(s), its CPUs' share of a node's " \
           "memory (mem_gb unset), each up to the partition's time limit" in words
    # a Slurm cell is a Slurm job, which needs no Ray: `--no-ray` plans it the same way,
    # once skipped as "no node offers hw:cpu" while `matrix run --no-ray` ran nothing
    no_ray = run_cli("plan", str(path), "--no-ray", "--format", "json", cwd=tmp_path)
    assert no_ray.returncode == 0, no_ray.stderr
    assert {(c["hardware"], c["action"]) for c in json.loads(no_ray.stdout)} == {
        ("a100", "run"), ("cpu", "run")}
    assert "price: a100 $2.5/h (declared in the matrix" in done.stdout
