"""What counts as a change of a user's code (issue 43): a comment, a docstring or formatting
moves no id; a change of what the code says does; a command workload's identity is its
script (and what git tracks, or what `files:` names), never what the script writes."""

from __future__ import annotations

import subprocess
from pathlib import Path

from orchestrator.code_identity import code_hash
from orchestrator.plan.cells import expand
from orchestrator.scaffold import new_workload
from orchestrator.validate import load_spec
from tests.conftest import assert_refused_in_one_line, journal, run_cli, write

SOURCE = '''"""A model."""
import math


def scale(x, factor=2):
    """Twice x."""
    return x * factor + math.pi
'''
SAME = '''"""A model, described at length."""
import math

# a comment


def scale(x,
          factor=2):  # another
    return (x * factor
            + math.pi)
'''


def hashed(folder: Path, name: str, text: str) -> str:
    (folder / name).write_text(text)
    return code_hash([folder / name], folder)


def test_the_hash_is_of_what_the_code_says_not_its_bytes(tmp_path):
    first = hashed(tmp_path, "model.py", SOURCE)
    assert hashed(tmp_path, "model.py", SAME) == first
    assert hashed(tmp_path, "model.py", SOURCE.replace("factor=2", "factor=3")) != first
    assert hashed(tmp_path, "model.py", SOURCE.replace("x * factor", "factor * x")) != first
    broken = hashed(tmp_path, "model.py", SOURCE + "def (\n")  # no syntax: its bytes count
    assert broken != first and hashed(tmp_path, "model.py", SOURCE + "def (\n ") != broken
    data = hashed(tmp_path, "defaults.yaml", "version: 1\nparams: {a: 1}\n")
    assert hashed(tmp_path, "defaults.yaml", "# note\nversion: 1\nparams:\n  a: 1\n") == data
    assert hashed(tmp_path, "defaults.yaml", "version: 1\nparams: {a: 2}\n") != data


def folder_ids(matrix: Path) -> list[str]:
    return sorted(c.config_id for c in expand(load_spec(matrix)))


def test_a_comment_only_edit_of_a_path_workload_leaves_its_ids(tmp_path):
    folder = tmp_path / "mine"
    new_workload("my_net", folder)
    matrix = write(tmp_path / "m.yaml", "name: own\nhardware: [{name: box, kind: local}]\n"
                   "stacks: [{name: here, executor: process}]\n"
                   "workloads: [{name: my_net, path: mine, preset: tiny}]\n")
    first = folder_ids(matrix)
    model = folder / "workload.py"
    original = model.read_text()
    write(model, "# tuned on Tuesday\n" + original.replace("\n\n\n", "\n\n\n\n") + "\n# end\n")
    assert folder_ids(matrix) == first
    write(model, original + "\nEXTRA_LAYERS = 1\n")
    assert not set(folder_ids(matrix)) & set(first)


PLAIN = ("import json, pathlib, sys\n"
         "pathlib.Path('last_run.json').write_text(json.dumps(sys.argv))\n")
COMMAND = ("name: cmd\nhardware: [{{name: box, kind: local}}]\n"
           "stacks: [{{name: here, executor: process}}]\n"
           "workloads:\n  - name: script\n    command: [python, train.py, '{{n}}']\n"
           "    params: {{n: [1, 2]}}\n{extra}")


def command_ids(root: Path) -> list[str]:
    return folder_ids(root / "m.yaml")


def test_a_commands_identity_is_its_script_not_what_it_writes_or_sits_beside(tmp_path):
    write(tmp_path / "train.py", PLAIN)
    write(tmp_path / "m.yaml", COMMAND.format(extra=""))
    first = command_ids(tmp_path)
    write(tmp_path / "last_run.json", '["train.py"]')  # what the script writes
    (tmp_path / "notes").mkdir()
    write(tmp_path / "notes" / "todo.txt", "try a bigger batch\n")
    write(tmp_path / "other.yaml", COMMAND.format(extra="    epochs: 3\n"))  # a sibling matrix
    write(tmp_path / "helper.py", "X = 1\n")  # untracked, undeclared
    write(tmp_path / "train.py", "# reformatted\n" + PLAIN)
    assert command_ids(tmp_path) == first
    write(tmp_path / "train.py", PLAIN.replace("sys.argv", "sys.argv[1:]"))
    assert not set(command_ids(tmp_path)) & set(first)


