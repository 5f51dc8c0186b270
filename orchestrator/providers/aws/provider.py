"""The `aws` provider (orchestrator/providers/__init__.py): kind `ec2`.

Its cells run on a Ray cluster launched for the sweep (cluster.py) with a driver on the
head, followed from here (providers/ray_head: driver, follower, group). It checks the
`aws:` section and each EC2 entry, prices instances (pricing.py), checks quotas before
anything is built, answers for ECR, uploads a run to S3 and removes what runs left behind.
Nothing outside this package imports boto3 for a sweep.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.executors import needs_image
from orchestrator.providers import BaseProvider, CellGroup, Launch, Price, Say
from orchestrator.providers.aws.aws import ecr_auth, is_ecr
from orchestrator.providers.aws.catalogue import EC2_INSTANCE_TYPES, instance_type_problem
from orchestrator.providers.aws.settings import aws_of, aws_section, aws_setting_problem

HEAD_RUN_ROOT = "~/matrix-bench/runs"  # on the nodes: cell files and logs
# Passed to the head driver when set here; never credentials (the nodes have their
# instance profile): a test account's endpoint (moto) reaches the head's own teardown.
FORWARDED_ENV = ("AWS_ENDPOINT_URL",)

if TYPE_CHECKING:
    from orchestrator.hardware.local import LocalMachine
    from orchestrator.registry.cell_run import Cell
    from orchestrator.spec.model import Hardware, MatrixSpec


class AwsProvider(BaseProvider):
    launches = True

    def hardware_problem(self, hardware: Hardware) -> str | None:
        if not hardware.instance_type:
            return "kind ec2 needs an instance_type (e.g. p3.2xlarge)"
        if hardware.most_nodes > 1:
            return (f"kind ec2 runs a cell on one node for now (nodes: "
                    f"{hardware.most_nodes}): "
                    "a cell across nodes runs on a Ray cluster, kind local with "
                    "--ray-address")
        return instance_type_problem(hardware.instance_type, hardware.gpus)

    def host_memory_gib(self, instance_type: str) -> float | None:
        known = EC2_INSTANCE_TYPES.get(instance_type)
        return known.memory_gib if known else None

    def host_gpus(self, instance_type: str) -> int | None:
        known = EC2_INSTANCE_TYPES.get(instance_type)
        return known.gpus if known else None

    def host_network_gbps(self, instance_type: str) -> float | None:
        known = EC2_INSTANCE_TYPES.get(instance_type)
        return known.network_gbps if known else None

    def matrix_problem(self, spec: MatrixSpec) -> tuple[tuple[str | int, ...], str] | None:
        aws = aws_section(spec)
        if aws and (problem := aws_setting_problem(aws)):
            return ("aws", problem[0]), problem[1]
        if not any(h.kind == "ec2" for h in spec.hardware):
            return None
        if aws is None or aws.instance_profile is None:
            where: tuple[str | int, ...] = ("aws", "instance_profile") if aws else \
                ("hardware",)
            return where, ("EC2 hardware needs aws.instance_profile: the IAM instance profile "
                           "its nodes run with (docs/aws.md)")
        if spec.images.registry is None and any(needs_image(s) for s in spec.stacks):
            return ("images", "registry"), (
                "EC2 nodes pull each stack's image from a registry: set images.registry to "
                "an ECR repository URI, e.g. "
                "123456789012.dkr.ecr.us-east-1.amazonaws.com/matrix-bench")
        return None

    def skip_reason(self, cell: Cell, local: LocalMachine, launch: bool) -> str | None:
        if not launch:
            return (f"no node offers hw:{cell.hardware.name} (EC2 hardware runs on a Ray "
                    "cluster)")
        if not needs_image(cell.stack):
            return ("incompatible: EC2 nodes run cells in their stack's image, and stack "
                    f"{cell.stack.name} has none (executor: process)")
        return None

    def prices(self, spec: MatrixSpec, hardware: list[Hardware], warn: Say
               ) -> dict[str, Price]:
        from orchestrator.providers.aws.costs import hardware_prices

        return hardware_prices(spec, hardware, warn=warn)

    def plan_lines(self, spec: MatrixSpec, cells: list[Cell]) -> list[str]:
        entries = sorted({cell.hardware.name for cell in cells})
        return [f"ec2 {', '.join(entries)}: the cluster's head node and each node's boot time "
                "come on top of the cost below"]

    def check_launch(self, spec: MatrixSpec, cells: list[Cell], run_dir: Path,
                     say: Say) -> None:
        from orchestrator.providers.aws.cluster import Clients, check_launch_quotas

        aws = aws_of(spec)
        check_launch_quotas(spec, Clients.for_region(aws.region).service_quotas, say)

    def launch(self, launch: Launch) -> CellGroup:
        """The cluster's group (providers/ray_head): its head driver gets the cells, prices
        and budget, and tears the cluster down by its run tag if no follower is left."""
        from orchestrator.providers.aws.cluster import Clients, RayLauncher, ec2_cluster
        from orchestrator.providers.aws.costs import head_price
        from orchestrator.providers.ray_head.driver import DriverInput, Teardown
        from orchestrator.providers.ray_head.group import RayHeadGroup

        spec = launch.spec
        aws = aws_of(spec)
        run_id = launch.run_dir.name  # the run tag; `matrix cleanup` spares runs locked here
        head = head_price(spec)
        driver_input = DriverInput(
            run_id=run_id, run_root=f"{HEAD_RUN_ROOT}/{run_id}",
            teardown=Teardown(function="orchestrator.providers.aws.cleanup:tear_down_run",
                              args={"region": aws.region, "run": run_id}),
            cells=launch.cells, images={c.stack.name: launch.images[c.stack.name]
                                        for c in launch.cells},
            tool=launch.tool, budget_usd=spec.budget_usd,
            usd_per_hour={name: price.usd_per_hour for name, price in launch.prices.items()},
            head_usd_per_hour=head.usd_per_hour if head else 0.0,
            estimate_s=launch.estimate_s,
            follower_grace_s=launch.options.get("follower_grace_s", 600.0))
        launcher = launch.options.get("launcher") or RayLauncher()
        clients = Clients.for_region(aws.region)
        return RayHeadGroup(
            lambda: ec2_cluster(spec, run_id, launch.run_dir, launcher, clients, launch.say),
            launcher, driver_input, launch.record, launch.say, forwarded_env=FORWARDED_ENV)

    def after_run(self, spec: MatrixSpec, run_dir: Path, say: Say) -> None:
        """Copy the run's results to `aws.results_uri`; a failure is reported, the local
        run stays whole."""
        aws = aws_section(spec)
        if aws is None or not aws.results_uri:
            return
        import boto3

        from orchestrator.providers.aws.s3 import upload_run

        uri = aws.results_uri
        try:
            keys = upload_run(boto3.client("s3", region_name=aws.region), run_dir, uri)
        except Exception as exc:  # botocore errors: no access, no bucket, no network
            say(f"upload to {uri} failed: {str(exc).splitlines()[0]} (the run is complete "
                f"in {run_dir})")
            return
        say(f"uploaded: {len(keys)} files to {uri.rstrip('/')}/{run_dir.name}/")

    def remove_leftovers(self, owned_runs: set[str], dry_run: bool, region: str | None
                         ) -> list[str]:
        """Instances, key pairs and security groups of runs no live sweep owns, in
        `region` (providers/aws/cleanup.py)."""
        import boto3

        from orchestrator.providers.aws.cleanup import cleanup

        return cleanup(boto3.client("ec2", region_name=region), owned_runs, dry_run=dry_run)

    def registry_auth(self, reference: str, for_push: bool) -> dict[str, str] | None:
        """ECR credentials for an ECR reference (a node's instance profile may read its
        run's repository; a push creates the repository if needed), else None."""
        return ecr_auth(reference, for_push=for_push) if is_ecr(reference) else None


PROVIDER = AwsProvider()
