"""Check and time one variant beside PyTorch eager and torch.compile: used by run_all.py and by
each variant's `python variants/<name>.py`."""
import torch

from common.accuracy import (HALF_DTYPES, check_against_pytorch, check_gradients, check_gradients_tf32, check_half,
                             check_half_gradients, check_model, compare, cudnn_tf32, models_in)
from common.inputs import float64_copy, make_input, make_models
from common.loading import variant_path
from common.problems import PROBLEMS
from common.timing import copy_bandwidth, time_cuda, time_host

_bandwidth = {}


def device_bandwidth(device):
    """Copy bandwidth (read + write) measured once per device and process."""
    if device not in _bandwidth:
        _bandwidth[device] = copy_bandwidth(device)
    return _bandwidth[device]


def _ratio(a, b):
    return a / b if b else float("nan")


def _check(name, problem, new, ref, device, seed, dtype, log):
    """The accuracy rule at the benchmark configuration: fp32 (float64 truth, and PyTorch under its default
    TF32 flag), or the half-precision rule in `dtype`."""
    if dtype != "fp32":
        reports = check_half(new, ref, problem.input_shape, device, HALF_DTYPES[dtype], seed)
        for r in reports:
            log(f"  {name} ({dtype}): {r}")
        return {"pass": all(r.passed for r in reports), "rel_l2": max(r.rel_l2 for r in reports),
                "max_abs_vs_reference": max(r.max_abs for r in reports)}
    reports = check_model(new, ref, problem.input_shape, device, seed)
    for r in reports:
        log(f"  {name}: {r}")
    default_flags = check_against_pytorch(new, ref, problem.input_shape, device, seed)
    for r in default_flags:
        log(f"  {name} against PyTorch, TF32 flag on: {r}")
    return {"pass": all(r.passed for r in reports) and all(r.passed for r in default_flags),
            "rel_l2": max(r.rel_l2 for r in reports), "max_abs": max(r.max_abs for r in reports),
            "tf32_on_max_abs_vs_pytorch": max(r.max_abs for r in default_flags)}


