"""The dataset cache: files fetched on first use, each checked against a pinned sha256.

The cache is `$MATRIX_BENCH_DATA` (default `~/.cache/matrix-bench/data`), laid out as
`<dataset_dir>/<file>`, the same layout as the shared offline copies, so an offline user
points MATRIX_BENCH_DATA at such a copy. Downloads come from each file's canonical URL,
or from `$MATRIX_BENCH_DATA_URL/<dataset_dir>/<file>` when a mirror is set. A download
goes to a temporary file beside its target and is renamed into place only once its hash
matches, so the cache never holds a partial or wrong file that a later run would trust.
A cached file is hashed again on every fetch (about 30 ms for WikiText-2's 13 MB): a
stamp would need a writable cache, and a shared read-only copy must work too.
Stdlib only: it runs inside the lean worker.
"""

from __future__ import annotations

import hashlib
import http.client
import importlib
import os
import sys
import tempfile
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from orchestrator.errors import MatrixError

DOWNLOAD_TIMEOUT_S = 60.0
_CHUNK = 1 << 20
WORKLOADS_DIR = Path(__file__).resolve().parents[2] / "workloads"


class DatasetError(MatrixError):
    """A data file that cannot be fetched, or whose bytes are not the pinned ones."""


class DataUnavailable(DatasetError):
    """The dataset could not be had here: a download that failed, a cache that cannot be
    written, bytes that do not match their pinned hash. A failure of the run, not of the
    configuration: the cell ends `data_unavailable`, and the next `matrix run` runs it
    again."""


@dataclass(frozen=True)
class DataFile:
    """One file of a dataset, as the cache knows it."""

    dataset_dir: str  # folder under the cache, e.g. "wikitext-2"
    name: str  # file name inside that folder, e.g. "train.txt"
    url: str  # canonical download location
    sha256: str | None  # pinned from a public source; None: recorded and warned about

    @property
    def key(self) -> str:
        """`<dataset_dir>/<name>`: the file's name in records and mirrors."""
        return f"{self.dataset_dir}/{self.name}"


def catalogue() -> dict[str, tuple[DataFile, ...]]:
    """Every dataset the workloads declare (`DATASETS` in `workloads/<name>/datasets.py`),
    by name; DatasetError if two declare one name with different files."""
    global _CATALOGUE
    if _CATALOGUE is None:
        found: dict[str, tuple[DataFile, ...]] = {}
        for folder in sorted(WORKLOADS_DIR.iterdir()):
            if not (folder / "datasets.py").is_file():
                continue
            module = importlib.import_module(f"workloads.{folder.name}.datasets")
            for name, files in module.DATASETS.items():
                if found.setdefault(name, files) != files:
                    raise DatasetError(f"dataset {name!r} is declared twice with different "
                                       f"files (workloads/{folder.name}/datasets.py)")
        _CATALOGUE = found
    return _CATALOGUE


_CATALOGUE: dict[str, tuple[DataFile, ...]] | None = None


def data_dir() -> Path:
    """The cache folder: `$MATRIX_BENCH_DATA`, or `~/.cache/matrix-bench/data`."""
    configured = os.environ.get("MATRIX_BENCH_DATA")
    if configured:
        return Path(configured).expanduser()
    return Path.home() / ".cache" / "matrix-bench" / "data"


def sha256_of(path: Path) -> str:
    """Hex sha256 of a file's bytes, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def fetch(dataset: str) -> dict[str, Path]:
    """Make sure every file of `dataset` is in the cache and intact; file key -> path.

    Keys are `<dataset_dir>/<name>` (e.g. "wikitext-2/train.txt"). Raises DatasetError for
    an unknown dataset, a failed download, or bytes that do not match the pinned hash.
    """
    files = catalogue()
    if dataset not in files:
        known = ", ".join(sorted(files))
        raise DatasetError(f"unknown dataset {dataset!r} (known: {known})")
    root = data_dir()
    paths: dict[str, Path] = {}
    for data_file in files[dataset]:
        path = root / data_file.dataset_dir / data_file.name
        if path.is_file():
            _check(data_file, path, sha256_of(path))
        else:
            _download(data_file, path)
        paths[data_file.key] = path
    return paths


def _source_url(data_file: DataFile) -> str:
    mirror = os.environ.get("MATRIX_BENCH_DATA_URL")
    if mirror:
        return f"{mirror.rstrip('/')}/{data_file.dataset_dir}/{data_file.name}"
    return data_file.url


def _check(data_file: DataFile, path: Path, actual: str, url: str | None = None) -> None:
    """Raise unless `actual` is the pinned hash; warn where nothing is pinned.

    `url` is set for a fresh download (nothing was kept), None for a file in the cache.
    """
    if data_file.sha256 is None:
        print(f"warning: {path} has no pinned sha256; its sha256 {actual} is recorded",
              file=sys.stderr)
        return
    if actual == data_file.sha256:
        return
    if url is None:
        raise DataUnavailable(
            f"{path}: sha256 mismatch for {data_file.key}: expected {data_file.sha256}, "
            f"got {actual}. "
            f"Delete the file to download it again, or fix MATRIX_BENCH_DATA "
            f"(now {data_dir()}) to point at a good copy laid out as <dataset>/<file>.")
    raise DataUnavailable(
        f"{url}: downloaded {data_file.key} has sha256 {actual}, expected {data_file.sha256}; "
        f"nothing was written to {path}. Check MATRIX_BENCH_DATA_URL, or set "
        f"MATRIX_BENCH_DATA to a good copy laid out as <dataset>/<file>.")


def _download(data_file: DataFile, path: Path) -> None:
    """Download to a temporary file beside `path`, verify, then rename it into place."""
    url = _source_url(data_file)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, part_name = tempfile.mkstemp(dir=path.parent, prefix=f".{data_file.name}.",
                                         suffix=".part")
    except OSError as exc:
        raise DataUnavailable(f"cannot write the data cache {path.parent}: {exc}. "
                           "Set MATRIX_BENCH_DATA to a writable folder.") from exc
    part = Path(part_name)
    try:
        digest = hashlib.sha256()
        try:
            with (open(fd, "wb") as handle,
                  urllib.request.urlopen(url, timeout=DOWNLOAD_TIMEOUT_S) as response):
                while chunk := response.read(_CHUNK):
                    digest.update(chunk)
                    handle.write(chunk)
        except (urllib.error.URLError, http.client.HTTPException, OSError,
                ValueError) as exc:
            raise DataUnavailable(
                f"cannot download {url}: {exc}. Offline, set MATRIX_BENCH_DATA to a local "
                f"copy laid out as <dataset>/<file> (here {data_file.key}).") from exc
        _check(data_file, path, digest.hexdigest(), url)
        part.chmod(0o644)  # mkstemp makes it private; a cache is shared (e.g. with containers)
        os.replace(part, path)
    finally:
        part.unlink(missing_ok=True)
