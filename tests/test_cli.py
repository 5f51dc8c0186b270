"""The command line: bad input is one clear line and exit code 2 with nothing run;
`--help` stays instant by importing no heavy module."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import PROJECT, run_cli

GOOD = """
name: clitest
hardware: [{name: box, kind: local}]
stacks: [{name: here, executor: process}]
workloads: [{name: sleep, params: {seconds: 0.1}}]
"""

BAD = {
    "malformed": "name: x\nhardware: [\n",
    "not_a_mapping": "- a\n- b\n",
    "unknown_key": GOOD + "repeat: 2\n",
    "unknown_workload": GOOD.replace("name: sleep", "name: nope"),
    "unknown_param": GOOD.replace("seconds:", "minutes:"),
    "wrong_type": GOOD.replace("0.1", "soon"),
    "unknown_kind": GOOD.replace("kind: local", "kind: mainframe"),
    "empty_list": GOOD.replace("[{name: here, executor: process}]", "[]"),
    "duplicate": GOOD.replace("[{name: box, kind: local}]",
                              "[{name: box, kind: local}, {name: box, kind: local}]"),
    "zero_repeats": GOOD + "repeats: 0\n",
    "object_tag": GOOD + "output: !!python/object/apply:os.system ['touch pwned']\n",
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_is_one_line_exit_2_and_nothing_runs(case, matrix_file, tmp_path):
    path = matrix_file(BAD[case])
    result = run_cli("run", str(path), "--no-ray", cwd=tmp_path)
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {path}:"), result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "reports").exists() and not (tmp_path / "pwned").exists()


def test_validate_counts_cells(matrix_file, tmp_path):
    path = matrix_file(GOOD.replace("seconds: 0.1", "seconds: [0.1, 0.2]") + "repeats: 3\n")
    result = run_cli("validate", str(path), cwd=tmp_path)
    assert result.returncode == 0
    assert ("ok: 6 grid cells (repeats included), 6 after the exclude and include rules "
            "(2 configurations)") in result.stdout


def test_bad_only_selector_is_a_clear_error(matrix_file, tmp_path):
    result = run_cli("run", str(matrix_file(GOOD)), "--no-ray", "--only", "colour=red",
                     cwd=tmp_path)
    assert result.returncode == 2 and "no cell has" in result.stderr and "'colour'" in result.stderr


def test_schema_is_json(tmp_path):
    result = run_cli("schema", cwd=tmp_path)
    assert json.loads(result.stdout)["title"] == "matrix-bench matrix file"


def test_a_missing_run_directory_is_a_clear_error(tmp_path):
    result = run_cli("report", str(tmp_path / "nope"), cwd=tmp_path)
    assert result.returncode == 2 and "not a run directory" in result.stderr


HEAVY = ("ray", "torch", "pandas", "pyarrow", "numpy", "boto3", "docker", "tensorflow",
         "jax", "pydantic", "yaml")


def imported_after(code: str, heavy: tuple[str, ...] = HEAVY) -> set[str]:
    probe = (f"import sys\n{code}\n"
             f"print('HEAVY:' + ','.join(m for m in {heavy!r} if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", probe], cwd=PROJECT, capture_output=True,
                         text=True, check=True).stdout
    line = next(line for line in out.splitlines() if line.startswith("HEAVY:"))
    return set(filter(None, line.removeprefix("HEAVY:").split(",")))


def test_help_imports_no_heavy_module():
    code = ("from orchestrator import cli\nsys.argv = ['matrix', '--help']\n"
            "try:\n    cli.main()\nexcept SystemExit:\n    pass")
    assert imported_after(code) == set()


def test_the_worker_imports_nothing_heavy_of_its_own(tmp_path):
    code = "import orchestrator.worker.main"  # the worker package: context, measure, ...
    # importlib.metadata alone costs each cell ~30 ms (bench/overhead.py caught it): it is
    # imported only when a stack pins a framework version.
    assert imported_after(code, (*HEAVY, "importlib.metadata", "email")) == set()


def test_workloads_lists_every_workload_with_what_it_counts(tmp_path):
    from orchestrator.workload_registry import available_workloads, load_workload

    result = run_cli("workloads", cwd=tmp_path, env={"COLUMNS": "80"})
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert max(map(len, lines)) <= 80  # readable in a terminal of 80 columns
    rows = {line.split()[0]: line for line in lines[2:] if not line.startswith(" ")}
    assert set(rows) == set(available_workloads())
    for name, line in rows.items():
        assert f"; counts {load_workload(name).item_unit}s;" in line, line
    assert "by backend" in rows["keras_lstm"]  # its framework is the backend parameter's


def test_workloads_with_a_matrix_lists_and_shows_its_own(tmp_path):
    (tmp_path / "train.py").write_text("print('hi')\n")
    folder = tmp_path / "mine"
    folder.mkdir()
    for name in ("defaults.yaml", "workload.py"):
        (folder / name).write_text((PROJECT / "workloads" / "sleep" / name).read_text())
    matrix = tmp_path / "m.yaml"
    matrix.write_text("name: own\nhardware: [{name: box, kind: local}]\n"
                      "stacks: [{name: here, executor: process}]\nworkloads:\n"
                      "  - {name: my_sleep, path: mine}\n"
                      "  - {name: my_script, command: [python, train.py, '{n}'], "
                      "params: {n: [1, 2]}}\n")
    listed = run_cli("workloads", "-m", str(matrix), cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert f"my_sleep  path {folder}; counts samples;" in listed.stdout
    assert "my_script  command; counts samples;" in listed.stdout
    one = run_cli("workloads", "my_script", "-m", str(matrix), cwd=tmp_path)
    assert one.returncode == 0, one.stderr
    assert "my_script (command, version command+" in one.stdout
    assert next(line for line in one.stdout.splitlines() if line.startswith("│ n "))


def test_workloads_name_lists_its_parameters_and_a_wrong_name_is_one_line(tmp_path):
    from orchestrator.workload_registry import available_workloads

    result = run_cli("workloads", "sleep", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "throughput counts samples" in result.stdout
    fault = next(line for line in result.stdout.splitlines() if line.startswith("│ fault "))
    assert "none, raise, abort" in fault and "'none'" in fault
    seconds = next(line for line in result.stdout.splitlines() if line.startswith("│ seconds "))
    assert "0.001..86400" in seconds
    wrong = run_cli("workloads", "nope", cwd=tmp_path)
    assert wrong.returncode == 2 and wrong.stdout == ""
    known = ", ".join(available_workloads())
    assert wrong.stderr.strip() == (
        f"error: unknown workload 'nope' (known: {known}); a matrix's own workload (path:, "
        "command:) needs its matrix: matrix workloads nope -m MATRIX")
