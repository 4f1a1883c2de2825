"""Conv3d -> GroupNorm -> mean over (C, D, H, W), fused into one pass (KernelBench level 2, problem 23).

The mean of a GroupNorm output needs no normalised element: with S_c and Q_c the sum and the sum of
squares of channel c's conv output over its N positions, and g(c) the group of c,
    out[b] = mean_c( gamma_c * (S_c / N - mu_g) / sqrt(var_g + eps) + beta_c ),
    mu_g = sum_{c in g} S_c / (N * C/G),   var_g = sum_{c in g} Q_c / (N * C/G) - mu_g^2.
So:
  pass 1 (conv_gn_stats_kernel): the conv as a GEMM on the tensor cores (rows: output positions,
    16 adjacent columns per tile; columns: the output channels; depth: the C_in * 27 taps, padded to
    a multiple of 8), in split TF32 ("3xTF32": each fp32 operand = big + small, both TF32, and
    big*big + big*small + small*big), which keeps fp32-level accuracy. A warp gathers its tiles'
    inputs straight from global memory (L1) in the mma fragment layout and splits them; the
    weights, split once per block, sit in shared memory. On Hopper (sm_90a) a warpgroup issues
    wgmma; elsewhere mma.sync does the same products. Each unit of work (4 warps x 4 tiles) writes
    its per-channel S and Q, in double; the conv output never touches memory.
  pass 2 (gn_mean_finalize_kernel): per sample, add the unit partials in a fixed order (double),
    form the group statistics and the (B,) output. Deterministic: no atomics anywhere.

Floor at the benchmark size (B=128, 3->24 channels, 24x32x32, k=3): 9.85 GFLOP of multiply-add =
0.147 ms at the 67 TFLOP/s FP32 rate (the floor run_all.py reports); the 38 MB input is 0.01 ms of
bandwidth. On the tensor cores the same work is 3 x 10.8 GFLOP (padded depth) of TF32, 0.066 ms at
~490 TFLOP/s. Measured on an H100: the conv kernel takes 0.21 ms (ncu), bound by issue and load
latency (a step per warp: 16 gathered loads, 32 split instructions, 12 wgmma); with the finalize
kernel and the host's launch cost, run_all.py times 0.27 ms (README.md has the table).

Run: python variants/conv3d_groupnorm_mean.py
"""
import inspect

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdint>

constexpr int K = 3;            // kernel size the conv is specialised for (refused otherwise in Python)
constexpr int TAPS = K * K * K;
constexpr int N_TILES = 3;      // 8-channel tiles per chunk: all of the benchmark's 24 channels
constexpr int CO_CHUNK = 8 * N_TILES;
constexpr int M_TILES = 4;      // 16-column output tiles a warp computes at once
constexpr int WARPS = 4, THREADS = 32 * WARPS;   // one warpgroup
constexpr int BLOCKS_PER_SM = 4;                 // caps registers at 128
constexpr int UNIT_TILES = WARPS * M_TILES;      // a unit of work: M_TILES tiles per warp
constexpr int N_STATS = 2 * CO_CHUNK;            // per channel: sum, sum of squares
constexpr int B_WORDS = CO_CHUNK * 8;            // one 8-deep slice of a chunk's weights
constexpr int FINAL_THREADS = 256;

// Split-TF32: v = big + small. big is v with its low 13 bits cleared, exact in TF32 (sign, 8
// exponent bits, 10 mantissa bits); small = v - big (exact in fp32) holds the other 13 significant
// bits, of which the tensor cores, which ignore an operand's low 13 bits, use the top 11.
// big*big + big*small + small*big then loses at most ~2^-20 of each product (small*small and
// those 2 bits): fp32-level accuracy.
// Finite inputs only (inf and NaN give NaN, as the reference's GroupNorm does).
struct Split { uint32_t big, small; };
__device__ __forceinline__ Split split(float v) {
    const float big = __uint_as_float(__float_as_uint(v) & 0xffffe000u);
    return {__float_as_uint(big), __float_as_uint(v - big)};
}

