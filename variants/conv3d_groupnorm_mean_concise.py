"""Conv3d -> GroupNorm -> mean over (C, D, H, W), concise (KernelBench level 2, problem 23: concise, fp32, torch 2.1.2).

The mean of a GroupNorm output needs, per sample, only each channel's sum S_c and sum of squares Q_c of the conv
output y: with N positions, mu_g = sum_{c in g} S_c / (N C_g), var_g = sum_{c in g} Q_c / (N C_g) - mu_g^2,
    out[b] = mean_c(gamma_c (S_c / N - mu_g) / sqrt(var_g + eps) + beta_c).
conv_sums_kernel: the conv as a GEMM on the tensor cores (positions x 81 taps times taps x 24 channels; split TF32,
three products a step: fp32 accuracy) over a tile of 8 output rows x 32 columns at 8 output depths in turn, its input
in shared memory, split once (each depth brings one new input depth, loaded during the previous products); only
each channel's sums of y and y^2 kept. finalize_kernel: a sample's sums in a fixed order (double), out[b]. Nothing of
y stored; deterministic; exact to fp32 under either allow_tf32 setting. Takes kernel size 3, 3 -> 24 channels (the
benchmark's), any num_groups dividing 24, any batch and spatial size, float32 CUDA input, forward only; anything
else: a ValueError (a backward: RuntimeError) naming conv3d_groupnorm_mean.py, the full module.
Floor at the benchmark (128 x 3 x 24 x 32 x 32): 4.9 G multiply-adds, 0.147 ms at the FP32 rate, about 0.08 ms as
split TF32. Measured (H200, L2 flushed): 0.255 to 0.276 ms, 4.4x to 4.7x eager; KernelBench 4.28x / 4.45x (TF32 on / off).
Run: python variants/conv3d_groupnorm_mean_concise.py (what was tried: docs/history/conv3d_groupnorm_mean.md)
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

constexpr int C_IN = 3, C_OUT = 24, K = 3, TAPS = C_IN * K * K * K;   // 81 taps (ci, kd, kh, kw)
constexpr int STEPS = (TAPS + 7) / 8;     // the GEMM's depth: 11 steps of 8 taps (past the 81st: zero weights)
constexpr int TR = 8, TW = 32;            // a tile: TR output rows (a warp each) x TW columns
constexpr int THREADS = 32 * TR, DEPTHS = 8;   // a block: one tile at DEPTHS output depths in turn
constexpr int XR = TR + K - 1, XW = TW + K - 1, XP = 42;   // staged input: rows, columns, pitch (a step's rows: other banks)
constexpr int PLANE = XR * XW, ELEMS = (C_IN * PLANE + THREADS - 1) / THREADS;   // an input depth's values; a thread's

// d += a * b on the tensor cores (mma.sync m16n8k8, TF32 operands, fp32 sums). Fragments (g = lane / 4, t = lane % 4):
// a = rows g, g + 8 at depths t, t + 4; b = depths t, t + 4 of column g; d = rows g, g + 8 at columns 2t, 2t + 1.
__device__ void mma(float* d, const unsigned* a, uint2 b) {
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b.x), "r"(b.y));
}
// v = hi + lo, hi exact in TF32 (v's low 13 bits cleared), lo the rest (the tensor cores read its top 11 bits):
// lo hi + hi lo + hi hi loses at most about 2^-20 of a product, as an fp32 multiply-add does.
__device__ uint2 split(float v) {
    const float hi = __uint_as_float(__float_as_uint(v) & 0xffffe000u);
    return make_uint2(__float_as_uint(hi), __float_as_uint(v - hi));
}

// Sums of y and y^2 per channel over one block's outputs (a tile of TR rows x TW columns of one sample, at DEPTHS
// output depths in turn): the conv as a GEMM, positions x taps times taps x channels; a warp takes its row's 32
// positions (two 16-row tiles) and the 24 channels (three 8-column tiles). partials: (B, tiles, C_OUT, 2).
__global__ void __launch_bounds__(THREADS, 2) conv_sums_kernel(
    const float* __restrict__ x,        // (B, C_IN, D, H, W), contiguous
    const float* __restrict__ weight,   // (C_OUT, C_IN, K, K, K), contiguous
    const float* __restrict__ bias,     // (C_OUT)
    double* __restrict__ partials, int D, int H, int W, int tiles)
{
    __shared__ uint2 w_hi[STEPS][3][32], w_lo[STEPS][3][32];   // B fragments: (step, channel tile, lane)
    __shared__ __align__(16) unsigned x_hi[C_IN][K][XR][XP], x_lo[C_IN][K][XR][XP];   // (ci, input depth % K, row, col)
    __shared__ int tap_at[K][STEPS * 8];   // a tap's offset in x_hi from its output's position, by output depth % K
    for (int i = threadIdx.x; i < STEPS * 8 * C_OUT; i += THREADS) {
        const int k = i % (STEPS * 8), co = i / (STEPS * 8), lane = co % 8 * 4 + k % 4;
        (&w_hi[k / 8][co / 8][lane].x)[k % 8 / 4] = split(k < TAPS ? weight[co * TAPS + k] : 0.f).x;
        (&w_lo[k / 8][co / 8][lane].x)[k % 8 / 4] = split(k < TAPS ? weight[co * TAPS + k] : 0.f).y;
    }
    for (int i = threadIdx.x; i < K * STEPS * 8; i += THREADS) {
        const int r = i / (STEPS * 8), k = i % (STEPS * 8);   // tap k = (ci, kd, kh, kw)
        tap_at[r][k] = k < TAPS ? ((k / 27 * K + (r + k / 9 % 3) % K) * XR + k / 3 % 3) * XP + k % 3 : 0;
    }
    const int Do = D - K + 1, Ho = H - K + 1, Wo = W - K + 1, tiles_h = (Ho + TR - 1) / TR, tiles_w = (Wo + TW - 1) / TW;
    const long long b = blockIdx.x / tiles;
    const int tile = blockIdx.x % tiles, od0 = tile / (tiles_h * tiles_w) * DEPTHS, od1 = min(od0 + DEPTHS, Do);
    const int oh0 = tile / tiles_w % tiles_h * TR, ow0 = tile % tiles_w * TW;
    const int warp = threadIdx.x / 32, g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
    float next[ELEMS];   // one input depth of the tile (C_IN planes of XR x XW, zeros past the input), ELEMS a thread
    auto load = [&](int id) {
        for (int q = 0; q < ELEMS; ++q) {
            const int i = threadIdx.x + q * THREADS, ih = oh0 + i % PLANE / XW, iw = ow0 + i % XW;
            next[q] = i < C_IN * PLANE && ih < H && iw < W ?
                __ldg(x + (((b * C_IN + i / PLANE) * D + id) * H + ih) * (long long)W + iw) : 0.f;
        }
    };
    const unsigned* xh = &x_hi[0][0][warp][g], * xl = &x_lo[0][0][warp][g];   // this thread's first position, tap 0
    float sums[3][2][2] = {};    // channel 8 j + 2 t + c: sum of y, of y^2 (at most 4 DEPTHS values a sum)
    load(od0);
    for (int id = od0, od = od0 - K + 1; od < od1; ++id, ++od) {   // input depth id staged, then output depth od
        for (int q = 0, i = threadIdx.x; q < ELEMS && i < C_IN * PLANE; ++q, i += THREADS) {   // into slot id % K
            x_hi[i / PLANE][id % K][i % PLANE / XW][i % XW] = split(next[q]).x;
            x_lo[i / PLANE][id % K][i % PLANE / XW][i % XW] = split(next[q]).y;
        }
        __syncthreads();         // slot id % K written (and the weights and taps, the first time)
        if (od + 1 < od1) load(id + 1);   // in flight while the warps multiply
        if (od < od0) continue;  // the first K - 1 input depths: nothing to multiply yet
        float acc[2][3][4] = {}; // [16-position tile m][channel tile j][fragment]
#pragma unroll
        for (int s = 0; s < STEPS; ++s) {
            const int k0 = tap_at[od % K][8 * s + t], k1 = tap_at[od % K][8 * s + t + 4];
            for (int m = 0; m < 2; ++m) {
                const unsigned ah[4] = {xh[16 * m + k0], xh[16 * m + 8 + k0], xh[16 * m + k1], xh[16 * m + 8 + k1]};
                const unsigned al[4] = {xl[16 * m + k0], xl[16 * m + 8 + k0], xl[16 * m + k1], xl[16 * m + 8 + k1]};
                for (int j = 0; j < 3; ++j) {   // lo hi + hi lo + hi hi, the small products first
                    mma(acc[m][j], al, w_hi[s][j][threadIdx.x % 32]);
                    mma(acc[m][j], ah, w_lo[s][j][threadIdx.x % 32]);
                    mma(acc[m][j], ah, w_hi[s][j][threadIdx.x % 32]);
                }
            }
        }
        for (int m = 0; m < 2; ++m)
            for (int j = 0; j < 3; ++j)
                for (int e = 0; e < 4; ++e) {   // position (row warp, col 16 m + g + 8 (e / 2)), channel 8 j + 2 t + e % 2
                    const bool in = oh0 + warp < Ho && ow0 + 16 * m + g + 8 * (e / 2) < Wo;
                    const float y = in ? acc[m][j][e] + bias[8 * j + 2 * t + e % 2] : 0.f;   // the conv's bias last
                    sums[j][e % 2][0] += y;
                    sums[j][e % 2][1] = fmaf(y, y, sums[j][e % 2][1]);
                }
        __syncthreads();         // slot od % K free for the next input depth
    }
    double (*red)[C_OUT][2] = reinterpret_cast<double (*)[C_OUT][2]>(&x_hi[0][0][0][0]);   // x_hi is free
    for (int i = 0; i < 12; ++i) {   // sums[j][c][q] -> channel 8 j + 2 t + c, statistic q
        double v = sums[i / 4][i / 2 % 2][i % 2];
        for (int o = 4; o < 32; o *= 2) v += __shfl_xor_sync(0xffffffffu, v, o);   // over g: a fixed tree
        if (g == 0) red[warp][8 * (i / 4) + 2 * t + i / 2 % 2][i % 2] = v;
    }
    __syncthreads();
    if (threadIdx.x < 2 * C_OUT) {
        double v = 0;
        for (int w = 0; w < TR; ++w) v += red[w][threadIdx.x / 2][threadIdx.x % 2];
        partials[(b * tiles + tile) * 2 * C_OUT + threadIdx.x] = v;
    }
}

// out[b] from sample b's partials (n_blocks of them, added in order). One block of 2 C_OUT threads a sample.
__global__ void finalize_kernel(const double* __restrict__ partials, const float* __restrict__ gn_weight,
                                const float* __restrict__ gn_bias, float* __restrict__ out, int n_blocks,
                                int groups, double n, double eps)
{
    __shared__ double sums[C_OUT][2];
    double v = 0;
    for (int i = 0; i < n_blocks; ++i) v += partials[((size_t)blockIdx.x * n_blocks + i) * 2 * C_OUT + threadIdx.x];
    sums[threadIdx.x / 2][threadIdx.x % 2] = v;
    __syncthreads();
    if (threadIdx.x != 0) return;
    const int cg = C_OUT / groups;
    double total = 0;
    for (int g = 0; g < groups; ++g) {
        double s = 0, q = 0;
        for (int c = g * cg; c < (g + 1) * cg; ++c) { s += sums[c][0]; q += sums[c][1]; }
        const double mu = s / (n * cg), rstd = 1.0 / sqrt(fmax(q / (n * cg) - mu * mu, 0.0) + eps);
        for (int c = g * cg; c < (g + 1) * cg; ++c) total += gn_weight[c] * (sums[c][0] / n - mu) * rstd + gn_bias[c];
    }
    out[blockIdx.x] = (float)(total / C_OUT);
}

// The two kernels on `stream`; partials: partials_doubles(B, D, H, W) of workspace. A sample's blocks: conv_tiles.
int conv_tiles(int D, int H, int W) { return (D - K + DEPTHS) / DEPTHS * ((H - K + TR) / TR) * ((W - K + TW) / TW); }
long long partials_doubles(long long B, int D, int H, int W) { return B * conv_tiles(D, H, W) * 2 * C_OUT; }
cudaError_t launch(const float* x, const float* weight, const float* bias, const float* gn_weight, const float* gn_bias,
                   double* partials, float* out, long long B, int D, int H, int W, int groups, double eps,
                   cudaStream_t stream) {
    const int tiles = conv_tiles(D, H, W);
    conv_sums_kernel<<<(unsigned)(B * tiles), THREADS, 0, stream>>>(x, weight, bias, partials, D, H, W, tiles);
    finalize_kernel<<<(unsigned)B, 2 * C_OUT, 0, stream>>>(partials, gn_weight, gn_bias, out, tiles, groups,
                                                           (double)(D - K + 1) * (H - K + 1) * (W - K + 1), eps);
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

print("conv3d_groupnorm_mean_concise: building or loading its CUDA extension (about 30 s)", file=sys.stderr)
_ext = load_inline(name="concise_conv3d_gn_mean_ext", cpp_sources=cpp_source, cuda_sources=cuda_source,
                   functions=["forward"], extra_cuda_cflags=["-O3"], verbose=False,   # torch >= 2.7: a lean .cu
                   **({"no_implicit_headers": True} if "no_implicit_headers" in inspect.signature(load_inline).parameters
                      else {}))


class _Forward(torch.autograd.Function):
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
