"""Conv3d -> GroupNorm -> mean over (C, D, H, W), fused into one pass (KernelBench level 2, problem 23).

The mean of a GroupNorm output needs no normalised element: with S_c and Q_c the sum and the sum of
squares of channel c's conv output over its N positions, and g(c) the group of c,
    out[b] = mean_c( gamma_c * (S_c / N - mu_g) / sqrt(var_g + eps) + beta_c ),
    mu_g = sum_{c in g} S_c / (N * C/G),   var_g = sum_{c in g} Q_c / (N * C/G) - mu_g^2.
So:
  pass 1 (conv_gn_stats_kernel, persistent): each block keeps its 24 output channels' weights in
    shared memory and walks work items (one output depth, a band of rows); the item's input slab is
    copied in (cp.async) while the previous item is computed. Each thread computes 12 channels x 10
    adjacent columns of the conv in registers; each item writes its per-channel S and Q, in double,
    to its own slot. The conv output never touches memory.
  pass 2 (gn_mean_finalize_kernel): per sample, add the partials in a fixed order (double), form the
    group statistics and the (B,) output. Deterministic: no atomics anywhere.

Floor at the benchmark size (B=128, 3->24 channels, 24x32x32, k=3): 9.85 GFLOP of FP32 multiply-add
= 0.147 ms at 67 TFLOP/s; the 38 MB input is 0.01 ms of bandwidth, so the conv's arithmetic is the
floor. Measured: see README.md (run_all.py table).

Run: python variants/conv3d_groupnorm_mean.py
"""
import inspect

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <cuda_runtime.h>
#include <cstdint>

constexpr int K = 3;              // kernel size the conv is specialised for (refused otherwise in Python)
constexpr int TAPS = K * K * K;
constexpr int CO_TILE = 24;       // output channels per block: all of the benchmark's 24 at once
constexpr int CO_THREAD = 12;     // channels per thread; two threads share each tile of columns
constexpr int W_TILE = 10;        // adjacent output columns per thread (the benchmark's 30 = 3 x 10)
constexpr int MAX_TILES = 64;     // column tiles per work item; threads = 2 x tiles, rounded to warps
constexpr int MAX_THREADS = 2 * MAX_TILES;
constexpr int MIN_BLOCKS = 3;     // 3 x 128 threads caps registers at 168: 120 accumulators + operands
                                  // (the benchmark's 96-thread blocks then fit 4 per SM)
constexpr int N_STATS = 2 * CO_TILE;   // per channel: sum, sum of squares
constexpr int FINAL_THREADS = 256;
constexpr size_t SMEM_LIMIT = 100 * 1024;   // per block, so that two blocks fit on an SM at worst

// Why this shape: every FFMA operand must come from registers, and the load/store unit delivers
// 32 floats per clock per SM against 128 FFMA per clock. A thread's 12 x 10 tile reads 48 floats
// from shared memory per 360 FFMA (each weight feeds 10, each input 36), well inside that ratio.
// The input slab of the next work item is copied in (cp.async) while the current one is computed.

// A work item is one output depth `od` of one sample, `rows` output rows x `wtiles` column tiles.
// Its input slab (per input channel: K depths x (rows + K - 1) rows x (wtiles * W_TILE + K - 1)
// columns) sits in shared memory, double-buffered; all weights of the block's channel chunk too.
struct Geometry {
    int C_in, C_out, D, H, W, Do, Ho, Wo;
    int n_wtiles, wtiles, n_wblocks, rows, n_rblocks, blocks_per_sample;
    int slab_rows, slab_cols, pitch, col_shift, slab_floats, threads;
};

static size_t smem_bytes(const Geometry& g) {
    return sizeof(float) * ((size_t)g.C_in * TAPS * CO_TILE + 2 * (size_t)g.slab_floats + N_STATS * MAX_TILES);
}

