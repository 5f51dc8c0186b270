"""Bad input is refused before anything runs: a corpus of broken or inconsistent matrix
files, each answered with exit code 2 and one line naming the file, the line and the field;
and the loader fuzzed with hypothesis, where every exception must be a clean SpecError.

Each corpus file's first line says what is expected:
`# expect: LINE FIELD :: FRAGMENT`, with `-` for a line or field the file cannot have.
"""

from __future__ import annotations

import copy
import os
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestrator.errors import MatrixError, SpecError
from orchestrator.images.stack_image import image_problems
from orchestrator.plan.cells import expand
from orchestrator.validate import load_spec
from tests.conftest import run_cli

pytestmark = pytest.mark.slow  # sweeps, real training or fuzzing: not the fast tier

CORPUS = Path(__file__).parent / "bad_matrices"
FILES = sorted(CORPUS.glob("*.yaml"))
FUZZ = settings(max_examples=250, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture])


def expectation(path: Path) -> tuple[int | None, str | None, str]:
    header = path.read_bytes().split(b"\n", 1)[0].decode("ascii")
    assert header.startswith("# expect: "), path
    where, fragment = header.removeprefix("# expect: ").split(" :: ", 1)
    line, field = where.split(" ", 1)
    return (None if line == "-" else int(line)), (None if field == "-" else field), fragment


