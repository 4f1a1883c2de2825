"""Each file's launch plan (CPU, meta tensors): ModelNew.plan(x) names the kernel of every stage, from the C++
decisions the launchers make, and these tests pin it at the benchmark point, KernelBench's previous size, batch 1,
a configuration off the tuned path, in half precision, and for a build without sm_90a. A moved threshold fails
here by name. sms=132: an H100 or H200 (problem 23's and 27 all custom's dL/dx depend on it)."""
import pytest
import torch

from common.accuracy import cudnn_tf32
from common.problems import PROBLEMS
from tests.conftest import load, needs_nvcc

pytestmark = needs_nvcc

P23 = "conv3d_groupnorm_mean"
P27 = "conv3d_hardswish_groupnorm_mean"
P27AC = "conv3d_hardswish_groupnorm_mean_all_custom"
P60 = "convtranspose3d_swish_groupnorm_hardswish"
P92 = "conv2d_groupnorm_tanh_hardswish_residualadd_logsumexp"


def plan(name, case, dtype=torch.float32, training=True):
    """The plan of a call (problem 23: one that wants a gradient unless training=False; the others do not ask)."""
    problem = PROBLEMS[name]
    point = getattr(problem, case) if isinstance(case, str) else case
    model = load(name)["ModelNew"](*point.init_args).to("meta").to(dtype)
    x = torch.empty(point.input_shape, device="meta", dtype=dtype)
    extra = {"sms": 132, "training": training} if name == P23 else {"sms": 132} if name == P27AC else {}
    stages = {stage: line.split(";")[0] for stage, line in model.plan(x, **extra).items()}
    if "tensor cores" in stages:   # the build's choice: wgmma where the extension was built for sm_90a
        assert stages.pop("tensor cores").startswith("wgmma" if load(name)["_hopper"] else "mma.sync")
    return stages


def batch1(name):
    problem = PROBLEMS[name]
    return type(problem.benchmark)("batch 1", problem.init_args, (1,) + problem.input_shape[1:])


TORCH_FWD = "PyTorch's convolution (at::_convolution)"
TORCH_BWD = "PyTorch's convolution backward (at::convolution_backward)"