static Geometry make_geometry(int C_in, int C_out, int D, int H, int W) {
    Geometry g;
    g.C_in = C_in; g.C_out = C_out; g.D = D; g.H = H; g.W = W;
    g.Do = D - K + 1; g.Ho = H - K + 1; g.Wo = W - K + 1;
    g.n_wtiles = (g.Wo + W_TILE - 1) / W_TILE;
    for (int max_tiles = MAX_TILES;; max_tiles /= 2) {   // shrink the item until its slabs fit
        g.n_wblocks = (g.n_wtiles + max_tiles - 1) / max_tiles;
        g.wtiles = (g.n_wtiles + g.n_wblocks - 1) / g.n_wblocks;
        const int max_rows = max_tiles / g.wtiles < g.Ho ? max_tiles / g.wtiles : g.Ho;
        g.n_rblocks = (g.Ho + max_rows - 1) / max_rows;
        g.rows = (g.Ho + g.n_rblocks - 1) / g.n_rblocks;     // balanced: no near-empty last item
        g.slab_rows = g.rows + K - 1;
        g.slab_cols = g.wtiles * W_TILE + K - 1;
        g.pitch = g.slab_cols | 1;   // odd pitch: the tiles of a warp start in distinct banks
        g.slab_floats = C_in * K * g.slab_rows * g.pitch;
        if (smem_bytes(g) <= SMEM_LIMIT || max_tiles == 1) break;
    }
    for (g.col_shift = 0; (1 << g.col_shift) < g.slab_cols; ++g.col_shift) {}
    g.blocks_per_sample = g.Do * g.n_rblocks * g.n_wblocks;
    g.threads = (2 * g.rows * g.wtiles + 31) / 32 * 32;
    return g;
}

// Copies one float global -> shared without a register round trip (cp.async, sm_80+), or writes 0
// when !valid (src-size 0 zero-fills). Copies are grouped per work item and waited for by group.
__device__ __forceinline__ void copy_to_shared(float* dst, const float* src, bool valid) {
#if __CUDA_ARCH__ >= 800
    const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" :: "r"(d), "l"(src), "r"(valid ? 4 : 0));
#else
    *dst = valid ? __ldg(src) : 0.f;
#endif
}

__device__ __forceinline__ void commit_copies() {
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;\n" ::);
#endif
}

// Waits until at most one group (the newest) is still in flight, then syncs the block.
__device__ __forceinline__ void wait_all_but_newest() {
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group 1;\n" ::);
#endif
    __syncthreads();
}

struct Item {
    int b, od, oh0, wt0;
};

__device__ __forceinline__ Item item_of(int item, const Geometry& g) {
    int blk = item % g.blocks_per_sample;
    Item it;
    it.b = item / g.blocks_per_sample;
    it.wt0 = blk % g.n_wblocks * g.wtiles; blk /= g.n_wblocks;
    it.oh0 = blk % g.n_rblocks * g.rows;
    it.od = blk / g.n_rblocks;
    return it;
}

// Input slab of one item, one (ci, kd) plane at a time: element e of a plane is (row e >> col_shift,
// column e & col_mask), so consecutive threads copy consecutive columns and no division is needed.
// Zeros past the input's edge.
__device__ __forceinline__ void stage_slab(float* slab, const float* __restrict__ x, const Item it, const Geometry& g) {
    const size_t plane = (size_t)g.H * g.W;
    const int rows_in = min(g.slab_rows, g.H - it.oh0), cols_in = min(g.slab_cols, g.W - it.wt0 * W_TILE);
    for (int ckd = 0; ckd < g.C_in * K; ++ckd) {
        const float* src = x + (((size_t)it.b * g.C_in + ckd / K) * g.D + it.od + ckd % K) * plane
                           + (size_t)it.oh0 * g.W + it.wt0 * W_TILE;
        float* dst = slab + ckd * g.slab_rows * g.pitch;
        for (int e = threadIdx.x; e < g.slab_rows << g.col_shift; e += blockDim.x) {
            const int sr = e >> g.col_shift, col = e & ((1 << g.col_shift) - 1);
            const bool inside = sr < rows_in && col < cols_in;
            if (col < g.slab_cols) copy_to_shared(dst + sr * g.pitch + col, inside ? src + sr * g.W + col : src, inside);
        }
    }
}

