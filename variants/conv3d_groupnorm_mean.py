"""Conv3d -> GroupNorm -> mean over (C, D, H, W), fused into one pass (KernelBench level 2, problem 23).

The mean of a GroupNorm output needs no normalised element: with S_c and Q_c the sum and the sum of
squares of channel c's conv output over its N positions, and g(c) the group of c,
    out[b] = mean_c( gamma_c * (S_c / N - mu_g) / sqrt(var_g + eps) + beta_c ),
    mu_g = sum_{c in g} S_c / (N * C/G),   var_g = sum_{c in g} Q_c / (N * C/G) - mu_g^2.
So:
  pass 1 (conv_gn_stats_kernel): each thread computes the conv for CO_TILE output channels at W_TILE
    adjacent columns in registers; each block reduces its per-channel S and Q and writes them, in
    double, to a small buffer. The conv output never touches memory.
  pass 2 (gn_mean_finalize_kernel): per sample, add the block partials in a fixed order (double),
    form the group statistics and the (B,) output. Deterministic: no atomics anywhere.

Floor at the benchmark size (B=128, 3->24 channels, 24x32x32, k=3): 9.85 GFLOP of FP32 multiply-add
= 0.147 ms at 67 TFLOP/s; the 38 MB input is 0.01 ms of bandwidth, so the conv's arithmetic is the
floor. Measured on an H200: 0.32-0.35 ms, 2.2-2.4x the floor (README.md has the run_all.py table).
What bounds it: per input row a thread issues 7 global loads whose lanes touch ~8 cache lines each
and 18 broadcast float4 weight loads, ~128 load/store-unit cycles per 90 cycles of FFMA.

Run: python variants/conv3d_groupnorm_mean.py
"""
import inspect

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <cuda_runtime.h>
#include <cstdint>

constexpr int K = 3;            // kernel size the conv is specialised for (refused otherwise in Python)
constexpr int TAPS = K * K * K;
constexpr int CO_TILE = 24;     // output channels per thread: all of the benchmark's 24 in one pass
constexpr int W_TILE = 5;       // adjacent output columns per thread: 30 = 6 x 5, so no idle lanes
constexpr int THREADS = 128;
constexpr int BLOCKS_PER_SM = 3; // caps registers at 168: 120 accumulators + one row's inputs and weights
constexpr int N_STATS = 2 * CO_TILE;   // per channel: sum, sum of squares
constexpr int CI_CHUNK = 4;     // input channels whose weights are staged at once (the benchmark's 3 fit)
constexpr int FINAL_THREADS = 256;

// Loads the W_TILE + K - 1 inputs of one row. `wide` rows hold them all (unpredicated loads at
// immediate offsets); a row narrower than that (W < W_TILE + K - 1, then w0 = 0) is read clamped.
__device__ __forceinline__ void load_row(float (&in)[W_TILE + K - 1], const float* row, bool wide, int W) {
    if (wide) {
#pragma unroll
        for (int j = 0; j < W_TILE + K - 1; ++j) in[j] = __ldg(row + j);
    } else {
#pragma unroll
        for (int j = 0; j < W_TILE + K - 1; ++j) in[j] = __ldg(row + min(j, W - 1));
    }
}

