"""Run one variant's forward a few times at its benchmark size, for a profiler to watch.

    ncu --clock-control none -k regex:KERNEL python tools/profile_one.py NAME
"""
import sys

import torch

sys.path.insert(0, __import__("pathlib").Path(__file__).resolve().parents[1].as_posix())
from common.inputs import make_input, make_models  # noqa: E402
from common.loading import import_variant  # noqa: E402
from common.problems import PROBLEMS  # noqa: E402

name = sys.argv[1]
problem = PROBLEMS[name]
_, model = make_models(problem.model, import_variant(name).ModelNew, problem.init_args, "cuda")
x = make_input(problem.input_shape, 0, "cuda")
with torch.no_grad():
    for _ in range(3):
        model(x)
torch.cuda.synchronize()
