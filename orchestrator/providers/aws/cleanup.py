"""The orphan sweep: what a run left behind on EC2, found by its tag and removed.

Every instance and volume a sweep launches carries the tag `matrix-bench-run=<run>`, and its
key pair and security group are named `matrix-bench-<run>`. `matrix cleanup` terminates the
instances of every run that no live sweep owns, then deletes their key pairs and security
groups, and lists each thing it did.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from orchestrator.providers.aws.network import NAME_PREFIX, RUN_TAG

LIVE_STATES = ["pending", "running", "stopping", "stopped"]


def live_instances(ec2: Any, run: str | None = None) -> dict[str, list[str]]:
    """Run id -> ids of its instances in a live state (of one run, or of every run)."""
    tag = {"Name": f"tag:{RUN_TAG}", "Values": [run]} if run else \
        {"Name": "tag-key", "Values": [RUN_TAG]}
    found: dict[str, list[str]] = {}
    pages = ec2.get_paginator("describe_instances").paginate(Filters=[
        tag, {"Name": "instance-state-name", "Values": LIVE_STATES}])
    for page in pages:
        for reservation in page["Reservations"]:
            for instance in reservation["Instances"]:
                tagged = next(t["Value"] for t in instance["Tags"] if t["Key"] == RUN_TAG)
                found.setdefault(tagged, []).append(instance["InstanceId"])
    return found


def remove_run(ec2: Any, run: str, wait_s: float = 0.0, dry_run: bool = False) -> list[str]:
    """Terminate every live instance of `run`, then delete its key pair, and its security
    group once no instance holds it (waiting up to `wait_s` for them to go). This is the
    teardown's backstop and the orphan sweep's step: it needs nothing but the run's tag and
    names. One line per action (what would be done, if `dry_run`)."""
    actions = []
    instances = live_instances(ec2, run).get(run, [])
    if instances:
        actions.append(f"terminate {', '.join(sorted(instances))} (run {run})")
        if not dry_run:
            ec2.terminate_instances(InstanceIds=instances)
    name = NAME_PREFIX + run
    if ec2.describe_key_pairs(Filters=[{"Name": "key-name", "Values": [name]}])["KeyPairs"]:
        actions.append(f"delete key pair {name}")
        if not dry_run:
            ec2.delete_key_pair(KeyName=name)
    deadline = time.monotonic() + wait_s
    for group in ec2.describe_security_groups(
            Filters=[{"Name": "group-name", "Values": [name]}])["SecurityGroups"]:
        action = f"delete security group {name} ({group['GroupId']})"
        while not dry_run:
            try:
                ec2.delete_security_group(GroupId=group["GroupId"])
                break
            except ec2.exceptions.ClientError:  # still attached to a terminating instance
                if time.monotonic() > deadline:
                    action += (": refused while its instances shut down; run `matrix cleanup` "
                               "again")
                    break
                time.sleep(5)
        actions.append(action)
    return actions


def cleanup(ec2: Any, owned_runs: Iterable[str], dry_run: bool = False) -> list[str]:
    """Remove what every run that no live sweep owns left behind: its live instances, key
    pair and security group (`remove_run`). One line per action (what would be done, if
    dry)."""
    owned = set(owned_runs)
    runs = set(live_instances(ec2))
    runs |= {pair["KeyName"].removeprefix(NAME_PREFIX) for pair in ec2.describe_key_pairs(
        Filters=[{"Name": "key-name", "Values": [NAME_PREFIX + "*"]}])["KeyPairs"]}
    runs |= {group["GroupName"].removeprefix(NAME_PREFIX) for group in
             ec2.describe_security_groups(Filters=[
                 {"Name": "group-name", "Values": [NAME_PREFIX + "*"]}])["SecurityGroups"]}
    return [action for run in sorted(runs - owned)
            for action in remove_run(ec2, run, dry_run=dry_run)]


def tear_down_run(region: str, run: str) -> list[str]:
    """Everything of `run` removed, from the head driver whose follower is gone
    (providers/ray_head: its provider's `Teardown`): one line per action."""
    import boto3

    return remove_run(boto3.client("ec2", region_name=region), run)