// Pass 1: conv in registers + per-(sample, channel) sum and sum of squares of its output.
// Grid: x = B * blocks_per_sample (a block never spans two samples), y = output-channel chunk.
// Each thread owns CO_TILE channels x W_TILE adjacent columns of one output row (od, oh). It walks
// the C_in * K * K input rows that feed it, holding the next row's inputs in flight while the
// current row's K * CO_TILE * W_TILE multiply-adds run.
__global__ void __launch_bounds__(THREADS, BLOCKS_PER_SM) conv_gn_stats_kernel(
    const float* __restrict__ x,        // (B, C_in, D, H, W), contiguous
    const float* __restrict__ weight,   // (C_out, C_in, K, K, K), contiguous
    const float* __restrict__ bias,     // (C_out)
    double* __restrict__ partials,      // (B, n_chunks, blocks_per_sample, N_STATS)
    int C_in, int C_out, int D, int H, int W, int blocks_per_sample)
{
    // Weights of CI_CHUNK input channels, [ci][kd][kh][kw][channel]: a warp reads one float4 at one
    // address (a broadcast) and each row's weights are K * CO_TILE consecutive floats.
    __shared__ __align__(16) float w_s[CI_CHUNK * TAPS * CO_TILE];
    __shared__ float red[N_STATS][THREADS];

    const int Do = D - K + 1, Ho = H - K + 1, Wo = W - K + 1;
    const int n_wtiles = (Wo + W_TILE - 1) / W_TILE;
    const int tiles = Do * Ho * n_wtiles;
    const int b = blockIdx.x / blocks_per_sample;
    const int blk = blockIdx.x % blocks_per_sample;
    const int chunk = blockIdx.y, n_chunks = gridDim.y;
    const int tile = blk * THREADS + threadIdx.x;
    const bool valid = tile < tiles;
    const int t = valid ? tile : tiles - 1;   // idle threads recompute a real tile, then count nothing
    const int w_first = (t % n_wtiles) * W_TILE;      // first column this thread counts
    const bool wide = W >= W_TILE + K - 1;
    // The last tile of a row shifts left to stay inside the row; columns before w_first are
    // another thread's and are not counted here.
    const int w0 = wide ? min(w_first, Wo - W_TILE) : 0;
    const int oh = (t / n_wtiles) % Ho;
    const int od = t / (n_wtiles * Ho);

    float acc[CO_TILE][W_TILE];
#pragma unroll
    for (int c = 0; c < CO_TILE; ++c)
#pragma unroll
        for (int r = 0; r < W_TILE; ++r) acc[c][r] = 0.f;

    const int plane = H * W;   // the host checks that one sample has fewer than 2^31 elements
    const float* xb = x + (size_t)b * C_in * D * plane + (od * H + oh) * W + w0;
    for (int ci0 = 0; ci0 < C_in; ci0 += CI_CHUNK) {
        const int n_ci = min(CI_CHUNK, C_in - ci0);
        __syncthreads();   // the previous chunk's weights are no longer read
        for (int e = threadIdx.x; e < n_ci * TAPS * CO_TILE; e += THREADS) {
            const int co = chunk * CO_TILE + e % CO_TILE, tap = e / CO_TILE;   // tap runs over (ci, kd, kh, kw)
            w_s[e] = co < C_out ? weight[((size_t)co * C_in + ci0) * TAPS + tap] : 0.f;
        }
        __syncthreads();
        // Rows in (ci, kd, kh) order; row r starts at xc + ci * D * plane + kd * plane + kh * W.
        const float* xc = xb + ci0 * D * plane;
        const int n_rows = n_ci * K * K;
        float next[W_TILE + K - 1];
        load_row(next, xc, wide, W);
#pragma unroll 1
        for (int r = 0; r < n_rows; ++r) {
            float in[W_TILE + K - 1];
#pragma unroll
            for (int j = 0; j < W_TILE + K - 1; ++j) in[j] = next[j];
            if (r + 1 < n_rows) {
                const int r1 = r + 1, kh = r1 % K, kd = (r1 / K) % K, ci = r1 / (K * K);
                load_row(next, xc + (ci * D + kd) * plane + kh * W, wide, W);
            }
            const float4* wv4 = reinterpret_cast<const float4*>(w_s + r * K * CO_TILE);
#pragma unroll
            for (int kw = 0; kw < K; ++kw) {
#pragma unroll
                for (int c4 = 0; c4 < CO_TILE / 4; ++c4) {
                    const float4 wv = wv4[kw * (CO_TILE / 4) + c4];
#pragma unroll
                    for (int r = 0; r < W_TILE; ++r) {
                        acc[4 * c4 + 0][r] = fmaf(wv.x, in[r + kw], acc[4 * c4 + 0][r]);
                        acc[4 * c4 + 1][r] = fmaf(wv.y, in[r + kw], acc[4 * c4 + 1][r]);
                        acc[4 * c4 + 2][r] = fmaf(wv.z, in[r + kw], acc[4 * c4 + 2][r]);
                        acc[4 * c4 + 3][r] = fmaf(wv.w, in[r + kw], acc[4 * c4 + 3][r]);
                    }
                }
            }
        }
    }

    // Per-thread sums over its (at most W_TILE) counted outputs, then a fixed-order block reduction.
#pragma unroll
    for (int c = 0; c < CO_TILE; ++c) {
        const int co = chunk * CO_TILE + c;
        const float bc = co < C_out ? bias[co] : 0.f;
        float s = 0.f, q = 0.f;
#pragma unroll
        for (int r = 0; r < W_TILE; ++r) {
            if (valid && w0 + r >= w_first && w0 + r < Wo) {
                const float v = acc[c][r] + bc;
                s += v;
                q = fmaf(v, v, q);
            }
        }
        red[c][threadIdx.x] = s;
        red[CO_TILE + c][threadIdx.x] = q;
    }
    __syncthreads();
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    double* out = partials + (((size_t)b * n_chunks + chunk) * blocks_per_sample + blk) * N_STATS;
    for (int s = warp; s < N_STATS; s += THREADS / 32) {
        double v = 0.0;
#pragma unroll
        for (int i = lane; i < THREADS; i += 32) v += red[s][i];
#pragma unroll
        for (int off = 16; off > 0; off /= 2) v += __shfl_down_sync(0xffffffffu, v, off);
        if (lane == 0) out[s] = v;
    }
}

