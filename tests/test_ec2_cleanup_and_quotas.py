"""The orphan sweep against moto in server mode (planted instances, key pairs and security
groups, some a live run's, some nobody's), and quota checks with botocore's Stubber."""

from __future__ import annotations

import json
import os
import socket

import boto3
import pytest
from botocore.stub import Stubber

from orchestrator.providers.aws.network import RUN_TAG
from orchestrator.providers.aws.quotas import QuotaError, check_quotas, vcpus_needed
from tests.conftest import run_cli

AMI = "ami-12c6146b"  # one of moto's built-in images


def plant(ec2, run: str | None) -> str:
    tags = [{"ResourceType": "instance", "Tags": [{"Key": RUN_TAG, "Value": run}]}] if run \
        else []
    instance = ec2.run_instances(ImageId=AMI, InstanceType="c5.xlarge", MinCount=1, MaxCount=1,
                                 TagSpecifications=tags)["Instances"][0]["InstanceId"]
    if run:
        ec2.create_key_pair(KeyName=f"matrix-bench-{run}")
        ec2.create_security_group(GroupName=f"matrix-bench-{run}", Description="run")
    return instance


def states(ec2) -> dict[str, str]:
    reservations = ec2.describe_instances()["Reservations"]
    return {i["InstanceId"]: i["State"]["Name"] for r in reservations for i in r["Instances"]}


def test_cleanup_removes_what_orphaned_runs_left_and_spares_the_rest(moto_server, tmp_path):
    ec2 = boto3.client("ec2", region_name="us-east-1")
    orphan, live, stranger = plant(ec2, "old-sweep"), plant(ec2, "running-sweep"), plant(ec2, None)
    ec2.create_key_pair(KeyName="someone-elses-key")
    # The live run's lock, as a sweep on this host holds it.
    (tmp_path / "reports" / "running-sweep").mkdir(parents=True)
    (tmp_path / "reports" / "running-sweep" / "run.lock").write_text(
        json.dumps({"pid": os.getpid(), "host": socket.gethostname()}))

    dry = run_cli("cleanup", "--dry-run", "--provider", "aws", cwd=tmp_path)
    assert f"would terminate {orphan} (run old-sweep)" in dry.stdout, dry.stderr
    assert states(ec2)[orphan] == "running"

    done = run_cli("cleanup", "--provider", "aws", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"terminate {orphan} (run old-sweep)" in done.stdout
    assert "delete key pair matrix-bench-old-sweep" in done.stdout
    assert "delete security group matrix-bench-old-sweep" in done.stdout
    after = states(ec2)
    assert after[orphan] == "terminated"
    assert after[live] == "running" and after[stranger] == "running"
    keys = {k["KeyName"] for k in ec2.describe_key_pairs()["KeyPairs"]}
    assert keys == {"matrix-bench-running-sweep", "someone-elses-key"}
    again = run_cli("cleanup", "--provider", "aws", cwd=tmp_path)
    assert "nothing left behind (checked: aws; region us-east-1)" in again.stdout


def test_quotas_are_counted_in_vcpus_per_family_and_market():
    needs = {n.code: n.vcpus for n in vcpus_needed([
        ("p3.8xlarge", False, 2), ("p3.2xlarge", False, 1), ("m5.large", False, 1),
        ("c5.18xlarge", True, 1)])}
    assert needs == {"L-417A185B": 72, "L-1216C47A": 2, "L-34B43A08": 72}


def test_a_quota_too_small_is_named_with_both_numbers():
    quotas = boto3.client("service-quotas", region_name="us-east-1", aws_access_key_id="x",
                          aws_secret_access_key="x")
    with Stubber(quotas) as stub:
        stub.add_response("get_service_quota", {"Quota": {
            "ServiceCode": "ec2", "QuotaCode": "L-417A185B", "Value": 32.0,
            "QuotaName": "Running On-Demand P instances"}},
            {"ServiceCode": "ec2", "QuotaCode": "L-417A185B"})
        with pytest.raises(QuotaError) as caught:
            check_quotas(quotas, vcpus_needed([("p3.8xlarge", False, 2)]), "us-east-1")
    assert str(caught.value).startswith(
        "the sweep may run 64 vCPUs of 'Running On-Demand P instances' (L-417A185B) at once "
        "in us-east-1, and the account's quota is 32")
