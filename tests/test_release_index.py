"""`matrix validate` asks the package index about a framework version newer than the release
tables (issue 42, item 14): a simple index served from a temporary folder on the loopback,
never the internet."""

from __future__ import annotations

import base64
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.conftest import run_cli

JSON_TYPE = "application/vnd.pypi.simple.v1+json"
TORCH_PAGE = """<!DOCTYPE html><html><body>
<a href="../../files/torch-2.15.0-cp311-cp311-manylinux_2_28_x86_64.whl">torch-2.15.0-cp311-cp311-manylinux_2_28_x86_64.whl</a>
<a href="../../files/torch-2.16.0-cp311-cp311-manylinux_2_28_x86_64.whl#sha256=00">torch-2.16.0-cp311-cp311-manylinux_2_28_x86_64.whl</a>
<a href="../../files/torch-2.16.1.tar.gz" data-yanked="broken">torch-2.16.1.tar.gz</a>
</body></html>
"""  # noqa: E501
JAX_JSON = ('{"meta": {"api-version": "1.1"}, "name": "jax", "files": ['
            '{"filename": "jax-0.13.0-py3-none-any.whl", "yanked": false},'
            '{"filename": "jax-0.13.1-py3-none-any.whl", "yanked": "regression"}]}')


class SimpleIndex(BaseHTTPRequestHandler):
    """/simple/<project>/ from <folder>/<project>.html or .json; what each request sent."""

    folder: Path
    seen: list[dict[str, str]]

    def do_GET(self) -> None:
        self.seen.append(dict(self.headers))
        project = self.path.strip("/").split("/")[-1]
        for suffix, kind in ((".json", JSON_TYPE), (".html", "text/html")):
            page = self.folder / f"{project}{suffix}"
            if page.is_file():
                body = page.read_bytes()
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return
        self.send_error(404)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def index(tmp_path: Path) -> Iterator[tuple[str, list[dict[str, str]]]]:
    """(the index URL with a user and password, the headers of each request it got)."""
    folder = tmp_path / "index"
    folder.mkdir()
    (folder / "torch.html").write_text(TORCH_PAGE)
    (folder / "jax.json").write_text(JAX_JSON)
    seen: list[dict[str, str]] = []
    handler = type("Handler", (SimpleIndex,), {"folder": folder, "seen": seen})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://reader:s3cret-pw@127.0.0.1:{server.server_address[1]}/simple/", seen
    finally:
        server.shutdown()
        server.server_close()


def write_matrix(folder: Path, framework: str, version: str) -> Path:
    path = folder / "m.yaml"
    path.write_text("name: newer\nhardware: [{name: box, kind: local}]\n"
                    f"stacks: [{{name: t, executor: process, framework: {framework}, "
                    f"framework_version: '{version}'}}]\n"
                    "workloads: [{name: sleep, params: {seconds: 0.1}}]\n")
    return path


@pytest.mark.parametrize(("framework", "version"), [
    ("torch", "99.0.0"),
    ("torch", "2.16.1"),  # its only file yanked
    ("jax", "0.13.1"),  # yanked, on a PEP 691 JSON page
    ("tensorflow", "2.30.0"),  # no page for the project: 404
])
def test_a_version_the_index_does_not_list_is_refused_in_one_line(index, tmp_path, framework,
                                                                  version):
    url, seen = index
    path = write_matrix(tmp_path, framework, version)
    done = run_cli("validate", str(path), cwd=tmp_path, env={"MATRIX_BENCH_INDEX_URL": url})
    assert done.returncode == 2, done.stdout + done.stderr
    (line,) = done.stderr.strip().splitlines()
    shown = url.replace("reader:s3cret-pw@", "")
    assert line == (f"error: {path}:3: stacks[0].framework_version: {framework} {version} "
                    f"is not a release on the package index {shown}")
    assert "s3cret" not in done.stdout + done.stderr
    basic = "Basic " + base64.b64encode(b"reader:s3cret-pw").decode()
    assert [request["Authorization"] for request in seen] == [basic]


@pytest.mark.parametrize(("framework", "version"), [
    ("torch", "2.16.0"), ("torch", "2.16"), ("torch", "2.16.0+cu126"), ("jax", "0.13.0")])
def test_a_version_the_index_lists_validates_without_a_warning(index, tmp_path, framework,
                                                               version):
    url, seen = index
    done = run_cli("validate", str(write_matrix(tmp_path, framework, version)), cwd=tmp_path,
                   env={"MATRIX_BENCH_INDEX_URL": url})
    assert done.returncode == 0, done.stderr
    assert done.stderr == "" and len(seen) == 1


def test_offline_or_an_index_that_does_not_answer_keeps_the_warning_and_says_why(
        index, tmp_path):
    url, seen = index
    path = write_matrix(tmp_path, "torch", "99.0.0")
    offline = run_cli("validate", "--offline", str(path), cwd=tmp_path,
                      env={"MATRIX_BENCH_INDEX_URL": url})
    assert offline.returncode == 0 and seen == []
    assert offline.stderr.strip().endswith("(to 2.15.0): not checked (--offline)")

    silent = socket.socket()  # accepts connections into its backlog, never answers
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    try:
        quiet = f"http://127.0.0.1:{silent.getsockname()[1]}/simple/"
        started = time.monotonic()
        waited = run_cli("validate", str(path), cwd=tmp_path,
                         env={"MATRIX_BENCH_INDEX_URL": quiet})
        elapsed = time.monotonic() - started
    finally:
        silent.close()
    assert waited.returncode == 0, waited.stderr
    (line,) = waited.stderr.strip().splitlines()
    assert line.endswith(f"not checked (the package index {quiet} did not answer in 5 s)")
    assert 5 <= elapsed < 60  # it waited its bound, and no longer than a hang guard

    refused = run_cli("validate", str(path), cwd=tmp_path)  # the session's: port 9
    assert refused.returncode == 0
    assert refused.stderr.strip().endswith(
        "not checked (the package index http://127.0.0.1:9/simple/ could not be read: "
        "Connection refused)")


def test_a_page_the_lookup_cannot_read_is_a_warning_not_a_traceback(index, tmp_path):
    url, _ = index
    (tmp_path / "index" / "jax.json").write_text("[1, 2]")  # JSON, but no simple API page
    done = run_cli("validate", str(write_matrix(tmp_path, "jax", "0.13.0")), cwd=tmp_path,
                   env={"MATRIX_BENCH_INDEX_URL": url})
    assert done.returncode == 0, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.endswith("could not be read: ValueError)"), line
