"""The accuracy rule of CONTRACT.md, with a report that says where and by how much a result is off.

Truth is the reference run in float64. An output passes when
    torch.allclose(out, truth, atol=ATOL, rtol=RTOL)  and  ||out - truth|| / ||truth|| <= REL_L2,
with torch.backends.cudnn.allow_tf32 off while the variant runs (fp32 asks for fp32). With the flag on
(PyTorch's default), a variant must agree with the fp32 reference run under the same flag at
atol = rtol = 1e-4, as KernelBench's harness checks (check_against_pytorch).
Output memory is filled with NaN before each run, so an element never written cannot pass.
"""
import contextlib
from dataclasses import dataclass, field

import torch

from common.inputs import float64_copy, make_input

ATOL = 1e-4
RTOL = 1e-4
REL_L2 = 1e-5
GRAD_REL_L2 = 1e-4   # gradients: relative L2 error against fp64 autograd
N_INPUTS = 3         # fresh random inputs per check
N_WORST = 5


@dataclass
class Report:
    passed: bool
    shape: tuple
    max_abs: float = float("nan")
    rel_l2: float = float("nan")
    mismatches: int = 0
    nonfinite_mismatches: int = 0
    worst: list = field(default_factory=list)   # (index, out, truth)
    reason: str = ""

    def __str__(self):
        head = "PASS" if self.passed else "FAIL"
        text = (f"{head} shape={self.shape} max_abs={self.max_abs:.3e} rel_l2={self.rel_l2:.3e} "
                f"mismatches={self.mismatches} nan/inf mismatches={self.nonfinite_mismatches}")
        if self.reason:
            text += f" ({self.reason})"
        for idx, o, t in self.worst:
            text += f"\n    at {idx}: got {o!r}, expected {t!r}"
        return text


def compare(out, truth, rel_l2_limit=REL_L2, atol=ATOL, rtol=RTOL):
    """Check `out` against the float64 `truth` under the rule; never raises on a mismatch."""
    if tuple(out.shape) != tuple(truth.shape):
        return Report(False, tuple(out.shape), reason=f"shape {tuple(out.shape)} != {tuple(truth.shape)}")
    if out.dtype != torch.float32:
        return Report(False, tuple(out.shape), reason=f"dtype {out.dtype} != torch.float32")
    o = out.detach().double()
    t = truth.detach().double()
    if o.numel() == 0:
        return Report(True, tuple(out.shape), 0.0, 0.0)
    close = torch.isclose(o, t, atol=atol, rtol=rtol)
    bad = ~close
    nonfinite = (~torch.isfinite(o) | ~torch.isfinite(t)) & bad
    diff = (o - t).abs().nan_to_num(nan=float("inf"))
    t_norm = t.norm().item()
    rel = (o - t).norm().item() / t_norm if t_norm > 0 else (0.0 if (o - t).norm().item() == 0 else float("inf"))
    if rel != rel:  # NaN anywhere makes the norm NaN: count it as infinitely wrong
        rel = float("inf")
    worst = []
    order = torch.argsort(diff.flatten(), descending=True)[:N_WORST]
    for flat in order.tolist():
        if not bad.flatten()[flat]:
            break
        idx = tuple(torch.unravel_index(torch.tensor(flat), o.shape)) if o.dim() else ()
        idx = tuple(int(i) for i in idx)
        worst.append((idx, o.flatten()[flat].item(), t.flatten()[flat].item()))
    n_bad = int(bad.sum())
    passed = n_bad == 0 and rel <= rel_l2_limit
    reason = "" if passed else (f"rel_l2 {rel:.3e} > {rel_l2_limit:.0e}" if n_bad == 0 else "")
    return Report(passed, tuple(out.shape), diff.max().item(), rel, n_bad, int(nonfinite.sum()), worst, reason)


@contextlib.contextmanager
def cudnn_tf32(allowed):
    """torch.backends.cudnn.allow_tf32 set to `allowed` inside the block, restored after it."""
    before = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = allowed
    try:
        yield
    finally:
        torch.backends.cudnn.allow_tf32 = before


