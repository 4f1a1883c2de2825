"""GPU: every variant against the float64 truth at the benchmark size and at the edge cases; bad
input, layouts, determinism, CUDA graphs, other module configurations; the pre-Hopper tensor-core path."""
import copy
import inspect
import os
import subprocess
import sys
import textwrap
import warnings

import pytest
import torch

from common.accuracy import (check_against_pytorch, check_gradients, check_gradients_tf32, check_half_gradients,
                             check_model, compare, cudnn_tf32, run_poisoned)
from common.inputs import float64_copy, make_input, make_models
from common.loading import ROOT, variant_names, variant_path
from common.problems import PROBLEMS, full_names
from tests.conftest import assert_all_pass, models, needs_gpu, small

pytestmark = needs_gpu
NAMES = variant_names()
FULL = full_names()   # the full modules: gradients, torch.compile, plan
DEVICE = "cuda"


@pytest.mark.parametrize("name", NAMES)
def test_benchmark_configuration(name):
    problem = PROBLEMS[name]
    ref, new = models(name, problem.init_args)
    assert_all_pass(check_model(new, ref, problem.input_shape, DEVICE))


@pytest.mark.parametrize("name,case", [(n, c) for n in NAMES for c in PROBLEMS[n].cases],
                         ids=lambda v: v if isinstance(v, str) else v.label)
def test_edge_cases(name, case):
    ref, new = models(name, case.init_args)
    assert_all_pass(check_model(new, ref, case.input_shape, DEVICE))


LAYOUTS = {
    "channels_last": lambda x: x.to(memory_format=torch.channels_last_3d if x.dim() == 5 else torch.channels_last),
    "strided_view": lambda x: torch.stack([x, x], dim=-1)[..., 0],   # same values, stride 2 in W
    "transposed_view": lambda x: x.transpose(-1, -2).contiguous().transpose(-1, -2),
}


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_input_layouts(name, layout):
    case = small(name)
    ref, new = models(name, case.init_args)
    transform = LAYOUTS[layout]
    assert not transform(make_input(case.input_shape, 0, DEVICE)).is_contiguous()
    assert_all_pass(check_model(new, ref, case.input_shape, DEVICE, transform=transform))


@pytest.mark.parametrize("name", NAMES)
def test_large_magnitude_input(name):
    """Inputs in [-300, 300): conv outputs reach hundreds, far past where exp() overflows in float32."""
    case = small(name)
    ref, new = models(name, case.init_args)
    assert_all_pass(check_model(new, ref, case.input_shape, DEVICE, values=lambda x: (x * 2 - 1) * 300))


@pytest.mark.parametrize("name", NAMES)
def test_zero_groupnorm_weight(name):
    """GroupNorm weight 0 on every other channel: those channels are their bias alone, exactly."""
    case = small(name)
    ref, new = models(name, case.init_args)
    with torch.no_grad():
        for model in (ref, new):
            next(m for m in model.modules() if isinstance(m, torch.nn.GroupNorm)).weight[::2] = 0
    assert_all_pass(check_model(new, ref, case.input_shape, DEVICE))


def bad_kinds(name):
    kinds = ["cpu", "float64", "wrong_rank", "wrong_channels"]
    return kinds + (["smaller_than_kernel"] if PROBLEMS[name].rejects_small_input else [])


def bad_input(name, kind):
    """(input, words the error must contain)."""
    shape = small(name).input_shape
    if kind == "cpu":
        return torch.rand(shape), "CUDA"
    if kind == "float64":
        return torch.rand(shape, dtype=torch.float64, device=DEVICE), "float32"
    if kind == "wrong_rank":
        return torch.rand(shape[1:], device=DEVICE), "-D"
    if kind == "wrong_channels":
        return torch.rand((shape[0], shape[1] + 1) + shape[2:], device=DEVICE), "channels"
    k = PROBLEMS[name].kernel_size
    return torch.rand(shape[:2] + (k - 1,) * (len(shape) - 2), device=DEVICE), "smaller"


