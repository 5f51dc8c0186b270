"""The registries are the only seams. An executor and a provider from an installed test
package (tests/plugin_package), registered by entry point only, run a sweep serially, on the
embedded Ray and (the executor) in a Slurm task, with no change to the orchestrator's code;
providers registered in-process by the public call launch their own nodes, price, clean up
and log in to their registries."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path
from types import TracebackType
from typing import ClassVar

import pytest
from rich.console import Console

from orchestrator.errors import SpecError
from orchestrator.executors import execute
from orchestrator.providers import BaseProvider, Launch, Price, ProviderKind, register_provider
from orchestrator.registry import providers
from orchestrator.run.sweep import SweepOptions, run_sweep
from orchestrator.validate import load_spec
from tests.conftest import PROJECT, journal, run_cli
from tests.plugin_install import install_plugins
from tests.wheel_files import wheel


@pytest.fixture(scope="module")
def plugins(tmp_path_factory) -> dict[str, str]:
    return install_plugins(tmp_path_factory.mktemp("plugins"))


MATRIX = """
name: seams
hardware: [{name: pool-small, kind: pool, instance_type: small, rack: r7, ticket: T-12}]
stacks: [{name: low-priority, executor: niced}]
workloads: [{name: sleep, params: {seconds: 0.1, steps: [1, 2]}}]
"""


def assert_the_plugins_ran_it(run_dir: Path, node: str) -> None:
    """Every cell through the plugin executor on a node matching `node` (its node id says
    both) and, on the pool's hardware, priced by the plugin provider's rate card."""
    records = journal(run_dir)
    cells = [r for r in records if r["record"] == "cell"]
    assert [c["status"] for c in cells] == ["ok", "ok"], cells
    assert all(re.fullmatch(f"niced:{node}", c["node_id"]) for c in cells), cells
    measurements = [r for r in records if r["record"] == "measurement"]
    assert sorted(m["items"] for m in measurements) == [1.0, 2.0]
    provenance = [r for r in records if r["record"] == "provenance"]
    if not node.startswith("slurm"):
        assert {p["price_source"] for p in provenance} == {"lab-rate-card 2026-11-01"}


def test_plugins_installed_by_entry_point_run_a_sweep_serially(plugins, matrix_file, tmp_path):
    done = run_cli("run", str(matrix_file(MATRIX)), "-o", str(tmp_path / "run"), "--no-ray",
                   "--db", "none", cwd=tmp_path, env=plugins)
    assert done.returncode == 0, done.stdout + done.stderr
    assert_the_plugins_ran_it(tmp_path / "run", "local:.+")  # serially, here
    assert "price: pool-small $0.5/h (lab-rate-card 2026-11-01)" in done.stdout
    # the broken entry point beside them: named in one line, the rest unharmed
    assert "acme_plugins.missing:KIND' of acme-plugins==1.0 cannot be loaded" in done.stderr


def test_a_kinds_settings_are_recorded_and_told_apart_where_they_differ(plugins, matrix_file,
                                                                         tmp_path):
    """The same hardware name in two racks, and in one of them at another niceness of the
    plugin executor, one run each: every cell record carries the rack (`hw.rack`, never the
    booking ticket) and the niceness (`stack.niceness`, its default where unset), the
    parquet has them as columns, and the merged report, explain and the store's history
    name them where the rows would otherwise read alike."""
    import pandas as pd

    runs = {"r7": (MATRIX, 19), "r1": (MATRIX.replace("r7", "r1"), 19),
            "r1-12": (MATRIX.replace("r7", "r1").replace("niced}", "niced, niceness: 12}"), 12)}
    for name, (text, niceness) in runs.items():
        done = run_cli("run", str(matrix_file(text, f"{name}.yaml")), "-o", str(tmp_path / name),
                       "--no-ray", "--db", "none", cwd=tmp_path, env=plugins)
        assert done.returncode == 0, done.stdout + done.stderr
        cells = [r for r in journal(tmp_path / name) if r["record"] == "cell"]
        rack = name.split("-")[0]
        assert [(c["hw.rack"], "hw.ticket" in c, c["stack.niceness"]) for c in cells] == [
            (rack, False, niceness)] * 2
        frame = pd.read_parquet(tmp_path / name / "results.parquet")
        assert set(frame["hw.rack"]) == {rack} and set(frame["stack.niceness"]) == {niceness}
    folders = [str(tmp_path / name) for name in runs]
    merged = run_cli("report", *folders, "-o", str(tmp_path / "all"), cwd=tmp_path, env=plugins)
    assert merged.returncode == 0, merged.stdout + merged.stderr
    report = (tmp_path / "all" / "report.md").read_text()
    header = next(line for line in report.splitlines() if line.startswith("| hardware |"))
    assert "| hw.rack | stack.niceness |" in header, header
    rows = [line for line in report.splitlines() if line.startswith("| pool-small |")]
    assert {"r1", "r7", "12", "19"} <= {cell.strip() for line in rows for cell in line.split("|")}
    explained = run_cli("explain", *folders, "--json", cwd=tmp_path, env=plugins)
    assert explained.returncode == 0, explained.stdout + explained.stderr
    factors = {effect["factor"] for effect in json.loads(explained.stdout)["effects"]}
    assert {"hw.rack", "stack.niceness"} <= factors, explained.stdout
    # the results store keeps them too: history labels and explain --db read them there
    db = f"sqlite:///{tmp_path / 'results.db'}"
    imported = run_cli("db", "import", *folders, "--db", db, cwd=tmp_path, env=plugins)
    assert imported.returncode == 0, imported.stdout + imported.stderr
    trend = run_cli("history", "trend", "--db", db, "--format", "csv", cwd=tmp_path,
                    env=plugins)
    assert trend.returncode == 0, trend.stdout + trend.stderr
    for rack, niceness in (("r1", 19), ("r7", 19), ("r1", 12)):
        assert f"seconds=0.1 steps=2 hw.rack={rack} stack.niceness={niceness}," \
            in trend.stdout, trend.stdout
    stored = run_cli("explain", "--db", db, "--json", cwd=tmp_path, env=plugins)
    assert stored.returncode == 0, stored.stdout + stored.stderr
    assert {"hw.rack", "stack.niceness"} <= {e["factor"] for e in json.loads(stored.stdout)[
        "effects"]}


@pytest.mark.slow
def test_plugins_reach_the_workers_of_the_embedded_ray(plugins, matrix_file, tmp_path):
    done = run_cli("run", str(matrix_file(MATRIX)), "-o", str(tmp_path / "run"), "--db",
                   "none", cwd=tmp_path, env=plugins, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert_the_plugins_ran_it(tmp_path / "run", "[0-9a-f]{56}")  # a Ray node's id


@pytest.mark.slow
def test_a_plugin_executor_reaches_a_slurm_task(plugins, slurm, matrix_file, tmp_path):
    matrix = matrix_file(MATRIX.replace(
        "{name: pool-small, kind: pool, instance_type: small, rack: r7, ticket: T-12}",
        "{name: node, kind: slurm, partition: debug, cpus: 1}") + "slurm: {poll_s: 0.5}\n")
    done = run_cli("run", str(matrix), "-o", str(tmp_path / "run"), "--db", "none",
                   cwd=tmp_path, env=plugins, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert_the_plugins_ran_it(tmp_path / "run", "slurm:.+")


def test_without_the_package_its_executor_is_one_located_line(matrix_file, tmp_path):
    local = MATRIX.replace("kind: pool, instance_type: small, rack: r7, ticket: T-12",
                           "kind: local")
    result = run_cli("validate", str(matrix_file(local)), cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip() == (
        f"error: {tmp_path / 'm.yaml'}:3: stacks[0].executor: unknown executor 'niced' "
        "(registered: docker, podman, process)")


IDS = """
import json, sys
from orchestrator.plan.cells import expand
from orchestrator.validate import load_spec
print(json.dumps([sorted(c.config_id for c in expand(load_spec(p))) for p in sys.argv[1:]]))
"""


def test_a_plugin_kinds_own_keys_are_its_schema(plugins, matrix_file, tmp_path):
    """The pool's keys, written flat on its entry, are its own model's: judged by its
    provider, in identity as it declares (the rack; not the booking ticket), another kind's
    key on a local entry, and offered by `matrix schema` on the pool's entries only."""
    matrices = [matrix_file(MATRIX.replace("T-12", ticket).replace("r7", rack), f"{i}.yaml")
                for i, (rack, ticket) in enumerate([("r7", "T-12"), ("r7", "T-99"),
                                                    ("r1", "T-12")])]
    env = {**os.environ, **plugins}
    done = subprocess.run([sys.executable, "-c", IDS, *map(str, matrices)], env=env,
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    booked, rebooked, moved = json.loads(done.stdout)
    assert booked == rebooked and not set(booked) & set(moved)
    bad = run_cli("validate", str(matrix_file(MATRIX.replace("r7", "r9"))), cwd=tmp_path,
                  env=plugins)
    assert bad.returncode == 2 and "the pool has racks r1, r7, not 'r9'" in bad.stderr
    local = MATRIX.replace("kind: pool, instance_type: small", "kind: local")
    bad = run_cli("validate", str(matrix_file(local)), cwd=tmp_path, env=plugins)
    assert bad.returncode == 2, bad.stderr
    assert bad.stderr.strip().endswith("hardware[0].rack: rack applies to kind pool only")
    schema = json.loads(run_cli("schema", cwd=tmp_path, env=plugins).stdout)
    entries = {e["properties"]["kind"]["const"]: e for e in schema["$defs"]["Hardware"]["oneOf"]}
    assert {"rack", "ticket"} <= set(entries["pool"]["properties"])
    assert not {"rack", "ticket"} & set(entries["local"]["properties"])


class LabProvider(BaseProvider):
    """A user's provider: its lab's registry logs in with a token; other registries are not
    its business."""

    def registry_auth(self, reference: str, for_push: bool) -> dict[str, str] | None:
        if reference.partition("/")[0] != "registry.lab.example":
            return None
        return {"username": "bench", "password": "push" if for_push else "pull"}


def test_registry_credentials_come_from_the_provider_that_owns_the_registry(monkeypatch,
                                                                            moto_server):
    monkeypatch.setattr(providers, "_REGISTRY", dict(providers._REGISTRY))
    register_provider(ProviderKind("lab", (), load=LabProvider))
    assert providers.registry_auth("registry.lab.example/mb@sha256:ab", for_push=False) == \
        {"username": "bench", "password": "pull"}
    assert providers.registry_auth("localhost:5000/matrix-bench") is None  # no login
    ecr = providers.registry_auth("123456789012.dkr.ecr.us-east-1.amazonaws.com/mb")
    assert ecr is not None and ecr["username"] == "AWS"  # the aws provider, through moto


def test_the_docker_executor_and_the_images_import_no_cloud_code():
    """They ask the providers for registry credentials; no import of a cloud module is left
    in them (the matrix schema still reaches providers/aws/network.py: the providers issue)."""
    for module in ("orchestrator/executors/docker.py", "orchestrator/executors/podman/runner.py",
                   "orchestrator/images/stack_image.py"):
        tree = ast.parse((PROJECT / module).read_text())
        imported = {node.module for node in ast.walk(tree)
                    if isinstance(node, ast.ImportFrom) and node.module} | {
            alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
            for alias in node.names}
        cloud = ("orchestrator.providers.aws", "boto3")
        assert not {m for m in imported if m.startswith(cloud)}, module


class PoolGroup:
    """The lab pool's nodes for one sweep: up on entering, each cell run on a node thread
    with its stack's executor, down on leaving."""

    def __init__(self, pool: PoolProvider, launch: Launch) -> None:
        self.pool, self.launch = pool, launch
        self.thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> PoolGroup:
        self.pool.events.append("up")
        self.thread.start()
        return self

    def _run(self) -> None:
        for index, cell in enumerate(self.launch.cells):
            self.launch.record(cell, execute(cell, self.launch.run_dir, self.launch.tool,
                                           self.launch.images, node_id=f"pool-{index}"))

    def wait(self) -> None:
        self.thread.join()

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.thread.join()
        self.pool.events.append("down")


class PoolProvider(BaseProvider):
    """A user's provider: a lab's batch pool, hardware kind `pool`, sized small or large,
    billed by the lab's rate card, its leftovers a list it keeps."""

    launches = True
    RATES: ClassVar[dict[str, float]] = {"small": 0.5, "large": 2.0}

    def __init__(self) -> None:
        self.events: list[str] = []
        self.checked: list[str] = []
        self.leftovers = {"run-a": "pool node 7", "live-run": "pool node 9"}

    def hardware_problem(self, hardware):
        if hardware.instance_type not in self.RATES:
            return f"the pool has sizes {', '.join(self.RATES)}, not {hardware.instance_type!r}"
        return None

    def prices(self, spec, hardware, warn):
        return {h.name: Price(self.RATES[str(h.instance_type)], "lab-rate-card", "2026-11-01")
                for h in hardware}

    def check_launch(self, spec, cells, run_dir, say):
        self.checked = [cell.cell_id for cell in cells]

    def launch(self, launch: Launch) -> PoolGroup:
        return PoolGroup(self, launch)

    def remove_leftovers(self, owned_runs, dry_run, region):
        gone = [f"release {node} (run {run})" for run, node in sorted(self.leftovers.items())
                if run not in owned_runs]
        if not dry_run:
            self.leftovers = {r: n for r, n in self.leftovers.items() if r in owned_runs}
        return gone


POOL_MATRIX = """
name: pooled
hardware:
  - {name: pool-small, kind: pool, instance_type: small}
  - {name: box, kind: local}
stacks: [{name: here, executor: process}]
workloads: [{name: sleep, params: {seconds: 0.1, steps: [1, 2]}}]
budget_usd: 5
"""


@pytest.fixture
def pool(monkeypatch):
    """The pool registered in this process by the public call (the registry as it was
    comes back after the test)."""
    provider = PoolProvider()
    monkeypatch.setattr(providers, "_REGISTRY", dict(providers._REGISTRY))
    register_provider(ProviderKind("pool", ("pool",), load=lambda: provider))
    return provider


def test_a_launching_provider_registered_outside_the_orchestrator_runs_a_sweep(
        pool, matrix_file, tmp_path):
    console = Console(record=True, width=200)
    summary = run_sweep(matrix_file(POOL_MATRIX), SweepOptions(output=tmp_path / "run",
                                                               no_ray=True), console)
    assert summary.statuses == {"ok": 4}
    assert pool.events == ["up", "down"]  # launched once, torn down once
    records = journal(tmp_path / "run")
    cells = {r["cell_id"]: r for r in records if r["record"] == "cell"}
    pooled = {i for i, r in cells.items() if r["hardware"] == "pool-small"}
    assert sorted(pool.checked) == sorted(pooled) and len(pooled) == 2
    assert {cells[i]["node_id"] for i in pooled} == {"pool-0", "pool-1"}  # its nodes
    provenance = {r["cell_id"]: r for r in records if r["record"] == "provenance"}
    for cell_id in cells:
        price = provenance[cell_id].get("price_per_hour_usd")
        assert price == (0.5 if cell_id in pooled else None)
    assert {provenance[i]["price_source"] for i in pooled} == {"lab-rate-card 2026-11-01"}
    text = console.export_text()
    assert "price: pool-small $0.5/h (lab-rate-card 2026-11-01)" in text
    assert re.search(r"estimated cost: up to \$\d+\.\d\d of budget_usd 5", text)
    assert "pool-small" in (tmp_path / "run" / "report.md").read_text()


def test_a_providers_hardware_kind_and_its_checks_reach_the_matrix_loader(pool, matrix_file):
    assert "pool" in providers.hardware_kinds()
    load_spec(matrix_file(POOL_MATRIX))
    with pytest.raises(SpecError) as bad:
        load_spec(matrix_file(POOL_MATRIX.replace("instance_type: small", "instance_type: huge")))
    assert (bad.value.line, bad.value.field) == (3, "hardware[0]")
    assert "the pool has sizes small, large, not 'huge'" in str(bad.value)


def test_cleanup_asks_every_provider_for_its_leftovers(pool, moto_server, tmp_path):
    """The user's provider beside aws (moto: nothing left there)."""
    from typer.testing import CliRunner

    from orchestrator.cli import app

    (tmp_path / "reports").mkdir()
    result = CliRunner().invoke(app, ["cleanup", "--dry-run", "--reports",
                                      str(tmp_path / "reports")], catch_exceptions=False)
    assert "would release pool node 7 (run run-a)" in result.output
    assert len(pool.leftovers) == 2  # a dry run changes nothing


def test_no_executor_or_hardware_kind_is_compared_outside_its_own_package():
    """The core asks the registries; only an implementation names itself (`providers/aws/` is the
    aws provider, `executors/docker.py` the docker executor)."""
    names = {"ec2", "docker", "local", "process", "aws"}
    own = ("orchestrator/providers/aws/", "orchestrator/executors/docker.py",
           "orchestrator/executors/process.py", "orchestrator/providers/local.py")
    found = []
    for path in sorted((PROJECT / "orchestrator").rglob("*.py")):
        relative = path.relative_to(PROJECT).as_posix()
        if relative.startswith(own):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Compare):
                operands = [node.left, *node.comparators]
                for operand in operands:
                    values = operand.elts if isinstance(operand, ast.Tuple | ast.List | ast.Set) \
                        else [operand]
                    found += [f"{relative}:{node.lineno}" for value in values
                              if isinstance(value, ast.Constant) and value.value in names]
    assert found == []


