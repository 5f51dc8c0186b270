"""Which torch build bootstrap.sh installs (scripts/torch_source.sh): the CUDA build where an
NVIDIA GPU is, the CPU-only build from PyTorch's CPU index where none is, and the package
index's build, said so, where that index cannot be reached. The index is a real HTTP
server on 127.0.0.1, or a port nothing listens on."""

from __future__ import annotations

import functools
import http.server
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.conftest import PROJECT, free_port

SCRIPT = PROJECT / "scripts" / "torch_source.sh"


def choose(**env: str) -> tuple[list[str], str]:
    """(pip's arguments, the reason) as the script gives them."""
    done = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, timeout=60,
                          env={"PATH": os.environ["PATH"], "PYTHON": sys.executable,
                               "PIP_INDEX_URL": "http://mirror.example/simple", **env})
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines(), done.stderr.strip()


@pytest.fixture
def cpu_index(tmp_path: Path):
    """A stand-in for PyTorch's CPU index: it has a page for torch."""
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "index.html").write_text("<a>torch-2.13.0+cpu...</a>")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_a_machine_with_an_nvidia_gpu_gets_the_cuda_build_from_the_package_index(cpu_index):
    args, why = choose(MATRIX_BENCH_GPU="yes", MATRIX_BENCH_TORCH_CPU_INDEX=cpu_index)
    assert args == ["torch==2.13.0"]
    assert "an NVIDIA GPU is here" in why and "CUDA build" in why


def test_a_machine_without_one_gets_the_cpu_build_from_pytorchs_cpu_index(cpu_index):
    args, why = choose(MATRIX_BENCH_GPU="no", MATRIX_BENCH_TORCH_CPU_INDEX=cpu_index)
    assert args == ["torch==2.13.0", "--index-url", cpu_index,
                    "--extra-index-url", "http://mirror.example/simple"]
    assert "no NVIDIA GPU here: the CPU-only build" in why


def test_where_that_index_is_refused_the_package_index_answers_and_it_is_said():
    refused = f"http://127.0.0.1:{free_port()}/whl/cpu"  # nothing listens there
    args, why = choose(MATRIX_BENCH_GPU="no", MATRIX_BENCH_TORCH_CPU_INDEX=refused)
    assert args == ["torch==2.13.0"]
    assert f"PyTorch's CPU index ({refused}) cannot be reached" in why
    assert "may be the CUDA build" in why and "set TORCH_SPEC" in why


def test_torch_spec_overrides_everything(cpu_index):
    args, why = choose(MATRIX_BENCH_GPU="no", MATRIX_BENCH_TORCH_CPU_INDEX=cpu_index,
                       TORCH_SPEC="torch==2.12.1 --index-url http://x.example/simple")
    assert args == ["torch==2.12.1", "--index-url", "http://x.example/simple"]
    assert why == ("torch: TORCH_SPEC=torch==2.12.1 --index-url http://x.example/simple, "
                   "as given")


def test_installing_with_uv_takes_uvs_own_choice_of_build_where_pytorchs_index_answers(
        cpu_index):
    args, why = choose(MATRIX_BENCH_INSTALLER="uv", MATRIX_BENCH_GPU="no",
                       MATRIX_BENCH_TORCH_CPU_INDEX=cpu_index)
    assert args == ["torch==2.13.0", "--torch-backend", "auto"]
    assert "uv chooses the build" in why


def test_installing_with_uv_where_pytorchs_index_is_refused_falls_back_as_pip_does():
    refused = f"http://127.0.0.1:{free_port()}/whl/cpu"
    args, why = choose(MATRIX_BENCH_INSTALLER="uv", MATRIX_BENCH_GPU="no",
                       MATRIX_BENCH_TORCH_CPU_INDEX=refused)
    assert args == ["torch==2.13.0"]
    assert "cannot be reached" in why


SETTINGS = PROJECT / "scripts" / "uv_settings.py"


def uv_settings(listing: str, tmp_path: Path) -> list[str]:
    (tmp_path / "listing.txt").write_text(listing)
    done = subprocess.run([sys.executable, str(SETTINGS), str(tmp_path / "listing.txt")],
                          capture_output=True, text=True, timeout=60, check=True)
    return done.stdout.splitlines()


def test_pips_settings_reach_uv_with_the_environment_winning_over_files(tmp_path):
    lines = uv_settings(
        "global.find-links='/opt/wheels'\n"
        "global.extra-index-url='file:///opt/a/simple file:///opt/b/simple'\n"
        "global.constraint='/etc/caps.txt'\n"
        "global.cert='/etc/ssl/site.crt'\n"
        "global.index-url='http://file-mirror/simple'\n"
        ":env:.index-url='http://env-mirror/simple'\n"
        ":env:.default-timeout='180'\n"
        "global.user='ignored'\n", tmp_path)
    assert lines == ["--index-url", "http://env-mirror/simple",
                     "--extra-index-url", "file:///opt/a/simple",
                     "--extra-index-url", "file:///opt/b/simple",
                     "--find-links", "/opt/wheels", "--constraint", "/etc/caps.txt",
                     "SSL_CERT_FILE=/etc/ssl/site.crt", "UV_HTTP_TIMEOUT=180",
                     "--index-strategy", "unsafe-best-match"]


def test_a_machine_without_pip_settings_hands_uv_nothing(tmp_path):
    assert uv_settings("", tmp_path) == []


def test_uv_given_those_settings_takes_the_wheel_folder_and_keeps_the_cap(tmp_path):
    """A real uv against a wheel folder holding 1.0 and 2.0 of a package, an empty index on
    the loopback and a constraints file capping it below 2: it installs 1.0, as pip would."""
    from uv import find_uv_bin

    from orchestrator.images import wheels
    from tests.wheel_files import wheel

    folder, empty = tmp_path / "wheels", tmp_path / "index"
    folder.mkdir(), empty.mkdir()
    wheel(folder, "capped-demo", "1.0"), wheel(folder, "capped-demo", "2.0")
    (tmp_path / "caps.txt").write_text("capped-demo<2\n")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "venv")],
                   check=True)
    with wheels.served(empty) as url:
        assert url is not None
        args = uv_settings(f"global.index-url='{url}'\nglobal.find-links='{folder}'\n"
                           f"global.constraint='{tmp_path / 'caps.txt'}'\n", tmp_path)
        done = subprocess.run(
            [find_uv_bin(), "pip", "install", "--no-config", "--python",
             str(tmp_path / "venv" / "bin" / "python"), "--cache-dir", str(tmp_path / "cache"),
             *args, "capped-demo"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "+ capped-demo==1.0" in done.stderr
