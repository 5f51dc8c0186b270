"""A full disk while results are written: a small real tmpfs is the run directory.

The sweep stops with one clear line (exit 2), the journal holds whole batches only, and the
same command resumes once space is freed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import cell_records, run_cli

MATRIX = """
name: full
hardware: [{name: node-a, kind: local}]
stacks: [{name: here, executor: process}]
workloads:
  - {name: sleep, params: {seconds: 0.05, steps: [1, 2, 3, 4, 5, 6, 7, 8]}}
"""
CELLS = 8
TMPFS_BYTES = 1024 * 1024
FREE_BYTES = 40 * 1024  # room for about two cells' files and journal batches


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 1 MiB tmpfs, mounted for the test and unmounted after."""
    if os.geteuid() != 0:
        if os.environ.get("CI"):
            pytest.fail("CI must run the tests as root: mounting a tmpfs needs it")
        pytest.skip("needs root to mount a tmpfs (CI runs as root)")
    mount = tmp_path / "disk"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={TMPFS_BYTES}", "tmpfs", str(mount)],
                   check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(disk: Path, leave: int) -> Path:
    filler = disk / "filler"
    stat = os.statvfs(disk)
    with open(filler, "wb") as handle:
        handle.write(b"\0" * max(stat.f_bavail * stat.f_frsize - leave, 0))
    return filler


def test_a_full_disk_stops_the_sweep_clearly_and_the_run_resumes(small_disk, matrix_file,
                                                                   tmp_path):
    matrix = matrix_file(MATRIX)
    run_dir = small_disk / "run"
    run_dir.mkdir()
    filler = fill(small_disk, FREE_BYTES)
    result = run_cli("run", str(matrix), "-o", str(run_dir), "--no-ray", cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert "no space left on the device of" in line and "run the same command again" in line
    lines = (run_dir / "results.jsonl").read_text().splitlines() \
        if (run_dir / "results.jsonl").exists() else []
    for text in lines:
        json.loads(text)  # whole batches only: no line was torn by the full disk
    before = {c["cell_id"]: c["started_at"] for c in cell_records(run_dir)} if lines else {}
    assert 0 < len(before) < CELLS  # some cells ended before the disk filled
    assert not (run_dir / "run.lock").exists()

    filler.unlink()
    again = run_cli("run", str(matrix), "-o", str(run_dir), "--no-ray", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    cells = cell_records(run_dir)
    assert len({c["cell_id"] for c in cells}) == CELLS
    ok = [c for c in cells if c["status"] == "ok"]
    assert len(ok) == len({c["cell_id"] for c in ok}) == CELLS  # each ok once
    assert {c["cell_id"]: c["started_at"] for c in ok if c["cell_id"] in before} == before
    assert (run_dir / "report.md").exists()


@pytest.mark.parametrize("args", [["plan", "{matrix}", "--format", "json"], ["ls"],
                                  ["schema"]])
def test_a_standard_output_that_cannot_be_written_is_one_line(args, matrix_file, tmp_path):
    """`matrix plan --format json > plan.json` on a full disk (here /dev/full, which fails
    every write) was an OSError traceback from whichever print hit it."""
    matrix = matrix_file(MATRIX)
    argv = [str(matrix) if a == "{matrix}" else a for a in args]
    with open("/dev/full", "w") as full:
        done = subprocess.run([sys.executable, "-m", "orchestrator.cli", *argv], cwd=tmp_path,
                              stdout=full, stderr=subprocess.PIPE, text=True, timeout=120)
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        "error: cannot write the standard output: No space left on device"]


def test_a_reader_that_leaves_the_pipe_early_gets_no_traceback(matrix_file, tmp_path):
    """`matrix plan | head -1`: the reader left (here before the first write); nothing to
    say about it, and no 'Exception ignored' from the interpreter's exit."""
    matrix = matrix_file(MATRIX)
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run([sys.executable, "-m", "orchestrator.cli", "plan", str(matrix)],
                              cwd=tmp_path, stdout=write_end, stderr=subprocess.PIPE,
                              text=True, timeout=120)
    finally:
        os.close(write_end)
    assert done.returncode == 1
    assert done.stderr == ""