@pytest.mark.parametrize("name,kind", [(n, k) for n in NAMES for k in bad_kinds(n)])
def test_bad_input_is_refused_clearly(name, kind):
    _, new = models(name, small(name).init_args)
    x, words = bad_input(name, kind)
    with pytest.raises((RuntimeError, ValueError, TypeError), match=words):
        new(x)


@pytest.mark.parametrize("name", NAMES)
def test_bit_identical_on_repeat(name):
    problem = PROBLEMS[name]
    _, new = models(name, problem.init_args)
    x = make_input(problem.input_shape, 5, DEVICE)
    with torch.no_grad():
        first = new(x)
        for _ in range(3):
            assert torch.equal(new(x), first)


@pytest.mark.parametrize("name", NAMES)
def test_cuda_graph_replay(name):
    """A captured call replayed on new data in the captured input gives what a plain call on that data gives (a
    replay that kept the captured answer, or read a stale workspace, would not)."""
    case = small(name)
    ref, new = models(name, case.init_args)
    x = make_input(case.input_shape, 6, DEVICE)
    with torch.no_grad(), cudnn_tf32(False):   # captured exact: replays stay exact with the flag on
        expected = new(x)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            new(x)   # warm-up on the capture stream, as torch.cuda.graphs asks
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            captured = new(x)
    fresh = make_input(case.input_shape, 7, DEVICE)
    x.copy_(fresh)
    with torch.no_grad(), cudnn_tf32(True):
        graph.replay()
        torch.cuda.synchronize()
    with torch.no_grad(), cudnn_tf32(False):
        direct = new(fresh)
    assert not torch.equal(direct, expected)   # the new data gives another answer
    assert torch.equal(captured, direct)
    truth = float64_copy(ref)(fresh.double())
    assert compare(captured, truth).passed


@pytest.mark.parametrize("name", NAMES)
def test_streams_and_batch_sizes_in_turn(name):
    """A variant that keeps state between calls (a workspace, counters) gives every call its own answer:
    batch sizes growing and shrinking, two streams at once, each result bit-identical to a lone call's."""
    case = small(name)
    _, new = models(name, case.init_args)
    xs = [make_input((n,) + case.input_shape[1:], 10 + n, DEVICE) for n in (1, 5, 3, 8, 2)]
    with torch.no_grad():
        alone = []
        for x in xs:
            alone.append(new(x))
            torch.cuda.synchronize()
        streams = [torch.cuda.Stream(), torch.cuda.Stream()]
        for s in streams:
            s.wait_stream(torch.cuda.current_stream())
        outs = []
        for i, x in enumerate(xs + xs[::-1]):
            with torch.cuda.stream(streams[i % 2]):
                outs.append(new(x))
        torch.cuda.synchronize()
    for out, expected in zip(outs, alone + alone[::-1]):
        assert torch.equal(out, expected)


@pytest.mark.parametrize("name,config", [(n, c) for n in NAMES for c in PROBLEMS[n].other_configs],
                         ids=str)
def test_other_configurations(name, config):
    """Every configuration the reference accepts is computed (none is refused) and meets the accuracy rule."""
    ref, new = models(name, config)
    shape = (2, config[0]) + small(name).input_shape[2:]
    assert_all_pass(check_model(new, ref, shape, DEVICE))


@pytest.mark.parametrize("name,case", [(n, c) for n in FULL for c in (PROBLEMS[n].benchmark,) + PROBLEMS[n].cases],
                         ids=lambda v: v if isinstance(v, str) else v.label)
def test_gradients_match_float64(name, case):
    """The input's and every parameter's gradient against fp64 autograd, at the benchmark size and every edge case."""
    ref, new = models(name, case.init_args)
    reports = check_gradients(new, ref, case.input_shape, DEVICE)
    assert all(r.passed for r in reports.values()), "\n".join(f"{k}: {r}" for k, r in reports.items())


