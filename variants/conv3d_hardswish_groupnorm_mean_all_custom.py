"""Conv3d -> HardSwish -> GroupNorm -> mean over (D, H, W), the conv included: all custom CUDA, forward
and backward (KernelBench level 2, problem 27; the brief-compliant file that keeps PyTorch's Conv3d is
conv3d_hardswish_groupnorm_mean.py).

The forward's conv on the tensor cores in split TF32, the backward in plain FP32 on the CUDA cores; both
exact to fp32 level under either torch.backends.cudnn.allow_tf32 setting (cuDNN's conv here is fp32 too):
  forward: conv_hswish_sums_tc_kernel, where an input row fits 32 columns: per output row a GEMM (rows:
    the 32 input columns, columns: (kw, 16 channels), depth: (ci, kd, kh)) with mma.sync m16n8k8 in
    split TF32 (3 products per fp32 one), the kw taps added across rows in registers and one shuffle
    away; the next depth step's inputs load while this one's products run. Each lane adds h =
    hardswish(y) and h^2 per channel; a block, one (sample, depth) slice, writes one partial.
    Otherwise conv_hswish_sums_kernel, plain FP32: a thread per 4 output columns x 16 channels.
    gn_mean_finalize_kernel adds a sample's partials in order and writes out (B, C) and the
    statistics the backward needs. The conv output is never written.
  backward, with g_c the output's gradient, A_c, B_g as in conv3d_hardswish_groupnorm_mean.py:
    grad_y_kernel recomputes the conv and writes dL/dy = (A_c + B_g (h - mu_g)) hardswish'(y), plus
    each block's per-channel sum of it (the bias gradient); grad_input_kernel is the transposed conv
    of dL/dy (a thread: 8 adjacent input columns x 4 input channels); grad_weight_kernel reduces
    dL/dy x input over batch and positions: a warp owns 4 output channels x one (ci, kd, kh) x the K
    kw taps, its lanes walk the output columns of its block's range of (sample, depth) slices, and
    a shuffle tree adds the lanes; fixed-order sums finish every gradient.
    Deterministic: no atomics.
Operators (TORCH_LIBRARY, namespace: the file's name and a hash of its source): model (CUDA, Meta and
Autograd kernels) and the forward and backward it calls; torch.compile(fullgraph=True) traces it.

Floor at the benchmark size (B=1024, 3->16 channels, 16x32x32, k=4 -> 13x29x29): 34.4 G multiply-adds
per conv: 1.03 ms at the 67 TFLOP/s FP32 rate (0.42 ms as split TF32 on the tensor cores), and the
backward's two gradients twice that. On an H100 the forward takes 1.52 ms (0.655 of the plain-FP32
forward's 2.32, interleaved), 3.6x its split-TF32 floor: one warp per output row, 3 blocks of 4 warps per
SM, inputs gathered through L1 (mma.sync; no wgmma path yet). Forward + backward: weight gradient 5.4,
input gradient 4.5, dL/dy 2.7 ms. Kernel by kernel, and what was tried:
docs/conv3d_hardswish_groupnorm_mean_all_custom.md.

Run: python variants/conv3d_hardswish_groupnorm_mean_all_custom.py
"""
import hashlib
import inspect
import os
import sys

import torch
import torch.nn as nn

if __name__ == "__main__":   # run from the repository: build where run_all.py and the tests build
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    import common.loading  # noqa: F401  (the build folder, CUDA_HOME, the target with no GPU; before cpp_extension)

from torch.utils.cpp_extension import get_default_build_root, load_inline

