"""Conv3d -> GroupNorm -> mean over (C, D, H, W), concise (KernelBench level 2, problem 23; its brief asks for code
as concise as possible, fp32, on PyTorch 2.1.2 too).

The mean of a GroupNorm output needs, per sample, only each channel's sum S_c and sum of squares Q_c of the conv
output y: with N positions, mu_g = sum_{c in g} S_c / (N C_g), var_g = sum_{c in g} Q_c / (N C_g) - mu_g^2,
    out[b] = mean_c(gamma_c (S_c / N - mu_g) / sqrt(var_g + eps) + beta_c).
Two kernels, nothing of the conv output stored:
  conv_sums_kernel   a thread computes 4 adjacent outputs of one row for 12 channels (48 fp32 accumulators; the
                     weights in shared memory, 4 channels a 16-byte load), for 2 row pieces in turn, adding y and y^2
                     per channel; a block (256 consecutive row pieces of one output depth, 12 channels) writes its
                     sums, added across the block in double in a fixed order.
  finalize_kernel    per sample: the blocks' sums added in a fixed order (double), the group statistics, out[b].
Plain FP32 multiply-adds, so exact under either torch.backends.cudnn.allow_tf32 setting; deterministic.
What it computes: kernel size 3, in_channels 3, out_channels 24 (the benchmark's), any num_groups that divides
24, any batch and spatial size; float32 CUDA input; forward only. Anything else is refused with a ValueError, and a
backward through it raises a RuntimeError. For other configurations, half precision, training or torch.compile use
conv3d_groupnorm_mean.py, the full module (its conv on the tensor cores: about 2x faster here).
Floor at the benchmark (128 x 3 x 24 x 32 x 32): 4.9 G multiply-adds, 0.147 ms at 67 TFLOP/s. Measured (H200,
GPU time): 0.35 ms, eager 1.19, the full file 0.17; issue-bound (ncu of the 0.44 ms version: 69% of issue slots
busy, a third of the instructions not multiply-adds). The variants tried: docs/conv3d_groupnorm_mean.md.
Run: python variants/conv3d_groupnorm_mean_concise.py
"""
import inspect
import os
import sys

import torch
import torch.nn as nn

if __name__ == "__main__":   # run from the repository: build where run_all.py and the tests build
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    import common.loading  # noqa: F401  (the build folder, CUDA_HOME, the target with no GPU; before cpp_extension)

from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <cuda_runtime.h>

constexpr int C_IN = 3, C_OUT = 24, K = 3, TAPS = C_IN * K * K * K;
constexpr int P = 4;              // adjacent output columns a thread
constexpr int CT = 12;            // output channels a thread: two blocks (grid y) share a tile's 24
constexpr int ITEMS = 2;          // row pieces a thread, one after the other (at most 8 values a sum in fp32)
constexpr int THREADS = 128;      // 4 warps; a block takes THREADS * ITEMS consecutive row pieces
static_assert(C_OUT % CT == 0 && CT % 4 == 0, "a thread's channels: 16-byte weight loads");

