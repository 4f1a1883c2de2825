"""Configurations other than the benchmark's, (docs/DESIGN.md): every one the reference's __init__ accepts is
computed by the variant's own CUDA (the tuned path where it applies, the general path elsewhere), forward and
gradients against float64 in fp32, forward and gradients in bf16. Each grid spans the file's ranges (kernel sizes 1
to 7 and tuples, strides 1 to 3 and paddings 0 to k - 1 for the transposed conv, channels up to 256, groups from one
to one channel each, bias off, other eps), with the edge cases labelled (common/problems.py's CONFIGURATIONS).
Construction is checked without a GPU."""
import pytest
import torch

from common.accuracy import HALF_DTYPES, check_gradients, check_half, check_half_gradients, check_model
from common.problems import CONFIGURATIONS, PROBLEMS
from tests.conftest import HAS_GPU, load, models, needs_nvcc

CASES = [(name, c.label, c.init_args, c.input_shape) for name, grid in CONFIGURATIONS.items() for c in grid]
IDS = [f"{name}-{label}" for name, label, _, _ in CASES]


def failures(reports):
    return "\n".join(str(r) for r in (reports.values() if isinstance(reports, dict) else reports) if not r.passed)


@needs_nvcc
@pytest.mark.parametrize("name,label,init_args,shape", CASES, ids=IDS)
def test_construction_accepts_what_the_reference_accepts(name, label, init_args, shape):
    torch.manual_seed(0)
    ref = PROBLEMS[name].model(*init_args)
    torch.manual_seed(0)
    new = load(name)["ModelNew"](*init_args)
    assert [tuple(p.shape) for p in new.parameters()] == [tuple(p.shape) for p in ref.parameters()]


@pytest.mark.skipif(not HAS_GPU, reason="no CUDA device visible")
@pytest.mark.parametrize("name,label,init_args,shape", CASES, ids=IDS)
def test_forward_and_gradients_fp32(name, label, init_args, shape):
    ref, new = models(name, init_args)
    reports = check_model(new, ref, shape, "cuda")
    assert all(r.passed for r in reports), failures(reports)
    grads = check_gradients(new, ref, shape, "cuda")
    assert all(r.passed for r in grads.values()), failures(grads)


@pytest.mark.skipif(not HAS_GPU, reason="no CUDA device visible")
@pytest.mark.parametrize("name,label,init_args,shape", CASES, ids=IDS)
def test_forward_bf16(name, label, init_args, shape):
    ref, new = models(name, init_args)
    reports = check_half(new, ref, shape, "cuda", HALF_DTYPES["bf16"])
    assert all(r.passed for r in reports), failures(reports)


@pytest.mark.skipif(not HAS_GPU, reason="no CUDA device visible")
@pytest.mark.parametrize("name,label,init_args,shape", CASES, ids=IDS)
def test_gradients_bf16(name, label, init_args, shape):
    """The half-precision backward off the benchmark (the general paths'), judged as tests/test_half.py judges the
    benchmark's: each gradient within the half tolerance of float64 autograd and no farther than PyTorch's own."""
    ref, new = models(name, init_args)
    grads = check_half_gradients(new, ref, shape, "cuda", HALF_DTYPES["bf16"])
    assert all(r.passed for r in grads.values()), failures(grads)


def test_the_quick_subset_names_existing_cases():
    """tests/conftest.py's QUICK_CASES (the off-benchmark gradient cases of `pytest -m quick`) are cases of this grid."""
    from tests.conftest import QUICK_CASES
    ids = {f"test_configurations.py::test_forward_and_gradients_fp32[{i}]" for i in IDS}
    assert QUICK_CASES <= ids, QUICK_CASES - ids