cuda_source = r"""
#include <cuda_runtime.h>
#include <cstdint>

constexpr int THREADS = 128;   // conv-shaped kernels: a thread per 4 output columns
constexpr int PW = 4;          // adjacent columns per thread
constexpr int CO = 16;         // output channels per thread (grid covers the rest in chunks)
constexpr int CI = 4;          // input channels per thread in the input gradient
constexpr int PWI = 8;         // adjacent input columns per thread in the input gradient
constexpr int WG_THREADS = 256, WG_WARPS = WG_THREADS / 32;   // weight gradient

struct Dims {
    int B, C_in, C_out, D, H, W, Do, Ho, Wo;
    int quads, in_quads;        // ceil(Wo / PW), ceil(W / PWI)
    long long out_units, in_units;   // per sample: Do * Ho * quads, D * H * in_quads
};

__device__ __forceinline__ float hardswish(float v) { return v * fminf(fmaxf(v + 3.f, 0.f), 6.f) * (1.f / 6.f); }
__device__ __forceinline__ float hardswish_grad(float v) {   // PyTorch's convention at the joins
    return v < -3.f ? 0.f : (v <= 3.f ? fmaf(v, 1.f / 3.f, 0.5f) : 1.f);
}

// A block's per-channel sums (one float per thread and channel) added in double in a fixed order:
// a shuffle tree per warp, then the warps in order by the first 2 * CO threads. red: [warps][CO].
__device__ void block_channel_sums(const float (&v)[CO], double (*red)[CO], double* out) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
#pragma unroll
    for (int j = 0; j < CO; ++j) {
        double s = v[j];
#pragma unroll
        for (int off = 16; off > 0; off /= 2) s += __shfl_xor_sync(0xffffffffu, s, off);
        if (lane == 0) red[warp][j] = s;
    }
    __syncthreads();
    if (threadIdx.x < CO) {
        double s = 0.0;
        for (int w = 0; w < THREADS / 32; ++w) s += red[w][threadIdx.x];
        out[threadIdx.x] = s;
    }
    __syncthreads();
}

// acc[p][j] = conv(x) without bias at (b, co0 + j, od, oh, ow0 + p). Every thread of the block calls it
// (the weight staging has barriers); w_s holds K^3 x CO floats, one input channel at a time.
template <int K>
__device__ void conv_quad(float (&acc)[PW][CO], const float* __restrict__ x, const float* __restrict__ weight,
                          float* w_s, const Dims& d, long long b, int co0, int od, int oh, int ow0) {
#pragma unroll
    for (int p = 0; p < PW; ++p)
#pragma unroll
        for (int j = 0; j < CO; ++j) acc[p][j] = 0.f;
    for (int ci = 0; ci < d.C_in; ++ci) {
        __syncthreads();
        for (int i = threadIdx.x; i < K * K * K * CO; i += blockDim.x) {   // [tap][j], zero past C_out
            const int tap = i / CO, co = co0 + i % CO;
            w_s[i] = co < d.C_out ? weight[((size_t)co * d.C_in + ci) * K * K * K + tap] : 0.f;
        }
        __syncthreads();
        const float* xc = x + ((size_t)b * d.C_in + ci) * d.D * d.H * d.W;
        for (int kd = 0; kd < K; ++kd)
#pragma unroll
            for (int kh = 0; kh < K; ++kh) {
                const float* row = xc + ((size_t)(od + kd) * d.H + oh + kh) * d.W;
                float v[PW + K - 1];
#pragma unroll
                for (int i = 0; i < PW + K - 1; ++i) v[i] = __ldg(row + min(ow0 + i, d.W - 1));   // clamped: unused
                const float4* wr = reinterpret_cast<const float4*>(w_s + (kd * K + kh) * K * CO);
#pragma unroll
                for (int kw = 0; kw < K; ++kw)
#pragma unroll
                    for (int j4 = 0; j4 < CO / 4; ++j4) {
                        const float4 w = wr[kw * CO / 4 + j4];
#pragma unroll
                        for (int p = 0; p < PW; ++p) {
                            acc[p][4 * j4] = fmaf(v[p + kw], w.x, acc[p][4 * j4]);
                            acc[p][4 * j4 + 1] = fmaf(v[p + kw], w.y, acc[p][4 * j4 + 1]);
                            acc[p][4 * j4 + 2] = fmaf(v[p + kw], w.z, acc[p][4 * j4 + 2]);
                            acc[p][4 * j4 + 3] = fmaf(v[p + kw], w.w, acc[p][4 * j4 + 3]);
                        }
                    }
            }
    }
}

// This thread's output quad: grid x = B * blocks per sample; false past the sample's last quad.
__device__ __forceinline__ bool locate_quad(const Dims& d, int blocks_per_sample, long long& b, int& od, int& oh,
                                            int& ow0) {
    b = blockIdx.x / blocks_per_sample;
    const long long q = (long long)(blockIdx.x % blocks_per_sample) * THREADS + threadIdx.x;
    const long long qq = q < d.out_units ? q : 0;
    ow0 = (int)(qq % d.quads) * PW;
    oh = (int)(qq / d.quads % d.Ho);
    od = (int)(qq / ((long long)d.quads * d.Ho));
    return q < d.out_units;
}

// Forward: per block, the sums of h = hardswish(y) and h^2 per channel of its chunk -> partials
// (B, chunks, blocks_per_sample, 2, CO).
template <int K>
__global__ void __launch_bounds__(THREADS) conv_hswish_sums_kernel(
    const float* __restrict__ x, const float* __restrict__ weight, const float* __restrict__ bias,
    double* __restrict__ partials, Dims d, int blocks_per_sample)
{
    __shared__ __align__(16) float w_s[K * K * K * CO];
    __shared__ double red[THREADS / 32][CO];
    long long b;
    int od, oh, ow0;
    const bool live = locate_quad(d, blocks_per_sample, b, od, oh, ow0);
    const int co0 = blockIdx.y * CO;
    float acc[PW][CO];
    conv_quad<K>(acc, x, weight, w_s, d, b, co0, od, oh, ow0);
    float s[CO], q[CO];
#pragma unroll
    for (int j = 0; j < CO; ++j) {
        s[j] = 0.f;
        q[j] = 0.f;
        const float bj = bias != nullptr && co0 + j < d.C_out ? bias[co0 + j] : 0.f;
#pragma unroll
        for (int p = 0; p < PW; ++p)
            if (live && ow0 + p < d.Wo && co0 + j < d.C_out) {
                const float h = hardswish(acc[p][j] + bj);
                s[j] += h;
                q[j] = fmaf(h, h, q[j]);
            }
    }
    double* out = partials + ((b * gridDim.y + blockIdx.y) * blocks_per_sample + blockIdx.x % blocks_per_sample) * 2 * CO;
    block_channel_sums(s, red, out);
    block_channel_sums(q, red, out + CO);
}

// The forward on the tensor cores, where a row of input fits one 32-column segment (W <= 32) and the depth
// (ci, kd, kh) is at most TC_MAX_STEPS * 8: per output row (b, od, oh) a GEMM with rows = the 32 input
// columns, columns = (kw, 16 output channels), depth = (ci, kd, kh) padded to a multiple of 8, so that
// out[ow][co] = sum_kw C[ow + kw][kw, co]. Split TF32 ("3xTF32": v = big + small, both TF32, and big*big +
// big*small + small*big) keeps fp32-level accuracy. mma.sync m16n8k8; fragments (g = lane / 4, t = lane % 4):
// a = rows g, g + 8 at depths t, t + 4; b = depths t, t + 4 of column g; c = row g then g + 8, columns 2t, 2t + 1.
// The rows are the columns in this order: lane g's rows g and g + 8 of tile i are its columns 4g + 2i and
// 4g + 2i + 1, so out[4g + s] needs C rows of its own lane but for the last K - 1, from lane g + 1.
// Block (b, od), grid y: chunks of 16 output channels; its 4 warps take the rows oh in turn; each lane adds
// h and h^2 of its outputs per channel; the block's sums are written as conv_hswish_sums_kernel's partials
// (blocks per sample = Do).
constexpr int TC_MAX_STEPS = 8;
struct TfSplit { uint32_t big, small; };
__device__ __forceinline__ TfSplit tf_split(float v) {
    const float big = __uint_as_float(__float_as_uint(v) & 0xffffe000u);
    return {__float_as_uint(big), __float_as_uint(v - big)};
}
__device__ __forceinline__ void mma_tf32(float* d, const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

template <int K>
__global__ void __launch_bounds__(THREADS) conv_hswish_sums_tc_kernel(
    const float* __restrict__ x, const float* __restrict__ weight, const float* __restrict__ bias,
    double* __restrict__ partials, Dims d)
{
    constexpr int NT = K * CO / 8;   // n-tiles: column n = kw * CO + channel
    __shared__ uint2 w_s[2][TC_MAX_STEPS][NT][32];   // [big, small][step][n-tile][lane]: (b0, b1)
    __shared__ unsigned tap_s[TC_MAX_STEPS * 8];    // input offset of depth k = (ci, kd, kh)
    __shared__ double red[THREADS / 32][2][CO];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const long long b = blockIdx.x / d.Do;
    const int od = (int)(blockIdx.x % d.Do), co0 = blockIdx.y * CO;
    const int depth = d.C_in * K * K, steps = (depth + 7) / 8;
    for (int i = threadIdx.x; i < steps * NT * 32; i += THREADS) {
        const int st = i / (NT * 32), j = i / 32 % NT, l = i % 32;
        const int n = j * 8 + l / 4, kw = n / CO, co = co0 + n % CO;
        float v[2];
        for (int h = 0; h < 2; ++h) {
            const int k = st * 8 + l % 4 + 4 * h;
            v[h] = co < d.C_out && k < depth ? weight[((size_t)co * d.C_in + k / (K * K)) * K * K * K + k % (K * K) * K + kw]
                                            : 0.f;
        }
        const TfSplit s0 = tf_split(v[0]), s1 = tf_split(v[1]);
        w_s[0][st][j][l] = make_uint2(s0.big, s1.big);
        w_s[1][st][j][l] = make_uint2(s0.small, s1.small);
    }
    for (int k = threadIdx.x; k < steps * 8; k += THREADS)
        tap_s[k] = k < depth ? ((k / (K * K) * d.D + k / K % K) * d.H + k % K) * d.W : 0u;
    __syncthreads();
    const float* xb = x + ((size_t)b * d.C_in * d.D + od) * d.H * d.W;
    float sum[2][2] = {}, sq[2][2] = {};   // [channel tile jc][column e]: channel 8 jc + 2t + e
    for (int oh = warp; oh < d.Ho; oh += THREADS / 32) {
        const float* xr = xb + (size_t)oh * d.W;
        float acc[2][NT][4] = {};
        // A fragments' raw values of a step: [i][r] depth t, [i][r + 2] depth t + 4; the next step's are
        // loaded while this step's products run.
        float raw[2][4];
        const auto load = [&](int st) {
            const unsigned o0 = tap_s[st * 8 + t], o1 = tap_s[st * 8 + t + 4];
#pragma unroll
            for (int i = 0; i < 2; ++i)
#pragma unroll
                for (int r = 0; r < 2; ++r) {
                    const int col = min(4 * g + 2 * i + r, d.W - 1);   // clamped: only outputs past Wo use it
                    raw[i][r] = __ldg(xr + o0 + col);
                    raw[i][r + 2] = __ldg(xr + o1 + col);
                }
        };
        load(0);
        for (int st = 0; st < steps; ++st) {
            uint32_t big[2][4], small[2][4];
#pragma unroll
            for (int i = 0; i < 2; ++i)
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const TfSplit v = tf_split(raw[i][e]);
                    big[i][e] = v.big;
                    small[i][e] = v.small;
                }
            if (st + 1 < steps) load(st + 1);
#pragma unroll
            for (int j = 0; j < NT; ++j) {
                const uint2 wb = w_s[0][st][j][lane], ws = w_s[1][st][j][lane];
#pragma unroll
                for (int i = 0; i < 2; ++i) {
                    mma_tf32(acc[i][j], small[i], wb.x, wb.y);
                    mma_tf32(acc[i][j], big[i], ws.x, ws.y);
                    mma_tf32(acc[i][j], big[i], wb.x, wb.y);
                }
            }
        }
        // out[4g + s] = sum_kw C[4g + s + kw][kw, channel]; C[4g + s'] is acc[s' / 2][.][2 (s' % 2) + e].
#pragma unroll
        for (int jc = 0; jc < 2; ++jc)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                float c[K][4 + K - 1];
#pragma unroll
                for (int kw = 0; kw < K; ++kw) {
#pragma unroll
                    for (int s = 0; s < 4; ++s) c[kw][s] = acc[s / 2][kw * 2 + jc][2 * (s % 2) + e];
#pragma unroll
                    for (int m = 0; m < K - 1; ++m) c[kw][4 + m] = __shfl_sync(0xffffffffu, c[kw][m], (lane + 4) % 32);
                }
                const int co = co0 + 8 * jc + 2 * t + e;
                const float bj = bias != nullptr && co < d.C_out ? bias[co] : 0.f;
#pragma unroll
                for (int s = 0; s < 4; ++s) {
                    float v = bj;
#pragma unroll
                    for (int kw = 0; kw < K; ++kw) v += c[kw][s + kw];
                    if (4 * g + s < d.Wo && co < d.C_out) {
                        const float h = hardswish(v);
                        sum[jc][e] += h;
                        sq[jc][e] = fmaf(h, h, sq[jc][e]);
                    }
                }
            }
    }
    // Per channel: the 8 lanes with the same t (a fixed shuffle tree, double), then the warps in order.
#pragma unroll
    for (int jc = 0; jc < 2; ++jc)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
            double s1 = sum[jc][e], s2 = sq[jc][e];
#pragma unroll
            for (int off = 4; off < 32; off *= 2) {
                s1 += __shfl_xor_sync(0xffffffffu, s1, off);
                s2 += __shfl_xor_sync(0xffffffffu, s2, off);
            }
            if (g == 0) { red[warp][0][8 * jc + 2 * t + e] = s1; red[warp][1][8 * jc + 2 * t + e] = s2; }
        }
    __syncthreads();
    if (threadIdx.x < 2 * CO) {
        const int kind = threadIdx.x / CO, j = threadIdx.x % CO;
        double v = 0.0;
        for (int w = 0; w < THREADS / 32; ++w) v += red[w][kind][j];
        partials[((b * gridDim.y + blockIdx.y) * d.Do + od) * 2 * CO + kind * CO + j] = v;
    }
}

__host__ __device__ inline bool tc_forward(const Dims& d, int K) {
    return d.W <= 32 && d.C_in * K * K <= TC_MAX_STEPS * 8;
}

// Per sample: the partials added in order; out[b, c] = gamma_c (m_c - mu_g) rstd_g + beta_c; stats
// (B, C + 2G): m_c (mean of h), mu_g, rstd_g.
__global__ void gn_mean_finalize_kernel(const double* __restrict__ partials, const float* __restrict__ gn_weight,
                                        const float* __restrict__ gn_bias, float* __restrict__ out,
                                        double* __restrict__ stats, Dims d, int G, int blocks_per_sample, double eps)
{
    extern __shared__ double sums[];   // [0, C): sum of h, [C, 2C): sum of h^2
    const long long b = blockIdx.x;
    const int C = d.C_out, chunks = (C + CO - 1) / CO, cpg = C / G;
    for (int i = threadIdx.x; i < 2 * C; i += blockDim.x) {
        const int kind = i / C, c = i % C;
        const double* p = partials + ((b * chunks + c / CO) * blocks_per_sample) * 2 * CO + kind * CO + c % CO;
        double v = 0.0;
        for (int k = 0; k < blocks_per_sample; ++k) v += p[(size_t)k * 2 * CO];
        sums[i] = v;
    }
    __syncthreads();
    const double S = (double)d.Do * d.Ho * d.Wo, n = S * cpg;
    double* st = stats + b * (C + 2 * G);
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        const int g = c / cpg;
        double s = 0.0, q = 0.0;
        for (int j = g * cpg; j < (g + 1) * cpg; ++j) { s += sums[j]; q += sums[C + j]; }
        const double mu = s / n, rstd = 1.0 / sqrt(fmax(q / n - mu * mu, 0.0) + eps), m = sums[c] / S;
        out[b * C + c] = (float)(gn_weight[c] * (m - mu) * rstd + gn_bias[c]);
        st[c] = m;
        if (c % cpg == 0) { st[C + g] = mu; st[C + G + g] = rstd; }
    }
}

// Backward coefficients per sample (one block each): coef (B, C, 3) = A_c, B_g, mu_g as floats, and the
// GroupNorm parameters' per-sample terms (B, 2C): g_c (m_c - mu) rstd, then g_c.
__global__ void gn_mean_backward_coef_kernel(const float* __restrict__ grad_out, const float* __restrict__ gn_weight,
                                             const double* __restrict__ stats, float* __restrict__ coef,
                                             double* __restrict__ param_terms, Dims d, int G)
{
    const long long b = blockIdx.x;
    const int C = d.C_out, cpg = C / G;
    const double* st = stats + b * (C + 2 * G);
    const float* g = grad_out + b * C;
    const double S = (double)d.Do * d.Ho * d.Wo, n = S * cpg;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        const int grp = c / cpg;
        const double mu = st[C + grp], rstd = st[C + G + grp];
        double g1 = 0.0, g2 = 0.0;
        for (int j = grp * cpg; j < (grp + 1) * cpg; ++j) {
            const double gg = (double)g[j] * gn_weight[j];
            g1 += gg;
            g2 += gg * (st[j] - mu);
        }
        float* cf = coef + (b * C + c) * 3;
        cf[0] = (float)(rstd * ((double)g[c] * gn_weight[c] / S - g1 / n));
        cf[1] = (float)(-rstd * rstd * rstd * g2 / n);
        cf[2] = (float)mu;
        param_terms[b * 2 * C + c] = g[c] * (st[c] - mu) * rstd;
        param_terms[b * 2 * C + C + c] = g[c];
    }
}

// dL/dy = (A_c + B_g (h - mu_g)) hardswish'(y), y recomputed; per block the per-channel sum of dL/dy
// (the conv bias's gradient) -> partials (B, chunks, blocks_per_sample, CO).
template <int K>
__global__ void __launch_bounds__(THREADS) grad_y_kernel(
    const float* __restrict__ x, const float* __restrict__ weight, const float* __restrict__ bias,
    const float* __restrict__ coef, float* __restrict__ grad_y, double* __restrict__ bias_partials, Dims d,
    int blocks_per_sample)
{
    __shared__ __align__(16) float w_s[K * K * K * CO];
    __shared__ double red[THREADS / 32][CO];
    long long b;
    int od, oh, ow0;
    const bool live = locate_quad(d, blocks_per_sample, b, od, oh, ow0);
    const int co0 = blockIdx.y * CO;
    float acc[PW][CO];
    conv_quad<K>(acc, x, weight, w_s, d, b, co0, od, oh, ow0);
    float s[CO];
#pragma unroll
    for (int j = 0; j < CO; ++j) {
        s[j] = 0.f;
        const int c = co0 + j;
        if (!live || c >= d.C_out) continue;
        const float bj = bias != nullptr ? bias[c] : 0.f;
        const float* cf = coef + (b * d.C_out + c) * 3;
        const float a = cf[0], bg = cf[1], mu = cf[2];
        float* row = grad_y + (((size_t)b * d.C_out + c) * d.Do + od) * d.Ho * d.Wo + (size_t)oh * d.Wo;
#pragma unroll
        for (int p = 0; p < PW; ++p)
            if (ow0 + p < d.Wo) {
                const float y = acc[p][j] + bj;
                const float g = fmaf(bg, hardswish(y) - mu, a) * hardswish_grad(y);
                row[ow0 + p] = g;
                s[j] += g;
            }
    }
    block_channel_sums(s, red, bias_partials + ((b * gridDim.y + blockIdx.y) * blocks_per_sample +
                                                blockIdx.x % blocks_per_sample) * CO);
}

// dL/dx[b, ci, i] = sum_{co, tap} dL/dy[b, co, i - tap] W[co, ci, tap]: a thread per PWI adjacent input
// columns x CI input channels (grid y: chunks of CI); weights staged per 16 output channels.
template <int K>
__global__ void __launch_bounds__(THREADS) grad_input_kernel(
    const float* __restrict__ grad_y, const float* __restrict__ weight, float* __restrict__ grad_x, Dims d,
    int blocks_per_sample)
{
    __shared__ __align__(16) float4 w_s[CO * K * K * K];   // [co][tap]: CI input channels
    const long long b = blockIdx.x / blocks_per_sample;
    const long long q = (long long)(blockIdx.x % blocks_per_sample) * THREADS + threadIdx.x;
    const bool live = q < d.in_units;
    const long long qq = live ? q : 0;
    const int iw0 = (int)(qq % d.in_quads) * PWI, ih = (int)(qq / d.in_quads % d.H);
    const int id = (int)(qq / ((long long)d.in_quads * d.H));
    const int ci0 = blockIdx.y * CI;
    float acc[PWI][CI] = {};
    for (int co0 = 0; co0 < d.C_out; co0 += CO) {
        __syncthreads();
        for (int i = threadIdx.x; i < CO * K * K * K; i += THREADS) {
            const int co = co0 + i / (K * K * K), tap = i % (K * K * K);
            float w[CI];
#pragma unroll
            for (int c = 0; c < CI; ++c)
                w[c] = co < d.C_out && ci0 + c < d.C_in ? weight[((size_t)co * d.C_in + ci0 + c) * K * K * K + tap] : 0.f;
            w_s[i] = make_float4(w[0], w[1], w[2], w[3]);
        }
        __syncthreads();
        const int n_co = min(CO, d.C_out - co0);
        for (int j = 0; j < n_co; ++j)
            for (int kd = 0; kd < K; ++kd) {
                const int od = id - kd;
                if (od < 0 || od >= d.Do) continue;
                for (int kh = 0; kh < K; ++kh) {
                    const int oh = ih - kh;
                    if (oh < 0 || oh >= d.Ho) continue;
                    const float* row = grad_y + (((size_t)b * d.C_out + co0 + j) * d.Do + od) * d.Ho * d.Wo +
                                       (size_t)oh * d.Wo;
                    float g[PWI + K - 1];   // g[i] = dL/dy at column iw0 - (K - 1) + i, zero outside
#pragma unroll
                    for (int i = 0; i < PWI + K - 1; ++i) {
                        const int ow = iw0 - (K - 1) + i;
                        g[i] = ow >= 0 && ow < d.Wo ? __ldg(row + ow) : 0.f;
                    }
                    const float4* wr = w_s + (j * K + kd) * K * K + kh * K;
#pragma unroll
                    for (int kw = 0; kw < K; ++kw) {
                        const float4 w = wr[kw];
#pragma unroll
                        for (int p = 0; p < PWI; ++p) {   // output column iw0 + p - kw
                            const float gv = g[p + K - 1 - kw];
                            acc[p][0] = fmaf(gv, w.x, acc[p][0]);
                            acc[p][1] = fmaf(gv, w.y, acc[p][1]);
                            acc[p][2] = fmaf(gv, w.z, acc[p][2]);
                            acc[p][3] = fmaf(gv, w.w, acc[p][3]);
                        }
                    }
                }
            }
    }
    if (!live) return;
#pragma unroll
    for (int c = 0; c < CI; ++c) {
        if (ci0 + c >= d.C_in) break;
        float* row = grad_x + (((size_t)b * d.C_in + ci0 + c) * d.D + id) * d.H * d.W + (size_t)ih * d.W;
#pragma unroll
        for (int p = 0; p < PWI; ++p)
            if (iw0 + p < d.W) row[iw0 + p] = acc[p][c];
    }
}

// dL/dW[co, ci, kd, kh, kw] = sum over samples and output positions of dL/dy[co] x[ci, + tap]. An item is
// 4 output channels x one (ci, kd, kh) x the K kw taps. A slice is one (sample, output depth); block i
// takes the contiguous slices [i S / n, (i + 1) S / n), and its warps take items in turn: for each, the
// lanes walk the range's output columns with 4 K sums each, added at the end by a fixed shuffle tree
// into partials (blocks, items, 4, K).
template <int K>
__global__ void __launch_bounds__(WG_THREADS, 3) grad_weight_kernel(
    const float* __restrict__ grad_y, const float* __restrict__ x, double* __restrict__ partials, Dims d,
    int n_items)
{
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const long long slices = (long long)d.B * d.Do;
    const long long s0 = blockIdx.x * slices / gridDim.x, s1 = (blockIdx.x + 1) * slices / gridDim.x;
    const size_t plane = (size_t)d.Ho * d.Wo;
    for (int item = warp; item < n_items; item += WG_WARPS) {
        const int co0 = item / (d.C_in * K * K) * 4, r = item % (d.C_in * K * K);
        const int ci = r / (K * K), kd = r / K % K, kh = r % K, n_co = min(4, d.C_out - co0);
        float a[4][K] = {};
        for (long long s = s0; s < s1; ++s) {
            const long long b = s / d.Do;
            const int od = (int)(s % d.Do);
            const float* xs = x + (((size_t)b * d.C_in + ci) * d.D + od + kd) * d.H * d.W + (size_t)kh * d.W;
            const float* gs = grad_y + (((size_t)b * d.C_out + co0) * d.Do + od) * plane;
            for (int oh = 0; oh < d.Ho; ++oh)
                for (int ow = lane; ow < d.Wo; ow += 32) {
                    float xv[K], g[4];
#pragma unroll
                    for (int kw = 0; kw < K; ++kw) xv[kw] = __ldg(xs + (size_t)oh * d.W + ow + kw);
#pragma unroll
                    for (int c = 0; c < 4; ++c)
                        g[c] = c < n_co ? __ldg(gs + c * d.Do * plane + (size_t)oh * d.Wo + ow) : 0.f;
#pragma unroll
                    for (int c = 0; c < 4; ++c)
#pragma unroll
                        for (int kw = 0; kw < K; ++kw) a[c][kw] = fmaf(g[c], xv[kw], a[c][kw]);
                }
        }
#pragma unroll
        for (int c = 0; c < 4; ++c)
#pragma unroll
            for (int kw = 0; kw < K; ++kw) {
                double v = a[c][kw];
#pragma unroll
                for (int off = 16; off > 0; off /= 2) v += __shfl_xor_sync(0xffffffffu, v, off);
                if (lane == 0) partials[((size_t)blockIdx.x * n_items + item) * 4 * K + c * K + kw] = v;
            }
    }
}

// The same sums with each (sample, output depth) slice staged in shared memory: block (group, range) takes
// WG_WARPS items (4 output channels x one (ci, kd)), a warp each, over a contiguous range of slices. Per
// slice the block stages the dL/dy planes of its items' output channels and the K input planes of their
// input channels; each lane then walks the slice's positions with 4 x K x K sums, kept in registers over
// the whole range and added at the end by a fixed shuffle tree. Partials in grad_weight_kernel's layout.
// Used where the largest group's planes fit in shared memory (smem_floats).
template <int K>
__global__ void __launch_bounds__(WG_THREADS, 2) grad_weight_smem_kernel(
    const float* __restrict__ grad_y, const float* __restrict__ x, double* __restrict__ partials, Dims d,
    int n_groups, int n_ranges)
{
    extern __shared__ float sm[];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int group = blockIdx.x % n_groups, range = blockIdx.x / n_groups;
    const int per_co = d.C_in * K, n_items = (d.C_out + 3) / 4 * per_co;   // items: (co / 4, ci, kd)
    const int first = group * WG_WARPS, last = min(first + WG_WARPS, n_items) - 1;
    const int co_lo = first / per_co * 4, co_hi = min(d.C_out, (last / per_co + 1) * 4);
    int ci_lo = d.C_in, ci_hi = 0;
    for (int it = first; it <= last; ++it) {
        ci_lo = min(ci_lo, it % per_co / K);
        ci_hi = max(ci_hi, it % per_co / K + 1);
    }
    const int plane_out = d.Ho * d.Wo, plane_in = d.H * d.W;
    float* g_s = sm;
    float* x_s = sm + (co_hi - co_lo) * plane_out;
    const int item = min(first + warp, last);   // warps past the last item repeat it and write nothing
    const int cq = item / per_co, ci = item % per_co / K, kd = item % K, n_co = min(4, d.C_out - 4 * cq);
    const long long slices = (long long)d.B * d.Do;
    const long long s0 = range * slices / n_ranges, s1 = (range + 1) * slices / n_ranges;
    float a[4][K][K] = {};
    for (long long s = s0; s < s1; ++s) {
        const long long b = s / d.Do;
        const int od = (int)(s % d.Do);
        __syncthreads();
        for (int i = threadIdx.x; i < (co_hi - co_lo) * plane_out; i += WG_THREADS)
            g_s[i] = __ldg(grad_y + (((size_t)b * d.C_out + co_lo + i / plane_out) * d.Do + od) * plane_out + i % plane_out);
        for (int i = threadIdx.x; i < (ci_hi - ci_lo) * K * plane_in; i += WG_THREADS)   // planes od .. od + K - 1
            x_s[i] = __ldg(x + (((size_t)b * d.C_in + ci_lo + i / (K * plane_in)) * d.D + od) * plane_in +
                           i % (K * plane_in));
        __syncthreads();
        const float* gp = g_s + (4 * cq - co_lo) * plane_out;
        const float* xp = x_s + ((ci - ci_lo) * K + kd) * plane_in;
        for (int p = lane; p < plane_out; p += 32) {
            const int oh = p / d.Wo, ow = p % d.Wo;
            float g[4];
#pragma unroll
            for (int c = 0; c < 4; ++c) g[c] = c < n_co ? gp[c * plane_out + p] : 0.f;
            const float* xr = xp + oh * d.W + ow;
#pragma unroll
            for (int kh = 0; kh < K; ++kh)
#pragma unroll
                for (int kw = 0; kw < K; ++kw) {
                    const float xv = xr[kh * d.W + kw];
#pragma unroll
                    for (int c = 0; c < 4; ++c) a[c][kh][kw] = fmaf(g[c], xv, a[c][kh][kw]);
                }
        }
    }
    const bool writes = first + warp <= last;
    const int n_items_kh = n_items * K;   // grad_weight_kernel's items: (co / 4, ci, kd, kh)
#pragma unroll
    for (int c = 0; c < 4; ++c)
#pragma unroll
        for (int kh = 0; kh < K; ++kh)
#pragma unroll
            for (int kw = 0; kw < K; ++kw) {
                double v = a[c][kh][kw];
#pragma unroll
                for (int off = 16; off > 0; off /= 2) v += __shfl_xor_sync(0xffffffffu, v, off);
                if (writes && lane == 0)
                    partials[(((size_t)range * n_items_kh + item * K + kh) * 4 + c) * K + kw] = v;
            }
}

// Shared memory (floats) grad_weight_smem_kernel needs: the largest group's planes.
static long long wg_smem_floats(const Dims& d, int K) {
    const int per_co = d.C_in * K, n_items = (d.C_out + 3) / 4 * per_co;
    long long most = 0;
    for (int first = 0; first < n_items; first += WG_WARPS) {
        const int last = min(first + WG_WARPS, n_items) - 1;
        const int co_lo = first / per_co * 4, co_hi = min(d.C_out, (last / per_co + 1) * 4);
        int ci_lo = d.C_in, ci_hi = 0;
        for (int it = first; it <= last; ++it) {
            ci_lo = min(ci_lo, it % per_co / K);
            ci_hi = max(ci_hi, it % per_co / K + 1);
        }
        most = max(most, (long long)(co_hi - co_lo) * d.Ho * d.Wo + (long long)(ci_hi - ci_lo) * K * d.H * d.W);
    }
    return most;
}
constexpr long long WG_SMEM_MAX = 100 * 1024;   // bytes: two blocks per SM on sm_80 and newer

// dL/dW from the weight-gradient partials, a thread per weight, the blocks' partials added in order.
template <int K>
__global__ void finish_weight_grad_kernel(const double* __restrict__ w_partials, float* __restrict__ grad_weight,
                                          Dims d, int wg_blocks)
{
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const int taps = K * K * K, n_items = (d.C_out + 3) / 4 * d.C_in * K * K;
    if (i >= (long long)d.C_out * d.C_in * taps) return;
    // weight (co, ci, kd, kh, kw): item (co / 4, ci, kd, kh), slot (co % 4, kw)
    const int co = (int)(i / (d.C_in * taps)), r = (int)(i % (d.C_in * taps)), kw = r % K;
    const int item = co / 4 * d.C_in * K * K + r / K;
    double v = 0.0;
    for (int k = 0; k < wg_blocks; ++k) v += w_partials[((size_t)k * n_items + item) * 4 * K + (co % 4) * K + kw];
    grad_weight[i] = (float)v;
}

// Per channel (block x), one of three sums (block y): the bias gradient from the grad_y blocks' partials,
// dL/dgamma and dL/dbeta from the per-sample terms. Each thread adds a fixed stride of terms in order,
// then a fixed tree: deterministic.
constexpr int SUM_THREADS = 256;
__global__ void __launch_bounds__(SUM_THREADS) finish_channel_grads_kernel(
    const double* __restrict__ b_partials, const double* __restrict__ param_terms, float* __restrict__ grad_bias,
    float* __restrict__ grad_gn_weight, float* __restrict__ grad_gn_bias, Dims d, int blocks_per_sample)
{
    __shared__ double red[SUM_THREADS];
    const int c = blockIdx.x, kind = blockIdx.y, C = d.C_out, chunks = (C + CO - 1) / CO;
    if (kind == 0 && grad_bias == nullptr) return;
    const long long n = kind == 0 ? (long long)d.B * blocks_per_sample : d.B;
    double v = 0.0;
    for (long long t = threadIdx.x; t < n; t += SUM_THREADS) {
        if (kind == 0) {
            const long long b = t / blocks_per_sample, k = t % blocks_per_sample;
            v += b_partials[((b * chunks + c / CO) * blocks_per_sample + k) * CO + c % CO];
        } else {
            v += param_terms[t * 2 * C + (kind == 1 ? c : C + c)];
        }
    }
    red[threadIdx.x] = v;
    __syncthreads();
    for (int half = SUM_THREADS / 2; half > 0; half /= 2) {
        if (threadIdx.x < half) red[threadIdx.x] += red[threadIdx.x + half];
        __syncthreads();
    }
    if (threadIdx.x == 0) (kind == 0 ? grad_bias : kind == 1 ? grad_gn_weight : grad_gn_bias)[c] = (float)red[0];
}

static Dims make_dims(int B, int C_in, int C_out, int D, int H, int W, int K) {
    Dims d;
    d.B = B; d.C_in = C_in; d.C_out = C_out; d.D = D; d.H = H; d.W = W;
    d.Do = D - K + 1; d.Ho = H - K + 1; d.Wo = W - K + 1;
    d.quads = (d.Wo + PW - 1) / PW;
    d.in_quads = (W + PWI - 1) / PWI;
    d.out_units = (long long)d.Do * d.Ho * d.quads;
    d.in_units = (long long)D * H * d.in_quads;
    return d;
}

static int out_blocks_per_sample(const Dims& d) { return (int)((d.out_units + THREADS - 1) / THREADS); }

long long forward_workspace_doubles(int B, int C_in, int C_out, int D, int H, int W, int K) {
    const Dims d = make_dims(B, C_in, C_out, D, H, W, K);
    return (long long)B * ((C_out + CO - 1) / CO) * (tc_forward(d, K) ? d.Do : out_blocks_per_sample(d)) * 2 * CO;
}

cudaError_t forward_launch(const float* x, const float* weight, const float* bias, const float* gn_weight,
                           const float* gn_bias, double* partials, float* out, double* stats, int B, int C_in,
                           int C_out, int G, int D, int H, int W, int K, double eps, cudaStream_t stream) {
    const Dims d = make_dims(B, C_in, C_out, D, H, W, K);
    const bool tc = tc_forward(d, K);
    const int bps = tc ? d.Do : out_blocks_per_sample(d);
    const dim3 grid((unsigned)((long long)B * bps), (C_out + CO - 1) / CO);
    if (tc && K == 3) conv_hswish_sums_tc_kernel<3><<<grid, THREADS, 0, stream>>>(x, weight, bias, partials, d);
    else if (tc) conv_hswish_sums_tc_kernel<4><<<grid, THREADS, 0, stream>>>(x, weight, bias, partials, d);
    else if (K == 3) conv_hswish_sums_kernel<3><<<grid, THREADS, 0, stream>>>(x, weight, bias, partials, d, bps);
    else conv_hswish_sums_kernel<4><<<grid, THREADS, 0, stream>>>(x, weight, bias, partials, d, bps);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) return err;
    gn_mean_finalize_kernel<<<B, 128, 2 * C_out * sizeof(double), stream>>>(partials, gn_weight, gn_bias, out, stats,
                                                                            d, G, bps, eps);
    return cudaGetLastError();
}

// Workspace (doubles): coef (B, C, 3) floats rounded up to doubles, param terms (B, 2C), bias partials,
// weight-gradient partials.
static int wg_blocks(int sms) { return 3 * sms; }   // grad_weight_kernel: 3 blocks per SM resident
long long backward_workspace_doubles(int B, int C_in, int C_out, int D, int H, int W, int K, int sms) {
    const Dims d = make_dims(B, C_in, C_out, D, H, W, K);
    const long long n_items = (long long)(C_out + 3) / 4 * C_in * K * K;
    return ((long long)B * C_out * 3 + 1) / 2 + (long long)B * 2 * C_out +
           (long long)B * ((C_out + CO - 1) / CO) * out_blocks_per_sample(d) * CO + wg_blocks(sms) * n_items * 4 * K;
}

cudaError_t backward_launch(const float* grad_out, const float* x, const float* weight, const float* bias,
                            const float* gn_weight, const double* stats, double* work, float* grad_y,
                            float* grad_x, float* grad_weight, float* grad_bias, float* grad_gn_weight,
                            float* grad_gn_bias, int B, int C_in, int C_out, int G, int D, int H, int W, int K,
                            int sms, cudaStream_t stream) {
    const Dims d = make_dims(B, C_in, C_out, D, H, W, K);
    const int bps = out_blocks_per_sample(d), chunks = (C_out + CO - 1) / CO;
    float* coef = reinterpret_cast<float*>(work);
    double* param_terms = work + ((long long)B * C_out * 3 + 1) / 2;
    double* b_partials = param_terms + (long long)B * 2 * C_out;
    double* w_partials = b_partials + (long long)B * chunks * bps * CO;
    const int n_items = (C_out + 3) / 4 * C_in * K * K, n_wg = wg_blocks(sms);
    cudaError_t err;
    gn_mean_backward_coef_kernel<<<B, 128, 0, stream>>>(grad_out, gn_weight, stats, coef, param_terms, d, G);
    if ((err = cudaGetLastError()) != cudaSuccess) return err;
    const dim3 grid_y((unsigned)((long long)B * bps), chunks);
    if (K == 3) grad_y_kernel<3><<<grid_y, THREADS, 0, stream>>>(x, weight, bias, coef, grad_y, b_partials, d, bps);
    else grad_y_kernel<4><<<grid_y, THREADS, 0, stream>>>(x, weight, bias, coef, grad_y, b_partials, d, bps);
    if ((err = cudaGetLastError()) != cudaSuccess) return err;
    if (grad_x != nullptr) {
        const int ibps = (int)((d.in_units + THREADS - 1) / THREADS);
        const dim3 grid_x((unsigned)((long long)B * ibps), (C_in + CI - 1) / CI);
        if (K == 3) grad_input_kernel<3><<<grid_x, THREADS, 0, stream>>>(grad_y, weight, grad_x, d, ibps);
        else grad_input_kernel<4><<<grid_x, THREADS, 0, stream>>>(grad_y, weight, grad_x, d, ibps);
        if ((err = cudaGetLastError()) != cudaSuccess) return err;
    }
    const long long smem = wg_smem_floats(d, K) * (long long)sizeof(float);
    if (smem <= WG_SMEM_MAX) {
        const int n_groups = (n_items / K + WG_WARPS - 1) / WG_WARPS;
        const auto kernel = K == 3 ? grad_weight_smem_kernel<3> : grad_weight_smem_kernel<4>;
        if ((err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem)) != cudaSuccess)
            return err;
        kernel<<<n_groups * n_wg, WG_THREADS, (size_t)smem, stream>>>(grad_y, x, w_partials, d, n_groups, n_wg);
    } else if (K == 3) {
        grad_weight_kernel<3><<<n_wg, WG_THREADS, 0, stream>>>(grad_y, x, w_partials, d, n_items);
    } else {
        grad_weight_kernel<4><<<n_wg, WG_THREADS, 0, stream>>>(grad_y, x, w_partials, d, n_items);
    }
    if ((err = cudaGetLastError()) != cudaSuccess) return err;
    const long long n_w = (long long)C_out * C_in * K * K * K;
    if (K == 3) finish_weight_grad_kernel<3><<<(unsigned)((n_w + 127) / 128), 128, 0, stream>>>(w_partials, grad_weight, d, n_wg);
    else finish_weight_grad_kernel<4><<<(unsigned)((n_w + 127) / 128), 128, 0, stream>>>(w_partials, grad_weight, d, n_wg);
    if ((err = cudaGetLastError()) != cudaSuccess) return err;
    finish_channel_grads_kernel<<<dim3(C_out, 3), SUM_THREADS, 0, stream>>>(b_partials, param_terms, grad_bias,
                                                                            grad_gn_weight, grad_gn_bias, d, bps);
    return cudaGetLastError();
}
"""