def test_poisoning_catches_an_unwritten_element():
    """A 'kernel' that writes every output element but one must fail the rule on the GPU."""
    truth = torch.rand(1000, dtype=torch.float64, device=DEVICE)

    def skips_one(x):
        out = torch.empty(1000, device=DEVICE)
        out[1:] = truth[1:].float()
        return out

    out = run_poisoned(skips_one, truth, truth.numel())
    report = compare(out, truth)
    assert not report.passed and report.nonfinite_mismatches == 1, str(report)


# TF32 semantics (docs/DESIGN.md): problem 60's conv rounds its operands to TF32 when
# torch.backends.cudnn.allow_tf32 is on, as cuDNN does for nn.ConvTranspose3d; the other convs stay fp32
# under cuDNN at their benchmark sizes, and so do the variants. Problem 27's conv-kept file calls PyTorch's conv
# under the user's flags: whatever cuDNN does at a size, it does.
TF32_CONV = {"convtranspose3d_swish_groupnorm_hardswish"}
CONV_KEPT = "conv3d_hardswish_groupnorm_mean"


def kept_conv_then_stage(model, x):
    """The conv-kept file's output computed from F.conv3d under the current flags and its fused stage alone."""
    stage = type(model).forward.__globals__["_ops"].hardswish_gn_mean
    conv, gn = model.conv, model.group_norm
    y = torch.nn.functional.conv3d(x, conv.weight, conv.bias)
    return stage(y, gn.weight, gn.bias, gn.num_groups, gn.eps)[0]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("batch", ["benchmark", 1, 7])
def test_default_flags_agree_with_pytorch(name, batch):
    """What a harness sees: flag on (the default), against the fp32 reference run the same way."""
    problem = PROBLEMS[name]
    shape = problem.input_shape if batch == "benchmark" else (batch,) + problem.input_shape[1:]
    ref, new = models(name, problem.init_args)
    assert_all_pass(check_against_pytorch(new, ref, shape, DEVICE))


@pytest.mark.parametrize("name", NAMES)
def test_tf32_flag_changes_only_the_tf32_conv(name):
    """Problem 60 rounds when the flag is on and only then (off: the accuracy rule's exactness, and a
    different answer); every other variant gives the same bits under both settings."""
    case = small(name)
    _, new = models(name, case.init_args)
    x = make_input(case.input_shape, 8, DEVICE)
    with torch.no_grad():
        with cudnn_tf32(True):
            on = new(x)
        with cudnn_tf32(False):
            off = new(x)
    if name in TF32_CONV:
        assert (on - off).norm() / off.norm() > 1e-5
    elif name == CONV_KEPT:
        with torch.no_grad():
            for flag, out in ((True, on), (False, off)):
                with cudnn_tf32(flag):
                    assert torch.equal(out, kept_conv_then_stage(new, x))
    else:
        assert torch.equal(on, off)


def test_the_kept_conv_follows_the_flag_where_cudnn_takes_tf32():
    """At 64 -> 128 channels cuDNN's Conv3d runs TF32 under the flag (checked here on PyTorch itself); the conv-kept
    file's output is then its stage applied to that TF32 conv, and with the flag off to the exact one, bit for bit."""
    _, new = models(CONV_KEPT, (64, 128, 3, 16))
    x = make_input((8, 64, 8, 16, 16), 8, DEVICE)
    conv = new.conv
    with torch.no_grad():
        with cudnn_tf32(True):
            on, conv_on = new(x), conv(x)
            assert torch.equal(on, kept_conv_then_stage(new, x))
        with cudnn_tf32(False):
            off, conv_off = new(x), conv(x)
            assert torch.equal(off, kept_conv_then_stage(new, x))
    assert (conv_on - conv_off).norm() / conv_off.norm() > 1e-5   # the premise: cuDNN takes TF32 here
    assert not torch.equal(on, off)


def round_to_tf32_even(t):
    """float32 values rounded to TF32 (10 mantissa bits), to nearest, ties to even."""
    bits = t.contiguous().view(torch.int32)
    return ((bits + 0xFFF + ((bits >> 13) & 1)) & ~0x1FFF).view(torch.float32)


