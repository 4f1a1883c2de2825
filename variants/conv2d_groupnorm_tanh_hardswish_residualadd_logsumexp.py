"""Conv2d -> GroupNorm -> Tanh -> HardSwish -> + conv -> logsumexp over channels (KernelBench level 2,
problem 92), with a backward for autograd.

Forward, two phases over the input; the 64-channel conv output never touches memory:
  phase 1 (conv_kernel<STATS>): the conv; each unit of work writes per-channel sums and sums of
    squares (double); gn_stats_kernel adds them per (sample, group) in a fixed order and folds mean,
    1/std and the affine parameters into a per-channel scale and shift.
  phase 2 (conv_kernel<LOGSUMEXP>): recompute the conv, x_res = x + hardswish(tanh(x * scale + shift)),
    and logsumexp over the channels (max first). A thread holds 16 channels of each of its pixels;
    the 4 lanes of a quad hold the other channels of the same pixels and merge maxima and sums with
    two shuffles each; one value per pixel is written.
The conv is a GEMM on the tensor cores (rows: output pixels, 16 adjacent columns per tile; columns:
the 64 output channels; depth: the C_in * 9 taps, padded to a multiple of 8) in split TF32
("3xTF32": each fp32 operand = big + small, both TF32, and big*big + big*small + small*big), which
keeps fp32-level accuracy. A warp gathers its two tiles' inputs from global memory (L1) in the mma
fragment layout and splits them; the weights, split once per block, sit in shared memory. On Hopper
(sm_90a) each warpgroup issues wgmma m64n64k8; elsewhere mma.sync does the same products. Blocks
are persistent, each takes a contiguous run of units (one output row each at this size) and
prefetches the next unit's input rows into L1.
Backward (autograd), with u = g * softmax_c(x_res) and v = u * hardswish'(t) * (1 - t^2), t the tanh:
  dL/dx_conv = u + rstd * (gamma * v - mean_g(gamma v) - xhat * mean_g(gamma v xhat)),
  dL/dgamma = sum v xhat, dL/dbeta = sum v. conv_kernel<STORE> recomputes x_conv, gn_backward_sums
  reduces per (sample, channel), gn_backward_kernel writes dL/dx_conv once, and PyTorch's convolution
  backward (allowed by the brief) gives the input, weight and bias gradients (deterministic only with
  torch.backends.cudnn.deterministic, as in PyTorch).
Operators (TORCH_LIBRARY, namespace: the file's name and a hash of its source): model, with CUDA, Meta
and Autograd kernels, and the forward and backward it calls; torch.compile(fullgraph=True) traces it.
Saved for backward: the input (the conv backward needs it; eager keeps it too), the parameters, the
(B, 1, H', W') output, the per-channel scale and shift (B, C, 2) and the per-group mean and 1/std
(B, G, 2): 8 MB beyond the input at the benchmark size, where eager keeps the 520 MB conv output and
its intermediates. The backward recomputes the conv output (one more conv) instead.

Floor at the benchmark size (B=128, 8->64 channels, 128x128, k=3): 18.7 GFLOP of FP32 multiply-add
per conv = 0.28 ms at 67 TFLOP/s (the floor run_all.py reports; the 67 MB input is 0.02 ms of
bandwidth). On the tensor cores each phase is 3 x 18.7 GFLOP of TF32, 0.11 ms at ~495 TFLOP/s; phase
2 adds three MUFU operations per conv output (two for tanh, one exp), 0.10 ms at 16 per clock per
SM. Measured on an H100 (ncu): phase 1 0.27 ms, phase 2 0.34 ms, at 44% and 35% of the tensor
rate, bound by issue and latency (the stats and logsumexp epilogues are half the instructions);
run_all.py times the forward at 0.66 to 0.82 ms on H100s (0.761 ms, 2.7x the floor, 5.7x eager, in
the README's table; history in docs/conv2d_groupnorm_tanh_hardswish_residualadd_logsumexp.md).
TF32: cuDNN runs this Conv2d in full fp32 at the benchmark size even with torch.backends.cudnn.allow_tf32
on (tests/test_gpu.py checks it), so this file is exact under both settings.

Run: python variants/conv2d_groupnorm_tanh_hardswish_residualadd_logsumexp.py
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
#include <algorithm>
#include <cstdint>

constexpr int K = 3;             // kernel size the conv is specialised for (refused otherwise in Python)
constexpr int TAPS = K * K;
constexpr int N_TILES = 8;       // 8-channel tiles: the conv's channels, padded to 64
constexpr int C_PAD = 8 * N_TILES;
constexpr int M_TILES = 2;       // 16-column output tiles a warp computes at once
constexpr int WARPS = 8, THREADS = 32 * WARPS;   // two warpgroups share one copy of the weights
constexpr int BLOCKS_PER_SM = 2;                 // caps registers at 128
constexpr int UNIT_TILES = WARPS * M_TILES;      // a unit of work: M_TILES tiles per warp
constexpr int N_STATS = 2 * C_PAD;               // per channel: sum, sum of squares
constexpr int B_WORDS = C_PAD * 8;               // one 8-deep slice of the weights
constexpr int FINAL_THREADS = 256;
constexpr int ROW_THREADS = 512; // backward row kernels: 16 warps, one (sample, channel) row each at a time

enum Mode { STATS = 0, LOGSUMEXP = 1, STORE = 2 };

// The hardware's approximations (MUFU), flushing denormals so that no fix-up code surrounds them.
__device__ __forceinline__ float ex2(float v) { float r; asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(v)); return r; }
__device__ __forceinline__ float rcp(float v) { float r; asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(v)); return r; }
constexpr float LOG2E = 1.4426950408889634f;

// tanh(y) from y2 = 2 y log2(e): 1 - 2 / (1 + 2^y2). Absolute error about 2e-7, which is all that
// x_res (an absolute sum) and 1 - t^2 need, for two MUFU operations. Saturates to +-1 (2^y2 = inf
// gives rcp = 0).
__device__ __forceinline__ float tanh_of_exp2_arg(float y2) { return fmaf(-2.f, rcp(1.f + ex2(y2)), 1.f); }

// hardswish(t) = t * clamp(t + 3, 0, 6) / 6; for a tanh (|t| <= 1) the clamp is never active.
__device__ __forceinline__ float hardswish_of_tanh(float t) { return t * fmaf(t, 1.f / 6.f, 0.5f); }

__device__ __forceinline__ float hardswish_grad(float v) {   // PyTorch's convention at the joins
    return v < -3.f ? 0.f : (v <= 3.f ? fmaf(v, 1.f / 3.f, 0.5f) : 1.f);
}

// Split-TF32: v = big + small. big is v with its low 13 bits cleared, exact in TF32 (sign, 8
// exponent bits, 10 mantissa bits); small = v - big (exact in fp32) holds the other 13 significant
// bits, of which the tensor cores, which ignore an operand's low 13 bits, use the top 11.
// big*big + big*small + small*big then loses at most ~2^-20 of each product (small*small and
// those 2 bits): fp32-level accuracy. Finite inputs only (inf and NaN give NaN).
struct Split { uint32_t big, small; };
__device__ __forceinline__ Split split(float v) {
    const float big = __uint_as_float(__float_as_uint(v) & 0xffffe000u);
    return {__float_as_uint(big), __float_as_uint(v - big)};
}

// The conv as a GEMM: rows = output pixels, columns = output channels, k = (ci, kh, kw) padded to
// a multiple of 8. Each block keeps the weights, split, in shared memory per 8-deep step and part
// (big, small), in the tensor cores' K-major layout: channel n, depth k at word
// (n / 8) * 64 + (k / 4) * 32 + (n % 8) * 4 + k % 4 (8x4 blocks of 128 bytes); zero past C_out and
// past C_in * TAPS.
__device__ __forceinline__ uint32_t split_weight(const float* __restrict__ weight, int i, int C_out, int C_in) {
    const int w = i % B_WORDS, part = i / B_WORDS % 2, step = i / (2 * B_WORDS);
    const int co = w / 64 * 8 + w / 4 % 8, k = step * 8 + w / 32 % 2 * 4 + w % 4;
    const Split s = split(co < C_out && k < C_in * TAPS ? weight[(size_t)co * C_in * TAPS + k] : 0.f);
    return part == 0 ? s.big : s.small;
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// Hopper: one warpgroup multiplies 64 rows (16 per warp, A from registers in the m16n8k8 layout)
// by the 64 channels read from shared memory, asynchronously.
__device__ __forceinline__ void wgmma(float (&d)[4 * N_TILES], const uint32_t (&a)[4], uint64_t b_desc) {
    asm volatile("wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32 "
                 "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
                 "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, "
                 "{%32,%33,%34,%35}, %36, 1, 1, 1;"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
                   "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
                   "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
                   "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
                   "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc));
}
// Shared-memory descriptor of one 64x8 weight slice: 8x4 blocks, 128 bytes apart along k, 256 along n.
__device__ __forceinline__ uint64_t slice_desc(const uint32_t* p) {
    const uint32_t addr = (uint32_t)__cvta_generic_to_shared(p);
    return (uint64_t)((addr & 0x3ffff) >> 4) | (uint64_t)(128 >> 4) << 16 | (uint64_t)(256 >> 4) << 32;
}
#else
// Other GPUs: the same products with mma.sync, 16 rows x 8 channels per instruction. Fragments
// (g = lane / 4, t = lane % 4): a = rows g, g+8 at depths t, t+4; b = depths t, t+4 of channel g;
// d = row g then g+8, channels 2t, 2t+1.
__device__ __forceinline__ void mma(float* d, const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
#endif

// acc += a * (weight slice), with the slice's big and small parts at b[0, B_WORDS) and b[B_WORDS, 2 B_WORDS)
// (on Hopper: b_desc, the descriptor of b).
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
__device__ __forceinline__ void multiply(float (&acc)[4 * N_TILES], const uint32_t (&big)[4], const uint32_t (&small)[4],
                                         uint64_t b_desc) {
    wgmma(acc, small, b_desc);            // small terms first
    wgmma(acc, big, b_desc + B_WORDS * 4 / 16);
    wgmma(acc, big, b_desc);
}
#else
__device__ __forceinline__ void multiply(float (&acc)[4 * N_TILES], const uint32_t (&big)[4], const uint32_t (&small)[4],
                                         const uint32_t* b) {
    const int lane = threadIdx.x % 32, nk = lane / 4 * 4 + lane % 4;   // channel g, depth t
#pragma unroll
    for (int j = 0; j < N_TILES; ++j) {
        const uint32_t* bj = b + j * 64 + nk;
        mma(acc + 4 * j, small, bj[0], bj[32]);
        mma(acc + 4 * j, big, bj[B_WORDS], bj[B_WORDS + 32]);
        mma(acc + 4 * j, big, bj[0], bj[32]);
    }
}
#endif

// An output tile: 16 adjacent columns of output row oh; a lane's rows are columns w0 + g and
// w0 + g + 8. WIDE (Wo >= 16): the last tile of a row shifts left to stay inside it and does not
// count the columns its neighbour owns. Otherwise one tile per row, columns past Wo clamped.
struct Tile {
    int oh, w0, w_first;
    bool valid;
    __device__ bool counted(int col, int Wo) const { return valid && col >= w_first && col < Wo; }
};
template <bool WIDE>
__device__ __forceinline__ Tile tile_at(int tile, int tiles, int n_wtiles, int Wo) {
    const bool valid = tile < tiles;
    const int tt = valid ? tile : tiles - 1;    // idle rows recompute a real tile, count nothing
    const int w_first = tt % n_wtiles * 16;
    return {tt / n_wtiles, WIDE ? min(w_first, Wo - 16) : 0, w_first, valid};
}

// Phase 1 (STATS), phase 2 (LOGSUMEXP) and the backward's recompute (STORE) share the conv, on the
// tensor cores. Persistent: block x takes a contiguous run of the B * units_per_sample units of work
// (each inside one sample), so that a unit finds most of its input rows in L1, and prefetches the
// next unit's rows into L1 while it computes. Dynamic shared memory: the split weights
// (k_steps * 2 * B_WORDS words), then k_steps * 4 uint2, the input offsets of taps (k, k + 4) for
// k = step * 8 + t.
template <int MODE, bool WIDE>
__global__ void __launch_bounds__(THREADS, BLOCKS_PER_SM) conv_kernel(
    const float* __restrict__ x,        // (B, C_in, H, W), contiguous
    const float* __restrict__ weight,   // (C_out, C_in, K, K), contiguous
    const float* __restrict__ bias,     // (C_out)
    const float* __restrict__ norm,     // LOGSUMEXP: (B, C_out, 2) from gn_stats_kernel
    double* __restrict__ partials,      // STATS: (B, units_per_sample, N_STATS)
    float* __restrict__ out,            // LOGSUMEXP: (B, Ho, Wo); STORE: (B, C_out, Ho, Wo)
    int B, int C_in, int C_out, int H, int W, int units_per_sample)
{
    extern __shared__ __align__(128) uint32_t w_s[];
    __shared__ float red[MODE == STATS ? 2 : 1][WARPS][N_STATS];   // STATS: per warp, each channel's S and Q
    const int Ho = H - K + 1, Wo = W - K + 1;
    const int n_wtiles = (Wo + 15) / 16, tiles = Ho * n_wtiles;
    const int k_steps = (C_in * TAPS + 7) / 8;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;

    const int n_words = k_steps * 2 * B_WORDS;
    for (int i = threadIdx.x; i < n_words; i += THREADS) w_s[i] = split_weight(weight, i, C_out, C_in);
    uint2* tap_s = reinterpret_cast<uint2*>(w_s + n_words);
    for (int i = threadIdx.x; i < k_steps * 4; i += THREADS) {
        unsigned off[2];
        for (int h = 0; h < 2; ++h) {   // tap k = (ci, kh, kw); padding taps read offset 0
            const int k = i / 4 * 8 + i % 4 + 4 * h, r = k % TAPS;
            off[h] = k < C_in * TAPS ? (k / TAPS * H + r / K) * W + r % K : 0;
        }
        tap_s[i] = make_uint2(off[0], off[1]);
    }
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");   // the weights are read by wgmma
#endif
    __syncthreads();

    // This block's units: a contiguous run [u_begin, u_begin + count) of the B * units_per_sample,
    // walked as (sample b, unit).
    const long long n_units = (long long)B * units_per_sample, u_begin = n_units * blockIdx.x / gridDim.x;
    const int count = (int)(n_units * (blockIdx.x + 1) / gridDim.x - u_begin);
    int b = (int)(u_begin / units_per_sample), unit = (int)(u_begin % units_per_sample);
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    const uint64_t desc0 = slice_desc(w_s);
#endif
#pragma unroll 1
    for (int n = 0, parity = 0; n < count; ++n, parity ^= 1) {
        const int tile0 = (unit * WARPS + warp) * M_TILES;
        if (n + 1 < count) {   // the next unit's input rows, whole, into L1: a warp per row, a lane per line
            const bool last = unit + 1 == units_per_sample;
            const int next_b = last ? b + 1 : b, first = last ? 0 : (unit + 1) * UNIT_TILES;
            const int row0 = first / n_wtiles, rows = (min(first + UNIT_TILES, tiles) - 1) / n_wtiles + K - row0;
            const int row_lines = W / 32 + 2;   // the row's 128-byte lines, whatever its alignment
            for (int i = warp; i < C_in * rows; i += WARPS) {
                const float* row = x + (((size_t)next_b * C_in + i / rows) * H + row0 + i % rows) * W;
                for (int line = lane; line < row_lines; line += 32)
                    asm volatile("prefetch.global.L1 [%0];" :: "l"(row + min(line * 32, W - 1)));
            }
        }
        // The host checks one sample is < 2^31 elements. Opaque to the compiler, so that each load's
        // address is one 32-bit add and one wide multiply-add instead of a re-derived 64-bit index.
        const float* xb;
        asm("mov.b64 %0, %1;" : "=l"(xb) : "l"(x + (size_t)b * C_in * H * W));
        unsigned corner[M_TILES][2];   // input offset of this lane's rows g and g + 8 of each tile
#pragma unroll
        for (int i = 0; i < M_TILES; ++i) {
            const Tile tl = tile_at<WIDE>(tile0 + i, tiles, n_wtiles, Wo);
#pragma unroll
            for (int r = 0; r < 2; ++r) {
                const int col = tl.w0 + g + 8 * r;
                corner[i][r] = tl.oh * W + (WIDE ? col : min(col, Wo - 1));
            }
        }

        float a_next[M_TILES][4];
        const auto load = [&](int step) {
            const uint2 off = tap_s[step * 4 + t];
#pragma unroll
            for (int i = 0; i < M_TILES; ++i) {
                const float* p0 = xb + (corner[i][0] + off.x);
                const float* p1 = xb + (corner[i][0] + off.y);
                a_next[i][0] = __ldg(p0);
                a_next[i][1] = __ldg(WIDE ? p0 + 8 : xb + (corner[i][1] + off.x));
                a_next[i][2] = __ldg(p1);
                a_next[i][3] = __ldg(WIDE ? p1 + 8 : xb + (corner[i][1] + off.y));
            }
        };

        float acc[M_TILES][4 * N_TILES] = {};
        load(0);
#pragma unroll 1
        for (int step = 0; step < k_steps; ++step) {
            uint32_t big[M_TILES][4], small[M_TILES][4];
#pragma unroll
            for (int i = 0; i < M_TILES; ++i)
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const Split s = split(a_next[i][e]);
                    big[i][e] = s.big;
                    small[i][e] = s.small;
                }
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
            asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#endif
#pragma unroll
            for (int i = 0; i < M_TILES; ++i) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
                multiply(acc[i], big[i], small[i], desc0 + step * (2 * B_WORDS * 4 / 16));
#else
                multiply(acc[i], big[i], small[i], w_s + step * 2 * B_WORDS);
#endif
            }
            // The next step's inputs, in flight during these products. Loaded after the products
            // are issued, so that the compiler needs no copies of them to free the split registers.
            if (step + 1 < k_steps) load(step + 1);
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
            asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
            asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
#endif
        }

        // acc[i][4 * j + 2 * r + e]: tile i, row (column w0 + g + 8 r), channel 8 j + 2 t + e. The
        // tiles are derived again rather than kept through the main loop: held there, they cost the
        // logsumexp kernel more spilled registers.
        Tile tl[M_TILES];
#pragma unroll
        for (int i = 0; i < M_TILES; ++i) tl[i] = tile_at<WIDE>(tile0 + i, tiles, n_wtiles, Wo);
        const auto counted = [&](int i, int r) { return tl[i].counted(tl[i].w0 + g + 8 * r, Wo); };
        const auto pixel = [&](int i, int r) { return tl[i].oh * Wo + tl[i].w0 + g + 8 * r; };   // if counted
        if (MODE == STORE) {
#pragma unroll
            for (int j = 0; j < N_TILES; ++j)
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    const int c = j * 8 + 2 * t + e;
                    if (c >= C_out) continue;
                    const float bc = bias[c];
                    float* dst = out + ((size_t)b * C_out + c) * Ho * Wo;
#pragma unroll
                    for (int i = 0; i < M_TILES; ++i)
#pragma unroll
                        for (int r = 0; r < 2; ++r)
                            if (counted(i, r)) dst[pixel(i, r)] = acc[i][4 * j + 2 * r + e] + bc;
                }
        } else if (MODE == STATS) {
            // The unit's sums per channel: this lane's counted rows, the 8 lanes holding the same
            // channels, then the warps in double, all in a fixed order.
#pragma unroll
            for (int j = 0; j < N_TILES; ++j)
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    const int c = j * 8 + 2 * t + e;
                    const float bc = c < C_out ? bias[c] : 0.f;
                    float s = 0.f, q = 0.f;
#pragma unroll
                    for (int i = 0; i < M_TILES; ++i)
#pragma unroll
                        for (int r = 0; r < 2; ++r) {
                            const float v = acc[i][4 * j + 2 * r + e] + bc;
                            if (counted(i, r)) {
                                s += v;
                                q = fmaf(v, v, q);
                            }
                        }
#pragma unroll
                    for (int off = 4; off < 32; off *= 2) {
                        s += __shfl_xor_sync(0xffffffffu, s, off);
                        q += __shfl_xor_sync(0xffffffffu, q, off);
                    }
                    if (g == 0) {
                        red[parity][warp][c] = s;
                        red[parity][warp][C_PAD + c] = q;
                    }
                }
            __syncthreads();   // red[parity] is written again two units later, after the next barrier
            if (threadIdx.x < N_STATS) {
                double v = 0.0;
#pragma unroll
                for (int w = 0; w < WARPS; ++w) v += red[parity][w][threadIdx.x];
                partials[((size_t)b * units_per_sample + unit) * N_STATS + threadIdx.x] = v;
            }
        } else {
            // LOGSUMEXP: x_res = x + hardswish(tanh(x * scale + shift)) in place (padding channels
            // -inf), then per row the max and the sum of exp over this lane's 16 channels, merged
            // across the quad (t = 0..3 hold the same rows); lane t writes row (t / 2, t % 2).
            const float* nb = norm + (size_t)b * C_out * 2;
#pragma unroll
            for (int j = 0; j < N_TILES; ++j)
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    const int c = j * 8 + 2 * t + e;
                    const bool real = c < C_out;
                    const int cc = real ? c : 0;
                    const float bc = bias[cc], scale = nb[2 * cc], shift = nb[2 * cc + 1];
#pragma unroll
                    for (int i = 0; i < M_TILES; ++i)
#pragma unroll
                        for (int r = 0; r < 2; ++r) {
                            const float v = acc[i][4 * j + 2 * r + e] + bc;
                            const float th = tanh_of_exp2_arg(fmaf(v, scale, shift));
                            acc[i][4 * j + 2 * r + e] = real ? v + hardswish_of_tanh(th) : -INFINITY;
                        }
                }
#pragma unroll
            for (int i = 0; i < M_TILES; ++i)
#pragma unroll
                for (int r = 0; r < 2; ++r) {
                    float m = -INFINITY;
#pragma unroll
                    for (int ch = 0; ch < N_TILES * 2; ++ch) m = fmaxf(m, acc[i][4 * (ch / 2) + 2 * r + ch % 2]);
                    m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
                    m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));   // finite: channel 0 is real
                    float s = 0.f;
#pragma unroll
                    for (int ch = 0; ch < N_TILES * 2; ++ch) s += ex2((acc[i][4 * (ch / 2) + 2 * r + ch % 2] - m) * LOG2E);
                    s += __shfl_xor_sync(0xffffffffu, s, 1);
                    s += __shfl_xor_sync(0xffffffffu, s, 2);
                    if (t == 2 * i + r && counted(i, r)) out[(size_t)b * Ho * Wo + pixel(i, r)] = m + __logf(s);
                }
        }
        if (++unit == units_per_sample) {
            unit = 0;
            ++b;
        }
    }
}

// Per sample: add the unit partials in a fixed order (double), then per group the mean and 1/std,
// and per channel fold them and the affine parameters into one scale and shift (of 2 log2(e) y,
// with y the GroupNorm output: what tanh_of_exp2_arg takes).
__global__ void __launch_bounds__(FINAL_THREADS) gn_stats_kernel(
    const double* __restrict__ partials,  // (B, units_per_sample, N_STATS)
    const float* __restrict__ gn_weight,  // (C_out)
    const float* __restrict__ gn_bias,    // (C_out)
    float* __restrict__ norm,             // (B, C_out, 2): 2 log2(e) x (scale, shift)
    float* __restrict__ group_stats,      // (B, groups, 2): mean, 1/std (for the backward)
    int C_out, int groups, int units_per_sample, double n_per_channel, double eps)
{
    extern __shared__ double sums[];      // [0, C_out): S_c, [C_out, 2 C_out): Q_c
    const int b = blockIdx.x, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    for (int i = warp; i < 2 * C_out; i += FINAL_THREADS / 32) {   // one warp per (kind, channel)
        const int kind = i / C_out, c = i % C_out;
        const double* p = partials + (size_t)b * units_per_sample * N_STATS + kind * C_PAD + c;
        double v = 0.0;
        for (int unit = lane; unit < units_per_sample; unit += 32) v += p[(size_t)unit * N_STATS];
#pragma unroll
        for (int off = 16; off > 0; off /= 2) v += __shfl_xor_sync(0xffffffffu, v, off);
        if (lane == 0) sums[i] = v;
    }
    __syncthreads();
    const int cpg = C_out / groups;
    for (int grp = threadIdx.x; grp < groups; grp += FINAL_THREADS) {
        double s = 0.0, sq = 0.0;
        for (int c = grp * cpg; c < (grp + 1) * cpg; ++c) { s += sums[c]; sq += sums[C_out + c]; }
        const double n = n_per_channel * cpg, mean = s / n;
        const double rstd = 1.0 / sqrt(fmax(sq / n - mean * mean, 0.0) + eps);
        group_stats[((size_t)b * groups + grp) * 2] = (float)mean;
        group_stats[((size_t)b * groups + grp) * 2 + 1] = (float)rstd;
        for (int c = grp * cpg; c < (grp + 1) * cpg; ++c) {   // times 2 log2(e): tanh's exp2 argument
            const double scale = gn_weight[c] * rstd, log2e2 = 2.0 * 1.4426950408889634;
            norm[((size_t)b * C_out + c) * 2] = (float)(scale * log2e2);
            norm[((size_t)b * C_out + c) * 2 + 1] = (float)((gn_bias[c] - mean * scale) * log2e2);
        }
    }
}
// Backward, one element: from the conv output v, the upstream gradient g of its pixel and the
// pixel's output, u = dL/dx_res (= dL/dx_conv through the residual) and vn = dL/d(GroupNorm output).
struct Grads { float u, vn; };
__device__ __forceinline__ Grads backward_elem(float v, float g, float out, float scale, float shift) {
    const float t = tanh_of_exp2_arg(fmaf(v, scale, shift));
    const float u = g * ex2((v + hardswish_of_tanh(t) - out) * LOG2E);   // g * softmax over the channels
    return {u, u * hardswish_grad(t) * (1.f - t * t)};
}

struct ChannelView {   // what one (sample, channel) row of the backward needs
    const float* x_conv; const float* g; const float* out; float scale, shift, mean, rstd;
};

__device__ __forceinline__ ChannelView channel_view(const float* x_conv, const float* grad_out, const float* out,
                                                    const float* norm, const float* group_stats,
                                                    int b, int c, int C, int G, int HW) {
    const int grp = c / (C / G);
    return {x_conv + ((size_t)b * C + c) * HW, grad_out + (size_t)b * HW, out + (size_t)b * HW,
            norm[((size_t)b * C + c) * 2], norm[((size_t)b * C + c) * 2 + 1],
            group_stats[((size_t)b * G + grp) * 2], group_stats[((size_t)b * G + grp) * 2 + 1]};
}

// Backward 1, one block per sample, one warp per channel row at a time: S1 = sum vn, S2 = sum vn xhat.
__global__ void __launch_bounds__(ROW_THREADS) gn_backward_sums_kernel(
    const float* __restrict__ x_conv,      // (B, C, HW) recomputed conv output
    const float* __restrict__ grad_out,    // (B, HW)
    const float* __restrict__ out,         // (B, HW) forward output
    const float* __restrict__ norm,        // (B, C, 2)
    const float* __restrict__ group_stats, // (B, G, 2)
    double* __restrict__ sums,             // (B, 2C): S1 then S2
    int C, int G, int HW)
{
    const int b = blockIdx.x, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    for (int c = warp; c < C; c += ROW_THREADS / 32) {
        const ChannelView cv = channel_view(x_conv, grad_out, out, norm, group_stats, b, c, C, G, HW);
        float s1 = 0.f, s2 = 0.f;
        for (int i = lane; i < HW; i += 32) {
            const float v = cv.x_conv[i];
            const Grads gr = backward_elem(v, cv.g[i], cv.out[i], cv.scale, cv.shift);
            s1 += gr.vn;
            s2 = fmaf(gr.vn, (v - cv.mean) * cv.rstd, s2);
        }
        double d1 = s1, d2 = s2;
#pragma unroll
        for (int off = 16; off > 0; off /= 2) {
            d1 += __shfl_down_sync(0xffffffffu, d1, off);
            d2 += __shfl_down_sync(0xffffffffu, d2, off);
        }
        if (lane == 0) { sums[(size_t)b * 2 * C + c] = d1; sums[(size_t)b * 2 * C + C + c] = d2; }
    }
}

// Backward 2, one block per sample: dL/dx_conv = u + rstd * (gamma vn - A_g - xhat B_g), with
// A_g = mean over the group of gamma vn and B_g = mean of gamma vn xhat.
__global__ void __launch_bounds__(ROW_THREADS) gn_backward_kernel(
    const float* __restrict__ x_conv, const float* __restrict__ grad_out, const float* __restrict__ out,
    const float* __restrict__ norm, const float* __restrict__ group_stats,
    const double* __restrict__ sums,       // (B, 2C) from backward 1
    const float* __restrict__ gn_weight,   // (C)
    float* __restrict__ grad_x_conv,       // (B, C, HW)
    int C, int G, int HW)
{
    extern __shared__ float ab[];          // [0, G): A_g, [G, 2G): B_g
    const int b = blockIdx.x, cpg = C / G;
    for (int grp = threadIdx.x; grp < G; grp += ROW_THREADS) {
        double a = 0.0, bb = 0.0;
        for (int c = grp * cpg; c < (grp + 1) * cpg; ++c) {
            a += (double)gn_weight[c] * sums[(size_t)b * 2 * C + c];
            bb += (double)gn_weight[c] * sums[(size_t)b * 2 * C + C + c];
        }
        ab[grp] = (float)(a / ((double)cpg * HW));
        ab[G + grp] = (float)(bb / ((double)cpg * HW));
    }
    __syncthreads();
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    for (int c = warp; c < C; c += ROW_THREADS / 32) {
        const ChannelView cv = channel_view(x_conv, grad_out, out, norm, group_stats, b, c, C, G, HW);
        const float gamma = gn_weight[c], a = ab[c / cpg], bg = ab[G + c / cpg];
        float* dst = grad_x_conv + ((size_t)b * C + c) * HW;
        for (int i = lane; i < HW; i += 32) {
            const float v = cv.x_conv[i];
            const Grads gr = backward_elem(v, cv.g[i], cv.out[i], cv.scale, cv.shift);
            dst[i] = gr.u + cv.rstd * (gamma * gr.vn - a - (v - cv.mean) * cv.rstd * bg);
        }
    }
}

// dgamma = sum over samples of S2, dbeta = sum of S1, in a fixed order.
__global__ void gn_param_grad_kernel(const double* __restrict__ sums, float* __restrict__ grad_weight,
                                     float* __restrict__ grad_bias, int B, int C) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= 2 * C) return;
    double s = 0.0;
    for (int b = 0; b < B; ++b) s += sums[(size_t)b * 2 * C + i];
    if (i < C) grad_bias[i] = (float)s; else grad_weight[i - C] = (float)s;
}

static int units_per_sample(int H, int W) {
    return ((H - K + 1) * ((W - K + 1 + 15) / 16) + UNIT_TILES - 1) / UNIT_TILES;
}

template <int MODE>
static cudaError_t launch_conv(const float* x, const float* weight, const float* bias, const float* norm,
                               double* partials, float* out, int B, int C_in, int C_out, int H, int W,
                               cudaStream_t stream) {
    const int k_steps = (C_in * TAPS + 7) / 8, ups = units_per_sample(H, W);
    cudaError_t err;
    int device = 0, sms = 0;
    if ((err = cudaGetDevice(&device)) != cudaSuccess) return err;
    if ((err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device)) != cudaSuccess) return err;
    const unsigned grid = (unsigned)std::min<long long>((long long)B * ups, (long long)BLOCKS_PER_SM * sms);
    const int smem = (int)(k_steps * (2 * B_WORDS * sizeof(uint32_t) + 4 * sizeof(uint2)));
    const auto kernel = W - K + 1 >= 16 ? conv_kernel<MODE, true> : conv_kernel<MODE, false>;
    cudaFuncAttributes attr;
    int sm_smem = 0;
    if ((err = cudaFuncGetAttributes(&attr, kernel)) != cudaSuccess) return err;
    if ((err = cudaDeviceGetAttribute(&sm_smem, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device)) != cudaSuccess)
        return err;
    if (smem + (int)attr.sharedSizeBytes > 48 * 1024 &&   // past the default: opt in (C_in of 10 or more)
        (err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem)) != cudaSuccess)
        return err;
    // Shared memory for BLOCKS_PER_SM blocks (the system reserves 1 KB of each), as a percentage of
    // the most an SM has. Left to the driver's choice, this forward has been seen to take twice its
    // time in some runs (a split that fits fewer blocks, it seems); with it, six runs in a row agreed.
    const long long need = (long long)BLOCKS_PER_SM * (smem + attr.sharedSizeBytes + 1024);
    if ((err = cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                    (int)std::min(100LL, (100 * need + sm_smem - 1) / sm_smem))) != cudaSuccess)
        return err;
    kernel<<<grid, THREADS, smem, stream>>>(x, weight, bias, norm, partials, out, B, C_in, C_out, H, W, ups);
    return cudaGetLastError();
}

long long forward_workspace_doubles(int H, int W) { return (long long)units_per_sample(H, W) * N_STATS; }

cudaError_t forward_launch(const float* x, const float* weight, const float* bias, const float* gn_weight,
                           const float* gn_bias, double* partials, float* norm, float* group_stats, float* out,
                           int B, int C_in, int C_out, int groups, int H, int W, double eps, cudaStream_t stream) {
    cudaError_t err = launch_conv<STATS>(x, weight, bias, nullptr, partials, nullptr, B, C_in, C_out, H, W, stream);
    if (err != cudaSuccess) return err;
    gn_stats_kernel<<<B, FINAL_THREADS, 2 * C_out * sizeof(double), stream>>>(
        partials, gn_weight, gn_bias, norm, group_stats, C_out, groups, units_per_sample(H, W),
        (double)(H - K + 1) * (W - K + 1), eps);
    if ((err = cudaGetLastError()) != cudaSuccess) return err;
    return launch_conv<LOGSUMEXP>(x, weight, bias, norm, nullptr, out, B, C_in, C_out, H, W, stream);
}

cudaError_t backward_launch(const float* x, const float* weight, const float* bias, const float* gn_weight,
                            const float* norm, const float* group_stats, const float* out, const float* grad_out,
                            float* x_conv, double* sums, float* grad_x_conv, float* grad_gn_weight,
                            float* grad_gn_bias, int B, int C_in, int C_out, int groups, int H, int W,
                            cudaStream_t stream) {
    const int HW = (H - K + 1) * (W - K + 1);
    cudaError_t err = launch_conv<STORE>(x, weight, bias, nullptr, nullptr, x_conv, B, C_in, C_out, H, W, stream);
    if (err != cudaSuccess) return err;
    gn_backward_sums_kernel<<<B, ROW_THREADS, 0, stream>>>(x_conv, grad_out, out, norm, group_stats, sums,
                                                           C_out, groups, HW);
    if ((err = cudaGetLastError()) != cudaSuccess) return err;
    gn_backward_kernel<<<B, ROW_THREADS, 2 * groups * sizeof(float), stream>>>(
        x_conv, grad_out, out, norm, group_stats, sums, gn_weight, grad_x_conv, C_out, groups, HW);
    if ((err = cudaGetLastError()) != cudaSuccess) return err;
    gn_param_grad_kernel<<<(2 * C_out + 255) / 256, 256, 0, stream>>>(sums, grad_gn_weight, grad_gn_bias, B, C_out);
    return cudaGetLastError();
}
"""

