"""CPU: each reference matches its spec, and the accuracy checker fails what it must fail."""
import pytest
import torch
import torch.nn.functional as F

from common.accuracy import _compare_gradient, check_gradients, check_gradients_tf32, compare
from common.inputs import float64_copy, make_input, make_models, perturb_groupnorm
from common.problems import FP32_FLOPS, HALF_FLOPS, PROBLEMS

NAMES = sorted(PROBLEMS)


def small_case(problem):
    return next(c for c in problem.cases if c.label == "batch3_odd")


def reference_pair(problem, case, seed=0):
    """fp32 reference with perturbed GroupNorm, and its output and float64 truth on a fresh input."""
    torch.manual_seed(seed)
    ref = perturb_groupnorm(problem.model(*case.init_args), seed + 1)
    x = make_input(case.input_shape, seed + 2)
    with torch.no_grad():
        return ref, x, ref(x), float64_copy(ref)(x.double())


@pytest.mark.parametrize("name", NAMES)
def test_reference_output_shape(name):
    problem = PROBLEMS[name]
    for case in (problem.benchmark,) + problem.cases:
        shape = (0,) + tuple(case.input_shape[1:]) if case.label == "benchmark" else case.input_shape
        torch.manual_seed(0)
        with torch.no_grad():
            out = problem.model(*case.init_args)(torch.rand(shape))
        assert tuple(out.shape) == problem.out_shape(case.init_args, shape), case.label


def test_problem23_mean_needs_only_channel_sums():
    """out[b] = mean_c(gamma_c (m_c - mu_g) / sqrt(var_g + eps) + beta_c), from per-channel sums."""
    problem = PROBLEMS["conv3d_groupnorm_mean"]
    torch.manual_seed(0)
    ref = perturb_groupnorm(problem.model(3, 12, 3, 4), 1).double()
    x = make_input((2, 3, 7, 8, 9), 2).double()
    with torch.no_grad():
        y = ref.conv(x).flatten(2)                      # (B, C, N)
        expected = ref(x)
    n, groups = y.shape[2], ref.group_norm.num_groups
    s, q = y.sum(2), (y * y).sum(2)
    mu = s.view(2, groups, -1).sum(2) / (n * 3)
    var = q.view(2, groups, -1).sum(2) / (n * 3) - mu * mu
    inv_std = (var + ref.group_norm.eps).rsqrt()
    per_channel = (ref.group_norm.weight * (s / n - mu.repeat_interleave(3, 1)) * inv_std.repeat_interleave(3, 1)
                   + ref.group_norm.bias)
    torch.testing.assert_close(per_channel.mean(1), expected, rtol=1e-12, atol=1e-12)
    assert expected.abs().min() > 1e-3   # perturbed parameters: not the degenerate all-zero output


@pytest.mark.parametrize("name", NAMES)
def test_floor_takes_each_dtypes_rate(name):
    """run_all.py's floor: bytes at the dtype's size; FLOPs at the FP32 rate in float32, at the 16-bit tensor
    cores' in half precision (a half-precision file can beat a floor taken at the FP32 rate)."""
    problem = PROBLEMS[name]
    bandwidth = 4e12
    flops = problem.flops(problem.init_args, problem.input_shape)
    full, mem, flop = problem.floor(bandwidth)
    half, half_mem, half_flop = problem.floor(bandwidth, element_size=2)
    assert (flop, half_flop) == (flops / FP32_FLOPS, flops / HALF_FLOPS)
    assert half_mem == mem / 2 and half == max(half_mem, half_flop) and full == max(mem, flop)
    if problem.has_backward:
        assert problem.backward_floor(bandwidth, element_size=2) < problem.backward_floor(bandwidth)


def test_problem23_default_parameters_are_degenerate():
    problem = PROBLEMS["conv3d_groupnorm_mean"]
    torch.manual_seed(0)
    with torch.no_grad():
        out = problem.model(3, 24, 3, 8).double()(make_input((2, 3, 6, 6, 6), 0).double())
    assert out.abs().max() < 1e-12


@pytest.mark.parametrize("name", NAMES)
def test_checker_passes_fp32_reference(name):
    problem = PROBLEMS[name]
    _, _, out, truth = reference_pair(problem, small_case(problem))
    report = compare(out, truth)
    assert report.passed, str(report)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("control", ["zeros", "noise_1e-3", "one_unwritten", "wrong_shape", "float64"])
