"""The four problems, registered by variant name: reference, benchmark configuration, floor, test cases.

A variant file `variants/<name>.py` exists for each name in PROBLEMS. Everything the tests and
run_all.py need to know about a problem lives here, once.
"""
import math
from dataclasses import dataclass

from common import reference

# Plain FP32 fused multiply-add rate of an H100/H200 SXM: 132 SMs x 128 lanes x 2 FLOP x 1.98 GHz.
FP32_FLOPS = 67e12
# Dense 16-bit tensor-core rate (fp16 or bf16 products, fp32 sums) of an H100/H200 SXM: the half types' floor.
HALF_FLOPS = 989e12
FLOAT_BYTES = 4


@dataclass(frozen=True)
class Case:
    """One module configuration and one input shape."""
    label: str
    init_args: tuple
    input_shape: tuple


@dataclass(frozen=True)
class Problem:
    name: str
    kernelbench_id: int
    model: type
    init_args: tuple
    input_shape: tuple
    out_shape: callable        # (init_args, input_shape) -> output shape
    flops: callable            # (init_args, input_shape) -> FLOPs the model must do
    min_bytes: callable        # (init_args, input_shape) -> bytes that must cross device memory
    cases: tuple               # small configurations for the edge-case tests
    other_configs: tuple       # module configurations other than the benchmark's
    has_backward: bool = False
    rejects_small_input: bool = True   # a plain conv refuses inputs smaller than its kernel
    previous: Case = None      # KernelBench's previous (v0) configuration and input, where it had this model
    general: Case = None       # a configuration outside the tuned path, at a size worth timing (run_all --sweep)
    full: bool = True          # the full module: half precision, backward, the operators and torch.compile; False:
                               # a forward-only file for its benchmark configuration (problem 23's concise file)
    dtypes: tuple = ("fp32", "fp16", "bf16")   # the precisions run_all.py checks it in

    @property
    def kernel_size(self):
        return self.init_args[2]

    @property
    def benchmark(self):
        return Case("benchmark", self.init_args, self.input_shape)

    def floor(self, bandwidth, init_args=None, input_shape=None, element_size=FLOAT_BYTES):
        """(floor seconds, memory seconds, compute seconds) at `bandwidth` bytes/s, with tensors of
        `element_size` bytes: 4, the FLOPs at the FP32 rate (exact products); 2, at the 16-bit tensor-core rate."""
        args = self.init_args if init_args is None else init_args
        shape = self.input_shape if input_shape is None else input_shape
        t_mem = self.min_bytes(args, shape) * element_size / FLOAT_BYTES / bandwidth
        t_flop = self.flops(args, shape) / flop_rate(element_size)
        return max(t_mem, t_flop), t_mem, t_flop

    def backward_floor(self, bandwidth, init_args=None, input_shape=None, element_size=FLOAT_BYTES):
        """Seconds the backward needs at least: the conv's two gradients (input and weight) are twice its
        forward multiply-adds at the dtype's rate (as floor); the bytes are the input read, its gradient written and
        the output's gradient read (everything else can stay on chip in principle)."""
        args = self.init_args if init_args is None else init_args
        shape = self.input_shape if input_shape is None else input_shape
        nbytes = element_size * (2 * math.prod(shape) + math.prod(self.out_shape(args, shape)))
        return max(nbytes / bandwidth, 2 * self.flops(args, shape) / flop_rate(element_size))


def flop_rate(element_size):
    """The floor's multiply-add rate for tensors of `element_size` bytes: FP32's for float32, the 16-bit tensor
    cores' for float16 and bfloat16."""
    return FP32_FLOPS if element_size == FLOAT_BYTES else HALF_FLOPS


def conv_out(size, kernel, stride=1, padding=0):
    return (size + 2 * padding - kernel) // stride + 1


def conv_transpose_out(size, kernel, stride, padding):
    return (size - 1) * stride - 2 * padding + kernel


def _conv_shape(args, shape):
    k = args[2]
    return tuple(conv_out(s, k) for s in shape[2:])


def _p1_shape(args, shape):
    return (shape[0],)


def _p2_shape(args, shape):
    return (shape[0], args[1])


