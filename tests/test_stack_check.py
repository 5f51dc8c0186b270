"""The worker's check of the stack it was promised, against this real environment."""

from __future__ import annotations

import sys

import torch

from orchestrator.stack_check import cudnn_version_string, stack_mismatch, version_matches


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
    assert stack_mismatch({"name": "here", "python": here, "framework": "torch",
                           "framework_version": torch_version}) is None


def test_a_cuda_pin_on_a_cpu_build_of_torch_is_a_mismatch_naming_both():
    assert torch.version.cuda is None  # the CPU build this project tests with
    why = stack_mismatch({"name": "cu121", "framework": "torch", "cuda": "12.1"})
    assert why == "stack cu121 declares cuda 12.1, this environment has torch built " \
                  "without cuda"


def test_tensorflow_build_info_is_read_for_its_cuda_pin():
    why = stack_mismatch({"name": "tf-gpu", "framework": "tensorflow", "cuda": "12.3"})
    assert why is not None and "tensorflow built without cuda" in why
