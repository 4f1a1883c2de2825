"""The tensor-core conv engine (common/blocks/conv_igemm.h and conv_igemm_wgrad.h), built alone: it compiles (CPU, nvcc), and on a GPU its
Conv3d and ConvTranspose3d, their data gradients and their weight gradients agree with PyTorch's in float64 under
the fp32 accuracy rule, across kernel sizes, tuples, strides, paddings, channel counts and batches
(common/accuracy.py compare: relative L2 <= 1e-5, allclose 1e-4)."""
import hashlib
import pathlib

import pytest
import torch
import torch.nn.functional as F

import common.loading  # noqa: F401  (the build folder, CUDA_HOME, the target with no GPU; before cpp_extension)
from common.accuracy import compare, compare_half
from tests.conftest import needs_gpu, needs_nvcc

ROOT = pathlib.Path(__file__).resolve().parents[1]

CPP = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>
cudaError_t engine_forward(const void* x, const void* w, void* packed, const void* bias, void* y, int dtype,
                           const int* dims, const int* k, const int* s, const int* p, bool transposed, int products,
                           int tile, cudaStream_t stream);
cudaError_t engine_wgrad(const float* dir, const float* gat, double* partials, float* grad_weight, const int* dims,
                         const int* k, const int* s, const int* p, int splits, int products, cudaStream_t stream);