def poison_output_memory(nbytes, device):
    """Allocate `nbytes`, fill with NaN, free: the caching allocator hands this block to the
    next allocation of that size, so an output element the kernel never writes stays NaN."""
    if torch.device(device).type != "cuda" or nbytes == 0:
        return
    block = torch.empty(nbytes // 4, dtype=torch.float32, device=device)
    block.fill_(float("nan"))
    del block


def run_poisoned(model, x, out_numel):
    poison_output_memory(4 * out_numel, x.device)
    with torch.no_grad():
        return model(x)


def check_model(model, reference, input_shape, device, seed=0, n_inputs=N_INPUTS, transform=None,
                values=None):
    """Run the rule on `n_inputs` fresh inputs; returns one Report per input.

    `reference` must already hold the parameters `model` holds (see inputs.make_models).
    `values` (optional) maps each uniform [0, 1) input to other values, for the truth and the model alike.
    `transform` (optional) maps each input before the model sees it (channels-last, a strided view).
    """
    ref64 = float64_copy(reference)
    reports = []
    for i in range(n_inputs):
        x = make_input(input_shape, seed + 1000 + i, device)
        if values is not None:
            x = values(x)
        with torch.no_grad():
            truth = ref64(x.double())
        xin = transform(x) if transform is not None else x
        with cudnn_tf32(False):
            out = run_poisoned(model, xin, truth.numel())
        reports.append(compare(out, truth))
    return reports


def check_against_pytorch(model, reference, input_shape, device, seed=0, n_inputs=N_INPUTS):
    """With torch.backends.cudnn.allow_tf32 on, the variant against the fp32 reference under the same flag:
    torch.allclose at ATOL and RTOL, as a benchmark harness compares (no L2 rule: where cuDNN computes in
    TF32 the reference itself is off from the truth). One Report per fresh input."""
    reports = []
    for i in range(n_inputs):
        x = make_input(input_shape, seed + 4000 + i, device)
        with cudnn_tf32(True), torch.no_grad():
            expected = reference(x)
            out = run_poisoned(model, x, expected.numel())
        reports.append(compare(out, expected.double(), rel_l2_limit=float("inf")))
    return reports


def check_gradients(model, reference, input_shape, device, seed=0):
    """Gradients of the input and of every parameter against fp64 autograd on the reference.

    Returns {name: Report} judged by relative L2 error <= GRAD_REL_L2 alone (gradient entries
    near zero make an elementwise tolerance meaningless). cuDNN's TF32 is off throughout: PyTorch's
    conv backward, which the variants may use, runs in TF32 by default and misses fp32 accuracy.

    Where a gradient is zero in exact arithmetic (problem 23 with one channel per group: its output is
    the mean of the GroupNorm bias whatever the input), the fp64 truth is rounding noise and no fp32
    computation meets a relative rule; PyTorch's own fp32 gradient fails it too. There, and only where
    PyTorch's fp32 gradient fails, a gradient passes if it is no farther from the truth than PyTorch's."""
    ref64 = float64_copy(reference)
    x = make_input(input_shape, seed + 2000, device)
    x32 = x.clone().requires_grad_(True)
    x_ref = x.clone().requires_grad_(True)
    x64 = x.double().requires_grad_(True)
    gen = torch.Generator().manual_seed(seed + 3000)
    reference.zero_grad(set_to_none=True)
    with cudnn_tf32(False):
        out = model(x32)
        out64 = ref64(x64)
        grad_out = torch.randn(out64.shape, generator=gen, dtype=torch.float64).to(device)
        out.backward(grad_out.float())
        out64.backward(grad_out)
        reference(x_ref).backward(grad_out.float())
    params, ref_params = dict(model.named_parameters()), dict(reference.named_parameters())
    triples = [("input", x32.grad, x_ref.grad, x64.grad)]
    triples += [(name, params[name].grad, ref_params[name].grad, p64.grad) for name, p64 in ref64.named_parameters()]
    reference.zero_grad(set_to_none=True)
    return {name: _compare_gradient(g, g_ref, g64) for name, g, g_ref, g64 in triples}


def _compare_gradient(grad, grad_pytorch, grad64):
    if grad is None:
        return Report(False, tuple(grad64.shape), reason="no gradient was computed")
    report = compare(grad, grad64, GRAD_REL_L2, atol=float("inf"), rtol=0)
    if report.passed or grad_pytorch is None:
        return report
    pytorch = compare(grad_pytorch, grad64, GRAD_REL_L2, atol=float("inf"), rtol=0)
    if not pytorch.passed and report.rel_l2 <= pytorch.rel_l2:
        report.passed = True
        report.reason = (f"PyTorch's fp32 gradient fails the rule too (rel_l2 {pytorch.rel_l2:.3e}): a gradient "
                         f"that is zero in exact arithmetic; this one is no farther from the truth")
    return report