def test_checker_fails_negative_controls(name, control):
    problem = PROBLEMS[name]
    _, _, out, truth = reference_pair(problem, small_case(problem))
    if control == "zeros":
        bad = torch.zeros_like(out)
    elif control == "noise_1e-3":
        bad = out + 1e-3 * torch.randn(out.shape, generator=torch.Generator().manual_seed(0))
    elif control == "one_unwritten":   # what a poisoned, never-written element looks like
        bad = out.clone()
        bad.view(-1)[out.numel() // 2] = float("nan")
    elif control == "wrong_shape":
        bad = out.reshape(-1)[:-1]
    else:
        bad = truth.clone()
    report = compare(bad, truth)
    assert not report.passed, str(report)
    if control == "one_unwritten":
        assert report.nonfinite_mismatches == 1 and report.mismatches == 1


def round_to_tf32(t):
    """Round float32 values to TF32 (10 mantissa bits, nearest, ties away), as tensor cores read them."""
    bits = t.contiguous().view(torch.int32)
    return ((bits + 0x1000) & ~0x1FFF).view(torch.float32)


def test_checker_fails_tf32_reference_problem3():
    """Problem 3 with its operands rounded to TF32 (CPU emulation of cuDNN's default) must fail."""
    problem = PROBLEMS["convtranspose3d_swish_groupnorm_hardswish"]
    ref, x, _, truth = reference_pair(problem, small_case(problem))
    conv = ref.conv_transpose
    with torch.no_grad():
        y = F.conv_transpose3d(round_to_tf32(x), round_to_tf32(conv.weight), conv.bias, conv.stride, conv.padding)
        y = F.hardswish(ref.group_norm(torch.sigmoid(y) * y))
    report = compare(y, truth)
    assert not report.passed and report.rel_l2 > 1e-5, str(report)


def test_checker_report_names_the_worst_elements():
    truth = torch.arange(10, dtype=torch.float64)
    out = truth.float().clone()
    out[7] += 0.5
    report = compare(out, truth)
    assert not report.passed and report.mismatches == 1
    assert report.worst[0][0] == (7,) and "at (7,)" in str(report)


def test_models_built_like_a_harness_share_parameters():
    problem = PROBLEMS["conv3d_groupnorm_mean"]
    ref, twin = make_models(problem.model, problem.model, problem.init_args, "cpu", seed=3)
    for (k, a), (_, b) in zip(ref.state_dict().items(), twin.state_dict().items()):
        assert torch.equal(a, b), k
    assert not torch.equal(ref.group_norm.weight, torch.ones_like(ref.group_norm.weight))


def test_gradient_rule_falls_back_to_pytorch_only_where_pytorch_fails():
    """A gradient passes on relative L2 <= 1e-4; the comparison with PyTorch's fp32 gradient counts only where
    that gradient fails the rule too (a gradient that is zero in exact arithmetic), never as a looser bound."""
    truth = torch.randn(1000, dtype=torch.float64)
    close, off = (truth * (1 + 1e-6)).float(), (truth * (1 + 1e-3)).float()
    assert _compare_gradient(close, close, truth).passed
    assert not _compare_gradient(off, close, truth).passed             # PyTorch meets the rule: so must we
    assert _compare_gradient(off, (truth * 1.01).float(), truth).passed       # both fail, ours is closer
    assert not _compare_gradient((truth * 1.02).float(), (truth * 1.01).float(), truth).passed   # farther
    noise = torch.randn(1000, dtype=torch.float64) * 1e-17                     # a zero gradient, in fp64
    assert _compare_gradient(torch.zeros(1000), (noise * 1e8).float(), noise).passed
    assert not _compare_gradient(torch.full((1000,), 1e-3), (noise * 1e8).float(), noise).passed
    assert not _compare_gradient(None, close, truth).passed


def test_gradient_checks_can_run_one_after_another_on_one_model():
    """run_all.py checks one model's gradients with the flag off, then on: each check starts from no gradients (a
    model whose gradients were added to the first check's would be off by 100%). The reference against itself."""
    problem = PROBLEMS["conv3d_groupnorm_mean"]
    case = small_case(problem)
    ref, twin = make_models(problem.model, problem.model, case.init_args, "cpu")
    for check in (check_gradients, check_gradients_tf32, check_gradients):
        reports = check(twin, ref, case.input_shape, "cpu")
        assert all(r.passed for r in reports.values()), check.__name__


def test_tf32_gradient_rule_is_no_farther_than_pytorch():
    """With the flag on a gradient passes within 1e-4 of float64, or no farther from it than PyTorch's own under
    the flag (x1.05): a twin whose conv weight gradient is 1e-3 off fails where PyTorch's (on the CPU: exact) is
    not that far."""
    problem = PROBLEMS["conv3d_groupnorm_mean"]
    case = small_case(problem)
    ref, twin = make_models(problem.model, problem.model, case.init_args, "cpu")
    twin.conv.weight.register_hook(lambda g: g * (1 + 1e-3))
    reports = check_gradients_tf32(twin, ref, case.input_shape, "cpu")
    assert not reports["conv.weight"].passed and reports["input"].passed


def test_kernelbench_check_runs_a_file_at_the_references_sizes():
    """KernelBench execs the reference and the file into one namespace; for another revision's sizes the tool
    appends the reference's size block to the file's text, so the reference's sizes win over the file's own."""
    import importlib.util
    import pathlib
    spec = importlib.util.spec_from_file_location(
        "kernelbench_check", pathlib.Path(__file__).resolve().parents[1] / "tools" / "kernelbench_check.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    file_text = "batch_size = 128\nin_channels = 8\n\ndef get_init_inputs():\n    return [in_channels]\n"
    reference = ("import torch\n\nclass Model:\n    pass\n\nbatch_size = 16\nin_channels = 3\n\n"
                 "def get_init_inputs():\n    return [in_channels, 'reference']\n")
    namespace = {}
    exec(reference, namespace)
    exec(tool.with_reference_sizes(file_text, reference), namespace)
    assert namespace["get_init_inputs"]() == [3, "reference"] and namespace["batch_size"] == 16
    with pytest.raises(SystemExit):
        tool.with_reference_sizes(file_text, "class Model:\n    pass\n")