def test_problem23():
    bench = plan(P23, "benchmark")
    assert bench == {"forward": "conv_gn_stats_kernel", "forward finish": "gn_mean_finalize_kernel",
                     "backward coefficients": "gn_mean_backward_coef_kernel",
                     "backward dL/dy": "conv_gn_stats_kernel (GRAD mode)", "backward parameters": "gn_param_grad_kernel",
                     "backward dL/dx": "grad_input_stream_kernel",
                     "backward dL/dW": "grad_weight_rows_kernel + finish_weight_grad_tc_kernel"}
    assert plan(P23, "previous") == bench
    assert plan(P23, batch1(P23))["backward dL/dx"] == "grad_input_tc_kernel"   # 2 B < SMs
    torch_path = {"forward conv": TORCH_FWD, "forward": "conv_sums_kernel",
                  "forward finish": "gn_mean_finalize_kernel", "backward coefficients": "gn_mean_backward_coef_kernel",
                  "backward dL/dy": "grad_y_from_conv_kernel", "backward parameters": "gn_param_grad_kernel",
                  "backward dL/dx": TORCH_BWD, "backward dL/dW": TORCH_BWD}
    tiled_path = {"forward": "conv_stats_general_kernel", "forward finish": "gn_mean_finalize_kernel",
                  "backward coefficients": "gn_mean_backward_coef_kernel",
                  "backward dL/dy": "conv_grad_y_general_kernel", "backward parameters": "gn_param_grad_kernel",
                  "backward dL/dx": "grad_input_tiled_kernel",
                  "backward dL/dW": "grad_weight_tiled_kernel + finish_weight_grad_tiled_kernel"}
    assert plan(P23, "general") == tiled_path   # float32, 3 channels, kernel 5
    assert plan(P23, "general", torch.bfloat16) == torch_path
    Case = type(PROBLEMS[P23].benchmark)
    for c_in, k, dtype, path in ((7, 3, torch.float32, "tuned"), (8, 3, torch.float32, torch_path),
                                 (7, 3, torch.bfloat16, "tuned"), (8, 3, torch.bfloat16, torch_path),
                                 (16, 3, torch.float16, torch_path), (7, 5, torch.float32, tiled_path),
                                 (8, 5, torch.float32, torch_path), (3, 5, torch.float16, torch_path)):
        # the plan's rule in training: tuned (kernel 3 on every axis, C_in <= 7), tiled (float32, C_in <= 7), else
        # PyTorch's conv
        stages = plan(P23, Case("edge", (c_in, 16, k, 4), (2, c_in, 6, 7, 8)), dtype)
        assert (stages["forward"].startswith("conv_gn_stats") if path == "tuned" else stages == path), (c_in, k, dtype)
    forward_only = {"forward": "conv_gn_stats_half_kernel<VEC>", "forward finish": "gn_mean_finalize_kernel"}
    for c_in, dtype, path in ((16, torch.bfloat16, forward_only), (17, torch.bfloat16, torch_path),
                              (7, torch.float32, {**forward_only, "forward": "conv_gn_stats_kernel"}),
                              (8, torch.float32, torch_path)):
        # the forward alone (no gradient wanted): tuned up to 16 input channels in half, 7 in float32
        stages = plan(P23, Case("edge", (c_in, 16, 3, 4), (2, c_in, 6, 7, 8)), dtype, training=False)
        assert stages == {k: v for k, v in path.items() if k.startswith("forward")}, (c_in, dtype)
    assert plan(P23, "benchmark", torch.bfloat16)["forward"] == "conv_gn_stats_half_kernel<VEC>"
    wide = Case("wide rows", (3, 16, 3, 4), (2, 3, 6, 7, 40))   # tuned forward, W > 32: the tensor-core grads' bounds
    assert [plan(P23, wide)[s] for s in ("forward", "backward dL/dx", "backward dL/dW")] == [
        "conv_gn_stats_kernel", "grad_input_tiled_kernel", "grad_weight_tiled_kernel + finish_weight_grad_tiled_kernel"]
    assert [plan(P23, wide, torch.float16)[s] for s in ("backward dL/dx", "backward dL/dW")] == [TORCH_BWD, TORCH_BWD]


def test_problem27_conv_kept():
    assert plan(P27, "benchmark") == plan(P27, "general") == {
        "forward conv": "PyTorch's nn.Conv3d (at::_convolution)", "forward": "hardswish_gn_mean_kernel",
        "backward chain": "hardswish_gn_mean_backward_kernel + gn_param_grad_kernel",
        "backward conv": "PyTorch's convolution backward (at::convolution_backward)"}


