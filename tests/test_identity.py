"""Identity does not move: the config_ids and cell_ids of the example matrices and of test
matrices covering every field are pinned (tests/golden/identities.json, made from the
code of 2026-11-23), and new fields, unset, change none of them.

Ids only move when what a cell measures moves. Should that ever be meant, regenerate the
golden with `python -m tests.test_identity` and say so in the commit: resume will redo the
finished cells of every moved id, and compare will match none of them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.plan.cells import expand
from orchestrator.plan.identity import HASH_LENGTH, cell_id_of, config_id_of, content_hash
from orchestrator.registry.cell_run import Cell
from orchestrator.registry.providers import validation_context
from orchestrator.spec.model import Hardware, Stack
from orchestrator.validate import load_spec
from orchestrator.workload_registry import load_workload

PROJECT = Path(__file__).resolve().parents[1]
GOLDEN = PROJECT / "tests" / "golden" / "identities.json"
MATRICES = [*sorted((PROJECT / "matrix").glob("*.yaml")),
            *sorted((PROJECT / "tests" / "golden" / "identity_matrices").glob("*.yaml"))]


def identities(path: Path) -> list[list[object]]:
    """Every cell of the matrix: cell_id, config_id, hardware, stack, workload, repeat."""
    return sorted([c.cell_id, c.config_id, c.hardware.name, c.stack.name, c.workload, c.repeat]
                  for c in expand(load_spec(path)))


@pytest.mark.parametrize("path", MATRICES, ids=lambda p: p.name)
def test_the_ids_of_each_pinned_matrix_never_move(path):
    golden = json.loads(GOLDEN.read_text())
    assert identities(path) == golden[str(path.relative_to(PROJECT))]


def test_every_example_matrix_is_pinned():
    golden = json.loads(GOLDEN.read_text())
    assert sorted(golden) == sorted(str(p.relative_to(PROJECT)) for p in MATRICES)


class RackedHardware(Hardware):
    """Hardware as a later version may declare it: a new field, and a price."""

    rack: str | None = None
    price_per_hour: float | None = None


class MirroredStack(Stack):
    mirror: str | None = None


def _sleep_id(hardware: Hardware, stack: Stack, **params: object) -> str:
    info = load_workload("sleep")
    return config_id_of(hardware, stack, info, info.resolve(params), 1)


def test_a_new_field_moves_no_id_until_it_is_set():
    box, here = Hardware(name="box", kind="local"), Stack(name="here", executor="process")
    before = _sleep_id(box, here)
    assert _sleep_id(RackedHardware(name="box", kind="local"), here) == before
    assert _sleep_id(box, MirroredStack(name="here", executor="process")) == before
    assert _sleep_id(RackedHardware(name="box", kind="local", rack="r7"), here) != before
    assert _sleep_id(box, MirroredStack(name="here", executor="process", mirror="m")) != before


def test_a_price_is_never_part_of_the_identity():
    here = Stack(name="here", executor="process")
    assert _sleep_id(RackedHardware(name="box", kind="local", price_per_hour=3.06), here) == \
        _sleep_id(Hardware(name="box", kind="local"), here)


def test_a_parameter_added_later_moves_no_id_at_its_default():
    box, here = Hardware(name="box", kind="local"), Stack(name="here", executor="process")
    assert load_workload("sleep").params["jitter"].in_identity == "when_not_default"
    assert _sleep_id(box, here, jitter=0.0) == _sleep_id(box, here)
    assert _sleep_id(box, here, jitter=0.5) != _sleep_id(box, here)
    # a parameter hashed always: its default is part of the id
    assert _sleep_id(box, here, steps=4) == _sleep_id(box, here)  # 4 is the default
    assert _sleep_id(box, here, steps=5) != _sleep_id(box, here)


if __name__ == "__main__":  # regenerate the golden (read the module docstring first)
    GOLDEN.write_text(json.dumps({str(p.relative_to(PROJECT)): identities(p) for p in MATRICES},
                                 indent=1) + "\n")


@pytest.mark.parametrize(("config_id", "repeat"), [
    ("3fa2c1d0e9b87a65", 1), ("3fa2c1d0e9b87a65", 10_000), ('a"quote\\é', 2), ("x", True)])
def test_a_cell_id_written_out_is_the_generic_hash_of_its_content(config_id, repeat):
    # cell_id_of writes its canonical JSON by hand (a 10,000-cell grid hashes one per cell)
    assert cell_id_of(config_id, repeat) == content_hash({"config_id": config_id,
                                                          "repeat": repeat})


def test_a_repeat_copied_from_the_first_is_the_cell_validation_makes():
    # expansion validates a configuration's first cell and copies it for the other repeats
    path = PROJECT / "tests" / "golden" / "identity_matrices"
    spec = load_spec(next(p for p in sorted(path.glob("*.yaml"))))
    cells = expand(spec.model_copy(update={"repeats": 3}))
    assert {c.repeat for c in cells} == {1, 2, 3}
    for cell in cells:
        assert Cell.model_validate(cell.model_dump(), context=validation_context()) == cell


def test_a_match_across_code_edits_tells_hardware_and_executor_settings_apart():
    """compare and history follow a configuration across edits of the user's code by its
    match id: two Slurm partitions (or two niceness settings) of one edited workload are
    two configurations there too; a configuration with no setting keeps the id it had."""
    from orchestrator.plan.identity import match_id

    names = ("node", "cpu", "mywl")
    old, new = "1.0+" + "a" * HASH_LENGTH, "1.0+" + "b" * HASH_LENGTH
    params = {"batch_size": 8}
    plain = content_hash({"hardware": "node", "stack": "cpu", "workload": "mywl",
                          "code_free_version": "1.0", "params": params})
    assert match_id("c1", old, names, params) == match_id("c2", new, names, params, {}) == plain
    debug = match_id("c1", old, names, params, {"hw.partition": "debug"})
    assert debug == match_id("c2", new, names, params, {"hw.partition": "debug"})
    assert debug != match_id("c3", new, names, params, {"hw.partition": "gpu"}) != plain
    assert match_id("c1", old, names, params, {"stack.niceness": 12}) != match_id(
        "c1", old, names, params, {"stack.niceness": 19})
    assert match_id("c1", "1.0", names, params, {"hw.partition": "gpu"}) == "c1"  # no code
