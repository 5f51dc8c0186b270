"""A podman that never answers (issue 56): once `executor: podman` waited its whole step
bound (120 s) for `podman ps` before the sweep, then again in every cell, each recorded
with a wall time of 0.0 s. Now the first step that gets no answer is remembered on the
node and the cells after it fail at once, saying when; the sweep's first question asks
again, and a podman that answers it is asked as before.

The runtime is a `podman` on PATH that hangs (or answers), logging each call: a fault
injected where the real one would be, with the executor's bound made short."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from orchestrator.executors import CellRun
from orchestrator.executors.podman import runner, silence
from orchestrator.plan.cells import expand
from orchestrator.registry.cell_run import ImageRef, ToolInfo
from orchestrator.validate import load_spec
from tests.conftest import write

BOUND_S = 2.0


@pytest.fixture
def node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This node: a podman of our making first on PATH, its own temporary folder (where
    the note is kept), the short bound. The calls podman got are in calls.log."""
    binary = tmp_path / "bin"
    binary.mkdir()
    monkeypatch.setenv("PATH", f"{binary}{os.pathsep}{os.environ['PATH']}")
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    monkeypatch.setattr(runner, "STEP_TIMEOUT_S", BOUND_S)
    podman(tmp_path, hangs=True)
    return tmp_path


def podman(root: Path, hangs: bool) -> None:
    script = root / "bin" / "podman"
    script.write_text(f"#!/bin/sh\necho \"$*\" >> {root / 'calls.log'}\n"
                      + ("exec sleep 600\n" if hangs else
                         'case "$1" in run) echo c1;; wait) echo 0;; esac\n'))
    script.chmod(0o755)


def calls(root: Path) -> list[str]:
    log = root / "calls.log"
    return log.read_text().splitlines() if log.exists() else []


def cells(root: Path):
    matrix = write(root / "m.yaml", """
        name: silent
        hardware: [{name: box, kind: local}]
        stacks: [{name: pod, executor: podman, framework: torch, framework_version: "2.4"}]
        workloads: [{name: sleep, params: {seconds: [0.1, 0.2, 0.3]}}]
        """)
    return expand(load_spec(matrix))


IMAGE = ImageRef(stack="pod", tag="matrix-bench:pod", image_id="sha256:" + "a" * 64,
                 size_bytes=1)


def ran(cell, node: Path) -> list:
    """The records of `cell` run by the podman executor on `node`."""
    return runner.run_cell(CellRun(cell, node / "run", ToolInfo("t", None), IMAGE))


def test_a_silent_podman_is_waited_for_once_then_every_cell_says_so_at_once(node):
    first, *rest = cells(node)
    (ended,) = [r for r in ran(first, node)
                if r.record == "cell"]
    assert ended.status == "executor_unavailable"
    assert ended.error == f"podman image did not answer in {BOUND_S:.0f} s"
    assert ended.wall_s >= BOUND_S  # the time it held the node, not 0.0
    asked = len(calls(node))
    for cell in rest:
        (later,) = [r for r in ran(cell, node)
                    if r.record == "cell"]
        assert later.status == "executor_unavailable"
        assert later.error.startswith(f"podman image did not answer in {BOUND_S:.0f} s at ")
        assert "not asked again on this node until" in later.error
    assert len(calls(node)) == asked  # podman was not asked again

    # a new sweep asks first, whatever the note says: still silent, still remembered
    assert runner.remove_leftovers("silent") == 0
    assert len(calls(node)) == asked + 1 and silence.why_silent() is not None
    # once it answers, the note goes and the cells ask podman again
    podman(node, hangs=False)
    assert runner.remove_leftovers("silent") == 0
    assert silence.why_silent() is None
    ran(rest[0], node)
    assert len(calls(node)) > asked + 2


def test_a_podman_wait_that_says_no_exit_status_ends_the_cell_executor_unavailable(node):
    """Once an IndexError traceback from the empty answer."""
    script = node / "bin" / "podman"
    script.write_text('#!/bin/sh\ncase "$1" in run) echo c1;; esac\n')  # wait says nothing
    (cell, *_) = cells(node)
    (ended,) = [r for r in ran(cell, node)
                if r.record == "cell"]
    assert ended.status == "executor_unavailable"
    assert ended.error == "podman wait gave no exit status ('') mid-cell", ended.error


def test_a_cell_past_its_own_timeout_is_not_podman_being_silent(node):
    """`podman wait` bounded by the cell's timeout ends the cell, not podman's turn."""
    podman(node, hangs=True)
    with pytest.raises(runner.PodmanSlow):
        runner._podman("wait", "c", timeout=0.5, cells_bound=True)
    assert silence.why_silent() is None


def test_a_note_of_another_user_or_a_link_is_never_read(node, tmp_path):
    folder = Path(tempfile.gettempdir()) / f"matrix-bench-{os.getuid()}"
    silence.remember("podman ps did not answer in 1 s")
    assert silence.why_silent() is not None
    folder.chmod(0o755)  # not private any more: nothing is remembered or read there
    assert silence.why_silent() is None
    folder.chmod(0o700)
    (folder / silence.NOTE).unlink()
    (folder / silence.NOTE).symlink_to(tmp_path / "elsewhere.json")
    (tmp_path / "elsewhere.json").write_text('{"why": "planted", "at": 1e12}')
    assert silence.why_silent() is None