def _p4_shape(args, shape):
    return (shape[0], 1) + _conv_shape(args, shape)


def _conv3d_flops(args, shape):
    cin, cout, k = args[0], args[1], args[2]
    b, _, d, h, w = shape
    return 2 * b * cout * conv_out(d, k) * conv_out(h, k) * conv_out(w, k) * cin * k ** 3


def _p1_bytes(args, shape):
    return FLOAT_BYTES * (math.prod(shape) + shape[0])


def _p2_bytes(args, shape):
    return FLOAT_BYTES * (math.prod(shape) + shape[0] * args[1])


def _p3_shape(args, shape):
    cin, cout, k, stride, padding = args[:5]
    b, _, d, h, w = shape
    return (b, cout) + tuple(conv_transpose_out(s, k, stride, padding) for s in (d, h, w))


def _p3_flops(args, shape):
    cin, cout, k = args[:3]
    return 2 * math.prod(shape) * cout * k ** 3


def _p3_bytes(args, shape):
    return FLOAT_BYTES * (math.prod(shape) + math.prod(_p3_shape(args, shape)))


def _p4_flops(args, shape):
    cin, cout, k = args[:3]
    b, _, h, w = shape
    return 2 * b * cout * conv_out(h, k) * conv_out(w, k) * cin * k ** 2


def _p4_bytes(args, shape):
    b, _, h, w = shape
    k = args[2]
    return FLOAT_BYTES * (math.prod(shape) + b * conv_out(h, k) * conv_out(w, k))


def _edge_cases(init_args, channels, spatial_odd, spatial_min, group_arg, out_channels, extra=()):
    """Batch 0/1/3, odd and minimal spatial sizes, one group, one channel per group."""
    def with_groups(g):
        args = list(init_args)
        args[group_arg] = g
        return tuple(args)
    small = (2, channels) + spatial_odd
    return (
        Case("batch0", init_args, (0, channels) + spatial_odd),
        Case("batch1", init_args, (1, channels) + spatial_odd),
        Case("batch3_odd", init_args, (3, channels) + spatial_odd),
        Case("minimal", init_args, (2, channels) + spatial_min),
        Case("one_group", with_groups(1), small),
        Case("groups_eq_channels", with_groups(out_channels), small),
    ) + extra