cpp_source = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

long long forward_workspace_doubles(int B, int C_in, int C_out, int D, int H, int W, int K);
cudaError_t forward_launch(const float* x, const float* weight, const float* bias, const float* gn_weight,
                           const float* gn_bias, double* partials, float* out, double* stats, int B, int C_in,
                           int C_out, int G, int D, int H, int W, int K, double eps, cudaStream_t stream);
long long backward_workspace_doubles(int B, int C_in, int C_out, int D, int H, int W, int K, int sms);
cudaError_t backward_launch(const float* grad_out, const float* x, const float* weight, const float* bias,
                            const float* gn_weight, const double* stats, double* work, float* grad_y,
                            float* grad_x, float* grad_weight, float* grad_bias, float* grad_gn_weight,
                            float* grad_gn_bias, int B, int C_in, int C_out, int G, int D, int H, int W, int K,
                            int sms, cudaStream_t stream);

// OPS_NAMESPACE comes from the build (-D): the file's name and a hash of its source.
#define OPS_STR_(s) #s
#define OPS_STR(s) OPS_STR_(s)
#define OP(name) OPS_STR(OPS_NAMESPACE) "::" name
#define DEFINE_OPS(ns, m) TORCH_LIBRARY(ns, m)
#define IMPLEMENT_OPS(ns, key, m) TORCH_LIBRARY_IMPL(ns, key, m)