def evaluate(name, model_cls, device="cuda", reps=30, with_compile=True, seed=0, log=print, stages=None,
             dtype="fp32"):
    """Every number of one variant at its benchmark configuration, as a flat dict.

    `stages(model, x)`, where a variant defines one (as `benchmark_stages`), returns
    {stage name: (callable, bytes it must move or None)}; each stage is timed alone (fp32 only).
    `dtype`: "fp32", or "fp16" / "bf16": model, reference and input cast to it (the half-precision rule), eager
    and torch.compile run in it too, and "rel err" is against float64 on the same half-valued inputs."""
    problem = PROBLEMS[name]
    ref, new = make_models(problem.model, model_cls, problem.init_args, device, seed)
    result = {"name": name, "dtype": dtype, "lines": len(variant_path(name).read_text().splitlines()),
              **_check(name, problem, new, ref, device, seed, dtype, log)}
    element_size = 4
    if dtype != "fp32":
        new, ref = models_in(HALF_DTYPES[dtype], new, ref)
        element_size = 2
        stages = None

    x = make_input(problem.input_shape, seed + 7, device).to(next(ref.parameters()).dtype)
    with torch.no_grad():
        truth = float64_copy(ref)(x.double())
        result["eager_rel_l2"] = compare(ref(x), truth, dtype=x.dtype).rel_l2
        runners = {"variant": lambda: new(x), "eager": lambda: ref(x)}
        if with_compile:
            compiled = torch.compile(ref)
            result["compile_s"], out = time_host(lambda: compiled(x))
            result["compiled_rel_l2"] = compare(out, truth, dtype=x.dtype).rel_l2
            runners["compiled"] = lambda: compiled(x)
        del truth
        for key, fn in runners.items():
            result[f"{key}_ms"] = time_cuda(fn, device, reps=reps).as_dict()

    if problem.has_backward:
        grads = (check_gradients(new, ref, problem.input_shape, device, seed) if dtype == "fp32" else
                 check_half_gradients(new, ref, problem.input_shape, device, HALF_DTYPES[dtype], seed))
        for part, r in grads.items():
            log(f"  {name} grad {part}: {r}")
        result["grad_pass"] = all(r.passed for r in grads.values())
        result["grad_rel_l2"] = max(r.rel_l2 for r in grads.values())
        if dtype == "fp32":   # and under PyTorch's default flags, where the conv backward may take TF32
            grads_on = check_gradients_tf32(new, ref, problem.input_shape, device, seed)
            for part, r in grads_on.items():
                log(f"  {name} grad {part}, allow_tf32 on: {r}")
            result["grad_pass"] = result["grad_pass"] and all(r.passed for r in grads_on.values())
            result["grad_rel_l2_tf32_on"] = max(r.rel_l2 for r in grads_on.values())
        xg = x.clone().requires_grad_(True)
        with torch.no_grad():
            grad_out = torch.randn_like(ref(x))
        models = {"variant": new, "eager": ref}
        if with_compile:
            models["compiled"] = torch.compile(ref)
        for key, model in models.items():
            result[f"{key}_fwd_bwd_ms"] = time_cuda(
                lambda m=model: m(xg).backward(grad_out), device, reps=reps).as_dict()
        # PyTorch's default flags let cuDNN's fp32 convs (eager's, forward and backward) take TF32; with the flag
        # off eager's are exact, as ours are under both: both ratios are reported.
        with cudnn_tf32(False):
            for key in ("variant", "eager"):
                result[f"{key}_fwd_bwd_tf32_off_ms"] = time_cuda(
                    lambda m=models[key]: m(xg).backward(grad_out), device, reps=reps).as_dict()

    bandwidth = device_bandwidth(device)
    if stages is not None:
        result["stages"] = {}
        with torch.no_grad():
            for stage, (fn, nbytes) in stages(new, x).items():
                result["stages"][stage] = {"ms": time_cuda(fn, device, reps=reps).as_dict(),
                                           "floor_ms": nbytes / bandwidth * 1e3 if nbytes else None}
    floor_s, mem_s, flop_s = problem.floor(bandwidth, element_size=element_size)
    if problem.has_backward:
        result["fwd_bwd_floor_ms"] = (floor_s + problem.backward_floor(bandwidth, element_size=element_size)) * 1e3
    result.update(floor_ms=floor_s * 1e3, floor_memory_ms=mem_s * 1e3, floor_compute_ms=flop_s * 1e3,
                  bandwidth_gbs=bandwidth / 1e9)
    ms = result["variant_ms"]["median_ms"]
    result["x_eager"] = _ratio(result["eager_ms"]["median_ms"], ms)
    if with_compile:
        result["x_compiled"] = _ratio(result["compiled_ms"]["median_ms"], ms)
    result["x_floor"] = _ratio(ms, result["floor_ms"])
    return result


COLUMNS = [  # (header, key or function of a result, format)
    ("variant", "name", "{}"),
    ("dtype", lambda r: r.get("dtype", "fp32"), "{}"),
    ("pass", lambda r: "yes" if r["pass"] and r.get("grad_pass", True) else "NO", "{}"),
    ("rel err", "rel_l2", "{:.1e}"),
    ("ms", lambda r: r["variant_ms"]["median_ms"], "{:.3f}"),
    ("eager ms", lambda r: r["eager_ms"]["median_ms"], "{:.3f}"),
    ("eager err", "eager_rel_l2", "{:.1e}"),
    ("compile ms", lambda r: r["compiled_ms"]["median_ms"] if "compiled_ms" in r else float("nan"), "{:.3f}"),
    ("compile err", lambda r: r.get("compiled_rel_l2", float("nan")), "{:.1e}"),
    ("x eager", "x_eager", "{:.2f}"),
    ("x compile", lambda r: r.get("x_compiled", float("nan")), "{:.2f}"),
    ("floor ms", "floor_ms", "{:.3f}"),
    ("x floor", "x_floor", "{:.2f}"),
    ("lines", lambda r: r.get("lines", 0), "{}"),
]