PROBLEMS = {p.name: p for p in (
    Problem(
        name="conv3d_groupnorm_mean", kernelbench_id=23,
        model=reference.Conv3dGroupNormMean,
        init_args=(3, 24, 3, 8), input_shape=(128, 3, 24, 32, 32), out_shape=_p1_shape,
        flops=_conv3d_flops, min_bytes=_p1_bytes,
        cases=_edge_cases((3, 24, 3, 8), 3, (9, 13, 17), (3, 3, 3), 3, 24, extra=(
            # rows of two 32-column segments, the second shifted left (45) or not (62)
            Case("two_segments_shifted", (3, 24, 3, 8), (2, 3, 4, 5, 45)),
            Case("two_segments", (3, 24, 3, 8), (2, 3, 3, 4, 62)),
            # more samples than the conv kernel has blocks: blocks span several samples
            Case("many_samples", (3, 24, 3, 8), (1500, 3, 3, 3, 3)),
        )),
        # 7 and 8 input channels: the conv kernel's static and dynamic shared memory together pass 48 KB
        other_configs=((4, 16, 3, 4), (2, 40, 3, 5), (3, 24, 5, 8), (7, 16, 3, 4), (8, 24, 3, 8), (12, 24, 3, 8),
                       (20, 8, 3, 4)),
        has_backward=True,
        previous=Case("previous", (3, 16, 3, 8), (128, 3, 16, 32, 32)),
        general=Case("general kernel 5", (3, 24, 5, 8), (16, 3, 24, 32, 32)),
    ),
    Problem(   # problem 23 again, as its brief asks: concise, forward only, the benchmark's channels and kernel size
        name="conv3d_groupnorm_mean_concise", kernelbench_id=23,
        model=reference.Conv3dGroupNormMean,
        init_args=(3, 24, 3, 8), input_shape=(128, 3, 24, 32, 32), out_shape=_p1_shape,
        flops=_conv3d_flops, min_bytes=_p1_bytes,
        cases=_edge_cases((3, 24, 3, 8), 3, (9, 13, 17), (3, 3, 3), 3, 24, extra=(
            Case("wide_rows", (3, 24, 3, 8), (2, 3, 4, 5, 301)),   # a row of 75 column pieces: 2 rows a block
            Case("many_samples", (3, 24, 3, 8), (1500, 3, 3, 3, 3)),
        )),
        other_configs=(), full=False, dtypes=("fp32",),
    ),
    Problem(
        name="conv3d_hardswish_groupnorm_mean", kernelbench_id=27,
        model=reference.Conv3dHardSwishGroupNormMean,
        init_args=(3, 16, 4), input_shape=(1024, 3, 16, 32, 32), out_shape=_p2_shape,
        flops=_conv3d_flops, min_bytes=_p2_bytes,
        cases=_edge_cases((3, 16, 4, 4), 3, (7, 9, 11), (4, 4, 4), 3, 16,
                          extra=(Case("no_bias", (3, 16, 4, 4, False), (2, 3, 7, 9, 11)),)),
        other_configs=((3, 32, 3, 8), (5, 12, 3, 3)),
        has_backward=True,
        general=Case("kernel 5", (3, 16, 5, 4), (64, 3, 16, 32, 32)),
    ),
    Problem(   # problem 27 again, the conv ours too (KernelBench's task allows it)
        name="conv3d_hardswish_groupnorm_mean_all_custom", kernelbench_id=27,
        model=reference.Conv3dHardSwishGroupNormMean,
        init_args=(3, 16, 4), input_shape=(1024, 3, 16, 32, 32), out_shape=_p2_shape,
        flops=_conv3d_flops, min_bytes=_p2_bytes,
        cases=_edge_cases((3, 16, 4, 4), 3, (7, 9, 11), (4, 4, 4), 3, 16,
                          extra=(Case("no_bias", (3, 16, 4, 4, False), (2, 3, 7, 9, 11)),
                                 # partial column quads and a partial output-channel chunk
                                 Case("odd_channels", (5, 20, 3, 5), (2, 5, 6, 7, 38)),
                                 # rows wider than 32 on large planes: the plain-FP32 forward, the general
                                 # backward kernels
                                 Case("wide_plane", (3, 16, 4, 4), (1, 3, 4, 90, 100)),
                                 # the tensor-core paths with K = 3 and rows of 16-byte loads shorter
                                 # than 32 columns (clamped), and with two output-channel chunks
                                 Case("short_rows_k3", (3, 16, 3, 4), (2, 3, 6, 7, 20)),
                                 Case("two_chunks", (3, 20, 4, 4), (2, 3, 6, 7, 16)))),
        other_configs=((3, 32, 3, 8), (5, 12, 3, 3), (3, 16, 5, 4)),
        has_backward=True,
        general=Case("general kernel 5", (3, 16, 5, 4), (64, 3, 16, 32, 32)),
    ),
    Problem(
        name="convtranspose3d_swish_groupnorm_hardswish", kernelbench_id=60,
        model=reference.ConvTranspose3dSwishGroupNormHardSwish,
        init_args=(3, 16, 3, 2, 1, 4, 1e-5), input_shape=(128, 3, 16, 32, 32), out_shape=_p3_shape,
        flops=_p3_flops, min_bytes=_p3_bytes,
        cases=_edge_cases((3, 16, 3, 2, 1, 4, 1e-5), 3, (7, 9, 11), (1, 1, 1), 5, 16,
                          extra=(Case("no_bias", (3, 16, 3, 2, 1, 4, 1e-5, False), (2, 3, 5, 7, 9)),
                                 # several row and column tiles per depth
                                 Case("wide_tall", (3, 16, 3, 2, 1, 4, 1e-5), (2, 3, 3, 37, 45)),
                                 # the tuned path (C_in <= 4, 512 input positions a sample on): a
                                 # partial chunk of output channels
                                 Case("partial_chunk", (4, 20, 3, 2, 1, 4, 1e-5), (2, 4, 3, 13, 15)),
                                 # output channels in two groups, a partial chunk of channels
                                 Case("many_channels", (4, 36, 3, 2, 1, 4, 1e-5), (2, 4, 3, 13, 15)),
                                 # more input channels: PyTorch's conv path at kernel 3,
                                 # stride 2, padding 1; and a small input with few channels
                                 Case("many_channels_general", (12, 36, 3, 2, 1, 4, 1e-5), (2, 12, 3, 9, 11)),
                                 Case("few_positions_general", (4, 20, 3, 2, 1, 4, 1e-5), (2, 4, 3, 9, 11)),
                                 Case("odd_channels", (3, 6, 3, 2, 1, 3, 1e-5), (2, 3, 4, 5, 6)))),
        other_configs=((4, 8, 3, 2, 1, 2, 1e-3), (3, 16, 4, 2, 1, 4, 1e-5), (3, 16, 3, 1, 1, 4, 1e-5)),
        has_backward=True,
        rejects_small_input=False,   # a transposed conv grows its input: any size >= 1 is valid
        previous=Case("previous", (3, 16, 3, 2, 1, 4, 1e-5), (128, 3, 16, 32, 32)),
        general=Case("general kernel 4 stride 2", (3, 16, 4, 2, 1, 4, 1e-5), (16, 3, 16, 32, 32)),
    ),
    Problem(
        name="conv2d_groupnorm_tanh_hardswish_residualadd_logsumexp", kernelbench_id=92,
        model=reference.Conv2dGroupNormTanhHardSwishResidualAddLogSumExp,
        init_args=(8, 64, 3, 16), input_shape=(128, 8, 128, 128), out_shape=_p4_shape,
        flops=_p4_flops, min_bytes=_p4_bytes,
        cases=_edge_cases((8, 64, 3, 16), 8, (17, 23), (3, 3), 3, 64,
                          # input channels in two chunks of the gradients, a partial tile of output
                          # channels, three column chunks and two bands of rows in the input gradient
                          extra=(Case("wide_many_channels", (12, 40, 3, 8), (8, 12, 10, 290)),
                                 # rows wider than 32 outputs at batch 8 or more take the tuned path, narrower
                                 # rows or fewer samples PyTorch's conv
                                 Case("batch7_wide", (8, 64, 3, 16), (7, 8, 9, 40)),
                                 Case("batch9_wide_odd", (8, 64, 3, 16), (9, 8, 11, 37)))),
        other_configs=((3, 32, 3, 8), (4, 40, 3, 8), (8, 64, 5, 16)),
        has_backward=True,
        previous=Case("previous", (3, 16, 3, 8), (128, 3, 32, 32)),
        general=Case("general kernel 5", (8, 64, 5, 16), (16, 8, 128, 128)),
    ),
)}