using torch::Tensor;
using OptTensor = c10::optional<Tensor>;

static void check(cudaError_t err, const char* what) {
    TORCH_CHECK(err == cudaSuccess, "conv3d_hardswish_groupnorm_mean_all_custom: ", what, " failed: ",
                cudaGetErrorString(err));
}

// The operators (ModelNew checks its input first, with clearer messages): model (differentiable: the
// Autograd kernel at the end), and the forward and backward it calls:
//   forward(x, weight, bias, gn_weight, gn_bias, groups, eps) -> (out (B, C), stats (B, C + 2G) float64);
//   backward(grad_out, x, weight, bias, gn_weight, stats, groups, input_grad) -> the gradients of x (if
//     input_grad; else an empty tensor), weight, bias (empty if None), gn_weight and gn_bias.
std::tuple<Tensor, Tensor> forward_cuda(const Tensor& input, const Tensor& weight_in, const OptTensor& bias,
                                        const Tensor& gn_weight, const Tensor& gn_bias, int64_t groups, double eps) {
    TORCH_CHECK(input.is_cuda() && input.scalar_type() == torch::kFloat32 && input.dim() == 5,
                "conv3d_hardswish_groupnorm_mean_all_custom: input must be a 5-D float32 CUDA tensor");
    TORCH_CHECK(input.size(1) == weight_in.size(1) && input.size(2) >= weight_in.size(2) &&
                input.size(3) >= weight_in.size(3) && input.size(4) >= weight_in.size(4),
                "conv3d_hardswish_groupnorm_mean_all_custom: input channels or size do not fit the weight");
    const c10::cuda::CUDAGuard guard(input.device());
    auto x = input.contiguous(), weight = weight_in.contiguous();
    const int64_t B = x.size(0), C = weight.size(0), K = weight.size(2);
    TORCH_CHECK((K == 3 || K == 4) && weight.size(3) == K && weight.size(4) == K,
                "conv3d_hardswish_groupnorm_mean_all_custom: the kernels are built for cubic kernels of size 3 and 4");
    auto out = at::empty({B, C}, x.options());
    auto stats = at::empty({B, C + 2 * groups}, x.options().dtype(torch::kFloat64));
    if (B == 0) return {out, stats};
    auto partials = at::empty({forward_workspace_doubles(B, x.size(1), C, x.size(2), x.size(3), x.size(4), K)},
                              x.options().dtype(torch::kFloat64));
    check(forward_launch(x.data_ptr<float>(), weight.data_ptr<float>(),
                         bias.has_value() ? bias->data_ptr<float>() : nullptr, gn_weight.contiguous().data_ptr<float>(),
                         gn_bias.contiguous().data_ptr<float>(), partials.data_ptr<double>(), out.data_ptr<float>(),
                         stats.data_ptr<double>(), B, x.size(1), C, groups, x.size(2), x.size(3), x.size(4), K, eps,
                         c10::cuda::getCurrentCUDAStream()), "forward launch");
    return {out, stats};
}