BACKWARD_COLUMNS = [
    ("variant", "name", "{}"),
    ("dtype", lambda r: r.get("dtype", "fp32"), "{}"),
    ("grad err", "grad_rel_l2", "{:.1e}"),
    ("fwd+bwd ms", lambda r: r["variant_fwd_bwd_ms"]["median_ms"], "{:.3f}"),
    ("eager ms", lambda r: r["eager_fwd_bwd_ms"]["median_ms"], "{:.3f}"),
    ("compile ms", lambda r: r["compiled_fwd_bwd_ms"]["median_ms"] if "compiled_fwd_bwd_ms" in r
     else float("nan"), "{:.3f}"),
    ("x eager", lambda r: _ratio(r["eager_fwd_bwd_ms"]["median_ms"], r["variant_fwd_bwd_ms"]["median_ms"]),
     "{:.2f}"),
    ("x compile", lambda r: _ratio(r["compiled_fwd_bwd_ms"]["median_ms"], r["variant_fwd_bwd_ms"]["median_ms"])
     if "compiled_fwd_bwd_ms" in r else float("nan"), "{:.2f}"),
    ("floor ms", "fwd_bwd_floor_ms", "{:.3f}"),
    ("x floor", lambda r: _ratio(r["variant_fwd_bwd_ms"]["median_ms"], r["fwd_bwd_floor_ms"]), "{:.2f}"),
    ("TF32 off: ms", lambda r: r["variant_fwd_bwd_tf32_off_ms"]["median_ms"], "{:.3f}"),
    ("eager ms", lambda r: r["eager_fwd_bwd_tf32_off_ms"]["median_ms"], "{:.3f}"),
    ("x eager", lambda r: _ratio(r["eager_fwd_bwd_tf32_off_ms"]["median_ms"],
                                 r["variant_fwd_bwd_tf32_off_ms"]["median_ms"]), "{:.2f}"),
]


def format_table(results, columns=COLUMNS):
    """A Markdown table: one row per result."""
    def cell(r, key, fmt):
        value = key(r) if callable(key) else r[key]
        return fmt.format(value)
    rows = [[h for h, _, _ in columns]] + [[cell(r, k, f) for _, k, f in columns] for r in results]
    widths = [max(len(row[i]) for row in rows) for i in range(len(columns))]
    lines = ["| " + " | ".join(c.ljust(w) for c, w in zip(row, widths)) + " |" for row in rows]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


STAGE_COLUMNS = [
    ("variant", "name", "{}"),
    ("stage", "stage", "{}"),
    ("ms", "ms", "{:.3f}"),
    ("floor ms", "floor_ms", "{:.3f}"),
    ("x floor", "x_floor", "{:.2f}"),
]


def format_tables(results):
    text = format_table(results)
    with_backward = [r for r in results if "grad_rel_l2" in r]
    if with_backward:
        text += ("\n\nforward + backward (PyTorch's default flags, then torch.backends.cudnn.allow_tf32 off):\n" +
                 format_table(with_backward, BACKWARD_COLUMNS))
    stage_rows = [{"name": r["name"], "stage": stage, "ms": s["ms"]["median_ms"],
                   "floor_ms": s["floor_ms"] or float("nan"),
                   "x_floor": _ratio(s["ms"]["median_ms"], s["floor_ms"] or float("nan"))}
                  for r in results for stage, s in r.get("stages", {}).items()]
    if stage_rows:
        text += "\n\nstages alone (floor: the bytes each must move):\n" + format_table(stage_rows, STAGE_COLUMNS)
    return text


def main(name, model_cls, stages=None):
    """`python variants/<name>.py`: check and time it; non-zero exit without a GPU or on a failure."""
    if not torch.cuda.is_available():
        print(f"{name}: built, but no CUDA device is visible, so nothing was checked or timed.")
        return 1
    print(f"{name} on {torch.cuda.get_device_name()}, torch {torch.__version__}")
    result = evaluate(name, model_cls, stages=stages)
    print(format_tables([result]))
    return 0 if result["pass"] and result.get("grad_pass", True) else 1
