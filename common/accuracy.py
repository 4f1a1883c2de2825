"""The accuracy rule (docs/DESIGN.md), with a report that says where and by how much a result is off.

Truth is the reference run in float64. An output passes when
    torch.allclose(out, truth, atol=ATOL, rtol=RTOL)  and  ||out - truth|| / ||truth|| <= REL_L2,
with torch.backends.cudnn.allow_tf32 off while the variant runs (fp32 asks for fp32). With the flag on
(PyTorch's default), a variant must agree with the fp32 reference run under the same flag at
atol = rtol = 1e-4, as KernelBench's harness checks (check_against_pytorch).
Output memory is filled with NaN before each run, so an element never written cannot pass.

Half precision (float16, bfloat16: the model and its input cast to the dtype, as KernelBench's half tracks
do): the variant must agree with the reference run in that dtype at atol = rtol = HALF_TOL on every element,
and its relative L2 error against the reference run in float64 on the same half-valued input and parameters
must be no larger than the reference's own (to within HALF_REL_L2_MARGIN and one element off by one unit in
the last place: a variant that rounds where PyTorch rounds differs from it only where an intermediate value
falls on the other side of a rounding boundary, which moves the error either way by a hair, and on an output
of a few elements by one such step). Gradients likewise: within HALF_TOL relative L2 of
float64 autograd, and no farther from it than PyTorch's own half-precision gradients (same margin).
Gradients with the flag on (where PyTorch's conv backward runs TF32, and so may a variant's): within GRAD_REL_L2
of float64 autograd or no farther from it than PyTorch's own fp32 gradients under the flag (same margin).
Under torch.autocast the variant must return the reference's dtype and agree with it at HALF_TOL.
"""
import contextlib
import copy
from dataclasses import dataclass, field

import torch

from common.inputs import float64_copy, make_input

ATOL = 1e-4
RTOL = 1e-4
REL_L2 = 1e-5
GRAD_REL_L2 = 1e-4   # gradients: relative L2 error against fp64 autograd
N_INPUTS = 3         # fresh random inputs per check
N_WORST = 5
HALF_TOL = 1e-2      # KernelBench's tolerance for float16 and bfloat16 (atol = rtol)
HALF_REL_L2_MARGIN = 1.05
HALF_DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}
DTYPES = {"fp32": torch.float32, **HALF_DTYPES}   # run_all.py's --dtype names


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


def compare(out, truth, rel_l2_limit=REL_L2, atol=ATOL, rtol=RTOL, dtype=torch.float32):
    """Check `out` (expected in `dtype`) against `truth` under the rule; never raises on a mismatch."""
    if tuple(out.shape) != tuple(truth.shape):
        return Report(False, tuple(out.shape), reason=f"shape {tuple(out.shape)} != {tuple(truth.shape)}")
    if out.dtype != dtype:
        return Report(False, tuple(out.shape), reason=f"dtype {out.dtype} != {dtype}")
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
    """Allocate `nbytes`, fill every byte with 0xFF (NaN in float32, float16 and bfloat16 alike), free: the
    caching allocator hands this block to the next allocation of that size, so an output element the kernel
    never writes stays NaN."""
    if torch.device(device).type != "cuda" or nbytes == 0:
        return
    block = torch.empty(nbytes, dtype=torch.uint8, device=device)
    block.fill_(255)
    del block


def run_poisoned(model, x, out_numel, element_size=4):
    poison_output_memory(element_size * out_numel, x.device)
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


def _gradients(model, reference, input_shape, device, seed, tf32):
    """(name, ours, PyTorch's fp32, float64 autograd) for the input and every parameter, the model and the fp32
    reference run with torch.backends.cudnn.allow_tf32 = tf32 (float64 ignores it)."""
    ref64 = float64_copy(reference)
    x = make_input(input_shape, seed + 2000, device)
    x32 = x.clone().requires_grad_(True)
    x_ref = x.clone().requires_grad_(True)
    x64 = x.double().requires_grad_(True)
    gen = torch.Generator().manual_seed(seed + 3000)
    model.zero_grad(set_to_none=True)   # gradients of an earlier check would add to these
    reference.zero_grad(set_to_none=True)
    with cudnn_tf32(tf32):
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
    return triples


def check_gradients_tf32(model, reference, input_shape, device, seed=0):
    """Gradients with torch.backends.cudnn.allow_tf32 on (PyTorch's default), where PyTorch's conv backward
    runs TF32 (docs/DESIGN.md) and a variant may too: each gradient within GRAD_REL_L2 of float64 autograd, or no
    farther from it than PyTorch's own fp32 gradient under the same flag (times HALF_REL_L2_MARGIN). {name: Report}"""
    reports = {}
    for name, g, g_ref, g64 in _gradients(model, reference, input_shape, device, seed, tf32=True):
        report = compare(g, g64, GRAD_REL_L2, atol=float("inf"), rtol=0) if g is not None else Report(
            False, tuple(g64.shape), reason="no gradient was computed")
        if g is not None and not report.passed:
            pytorch = compare(g_ref, g64, GRAD_REL_L2, atol=float("inf"), rtol=0)
            report.passed = report.rel_l2 <= pytorch.rel_l2 * HALF_REL_L2_MARGIN
            report.reason = f"flag on: PyTorch's own gradient {pytorch.rel_l2:.3e} from float64"
        reports[name] = report
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
    triples = _gradients(model, reference, input_shape, device, seed, tf32=False)
    return {name: _compare_gradient(g, g_ref, g64) for name, g, g_ref, g64 in triples}