def cli(args: list[str], capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> tuple[int, str]:
    """`matrix ARGS` in this process, through the same main() users run: (exit code, stderr)."""
    from orchestrator.cli import main

    monkeypatch.setattr(sys, "argv", ["matrix", *args])
    with pytest.raises(SystemExit) as ended:
        main()
    return ended.value.code or 0, capsys.readouterr().err


def expected_line(path: Path | str, line: int | None, field: str | None) -> str:
    where = f"{path}:{line}" if line else f"{path}"
    return f"error: {where}:" + (f" {field}:" if field else "")


def test_the_corpus_covers_at_least_forty_cases():
    assert len(FILES) >= 40


@pytest.mark.parametrize("path", FILES, ids=[f.stem for f in FILES])
def test_a_bad_matrix_is_one_line_exit_2_and_nothing_runs(path, capsys, monkeypatch,
                                                          tmp_path):
    line, field, fragment = expectation(path)
    code, err = cli(["validate", str(path)], capsys, monkeypatch)
    assert code == 2, err
    (message,) = err.strip().splitlines()
    assert message.startswith(expected_line(path, line, field) + " "), message
    assert fragment in message, message
    run_dir = tmp_path / "run"
    code, err = cli(["run", str(path), "-o", str(run_dir), "--no-ray"], capsys, monkeypatch)
    assert (code, err.strip()) == (2, message)  # the same line, before anything starts
    assert not run_dir.exists()


def test_a_directory_is_refused_in_one_line(tmp_path):
    folder = tmp_path / "matrix.yaml"
    folder.mkdir()
    result = run_cli("run", str(folder), "-o", str(tmp_path / "run"), cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip() == f"error: {folder}: is a directory, not a matrix file"
    assert not (tmp_path / "run").exists()


def test_a_matrix_read_from_a_pipe_is_validated(tmp_path):
    """Pipes are not refused like directories: `matrix validate <(envsubst < tpl)` works."""
    fifo = tmp_path / "matrix.fifo"
    os.mkfifo(fifo)
    source = Path(__file__).parents[2] / "matrix" / "local.yaml"
    writer = subprocess.Popen(["dd", f"if={source}", f"of={fifo}", "status=none"])
    try:
        result = run_cli("validate", str(fifo), cwd=tmp_path, timeout=60)
    finally:
        writer.kill()
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().startswith(f"{fifo}: ok: ")


@pytest.mark.parametrize(("make", "problem"), [
    (lambda path: None, "file not found"),
    (lambda path: path.write_bytes(b"# " + b"x" * (10 * 2**20)), "larger than 10 MiB"),
])
def test_a_missing_or_huge_file_is_refused_in_one_line(make, problem, tmp_path, capsys,
                                                      monkeypatch):
    path = tmp_path / "matrix.yaml"
    make(path)
    code, err = cli(["run", str(path), "-o", str(tmp_path / "run"), "--no-ray"], capsys,
                    monkeypatch)
    assert code == 2 and err.strip().startswith(f"error: {path}: {problem}"), err
    assert not (tmp_path / "run").exists()


HEAD = ("name: big\nhardware: [{name: box, kind: local}]\n"
        "stacks: [{name: here, executor: process}]\n")


SECONDS = ", ".join(f"{0.001 * i:.3f}" for i in range(1, 3001))
MESSAGES = ", ".join(f"m{i}" for i in range(3000))
LONG_LIST = ", ".join(str(i) for i in range(200_000))


@pytest.mark.parametrize(("body", "problem"), [
    # 9,000,000 cells, counted from the axes' sizes; building them ran away before.
    (f"workloads: [{{name: sleep, params: {{seconds: [{SECONDS}], message: [{MESSAGES}]}}}}]\n"
     "max_cells: 100000\n",
     "4 workloads[0].params: the matrix expands to 9,000,000 cells, over max_cells 100,000"),
    # A list of 200,000 values is refused for its length, not taken for an alias bomb.
    (f"workloads: [{{name: sleep, params: {{message: [{LONG_LIST}]}}}}]\n",
     "4 workloads[0].params.message[99985]: the document holds more than 100,000 values"),
], ids=["3000x3000", "200000-values"])
def test_a_grid_too_big_is_refused_for_what_it_is_without_building_it(body, problem,
                                                                       tmp_path):
    path = tmp_path / "big.yaml"
    path.write_text(HEAD + body)
    result = run_cli("validate", str(path), cwd=tmp_path, timeout=60)
    assert result.returncode == 2, result.stderr
    line, _, fragment = problem.partition(" ")
    assert result.stderr.strip().startswith(f"error: {path}:{line}: {fragment}"), result.stderr
    assert "aliases" not in result.stderr


@pytest.mark.parametrize(("pin", "ok"), [("2.16.0", False), ("2.13", True),
                                         ("2.13.0+cpu", True), ("2.16.0rc1", True)])
def test_a_framework_newer_than_the_release_table_is_a_warning_not_an_error(
        pin, ok, matrix_file, capsys, monkeypatch):
    path = matrix_file("name: newer\nhardware: [{name: box, kind: local}]\n"
                       f"stacks: [{{name: t, executor: process, framework: torch, "
                       f"framework_version: '{pin}'}}]\n"
                       "workloads: [{name: sleep, params: {seconds: 0.1}}]\n")
    code, err = cli(["validate", "--offline", str(path)], capsys, monkeypatch)
    assert code == 0, err
    warned = [line for line in err.splitlines() if line.strip()]
    assert warned == ([] if ok else [
        f"warning: {path}:3: stacks[0].framework_version: torch {pin} is newer than the "
        "releases this matrix-bench knows (to 2.15.0): not checked (--offline)"])


@pytest.mark.parametrize(("rules", "field", "problem"), [
    ("exclude:\n  - {params: {seconds: 0.5}}\n", "exclude[0]", "matches no cell"),
    ("include:\n  - {workload: sleep, params: {seconds: 0.1}}\n", "include[0]", "adds no cell"),
])
def test_a_rule_that_changes_nothing_is_a_located_warning(rules, field, problem, matrix_file,
                                                          capsys, monkeypatch):
    """Not an error: a matrix written from a template may carry rules for other cases."""
    path = matrix_file("name: warned\nhardware: [{name: box, kind: local}]\n"
                       "stacks: [{name: here, executor: process}]\n"
                       "workloads: [{name: sleep, params: {seconds: [0.1, 0.2]}}]\n" + rules)
    code, err = cli(["validate", str(path)], capsys, monkeypatch)
    assert code == 0, err  # it validates
    (line,) = [x for x in err.splitlines() if x.strip()]
    assert line.startswith(f"warning: {path}:6: {field}: ") and problem in line


@pytest.mark.parametrize("name", ["non_utf8_bytes", "python_object_tag", "unknown_aws_region",
                                  "impossible_date", "nested_past_the_parser_stack",
                                  "dockerfile_lines_in_base_image"])
def test_the_installed_command_refuses_the_same_way(name, tmp_path):
    """A few cases through a real `matrix` process, as users meet them."""
    path = CORPUS / f"{name}.yaml"
    line, field, fragment = expectation(path)
    result = run_cli("run", str(path), "-o", str(tmp_path / "run"), cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    (message,) = result.stderr.strip().splitlines()
    assert message.startswith(expected_line(path, line, field)) and fragment in message
    assert "Traceback" not in result.stderr and not (tmp_path / "run").exists()
    assert not list(tmp_path.rglob("PWNED"))


# -- fuzzing ---------------------------------------------------------------------------------

VALID = {
    "name": "fuzz",
    "hardware": [{"name": "box", "kind": "local"},
                 {"name": "p3", "kind": "ec2", "instance_type": "p3.2xlarge", "gpus": 1,
                  "spot": True}],
    "stacks": [{"name": "here", "executor": "process"},
               {"name": "t", "framework": "torch", "framework_version": "2.5.1",
                "cuda": "12.4", "cudnn": "9.1", "python": "3.11",
                "base_image": "nvidia/cuda:12.4.1-runtime-ubuntu22.04"}],
    "workloads": [{"name": "sleep", "params": {"seconds": [0.1, 0.2], "steps": 2},
                   "timeout_s": 60, "memory_limit_mb": 512},
                  {"name": "lstm_lm", "preset": "tiny", "epochs": 1}],
    "include": [{"workload": "sleep", "hardware": "box", "params": {"seconds": 0.3}}],
    "exclude": [{"hardware": "p3", "workload": "sleep"}],
    "repeats": 2,
    "budget_usd": 10,
    "max_cells": 500,
    "images": {"registry": "localhost:5000/matrix-bench"},
    "aws": {"region": "us-east-1", "instance_profile": "node", "ami": "ami-0123456789abcdef0",
            "ssh_cidr": "203.0.113.7/32", "results_uri": "s3://bucket/sweeps",
            "max_lifetime_hours": 6},
}
# Scalars as YAML text, where PyYAML's own constructors have raised bare exceptions.
TRICKY = ["!!int x", "!!float x", "!!bool x", "!!timestamp x", "!!binary '#'", "!!null x",
          "2020-13-45", "2001-12-14t21:59:43.10-05:00", "9" * 4400, "1e400", "-.inf", ".nan",
          "0x1F", "0o17", "1_000", "~", "yes", "''", "!!set {a}", "!!omap [a]", "!!pairs [1]",
          "!!str {a: 1}", "!!map [1]", "!!seq {a: 1}", "!foo x", "!!python/name:os.system",
          "{<<: 5}", "{<<: [1]}", "{<<: {name: x}}", "*nope", "&a [*a]", "[[[[[[[[]]]]]]]]",
          "{1: 2}", "{null: 1}", "{[a]: 1}", "=", "<<", "\"a\\x00b\"", "\"\\ud800\""]

scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6),
                    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=20))
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)),
    max_leaves=6)


