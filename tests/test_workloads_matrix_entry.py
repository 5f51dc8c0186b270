"""`matrix workloads NAME -m MATRIX` shows what the matrix's own entry of NAME gives its
cells (epochs, timeout, memory limit, values, folder), not only the declaration's defaults,
which for a `command:` entry are no one's (1 epoch, 3600 s); and `matrix workloads NAME` for
a name only a matrix declares is one line that says to give the matrix with -m."""

from __future__ import annotations

from tests.conftest import run_cli, write

MATRIX = """
name: entries
hardware: [{name: box, kind: local}]
stacks: [{name: here, executor: process}]
workloads:
  - name: my_script
    command: [python, train.py, "{batch_size}", "{epochs}"]
    params: {batch_size: [8, 16]}
    epochs: 2
    timeout_s: 300
    memory_limit_mb: 2048
    metrics: [loss]
  - {name: sleep, timeout_s: 30, params: {seconds: [0.1, 0.2]}}
"""


def test_a_matrix_entry_shows_the_epochs_and_timeout_it_gives_its_cells(tmp_path):
    write(tmp_path / "train.py", "print('training')\n")
    write(tmp_path / "m.yaml", MATRIX)
    shown = run_cli("workloads", "my_script", "-m", "m.yaml", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[1] == ("throughput counts samples; in m.yaml: 2 epoch(s), a "
                        "300 s timeout and a 2048 MB memory limit per cell; batch_size=8, 16; "
                        f"cwd {tmp_path}; metrics loss")
    assert lines[2] == "where an entry sets none: 1 epoch(s) and a 3600 s timeout per cell"
    assert "unless the matrix says otherwise" not in shown.stdout

    built_in = run_cli("workloads", "sleep", "-m", "m.yaml", cwd=tmp_path)
    assert built_in.returncode == 0, built_in.stderr
    assert built_in.stdout.splitlines()[1:3] == [
        "throughput counts samples; in m.yaml: 1 epoch(s), a 30 s timeout per cell; "
        "seconds=0.1, 0.2",
        "where an entry sets none: 1 epoch(s) and a 600 s timeout per cell"]

    unnamed = run_cli("workloads", "lstm_lm", "-m", "m.yaml", cwd=tmp_path)
    assert unnamed.returncode == 0, unnamed.stderr
    assert unnamed.stdout.splitlines()[1].endswith(
        "10 epoch(s) and a 3600 s timeout per cell; m.yaml does not name it")


def test_a_matrix_only_workload_without_its_matrix_is_one_line_that_says_m(tmp_path):
    write(tmp_path / "train.py", "print('training')\n")
    write(tmp_path / "m.yaml", MATRIX)
    alone = run_cli("workloads", "my_script", cwd=tmp_path)
    assert alone.returncode == 2 and alone.stdout == ""
    (line,) = alone.stderr.splitlines()
    assert line.startswith("error: unknown workload 'my_script' (known: ")
    assert line.endswith("; a matrix's own workload (path:, command:) needs its matrix: "
                         "matrix workloads my_script -m MATRIX")

    elsewhere = run_cli("workloads", "nope", "-m", "m.yaml", cwd=tmp_path)
    assert elsewhere.returncode == 2 and elsewhere.stdout == ""
    (line,) = elsewhere.stderr.splitlines()
    assert line.endswith("; nor does m.yaml name it (it names my_script, sleep)")
