"""ECR login and repository creation through boto3, against moto in server mode (a real
HTTP endpoint in another process: no AWS account exists here)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request

import boto3
import pytest

from orchestrator.images import ecr_auth

REGISTRY = "123456789012.dkr.ecr.us-east-1.amazonaws.com/matrix-bench"


@pytest.fixture
def moto_server(monkeypatch) -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen([sys.executable, "-m", "moto.server", "-p", str(port)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    for _ in range(100):
        try:
            urllib.request.urlopen(url + "/moto-api/", timeout=1)
            break
        except OSError:
            time.sleep(0.1)
    monkeypatch.setenv("AWS_ENDPOINT_URL", url)
    for name, value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing"),
                        ("AWS_DEFAULT_REGION", "us-east-1")):
        monkeypatch.setenv(name, value)
    yield url
    process.terminate()
    process.wait(timeout=10)


def test_ecr_auth_creates_the_repository_once_and_decodes_the_token(moto_server):
    first = ecr_auth(REGISTRY)
    second = ecr_auth(REGISTRY)  # the repository exists now: no error
    assert first["username"] == "AWS" and first["password"] and second["username"] == "AWS"
    ecr = boto3.client("ecr", region_name="us-east-1")
    names = [r["repositoryName"] for r in ecr.describe_repositories()["repositories"]]
    assert names == ["matrix-bench"]
