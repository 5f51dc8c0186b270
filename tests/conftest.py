"""Shared fixtures: matrix files in temp dirs, the CLI in a subprocess, and one real
two-node Ray cluster per test session (head plus one more node, each with its own hw:)."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
import urllib.request
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.browser import Browser
from tests.postgres_server import PostgresServer
from tests.slurm_cluster import SlurmCluster, slurm_missing, start_cluster

PROJECT = Path(__file__).resolve().parent.parent
SHARED_DATA = PROJECT.parent / "shared" / "data"

# A session started in the background by a non-interactive shell (`pytest ... &`) ignores
# SIGINT, and every process it starts would inherit that: the sweeps of the Ctrl-C tests
# would never see their Ctrl-C. A handler of our own is not inherited: children get the
# default again.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# Ray's token authentication: one token for the test cluster, its nodes and every client.
# Ray reads these when it is first imported, which any test may do first: set at once.
_RAY_TOKEN = Path(tempfile.mkdtemp(prefix="matrix-bench-ray-")) / "auth_token"
_RAY_TOKEN.write_text(secrets.token_hex(32))
os.environ.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=str(_RAY_TOKEN),
                  RAY_USAGE_STATS_ENABLED="0")
# Every sweep of the session indexes its cells into one SQLite store of the session's (a team's
# shared store in miniature), never into the project's reports/; tests of the default unset it.
_STORE = Path(tempfile.mkdtemp(prefix="matrix-bench-store-")) / "results.db"
os.environ["MATRIX_BENCH_DB"] = f"sqlite:///{_STORE}"
# `matrix validate` asks the package index about versions newer than its tables: never the
# internet's in a test. Port 9 on the loopback refuses at once; tests of the lookup serve one.
os.environ["MATRIX_BENCH_INDEX_URL"] = "http://127.0.0.1:9/simple/"
# Torch computes on one thread in every cell and test of the session. On two cores beside a
# second test worker, its default of one OpenMP thread per core stalls whenever that worker
# holds a core: a two-cell serial run that takes 43 s alone took 358 s in the suite and had
# not ended in 350 s beside two busy loops; on one thread it took 44 s (docs/PERFORMANCE.md).
# The tests check records, flags and texts, not speed; the worker's ceiling is measured on the
# same thread, so a cell's figures are still judged against its own bound. Set before Ray's
# nodes and Slurm's tasks start, so their workers inherit it; containers get it from the
# executors, which pass the thread settings of the environment they run in on.
os.environ.setdefault("OMP_NUM_THREADS", "1")
# What the test cluster's processes (a head driver job's boto3) sign moto's requests with.
FAKE_AWS_ENV = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                "AWS_DEFAULT_REGION": "us-east-1"}


# The fast tier (`-m "not slow"`) leaves out what needs these markers or fixtures, as well as
# the modules that say `pytestmark = pytest.mark.slow` (CONTRIBUTING.md).
SLOW_MARKERS = ("ray", "docker", "e2e")
SLOW_FIXTURES = ("ray_cluster", "registry", "image_env", "browser")


# The README runs the suite on two pytest-xdist workers (`-n 2 --dist loadgroup`). What uses
# the session's Ray cluster, Slurm, Docker images or registry runs on one worker, so each is
# started once and its tests never meet a twin; every other module keeps to one worker, so
# its module fixtures (a sweep the module's tests read) run once.
SERVICE_FIXTURES = ("slurm_cluster", "ray_cluster", "image_env", "registry")


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    grouping = getattr(config, "workerinput", None) is not None and \
        config.getvalue("loadgroup")
    for item in items:
        fixtures = getattr(item, "fixturenames", ())
        if any(item.get_closest_marker(name) for name in SLOW_MARKERS) or \
                any(name in fixtures for name in SLOW_FIXTURES):
            item.add_marker(pytest.mark.slow)
        group = "services" if any(name in fixtures for name in SERVICE_FIXTURES) \
            else item.nodeid.split("::")[0]
        item.add_marker(pytest.mark.xdist_group(group))
        if grouping and hasattr(item, "_id"):
            # xdist 3.8 puts the group into `_nodeid`, which pytest 9 no longer reads (its
            # node id is `_id`): without this every test is scheduled alone, and a module's
            # fixtures and the session's services start on both workers.
            item._id = f"{item.nodeid}@{group}"


def write(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text).lstrip())
    return path


def assert_refused_in_one_line(root: Path, entry: str, where: str, problem: str) -> None:
    """A matrix of the one workload `entry` is refused by `matrix run` with one located line
    (its line 4, the workloads), exit code 2, and nothing run."""
    path = write(root / "bad.yaml", f"""
        name: bad
        hardware: [{{name: box, kind: local}}]
        stacks: [{{name: here, executor: process}}]
        workloads: [{entry}]
        """)
    done = run_cli("run", str(path), "--no-ray", cwd=root)
    assert done.returncode == 2, done.stdout + done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"error: {path}:4: {where}: ") and problem in line, line
    assert not (root / "reports").exists()


@pytest.fixture
def matrix_file(tmp_path: Path):
    """Write a matrix file from an indented YAML string."""

    def make(text: str, name: str = "m.yaml") -> Path:
        return write(tmp_path / name, text)

    return make


def run_cli(*args: str, cwd: Path, env: dict[str, str] | None = None,
            timeout: float = 600, unset: Iterable[str] = ()) -> subprocess.CompletedProcess[str]:
    """`matrix ARGS` in a subprocess, as a user runs it; `env` added to this environment,
    the names in `unset` taken out of it."""
    full_env = {**os.environ, "COLUMNS": "200", **(env or {})}
    for name in unset:
        full_env.pop(name, None)
    full_env.pop("RAY_ADDRESS", None)
    if env and "RAY_ADDRESS" in env:
        full_env["RAY_ADDRESS"] = env["RAY_ADDRESS"]
    return subprocess.run([sys.executable, "-m", "orchestrator.cli", *args], cwd=cwd,
                          env=full_env, capture_output=True, text=True, timeout=timeout)


def run_script_as_cell(folder: Path, script: str) -> dict:
    """`script` run as a one-cell command workload (`matrix run --no-ray --db none`), as a
    user's training script runs; its cell record."""
    (folder / "script.py").write_text(script)
    (folder / "m.yaml").write_text(
        "name: script\nhardware: [{name: box, kind: local}]\n"
        "stacks: [{name: here, executor: process}]\n"
        "workloads: [{name: script, command: [python, script.py], epochs: 1}]\n")
    done = run_cli("run", str(folder / "m.yaml"), "-o", str(folder / "run"), "--no-ray",
                   "--db", "none", cwd=folder)
    assert done.returncode == 0, done.stdout + done.stderr
    (cell,) = cell_records(folder / "run")
    return cell


