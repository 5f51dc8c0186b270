"""A cell's ranks compute on the threads the user set, else on an equal share of the CPUs the
process may use (worker/threads.py): its affinity mask (taskset), its cgroup's CPU quota and
its Slurm task's `--cpus-per-task`, never `os.cpu_count()` of the whole machine; and the
provenance records both what it could use and what it used (issue 55, part 1)."""

from __future__ import annotations

import os
import subprocess
import sys

import pandas as pd
import pytest

from orchestrator.worker.threads import (
    cgroup_cpu_quota,
    rank_threads,
    thread_variables,
    usable_cpus,
    user_threads,
)
from tests.conftest import PROJECT, assert_statuses, journal, run_cli, write

GPT_LM = """
        name: {name}
        hardware: [{hardware}]
        stacks: [{{name: here, executor: process}}]
        workloads:
          - name: gpt_lm
            preset: tiny
            params: {{workers: [{workers}], steps_per_epoch: 3, warmup_steps: 1}}
            epochs: 1
        """


def gpt_lm_matrix(root, name: str, workers: int = 1,
                  hardware: str = "{name: cpu, kind: local}"):
    return write(root / f"{name}.yaml", GPT_LM.format(name=name, hardware=hardware,
                                                      workers=workers))


def provenance(run_dir) -> dict:
    assert_statuses(run_dir, ["ok"])
    (found,) = [r for r in journal(run_dir) if r["record"] == "provenance"]
    return found


def test_the_users_setting_counts_first_and_is_per_process():
    assert user_threads({"OMP_NUM_THREADS": "3", "MKL_NUM_THREADS": "5"}) == 3
    assert user_threads({"MKL_NUM_THREADS": "5"}) == 5
    assert user_threads({"OMP_NUM_THREADS": "4,2"}) == 4  # nested: the outer level's
    for unset in ({}, {"OMP_NUM_THREADS": "0"}, {"OMP_NUM_THREADS": "many"}):
        assert user_threads(unset) is None
    # a user's 1 thread is 1 per rank, whatever the CPUs; none set: an equal share of them
    assert rank_threads(1, {"OMP_NUM_THREADS": "1"}) == 1
    usable = usable_cpus({})
    assert rank_threads(1, {}) == usable
    assert rank_threads(2 * usable, {}) == 1  # never none


def test_a_slurm_allotment_caps_the_cpus_a_process_may_use():
    assert usable_cpus({"SLURM_CPUS_PER_TASK": "1"}) == 1
    assert usable_cpus({"SLURM_CPUS_PER_TASK": "100000"}) == len(os.sched_getaffinity(0))
    assert rank_threads(1, {"SLURM_CPUS_PER_TASK": "1"}) == 1


def test_a_cgroup_quota_is_read_in_either_hierarchy_with_a_parents_limit_binding(tmp_path):
    """The files as the kernel lays them out (v2's cpu.max, v1's cfs quota and period)."""
    v2 = tmp_path / "v2"
    (v2 / "job" / "step").mkdir(parents=True)
    write(v2 / "cpu.max", "max 100000\n")
    write(v2 / "job" / "cpu.max", "150000 100000\n")  # 1.5 CPUs for the job
    write(v2 / "job" / "step" / "cpu.max", "max 100000\n")
    membership = write(tmp_path / "v2.cgroup", "0::/job/step\n")
    assert cgroup_cpu_quota(v2, membership) == 1.5
    v1 = tmp_path / "v1"
    (v1 / "cpu" / "docker" / "abc").mkdir(parents=True)
    write(v1 / "cpu" / "docker" / "abc" / "cpu.cfs_quota_us", "50000\n")
    write(v1 / "cpu" / "docker" / "abc" / "cpu.cfs_period_us", "100000\n")
    membership = write(tmp_path / "v1.cgroup", "3:cpuset:/\n2:cpu,cpuacct:/docker/abc\n")
    assert cgroup_cpu_quota(v1, membership) == 0.5
    unlimited = write(tmp_path / "none.cgroup", "0::/\n")
    (tmp_path / "v3").mkdir()
    write(tmp_path / "v3" / "cpu.max", "max 100000\n")
    assert cgroup_cpu_quota(tmp_path / "v3", unlimited) is None
    assert cgroup_cpu_quota(v1, tmp_path / "absent") is None


def test_this_machines_own_cgroup_is_read_without_error():
    quota = cgroup_cpu_quota()
    assert quota is None or quota > 0
    assert 1 <= usable_cpus() <= (os.cpu_count() or 1)


def test_under_taskset_a_process_may_use_the_cpus_it_was_given():
    done = subprocess.run(
        ["taskset", "-c", "0", sys.executable, "-c",
         "from orchestrator.worker.threads import usable_cpus, rank_threads; "
         "print(usable_cpus(), rank_threads(1))"],
        cwd=PROJECT, env={k: v for k, v in os.environ.items()
                          if k not in thread_variables(os.environ)},
        capture_output=True, text=True, check=True, timeout=120)
    assert done.stdout.split() == ["1", "1"]


def test_gpt_lm_computes_on_the_users_one_thread(tmp_path):
    """The old code gave a rank os.cpu_count() // workers threads whatever the user set."""
    done = run_cli("run", str(gpt_lm_matrix(tmp_path, "user")), "--no-ray", "--db", "none",
                   "-o", str(tmp_path / "run"), cwd=tmp_path, env={"OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stdout + done.stderr
    found = provenance(tmp_path / "run")
    assert found["thread_settings"]["OMP_NUM_THREADS"] == "1"
    assert found["cpu_threads"] == 1
    assert found["cpus_usable"] == usable_cpus()


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="taskset needs 2 CPUs to narrow")
def test_gpt_lm_under_taskset_computes_on_the_one_cpu_it_may_use(tmp_path):
    matrix = gpt_lm_matrix(tmp_path, "pinned")
    env = {k: v for k, v in os.environ.items() if k not in thread_variables(os.environ)}
    done = subprocess.run(["taskset", "-c", "0", sys.executable, "-m", "orchestrator.cli",
                           "run", str(matrix), "--no-ray", "--db", "none", "-o",
                           str(tmp_path / "run")], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    found = provenance(tmp_path / "run")
    assert found["thread_settings"] == {}
    assert (found["cpus_usable"], found["cpu_threads"]) == (1, 1)
    assert found["cpu_count"] == os.cpu_count()  # the machine's, as before


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs 2 CPUs to share out")
def test_gpt_lm_on_a_slurm_partition_with_cpus_1_computes_on_one_thread(slurm, tmp_path):
    """Slurm here binds no CPUs (task/none): the allotment reaches the worker as
    SLURM_CPUS_PER_TASK alone, and the rank follows it."""
    matrix = gpt_lm_matrix(tmp_path, "allotted", hardware="{name: node, kind: slurm, "
                           "partition: debug, cpus: 1, mem_gb: 2}")
    write(matrix, matrix.read_text() + "slurm: {poll_s: 0.5}\n")
    done = run_cli("run", str(matrix), "--db", "none", "-o", str(tmp_path / "run"),
                   cwd=tmp_path, unset=thread_variables(os.environ))
    assert done.returncode == 0, done.stdout + done.stderr
    found = provenance(tmp_path / "run")
    assert found["thread_settings"] == {}
    assert (found["cpus_usable"], found["cpu_threads"]) == (1, 1)
    report = (tmp_path / "run" / "report.md").read_text()
    assert "cpus_usable" in report.split("## Environment", 1)[1]
    rows = pd.read_parquet(tmp_path / "run" / "results.parquet")
    assert list(rows["cpus_usable"]) == [1]