@pytest.mark.parametrize("name", NAMES)
def test_what_cudnn_does_at_the_benchmark_size(name):
    """The premise of the TF32 semantics, measured on PyTorch itself at the benchmark size: with the flag
    on, cuDNN's conv of problem 60 equals a float64 conv of TF32-rounded (nearest even) operands, and the
    other convs equal their flag-off (fp32) result."""
    problem = PROBLEMS[name]
    ref, _ = models(name, problem.init_args)
    conv = next(m for m in ref.modules() if isinstance(m, (torch.nn.Conv2d, torch.nn.Conv3d, torch.nn.ConvTranspose3d)))
    x = make_input(problem.input_shape, 9, DEVICE)
    with torch.no_grad():
        with cudnn_tf32(True):
            on = conv(x)
        if name in TF32_CONV:
            rounded = float64_copy(conv)
            rounded.weight.copy_(round_to_tf32_even(conv.weight).double())
            expected = rounded(round_to_tf32_even(x).double())
            assert ((on.double() - expected).norm() / expected.norm()).item() < 1e-6
        else:
            with cudnn_tf32(False):
                off = conv(x)
            assert ((on - off).norm() / off.norm()).item() < 1e-6


def test_tf32_reference_fails_problem3():
    problem = PROBLEMS["convtranspose3d_swish_groupnorm_hardswish"]
    ref, _ = make_models(problem.model, problem.model, problem.init_args, DEVICE)
    x = make_input((4,) + problem.input_shape[1:], 0, DEVICE)
    with torch.no_grad(), cudnn_tf32(True):
        report = compare(ref(x), float64_copy(ref)(x.double()))
    assert not report.passed, str(report)


# The backward under the flag (docs/DESIGN.md, TF32): PyTorch's conv backward runs TF32 with the flag on, so the
# files' conv gradients on the tensor cores then take one TF32 product a step (follows: True); the FP32 kernels stay
# exact (False); None: problem 60, whose forward follows the flag (its dL/dy differs with it whatever the kernels).
# (name, init_args, input shape, follows), each an input that takes the kernels named.
TF32_BACKWARD = [
    ("conv3d_groupnorm_mean", (3, 24, 3, 8), (4, 3, 10, 12, 32), True),      # dL/dx TC, dL/dW ROWS
    ("conv3d_groupnorm_mean", (3, 32, 3, 8), (72, 3, 4, 6, 32), True),       # dL/dx STREAM (72 samples), dL/dW TC
    ("conv3d_groupnorm_mean", (3, 24, 5, 8), (2, 3, 8, 9, 12), False),       # the tiled kernels
    ("conv3d_hardswish_groupnorm_mean_all_custom", (3, 16, 4), (4, 3, 8, 32, 32), True),
    ("conv3d_hardswish_groupnorm_mean_all_custom", (3, 16, 3), (4, 3, 8, 30, 32), True),
    ("conv3d_hardswish_groupnorm_mean_all_custom", (3, 16, 4), (112, 3, 5, 8, 32), True),   # dL/dx STREAM
    ("conv2d_groupnorm_tanh_hardswish_residualadd_logsumexp", (8, 64, 3, 16), (8, 8, 40, 64), False),   # tuned: exact
    ("convtranspose3d_swish_groupnorm_hardswish", (8, 16, 3, 2, 1, 4, 1e-5), (2, 8, 4, 5, 6), None),   # PyTorch's conv
    ("convtranspose3d_swish_groupnorm_hardswish", (3, 16, 3, 2, 1, 4, 1e-5), (2, 3, 8, 16, 16), None),  # tuned path
]