// Pass 1: conv in registers + per-(sample, channel) sum and sum of squares of its output.
// Persistent: block i takes work items i, i + gridDim.x, ...; each item writes its own partials
// slot, so the result does not depend on the schedule. Grid y: output-channel chunk.
__global__ void __launch_bounds__(MAX_THREADS, MIN_BLOCKS) conv_gn_stats_kernel(
    const float* __restrict__ x,        // (B, C_in, D, H, W), contiguous
    const float* __restrict__ weight,   // (C_out, C_in, K, K, K), contiguous
    const float* __restrict__ bias,     // (C_out)
    double* __restrict__ partials,      // (B, n_chunks, blocks_per_sample, N_STATS)
    int n_items, const Geometry g)
{
    extern __shared__ __align__(16) float smem[];
    float* w_s = smem;                                    // [ci][kd][kh][kw][CO_TILE]
    float* slabs = w_s + g.C_in * TAPS * CO_TILE;         // 2 x [ci][kd][slab_rows][pitch]
    float (*red)[MAX_TILES] = reinterpret_cast<float (*)[MAX_TILES]>(slabs + 2 * g.slab_floats);

    const int chunk = blockIdx.y, n_chunks = gridDim.y;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, n_warps = blockDim.x / 32;
    // Thread -> (tile, channel half). The two halves of a tile sit in adjacent lanes and read the
    // same inputs (a broadcast); idle threads recompute tile 0 and count nothing.
    const int n_tiles = g.rows * g.wtiles;
    const int half = threadIdx.x & 1;
    const bool valid_thread = (int)threadIdx.x < 2 * n_tiles;
    const int tile = valid_thread ? threadIdx.x >> 1 : 0;
    const int r = tile / g.wtiles, t = tile % g.wtiles;

    // Weights once per block: one warp per output channel, lanes along its contiguous taps.
    for (int cl = warp; cl < CO_TILE; cl += n_warps) {
        const int co = chunk * CO_TILE + cl;
        const float* src = weight + (size_t)min(co, g.C_out - 1) * g.C_in * TAPS;
        for (int k = lane; k < g.C_in * TAPS; k += 32) copy_to_shared(w_s + k * CO_TILE + cl, src + k, co < g.C_out);
    }
    float bias_c[CO_THREAD];
#pragma unroll
    for (int c = 0; c < CO_THREAD; ++c) {
        const int co = chunk * CO_TILE + half * CO_THREAD + c;
        bias_c[c] = co < g.C_out ? bias[co] : 0.f;
    }
    if ((int)blockIdx.x < n_items) stage_slab(slabs, x, item_of(blockIdx.x, g), g);
    commit_copies();

    for (int item = blockIdx.x, i = 0; item < n_items; item += gridDim.x, ++i) {
        const Item it = item_of(item, g);
        const float* slab = slabs + (i & 1) * g.slab_floats;
        if (item + (int)gridDim.x < n_items)
            stage_slab(slabs + ((i + 1) & 1) * g.slab_floats, x, item_of(item + gridDim.x, g), g);
        commit_copies();
        wait_all_but_newest();   // this item's slab (and, the first time, the weights) has landed

        float acc[CO_THREAD][W_TILE];
#pragma unroll
        for (int c = 0; c < CO_THREAD; ++c)
#pragma unroll
            for (int p = 0; p < W_TILE; ++p) acc[c][p] = 0.f;
        const float* in_row = slab + r * g.pitch + t * W_TILE;
        const float* w_row = w_s + half * CO_THREAD;
#pragma unroll 1
        for (int ckd = 0; ckd < g.C_in * K; ++ckd) {
#pragma unroll 1
            for (int kh = 0; kh < K; ++kh) {
                float in[W_TILE + K - 1];
#pragma unroll
                for (int j = 0; j < W_TILE + K - 1; ++j) in[j] = in_row[(ckd * g.slab_rows + kh) * g.pitch + j];
                const float4* wv4 = reinterpret_cast<const float4*>(w_row + (ckd * K + kh) * K * CO_TILE);
#pragma unroll
                for (int kw = 0; kw < K; ++kw) {
#pragma unroll
                    for (int c4 = 0; c4 < CO_THREAD / 4; ++c4) {
                        const float4 wv = wv4[kw * (CO_TILE / 4) + c4];
#pragma unroll
                        for (int p = 0; p < W_TILE; ++p) {
                            acc[4 * c4 + 0][p] = fmaf(wv.x, in[p + kw], acc[4 * c4 + 0][p]);
                            acc[4 * c4 + 1][p] = fmaf(wv.y, in[p + kw], acc[4 * c4 + 1][p]);
                            acc[4 * c4 + 2][p] = fmaf(wv.z, in[p + kw], acc[4 * c4 + 2][p]);
                            acc[4 * c4 + 3][p] = fmaf(wv.w, in[p + kw], acc[4 * c4 + 3][p]);
                        }
                    }
                }
            }
        }

        // Per-thread sums over its counted outputs, then a fixed-order reduction over the item's tiles.
        const int w_first = (it.wt0 + t) * W_TILE;
        const bool valid = valid_thread && it.oh0 + r < g.Ho && it.wt0 + t < g.n_wtiles;
        if (valid_thread) {
#pragma unroll
            for (int c = 0; c < CO_THREAD; ++c) {
                float s = 0.f, q = 0.f;
#pragma unroll
                for (int p = 0; p < W_TILE; ++p) {
                    if (valid && w_first + p < g.Wo) {
                        const float v = acc[c][p] + bias_c[c];
                        s += v;
                        q = fmaf(v, v, q);
                    }
                }
                red[half * CO_THREAD + c][tile] = s;
                red[CO_TILE + half * CO_THREAD + c][tile] = q;
            }
        }
        __syncthreads();
        double* out = partials + (((size_t)it.b * n_chunks + chunk) * g.blocks_per_sample + item % g.blocks_per_sample) * N_STATS;
        for (int s = warp; s < N_STATS; s += n_warps) {
            double v = 0.0;
            for (int i2 = lane; i2 < n_tiles; i2 += 32) v += red[s][i2];
#pragma unroll
            for (int off = 16; off > 0; off /= 2) v += __shfl_down_sync(0xffffffffu, v, off);
            if (lane == 0) out[s] = v;
        }
        __syncthreads();   // red and this item's slab buffer are free for the next iteration
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

long long conv3d_groupnorm_mean_workspace(int C_in, int C_out, int D, int H, int W) {
    return (long long)((C_out + CO_TILE - 1) / CO_TILE) * make_geometry(C_in, C_out, D, H, W).blocks_per_sample * N_STATS;
}

cudaError_t conv3d_groupnorm_mean_launch(
    const float* x, const float* weight, const float* bias, const float* gn_weight, const float* gn_bias,
    double* workspace, float* out, int B, int C_in, int C_out, int groups, int D, int H, int W,
    double eps, cudaStream_t stream)
{
    const Geometry g = make_geometry(C_in, C_out, D, H, W);
    const size_t smem = smem_bytes(g);
    cudaError_t err = cudaFuncSetAttribute(conv_gn_stats_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    if (err != cudaSuccess) return err;
    // As many blocks as fit on the device at once (host-side queries only: no synchronisation).
    int device = 0, sms = 0, per_sm = 0;
    if ((err = cudaGetDevice(&device)) != cudaSuccess) return err;
    if ((err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device)) != cudaSuccess) return err;
    if ((err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, conv_gn_stats_kernel, g.threads, smem)) != cudaSuccess) return err;
    const int n_chunks = (C_out + CO_TILE - 1) / CO_TILE;
    const long long n_items = (long long)B * g.blocks_per_sample;
    const long long resident = (long long)sms * (per_sm > 0 ? per_sm : 1) / n_chunks;
    const dim3 grid((unsigned)(n_items < resident ? n_items : (resident > 0 ? resident : 1)), n_chunks);
    conv_gn_stats_kernel<<<grid, g.threads, smem, stream>>>(x, weight, bias, workspace, (int)n_items, g);
    err = cudaGetLastError();
    if (err != cudaSuccess) return err;
    const double n_per_channel = (double)g.Do * g.Ho * g.Wo;
    gn_mean_finalize_kernel<<<B, FINAL_THREADS, 3 * C_out * sizeof(double), stream>>>(
        workspace, gn_weight, gn_bias, out, C_out, groups, g.blocks_per_sample, n_per_channel, eps);
    return cudaGetLastError();
}
"""

cpp_source = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

long long conv3d_groupnorm_mean_workspace(int C_in, int C_out, int D, int H, int W);
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
    auto workspace = torch::empty({B * conv3d_groupnorm_mean_workspace(x.size(1), C_out, x.size(2), x.size(3), x.size(4))},
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

KERNEL_SIZE = 3        # the CUDA kernel's K
MAX_IN_CHANNELS = 16   # all weights of a block's channel chunk stay in shared memory


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
