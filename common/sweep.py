"""Speed at every size (docs/DESIGN.md): each file's forward, and forward + backward, at batch 1, batch 8, the
benchmark batch, KernelBench's previous size and a configuration outside the tuned path, beside eager; and the
channel sweep (common/problems.py channel_sweep: channel pairs 3 -> 16 to 64 -> 128, kernel 3 and 5, batch 1, 8
and 32), in each dtype asked for, with plot_channel_sweep drawing it.

Each point is timed two ways, L2 flushed before every repeat:
  GPU time: the call replayed from a CUDA graph (the kernels alone);
  harness time: one call between CUDA events on an idle GPU, as a benchmark harness times it (harness=False: not
  timed, the channel sweep's default).
Host time is the harness time less the GPU time: what the Python and C++ side add to a call.
Forward + backward: the input and every parameter take gradients, `out.backward(g)` with a fixed g.
Each row also carries the ceiling (eager's time over the time of eager's conv alone: what a file reaches that keeps
PyTorch's conv and does everything after it for free), the path the file's plan took ("fused": its own conv;
"torch conv": PyTorch's conv, then its fused chain) and, given a baseline class (another version of the file),
that version's GPU times and x_baseline (its time over this one's: above 1, this one is faster).
"""
import torch
import torch.nn as nn

from common.accuracy import DTYPES
from common.inputs import make_input, make_models
from common.problems import PROBLEMS, Case, channel_sweep
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


CONVS = (nn.Conv2d, nn.Conv3d, nn.ConvTranspose3d)


def path_of(model, x):
    """"torch conv" where the model's plan (if it has one) runs PyTorch's conv in its forward, else "fused"; where a
    call that wants a gradient takes another path than one that does not (a plan follows grad mode, as the call
    does), "<forward alone>, training: <that path>"."""
    plan = getattr(model, "plan", None)
    if plan is None:
        return "fused"

    def kind(stages):
        return "torch conv" if any(k.startswith("forward") and v.startswith("PyTorch's") for k, v in stages.items()) \
            else "fused"
    with torch.no_grad():
        inference = kind(plan(x))
    with torch.enable_grad():
        training = kind(plan(x))
    return inference if training == inference else f"{inference}, training: {training}"


def sweep_point(name, model_cls, case, reps=20, backward=True, dtype="fp32", harness=True, baseline_cls=None):
    """One row: the variant, eager and eager's conv alone (and the baseline version, if given), forward (and forward
    + backward), GPU (and harness) milliseconds; models and input cast to `dtype` as a benchmark harness casts them."""
    problem = PROBLEMS[name]
    ref, new = make_models(problem.model, model_cls, case.init_args, DEVICE)
    ref, new = ref.to(DTYPES[dtype]), new.to(DTYPES[dtype])
    models = [("variant", new), ("eager", ref)]
    if baseline_cls is not None:
        models.append(("baseline", make_models(problem.model, baseline_cls, case.init_args, DEVICE)[1].to(DTYPES[dtype])))
    conv = next(m for m in ref.modules() if isinstance(m, CONVS))
    x = make_input(case.input_shape, 11, DEVICE).to(DTYPES[dtype])
    row = {"name": name, "point": case.label, "dtype": dtype, "init_args": list(case.init_args),
           "input_shape": list(case.input_shape), "path": path_of(new, x)}

    def timed(key, fn):
        if harness:
            row[f"{key}_gpu_ms"], row[f"{key}_ms"] = time_both(fn, reps)
        else:
            row[f"{key}_gpu_ms"] = time_gpu(fn, reps)
    with torch.no_grad():
        for key, model in models + [("conv", conv)]:
            timed(key, lambda m=model: m(x))
    if backward and problem.has_backward:
        xg = x.clone().requires_grad_(True)
        with torch.no_grad():
            grad_out, grad_conv = torch.randn_like(ref(x)), torch.randn_like(conv(x))
        for key, model in models:
            timed(f"{key}_fwd_bwd", lambda m=model: m(xg).backward(grad_out))
        timed("conv_fwd_bwd", lambda: conv(xg).backward(grad_conv))
    for part in ("", "_fwd_bwd"):
        if f"variant{part}_gpu_ms" in row:
            row[f"x_eager{part}_gpu"] = row[f"eager{part}_gpu_ms"] / row[f"variant{part}_gpu_ms"]
            row[f"ceiling{part}"] = row[f"eager{part}_gpu_ms"] / row[f"conv{part}_gpu_ms"]
            if baseline_cls is not None:
                row[f"x_baseline{part}"] = row[f"baseline{part}_gpu_ms"] / row[f"variant{part}_gpu_ms"]
        if f"variant{part}_ms" in row:
            row[f"x_eager{part}"] = row[f"eager{part}_ms"] / row[f"variant{part}_ms"]
            row[f"host{part}_us"] = 1e3 * (row[f"variant{part}_ms"] - row[f"variant{part}_gpu_ms"])
    return row


def time_gpu(fn, reps):
    """GPU ms of fn: its graph replayed, a median over `reps`."""
    for _ in range(3):
        fn()
    graph = _graph_of(fn)
    gpu = time_cuda(graph.replay, DEVICE, warmup=0, reps=reps).median_ms
    del graph
    return gpu


