"""One clear line everywhere (issue 42): inputs that once ended in a traceback, a wrong exit
code, or doubled or overwritten data. Each is one line and exit code 2 now (a warning
where a run is still readable), with nothing lost. Built on tests/journals/impossible/."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from pathlib import Path

import pandas as pd
import pytest

from tests.conftest import run_cli

IMPOSSIBLE = Path(__file__).parents[1] / "journals" / "impossible"


def a_run(target: Path, edit=None) -> Path:
    shutil.copytree(IMPOSSIBLE, target)
    if edit is not None:
        lines = [edit(json.loads(line)) for line in
                 (target / "results.jsonl").read_text().splitlines()]
        (target / "results.jsonl").write_text(
            "".join(json.dumps(r) + "\n" for r in lines if r is not None))
    return target


def one_line(done, says: str) -> None:
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if not line.startswith("warning:")]
    assert len(errors) == 1 and says in errors[0], done.stderr


def all_failed(record: dict) -> dict | None:
    if record["record"] == "measurement":
        return None
    if record["record"] == "cell":
        record |= {"status": "failed", "error": "RuntimeError: boom"}
    return record


def test_compare_with_a_run_whose_every_cell_failed_is_no_regression(tmp_path):
    good, failed = a_run(tmp_path / "good"), a_run(tmp_path / "failed", all_failed)
    for base, new, side in ((good, failed, "NEW"), (failed, good, "BASE")):
        done = run_cli("compare", str(base), str(new), cwd=tmp_path)
        one_line(done, f"{side} {failed} holds no cell that ended ok with a throughput "
                       "(4 failed)")


def test_advise_and_explain_of_a_run_whose_every_cell_failed_is_one_line(tmp_path):
    """A broken nightly (every cell failed) was a KeyError traceback in both."""
    failed = a_run(tmp_path / "failed", all_failed)
    for args in (["advise", str(failed), "--items", "1e6"], ["explain", str(failed)]):
        one_line(run_cli(*args, cwd=tmp_path),
                 "the runs hold no configuration with a throughput that ended ok")


def test_history_best_of_a_store_whose_every_row_is_implausible_says_why(tmp_path):
    """Seed 000's P100 journal alone: a KeyError traceback in the table; now the
    configuration left out, with why, in every format."""
    p100 = a_run(tmp_path / "p100", lambda r: r if "p100" in r["config_id"] else None)
    url = f"sqlite:///{tmp_path / 'r.db'}"
    assert run_cli("db", "import", str(p100), "--db", url, cwd=tmp_path).returncode == 0
    shown = run_cli("history", "best", "--db", url, cwd=tmp_path)
    assert shown.returncode == 0 and "Traceback" not in shown.stderr, shown.stderr
    said = " ".join(shown.stdout.split())
    assert "left out p100" in said and "implausible: 13.2x the fp32 peak" in said
    data = run_cli("history", "best", "--db", url, "--format", "json", cwd=tmp_path)
    assert data.returncode == 0, data.stderr
    assert [(r["best"], r["configuration"]) for r in json.loads(data.stdout)] == \
        [("left out", "p100")]


@pytest.mark.parametrize(("option", "value", "says"), [
    ("--items", "inf", "--items inf: not a finite number"),
    ("--items", "1e400", "--items inf: not a finite number"),
    ("--items", "1e19", "--items 1e+19: a job is at most 1e+18"),
    ("--budget", "inf", "--budget inf: not a finite number"),
    ("--grid-intensity", "1e400", "--grid-intensity inf: not a finite number"),
])
def test_a_job_past_a_matrixs_bounds_is_one_line_on_advise_and_the_dashboard(
        tmp_path, option, value, says):
    """--items inf made every time and cost inf and wrote JSON's Infinity; 1e19 on the
    dashboard was a pydantic traceback. The bounds are a matrix's `job:` bounds."""
    run = a_run(tmp_path / "run")
    url = f"sqlite:///{tmp_path / 'r.db'}"
    assert run_cli("db", "import", str(run), "--db", url, cwd=tmp_path).returncode == 0
    job = ["--items", "1e6"] if option != "--items" else []
    for args in (["advise", str(run), "--workload", "lstm_lm"],
                 ["dashboard", "-o", str(tmp_path / "site"), "--db", url]):
        one_line(run_cli(*args, *job, option, value, cwd=tmp_path), says)
    assert not (tmp_path / "site").exists()