def journal(run_dir: Path) -> list[dict]:
    lines = (run_dir / "results.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def cell_records(run_dir: Path) -> list[dict]:
    return [r for r in journal(run_dir) if r["record"] == "cell"]


# Flags of the machine a cell was timed on, not of the cell: beside another test worker a
# short epoch may be dominated by warm-up, and the cell's threads may wait for a CPU.
MACHINE_FLAGS = frozenset({"warmup_dominated", "contended"})
MACHINE_REASONS = ("contended: ", "throttled while timing: ")


def own_reasons(cell: dict) -> list[str]:
    """The reasons in an ok cell's error that are the cell's own, without the machine's
    (`MACHINE_REASONS`), which depend on what else the test machine runs meanwhile."""
    reasons = (cell.get("error") or "").split("; ")
    return [reason for reason in reasons if reason and not reason.startswith(MACHINE_REASONS)]


def assert_statuses(run_dir: Path, expected: list[str]) -> None:
    """The run's cells ended with `expected`; a mismatch shows each cell's error and log tail
    (a status alone says nothing about why a CI run failed)."""
    cells = cell_records(run_dir)
    assert [c["status"] for c in cells] == expected, "\n".join(
        f"{c['status']}: {c.get('error')}\n{c.get('log_tail') or ''}" for c in cells)


def descendants() -> set[int]:
    """This process's live descendants, but multiprocessing's resource tracker (which
    spawn starts once and keeps)."""
    import psutil

    found = set()
    for child in psutil.Process().children(recursive=True):
        try:
            if child.status() != psutil.STATUS_ZOMBIE and \
                    "resource_tracker" not in " ".join(child.cmdline()):
                found.add(child.pid)
        except psutil.NoSuchProcess:
            continue
    return found


def left_behind(before: set[int]) -> set[int]:
    """The descendants alive now that this process started since `before` was taken, and
    their own: not those a session's services started meanwhile (a Ray node's new idle
    worker, a PostgreSQL backend), whose parent was alive before."""
    import psutil

    new = descendants() - before
    mine = set()
    for pid in sorted(new):
        try:
            parent = psutil.Process(pid).ppid()
        except psutil.NoSuchProcess:
            continue
        if parent == os.getpid() or parent in new:
            mine.add(pid)
    return mine


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass(frozen=True)
class RayCluster:
    address: str
    dashboard_url: str  # where Ray jobs are submitted (the head driver of EC2 sweeps)
    node_of_hw: dict[str, str]  # hardware name -> Ray node id offering it
    cluster: object  # ray.cluster_utils.Cluster: the node-loss tests add and kill nodes


def node_ports() -> dict[str, object]:
    """What keeps a test Ray node off its neighbours on one machine: ports of its own for
    its agents (every node defaults to 52365 for the dashboard agent, and they race).

    The nodes keep the machine's address: a driver given 127.0.0.1 swaps in that address
    before it connects, so a cluster bound to loopback alone is one no driver reaches."""
    return {"dashboard_agent_listen_port": free_port(), "metrics_agent_port": free_port(),
            "metrics_export_port": free_port(), "runtime_env_agent_port": free_port()}


RAY_START_TRIES = 3
# what both test nodes offer besides their own: the hardware of a cell across two nodes
PAIR = {"hw:pair": 1}


def _start_ray_cluster(dashboard_port: int):
    """The two nodes, started afresh up to RAY_START_TRIES times. Ray gives a node's raylet
    30 s to register (a constant of ray/_private/node.py); beside two busy loops, with the
    other test worker building images, a session once missed it and 26 tests errored. What
    a failed try started (its GCS, raylet, dashboard: this process's new children) is ended
    before the next."""
    import psutil
    from ray._private.utils import write_ray_address
    from ray.cluster_utils import Cluster

    # A root of its own (short: Ray's socket paths live in it), where its nodes' job
    # supervisors read the address of "their" cluster: in the shared /tmp/ray, another
    # test's Ray could take that file, and a head driver job connected to that Ray instead
    # (InvalidAuthToken: the other cluster's token).
    root = tempfile.mkdtemp(prefix="mb-ray-")
    # Cluster.add_node also writes the machine-wide address file, in a folder only an
    # earlier Ray on this machine made: on a fresh machine every try failed without it
    os.makedirs(os.path.join(tempfile.gettempdir(), "ray"), exist_ok=True)
    node_args = {"num_cpus": 2, "object_store_memory": 100 * 1024 * 1024, "temp_dir": root}
    for attempt in range(1, RAY_START_TRIES + 1):
        before = {child.pid for child in psutil.Process().children(recursive=True)}
        cluster = None
        try:
            cluster = Cluster(initialize_head=False, connect=False)
            cluster.add_node(**node_args, **node_ports(), resources={"hw:node-a": 1, **PAIR},
                             include_dashboard=True, dashboard_host="127.0.0.1",
                             dashboard_port=dashboard_port)
            cluster.add_node(**node_args, **node_ports(), resources={"hw:node-b": 1, **PAIR})
            write_ray_address(cluster.gcs_address, root)
            return cluster
        except Exception as exc:
            if attempt == RAY_START_TRIES:
                raise
            print(f"the test Ray cluster did not start (try {attempt}): {exc}",
                  file=sys.stderr)
            if cluster is not None:
                cluster.shutdown()
            for child in psutil.Process().children(recursive=True):
                if child.pid not in before:
                    child.kill()
    raise AssertionError("unreachable")


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[RayCluster]:
    """A real Ray cluster on this machine: the head offers hw:node-a, a second node hw:node-b,
    both hw:pair (a cell across two nodes), and the head's dashboard takes Ray jobs.

    Separate raylet processes, so placement and node loss are real; `Cluster` stops only
    its own nodes, never another Ray on the machine. Its processes sign AWS requests with
    fake keys, for moto; no other test sees them.
    """
    port = free_port()
    saved = {name: os.environ.get(name) for name in FAKE_AWS_ENV}
    os.environ.update(FAKE_AWS_ENV)
    try:
        cluster = _start_ray_cluster(port)
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    try:
        cluster.wait_for_nodes()
        nodes = {"node-a": cluster.head_node.node_id,
                 "node-b": next(n.node_id for n in cluster.worker_nodes)}
        yield RayCluster(address=cluster.address, dashboard_url=f"http://127.0.0.1:{port}",
                         node_of_hw=nodes, cluster=cluster)
    finally:
        cluster.shutdown()


@dataclass(frozen=True)
class ImageEnv:
    """A machine ready for stack images: the base image, a torch wheelhouse, lock files."""

    client: object  # docker.DockerClient
    base_image: str
    wheelhouse: Path
    locks: Path

    def images_section(self) -> str:
        return f"images: {{locks: {self.locks}, wheelhouse: {self.wheelhouse}}}\n"

    def stack(self, name: str) -> str:
        return (f"{{name: {name}, framework: torch, framework_version: '2.13.0', "
                f"python: '3.11', base_image: '{self.base_image}'}}")


@pytest.fixture(scope="session")
def image_env(tmp_path_factory: pytest.TempPathFactory) -> ImageEnv:
    """Made once per session (the base image and wheelhouse once per machine)."""
    from tests.docker_env import engine_or_skip, ensure_base_image, torch_wheelhouse, write_locks

    client = engine_or_skip()
    wheelhouse = torch_wheelhouse()
    locks = write_locks(tmp_path_factory.mktemp("locks"), wheelhouse)
    return ImageEnv(client=client, base_image=ensure_base_image(client),
                    wheelhouse=wheelhouse, locks=locks)


def require_service(missing: str | None, what: str, required_by: str) -> None:
    """Skip the test when a service it needs cannot run here (`missing` says why), or fail
    it where `required_by` is set: CI sets it, so there such a test never skips."""
    if missing is None:
        return
    if os.environ.get(required_by):
        pytest.fail(f"{required_by} is set but {missing}")
    pytest.skip(f"needs {what}: {missing} (bash scripts/test_services.sh)")


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """One real PostgreSQL for the session (tests/postgres_server.py), stopped at its end."""
    from tests.postgres_server import postgres_missing, start_postgres

    require_service(postgres_missing(), "PostgreSQL", "MATRIX_BENCH_REQUIRE_POSTGRES")
    root = Path(tempfile.mkdtemp(prefix="matrix-bench-pg-"))  # a folder its user can reach
    server = start_postgres(root)
    yield server
    server.stop()
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    """One headless Chromium for the session (tests/browser.py), stopped at its end."""
    from tests.browser import browser_missing, start_browser

    require_service(browser_missing(), "a browser", "MATRIX_BENCH_REQUIRE_BROWSER")
    started = start_browser()
    yield started
    started.stop()


@pytest.fixture
def moto_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """moto in server mode on a loopback port: a real HTTP endpoint that boto3 in this
    process and in subprocesses reaches through AWS_ENDPOINT_URL, with fake keys."""
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "moto.server", "-p", str(port)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    for _ in range(100):
        try:
            urllib.request.urlopen(url + "/moto-api/", timeout=1)
            break
        except OSError:
            time.sleep(0.1)
    monkeypatch.setenv("AWS_ENDPOINT_URL", url)
    for name, value in FAKE_AWS_ENV.items():
        monkeypatch.setenv(name, value)
    yield url
    process.terminate()
    process.wait(timeout=10)


@pytest.fixture(scope="session")
def registry(tmp_path_factory) -> str:
    """Debian's docker-registry on a loopback port (the engine trusts 127.0.0.0/8)."""
    binary = shutil.which("docker-registry")
    if binary is None:
        pytest.fail("docker-registry is missing (apt-get install docker-registry)")
    root = tmp_path_factory.mktemp("registry")
    port = free_port()
    config = write(root / "config.yml", f"""
        version: 0.1
        storage: {{filesystem: {{rootdirectory: {root / "data"}}}}}
        http: {{addr: "127.0.0.1:{port}"}}
        """)
    process = subprocess.Popen([binary, "serve", str(config)], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    for _ in range(100):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/", timeout=1)
            break
        except OSError:
            time.sleep(0.1)
    yield f"127.0.0.1:{port}"
    process.terminate()
    process.wait(timeout=10)


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory: pytest.TempPathFactory):
    """One Slurm for the test session; SLURM_CONF points every client (and `matrix`) at it."""
    require_service(slurm_missing(), "Slurm", "MATRIX_BENCH_REQUIRE_SLURM")
    cluster = start_cluster(tmp_path_factory.mktemp("slurm"))
    previous = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = str(cluster.conf)
    yield cluster
    cluster.stop()
    if previous is None:
        os.environ.pop("SLURM_CONF", None)
    else:
        os.environ["SLURM_CONF"] = previous


@pytest.fixture
def slurm(slurm_cluster: SlurmCluster):
    """The session's Slurm, with no job of an earlier test left and its node in service."""
    yield slurm_cluster
    slurm_cluster.cancel_all()
    slurm_cluster.resume()
