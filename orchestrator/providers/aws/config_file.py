"""`matrix cluster-config`: the Ray cluster-launcher config of a matrix's EC2 hardware,
written for people who bring the cluster up themselves (`ray up`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def write_cluster_config(matrix_file: Path, output: Path, ssh_cidr: str | None) -> str:
    """Write the config, checked against Ray's schema, and make (or put right) its security
    group `matrix-bench-<name>`; the line that says what was written."""
    import yaml

    from orchestrator.providers.aws.cluster import Clients, security_group
    from orchestrator.providers.aws.network import ssh_cidr_problem
    from orchestrator.providers.aws.ray_cluster import ClusterConfigError, node_setup, validated
    from orchestrator.providers.aws.ray_cluster import cluster_config as render
    from orchestrator.providers.aws.settings import aws_section
    from orchestrator.validate import load_spec

    spec = load_spec(matrix_file)
    aws = aws_section(spec)
    if aws is None:
        raise ClusterConfigError("the matrix has no aws section, so no EC2 cluster")
    cidr = ssh_cidr or aws.ssh_cidr
    if cidr is None:
        raise ClusterConfigError("give --ssh-cidr or aws.ssh_cidr: the one address range that "
                                 "may reach the nodes over SSH")
    if problem := ssh_cidr_problem(cidr):
        raise ClusterConfigError(f"--ssh-cidr {problem}")
    clients = Clients.for_region(aws.region)
    if aws.ami:
        ami = aws.ami
    else:
        from orchestrator.providers.aws.aws import default_ami

        ami = default_ami(clients.ssm)
    setup = node_setup()

    def render_for(group: str) -> dict[str, Any]:
        return render(spec, run_id=spec.name, ami=ami, key_name=f"matrix-bench-{spec.name}",
                      ssh_private_key=f"~/.ssh/matrix-bench-{spec.name}.pem",
                      security_group_id=group, setup_commands=setup)

    validated(render_for("sg-0"))  # Ray's schema first: nothing is made for a bad config
    group = security_group(clients.ec2, spec.name, cidr, aws.subnet_id)
    config = render_for(group)
    output.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return (f"{output}: {len(config['available_node_types']) - 1} EC2 node types, "
            f"AMI {ami}, region {aws.region}, security group {group} (SSH from {cidr} only)")
