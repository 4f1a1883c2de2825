"""Configurations other than the benchmark's, as CONTRACT.md 15 asks: every one the reference's __init__ accepts is
computed by the variant's own CUDA (the tuned path where it applies, the general path elsewhere), forward and
gradients against float64 in fp32, and forward in bf16. Each grid spans the file's ranges (kernel sizes 1 to 7 and
tuples, strides 1 to 3 and paddings 0 to k - 1 for the transposed conv, channels up to 256, groups from one to one
channel each, bias off, other eps), with the edge cases labelled. Construction is checked without a GPU."""
import pytest
import torch

from common.accuracy import HALF_DTYPES, check_gradients, check_half, check_model
from common.problems import PROBLEMS
from tests.conftest import HAS_GPU, load, models, needs_nvcc

P60 = "convtranspose3d_swish_groupnorm_hardswish"

# name -> (label, init_args, input_shape)
GRIDS = {
    P60: [
        ("tuned", (3, 16, 3, 2, 1, 4, 1e-5), (2, 3, 3, 4, 5)),
        ("kernel1_stride1", (3, 8, 1, 1, 0, 4, 1e-5), (2, 3, 3, 4, 5)),
        ("kernel2_stride2", (4, 8, 2, 2, 0, 2, 1e-5), (2, 4, 3, 4, 5)),
        ("kernel3_stride1_pad1", (3, 16, 3, 1, 1, 4, 1e-5), (2, 3, 3, 4, 5)),
        ("kernel3_stride3_pad0", (3, 12, 3, 3, 0, 3, 1e-5), (2, 3, 3, 4, 5)),
        ("kernel4_stride2_pad1", (3, 16, 4, 2, 1, 4, 1e-5), (2, 3, 3, 4, 5)),
        ("kernel5_stride3_pad4", (2, 8, 5, 3, 4, 2, 1e-3), (2, 2, 3, 4, 5)),
        ("kernel7_small_input", (2, 6, 7, 1, 3, 3, 1e-5), (2, 2, 2, 3, 3)),
        ("kernel7_stride2_pad6", (2, 6, 7, 2, 6, 3, 1e-5), (2, 2, 5, 6, 7)),
        ("tuple_kernel", (3, 8, (1, 3, 5), (1, 2, 3), (0, 1, 2), 4, 1e-5), (2, 3, 3, 4, 5)),
        ("one_channel_per_group", (3, 8, 3, 2, 1, 8, 1e-5), (2, 3, 3, 4, 5)),
        ("one_group", (3, 8, 3, 1, 0, 1, 1e-5), (2, 3, 3, 4, 5)),
        ("no_bias", (3, 8, 3, 2, 0, 4, 1e-5, False), (2, 3, 3, 4, 5)),
        ("channels_256_in", (256, 8, 3, 2, 1, 4, 1e-5), (2, 256, 2, 3, 3)),
        ("channels_256_out", (4, 256, 3, 2, 1, 32, 1e-5), (2, 4, 2, 3, 3)),
        ("tuned_channels_256", (256, 256, 3, 2, 1, 64, 1e-5), (1, 256, 2, 3, 3)),
    ],
}
P23 = "conv3d_groupnorm_mean"
GRIDS[P23] = [
    ("tuned", (3, 24, 3, 8), (2, 3, 6, 7, 8)),
    ("kernel1", (3, 16, 1, 4), (2, 3, 4, 5, 6)),
    ("kernel2", (4, 8, 2, 2), (2, 4, 4, 5, 6)),
    ("kernel4", (3, 12, 4, 3), (2, 3, 6, 7, 8)),
    ("kernel5", (3, 24, 5, 8), (2, 3, 6, 7, 8)),
    ("kernel7_small_input", (2, 8, 7, 4), (2, 2, 7, 8, 9)),
    ("tuple_kernel", (3, 16, (1, 3, 5), 4), (2, 3, 4, 5, 6)),
    ("in_channels_17", (17, 24, 3, 8), (2, 17, 5, 6, 7)),
    ("channels_256_in", (256, 16, 3, 4), (2, 256, 4, 5, 6)),
    ("channels_256_out", (4, 256, 3, 32), (2, 4, 4, 5, 6)),
    ("one_channel_per_group", (3, 8, 3, 8), (2, 3, 5, 6, 7)),
    ("one_group", (3, 8, 2, 1), (2, 3, 5, 6, 7)),
    ("several_tiles_in_channels_6", (6, 16, 5, 4), (2, 6, 7, 40, 70)),
    ("several_tiles_in_channels_17", (17, 24, 3, 8), (2, 17, 4, 37, 70)),
    ("kernel3_in_channels_1_batch_72", (1, 16, 3, 4), (72, 1, 5, 9, 11)),   # dL/dx a block a sample
    ("kernel3_in_channels_2_out_32_batch_72", (2, 32, 3, 8), (72, 2, 4, 12, 32)),
    ("kernel3_tall_batch_70", (3, 8, 3, 4), (70, 3, 5, 64, 20)),
    ("kernel3_in_channels_1_width_16", (1, 24, 3, 8), (2, 1, 4, 5, 16)),   # dL/dW with rows of depths
    ("kernel3_in_channels_2_width_12", (2, 16, 3, 4), (3, 2, 5, 6, 12)),
    ("kernel3_wide_rows_70", (2, 24, 3, 6), (2, 2, 6, 12, 70)),   # rows of 3 segments (half: element loads)
]
P27 = "conv3d_hardswish_groupnorm_mean_all_custom"
GRIDS[P27] = [
    ("tuned_kernel3", (3, 16, 3, 4), (2, 3, 6, 7, 8)),
    ("tuned_kernel4", (3, 16, 4, 4), (2, 3, 6, 7, 8)),
    ("kernel1", (3, 8, 1, 4), (2, 3, 4, 5, 6)),
    ("kernel2", (4, 8, 2, 2), (2, 4, 4, 5, 6)),
    ("kernel5", (3, 16, 5, 4), (2, 3, 6, 7, 8)),
    ("kernel7_small_input", (2, 8, 7, 4), (2, 2, 7, 8, 9)),
    ("tuple_kernel", (3, 16, (1, 3, 5), 4), (2, 3, 4, 5, 6)),
    ("tuple_kernel_3_3_4", (3, 8, (3, 3, 4), 2), (2, 3, 5, 6, 7)),
    ("channels_256_in", (256, 16, 3, 4), (2, 256, 4, 5, 6)),
    ("channels_256_out", (4, 256, 2, 32), (2, 4, 4, 5, 6)),
    ("one_channel_per_group", (3, 8, 3, 8), (2, 3, 5, 6, 7)),
    ("one_group", (3, 8, 2, 1), (2, 3, 5, 6, 7)),
    ("no_bias", (3, 8, 5, 4, False), (2, 3, 6, 7, 8)),
    ("kernel4_unaligned_rows_no_bias", (4, 16, 4, 4, False), (2, 4, 6, 7, 30)),   # 64 taps, element loads
    ("kernel3_out_channels_20", (3, 20, 3, 4), (2, 3, 6, 9, 28)),   # two chunks, the second partial
    ("several_tiles_in_channels_6", (6, 16, 5, 4), (2, 6, 7, 40, 70)),
    ("several_tiles_in_channels_17", (17, 16, 5, 4), (2, 17, 6, 37, 70)),
]
P27_KEPT = "conv3d_hardswish_groupnorm_mean"
GRIDS[P27_KEPT] = [(label, args, shape) for label, args, shape in GRIDS[P27]
                   if label in ("kernel1", "kernel7_small_input", "tuple_kernel", "channels_256_in", "no_bias")]
