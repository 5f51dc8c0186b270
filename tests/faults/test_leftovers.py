"""Nothing a cell starts outlives it (issue 41, item 6): a command that starts children, one
in its own process group and one in a session of its own, and exits 0 once left both
running, loading the machine while the next cells were timed, unflagged. Now the executor
ends every process the cell started when it ends, and the record says so."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from orchestrator.executors.leftovers import CELL_MARK, marked, new_mark
from tests.conftest import run_script_as_cell

SCRIPT = """\
import subprocess, sys
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(317)"])
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(318)"],
                 start_new_session=True)
print("the parent exits 0, its children still running")
"""


def alive(needle: str) -> list[int]:
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if needle.encode() in (proc / "cmdline").read_bytes() and \
                    (proc / "stat").read_text().rpartition(")")[2].split()[0] != "Z":
                found.append(int(proc.name))
        except (OSError, ValueError):
            continue
    return found


def test_a_cell_that_leaves_children_running_has_them_ended_and_says_so(tmp_path):
    cell = run_script_as_cell(tmp_path, SCRIPT)
    assert alive("time.sleep(317)") == [] and alive("time.sleep(318)") == []
    assert cell["status"] == "ok" and "left_processes" in cell["flags"]
    assert "2 process(es) it started were still running" in cell["error"]
    assert "time.sleep(318)" in cell["error"]


def test_only_processes_with_the_cells_mark_are_found():
    mark = new_mark()
    sleep = [sys.executable, "-c", "import time; time.sleep(30)"]
    ours = subprocess.Popen(sleep, env={**os.environ, CELL_MARK: mark})
    other = subprocess.Popen(sleep, env={**os.environ, CELL_MARK: new_mark()})
    try:
        deadline = time.monotonic() + 10
        while ours.pid not in marked(mark) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert set(marked(mark)) == {ours.pid}
    finally:
        for process in (ours, other):
            process.kill()
            process.wait()
    assert marked(mark) == {}