def paths_of(node: object, prefix: tuple = ()) -> list[tuple]:
    found = [prefix]
    if isinstance(node, dict):
        for key, value in node.items():
            found += paths_of(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found += paths_of(value, (*prefix, index))
    return found


@st.composite
def mutated(draw: st.DrawFn) -> dict:
    """The valid matrix with a few of its nodes replaced, deleted or given extra keys."""
    doc = copy.deepcopy(VALID)
    for _ in range(draw(st.integers(1, 3))):
        paths = [p for p in paths_of(doc) if p]
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent = doc
        for part in path[:-1]:
            parent = parent[part]
        action = draw(st.sampled_from(["replace", "delete", "add"]))
        if action == "replace":
            parent[path[-1]] = draw(values)
        elif action == "delete":
            del parent[path[-1]]
        elif isinstance(parent, dict):
            parent[draw(st.text(min_size=1, max_size=8))] = draw(values)
    return doc


def load_or_refuse(path: Path) -> None:
    """load_spec either gives a spec that expands, or raises a one-line SpecError: what
    `matrix validate` does with a file."""
    try:
        spec = load_spec(path)
    except SpecError as exc:
        assert "\n" not in str(exc), str(exc)
        return
    expand(spec)
    image_problems(spec)


def test_the_fuzzed_matrix_is_valid_before_it_is_mutated(tmp_path):
    path = tmp_path / "valid.yaml"
    path.write_text(yaml.safe_dump(VALID))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # and every rule in it changes something
        assert len(expand(load_spec(path))) == 20


@FUZZ
@given(data=st.binary(max_size=400))
def test_arbitrary_bytes_never_crash_the_loader(data, tmp_path):
    path = tmp_path / "fuzz.yaml"
    path.write_bytes(data)
    load_or_refuse(path)


@FUZZ
@given(text=st.text(alphabet=st.sampled_from(list(":-[]{}&*!|>'\"#,? \n\tabc01.")),
                    max_size=200))
def test_yaml_shaped_text_never_crashes_the_loader(text, tmp_path):
    path = tmp_path / "fuzz.yaml"
    path.write_text(text)
    load_or_refuse(path)


@FUZZ
@given(doc=mutated())
def test_a_mutated_matrix_is_loaded_or_refused_cleanly(doc, tmp_path):
    path = tmp_path / "fuzz.yaml"
    path.write_text(yaml.safe_dump(doc, allow_unicode=True))
    try:
        load_or_refuse(path)
    except MatrixError as exc:  # pragma: no cover - would be a SpecError's sibling
        pytest.fail(f"{type(exc).__name__} instead of a SpecError: {exc}")


@st.composite
def retyped(draw: st.DrawFn) -> str:
    """The valid matrix as YAML text, with one scalar's text replaced by a tricky one."""
    lines = yaml.safe_dump(VALID, default_flow_style=False).splitlines()
    scalar = [i for i, line in enumerate(lines) if re.match(r"^\s*(- )?[\w.]+: \S", line)]
    index = draw(st.sampled_from(scalar))
    key = lines[index].split(": ", 1)[0]
    lines[index] = f"{key}: {draw(st.sampled_from(TRICKY))}"
    return "\n".join(lines) + "\n"


@FUZZ
@given(text=retyped())
def test_a_retyped_scalar_is_loaded_or_refused_cleanly(text, tmp_path):
    path = tmp_path / "fuzz.yaml"
    path.write_text(text)
    load_or_refuse(path)
