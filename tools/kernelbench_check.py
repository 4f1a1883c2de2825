"""Run every variant file through KernelBench's own harness and print one table.

    python tools/kernelbench_check.py KERNELBENCH_DIR [--precision fp32|fp16|bf16] [--no-tf32] [--only NAME]
                                      [--previous | --revision REV | --references DIR] [--markdown PATH]

KERNELBENCH_DIR is a checkout of github.com/ScalingIntelligence/KernelBench (its `src/kernelbench` package
and its `KernelBench/level2` references are used; nothing of it is copied here). For each file: its static
checker, `validate_kernel_static(src, backend="cuda", precision=PRECISION)`, then
`eval_kernel_against_ref(reference, src, num_correct_trials=5, measure_performance=True, precision=...)`
against the matching level-2 reference: in fp16 and bf16 KernelBench casts model and inputs to that dtype and
compares at atol = rtol = 1e-2 (1e-4 in fp32). torch.backends.cudnn.allow_tf32 stays at PyTorch's default (on)
or, with --no-tf32, off. KernelBench flags a speedup above 10x as "excessive" for a human to check.

KernelBench's previous sizes (its problem files before July 2025, "v0": problems 23, 60 and 92 with other
channel counts and sizes, inputs from torch.randn; problem 27 was then a different model): --previous takes the
references from that revision of a git checkout of KernelBench (--revision REV: any revision); --references DIR
takes them from a folder of level-2 problem files (for instance extracted with `git show REV:KernelBench/level2/F`);
either skips, with a line, a problem whose reference file there is named otherwise than in the checkout (another model).
KernelBench execs the reference and then the file into one namespace, so the file's own size globals and
get_inputs() (today's sizes) would replace the reference's; for these runs the reference's size block (from its
`batch_size = ...` line to its end) is appended to the file's text, as a user would set the file to those sizes.
The static check reads the file unchanged.

KernelBench's package imports LLM client libraries at import time that this check never calls (openai,
litellm, python-dotenv); they are stubbed here rather than installed. It needs pydantic, requests, tqdm
and numpy.
"""
import argparse
import pathlib
import subprocess
import sys
import types

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from common.loading import variant_names, variant_path  # noqa: E402  (sets the build defaults)
from common.evaluate import format_table  # noqa: E402
from common.problems import PROBLEMS  # noqa: E402

import torch  # noqa: E402

STUBS = {"dotenv": {"load_dotenv": lambda *a, **k: None}, "openai": {"OpenAI": object},
         "litellm": {"completion": None}}


def import_kernelbench(kernelbench_dir):
    for module, names in STUBS.items():
        if module not in sys.modules:
            stub = types.ModuleType(module)
            stub.__dict__.update(names)
            sys.modules[module] = stub
    sys.path.insert(0, str(pathlib.Path(kernelbench_dir) / "src"))
    from kernelbench import eval as kb_eval, kernel_static_checker
    return kb_eval, kernel_static_checker


PREVIOUS = "21fbe5a"          # KernelBench's last revision before its July 2025 resizing (v0 sizes)


def level2_folder(kernelbench_dir, references=None):
    """The folder of level-2 problem files: `references`, or the checkout's."""
    return pathlib.Path(references) if references else pathlib.Path(kernelbench_dir) / "KernelBench" / "level2"


def reference_file(kernelbench_dir, problem_id, revision=None, references=None):
    """The file name of problem `problem_id`'s level-2 reference there (None where there is no single one)."""
    if revision:
        names = subprocess.run(["git", "-C", str(kernelbench_dir), "ls-tree", "--name-only", revision,
                                "KernelBench/level2/"], check=True, capture_output=True, text=True).stdout.split()
        matches = [pathlib.Path(n).name for n in names if pathlib.Path(n).name.startswith(f"{problem_id}_")]
    else:
        matches = [p.name for p in level2_folder(kernelbench_dir, references).glob(f"{problem_id}_*.py")]
    return matches[0] if len(matches) == 1 else None


def reference_source(kernelbench_dir, problem_id, revision=None, references=None):
    """The level-2 reference of `problem_id`: from the checkout, from a git revision of it, or from a folder."""
    name = reference_file(kernelbench_dir, problem_id, revision, references)
    if name is None:
        where = f"at {revision}" if revision else f"under {level2_folder(kernelbench_dir, references)}"
        raise SystemExit(f"no single level-2 reference for problem {problem_id} {where}")
    if revision:
        return subprocess.run(["git", "-C", str(kernelbench_dir), "show", f"{revision}:KernelBench/level2/{name}"],
                              check=True, capture_output=True, text=True).stdout
    return (level2_folder(kernelbench_dir, references) / name).read_text()


def same_model(names, kernelbench_dir, revision=None, references=None, log=print):
    """The variants whose problem has the same model there as in the checkout: its reference file named as today's
    (KernelBench names a file after its model's ops; problem 27 was another model before July 2025)."""
    kept = []
    for n in names:
        pid = PROBLEMS[n].kernelbench_id
        then, now = reference_file(kernelbench_dir, pid, revision, references), reference_file(kernelbench_dir, pid)
        if then is not None and then == now:
            kept.append(n)
        else:
            log(f"{n}: skipped, problem {pid} there is {then or 'absent'}, not today's model {now}")
    return kept