@pytest.mark.parametrize(("args", "says"), [
    (["advise", "run", "--items", "1e6", "--budget", "-1"], "Invalid value for '--budget'"),
    (["plan", "m.yaml", "--format", "xml"], "Invalid value for '--format'"),
    (["run", "m.yaml", "--nope"], "No such option: --nope"),
    (["advise"], "Missing option '--items'"),
])
def test_what_the_cli_framework_checks_itself_is_one_red_line(tmp_path, args, says):
    """A range, a choice, an unknown option or a missing one printed a 5-6 line box."""
    one_line(run_cli(*args, cwd=tmp_path), says)


def test_a_ray_address_where_nothing_listens_is_one_line_in_seconds(tmp_path):
    """`--ray-address 127.0.0.1:PORT` with nothing there printed nothing for 822 s (Ray
    reconnecting) before its error; the address is tried first, and named."""
    import socket

    with socket.socket() as free:  # a port nothing listens on once it is closed
        free.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{free.getsockname()[1]}"
    (tmp_path / "m.yaml").write_text(
        "name: far\nhardware: [{name: box, kind: local}]\n"
        "stacks: [{name: here, executor: process}]\n"
        "workloads: [{name: sleep, params: {seconds: 0.1}}]\n")
    one_line(run_cli("run", "m.yaml", "--ray-address", address, "--db", "none",
                     cwd=tmp_path, timeout=60),
             f"cannot reach Ray at {address}: connection refused")


@pytest.mark.parametrize(("output", "says"), [
    ("/proc/self", "output: /proc/self is on proc, a filesystem of the kernel's"),
    ("afile/run", "is not a folder, so no run folder can be made at afile/run"),
])
def test_validate_refuses_an_output_that_run_would(tmp_path, output, says):
    """`output: /proc/self` validated "ok" while `matrix run` refused it."""
    (tmp_path / "afile").write_text("not a folder")
    (tmp_path / "m.yaml").write_text(
        f"name: o\noutput: {output}\nhardware: [{{name: box, kind: local}}]\n"
        "stacks: [{name: p, executor: process}]\n"
        "workloads: [{name: sleep, params: {seconds: 0.1}}]\n")
    one_line(run_cli("validate", "m.yaml", cwd=tmp_path), says)
    assert run_cli("run", "m.yaml", "--no-ray", "--db", "none", cwd=tmp_path).returncode == 2


@pytest.mark.parametrize(("tail", "what"), [
    ('{"schema_version": 4, "record": "cell"', "torn last line (a kill while writing?)"),
    ('{"schema_version": 4, "record": "cell", "run": "x"}\n', "unreadable line"),
])
def test_an_unusable_last_line_is_warned_once_per_command_as_what_it_is(tmp_path, tail,
                                                                       what):
    """A torn last line was warned 3 times by `report`, twice by `advise` and `compare`;
    a whole last line that is no record was called torn, the same line earlier
    unreadable."""
    run = a_run(tmp_path / "run")
    with open(run / "results.jsonl", "a") as journal:
        journal.write(tail)
    line = len((run / "results.jsonl").read_text().splitlines())
    for args in (["report", str(run)], ["compare", str(run), str(run)],
                 ["advise", str(run), "--items", "1e6", "--workload", "lstm_lm"]):
        done = run_cli(*args, cwd=tmp_path)
        warned = [w for w in done.stderr.splitlines() if w.startswith("warning:")]
        assert [w.split(f"results.jsonl:{line}: ")[1].split(" skipped")[0]
                for w in warned] == [what], (args, done.stderr)


def test_a_report_of_a_journal_without_a_cell_says_so(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "results.jsonl").write_text("")
    newer = a_run(tmp_path / "newer", lambda r: {**r, "schema_version": 99})
    for run in (empty, newer):
        one_line(run_cli("report", str(run), cwd=tmp_path), "no cell record")
        assert not (run / "report.md").exists()


