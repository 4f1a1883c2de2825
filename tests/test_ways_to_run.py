"""GPU: every way PyTorch runs a module gives the eager file's result, bit for bit where the file is deterministic.

torch.compile in its modes (reduce-overhead runs CUDA graph trees, whose pools see every allocation: an operator
that kept a tensor alive outside its outputs fails there), with no gradient, with gradients and no backward, and in
a training loop; dynamic shapes under CUDA graphs; torch.cuda.make_graphed_callables; torch.export; torch.func.vmap;
deepcopy and a state_dict round trip through torch.save; a second backward through a retained graph. Higher-order
gradients raise a clear error (tests/test_operators.py checks the same on meta tensors, without a GPU)."""
import copy
import io

import pytest
import torch

from common.inputs import make_input
from common.loading import variant_names
from common.problems import PROBLEMS, full_names
from tests.conftest import load, models, needs_gpu, small

pytestmark = needs_gpu
NAMES = full_names()   # the full modules (the concise file is forward-only fp32)
DEVICE = "cuda"


def case_models(name, seed=0, shape="small"):
    """The variant at the problem's small edge case (shape="small") or at its benchmark configuration and
    spatial size with batch 8 ("benchmark_b8": the tuned kernels; 92's take batch 8 or more), and that input shape."""
    if shape == "small":
        case = small(name)
        init_args, input_shape = case.init_args, case.input_shape
    else:
        problem = PROBLEMS[name]
        init_args, input_shape = problem.init_args, (8,) + problem.input_shape[1:]
    ref, new = models(name, init_args, seed)
    return new, input_shape


def inputs(shape, n, seed=10):
    return [make_input(shape, seed + i, DEVICE) for i in range(n)]


