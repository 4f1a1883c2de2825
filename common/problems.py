"""The four problems, registered by variant name: reference, benchmark configuration, floor, test cases.

A variant file `variants/<name>.py` exists for each name in PROBLEMS. Everything the tests and
run_all.py need to know about a problem lives here, once.
"""
import math
from dataclasses import dataclass

from common import reference

# Plain FP32 fused multiply-add rate of an H100/H200 SXM: 132 SMs x 128 lanes x 2 FLOP x 1.98 GHz.
FP32_FLOPS = 67e12
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

    @property
    def kernel_size(self):
        return self.init_args[2]

    @property
    def benchmark(self):
        return Case("benchmark", self.init_args, self.input_shape)

    def floor(self, bandwidth, init_args=None, input_shape=None, element_size=FLOAT_BYTES):
        """(floor seconds, memory seconds, compute seconds) at `bandwidth` bytes/s, with tensors of
        `element_size` bytes (the FLOPs at the FP32 rate either way: the kernels multiply in fp32 or TF32)."""
        args = self.init_args if init_args is None else init_args
        shape = self.input_shape if input_shape is None else input_shape
        t_mem = self.min_bytes(args, shape) * element_size / FLOAT_BYTES / bandwidth
        t_flop = self.flops(args, shape) / FP32_FLOPS
        return max(t_mem, t_flop), t_mem, t_flop

    def backward_floor(self, bandwidth, init_args=None, input_shape=None, element_size=FLOAT_BYTES):
        """Seconds the backward needs at least: the conv's two gradients (input and weight) are twice its
        forward multiply-adds at the FP32 rate; the bytes are the input read, its gradient written and the
        output's gradient read (everything else can stay on chip in principle)."""
        args = self.init_args if init_args is None else init_args
        shape = self.input_shape if input_shape is None else input_shape
        nbytes = element_size * (2 * math.prod(shape) + math.prod(self.out_shape(args, shape)))
        return max(nbytes / bandwidth, 2 * self.flops(args, shape) / FP32_FLOPS)


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
    Problem(   # problem 27 again, the conv ours too (PROBLEMS.md 5)
        name="conv3d_hardswish_groupnorm_mean_all_custom", kernelbench_id=27,
        model=reference.Conv3dHardSwishGroupNormMean,
        init_args=(3, 16, 4), input_shape=(1024, 3, 16, 32, 32), out_shape=_p2_shape,
        flops=_conv3d_flops, min_bytes=_p2_bytes,
        cases=_edge_cases((3, 16, 4, 4), 3, (7, 9, 11), (4, 4, 4), 3, 16,
                          extra=(Case("no_bias", (3, 16, 4, 4, False), (2, 3, 7, 9, 11)),
                                 # partial column quads and a partial output-channel chunk
                                 Case("odd_channels", (5, 20, 3, 5), (2, 5, 6, 7, 38)),
                                 # planes too large for the weight gradient's shared-memory path
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
        cases=_edge_cases((3, 16, 3, 2, 1, 4, 1e-5), 3, (5, 7, 9), (1, 1, 1), 5, 16,
                          extra=(Case("no_bias", (3, 16, 3, 2, 1, 4, 1e-5, False), (2, 3, 5, 7, 9)),
                                 # several row and column tiles per depth
                                 Case("wide_tall", (3, 16, 3, 2, 1, 4, 1e-5), (2, 3, 3, 37, 45)),
                                 # input channels in two chunks, output channels in two groups, a
                                 # partial chunk of channels
                                 Case("many_channels", (6, 36, 3, 2, 1, 4, 1e-5), (2, 6, 3, 9, 11)),
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
                          extra=(Case("wide_many_channels", (12, 40, 3, 8), (2, 12, 10, 290)),
                                 # rows wider than 32 outputs take the tuned path, narrower the tiled one
                                 Case("batch1_wide", (8, 64, 3, 16), (1, 8, 9, 40)),
                                 Case("batch3_wide_odd", (8, 64, 3, 16), (3, 8, 11, 37)))),
        other_configs=((3, 32, 3, 8), (4, 40, 3, 8), (8, 64, 5, 16)),
        has_backward=True,
        previous=Case("previous", (3, 16, 3, 8), (128, 3, 32, 32)),
        general=Case("general kernel 5", (8, 64, 5, 16), (16, 8, 128, 128)),
    ),
)}