int engine_wgrad_splits(const int* dims, const int* k);
// (x, weight, bias or None, kernel, stride, padding, transposed, output size, products (0 split TF32, 1 TF32; half
// types always one exact product), tile (0: the engine's choice, conv_igemm_tile)) -> the conv's output in x's dtype.
torch::Tensor forward(torch::Tensor x, torch::Tensor w, c10::optional<torch::Tensor> bias, std::vector<int64_t> k,
                      std::vector<int64_t> s, std::vector<int64_t> p, bool transposed, std::vector<int64_t> out,
                      int64_t products, int64_t tile) {
    TORCH_CHECK(x.is_cuda() && x.dim() == 5 && x.is_contiguous() && w.is_contiguous() &&
                w.scalar_type() == x.scalar_type(), "engine: contiguous 5-D CUDA tensors of one dtype");
    const int dtype = x.scalar_type() == at::kFloat ? 0 : x.scalar_type() == at::kHalf ? 1 : 2;
    const c10::cuda::CUDAGuard guard(x.device());
    const int C_out = (int)(transposed ? w.size(1) : w.size(0));
    auto y = at::empty({x.size(0), C_out, out[0], out[1], out[2]}, x.options());
    auto packed = at::empty({w.numel()}, w.options());
    const int dims[9] = {(int)x.size(0), (int)x.size(1), C_out, (int)x.size(2), (int)x.size(3), (int)x.size(4),
                         (int)out[0], (int)out[1], (int)out[2]};
    const int kk[3] = {(int)k[0], (int)k[1], (int)k[2]}, ss[3] = {(int)s[0], (int)s[1], (int)s[2]};
    const int pp[3] = {(int)p[0], (int)p[1], (int)p[2]};
    const cudaError_t err = engine_forward(x.data_ptr(), w.data_ptr(), packed.data_ptr(),
                                           bias.has_value() ? bias->data_ptr() : nullptr, y.data_ptr(), dtype, dims, kk, ss, pp, transposed, (int)products,
                                           (int)tile, c10::cuda::getCurrentCUDAStream());
    TORCH_CHECK(err == cudaSuccess, "engine: ", cudaGetErrorString(err));
    return y;
}
// (Dir, Gat, kernel, stride, padding, products (0 split TF32, 1 TF32)) -> W' (Dir's channels, Gat's channels,
// kernel...), float32.
torch::Tensor wgrad(torch::Tensor dir, torch::Tensor gat, std::vector<int64_t> k, std::vector<int64_t> s,
                    std::vector<int64_t> p, int64_t products) {
    TORCH_CHECK(dir.is_cuda() && dir.scalar_type() == at::kFloat && dir.dim() == 5 && dir.is_contiguous() &&
                gat.is_contiguous() && gat.scalar_type() == at::kFloat, "engine: contiguous 5-D float32 tensors");
    const c10::cuda::CUDAGuard guard(dir.device());
    const int dims[9] = {(int)dir.size(0), (int)dir.size(1), (int)gat.size(1), (int)dir.size(2), (int)dir.size(3),
                         (int)dir.size(4), (int)gat.size(2), (int)gat.size(3), (int)gat.size(4)};
    const int kk[3] = {(int)k[0], (int)k[1], (int)k[2]}, ss[3] = {(int)s[0], (int)s[1], (int)s[2]};
    const int pp[3] = {(int)p[0], (int)p[1], (int)p[2]};
    const int splits = engine_wgrad_splits(dims, kk);
    auto grad_weight = at::empty({dir.size(1), gat.size(1), k[0], k[1], k[2]}, dir.options());
    auto partials = at::empty({(int64_t)splits * grad_weight.numel()}, dir.options().dtype(at::kDouble));
    const cudaError_t err = engine_wgrad(dir.data_ptr<float>(), gat.data_ptr<float>(), partials.data_ptr<double>(),
                                         grad_weight.data_ptr<float>(), dims, kk, ss, pp, splits, (int)products,
                                         c10::cuda::getCurrentCUDAStream());
    TORCH_CHECK(err == cudaSuccess, "engine: ", cudaGetErrorString(err));
    return grad_weight;
}
"""

LAUNCHER = r"""
static int sm_count() {
    int device = 0, sms = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess)
        return -1;
    return sms;
}
cudaError_t engine_forward(const void* x, const void* w, void* packed, const void* bias, void* y, int dtype,
                           const int* dims, const int* k, const int* s, const int* p, bool transposed, int products,
                           int tile, cudaStream_t stream) {
    const ConvGeom g{dims[0], dims[1], dims[2], dims[3], dims[4], dims[5], dims[6], dims[7], dims[8],
                     {k[0], k[1], k[2]}, {s[0], s[1], s[2]}, {p[0], p[1], p[2]}, transposed};
    return with_type(dtype, [&](auto t) {
        using T = decltype(t);
        const T* xt = static_cast<const T*>(x);
        const T* wt = static_cast<const T*>(w);
        T* pk = static_cast<T*>(packed);
        const StoreWithBias<T> store{static_cast<T*>(y), static_cast<const T*>(bias)};
        if (is_half<T>()) return conv_igemm_launch<T, IG_EXACT>(xt, wt, pk, g, store, stream, tile);
        return products == 1 ? conv_igemm_launch<T, IG_TF32>(xt, wt, pk, g, store, stream, tile)
                             : conv_igemm_launch<T, IG_SPLIT>(xt, wt, pk, g, store, stream, tile);
    });
}
static WgradGeom wgrad_geom(const int* dims, const int* k, const int* s, const int* p) {
    return WgradGeom{dims[0], dims[1], dims[2], dims[3], dims[4], dims[5], dims[6], dims[7], dims[8],
                     {k[0], k[1], k[2]}, {s ? s[0] : 1, s ? s[1] : 1, s ? s[2] : 1},
                     {p ? p[0] : 0, p ? p[1] : 0, p ? p[2] : 0}};
}
int engine_wgrad_splits(const int* dims, const int* k) {   // for the current device's SMs
    const int sms = sm_count();
    return conv_igemm_wgrad_splits(wgrad_geom(dims, k, nullptr, nullptr), sms > 0 ? sms : 1);
}
cudaError_t engine_wgrad(const float* dir, const float* gat, double* partials, float* grad_weight, const int* dims,
                         const int* k, const int* s, const int* p, int splits, int products, cudaStream_t stream) {
    const WgradGeom g = wgrad_geom(dims, k, s, p);
    return products == 1 ? conv_igemm_wgrad_launch<IG_TF32>(dir, gat, g, splits, partials, grad_weight, stream)
                         : conv_igemm_wgrad_launch<IG_SPLIT>(dir, gat, g, splits, partials, grad_weight, stream);
}
"""

_built = {}


def engine():
    """The engine's test extension (built once per source: its name carries the source's hash)."""
    if "ext" not in _built:
        from torch.utils.cpp_extension import load_inline
        blocks = ROOT / "common/blocks"
        cuda = "#include <cuda_runtime.h>\n#include <algorithm>\n#include <cstdint>\n#include <type_traits>\n" + "".join(
            (blocks / name).read_text() for name in ("element_types.h", "split_tf32.h", "finish_weight_grad_tiled.h",
                                                     "conv_igemm.h", "conv_igemm_wgrad.h")) + LAUNCHER
        digest = hashlib.sha256((CPP + cuda).encode()).hexdigest()[:12]
        _built["ext"] = load_inline(name=f"conv_engine_test_{digest}", cpp_sources=CPP, cuda_sources=cuda,
                                    functions=["forward", "wgrad"], extra_cuda_cflags=["-O3"], verbose=False)
    return _built["ext"]


def triple(v):
    return tuple(v) if isinstance(v, (tuple, list)) else (v, v, v)


# (label, transposed, C_in, C_out, kernel, stride, padding, input shape (B, D, H, W))
CASES = [
    ("kernel3", False, 3, 16, 3, 1, 0, (2, 6, 9, 11)),
    ("kernel1", False, 5, 7, 1, 1, 0, (3, 4, 5, 6)),
    ("kernel5_channels_32_64", False, 32, 64, 5, 1, 0, (2, 8, 12, 12)),
    ("tuple_kernel_stride_padding", False, 6, 20, (1, 3, 5), (1, 2, 3), (0, 1, 2), (2, 5, 11, 17)),
    ("channels_64_128", False, 64, 128, 3, 1, 1, (1, 4, 8, 9)),
    ("odd_channels_many_rows", False, 7, 65, 3, 2, 1, (5, 9, 10, 33)),
    ("transposed_k3_s2_p1", True, 3, 16, 3, 2, 1, (2, 4, 5, 6)),
    ("transposed_k3_s2_p1_channels_32_64", True, 32, 64, 3, 2, 1, (2, 4, 8, 8)),
    ("transposed_k4_s2_p1", True, 5, 12, 4, 2, 1, (2, 3, 5, 7)),
    ("transposed_k5_s3_p4", True, 4, 9, 5, 3, 4, (2, 3, 4, 5)),
    ("transposed_tuple", True, 6, 10, (1, 3, 5), (1, 2, 3), (0, 1, 2), (2, 3, 4, 5)),
    # 16-channel multiples: a stage is one tap's 16 channels (the gather's other path)
    ("channels_16_tuple_stride_padding", False, 16, 24, (1, 3, 5), (1, 2, 3), (0, 1, 2), (2, 5, 11, 17)),
    ("transposed_channels_16_k4_s2_p1", True, 16, 12, 4, 2, 1, (2, 3, 5, 7)),
    ("transposed_channels_32_k2_s3", True, 32, 8, 2, 3, 0, (2, 3, 4, 5)),   # stride > kernel: tapless classes
]


@needs_nvcc
def test_the_engine_builds():
    assert hasattr(engine(), "forward") and hasattr(engine(), "wgrad")


TILES = [1, 2]   # 64 x 32, 64 x 64 (conv_igemm_tile)


def case_tensors(case, dtype=torch.float32, seed=7):
    """A forward case's (x, weight, bias, kernel, stride, padding, conv) on the GPU in `dtype`."""
    _, transposed, c_in, c_out, kernel, stride, padding, (b, d, h, w) = case
    k, s, p = triple(kernel), triple(stride), triple(padding)
    gen = torch.Generator().manual_seed(seed)
    x = torch.rand((b, c_in, d, h, w), generator=gen).to("cuda", dtype)
    weight = (torch.randn((c_in, c_out) + k if transposed else (c_out, c_in) + k, generator=gen) * 0.2).to("cuda", dtype)
    bias = torch.randn(c_out, generator=gen).to("cuda", dtype)
    return x, weight, bias, k, s, p, F.conv_transpose3d if transposed else F.conv3d