std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor> backward_cuda(
        const Tensor& grad_out, const Tensor& input, const Tensor& weight_in, const OptTensor& bias,
        const Tensor& gn_weight, const Tensor& stats, int64_t groups, bool input_grad) {
    const c10::cuda::CUDAGuard guard(input.device());
    auto x = input.contiguous(), weight = weight_in.contiguous();
    const int64_t B = x.size(0), C_in = x.size(1), C = weight.size(0), K = weight.size(2);
    const int64_t D = x.size(2), H = x.size(3), W = x.size(4);
    auto grad_x = input_grad ? at::empty_like(x) : at::empty({0}, x.options());   // every entry written below
    auto grad_weight = at::empty_like(weight);
    auto grad_bias = at::empty({bias.has_value() ? C : 0}, x.options());
    auto grad_gn_weight = at::empty({C}, x.options()), grad_gn_bias = at::empty({C}, x.options());
    if (B == 0) {
        for (auto* t : {&grad_weight, &grad_bias, &grad_gn_weight, &grad_gn_bias}) t->zero_();
        return {grad_x, grad_weight, grad_bias, grad_gn_weight, grad_gn_bias};
    }
    int sms = 0;
    check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, x.get_device()), "device query");
    auto grad_y = at::empty({B, C, D - K + 1, H - K + 1, W - K + 1}, x.options());
    auto work = at::empty({backward_workspace_doubles(B, C_in, C, D, H, W, K, sms)}, x.options().dtype(torch::kFloat64));
    check(backward_launch(grad_out.contiguous().data_ptr<float>(), x.data_ptr<float>(), weight.data_ptr<float>(),
                          bias.has_value() ? bias->data_ptr<float>() : nullptr, gn_weight.contiguous().data_ptr<float>(),
                          stats.data_ptr<double>(), work.data_ptr<double>(), grad_y.data_ptr<float>(),
                          input_grad ? grad_x.data_ptr<float>() : nullptr, grad_weight.data_ptr<float>(),
                          bias.has_value() ? grad_bias.data_ptr<float>() : nullptr, grad_gn_weight.data_ptr<float>(),
                          grad_gn_bias.data_ptr<float>(), B, C_in, C, groups, D, H, W, K, sms,
                          c10::cuda::getCurrentCUDAStream()), "backward launch");
    return {grad_x, grad_weight, grad_bias, grad_gn_weight, grad_gn_bias};
}