def test_problem27_all_custom():
    bench = plan(P27AC, "benchmark")
    assert bench == {"forward": "conv_rows_tc_kernel", "forward finish": "gn_mean_finalize_kernel",
                     "backward coefficients": "gn_mean_backward_coef_kernel",
                     "backward dL/dy": "conv_rows_tc_kernel (GRAD)", "backward dL/dx": "grad_input_stream_kernel",
                     "backward dL/dW": "grad_weight_tc_kernel + finish_weight_grad_tc_kernel",
                     "backward channel gradients": "finish_channel_grads_kernel"}
    assert plan(P27AC, batch1(P27AC)) == {**bench, "backward dL/dx": "grad_input_tc_kernel"}   # 2 B < SMs
    # the streamed dL/dx at kernel 4: at most two products a step (float32 under allow_tf32, or half precision)
    Case = type(PROBLEMS[P27AC].benchmark)
    k3 = Case("kernel 3", (3, 16, 3, 4), (128, 3, 8, 8, 32))
    with cudnn_tf32(False):
        assert plan(P27AC, "benchmark")["backward dL/dx"] == "grad_input_tc_kernel"
        assert plan(P27AC, "benchmark", torch.float16)["backward dL/dx"] == "grad_input_stream_kernel"
        assert plan(P27AC, k3)["backward dL/dx"] == "grad_input_stream_kernel"
    assert plan(P27AC, "benchmark", torch.float16)["forward"] == "conv_rows_half_kernel<VEC>"
    torch_path = {"forward conv": TORCH_FWD, "forward": "hardswish_gn_mean_kernel",
                  "backward conv": "the forward's saved output (PyTorch's conv path)",
                  "backward chain": "hardswish_gn_mean_backward_kernel + gn_param_grad_kernel",
                  "backward dL/dx, dL/dW": TORCH_BWD}
    tiled = {"forward": "conv_hswish_sums_general_kernel", "forward finish": "gn_mean_finalize_kernel",
             "backward coefficients": "gn_mean_backward_coef_kernel", "backward dL/dy": "grad_y_general_kernel",
             "backward dL/dx": "grad_input_tiled_kernel<4>",
             "backward dL/dW": "grad_weight_tiled_kernel + finish_weight_grad_tiled_kernel",
             "backward channel gradients": "finish_channel_grads_kernel"}
    assert plan(P27AC, "general") == tiled   # float32, 3 channels, kernel 5
    assert plan(P27AC, "general", torch.bfloat16) == torch_path
    Case = type(PROBLEMS[P27AC].benchmark)
    wide_case = Case("rows wider than 32", (3, 16, 3, 4), (2, 3, 8, 8, 64))   # plain FP32 forward
    wide, six = plan(P27AC, wide_case), plan(P27AC, Case("C_in 6", (6, 16, 3, 4), (2, 6, 8, 8, 32)))
    assert (wide["forward"], six["forward"]) == ("conv_hswish_sums_kernel", "conv_rows_tc_kernel")
    for c_in, k, kernel in ((7, 5, "conv_hswish_sums_general_kernel"), (8, 5, None), (8, 3, None), (16, 3, None),
                            (8, 4, None), (4, 4, "conv_rows_tc_kernel"), (7, 3, "conv_rows_tc_kernel"),
                            (5, 4, "conv_hswish_sums_kernel")):
        # fused: a cubic kernel of 3 or 4 and C_in K^2 <= 64 (W <= 32 here), or C_in <= 7 (plain FP32); tiled:
        # float32, C_in <= 7; else PyTorch's conv
        stages = plan(P27AC, Case("edge", (c_in, 16, k, 4), (2, c_in, 6, 7, 8)))
        assert (stages["forward"] == kernel if kernel else stages == torch_path), (c_in, k)
    assert plan(P27AC, Case("wide, 8", (8, 16, 3, 4), (2, 8, 6, 7, 64))) == torch_path   # plain FP32 to 7 channels
    # the backward stage by stage: each tensor-core kernel where its bounds hold, else float32's tiled kernel, else
    # (half precision) PyTorch's conv path's backward, y recomputed by PyTorch's conv
    assert (wide["backward dL/dy"], wide["backward dL/dx"], wide["backward dL/dW"]) == (
        "grad_y_general_kernel", "grad_input_tiled_kernel<4>", "grad_weight_tiled_kernel + finish_weight_grad_tiled_kernel")
    assert (six["backward dL/dy"], six["backward dL/dx"], six["backward dL/dW"]) == (
        "conv_rows_tc_kernel (GRAD)", "grad_input_tiled_kernel<8>", "grad_weight_tc_kernel + finish_weight_grad_tc_kernel")
    wide_half = plan(P27AC, wide_case, torch.bfloat16)
    assert (wide_half["backward conv"], wide_half["backward dL/dx, dL/dW"]) == (
        "PyTorch's convolution (at::_convolution) recomputes y", TORCH_BWD)


