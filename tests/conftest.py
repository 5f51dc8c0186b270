"""Shared fixtures: matrix files in temp dirs, the CLI in a subprocess, and one real
two-node Ray cluster per test session (head plus one more node, each with its own hw:)."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

PROJECT = Path(__file__).resolve().parent.parent
SHARED_DATA = PROJECT.parent / "shared" / "data"
BIN = Path(sys.executable).parent


def write(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text).lstrip())
    return path


@pytest.fixture
def matrix_file(tmp_path: Path):
    """Write a matrix file from an indented YAML string."""

    def make(text: str, name: str = "m.yaml") -> Path:
        return write(tmp_path / name, text)

    return make


def run_cli(*args: str, cwd: Path, env: dict[str, str] | None = None,
            timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """`matrix ARGS` in a subprocess, as a user runs it."""
    full_env = {**os.environ, "COLUMNS": "200", **(env or {})}
    full_env.pop("RAY_ADDRESS", None)
    if env and "RAY_ADDRESS" in env:
        full_env["RAY_ADDRESS"] = env["RAY_ADDRESS"]
    return subprocess.run([sys.executable, "-m", "orchestrator.cli", *args], cwd=cwd,
                          env=full_env, capture_output=True, text=True, timeout=timeout)


def journal(run_dir: Path) -> list[dict]:
    lines = (run_dir / "results.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def cell_records(run_dir: Path) -> list[dict]:
    return [r for r in journal(run_dir) if r["record"] == "cell"]


@dataclass(frozen=True)
class RayCluster:
    address: str
    node_of_hw: dict[str, str]  # hardware name -> Ray node id offering it


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="session")
def ray_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RayCluster]:
    """A real Ray cluster on loopback: head offers hw:node-a, a second node hw:node-b."""
    ray = shutil.which("ray", path=str(BIN)) or shutil.which("ray")
    if ray is None:
        pytest.fail("the ray CLI is not installed: the Ray tests need it (pip install ray)")
    port = _free_port()
    address = f"127.0.0.1:{port}"
    # Ray's token authentication: one token for the head, the nodes and every client.
    token = tmp_path_factory.mktemp("ray") / "auth_token"
    token.write_text(secrets.token_hex(32))
    os.environ.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=str(token))
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    common = ["--num-cpus=2", "--disable-usage-stats", "--object-store-memory=100000000"]
    subprocess.run([ray, "stop", "--force"], env=env, capture_output=True, timeout=60)
    subprocess.run([ray, "start", "--head", f"--port={port}", "--node-ip-address=127.0.0.1",
                    "--include-dashboard=false", '--resources={"hw:node-a": 1}', *common],
                   env=env, check=True, capture_output=True, timeout=120)
    try:
        subprocess.run([ray, "start", f"--address={address}", "--node-ip-address=127.0.0.1",
                        '--resources={"hw:node-b": 1}', *common],
                       env=env, check=True, capture_output=True, timeout=120)
        probe = (
            "import json, ray\n"
            f"ray.init(address='{address}', log_to_driver=False)\n"
            "print(json.dumps({k: n['NodeID'] for n in ray.nodes() if n['Alive']"
            " for k in n['Resources'] if k.startswith('hw:')}))\n"
        )
        out = subprocess.run([sys.executable, "-c", probe], env=env, check=True,
                             capture_output=True, text=True, timeout=120).stdout
        nodes = {k.removeprefix("hw:"): v for k, v in json.loads(out.splitlines()[-1]).items()}
        assert set(nodes) == {"node-a", "node-b"}, nodes
        yield RayCluster(address=address, node_of_hw=nodes)
    finally:
        subprocess.run([ray, "stop", "--force"], env=env, capture_output=True, timeout=120)