cpp_source = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

long long forward_workspace_doubles(int H, int W);
cudaError_t forward_launch(const float* x, const float* weight, const float* bias, const float* gn_weight,
                           const float* gn_bias, double* partials, float* norm, float* group_stats, float* out,
                           int B, int C_in, int C_out, int groups, int H, int W, double eps, cudaStream_t stream);
cudaError_t backward_launch(const float* x, const float* weight, const float* bias, const float* gn_weight,
                            const float* norm, const float* group_stats, const float* out, const float* grad_out,
                            float* x_conv, double* sums, float* grad_x_conv, float* grad_gn_weight,
                            float* grad_gn_bias, int B, int C_in, int C_out, int groups, int H, int W,
                            cudaStream_t stream);

// OPS_NAMESPACE comes from the build (-D): the file's name and a hash of its source.
#define OPS_STR_(s) #s
#define OPS_STR(s) OPS_STR_(s)
#define OP(name) OPS_STR(OPS_NAMESPACE) "::" name
#define DEFINE_OPS(ns, m) TORCH_LIBRARY(ns, m)
#define IMPLEMENT_OPS(ns, key, m) TORCH_LIBRARY_IMPL(ns, key, m)

using torch::Tensor;
using Mask = std::array<bool, 3>;

static void check(cudaError_t err, const char* what) {
    TORCH_CHECK(err == cudaSuccess, "conv2d_gn_lse: ", what, " failed: ", cudaGetErrorString(err));
}

