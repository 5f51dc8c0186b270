"""A run directory as people and accidents leave it: a journal line that is no record, a
journal a newer matrix-bench wrote, another matrix's run, outputs that cannot be written.
Each is one located warning (and everything else read) or one line and exit code 2, never
a traceback, and the journal keeps every line it had."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.results.journal import JournalLineError, NewerRecordError, parse_line
from orchestrator.results.records import SCHEMA_VERSION
from orchestrator.results.run_directory import JournalWarning, RunDirectory
from tests.conftest import cell_records, run_cli, write

pytestmark = pytest.mark.slow  # sweeps, real training or fuzzing: not the fast tier

MATRIX = """
    name: {name}
    hardware: [{{name: box, kind: local}}]
    stacks: [{{name: here, executor: process}}]
    workloads: [{{name: sleep, params: {{seconds: {seconds}}}, epochs: 1}}]
    """


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    """A run of two cells, once per module; each test works on a copy."""
    root = tmp_path_factory.mktemp("finished")
    write(root / "m.yaml", MATRIX.format(name="jt", seconds="[0.01, 0.02]"))
    done = run_cli("run", "m.yaml", "--no-ray", cwd=root)
    assert done.returncode == 0, done.stderr
    return root


@pytest.fixture
def run(finished, tmp_path) -> Path:
    shutil.copytree(finished, tmp_path, dirs_exist_ok=True)
    return tmp_path / "reports" / "jt"


def a_record(run: Path, **changes: object) -> str:
    record = json.loads((run / "results.jsonl").read_text().splitlines()[-1])
    for key, value in changes.items():
        if value is KeyError:
            record.pop(key)
        else:
            record[key] = value
    return json.dumps(record)


def insert(run: Path, line: str, at: int = 3) -> list[str]:
    """Put `line` in the journal as its line `at`; the journal's lines after that."""
    lines = (run / "results.jsonl").read_text().splitlines()
    lines.insert(at - 1, line)
    (run / "results.jsonl").write_text("\n".join(lines) + "\n")
    return lines


NOT_RECORDS = ["42", "null", '"s"', "[1, 2]", "true"]
BAD_VERSIONS = [KeyError, 0, -1, "2", True, 2.5]


@pytest.mark.parametrize("line", NOT_RECORDS + [f"version:{v!r}" for v in BAD_VERSIONS])
def test_a_line_that_is_no_record_is_refused_with_its_reason(run, line):
    if line.startswith("version:"):
        version = BAD_VERSIONS[[f"version:{v!r}" for v in BAD_VERSIONS].index(line)]
        line = a_record(run, schema_version=version)
    with pytest.raises(JournalLineError) as refused:
        parse_line(line)
    assert "not a record" in str(refused.value) or "schema_version" in str(refused.value)


@pytest.mark.parametrize("bad", ["42", "null", "[1, 2]", "version:missing", "version:text"])
def test_a_bad_line_is_a_located_warning_in_run_report_and_ls(run, bad):
    line = {"version:missing": lambda: a_record(run, schema_version=KeyError),
            "version:text": lambda: a_record(run, schema_version="2")}.get(bad, lambda: bad)()
    lines = insert(run, line)
    folder = run.parent.parent
    for args in (["ls"], ["report", str(run)], ["run", "m.yaml", "--no-ray"]):
        done = run_cli(*args, cwd=folder)
        assert done.returncode == 0 and "Traceback" not in done.stderr, (args, done.stderr)
        assert f"{run / 'results.jsonl'}:3: unreadable line skipped" in done.stderr, args
    assert "reports/jt" in run_cli("ls", cwd=folder).stdout  # listed, with its cells
    assert (run / "results.jsonl").read_text().splitlines()[:len(lines)] == lines  # kept
    with pytest.warns(JournalWarning):
        ended = RunDirectory(run).results()
    assert [r.cell.status for r in ended] == ["ok", "ok"]  # none lost, none rerun


