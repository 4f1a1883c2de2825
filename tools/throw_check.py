"""Does a TORCH_CHECK thrown from an inline extension reach Python on this torch? (diagnostic)"""
import inspect
import sys

import torch
from torch.utils.cpp_extension import load_inline

SRC = r"""
#include <torch/extension.h>
int64_t check_rank(torch::Tensor x) { TORCH_CHECK(x.dim() == 5, "want 5-D, got ", x.dim(), "-D"); return x.dim(); }
int64_t check_rank_str(torch::Tensor x) { TORCH_CHECK(x.dim() == 5, "want 5-D, got " + std::to_string(x.dim()) + "-D"); return x.dim(); }
int64_t check_cuda(torch::Tensor x) { TORCH_CHECK(x.is_cuda(), "want CUDA, got ", x.device()); return 0; }
"""
light = sys.argv[1] == "light"
opts = {"no_implicit_headers": True} if light and "no_implicit_headers" in inspect.signature(load_inline).parameters else {}
ext = load_inline(name=f"throw_check_{sys.argv[1]}", cpp_sources=SRC, functions=["check_rank", "check_rank_str", "check_cuda"], **opts)
fn = getattr(ext, sys.argv[2])
x = torch.rand(2, 3, 4, 5, device=sys.argv[3])
try:
    fn(x)
    print(sys.argv[1:], "no error")
except RuntimeError as e:
    print(sys.argv[1:], "raised:", str(e).splitlines()[0])