// Pass 2: one block per sample. Adds the block partials in a fixed order (double), forms each
// group's mean and variance and writes mean_c(gamma_c * (mean_c - mu_g) * inv_std_g + beta_c).
__global__ void __launch_bounds__(FINAL_THREADS) gn_mean_finalize_kernel(
    const double* __restrict__ partials,  // (B, n_chunks, blocks_per_sample, N_STATS)
    const float* __restrict__ gn_weight,  // (C_out)
    const float* __restrict__ gn_bias,    // (C_out)
    float* __restrict__ out,              // (B)
    int C_out, int groups, int blocks_per_sample, double n_per_channel, double eps)
{
    extern __shared__ double sums[];      // [0, C_out): S_c, [C_out, 2 C_out): Q_c, then the terms
    const int b = blockIdx.x;
    const int n_chunks = (C_out + CO_TILE - 1) / CO_TILE;
    for (int c = threadIdx.x; c < C_out; c += FINAL_THREADS) {
        const double* p = partials + ((size_t)b * n_chunks + c / CO_TILE) * blocks_per_sample * N_STATS;
        double s = 0.0, q = 0.0;
        for (int blk = 0; blk < blocks_per_sample; ++blk) {
            s += p[blk * N_STATS + c % CO_TILE];
            q += p[blk * N_STATS + CO_TILE + c % CO_TILE];
        }
        sums[c] = s;
        sums[C_out + c] = q;
    }
    __syncthreads();
    const int cpg = C_out / groups;
    const double n_group = n_per_channel * cpg;
    for (int c = threadIdx.x; c < C_out; c += FINAL_THREADS) {
        const int g0 = (c / cpg) * cpg;
        double s = 0.0, q = 0.0;
        for (int j = g0; j < g0 + cpg; ++j) { s += sums[j]; q += sums[C_out + j]; }
        const double mu = s / n_group;
        const double var = fmax(q / n_group - mu * mu, 0.0);
        sums[2 * C_out + c] = gn_weight[c] * (sums[c] / n_per_channel - mu) / sqrt(var + eps) + gn_bias[c];
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        double total = 0.0;
        for (int c = 0; c < C_out; ++c) total += sums[2 * C_out + c];
        out[b] = (float)(total / C_out);
    }
}

static int blocks_per_sample(int D, int H, int W) {
    const int n_wtiles = (W - K + 1 + W_TILE - 1) / W_TILE;
    return ((D - K + 1) * (H - K + 1) * n_wtiles + THREADS - 1) / THREADS;
}

long long conv3d_groupnorm_mean_workspace(int C_out, int D, int H, int W) {
    return (long long)((C_out + CO_TILE - 1) / CO_TILE) * blocks_per_sample(D, H, W) * N_STATS;
}

