"""Rendering stack images without an engine: the carried worker code, lock files, tags."""

from __future__ import annotations

import os
import socket
import struct
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from orchestrator.images import wheels
from orchestrator.images.stack_image import (
    ImageError,
    lock_from_wheelhouse,
    lock_pins,
    render,
    worker_code,
)
from orchestrator.spec.model import Images, Stack
from orchestrator.workload_registry import available_workloads

PROJECT = Path(__file__).resolve().parent.parent
PINNED = "torch==2.13.0+cpu --hash=sha256:" + "a" * 64 + "\n"


def test_the_carried_code_is_enough_for_the_worker_and_every_workload(tmp_path):
    for relative, content in worker_code():
        target = tmp_path / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)
    modules = ["orchestrator.worker", *(f"workloads.{n}.workload" for n in available_workloads())]
    script = (f"import sys; sys.path = [{str(tmp_path)!r}] + "
              f"[p for p in sys.path if p not in ('', {str(PROJECT)!r})]\n"
              f"import importlib\nfor name in {modules!r}:\n"
              f"    module = importlib.import_module(name)\n"
              f"    assert module.__file__.startswith({str(tmp_path)!r}), module.__file__\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr


def stack(**pins) -> Stack:
    return Stack(name="s", framework="torch", framework_version="2.13.0", **pins)


def test_a_lock_must_pin_the_stacks_framework_version(tmp_path):
    (tmp_path / "s.txt").write_text(PINNED.replace("2.13.0", "2.12.1"))
    with pytest.raises(ImageError, match=r"declares torch 2\.13\.0, its lock .* pins 2\.12\.1"):
        render(stack(), Images(locks=str(tmp_path)))


def test_a_lock_line_without_a_hash_is_refused(tmp_path):
    (tmp_path / "s.txt").write_text(PINNED + "numpy==2.4.6\n")
    with pytest.raises(ImageError, match=r"without --hash: numpy==2\.4\.6"):
        render(stack(), Images(locks=str(tmp_path)))


def test_a_cuda_stack_renders_on_its_base_image_and_the_ca_bundle_enters_the_tag(tmp_path):
    (tmp_path / "s.txt").write_text(PINNED + "nvidia-cuda-runtime-cu12==12.4.127"
                                    " --hash=sha256:" + "b" * 64 + "\n")
    images = Images(locks=str(tmp_path))
    cuda = render(stack(cuda="12.4", base_image="nvidia/cuda:12.4.1-runtime-ubuntu22.04"),
                  images)
    assert "FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04" in cuda.dockerfile
    (tmp_path / "s.txt").write_text(PINNED)
    cpu = render(stack(), images)
    assert "FROM python:3.11-slim-bookworm" in cpu.dockerfile
    (tmp_path / "ca.pem").write_text("-----BEGIN CERTIFICATE-----\n")
    with_ca = render(stack(), images.model_copy(update={"ca_bundle": str(tmp_path / "ca.pem")}))
    assert with_ca.tag != cpu.tag and "PIP_CERT" in with_ca.dockerfile


def test_the_lock_is_installed_by_this_machines_uv_or_by_pip_when_chosen(tmp_path, monkeypatch):
    """uv by default, copied from this machine into the build context; pip when chosen; the
    installer is part of the tag; both require the lock's hashes."""
    from uv import find_uv_bin

    from orchestrator.images.stack_image import _write_context

    (tmp_path / "s.txt").write_text(PINNED)
    by_uv = render(stack(), Images(locks=str(tmp_path)))
    assert by_uv.installer.name == "uv" and '"uv", "pip", "install", "--system"' in by_uv.dockerfile
    assert '"--require-hashes"' in by_uv.dockerfile and "python3-pip" not in by_uv.dockerfile
    context = tmp_path / "context"
    context.mkdir()
    _write_context(context, by_uv)
    assert (context / "uv").read_bytes() == Path(find_uv_bin()).read_bytes()
    assert by_uv.installer.wheelhouse_args("http://127.0.0.1:9/") == {
        "UV_INDEX_URL": "http://127.0.0.1:9/", "UV_EXTRA_INDEX_URL": "http://127.0.0.1:9/",
        "UV_FIND_LINKS": "http://127.0.0.1:9/"}
    monkeypatch.setenv("MATRIX_BENCH_IMAGE_INSTALLER", "pip")
    by_pip = render(stack(), Images(locks=str(tmp_path)))
    assert by_pip.installer.name == "pip" and by_pip.tag != by_uv.tag
    assert '"python3", "-m", "pip", "install", "--require-hashes"' in by_pip.dockerfile
    assert by_pip.installer.binary is None


def test_a_lock_from_a_wheelhouse_pins_each_wheel_by_its_hash(tmp_path):
    (tmp_path / "Foo_Bar-1.2.3-py3-none-any.whl").write_bytes(b"wheel bytes")
    lock = lock_from_wheelhouse(tmp_path)
    assert lock_pins(lock) == {"foo-bar": "1.2.3"}
    assert "--hash=sha256:" in lock
    (tmp_path / "foo-1.0.tar.gz").write_bytes(b"sdist")
    with pytest.raises(ImageError, match=r"not wheels: foo-1\.0\.tar\.gz"):
        lock_from_wheelhouse(tmp_path)


def test_a_build_step_killed_mid_download_leaves_the_wheelhouse_server_quiet(tmp_path, capfd):
    wheel = os.urandom(32 << 20)  # more than loopback's socket buffers hold
    (tmp_path / "big.whl").write_bytes(wheel)
    with wheels.served(tmp_path) as url:
        port = int(url.rstrip("/").rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port)) as killed:
            killed.sendall(b"GET /big.whl HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            assert killed.recv(1024).startswith(b"HTTP/1.0 200")  # the download has begun
            killed.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        with urllib.request.urlopen(url + "big.whl", timeout=30) as whole:  # still serving
            assert whole.read() == wheel
        deadline = time.monotonic() + 10  # the killed download's handler ends on its error
        while any("process_request_thread" in t.name for t in threading.enumerate()):
            assert time.monotonic() < deadline, "a download handler never ended"
            time.sleep(0.05)
    assert "Traceback" not in capfd.readouterr().err
