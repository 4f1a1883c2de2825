"""Each file's launch plan (CPU, meta tensors): ModelNew.plan(x) names the kernel of every stage, from the C++
decisions the launchers make, and these tests pin it at the benchmark point, KernelBench's previous size, batch 1,
a configuration off the tuned path, in half precision, and for a build without sm_90a. A moved threshold fails
here by name. sms=132: an H100 or H200 (problem 23's dL/dx depends on it)."""
import pytest
import torch

from common.problems import PROBLEMS
from tests.conftest import load, needs_nvcc

pytestmark = needs_nvcc

P23 = "conv3d_groupnorm_mean"
P27 = "conv3d_hardswish_groupnorm_mean"
P27AC = "conv3d_hardswish_groupnorm_mean_all_custom"
P60 = "convtranspose3d_swish_groupnorm_hardswish"
P92 = "conv2d_groupnorm_tanh_hardswish_residualadd_logsumexp"


def plan(name, case, dtype=torch.float32):
    problem = PROBLEMS[name]
    point = getattr(problem, case) if isinstance(case, str) else case
    model = load(name)["ModelNew"](*point.init_args).to("meta").to(dtype)
    x = torch.empty(point.input_shape, device="meta", dtype=dtype)
    extra = {"sms": 132} if name == P23 else {}
    stages = {stage: line.split(";")[0] for stage, line in model.plan(x, **extra).items()}
    if "tensor cores" in stages:   # the build's choice: wgmma where the extension was built for sm_90a
        assert stages.pop("tensor cores").startswith("wgmma" if load(name)["_hopper"] else "mma.sync")
    return stages


def batch1(name):
    problem = PROBLEMS[name]
    return type(problem.benchmark)("batch 1", problem.init_args, (1,) + problem.input_shape[1:])


def test_problem23():
    bench = plan(P23, "benchmark")
    assert bench == {"forward": "conv_gn_stats_kernel", "forward finish": "gn_mean_finalize_kernel",
                     "backward coefficients": "gn_mean_backward_coef_kernel",
                     "backward dL/dy": "conv_gn_stats_kernel (GRAD mode)", "backward parameters": "gn_param_grad_kernel",
                     "backward dL/dx": "grad_input_stream_kernel",
                     "backward dL/dW": "grad_weight_rows_kernel + finish_weight_grad_tc_kernel"}
    assert plan(P23, "previous") == bench
    assert plan(P23, batch1(P23))["backward dL/dx"] == "grad_input_tc_kernel"   # 2 B < SMs
    general = plan(P23, "general")
    assert (general["forward"], general["backward dL/dy"], general["backward dL/dx"], general["backward dL/dW"]) == (
        "conv_stats_general_kernel", "conv_grad_y_general_kernel", "grad_input_tiled_kernel",
        "grad_weight_tiled_kernel + finish_weight_grad_tiled_kernel")
    Case = type(PROBLEMS[P23].benchmark)
    engine = "conv_igemm_kernel + general_stats_kernel"
    for c_in, k, kernel in ((7, 5, "conv_stats_general_kernel"), (8, 5, engine), (7, 3, "conv_gn_stats_kernel"),
                            (8, 3, engine), (16, 3, engine), (17, 3, engine)):
        # the general path's rule (C_in >= 8), the tuned one's (kernel 3, C_in <= 7 in float32, <= 16 in half)
        assert plan(P23, Case("edge", (c_in, 16, k, 4), (2, c_in, 6, 7, 8)))["forward"] == kernel, (c_in, k)
    for c_in, kernel in ((16, "conv_gn_stats_half_kernel<VEC>"), (17, engine)):
        assert plan(P23, Case("edge", (c_in, 16, 3, 4), (2, c_in, 6, 7, 8)), torch.bfloat16)["forward"] == kernel
    assert plan(P23, "benchmark", torch.bfloat16)["forward"] == "conv_gn_stats_half_kernel<VEC>"
    eight, seven = (plan(P23, Case("edge", (c, 16, 5, 4), (2, c, 6, 7, 8))) for c in (8, 7))
    assert (eight["backward dL/dy"], eight["backward dL/dx"], eight["backward dL/dW"]) == (   # the engine from 8
        "conv_igemm_kernel + grad_y_from_conv_kernel", "conv_igemm_kernel (transposed)",
        "conv_igemm_wgrad_kernel + finish_weight_grad_tiled_kernel")
    assert (seven["backward dL/dy"], seven["backward dL/dx"], seven["backward dL/dW"]) == (
        "conv_grad_y_general_kernel", "grad_input_tiled_kernel", "grad_weight_tiled_kernel + finish_weight_grad_tiled_kernel")