// Meta: shapes and dtypes only, in symbolic sizes (torch.compile with dynamic shapes).
std::tuple<Tensor, Tensor> forward_meta(const Tensor& x, const Tensor& weight, const OptTensor& bias,
                                        const Tensor& gn_weight, const Tensor& gn_bias, int64_t groups, double eps) {
    return {at::empty_symint({x.sym_size(0), weight.sym_size(0)}, x.options()),
            at::empty_symint({x.sym_size(0), weight.sym_size(0) + 2 * groups}, x.options().dtype(torch::kFloat64))};
}

std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor> backward_meta(
        const Tensor& grad_out, const Tensor& x, const Tensor& weight, const OptTensor& bias,
        const Tensor& gn_weight, const Tensor& stats, int64_t groups, bool input_grad) {
    return {input_grad ? at::empty_like(x) : at::empty({0}, x.options()), at::empty_like(weight),
            bias.has_value() ? at::empty_like(gn_weight) : at::empty({0}, x.options()), at::empty_like(gn_weight),
            at::empty_like(gn_weight)};
}

static auto& forward_op() {
    static auto op = c10::Dispatcher::singleton().findSchemaOrThrow(OP("forward"), "").typed<decltype(forward_cuda)>();
    return op;
}
static auto& backward_op() {
    static auto op = c10::Dispatcher::singleton().findSchemaOrThrow(OP("backward"), "").typed<decltype(backward_cuda)>();
    return op;
}