# The streamed dL/dx (grad_input_stream_kernel: a block a sample, where the samples fill the GPU), in each form
# of its products: split TF32 of float weights (float32, flag off), of half weights (half precision: the products of
# their zero small parts skipped), one TF32 product (the flag-on test above). Kernel 4 in float32 with the flag off
# takes grad_input_tc_kernel (the plan's rule); the test checks the kernel the plan names.
STREAM_DX = [("conv3d_groupnorm_mean", (3, 24, 3, 8), (72, 3, 5, 8, 30)),
             ("conv3d_hardswish_groupnorm_mean_all_custom", (3, 16, 3), (72, 3, 5, 8, 32)),
             ("conv3d_hardswish_groupnorm_mean_all_custom", (2, 16, 4), (112, 2, 6, 8, 32)),
             ("conv3d_hardswish_groupnorm_mean_all_custom", (1, 16, 4), (112, 1, 5, 9, 20)),
             ("conv3d_groupnorm_mean", (2, 8, 3, 4), (72, 2, 5, 7, 17))]


@pytest.mark.parametrize("name,init_args,shape", STREAM_DX, ids=[f"{c[0]}-{c[1]}" for c in STREAM_DX])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
def test_streamed_input_gradient(name, init_args, shape, dtype):
    """Where the plan names the streamed dL/dx, every gradient within the rule (float32 against float64 with the flag
    off; half precision no farther from float64 than PyTorch's own)."""
    ref, new = models(name, init_args)
    x = torch.empty(shape, device=DEVICE, dtype=dtype)
    extra = {"training": True} if "training" in inspect.signature(new.plan).parameters else {}
    with cudnn_tf32(False):
        kernel = copy.deepcopy(new).to(dtype).plan(x, **extra)["backward dL/dx"].split(";")[0]
        assert kernel == ("grad_input_tc_kernel" if dtype == torch.float32 and len(init_args) == 3 and
                          init_args[2] == 4 else "grad_input_stream_kernel")
        reports = (check_gradients(new, ref, shape, DEVICE) if dtype == torch.float32 else
                   check_half_gradients(new, ref, shape, DEVICE, dtype))
    assert all(r.passed for r in reports.values()), "\n".join(f"{k}: {r}" for k, r in reports.items())


@pytest.mark.parametrize("name,init_args,shape,follows", TF32_BACKWARD,
                         ids=[f"{c[0]}-{c[1]}-{c[2]}" for c in TF32_BACKWARD])
def test_gradients_with_the_tf32_flag_on(name, init_args, shape, follows):
    """Flag on: every gradient within the rule or no farther from float64 than PyTorch's own under the flag;
    the conv's gradients differ from the flag-off ones exactly where the kernels follow the flag."""
    ref, new = models(name, init_args)
    reports = check_gradients_tf32(new, ref, shape, DEVICE)
    assert all(r.passed for r in reports.values()), "\n".join(f"{k}: {r}" for k, r in reports.items())
    if follows is None:
        return
    x = make_input(shape, 21, DEVICE)
    grads = {}
    for flag in (True, False):
        xi = x.clone().requires_grad_(True)
        new.zero_grad(set_to_none=True)
        with cudnn_tf32(flag):
            out = new(xi)
            out.backward(torch.ones_like(out))
        conv = next(m for m in new.modules() if hasattr(m, "weight") and m.weight.dim() >= 4)
        grads[flag] = (xi.grad, conv.weight.grad)
    for on, off in zip(grads[True], grads[False]):
        assert torch.equal(on, off) != follows


