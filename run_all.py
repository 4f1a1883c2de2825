"""Verify and time every variant: accuracy, milliseconds beside eager and torch.compile, floors.

    python run_all.py [--only NAME] [--dtype fp32|fp16|bf16 ...] [--json PATH] [--markdown PATH] [--reps N]
                      [--no-compile] [--cold] [--sweep | --channels [--plot PNG]] [--baseline-dir DIR]

Builds each variant once (into build/torch_extensions; --cold also times a build into an empty folder
in a fresh interpreter), checks it against the float64 truth and against PyTorch under its default
flags, and times it, in each --dtype asked for (default fp32; fp16 and bf16: model and input cast to it,
checked by the half-precision rule, timed beside eager and torch.compile in that dtype). Prints the
tables last; --json writes every number with the GPU, torch and CUDA versions and the commit; --markdown
writes the tables as the README's Results section shows them.
--sweep instead times each file's forward and forward + backward at batch 1, 8, the benchmark's, KernelBench's
previous size and a configuration outside the tuned path, beside eager and eager's conv alone (the ceiling), as
GPU time (a CUDA graph replayed) and harness time (one call between CUDA events), in each --dtype, with the path
each point took and each file's smallest ratio (common/sweep.py).
--channels times the channel sweep instead (channel pairs 3 -> 16 to 64 -> 128, kernel 3 and 5, batch 1, 8 and
32; common/problems.py channel_sweep) in each --dtype, as GPU time; --plot PNG draws it (x eager per
configuration and the ceiling, a panel per dtype; tools/plot_sweep.py draws one from a saved --json).
--baseline-dir DIR times DIR/<name>.py (another version of a file) beside each file in either sweep.
Without a GPU it builds every variant, says that nothing was checked or timed, and exits 1.
"""
import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

from common.loading import ROOT, load_variant, variant_names  # sets the build defaults before torch builds

import torch  # noqa: E402

from common.evaluate import evaluate, format_tables  # noqa: E402
from common.problems import PROBLEMS  # noqa: E402
from common.sweep import format_sweep, plot_channel_sweep, smallest_ratios, sweep  # noqa: E402

COLD_BUILD = "import sys; sys.path.insert(0, {root!r}); from common.loading import load_variant; load_variant({name!r})"


def cold_build_seconds(name):
    """Seconds to build the variant into an empty folder in a fresh interpreter."""
    with tempfile.TemporaryDirectory() as fresh:
        env = dict(os.environ, TORCH_EXTENSIONS_DIR=fresh)
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", COLD_BUILD.format(root=str(ROOT), name=name)], env=env, check=True)
        return time.perf_counter() - t0


def git_commit():
    """The checked-out commit (+"-dirty"); RUN_ALL_COMMIT names it where the tree travels without git."""
    if os.environ.get("RUN_ALL_COMMIT"):
        return os.environ["RUN_ALL_COMMIT"]
    out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    if out.returncode != 0:
        return "unknown"
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                           capture_output=True, text=True).stdout.strip()
    return out.stdout.strip() + ("-dirty" if dirty else "")


def short_commit():
    """git_commit() for a table's header: 12 hex digits, its "-dirty" kept (a tree with changes the commit lacks)."""
    commit = git_commit()
    return commit[:12] + ("-dirty" if commit.endswith("-dirty") else "")


def build_all(names, cold):
    """{name: (namespace, build times)} of the variants that built, {name: error text} of those that did not."""
    built, failed = {}, {}
    for name in names:
        cold_s = cold_build_seconds(name) if cold else None
        t0 = time.perf_counter()
        try:
            built[name] = load_variant(name)
        except Exception as error:   # a build failure: reported with the compiler's output, the others go on
            failed[name] = str(error)
            print(f"{name}: BUILD FAILED\n{error}", flush=True)
            continue
        times = {"load_s": time.perf_counter() - t0, "cold_build_s": cold_s}
        built[name] = (built[name], times)
        print(f"{name}: built or loaded in {times['load_s']:.1f} s"
              + (f" (cold build {cold_s:.1f} s)" if cold else ""), flush=True)
    return built, failed


