"""The worker's check of the stack it was promised, against this real environment."""

from __future__ import annotations

import sys

import torch

from orchestrator.worker.cell_file import CellStack
from orchestrator.worker.stack_check import cudnn_version_string, stack_mismatch, version_matches


def test_versions_match_on_the_components_declared():
    assert version_matches("2.13", "2.13.0+cpu")
    assert version_matches("3.11", "3.11.7")
    assert not version_matches("2.1", "2.13.0")
    assert not version_matches("12.1", "12.4")


def test_cudnn_integers_of_both_numbering_schemes():
    assert cudnn_version_string(8902) == "8.9.2"
    assert cudnn_version_string(90100) == "9.1.0"
    assert cudnn_version_string(None) is None


def test_this_environment_matches_what_it_has():
    here = f"{sys.version_info.major}.{sys.version_info.minor}"
    torch_version = torch.__version__.split("+")[0]
    assert stack_mismatch(CellStack(name="here", python=here, framework="torch",
                                    framework_version=torch_version)) is None


def test_a_cuda_pin_torch_was_not_built_with_is_a_mismatch_naming_both():
    # Whichever build the machine has (the package index serves CUDA builds to fresh
    # machines), pin a CUDA it was not built with and expect both named.
    built = torch.version.cuda
    pin = "11.0" if built and not built.startswith("11.0") else "12.1"
    why = stack_mismatch(CellStack(name="pinned", framework="torch", cuda=pin))
    have = f"torch built with cuda {built}" if built else "torch built without cuda"
    assert why == f"stack pinned declares cuda {pin}, this environment has {have}"
    if built:  # and the CUDA it was built with is no mismatch
        assert stack_mismatch(CellStack(name="same", framework="torch", cuda=built)) is None


def test_tensorflow_build_info_is_read_for_its_cuda_pin():
    why = stack_mismatch(CellStack(name="tf-gpu", framework="tensorflow", cuda="12.3"))
    assert why is not None and "tensorflow built without cuda" in why