// model without autograd (inference tensors, no gradient wanted): the forward's output.
Tensor model_plain(const Tensor& x, const Tensor& weight, const OptTensor& bias, const Tensor& gn_weight,
                   const Tensor& gn_bias, int64_t groups, double eps) {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return std::get<0>(forward_op().call(x, weight, bias, gn_weight, gn_bias, groups, eps));
}

// model's Autograd kernel: saves the input, the parameters and the statistics; the backward operator does the rest.
struct Model : torch::autograd::Function<Model> {
    static Tensor forward(torch::autograd::AutogradContext* ctx, const Tensor& x, const Tensor& weight,
                          const OptTensor& bias, const Tensor& gn_weight, const Tensor& gn_bias, int64_t groups,
                          double eps) {
        at::AutoDispatchBelowADInplaceOrView below_autograd;
        auto r = forward_op().call(x, weight, bias, gn_weight, gn_bias, groups, eps);
        const bool has_bias = bias.has_value() && bias->defined();
        ctx->save_for_backward({x, weight, has_bias ? *bias : Tensor(), gn_weight, std::get<1>(r)});
        ctx->saved_data["groups"] = groups;
        ctx->saved_data["input_grad"] = x.requires_grad();
        return std::get<0>(r);
    }

    static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                   torch::autograd::variable_list grads) {
        const auto s = ctx->get_saved_variables();
        const bool input_grad = ctx->saved_data["input_grad"].toBool();
        auto r = backward_op().call(grads[0], s[0], s[1], s[2].defined() ? OptTensor(s[2]) : OptTensor(), s[3], s[4],
                                    ctx->saved_data["groups"].toInt(), input_grad);
        return {input_grad ? std::get<0>(r) : Tensor(), std::get<1>(r), s[2].defined() ? std::get<2>(r) : Tensor(),
                std::get<3>(r), std::get<4>(r), Tensor(), Tensor()};
    }
};

