"""The dataset cache, for real: downloads over a loopback HTTP server serving the shared copies."""

from __future__ import annotations

import functools
import http.server
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from orchestrator.errors import MatrixError
from orchestrator.worker import datasets
from orchestrator.worker.datasets import DatasetError, catalogue, fetch, sha256_of
from tests.conftest import cell_records, run_cli

SHARED_DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data"
WIKITEXT2 = ("wikitext-2/train.txt", "wikitext-2/valid.txt", "wikitext-2/test.txt")


@dataclass
class Server:
    url: str
    paths: list[str] = field(default_factory=list)  # request paths, in order


def _serve(handler_class: type[http.server.BaseHTTPRequestHandler]) -> Iterator[str]:
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler_class)
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


@pytest.fixture
def mirror() -> Iterator[Server]:
    """Serves ../shared/data as a mirror and records what was requested."""
    server = Server(url="")

    class Handler(http.server.SimpleHTTPRequestHandler):
        def do_GET(self) -> None:
            server.paths.append(self.path)
            super().do_GET()

        def log_message(self, *args: object) -> None:
            pass

    for url in _serve(functools.partial(Handler, directory=str(SHARED_DATA))):
        server.url = url
        yield server


@pytest.fixture
def garbage() -> Iterator[str]:
    """A mirror whose every file is the same few wrong bytes."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = b"not the file you are looking for\n"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    yield from _serve(Handler)


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv("MATRIX_BENCH_DATA", str(folder))
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")  # loopback never goes through a proxy
    monkeypatch.setenv("no_proxy", "127.0.0.1")
    return folder


def test_data_dir_defaults_to_the_user_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MATRIX_BENCH_DATA", raising=False)
    assert datasets.data_dir() == Path.home() / ".cache" / "matrix-bench" / "data"
    monkeypatch.setenv("MATRIX_BENCH_DATA", "/somewhere/else")
    assert datasets.data_dir() == Path("/somewhere/else")


def test_pins_are_the_shared_copies_hashes() -> None:
    for spec in catalogue()["wikitext2"]:
        assert spec.sha256 == sha256_of(SHARED_DATA / spec.dataset_dir / spec.name)
        assert spec.url.startswith("https://raw.githubusercontent.com/pytorch/examples/")


def test_download_lands_verified_then_is_served_from_the_cache(
        cache: Path, mirror: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MATRIX_BENCH_DATA_URL", mirror.url)
    paths = fetch("wikitext2")
    assert sorted(paths) == sorted(WIKITEXT2)
    assert sorted(mirror.paths) == sorted(f"/{name}" for name in WIKITEXT2)
    for name, path in paths.items():
        assert path == cache / name
        assert path.read_bytes() == (SHARED_DATA / name).read_bytes()
    assert sorted(p.name for p in (cache / "wikitext-2").iterdir()) == [
        "test.txt", "train.txt", "valid.txt"]  # no temporary file left behind

    assert fetch("wikitext2") == paths
    assert len(mirror.paths) == len(WIKITEXT2)  # the second fetch downloaded nothing


def test_a_corrupted_cached_file_is_refused(
        cache: Path, mirror: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MATRIX_BENCH_DATA_URL", mirror.url)
    paths = fetch("wikitext2")
    valid = paths["wikitext-2/valid.txt"]
    valid.write_bytes(valid.read_bytes()[:-1] + b"!")
    with pytest.raises(DatasetError) as caught:
        fetch("wikitext2")
    message = str(caught.value)
    assert str(valid) in message
    assert catalogue()["wikitext2"][1].sha256 in message and sha256_of(valid) in message
    assert "Delete" in message and "MATRIX_BENCH_DATA" in message
    assert isinstance(caught.value, MatrixError)
    assert len(mirror.paths) == len(WIKITEXT2)  # refused, not silently downloaded again


def test_wrong_bytes_from_the_server_leave_nothing_in_the_cache(
        cache: Path, garbage: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MATRIX_BENCH_DATA_URL", garbage)
    with pytest.raises(DatasetError) as caught:
        fetch("wikitext2")
    message = str(caught.value)
    assert f"{garbage}/wikitext-2/train.txt" in message
    assert catalogue()["wikitext2"][0].sha256 in message
    assert list((cache / "wikitext-2").iterdir()) == []


def test_an_unreachable_server_names_the_url_and_the_offline_way(
        cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for url in _serve(http.server.BaseHTTPRequestHandler):
        dead = url  # a port that was just served and is now closed
    monkeypatch.setenv("MATRIX_BENCH_DATA_URL", dead)
    with pytest.raises(DatasetError) as caught:
        fetch("wikitext2")
    message = str(caught.value)
    assert f"{dead}/wikitext-2/train.txt" in message
    assert "MATRIX_BENCH_DATA" in message and "<dataset>/<file>" in message
    assert list((cache / "wikitext-2").iterdir()) == []


def test_a_read_only_copy_is_used_in_place(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MATRIX_BENCH_DATA", str(SHARED_DATA))
    monkeypatch.setenv("MATRIX_BENCH_DATA_URL", "http://127.0.0.1:9")  # must not be needed
    paths = fetch("wikitext2")
    assert paths == {name: SHARED_DATA / name for name in WIKITEXT2}


def test_an_unknown_dataset_is_refused(cache: Path) -> None:
    with pytest.raises(DatasetError, match=r"unknown dataset 'penn'.*wikitext2"):
        fetch("penn")


def test_the_catalogue_is_what_the_workloads_declare():
    assert sorted(catalogue()) == ["nietzsche", "wikitext2"]
    from workloads.keras_lstm.datasets import DATASETS as KERAS
    from workloads.lstm_lm.datasets import DATASETS as LM

    assert catalogue()["wikitext2"] is LM["wikitext2"] == KERAS["wikitext2"]
    assert catalogue()["nietzsche"] == KERAS["nietzsche"]


def test_a_cell_whose_dataset_cannot_be_downloaded_is_a_failure_of_the_run(tmp_path):
    """Once `failed`, a configuration's own end, so the next run skipped the cell until
    `--retry failed`. Now `data_unavailable`, which the next run runs again."""
    (tmp_path / "m.yaml").write_text(
        "name: nodata\nhardware: [{name: box, kind: local}]\n"
        "stacks: [{name: here, executor: process}]\n"
        "workloads: [{name: lstm_lm, epochs: 1, params: {preset: tiny, dataset: wikitext2}}]\n")
    env = {"MATRIX_BENCH_DATA": str(tmp_path / "empty-cache"),
           "MATRIX_BENCH_DATA_URL": "http://127.0.0.1:9"}  # port 9 refuses at once
    done = run_cli("run", "m.yaml", "--no-ray", "--db", "none", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    (cell,) = cell_records(tmp_path / "reports" / "nodata")
    assert cell["status"] == "data_unavailable", cell
    assert "cannot download http://127.0.0.1:9/wikitext-2/" in cell["error"]
    plan = run_cli("plan", "m.yaml", "--format", "json", cwd=tmp_path, env=env)
    assert [c["action"] for c in json.loads(plan.stdout)] == ["run"], plan.stdout
