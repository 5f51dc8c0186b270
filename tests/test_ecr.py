"""ECR login and repository creation through boto3, against moto in server mode (a real
HTTP endpoint in another process: no AWS account exists here)."""

from __future__ import annotations

import boto3

from orchestrator.providers.aws.aws import ecr_auth

REGISTRY = "123456789012.dkr.ecr.us-east-1.amazonaws.com/matrix-bench"


def test_ecr_auth_creates_the_repository_once_and_decodes_the_token(moto_server):
    first = ecr_auth(REGISTRY)
    second = ecr_auth(REGISTRY)  # the repository exists now: no error
    assert first["username"] == "AWS" and first["password"] and second["username"] == "AWS"
    ecr = boto3.client("ecr", region_name="us-east-1")
    names = [r["repositoryName"] for r in ecr.describe_repositories()["repositories"]]
    assert names == ["matrix-bench"]