P92 = "conv2d_groupnorm_tanh_hardswish_residualadd_logsumexp"
GRIDS[P92] = [
    ("tuned", (8, 64, 3, 16), (2, 8, 9, 40)),
    ("tuned_envelope_narrow_rows", (8, 64, 3, 16), (2, 8, 9, 10)),
    ("kernel1", (3, 16, 1, 4), (2, 3, 6, 7)),
    ("kernel2", (4, 8, 2, 2), (2, 4, 6, 7)),
    ("kernel5", (3, 16, 5, 8), (2, 3, 9, 10)),
    ("kernel7_small_input", (2, 8, 7, 4), (2, 2, 7, 8)),
    ("tuple_kernel", (3, 16, (1, 3), 4), (2, 3, 6, 7)),
    ("in_channels_17", (17, 24, 3, 8), (2, 17, 7, 8)),
    ("channels_256_in", (256, 16, 3, 4), (2, 256, 5, 6)),
    ("out_channels_65", (4, 65, 3, 5), (2, 4, 6, 7)),
    ("channels_256_out", (4, 256, 3, 32), (2, 4, 5, 6)),
    ("one_channel_per_group", (3, 8, 3, 8), (2, 3, 6, 7)),
    ("one_group", (3, 8, 2, 1), (2, 3, 6, 7)),
    ("several_tiles_in_channels_6", (6, 16, 5, 4), (2, 6, 40, 70)),
    ("several_tiles_in_channels_20", (20, 32, 3, 8), (2, 20, 37, 70)),
]
CASES = [(name, label, args, shape) for name, grid in GRIDS.items() for label, args, shape in grid]
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
