"""Before and after a change of your own code (issue 43): `compare` and `history` match the
configuration across the change and name both code versions; a comparison in which nothing
joins is an error (exit code 2), never a silent pass. Real sweeps of a command workload with
the client, into a SQLite store of the test's own."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import PROJECT, run_cli, write
from tests.test_command_workloads import TRAIN

MATRIX = """
name: mine
hardware: [{{name: box, kind: local}}]
stacks: [{{name: here, executor: process}}]
repeats: 2
workloads:
  - name: {workload}
    command: [python, train.py, --batch-size, "{{batch_size}}"]
    params: {{batch_size: 8}}
"""


GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]


def sweep(root: Path, copy_to: str, workload: str = "trainer", code: str = TRAIN) -> Path:
    """Commit `code` as train.py, run the matrix of `workload` on it, keep its run
    directory as `copy_to`."""
    write(root / "train.py", code)
    subprocess.run([*GIT, "add", "train.py"], cwd=root, check=True)
    subprocess.run([*GIT, "commit", "-q", "--allow-empty", "-m", copy_to], cwd=root,
                   check=True)
    matrix = write(root / "m.yaml", MATRIX.format(workload=workload))
    done = run_cli("run", str(matrix), "--no-ray", "--db", f"sqlite:///{root / 'r.db'}",
                   cwd=root)
    assert done.returncode == 0, done.stdout + done.stderr
    kept = root / copy_to
    shutil.move(root / "reports" / "mine", kept)
    return kept


def versions(run_dir: Path) -> set[str]:
    lines = (run_dir / "results.jsonl").read_text().splitlines()
    return {r["workload_version"] for r in map(json.loads, lines)
            if r["record"] == "provenance"}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path, Path]:
    """(folder, run before the change, run after it, run of another workload)."""
    root = tmp_path_factory.mktemp("code_changes")
    subprocess.run([*GIT, "init", "-q"], cwd=root, check=True)  # the user's work tree
    before = sweep(root, "before")
    after = sweep(root, "after", code=TRAIN.replace("5000", "5001"))  # a real change
    other = sweep(root, "other", workload="another")
    return root, before, after, other


def test_compare_matches_a_configuration_across_a_code_change_and_names_both(runs):
    root, before, after, _ = runs
    (old,), (new,) = versions(before), versions(after)
    assert old != new and old.startswith("command+") and new.startswith("command+")
    done = run_cli("compare", str(before), str(after), cwd=root)
    assert done.returncode in (0, 1), done.stdout + done.stderr
    assert re.search(r"box .*\d/\d .*(regression|improvement|equivalent|inconclusive|too "
                     r"few repeats)", done.stdout), done.stdout
    found = re.search(r"code changed: box: (\S+) \(git ([0-9a-f]{12})\) -> (\S+) \(git "
                      r"([0-9a-f]{12})\)", " ".join(done.stdout.split()))
    assert found and (found[1], found[3]) == (old, new) and found[2] != found[4], done.stdout
    assert "0 configuration(s) with ok samples in one run only" in done.stdout


def test_a_comparison_with_nothing_in_common_is_one_line_and_exit_code_2(runs):
    root, before, _, other = runs
    done = run_cli("compare", str(before), str(other), cwd=root)
    assert done.returncode == 2, done.stdout + done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line == ("error: no configuration in common: BASE ran trainer command on box/here; "
                    "NEW ran another command on box/here")


def test_history_follows_the_configuration_across_the_change(runs):
    root, _, _, _ = runs
    store = ["--db", f"sqlite:///{root / 'r.db'}", "--workload", "trainer"]
    found = run_cli("history", "regressions", *store, "--format", "json", cwd=root)
    assert found.returncode in (0, 1), found.stdout + found.stderr
    (verdict,) = json.loads(found.stdout)
    assert verdict["baseline_runs"] == 1 and verdict["code_change"] is not None
    trend = run_cli("history", "trend", *store, cwd=root)
    assert trend.returncode == 0, trend.stderr
    headings = [line for line in trend.stdout.splitlines() if line.startswith("trainer")]
    assert len(headings) == 1, trend.stdout  # one configuration, two runs under it
    assert len(re.findall(r"command\+[0-9a-f]{7}\b", trend.stdout)) == 2, trend.stdout


def own_sleep(root: Path, run: str) -> tuple[Path, Path]:
    """(a copy of the sleep workload as the user's folder `mine`, a matrix `run` of it)."""
    folder = root / "mine"
    shutil.copytree(PROJECT / "workloads" / "sleep", folder,
                    ignore=shutil.ignore_patterns("__pycache__"))
    return folder, write(root / "m.yaml", f"""
        name: {run}
        hardware: [{{name: box, kind: local}}]
        stacks: [{{name: here, executor: process}}]
        workloads: [{{name: my_sleep, path: mine, params: {{seconds: 0.05}}}}]
        """)


def test_a_run_reports_and_compares_after_its_workload_folder_is_gone(tmp_path):
    folder, matrix = own_sleep(tmp_path, "gone")
    done = run_cli("run", str(matrix), "--no-ray", "--db", "none", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    run_dir = tmp_path / "reports" / "gone"
    # a folder without flops.py: the report says once why it has no TFLOP/s
    assert (run_dir / "report.md").read_text().count("No FLOP model, so no TFLOP/s") == 1
    shutil.rmtree(folder)

    report = run_cli("report", str(run_dir), cwd=tmp_path)
    assert report.returncode == 0, report.stdout + report.stderr
    (warning,) = report.stderr.strip().splitlines()
    assert warning == (f"warning: the run's workload my_sleep came from {folder}, which holds "
                       "no workload any more: reported from its recorded declaration, without "
                       "its FLOP model and views")
    assert "my_sleep" in (run_dir / "report.md").read_text()
    same = run_cli("compare", str(run_dir), str(run_dir), cwd=tmp_path)
    assert same.returncode == 0, same.stdout + same.stderr
    assert re.search(r"^box +1/1 .* 1\.000 .*too few repeats$", same.stdout, re.M), same.stdout


def test_a_run_estimates_a_configuration_from_its_earlier_runs_in_the_store(tmp_path):
    _, matrix = own_sleep(tmp_path, "estimated")
    store = ["--db", f"sqlite:///{tmp_path / 'r.db'}", "--no-ray"]
    first = run_cli("run", str(matrix), *store, "-o", str(tmp_path / "a"), cwd=tmp_path)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "1 cells to run, no estimate yet (no earlier run of some cells)" in first.stdout
    again = run_cli("run", str(matrix), *store, "-o", str(tmp_path / "b"), cwd=tmp_path)
    assert again.returncode == 0, again.stdout + again.stderr
    assert re.search(r"1 cells to run, about \d+ s\b", again.stdout), again.stdout
