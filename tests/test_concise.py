"""Problem 23's concise file (variants/conv3d_groupnorm_mean_concise.py): at most 250 lines; what it does not compute
it refuses clearly (other configurations at construction, half precision at the call, a backward). Its forward is
checked against float64 with the other files (tests/test_gpu.py: the benchmark, edge cases, layouts, bad input,
determinism, CUDA graphs, TF32 flags)."""
import pytest
import torch

from common.loading import variant_path
from tests.conftest import load, models, needs_gpu, needs_nvcc

NAME = "conv3d_groupnorm_mean_concise"


def test_at_most_250_lines():
    assert len(variant_path(NAME).read_text().splitlines()) <= 250


@needs_nvcc
@pytest.mark.parametrize("init_args", [(3, 16, 3, 8), (4, 24, 3, 8), (3, 24, 5, 8), (3, 24, (3, 3, 5), 8)])
def test_other_configurations_are_refused_at_construction(init_args):
    with pytest.raises(ValueError, match="conv3d_groupnorm_mean.py"):
        load(NAME)["ModelNew"](*init_args)


@needs_gpu
def test_half_precision_is_refused():
    _, new = models(NAME, (3, 24, 3, 8))
    with pytest.raises(ValueError, match="float32"):
        new.to(torch.bfloat16)(torch.rand(2, 3, 5, 6, 7, device="cuda", dtype=torch.bfloat16))


@needs_gpu
def test_backward_raises_and_points_to_the_full_file():
    _, new = models(NAME, (3, 24, 3, 8))
    x = torch.rand(2, 3, 5, 6, 7, device="cuda", requires_grad=True)
    out = new(x)
    assert out.requires_grad
    with pytest.raises(RuntimeError, match="conv3d_groupnorm_mean.py"):
        out.sum().backward()
    with torch.no_grad():
        assert not new(x).requires_grad