// Shapes and devices are checked by ModelNew; these checks guard direct calls.
static void check_input(const Tensor& x, const Tensor& weight) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32 && x.dim() == 4 && x.is_contiguous(),
                "conv2d_gn_lse: input must be a contiguous 4-D float32 CUDA tensor");
    TORCH_CHECK(x.size(1) == weight.size(1) && x.size(2) >= weight.size(2) && x.size(3) >= weight.size(3),
                "conv2d_gn_lse: input channels or size do not fit the weight");
}

// The operators (ModelNew checks its input first, with clearer messages): model (differentiable: the
// Autograd kernel at the end), and the forward and backward it is made of:
//   forward(x, weight, bias, gn_weight, gn_bias, groups, eps) -> (out (B, 1, Ho, Wo), norm (B, C, 2),
//     group_stats (B, G, 2));
//   backward(grad_out, x, weight, bias, gn_weight, norm, group_stats, out, conv_mask) -> the gradients of x,
//     weight, bias (PyTorch's convolution backward, where conv_mask asks), gn_weight and gn_bias.
std::tuple<Tensor, Tensor, Tensor> forward_cuda(const Tensor& x_in, const Tensor& weight_in, const Tensor& bias,
                                                const Tensor& gn_weight, const Tensor& gn_bias, int64_t groups,
                                                double eps) {
    auto x = x_in.contiguous(), weight = weight_in.contiguous();
    check_input(x, weight);
    const c10::cuda::CUDAGuard guard(x.device());
    const int64_t B = x.size(0), C_in = x.size(1), C_out = weight.size(0), H = x.size(2), W = x.size(3);
    auto out = at::empty({B, 1, H - 2, W - 2}, x.options());
    auto norm = at::empty({B, C_out, 2}, x.options());
    auto group_stats = at::empty({B, groups, 2}, x.options());
    if (out.numel() == 0) return {out, norm, group_stats};
    TORCH_CHECK(x.numel() / B < (int64_t(1) << 31), "conv2d_gn_lse: one sample must have fewer than 2^31 elements");
    auto partials = at::empty({B * forward_workspace_doubles(H, W)}, x.options().dtype(torch::kFloat64));
    check(forward_launch(x.data_ptr<float>(), weight.data_ptr<float>(), bias.data_ptr<float>(),
                         gn_weight.data_ptr<float>(), gn_bias.data_ptr<float>(), partials.data_ptr<double>(),
                         norm.data_ptr<float>(), group_stats.data_ptr<float>(), out.data_ptr<float>(),
                         B, C_in, C_out, groups, H, W, eps, c10::cuda::getCurrentCUDAStream()), "forward");
    return {out, norm, group_stats};
}

