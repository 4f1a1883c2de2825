"""What PyTorch's own convs compute under torch.backends.cudnn.allow_tf32, measured: each problem's conv (Conv2d,
Conv3d or ConvTranspose3d, as its reference builds it) at a configuration, its output and its two gradients
(dL/dx, dL/dW for a fixed random dL/dy), each run with the flag on and off. Each result is compared with float64
computed from the same fp32 operands ("exact") and from the operands rounded to TF32 first (10 mantissa bits, to
nearest even, as cuDNN's TF32 kernels round them): relative L2 to each. A result four times nearer the TF32 line
than the exact one was computed with TF32 products; four times nearer the exact one, in fp32; else "unclear" (seen:
cuDNN's weight gradients under the flag, TF32-level far from both, accumulated or rounded otherwise).

    python tools/tf32_conv.py [--only NAME] [--batch N] [--init-args "(...)" --input-shape "(...)"]

Defaults: every full problem at its benchmark configuration and input. Needs a GPU (on the CPU the flag does
nothing and every line reads fp32).
"""
import argparse
import ast
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from common.accuracy import cudnn_tf32  # noqa: E402
from common.inputs import make_input  # noqa: E402
from common.problems import PROBLEMS  # noqa: E402


def tf32_round(t):
    """t (fp32) rounded to TF32, to nearest even: the low 13 of the 23 mantissa bits cleared after adding half of
    their weight (plus the kept part's last bit, for ties to even). Finite values."""
    bits = t.contiguous().view(torch.int32)
    rounded = (bits + 0xFFF + ((bits >> 13) & 1)) & ~0x1FFF
    return rounded.view(torch.float32)


def verdict(to_exact, to_tf32):
    """What a result's two distances say it was computed with: "TF32", "fp32" or "unclear"."""
    if to_tf32 * 4 < to_exact:
        return "TF32"
    if to_exact * 4 < to_tf32:
        return "fp32"
    return "unclear"


def conv_of(model):
    return model.conv_transpose if hasattr(model, "conv_transpose") else model.conv


def rel_l2(a, b):
    return ((a.double() - b).norm() / b.norm()).item()


def measure(name, init_args, input_shape, device):
    """{(quantity, flag): (rel L2 to exact, rel L2 to TF32)} for the conv's output, dL/dx and dL/dW."""
    torch.manual_seed(0)
    conv = conv_of(PROBLEMS[name].model(*init_args)).to(device)
    x = make_input(input_shape, 3, device)
    with torch.no_grad():
        grad_y = torch.randn_like(conv(x))

    def run(module, inp, g):
        inp = inp.detach().clone().requires_grad_(True)
        module.zero_grad(set_to_none=True)
        out = module(inp)
        out.backward(g)
        return {"output": out.detach(), "dL/dx": inp.grad, "dL/dW": module.weight.grad}

    exact64 = conv_of(PROBLEMS[name].model(*init_args)).to(device).double()
    exact64.load_state_dict({k: v.double() for k, v in conv.state_dict().items()})
    truth = run(exact64, x.double(), grad_y.double())
    tf32_model = conv_of(PROBLEMS[name].model(*init_args)).to(device).double()
    tf32_model.load_state_dict({k: (tf32_round(v) if k == "weight" else v).double()
                                for k, v in conv.state_dict().items()})
    # dL/dx multiplies dL/dy by W, dL/dW multiplies dL/dy by x: each product's operands rounded to TF32
    truth_tf32 = run(tf32_model, tf32_round(x).double(), tf32_round(grad_y).double())
    results = {}
    for flag in (True, False):
        with cudnn_tf32(flag):
            got = run(conv, x, grad_y)
        for key, value in got.items():
            results[(key, flag)] = (rel_l2(value, truth[key]), rel_l2(value, truth_tf32[key]))
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", action="append", help="problem name (repeatable)")
    parser.add_argument("--batch", type=int, help="the input's batch (default: the benchmark's)")
    parser.add_argument("--init-args", help="the module's arguments, a Python tuple (with --only)")
    parser.add_argument("--input-shape", help="the input's shape, a Python tuple (with --only)")
    args = parser.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cpu":
        print("tools/tf32_conv.py: no CUDA GPU visible: measuring on the CPU, where the TF32 flag changes nothing "
              "(cuDNN's behaviour is what this tool is for); about 3.5 minutes on 2 cores", file=sys.stderr, flush=True)
    names = args.only or sorted(n for n, p in PROBLEMS.items() if p.full)
    print(f"device {torch.cuda.get_device_name() if device == 'cuda' else 'cpu'}, torch {torch.__version__}")
    print("| problem | configuration | input | quantity | allow_tf32 | rel L2 to exact | rel L2 to TF32 operands | reads |")
    print("|---|---|---|---|---|---|---|---|")
    for name in names:
        problem = PROBLEMS[name]
        init_args = ast.literal_eval(args.init_args) if args.init_args else problem.init_args
        shape = ast.literal_eval(args.input_shape) if args.input_shape else problem.input_shape
        if args.batch:
            shape = (args.batch,) + tuple(shape[1:])
        for (key, flag), (to_exact, to_tf32) in measure(name, init_args, shape, device).items():
            reads = verdict(to_exact, to_tf32)
            print(f"| {name} | {init_args} | {'x'.join(map(str, shape))} | {key} | {flag} | {to_exact:.2e} "
                  f"| {to_tf32:.2e} | {reads} |")


if __name__ == "__main__":
    main()
