"""Expansion: counts, include/exclude, stable ids, repeats sharing a config_id."""

from __future__ import annotations

from orchestrator.plan.cells import excluded, expand, incompatibility
from orchestrator.validate import load_spec

BASE = """
name: grid
hardware:
  - {name: a, kind: local}
  - {name: b, kind: local, gpus: 1}
stacks:
  - {name: here, executor: process}
workloads:
  - name: sleep
    params: {seconds: [0.1, 0.2], steps: [1, 2, 3]}
repeats: 2
"""


def cells_of(matrix_file, text: str, name: str = "m.yaml"):
    return expand(load_spec(matrix_file(text, name)))


def test_counts_are_the_cross_product(matrix_file):
    cells = cells_of(matrix_file, BASE)
    assert len(cells) == 2 * 1 * (2 * 3) * 2
    assert len({c.cell_id for c in cells}) == len(cells)
    assert len({c.config_id for c in cells}) == len(cells) // 2


def test_repeats_share_a_config_id(matrix_file):
    by_config: dict[str, list[int]] = {}
    for cell in cells_of(matrix_file, BASE):
        by_config.setdefault(cell.config_id, []).append(cell.repeat)
    assert all(sorted(repeats) == [1, 2] for repeats in by_config.values())


def test_params_are_resolved_with_defaults(matrix_file):
    cell = cells_of(matrix_file, BASE)[0]
    assert cell.params == {"fault": "none", "jitter": 0.0, "message": "", "seconds": 0.1,
                           "steps": 1}
    assert cell.epochs == 1 and cell.workload_version == "1"


def test_ids_are_stable_across_reorderings(matrix_file):
    reordered = """
    repeats: 2
    workloads:
      - params: {steps: [3, 1, 2], seconds: [0.2, 0.1]}
        name: sleep
    stacks:
      - {executor: process, name: here}
    hardware:
      - {kind: local, gpus: 1, name: b}
      - {name: a, kind: local}
    name: grid
    """
    first = cells_of(matrix_file, BASE, "one.yaml")
    second = cells_of(matrix_file, reordered, "two.yaml")
    assert [c.cell_id for c in first] == [c.cell_id for c in second]


def test_sorted_with_repeats_outermost(matrix_file):
    cells = cells_of(matrix_file, BASE)
    assert [c.repeat for c in cells] == [1] * 12 + [2] * 12
    first_round = [(c.hardware.name, c.params["seconds"], c.params["steps"]) for c in cells[:12]]
    assert first_round == sorted(first_round)


def test_what_changes_a_config_id(matrix_file):
    base = {c.config_id for c in cells_of(matrix_file, BASE, "a.yaml")}
    more_epochs = {c.config_id for c in cells_of(
        matrix_file, BASE.replace("    params:", "    epochs: 2\n    params:"), "b.yaml")}
    other_stack = {c.config_id for c in cells_of(
        matrix_file, BASE.replace("executor: process}", "executor: process, python: '3.11'}"),
        "c.yaml")}
    more_repeats = {c.config_id for c in cells_of(
        matrix_file, BASE.replace("repeats: 2", "repeats: 3"), "d.yaml")}
    assert base.isdisjoint(more_epochs) and base.isdisjoint(other_stack)
    assert base == more_repeats  # a repeat is not part of a configuration


def test_exclude_removes_matching_cells(matrix_file):
    text = BASE + "exclude:\n  - {hardware: b, params: {steps: [2, 3]}}\n"
    cells = cells_of(matrix_file, text)
    assert len(cells) == 24 - 2 * 2 * 2
    assert not [c for c in cells if c.hardware.name == "b" and c.params["steps"] != 1]
    removed = excluded(load_spec(matrix_file(text, "x.yaml")))
    assert len(removed) == 8 and all("exclude rule" in reason for _, reason in removed)


def test_include_adds_cells_beyond_the_grid(matrix_file):
    text = BASE + "include:\n  - {workload: sleep, hardware: a, params: {steps: 7}}\n"
    cells = cells_of(matrix_file, text)
    added = [c for c in cells if c.params["steps"] == 7]
    assert len(cells) == 24 + 2 * 2
    assert {c.hardware.name for c in added} == {"a"}
    assert {c.params["seconds"] for c in added} == {0.1, 0.2}  # the entry's other axes


def test_include_wins_over_exclude(matrix_file):
    text = BASE + ("exclude:\n  - {hardware: a}\n"
                   "include:\n  - {workload: sleep, hardware: a, params: {steps: 1}}\n")
    cells = cells_of(matrix_file, text)
    assert {c.params["steps"] for c in cells if c.hardware.name == "a"} == {1}


def test_gpu_only_values_are_incompatible_without_gpus(matrix_file):
    text = BASE.replace("name: sleep\n    params: {seconds: [0.1, 0.2], steps: [1, 2, 3]}",
                        "name: lstm_lm\n    params: {precision: [fp32, fp16]}")
    cells = cells_of(matrix_file, text)
    reasons = {(c.hardware.name, c.params["precision"]): incompatibility(c) for c in cells}
    assert reasons[("a", "fp32")] is None and reasons[("b", "fp16")] is None
    assert "needs a GPU" in reasons[("a", "fp16")]