def test_a_journal_of_a_newer_version_is_read_around_and_never_appended_to(run):
    newer = a_record(run, schema_version=SCHEMA_VERSION + 1)
    with pytest.raises(NewerRecordError):
        parse_line(newer)
    insert(run, newer)
    before = (run / "results.jsonl").read_bytes()
    folder = run.parent.parent
    done = run_cli("run", "m.yaml", "--no-ray", "--rerun", cwd=folder)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [
        f"error: {run / 'results.jsonl'}:3: written by a newer matrix-bench (schema_version "
        f"{SCHEMA_VERSION + 1}; this one knows {SCHEMA_VERSION}): upgrade matrix-bench to "
        "add to this run"]
    assert (run / "results.jsonl").read_bytes() == before
    report = run_cli("report", str(run), cwd=folder)  # reading around it still works
    assert report.returncode == 0 and "newer than this matrix-bench" in report.stderr


def test_two_matrices_in_one_directory_are_refused_and_an_edited_one_resumes(run):
    folder = run.parent.parent
    before = (run / "results.jsonl").read_bytes()
    write(folder / "other.yaml", MATRIX.format(name="other", seconds=0.01))
    done = run_cli("run", "other.yaml", "-o", str(run), "--no-ray", cwd=folder)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.strip().splitlines() == [
        f"error: {run} holds the run of matrix 'jt', not 'other': one matrix name per run "
        "directory (give this one another -o)"]
    assert (run / "results.jsonl").read_bytes() == before
    write(folder / "m.yaml", MATRIX.format(name="jt", seconds="[0.01, 0.02, 0.03]"))
    resumed = run_cli("run", "m.yaml", "--no-ray", cwd=folder)  # the same run, edited
    assert resumed.returncode == 0, resumed.stderr
    assert len(cell_records(run)) == 3  # the two it had, and the one added


@pytest.fixture
def read_only(tmp_path: Path) -> Iterator[Path]:
    """A folder no sweep can write in: a read-only tmpfs for root (whom modes do not stop),
    a folder of mode 0500 for anyone else."""
    folder = tmp_path / "ro"
    folder.mkdir()
    if os.geteuid() == 0:
        subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(folder)],
                       check=True)
    else:
        folder.chmod(0o500)
    try:
        yield folder
    finally:
        if os.geteuid() == 0:
            subprocess.run(["umount", "-l", str(folder)], check=False)
        else:
            folder.chmod(0o700)


@pytest.mark.parametrize("where", ["a file", "/proc/self", "read-only", "parquet is a folder",
                                   "report is a folder"])
def test_an_output_that_cannot_be_written_is_one_line(run, tmp_path, read_only, where):
    folder = run.parent.parent
    output = {"a file": tmp_path / "plain", "/proc/self": Path("/proc/self"),
              "read-only": read_only / "run"}.get(where, run)
    if where == "a file":
        output.write_text("not a directory\n")
    if where.endswith("is a folder"):
        target = run / ("results.parquet" if where.startswith("parquet") else "report.md")
        target.unlink()
        target.mkdir()
    before = (run / "results.jsonl").read_bytes()
    done = run_cli("run", "m.yaml", "-o", str(output), "--no-ray", cwd=folder)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert done.stderr.startswith("error: ") and str(output) in done.stderr, done.stderr
    assert (run / "results.jsonl").read_bytes() == before
    if output == run:  # `matrix report` of it says the same, in one line
        report = run_cli("report", str(output), cwd=folder)
        assert report.returncode == 2 and len(report.stderr.strip().splitlines()) == 1, \
            report.stderr


def test_a_sweep_refused_before_any_cell_leaves_no_run_behind(run, tmp_path):
    """`matrix run --only nope=1` once left the new run's cells/ and logs/ (and its folder)
    behind; a run that already holds cells keeps every file it had."""
    matrix = tmp_path / "m.yaml"
    write(matrix, MATRIX.format(name="jt", seconds="[0.01, 0.02]"))
    (tmp_path / "empty").mkdir()
    for output in ("fresh", "empty"):
        done = run_cli("run", str(matrix), "-o", str(tmp_path / output), "--only", "nope=1",
                       "--no-ray", "--db", "none", cwd=tmp_path)
        assert done.returncode == 2 and "called 'nope'" in done.stderr, done.stderr
    assert not (tmp_path / "fresh").exists()
    assert list((tmp_path / "empty").iterdir()) == []

    before = sorted(p.relative_to(run) for p in run.rglob("*"))
    done = run_cli("run", str(matrix), "-o", str(run), "--only", "nope=1", "--no-ray",
                   "--db", "none", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert sorted(p.relative_to(run) for p in run.rglob("*")) == before