PRECISIONS = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


def with_reference_sizes(src, reference):
    """The variant's text with the reference's size block (from its `batch_size = ` line on) appended."""
    start = reference.find("\nbatch_size")
    if start < 0:
        raise SystemExit("the reference has no `batch_size = ...` block to take its sizes from")
    return f"{src}\n\n# The reference's sizes (appended by tools/kernelbench_check.py)\n{reference[start + 1:]}"


def check(name, kernelbench_dir, kb_eval, checker, precision="fp32", revision=None, references=None):
    src = variant_path(name).read_text()
    valid, errors, warnings = checker.validate_kernel_static(src, backend="cuda", precision=precision)
    row = {"name": name, "static": "ok" if valid and not warnings else "; ".join(errors + warnings)}
    reference = reference_source(kernelbench_dir, PROBLEMS[name].kernelbench_id, revision, references)
    if revision or references:   # other sizes than the file's: the reference's, as KernelBench will run it
        src = with_reference_sizes(src, reference)
    result = kb_eval.eval_kernel_against_ref(
        reference, src, num_correct_trials=5,
        num_perf_trials=100, measure_performance=True, device=torch.device("cuda", 0), backend="cuda",
        precision=PRECISIONS[precision])
    if result is None:
        row.update(correct="build lock error", ms=float("nan"), ref_ms=float("nan"))
        return row
    meta = result.metadata
    row["correct"] = meta.get("correctness_trials", "not compiled" if not result.compiled else "error")
    if not result.correctness and "max_difference" in meta:
        row["correct"] += f" (max diff {', '.join(meta['max_difference'])})"
    if "runtime_error" in meta or "compilation_error" in meta:
        row["correct"] += f" {meta.get('runtime_error', meta.get('compilation_error'))}"[:200]
    row["ms"], row["ref_ms"] = result.runtime, result.ref_runtime
    row["excessive"] = "yes" if meta.get("excessive_speedup") else "no"
    return row


COLUMNS = [("variant", "name", "{}"), ("static check", "static", "{}"), ("correct trials", "correct", "{}"),
           ("ms", "ms", "{:.3f}"), ("reference ms", "ref_ms", "{:.3f}"),
           ("speedup", lambda r: f"{r['ref_ms'] / r['ms']:.2f}" if r["ms"] > 0 else "-", "{}"),
           (">10x flag", lambda r: r.get("excessive", "-"), "{}")]


def table(rows):
    return format_table(rows, COLUMNS)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("kernelbench_dir")
    parser.add_argument("--precision", choices=sorted(PRECISIONS), default="fp32",
                        help="KernelBench's precision track: the dtype model and inputs are cast to")
    parser.add_argument("--no-tf32", action="store_true", help="torch.backends.cudnn.allow_tf32 = False")
    parser.add_argument("--only", action="append", help="variant name (repeatable)")
    sizes = parser.add_mutually_exclusive_group()
    sizes.add_argument("--previous", action="store_true",
                       help=f"KernelBench's previous sizes: the references at revision {PREVIOUS} (a git checkout), "
                            "for the problems with the same model then (same_model: 23, 60 and 92)")
    sizes.add_argument("--revision", help="the references at this git revision of KERNELBENCH_DIR")
    sizes.add_argument("--references", help="the references from this folder of level-2 problem files")
    parser.add_argument("--markdown", help="append the table here")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("No CUDA device is visible: KernelBench's harness needs one.")
        return 1
    kb_eval, checker = import_kernelbench(args.kernelbench_dir)
    torch.backends.cudnn.allow_tf32 = not args.no_tf32
    revision = PREVIOUS if args.previous else args.revision
    names = args.only or variant_names()
    if revision or args.references:
        names = same_model(names, args.kernelbench_dir, revision, args.references)
    if (revision or args.references) and not args.only:   # other sizes: the full modules (the concise file takes
        names = [n for n in names if PROBLEMS[n].full]    # the benchmark's channels only)
    rows = [check(name, args.kernelbench_dir, kb_eval, checker, args.precision, revision, args.references)
            for name in names]
    source = (f", references at KernelBench {revision}" if revision else
              f", references from {args.references}" if args.references else "")
    title = (f"KernelBench harness, {args.precision}, {torch.cuda.get_device_name()}, torch {torch.__version__}, "
             f"torch.backends.cudnn.allow_tf32 = {torch.backends.cudnn.allow_tf32}{source}")
    print(f"\n{title}\n{table(rows)}")
    if args.markdown:
        with open(args.markdown, "a") as f:
            f.write(f"{title}:\n\n{table(rows)}\n\n")
    ok = all(r["static"] == "ok" and r["correct"] == "(5 / 5)" for r in rows)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