def test_problem60():
    bench = plan(P60, "benchmark")
    assert bench == {"forward": "convt_swish_gn_kernel", "forward GroupNorm": "in convt_swish_gn_kernel (phase 2)",
                     "backward sweeps": "convt_backward_sweep_kernel (two sweeps) + chain_sums_kernel + "
                                        "gn_param_grad_kernel",
                     "backward dL/dbias": "bias_grad_convt_kernel", "backward dL/dx": "grad_input_convt_tuned_kernel",
                     "backward dL/dW": "grad_weight_convt_tc_kernel + finish_weight_grad_convt_kernel"}
    assert plan(P60, "previous") == plan(P60, batch1(P60)) == bench
    half = plan(P60, "benchmark", torch.bfloat16)
    assert (half["forward"], half["forward GroupNorm"]) == ("convt_swish_gn_kernel (RAW: Swish written, rounded)",
                                                            "group_norm_hardswish_kernel")
    Case = type(PROBLEMS[P60].benchmark)
    torch_path = {"forward conv": "PyTorch's convolution (at::_convolution, transposed)",
                  "forward GroupNorm": "gn_partials_kernel + gn_finalize_kernel + gn_apply_kernel",
                  "backward sweeps": "chain_backward_kernel (two sweeps) + chain_sums_kernel + gn_param_grad_kernel",
                  "backward dL/dbias": "bias_grad_convt_kernel", "backward dL/dx": TORCH_BWD,
                  "backward dL/dW": TORCH_BWD}
    tuned = "convt_swish_gn_kernel"
    for c_in, c_out, shape, is_tuned in ((4, 64, (8, 16, 16), True), (5, 16, (8, 16, 16), False),   # C_in <= 4
                                         (3, 16, (8, 8, 8), True), (3, 16, (8, 8, 7), False),   # 512 positions
                                         (16, 32, (4, 8, 8), False), (8, 64, (4, 8, 8), False)):
        args = (c_in, c_out, 3, 2, 1, 1, 1e-5)
        stages = plan(P60, Case("edge", args, (1, c_in) + shape))
        assert (stages["forward"] == tuned if is_tuned else stages == torch_path), (c_in, c_out, shape)
    assert plan(P60, Case("stride 1", (3, 16, 3, 1, 1, 1, 1e-5), (1, 3, 16, 32, 32))) == torch_path
    assert plan(P60, "general") == torch_path
    split_gn = torch_path["forward GroupNorm"]
    # gn_fused_kernel: at least 128 (sample, group)s of at most 32768 elements (16 x 1575 at kernel 3, 16 x 2601 at 5)
    for k, batch, fused in ((3, 16, True), (3, 15, False), (5, 32, False)):
        stages = plan(P60, Case("groups", (64, 128, k, 2, 1, 8, 1e-5), (batch, 64, 4, 8, 8)))
        assert stages["forward GroupNorm"] == ("gn_fused_kernel" if fused else split_gn), (k, batch)
    assert plan(P60, "general", torch.bfloat16)["backward dL/dW"] == (   # allow_tf32 (PyTorch's default)
        "split_tf32_kernel + PyTorch's convolution backward (at::convolution_backward) twice")
    assert plan(P60, "general", torch.bfloat16)["forward Swish"] == "swish_half_kernel"


