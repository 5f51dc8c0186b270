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
