"""Operators (CPU, on the meta device): each variant's forward is one registered PyTorch operator with CUDA,
Meta and Autograd kernels (docs/DESIGN.md). On meta tensors, which carry shapes only, the model gives the
reference's output shape and, through its Autograd kernel, a gradient of the input's and each parameter's
shape; torch.compile(fullgraph=True) traces it forward and backward with no graph break and no warning, at two
batch sizes (the second traced with a symbolic batch). On the GPU, tests/test_gpu.py checks the values."""
import warnings

import pytest
import torch

from common.loading import variant_names
from common.problems import PROBLEMS, full_names
from tests.conftest import load, needs_nvcc

pytestmark = needs_nvcc
NAMES = full_names()   # the full modules (the concise file is forward-only fp32)


def meta_models(name, batch):
    problem = PROBLEMS[name]
    torch.manual_seed(0)
    ref = problem.model(*problem.init_args).to("meta")
    new = load(name)["ModelNew"](*problem.init_args).to("meta")
    x = torch.empty((batch,) + problem.input_shape[1:], device="meta", requires_grad=True)
    return ref, new, x


def assert_gradients_shaped(new, x):
    assert x.grad is not None and x.grad.shape == x.shape
    for pname, p in new.named_parameters():
        assert p.grad is not None and p.grad.shape == p.shape, pname


@pytest.mark.parametrize("name", NAMES)
def test_model_is_an_operator_with_cuda_meta_and_autograd_kernels(name):
    op = f"{load(name)['_namespace']}::model"
    assert torch._C._dispatch_has_kernel_for_dispatch_key(op, "CUDA")
    assert torch._C._dispatch_has_kernel_for_dispatch_key(op, "Meta")
    assert torch._C._dispatch_has_kernel_for_dispatch_key(op, "Autograd")
    assert not torch._C._dispatch_has_kernel_for_dispatch_key(op, "CPU")   # a CPU tensor gets a clear error


@pytest.mark.parametrize("name", NAMES)
def test_meta_forward_and_backward_shapes(name):
    ref, new, x = meta_models(name, 3)
    out = new(x)
    assert out.shape == ref(x).shape and out.dtype == torch.float32
    assert out.grad_fn is not None
    out.sum().backward()
    assert_gradients_shaped(new, x)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("batches", [(3, 5), (8, 16, 3)], ids=["small", "across_the_batch_rule"])
def test_compile_fullgraph_traces_forward_and_backward(name, batches):
    """Forward + backward compiled whole (the second call recompiles with a symbolic batch): right shapes, no
    warnings. From batch 8 92's tuned path starts and its training forward returns the conv it keeps, a shape its
    Meta kernel computes from the batch rule; the last batch is then below the rule."""
    torch._dynamo.reset()
    ref, new, _ = meta_models(name, batches[0])
    compiled = torch.compile(new, fullgraph=True, backend="aot_eager")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for batch in batches:
            new.zero_grad(set_to_none=True)
            _, _, x = meta_models(name, batch)
            out = compiled(x)
            assert out.shape == ref(x).shape
            out.sum().backward()
            assert_gradients_shaped(new, x)
    assert not caught, [str(w.message) for w in caught]


@pytest.mark.skipif(not hasattr(torch.export, "Dim"), reason="torch.export's dynamic_shapes came in torch 2.2")
@pytest.mark.parametrize("name", NAMES)
def test_export_with_a_dynamic_batch(name):
    """torch.export with the batch dynamic from 2 to 1024: no plan rule may guard on the batch (92's tuned path starts
    at batch 8; its Meta kernel writes that rule into the kept conv's shape), and the program follows the batch."""
    ref, new, x = meta_models(name, 4)
    batch = torch.export.Dim("batch", min=2, max=1024)
    program = torch.export.export(new, (x.detach(),), dynamic_shapes={"x": {0: batch}})
    for b in (2, 7, 8, 16):
        _, _, y = meta_models(name, b)
        assert program.module()(y.detach()).shape == ref(y).shape


@pytest.mark.parametrize("name", NAMES)
def test_a_second_exec_reuses_the_loaded_operators(name, capsys):
    """The file exec-ed again in this process (as harnesses do) finds its operators registered and does not
    load the library again (a namespace can be registered once per process)."""
    from common.loading import exec_variant
    first = load(name)["_namespace"]
    capsys.readouterr()
    assert exec_variant(name)["_namespace"] == first
    assert "CUDA extension" not in capsys.readouterr().err


@pytest.mark.parametrize("name", NAMES)
def test_model_has_an_autocast_kernel(name):
    """torch.autocast reaches the operator through its AutocastCUDA kernel (docs/DESIGN.md)."""
    op = f"{load(name)['_namespace']}::model"
    assert torch._C._dispatch_has_kernel_for_dispatch_key(op, "AutocastCUDA")


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_meta_half_forward_and_backward(name, dtype):
    """A model cast to a half dtype gives an output of that dtype, and gradients of each tensor's own dtype."""
    ref, new, x = meta_models(name, 3)
    ref, new = ref.to(dtype), new.to(dtype)
    x = x.detach().to(dtype).requires_grad_(True)
    out = new(x)
    assert out.shape == ref(x).shape and out.dtype == dtype
    out.sum().backward()
    assert_gradients_shaped(new, x)
    assert x.grad.dtype == dtype and all(p.grad.dtype == dtype for p in new.parameters())


@pytest.mark.parametrize("name", NAMES)
def test_double_backward_raises_clearly(name):
    """A gradient of the gradients (create_graph=True, then a backward through them, as a gradient penalty does)
    raises a RuntimeError naming the file: never a second-order gradient that is silently missing or wrong."""
    _, new, x = meta_models(name, 3)
    (gx,) = torch.autograd.grad(new(x).sum(), x, create_graph=True)
    assert gx.shape == x.shape and gx.requires_grad
    with pytest.raises(RuntimeError, match=f"{name}: double backward .* is not supported"):
        gx.sum().backward()


@pytest.mark.parametrize("name", NAMES)
def test_backward_operator_has_an_autograd_kernel(name):
    op = f"{load(name)['_namespace']}::backward"
    assert torch._C._dispatch_has_kernel_for_dispatch_key(op, "Autograd")


def test_problem_23_training_forward_leaves_the_backward_its_work():
    """KernelBench times a module's forward with autograd on and the parameters requiring gradients, so a training
    forward's extra work counts as forward time: problem 23's forward once wrote dL/dy for unit output gradients (a
    second conv, KernelBench 2.99x where the forward alone is 6.6x); its backward writes it now. On the tuned path
    the forward operator, asked for training, returns no saved dL/dy (its third output is empty)."""
    name = "conv3d_groupnorm_mean"
    _, new, x = meta_models(name, 3)
    conv, gn = new.conv, new.group_norm
    forward = getattr(torch.ops, load(name)["_namespace"]).forward
    assert new.plan(x, sms=132, training=True)["forward"].startswith("conv_gn_stats_kernel")   # the tuned path
    out, stats, saved = forward(x, conv.weight, conv.bias, gn.weight, gn.bias, gn.num_groups, gn.eps, True)
    assert out.shape == (3,) and saved.numel() == 0
