"""Run one variant at its benchmark size for a profiler to watch: a few warm-up steps, then one step inside a
profiler range (cudaProfilerStart / Stop), so that `ncu --profile-from-start off` sees exactly that step's kernels.

    python tools/profile_one.py NAME [fp32|bf16|fp16] [forward|train]
    ncu --clock-control none --profile-from-start off --section SpeedOfLight --section Occupancy \\
        --section ComputeWorkloadAnalysis python tools/profile_one.py NAME bf16 train

NAME: a file under variants/ without its .py (python tools/profile_one.py with no NAME lists them). The dtype
casts model and input as KernelBench's tracks do (default fp32); train runs forward + backward (default forward,
under no_grad). Needs a GPU. docs/profiles.md has a table made this way.
"""
import sys

import torch

sys.path.insert(0, __import__("pathlib").Path(__file__).resolve().parents[1].as_posix())
from common.accuracy import DTYPES, models_in  # noqa: E402
from common.inputs import make_input, make_models  # noqa: E402
from common.loading import import_variant, variant_names  # noqa: E402
from common.problems import PROBLEMS  # noqa: E402

MODES = ("forward", "train")
args = sys.argv[1:]
if not (1 <= len(args) <= 3 and args[0] in PROBLEMS and (len(args) < 2 or args[1] in DTYPES)
        and (len(args) < 3 or args[2] in MODES)):
    sys.exit(__doc__ + "\nNAMEs: " + ", ".join(n for n in variant_names() if n in PROBLEMS))
if not torch.cuda.is_available():
    sys.exit("tools/profile_one.py: needs a CUDA GPU (none is visible)")
name, dtype, mode = args[0], DTYPES[args[1] if len(args) > 1 else "fp32"], args[2] if len(args) > 2 else "forward"
problem = PROBLEMS[name]
_, model = make_models(problem.model, import_variant(name).ModelNew, problem.init_args, "cuda")
if dtype != torch.float32:
    (model,) = models_in(dtype, model)
x = make_input(problem.input_shape, 0, "cuda").to(dtype)
if mode == "train":
    x.requires_grad_(True)
    with torch.no_grad():
        grad_out = torch.randn_like(model(x))

    def step():
        model(x).backward(grad_out)
else:
    def step():
        with torch.no_grad():
            model(x)
for _ in range(3):
    step()
torch.cuda.synchronize()
torch.cuda.profiler.start()
step()
torch.cuda.synchronize()
torch.cuda.profiler.stop()
