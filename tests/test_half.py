"""GPU: half precision (float16, bfloat16) and torch.autocast, as docs/DESIGN.md states: each variant cast with
its input to the dtype agrees with the reference run in that dtype (KernelBench's half tolerance) and is no
farther from float64 than the reference is, at the benchmark size and the edge cases; gradients in half; the
dtype the reference returns under autocast; a clear error for an input whose dtype is not the module's."""
import pytest
import torch

from common.accuracy import (HALF_DTYPES, HALF_REL_L2_MARGIN, HALF_TOL, check_autocast, check_half,
                             check_half_gradients, compare, float64_copy, models_in)
from common.inputs import make_input
from common.loading import variant_names
from common.problems import PROBLEMS, full_names
from tests.conftest import assert_all_pass, load, models, needs_gpu, small

pytestmark = needs_gpu
NAMES = full_names()   # the full modules (the concise file is forward-only fp32)
DEVICE = "cuda"
DTYPES = sorted(HALF_DTYPES)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_half_benchmark_configuration(name, dtype):
    problem = PROBLEMS[name]
    ref, new = models(name, problem.init_args)
    assert_all_pass(check_half(new, ref, problem.input_shape, DEVICE, HALF_DTYPES[dtype], n_inputs=2))


# The one known element (docs/convtranspose3d_swish_groupnorm_hardswish.md traces it): in bf16 at this case one of
# 148,512 outputs, where cuDNN's bf16 conv output rounds the other way from the exact one and GroupNorm makes that
# one unit three. Kept as a strict xfail: the day it passes, the test says so.
KNOWN_HALF = {("bf16", "convtranspose3d_swish_groupnorm_hardswish", "one_group")}


@pytest.mark.parametrize("name,case", [(n, c) for n in NAMES for c in PROBLEMS[n].cases],
                         ids=lambda v: v if isinstance(v, str) else v.label)
@pytest.mark.parametrize("dtype", DTYPES)
def test_half_edge_cases(name, case, dtype, request):
    if (dtype, name, case.label) in KNOWN_HALF:
        request.applymarker(pytest.mark.xfail(strict=True, reason="one element: cuDNN's bf16 conv rounding, traced"))
    ref, new = models(name, case.init_args)
    assert_all_pass(check_half(new, ref, case.input_shape, DEVICE, HALF_DTYPES[dtype]))


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_half_channels_last_input(name, dtype):
    case = small(name)
    ref, new = models(name, case.init_args)
    layout = lambda x: x.to(memory_format=torch.channels_last_3d if x.dim() == 5 else torch.channels_last)
    assert_all_pass(check_half(new, ref, case.input_shape, DEVICE, HALF_DTYPES[dtype], transform=layout))


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_half_gradients(name, dtype):
    """Gradients of the input and every parameter in half precision, at the benchmark configuration (a batch
    of 8: the reference's own half gradients are the bar), against float64 autograd."""
    problem = PROBLEMS[name]
    ref, new = models(name, problem.init_args)
    shape = (8,) + problem.input_shape[1:]
    reports = check_half_gradients(new, ref, shape, DEVICE, HALF_DTYPES[dtype])
    assert all(r.passed for r in reports.values()), "\n".join(f"{k}: {r}" for k, r in reports.items())


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_autocast_returns_the_reference_dtype_and_agrees(name, dtype):
    problem = PROBLEMS[name]
    ref, new = models(name, problem.init_args)
    assert_all_pass(check_autocast(new, ref, (4,) + problem.input_shape[1:], DEVICE, HALF_DTYPES[dtype]))


@pytest.mark.parametrize("dtype", DTYPES)
def test_autocast_fused_groupnorm(dtype):
    """Problem 60 on PyTorch's conv path under autocast, GroupNorm in float32 over the half Swish values normalised in
    place by gn_fused_kernel (128 (sample, group)s; the benchmark's autocast test takes the tuned path)."""
    from common.problems import CONFIGURATIONS
    name = "convtranspose3d_swish_groupnorm_hardswish"
    case = next(c for c in CONFIGURATIONS[name] if c.label == "fused_groupnorm")
    ref, new = models(name, case.init_args)
    assert new.plan(torch.empty(case.input_shape, device="meta"))["forward GroupNorm"].startswith("gn_fused_kernel")
    assert_all_pass(check_autocast(new, ref, case.input_shape, DEVICE, HALF_DTYPES[dtype]))


