"""Verify and time every variant: build times, accuracy, milliseconds beside eager and torch.compile.

    python run_all.py [--only NAME] [--json PATH] [--reps N] [--no-compile] [--skip-cold]

Prints a table last; --json writes every number with the GPU, torch and CUDA versions and the commit.
Without a GPU it builds every variant, says so and exits non-zero.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import torch

from common.evaluate import evaluate, format_tables
from common.loading import ROOT, import_variant, variant_names

BUILD_SNIPPET = "import sys; sys.path.insert(0, {root!r}); from common.loading import import_variant; import_variant({name!r})"


def timed_build(name, extensions_dir):
    """Seconds to import the variant in a fresh interpreter building into `extensions_dir`."""
    env = dict(os.environ, TORCH_EXTENSIONS_DIR=extensions_dir)
    code = BUILD_SNIPPET.format(root=str(ROOT), name=name)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], env=env, check=True)
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


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", action="append", help="variant name (repeatable)")
    parser.add_argument("--json", help="write all results here")
    parser.add_argument("--reps", type=int, default=30)
    parser.add_argument("--no-compile", action="store_true", help="skip torch.compile of the reference")
    parser.add_argument("--skip-cold", action="store_true", help="skip the cold build into an empty folder")
    args = parser.parse_args()
    names = args.only or variant_names()
    unknown = set(names) - set(variant_names())
    if unknown:
        parser.error(f"no such variant: {', '.join(sorted(unknown))}")

    builds = {}
    for name in names:
        cold = None
        if not args.skip_cold:
            with tempfile.TemporaryDirectory() as fresh:
                cold = timed_build(name, fresh)
        warm_dir = os.environ["TORCH_EXTENSIONS_DIR"]
        timed_build(name, warm_dir)               # make sure the shared cache holds it
        builds[name] = {"cold_build_s": cold, "warm_load_s": timed_build(name, warm_dir)}
        print(f"{name}: cold build {cold if cold is None else round(cold, 1)} s, "
              f"warm load {builds[name]['warm_load_s']:.1f} s", flush=True)

    if not torch.cuda.is_available():
        print(f"No CUDA device is visible: built {len(names)} variant(s), checked and timed nothing.")
        return 1

    gpu = torch.cuda.get_device_name()
    results = []
    for name in names:
        module = import_variant(name)
        result = evaluate(name, module.ModelNew, reps=args.reps, with_compile=not args.no_compile,
                          stages=getattr(module, "benchmark_stages", None))
        result.update(builds[name])
        results.append(result)
        print(f"{name}: {'pass' if result['pass'] else 'FAIL'}, {result['variant_ms']['median_ms']:.3f} ms",
              flush=True)

    print(f"\n{gpu}, torch {torch.__version__}, CUDA {torch.version.cuda}, "
          f"copy bandwidth {results[0]['bandwidth_gbs']:.0f} GB/s, commit {git_commit()[:12]}")
    print(format_tables(results))
    if args.json:
        meta = {"gpu": gpu, "torch": torch.__version__, "cuda": torch.version.cuda, "commit": git_commit(),
                "date": time.strftime("%Y-%m-%d %H:%M:%S")}
        with open(args.json, "w") as f:
            json.dump({"meta": meta, "results": results}, f, indent=2)
    ok = all(r["pass"] and r.get("grad_pass", True) for r in results)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