@pytest.mark.parametrize("name", FULL)
def test_compile_fullgraph_is_bit_identical_forward_and_backward(name):
    """torch.compile(model, fullgraph=True), Inductor: no graph break, no warning, and the same bits as eager
    ModelNew for the output and every gradient, at two batch sizes (the second with a symbolic batch).
    cuDNN's deterministic mode is on: PyTorch's convolution backward, which gives the conv's own gradients,
    may otherwise pick algorithms that add in a varying order."""
    torch._dynamo.reset()
    case = small(name)
    _, new = models(name, case.init_args)
    compiled = torch.compile(new, fullgraph=True)
    names = ["output", "input grad"] + [f"{n} grad" for n, _ in new.named_parameters()]
    cudnn = torch.backends.cudnn
    with warnings.catch_warnings(record=True) as caught, cudnn.flags(enabled=True, deterministic=True):
        warnings.simplefilter("always")
        for batch in (case.input_shape[0], 7):
            x = make_input((batch,) + case.input_shape[1:], 11, DEVICE)
            results = []
            for fn in (new, compiled):
                new.zero_grad(set_to_none=True)
                xi = x.clone().requires_grad_(True)
                out = fn(xi)
                out.backward(torch.ones_like(out))
                results.append([out, xi.grad] + [p.grad for p in new.parameters()])
            differ = [n for n, a, b in zip(names, *results) if not torch.equal(a, b)]
            assert not differ, f"batch {batch}: {differ} differ"
    assert not caught, [str(w.message) for w in caught]


# Files with a Hopper-only (wgmma) path beside the mma.sync one that GPUs before Hopper run.
SM90A_NAMES = [n for n in NAMES if "wgmma" in variant_path(n).read_text()]
MMA_SYNC_CHECK = textwrap.dedent("""
    import sys
    sys.path.insert(0, sys.argv[1])
    from common.accuracy import check_gradients, check_model
    from common.inputs import make_models
    from common.loading import load_variant
    from common.problems import PROBLEMS
    name = sys.argv[2]
    ns, problem = load_variant(name), PROBLEMS[name]
    assert ns["_no_sm90a"] and not ns["_hopper"], "the file did not take VARIANTS_NO_SM90A"
    failed = []
    for case in (problem.benchmark,) + problem.cases:
        ref, new = make_models(problem.model, ns["ModelNew"], case.init_args, "cuda")
        reports = check_model(new, ref, case.input_shape, "cuda")
        if problem.has_backward:
            reports += list(check_gradients(new, ref, case.input_shape, "cuda").values())
        failed += [f"{case.label}: {r}" for r in reports if not r.passed]
    print("\\n".join(failed))
    sys.exit(1 if failed else 0)
""")


@pytest.mark.parametrize("name", SM90A_NAMES)
def test_mma_sync_path_matches_float64(name):
    """The mma.sync path, built with VARIANTS_NO_SM90A=1 in a process of its own (on Hopper the normal build
    runs wgmma): forward at the benchmark size and every edge case, and gradients, against fp64."""
    env = {**os.environ, "VARIANTS_NO_SM90A": "1"}
    result = subprocess.run([sys.executable, "-c", MMA_SYNC_CHECK, str(ROOT), name], env=env, capture_output=True,
                            text=True)
    assert result.returncode == 0, result.stdout + result.stderr[-4000:]


@pytest.mark.parametrize("name", FULL)
@pytest.mark.parametrize("point", ["benchmark", "general"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_plan_on_this_gpu(name, point, dtype):
    """ModelNew.plan on a real input (this GPU's SM count, the input's alignment) is the plan the meta-device tests
    pin (tests/test_plan.py) for the same shapes and this GPU's SM count; on Hopper the files built for sm_90a say
    so."""
    problem = PROBLEMS[name]
    case = getattr(problem, point)
    _, new = models(name, case.init_args)
    new = new.to(dtype)
    x = make_input((2,) + case.input_shape[1:], 0, DEVICE).to(dtype)
    stages = new.plan(x)
    meta_model = copy.deepcopy(new).to("meta")
    sms = {"sms": torch.cuda.get_device_properties(x.device).multi_processor_count} \
        if "sms" in inspect.signature(new.plan).parameters else {}
    assert stages == meta_model.plan(torch.empty(x.shape, device="meta", dtype=dtype), **sms)
    assert any(s.startswith("forward") for s in stages) and any(s.startswith("backward") for s in stages)
    if "tensor cores" in stages and torch.cuda.get_device_capability() == (9, 0) and \
            os.environ.get("VARIANTS_NO_SM90A") != "1":
        assert stages["tensor cores"].startswith("wgmma")
