"""One forward call as a harness times it, plain and through torch.compile, per variant, at batch 1 and the benchmark.

    python tools/compiled_call_time.py [--reps 200] [--names NAME ...]

For each file: the eager file's call, torch.compile(mode="default") and torch.compile(mode="reduce-overhead")
(CUDA graph trees), each timed with CUDA events around one call on an idle GPU (torch.cuda.synchronize before
each, no L2 flush: the host's share is what differs), and the same forward replayed from a torch.cuda.CUDAGraph
of our own (the GPU time alone). Host time = call minus replay. Medians of --reps calls, under no_grad.
"""
import argparse
import pathlib
import statistics
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from common.inputs import make_input, make_models  # noqa: E402
from common.loading import load_variant, variant_names  # noqa: E402
from common.problems import PROBLEMS  # noqa: E402


def call_ms(fn, reps):
    times = []
    for _ in range(reps):
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def replay_ms(fn, reps):
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return call_ms(graph.replay, reps)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--names", nargs="*", default=variant_names())
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("tools/compiled_call_time.py: needs a CUDA GPU (none is visible); it measures on the GPU and has nothing to do without one")
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}; one forward call, median of {args.reps}, us")
    print("| variant | batch | GPU (replay) | eager call | compile default | compile reduce-overhead |")
    print("|---|---|---|---|---|---|")
    for name in args.names:
        problem = PROBLEMS[name]
        for batch in (1, problem.input_shape[0]):
            _, new = make_models(problem.model, load_variant(name)["ModelNew"], problem.init_args, "cuda")
            x = make_input((batch,) + problem.input_shape[1:], 0, "cuda")
            torch._dynamo.reset()
            row = []
            with torch.no_grad():
                row.append(replay_ms(lambda: new(x), args.reps))
                row.append(call_ms(lambda: new(x), args.reps))
                for mode in ("default", "reduce-overhead"):
                    compiled = torch.compile(new, mode=mode, fullgraph=True)
                    for _ in range(5):
                        compiled(x)
                    row.append(call_ms(lambda: compiled(x), args.reps))
            print(f"| {name} | {batch} | " + " | ".join(f"{1000 * v:.0f}" for v in row) + " |", flush=True)


if __name__ == "__main__":
    main()