BROKEN_FILES = {
    "broken_plugins/__init__.py": "",
    # a provider whose SDK is missing: registered, its load raises (the lazy case)
    "broken_plugins/lab.py": (
        "from orchestrator.providers import ProviderKind\n\n\n"
        "def _load():\n    import lab_sdk_not_installed  # noqa: F401\n\n\n"
        "KIND = ProviderKind('lab', ('lab',), _load)\n"),
    # an executor plugin that ends the process as it is imported
    "broken_plugins/quits.py": "import sys\n\nsys.exit(3)\n",
}
BROKEN_ENTRY_POINTS = ("[matrix_bench.providers]\nlab = broken_plugins.lab:KIND\n"
                       "[matrix_bench.executors]\nquits = broken_plugins.quits:KIND\n")


def test_a_broken_plugin_is_named_once_and_refuses_only_matrices_of_its_kind(tmp_path):
    """A provider whose load raised broke `validate` and `run` of every matrix with an
    ImportError traceback; an executor plugin's sys.exit(3) at import made them exit 3
    without a word. Each is one warning naming it; only a matrix using its kind is
    refused, in one located line."""
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                    "--no-index", "--target", str(target),
                    str(wheel(tmp_path, "broken-plugins", "1.0", files=BROKEN_FILES,
                              entry_points=BROKEN_ENTRY_POINTS))], check=True)
    env = {"PYTHONPATH": os.pathsep.join(filter(None, [str(target),
                                                       os.environ.get("PYTHONPATH")]))}
    (tmp_path / "here.yaml").write_text(
        "name: here\nhardware: [{name: box, kind: local}]\n"
        "stacks: [{name: p, executor: process}]\n"
        "workloads: [{name: sleep, params: {seconds: 0.1}}]\n")
    (tmp_path / "lab.yaml").write_text(
        "name: lab\nhardware: [{name: bench, kind: lab}]\n"
        "stacks: [{name: p, executor: process}]\n"
        "workloads: [{name: sleep, params: {seconds: 0.1}}]\n")
    fine = run_cli("validate", "here.yaml", cwd=tmp_path, env=env)
    assert fine.returncode == 0 and "Traceback" not in fine.stderr, fine.stderr
    warned = [line for line in fine.stderr.splitlines() if line.startswith("warning:")]
    assert any("quits = 'broken_plugins.quits:KIND'" in w and "SystemExit: 3" in w
               for w in warned), fine.stderr
    ran = run_cli("run", "here.yaml", "--no-ray", "--db", "none", cwd=tmp_path, env=env)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert sum("provider 'lab'" in line for line in ran.stderr.splitlines()) <= 1
    refused = run_cli("validate", "lab.yaml", cwd=tmp_path, env=env)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    errors = [line for line in refused.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "lab.yaml:2: hardware[0].kind: the provider 'lab' " \
        "(hardware kind lab) cannot be loaded: ModuleNotFoundError: No module named " \
        "'lab_sdk_not_installed'" in errors[0], refused.stderr
