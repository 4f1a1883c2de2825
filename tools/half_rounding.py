"""Where PyTorch rounds, measured: each reference model run op by op in float16 or bfloat16, and each op's
output compared bit for bit with the op computed in float64 from the same half-valued inputs and rounded once
to the dtype (to nearest even). An op whose output matches in (nearly) every element computes in float and
rounds its output once; the variants round at exactly those points.

    python tools/half_rounding.py [--batch N] [--dtype bf16 ...]

For each problem and dtype it prints every op's share of bit-identical outputs, the conv's bias both ways
(PyTorch adds it after cuDNN's conv: two roundings, or in one), GroupNorm both ways (its mean and 1/std kept
exact, or rounded to the dtype as native_group_norm stores them), the whole model against the composition of its
ops, and end to end: the model in float64 rounded once at its output, and with every op's rounding, each
against the reference (share bit-identical, outputs outside KernelBench's half check, worst |diff| over its
tolerance). Benchmark configurations with KernelBench's default GroupNorm parameters.
"""
import argparse
import copy
import pathlib
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from common.accuracy import HALF_DTYPES, HALF_TOL  # noqa: E402
from common.inputs import make_input  # noqa: E402
from common.problems import PROBLEMS  # noqa: E402


def group_norm(m, v):
    gn = m.group_norm
    return F.group_norm(v, gn.num_groups, gn.weight, gn.bias, gn.eps)


