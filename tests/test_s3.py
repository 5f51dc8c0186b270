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


def test_a_key_that_would_land_outside_the_run_is_never_written(moto_server, tmp_path):
    """A key's remainder after the run's prefix was joined to the destination as is: the
    key `team/run//…/x` (an absolute remainder) was written at that absolute path. Only the
    run's own files land, and only inside its folder."""
    s3 = boto3.client("s3", region_name="us-east-1")
    s3.create_bucket(Bucket="odd")
    outside = tmp_path / "outside" / "planted.txt"
    s3.put_object(Bucket="odd", Key="team/run/results.jsonl", Body=b"")
    s3.put_object(Bucket="odd", Key=f"team/run/{outside}", Body=b"planted")  # run//tmp/...
    s3.put_object(Bucket="odd", Key="team/run/logs/../../escaped.txt", Body=b"planted")
    s3.put_object(Bucket="odd", Key="team/run/logs/a.log", Body=b"a log")
    (tmp_path / "here").mkdir()
    done = run_cli("fetch", "s3://odd/team/run", "-o", "copy", cwd=tmp_path / "here")
    assert done.returncode == 0, done.stderr
    assert not outside.exists() and not (tmp_path / "escaped.txt").exists()
    written = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())
    assert written == ["here/copy/logs/a.log", "here/copy/results.jsonl"]


def test_fetch_never_replaces_a_local_run(moto_server, tmp_path):
    """A fetch into reports/RUN where a local run of that name was replaced its journal
    without a word (3 cell records became 1). It is refused in one line; nothing changes."""
    s3 = boto3.client("s3", region_name="us-east-1")
    s3.create_bucket(Bucket="runs")
    s3.put_object(Bucket="runs", Key="team/nightly/results.jsonl", Body=b"theirs\n")
    local = tmp_path / "reports" / "nightly"
    local.mkdir(parents=True)
    (local / "results.jsonl").write_bytes(b"ours, 3 cells\n")
    done = run_cli("fetch", "s3://runs/team/nightly", cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [
        "error: reports/nightly holds a run already (results.jsonl): fetch into another "
        "folder with -o DIR, or move that run away first"]
    assert (local / "results.jsonl").read_bytes() == b"ours, 3 cells\n"
    beside = run_cli("fetch", "s3://runs/team/nightly", "-o", "theirs", cwd=tmp_path)
    assert beside.returncode == 0, beside.stderr
    assert (tmp_path / "theirs" / "results.jsonl").read_bytes() == b"theirs\n"