cudaError_t conv3d_groupnorm_mean_launch(
    const float* x, const float* weight, const float* bias, const float* gn_weight, const float* gn_bias,
    double* workspace, float* out, int B, int C_in, int C_out, int groups, int D, int H, int W,
    double eps, cudaStream_t stream)
{
    const int bps = blocks_per_sample(D, H, W);
    const dim3 grid((unsigned)((long long)B * bps), (C_out + CO_TILE - 1) / CO_TILE);
    conv_gn_stats_kernel<<<grid, THREADS, 0, stream>>>(x, weight, bias, workspace, C_in, C_out, D, H, W, bps);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) return err;
    const double n_per_channel = (double)(D - K + 1) * (H - K + 1) * (W - K + 1);
    gn_mean_finalize_kernel<<<B, FINAL_THREADS, 3 * C_out * sizeof(double), stream>>>(
        workspace, gn_weight, gn_bias, out, C_out, groups, bps, n_per_channel, eps);
    return cudaGetLastError();
}
"""

cpp_source = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

long long conv3d_groupnorm_mean_workspace(int C_out, int D, int H, int W);
cudaError_t conv3d_groupnorm_mean_launch(
    const float* x, const float* weight, const float* bias, const float* gn_weight, const float* gn_bias,
    double* workspace, float* out, int B, int C_in, int C_out, int groups, int D, int H, int W,
    double eps, cudaStream_t stream);

torch::Tensor conv3d_groupnorm_mean(torch::Tensor input, torch::Tensor weight, torch::Tensor bias,
                                    torch::Tensor gn_weight, torch::Tensor gn_bias, int64_t groups, double eps) {
    TORCH_CHECK(input.is_cuda(), "conv3d_groupnorm_mean: input must be a CUDA tensor, got ", input.device());
    TORCH_CHECK(input.scalar_type() == torch::kFloat32, "conv3d_groupnorm_mean: input must be float32");
    // Numbers go through std::to_string: streaming an integer into a TORCH_CHECK message has been
    // seen to crash the process (torch 2.11 with a locally built extension).
    TORCH_CHECK(input.dim() == 5, "conv3d_groupnorm_mean: input must be 5-D (B, C, D, H, W), got " +
                std::to_string(input.dim()) + "-D");
    TORCH_CHECK(input.size(1) == weight.size(1), "conv3d_groupnorm_mean: input has " + std::to_string(input.size(1)) +
                " channels, the conv expects " + std::to_string(weight.size(1)));
    const int64_t k = weight.size(2);
    TORCH_CHECK(input.size(2) >= k && input.size(3) >= k && input.size(4) >= k,
                "conv3d_groupnorm_mean: input spatial size is smaller than the kernel (" + std::to_string(k) + ")");
    for (const auto& t : {weight, bias, gn_weight, gn_bias}) {
        TORCH_CHECK(t.device() == input.device() && t.scalar_type() == torch::kFloat32,
                    "conv3d_groupnorm_mean: parameters must be float32 on the input's device");
    }
    const c10::cuda::CUDAGuard guard(input.device());
    auto x = input.contiguous();
    auto w = weight.contiguous();
    const int64_t B = x.size(0), C_out = w.size(0);
    auto out = torch::empty({B}, x.options());
    if (B == 0) return out;
    TORCH_CHECK(x.size(2) * x.size(3) * x.size(4) < (int64_t(1) << 31), "conv3d_groupnorm_mean: one sample's "
                "spatial size must stay under 2^31 elements");
    auto workspace = torch::empty({B * conv3d_groupnorm_mean_workspace(C_out, x.size(2), x.size(3), x.size(4))},
                                  x.options().dtype(torch::kFloat64));
    const cudaError_t err = conv3d_groupnorm_mean_launch(
        x.data_ptr<float>(), w.data_ptr<float>(), bias.data_ptr<float>(), gn_weight.data_ptr<float>(),
        gn_bias.data_ptr<float>(), workspace.data_ptr<double>(), out.data_ptr<float>(), B, x.size(1), C_out,
        groups, x.size(2), x.size(3), x.size(4), eps, c10::cuda::getCurrentCUDAStream());
    TORCH_CHECK(err == cudaSuccess, "conv3d_groupnorm_mean: kernel launch failed: ", cudaGetErrorString(err));
    return out;
}
"""

# PyTorch >= 2.7 can skip prepending torch headers to the .cu file (about 40 s less to build it).
_header_option = ({"no_implicit_headers": True}
                  if "no_implicit_headers" in inspect.signature(load_inline).parameters else {})
_ext = load_inline(name="conv3d_groupnorm_mean_ext", cpp_sources=cpp_source, cuda_sources=cuda_source,
                   functions=["conv3d_groupnorm_mean"], extra_cuda_cflags=["-O3"], verbose=False,
                   **_header_option)

KERNEL_SIZE = 3   # the CUDA kernel's K


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, num_groups):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size)
        self.group_norm = nn.GroupNorm(num_groups, out_channels)
        if self.conv.kernel_size != (KERNEL_SIZE,) * 3:
            raise ValueError(f"kernel_size must be {KERNEL_SIZE} (the fused kernel is specialised for "
                             f"{KERNEL_SIZE}x{KERNEL_SIZE}x{KERNEL_SIZE}), got {kernel_size}")

    def forward(self, x):
        if not x.is_cuda:
            raise ValueError(f"input must be a CUDA tensor, got one on {x.device}")
        if x.dtype != torch.float32:
            raise ValueError(f"input must be float32, got {x.dtype}")
        if x.dim() != 5:
            raise ValueError(f"input must be 5-D (B, C, D, H, W), got {x.dim()}-D")
        if x.shape[1] != self.conv.in_channels:
            raise ValueError(f"input has {x.shape[1]} channels, the conv expects {self.conv.in_channels}")
        if min(x.shape[2:]) < KERNEL_SIZE:
            raise ValueError(f"input spatial size {tuple(x.shape[2:])} is smaller than the kernel ({KERNEL_SIZE})")
        return _ext.conv3d_groupnorm_mean(x, self.conv.weight, self.conv.bias, self.group_norm.weight,
                                          self.group_norm.bias, self.group_norm.num_groups, self.group_norm.eps)


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
    import pathlib
    import sys
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
    from common.evaluate import main
    sys.exit(main("conv3d_groupnorm_mean", ModelNew))
