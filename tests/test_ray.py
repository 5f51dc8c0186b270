"""Dispatch through a real two-node Ray cluster: each cell lands on its hardware's node."""

from __future__ import annotations

import pytest

from tests.conftest import cell_records, run_cli

pytestmark = pytest.mark.ray

TWO_NODES = """
name: placement
hardware:
  - {name: node-a, kind: local}
  - {name: node-b, kind: local}
  - {name: node-c, kind: local}
stacks:
  - {name: here, executor: process}
workloads:
  - {name: sleep, params: {seconds: 0.2, steps: [1, 2]}}
repeats: 2
"""


def test_cells_land_only_on_the_node_of_their_hardware(ray_cluster, matrix_file, tmp_path):
    result = run_cli("run", str(matrix_file(TWO_NODES)), "--ray-address", ray_cluster.address,
                     cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "4 no node of the cluster offers hw:node-c" in result.stdout
    cells = cell_records(tmp_path / "reports" / "placement")
    assert len(cells) == 8 and {c["status"] for c in cells} == {"ok"}
    for cell in cells:
        assert cell["node_id"] == ray_cluster.node_of_hw[cell["hardware"]], cell
    assert {c["hardware"] for c in cells} == {"node-a", "node-b"}


def test_a_cell_no_node_can_start_is_given_up_as_node_lost(ray_cluster, matrix_file, tmp_path):
    from orchestrator.plan.cells import expand
    from orchestrator.registry.cell_run import ToolInfo
    from orchestrator.run.dispatch import RayDispatcher
    from orchestrator.validate import load_spec

    # node-a offers its hw resource but no GPU: a 1-GPU cell of it can never start.
    spec = load_spec(matrix_file("""
        name: stranded
        hardware:
          - {name: node-a, kind: local, gpus: 1}
          - {name: node-b, kind: local}
        stacks: [{name: here, executor: process}]
        workloads: [{name: sleep, params: {seconds: 0.2}, timeout_s: 30}]
        """))
    # 30 s, not 1: node-b's cell must end within its timeout plus the 2 s of grace, and on a
    # loaded machine its Ray worker took longer than 3 s to start, then longer than 12 s
    # (beside two busy loops and another test worker, issue 56)
    dispatcher = RayDispatcher(tmp_path / "run", ToolInfo("test", None), spec.hardware,
                               ray_cluster.address, node_wait_grace_s=2)
    try:
        ended = {cell.hardware.name: records[-1]
                 for cell, records in dispatcher.run(expand(spec), {})}
    finally:
        dispatcher.close()
    assert ended["node-b"].status == "ok"
    assert ended["node-a"].status == "node_lost"
    assert "no node finished the cell within its timeout (30 s)" in \
        ended["node-a"].error


def test_your_own_workloads_run_on_a_node_that_never_loaded_the_matrix(ray_cluster, tmp_path):
    """A folder's and a command's declarations travel with their cells: the Ray worker
    process that runs them never read the matrix that registered them."""
    from tests.test_command_workloads import make_scripts
    from tests.test_user_workloads import make_folder

    make_folder(tmp_path)
    path = make_scripts(tmp_path, extra="  - {name: my_model, path: ./my_model}\n")
    path.write_text(path.read_text().replace("{name: box, kind: local}",
                                             "{name: node-b, kind: local}"))
    result = run_cli("run", str(path), "--ray-address", ray_cluster.address, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    cells = cell_records(tmp_path / "reports" / "cmd")
    assert sorted(c["workload"] for c in cells) == ["my_model", "with_client", "with_client",
                                                    "without_client"]
    assert {c["status"] for c in cells} == {"ok"}, [c.get("error") for c in cells]
    assert {c["node_id"] for c in cells} == {ray_cluster.node_of_hw["node-b"]}