def test_problem92():
    bench = plan(P92, "benchmark")
    assert bench == {"forward statistics": "gram_kernel + gram_stats_kernel", "forward output": "conv_kernel<LOGSUMEXP>",
                     "backward sums": "conv_kernel<BSUMS, LOADED> + grad_coef_kernel + gn_param_grad_kernel",
                     "backward dL/dy": "conv_kernel<GRAD, LOADED> + bias_grad_kernel",
                     "backward dL/dW": "grad_weight_kernel<128> (output rows wider than 32 and 128 columns' shared "
                                       "memory on this GPU) or <32> + grad_weight_reduce_kernel",
                     "backward dL/dx": "grad_input_kernel"}
    torch_path = {"forward conv": TORCH_FWD, "forward statistics": "plane_sums_kernel + gn_stats_general_kernel",
                  "forward output": "lse_kernel",
                  "backward sums": "backward_plane_kernel<false> + backward_coef_general_kernel",
                  "backward dL/dy": "backward_plane_kernel<true> + channel_grads_general_kernel",
                  "backward dL/dx, dL/dW": TORCH_BWD}
    tiled_path = dict(torch_path)
    del tiled_path["forward conv"]
    tiled_path["forward statistics"] = "gn_sums_tiled_kernel + gn_stats_general_kernel"
    assert plan(P92, "previous") == tiled_path   # 30-column output rows, 3 channels, float32: the tiled conv
    Case = type(PROBLEMS[P92].benchmark)
    for batch, c_out, tiled in ((63, 16, False), (64, 16, True), (15, 64, False), (16, 64, True)):
        # the tiled rule: float32, C_in <= 4, batch x C_out >= 1024 (fewer planes: too few blocks, PyTorch's conv wins)
        stages = plan(P92, Case("planes", (3, c_out, 3, 8), (batch, 3, 32, 32)))
        assert stages == (tiled_path if tiled else torch_path), (batch, c_out)
    assert plan(P92, "previous", torch.bfloat16)["forward conv"] == TORCH_FWD
    assert plan(P92, "general") == torch_path   # kernel 5, 8 channels
    assert plan(P92, batch1(P92)) == torch_path   # batch 1: PyTorch's conv path
    for c_in, c_out, w, batch, tuned in ((16, 64, 40, 8, True), (17, 64, 40, 8, False), (8, 80, 40, 8, False),
                                         (8, 64, 34, 8, False), (8, 64, 35, 8, True), (8, 64, 40, 7, False)):
        # the tuned rule: kernel 3, C_in <= 16, C_out <= 64, output rows wider than 32, batch >= 8
        stages = plan(P92, Case("edge", (c_in, c_out, 3, 16), (batch, c_in, 9, w)))
        assert (stages["forward output"] == "conv_kernel<LOGSUMEXP>" if tuned else stages == torch_path), \
            (c_in, c_out, w, batch)
    assert plan(P92, "benchmark", torch.bfloat16)["forward statistics"] == ("gram_kernel + gram_stats_kernel + "
                                                                           "half_norm_kernel (the GroupNorm statistics "
                                                                           "rounded as PyTorch's)")
    assert plan(P92, "previous", torch.bfloat16)["backward sums"].startswith("lse_kernel (the output recomputed")
    assert plan(P92, "benchmark", torch.bfloat16)["backward sums"] == (
        "conv_kernel<LOGSUMEXP, LOADED> (the output, unrounded) + conv_kernel<BSUMS, LOADED> + grad_coef_kernel + "
        "gn_param_grad_kernel")


@pytest.mark.parametrize("name", [P23, P27, P27AC, P60, P92])
def test_every_stage_names_a_kernel_of_the_file(name):
    """Each kernel a plan names is defined in the file (a renamed kernel cannot leave a stale plan)."""
    import re
    text = load(name)["cuda_source"]
    for case in ("benchmark", "general"):
        for stage, kernels in plan(name, case).items():
            for kernel in re.findall(r"\b(\w+_kernel)\b", kernels):
                assert re.search(rf"\b{kernel}\b", text), (name, stage, kernel)


# Kernels a plan never names: per-call helpers of every path (convert_kernel: the half paths' float copies and the
# gradients' roundings).
HELPERS = {"convert_kernel"}


@pytest.mark.parametrize("name", [P23, P27, P27AC, P60, P92])
def test_every_kernel_of_the_file_is_in_some_plan(name):
    """Each __global__ kernel of the file is named by the plan of some input (the benchmark, KernelBench's previous
    size, the edge cases, the configuration grid, the channel sweep; float32 and bfloat16): a kernel no plan reaches
    is dead code, or a stage the plan does not tell."""
    import re
    from common.problems import CONFIGURATIONS, channel_sweep
    problem = PROBLEMS[name]
    kernels = set(re.findall(r"__global__\s+void\s+(?:__launch_bounds__\([^)]*\)\s+)?(\w+)", load(name)["cuda_source"]))
    cases = [c for c in (problem.benchmark, problem.previous, problem.general) if c is not None]
    cases += list(problem.cases) + list(CONFIGURATIONS.get(name, ())) + list(channel_sweep(name))
    named = set()
    for case in cases:
        for dtype in (torch.float32, torch.bfloat16):
            for kernels_of_stage in plan(name, case, dtype).values():
                named |= set(re.findall(r"\b(\w+_kernel)\b", kernels_of_stage))
    assert kernels - HELPERS <= named, sorted(kernels - HELPERS - named)
