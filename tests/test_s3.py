"""Results to and from S3 through moto in server mode: a sweep uploads its run to
aws.results_uri, and `matrix fetch` brings it back whole for `matrix report`."""

from __future__ import annotations

import boto3
import pytest

from orchestrator.providers.aws.s3 import S3UriError, split_uri
from tests.conftest import cell_records, run_cli, write


def test_s3_uris_are_checked():
    assert split_uri("s3://bucket/a/b/") == ("bucket", "a/b")
    with pytest.raises(S3UriError, match="not an S3 URI"):
        split_uri("https://bucket/a")


def test_a_sweep_uploads_its_results_and_fetch_brings_them_back(moto_server, tmp_path):
    boto3.client("s3", region_name="us-east-1").create_bucket(Bucket="sweeps")
    write(tmp_path / "m.yaml", """
        name: up
        aws: {region: us-east-1, results_uri: "s3://sweeps/team"}
        hardware: [{name: box, kind: local}]
        stacks: [{name: here, executor: process}]
        workloads: [{name: sleep, params: {seconds: 0.1, fault: [none, raise]}}]
        """)
    done = run_cli("run", "m.yaml", "--no-ray", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "to s3://sweeps/team/up/" in done.stdout
    keys = {o["Key"] for o in boto3.client("s3", region_name="us-east-1").list_objects_v2(
        Bucket="sweeps")["Contents"]}
    assert {"team/up/results.jsonl", "team/up/results.parquet", "team/up/report.md",
            "team/up/report.html"} <= keys
    assert sum(k.startswith("team/up/logs/") for k in keys) == 2

    fetched = run_cli("fetch", "s3://sweeps/team/up", "-o", "copy", cwd=tmp_path)
    assert fetched.returncode == 0, fetched.stderr
    copy = tmp_path / "copy"
    assert (copy / "results.jsonl").read_bytes() == \
        (tmp_path / "reports" / "up" / "results.jsonl").read_bytes()
    assert {c["status"] for c in cell_records(copy)} == {"ok", "failed"}
    redrawn = run_cli("report", "copy", cwd=tmp_path)
    assert redrawn.returncode == 0, redrawn.stderr


def test_fetching_nothing_is_a_clear_error(moto_server, tmp_path):
    boto3.client("s3", region_name="us-east-1").create_bucket(Bucket="empty")
    done = run_cli("fetch", "s3://empty/none", cwd=tmp_path)
    assert done.returncode == 2 and "nothing under s3://empty/none" in done.stderr