@needs_gpu
@pytest.mark.parametrize("tile", TILES)
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_the_engine_matches_float64(case, tile):
    x, weight, bias, k, s, p, conv = case_tensors(case)
    transposed = case[1]
    truth = conv(x.double(), weight.double(), bias.double(), stride=s, padding=p)
    out = engine().forward(x, weight, bias, list(k), list(s), list(p), transposed, list(truth.shape[2:]), 0, tile)
    report = compare(out, truth)
    assert report.passed, report
    no_bias = engine().forward(x, weight, None, list(k), list(s), list(p), transposed, list(truth.shape[2:]), 0, tile)
    assert torch.equal(no_bias + bias.view(1, -1, 1, 1, 1), out)   # the bias added after the sums
    other = engine().forward(x, weight, bias, list(k), list(s), list(p), transposed, list(truth.shape[2:]), 0, 3 - tile)
    assert torch.equal(other, out)   # the tile changes which block sums a value, never the order of its sums


def round_tf32(t):
    """float32 values rounded to TF32 (10 mantissa bits) to nearest, ties to even."""
    bits = t.contiguous().view(torch.int32).to(torch.int64)
    bits = (bits + 0xFFF + ((bits >> 13) & 1)) & ~0x1FFF
    return bits.to(torch.int32).view(torch.float32)