Tensor model_autograd(const Tensor& x, const Tensor& weight, const OptTensor& bias, const Tensor& gn_weight,
                      const Tensor& gn_bias, int64_t groups, double eps) {
    // Function::apply costs some 13 us of host time per call: only where a gradient is wanted.
    const bool wanted = at::GradMode::is_enabled() && (x.requires_grad() || weight.requires_grad() ||
                           (bias.has_value() && bias->requires_grad()) || gn_weight.requires_grad() ||
                           gn_bias.requires_grad());
    if (!wanted) return model_plain(x, weight, bias, gn_weight, gn_bias, groups, eps);
    return Model::apply(x, weight, bias, gn_weight, gn_bias, groups, eps);
}

DEFINE_OPS(OPS_NAMESPACE, m) {
    m.def("forward(Tensor x, Tensor weight, Tensor? bias, Tensor gn_weight, Tensor gn_bias, int groups, float eps) "
          "-> (Tensor, Tensor)");
    m.def("backward(Tensor grad_out, Tensor x, Tensor weight, Tensor? bias, Tensor gn_weight, Tensor stats, "
          "int groups, bool input_grad) -> (Tensor, Tensor, Tensor, Tensor, Tensor)");
    m.def("model(Tensor x, Tensor weight, Tensor? bias, Tensor gn_weight, Tensor gn_bias, int groups, float eps) "
          "-> Tensor");
}
IMPLEMENT_OPS(OPS_NAMESPACE, CUDA, m) {
    m.impl("forward", forward_cuda);
    m.impl("backward", backward_cuda);
    m.impl("model", model_plain);
}
IMPLEMENT_OPS(OPS_NAMESPACE, Meta, m) {
    m.impl("forward", forward_meta);
    m.impl("backward", backward_meta);
    m.impl("model", model_plain);
}
IMPLEMENT_OPS(OPS_NAMESPACE, Autograd, m) {
    m.impl("model", model_autograd);
}
"""

# PyTorch >= 2.7 can skip prepending torch headers to the .cu file (about 40 s less to build it).
_header_option = ({"no_implicit_headers": True}
                  if "no_implicit_headers" in inspect.signature(load_inline).parameters else {})
# The operators' namespace: the file's name and a hash of its source. A namespace can be registered once
# per process, so the library is loaded once per source, however often the file is exec-ed.
_namespace = ("conv3d_hardswish_groupnorm_mean_all_custom_" +
              hashlib.sha256((cpp_source + cuda_source).encode()).hexdigest()[:12])
if not hasattr(getattr(torch.ops, _namespace), "model"):
    _build_root = os.environ.get("TORCH_EXTENSIONS_DIR") or get_default_build_root()
    print(f"conv3d_hardswish_groupnorm_mean_all_custom: loading its CUDA extension from "
          f"{_build_root} (a cold build takes 30 to 60 s)", file=sys.stderr)
    load_inline(name="conv3d_hardswish_groupnorm_mean_all_custom_ext", cpp_sources=cpp_source,
                cuda_sources=cuda_source, extra_cflags=[f"-DOPS_NAMESPACE={_namespace}"], extra_cuda_cflags=["-O3"],
                is_python_module=False, verbose=False, **_header_option)
_ops = getattr(torch.ops, _namespace)
_model = _ops.model.default   # an overload, not the packet: a little less host time per call

KERNEL_SIZES = (3, 4)   # the CUDA kernels are instantiated for these


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, num_groups=4, bias=True):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size, bias=bias)
        self.group_norm = nn.GroupNorm(num_groups, out_channels)
        k = self.conv.kernel_size
        if k[0] not in KERNEL_SIZES or k != (k[0],) * 3:
            raise ValueError(f"kernel_size must be 3 or 4 (cubic: the CUDA kernels are built for those), "
                             f"got {kernel_size}")

    def forward(self, x):
        if not (x.is_cuda or x.is_meta):   # meta: shapes only, for tracing
            raise ValueError(f"input must be a CUDA tensor (or meta), got one on {x.device}")
        if x.dtype != torch.float32:
            raise ValueError(f"input must be float32, got {x.dtype}")
        if x.dim() != 5:
            raise ValueError(f"input must be 5-D (B, C, D, H, W), got {x.dim()}-D")
        if x.shape[1] != self.conv.in_channels:
            raise ValueError(f"input has {x.shape[1]} channels, the conv expects {self.conv.in_channels}")
        if min(x.shape[2:]) < self.conv.kernel_size[0]:
            raise ValueError(f"input spatial size {tuple(x.shape[2:])} is smaller than the kernel "
                             f"{self.conv.kernel_size}")
        conv, gn = self.conv, self.group_norm
        return _model(x, conv.weight, conv.bias, gn.weight, gn.bias, gn.num_groups, gn.eps)


batch_size = 1024
in_channels = 3
out_channels = 16
depth, height, width = 16, 32, 32
kernel_size = 4


def get_inputs():
    return [torch.rand(batch_size, in_channels, depth, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]


if __name__ == "__main__":
    from common.evaluate import main
    sys.exit(main("conv3d_hardswish_groupnorm_mean_all_custom", ModelNew))
