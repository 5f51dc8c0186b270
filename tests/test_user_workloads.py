"""Your own workload folder, outside the project (`path:` in the matrix): it runs through the
real worker in a process and in a stack image, its code hash is part of its version and of
the image's tag (when the code changes, and only then), `matrix report` finds it again from
the journal, and a folder that is no workload is one located line."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest

from orchestrator.images.stack_image import render
from orchestrator.plan.cells import expand
from orchestrator.spec.model import Images, Stack
from orchestrator.validate import load_spec
from orchestrator.workload_registry import folder_code
from tests.conftest import (
    PROJECT,
    assert_refused_in_one_line,
    assert_statuses,
    journal,
    run_cli,
    write,
)

DEFAULTS = """
version: "1"
description: "A user's workload: sums a range per step."
item_unit: sample
epochs: 2
params:
  n: {type: int, default: 1000, min: 1}
  steps: {type: int, default: 5, min: 2}
"""
WORKLOAD = """
from helper import total  # a module beside workload.py, imported by its plain name

from .flops import flops_per_item  # and one imported relatively


def run(ctx):
    assert flops_per_item(ctx.params) == ctx.params["n"]
    for epoch in ctx.epoch_range():
        meter = ctx.start_epoch(warmup_steps=1)
        for _ in range(ctx.params["steps"]):
            with meter.step(items=1):
                total(ctx.params["n"])
        ctx.end_epoch(epoch, meter)