# Configurations other than the benchmark's, each file's ranges (kernel sizes 1 to 7 and tuples, strides 1 to 3
# and paddings 0 to k - 1 for the transposed conv, channels up to 256, groups from one to one channel each, bias
# off, other eps), with the edge cases labelled: name -> (label, init_args, input_shape). tests/test_configurations.py
# runs each forward and backward against float64.
_P60 = "convtranspose3d_swish_groupnorm_hardswish"
_GRIDS = {
    _P60: [
        ("tuned", (3, 16, 3, 2, 1, 4, 1e-5), (1, 3, 8, 16, 16)),
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
        # 128 (sample, group)s of 120 elements: PyTorch's conv path's float32 GroupNorm in gn_fused_kernel
        ("fused_groupnorm", (4, 16, 3, 1, 1, 8, 1e-5), (16, 4, 3, 4, 5)),
    ],
}
_P23 = "conv3d_groupnorm_mean"
_GRIDS[_P23] = [
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
    ("in_channels_7_tiled", (7, 16, 5, 4), (2, 7, 6, 7, 8)),          # float32: the tiled path to 7
    ("in_channels_8_torch_conv", (8, 16, 5, 4), (2, 8, 6, 7, 8)),     # PyTorch's conv path from 8
    ("kernel3_in_channels_7_tuned", (7, 16, 3, 4), (2, 7, 6, 7, 8)),   # float32: tuned to 7, PyTorch's conv from 8
    ("kernel3_in_channels_16", (16, 32, 3, 8), (2, 16, 5, 6, 7)),     # float32 PyTorch's conv, half the tuned path
    ("kernel3_in_channels_1_batch_72", (1, 16, 3, 4), (72, 1, 5, 9, 11)),   # dL/dx a block a sample
    ("kernel3_in_channels_2_out_32_batch_72", (2, 32, 3, 8), (72, 2, 4, 12, 32)),
    ("kernel3_tall_batch_70", (3, 8, 3, 4), (70, 3, 5, 64, 20)),
    ("kernel3_in_channels_1_width_16", (1, 24, 3, 8), (2, 1, 4, 5, 16)),   # dL/dW with rows of depths
    ("kernel3_in_channels_2_width_12", (2, 16, 3, 4), (3, 2, 5, 6, 12)),
    ("kernel3_wide_rows_70", (2, 24, 3, 6), (2, 2, 6, 12, 70)),   # rows of 3 segments (half: element loads)
]
_P27 = "conv3d_hardswish_groupnorm_mean_all_custom"
_GRIDS[_P27] = [
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
_P27_KEPT = "conv3d_hardswish_groupnorm_mean"
_GRIDS[_P27_KEPT] = [(label, args, shape) for label, args, shape in _GRIDS[_P27]
                   if label in ("kernel1", "kernel7_small_input", "tuple_kernel", "channels_256_in", "no_bias")]
_P92 = "conv2d_groupnorm_tanh_hardswish_residualadd_logsumexp"
_GRIDS[_P92] = [
    ("tuned", (8, 64, 3, 16), (8, 8, 9, 40)),
    ("tuned_envelope_narrow_rows", (8, 64, 3, 16), (8, 8, 9, 10)),
    ("tuned_in_channels_16", (16, 64, 3, 16), (8, 16, 9, 40)),   # the tuned kernels' deepest sums (2 groups of 8)
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
    ("torch_conv_tuple_kernel", (32, 48, (3, 5), 8), (2, 32, 9, 12)),   # PyTorch's conv path, both directions
    ("torch_conv_in_channels_40", (40, 24, 3, 4), (2, 40, 7, 9)),
]
CONFIGURATIONS = {name: tuple(Case(label, args, shape) for label, args, shape in grid) for name, grid in _GRIDS.items()}


# The channel sweep (run_all.py --channels): configurations a user would pick, each file at every pair of channel
# counts, kernel size and batch below. name -> (init_args from (C_in, C_out, kernel), the input's spatial size).
SWEEP_CHANNELS = ((3, 16), (16, 32), (32, 64), (64, 128))
SWEEP_KERNELS = (3, 5)
SWEEP_BATCHES = (1, 8, 32)
_SWEEP_CONFIG = {
    _P23: (lambda ci, co, k: (ci, co, k, 8), (8, 16, 16)),
    _P27_KEPT: (lambda ci, co, k: (ci, co, k, 8), (8, 16, 16)),
    _P27: (lambda ci, co, k: (ci, co, k, 8), (8, 16, 16)),
    _P60: (lambda ci, co, k: (ci, co, k, 2, 1, 8, 1e-5), (4, 8, 8)),   # stride 2, padding 1
    _P92: (lambda ci, co, k: (ci, co, k, 8), (32, 32)),
}


def channel_sweep(name):
    """The channel sweep's cases of one file (none for a file that takes only its benchmark's configuration)."""
    if name not in _SWEEP_CONFIG:
        return ()
    make_args, spatial = _SWEEP_CONFIG[name]
    return tuple(Case(f"{ci}->{co} k{k} b{b}", make_args(ci, co, k), (b, ci) + spatial)
                 for ci, co in SWEEP_CHANNELS for k in SWEEP_KERNELS for b in SWEEP_BATCHES)


def full_names():
    """The problems whose file is a full module (backward, half precision, operators, torch.compile)."""
    return sorted(name for name, problem in PROBLEMS.items() if problem.full)
