"""The shipped IAM policies (docs/aws-iam-policy.json for the user, docs/aws-node-iam-policy.json
for the nodes) allow every AWS call the tool makes, found in its own source."""

from __future__ import annotations

import json
import re

from tests.conftest import PROJECT

SERVICES = {"ec2": "ec2", "ssm": "ssm", "ecr": "ecr", "s3": "s3", "pricing": "pricing",
            "service_quotas": "servicequotas"}
# boto3 helpers whose IAM action has another name.
RENAMED = {"s3:UploadFile": "s3:PutObject", "s3:DownloadFile": "s3:GetObject",
           "s3:ListObjectsV2": "s3:ListBucket"}
# What Ray's AWS bootstrap and node provider call on the user's behalf (launch, tag, look up).
RAYS_CALLS = {"ec2:RunInstances", "ec2:CreateTags", "ec2:DescribeInstances",
              "ec2:DescribeSubnets", "ec2:CreateSecurityGroup",
              "ec2:AuthorizeSecurityGroupIngress", "iam:PassRole"}


def pascal(snake: str) -> str:
    return "".join(part.upper() if part == "v2" else part.title() for part in snake.split("_"))


def actions_of(path: str) -> set[str]:
    policy = json.loads((PROJECT / "docs" / path).read_text())
    return {action for statement in policy["Statement"] if statement["Effect"] == "Allow"
            for action in ([statement["Action"]] if isinstance(statement["Action"], str)
                           else statement["Action"])}


def calls_in_source() -> set[str]:
    source = "\n".join(p.read_text() for p in (PROJECT / "orchestrator").rglob("*.py"))
    pattern = r"\b({})\.(?:get_paginator\(\"([a-z0-9_]+)\"|([a-z0-9_]+)\()".format(
        "|".join(SERVICES))
    found = set()
    for service, paginated, method in re.findall(pattern, source):
        if method == "get_paginator":
            continue
        action = f"{SERVICES[service]}:{pascal(paginated or method)}"
        found.add(RENAMED.get(action, action))
    return found


def test_the_users_policy_allows_every_call_the_tool_and_rays_launcher_make():
    calls = calls_in_source()
    assert {"ec2:CreateKeyPair", "ec2:TerminateInstances", "ssm:GetParameter",
            "servicequotas:GetServiceQuota", "s3:ListBucket"} <= calls  # the scan works
    missing = (calls | RAYS_CALLS) - actions_of("aws-iam-policy.json")
    assert missing == set()


def test_the_nodes_may_launch_workers_tear_their_run_down_and_pull_images():
    node = actions_of("aws-node-iam-policy.json")
    needed = RAYS_CALLS - {"ec2:CreateSecurityGroup", "ec2:AuthorizeSecurityGroupIngress"}
    needed |= {"ec2:TerminateInstances", "ec2:DeleteKeyPair", "ecr:GetAuthorizationToken",
               "ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer"}
    assert needed - node == set()
    assert not any(action.endswith("*") for action in node)  # least privilege: no wildcards
