"""A plugin executor keeps every guarantee a worker has by calling the public launch alone.

The test package's `niced` executor (tests/plugin_package/acme_plugins/niced.py) imports
only `orchestrator.executors`' public names and starts the worker through `nice -n N`,
N its stack's own `niceness` setting.
Installed by entry point, it runs the process executor's fault cases in a real sweep whose
driver holds every credential: each fault is its cell's status, a hang is ended at its
timeout with nothing of it left, an allocation past the limit is `oom`, a command's
children are ended and named, and no credential reaches the worker.
"""

from __future__ import annotations

import ast
import json

import pytest

from orchestrator.executors import CellRun, LaunchRefused, launch_worker
from orchestrator.registry.cell_run import ToolInfo
from tests.cells import make_cell_model
from tests.conftest import cell_records, run_cli, write
from tests.faults.test_leftovers import alive
from tests.faults.test_secrets import CREDENTIALS, PROXY, PROXY_PASSWORD, worker_processes
from tests.plugin_install import PLUGINS, install_plugins

pytestmark = pytest.mark.slow  # sweeps, real training or fuzzing: not the fast tier

MATRIX = """
name: plugin-faults
hardware: [{name: box, kind: local}]
stacks: [{name: low, executor: niced, niceness: 12}]
workloads:
  - name: sleep
    params: {seconds: 0.2, fault: [none, raise, kill, hang, oom]}
    timeout_s: 3
    memory_limit_mb: 400
  - {name: leaver, command: [python, leaver.py], epochs: 1}
"""
EXPECTED = {"none": "ok", "raise": "failed", "kill": "crashed", "hang": "timeout",
            "oom": "oom"}

# what the worker's command sees, and two children it leaves running as it exits 0
LEAVER = """\
import json, os, subprocess, sys
json.dump({"env": dict(os.environ), "nice": os.nice(0)}, open("seen.json", "w"))
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(419)"])
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(421)"],
                 start_new_session=True)
"""


@pytest.fixture(scope="module")
def plugins(tmp_path_factory) -> dict[str, str]:
    return install_plugins(tmp_path_factory.mktemp("plugins"))


def test_the_example_plugin_imports_only_the_public_launch():
    tree = ast.parse((PLUGINS / "acme_plugins" / "niced.py").read_text())
    imported = {node.module for node in ast.walk(tree)
                if isinstance(node, ast.ImportFrom) and node.module != "__future__"}
    assert {m for m in imported if m and m.startswith("orchestrator")} == \
        {"orchestrator.executors"}


def test_a_plugin_executor_on_the_public_launch_keeps_every_guarantee(plugins, tmp_path):
    write(tmp_path / "m.yaml", MATRIX)
    (tmp_path / "leaver.py").write_text(LEAVER)
    done = run_cli("run", "m.yaml", "--no-ray", "--db", "none", "-o", str(tmp_path / "run"),
                   cwd=tmp_path, env={**plugins, **CREDENTIALS, **PROXY}, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    cells = cell_records(tmp_path / "run")
    assert all(c["node_id"].startswith("niced:local:") for c in cells), cells
    by_fault = {c["param.fault"]: c for c in cells if c["workload"] == "sleep"}
    assert {fault: c["status"] for fault, c in by_fault.items()} == EXPECTED
    assert "MemoryError" in by_fault["oom"]["error"]
    assert "SIGKILL" in by_fault["kill"]["error"]
    assert 3 <= by_fault["hang"]["wall_s"] < 30  # its whole group ended at the timeout
    assert worker_processes(tmp_path) == []  # no worker of the sweep outlived it

    (leaver,) = [c for c in cells if c["workload"] == "leaver"]
    assert leaver["status"] == "ok" and "left_processes" in leaver["flags"]
    assert "2 process(es) it started were still running" in leaver["error"]
    assert alive("time.sleep(419)") == [] and alive("time.sleep(421)") == []

    seen = json.loads((tmp_path / "seen.json").read_text())
    assert seen["nice"] == 12  # through the plugin's wrapper, at the stack's own setting
    assert seen["env"]["ACME_NICENESS"] == "12"  # and with what it added
    assert set(CREDENTIALS) & set(seen["env"]) == set()
    assert PROXY_PASSWORD not in json.dumps(seen["env"])
    assert [v for v in CREDENTIALS.values() if v in done.stdout + done.stderr] == []


@pytest.mark.parametrize("extra_env", [{"HF_TOKEN": "t"}, {"MY_DB_PASSWORD": "p"},
                                       {"AWS_REGION": "r"}, {"CUDA_VISIBLE_DEVICES": "0,1"},
                                       {"A": 1}])
def test_the_launch_refuses_what_would_break_a_guarantee_before_anything_starts(extra_env,
                                                                                 tmp_path):
    cell = make_cell_model("sleep", {"seconds": 0.1}, 1)
    with pytest.raises(LaunchRefused):
        launch_worker(CellRun(cell, tmp_path, ToolInfo("t", None)), extra_env=extra_env)
    with pytest.raises(LaunchRefused):
        launch_worker(CellRun(cell, tmp_path, ToolInfo("t", None)), wrapper=["nice", ""])
    assert list(tmp_path.iterdir()) == []  # no cell file, no log: nothing started
