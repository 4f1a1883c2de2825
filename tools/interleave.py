"""Time versions of one variant in turn in one process (A, B, A, B, ...), at the benchmark size.

    python tools/interleave.py NAME OTHER_FILE [OTHER_FILE ...] [--rounds N] [--tf32 on|off] [--backward]

Each OTHER_FILE is another version of variants/NAME.py (for example `git show REV:variants/NAME.py >
file`). All are exec-ed as a harness does (torch builds each under a versioned name), given the same
parameters and input; each call (with --backward: forward and backward, as run_all.py times them) is
timed with CUDA events after an L2 flush. Prints each one's median and its ratio to the first
OTHER_FILE's: below 1 is faster.
"""
import argparse
import pathlib
import statistics
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from common.accuracy import cudnn_tf32  # noqa: E402
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
    args = parser.parse_args()
    problem = PROBLEMS[args.name]
    versions = {}
    for file in args.other_files:
        other, path = {"__name__": "interleave_other"}, pathlib.Path(file)
        exec(compile(path.read_text(), str(path), "exec"), other)
        versions[path.name] = other["ModelNew"]
    versions["working tree"] = load_variant(args.name)["ModelNew"]
    models = {k: make_models(problem.model, cls, problem.init_args, "cuda")[1] for k, cls in versions.items()}
    x = make_input(problem.input_shape, 0, "cuda")
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
        print(f"{args.name} [{key}]{what}, allow_tf32 {args.tf32}: median {ms:.4f} ms over {args.rounds} rounds, "
              f"ratio {ms / base:.4f}")


if __name__ == "__main__":
    main()
