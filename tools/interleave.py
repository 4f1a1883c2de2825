"""Time versions of one variant in turn in one process (A, B, A, B, ...), at the benchmark size.

    python tools/interleave.py NAME OTHER_FILE [OTHER_FILE ...] [--rounds N] [--tf32 on|off] [--backward]
                               [--init-args "(32, 64, 3, 8)" --input-shape "(32, 32, 8, 16, 16)"] [--dtype bf16]

Each OTHER_FILE is another version of variants/NAME.py (for example `git show REV:variants/NAME.py >
file`). All are exec-ed as a harness does (torch builds each under a versioned name), given the same
parameters and input; each call (with --backward: forward and backward, as run_all.py times them) is
timed with CUDA events after an L2 flush. Prints whether each one's output (and with --backward every gradient)
is bit-identical to the first OTHER_FILE's, then each one's median and its ratio to the first's: below 1 is
faster. --init-args and --input-shape time another configuration than the benchmark's.
"""
import argparse
import ast
import pathlib
import statistics
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from common.accuracy import DTYPES, cudnn_tf32  # noqa: E402
from common.inputs import make_input, make_models  # noqa: E402
from common.loading import load_variant  # noqa: E402
from common.problems import PROBLEMS  # noqa: E402
from common.timing import flush_l2  # noqa: E402

import torch  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("name")
    parser.add_argument("other_files", nargs="+")
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--tf32", choices=["on", "off"], default="on", help="torch.backends.cudnn.allow_tf32")
    parser.add_argument("--backward", action="store_true", help="time forward + backward (input and parameters)")
    parser.add_argument("--init-args", help="the module's arguments, a Python tuple (default: the benchmark's)")
    parser.add_argument("--input-shape", help="the input's shape, a Python tuple (default: the benchmark's)")
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="fp32", help="model and input cast to it")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("tools/interleave.py: needs a CUDA GPU (none is visible); it measures on the GPU and has nothing to do without one")
    problem = PROBLEMS[args.name]
    init_args = ast.literal_eval(args.init_args) if args.init_args else problem.init_args
    input_shape = ast.literal_eval(args.input_shape) if args.input_shape else problem.input_shape
    dtype = DTYPES[args.dtype]
    versions = {}
    for file in args.other_files:
        other, path = {"__name__": "interleave_other"}, pathlib.Path(file)
        exec(compile(path.read_text(), str(path), "exec"), other)
        versions[path.name] = other["ModelNew"]
    versions["working tree"] = load_variant(args.name)["ModelNew"]
    models = {k: make_models(problem.model, cls, init_args, "cuda")[1].to(dtype) for k, cls in versions.items()}
    x = make_input(input_shape, 0, "cuda").to(dtype)
    times = {k: [] for k in models}
    with cudnn_tf32(args.tf32 == "on"):
        with torch.no_grad():
            outs = {k: m(x) for k, m in models.items()}
        first = next(iter(outs))
        for key, out in outs.items():
            print(f"[{key}] vs [{first}]: bit-identical {torch.equal(out, outs[first])}, "
                  f"max abs difference {(out - outs[first]).abs().max().item():.3e}")
        x_grad = x.clone().requires_grad_(True)
        grad_out = torch.randn_like(outs[first])
        if args.backward:
            grads = {}
            for key, model in models.items():
                model.zero_grad(set_to_none=True)
                x_grad.grad = None
                model(x_grad).backward(grad_out)
                grads[key] = [x_grad.grad.clone()] + [p.grad.clone() for p in model.parameters()]
            for key, gs in grads.items():
                same = all(torch.equal(a, b) for a, b in zip(gs, grads[first]))
                print(f"[{key}] vs [{first}]: every gradient bit-identical {same}")

        def call(model):
            if args.backward:
                model(x_grad).backward(grad_out)
            else:
                with torch.no_grad():
                    model(x)
        for _ in range(5):
            for m in models.values():
                call(m)
        for _ in range(args.rounds):
            for key, model in models.items():
                flush_l2("cuda")
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                call(model)
                end.record()
                end.synchronize()
                times[key].append(start.elapsed_time(end))
    medians = {k: statistics.median(v) for k, v in times.items()}
    base = medians[next(iter(medians))]
    what = " forward + backward" if args.backward else ""
    for key, ms in medians.items():
        print(f"{args.name} [{key}]{what}, {args.dtype}, allow_tf32 {args.tf32}: median {ms:.4f} ms over {args.rounds} rounds, "
              f"ratio {ms / base:.4f}")


if __name__ == "__main__":
    main()
