"""CUDA against the GPUs and drivers it must run on (issue 44, item 2): a cell whose GPU its
stack's CUDA cannot drive is skipped at plan time with the reason and counted by
`matrix validate`; the worker compares the node's driver with the stack's CUDA before any
work. The driver is read from the kernel's file, which a test writes as a node would."""

from __future__ import annotations

import pytest

from orchestrator.plan.cells import expand, incompatibility
from orchestrator.plan.identity import model_identity
from orchestrator.spec.release_index import ReleaseIndex
from orchestrator.validate import load_spec
from orchestrator.worker import cuda_support
from orchestrator.worker.cell_file import CellStack
from orchestrator.worker.cuda_support import (
    architecture_problem,
    compute_capability,
    driver_problem,
    node_driver_version,
)
from orchestrator.worker.stack_check import stack_mismatch
from tests.conftest import PROJECT, run_cli, write


@pytest.mark.parametrize(("gpu", "cuda", "problem"), [
    ("Tesla V100-SXM2-16GB", "13.0", "Tesla V100-SXM2-16GB (sm_70) is not supported by CUDA 13.0"),
    ("Tesla V100-SXM2-16GB", "12.6", None),
    ("Tesla T4", "13.0", None),  # Turing: the oldest CUDA 13 drives
    ("NVIDIA B200", "12.6", "NVIDIA B200 (sm_100) needs CUDA 12.8 or later, not 12.6"),
    ("NVIDIA H100 80GB HBM3", "11.7", "(sm_90) needs CUDA 11.8 or later, not 11.7"),
    ("NVIDIA H100 80GB HBM3", "12", None),  # a major-only pin: any 12.x drives it
    ("Tesla K80", "12.6", "Tesla K80 (sm_37) is not supported by CUDA 12.6"),
    ("Some Future GPU", "13.0", None),  # unknown: only a known gap is a problem
])
def test_a_cuda_release_drives_the_architectures_it_builds_for(gpu, cuda, problem):
    found = architecture_problem(gpu, cuda)
    assert (found is None) if problem is None else (problem in str(found))


def test_the_shipped_catalogue_gpus_all_have_a_compute_capability():
    from orchestrator.providers.aws.catalogue import EC2_INSTANCE_TYPES

    models = {t.gpu_model for t in EC2_INSTANCE_TYPES.values() if t.gpu_model}
    assert models and all(compute_capability(m) for m in models)
    assert compute_capability("NVIDIA A10G") == (8, 6) and compute_capability("NVIDIA L4") == (
        8, 9)


@pytest.mark.parametrize(("driver", "cuda", "problem"), [
    ("570.86.15", "13.0", "CUDA 13.0 needs NVIDIA driver 580.65.06 or newer, this node has "
                          "570.86.15"),
    ("580.65.06", "13.0", None),
    ("535.230.02", "12.6", None),  # minor version compatibility: any 12.x from 525.60.13
    ("470.256.02", "12.6", "needs NVIDIA driver 525.60.13 or newer"),
])
def test_a_cuda_release_needs_its_minimum_driver(driver, cuda, problem):
    found = driver_problem(driver, cuda)
    assert (found is None) if problem is None else (problem in str(found))


@pytest.mark.parametrize("text", [
    "NVRM version: NVIDIA UNIX x86_64 Kernel Module  570.86.15  Thu Jan 30 2025\n",
    "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.86.15  Release Build\n",
])
def test_the_worker_refuses_a_node_whose_driver_is_older_than_the_stacks_cuda(
        tmp_path, monkeypatch, text):
    monkeypatch.setattr(cuda_support, "DRIVER_FILE", tmp_path / "version")
    assert node_driver_version() is None  # no driver: a CPU node, nothing to compare
    assert stack_mismatch(CellStack(name="cu13", cuda="13.0")) is None
    (tmp_path / "version").write_text(text)
    assert node_driver_version() == "570.86.15"
    assert stack_mismatch(CellStack(name="cu13", cuda="13.0")) == (
        "stack cu13: CUDA 13.0 needs NVIDIA driver 580.65.06 or newer, this node has 570.86.15")
    assert "driver" not in str(stack_mismatch(CellStack(name="cu12", cuda="12.8")))


MATRIX = """
name: p3-cuda13
aws: {{region: us-east-1, instance_profile: matrix-bench-node}}
images: {{locks: {locks}, registry: 123456789012.dkr.ecr.us-east-1.amazonaws.com/mb}}
hardware:
  - {{name: p3-1gpu, kind: ec2, instance_type: p3.8xlarge, gpus: 1}}
  - {{name: g5, kind: ec2, instance_type: g5.xlarge, gpus: 1}}
  - {{name: c5, kind: ec2, instance_type: c5.xlarge}}
  - {{name: lab-v100, kind: local, gpus: 1, gpu_model: "Tesla V100-PCIE-32GB"}}
stacks:
  - {{name: torch-2.13-cu130, framework: torch, framework_version: "2.13.0", python: "3.12",
     cuda: "13.0", base_image: "nvidia/cuda:13.0.2-base-ubuntu24.04"}}
workloads:
  - {{name: lstm_lm, preset: tiny, dataset: synthetic, params: {{hidden: [32, 64]}}}}
"""


def test_a_p3_with_a_cuda_13_stack_is_told_which_cells_can_never_run(tmp_path):
    path = write(tmp_path / "m.yaml", MATRIX.format(locks=PROJECT / "images" / "locks"))
    spec = load_spec(path, ReleaseIndex.offline())
    reasons = {cell.hardware.name: incompatibility(cell) for cell in expand(spec)}
    assert reasons["p3-1gpu"] == ("p3-1gpu: Tesla V100-SXM2-16GB (sm_70) is not supported by "
                                  "CUDA 13.0")
    assert reasons["lab-v100"] and "Tesla V100-PCIE-32GB (sm_70)" in reasons["lab-v100"]
    assert reasons["g5"] is None and reasons["c5"] is None  # A10G is Ampere; a CPU runs it
    done = run_cli("validate", str(path), "--offline", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    notes = [line for line in done.stdout.splitlines() if line.startswith("note:")]
    assert sorted(notes) == [
        "note: 2 cells can never run: lab-v100: Tesla V100-PCIE-32GB (sm_70) is not supported "
        "by CUDA 13.0 (stack torch-2.13-cu130)",
        "note: 2 cells can never run: p3-1gpu: Tesla V100-SXM2-16GB (sm_70) is not supported "
        "by CUDA 13.0 (stack torch-2.13-cu130)"]
    plan = run_cli("plan", str(path), cwd=tmp_path)
    assert "is not supported by CUDA 13.0" in " ".join(plan.stdout.split())


def test_a_gpu_model_enters_identity_only_when_set():
    from orchestrator.spec.model import Hardware

    plain = Hardware(name="box", kind="local", gpus=1)
    assert "gpu_model" not in model_identity(plain)
    named = Hardware(name="box", kind="local", gpus=1, gpu_model="NVIDIA L4")
    assert model_identity(named)["gpu_model"] == "NVIDIA L4"
