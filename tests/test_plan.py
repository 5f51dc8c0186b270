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
    # 8 grid cells, of which the rule removes 2: 1 runs (cpu, fp32, batch 8), 5 skipped
    assert "8 grid cells (repeats included), 6 after the exclude and include rules:\n1 to " \
           "run, 5 skipped" in out
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
    assert "already done" in plan and "\n1 to run, 1 skipped" in plan


def test_a_plan_fits_an_80_column_pipe_and_scripts_get_every_cell(tmp_path):
    import csv
    import io
    import json

    aws_p3 = str(PROJECT / "matrix" / "aws_p3.yaml")
    text = run_cli("plan", aws_p3, cwd=tmp_path, env={"COLUMNS": "80"})
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert "…" not in text.stdout  # nothing cut: long values fold, long lines wrap
    tables = [line for line in lines if line.startswith(("  ", "┃", "│", "┏", "┡", "└", " ─"))]
    assert tables and max(len(line) for line in tables) <= 80
    assert len(lines) < 100  # a summary, not a line per cell
    assert max(len(line) for line in lines if not line.startswith("run directory: ")) <= 80
    header = " ".join(lines[:3])
    rows = json.loads(run_cli("plan", aws_p3, "--format", "json", cwd=tmp_path).stdout)
    to_run = [r for r in rows if r["action"] == "run"]
    assert f"{len(rows)} grid cells" in header and f": {len(to_run)} to run," in header
    assert all(r["reason"] for r in rows if r["action"] == "skip")
    table = list(csv.DictReader(io.StringIO(
        run_cli("plan", aws_p3, "--format", "csv", cwd=tmp_path).stdout)))
    assert [r["cell_id"] for r in table] == [r["cell_id"] for r in rows]
    verbose = run_cli("plan", aws_p3, "--verbose", cwd=tmp_path, env={"COLUMNS": "80"})
    assert "…" not in verbose.stdout and len(verbose.stdout.splitlines()) > len(rows)


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