// The conv as a GEMM: rows = output positions, columns = output channels, k = (ci, kd, kh, kw)
// padded to a multiple of 8. Each block keeps its channel chunk's weights, split, in shared memory
// per 8-deep step and part (big, small), in the tensor cores' K-major layout: channel n, depth k at
// word (n / 8) * 64 + (k / 4) * 32 + (n % 8) * 4 + k % 4 (8x4 blocks of 128 bytes); zero past C_out
// and past C_in * TAPS.
__device__ __forceinline__ uint32_t split_weight(const float* __restrict__ weight, int i, int chunk, int C_out,
                                                 int C_in) {
    const int w = i % B_WORDS, part = i / B_WORDS % 2, step = i / (2 * B_WORDS);
    const int co = chunk * CO_CHUNK + w / 64 * 8 + w / 4 % 8, k = step * 8 + w / 32 % 2 * 4 + w % 4;
    const Split s = split(co < C_out && k < C_in * TAPS ? weight[(size_t)co * C_in * TAPS + k] : 0.f);
    return part == 0 ? s.big : s.small;
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// Hopper: one warpgroup multiplies 64 rows (16 per warp, A from registers in the m16n8k8 layout)
// by 24 channels read from shared memory, asynchronously.
__device__ __forceinline__ void wgmma(float (&d)[4 * N_TILES], const uint32_t (&a)[4], uint64_t b_desc) {
    asm volatile("wgmma.mma_async.sync.aligned.m64n24k8.f32.tf32.tf32 "
                 "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11}, {%12,%13,%14,%15}, %16, 1, 1, 1;"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),
                   "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc));
}
// Shared-memory descriptor of one 24x8 weight slice: 8x4 blocks, 128 bytes apart along k, 256 along n.
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

// acc += a * (weight slice), with the slice's big and small parts at b[0, B_WORDS) and b[B_WORDS, 2 B_WORDS).
__device__ __forceinline__ void multiply(float (&acc)[4 * N_TILES], const uint32_t (&big)[4], const uint32_t (&small)[4],
                                         const uint32_t* b) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    wgmma(acc, small, slice_desc(b));            // small terms first
    wgmma(acc, big, slice_desc(b + B_WORDS));
    wgmma(acc, big, slice_desc(b));
#else
    const int lane = threadIdx.x % 32, nk = lane / 4 * 4 + lane % 4;   // channel g, depth t
#pragma unroll
    for (int j = 0; j < N_TILES; ++j) {
        const uint32_t* bj = b + j * 64 + nk;
        mma(acc + 4 * j, small, bj[0], bj[32]);
        mma(acc + 4 * j, big, bj[B_WORDS], bj[B_WORDS + 32]);
        mma(acc + 4 * j, big, bj[0], bj[32]);
    }
#endif
}

