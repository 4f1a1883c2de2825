"""Shared fixtures and skip conditions: GPU tests need a CUDA device, compile tests need nvcc and a
CUDA build of torch. Nothing else skips."""
import os
import pathlib

import pytest
import torch

from common.loading import load_variant  # also sets the build defaults (TORCH_EXTENSIONS_DIR, ...)


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
