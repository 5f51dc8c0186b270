"""A cell's log never takes the driver's memory (issue 41, item 5): a workload that printed
1 GB raised the driver to 2.1 GB, because the log's tail was found by reading the whole log.
The tail is read from the end in bounded memory; a log past its cap keeps its head and its
tail and says what was cut."""

from __future__ import annotations

import html
import tracemalloc
from pathlib import Path

from orchestrator.executors.logs import LOG_CAP_BYTES, LOG_TAIL_LINES, cap_log, tail_of
from tests.conftest import run_script_as_cell

MIB = 2**20


def big_log(path: Path, mib: int) -> Path:
    line = b"x" * 1023 + b"\n"
    with open(path, "wb") as handle:
        handle.write(b"first line of the cell\n")
        for _ in range(mib):
            handle.write(line * 1024)
        handle.write(b"".join(f"last line {i}\n".encode() for i in range(50)))
    return path


def test_the_tail_of_a_large_log_is_read_from_its_end_in_bounded_memory(tmp_path):
    log = big_log(tmp_path / "cell.log", 200)
    tracemalloc.start()
    tail = tail_of(log)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 1 * MIB, peak  # the log is 200 MiB
    lines = tail.splitlines()
    assert lines[-1] == "last line 49" and len(lines) <= LOG_TAIL_LINES
    assert tail_of(tmp_path / "absent.log") == "" and tail_of(tmp_path) == ""


def test_a_log_past_its_cap_keeps_head_and_tail_and_says_what_was_cut(tmp_path):
    log = big_log(tmp_path / "cell.log", 30)
    size = log.stat().st_size
    tracemalloc.start()
    cut = cap_log(log, cap=10 * MIB, keep=MIB)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 4 * MIB, peak
    assert cut == size - 2 * MIB
    text = log.read_bytes()
    assert text.startswith(b"first line of the cell\n") and text.endswith(b"last line 49\n")
    assert f"[matrix-bench: {cut:,} bytes of this log cut here: it held {size:,} bytes".encode() \
        in text
    assert cap_log(log, cap=10 * MIB, keep=MIB) == 0  # a short log is left as it is


def test_a_cell_that_prints_past_the_cap_leaves_a_capped_log_and_its_real_tail(tmp_path):
    over = LOG_CAP_BYTES // MIB + 8
    cell = run_script_as_cell(tmp_path, (
        "import sys\n"
        f"for _ in range({over}):\n"
        "    sys.stdout.write(('y' * 1023 + '\\n') * 1024)\n"
        "print('the end of a loud cell')\n"))
    log = tmp_path / "run" / "logs" / f"{cell['cell_id']}.log"
    assert log.stat().st_size < LOG_CAP_BYTES // 2
    assert b"bytes of this log cut here" in log.read_bytes()
    assert log.read_bytes().rstrip().splitlines()[-1].startswith(b"matrix-bench: ")


FAILING = r'''
import sys
for i in range(30):
    print(f"step {i}", flush=True)
print("a fence ``` and a pipe | and \x1b[31mred\x1b[0m", flush=True)
print("Traceback: ValueError: the loss is nan", flush=True)
sys.exit(3)
'''


def test_a_failed_cells_report_shows_the_last_lines_of_its_log_as_text(tmp_path):
    cell = run_script_as_cell(tmp_path, FAILING)
    assert cell["status"] == "failed"
    report = (tmp_path / "run" / "report.md").read_text()
    section = report.split("### The last lines of their logs (at most 12)")[1]
    assert "step 21" in section and "step 20" not in section  # the last 12 lines
    assert "Traceback: ValueError: the loss is nan" in section
    assert "\x1b" not in report and "and \\x1b[31mred\\x1b[0m" in section
    assert "\n````text\n" in section  # longer than the ``` inside: nothing ends it early
    page = (tmp_path / "run" / "report.html").read_text()
    block = html.unescape(page.split("<pre><code")[1].split("</code></pre>")[0])
    assert "a fence ``` and a pipe | and \\x1b[31mred" in block
    assert "Traceback: ValueError: the loss is nan\nmatrix-bench: failed" in block