"""


def make_folder(root: Path) -> Path:
    folder = root / "my_model"
    folder.mkdir(parents=True)
    write(folder / "defaults.yaml", DEFAULTS)
    write(folder / "workload.py", WORKLOAD)
    write(folder / "helper.py", "def total(n):\n    return sum(range(n))\n")
    write(folder / "flops.py", "def flops_per_item(params):\n    return float(params['n'])\n")
    return folder


def matrix(root: Path, stack: str = "{name: here, executor: process}", extra: str = "") -> Path:
    return write(root / "m.yaml", f"""
        name: mine
        hardware: [{{name: box, kind: local}}]
        stacks: [{stack}]
        workloads:
          - {{name: my_model, path: ./my_model, params: {{n: [1000, 20000]}}}}
        """ + extra)


@pytest.mark.slow
def test_a_folder_outside_the_project_runs_and_reports_like_a_built_in(tmp_path):
    make_folder(tmp_path)
    done = run_cli("run", str(matrix(tmp_path)), "--no-ray", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    run_dir = tmp_path / "reports" / "mine"
    assert_statuses(run_dir, ["ok", "ok"])
    rows = pd.read_parquet(run_dir / "results.parquet")
    assert len(rows) == 4 and (rows["items_per_s"] > 0).all()  # 2 cells x 2 epochs
    assert sorted(rows["flops_per_item"].unique()) == [1000.0, 20000.0]  # its flops.py
    assert set(rows["workload_dir"]) == {str((tmp_path / "my_model").resolve())}
    assert "A user's workload: sums a range per step." in (run_dir / "report.md").read_text()

    # `matrix report` in a new process finds the workload again through the journal
    (run_dir / "report.md").unlink()
    again = run_cli("report", str(run_dir), cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert "## my_model" in (run_dir / "report.md").read_text()
    shutil.move(tmp_path / "my_model", tmp_path / "elsewhere")
    gone = run_cli("report", str(run_dir), cwd=tmp_path)  # from the recorded declaration
    assert gone.returncode == 0, gone.stderr
    assert "came from" in gone.stderr and "reported from its recorded declaration" in gone.stderr
    assert "## my_model" in (run_dir / "report.md").read_text()
    (run_dir / "workloads.json").unlink()  # a run made before runs kept it
    older = run_cli("report", str(run_dir), cwd=tmp_path)
    assert older.returncode == 2 and "put it back" in older.stderr


def config_ids(root: Path) -> list[str]:
    return [cell.config_id for cell in expand(load_spec(root / "m.yaml"))]


def test_the_folders_code_moves_its_ids_and_nothing_else_does(tmp_path):
    folder = make_folder(tmp_path)
    matrix(tmp_path)
    first = config_ids(tmp_path)
    write(folder / "README.md", "notes: not code\n")
    write(folder / "test_my_model.py", "def test_it():\n    pass\n")  # its tests: not code
    (folder / "__pycache__").mkdir()
    (folder / "__pycache__" / "workload.cpython-311.pyc").write_bytes(b"\0cache")
    assert config_ids(tmp_path) == first
    write(folder / "helper.py", "def total(n):\n    return sum(range(n + 1))\n")
    changed = config_ids(tmp_path)
    assert len(set(changed)) == 2 and not set(changed) & set(first)
    (cell, *_) = expand(load_spec(tmp_path / "m.yaml"))
    assert cell.workload_version.startswith("1+") and cell.workload_dir == str(folder.resolve())


def own(folder: Path) -> dict[str, tuple[Path, list[Path]]]:
    """What a matrix naming `folder` as my_model gives an image (own_workload_files)."""
    return {"my_model": (folder, folder_code(folder))}


def test_the_image_carries_the_folder_and_its_tag_follows_the_code(tmp_path):
    folder = make_folder(tmp_path)
    (tmp_path / "locks").mkdir()
    (tmp_path / "locks" / "s.txt").write_text("torch==2.13.0+cpu --hash=sha256:" + "a" * 64)
    stack = Stack(name="s", framework="torch", framework_version="2.13.0")
    images = Images(locks=str(tmp_path / "locks"))
    bare = render(stack, images)
    carried = render(stack, images, own(folder))
    assert carried.tag != bare.tag
    assert {path for path, _ in carried.code} - {path for path, _ in bare.code} == {
        "user_workloads/my_model/defaults.yaml", "user_workloads/my_model/flops.py",
        "user_workloads/my_model/helper.py", "user_workloads/my_model/workload.py"}
    write(folder / "notes.txt", "not code\n")
    assert render(stack, images, own(folder)).tag == carried.tag
    write(folder / "flops.py", "def flops_per_item(params):\n    return 2.0 * params['n']\n")
    assert render(stack, images, own(folder)).tag != carried.tag


@pytest.mark.docker
def test_a_folder_runs_in_a_stack_image(image_env, tmp_path):
    make_folder(tmp_path)
    path = matrix(tmp_path, image_env.stack("torch-cpu"), image_env.images_section())
    done = run_cli("run", str(path), "--no-ray", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    run_dir = tmp_path / "reports" / "mine"
    assert_statuses(run_dir, ["ok", "ok"])
    provenance = [r for r in journal(run_dir) if r["record"] == "provenance"]
    assert all(p["image_tag"].startswith("matrix-bench:") for p in provenance)
    # the driver records where the folder is here, not where the image carries it
    assert {p["workload_dir"] for p in provenance} == {str((tmp_path / "my_model").resolve())}


@pytest.mark.parametrize(("entry", "where", "problem"), [
    ("{name: my_model, path: ./nowhere}", "workloads[0].path", "nowhere is not a folder"),
    ("{name: my_model, path: ./empty}", "workloads[0].path",
     "is not a workload folder: it has no defaults.yaml"),
    ("{name: sleep, path: ./my_model}", "workloads[0].path",
     "'sleep' is a built-in workload: give yours another name"),
    ("{name: my_model, path: ./broken}", "workloads[0].path",
     "defaults.yaml is not a valid workload declaration: description: Field required"),
    ("{name: my_model, path: ./my_model, colour: red}", "workloads[0].colour", "unknown key"),
])
def test_a_folder_that_is_no_workload_is_one_line_and_nothing_runs(tmp_path, entry, where,
                                                                  problem):
    make_folder(tmp_path)
    (tmp_path / "empty").mkdir()
    (tmp_path / "broken").mkdir()
    write(tmp_path / "broken" / "defaults.yaml", 'version: "1"\nitem_unit: sample\n')
    write(tmp_path / "broken" / "workload.py", "def run(ctx):\n    pass\n")
    assert_refused_in_one_line(tmp_path, entry, where, problem)


def test_a_preset_works_from_presets_alone(tmp_path):
    """A workload declares `presets:` and no `preset` parameter (issue 43): the matrix's
    `preset: quick` is taken, and a cell without it is at the defaults, `preset` unset."""
    folder = tmp_path / "mine"
    shutil.copytree(PROJECT / "workloads" / "sleep", folder,
                    ignore=shutil.ignore_patterns("__pycache__"))
    defaults = folder / "defaults.yaml"
    defaults.write_text(defaults.read_text().replace("presets: {}",
                                                     "presets: {quick: {seconds: 0.01}}"))
    matrix = write(tmp_path / "m.yaml", """
        name: presets
        hardware: [{name: box, kind: local}]
        stacks: [{name: here, executor: process}]
        workloads:
          - {name: my_sleep, path: mine, preset: [quick, ""]}
        """)
    cells = sorted(expand(load_spec(matrix)), key=lambda c: c.params["seconds"])
    assert [(c.params["preset"], c.params["seconds"]) for c in cells] == [("quick", 0.01),
                                                                          ("", 1.0)]
    shown = run_cli("workloads", "my_sleep", "-m", str(matrix), cwd=tmp_path)
    assert "one of the presets (quick), or none" in " ".join(shown.stdout.split())
    assert "preset quick: seconds=0.01" in shown.stdout


def own_model(root: Path, version: str, factor: int) -> Path:
    """A `path:` workload named my_model in `root`, of its own version and FLOP model."""
    folder = make_folder(root)
    write(folder / "defaults.yaml", DEFAULTS.replace('version: "1"', f'version: "{version}"'))
    write(folder / "flops.py",
          f"def flops_per_item(params):\n    return {factor}.0 * params['n']\n")
    write(folder / "workload.py", WORKLOAD.replace(
        "assert flops_per_item(ctx.params) == ctx.params[\"n\"]", "pass"))
    return folder


@pytest.mark.slow
def test_two_runs_of_one_name_from_two_folders_are_each_judged_by_their_own(tmp_path):
    """A report once kept the first run's folder for the name: the other run's rows were
    judged by its FLOP model and flagged "FLOP model revised", whichever came second."""
    runs = {}
    for label, version, factor in (("a", "1", 1), ("b", "7", 3)):
        own_model(tmp_path / label, version, factor)
        done = run_cli("run", str(matrix(tmp_path / label)), "--no-ray", "--db", "none",
                       "-o", str(tmp_path / f"run-{label}"), cwd=tmp_path / label)
        assert done.returncode == 0, done.stdout + done.stderr
        runs[label] = tmp_path / f"run-{label}"
    for order in (("a", "b"), ("b", "a")):
        out = tmp_path / f"merged-{''.join(order)}"
        done = run_cli("report", *(str(runs[label]) for label in order), "-o", str(out),
                       cwd=tmp_path)
        assert done.returncode == 0, done.stdout + done.stderr
        rows = pd.read_parquet(out / "results.parquet")
        assert not rows["flops_note"].fillna("").str.contains("revised").any(), order
        # judged by their own model: nothing implausible (a busy machine may flag contention)
        assert not rows["flags"].fillna("").str.contains("implausible").any(), order
        declared = rows["workload_version"].str.split("+").str[0]  # its code's hash after
        by_version = rows.groupby(declared)["flops_per_item"].apply(set).to_dict()
        assert by_version == {"1": {1000.0, 20000.0}, "7": {3000.0, 60000.0}}, order
