"""A sweep's EC2 cluster, from the quota check to the last deleted key pair.

`check_launch_quotas` runs first, before anything is built. `ec2_cluster` is a context
manager: inside it the cluster is up (or coming up) and its
dashboard answers; however the block ends (success, a failing cell, Ctrl-C, SIGTERM, a
bug) the cluster is torn down, first through Ray's own teardown, then by the run tag
(`cleanup.remove_run`), which needs nothing but EC2 and so also catches what Ray missed.

The seam to Ray's cluster launcher is the small `Launcher` protocol: `RayLauncher` drives
`ray.autoscaler.sdk` and reaches the head's dashboard through an SSH tunnel with the run's
key. Nothing else here knows how the cluster came up.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from orchestrator.providers.aws.aws import AwsError, default_ami, public_cidr
from orchestrator.providers.aws.cleanup import remove_run
from orchestrator.providers.aws.network import NAME_PREFIX, ensure_security_group, group_name
from orchestrator.providers.aws.quotas import QuotaError, check_quotas, vcpus_needed
from orchestrator.providers.aws.ray_cluster import SSH_USER, cluster_config, node_setup, validated
from orchestrator.providers.aws.settings import aws_of, ec2_settings
from orchestrator.spec.model import MatrixSpec

DASHBOARD_PORT = 8265
TEARDOWN_WAIT_S = 120.0  # for terminating instances to free the security group


class Launcher(Protocol):
    """Brings a cluster-launcher config up and down, and reaches its head's dashboard."""

    python: str  # the interpreter that runs the head driver on the head

    def up(self, config_path: Path) -> None: ...

    def dashboard_url(self) -> str: ...

    def down(self, config_path: Path) -> None: ...


@dataclass(frozen=True)
class Clients:
    """The boto3 clients a launch needs, in the matrix's region."""

    ec2: Any
    ssm: Any
    service_quotas: Any

    @classmethod
    def for_region(cls, region: str) -> Clients:
        try:
            import boto3
        except ImportError:
            raise AwsError("EC2 hardware needs the cloud extra: pip install "
                           "'matrix-bench[cloud]' (boto3 and Ray's job client)") from None

        return cls(*(boto3.client(name, region_name=region)
                     for name in ("ec2", "ssm", "service-quotas")))


@dataclass(frozen=True)
class ClusterFiles:
    config: Path  # the cluster-launcher YAML, in the run directory
    key: Path  # the run's SSH private key, ~/.ssh/matrix-bench-<run>.pem, 0600, deleted at
    # teardown with its key pair


def check_launch_quotas(spec: MatrixSpec, service_quotas: Any,
                        warn: Callable[[str], None]) -> None:
    """QuotaError when the account cannot run what the plan may run at once; a warning when
    Service Quotas cannot be asked (no permission, no such API), as EC2 will refuse anyway."""
    aws = aws_of(spec)
    nodes = [(str(h.instance_type), ec2_settings(h).spot, aws.max_workers)
             for h in spec.hardware if h.kind == "ec2"]
    nodes.append((aws.head_instance_type, False, 1))
    try:
        check_quotas(service_quotas, vcpus_needed(nodes), aws.region)
    except QuotaError:
        raise
    except Exception as exc:  # botocore errors
        warn(f"could not check EC2 quotas ({str(exc).splitlines()[0][:160]}); EC2 will refuse "
             "instances beyond them")


def prepare(spec: MatrixSpec, run_id: str, run_dir: Path, clients: Clients) -> ClusterFiles:
    """Create the run's key pair and security group, and write its validated cluster
    config."""
    import yaml

    aws = aws_of(spec)
    ami = aws.ami or default_ami(clients.ssm)
    cidr = aws.ssh_cidr or public_cidr()
    name = NAME_PREFIX + run_id
    key = Path.home() / ".ssh" / f"{name}.pem"
    group = security_group(clients.ec2, run_id, cidr, aws.subnet_id)  # before the key file
    key.parent.mkdir(parents=True, exist_ok=True)
    try:
        material = clients.ec2.create_key_pair(KeyName=name)["KeyMaterial"]
    except Exception as exc:
        raise AwsError(f"cannot create key pair {name}: {str(exc).splitlines()[0]} (a live "
                       f"sweep of run {run_id}? else `matrix cleanup`)") from None
    fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(material)
    config = cluster_config(spec, run_id, ami, name, str(key), group, node_setup())
    validated(config)
    path = run_dir / "cluster.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return ClusterFiles(config=path, key=key)


