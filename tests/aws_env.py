"""EC2 for tests: moto behind Ray's own AWS bootstrap and node provider, and the test Ray
cluster standing in for the nodes those instances would run.

Ray's cluster launcher reaches its nodes over SSH, which nothing here provides. The
`LoopbackLauncher` does what `ray up` does on the EC2 side (Ray's `bootstrap_aws` makes the
security group, Ray's `AWSNodeProvider` launches the head and one node per node type with
the config's node_config and Ray's tags, all in moto) and what `ray down` does after its
SSH step (the provider terminates the cluster's nodes). The Ray side is the session's
loopback cluster, whose nodes offer the matrix's `hw:` resources.
"""

from __future__ import annotations

import contextlib
import socket
import sys
import threading
from pathlib import Path
from typing import Any

RUN_TAG = "matrix-bench-run"


class LoopbackLauncher:
    python = sys.executable

    def __init__(self, dashboard_url: str) -> None:
        self._dashboard = dashboard_url
        self.provider: Any = None

    def up(self, config_path: Path) -> None:
        import yaml
        from ray.autoscaler._private.aws.config import bootstrap_aws
        from ray.autoscaler._private.aws.node_provider import AWSNodeProvider
        from ray.autoscaler._private.util import prepare_config
        from ray.autoscaler.tags import (
            NODE_KIND_HEAD,
            NODE_KIND_WORKER,
            TAG_RAY_NODE_KIND,
            TAG_RAY_NODE_NAME,
            TAG_RAY_USER_NODE_TYPE,
        )

        forget_rays_aws_clients()
        config = bootstrap_aws(prepare_config(yaml.safe_load(config_path.read_text())))
        self.provider = AWSNodeProvider(config["provider"], config["cluster_name"])
        for name, node_type in config["available_node_types"].items():
            kind = NODE_KIND_HEAD if name == config["head_node_type"] else NODE_KIND_WORKER
            self.provider.create_node(node_type["node_config"], {
                TAG_RAY_NODE_KIND: kind, TAG_RAY_USER_NODE_TYPE: name,
                TAG_RAY_NODE_NAME: f"ray-{config['cluster_name']}-{kind}"}, 1)

    def dashboard_url(self) -> str:
        return self._dashboard

    def down(self, config_path: Path) -> None:
        if self.provider is not None:
            self.provider.terminate_nodes(self.provider.non_terminated_nodes({}))


def forget_rays_aws_clients() -> None:
    """Ray caches its boto3 clients per region for the life of the process; each test's
    moto server listens on a port of its own."""
    from ray.autoscaler._private.aws import config, utils

    for cached in (utils.resource_cache, utils.client_cache, config._get_subnets_or_die):
        cached.cache_clear()


def instances_of(ec2: Any, run: str) -> list[dict[str, Any]]:
    """Every instance moto holds for the run, in any state."""
    answer = ec2.describe_instances(Filters=[{"Name": f"tag:{RUN_TAG}", "Values": [run]}])
    return [i for r in answer["Reservations"] for i in r["Instances"]]


def live(instances: list[dict[str, Any]]) -> list[str]:
    return [i["InstanceId"] for i in instances
            if i["State"]["Name"] in ("pending", "running", "stopping", "stopped")]


def moto_account(ec2: Any, iam: Any, profile: str = "matrix-bench-node") -> str:
    """An instance profile for the nodes, and an AMI id moto knows."""
    iam.create_instance_profile(InstanceProfileName=profile)
    return str(ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"])


class Proxy:
    """A TCP proxy on loopback that can drop every connection and refuse new ones for a
    while: a real lost connection between the follower and the head's dashboard."""

    def __init__(self, target_port: int) -> None:
        self.target = ("127.0.0.1", target_port)
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.up = threading.Event()
        self.up.set()
        self.drops = 0
        self._sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def cut(self) -> None:
        self.up.clear()
        self.drops += 1
        for sock in self._sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
        self._sockets.clear()

    def restore(self) -> None:
        self.up.set()

    def _accept(self) -> None:
        while True:
            client, _ = self.server.accept()
            if not self.up.is_set():
                client.close()
                continue
            upstream = socket.create_connection(self.target)
            self._sockets += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                with contextlib.suppress(OSError):
                    sock.close()
