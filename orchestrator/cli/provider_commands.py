"""What the providers need before a sweep and leave after one: `matrix cluster-config` (the
EC2 cluster's launcher config) and `matrix cleanup` (every provider's leftovers)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from orchestrator.cli.options import MatrixFile


def cluster_config(
    matrix_file: MatrixFile,
    output: Annotated[Path, typer.Option("--output", "-o", help="Where to write the YAML.")],
    ssh_cidr: Annotated[str | None, typer.Option(
        help="SSH ingress, e.g. 203.0.113.7/32 (default aws.ssh_cidr).")] = None,
) -> None:
    """Write the Ray cluster-launcher config of the matrix's EC2 hardware, checked against
    Ray's schema, and make (or put right) its security group `matrix-bench-<name>`: SSH from
    the one range, Ray among the nodes, nothing else. Needs AWS credentials; the AMI is
    aws.ami or the Deep Learning Base AMI (SSM)."""
    from orchestrator.providers.aws.config_file import write_cluster_config

    typer.echo(write_cluster_config(matrix_file, output, ssh_cidr))


def cleanup(
    region: Annotated[str, typer.Option(help="The AWS region to sweep.")] = "us-east-1",
    reports: Annotated[Path, typer.Option(help="Where this machine's runs live.")] = Path(
        "reports"),
    dry_run: Annotated[bool, typer.Option("--dry-run", help="List, change nothing.")] = False,
    provider: Annotated[list[str] | None, typer.Option(help="Only this provider's (aws, "
                                                       "slurm); may repeat.")] = None,
) -> None:
    """Remove what runs no live sweep owns left behind, each provider its own (EC2
    instances, key pairs, security groups; Slurm jobs), and list it; a provider that cannot
    be asked (no credentials, no Slurm) is named, with exit code 1."""
    from orchestrator.providers import provider_names, remove_leftovers
    from orchestrator.results.run_directory import owned_runs

    names = provider or provider_names()
    actions, failures = remove_leftovers(names, set(owned_runs(reports)), dry_run, region)
    typer.echo("".join(line + "\n" for line in failures), err=True, nl=False)
    typer.echo("".join(("would " if dry_run else "") + a + "\n" for a in actions), nl=False)
    if not actions and not failures:
        typer.echo(f"nothing left behind (checked: {', '.join(names)}; region {region})")
    if failures:
        raise typer.Exit(1)