def test_problem27_conv_kept():
    assert plan(P27, "benchmark") == plan(P27, "general") == {
        "forward conv": "PyTorch's nn.Conv3d (at::_convolution)", "forward": "hardswish_gn_mean_kernel",
        "backward chain": "hardswish_gn_mean_backward_kernel + gn_param_grad_kernel",
        "backward conv": "PyTorch's convolution backward (at::convolution_backward)"}


def test_problem27_all_custom():
    bench = plan(P27AC, "benchmark")
    assert bench == {"forward": "conv_rows_tc_kernel", "forward finish": "gn_mean_finalize_kernel",
                     "backward coefficients": "gn_mean_backward_coef_kernel",
                     "backward dL/dy": "conv_rows_tc_kernel (GRAD)", "backward dL/dx": "grad_input_tc_kernel",
                     "backward dL/dW": "grad_weight_tc_kernel + finish_weight_grad_tc_kernel",
                     "backward channel gradients": "finish_channel_grads_kernel"}
    assert plan(P27AC, batch1(P27AC)) == bench
    assert plan(P27AC, "benchmark", torch.float16)["forward"] == "conv_rows_half_kernel<VEC>"
    general = plan(P27AC, "general")
    assert (general["forward"], general["backward dL/dx"], general["backward dL/dW"]) == (
        "conv_hswish_sums_general_kernel + gn_mean_finalize_kernel", "grad_input_tiled_kernel<4>",
        "grad_weight_tiled_kernel + finish_weight_grad_tiled_kernel")
    Case = type(PROBLEMS[P27AC].benchmark)
    wide = plan(P27AC, Case("rows wider than 32", (3, 16, 3, 4), (2, 3, 8, 8, 64)))   # plain FP32 forward
    six = plan(P27AC, Case("C_in 6", (6, 16, 3, 4), (2, 6, 8, 8, 32)))   # tensor-core forward, not dL/dx's bounds
    assert (wide["forward"], six["forward"]) == ("conv_hswish_sums_kernel", "conv_rows_tc_kernel")
    engine = "conv_igemm_kernel + conv_hswish_sums_general_kernel (reading y)"
    for c_in, k, kernel in ((7, 5, "conv_hswish_sums_general_kernel + gn_mean_finalize_kernel"), (8, 5, engine),
                            (16, 3, engine), (8, 4, engine), (7, 3, "conv_rows_tc_kernel")):
        # the engine from 8 input channels wherever the tensor-core kernels do not serve (C_in K^2 > 64)
        assert plan(P27AC, Case("edge", (c_in, 16, k, 4), (2, c_in, 6, 7, 8)))["forward"] == kernel, (c_in, k)
    eight, seven = (plan(P27AC, Case("edge", (c, 16, 5, 4), (2, c, 6, 7, 8))) for c in (8, 7))
    assert (eight["backward dL/dy"], eight["backward dL/dx"], eight["backward dL/dW"]) == (
        "conv_igemm_kernel + grad_y_general_kernel (reading y)", "conv_igemm_kernel (transposed)",
        "conv_igemm_wgrad_kernel + finish_weight_grad_tiled_kernel")
    assert (seven["backward dL/dy"], seven["backward dL/dx"]) == ("grad_y_general_kernel", "grad_input_tiled_kernel<8>")
    # the backward stage by stage: each tensor-core kernel where its bounds hold, else the stage's general kernel
    assert (wide["backward dL/dy"], wide["backward dL/dx"], wide["backward dL/dW"]) == (
        "grad_y_general_kernel", "grad_input_tiled_kernel<4>", "grad_weight_tiled_kernel + finish_weight_grad_tiled_kernel")
    assert (six["backward dL/dy"], six["backward dL/dx"], six["backward dL/dW"]) == (
        "conv_rows_tc_kernel (GRAD)", "grad_input_tiled_kernel<8>", "grad_weight_tc_kernel + finish_weight_grad_tc_kernel")


