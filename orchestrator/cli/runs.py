"""Runs wherever they are: a local run directory or an S3 URI that a sweep
uploaded to (`aws.results_uri`), brought into the local cache first.

`matrix report` and `matrix compare` read their inputs through here, so both take either.
"""

from __future__ import annotations

from pathlib import Path

from orchestrator.results.run_directory import RunDirectory, open_existing


def cache_dir() -> Path:
    return Path.home() / ".cache" / "matrix-bench" / "s3"


def local_run(source: str, region: str | None = None) -> RunDirectory:
    """The run at `source`; an s3:// run is downloaded (again) into the cache first."""
    if not source.startswith("s3://"):
        return open_existing(source)
    import boto3

    from orchestrator.providers.aws.s3 import download_run, split_uri

    bucket, prefix = split_uri(source)
    destination = cache_dir() / bucket / prefix
    download_run(boto3.client("s3", region_name=region), source.rstrip("/"), destination)
    return open_existing(destination)