def assert_same(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape
    assert torch.equal(got, want), f"max difference {(got.double() - want.double()).abs().max().item():.3g}"


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


@pytest.fixture(autouse=True)
def deterministic_cudnn():
    """These tests compare gradients bit for bit. Where a file's plan takes PyTorch's conv (CONTRACT 10, 15), its
    conv gradients are PyTorch's convolution backward's: as deterministic as eager's, that is bit-identical run to run
    under torch.backends.cudnn.deterministic (cuDNN's fastest dgrad and wgrad algorithms add in any order), which is
    set here; tests/test_gpu.py checks the files' own kernels' determinism with the flag as the user leaves it."""
    before = torch.backends.cudnn.deterministic
    torch.backends.cudnn.deterministic = True
    yield
    torch.backends.cudnn.deterministic = before


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("mode,shape", [("default", "small"), ("max-autotune-no-cudagraphs", "small"),
                                        ("reduce-overhead", "small"), ("reduce-overhead", "benchmark_b8")])
def test_compile_no_grad(name, mode, shape):
    new, shape = case_models(name, shape=shape)
    compiled = torch.compile(new, mode=mode, fullgraph=True)
    with torch.no_grad():
        for x in inputs(shape, 3):
            want = new(x)
            assert_same(compiled(x).clone(), want)


SHAPES = ["small", "benchmark_b8"]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("input_grad", [False, True], ids=["params_grad", "input_grad"])
def test_reduce_overhead_with_gradients_and_no_backward(name, shape, input_grad):
    """A forward-only loop that forgot no_grad: the parameters (and the input) require grad, each call's output
    is kept past the next call, no backward runs."""
    new, shape = case_models(name, shape=shape)
    compiled = torch.compile(new, mode="reduce-overhead", fullgraph=True)
    outs = []
    for x in inputs(shape, 4):
        x.requires_grad_(input_grad)
        want = new(x).detach()
        got = compiled(x)
        assert got.requires_grad
        assert_same(got.detach().clone(), want)
        outs.append(got.detach().clone())
    assert len(outs) == 4


def step(model, f, x, grad_out):
    """One training step's output and gradients (the input's, then each parameter's)."""
    model.zero_grad(set_to_none=True)
    x = x.detach().clone().requires_grad_(True)
    out = f(x)
    out.backward(grad_out)
    return [out.detach().clone(), x.grad.clone()] + [p.grad.clone() for p in model.parameters()]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("shape", SHAPES)
def test_reduce_overhead_training_loop(name, shape):
    """Steps begun with cudagraph_mark_step_begin, gradients set to None: the output, the input's and every
    parameter's gradient equal the eager file's."""
    eager, shape = case_models(name, shape=shape)
    model = copy.deepcopy(eager)
    compiled = torch.compile(model, mode="reduce-overhead", fullgraph=True)
    for i, x in enumerate(inputs(shape, 3)):
        grad_out = torch.randn(eager(x).shape, generator=torch.Generator().manual_seed(i)).to(DEVICE)
        want = step(eager, eager, x, grad_out)
        torch.compiler.cudagraph_mark_step_begin()
        for g, w in zip(step(model, compiled, x, grad_out), want):
            assert_same(g, w)


@pytest.mark.parametrize("name", NAMES)
def test_reduce_overhead_dynamic_batch(name):
    """torch.compile(dynamic=True) under CUDA graphs: a graph per batch size, each the eager result."""
    new, shape = case_models(name)
    compiled = torch.compile(new, mode="reduce-overhead", dynamic=True, fullgraph=True)
    with torch.no_grad():
        for batch in (2, 3, 5, 3):
            x = make_input((batch,) + tuple(shape[1:]), batch, DEVICE)
            assert_same(compiled(x).clone(), new(x))


@pytest.mark.parametrize("name", NAMES)
def test_make_graphed_callables(name):
    """torch.cuda.make_graphed_callables: forward and backward captured once, replayed with new values."""
    eager, shape = case_models(name)
    model = copy.deepcopy(eager)
    xs = [x.requires_grad_(True) for x in inputs(shape, 3)]
    graphed = torch.cuda.make_graphed_callables(model, (xs[0].detach().clone().requires_grad_(True),))
    for x in xs[1:]:
        for m in (eager, model):
            m.zero_grad(set_to_none=True)
        x_eager, x_graph = x.detach().clone().requires_grad_(True), x.detach().clone().requires_grad_(True)
        out_eager, out_graph = eager(x_eager), graphed(x_graph)
        assert_same(out_graph.detach(), out_eager.detach())
        grad_out = torch.randn_like(out_eager)
        out_eager.backward(grad_out)
        out_graph.backward(grad_out)
        assert_same(x_graph.grad, x_eager.grad)
        for (pname, p), q in zip(model.named_parameters(), eager.parameters()):
            assert_same(p.grad, q.grad)


@pytest.mark.parametrize("name", NAMES)
def test_double_backward_raises_clearly(name):
    """A gradient penalty: the first-order gradient with create_graph=True works; differentiating it raises a
    RuntimeError naming the file, never a missing or wrong second-order gradient."""
    new, shape = case_models(name)
    x = make_input(shape, 3, DEVICE).requires_grad_(True)
    out = new(x)
    (gx,) = torch.autograd.grad(out.sum(), x, create_graph=True)
    (want,) = torch.autograd.grad(new(x).sum(), x)
    assert_same(gx.detach(), want)
    with pytest.raises(RuntimeError, match=f"{name}: double backward"):
        gx.pow(2).sum().backward()
    new.zero_grad(set_to_none=True)
    out = new(x)
    grads = torch.autograd.grad(out.sum(), list(new.parameters()), create_graph=True)
    with pytest.raises(RuntimeError, match="double backward"):
        sum(g.pow(2).sum() for g in grads).backward()


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("shape", ["small", "benchmark_b8"])
def test_backward_twice_through_a_retained_graph(name, shape):
    """backward(retain_graph=True), then backward again through the same graph, gives the same gradients each time:
    a forward that saves work for its backward must not consume it (92's training forward keeps its conv)."""
    new, input_shape = case_models(name, shape=shape)
    x = make_input(input_shape, 5, DEVICE).requires_grad_(True)
    out = new(x)
    grad_out = torch.randn_like(out)
    grads = []
    for _ in range(2):
        x.grad = None
        new.zero_grad(set_to_none=True)
        out.backward(grad_out, retain_graph=True)
        grads.append([x.grad] + [p.grad for p in new.parameters()])
    for got, want in zip(*grads):
        assert_same(got, want)


@pytest.mark.skipif(not hasattr(torch.library, "opcheck"), reason="torch.library.opcheck came in torch 2.4")
@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("batch", [2, 8])
def test_meta_kernels_agree_with_the_cuda_kernels(name, batch):
    """torch.library.opcheck (its fake-tensor test) on the forward and backward operators a training step calls, at
    the benchmark configuration and spatial size (92: both sides of its batch rule): each Meta kernel gives the CUDA
    kernel's output shapes, strides and dtypes, which torch.compile and torch.export plan with."""
    from torch.utils._python_dispatch import TorchDispatchMode
    namespace = load(name)["_namespace"]
    calls = []

    class Record(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func.namespace == namespace:
                calls.append((func, args, kwargs or {}))
            return func(*args, **(kwargs or {}))
    problem = PROBLEMS[name]
    _, new = models(name, problem.init_args)
    x = make_input((batch,) + problem.input_shape[1:], 6, DEVICE).requires_grad_(True)
    with Record():
        new(x).sum().backward()
    assert {"forward", "backward"} <= {func._schema.name.split("::")[1] for func, _, _ in calls}
    for func, args, kwargs in calls:
        torch.library.opcheck(func, args, kwargs, test_utils=("test_faketensor",))


@pytest.mark.parametrize("name", NAMES)
def test_export(name):
    new, shape = case_models(name)
    x = make_input(shape, 4, DEVICE)
    program = torch.export.export(new, (x,))
    calls = [n for n in program.graph.nodes if n.op == "call_function"]
    assert len(calls) == 1 and "model" in str(calls[0].target), [str(n.target) for n in calls]
    with torch.no_grad():
        for y in inputs(shape, 2, seed=40):
            assert_same(program.module()(y), new(y))


@pytest.mark.parametrize("name", NAMES)
def test_vmap_over_a_leading_dimension(name):
    new, shape = case_models(name)
    stacked = torch.stack(inputs(shape, 3))
    with torch.no_grad():
        got = torch.func.vmap(new)(stacked)
        for i in range(3):
            assert_same(got[i], new(stacked[i]))


@pytest.mark.parametrize("name", NAMES)
def test_deepcopy_and_state_dict_round_trip(name):
    new, shape = case_models(name)
    x = make_input(shape, 5, DEVICE)
    buffer = io.BytesIO()
    torch.save(new.state_dict(), buffer)
    buffer.seek(0)
    loaded, _ = case_models(name, seed=7)   # other parameters, then the saved ones
    loaded.load_state_dict(torch.load(buffer))
    with torch.no_grad():
        want = new(x)
        assert_same(copy.deepcopy(new)(x), want)
        assert_same(loaded(x), want)
