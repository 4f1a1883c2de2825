"""Shared fixtures and skip conditions: GPU tests need a CUDA device, compile tests need nvcc and a
CUDA build of torch. Nothing else skips."""
import os
import pathlib

import pytest
import torch

from common.loading import load_variant  # also sets the build defaults (TORCH_EXTENSIONS_DIR, ...)
from common.inputs import make_models
from common.problems import PROBLEMS


def nvcc_path():
    home = os.environ.get("CUDA_HOME")
    return pathlib.Path(home) / "bin" / "nvcc" if home else None


HAS_NVCC = nvcc_path() is not None and nvcc_path().exists() and torch.version.cuda is not None
HAS_GPU = torch.cuda.is_available()

needs_nvcc = pytest.mark.skipif(not HAS_NVCC, reason="no nvcc under CUDA_HOME or torch lacks CUDA: nothing to build")
needs_gpu = pytest.mark.skipif(not HAS_GPU, reason="no CUDA device visible")


def load(name):
    """The variant's namespace, exec-ed as a harness does, once per session (its extension builds on
    first use; a failed build fails every test that loads it with the compiler's error)."""
    return load_variant(name)


def models(name, init_args, seed=0):
    """(reference, variant) of problem `name` built with `init_args` as a harness builds them, on the GPU."""
    return make_models(PROBLEMS[name].model, load(name)["ModelNew"], init_args, "cuda", seed)


def assert_all_pass(reports):
    assert all(r.passed for r in reports), "\n".join(str(r) for r in reports)


def small(name):
    """The problem's batch3_odd edge case: a small input the GPU tests run many checks on."""
    return next(c for c in PROBLEMS[name].cases if c.label == "batch3_odd")


# The inner loop's subset, `pytest -m quick` (2.5 minutes on a fresh H200 machine, its six builds included): the
# CPU checks of the files' text, the shared code, the references and the checker; each file's operators on meta
# tensors; one GPU check per file at its benchmark size; and per full file one configuration off the tuned path,
# forward and gradients (QUICK_CASES). The full suite is the check before landing.
QUICK = {"test_contract.py", "test_shared.py", "test_harness_rules.py", "test_reference_and_checker.py",
         "test_operators.py::test_meta_forward_and_backward_shapes", "test_gpu.py::test_benchmark_configuration"}
QUICK_CASES = {"test_configurations.py::test_forward_and_gradients_fp32[" + case + "]" for case in (
    "conv3d_groupnorm_mean-in_channels_8_torch_conv", "conv3d_groupnorm_mean-in_channels_7_tiled",
    "conv3d_hardswish_groupnorm_mean_all_custom-kernel5", "conv3d_hardswish_groupnorm_mean-kernel1",
    "convtranspose3d_swish_groupnorm_hardswish-kernel3_stride1_pad1",
    "conv2d_groupnorm_tanh_hardswish_residualadd_logsumexp-torch_conv_in_channels_40")}


def pytest_report_header(config):
    gpu = torch.cuda.get_device_name(0) if HAS_GPU else "none visible: the GPU tests skip"
    toolkit = str(nvcc_path()) if HAS_NVCC else "none found (CUDA_HOME, /usr/local/cuda): nothing can be built"
    return [f"CUDA toolkit: {toolkit}", f"GPU: {gpu}"]


def pytest_configure(config):
    config.addinivalue_line("markers", "quick: the inner loop's subset (tests/conftest.py QUICK)")


def pytest_collection_modifyitems(items):
    for item in items:
        if item.path.name in QUICK or f"{item.path.name}::{item.originalname}" in QUICK or \
                f"{item.path.name}::{item.name}" in QUICK_CASES:
            item.add_marker(pytest.mark.quick)