def security_group(ec2: Any, run_id: str, cidr: str, subnet_id: str | None) -> str:
    """The run's security group (`network.ensure_security_group`), or AwsError saying why
    AWS refused it."""
    try:
        return ensure_security_group(ec2, run_id, cidr, subnet_id)
    except AwsError:
        raise
    except Exception as exc:  # botocore: no permission, a limit on groups or rules
        raise AwsError(f"cannot set up security group {group_name(run_id)}: "
                       f"{str(exc).splitlines()[0]}") from None


@contextlib.contextmanager
def ec2_cluster(spec: MatrixSpec, run_id: str, run_dir: Path, launcher: Launcher,
                clients: Clients, say: Callable[[str], None]) -> Iterator[None]:
    """The cluster, up for the block and torn down after it, whatever happens."""
    aws = aws_of(spec)
    files = None
    try:
        files = prepare(spec, run_id, run_dir, clients)
        say(f"launching the cluster of run {run_id} in {aws.region} ({files.config})")
        try:
            launcher.up(files.config)
        except Exception as exc:  # Ray's launcher raises what its steps raise
            raise AwsError(f"the cluster of run {run_id} did not come up: "
                           f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__} "
                           "(what was launched is torn down now; run again to retry)") from exc
        yield
    finally:
        with _uninterruptible(say):
            _tear_down(run_id, files, launcher, clients, say)


def _tear_down(run_id: str, files: ClusterFiles | None, launcher: Launcher, clients: Clients,
               say: Callable[[str], None]) -> None:
    say(f"tearing down the cluster of run {run_id}")
    if files is not None:
        try:
            launcher.down(files.config)
        except Exception as exc:  # the backstop below still terminates by tag
            say(f"Ray's teardown failed ({str(exc).splitlines()[0][:160]}); "
                "terminating by the run tag")
        files.key.unlink(missing_ok=True)
    try:
        for action in remove_run(clients.ec2, run_id, wait_s=TEARDOWN_WAIT_S):
            say(action)
    except Exception as exc:  # botocore: no network, expired credentials
        say(f"the teardown by the run tag failed ({str(exc).splitlines()[0][:160]}): run "
            "`matrix cleanup` once AWS answers; every node also terminates itself after "
            "aws.max_lifetime_hours")


@contextlib.contextmanager
def _uninterruptible(say: Callable[[str], None]) -> Iterator[None]:
    """A second Ctrl-C (or a SIGTERM) must not leave instances running halfway through the
    teardown: both are ignored until it is done (in the main thread, where signals land)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT,
                                                                     signal.SIGTERM)}
    say("(Ctrl-C is ignored until the teardown is done)")
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


class RayLauncher:
    """Ray's cluster launcher (`ray up` / `ray down` as an SDK) and an SSH tunnel to the
    head's dashboard, opened with the run's key and reopened when it drops."""

    python = "python3"

    def __init__(self) -> None:
        self._config: Path | None = None
        self._tunnel: subprocess.Popen[bytes] | None = None
        self._port = 0

    def up(self, config_path: Path) -> None:
        from ray.autoscaler import sdk

        self._config = config_path
        sdk.create_or_update_cluster(str(config_path), no_restart=False, restart_only=False,
                                     no_config_cache=True)

    def dashboard_url(self) -> str:
        if self._tunnel is None or self._tunnel.poll() is not None:
            self._open_tunnel()
        return f"http://127.0.0.1:{self._port}"

    def down(self, config_path: Path) -> None:
        from ray.autoscaler import sdk

        if self._tunnel is not None:
            self._tunnel.terminate()
        sdk.teardown_cluster(str(config_path))

    def _open_tunnel(self) -> None:
        import yaml
        from ray.autoscaler import sdk

        assert self._config is not None, "up() first"
        config = yaml.safe_load(self._config.read_text(encoding="utf-8"))
        head = sdk.get_head_node_ip(str(self._config))
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self._port = probe.getsockname()[1]
        self._tunnel = subprocess.Popen([
            "ssh", "-N", "-i", config["auth"]["ssh_private_key"],
            "-o", "StrictHostKeyChecking=accept-new", "-o", "ExitOnForwardFailure=yes",
            "-o", "ServerAliveInterval=15", "-o", "BatchMode=yes",
            "-L", f"127.0.0.1:{self._port}:127.0.0.1:{DASHBOARD_PORT}", f"{SSH_USER}@{head}"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and self._tunnel.poll() is None:
            with contextlib.suppress(OSError), socket.create_connection(
                    ("127.0.0.1", self._port), timeout=1):
                return
            time.sleep(0.5)
        raise ConnectionError(f"no SSH tunnel to the head's dashboard at {head}")
