"""The orphan sweep: what a run left behind on EC2, found by its tag and removed.

Every instance and volume a sweep launches carries the tag `matrix-bench-run=<run>`, and its
key pair and security group are named `matrix-bench-<run>`. `matrix cleanup` terminates the
instances of every run that no live sweep owns, then deletes their key pairs and security
groups, and lists each thing it did.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from orchestrator.cloud.ray_cluster import RUN_TAG

NAME_PREFIX = "matrix-bench-"
LIVE_STATES = ["pending", "running", "stopping", "stopped"]


def orphans(ec2: Any, owned_runs: Iterable[str]) -> dict[str, list[str]]:
    """Run id -> ids of its instances in a live state, for runs not in `owned_runs`."""
    owned = set(owned_runs)
    found: dict[str, list[str]] = {}
    pages = ec2.get_paginator("describe_instances").paginate(Filters=[
        {"Name": "tag-key", "Values": [RUN_TAG]},
        {"Name": "instance-state-name", "Values": LIVE_STATES}])
    for page in pages:
        for reservation in page["Reservations"]:
            for instance in reservation["Instances"]:
                run = next(t["Value"] for t in instance["Tags"] if t["Key"] == RUN_TAG)
                if run not in owned:
                    found.setdefault(run, []).append(instance["InstanceId"])
    return found


def cleanup(ec2: Any, owned_runs: Iterable[str], dry_run: bool = False) -> list[str]:
    """Terminate orphaned instances, then delete the key pairs and security groups of runs
    that own nothing any more. Returns one line per action (what would be done, if dry)."""
    owned = set(owned_runs)
    actions: list[str] = []
    for run, instances in sorted(orphans(ec2, owned).items()):
        actions.append(f"terminate {', '.join(sorted(instances))} (run {run})")
        if not dry_run:
            ec2.terminate_instances(InstanceIds=instances)
    still = set(orphans(ec2, ())) if not dry_run else set()
    for pair in ec2.describe_key_pairs(
            Filters=[{"Name": "key-name", "Values": [NAME_PREFIX + "*"]}])["KeyPairs"]:
        run = pair["KeyName"].removeprefix(NAME_PREFIX)
        if run not in owned and run not in still:
            actions.append(f"delete key pair {pair['KeyName']}")
            if not dry_run:
                ec2.delete_key_pair(KeyName=pair["KeyName"])
    for group in ec2.describe_security_groups(
            Filters=[{"Name": "group-name", "Values": [NAME_PREFIX + "*"]}])["SecurityGroups"]:
        run = group["GroupName"].removeprefix(NAME_PREFIX)
        if run not in owned and run not in still:
            action = f"delete security group {group['GroupName']} ({group['GroupId']})"
            if not dry_run:
                try:
                    ec2.delete_security_group(GroupId=group["GroupId"])
                except ec2.exceptions.ClientError:  # still attached to a terminating instance
                    action += ": refused while its instances shut down, run cleanup again"
            actions.append(action)
    return actions