@pytest.mark.parametrize("name", NAMES)
def test_autocast_backward_reaches_the_float32_parameters(name):
    """Under autocast the gradients flow back through autocast's casts: the input and every float32 parameter
    get a float32 gradient within the half tolerance of float64 autograd (the model without autocast), or no
    farther from it than the reference's own gradient under the same autocast."""
    case = small(name)
    ref, new = models(name, case.init_args)
    ref64 = float64_copy(ref)
    x = make_input(case.input_shape, 12, DEVICE)
    x64 = x.double().requires_grad_(True)
    out64 = ref64(x64)
    grad_out = torch.randn(out64.shape, generator=torch.Generator().manual_seed(12), dtype=torch.float64).to(DEVICE)
    out64.backward(grad_out)
    names = ["input"] + [n for n, _ in new.named_parameters()]
    truth = [x64.grad] + [p.grad for p in ref64.parameters()]
    grads = []
    for model in (new, ref):
        xi = x.clone().requires_grad_(True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            out = model(xi)
        out.backward(grad_out.to(out.dtype))
        grads.append([xi.grad] + [p.grad for p in model.parameters()])
    for n, g, g_ref, g64 in zip(names, grads[0], grads[1], truth):
        assert g is not None and g.dtype == torch.float32, n
        ours = compare(g, g64, float("inf"), atol=float("inf"), rtol=0).rel_l2
        theirs = compare(g_ref, g64, float("inf"), atol=float("inf"), rtol=0).rel_l2
        assert ours <= max(HALF_TOL, theirs * HALF_REL_L2_MARGIN), \
            f"{n}: rel_l2 {ours:.3e} against float64, PyTorch's {theirs:.3e}"


@pytest.mark.parametrize("name", NAMES)
def test_autocast_under_compile_is_bit_identical(name):
    """torch.compile(fullgraph=True) under autocast: no graph break, the same bits as eager ModelNew."""
    torch._dynamo.reset()
    case = small(name)
    _, new = models(name, case.init_args)
    compiled = torch.compile(new, fullgraph=True)
    x = make_input(case.input_shape, 13, DEVICE)
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
        eager, traced = new(x), compiled(x)
    assert eager.dtype == traced.dtype and torch.equal(eager, traced)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_half_output_dtype_and_determinism(name, dtype):
    problem = PROBLEMS[name]
    _, new = models(name, problem.init_args)
    (new,) = models_in(HALF_DTYPES[dtype], new)
    x = make_input(problem.input_shape, 14, DEVICE).to(HALF_DTYPES[dtype])
    with torch.no_grad():
        first = new(x)
        assert first.dtype == HALF_DTYPES[dtype]
        assert torch.equal(new(x), first)


@pytest.mark.parametrize("name", NAMES)
def test_input_dtype_other_than_the_modules_is_refused(name):
    case = small(name)
    _, new = models(name, case.init_args)
    x = make_input(case.input_shape, 15, DEVICE)
    with pytest.raises(ValueError, match="dtype|bfloat16|float32"):
        new(x.to(torch.bfloat16))   # float32 module, bfloat16 input, no autocast
    (half,) = models_in(torch.float16, new)
    with pytest.raises(ValueError, match="dtype|float16|float32"):
        half(x)


def round_once_at_the_end_60(model, x):
    """Problem 60 computed in float64 from the half-valued input and parameters, rounded to the dtype once."""
    return float64_copy(model)(x.double()).to(x.dtype)


def test_rounding_once_at_the_end_fails_problem_60_in_bf16():
    """The premise of rounding where PyTorch rounds (docs/convtranspose3d_swish_groupnorm_hardswish.md): at the benchmark size in bf16, KernelBench's
    check (allclose at 1e-2 against the reference in bf16, default GroupNorm parameters) fails a model that rounds
    only its output."""
    problem = PROBLEMS["convtranspose3d_swish_groupnorm_hardswish"]
    torch.manual_seed(0)
    ref = problem.model(*problem.init_args).to(DEVICE, torch.bfloat16)
    x = make_input(problem.input_shape, 16, DEVICE).to(torch.bfloat16)
    with torch.no_grad():
        expected = ref(x)
        once = round_once_at_the_end_60(ref, x)
    report = compare(once, expected.double(), rel_l2_limit=float("inf"), atol=HALF_TOL, rtol=HALF_TOL,
                     dtype=torch.bfloat16)
    assert not report.passed, str(report)


def test_half_checker_fails_an_output_in_the_wrong_dtype():
    expected = torch.rand(100, device=DEVICE, dtype=torch.bfloat16)
    truth = expected.double()
    from common.accuracy import compare_half
    assert not compare_half(expected.float(), expected, truth).passed
    assert compare_half(expected.clone(), expected, truth).passed
    assert not compare_half(expected + 0.05, expected, truth).passed


@pytest.mark.parametrize("dtype", DTYPES)
def test_problem_60_group_statistics_are_pytorchs(dtype):
    """Problem 60's GroupNorm statistics in half precision, as its forward saves them, equal PyTorch's: each
    (sample, group)'s mean and 1/std in the dtype, against native_group_norm's on the reference's Swish output in
    the dtype, at the benchmark size (1024 groups). A float sum in another order than PyTorch's rounds about one
    group in 250 to the other bf16 neighbour, shifting that group's outputs (KernelBench's bf16 check failed so)."""
    name = "convtranspose3d_swish_groupnorm_hardswish"
    problem = PROBLEMS[name]
    ref, new = models_in(HALF_DTYPES[dtype], *models(name, problem.init_args))
    ct, gn = ref.conv_transpose, ref.group_norm
    mismatched = 0
    for seed in (17, 18):
        x = make_input(problem.input_shape, seed, DEVICE).to(HALF_DTYPES[dtype])
        with torch.no_grad():
            nc = new.conv_transpose
            _, stats, _ = load(name)["_ops"].forward(x, nc.weight, nc.bias, new.group_norm.weight,
                                                     new.group_norm.bias, nc.stride, nc.padding, gn.num_groups, gn.eps)
            y = ct(x)
            swish = torch.sigmoid(y) * y
            _, mean, rstd = torch.ops.aten.native_group_norm(swish, gn.weight, gn.bias, swish.shape[0], swish.shape[1],
                                                             swish[0, 0].numel(), gn.num_groups, gn.eps)
        ours = stats.view(-1, 2).to(mean.dtype)   # saved unrounded (float values): rounded as PyTorch stores them
        mismatched += int(((ours[:, 0] != mean.view(-1)) | (ours[:, 1] != rstd.view(-1))).sum())
    assert mismatched == 0, f"{mismatched} of {2 * stats.shape[0] * stats.shape[1]} groups' statistics differ"
