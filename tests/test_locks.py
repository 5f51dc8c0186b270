"""Lock files made by a resolver and checked against their stacks (issue 44): the shipped
locks of every example matrix pass; a lock whose NVIDIA wheels carry another CUDA or cuDNN
than its stack declares, or that was made for another Python or platform, is one line;
`matrix lock MATRIX` resolves with uv against a simple index served from a temporary
folder on the loopback (never the internet)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.images import wheels
from orchestrator.images.locks import lock_pins, locked_cuda
from orchestrator.images.stack_image import image_problems, render
from orchestrator.plan.identity import model_identity
from orchestrator.spec.model import Images, Stack
from orchestrator.spec.release_index import ReleaseIndex
from orchestrator.validate import load_spec
from tests.conftest import run_cli, write
from tests.wheel_files import wheel

PROJECT = Path(__file__).resolve().parent.parent
HASH = " --hash=sha256:" + "a" * 64
CUDA_126 = (f"torch==2.7.1{HASH}\nnvidia-cuda-runtime-cu12==12.6.77{HASH}\n"
            f"nvidia-cudnn-cu12==9.5.1.17{HASH}\n")


@pytest.mark.parametrize("matrix", sorted(p.name for p in (PROJECT / "matrix").glob("*.yaml")))
def test_every_example_matrix_has_its_locks_and_they_fit_its_stacks(matrix):
    spec = load_spec(PROJECT / "matrix" / matrix, ReleaseIndex.offline())
    assert image_problems(spec) == []


def test_the_shipped_cuda_locks_carry_the_cuda_their_stacks_declare():
    pins = lock_pins((PROJECT / "images" / "locks" / "torch-2.7-cu126.txt").read_text())
    assert locked_cuda(pins) == ("12.6.77", "9.5.1.17") and pins["torch"] == "2.7.1"
    pins = lock_pins((PROJECT / "images" / "locks" / "torch-2.13-cu130.txt").read_text())
    assert locked_cuda(pins)[0].startswith("13.0.")


def stack(**pins) -> Stack:
    return Stack(name="s", framework="torch", framework_version="2.7.1", **pins)


@pytest.mark.parametrize(("pins", "lock", "problem"), [
    ({"cuda": "12.6", "cudnn": "9.5"}, CUDA_126, None),
    ({"cuda": "12"}, CUDA_126, None),  # a major-only pin: any 12.x
    ({"cuda": "11.8"}, CUDA_126, "carries CUDA 12.6.77, the stack declares cuda 11.8"),
    ({"cuda": "12.6", "cudnn": "8.9"}, CUDA_126,
     "carries cuDNN 9.5.1.17, the stack declares cudnn 8.9"),
    ({}, CUDA_126, "carries CUDA 12.6.77, the stack declares no cuda"),
    ({"cuda": "12.6"}, f"torch==2.7.1{HASH}\n", "carries no CUDA runtime"),
    ({"python": "3.11"}, f"# python: 3.12\n# platform: x86_64-manylinux_2_28\n"
                         f"torch==2.7.1{HASH}\n", "was made for Python 3.12, the stack runs 3.11"),
    ({}, f"# python: 3.11\n# platform: aarch64-manylinux_2_28\ntorch==2.7.1{HASH}\n",
     "was made for aarch64-manylinux_2_28"),
])
def test_a_lock_is_checked_against_the_stacks_cuda_cudnn_python_and_platform(
        tmp_path, pins, lock, problem):
    (tmp_path / "s.txt").write_text(lock)
    if problem is None:
        render(stack(**pins), Images(locks=str(tmp_path)))
        return
    with pytest.raises(Exception, match=problem):
        render(stack(**pins), Images(locks=str(tmp_path)))


def test_index_url_is_where_the_image_installs_from_and_moves_no_id(tmp_path, monkeypatch):
    (tmp_path / "s.txt").write_text(f"torch==2.7.1+cpu{HASH}\n")
    images = Images(locks=str(tmp_path))
    cpu = stack(index_url="https://download.pytorch.org/whl/cpu")
    plain = render(stack(), images)
    assert "EXTRA_INDEX_URL=" not in plain.dockerfile
    assert 'ARG UV_EXTRA_INDEX_URL="https://download.pytorch.org/whl/cpu"' in render(
        cpu, images).dockerfile
    monkeypatch.setenv("MATRIX_BENCH_IMAGE_INSTALLER", "pip")
    assert "--extra-index-url" not in render(stack(), images).dockerfile
    assert '"--extra-index-url", "https://download.pytorch.org/whl/cpu"' in render(
        cpu, images).dockerfile
    assert model_identity(cpu) == model_identity(stack())


def test_validate_says_in_one_line_that_a_lock_carries_another_cuda(tmp_path):
    locks = tmp_path / "locks"
    locks.mkdir()
    shipped = (PROJECT / "images" / "locks" / "torch-2.7-cu126.txt").read_text()
    (locks / "old-cuda.txt").write_text(shipped)
    matrix = write(tmp_path / "m.yaml", f"""
        name: wrong-cuda
        images: {{locks: {locks}}}
        hardware: [{{name: box, kind: local}}]
        stacks: [{{name: old-cuda, framework: torch, framework_version: "2.7.1",
                   python: "3.12", cuda: "11.8", base_image: "nvidia/cuda:11.8.0-base"}}]
        workloads: [{{name: sleep}}]
        """)
    done = run_cli("validate", str(matrix), "--offline", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    (note,) = [line for line in done.stdout.splitlines() if line.startswith("note:")]
    assert "stack old-cuda: its lock" in note and "carries CUDA 12.6.77, the stack declares " \
        "cuda 11.8" in note and "matrix lock MATRIX --stack old-cuda" in note


@pytest.fixture
def simple_index(tmp_path) -> Iterator[str]:
    """A PEP 503 index on the loopback: a CUDA 12.6 torch, its NVIDIA wheels, numpy,
    nvidia-ml-py and keras; its URL carries a user and a password."""
    root = tmp_path / "index"
    (root / "files").mkdir(parents=True)
    made = [wheel(root / "files", "torch", "2.7.1", ("nvidia-cuda-runtime-cu12==12.6.77",
                                                      "nvidia-cudnn-cu12==9.5.1.17"),
                  tag="py3-none-manylinux_2_28_x86_64"),
            wheel(root / "files", "nvidia-cuda-runtime-cu12", "12.6.77"),
            wheel(root / "files", "nvidia-cudnn-cu12", "9.5.1.17"),
            wheel(root / "files", "numpy", "2.0.0"), wheel(root / "files", "keras", "3.9.0"),
            wheel(root / "files", "nvidia-ml-py", "12.560.30")]
    for path in made:
        project = path.name.split("-")[0].replace("_", "-")
        page = root / "simple" / project
        page.mkdir(parents=True, exist_ok=True)
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        with open(page / "index.html", "a") as html:
            html.write(f'<a href="../../files/{path.name}#sha256={digest}">{path.name}</a>\n')
    with wheels.served(root) as url:  # the folder on the loopback, as image builds get it
        assert url is not None
        yield url.replace("http://", "http://reader:s3cret-pw@") + "simple/"


def test_matrix_lock_resolves_each_stack_with_uv_pinned_by_hash_and_checked(
        tmp_path, simple_index):
    matrix = write(tmp_path / "m.yaml", f"""
        name: locked
        images: {{locks: {tmp_path / 'locks'}}}
        hardware: [{{name: box, kind: local}}]
        stacks:
          - {{name: cu126, framework: torch, framework_version: "2.7.1", python: "3.12",
              cuda: "12.6", cudnn: "9.5", base_image: "nvidia/cuda:12.6.3-base-ubuntu24.04"}}
          - {{name: wrong, framework: torch, framework_version: "2.7.1", python: "3.12",
              cuda: "12.8", base_image: "nvidia/cuda:12.8.1-base-ubuntu24.04"}}
        workloads: [{{name: keras_lstm, params: {{backend: torch}}}}]
        """)
    env = {"MATRIX_BENCH_INDEX_URL": simple_index}
    done = run_cli("lock", str(matrix), "--stack", "cu126", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    lock = (tmp_path / "locks" / "cu126.txt").read_text()
    assert lock_pins(lock) == {"torch": "2.7.1", "nvidia-cuda-runtime-cu12": "12.6.77",
                               "nvidia-cudnn-cu12": "9.5.1.17", "numpy": "2.0.0",
                               "keras": "3.9.0", "nvidia-ml-py": "12.560.30"}
    assert "# python: 3.12\n# platform: x86_64-manylinux_2_28\n" in lock
    assert "keras>=3.3" in lock.splitlines()[2]  # the workload's requires, in the header
    assert "s3cret-pw" not in lock + done.stdout + done.stderr and "reader" not in lock
    assert "cu126.txt: 6 packages pinned" in done.stdout

    wrong = run_cli("lock", str(matrix), "--stack", "wrong", cwd=tmp_path, env=env)
    assert wrong.returncode == 2 and not (tmp_path / "locks" / "wrong.txt").exists()
    (line,) = wrong.stderr.strip().splitlines()
    assert "carries CUDA 12.6.77, the stack declares cuda 12.8" in line
    assert "index_url: https://download.pytorch.org/whl/cu128" in line

    for args, problem in ((["--stack", "nope"], "--stack nope: no stack of the matrix"),
                          (["-o", "x.txt"], "give a matrix")):
        refused = run_cli("lock", str(matrix), *args, cwd=tmp_path, env=env)
        assert refused.returncode == 2
        (line,) = refused.stderr.strip().splitlines()
        assert problem in line, line