// Pass 1: conv on the tensor cores + per-(sample, channel) sum and sum of squares of its output.
// Persistent: grid x walks the B * units_per_sample units of work (each inside one sample), grid y
// is the channel chunk; each unit writes its sums, so their order is fixed. Output tiles are 16
// adjacent columns of one row (od, oh). WIDE (Wo >= 16): the last tile of a row shifts left to stay
// inside it and does not count the columns its neighbour owns, and a lane's row g + 8 is 8 columns
// right of its row g. Otherwise one tile per row, columns past Wo clamped.
// Dynamic shared memory: the chunk's split weights (k_steps * 2 * B_WORDS words), then k_steps * 4
// uint2, the input offsets of taps (k, k + 4) for k = step * 8 + t.
template <bool WIDE>
__global__ void __launch_bounds__(THREADS, BLOCKS_PER_SM) conv_gn_stats_kernel(
    const float* __restrict__ x,           // (B, C_in, D, H, W), contiguous
    const float* __restrict__ weight,      // (C_out, C_in, K, K, K), contiguous
    const float* __restrict__ bias,        // (C_out)
    double* __restrict__ partials,         // (B, n_chunks, units_per_sample, N_STATS)
    int B, int C_in, int C_out, int D, int H, int W, int units_per_sample)
{
    extern __shared__ __align__(128) uint32_t w_s[];
    __shared__ float red[2][WARPS][N_STATS];   // per warp: each channel's sum and sum of squares
    const int Do = D - K + 1, Ho = H - K + 1, Wo = W - K + 1;
    const int n_wtiles = (Wo + 15) / 16, tiles = Do * Ho * n_wtiles;
    const int k_steps = (C_in * TAPS + 7) / 8;
    const int chunk = blockIdx.y, n_chunks = gridDim.y;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;

    const int n_words = k_steps * 2 * B_WORDS;
    for (int i = threadIdx.x; i < n_words; i += THREADS) w_s[i] = split_weight(weight, i, chunk, C_out, C_in);
    uint2* tap_s = reinterpret_cast<uint2*>(w_s + n_words);
    for (int i = threadIdx.x; i < k_steps * 4; i += THREADS) {
        unsigned off[2];
        for (int h = 0; h < 2; ++h) {   // tap k = (ci, kd, kh, kw); padding taps read offset 0
            const int k = i / 4 * 8 + i % 4 + 4 * h, r = k % TAPS;
            off[h] = k < C_in * TAPS ? ((k / TAPS * D + r / (K * K)) * H + r / K % K) * W + r % K : 0;
        }
        tap_s[i] = make_uint2(off[0], off[1]);
    }
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");   // the weights are read by wgmma
#endif
    __syncthreads();

#pragma unroll 1
    for (long long u = blockIdx.x, parity = 0; u < (long long)B * units_per_sample; u += gridDim.x, parity ^= 1) {
        const int b = (int)(u / units_per_sample), unit = (int)(u % units_per_sample);
        // The host checks one sample is < 2^31 elements. Opaque to the compiler, so that each load's
        // address is one 32-bit add and one wide multiply-add instead of a re-derived 64-bit index.
        const float* xb;
        asm("mov.b64 %0, %1;" : "=l"(xb) : "l"(x + (size_t)b * C_in * D * H * W));
        // This lane's rows g and g + 8 of each tile: input corner and whether the row is counted.
        unsigned corner[M_TILES][2];
        bool counted[M_TILES][2];
#pragma unroll
        for (int i = 0; i < M_TILES; ++i) {
            const int tile = (unit * WARPS + warp) * M_TILES + i;
            const bool valid = tile < tiles;
            const int tt = valid ? tile : tiles - 1;    // idle rows recompute a real tile, count nothing
            const int w_first = tt % n_wtiles * 16, oh = tt / n_wtiles % Ho, od = tt / (n_wtiles * Ho);
            const int w0 = WIDE ? min(w_first, Wo - 16) : 0;
#pragma unroll
            for (int r = 0; r < 2; ++r) {
                const int ow = w0 + g + 8 * r;
                counted[i][r] = valid && ow >= w_first && ow < Wo;
                corner[i][r] = (od * H + oh) * W + (WIDE ? ow : min(ow, Wo - 1));
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
            for (int i = 0; i < M_TILES; ++i) multiply(acc[i], big[i], small[i], w_s + step * 2 * B_WORDS);
            // The next step's inputs, in flight during these products. Loaded after the products
            // are issued, so that the compiler needs no copies of them to free the split registers.
            if (step + 1 < k_steps) load(step + 1);
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
            asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
            asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
#endif
        }

        // The unit's sums per channel: this lane's counted rows, the 8 lanes holding the same
        // channels, then the 4 warps in double, all in a fixed order.
#pragma unroll
        for (int j = 0; j < N_TILES; ++j)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                const int c = j * 8 + 2 * t + e, co = chunk * CO_CHUNK + c;
                const float bc = co < C_out ? bias[co] : 0.f;
                float s = 0.f, q = 0.f;
#pragma unroll
                for (int i = 0; i < M_TILES; ++i)
#pragma unroll
                    for (int r = 0; r < 2; ++r) {
                        const float v = acc[i][4 * j + 2 * r + e] + bc;
                        if (counted[i][r]) {
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
                    red[parity][warp][CO_CHUNK + c] = q;
                }
            }
        __syncthreads();   // red[parity] is written again two units later, after the next barrier
        if (threadIdx.x < N_STATS) {
            double v = 0.0;
#pragma unroll
            for (int w = 0; w < WARPS; ++w) v += red[parity][w][threadIdx.x];
            partials[(((size_t)b * n_chunks + chunk) * units_per_sample + unit) * N_STATS + threadIdx.x] = v;
        }
    }
}

// Pass 2: one block per sample. Adds the unit partials in a fixed order (double), forms each
// group's mean and variance and writes mean_c(gamma_c * (mean_c - mu_g) * inv_std_g + beta_c).
__global__ void __launch_bounds__(FINAL_THREADS) gn_mean_finalize_kernel(
    const double* __restrict__ partials,  // (B, n_chunks, units_per_sample, N_STATS)
    const float* __restrict__ gn_weight,  // (C_out)
    const float* __restrict__ gn_bias,    // (C_out)
    float* __restrict__ out,              // (B)
    int C_out, int groups, int units_per_sample, double n_per_channel, double eps)
{
    extern __shared__ double sums[];      // [0, C_out): S_c, [C_out, 2 C_out): Q_c, then the terms
    const int b = blockIdx.x, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int n_chunks = (C_out + CO_CHUNK - 1) / CO_CHUNK;
    for (int i = warp; i < 2 * C_out; i += FINAL_THREADS / 32) {   // one warp per (kind, channel)
        const int kind = i / C_out, c = i % C_out;
        const double* p = partials + ((size_t)b * n_chunks + c / CO_CHUNK) * units_per_sample * N_STATS +
                          kind * CO_CHUNK + c % CO_CHUNK;
        double v = 0.0;
        for (int unit = lane; unit < units_per_sample; unit += 32) v += p[(size_t)unit * N_STATS];
#pragma unroll
        for (int off = 16; off > 0; off /= 2) v += __shfl_xor_sync(0xffffffffu, v, off);
        if (lane == 0) sums[i] = v;
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

static int units_per_sample(int D, int H, int W) {
    const int n_wtiles = (W - K + 1 + 15) / 16;
    return ((D - K + 1) * (H - K + 1) * n_wtiles + UNIT_TILES - 1) / UNIT_TILES;
}

long long conv3d_groupnorm_mean_workspace(int B, int C_out, int D, int H, int W) {   // doubles
    return (long long)B * ((C_out + CO_CHUNK - 1) / CO_CHUNK) * units_per_sample(D, H, W) * N_STATS;
}

cudaError_t conv3d_groupnorm_mean_launch(
    const float* x, const float* weight, const float* bias, const float* gn_weight, const float* gn_bias,
    double* partials, float* out, int B, int C_in, int C_out, int groups, int D, int H, int W,
    double eps, cudaStream_t stream)
{
    const int n_chunks = (C_out + CO_CHUNK - 1) / CO_CHUNK, k_steps = (C_in * TAPS + 7) / 8;
    cudaError_t err;
    const int ups = units_per_sample(D, H, W);
    int device = 0, sms = 0;
    if ((err = cudaGetDevice(&device)) != cudaSuccess) return err;
    if ((err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device)) != cudaSuccess) return err;
    const dim3 grid((unsigned)std::min<long long>((long long)B * ups, (long long)BLOCKS_PER_SM * sms), n_chunks);
    const int smem = (int)(k_steps * (2 * B_WORDS * sizeof(uint32_t) + 4 * sizeof(uint2)));
    const bool wide = W - K + 1 >= 16;
    const auto kernel = wide ? conv_gn_stats_kernel<true> : conv_gn_stats_kernel<false>;
    if (smem > 48 * 1024 &&   // more than the default needs opting in (C_in of 10 or more)
        (err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem)) != cudaSuccess)
        return err;
    kernel<<<grid, THREADS, smem, stream>>>(x, weight, bias, partials, B, C_in, C_out, D, H, W, ups);
    if ((err = cudaGetLastError()) != cudaSuccess) return err;
    const double n_per_channel = (double)(D - K + 1) * (H - K + 1) * (W - K + 1);
    gn_mean_finalize_kernel<<<B, FINAL_THREADS, 3 * C_out * sizeof(double), stream>>>(
        partials, gn_weight, gn_bias, out, C_out, groups, ups, n_per_channel, eps);
    return cudaGetLastError();
}
"""

cpp_source = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

long long conv3d_groupnorm_mean_workspace(int B, int C_out, int D, int H, int W);
cudaError_t conv3d_groupnorm_mean_launch(
    const float* x, const float* weight, const float* bias, const float* gn_weight, const float* gn_bias,
    double* partials, float* out, int B, int C_in, int C_out, int groups, int D, int H, int W,
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
    TORCH_CHECK(x.numel() / B < (int64_t(1) << 31), "conv3d_groupnorm_mean: one sample must have fewer than "
                "2^31 elements");
    auto partials = torch::empty({conv3d_groupnorm_mean_workspace(B, C_out, x.size(2), x.size(3), x.size(4))},
                                 x.options().dtype(torch::kFloat64));
    const cudaError_t err = conv3d_groupnorm_mean_launch(
        x.data_ptr<float>(), w.data_ptr<float>(), bias.data_ptr<float>(), gn_weight.data_ptr<float>(),
        gn_bias.data_ptr<float>(), partials.data_ptr<double>(), out.data_ptr<float>(), B, x.size(1), C_out,
        groups, x.size(2), x.size(3), x.size(4), eps, c10::cuda::getCurrentCUDAStream());
    TORCH_CHECK(err == cudaSuccess, "conv3d_groupnorm_mean: kernel launch failed: ", cudaGetErrorString(err));
    return out;
}
"""

# PyTorch >= 2.7 can skip prepending torch headers to the .cu file (about 40 s less to build it).
_header_option = ({"no_implicit_headers": True}
                  if "no_implicit_headers" in inspect.signature(load_inline).parameters else {})
# On Hopper (compute capability 9.0) build for sm_90a, whose wgmma runs the tensor cores at twice
# mma.sync's rate; PyTorch adds no architecture flags of its own then. Other GPUs: its defaults.
_hopper = torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)
_ext = load_inline(name="conv3d_groupnorm_mean_ext", cpp_sources=cpp_source, cuda_sources=cuda_source,
                   functions=["conv3d_groupnorm_mean"], verbose=False, **_header_option,
                   extra_cuda_cflags=["-O3"] + (["-gencode=arch=compute_90a,code=sm_90a"] if _hopper else []))

KERNEL_SIZE = 3        # the CUDA kernel's K
MAX_IN_CHANNELS = 16   # all split weights stay in shared memory: 86 KB at 16, within any GPU since sm_80


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, num_groups):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size)
        self.group_norm = nn.GroupNorm(num_groups, out_channels)
        if self.conv.kernel_size != (KERNEL_SIZE,) * 3:
            raise ValueError(f"kernel_size must be {KERNEL_SIZE} (the fused kernel is specialised for "
                             f"{KERNEL_SIZE}x{KERNEL_SIZE}x{KERNEL_SIZE}), got {kernel_size}")
        if in_channels > MAX_IN_CHANNELS:
            raise ValueError(f"in_channels must be at most {MAX_IN_CHANNELS}, got {in_channels}")

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
        conv, gn = self.conv, self.group_norm
        return _ext.conv3d_groupnorm_mean(x, conv.weight, conv.bias, gn.weight, gn.bias, gn.num_groups, gn.eps)


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