def test_problem60():
    bench = plan(P60, "benchmark")
    assert bench == {"forward": "convt_swish_gn_kernel", "forward GroupNorm": "in convt_swish_gn_kernel (phase 2)",
                     "backward sweeps": "convt_backward_sweep_kernel (two sweeps) + chain_sums_kernel + "
                                        "gn_param_grad_kernel",
                     "backward dL/dbias": "bias_grad_convt_kernel", "backward dL/dx": "grad_input_convt_tuned_kernel",
                     "backward dL/dW": "grad_weight_convt_tuned_kernel + finish_weight_grad_convt_kernel"}
    assert plan(P60, "previous") == plan(P60, batch1(P60)) == bench
    half = plan(P60, "benchmark", torch.bfloat16)
    assert (half["forward"], half["forward GroupNorm"]) == ("convt_swish_gn_kernel (RAW: Swish written, rounded)",
                                                            "group_norm_hardswish_kernel")
    Case = type(PROBLEMS[P60].benchmark)   # kernel 3, stride 2, padding 1, but more channels than one group
    assert plan(P60, Case("32 -> 64", (32, 64, 3, 2, 1, 8, 1e-5), (2, 32, 4, 8, 8)))["forward"] == (
        "conv_igemm_kernel + SwishStore")
    engine, tuned = "conv_igemm_kernel + SwishStore", "convt_swish_gn_kernel"
    for c_in, c_out, shape, kernel in ((4, 64, (8, 16, 16), tuned), (5, 16, (8, 16, 16), engine),   # C_in <= 4
                                       (3, 16, (8, 8, 8), tuned), (3, 16, (8, 8, 7), engine),   # 512 positions
                                       (16, 32, (4, 8, 8), engine), (8, 64, (4, 8, 8), engine)):
        args = (c_in, c_out, 3, 2, 1, 1, 1e-5)
        assert plan(P60, Case("edge", args, (1, c_in) + shape))["forward"] == kernel, (c_in, c_out, shape)
    assert plan(P60, Case("stride 1", (3, 16, 3, 1, 1, 1, 1e-5), (1, 3, 16, 32, 32)))["forward"] == engine
    general = plan(P60, "general")
    assert (general["forward"], general["forward GroupNorm"], general["backward dL/dW"]) == (
        "conv_igemm_kernel + SwishStore", "gn_partials_kernel + gn_finalize_kernel + gn_apply_kernel",
        "conv_igemm_wgrad_kernel + finish_weight_grad_tiled_kernel")
    assert general["backward dL/dx"] == "conv_igemm_kernel"


def test_problem92():
    bench = plan(P92, "benchmark")
    assert bench == {"forward statistics": "gram_kernel + gram_stats_kernel", "forward output": "conv_kernel<LOGSUMEXP>",
                     "backward sums": "conv_kernel<BSUMS> + grad_coef_kernel + gn_param_grad_kernel",
                     "backward dL/dy": "conv_kernel<GRAD> + bias_grad_kernel",
                     "backward dL/dW": "grad_weight_kernel<128> (output rows wider than 32 and 128 columns' shared "
                                       "memory on this GPU) or <32> + grad_weight_reduce_kernel",
                     "backward dL/dx": "grad_input_kernel"}
    assert plan(P92, batch1(P92)) == bench
    previous = plan(P92, "previous")   # 30-column output rows: the tiled path
    assert (previous["forward statistics"], previous["forward output"], previous["backward dL/dx"]) == (
        "gn_sums_tiled_kernel + gn_stats_general_kernel", "lse_tiled_kernel (reading the conv output the statistics "
        "kernel kept)", "grad_input_tiled_kernel<8>")
    general = plan(P92, "general")   # 8 input channels: the tiled kernel computes and keeps the conv
    assert "forward conv" not in general and general["forward statistics"] == ("gn_sums_tiled_kernel + "
                                                                              "gn_stats_general_kernel")
    Case = type(PROBLEMS[P92].benchmark)
    sixteen = plan(P92, Case("C_in 16", (16, 32, 5, 4), (2, 16, 9, 10)))   # from 16: the conv engine keeps it
    assert (sixteen["forward conv"], sixteen["forward statistics"]) == (
        "conv_igemm_kernel", "gn_sums_tiled_kernel<KEPT> + gn_stats_general_kernel")
    assert "forward conv" not in plan(P92, Case("C_in 15", (15, 32, 5, 4), (2, 15, 9, 10)))
    # the backward's convs too: the engine from 16 input channels, the tiled kernels below
    assert (sixteen["backward dL/dW"], sixteen["backward dL/dx"]) == (
        "conv_igemm_wgrad_kernel + finish_weight_grad_tiled_kernel", "conv_igemm_kernel (transposed)")
    assert sixteen["backward sums"].startswith("conv_igemm_kernel (the conv once, kept for both sweeps)")
    assert plan(P92, Case("C_in 15", (15, 32, 5, 4), (2, 15, 9, 10)))["backward dL/dx"].startswith(
        "grad_input_tiled_kernel")
    assert plan(P92, "benchmark", torch.bfloat16)["forward statistics"] == ("gram_kernel + gram_stats_kernel + "
                                                                           "half_norm_kernel (the GroupNorm statistics "
                                                                           "rounded as PyTorch's)")


@pytest.mark.parametrize("name", [P23, P27, P27AC, P60, P92])
def test_every_stage_names_a_kernel_of_the_file(name):
    """Each kernel a plan names is defined in the file (a renamed kernel cannot leave a stale plan)."""
    import re
    text = load(name)["cuda_source"]
    for case in ("benchmark", "general"):
        for stage, kernels in plan(name, case).items():
            for kernel in re.findall(r"\b(\w+_kernel)\b", kernels):
                assert re.search(rf"\b{kernel}\b", text), (name, stage, kernel)
