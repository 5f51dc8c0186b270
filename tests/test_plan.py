"""`matrix plan`, `--only`, and running where Ray is not installed."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import PROJECT, cell_records, run_cli

PLANNED = """
name: planned
hardware:
  - {name: cpu, kind: local}
  - {name: eight-gpus, kind: local, gpus: 8}
stacks: [{name: here, executor: process}]
workloads:
  - name: lstm_lm
    preset: tiny
    dataset: synthetic
    params: {precision: [fp32, fp16], batch_size: [8, 16]}
exclude:
  - {params: {batch_size: 16, precision: fp32}}
"""

SLEEPS = """
name: sleeps
hardware: [{name: box, kind: local}]
stacks: [{name: here, executor: process}]
workloads: [{name: sleep, params: {seconds: [0.1, 0.2], steps: 1}}]
"""


def test_plan_shows_what_runs_and_why_the_rest_is_skipped(matrix_file, tmp_path):
    result = run_cli("plan", str(matrix_file(PLANNED)), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "1 cells to run" in out  # cpu, fp32, batch 8
    assert "excluded by exclude rule" in out
    assert "precision=fp16 needs a GPU and cpu has gpus: 0" in out
    assert "needs 8 GPU(s), this machine has 0" in out
    assert "about" in out and "min" in out  # tiny preset declares an estimate
    assert not (tmp_path / "reports").exists()  # planning runs nothing


def test_only_selects_a_subset_and_plan_knows_what_is_done(matrix_file, tmp_path):
    path = str(matrix_file(SLEEPS))
    result = run_cli("run", path, "--no-ray", "--only", "seconds=0.2", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "1 cells to run" in result.stdout and "1 not selected" in result.stdout
    (cell,) = cell_records(tmp_path / "reports" / "sleeps")
    assert cell["param.seconds"] == 0.2
    plan = run_cli("plan", path, cwd=tmp_path).stdout
    assert "already done" in plan and "1 cells to run" in plan


def run_without_ray(args: list[str], cwd) -> subprocess.CompletedProcess[str]:
    """The CLI in a process where `import ray` fails, as on a machine without Ray."""
    code = ("import sys\nsys.modules['ray'] = None  # makes `import ray` raise ImportError\n"
            "from orchestrator.cli import main\n"
            f"sys.argv = ['matrix', *{args!r}]\nmain()\n")
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True,
                          text=True, timeout=300, env={"PYTHONPATH": str(PROJECT),
                                                       "PATH": "/usr/bin:/bin"})


def test_no_ray_works_where_ray_is_not_installed(matrix_file, tmp_path):
    result = run_without_ray(["run", str(matrix_file(SLEEPS)), "--no-ray"], tmp_path)
    assert result.returncode == 0, result.stderr
    cells = cell_records(tmp_path / "reports" / "sleeps")
    assert [c["status"] for c in cells] == ["ok", "ok"]


def test_without_ray_the_default_dispatcher_says_what_to_do(matrix_file, tmp_path):
    result = run_without_ray(["run", str(matrix_file(SLEEPS))], tmp_path)
    assert result.returncode == 2
    assert "Ray is not installed" in result.stderr and "--no-ray" in result.stderr


def test_an_unenforceable_budget_is_said_not_ignored(matrix_file, tmp_path):
    path = str(matrix_file(SLEEPS + "budget_usd: 5\n"))
    result = run_cli("run", path, "--no-ray", "--only", "seconds=0.1", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "budget_usd 5 is not enforced" in result.stdout