std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor> backward_cuda(
        const Tensor& grad_out, const Tensor& x_in, const Tensor& weight_in, const Tensor& bias,
        const Tensor& gn_weight, const Tensor& norm, const Tensor& group_stats, const Tensor& out, Mask conv_mask) {
    auto x = x_in.contiguous(), weight = weight_in.contiguous();
    check_input(x, weight);
    const c10::cuda::CUDAGuard guard(x.device());
    const int64_t B = x.size(0), C_in = x.size(1), C_out = weight.size(0), H = x.size(2), W = x.size(3);
    const int64_t groups = group_stats.size(1);
    auto g = grad_out.contiguous();
    auto x_conv = at::empty({B, C_out, H - 2, W - 2}, x.options());
    auto grad_x_conv = at::empty_like(x_conv);
    auto grad_gn_weight = at::zeros({C_out}, x.options());
    auto grad_gn_bias = at::zeros({C_out}, x.options());
    if (x_conv.numel() > 0) {
        auto sums = at::empty({B, 2 * C_out}, x.options().dtype(torch::kFloat64));
        check(backward_launch(x.data_ptr<float>(), weight.data_ptr<float>(), bias.data_ptr<float>(),
                              gn_weight.data_ptr<float>(), norm.data_ptr<float>(), group_stats.data_ptr<float>(),
                              out.data_ptr<float>(), g.data_ptr<float>(), x_conv.data_ptr<float>(),
                              sums.data_ptr<double>(), grad_x_conv.data_ptr<float>(), grad_gn_weight.data_ptr<float>(),
                              grad_gn_bias.data_ptr<float>(), B, C_in, C_out, groups, H, W,
                              c10::cuda::getCurrentCUDAStream()), "backward");
    }
    // The conv's own gradients: PyTorch's convolution backward, as the brief allows.
    auto conv = at::convolution_backward(grad_x_conv, x, weight, at::IntArrayRef{C_out}, {1, 1}, {0, 0}, {1, 1},
                                         false, {0, 0}, 1, conv_mask);
    return {std::get<0>(conv), std::get<1>(conv), std::get<2>(conv), grad_gn_weight, grad_gn_bias};
}