def test_a_line_of_nested_brackets_is_a_located_warning_on_every_path(tmp_path):
    run = a_run(tmp_path / "run")
    with open(run / "results.jsonl", "a") as journal:
        journal.write("[" * 100_000 + "]" * 100_000 + "\n")
        journal.write(json.dumps(json.loads(
            (IMPOSSIBLE / "results.jsonl").read_text().splitlines()[0])) + "\n")
    url = f"sqlite:///{tmp_path / 'r.db'}"
    for args in (["report", str(run)], ["compare", str(run), str(run)], ["ls", "--reports",
                 str(tmp_path)], ["db", "import", str(run), "--db", url]):
        done = run_cli(*args, cwd=tmp_path)
        assert done.returncode == 0, (args, done.stderr[-2000:])
        assert "Traceback" not in done.stderr and "RecursionError" not in done.stderr
        if args[0] != "ls":
            assert "results.jsonl:17: unreadable line skipped: nested too deep" in done.stderr


@pytest.mark.parametrize("figure", ["Infinity", "NaN", "1e400"])
def test_a_non_finite_figure_in_a_journal_is_a_located_warning_and_never_stored(tmp_path,
                                                                               figure):
    """A journal carrying JSON's Infinity (a corrupt timer) was imported, and blanked the
    dashboard's pages (a browser's JSON.parse refuses it). The line is unreadable, said
    where, on every path; nothing non-finite reaches the store or the site."""
    run = a_run(tmp_path / "run")
    lines = (run / "results.jsonl").read_text().splitlines()
    number = next(i for i, line in enumerate(lines, 1) if '"measurement"' in line)
    record = json.loads(lines[number - 1])
    lines[number - 1] = json.dumps(record).replace(
        f'"items_per_s": {json.dumps(record["items_per_s"])}', f'"items_per_s": {figure}')
    assert figure in lines[number - 1]
    (run / "results.jsonl").write_text("\n".join(lines) + "\n")
    url = f"sqlite:///{tmp_path / 'r.db'}"
    done = run_cli("db", "import", str(run), "--db", url, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"results.jsonl:{number}: unreadable line skipped: holds {figure}" in done.stderr
    site = run_cli("dashboard", "-o", str(tmp_path / "site"), "--db", url, cwd=tmp_path)
    assert site.returncode == 0, site.stderr
    for page in (tmp_path / "site").rglob("*.html"):
        assert "Infinity" not in page.read_text() and "NaN" not in page.read_text(), page


@pytest.mark.parametrize("kind", ["folder", "fifo"])
def test_a_journal_that_is_no_file_is_one_line_and_never_blocks(tmp_path, kind):
    run = tmp_path / "odd"
    run.mkdir()
    if kind == "folder":
        (run / "results.jsonl").mkdir()
    else:
        os.mkfifo(run / "results.jsonl")
    a_run(tmp_path / "fine")
    url = f"sqlite:///{tmp_path / 'r.db'}"
    for args in (["report", str(run)], ["db", "import", str(run), "--db", url]):
        one_line(run_cli(*args, cwd=tmp_path, timeout=60), "results.jsonl is not a file")
    listed = run_cli("ls", "--reports", str(tmp_path), cwd=tmp_path, timeout=60)
    assert listed.returncode == 0 and "fine: 4 ok" in listed.stdout, listed.stdout
    assert "odd: (no run: its results.jsonl is not a file)" in listed.stdout


@pytest.mark.parametrize("kind", ["link-out", "link-zero", "folder", "fifo"])
def test_a_run_whose_journal_is_no_file_of_its_own_is_one_line_and_touches_nothing(
        tmp_path, kind):
    """`matrix run` once followed a journal linked out of the run (cut the file's last line
    as torn and appended to it), read /dev/zero until killed, and gave a traceback for a
    folder or a FIFO. Each is refused before the journal is opened; every reader too."""
    (tmp_path / "m.yaml").write_text(
        "name: odd\nhardware: [{name: box, kind: local}]\n"
        "stacks: [{name: here, executor: process}]\n"
        "workloads: [{name: sleep, params: {seconds: 0.1}}]\n")
    run = tmp_path / "reports" / "odd"
    run.mkdir(parents=True)
    elsewhere = tmp_path / "elsewhere.txt"
    elsewhere.write_bytes(b"someone's file\nwithout its last newline")
    journal = run / "results.jsonl"
    {"link-out": lambda: journal.symlink_to(elsewhere),
     "link-zero": lambda: journal.symlink_to("/dev/zero"),
     "folder": journal.mkdir, "fifo": lambda: os.mkfifo(journal)}[kind]()
    says = "is a symbolic link" if kind.startswith("link") else "is not a file"
    one_line(run_cli("run", "m.yaml", "--no-ray", "--db", "none", cwd=tmp_path, timeout=60),
             f"results.jsonl {says}")
    url = f"sqlite:///{tmp_path / 'r.db'}"
    for args in (["report", str(run)], ["db", "import", str(run), "--db", url],
                 ["advise", str(run), "--items", "1e6"]):
        one_line(run_cli(*args, cwd=tmp_path, timeout=60), f"results.jsonl {says}")
    assert elsewhere.read_bytes() == b"someone's file\nwithout its last newline"
    assert journal.is_symlink() == kind.startswith("link")
    assert not (run / "cells").exists() or not any((run / "cells").iterdir())


def test_a_store_whose_version_is_no_number_is_one_line(tmp_path):
    run = a_run(tmp_path / "run")
    store = tmp_path / "r.db"
    assert run_cli("db", "import", str(run), "--db", f"sqlite:///{store}",
                   cwd=tmp_path).returncode == 0
    with sqlite3.connect(store) as db:
        db.execute("UPDATE store_schema SET version = 'three'")
    one_line(run_cli("history", "trend", "--db", f"sqlite:///{store}", cwd=tmp_path),
             "has schema version 'three', not a number")


def test_the_same_run_named_twice_is_one_run(tmp_path):
    run = a_run(tmp_path / "run")
    done = run_cli("report", str(run), str(run), "-o", str(tmp_path / "twice"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    once = run_cli("report", str(run), cwd=tmp_path)
    assert once.returncode == 0
    assert len(pd.read_parquet(tmp_path / "twice" / "results.parquet")) == \
        len(pd.read_parquet(run / "results.parquet"))


def test_a_run_and_its_copy_elsewhere_are_one_run_and_a_cell_more_is_kept(tmp_path):
    """`matrix report RUN COPY` counted each attempt twice (as `db import` of a copy does
    not); an attempt only the copy holds is still read."""
    run = a_run(tmp_path / "run")
    copy = a_run(tmp_path / "copy")
    records = [json.loads(line) for line in (copy / "results.jsonl").read_text().splitlines()]
    again = [{**r, "cell_id": r["cell_id"] + "-later"} for r in records
             if r["cell_id"] == records[0]["cell_id"]]  # one cell more, its batch whole
    with open(copy / "results.jsonl", "a") as journal:
        journal.write("".join(json.dumps(r) + "\n" for r in again))
    done = run_cli("report", str(run), str(copy), "-o", str(tmp_path / "both"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert run_cli("report", str(run), cwd=tmp_path).returncode == 0
    both = pd.read_parquet(tmp_path / "both" / "results.parquet")
    alone = pd.read_parquet(run / "results.parquet")
    added = sum(1 for r in again if r["record"] == "measurement") or 1
    assert len(both) == len(alone) + added, (len(both), len(alone))
    assert set(both.loc[both["run_dir"] == "copy", "cell_id"]) == {again[0]["cell_id"]}


def test_a_report_never_overwrites_another_runs_folder(tmp_path):
    mine, theirs = a_run(tmp_path / "mine"), a_run(tmp_path / "theirs")
    assert run_cli("report", str(theirs), cwd=tmp_path).returncode == 0
    before = (theirs / "report.md").read_bytes()
    for sources in ([mine], [mine, theirs]):
        done = run_cli("report", *map(str, sources), "-o", str(theirs), cwd=tmp_path)
        one_line(done, f"{theirs} holds another run")
    assert (theirs / "report.md").read_bytes() == before


def test_a_workload_folder_that_is_a_loop_of_links_is_a_located_line(tmp_path):
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    (tmp_path / "m.yaml").write_text("name: loop\nhardware: [{name: box, kind: local}]\n"
                                     "stacks: [{name: here, executor: process}]\n"
                                     "workloads: [{name: mine, path: a}]\n")
    one_line(run_cli("validate", "m.yaml", cwd=tmp_path),
             "m.yaml:4: workloads[0].path: a cannot be followed: a loop of links")


def test_a_run_in_s3_without_credentials_is_one_line(tmp_path):
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env |= {"AWS_CONFIG_FILE": str(tmp_path / "none"), "HOME": str(tmp_path),
            "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"),
            "AWS_EC2_METADATA_DISABLED": "true", "COLUMNS": "200"}
    for args in (["fetch", "s3://bucket/run"], ["report", "s3://bucket/run"]):
        done = subprocess.run([sys.executable, "-m", "orchestrator.cli", *args, "--region",
                               "us-east-1"], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=120)
        one_line(done, "cannot read s3://bucket/run: no AWS credentials")


@pytest.mark.parametrize(("name", "output", "says"), [
    ("x", "/proc/self/x", "cannot write /proc/self/x"),
    ("é", "e", "'é' is not a workload name"),
    ("a" * 300, "long", "is not a workload name"),
])
def test_a_scaffold_it_cannot_make_is_one_line_and_writes_nothing(tmp_path, name, output,
                                                                    says):
    one_line(run_cli("new-workload", name, "-o", output, cwd=tmp_path), says)
    assert not (tmp_path / output).exists() or not any((tmp_path / output).iterdir())


HOSTILE = "a|b\n# injected heading\x1b[31m\u202eevil"


def test_a_value_with_a_pipe_newlines_and_controls_is_shown_as_text(tmp_path):
    def hostile(record: dict) -> dict:
        if record["record"] == "cell" and record["cell_id"] == "cpu-lstm":
            record["param.dataset"] = HOSTILE
            record["error"] = "boom \x1b[2J|" + "\n# another heading"
        return record

    run = a_run(tmp_path / "run", hostile)
    done = run_cli("report", str(run), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    report = (run / "report.md").read_text()
    assert "\n# injected heading" not in report and "\n# another heading" not in report
    assert "\x1b" not in report and "\u202e" not in report
    assert "a\\|b # injected heading\\x1b[31m\\u202eevil" in report
    page = (run / "report.html").read_text()
    assert "<h1>injected heading" not in page and "\x1b" not in page


def test_a_long_number_like_value_is_reported_in_linear_time(tmp_path):
    """30,000 digits and a letter took the report 35-46 s of CPU, quadratic in the length.
    At 120,000 that is 16 times as much (over 9 minutes); linear, seconds. What is bounded
    is the report's own CPU time, which other processes on the machine do not inflate as
    they do its wall time (133 s beside two busy loops and another sweep, issue 56)."""
    import resource

    def long_value(record: dict) -> dict:
        if record["record"] == "cell" and record["cell_id"] == "cpu-lstm":
            record["param.dataset"] = "1" * 120_000 + "x"
        return record

    def children_cpu_s() -> float:
        used = resource.getrusage(resource.RUSAGE_CHILDREN)
        return used.ru_utime + used.ru_stime

    run = a_run(tmp_path / "run", long_value)
    before = children_cpu_s()
    done = run_cli("report", str(run), cwd=tmp_path, timeout=1200)
    assert done.returncode == 0, done.stderr
    assert children_cpu_s() - before < 120


def test_a_sweeps_progress_lines_show_a_value_as_text(tmp_path):
    (tmp_path / "job.py").write_text("import sys\nsys.exit(0)\n")
    (tmp_path / "m.yaml").write_text(
        "name: shown\nhardware: [{name: box, kind: local}]\n"
        "stacks: [{name: here, executor: process}]\n"
        "workloads:\n"
        "  - name: job\n"
        "    command: [python, job.py, '{label}']\n"
        '    params: {label: ["plain", "\\e[2J[bold]cleared\\u202e"]}\n')
    done = run_cli("run", "m.yaml", "--no-ray", "--db", "none", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "\x1b[2J" not in done.stdout and "\u202e" not in done.stdout
    assert "label=\\x1b[2J[bold]cleared\\u202e" in done.stdout, done.stdout


@pytest.mark.parametrize("args", [
    ["workloads", "sl\u202eeep"],                     # a MatrixError naming the input twice
    ["plan", "m.yaml", "--format", "j\x1b[31mson"],  # the CLI framework's own check
    ["advise", "nowhere\u202e", "--items", "1e6"],   # a path echoed back
])
def test_what_an_error_echoes_of_the_input_is_escaped(args, tmp_path):
    """A name refused for a control character was echoed raw: U+202E reversed the rest of
    the line on screen, an ESC drove the terminal. Every error line shows them as codes."""
    (tmp_path / "m.yaml").write_text(
        "name: m\nhardware: [{name: b, kind: local}]\n"
        "stacks: [{name: s, executor: process}]\nworkloads: [{name: sleep}]\n")
    done = run_cli(*args, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    (line,) = done.stderr.splitlines()
    assert line.isprintable() and ("\\u202e" in line or "\\x1b" in line), line
