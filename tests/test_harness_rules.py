"""CPU: every variant file passes the static rules of KernelBench's checker (ScalingIntelligence/KernelBench,
src/kernelbench/kernel_static_checker.py, `validate_kernel_static(code, backend="cuda", precision="fp32")`)
with no error and no warning.

That checker reads the file as text: it drops everything after the first `#` or `//` of each line, then
searches what is left (docstrings and strings included) with regular expressions. These are the same
rules, restated here so that CI catches a file the harness would reject. Anything that reads as a
bypass (the bare word `pass`, `try:`, `except`) fails the file; so do threads, timing patches and tensor
subclasses; PyTorch compute layers and functions, streams and fp16 casts are warnings, which we also
refuse.
"""
import re

import pytest

from common.loading import variant_names, variant_path

NAMES = variant_names()

ERRORS = {   # rule -> patterns; any match is a rejection
    "bypass (try/except)": [r"\btry\s*:", r"\bexcept\s*:", r"\bexcept\s+\w+"],
    "bypass (the word pass)": [r"\bpass\b"],
    "timing patch": [r"torch\.cuda\.Event\.(record|elapsed_time)\s*=", r"torch\.cuda\.synchronize\s*=",
                     r"torch\.cuda\.Event\s*=", r"time\.(perf_counter|time)\s*="],
    "threads": [r"threading\.Thread\s*\(", r"import\s+threading", r"from\s+threading\s+import",
                r"multiprocessing\.(Process|Pool|Manager|Queue|Pipe)", r"import\s+multiprocessing",
                r"concurrent\.futures", r"ThreadPoolExecutor", r"ProcessPoolExecutor"],
    "tensor subclass": [r"_make_subclass", r"class\s+\w+.*\(torch\.Tensor\)", r"class\s+\w+.*\(Tensor\)",
                        r"torch\.Tensor\.__new__"],
}
TORCH_COMPUTE = ("mm bmm matmul einsum conv1d conv2d conv3d conv conv_transpose1d conv_transpose2d "
                 "conv_transpose3d avg_pool1d avg_pool2d avg_pool3d max_pool1d max_pool2d max_pool3d "
                 "adaptive_avg_pool1d adaptive_avg_pool2d adaptive_avg_pool3d adaptive_max_pool1d "
                 "adaptive_max_pool2d adaptive_max_pool3d relu hardtanh elu selu leaky_relu gelu softsign "
                 "softplus softmax log_softmax tanh sigmoid hardsigmoid silu mish batch_norm group_norm "
                 "layer_norm instance_norm rms_norm normalize linear cross_entropy kl_div mse_loss huber_loss "
                 "triplet_margin_loss cosine_similarity logsumexp clamp dropout").split()
WARNINGS = {   # rule -> patterns; the harness only warns, we refuse them too
    "torch.nn compute layer": [r"torch\.nn\.(?!(Module|parameter|Parameter|ParameterList|ParameterDict|"
                               r"ModuleList|ModuleDict|init)\b)"],
    "torch compute op": [r"\btorch\.(" + "|".join(TORCH_COMPUTE) + r")(?=\s*\(|\s|$)",
                         r"torch\.nn\.functional\.\w+", r"\bnn\.functional\.\w+",
                         r"\bF\.(conv|linear|relu|gelu|softmax|batch_norm|layer_norm|dropout|max_pool|avg_pool)"],
    "streams": [r"torch\.cuda\.Stream\s*\(", r"cuda\.Stream\s*\(", r"with\s+torch\.cuda\.stream",
                r"\.wait_stream\s*\(", r"\.record_stream\s*\("],
    "fp16 downgrade": [r"__float2half(_rn)?\s*\(", r"\(\s*__half\s*\)\s*[\w\->\.]+",
                       r"static_cast\s*<\s*(__half|half)\s*>\s*\(", r"\.half\s*\(", r"\.float16\s*\(",
                       r"\.to\s*\(\s*torch\.(float16|half)\b", r"\.to\s*\(\s*dtype\s*=\s*torch\.(float16|half)\b"],
}


def harness_view(text):
    """The text as the checker searches it: each line cut at its first `#`, then at its first `//`."""
    lines = []
    for line in text.split("\n"):
        line = line.split("#", 1)[0]
        lines.append(line.split("//", 1)[0])
    return "\n".join(lines)


def violations(text):
    """[(rule, the matched text, line number)] for every rule the text breaks."""
    view = harness_view(text)
    found = []
    for rule, patterns in {**ERRORS, **WARNINGS}.items():
        for pattern in patterns:
            for m in re.finditer(pattern, view):
                found.append((rule, m.group(0), view.count("\n", 0, m.start()) + 1))
    if "__global__" not in view:
        found.append(("no __global__ kernel outside comments", "", 0))
    if "load_inline" not in view and "cpp_extension" not in view:
        found.append(("no load_inline or cpp_extension", "", 0))
    return found


@pytest.mark.parametrize("name", NAMES)
def test_variant_passes_the_harness_static_rules(name):
    found = violations(variant_path(name).read_text())
    assert not found, "\n".join(f"line {line}: {rule}: {hit!r}" for rule, hit, line in found)


@pytest.mark.parametrize("snippet,rule", [
    ('"""phase 1, then pass 2"""', "bypass (the word pass)"),
    ("x = 1  # a comment may say pass\ny = '''everything except the conv'''", "bypass (try/except)"),
    ("    try:\n        f()", "bypass (try/except)"),
    ("import threading", "threads"),
    ("y = torch.sigmoid(x)", "torch compute op"),
    ("conv = torch.nn.Conv3d(3, 16, 3)", "torch.nn compute layer"),
    ("s = torch.cuda.Stream()", "streams"),
    ("h = x.half()", "fp16 downgrade"),
    ("// __global__ only in a comment\nload_inline", "no __global__ kernel outside comments"),
])
def test_rules_catch_what_the_harness_rejects(snippet, rule):
    """Negative controls: each snippet breaks the named rule."""
    assert rule in {r for r, _, _ in violations(snippet)}


def test_comments_are_cut_as_the_harness_cuts_them():
    ok = "__global__ void k() {}  // the pass over y\nload_inline  # pass\n#include <cstdint>  try: pass"
    assert violations(ok) == []
