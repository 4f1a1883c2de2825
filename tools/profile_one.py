"""Run one variant's forward a few times at its benchmark size, for a profiler to watch.

    python tools/profile_one.py NAME
    ncu --clock-control none -k regex:KERNEL python tools/profile_one.py NAME

NAME: a file under variants/ without its .py (python tools/profile_one.py with no NAME lists them). Needs a GPU.
"""
import sys

import torch

sys.path.insert(0, __import__("pathlib").Path(__file__).resolve().parents[1].as_posix())
from common.inputs import make_input, make_models  # noqa: E402
from common.loading import import_variant, variant_names  # noqa: E402
from common.problems import PROBLEMS  # noqa: E402

if len(sys.argv) != 2 or sys.argv[1] not in PROBLEMS:
    sys.exit(__doc__ + "\nNAMEs: " + ", ".join(n for n in variant_names() if n in PROBLEMS))
if not torch.cuda.is_available():
    sys.exit("tools/profile_one.py: needs a CUDA GPU (none is visible)")
name = sys.argv[1]
problem = PROBLEMS[name]
_, model = make_models(problem.model, import_variant(name).ModelNew, problem.init_args, "cuda")
x = make_input(problem.input_shape, 0, "cuda")
with torch.no_grad():
    for _ in range(3):
        model(x)
torch.cuda.synchronize()