def run_sweep(args, built, failed, gpu):
    dtypes = args.dtype or ["fp32"]
    baselines = {}
    for name in built:   # --baseline-dir: another version of each file, timed beside it (x_baseline)
        path = pathlib.Path(args.baseline_dir or "", f"{name}.py")
        if args.baseline_dir and path.exists():
            namespace = {"__name__": "baseline"}
            exec(compile(path.read_text(), str(path), "exec"), namespace)
            baselines[name] = namespace["ModelNew"]
    rows = [row for dtype in dtypes for name, (namespace, _) in built.items()
            if dtype in PROBLEMS[name].dtypes
            for row in sweep(name, namespace["ModelNew"], args.reps, channels=args.channels, dtype=dtype,
                             baseline_cls=baselines.get(name))]
    what = "channel sweep" if args.channels else "sizes"
    header = (f"{gpu}, torch {torch.__version__}, CUDA {torch.version.cuda}, commit {short_commit()}, "
              f"{time.strftime('%Y-%m-%d')}, {what}, {', '.join(dtypes)}, TF32 flag at PyTorch's default")
    table = format_sweep(rows)
    print(f"\n{header}\n{table}")
    if args.json:
        meta = {"gpu": gpu, "torch": torch.__version__, "cuda": torch.version.cuda, "commit": git_commit(),
                "date": time.strftime("%Y-%m-%d %H:%M:%S"), "build_failures": failed}
        smallest = {n: {k: {"ratio": v, "point": p} for k, (v, p) in r.items()} for n, r in smallest_ratios(rows).items()}
        with open(args.json, "w") as f:
            json.dump({"meta": meta, "header": header, "sweep": rows, "smallest": smallest}, f, indent=2)
    if args.plot:
        plot_channel_sweep(rows, args.plot, title=header)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(f"{header} (medians of {args.reps} runs, L2 flushed before each; GPU = a CUDA graph replayed, "
                    f"harness = one call between CUDA events, host = their difference):\n\n{table}\n")
    return 1 if failed else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", action="append", help="variant name (repeatable)")
    parser.add_argument("--json", help="write all results here")
    parser.add_argument("--markdown", help="write the tables, with the GPU, versions and commit, here")
    parser.add_argument("--dtype", action="append", choices=["fp32", "fp16", "bf16"],
                        help="precision to check and time in (repeatable; default fp32)")
    parser.add_argument("--reps", type=int, default=30)
    parser.add_argument("--no-compile", action="store_true", help="skip torch.compile of the reference")
    parser.add_argument("--cold", action="store_true", help="also time a build into an empty folder")
    parser.add_argument("--sweep", action="store_true", help="time every file across sizes (each --dtype) instead")
    parser.add_argument("--channels", action="store_true", help="time every file's channel sweep (each --dtype) instead")
    parser.add_argument("--plot", help="with --channels: draw the sweep into this PNG file (matplotlib)")
    parser.add_argument("--baseline-dir", help="with --sweep or --channels: time DIR/<name>.py (another version of "
                        "each file, e.g. from git show) beside each file")
    args = parser.parse_args()
    if args.plot and not args.channels:
        parser.error("--plot draws the channel sweep: add --channels")
    names = args.only or variant_names()
    unknown = set(names) - set(variant_names())
    if unknown:
        parser.error(f"no such variant: {', '.join(sorted(unknown))}")

    built, failed = build_all(names, args.cold)
    if not torch.cuda.is_available():
        print(f"No CUDA device is visible: built {len(built)} of {len(names)} variant(s), "
              "checked and timed nothing.")
        return 1

    gpu = torch.cuda.get_device_name()
    if args.sweep or args.channels:
        return run_sweep(args, built, failed, gpu)
    results = []
    dtypes = args.dtype or ["fp32"]
    for dtype in dtypes:
        for name, (namespace, times) in built.items():
            if dtype not in PROBLEMS[name].dtypes:
                continue
            result = evaluate(name, namespace["ModelNew"], reps=args.reps, with_compile=not args.no_compile,
                              stages=namespace.get("benchmark_stages"), dtype=dtype)
            result.update(times)
            results.append(result)
            print(f"{name} ({dtype}): {'pass' if result['pass'] else 'FAIL'}, "
                  f"{result['variant_ms']['median_ms']:.3f} ms", flush=True)

    header = (f"{gpu}, torch {torch.__version__}, CUDA {torch.version.cuda}, copy bandwidth "
              f"{results[0]['bandwidth_gbs']:.0f} GB/s, commit {short_commit()}, {time.strftime('%Y-%m-%d')}")
    tables = "\n\n".join(format_tables([r for r in results if r["dtype"] == d]) for d in dtypes)
    print(f"\n{header}\n{tables}")
    if args.json:
        meta = {"gpu": gpu, "torch": torch.__version__, "cuda": torch.version.cuda, "commit": git_commit(),
                "date": time.strftime("%Y-%m-%d %H:%M:%S"), "build_failures": failed}
        with open(args.json, "w") as f:
            json.dump({"meta": meta, "results": results}, f, indent=2)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(f"{header} (median of {args.reps} runs, L2 flushed before each; floor = max(bytes / copy "
                    f"bandwidth, FLOPs / 67 TFLOP/s in fp32, / 989 TFLOP/s in fp16 and bf16)):\n\n"
                    f"```\n{tables}\n```\n")
    ok = not failed and all(r["pass"] and r.get("grad_pass", True) for r in results)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
