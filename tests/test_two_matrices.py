"""Two matrices loaded in one process stay apart (issue 47, item 4): a matrix's own
workloads (`path:` folders, `command:` scripts) are the loaded matrix's, not the process's.
Here two matrices name a folder workload `mine` and a command workload `script` that differ
in everything (folder, version, parameters, defaults, item unit), and each one's cells,
validation, plan, declarations and image code are its own, whichever was loaded last."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.cli.workloads_view import show_workload
from orchestrator.errors import SpecError, UnknownWorkloadError
from orchestrator.hardware.local import LocalMachine
from orchestrator.images.stack_image import own_workload_files
from orchestrator.plan.cells import declared, expand
from orchestrator.plan.planner import make_plan
from orchestrator.registry.cell_run import Cell
from orchestrator.spec.loaded import workloads_of
from orchestrator.spec.model import MatrixSpec
from orchestrator.validate import load_spec
from orchestrator.workload_registry import load_workload
from orchestrator.workload_scope import reported
from tests.conftest import write

BOX = LocalMachine(hostname="box", cpu_model=None, cpu_count=2, gpu_count=0, gpu_model=None)
WORKLOAD = "def run(ctx):\n    pass\n"

# what differs between the two sides: mine's declaration, and script's parameters and unit
SIDES = {
    "a": {"version": "1", "unit": "sample", "param": "size", "default": 2, "values": "[2, 3]",
          "arg": "size", "script_values": "[1, 2]", "script_unit": "token"},
    "b": {"version": "7", "unit": "image", "param": "width", "default": 5, "values": "[5]",
          "arg": "lr", "script_values": "[0.1]", "script_unit": "frame"},
}


def make_side(root: Path, side: str) -> Path:
    """A project folder with its own `mine` folder and `script`, and its matrix file."""
    s = SIDES[side]
    folder = root / side / "mine"
    folder.mkdir(parents=True)
    write(folder / "defaults.yaml", f"""
        version: "{s['version']}"
        description: "{side}'s own workload"
        item_unit: {s['unit']}
        params:
          {s['param']}: {{type: int, default: {s['default']}, min: 1}}
        """)
    write(folder / "workload.py", WORKLOAD)
    write(root / side / "train.py", f"print('{side}')\n")
    return write(root / side / "m.yaml", f"""
        name: {side}
        hardware: [{{name: box, kind: local}}]
        stacks: [{{name: here, executor: process}}]
        workloads:
          - {{name: mine, path: mine, params: {{{s['param']}: {s['values']}}}}}
          - name: script
            command: [python, train.py, '{{{s['arg']}}}']
            item_unit: {s['script_unit']}
            params: {{{s['arg']}: {s['script_values']}}}
        """)


def seen(spec: MatrixSpec) -> dict[str, object]:
    """What a matrix resolves of its own workloads: declarations, cells, plan, images."""
    cells = expand(spec)
    workloads = workloads_of(spec)
    return {
        "declared": {name: workloads.load(name) for name in ("mine", "script")},
        "sources": {name: workloads.source(name) for name in ("mine", "script")},
        "cells": [c.model_dump() for c in cells],
        "planned": sorted(c.cell_id for c in make_plan(spec, BOX).to_run),
        "image_code": {name: (folder, files)
                       for name, (folder, files) in own_workload_files(spec).items()},
    }


def of(cells: list[Cell], workload: str) -> list[Cell]:
    return [c for c in cells if c.workload == workload]


def test_each_matrix_resolves_its_own_workloads_whichever_loaded_last(tmp_path):
    a = load_spec(make_side(tmp_path, "a"))
    a_alone = seen(a)
    b = load_spec(make_side(tmp_path, "b"))
    assert seen(a) == a_alone  # loading b changed nothing a resolves
    b_seen = seen(b)
    assert seen(load_spec(tmp_path / "a" / "m.yaml")) == a_alone  # nor a again, b's
    assert seen(b) == b_seen

    for spec, side in ((a, "a"), (b, "b")):
        s = SIDES[side]
        mine, script = of(expand(spec), "mine"), of(expand(spec), "script")
        assert {c.workload_dir for c in mine} == {str((tmp_path / side / "mine").resolve())}
        assert {c.workload_version.split("+")[0] for c in mine} == {s["version"]}
        assert {c.item_unit for c in mine} == {s["unit"]}
        assert all(set(c.params) == {s["param"]} for c in mine)
        assert {declared(c).name for c in mine} == {"mine"}
        assert {c.item_unit for c in script} == {s["script_unit"]}
        assert {c.command_cwd for c in script} == {str((tmp_path / side).resolve())}
        assert all(c.command is not None and c.command[-1] == str(c.params[s["arg"]])
                   for c in script)
        assert workloads_of(spec).source("mine") == f"path {(tmp_path / side / 'mine')}"
        assert workloads_of(spec).is_command("script")
        (files,) = {tuple(f.parent for f in own_workload_files(spec)["mine"][1])}
        assert set(files) == {tmp_path / side / "mine"}
    assert len(of(expand(a), "mine")) == 2 and len(of(expand(b), "mine")) == 1
    assert not {c.config_id for c in expand(a)} & {c.config_id for c in expand(b)}


def test_validation_checks_a_matrix_against_its_own_declarations_only(tmp_path):
    load_spec(make_side(tmp_path, "a"))
    b = make_side(tmp_path, "b")
    load_spec(b)
    # b's `mine` has no `size` (a's has): b's matrix setting it is refused, a loaded or not
    b.write_text(b.read_text().replace("params: {width: [5]}", "params: {size: [2]}"))
    with pytest.raises(SpecError, match="size"):
        load_spec(b)
    # and an include rule is checked against its matrix's workload too
    a = tmp_path / "a" / "m.yaml"
    a.write_text(a.read_text() + "include: [{workload: mine, params: {width: 9}}]\n")
    with pytest.raises(SpecError, match="width"):
        load_spec(a)


def test_nothing_of_a_matrix_is_left_in_the_process(tmp_path, capsys):
    from rich.console import Console

    spec = load_spec(make_side(tmp_path, "a"))
    with pytest.raises(UnknownWorkloadError):
        load_workload("mine")  # the process knows the built-ins and packages alone
    assert reported().folder("mine") is None and not reported().is_command("script")
    assert workloads_of(spec).load("sleep") is load_workload("sleep")  # shared, read once
    # `matrix workloads mine --matrix`: the matrix named is the one shown
    for side in ("b", "a"):
        matrix = tmp_path / side / "m.yaml" if side == "a" else make_side(tmp_path, "b")
        show_workload("mine", Console(width=200), matrix)
        out = capsys.readouterr().out
        assert f"{side}'s own workload" in out and SIDES[side]["param"] in out