// Meta: shapes and dtypes only, in symbolic sizes (torch.compile with dynamic shapes).
std::tuple<Tensor, Tensor, Tensor> forward_meta(const Tensor& x, const Tensor& weight, const Tensor& bias,
                                                const Tensor& gn_weight, const Tensor& gn_bias, int64_t groups,
                                                double eps) {
    const auto B = x.sym_size(0), C = weight.sym_size(0);
    return {at::empty_symint({B, 1, x.sym_size(2) - weight.sym_size(2) + 1, x.sym_size(3) - weight.sym_size(3) + 1},
                             x.options()),
            at::empty_symint({B, C, 2}, x.options()), at::empty_symint({B, groups, 2}, x.options())};
}

std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor> backward_meta(
        const Tensor& grad_out, const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& gn_weight,
        const Tensor& norm, const Tensor& group_stats, const Tensor& out, Mask conv_mask) {
    return {conv_mask[0] ? at::empty_like(x) : Tensor(), conv_mask[1] ? at::empty_like(weight) : Tensor(),
            conv_mask[2] ? at::empty_like(bias) : Tensor(), at::empty_like(gn_weight), at::empty_like(gn_weight)};
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
Tensor model_plain(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& gn_weight,
                   const Tensor& gn_bias, int64_t groups, double eps) {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return std::get<0>(forward_op().call(x, weight, bias, gn_weight, gn_bias, groups, eps));
}

// model's Autograd kernel: saves the inputs, the output and the statistics; the backward operator does the rest.
struct Model : torch::autograd::Function<Model> {
    static Tensor forward(torch::autograd::AutogradContext* ctx, const Tensor& x, const Tensor& weight,
                          const Tensor& bias, const Tensor& gn_weight, const Tensor& gn_bias, int64_t groups,
                          double eps) {
        at::AutoDispatchBelowADInplaceOrView below_autograd;
        auto r = forward_op().call(x, weight, bias, gn_weight, gn_bias, groups, eps);
        ctx->save_for_backward({x, weight, bias, gn_weight, std::get<1>(r), std::get<2>(r), std::get<0>(r)});
        ctx->saved_data["mask"] = c10::List<bool>({x.requires_grad(), weight.requires_grad(), bias.requires_grad()});
        return std::get<0>(r);
    }

    static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                   torch::autograd::variable_list grads) {
        const auto s = ctx->get_saved_variables();
        const auto m = ctx->saved_data["mask"].toBoolList();
        auto r = backward_op().call(grads[0], s[0], s[1], s[2], s[3], s[4], s[5], s[6], Mask{m[0], m[1], m[2]});
        return {std::get<0>(r), std::get<1>(r), std::get<2>(r), std::get<3>(r), std::get<4>(r), Tensor(), Tensor()};
    }
};