def _compare_gradient(grad, grad_pytorch, grad64, limit=GRAD_REL_L2, dtype=torch.float32, margin=None):
    """One gradient against float64 by relative L2 (`limit`). With `margin` (half precision) a gradient within
    the limit must also be no farther from the truth than PyTorch's own times `margin`."""
    if grad is None:
        return Report(False, tuple(grad64.shape), reason="no gradient was computed")
    report = compare(grad, grad64, limit, atol=float("inf"), rtol=0, dtype=dtype)
    if grad_pytorch is None or (report.passed and margin is None):
        return report
    pytorch = compare(grad_pytorch, grad64, limit, atol=float("inf"), rtol=0, dtype=dtype)
    if report.passed and report.rel_l2 > pytorch.rel_l2 * margin:
        report.passed = False
        report.reason = f"farther from float64 than PyTorch's gradient ({pytorch.rel_l2:.3e})"
    elif not report.passed and not pytorch.passed and report.rel_l2 <= pytorch.rel_l2:
        report.passed = True
        report.reason = (f"PyTorch's gradient fails the rule too (rel_l2 {pytorch.rel_l2:.3e}): a gradient "
                         f"that is zero in exact arithmetic; this one is no farther from the truth")
    return report


def models_in(dtype, *models):
    """Copies of `models` cast to `dtype` (as model.to(dtype) casts a user's model)."""
    return [copy.deepcopy(m).to(dtype) for m in models]


def one_ulp(t):
    """The largest unit in the last place among `t`'s (half-precision) values: what one element off by one step
    of the dtype adds to an L2 error at most. On an output of a few elements the reference's own error and
    ours differ by such steps at random."""
    bits = {torch.float16: 10, torch.bfloat16: 7}[t.dtype]
    _, exponent = torch.frexp(t.double().abs().max())
    return float(2.0 ** (exponent.item() - 1 - bits))


def compare_half(out, expected, truth):
    """The half-precision rule for one output: `expected` the reference run in the dtype, `truth` the
    reference run in float64 on the same half-valued input and parameters."""
    report = compare(out, expected.double(), rel_l2_limit=float("inf"), atol=HALF_TOL, rtol=HALF_TOL,
                     dtype=expected.dtype)
    if report.reason or out.numel() == 0:
        return report
    t_norm = truth.norm().item()
    ours = (out.double() - truth).norm().item() / t_norm if t_norm > 0 else 0.0
    theirs = (expected.double() - truth).norm().item() / t_norm if t_norm > 0 else 0.0
    report.rel_l2 = ours
    if ours != ours or ours > theirs * HALF_REL_L2_MARGIN + one_ulp(expected) / max(t_norm, 1e-300):
        report.passed = False
        report.reason = f"rel_l2 against float64 {ours:.3e} > the reference's {theirs:.3e}"
    else:
        report.reason = f"rel_l2 against float64 {ours:.3e}, the reference's {theirs:.3e}"
    return report


def check_half(model, reference, input_shape, device, dtype, seed=0, n_inputs=N_INPUTS, transform=None):
    """The half-precision rule on `n_inputs` fresh inputs: `model` and `reference` (holding the same
    parameters, in float32) are cast to `dtype`, as is each input. One Report per input."""
    new, ref = models_in(dtype, model, reference)
    ref64 = float64_copy(ref)
    reports = []
    for i in range(n_inputs):
        x = make_input(input_shape, seed + 5000 + i, device).to(dtype)
        with torch.no_grad():
            expected = ref(x)
            truth = ref64(x.double())
        xin = transform(x) if transform is not None else x
        out = run_poisoned(new, xin, expected.numel(), expected.element_size())
        reports.append(compare_half(out, expected, truth))
        del expected, truth, out
    return reports


def check_autocast(model, reference, input_shape, device, dtype, seed=0, n_inputs=2):
    """Under torch.autocast(dtype): the variant returns the reference's dtype and agrees with it at HALF_TOL."""
    reports = []
    for i in range(n_inputs):
        x = make_input(input_shape, seed + 6000 + i, device)
        with torch.no_grad(), torch.autocast("cuda", dtype=dtype):
            expected = reference(x)
            out = run_poisoned(model, x, expected.numel(), expected.element_size())
        reports.append(compare(out, expected.double(), rel_l2_limit=float("inf"), atol=HALF_TOL, rtol=HALF_TOL,
                               dtype=expected.dtype))
    return reports


def check_half_gradients(model, reference, input_shape, device, dtype, seed=0):
    """Gradients in half precision: the input's and every parameter's, with model, reference and input cast to
    `dtype`, against float64 autograd on the same half-valued input, parameters and output gradient: each
    within HALF_TOL relative L2 and no farther than PyTorch's own (HALF_REL_L2_MARGIN). {name: Report}."""
    new, ref = models_in(dtype, model, reference)
    ref64 = float64_copy(ref)
    x = make_input(input_shape, seed + 2000, device).to(dtype)
    xs = [x.clone().requires_grad_(True), x.clone().requires_grad_(True), x.double().requires_grad_(True)]
    gen = torch.Generator().manual_seed(seed + 3000)
    outs = [m(xi) for m, xi in zip((new, ref, ref64), xs)]
    grad_out = torch.randn(outs[2].shape, generator=gen).to(dtype).to(device)
    for o in outs:
        o.backward(grad_out.to(o.dtype))
    grads = {"input": [xi.grad for xi in xs]}
    for name, _ in ref64.named_parameters():
        grads[name] = [dict(m.named_parameters())[name].grad for m in (new, ref, ref64)]
    return {name: _compare_gradient(g, g_ref, g64, HALF_TOL, dtype, HALF_REL_L2_MARGIN)
            for name, (g, g_ref, g64) in grads.items()}