def sweep(name, model_cls, reps=20, log=print, channels=False, dtype="fp32", baseline_cls=None):
    """The rows of one file: its sizes (points, GPU and harness time), or with channels=True its channel sweep (GPU
    time), in `dtype`."""
    rows = []
    for case in (channel_sweep(name) if channels else points(name)):
        row = sweep_point(name, model_cls, case, reps, dtype=dtype, harness=not channels, baseline_cls=baseline_cls)
        log(f"{name} [{case.label}, {dtype}, {row['path']}]: GPU {row['variant_gpu_ms']:.4f} ms "
            f"(eager {row['eager_gpu_ms']:.4f}, x{row['x_eager_gpu']:.2f}, ceiling {row['ceiling']:.2f}"
            + (f", x baseline {row['x_baseline']:.2f}" if baseline_cls is not None else "")
            + (f"; fwd+bwd x{row['x_eager_fwd_bwd_gpu']:.2f}, ceiling {row['ceiling_fwd_bwd']:.2f}"
               if "x_eager_fwd_bwd_gpu" in row else "")
            + (f", x baseline {row['x_baseline_fwd_bwd']:.2f}" if "x_baseline_fwd_bwd" in row else "") + ")")
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
    head = ("| variant | point | dtype | input | path | GPU ms | eager GPU ms | x | ceiling | x base | harness ms | "
            "eager ms | x | host us | fwd+bwd GPU ms | eager | x | ceiling | x base | fwd+bwd harness ms | eager | x "
            "| host us |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]

    def f(row, key, fmt):
        return format(row[key], fmt) if key in row else "-"
    for r in rows:
        lines.append(
            f"| {r['name'][:44]} | {r['point']} | {r.get('dtype', 'fp32')} | {'x'.join(map(str, r['input_shape']))} "
            f"| {r.get('path', '-')} | {f(r, 'variant_gpu_ms', '.4f')} | {f(r, 'eager_gpu_ms', '.4f')} "
            f"| {f(r, 'x_eager_gpu', '.2f')} | {f(r, 'ceiling', '.2f')} | {f(r, 'x_baseline', '.2f')} "
            f"| {f(r, 'variant_ms', '.4f')} | {f(r, 'eager_ms', '.4f')} | {f(r, 'x_eager', '.2f')} | {f(r, 'host_us', '.0f')} "
            f"| {f(r, 'variant_fwd_bwd_gpu_ms', '.3f')} | {f(r, 'eager_fwd_bwd_gpu_ms', '.3f')} "
            f"| {f(r, 'x_eager_fwd_bwd_gpu', '.2f')} | {f(r, 'ceiling_fwd_bwd', '.2f')} "
            f"| {f(r, 'x_baseline_fwd_bwd', '.2f')} | {f(r, 'variant_fwd_bwd_ms', '.3f')} "
            f"| {f(r, 'eager_fwd_bwd_ms', '.3f')} | {f(r, 'x_eager_fwd_bwd', '.2f')} | {f(r, 'host_fwd_bwd_us', '.0f')} |")
    lines.append("")
    lines.append("| variant | smallest x eager, GPU | harness | fwd+bwd GPU | fwd+bwd harness |")
    lines.append("|---|---|---|---|---|")
    for name, mine in smallest_ratios(rows).items():
        cells = [f"{mine[k][0]:.2f} ({mine[k][1]})" if k in mine else "-"
                 for k in ("x_eager_gpu", "x_eager", "x_eager_fwd_bwd_gpu", "x_eager_fwd_bwd")]
        lines.append(f"| {name[:44]} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot_channel_sweep(rows, path, title=""):
    """Draws x eager (GPU time) of each configuration, a line a file: a column of panels per dtype, forward above,
    forward + backward below; the line at 1 is eager's speed. Written to `path` (PNG)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    dtypes = [d for d in DTYPES if any(r.get("dtype", "fp32") == d for r in rows)]
    names = sorted({r["name"] for r in rows})
    fig, axes = plt.subplots(2, len(dtypes), figsize=(7 * len(dtypes), 8), squeeze=False, sharey=True)
    for col, dtype in enumerate(dtypes):
        for row_i, (key, what) in enumerate((("x_eager_gpu", "forward"), ("x_eager_fwd_bwd_gpu", "forward + backward"))):
            ax = axes[row_i][col]
            labels = []
            for name in names:
                mine = [r for r in rows if r["name"] == name and r.get("dtype", "fp32") == dtype and key in r]
                labels = labels if len(labels) >= len(mine) else [r["point"] for r in mine]
                line, = ax.plot(range(len(mine)), [r[key] for r in mine], marker="o", label=name[:40])
                ceiling = "ceiling" + key[len("x_eager"):-len("_gpu")]   # the file's ceiling: dotted, same colour
                if all(ceiling in r for r in mine):
                    ax.plot(range(len(mine)), [r[ceiling] for r in mine], linestyle=":", color=line.get_color())
            ax.axhline(1.0, color="black", linewidth=1)
            ax.set_yscale("log")
            ax.set_title(f"{what}, {dtype}")
            ax.set_xticks(range(len(labels)))
            ax.set_xticklabels(labels, rotation=90, fontsize=7)
            ax.set_ylabel("x eager (GPU time; above 1: faster); dotted: the ceiling")
    axes[0][0].legend(fontsize=7)
    if title:
        import textwrap
        fig.suptitle("\n".join(textwrap.wrap(title, 110)), fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)