// Sums of y and y^2 per channel over a block's outputs. Block: THREADS * ITEMS consecutive (row, column piece) items
// of one (sample, output depth), tile `tile` of that plane, channels blockIdx.y * CT on. partials: (B, Do * tiles,
// C_OUT, 2).
__global__ void __launch_bounds__(THREADS, 4) conv_sums_kernel(
    const float* __restrict__ x,        // (B, C_IN, D, H, W), contiguous
    const float* __restrict__ weight,   // (C_OUT, C_IN, K, K, K), contiguous
    const float* __restrict__ bias,     // (C_OUT)
    double* __restrict__ partials, int D, int H, int W, int tiles)
{
    __shared__ __align__(16) float w_s[TAPS][CT];   // (ci, kd, kh, kw) major, the block's channels contiguous
    __shared__ double red[THREADS / 32][CT][2];
    const int c0 = blockIdx.y * CT;
    for (int i = threadIdx.x; i < TAPS * CT; i += THREADS) w_s[i % TAPS][i / TAPS] = weight[c0 * TAPS + i];
    __syncthreads();
    const int Do = D - K + 1, Ho = H - K + 1, Wo = W - K + 1, pieces = (Wo + P - 1) / P;
    const long long blk = blockIdx.x, b = blk / ((long long)Do * tiles);
    const int od = (int)(blk / tiles % Do);
    float sum[CT] = {}, sq[CT] = {};
    for (int it = 0; it < ITEMS; ++it) {
        const int item = ((int)(blk % tiles) * ITEMS + it) * THREADS + threadIdx.x;
        const int oh = item / pieces, ow = item % pieces * P;
        const float* base = x + ((b * C_IN * D + od) * H + min(oh, Ho - 1)) * (long long)W;
        float acc[CT][P], v[P + K - 1];
        for (int co = 0; co < CT; ++co)
            for (int p = 0; p < P; ++p) acc[co][p] = bias[c0 + co];
        for (int ci = 0; ci < C_IN; ++ci)
            for (int kd = 0; kd < K; ++kd)
#pragma unroll
                for (int kh = 0; kh < K; ++kh) {
                    const float* row = base + ((long long)(ci * D + kd) * H + kh) * W;
#pragma unroll
                    for (int j = 0; j < P + K - 1; ++j) v[j] = __ldg(row + min(ow + j, W - 1));   // past W: masked
#pragma unroll
                    for (int kw = 0; kw < K; ++kw) {
                        const float4* w4 = reinterpret_cast<const float4*>(w_s[((ci * K + kd) * K + kh) * K + kw]);
#pragma unroll
                        for (int q = 0; q < CT / 4; ++q) {
                            const float4 w = w4[q];
#pragma unroll
                            for (int p = 0; p < P; ++p) {
                                acc[4 * q][p] = fmaf(w.x, v[p + kw], acc[4 * q][p]);
                                acc[4 * q + 1][p] = fmaf(w.y, v[p + kw], acc[4 * q + 1][p]);
                                acc[4 * q + 2][p] = fmaf(w.z, v[p + kw], acc[4 * q + 2][p]);
                                acc[4 * q + 3][p] = fmaf(w.w, v[p + kw], acc[4 * q + 3][p]);
                            }
                        }
                    }
                }
#pragma unroll
        for (int co = 0; co < CT; ++co)
#pragma unroll
            for (int p = 0; p < P; ++p)
                if (oh < Ho && ow + p < Wo) {
                    sum[co] += acc[co][p];
                    sq[co] = fmaf(acc[co][p], acc[co][p], sq[co]);
                }
    }
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
#pragma unroll
    for (int co = 0; co < CT; ++co) {
        double s = sum[co], q = sq[co];
        for (int o = 16; o > 0; o /= 2) {   // a fixed tree in double: the same sums every run
            s += __shfl_xor_sync(0xffffffffu, s, o);
            q += __shfl_xor_sync(0xffffffffu, q, o);
        }
        if (lane == 0) { red[warp][co][0] = s; red[warp][co][1] = q; }
    }
    __syncthreads();
    if (threadIdx.x < 2 * CT) {
        double t = 0;
        for (int w = 0; w < THREADS / 32; ++w) t += red[w][threadIdx.x / 2][threadIdx.x % 2];
        partials[blk * 2 * C_OUT + 2 * c0 + threadIdx.x] = t;
    }
}

// out[b] from sample b's partials (n_blocks of them), added in order. One block of 64 threads a sample.
__global__ void finalize_kernel(const double* __restrict__ partials, const float* __restrict__ gn_weight,
                                const float* __restrict__ gn_bias, float* __restrict__ out, int n_blocks,
                                int groups, double n, double eps)
{
    __shared__ double sums[2 * C_OUT];
    const double* part = partials + (size_t)blockIdx.x * n_blocks * 2 * C_OUT;
    if (threadIdx.x < 2 * C_OUT) {
        double t = 0;
        for (int i = 0; i < n_blocks; ++i) t += part[(size_t)i * 2 * C_OUT + threadIdx.x];
        sums[threadIdx.x] = t;
    }
    __syncthreads();
    if (threadIdx.x != 0) return;
    const int cg = C_OUT / groups;
    double total = 0;
    for (int g = 0; g < groups; ++g) {
        double s = 0, q = 0;
        for (int c = g * cg; c < (g + 1) * cg; ++c) { s += sums[2 * c]; q += sums[2 * c + 1]; }
        const double mu = s / (n * cg), rstd = 1.0 / sqrt(fmax(q / (n * cg) - mu * mu, 0.0) + eps);
        for (int c = g * cg; c < (g + 1) * cg; ++c)
            total += gn_weight[c] * (sums[2 * c] / n - mu) * rstd + gn_bias[c];
    }
    out[blockIdx.x] = (float)(total / C_OUT);
}