@needs_gpu
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_the_engine_in_tf32_is_the_conv_of_rounded_operands(case):
    """One TF32 product a step: the conv of the operands rounded to TF32 (as cuDNN rounds them), in fp32 sums."""
    x, weight, bias, k, s, p, conv = case_tensors(case)
    transposed = case[1]
    truth = conv(round_tf32(x).double(), round_tf32(weight).double(), bias.double(), stride=s, padding=p)
    out = engine().forward(x, weight, bias, list(k), list(s), list(p), transposed, list(truth.shape[2:]), 1, 0)
    report = compare(out, truth)
    assert report.passed, report
    exact = engine().forward(x, weight, bias, list(k), list(s), list(p), transposed, list(truth.shape[2:]), 0, 0)
    assert not torch.equal(out, exact)   # it did round


@needs_gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_the_engine_in_half_precision(case, dtype):
    """Half operands: one exact product a step, fp32 sums, the output (with its bias) rounded once; against
    PyTorch's own conv in the dtype under the half-precision rule."""
    x, weight, bias, k, s, p, conv = case_tensors(case, dtype)
    transposed = case[1]
    expected = conv(x, weight, bias, stride=s, padding=p)
    truth = conv(x.double(), weight.double(), bias.double(), stride=s, padding=p)
    out = engine().forward(x, weight, bias, list(k), list(s), list(p), transposed, list(truth.shape[2:]), 0, 0)
    assert out.dtype == dtype
    report = compare_half(out, expected, truth)
    assert report.passed, report


def float64_gradients(case, seed):
    """A case's conv in float64 on the GPU with a random dL/dy: (transposed, kernel, stride, padding, x, weight,
    dL/dy, (dL/dx, dL/dW))."""
    _, transposed, c_in, c_out, kernel, stride, padding, (b, d, h, w) = case
    k, s, p = triple(kernel), triple(stride), triple(padding)
    gen = torch.Generator().manual_seed(seed)
    x = torch.rand((b, c_in, d, h, w), generator=gen, dtype=torch.float64).cuda().requires_grad_(True)
    weight = (torch.randn((c_in, c_out) + k if transposed else (c_out, c_in) + k, generator=gen,
                          dtype=torch.float64) * 0.2).cuda().requires_grad_(True)
    y = (F.conv_transpose3d if transposed else F.conv3d)(x, weight, stride=s, padding=p)
    grad_y = torch.randn(y.shape, generator=gen, dtype=torch.float64).cuda()
    grads = torch.autograd.grad(y, (x, weight), grad_y)
    return transposed, k, s, p, x.detach(), weight.detach(), grad_y, grads