def test_in_a_git_work_tree_the_tracked_files_count_and_files_globs_choose(tmp_path):
    write(tmp_path / "train.py", PLAIN)
    write(tmp_path / "helper.py", "X = 1\n")
    write(tmp_path / "m.yaml", COMMAND.format(extra=""))
    outside = command_ids(tmp_path)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], cwd=tmp_path, check=True)
    subprocess.run([*git, "add", "train.py", "helper.py", "m.yaml"], cwd=tmp_path, check=True)
    tracked = command_ids(tmp_path)
    assert tracked != outside  # helper.py counts now
    write(tmp_path / "helper.py", "X = 2\n")
    assert command_ids(tmp_path) != tracked
    write(tmp_path / "scratch.py", "Y = 1\n")  # untracked
    assert len(set(command_ids(tmp_path)) & set(tracked)) == 0

    write(tmp_path / "m.yaml", COMMAND.format(extra="    files: ['train.py']\n"))
    declared = command_ids(tmp_path)
    write(tmp_path / "helper.py", "X = 3\n")
    assert command_ids(tmp_path) == declared


def test_a_files_glob_that_matches_nothing_or_leaves_the_folder_is_one_line(tmp_path):
    write(tmp_path / "train.py", PLAIN)
    for glob, problem in (("src/*.py", "'src/*.py' matches no file in"),
                          ("../*.py", "'../*.py': a glob under the command's folder")):
        assert_refused_in_one_line(
            tmp_path, f"{{name: script, command: [python, train.py], files: ['{glob}']}}",
            "workloads[0].files[0]", problem)


def test_a_command_that_writes_into_its_own_folder_resumes_without_rerunning(tmp_path):
    write(tmp_path / "train.py", PLAIN)
    matrix = write(tmp_path / "m.yaml", COMMAND.format(extra=""))
    first = run_cli("run", str(matrix), "--no-ray", "--db", "none", cwd=tmp_path)
    assert first.returncode == 0, first.stdout + first.stderr
    assert (tmp_path / "last_run.json").is_file()
    again = run_cli("run", str(matrix), "--no-ray", "--db", "none", cwd=tmp_path)
    assert again.returncode == 0, again.stdout + again.stderr
    cells = [r for r in journal(tmp_path / "reports" / "cmd") if r["record"] == "cell"]
    assert len(cells) == 2 and "skipped: 2 already done" in again.stdout, again.stdout


def test_a_workload_may_keep_its_code_out_of_its_identity(tmp_path):
    from orchestrator.spec.loaded import workloads_of

    def my_net():  # as this matrix resolves it, loaded afresh
        return workloads_of(load_spec(matrix)).load("my_net")

    folder = tmp_path / "mine"
    new_workload("my_net", folder)
    defaults = folder / "defaults.yaml"
    defaults.write_text(defaults.read_text() + "code_hash: false\n")
    matrix = write(tmp_path / "m.yaml", "name: own\nhardware: [{name: box, kind: local}]\n"
                   "stacks: [{name: here, executor: process}]\n"
                   "workloads: [{name: my_net, path: mine, preset: tiny}]\n")
    first, code = folder_ids(matrix), my_net().code
    assert my_net().version == "1" and code
    write(folder / "workload.py", (folder / "workload.py").read_text() + "\nEXTRA = 1\n")
    assert folder_ids(matrix) == first  # its declared version alone is its identity
    assert my_net().code not in (None, code)  # the hash, for provenance

    write(tmp_path / "train.py", PLAIN)
    write(tmp_path / "m.yaml", COMMAND.format(extra="    code_hash: false\n"))
    commanded = command_ids(tmp_path)
    write(tmp_path / "train.py", PLAIN.replace("sys.argv", "sys.argv[1:]"))
    assert command_ids(tmp_path) == commanded
    assert_refused_in_one_line(tmp_path / "mine", "{name: sleep, code_hash: false}",
                               "workloads[0].code_hash", "only a command workload")


def test_compare_names_the_code_where_the_version_leaves_it_out():
    import pandas as pd

    from orchestrator.report.compare import code_change

    def side(code: str) -> pd.DataFrame:
        return pd.DataFrame({"config_id": ["c"], "workload_version": ["1"],
                             "workload_code": [code], "workload_revision": ["a" * 40]})

    assert code_change(side("3fa2c9d01b2e"), side("9c0d1e2f3a4b"), "c") == (
        "1 (code 3fa2c9d01b2e) (git aaaaaaaaaaaa)", "1 (code 9c0d1e2f3a4b) (git aaaaaaaaaaaa)")
    assert code_change(side("3fa2c9d01b2e"), side("3fa2c9d01b2e"), "c") is None