def group_norm_rounded_stats(m, v, dtype):
    """GroupNorm as PyTorch's half-precision kernel forms it: the group's mean and 1/std (from float64 here)
    rounded to the dtype, a = rstd gamma and b = -a mean + beta in float32, y = a x + b in float32 (then the
    caller rounds y)."""
    gn = m.group_norm
    groups = v.double().reshape(v.shape[0], gn.num_groups, -1)
    mean = groups.mean(dim=2)
    rstd = (groups.var(dim=2, unbiased=False) + gn.eps).rsqrt()
    mean, rstd = mean.to(dtype).float(), rstd.to(dtype).float()
    per_channel = lambda t: t.repeat_interleave(v.shape[1] // gn.num_groups, dim=1)
    a = per_channel(rstd) * gn.weight.float()
    b = -a * per_channel(mean) + gn.bias.float()
    shape = (v.shape[0], v.shape[1]) + (1,) * (v.dim() - 2)
    return a.reshape(shape) * v.float() + b.reshape(shape)


def conv(m, x, with_bias):
    """The model's conv (with or without its bias), in the parameters' and input's dtype."""
    if hasattr(m, "conv_transpose"):
        ct = m.conv_transpose
        return F.conv_transpose3d(x, ct.weight, ct.bias if with_bias else None, ct.stride, ct.padding)
    c = m.conv
    return (F.conv3d if x.dim() == 5 else F.conv2d)(x, c.weight, c.bias if with_bias else None)


def bias_of(m, y):
    c = m.conv_transpose if hasattr(m, "conv_transpose") else m.conv
    return c.bias.view((1, -1) + (1,) * (y.dim() - 2))


def chain(name):
    """The ops after the conv (and its bias), as (op name, function of the previous output); each is run in the
    dtype by PyTorch and in float64 on the same input."""
    if name == "conv3d_groupnorm_mean":
        return [("group_norm", group_norm), ("mean", lambda m, v: v.mean(dim=[1, 2, 3, 4]))]
    if name.startswith("conv3d_hardswish_groupnorm_mean"):
        return [("hardswish", lambda m, v: F.hardswish(v)), ("group_norm", group_norm),
                ("mean", lambda m, v: v.mean(dim=[2, 3, 4]))]
    if name == "convtranspose3d_swish_groupnorm_hardswish":
        return [("sigmoid", lambda m, v: torch.sigmoid(v)), ("sigmoid * y", None), ("group_norm", group_norm),
                ("hardswish", lambda m, v: F.hardswish(v))]
    return [("group_norm", group_norm), ("tanh", lambda m, v: torch.tanh(v)), ("hardswish", lambda m, v: F.hardswish(v)),
            ("y + hardswish", None), ("x - max", None), ("exp", lambda m, v: torch.exp(v)),
            ("sum", lambda m, v: v.sum(dim=1, keepdim=True)), ("log", lambda m, v: torch.log(v)), ("+ max", None)]


def measure(name, dtype, batch, device="cuda"):
    problem = PROBLEMS[name]
    torch.manual_seed(0)
    m = problem.model(*problem.init_args).to(device, dtype)
    m64 = copy.deepcopy(m).double()   # the same half-valued parameters, in float64
    x = make_input((batch,) + problem.input_shape[1:], 0, device).to(dtype)
    rnd = lambda t: t.to(dtype)
    rows = []

    def stage(label, ours, exact):
        rows.append((label, (ours == rnd(exact)).double().mean().item()))

    with torch.no_grad():
        c = conv(m, x, False)
        stage("conv", c, conv(m64, x.double(), False))
        y = conv(m, x, True)
        stage("conv + bias, rounded twice", y, rnd(conv(m64, x.double(), False)).double() + bias_of(m64, y))
        stage("conv + bias, rounded once", y, conv(m64, x.double(), True))
        v, keep = y, {"y": y}
        for label, op in chain(name):
            if label == "sigmoid * y":
                nxt, exact = v * keep["y"], v.double() * keep["y"].double()
            elif label == "y + hardswish":
                nxt, exact = keep["y"] + v, keep["y"].double() + v.double()
            elif label == "x - max":
                keep["max"] = v.amax(dim=1, keepdim=True)
                nxt, exact = v - keep["max"], v.double() - keep["max"].double()
            elif label == "+ max":
                nxt, exact = v + keep["max"], v.double() + keep["max"].double()
            else:
                nxt, exact = op(m, v), op(m64, v.double())
            stage(label, nxt, exact)
            if label == "group_norm":
                stage("group_norm, its mean and 1/std rounded to the dtype", nxt, group_norm_rounded_stats(m, v, dtype))
            v = nxt
        rows.append(("model = its ops composed", (m(x) == v).double().mean().item()))
        expected = m(x).double()
        for plan, r in (("float64 rounded once", lambda t: t), ("float64 rounded at every op", lambda t: rnd(t).double())):
            out = end_to_end(name, m64, x.double(), r).to(dtype).double()
            over = (out - expected).abs() / (HALF_TOL + HALF_TOL * expected.abs())
            rows.append((f"{plan}: bit-identical / outside 1e-2 / worst over tolerance",
                         f"{(out == expected).double().mean().item():.4%} / {int((over > 1).sum())} / "
                         f"{over.max().item():.2f}"))
    return rows


def end_to_end(name, m64, x, r):
    """The model in float64, with r applied at every op's output (identity: no rounding until the end)."""
    y = r(r(conv(m64, x, False)) + bias_of(m64, x))
    keep = {"y": y}
    v = y
    for label, op in chain(name):
        if label == "sigmoid * y":
            v = r(v * keep["y"])
        elif label == "y + hardswish":
            v = r(keep["y"] + v)
        elif label == "x - max":
            keep["max"] = v.amax(dim=1, keepdim=True)
            v = r(v - keep["max"])
        elif label == "+ max":
            v = r(v + keep["max"])
        else:
            v = r(op(m64, v))
    return v


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--dtype", action="append", choices=sorted(HALF_DTYPES))
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("tools/half_rounding.py: needs a CUDA GPU (none is visible); it measures on the GPU and has nothing to do without one")
    names = ["conv3d_groupnorm_mean", "conv3d_hardswish_groupnorm_mean", "convtranspose3d_swish_groupnorm_hardswish",
             "conv2d_groupnorm_tanh_hardswish_residualadd_logsumexp"]
    print("| problem | dtype | op | bit-identical to float64 rounded once |")
    print("|---|---|---|---|")
    for name in names:
        for dtype in args.dtype or sorted(HALF_DTYPES):
            for label, value in measure(name, HALF_DTYPES[dtype], args.batch):
                shown = f"{value:.4%}" if isinstance(value, float) else value
                print(f"| {PROBLEMS[name].kernelbench_id} | {dtype} | {label} | {shown} |", flush=True)


if __name__ == "__main__":
    sys.exit(main())