# The data gradient of a Conv3d is the engine's transposed form over dL/dy with the conv's own weight, output sized
# as the input (what output_padding would fix for ConvTranspose3d); that of a ConvTranspose3d its plain form.
# (label, the forward conv transposed, C_in, C_out, kernel, stride, padding, the forward's input shape (B, D, H, W))
DGRAD_CASES = [
    ("conv3d_k3", False, 3, 24, 3, 1, 0, (2, 6, 9, 11)),
    ("conv3d_k3_s2_p1_odd_input", False, 5, 16, 3, 2, 1, (2, 7, 9, 10)),
    ("conv_transpose3d_k3_s2_p1", True, 3, 16, 3, 2, 1, (2, 4, 5, 6)),
]


@needs_gpu
@pytest.mark.parametrize("case", DGRAD_CASES, ids=[c[0] for c in DGRAD_CASES])
def test_the_engine_computes_data_gradients(case):
    transposed, k, s, p, x, weight, grad_y, (truth, _) = float64_gradients(case, seed=11)
    out = engine().forward(grad_y.float().contiguous(), weight.float().contiguous(), None, list(k), list(s), list(p),
                           not transposed, list(x.shape[2:]), 0, 0)
    report = compare(out, truth)
    assert report.passed, report


# The weight gradient: a Conv3d's is wgrad(dL/dy, x); a ConvTranspose3d's wgrad(x, dL/dy). Cases as DGRAD_CASES.
WGRAD_CASES = DGRAD_CASES + [
    ("conv3d_tuple", False, 6, 20, (1, 3, 5), (1, 2, 3), (0, 1, 2), (2, 5, 11, 17)),
    ("conv3d_channels_32_64_k5", False, 32, 64, 5, 1, 0, (3, 8, 12, 12)),
    ("conv_transpose3d_channels_32_64", True, 32, 64, 3, 2, 1, (2, 4, 8, 8)),
    ("conv_transpose3d_k5_s3_p4", True, 4, 9, 5, 3, 4, (2, 3, 4, 5)),
]


@needs_gpu
@pytest.mark.parametrize("case", WGRAD_CASES, ids=[c[0] for c in WGRAD_CASES])
def test_the_engine_computes_weight_gradients(case):
    transposed, k, s, p, x, weight, grad_y, (_, truth) = float64_gradients(case, seed=13)
    dir_, gat = (x, grad_y) if transposed else (grad_y, x)
    out = engine().wgrad(dir_.float().contiguous(), gat.float().contiguous(), list(k), list(s), list(p), 0)
    report = compare(out, truth)
    assert report.passed, report


@needs_gpu
@pytest.mark.parametrize("case", WGRAD_CASES, ids=[c[0] for c in WGRAD_CASES])
def test_the_engine_in_tf32_computes_the_weight_gradient_of_rounded_operands(case):
    """One TF32 product a step (PyTorch's conv backward under allow_tf32): the weight gradient of the operands
    rounded to TF32 to nearest even, in fp32 sums."""
    transposed, k, s, p, x, weight, grad_y, _ = float64_gradients(case, seed=13)
    xr, gr = round_tf32(x.float()).double(), round_tf32(grad_y.float()).double()
    w = weight.double().requires_grad_(True)   # dL/dW does not depend on the weight's values
    y = (F.conv_transpose3d if transposed else F.conv3d)(xr, w, stride=s, padding=p)
    (truth,) = torch.autograd.grad(y, (w,), gr)
    dir_, gat = (x, grad_y) if transposed else (grad_y, x)
    out = engine().wgrad(dir_.float().contiguous(), gat.float().contiguous(), list(k), list(s), list(p), 1)
    report = compare(out, truth)
    assert report.passed, report
    exact = engine().wgrad(dir_.float().contiguous(), gat.float().contiguous(), list(k), list(s), list(p), 0)
    assert not torch.equal(out, exact)   # it did round

