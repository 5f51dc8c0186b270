"""A run's results in S3: `aws.results_uri` receives the journal, parquet, reports and logs
when a sweep ends, and `matrix fetch s3://...` brings a run back to a local directory."""

from __future__ import annotations

from pathlib import Path, PurePosixPath
from typing import Any

from orchestrator.errors import MatrixError

# The run's own files; cell files and build logs stay local (logs/ carry what failed).
UPLOADED = ("results.jsonl", "results.parquet", "report.md", "report.html", "plots/*.png",
            "workloads.json", "job.json", "logs/*.log", "build/*.log")


class S3UriError(MatrixError):
    """Not an s3://bucket/prefix URI."""


def split_uri(uri: str) -> tuple[str, str]:
    """s3://bucket/some/prefix -> (bucket, "some/prefix")."""
    if not uri.startswith("s3://") or not uri[5:].split("/")[0]:
        raise S3UriError(f"{uri!r} is not an S3 URI (s3://bucket/prefix)")
    bucket, _, prefix = uri[5:].partition("/")
    return bucket, prefix.strip("/")


def upload_run(s3: Any, run_dir: Path, uri: str) -> list[str]:
    """Upload the run's files under `uri`/<run name>/; returns the keys written."""
    bucket, prefix = split_uri(uri)
    keys = []
    for pattern in UPLOADED:
        for path in sorted(run_dir.glob(pattern)):
            key = "/".join(p for p in (prefix, run_dir.name, str(path.relative_to(run_dir)))
                           if p)
            s3.upload_file(str(path), bucket, key)
            keys.append(key)
    return keys


class S3ReadError(MatrixError):
    """A run in S3 that cannot be read: no credentials, no access, no such bucket."""


def download_run(s3: Any, uri: str, destination: Path) -> Path:
    """Download every object under `uri` (a run's folder) into `destination`; S3ReadError,
    in one line, where AWS refuses or cannot be reached."""
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

    try:
        return _download(s3, uri, destination)
    except NoCredentialsError:
        raise S3ReadError(f"cannot read {uri}: no AWS credentials (set AWS_PROFILE, or "
                          "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)") from None
    except ClientError as exc:
        error = exc.response.get("Error", {})
        raise S3ReadError(f"cannot read {uri}: {error.get('Code', 'refused')}: "
                          f"{error.get('Message', '')}".rstrip(": ")) from None
    except BotoCoreError as exc:
        raise S3ReadError(f"cannot read {uri}: {exc}") from None


def inside(destination: Path, relative: str) -> Path | None:
    """Where a key's remainder after the run's prefix lands in `destination`, or None where
    it would land outside it: an absolute remainder (`run//etc/x` leaves `/etc/x`, which
    `destination / "/etc/x"` is), a `..`, or a link already inside that leads out."""
    parts = PurePosixPath(relative).parts
    if not parts or relative.startswith("/") or ".." in parts or "\\" in relative:
        return None
    target = destination.joinpath(*parts)
    return target if target.resolve().is_relative_to(destination.resolve()) else None


def _download(s3: Any, uri: str, destination: Path) -> Path:
    bucket, prefix = split_uri(uri)
    found = 0
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket,
                                                             Prefix=prefix + "/"):
        for item in page.get("Contents", []):
            target = inside(destination, item["Key"][len(prefix) + 1:])
            if target is None:  # written by no sweep: never outside the run's folder
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            s3.download_file(bucket, item["Key"], str(target))
            found += 1
    if not found:
        raise S3UriError(f"nothing under {uri}")
    return destination
