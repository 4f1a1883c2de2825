"""Speed at every size (docs/DESIGN.md): each file's forward, and forward + backward, at batch 1, batch 8, the
benchmark batch, KernelBench's previous size and a configuration outside the tuned path, beside eager.

Each point is timed two ways, L2 flushed before every repeat:
  GPU time: the call replayed from a CUDA graph (the kernels alone);
  harness time: one call between CUDA events on an idle GPU, as a benchmark harness times it.
Host time is the harness time less the GPU time: what the Python and C++ side add to a call.
Forward + backward: the input and every parameter take gradients, `out.backward(g)` with a fixed g.
"""
import torch

from common.inputs import make_input, make_models
from common.problems import PROBLEMS, Case
from common.timing import time_cuda

DEVICE = "cuda"


def points(name):
    """The sweep's cases of one problem: batch 1, 8 and the benchmark's, then its previous and general cases."""
    problem = PROBLEMS[name]
    shape = problem.input_shape
    cases = [Case("batch 1", problem.init_args, (1,) + shape[1:]), Case("batch 8", problem.init_args, (8,) + shape[1:]),
             problem.benchmark]
    same = lambda c: (c.init_args, c.input_shape) == (problem.init_args, shape)   # noqa: E731 (60's previous)
    return cases + [c for c in (problem.previous, problem.general) if c is not None and not same(c)]


def _graph_of(fn):
    """fn captured in a CUDA graph, after warm-up on a side stream as torch.cuda.graph asks."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph


def time_both(fn, reps):
    """(GPU ms, harness ms) of fn: its graph replayed, and the call itself, each a median over `reps`."""
    for _ in range(3):
        fn()
    harness = time_cuda(fn, DEVICE, warmup=0, reps=reps).median_ms
    graph = _graph_of(fn)
    gpu = time_cuda(graph.replay, DEVICE, warmup=0, reps=reps).median_ms
    del graph
    return gpu, harness


def sweep_point(name, model_cls, case, reps=20, backward=True):
    """One row: the variant and eager, forward (and forward + backward), GPU and harness milliseconds."""
    problem = PROBLEMS[name]
    ref, new = make_models(problem.model, model_cls, case.init_args, DEVICE)
    x = make_input(case.input_shape, 11, DEVICE)
    row = {"name": name, "point": case.label, "init_args": list(case.init_args), "input_shape": list(case.input_shape)}
    for key, model in (("variant", new), ("eager", ref)):
        with torch.no_grad():
            row[f"{key}_gpu_ms"], row[f"{key}_ms"] = time_both(lambda m=model: m(x), reps)
    if backward and problem.has_backward:
        xg = x.clone().requires_grad_(True)
        with torch.no_grad():
            grad_out = torch.randn_like(ref(x))
        for key, model in (("variant", new), ("eager", ref)):
            row[f"{key}_fwd_bwd_gpu_ms"], row[f"{key}_fwd_bwd_ms"] = time_both(
                lambda m=model: m(xg).backward(grad_out), reps)
    for part in ("", "_fwd_bwd"):
        if f"variant{part}_ms" in row:
            row[f"x_eager{part}_gpu"] = row[f"eager{part}_gpu_ms"] / row[f"variant{part}_gpu_ms"]
            row[f"x_eager{part}"] = row[f"eager{part}_ms"] / row[f"variant{part}_ms"]
            row[f"host{part}_us"] = 1e3 * (row[f"variant{part}_ms"] - row[f"variant{part}_gpu_ms"])
    return row


def sweep(name, model_cls, reps=20, log=print):
    rows = []
    for case in points(name):
        row = sweep_point(name, model_cls, case, reps)
        log(f"{name} [{case.label}]: GPU {row['variant_gpu_ms']:.4f} ms (eager {row['eager_gpu_ms']:.4f}), "
            f"harness {row['variant_ms']:.4f} ms (eager {row['eager_ms']:.4f}), host {row['host_us']:.0f} us")
        rows.append(row)
        torch.cuda.empty_cache()
    return rows


def smallest_ratios(rows):
    """{name: {ratio: (smallest value, point)}} over each file's rows."""
    out = {}
    for row in rows:
        mine = out.setdefault(row["name"], {})
        for key in ("x_eager_gpu", "x_eager", "x_eager_fwd_bwd_gpu", "x_eager_fwd_bwd"):
            if key in row and (key not in mine or row[key] < mine[key][0]):
                mine[key] = (row[key], row["point"])
    return out


def format_sweep(rows):
    head = ("| variant | point | input | GPU ms | eager GPU ms | x | harness ms | eager ms | x | host us "
            "| fwd+bwd GPU ms | eager | x | fwd+bwd harness ms | eager | x | host us |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]

    def f(row, key, fmt):
        return format(row[key], fmt) if key in row else "-"
    for r in rows:
        lines.append(
            f"| {r['name'][:44]} | {r['point']} | {'x'.join(map(str, r['input_shape']))} "
            f"| {f(r, 'variant_gpu_ms', '.4f')} | {f(r, 'eager_gpu_ms', '.4f')} | {f(r, 'x_eager_gpu', '.2f')} "
            f"| {f(r, 'variant_ms', '.4f')} | {f(r, 'eager_ms', '.4f')} | {f(r, 'x_eager', '.2f')} | {f(r, 'host_us', '.0f')} "
            f"| {f(r, 'variant_fwd_bwd_gpu_ms', '.3f')} | {f(r, 'eager_fwd_bwd_gpu_ms', '.3f')} "
            f"| {f(r, 'x_eager_fwd_bwd_gpu', '.2f')} | {f(r, 'variant_fwd_bwd_ms', '.3f')} "
            f"| {f(r, 'eager_fwd_bwd_ms', '.3f')} | {f(r, 'x_eager_fwd_bwd', '.2f')} | {f(r, 'host_fwd_bwd_us', '.0f')} |")
    lines.append("")
    lines.append("| variant | smallest x eager, GPU | harness | fwd+bwd GPU | fwd+bwd harness |")
    lines.append("|---|---|---|---|---|")
    for name, mine in smallest_ratios(rows).items():
        cells = [f"{mine[k][0]:.2f} ({mine[k][1]})" if k in mine else "-"
                 for k in ("x_eager_gpu", "x_eager", "x_eager_fwd_bwd_gpu", "x_eager_fwd_bwd")]
        lines.append(f"| {name[:44]} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