Tensor model_autograd(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& gn_weight,
                      const Tensor& gn_bias, int64_t groups, double eps) {
    // Function::apply costs some 13 us of host time per call: only where a gradient is wanted.
    const bool wanted = at::GradMode::is_enabled() && (x.requires_grad() || weight.requires_grad() || bias.requires_grad() || gn_weight.requires_grad() ||
                           gn_bias.requires_grad());
    if (!wanted) return model_plain(x, weight, bias, gn_weight, gn_bias, groups, eps);
    return Model::apply(x, weight, bias, gn_weight, gn_bias, groups, eps);
}

DEFINE_OPS(OPS_NAMESPACE, m) {
    m.def("forward(Tensor x, Tensor weight, Tensor bias, Tensor gn_weight, Tensor gn_bias, int groups, float eps) "
          "-> (Tensor, Tensor, Tensor)");
    m.def("backward(Tensor grad_out, Tensor x, Tensor weight, Tensor bias, Tensor gn_weight, Tensor norm, "
          "Tensor group_stats, Tensor out, bool[3] conv_mask) -> (Tensor, Tensor, Tensor, Tensor, Tensor)");
    m.def("model(Tensor x, Tensor weight, Tensor bias, Tensor gn_weight, Tensor gn_bias, int groups, float eps) "
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
# On Hopper (compute capability 9.0) build for sm_90a, whose wgmma runs the tensor cores at twice
# mma.sync's rate. Recent PyTorch (2.11 checked) then adds no architecture flags of its own; 2.1 adds
# those of TORCH_CUDA_ARCH_LIST or of the visible GPU beside it (sm_90 too, the mma.sync path: which of the
# two an H100 runs is then the driver's choice; both are exact). Other GPUs: PyTorch's defaults.
# VARIANTS_NO_SM90A=1 builds the mma.sync path on Hopper too, under its own name (the tests run it so).
_no_sm90a = os.environ.get("VARIANTS_NO_SM90A") == "1"
_hopper = torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0) and not _no_sm90a
# The operators' namespace: the file's name and a hash of its source. A namespace can be registered once
# per process, so the library is loaded once per source, however often the file is exec-ed.
_namespace = ("conv2d_groupnorm_tanh_hardswish_residualadd_logsumexp_" +
              hashlib.sha256((cpp_source + cuda_source).encode()).hexdigest()[:12])
if not hasattr(getattr(torch.ops, _namespace), "model"):
    _build_root = os.environ.get("TORCH_EXTENSIONS_DIR") or get_default_build_root()
    print(f"conv2d_groupnorm_tanh_hardswish_residualadd_logsumexp: loading its CUDA extension from "
          f"{_build_root} (a cold build takes 20 to 30 s)", file=sys.stderr)
    load_inline(name="conv2d_gn_tanh_hardswish_res_lse" + ("_mma_sync_ext" if _no_sm90a else "_ext"),
                cpp_sources=cpp_source, cuda_sources=cuda_source,
                extra_cflags=[f"-DOPS_NAMESPACE={_namespace}"], is_python_module=False, verbose=False,
                **_header_option,
                extra_cuda_cflags=["-O3"] + (["-gencode=arch=compute_90a,code=sm_90a"] if _hopper else []))
_ops = getattr(torch.ops, _namespace)
_model = _ops.model.default   # an overload, not the packet: a little less host time per call

KERNEL_SIZE = 3          # the CUDA kernel's K
MAX_OUT_CHANNELS = 64    # one GEMM tile of 64 channels holds every channel of a pixel
MAX_IN_CHANNELS = 16     # all split weights stay in shared memory: 74 KB at 16, within any GPU since sm_80


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, groups, eps=1e-5):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.group_norm = nn.GroupNorm(groups, out_channels, eps=eps)
        self.tanh = nn.Tanh()
        self.hard_swish = nn.Hardswish()
        if self.conv.kernel_size != (KERNEL_SIZE,) * 2:
            raise ValueError(f"kernel_size must be {KERNEL_SIZE} (the fused kernel is specialised for "
                             f"{KERNEL_SIZE}x{KERNEL_SIZE}), got {kernel_size}")
        if out_channels > MAX_OUT_CHANNELS:
            raise ValueError(f"out_channels must be at most {MAX_OUT_CHANNELS}, got {out_channels}")
        if in_channels > MAX_IN_CHANNELS:
            raise ValueError(f"in_channels must be at most {MAX_IN_CHANNELS}, got {in_channels}")

    def forward(self, x):
        if not (x.is_cuda or x.is_meta):   # meta: shapes only, for tracing
            raise ValueError(f"input must be a CUDA tensor (or meta), got one on {x.device}")
        if x.dtype != torch.float32:
            raise ValueError(f"input must be float32, got {x.dtype}")
        if x.dim() != 4:
            raise ValueError(f"input must be 4-D (B, C, H, W), got {x.dim()}-D")
        if x.shape[1] != self.conv.in_channels:
            raise ValueError(f"input has {x.shape[1]} channels, the conv expects {self.conv.in_channels}")
        if min(x.shape[2:]) < KERNEL_SIZE:
            raise ValueError(f"input spatial size {tuple(x.shape[2:])} is smaller than the kernel ({KERNEL_SIZE})")
        gn = self.group_norm
        return _model(x, self.conv.weight, self.conv.bias, gn.weight, gn.bias, gn.num_groups, gn.eps)


batch_size = 128
in_channels = 8
out_channels = 64
height, width = 128, 128
kernel_size = 3
groups = 16


def get_inputs():
    return [torch.rand(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, groups]


if __name__ == "__main__":
    from common.evaluate import main
    sys.exit(main("conv2d_groupnorm_tanh_hardswish_residualadd_logsumexp", ModelNew))