// The two kernels on `stream`; partials: partials_doubles(B, D, H, W) doubles of workspace.
int conv_tiles(int H, int W) {
    return ((H - K + 1) * ((W - K + 1 + P - 1) / P) + THREADS * ITEMS - 1) / (THREADS * ITEMS);
}
long long partials_doubles(long long B, int D, int H, int W) { return B * (D - K + 1) * conv_tiles(H, W) * 2 * C_OUT; }
cudaError_t launch(const float* x, const float* weight, const float* bias, const float* gn_weight, const float* gn_bias,
                   double* partials, float* out, long long B, int D, int H, int W, int groups, double eps,
                   cudaStream_t stream) {
    const int Do = D - K + 1, tiles = conv_tiles(H, W);
    conv_sums_kernel<<<dim3((unsigned)(B * Do * tiles), C_OUT / CT), THREADS, 0, stream>>>(x, weight, bias, partials, D,
                                                                                      H, W, tiles);
    finalize_kernel<<<(unsigned)B, 64, 0, stream>>>(partials, gn_weight, gn_bias, out, Do * tiles, groups,
                                                    (double)Do * (H - K + 1) * (W - K + 1), eps);
    return cudaGetLastError();
}
"""

cpp_source = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>
long long partials_doubles(long long B, int D, int H, int W);
cudaError_t launch(const float* x, const float* weight, const float* bias, const float* gn_weight, const float* gn_bias,
                   double* partials, float* out, long long B, int D, int H, int W, int groups, double eps,
                   cudaStream_t stream);

torch::Tensor forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, torch::Tensor gn_weight,
                      torch::Tensor gn_bias, int64_t groups, double eps) {
    x = x.contiguous();
    const int64_t B = x.size(0), D = x.size(2), H = x.size(3), W = x.size(4);
    auto out = torch::empty({B}, x.options());
    if (B == 0) return out;
    auto partials = torch::empty({partials_doubles(B, (int)D, (int)H, (int)W)}, x.options().dtype(torch::kFloat64));
    const cudaError_t err = launch(x.data_ptr<float>(), weight.contiguous().data_ptr<float>(),
        bias.contiguous().data_ptr<float>(), gn_weight.contiguous().data_ptr<float>(),
        gn_bias.contiguous().data_ptr<float>(), partials.data_ptr<double>(), out.data_ptr<float>(), B, (int)D, (int)H,
        (int)W, (int)groups, eps, c10::cuda::getCurrentCUDAStream());
    TORCH_CHECK(err == cudaSuccess, "conv3d_groupnorm_mean_concise: launch failed: ", cudaGetErrorString(err));
    return out;
}
"""

print("conv3d_groupnorm_mean_concise: building or loading its CUDA extension (a build takes about 30 s)",
      file=sys.stderr)
_ext = load_inline(name="concise_conv3d_gn_mean_ext", cpp_sources=cpp_source, cuda_sources=cuda_source,
                   functions=["forward"], extra_cuda_cflags=["-O3"], verbose=False,   # torch >= 2.7: a lean .cu
                   **({"no_implicit_headers": True} if "no_implicit_headers" in inspect.signature(load_inline).parameters
                      else {}))


class _Forward(torch.autograd.Function):
    """The model as one autograd node: forward only; its backward says where training is served."""

    @staticmethod
    def forward(ctx, x, weight, bias, gn_weight, gn_bias, groups, eps):
        return _ext.forward(x, weight, bias, gn_weight, gn_bias, groups, eps)

    @staticmethod
    def backward(ctx, grad_out):
        raise RuntimeError("conv3d_groupnorm_mean_concise computes the forward only; for gradients use "
                           "variants/conv3d_groupnorm_mean.py (same parameters, state_dict compatible)")


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, num_groups):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size)
        self.group_norm = nn.GroupNorm(num_groups, out_channels)
        if (in_channels, out_channels, self.conv.kernel_size) != (3, 24, (3, 3, 3)):
            raise ValueError(f"conv3d_groupnorm_mean_concise takes in_channels=3, out_channels=24, kernel_size=3 "
                             f"(got {in_channels}, {out_channels}, {kernel_size}); use conv3d_groupnorm_mean.py")

    def forward(self, x):
        if not (x.is_cuda and x.dtype == torch.float32 and x.dim() == 5 and x.shape[1] == 3 and min(x.shape[2:]) >= 3):
            raise ValueError(f"conv3d_groupnorm_mean_concise takes a 5-D float32 CUDA input with 3 channels, no smaller "
                             f"than the kernel (3): got {x.dtype} {tuple(x.shape)} on {x.device}")
        params = (self.conv.weight, self.conv.bias, self.group_norm.weight, self.group_norm.bias)
        if any(p.dtype != torch.float32 or p.device != x.device for p in params):
            raise ValueError("conv3d_groupnorm_mean_concise takes float32 parameters on the input's device")
        return _Forward.apply(x, *params, self.group_norm.num_groups, self.group_norm.eps)


batch_size = 128
in_channels = 3
out_channels = 24
D, H, W = 24, 32, 32
kernel_size = 3
num_groups = 8


def get_inputs():
    return [torch.rand(batch_size, in_channels, D, H, W)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, num_groups]


if __name__ == "__main__":
    from common.evaluate import main
    sys.exit(main("conv3d_groupnorm_mean_concise", ModelNew))
