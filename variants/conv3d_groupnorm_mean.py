"""Conv3d -> GroupNorm -> mean over (C, D, H, W), one sweep over the input (KernelBench level 2, problem 23).

The mean of a GroupNorm output needs no normalised element, only each channel's sum S_c and each group's sum of
squares of the conv output: out[b] = mean_c(gamma_c (S_c / N - mu_g) rstd_g + beta_c). So where the conv is
memory-bound (few input channels) the forward computes it and keeps its sums in registers; the conv output never
touches memory. The backward follows in closed form: dL/dy = A_c + B_g (y - mu_g), then the conv's own gradients.

Plan (conv3d_groupnorm_mean_path in the CUDA source; ModelNew.plan(x) names every stage's kernel and its rule,
tests/test_plan.py pins them). Three paths, each kept where it was measured fastest (docs/conv3d_groupnorm_mean.md):
  TUNED (kernel 3 on every axis, C_in <= 7 in float32, <= 16 in half; <= 7 in half where a gradient is wanted):
    conv_gn_stats_kernel / conv_gn_stats_half_kernel  the conv as a split-TF32 (half: 16-bit MMA) GEMM per 32-column
                               row segment, its sums in registers; gn_mean_finalize_kernel adds the partials in order
    backward: gn_mean_backward_coef_kernel, conv_gn_stats_kernel<GRAD> (the conv again, writing dL/dy; not in the
    forward, which KernelBench times with autograd on), gn_param_grad_kernel; dL/dx grad_input_stream_kernel (a block
    a sample) or grad_input_tc_kernel, dL/dW grad_weight_rows_kernel or grad_weight_tc_kernel (+
    finish_weight_grad_tc_kernel), where their bounds hold (W <= 32, ...), else the tiled kernels (float32) or
    PyTorch's convolution backward (half)
  TILED (float32, C_in <= 7, any other kernel): conv_stats_general_kernel (the conv on the CUDA cores in tiles, its
    sums in registers); backward conv_grad_y_general_kernel, grad_input_tiled_kernel, grad_weight_tiled_kernel
  TORCH_CONV (everything else: C_in >= 8, and half precision off the tuned envelope): PyTorch's own convolution
    (at::_convolution under the user's flags and dtype: eager's bits), conv_sums_kernel over its output, the same
    finalize; backward grad_y_from_conv_kernel over the saved output, then PyTorch's convolution backward. There the
    conv is compute-bound and cuDNN's kernels beat ours; our part is one read of y forward, one read and write back.
Every sum of ours is in a fixed order (no atomics): the same input gives the same bits; PyTorch's conv backward is as
deterministic as eager's (torch.backends.cudnn.deterministic).

Semantics (docs/DESIGN.md): our forward convs exact fp32 under both torch.backends.cudnn.allow_tf32 settings (cuDNN
keeps this conv in fp32 too); the tensor-core dL/dx and dL/dW take one TF32 product a step when the flag is on, as
PyTorch's conv backward does; in float16/bfloat16 each conv output is rounded as PyTorch rounds it (the conv, then
its bias) and the GroupNorm statistics as PyTorch's half GroupNorm stores them; under autocast GroupNorm and the
mean are float32. Our backward kernels run in float32 (in bfloat16 the conv's gradients one TF32 product a step, dL/dy
rounded to TF32: 3 bits more than PyTorch's bfloat16 dL/dy) and round each gradient to its tensor's dtype. Double
backward raises.

Floor at the benchmark size (B=128, 3->24 channels, 24x32x32, k=3): 9.85 GFLOP of multiply-add, 0.147 ms at the
67 TFLOP/s FP32 rate; as split TF32 on the tensor cores about 0.076 ms. Forward + backward: three such convs and
dL/dy's 243 MB written once and read twice, 0.44 ms. Measured (H200, run_all.py, README; two leases differing by
1.2x on this file): forward 0.18 to 0.22 ms fp32 (5.8x to 6.6x eager; KernelBench 7.13x), 0.11 to 0.14 ms in half
(11.7x to 12.3x; the 16-bit conv kernel 0.8x its time before the loop rework); forward + backward 1.21 to 1.40 ms
fp32 (9.0x to 10.3x). What bounds each kernel (ncu), the paths' measurements and what was tried:
docs/conv3d_groupnorm_mean.md.

Run: python variants/conv3d_groupnorm_mean.py
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

# The plan's types, in both translation units: the CUDA source decides a call's plan once
# (conv3d_groupnorm_mean_make_plan), the C++ operator and the launchers read it.
plan_types = r"""
enum class Path { TUNED, TILED, TORCH_CONV };    // the forward's conv and statistics (conv3d_groupnorm_mean_path)
enum class DxPath { STREAM, TC, TILED, TORCH };  // dL/dx (dx_path)
enum class DwPath { ROWS, TC, TILED, TORCH };    // dL/dW (dw_path)
struct Plan {
    Path path;
    bool vec;      // half precision, tuned: conv_gn_stats_half_kernel's 8-byte row loads (half_vec_rows)
    DxPath dx;     // training only (else TORCH, unused)
    DwPath dw;
};
"""

cuda_source = plan_types + r"""
#include <cuda_runtime.h>
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <string>
#include <type_traits>

// ---- The plan's thresholds (conv3d_groupnorm_mean_path applies them; its comment has the measurements, H200):
constexpr int TUNED_MAX_C_IN = 7;       // float32: the tuned sums run C_in x 9 deep in one accumulator; at 15 they miss
constexpr int TUNED_MAX_C_IN_HALF = 16; // half precision: the 16-bit MMA kernel, under the 1e-2 rule (1.7x eager at 16)
constexpr int TUNED_MAX_C_IN_HALF_TRAINING = 7;   // half, a gradient wanted: from 8 PyTorch's conv path trains faster
constexpr int TILED_MAX_C_IN = 7;       // float32, other kernels: the tiled conv, 1.4x (3.7x with backward) cuDNN's

constexpr int K = 3;                  // the tuned path's kernel size (other sizes: the tiled or PyTorch's conv path)
constexpr int CO_CHUNK = 24;          // output channels per block: all of the benchmark's 24
constexpr int N_COLS = K * CO_CHUNK;  // GEMM columns: (kw, channel), kw-major
constexpr int N_TILES = N_COLS / 8;   // 8-column tiles
constexpr int SEG = 32;               // input columns of a row segment: a warp's two 16-row tiles
constexpr int SEG_OUT = SEG - K + 1;  // output columns a segment gives
constexpr int WARPS = 4, THREADS = 32 * WARPS;   // one warpgroup; a unit of work is a segment per warp
constexpr int BLOCKS_PER_SM = 4;                 // caps registers at 128
constexpr int N_STATS = 2 * CO_CHUNK;            // per channel: sum, sum of squares
constexpr int LANE_STATS = 2 * (CO_CHUNK / 4);   // a lane's: those of its CO_CHUNK / 4 channels
constexpr int B_WORDS = N_COLS * 8;              // one 8-deep slice of a chunk's weights
constexpr int FINAL_THREADS = 256;

// shared: element_types begin
// Element types: float, and the half types as their 16 bits (as torch.float16 and torch.bfloat16 store
// them), converted by PTX: to float exactly, from float to nearest, ties to even, as PyTorch rounds an op's
// output. The kernels compute in float and round to the element type where PyTorch's run of the model does.
struct Fp16 { unsigned short bits; };
struct Bf16 { unsigned short bits; };
__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(Fp16 v) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(v.bits)); return f; }
__device__ __forceinline__ float to_float(Bf16 v) { return __uint_as_float((unsigned)v.bits << 16); }
template <typename T> __device__ __forceinline__ T from_float(float v) { return v; }
template <> __device__ __forceinline__ Fp16 from_float<Fp16>(float v) {
    Fp16 h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h.bits) : "f"(v));
    return h;
}
template <> __device__ __forceinline__ Bf16 from_float<Bf16>(float v) {   // the packed form: a fast ALU op
    unsigned pair;                                                         // (cvt.rn.bf16.f32 is not)
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(pair) : "f"(0.f), "f"(v));
    return Bf16{(unsigned short)(pair & 0xffffu)};
}
template <typename T> __device__ __forceinline__ float round_to(float v) { return to_float(from_float<T>(v)); }
// T one of the half types.
template <typename T> constexpr bool is_half() { return !std::is_same<T, float>::value; }

// f(T()) for the element type of a dtype code (0 float32, 1 float16, 2 bfloat16).
template <typename F> cudaError_t with_type(int code, F&& f) {
    if (code == 1) return f(Fp16());
    if (code == 2) return f(Bf16());
    return f(0.f);
}
// f(T(), TO()) for the conv's element type T and the GroupNorm's TO: both the same, or TO float32 (autocast).
template <typename F> cudaError_t with_types(int conv, int norm, F&& f) {
    return with_type(conv, [&](auto t) { return norm == 0 ? f(t, 0.f) : f(t, t); });
}
// GroupNorm's affine form y = a x + b as PyTorch's half-precision GroupNorm builds it: its per-group mean and
// 1/std are stored in the dtype (native_group_norm's outputs, rounded), then a = rstd gamma and
// b = beta - a mean in float, the product rounded before the sum (ComputeFusedParams compiles to FMUL, FADD: its
// SASS), so never contracted here.
template <typename TO> __device__ __forceinline__ float2 half_gn_affine(double mean, double rstd, float gamma, float beta) {
    const float a = round_to<TO>((float)rstd) * gamma;
    return make_float2(a, beta - __fmul_rn(a, round_to<TO>((float)mean)));
}
// shared: element_types end
// shared: half_pairs begin
// Half-precision products and pairs (T = Fp16 or Bf16). mma_half: d += a b on mma.sync m16n8k16 in T with fp32
// accumulation (a product of two half values is exact in fp32). A pair is two T values in one 32-bit register, the
// first in the low half: pack_pair rounds two floats by one packed conversion, add_pair adds two pairs with one
// rounding (bit-identical to adding the values in float and rounding the sum to T: float's 24 bits are at least
// twice T's 11 or 8 bits plus 2, so that double rounding is innocuous), unpack_pair returns them as floats (exact).
// opaque(p): p as a pointer the compiler cannot trace back to a kernel argument, so that an address formed from it
// and a 32-bit offset is one wide multiply-add, not 64-bit index arithmetic (the conv loops' row pointers).
template <typename T> __device__ __forceinline__ const T* opaque(const T* p) {
    const T* q;
    asm("mov.b64 %0, %1;" : "=l"(q) : "l"(p));
    return q;
}
template <typename T>
__device__ __forceinline__ void mma_half(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    if (std::is_same<T, Bf16>::value)
        asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
            "{%0,%1,%2,%3};"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    else
        asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
            "{%0,%1,%2,%3};"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
template <typename T> __device__ __forceinline__ uint32_t pack_pair(float lo, float hi) {
    uint32_t p;
    if (std::is_same<T, Bf16>::value)
        asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(p) : "f"(hi), "f"(lo));
    else
        asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(p) : "f"(hi), "f"(lo));
    return p;
}
template <typename T> __device__ __forceinline__ uint32_t add_pair(uint32_t a, uint32_t b) {
    uint32_t s;
    if (std::is_same<T, Bf16>::value)   // a 1 + b (fma.rn.bf16x2: sm_80; add.rn.bf16x2 needs sm_90)
        asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(s) : "r"(a), "r"(0x3f803f80u), "r"(b));
    else
        asm("add.rn.f16x2 %0, %1, %2;" : "=r"(s) : "r"(a), "r"(b));
    return s;
}
template <typename T> __device__ __forceinline__ float2 unpack_pair(uint32_t p) {
    if (std::is_same<T, Bf16>::value) return make_float2(__uint_as_float(p << 16), __uint_as_float(p & 0xffff0000u));
    float lo, hi;
    asm("{.reg .f16 l, h;\n mov.b32 {l, h}, %2;\n cvt.f32.f16 %0, l;\n cvt.f32.f16 %1, h;}"
        : "=f"(lo), "=f"(hi) : "r"(p));
    return make_float2(lo, hi);
}
template <typename T> __device__ __forceinline__ float2 round_pair(float a, float b) {
    return unpack_pair<T>(pack_pair<T>(a, b));
}
// shared: half_pairs end

// One element through the read-only cache, as a float.
__device__ __forceinline__ float load_float(const float* p) { return __ldg(p); }
template <typename T> __device__ __forceinline__ float load_float(const T* p) {
    return to_float(T{__ldg(reinterpret_cast<const unsigned short*>(p))});
}
// A half value has at most 11 significant bits: exact in TF32, so a product of two needs no split.
template <typename T> constexpr bool exact_in_tf32() { return !std::is_same<T, float>::value; }


// Shared by the host and both kernels: the GEMM's 8-deep steps, the segments of an input row (see
// conv_gn_stats_kernel) and the conv kernel's contiguous ranges of units, block i's starting at
// first_unit(i) and the block holding unit u found by block_holding(u).
__host__ __device__ inline int depth_steps(int C_in) { return (C_in * K * K + 7) / 8; }
__host__ __device__ inline bool wide_rows(int W) { return W >= SEG; }
__host__ __device__ inline int row_segments(int W, bool wide) {
    return wide ? (W - K + 1 + SEG_OUT - 1) / SEG_OUT : 1;
}
template <class Block, class Count>   // the callers' own index types (blockIdx.x and gridDim.x, or 64-bit)
__device__ inline long long first_unit(Block block, long long n_units, Count n_blocks) {
    return block * n_units / n_blocks;
}
__device__ inline long long block_holding(long long u, long long n_units, int n_blocks) {
    return ((u + 1) * n_blocks - 1) / n_units;
}

// shared: split_tf32 begin
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
// v rounded to TF32 (10 mantissa bits) to nearest, ties to even, as cuDNN rounds a TF32 conv's operands:
// the product of two such values is exact in fp32. Finite v only.
__device__ __forceinline__ float round_tf32(float v) {
    const unsigned u = __float_as_uint(v);
    return __uint_as_float((u + 0xfffu + ((u >> 13) & 1u)) & 0xffffe000u);
}
// A product step's operand: split (TF32 false: three products, fp32-level) or rounded to TF32 with small = 0 (TF32
// true: one product, as PyTorch's conv under allow_tf32; the caller skips the two products of small parts).
template <bool TF32> __device__ __forceinline__ Split operand(float v) {
    return TF32 ? Split{__float_as_uint(round_tf32(v)), 0u} : split(v);
}
// d += a * b on the tensor cores with mma.sync (every GPU since sm_80), 16 rows x 8 columns x 8 deep, in TF32 with
// fp32 sums. Fragments (g = lane / 4, t = lane % 4): a = rows g, g+8 at depths t, t+4; b = depths t, t+4 of
// column g; d = row g then g+8, columns 2t, 2t+1.
__device__ __forceinline__ void mma(float* d, const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
// shared: split_tf32 end


// The conv as a GEMM over one row of input columns: rows = input columns iw, columns = (kw, co),
// depth k = (ci, kd, kh) padded to a multiple of 8, so that C[iw][kw, co] = sum_k x[k][iw] w[co][k][kw]
// and out[ow][co] = C[ow][0, co] + C[ow + 1][1, co] + C[ow + 2][2, co]. Each block keeps its channel
// chunk's weights, split, in shared memory per 8-deep step and part (big, small), in the tensor
// cores' K-major layout: column n, depth k at word (n / 8) * 64 + (k / 4) * 32 + (n % 8) * 4 + k % 4
// (8x4 blocks of 128 bytes); zero past C_out and past C_in * K * K.
template <typename T>
__device__ __forceinline__ uint32_t split_weight(const T* __restrict__ weight, int i, int chunk, int C_out,
                                                 int C_in) {
    const int w = i % B_WORDS, part = i / B_WORDS % 2, step = i / (2 * B_WORDS);
    const int n = w / 64 * 8 + w / 4 % 8, k = step * 8 + w / 32 % 2 * 4 + w % 4;
    const int kw = n / CO_CHUNK, co = chunk * CO_CHUNK + n % CO_CHUNK;
    const Split s = split(co < C_out && k < C_in * K * K ? to_float(weight[((size_t)co * C_in * K * K + k) * K + kw]) : 0.f);
    return part == 0 ? s.big : s.small;
}


#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// Hopper: one warpgroup multiplies 64 rows (16 per warp, A from registers in the m16n8k8 layout)
// by the 72 columns read from shared memory, asynchronously; d = a * b, or d += a * b if accumulate.
__device__ __forceinline__ void wgmma(float (&d)[4 * N_TILES], const uint32_t (&a)[4], uint64_t b_desc,
                                      int accumulate = 1) {
    asm volatile("{\n.reg .pred acc;\nsetp.ne.b32 acc, %41, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n72k8.f32.tf32.tf32 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, "
                 "%18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35}, "
                 "{%36, %37, %38, %39}, %40, acc, 1, 1;\n}"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
                   "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
                   "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
                   "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
                   "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]),
                   "+f"(d[35])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc), "r"(accumulate));
}
// Shared-memory descriptor of one 72x8 weight slice: 8x4 blocks, 128 bytes apart along k, 256 along n.
__device__ __forceinline__ uint64_t slice_desc(const uint32_t* p) {
    const uint32_t addr = (uint32_t)__cvta_generic_to_shared(p);
    return (uint64_t)((addr & 0x3ffff) >> 4) | (uint64_t)(128 >> 4) << 16 | (uint64_t)(256 >> 4) << 32;
}
#endif

// acc += a * (weight slice), with the slice's big and small parts at b[0, B_WORDS) and b[B_WORDS, 2 B_WORDS);
// on Hopper acc = a * (weight slice) for the first slice (first == true), elsewhere acc starts at 0. EXACT
// (half-precision operands, exact in TF32, small parts zero): the one product big * big.
template <bool EXACT>
__device__ __forceinline__ void multiply(float (&acc)[4 * N_TILES], const uint32_t (&big)[4], const uint32_t (&small)[4],
                                         const uint32_t* b, bool first) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    if (EXACT) {
        wgmma(acc, big, slice_desc(b), !first);
        return;
    }
    wgmma(acc, small, slice_desc(b), !first);    // small terms first
    wgmma(acc, big, slice_desc(b + B_WORDS));
    wgmma(acc, big, slice_desc(b));
#else
    const int lane = threadIdx.x % 32, nk = lane / 4 * 4 + lane % 4;   // column g, depth t
#pragma unroll
    for (int j = 0; j < N_TILES; ++j) {
        const uint32_t* bj = b + j * 64 + nk;
        if (!EXACT) {
            mma(acc + 4 * j, small, bj[0], bj[32]);
            mma(acc + 4 * j, big, bj[B_WORDS], bj[B_WORDS + 32]);
        }
        mma(acc + 4 * j, big, bj[0], bj[32]);
    }
#endif
}

// Segment q of a sample (past the last: a copy of it, counting nothing): its output row (od, oh), its first input
// column `start` (wide rows: the last segment shifted left to stay inside the row) and the rows [lo, hi) it counts.
struct Segment { int od, oh, start, lo, hi; };
__device__ __forceinline__ Segment segment_at(int q, int segments, int n_seg, int Ho, int W, int Wo, bool wide) {
    const int qq = min(q, segments - 1), seg = qq % n_seg;
    const int start = wide ? min(seg * SEG_OUT, W - SEG) : 0;
    return {qq / (n_seg * Ho), qq / n_seg % Ho, start, q < segments ? seg * SEG_OUT - start : SEG,
            min(SEG_OUT, Wo - start)};
}

// Where a block's run of units ends: each channel statistic's lane sums (lane_sums[warp][stat][lane]) added in a
// fixed order, warps then lanes, into out[kind * CO_CHUNK + c] (c's sum, kind 0, or sum of squares, kind 1), and
// cleared for the next run. Every thread of the block calls it.
__device__ __forceinline__ void flush_run(double (*lane_sums)[LANE_STATS][32], double* out) {
    __syncthreads();
    if (threadIdx.x < N_STATS) {
        const int kind = threadIdx.x / CO_CHUNK, c = threadIdx.x % CO_CHUNK;
        const int stat = 2 * (2 * (c / 8) + c % 2) + kind, tc = c % 8 / 2;
        double v = 0.0;
#pragma unroll
        for (int w = 0; w < WARPS; ++w)
#pragma unroll
            for (int gl = 0; gl < 8; ++gl) {
                v += lane_sums[w][stat][4 * gl + tc];
                lane_sums[w][stat][4 * gl + tc] = 0.0;
            }
        out[threadIdx.x] = v;
    }
    __syncthreads();
}

// Phase 1: conv on the tensor cores + per-(sample, channel) sum and sum of squares of its output,
// without the conv bias (the finalize adds it). A row segment is SEG input columns of one input row
// set (od, oh) and gives the outputs ow = start + R for its rows R < SEG_OUT; WIDE (W >= SEG): a
// row has ceil(Wo / SEG_OUT) segments, the last shifted left to stay inside the row and counting
// only the columns its neighbour does not; otherwise one segment, columns past W clamped. A unit of
// work is WARPS consecutive segments of one sample (one per warp), and each block takes a
// contiguous range of units (grid x), one chunk of CO_CHUNK channels (grid y). Each warp adds its
// units' sums to its own shared doubles; where the block's range leaves a sample (a run ends), the
// warps' sums are added in a fixed order and written at the run's first unit: no atomics.
// Dynamic shared memory: the chunk's split weights (k_steps * 2 * B_WORDS words), then k_steps * 4
// uint2, the input offsets of depths (k, k + 4) for k = step * 8 + t.
// T: the element type; the statistics in float32 only (half precision: conv_gn_stats_half_kernel).
// GRAD (the backward's dL/dy, any T): in place of the sums, each output y (bias added; in half precision the conv's
// output rounded as PyTorch's conv rounds it, then the bias added and rounded again) gives
// dL/dy = coef_0 + coef_1 (y - coef_2), written in float32 to grad_y (B, C_out, Do, Ho, Wo).
template <bool WIDE, typename T, bool GRAD = false>
__global__ void __launch_bounds__(THREADS, BLOCKS_PER_SM) conv_gn_stats_kernel(
    const T* __restrict__ x,               // (B, C_in, D, H, W), contiguous
    const T* __restrict__ weight,          // (C_out, C_in, K, K, K), contiguous
    const T* __restrict__ bias,            // (C_out) or nullptr; GRAD only (the statistics' finalize adds it)
    double* __restrict__ partials,         // (B * units_per_sample, n_chunks, N_STATS), at run starts
    int C_in, int C_out, int D, int H, int W, int units_per_sample, long long n_units,
    const float* __restrict__ coef = nullptr,   // GRAD: (B, C_out, 3)
    float* __restrict__ grad_y = nullptr)       // GRAD: (B, C_out, Do, Ho, Wo)
{
    extern __shared__ __align__(128) uint32_t w_s[];
    __shared__ double lane_sums[WARPS][LANE_STATS][32];
    const int Do = D - K + 1, Ho = H - K + 1, Wo = W - K + 1;
    const int n_seg = row_segments(W, WIDE), segments = Do * Ho * n_seg;   // WIDE == wide_rows(W)
    const int k_steps = depth_steps(C_in);
    const int chunk = blockIdx.y, n_chunks = gridDim.y;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    constexpr bool EXACT = exact_in_tf32<T>();
    static_assert(GRAD || !EXACT, "half-precision statistics take conv_gn_stats_half_kernel");
    float bias_lane[N_TILES / K][2] = {};   // GRAD: the bias of this lane's channels jc * 8 + 2 t + e
    if (GRAD && bias != nullptr)
        for (int jc = 0; jc < N_TILES / K; ++jc)
            for (int e = 0; e < 2; ++e) {
                const int co = chunk * CO_CHUNK + jc * 8 + 2 * t + e;
                bias_lane[jc][e] = co < C_out ? load_float(bias + co) : 0.f;
            }

    const int n_words = k_steps * 2 * B_WORDS;
    for (int i = threadIdx.x; i < n_words; i += THREADS) w_s[i] = split_weight(weight, i, chunk, C_out, C_in);
    uint2* tap_s = reinterpret_cast<uint2*>(w_s + n_words);
    for (int i = threadIdx.x; i < k_steps * 4; i += THREADS) {
        unsigned off[2];
        for (int h = 0; h < 2; ++h) {   // depth k = (ci, kd, kh); padding depths read offset 0
            const int k = i / 4 * 8 + i % 4 + 4 * h;
            off[h] = k < C_in * K * K ? ((k / (K * K) * D + k / K % K) * H + k % K) * W : 0;
        }
        tap_s[i] = make_uint2(off[0], off[1]);
    }
    for (int i = threadIdx.x; i < WARPS * LANE_STATS * 32; i += THREADS) (&lane_sums[0][0][0])[i] = 0.0;
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");   // the weights are read by wgmma
#endif
    __syncthreads();

    const long long u_begin = first_unit(blockIdx.x, n_units, gridDim.x);
    const long long u_end = first_unit(blockIdx.x + 1, n_units, gridDim.x);
    int b = (int)(u_begin / units_per_sample), unit = (int)(u_begin % units_per_sample);   // of the next unit
    // The unit's geometry: its sample's input, this warp's segment (idle warps recompute a real
    // one and count nothing), the input offset of the segment's first column and the rows [lo, hi)
    // whose outputs it counts.
    const T* xb;
    unsigned row, out_row;   // the segment's first column in the input and in the output (GRAD)
    int lo, hi;
    const auto locate = [&]() {
        // The host checks one sample is < 2^31 elements. Opaque, so that each load's address is one 32-bit add
        // and one wide multiply-add instead of a re-derived 64-bit index.
        xb = opaque(x + (size_t)b * C_in * D * H * W);
        const Segment sg = segment_at(unit * WARPS + warp, segments, n_seg, Ho, W, Wo, WIDE);
        lo = sg.lo;
        hi = sg.hi;
        row = (sg.od * H + sg.oh) * W + sg.start;
        out_row = (sg.od * Ho + sg.oh) * Wo + sg.start;
    };
    // The GEMM's rows are the segment's columns in any order: this lane's rows g and g + 8 of
    // tile i (r = 0, 1) are its columns 4 g + s, s = 2 i + r, so that out[R] needs the lane's
    // own rows but for the last two, which come from lane g + 1.
    float a_next[2][4];
    const auto load = [&](int step) {
        const uint2 off = tap_s[step * 4 + t];
#pragma unroll
        for (int s = 0; s < 4; ++s) {
            if (WIDE) {   // one address per depth, the rest immediate offsets
                a_next[s / 2][s % 2] = load_float(xb + (row + 4 * g + off.x) + s);
                a_next[s / 2][s % 2 + 2] = load_float(xb + (row + 4 * g + off.y) + s);
            } else {
                const unsigned col = min(4 * g + s, W - 1);
                a_next[s / 2][s % 2] = load_float(xb + (row + off.x + col));
                a_next[s / 2][s % 2 + 2] = load_float(xb + (row + off.y + col));
            }
        }
    };

    if (u_begin < u_end) {
        locate();
        load(0);
    }
    long long run_start = u_begin;
#pragma unroll 1
    for (long long u = u_begin; u < u_end; ++u) {
        if (unit == 0) run_start = u;
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
        float acc[2][4 * N_TILES];        // set by the first products
#else
        float acc[2][4 * N_TILES] = {};
#endif
#pragma unroll 1
        for (int step = 0; step < k_steps; ++step) {
            uint32_t big[2][4], small[2][4];
#pragma unroll
            for (int i = 0; i < 2; ++i)
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    // EXACT: big is the value itself, formed by an instruction (the mask clears nothing) so that
                    // it has registers of its own: the wgmma reads them while the next loads land in a_next.
                    const Split s = EXACT ? Split{__float_as_uint(a_next[i][e]) & 0xffffe000u, 0u} : split(a_next[i][e]);
                    big[i][e] = s.big;
                    small[i][e] = s.small;
                }
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
            asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#endif
#pragma unroll
            for (int i = 0; i < 2; ++i) multiply<EXACT>(acc[i], big[i], small[i], w_s + step * 2 * B_WORDS, step == 0);
            // The next step's inputs, in flight during these products. Loaded after the products
            // are issued, so that the compiler needs no copies of them to free the split registers.
            if (step + 1 < k_steps) load(step + 1);
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
            asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
            asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
#endif
        }
        // The next unit's first inputs, in flight during this unit's sums.
        const int lo_u = lo, hi_u = hi, b_u = b;
        const unsigned out_row_u = out_row;
        const bool run_ends = u + 1 == u_end || unit + 1 == units_per_sample;
        if (++unit == units_per_sample) {
            unit = 0;
            ++b;
        }
        if (u + 1 < u_end) {
            locate();
            load(0);
        }

        // out[R] = C[R][kw 0] + C[R + 1][kw 1] + C[R + 2][kw 2], R = 4 g + s; then the unit's sums
        // per channel, this lane's counted rows in fp32, added to the lane's shared doubles.
#pragma unroll
        for (int jc = 0; jc < N_TILES / K; ++jc)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                // Column (kw, channel jc * 8 + 2 t + e) of rows 4 g + s: c0 for s < 4, c1 for s < 5, c2
                // for s < 6, the rows past 4 g + 3 from lane g + 1.
                float c0[4], c1[5], c2[6];
#pragma unroll
                for (int s = 0; s < 4; ++s) {
                    c0[s] = acc[s / 2][4 * jc + 2 * (s % 2) + e];
                    c1[s] = acc[s / 2][4 * (3 + jc) + 2 * (s % 2) + e];
                    c2[s] = acc[s / 2][4 * (6 + jc) + 2 * (s % 2) + e];
                }
                c1[4] = __shfl_sync(0xffffffffu, c1[0], (lane + 4) % 32);
                c2[4] = __shfl_sync(0xffffffffu, c2[0], (lane + 4) % 32);
                c2[5] = __shfl_sync(0xffffffffu, c2[1], (lane + 4) % 32);
                if (GRAD) {
                    const int co = chunk * CO_CHUNK + jc * 8 + 2 * t + e;
                    if (co < C_out) {
                        const float* cf = coef + ((size_t)b_u * C_out + co) * 3;
                        const float a = cf[0], slope = cf[1], mu = cf[2];
                        float* gy = grad_y + ((size_t)b_u * C_out + co) * ((size_t)Do * Ho * Wo) + out_row_u;
#pragma unroll
                        for (int s = 0; s < 4; ++s) {
                            float v = c0[s] + c1[s + 1] + c2[s + 2];
                            v = EXACT ? round_to<T>(round_to<T>(v) + bias_lane[jc][e]) : v + bias_lane[jc][e];
                            const int R = 4 * g + s;
                            if (R >= lo_u && R < hi_u) gy[R] = a + slope * (v - mu);
                        }
                    }
                    continue;
                }
                float sum = 0.f, sq = 0.f;
#pragma unroll
                for (int s = 0; s < 4; ++s) {
                    const float v = c0[s] + c1[s + 1] + c2[s + 2];   // float32: the finalize adds the bias
                    const int R = 4 * g + s;
                    if (R >= lo_u && R < hi_u) {
                        sum += v;
                        sq = fmaf(v, v, sq);
                    }
                }
                const int stat = 2 * (2 * jc + e);
                lane_sums[warp][stat][lane] += sum;
                lane_sums[warp][stat + 1][lane] += sq;
            }
        if (!GRAD && run_ends) flush_run(lane_sums, partials + (run_start * n_chunks + chunk) * N_STATS);
    }
}

// Phase 1 in half precision (T = Fp16 or Bf16; the backward's dL/dy keeps conv_gn_stats_kernel<GRAD>): a product of
// two half values is exact in fp32, so the conv runs on mma.sync m16n8k16 in T with fp32 accumulation, one product
// a multiply, laid out for 16-bit fragments: per segment, rows = its 32 output columns R, columns = the chunk's 24
// channels, depth = (tap, kw) with a tap = (ci, kd, kh) and kw padded to 4 (zero weights at kw = 3). A k16 step
// is 4 taps; a lane's depths are one tap's kw (0, 1) in a0, a1 and (2, 3) in a2, a3, so its A registers are pairs
// of adjacent input columns: M tile i's rows g, g + 8 are R = 4g + i, 4g + i + 2, and tile 0's registers are the
// words of columns 4g .. 4g + 7 (VEC: one aligned segment a row; an 8-byte load of columns 4g .. 4g + 3 clamped
// into the row, the next four by two shuffles from lane group g + 1), tile 1's 3 byte permutes of them; else
// element by element, clamped into the row. The accumulators are the conv's
// outputs themselves. Same units, runs, lane sums and partials as conv_gn_stats_kernel (its channel of lane
// stat 2 (2 jc + e) is jc * 8 + 2t + e here too). Dynamic shared memory: the weights in fragment order
// ([step][channel tile][lane] uint2), then the taps' input offsets.
constexpr int HALF_BLOCKS_PER_SM = 8;   // caps registers at 64
__host__ __device__ inline int half_steps(int C_in) { return (C_in * K * K + 3) / 4; }

template <bool VEC, typename T>
__global__ void __launch_bounds__(THREADS, HALF_BLOCKS_PER_SM) conv_gn_stats_half_kernel(
    const T* __restrict__ x, const T* __restrict__ weight, const T* __restrict__ bias, double* __restrict__ partials,
    int C_in, int C_out, int D, int H, int W, int units_per_sample, long long n_units)
{
    extern __shared__ __align__(16) uint2 wf_s[];   // [step][channel tile][lane]
    __shared__ double lane_sums[WARPS][LANE_STATS][32];
    constexpr int CT = CO_CHUNK / 8;                // channel tiles
    const int Do = D - K + 1, Ho = H - K + 1, Wo = W - K + 1;
    const bool wide = wide_rows(W);
    const int n_seg = row_segments(W, wide), segments = Do * Ho * n_seg;
    const int taps = C_in * K * K, steps = half_steps(C_in);
    const int chunk = blockIdx.y, n_chunks = gridDim.y;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const unsigned short* w_bits = reinterpret_cast<const unsigned short*>(weight);
    for (int i = threadIdx.x; i < steps * CT * 32 * 2; i += THREADS) {   // register r of lane ln: kw 2r, 2r + 1
        const int r = i % 2, ln = i / 2 % 32, j = i / 64 % CT, st = i / (64 * CT);
        const int tap = st * 4 + ln % 4, co = chunk * CO_CHUNK + 8 * j + ln / 4;
        uint32_t pair = 0;
        for (int h = 0; h < 2; ++h) {
            const int kw = 2 * r + h;
            if (kw < K && tap < taps && co < C_out) pair |= (uint32_t)w_bits[((size_t)co * taps + tap) * K + kw] << 16 * h;
        }
        reinterpret_cast<uint32_t*>(wf_s)[i] = pair;
    }
    unsigned* tap_s = reinterpret_cast<unsigned*>(wf_s + steps * CT * 32);
    for (int i = threadIdx.x; i < steps * 4; i += THREADS)   // padding taps read offset 0
        tap_s[i] = i < taps ? ((i / (K * K) * D + i / K % K) * H + i % K) * W : 0u;
    for (int i = threadIdx.x; i < WARPS * LANE_STATS * 32; i += THREADS) (&lane_sums[0][0][0])[i] = 0.0;
    uint32_t bias_p[CT];   // this lane's channels' biases as pairs: jc * 8 + 2t, jc * 8 + 2t + 1
    for (int jc = 0; jc < CT; ++jc) {
        float v[2];
        for (int e = 0; e < 2; ++e) {
            const int co = chunk * CO_CHUNK + jc * 8 + 2 * t + e;
            v[e] = co < C_out && bias != nullptr ? load_float(bias + co) : 0.f;
        }
        bias_p[jc] = pack_pair<T>(v[0], v[1]);
    }
    __syncthreads();

    const long long u_begin = first_unit(blockIdx.x, n_units, gridDim.x);
    const long long u_end = first_unit(blockIdx.x + 1, n_units, gridDim.x);
    int b = (int)(u_begin / units_per_sample), unit = (int)(u_begin % units_per_sample);   // of the next unit
    // A unit's row pointer (VEC: its column 4g, clamped into the row; else its first column) is formed once,
    // opaque, so a step's address is one wide multiply-add of its tap's 32-bit offset.
    const unsigned c0 = VEC ? min(4 * g, W - 4) : 0;
    const T* r0;        // the next unit's row pointer
    unsigned start;     // its segment's first column
    int lo, hi;         // the rows R it counts
    const auto locate = [&]() {
        const T* xb = x + (size_t)b * C_in * D * H * W;
        const Segment sg = segment_at(unit * WARPS + warp, segments, n_seg, Ho, W, Wo, wide);
        lo = sg.lo;
        hi = sg.hi;
        start = sg.start;
        const unsigned row = (sg.od * H + sg.oh) * W + sg.start;
        r0 = opaque(xb + (row + c0));
    };
    const auto load = [&](const T* r0, unsigned start, int st, uint32_t (&w)[4]) {
        const unsigned o = tap_s[st * 4 + t];
        if (VEC) {   // w[2], w[3]: the next lane group's w[0], w[1], by shuffle where used (with_next)
            const uint2 v0 = __ldg(reinterpret_cast<const uint2*>(r0 + o));
            w[0] = v0.x; w[1] = v0.y;
        } else {   // clamped to the row's last column, W - 1 - start (start = the segment's first column)
            const unsigned last = W - 1 - start;
            const unsigned short* q = reinterpret_cast<const unsigned short*>(r0 + o);
#pragma unroll
            for (int m = 0; m < 4; ++m)
                w[m] = (uint32_t)__ldg(q + min(4u * g + 2 * m, last)) |
                       (uint32_t)__ldg(q + min(4u * g + 2 * m + 1, last)) << 16;
        }
    };
    // VEC: columns 4g + 4 .. 4g + 7 are lane group g + 1's first four (the last group's own: W <= 32, so both its
    // clamped loads start at W - 4), taken by two shuffles instead of a second load (half the L1 traffic).
    const auto with_next = [&](const uint32_t (&v)[4], uint32_t (&w)[4]) {
        w[0] = v[0];
        w[1] = v[1];
        w[2] = VEC ? __shfl_down_sync(0xffffffffu, v[0], 4) : v[2];
        w[3] = VEC ? __shfl_down_sync(0xffffffffu, v[1], 4) : v[3];
    };
    // One k16 step's products: tile 0's A registers are the loaded words, tile 1's three byte permutes of them.
    const auto multiply = [&](int st, const uint32_t (&w)[4], float (&acc)[2][CT][4]) {
        const uint32_t w12 = __byte_perm(w[1], w[2], 0x5432);
        const uint32_t a[2][4] = {{w[0], w[1], w[1], w[2]},
                                  {__byte_perm(w[0], w[1], 0x5432), w12, w12, __byte_perm(w[2], w[3], 0x5432)}};
#pragma unroll
        for (int jc = 0; jc < CT; ++jc) {
            const uint2 bw = wf_s[(st * CT + jc) * 32 + lane];
#pragma unroll
            for (int i = 0; i < 2; ++i) mma_half<T>(acc[i][jc], a[i], bw.x, bw.y);
        }
    };

    uint32_t next[4] = {};   // the next step's inputs, in flight
    if (u_begin < u_end) {
        locate();
        load(r0, start, 0, next);
    }
    long long run_start = u_begin;
#pragma unroll 1
    for (long long u = u_begin; u < u_end; ++u) {
        if (unit == 0) run_start = u;
        float acc[2][CT][4] = {};   // [M tile i][channel tile jc][fragment c]
        const T* r0_u = r0;
        const unsigned start_u = start;
        const int lo_u = lo, hi_u = hi;
        const bool run_ends = u + 1 == u_end || unit + 1 == units_per_sample;
        if (++unit == units_per_sample) {
            unit = 0;
            ++b;
        }
#pragma unroll 2
        for (int st = 0; st < steps - 1; ++st) {
            uint32_t w[4];
            with_next(next, w);
            load(r0_u, start_u, st + 1, next);
            multiply(st, w, acc);
        }
        {
            uint32_t w[4];
            with_next(next, w);
            if (u + 1 < u_end) {   // the next unit's first inputs, in flight during this unit's sums
                locate();
                load(r0, start, 0, next);
            }
            multiply(steps - 1, w, acc);
        }
        // Each output rounded as PyTorch's conv rounds it, then the bias added in the half type (one rounding;
        // two channels a packed conversion and a packed add); this lane's counted rows summed in fp32, added to
        // its shared doubles.
#pragma unroll
        for (int jc = 0; jc < CT; ++jc) {
            float sum[2] = {}, sq[2] = {};
#pragma unroll
            for (int i = 0; i < 2; ++i)
#pragma unroll
                for (int rr = 0; rr < 2; ++rr) {
                    const int R = 4 * g + i + 2 * rr;
                    const uint32_t c = pack_pair<T>(acc[i][jc][2 * rr], acc[i][jc][2 * rr + 1]);
                    float2 v = unpack_pair<T>(add_pair<T>(c, bias_p[jc]));
                    const bool ok = R >= lo_u && R < hi_u;
                    v.x = ok ? v.x : 0.f;
                    v.y = ok ? v.y : 0.f;
                    sum[0] += v.x;
                    sum[1] += v.y;
                    sq[0] = fmaf(v.x, v.x, sq[0]);
                    sq[1] = fmaf(v.y, v.y, sq[1]);
                }
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                const int stat = 2 * (2 * jc + e);
                lane_sums[warp][stat][lane] += sum[e];
                lane_sums[warp][stat + 1][lane] += sq[e];
            }
        }
        if (run_ends) flush_run(lane_sums, partials + (run_start * n_chunks + chunk) * N_STATS);
    }
}

// Phase 2: one block per sample. Adds the sample's run sums in order (double), adds the conv bias (fp32;
// in half precision the sums hold it), forms each group's mean and variance and writes
// mean_c(gamma_c * (mean_c - mu_g) * inv_std_g + beta_c), rounded to the GroupNorm's type TO.
template <typename T, typename TO>
__global__ void __launch_bounds__(FINAL_THREADS) gn_mean_finalize_kernel(
    const double* __restrict__ partials,  // (n_units, n_chunks, N_STATS), at run starts
    const T* __restrict__ bias,           // (C_out), the conv's, or nullptr
    const TO* __restrict__ gn_weight,     // (C_out)
    const TO* __restrict__ gn_bias,       // (C_out)
    TO* __restrict__ out,                 // (B)
    double* __restrict__ stats,           // (B, C_out + 2 groups): mean_c, then mu_g, then 1/std_g (for the backward)
    int C_out, int groups, int units_per_sample, long long n_units, int n_blocks, double n_per_channel,
    double eps, int general_chunks)       // > 0: partials from general_stats_kernel, (B, C_out, chunks, 2)
{
    extern __shared__ double sums[];      // [0, C_out): S_c, [C_out, 2 C_out): Q_c, then the terms
    __shared__ long long run_first[FINAL_THREADS];
    const int b = blockIdx.x;
    const int n_chunks = (C_out + CO_CHUNK - 1) / CO_CHUNK;
    for (int i = threadIdx.x; i < 2 * C_out; i += FINAL_THREADS) sums[i] = 0.0;
    if (general_chunks > 0) {   // the chunks of each (sample, channel) in order
        for (int i = threadIdx.x; i < 2 * C_out; i += FINAL_THREADS) {
            const double* part = partials + ((size_t)b * C_out + i % C_out) * general_chunks * 2 + i / C_out;
            double v = 0.0;
            for (int k = 0; k < general_chunks; ++k) v += part[2 * k];
            sums[i] = v;
        }
    }
    // Runs start at the sample's first unit and wherever a conv block's range starts inside it:
    // blocks first_block .. last_block hold the sample's units [u0, u1).
    const long long u0 = (long long)b * units_per_sample, u1 = u0 + units_per_sample;
    const long long first_block = general_chunks > 0 ? 0 : block_holding(u0, n_units, n_blocks);
    const long long last_block = general_chunks > 0 ? -1 : block_holding(u1 - 1, n_units, n_blocks);
    for (long long r0 = first_block; r0 <= last_block; r0 += FINAL_THREADS) {
        __syncthreads();
        if (r0 + threadIdx.x <= last_block)
            run_first[threadIdx.x] = max(u0, first_unit(r0 + threadIdx.x, n_units, n_blocks));
        __syncthreads();
        const int n = last_block - r0 + 1 < FINAL_THREADS ? (int)(last_block - r0 + 1) : FINAL_THREADS;
        for (int i = threadIdx.x; i < 2 * C_out; i += FINAL_THREADS) {   // S_c (i = c) or Q_c (i = C_out + c)
            const int kind = i / C_out, c = i % C_out;
            double v = sums[i];
            for (int r = 0; r < n; ++r)
                v += partials[(run_first[r] * n_chunks + c / CO_CHUNK) * N_STATS + kind * CO_CHUNK + c % CO_CHUNK];
            sums[i] = v;
        }
    }
    __syncthreads();
    const int cpg = C_out / groups;
    const double n_group = n_per_channel * cpg;
    for (int c = threadIdx.x; c < C_out; c += FINAL_THREADS) {
        const int g0 = (c / cpg) * cpg;
        double s = 0.0, q = 0.0;
        for (int j = g0; j < g0 + cpg; ++j) {   // with the bias: sum (v + b) and sum (v + b)^2
            const double bj = exact_in_tf32<T>() || bias == nullptr ? 0.0 : to_float(bias[j]);
            s += sums[j] + n_per_channel * bj;
            q += sums[C_out + j] + bj * (2.0 * sums[j] + n_per_channel * bj);
        }
        const double mu = s / n_group;
        const double rstd = 1.0 / sqrt(fmax(q / n_group - mu * mu, 0.0) + eps);
        const double mean_c = sums[c] / n_per_channel + (exact_in_tf32<T>() || bias == nullptr ? 0.0 : to_float(bias[c]));
        if (std::is_same<TO, float>::value) {
            sums[2 * C_out + c] = to_float(gn_weight[c]) * (mean_c - mu) * rstd + to_float(gn_bias[c]);
        } else {   // the mean of GroupNorm's a y + b (its rounding per element averages out over the mean)
            const float2 ab = half_gn_affine<TO>(mu, rstd, to_float(gn_weight[c]), to_float(gn_bias[c]));
            sums[2 * C_out + c] = ab.x * mean_c + ab.y;
        }
        double* st = stats + (size_t)b * (C_out + 2 * groups);
        st[c] = mean_c;
        if (c % cpg == 0) { st[C_out + c / cpg] = mu; st[C_out + groups + c / cpg] = rstd; }
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        double total = 0.0;
        for (int c = 0; c < C_out; ++c) total += sums[2 * C_out + c];
        out[b] = from_float<TO>((float)(total / C_out));
    }
}

// Backward. Given each group's statistics the output is affine in each channel's conv outputs:
//     dL/dy[b, c, s] = g_b / C * (A_c + B_g (y[b, c, s] - mu_g)),
//     A_c = rstd_g (gamma_c / N - sum_{c' in g} gamma_c' / (N cpg)),
//     B_g = -rstd_g^3 / (N cpg) * sum_{c' in g} gamma_c' (mean_c' - mu_g),
// with N the positions per channel and cpg the channels per group; dL/dgamma_c = sum_b g_b / C (mean_c - mu_g)
// rstd_g, dL/dbeta_c = sum_b g_b / C, and the conv bias's dL/dbias_c = sum_b sum_s dL/dy = sum_b g_b / C N
// (A_c + B_g (mean_c - mu_g)) (mean_c: the mean of y over its N positions). One block per sample forms
// (g_b / C A_c, g_b / C B_g, mu_g) per channel and the per-sample terms of those three; conv_gn_stats_kernel<GRAD>
// recomputes y and writes dL/dy; gn_param_grad_kernel adds the terms over the batch in a fixed order.
template <typename TO>
__global__ void __launch_bounds__(FINAL_THREADS) gn_mean_backward_coef_kernel(
    const TO* __restrict__ grad_out,      // (B)
    const double* __restrict__ stats,     // (B, C_out + 2 groups), from the forward
    const TO* __restrict__ gn_weight,     // (C_out)
    float* __restrict__ coef,             // (B, C_out, 3)
    double* __restrict__ param_terms,     // (B, 3 C_out): dgamma, dbeta, dbias terms
    int C_out, int groups, double n_per_channel)
{
    const int b = blockIdx.x, cpg = C_out / groups;
    const double* st = stats + (size_t)b * (C_out + 2 * groups);
    const double gb = (double)to_float(grad_out[b]) / C_out, n_group = n_per_channel * cpg;
    for (int c = threadIdx.x; c < C_out; c += FINAL_THREADS) {
        const int grp = c / cpg;
        const double mu = st[C_out + grp], rstd = st[C_out + groups + grp];
        double gamma_sum = 0.0, spread = 0.0;
        for (int j = grp * cpg; j < (grp + 1) * cpg; ++j) {
            gamma_sum += to_float(gn_weight[j]);
            spread += to_float(gn_weight[j]) * (st[j] - mu);
        }
        float* cf = coef + ((size_t)b * C_out + c) * 3;
        const double a = gb * rstd * (to_float(gn_weight[c]) / n_per_channel - gamma_sum / n_group);
        const double slope = -gb * rstd * rstd * rstd * spread / n_group;
        cf[0] = (float)a;
        cf[1] = (float)slope;
        cf[2] = (float)mu;
        double* terms = param_terms + (size_t)b * 3 * C_out;
        terms[c] = gb * (st[c] - mu) * rstd;
        terms[C_out + c] = gb;
        terms[2 * C_out + c] = n_per_channel * (a + slope * (st[c] - mu));
    }
}

// ---- The tiled path (float32, fewer than 8 input channels, outside the tuned envelope: any kernel size per axis):
// the conv on the CUDA cores, its sums kept in registers, forward and backward.
struct Kernel3 { int d, h, w; };

// The tiled path's tiles (the forward's statistics where input channels are few, dL/dy, and dL/dx's flipped
// conv): a block takes TILE_H x TILE_W output
// positions of one output depth od of one sample (PIX a thread: rows ty, ty + ROW_STEP, ...) and CO_T output
// channels at a time (PIX x CO_T accumulators a thread). Per input depth od + kd and chunk of ci_t input channels it
// stages the rows the tile reads and the chunk's weights of that depth (transposed to [ci][kh][kw][co], so a tap's
// CO_T weights are four broadcast float4 loads) in shared memory; a tap is then PIX input loads and PIX x CO_T
// multiply-adds, in fp32, summed over (ci chunk, kd, ci, kh, kw). conv_stats_general_kernel writes each channel's
// sum and sum of squares over the tile (the conv without its bias: the finalize adds it) in double, in a fixed
// order, to partials (B, C_out, tiles, 2). Dynamic shared memory: ci_t (rows + weights) floats. Float32 only (the
// plan takes PyTorch's conv for half precision off the tuned envelope).
constexpr int GEN_THREADS = 256, TILE_W = 32, CO_T = 16, PIX = 2, ROW_STEP = GEN_THREADS / TILE_W;
constexpr int TILE_H = PIX * ROW_STEP;
static_assert(2 * CO_T == 32, "a channel's two sums a lane");

struct TileConv3 {
    int C_in, C_out, D, H, W, ci_t;
    Kernel3 k;
    int co_t = CO_T;     // output channels at a time (tile_conv3's COT)
    int th = TILE_H;     // the tile's rows (tile_conv3's PIXT ROW_STEP)
    __host__ __device__ int rows() const { return th + k.h - 1; }
    __host__ __device__ int cols() const { return TILE_W + k.w - 1; }
    __host__ __device__ int in_floats() const { return (rows() * cols() + 3) / 4 * 4; }   // a channel's, 16-byte aligned
    __host__ __device__ int w_floats() const { return k.h * k.w * co_t; }               // a channel's at one kd
    __host__ __device__ int tiles_w() const { return (W - k.w + 1 + TILE_W - 1) / TILE_W; }
    __host__ __device__ int tiles_hw() const { return (H - k.h + 1 + th - 1) / th * tiles_w(); }
    __host__ __device__ int tiles() const { return (D - k.d + 1) * tiles_hw(); }
    size_t smem_bytes() const { return (size_t)ci_t * (in_floats() + w_floats()) * sizeof(float); }
};

// The warp's sums of 32 values at once, lane l ending with value l's in v[0]: each of five steps halves the values
// a lane holds (it keeps the half its lane bit selects and adds its partner's), 31 shuffles, a fixed order.
template <int HALF = 16>
__device__ __forceinline__ void warp_sum_transposed(double (&v)[32]) {
    const bool upper = threadIdx.x & HALF;
#pragma unroll
    for (int i = 0; i < HALF; ++i) {
        const double keep = upper ? v[i + HALF] : v[i], give = upper ? v[i] : v[i + HALF];
        v[i] = keep + __shfl_xor_sync(0xffffffffu, give, HALF);
    }
    if constexpr (HALF > 1) warp_sum_transposed<HALF / 2>(v);
}

// acc[p][i] = the conv (no bias) of output channel co0 + i at this thread's position p, (od, oh0 + ty + p ROW_STEP,
// ow0 + tx), of sample b, summed over (ci chunk, kd, ci, kh, kw); in_s and w_s: the block's staging (t.smem_bytes()).
// FLIP (dL/dx from dL/dy): the conv's transpose, a conv of `x` (here dL/dy, t.C_in = the model's C_out channels,
// t.D x t.H x t.W its size) padded by k - 1 with the weights flipped and their channels swapped (t.C_out = the
// model's C_in). COT (= t.co_t) output channels at a time: 4 or 8 for few of them, PIXT (t.th = PIXT ROW_STEP) rows.
template <typename T, bool FLIP = false, int COT = CO_T, int PIXT = PIX>
__device__ __forceinline__ void tile_conv3(const TileConv3& t, const T* __restrict__ x, const T* __restrict__ weight,
                                           long long b, int od, int oh0, int ow0, int co0, float* in_s, float* w_s,
                                           float (&acc)[PIXT][COT])
{
    const int ty = threadIdx.x / TILE_W, tx = threadIdx.x % TILE_W, lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int rows = t.rows(), cols = t.cols(), taps2 = t.k.h * t.k.w, taps3 = t.k.d * taps2;
    const int j = threadIdx.x % COT, co = co0 + j;   // the weights: a thread per output channel of a tap
#pragma unroll
    for (int p = 0; p < PIXT; ++p)
#pragma unroll
        for (int i = 0; i < COT; ++i) acc[p][i] = 0.f;
    for (int ci0 = 0; ci0 < t.C_in; ci0 += t.ci_t) {
        const int nci = min(t.ci_t, t.C_in - ci0);
        for (int kd = 0; kd < t.k.d; ++kd) {
            const int id = od + kd - (FLIP ? t.k.d - 1 : 0);
            if (FLIP && (id < 0 || id >= t.D)) continue;   // the padding: no products (uniform across the block)
            __syncthreads();
            for (int ci = 0; ci < nci; ++ci) {   // a warp per input row, lanes along it
                const T* xc = x + (((size_t)b * t.C_in + ci0 + ci) * t.D + id) * t.H * t.W;
                for (int r = warp; r < rows; r += GEN_THREADS / 32) {
                    const int ih = oh0 + r - (FLIP ? t.k.h - 1 : 0);
                    for (int col = lane; col < cols; col += 32) {
                        const int iw = ow0 + col - (FLIP ? t.k.w - 1 : 0);
                        const bool in = (!FLIP || (ih >= 0 && iw >= 0)) && ih < t.H && iw < t.W;
                        in_s[ci * t.in_floats() + r * cols + col] = in ? load_float(xc + (size_t)ih * t.W + iw) : 0.f;
                    }
                }
            }
            if (FLIP) {   // w_s[(ci taps2 + tap) COT + j] = weight[ci0 + ci][co][k.d - 1 - kd][taps2 - 1 - tap]
                for (int ct = threadIdx.x / COT; ct < nci * taps2; ct += GEN_THREADS / COT)
                    w_s[ct * COT + j] = co < t.C_out ? load_float(weight + ((size_t)(ci0 + ct / taps2) * t.C_out + co) * taps3
                                                                 + (size_t)(t.k.d - 1 - kd) * taps2 + taps2 - 1 - ct % taps2)
                                                     : 0.f;
            } else {      // w_s[(ci taps2 + tap) COT + j] = weight[co][ci0 + ci][kd][tap]
                const T* wc = weight + ((size_t)co * t.C_in + ci0) * taps3 + (size_t)kd * taps2;
                for (int ct = threadIdx.x / COT; ct < nci * taps2; ct += GEN_THREADS / COT)
                    w_s[ct * COT + j] = co < t.C_out ? load_float(wc + (size_t)(ct / taps2) * taps3 + ct % taps2) : 0.f;
            }
            __syncthreads();
            for (int ci = 0; ci < nci; ++ci) {
                const float* in_r = in_s + ci * t.in_floats() + ty * cols + tx;
                const float4* w4 = reinterpret_cast<const float4*>(w_s + (size_t)ci * taps2 * COT);
                for (int kh = 0; kh < t.k.h; ++kh, in_r += cols) {
#pragma unroll 4
                    for (int kw = 0; kw < t.k.w; ++kw, w4 += COT / 4) {
                        float v[PIXT];
#pragma unroll
                        for (int p = 0; p < PIXT; ++p) v[p] = in_r[p * ROW_STEP * cols + kw];
#pragma unroll
                        for (int q = 0; q < COT / 4; ++q) {
                            const float4 w = w4[q];
#pragma unroll
                            for (int p = 0; p < PIXT; ++p) {
                                acc[p][4 * q] = fmaf(v[p], w.x, acc[p][4 * q]);
                                acc[p][4 * q + 1] = fmaf(v[p], w.y, acc[p][4 * q + 1]);
                                acc[p][4 * q + 2] = fmaf(v[p], w.z, acc[p][4 * q + 2]);
                                acc[p][4 * q + 3] = fmaf(v[p], w.w, acc[p][4 * q + 3]);
                            }
                        }
                    }
                }
            }
        }
    }
}

// Block (b tiles + tile, split): channels in chunks of CO_T from split CO_T, gridDim.y CO_T apart.
__global__ void __launch_bounds__(GEN_THREADS, 2) conv_stats_general_kernel(
    const float* __restrict__ x,          // (B, C_in, D, H, W)
    const float* __restrict__ weight,     // (C_out, C_in, kd, kh, kw)
    double* __restrict__ partials,        // (B, C_out, tiles, 2)
    TileConv3 t)
{
    extern __shared__ float4 smem4[];
    __shared__ double warp_sums[GEN_THREADS / 32][2 * CO_T];
    float* in_s = reinterpret_cast<float*>(smem4);
    float* w_s = in_s + (size_t)t.ci_t * t.in_floats();
    const int tile = (int)(blockIdx.x % t.tiles());
    const long long b = blockIdx.x / t.tiles();
    const int od = tile / t.tiles_hw(), oh0 = tile % t.tiles_hw() / t.tiles_w() * TILE_H;
    const int ow0 = tile % t.tiles_w() * TILE_W;
    const int ty = threadIdx.x / TILE_W, tx = threadIdx.x % TILE_W, lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    for (int co0 = blockIdx.y * CO_T; co0 < t.C_out; co0 += gridDim.y * CO_T) {
        float acc[PIX][CO_T];
        tile_conv3(t, x, weight, b, od, oh0, ow0, co0, in_s, w_s, acc);
        double v[2 * CO_T] = {};   // (sum, square) of each channel, the thread's positions in order
#pragma unroll
        for (int p = 0; p < PIX; ++p) {
            const bool inside = oh0 + ty + p * ROW_STEP < t.H - t.k.h + 1 && ow0 + tx < t.W - t.k.w + 1;
#pragma unroll
            for (int i = 0; i < CO_T; ++i) {
                const float y = inside && co0 + i < t.C_out ? acc[p][i] : 0.f;
                v[2 * i] += y;
                v[2 * i + 1] += (double)y * y;
            }
        }
        warp_sum_transposed(v);   // lane l: the warp's sum of value l
        warp_sums[warp][lane] = v[0];
        __syncthreads();
        if (threadIdx.x < 2 * CO_T && co0 + threadIdx.x / 2 < t.C_out) {
            double total = 0.0;
            for (int w = 0; w < GEN_THREADS / 32; ++w) total += warp_sums[w][threadIdx.x];
            partials[(((size_t)b * t.C_out + co0 + threadIdx.x / 2) * t.tiles() + tile) * 2 + threadIdx.x % 2] = total;
        }
    }
}

// dL/dy on the tiled path, tiled as conv_stats_general_kernel (block b tiles + tile, chunk blockIdx.y of CO_T
// output channels): y recomputed by tile_conv3, then dL/dy = A + B (y - mu) from coef, as the tuned path writes it.
__global__ void __launch_bounds__(GEN_THREADS, 2) conv_grad_y_general_kernel(
    const float* __restrict__ x,          // (B, C_in, D, H, W)
    const float* __restrict__ weight,     // (C_out, C_in, kd, kh, kw)
    const float* __restrict__ bias,       // (C_out)
    const float* __restrict__ coef,       // (B, C_out, 3)
    float* __restrict__ grad_y,           // (B, C_out, Do, Ho, Wo)
    TileConv3 t)
{
    extern __shared__ float4 smem4[];
    float* in_s = reinterpret_cast<float*>(smem4);
    float* w_s = in_s + (size_t)t.ci_t * t.in_floats();
    const int tile = (int)(blockIdx.x % t.tiles()), co0 = blockIdx.y * CO_T;
    const long long b = blockIdx.x / t.tiles();
    const int od = tile / t.tiles_hw(), oh0 = tile % t.tiles_hw() / t.tiles_w() * TILE_H;
    const int ow0 = tile % t.tiles_w() * TILE_W;
    const int Ho = t.H - t.k.h + 1, Wo = t.W - t.k.w + 1;
    const int oh = oh0 + threadIdx.x / TILE_W, ow = ow0 + threadIdx.x % TILE_W;
    float acc[PIX][CO_T];
    tile_conv3(t, x, weight, b, od, oh0, ow0, co0, in_s, w_s, acc);
    const long long S = (long long)(t.D - t.k.d + 1) * Ho * Wo;
#pragma unroll
    for (int p = 0; p < PIX; ++p) {
        if (oh + p * ROW_STEP >= Ho || ow >= Wo) break;
        const long long s = ((long long)od * Ho + oh + p * ROW_STEP) * Wo + ow;
#pragma unroll
        for (int j = 0; j < CO_T; ++j) {
            const int c = co0 + j;
            if (c >= t.C_out) break;
            const float* cf = coef + ((size_t)b * t.C_out + c) * 3;
            const float y = acc[p][j] + bias[c];
            grad_y[((size_t)b * t.C_out + c) * S + s] = cf[0] + cf[1] * (y - cf[2]);
        }
    }
}


// ---- The PyTorch-conv path (conv3d_groupnorm_mean_path's TORCH_CONV): PyTorch's own
// convolution writes y, the conv and its bias in the input's dtype (eager's bits), and these two kernels read it.
// conv_sums_kernel: block (plane (b, c), chunk of SUM_CHUNK positions): the chunk's sum of y and of y^2 (double,
// a fixed order) into partials (B, C_out, chunks, 2), as gn_mean_finalize_kernel reads them.
constexpr int SUM_CHUNK = 8192, SUM_THREADS = 256;
template <typename T>
__global__ void __launch_bounds__(SUM_THREADS) conv_sums_kernel(
    const T* __restrict__ y,           // (B, C_out, S), contiguous
    double* __restrict__ partials,     // (B, C_out, chunks, 2)
    long long S, int chunks)
{
    __shared__ double warp_sums[SUM_THREADS / 32][2];
    const long long plane = blockIdx.x / chunks;
    const int chunk = (int)(blockIdx.x % chunks);
    const T* row = y + plane * S;
    double s = 0.0, q = 0.0;
    const long long end = min(S, (long long)(chunk + 1) * SUM_CHUNK);
    for (long long i = (long long)chunk * SUM_CHUNK + threadIdx.x; i < end; i += SUM_THREADS) {
        const double v = to_float(row[i]);
        s += v;
        q += v * v;
    }
#pragma unroll
    for (int off = 16; off > 0; off /= 2) {
        s += __shfl_xor_sync(0xffffffffu, s, off);
        q += __shfl_xor_sync(0xffffffffu, q, off);
    }
    if (threadIdx.x % 32 == 0) { warp_sums[threadIdx.x / 32][0] = s; warp_sums[threadIdx.x / 32][1] = q; }
    __syncthreads();
    if (threadIdx.x < 2) {
        double v = 0.0;
        for (int w = 0; w < SUM_THREADS / 32; ++w) v += warp_sums[w][threadIdx.x];
        partials[(plane * chunks + chunk) * 2 + threadIdx.x] = v;
    }
}

// The PyTorch-conv path's dL/dy = coef_0 + coef_1 (y - coef_2) per element, in y's dtype (PyTorch's convolution
// backward reads it so; half precision: rounded once, as PyTorch's half GroupNorm backward rounds its output).
template <typename T>
__global__ void grad_y_from_conv_kernel(
    const T* __restrict__ y,           // (B, C_out, S)
    const float* __restrict__ coef,    // (B, C_out, 3)
    T* __restrict__ grad_y,            // (B, C_out, S)
    long long S, long long n)
{
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        const float* cf = coef + i / S * 3;
        grad_y[i] = from_float<T>(fmaf(cf[1], to_float(y[i]) - cf[2], cf[0]));
    }
}

// dgamma, dbeta and the conv bias's gradient: the per-sample terms added over the batch in a fixed order.
template <typename T, typename TO>
__global__ void gn_param_grad_kernel(const double* __restrict__ param_terms,  // (B, 3C)
                                     TO* __restrict__ grad_gn_weight,         // (C)
                                     TO* __restrict__ grad_gn_bias,           // (C)
                                     T* __restrict__ grad_bias,               // (C), or null: not wanted
                                     int B, int C)
{
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= 3 * C || (c >= 2 * C && grad_bias == nullptr)) return;
    double v = 0.0;
    for (int b = 0; b < B; ++b) v += param_terms[(size_t)b * 3 * C + c];
    if (c < C) grad_gn_weight[c] = from_float<TO>((float)v);
    else if (c < 2 * C) grad_gn_bias[c - C] = from_float<TO>((float)v);
    else grad_bias[c - 2 * C] = from_float<T>((float)v);
}

// ---- The conv's own gradients, from dL/dy in float32 (B, C_out, Do, Ho, Wo) and the input and weights in
// float32 (half precision: float copies, exact): dL/dx and dL/dW. Every sum in a fixed order.
struct GradDims { int B, C_in, C_out, D, H, W, Do, Ho, Wo; };

using TcDims = GradDims;
// shared: tc_grad_3d begin
// TcDims: the file's dims type (B, C_in, C_out, D, H, W, Do, Ho, Wo), named before this block; the split_tf32
// block (split, operand, mma) before it too. The conv's gradients on the tensor cores for the 3-D files' tuned
// paths (kernel K, rows of at most 32 columns), from dL/dy in float32 and the input and weights in float32.

// dL/dx on the tensor cores (mma.sync m16n8k8, split TF32), kernel K <= 4, W <= 32, C_in <= 4: per input row
// (b, id, ih) the transposed conv as a GEMM, rows = output columns ow (32: two 16-row tiles), columns = (kw, ci)
// (16: two 8-column tiles), depth = the row's valid taps (kd, kh) x output channels; then
// grad_x[iw] = sum_kw C[iw - kw][kw, ci]. The
// weights of every (kd, kh, chunk of 8 output channels) step, split, sit in shared memory. A warp takes GI_ROWS
// neighbouring input rows ih0 + r at once: a step is one dL/dy row (kd, oh) and 8 channels, loaded once and
// multiplied into row r's C with the weights of kh = ih0 + r - oh wherever that is a tap; rows outside dL/dy
// are never visited (a warp-uniform step count). Lane (g, t) loads rows ow = g + 8r + 16i (tile i) of channels
// t and t + 4; columns past Wo read on into the next row (grad_y has a GI_TAIL-float tail) and their C rows are
// never used. The step after next's loads fly during a step's products. A block takes a contiguous range of all
// samples' row groups.
constexpr int GI_MAX_STEPS = 32;
constexpr int GI_WARPS = 4;
constexpr int GI_ROWS = 2;    // input rows a warp takes
constexpr int GI_TAIL = 32;   // floats after grad_y that the last row's columns past Wo may read

template <int K, bool TF32>   // TF32: one TF32 product a step (operand), else split TF32
__global__ void __launch_bounds__(32 * GI_WARPS) grad_input_tc_kernel(
    const float* __restrict__ grad_y,     // (B, C_out, Do, Ho, Wo), then GI_TAIL floats
    const float* __restrict__ weight,     // (C_out, C_in, K, K, K)
    float* __restrict__ grad_x,           // (B, C_in, D, H, W)
    TcDims d)
{
    __shared__ uint2 w_s[GI_MAX_STEPS][2][2][32];   // [(kd, kh, chunk)][big, small][n-tile][lane]: (b0, b1)
    __shared__ float c_s[GI_WARPS][32][17];         // a warp's C, [ow][kw * 4 + ci]
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const int chunks = (d.C_out + 7) / 8;
    for (int i = threadIdx.x; i < K * K * chunks * 128; i += blockDim.x) {
        const int l = i % 32, j = i / 32 % 2, part = i / 64 % 2, st = i / 128;
        const int n = 8 * j + l / 4, kw = n / 4, ci = n % 4, kd = st / chunks / K, kh = st / chunks % K;
        float v[2];
        for (int h = 0; h < 2; ++h) {
            const int co = st % chunks * 8 + l % 4 + 4 * h;
            v[h] = co < d.C_out && kw < K && ci < d.C_in
                       ? weight[((((size_t)co * d.C_in + ci) * K + kd) * K + kh) * K + kw] : 0.f;
        }
        const Split s0 = operand<TF32>(v[0]), s1 = operand<TF32>(v[1]);
        w_s[st][part][j][l] = part == 0 ? make_uint2(s0.big, s1.big) : make_uint2(s0.small, s1.small);
    }
    __syncthreads();
    const int row_groups = (d.H + GI_ROWS - 1) / GI_ROWS;   // per (sample, id)
    const long long groups = (long long)d.B * d.D * row_groups;
    const long long g0 = blockIdx.x * groups / gridDim.x, g1 = (blockIdx.x + 1) * groups / gridDim.x;
    const size_t out_plane = (size_t)d.Do * d.Ho * d.Wo, chunk_stride = 8 * out_plane;
    long long b = (g0 + warp) / ((long long)d.D * row_groups);   // the warp's first group (b, id, gh); then GI_WARPS on
    int id = (int)((g0 + warp) / row_groups % d.D), gh = (int)((g0 + warp) % row_groups);
#pragma unroll 1
    for (long long grp = g0 + warp; grp < g1; grp += GI_WARPS) {
        const int ih0 = gh * GI_ROWS, kd0 = max(0, id - d.Do + 1), oh0 = max(0, ih0 - K + 1);
        const int oh1 = min(d.Ho - 1, ih0 + GI_ROWS - 1);
        const int steps = (min(K - 1, id) - kd0 + 1) * (oh1 - oh0 + 1) * chunks;
        const float* lane_gy = grad_y + ((size_t)b * d.C_out + t) * out_plane + g;
        int c = 0, kd = kd0, oh = oh0;   // the next load's chunk and dL/dy row
        // A values of a step: [i][r] row g + 8r + 16i of channel 8c + t, [i][r + 2] of channel 8c + t + 4;
        // channels past C_out read grad_y's start and are zeroed. tap: (weights index of (kd, kh = 0, c),
        // ih0 - oh: the group's row r takes this step with kh = ih0 - oh + r where that is a tap).
        const auto load = [&](float (&a)[2][4], int2& tap) {
            const float* p = lane_gy + c * chunk_stride + ((size_t)(id - kd) * d.Ho + oh) * d.Wo;
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const bool ok = 8 * c + t + 4 * h < d.C_out;
                const float* q = ok ? p + 4 * h * out_plane : grad_y;
#pragma unroll
                for (int i = 0; i < 2; ++i)
#pragma unroll
                    for (int r = 0; r < 2; ++r) {
                        const float v = __ldg(q + 16 * i + 8 * r);
                        a[i][2 * h + r] = ok ? v : 0.f;
                    }
            }
            tap = make_int2(kd * K * chunks + c, ih0 - oh);
            if (++c == chunks) {
                c = 0;
                if (++oh > oh1) { oh = oh0; ++kd; }
            }
        };
        float raw[2][2][4];
        int2 tap_at[2];
        load(raw[0], tap_at[0]);
        if (steps > 1) load(raw[1], tap_at[1]);
        float acc[GI_ROWS][2][2][4] = {};   // [row of the group][row tile i][column tile j]
        const auto step = [&](int st, float (&a)[2][4], int2& tap) {
            uint32_t big[2][4], small[2][4];
#pragma unroll
            for (int i = 0; i < 2; ++i)
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const Split v = operand<TF32>(a[i][e]);
                    big[i][e] = v.big;
                    small[i][e] = v.small;
                }
            const int2 tp = tap;
            if (st + 2 < steps) load(a, tap);
#pragma unroll
            for (int r = 0; r < GI_ROWS; ++r) {
                const int kh = tp.y + r;
                if (kh < 0 || kh >= K || ih0 + r >= d.H) continue;
                const int ws = tp.x + kh * chunks;
#pragma unroll
                for (int j = 0; j < 2; ++j) {
                    const uint2 wb = w_s[ws][0][j][lane], wsm = w_s[ws][1][j][lane];
#pragma unroll
                    for (int i = 0; i < 2; ++i) {
                        if (!TF32) {
                            mma(acc[r][i][j], small[i], wb.x, wb.y);
                            mma(acc[r][i][j], big[i], wsm.x, wsm.y);
                        }
                        mma(acc[r][i][j], big[i], wb.x, wb.y);
                    }
                }
            }
        };
#pragma unroll 1
        for (int st = 0; st < steps; st += 2) {
            step(st, raw[0], tap_at[0]);
            if (st + 1 < steps) step(st + 1, raw[1], tap_at[1]);
        }
#pragma unroll
        for (int r = 0; r < GI_ROWS; ++r) {
            if (ih0 + r >= d.H) break;
            // C rows g + 16i (c0, c1) and g + 8 + 16i (c2, c3), columns 8j + 2t + e.
#pragma unroll
            for (int i = 0; i < 2; ++i)
#pragma unroll
                for (int j = 0; j < 2; ++j)
#pragma unroll
                    for (int e = 0; e < 4; ++e)
                        c_s[warp][16 * i + 8 * (e / 2) + g][8 * j + 2 * t + e % 2] = acc[r][i][j][e];
            __syncwarp();
            if (lane < d.W)
                for (int ci = 0; ci < d.C_in; ++ci) {
                    float v = 0.f;
#pragma unroll
                    for (int kw = 0; kw < K; ++kw)
                        if (lane >= kw && lane - kw < d.Wo) v += c_s[warp][lane - kw][kw * 4 + ci];
                    grad_x[(((size_t)b * d.C_in + ci) * d.D + id) * d.H * d.W + (size_t)(ih0 + r) * d.W + lane] = v;
                }
            __syncwarp();
        }
        for (gh += GI_WARPS; gh >= row_groups; gh -= row_groups)
            if (++id == d.D) { id = 0; ++b; }
    }
}

// dL/dW on the tensor cores (split TF32), kernel K, W <= 32 and a multiple of 4, C_in K^2 <= 64: per output row
// (b, od, oh) and depth k = (ci, kd, kh), with X_k the input row x[b, ci, od + kd, oh + kh, :],
//   dW[co][k][kw] += sum_iw dL/dy[co][iw - kw] X_k[iw]   (dL/dy zero outside [0, Wo)),
// for each kw a GEMM (m16n8k8): rows = a chunk's 16 output channels (A: dL/dy shifted by kw), columns = depths
// k, reduction over the 32 input columns. The reduction's order is free, so lane t takes iw = 8t .. 8t + 7 (two
// 16-byte loads per depth): at step s its depths t, t + 4 are iw = 8t + 2s and 8t + 2s + 1; columns past W are
// clamped and meet only zero dL/dy (iw >= W means ow = iw - kw >= Wo). A lane loads dL/dy of its channels g,
// g + 8 at columns 8t .. 8t + 7, and the 3 before from lane t - 1, so that every shifted A fragment is a
// register. A warp: one row at a time, 16 depths (grp) and all kw; a block: WGT_RPB rows at a time (warp /
// groups) x all depth groups (warp % groups), over a contiguous range of the rows of all samples; grid y: chunks
// of 16 output channels. A row's products add up in the tensor cores, then into fp32 totals (round to nearest:
// the tensor cores' own additions truncate, which over thousands of rows would bias the sum); at the end the
// block's warps of a depth group add their totals in order (double) into its partials
// (blocks, chunks, groups, WGT_CO, WGT_DEPTHS, K).
constexpr int WGT_CO = 16;                    // output channels a chunk
constexpr int WGT_TILES = 2;                  // 8-column tiles (depths) per warp
constexpr int WGT_DEPTHS = 8 * WGT_TILES;
constexpr int WGT_RPB = 2;                    // rows a block takes at a time
constexpr int WGT_MAX_GROUPS = 4;             // depth C_in K^2 <= 64
__host__ __device__ inline int wgt_groups(int depth) { return (depth + WGT_DEPTHS - 1) / WGT_DEPTHS; }

template <int K, bool TF32>   // TF32: one TF32 product a step (operand), else split TF32
__global__ void __launch_bounds__(32 * WGT_RPB * WGT_MAX_GROUPS) grad_weight_tc_kernel(
    const float* __restrict__ grad_y,     // (B, C_out, Do, Ho, Wo)
    const float* __restrict__ x,          // (B, C_in, D, H, W), 16-byte aligned
    double* __restrict__ partials, TcDims d)
{
    __shared__ double sums[WGT_MAX_GROUPS * WGT_CO * WGT_DEPTHS * K];   // [grp][co][k][kw]
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const int depth = d.C_in * K * K, groups = wgt_groups(depth), rr = warp / groups, grp = warp % groups;
    const int co0 = blockIdx.y * WGT_CO, rows_ps = d.Do * d.Ho;
    const long long rows = (long long)d.B * rows_ps;
    const long long r0 = blockIdx.x * rows / gridDim.x, r1 = (blockIdx.x + 1) * rows / gridDim.x;
    unsigned tap[WGT_TILES];   // input offsets of this lane's depths grp * 16 + 8j + g (padding: 0)
#pragma unroll
    for (int j = 0; j < WGT_TILES; ++j) {
        const int k = grp * WGT_DEPTHS + 8 * j + g;
        tap[j] = k < depth ? ((k / (K * K) * d.D + k / K % K) * d.H + k % K) * d.W : 0u;
    }
    float total[K][WGT_TILES][4] = {};
#pragma unroll 1
    for (long long row = r0 + rr; row < r1; row += WGT_RPB) {
        float acc[K][WGT_TILES][4] = {};
        const long long b = row / rows_ps;
        const int rw = (int)(row % rows_ps), od = rw / d.Ho, oh = rw % d.Ho;
        const float* xr = x + (((size_t)b * d.C_in * d.D + od) * d.H + oh) * d.W;
        float4 xv[WGT_TILES][2];
#pragma unroll
        for (int j = 0; j < WGT_TILES; ++j) {
            xv[j][0] = __ldg(reinterpret_cast<const float4*>(xr + tap[j] + min(8 * t, d.W - 4)));
            xv[j][1] = __ldg(reinterpret_cast<const float4*>(xr + tap[j] + min(8 * t + 4, d.W - 4)));
        }
        // G[h][3 + m] = dL/dy[co0 + g + 8h][ow = 8t + m], m = -3 .. 7 (zero outside the row and past C_out).
        float G[2][11];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int co = co0 + g + 8 * h;
            const float* gr = grad_y + ((size_t)b * d.C_out + min(co, d.C_out - 1)) * rows_ps * d.Wo + (size_t)rw * d.Wo;
#pragma unroll
            for (int m = 0; m < 8; ++m)
                G[h][3 + m] = co < d.C_out && 8 * t + m < d.Wo ? __ldg(gr + 8 * t + m) : 0.f;
#pragma unroll
            for (int m = 0; m < 3; ++m) {
                const float v = __shfl_up_sync(0xffffffffu, G[h][8 + m], 1);   // lane t - 1's columns 5 .. 7
                G[h][m] = t > 0 ? v : 0.f;
            }
        }
        uint32_t gb[2][11], gs[2][11];
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
            for (int m = 0; m < 11; ++m) {
                const Split v = operand<TF32>(G[h][m]);
                gb[h][m] = v.big;
                gs[h][m] = v.small;
            }
#pragma unroll
        for (int s = 0; s < 4; ++s) {
            uint32_t xb[WGT_TILES][2], xsm[WGT_TILES][2];
#pragma unroll
            for (int j = 0; j < WGT_TILES; ++j) {
                const float4 v = xv[j][s / 2];
                const Split p0 = operand<TF32>(s % 2 ? v.z : v.x), p1 = operand<TF32>(s % 2 ? v.w : v.y);
                xb[j][0] = p0.big; xsm[j][0] = p0.small;
                xb[j][1] = p1.big; xsm[j][1] = p1.small;
            }
#pragma unroll
            for (int kw = 0; kw < K; ++kw) {
                const int m = 3 + 2 * s - kw;   // a = dL/dy[g, g + 8][8t + 2s - kw (+ 1)]
                const uint32_t ab[4] = {gb[0][m], gb[1][m], gb[0][m + 1], gb[1][m + 1]};
                const uint32_t as[4] = {gs[0][m], gs[1][m], gs[0][m + 1], gs[1][m + 1]};
#pragma unroll
                for (int j = 0; j < WGT_TILES; ++j) {
                    if (!TF32) {
                        mma(acc[kw][j], as, xb[j][0], xb[j][1]);
                        mma(acc[kw][j], ab, xsm[j][0], xsm[j][1]);
                    }
                    mma(acc[kw][j], ab, xb[j][0], xb[j][1]);
                }
            }
        }
#pragma unroll
        for (int kw = 0; kw < K; ++kw)
#pragma unroll
            for (int j = 0; j < WGT_TILES; ++j)
#pragma unroll
                for (int e = 0; e < 4; ++e) total[kw][j][e] += acc[kw][j][e];
    }
    // The block's warps of each depth group add their sums in order; c[e]: co = g + 8 (e / 2), k = 8j + 2t + e % 2.
    for (int q = 0; q < WGT_RPB; ++q) {
        if (rr == q)
#pragma unroll
            for (int kw = 0; kw < K; ++kw)
#pragma unroll
                for (int j = 0; j < WGT_TILES; ++j)
#pragma unroll
                    for (int e = 0; e < 4; ++e) {
                        double& v = sums[((grp * WGT_CO + g + 8 * (e / 2)) * WGT_DEPTHS + 8 * j + 2 * t + e % 2) * K + kw];
                        v = (q == 0 ? 0.0 : v) + total[kw][j][e];
                    }
        __syncthreads();
    }
    const int n_sums = groups * WGT_CO * WGT_DEPTHS * K;
    for (int i = threadIdx.x; i < n_sums; i += blockDim.x)
        partials[((size_t)blockIdx.x * gridDim.y + blockIdx.y) * n_sums + i] = sums[i];
}

// dL/dW from grad_weight_tc_kernel's partials, a thread per weight, the blocks' partials added in order.
template <int K>
__global__ void finish_weight_grad_tc_kernel(const double* __restrict__ w_partials, float* __restrict__ grad_weight,
                                             TcDims d, int wg_blocks)
{
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const int taps = K * K * K, depth = d.C_in * K * K, chunks = (d.C_out + WGT_CO - 1) / WGT_CO;
    const int n_sums = wgt_groups(depth) * WGT_CO * WGT_DEPTHS * K;
    if (i >= (long long)d.C_out * d.C_in * taps) return;
    // weight (co, ci, kd, kh, kw) = (co, k, kw): sums[grp][co % WGT_CO][k % WGT_DEPTHS][kw] of chunk co / WGT_CO
    const int co = (int)(i / (d.C_in * taps)), r = (int)(i % (d.C_in * taps)), k = r / K, kw = r % K;
    const int slot = (((k / WGT_DEPTHS) * WGT_CO + co % WGT_CO) * WGT_DEPTHS + k % WGT_DEPTHS) * K + kw;
    double v = 0.0;
    for (int blk = 0; blk < wg_blocks; ++blk) v += w_partials[((size_t)blk * chunks + co / WGT_CO) * n_sums + slot];
    grad_weight[i] = (float)v;
}
// shared: tc_grad_3d end

// shared: stream_dx_3d begin
// TcDims and the split_tf32 block before this one (as for tc_grad_3d).
// dL/dx streamed (TF32 or split TF32, kernel K <= 4, W <= 32, C_in <= 3, C_out <= 32): a block takes one sample and
// walks its dL/dy planes od in order. Per dL/dy row (od, oh) a warp forms
// C[ow][kw, m] = sum_co dL/dy[co][ow] w[co][m][kw], m = (kd, kh, ci): rows = the row's columns (tile i holds
// ow = 4g + 2i and 4g + 2i + 1, the forward's order), columns = (kw, m) kw-major, m padded to MT 8-column tiles,
// depth = output channels (8 a step). Each dL/dy value is loaded once and meets every tap (grad_input_tc_kernel
// loads it once per (kd, kh)). Then dx[iw][m] = sum_kw C[iw - kw][kw, m] in registers (the rows before 4g from
// lane g - 1), added to input row (od + kd, oh + kh) in shared memory: a ring of K input planes. A round's warps
// take rows K apart, whose targets are disjoint, and rounds are separated by barriers, so each input element's
// additions come in a fixed order (od, oh, then kw). A plane done (id = od) is written out and its slot cleared.
// Warps: two a row (each half of the m tiles), gs_warps(K) / 2 rows a round: 10 for kernel 3 (Ho = 30 at problem
// 23's benchmark: three classes of 10 rows), 8 for kernel 4 (its 96 accumulators a lane cap the block at 16 warps).
constexpr int GS_MAX_CHUNKS = 4;   // C_out <= 32
constexpr int GS_RS = 33;          // the ring's row stride (floats)
__host__ __device__ constexpr int gs_warps(int K) { return K == 3 ? 20 : 16; }
template <int K> constexpr int GS_THREADS = 32 * gs_warps(K);
__host__ __device__ inline int gs_m_tiles(int K, int C_in) { return (K * K * C_in + 7) / 8; }
inline size_t gs_smem_bytes(int K, const TcDims& d) {
    return (size_t)((d.C_out + 7) / 8) * 2 * K * gs_m_tiles(K, d.C_in) * 32 * sizeof(uint2) +
           (size_t)K * d.H * d.C_in * GS_RS * sizeof(float);
}
inline bool stream_input_grad(int K, const TcDims& d) {
    return (K == 3 || K == 4) && d.W <= 32 && d.C_in <= 3 && d.C_out <= 8 * GS_MAX_CHUNKS &&
           gs_smem_bytes(K, d) <= (160u << 10) && (long long)d.C_out * d.Do * d.Ho * d.Wo < (1LL << 31);
}

// P: the products a step. 1: one TF32 product (operand<true>, allow_tf32); 3: split TF32 (big x big, big x small,
// small x big); 2: split TF32 where the weights are exact in TF32 (float copies of half weights: their small parts
// are zero, so that product adds exactly nothing and is skipped; the sums' bits are those of P = 3).
template <int K, int CI, int P>   // kernel; input channels; products a step
__global__ void __launch_bounds__(GS_THREADS<K>, 1) grad_input_stream_kernel(
    const float* __restrict__ grad_y,     // (B, C_out, Do, Ho, Wo)
    const float* __restrict__ weight,     // (C_out, C_in, K, K, K)
    float* __restrict__ grad_x,           // (B, C_in, D, H, W)
    TcDims d)
{
    constexpr int GS_WARPS = gs_warps(K), GS_ROWS = GS_WARPS / 2;
    constexpr int MT = (K * K * CI + 7) / 8, NT = K * MT, M = K * K * CI, MTH = (MT + 1) / 2;
    extern __shared__ __align__(16) uint2 gs_smem[];
    const int chunks = (d.C_out + 7) / 8;
    const uint2* w_s = gs_smem;                                            // [chunk][big, small][NT][lane]
    float* ring = reinterpret_cast<float*>(gs_smem + chunks * 2 * NT * 32);  // [slot][ih][ci][GS_RS]
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const int rw = warp / 2, m0 = warp % 2 * MTH;   // the warp's row of a round, its first m tile
    for (int i = threadIdx.x; i < chunks * 2 * NT * 32; i += blockDim.x) {
        const int l = i % 32, j = i / 32 % NT, part = i / (32 * NT) % 2, c = i / (64 * NT);
        const int kw = j / MT, m = 8 * (j % MT) + l / 4;
        float v[2];
        for (int h = 0; h < 2; ++h) {
            const int co = 8 * c + l % 4 + 4 * h, ci = m % CI, kh = m / CI % K, kd = m / (K * CI);
            v[h] = co < d.C_out && m < M ? weight[((((size_t)co * CI + ci) * K + kd) * K + kh) * K + kw] : 0.f;
        }
        const Split s0 = operand<P == 1>(v[0]), s1 = operand<P == 1>(v[1]);
        gs_smem[i] = part == 0 ? make_uint2(s0.big, s1.big) : make_uint2(s0.small, s1.small);
    }
    const int ring_floats = K * d.H * CI * GS_RS;
    for (int i = threadIdx.x; i < ring_floats; i += blockDim.x) ring[i] = 0.f;
    __syncthreads();

    const int b = blockIdx.x;
    const int out_plane = d.Do * d.Ho * d.Wo;   // a sample's dL/dy is under 2^31 floats (stream_input_grad)
    const size_t in_plane = (size_t)d.H * d.W;
    const float* gy_b = grad_y + (size_t)b * d.C_out * out_plane;
    const auto write_plane = [&](int id) {   // plane id done: to grad_x, its slot cleared
        float* slot = ring + id % K * d.H * CI * GS_RS;
        for (int r = warp; r < CI * d.H; r += GS_WARPS) {   // a warp a row (ci, ih), a lane a column
            const int ci = r / d.H, ih = r % d.H;
            if (lane < d.W) {
                float& v = slot[(ih * CI + ci) * GS_RS + lane];
                grad_x[(((size_t)b * CI + ci) * d.D + id) * in_plane + (size_t)ih * d.W + lane] = v;
                v = 0.f;
            }
        }
    };
    // The rounds in order: (od, class cls of rows oh = cls + K r, the round's first r0); this warp's row
    // oh = cls + K (r0 + rw) where that is under Ho. Each load brings one 8-channel chunk of a row (the
    // lane's A values: [tile i][e], ow = 4g + 2i + e % 2, channel 8c + t + 4 (e / 2)); the next chunk, or the
    // next round's first, is loaded while this one's products run.
    int od = 0, cls = 0, r0 = 0;
    const auto rows_of = [&](int k) { return (d.Ho - k + K - 1) / K; };
    const auto load = [&](float (&a)[2][4], int l_od, int l_oh, int c) {
        const float* gy = gy_b + (l_od * d.Ho + l_oh) * d.Wo;
#pragma unroll
        for (int e = 0; e < 8; ++e) {
            const int i = e / 4, ow = 4 * g + 2 * i + e % 2, co = 8 * c + t + 4 * (e / 2 % 2);
            a[i][e % 4] = co < d.C_out && ow < d.Wo ? __ldg(gy + co * out_plane + ow) : 0.f;
        }
    };
    float a[2][4];
    if (cls + K * rw < d.Ho) load(a, od, cls + K * rw, 0);
#pragma unroll 1
    while (od < d.Do) {
        const int oh = cls + K * (r0 + rw);
        int n_od = od, n_cls = cls, n_r0 = r0 + GS_ROWS;   // the next round
        if (n_r0 >= rows_of(n_cls)) {
            n_r0 = 0;
            if (++n_cls == K) { n_cls = 0; ++n_od; }
        }
        const int n_oh = n_cls + K * (n_r0 + rw);
        const bool next = n_od < d.Do && n_oh < d.Ho;
        if (oh < d.Ho) {
            float acc[2][K][MTH][4] = {};   // [tile i][kw][m tile m0 + jj]
#pragma unroll 1
            for (int c = 0; c < chunks; ++c) {
                uint32_t big[2][4], small[2][4];
#pragma unroll
                for (int i = 0; i < 2; ++i)
#pragma unroll
                    for (int e = 0; e < 4; ++e) {
                        const Split v = operand<P == 1>(a[i][e]);
                        big[i][e] = v.big;
                        small[i][e] = v.small;
                    }
                // The next chunk's loads (or the next round's first): here, except at kernel 4 under split TF32,
                // where they go out after the small parts' products (small no longer live; measured so, though the
                // three-product form spills 264 to 288 bytes of its 96 accumulators a lane either way)
                const auto prefetch = [&] {
                    if (c + 1 < chunks) load(a, od, oh, c + 1);
                    else if (next) load(a, n_od, n_oh, 0);
                };
                if (P == 1 || K == 3) prefetch();
                // product by product over every (tile, column tile): 2 NT independent accumulators between two
                // products into the same one
                const uint2* wc = w_s + c * 2 * NT * 32 + lane;
#pragma unroll
                for (int p = P == 1 ? 2 : 0; p < 3; ++p) {
                    if (P == 2 && p == 1) continue;
                    if (P > 1 && K != 3 && p == 1 + (P == 2)) prefetch();
#pragma unroll
                    for (int kw = 0; kw < K; ++kw)
#pragma unroll
                        for (int jj = 0; jj < MTH; ++jj) {
                            if (MT % 2 != 0 && m0 + jj >= MT) continue;
                            const int j = kw * MT + m0 + jj;
                            const uint2 w = wc[(p == 1 ? NT + j : j) * 32];
#pragma unroll
                            for (int i = 0; i < 2; ++i) mma(acc[i][kw][jj], p == 0 ? small[i] : big[i], w.x, w.y);
                        }
                }
            }
            // C[4g + s][kw, m] = acc[s / 2][kw][jj][2 (s % 2) + e], m = 8 (m0 + jj) + 2t + e.
#pragma unroll
            for (int jj = 0; jj < MTH; ++jj)
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    // dx[s] = sum over kw, in order, of C[4g + s - kw][kw]: rows before 4g from lane g - 1
                    float dx[4];
#pragma unroll
                    for (int s = 0; s < 4; ++s) dx[s] = acc[s / 2][0][jj][2 * (s % 2) + e];
#pragma unroll
                    for (int kw = 1; kw < K; ++kw) {
                        float c[4];
#pragma unroll
                        for (int s = 0; s < 4; ++s) c[s] = acc[s / 2][kw][jj][2 * (s % 2) + e];
#pragma unroll
                        for (int s = 0; s < 4; ++s) {
                            if (s >= kw) {
                                dx[s] += c[s - kw];
                            } else {
                                const float p = __shfl_up_sync(0xffffffffu, c[s - kw + 4], 4);
                                dx[s] += g > 0 ? p : 0.f;
                            }
                        }
                    }
                    const int m = 8 * (m0 + jj) + 2 * t + e;
                    const int kd = m / (K * CI), kh = m / CI % K, ci = m % CI, id = od + kd;
                    if (m < M) {
                        float* row = ring + ((id % K * d.H + oh + kh) * CI + ci) * GS_RS;
#pragma unroll
                        for (int s = 0; s < 4; ++s)
                            if (4 * g + s < d.W) row[4 * g + s] += dx[s];
                    }
                }
        } else if (next) {
            load(a, n_od, n_oh, 0);
        }
        __syncthreads();
        if (n_od != od) {   // plane od has all its contributions
            write_plane(od);
            __syncthreads();
        }
        od = n_od;
        cls = n_cls;
        r0 = n_r0;
    }
    for (int id = d.Do; id < d.D; ++id) write_plane(id);
}

// grad_input_stream_kernel for kernel K: a block a sample. tf32: one TF32 product a step; else split TF32, two products
// where weight_exact (the weights are float copies of half ones), else three.
template <int K, int P> constexpr auto stream_kernel(int C_in) {
    return C_in == 1 ? grad_input_stream_kernel<K, 1, P>
                     : C_in == 2 ? grad_input_stream_kernel<K, 2, P> : grad_input_stream_kernel<K, 3, P>;
}
template <int K>
cudaError_t launch_grad_input_stream(const float* grad_y, const float* weight, float* grad_x, const TcDims& d,
                                     bool tf32, bool weight_exact, cudaStream_t stream) {
    const auto kernel = tf32 ? stream_kernel<K, 1>(d.C_in)
                             : weight_exact ? stream_kernel<K, 2>(d.C_in) : stream_kernel<K, 3>(d.C_in);
    const size_t smem = gs_smem_bytes(K, d);
    const cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    if (err != cudaSuccess) return err;
    kernel<<<d.B, GS_THREADS<K>, smem, stream>>>(grad_y, weight, grad_x, d);
    return cudaGetLastError();
}
// shared: stream_dx_3d end
__host__ __device__ inline bool tc_input_grad(const GradDims& d) {
    return d.W <= 32 && d.C_in <= 4 && K * K * ((d.C_out + 7) / 8) <= GI_MAX_STEPS;
}

// The tensor-core dL/dW's bounds (tc_grad_3d's grad_weight_tc_kernel).
__host__ __device__ inline bool tc_weight_grad(const GradDims& d) {
    return d.W <= 32 && d.W % 4 == 0 && d.C_in * K * K <= WGT_MAX_GROUPS * WGT_DEPTHS;
}

// dL/dW on the tensor cores with the roles of grad_weight_tc_kernel swapped, for depth C_in K^2 <= 32 and C_out <=
// 24 (its 16-channel chunks would pad 24 channels to 32): per output row, for each kw a GEMM (m16n8k8), rows =
// depths k (two warps a row: depths 0-15 and 16-31), columns = every output channel (three 8-column tiles),
// reduction over the 32 input columns in grad_weight_tc_kernel's order (lane t: iw = 8t .. 8t + 7). A lane's input
// values (two depths) are split once a row and serve every (kw, channel tile); a channel tile's dL/dy (columns 8t - 2
// .. 8t + 7, the first two from lane t - 1) is split once and serves every (step, kw). Totals as there (a row in the
// tensor cores, then fp32), the block's warps of a depth half added in order (double), written in
// grad_weight_tc_kernel's partials layout for finish_weight_grad_tc_kernel.
constexpr int WR_ROWS = 4;   // rows a block takes at a time
constexpr int WR_CO = 24, WR_TILES = WR_CO / 8;   // output channels at most, and their 8-column tiles
template <bool TF32>   // one TF32 product a step (operand), else split TF32
__global__ void __launch_bounds__(64 * WR_ROWS, 2) grad_weight_rows_kernel(
    const float* __restrict__ grad_y,     // (B, C_out, Do, Ho, Wo)
    const float* __restrict__ x,          // (B, C_in, D, H, W), 16-byte aligned
    double* __restrict__ partials, GradDims d)
{
    __shared__ double sums[2][WR_CO][WGT_DEPTHS][K];   // [depth half][co][k % 16][kw]
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const int rr = warp / 2, half = warp % 2, depth = d.C_in * K * K, n_j = (d.C_out + 7) / 8;
    const int rows_ps = d.Do * d.Ho, row_len = rows_ps * d.Wo;   // a channel's dL/dy
    const long long rows = (long long)d.B * rows_ps;
    const long long r0 = blockIdx.x * rows / gridDim.x, r1 = (blockIdx.x + 1) * rows / gridDim.x;
    unsigned tap[2];   // input offsets of this lane's depths half * 16 + g + 8h (past the depth: 0, values zeroed)
    bool ok[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const int k = half * WGT_DEPTHS + g + 8 * h;
        ok[h] = k < depth;
        tap[h] = ok[h] ? ((k / (K * K) * d.D + k / K % K) * d.H + k % K) * d.W : 0u;
    }
    float total[K][WR_TILES][4] = {};
#pragma unroll 1
    for (long long row = r0 + rr; row < r1; row += WR_ROWS) {
        const long long b = row / rows_ps;
        const int rw = (int)(row % rows_ps), od = rw / d.Ho, oh = rw % d.Ho;
        const float* xr = x + (((size_t)b * d.C_in * d.D + od) * d.H + oh) * d.W;
        // A of step s: depths g, g + 8 at iw = 8t + 2s (a0, a1) and 8t + 2s + 1 (a2, a3); columns past W are clamped
        // and meet only zero dL/dy.
        uint32_t ab[4][4], as[4][4];
        {
            float4 v[2][2];
#pragma unroll
            for (int h = 0; h < 2; ++h) {
#pragma unroll
                for (int q = 0; q < 2; ++q) {
                    const float4 l = __ldg(reinterpret_cast<const float4*>(xr + tap[h] + min(8 * t + 4 * q, d.W - 4)));
                    v[h][q] = ok[h] ? l : make_float4(0.f, 0.f, 0.f, 0.f);
                }
            }
#pragma unroll
            for (int st = 0; st < 4; ++st)
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const float4 q = v[e % 2][st / 2];
                    const float val = e < 2 ? (st % 2 ? q.z : q.x) : (st % 2 ? q.w : q.y);
                    const Split sp = operand<TF32>(val);
                    ab[st][e] = sp.big;
                    as[st][e] = sp.small;
                }
        }
        float acc[K][WR_TILES][4] = {};
        const float* gr = grad_y + (size_t)b * d.C_out * row_len + (size_t)rw * d.Wo;
#pragma unroll
        for (int j = 0; j < WR_TILES; ++j) {
            if (j >= n_j) break;
            // G[2 + m] = dL/dy[8j + g][8t + m], m = -2 .. 7 (zero outside the row and past C_out)
            const int co = 8 * j + g;
            float G[10];
#pragma unroll
            for (int m = 0; m < 8; ++m)
                G[2 + m] = co < d.C_out && 8 * t + m < d.Wo ? __ldg(gr + (size_t)co * row_len + 8 * t + m) : 0.f;
#pragma unroll
            for (int m = 0; m < 2; ++m) {
                const float v = __shfl_up_sync(0xffffffffu, G[8 + m], 1);   // lane t - 1's columns 6, 7
                G[m] = t > 0 ? v : 0.f;
            }
            uint32_t gb[10], gs[10];
#pragma unroll
            for (int m = 0; m < 10; ++m) {
                const Split sp = operand<TF32>(G[m]);
                gb[m] = sp.big;
                gs[m] = sp.small;
            }
#pragma unroll
            for (int st = 0; st < 4; ++st)
#pragma unroll
                for (int kw = 0; kw < K; ++kw) {
                    const int m = 2 + 2 * st - kw;   // b = dL/dy[8j + g][8t + 2s - kw (+ 1)]
                    if (!TF32) {
                        mma(acc[kw][j], as[st], gb[m], gb[m + 1]);
                        mma(acc[kw][j], ab[st], gs[m], gs[m + 1]);
                    }
                    mma(acc[kw][j], ab[st], gb[m], gb[m + 1]);
                }
        }
#pragma unroll
        for (int kw = 0; kw < K; ++kw)
#pragma unroll
            for (int j = 0; j < WR_TILES; ++j)
#pragma unroll
                for (int e = 0; e < 4; ++e) total[kw][j][e] += acc[kw][j][e];
    }
    // The block's warps of each depth half add their totals in order; c[e]: k = g + 8 (e / 2), co = 8j + 2t + e % 2.
    for (int q = 0; q < WR_ROWS; ++q) {
        if (rr == q)
#pragma unroll
            for (int kw = 0; kw < K; ++kw)
#pragma unroll
                for (int j = 0; j < WR_TILES; ++j)
#pragma unroll
                    for (int e = 0; e < 4; ++e) {
                        double& v = sums[half][8 * j + 2 * t + e % 2][g + 8 * (e / 2)][kw];
                        v = (q == 0 ? 0.0 : v) + total[kw][j][e];
                    }
        __syncthreads();
    }
    const int chunks = (d.C_out + WGT_CO - 1) / WGT_CO, n_sums = wgt_groups(depth) * WGT_CO * WGT_DEPTHS * K;
    for (int i = threadIdx.x; i < 2 * WR_CO * WGT_DEPTHS * K; i += blockDim.x) {
        const int kw = i % K, kk = i / K % WGT_DEPTHS, co = i / (K * WGT_DEPTHS) % WR_CO, hf = i / (K * WGT_DEPTHS * WR_CO);
        if (co < d.C_out && hf * WGT_DEPTHS + kk < depth)
            partials[((size_t)blockIdx.x * chunks + co / WGT_CO) * n_sums +
                     ((hf * WGT_CO + co % WGT_CO) * WGT_DEPTHS + kk) * K + kw] = sums[hf][co][kk][kw];
    }
}
__host__ __device__ inline bool rows_weight_grad(const GradDims& d) {
    return tc_weight_grad(d) && d.C_in * K * K <= 2 * WGT_DEPTHS && d.C_out <= WR_CO;
}


// dL/dx elsewhere (any kernel size, any channels), tiled: block (b tiles + tile of dL/dx, chunk of COT input
// channels), tile_conv3<FLIP> over dL/dy (t: the conv's transpose, t.D x t.H x t.W = Do x Ho x Wo). Sums over
// (output channel chunk, kd, output channel, kh, kw) in fp32, a fixed order.
template <int COT, int PIXT>
__global__ void __launch_bounds__(GEN_THREADS, 2) grad_input_tiled_kernel(
    const float* __restrict__ grad_y, const float* __restrict__ weight, float* __restrict__ grad_x, TileConv3 t)
{
    extern __shared__ float4 smem4[];
    float* in_s = reinterpret_cast<float*>(smem4);
    float* w_s = in_s + (size_t)t.ci_t * t.in_floats();
    constexpr int TH = PIXT * ROW_STEP;
    const int D = t.D + t.k.d - 1, H = t.H + t.k.h - 1, W = t.W + t.k.w - 1;
    const int tiles_w = (W + TILE_W - 1) / TILE_W, tiles_hw = (H + TH - 1) / TH * tiles_w;
    const int tile = (int)(blockIdx.x % ((long long)D * tiles_hw)), co0 = blockIdx.y * COT;
    const long long b = blockIdx.x / ((long long)D * tiles_hw);
    const int od = tile / tiles_hw, oh0 = tile % tiles_hw / tiles_w * TH, ow0 = tile % tiles_w * TILE_W;
    const int oh = oh0 + threadIdx.x / TILE_W, ow = ow0 + threadIdx.x % TILE_W;
    float acc[PIXT][COT];
    tile_conv3<float, true, COT, PIXT>(t, grad_y, weight, b, od, oh0, ow0, co0, in_s, w_s, acc);
#pragma unroll
    for (int p = 0; p < PIXT; ++p)
        if (oh + p * ROW_STEP < H && ow < W)
#pragma unroll
            for (int j = 0; j < COT; ++j)
                if (co0 + j < t.C_out)
                    grad_x[((((size_t)b * t.C_out + co0 + j) * D + od) * H + oh + p * ROW_STEP) * W + ow] = acc[p][j];
}

using WgradDims = GradDims;
// shared: wgrad_tiled_3d begin
// WgradDims: the file's dims type (B, C_in, C_out, Do, Ho, Wo, D, H, W), named before this block.
// dL/dW, tiled: block (chunk of CO_T output channels, chunk of ci_c input channels, split): for the items (sample,
// output depth, tile of TILE_H x TILE_W positions) split, split + splits, ... it stages the tile's dL/dy of the
// chunk's channels (gy_s[position][channel], each quad of channels a float4, the quads swizzled by position so that
// neither the staging stores nor the loads conflict) and the input rows the tile reads at each kd of each of its
// input channels. A thread owns a quad of output channels, an input channel, WG_TAPS taps (tap group) and a part of
// the tile's rows (row part): per position one float4 of dL/dy and WG_TAPS input loads feed 4 WG_TAPS multiply-adds.
// Each item's products are summed in fp32, the items in double; the row parts' totals are added in order through
// shared memory into partials (splits, C_out, C_in, taps), added in split order by finish_weight_grad_tiled_kernel.
constexpr int WG_TAPS = 4, WG_QUADS = CO_T / 4;
struct WgradPlan {
    int groups, ci_c, units, parts;   // tap groups; input channels a block (their rows within 64 KB); units =
                                      // quads x groups x ci_c (up to GEN_THREADS a round); row parts
    __host__ __device__ WgradPlan(int C_in, Kernel3 k) {
        const int ci_floats = k.d * (TILE_H + k.h - 1) * (TILE_W + k.w - 1);
        groups = (k.d * k.h * k.w + WG_TAPS - 1) / WG_TAPS;
        ci_c = max(1, min(min(C_in, GEN_THREADS / (WG_QUADS * groups)), (16 << 10) / ci_floats));
        units = min(WG_QUADS * groups * ci_c, GEN_THREADS);
        parts = 1;
        while (parts < TILE_H && 2 * parts * units <= GEN_THREADS) parts *= 2;   // a power of 2 dividing TILE_H
    }
};
static size_t wgrad_smem_bytes(int C_in, Kernel3 k) {
    const WgradPlan plan(C_in, k);
    const size_t stage = (size_t)TILE_H * TILE_W * CO_T + (size_t)plan.ci_c * k.d * (TILE_H + k.h - 1) * (TILE_W + k.w - 1);
    const size_t totals = (size_t)GEN_THREADS * WG_TAPS * 4 * 2;   // doubles, as floats
    return (stage > totals ? stage : totals) * sizeof(float);
}
__device__ __forceinline__ int wg_swizzle(int pos, int quad) { return pos * CO_T + 4 * (quad ^ ((pos >> 1) & 3)); }
__global__ void __launch_bounds__(GEN_THREADS) grad_weight_tiled_kernel(
    const float* __restrict__ grad_y, const float* __restrict__ x, double* __restrict__ partials, WgradDims d, Kernel3 k,
    int splits)
{
    static_assert(WG_QUADS == 4, "the swizzle permutes four quads");
    extern __shared__ float4 smem4[];
    float* gy_s = reinterpret_cast<float*>(smem4);                 // [TILE_H TILE_W][CO_T], swizzled quads
    float* x_s = gy_s + TILE_H * TILE_W * CO_T;                    // [ci_c][kd][rows][cols]
    double* totals_s = reinterpret_cast<double*>(smem4);           // after the items: [thread][WG_TAPS 4]
    const int taps = k.d * k.h * k.w, rows = TILE_H + k.h - 1, cols = TILE_W + k.w - 1;
    const WgradPlan plan(d.C_in, k);
    const int co0 = blockIdx.x * CO_T, ci0 = blockIdx.y * plan.ci_c, split = blockIdx.z;
    const int nci = min(plan.ci_c, d.C_in - ci0), n_units = WG_QUADS * plan.groups * nci;
    const int rows_a_part = TILE_H / plan.parts;
    const int tiles_w = (d.Wo + TILE_W - 1) / TILE_W, tiles_hw = (d.Ho + TILE_H - 1) / TILE_H * tiles_w;
    const long long S = (long long)d.Do * d.Ho * d.Wo, items = (long long)d.B * d.Do * tiles_hw;
    for (int u0 = 0; u0 < n_units; u0 += plan.units) {   // rounds of units (more than GEN_THREADS: huge kernels)
        const int unit = u0 + (int)threadIdx.x % plan.units, part = (int)threadIdx.x / plan.units;
        const bool active = part < plan.parts && unit < n_units;
        const int quad = unit % WG_QUADS, group = unit / WG_QUADS % plan.groups, ci = unit / (WG_QUADS * plan.groups);
        int offset[WG_TAPS];   // each tap's input offset ((kd rows + kh) cols + kw); taps past the last read tap 0's
#pragma unroll
        for (int i = 0; i < WG_TAPS; ++i) {
            const int tap = min(group * WG_TAPS + i, taps - 1);
            offset[i] = (tap / (k.h * k.w) * rows + tap / k.w % k.h) * cols + tap % k.w;
        }
        double total[WG_TAPS][4] = {};
        for (long long item = split; item < items; item += splits) {
            const long long b = item / ((long long)d.Do * tiles_hw);
            const int od = (int)(item / tiles_hw % d.Do), tile = (int)(item % tiles_hw);
            const int oh0 = tile / tiles_w * TILE_H, ow0 = tile % tiles_w * TILE_W;
            __syncthreads();
            for (int i = threadIdx.x; i < WG_QUADS * TILE_H * TILE_W; i += GEN_THREADS) {   // lanes along positions
                const int q = i / (TILE_H * TILE_W), pos = i % (TILE_H * TILE_W);
                const int oh = oh0 + pos / TILE_W, ow = ow0 + pos % TILE_W;
                float v[4];
#pragma unroll
                for (int c = 0; c < 4; ++c) {
                    const int co = co0 + 4 * q + c;
                    v[c] = co < d.C_out && oh < d.Ho && ow < d.Wo
                        ? __ldg(grad_y + ((size_t)b * d.C_out + co) * S + ((size_t)od * d.Ho + oh) * d.Wo + ow) : 0.f;
                }
                *reinterpret_cast<float4*>(gy_s + wg_swizzle(pos, q)) = make_float4(v[0], v[1], v[2], v[3]);
            }
            for (int i = threadIdx.x; i < nci * k.d * rows * cols; i += GEN_THREADS) {
                const int c = i / (k.d * rows * cols), kd = i / (rows * cols) % k.d;
                const int ih = oh0 + i / cols % rows, iw = ow0 + i % cols;
                x_s[i] = ih < d.H && iw < d.W
                    ? __ldg(x + (((size_t)b * d.C_in + ci0 + c) * d.D + od + kd) * d.H * d.W + (size_t)ih * d.W + iw) : 0.f;
            }
            __syncthreads();
            if (!active) continue;
            float sum[WG_TAPS][4] = {};
            for (int py = part * rows_a_part; py < (part + 1) * rows_a_part; ++py)
            for (int px0 = 0; px0 < TILE_W; px0 += 8) {   // the swizzle repeats every 8 positions: constant offsets
                const float* xr = x_s + (size_t)ci * k.d * rows * cols + py * cols + px0;
                const float* gr = gy_s + (py * TILE_W + px0) * CO_T;
#pragma unroll
                for (int r = 0; r < 8; ++r) {
                    const float4 g = *reinterpret_cast<const float4*>(gr + wg_swizzle(r, quad));
#pragma unroll
                    for (int i = 0; i < WG_TAPS; ++i) {
                        const float v = xr[offset[i] + r];
                        sum[i][0] = fmaf(g.x, v, sum[i][0]);
                        sum[i][1] = fmaf(g.y, v, sum[i][1]);
                        sum[i][2] = fmaf(g.z, v, sum[i][2]);
                        sum[i][3] = fmaf(g.w, v, sum[i][3]);
                    }
                }
            }
#pragma unroll
            for (int i = 0; i < WG_TAPS; ++i)
#pragma unroll
                for (int c = 0; c < 4; ++c) total[i][c] += sum[i][c];
        }
        __syncthreads();   // the stage's last reads done: its memory now holds the totals
#pragma unroll
        for (int i = 0; i < WG_TAPS; ++i)
#pragma unroll
            for (int c = 0; c < 4; ++c) totals_s[(size_t)threadIdx.x * WG_TAPS * 4 + i * 4 + c] = total[i][c];
        __syncthreads();
        if (active && part == 0) {   // the row parts in order
            for (int p = 1; p < plan.parts; ++p)
#pragma unroll
                for (int i = 0; i < WG_TAPS; ++i)
#pragma unroll
                    for (int c = 0; c < 4; ++c)
                        total[i][c] += totals_s[((size_t)p * plan.units + threadIdx.x) * WG_TAPS * 4 + i * 4 + c];
#pragma unroll
            for (int i = 0; i < WG_TAPS; ++i) {
                const int tap = group * WG_TAPS + i;
#pragma unroll
                for (int c = 0; c < 4; ++c) {
                    const int co = co0 + 4 * quad + c;
                    if (tap < taps && co < d.C_out)
                        partials[(((size_t)split * d.C_out + co) * d.C_in + ci0 + ci) * taps + tap] = total[i][c];
                }
            }
        }
        __syncthreads();   // the totals read before the next round's stage
    }
}
// The tiled dL/dW's blocks: (chunks of CO_T output channels, chunks of input channels, splits of the items), the
// splits giving about two blocks an SM.
static dim3 wgrad_grid(const WgradDims& d, Kernel3 k, int sms) {
    const int ci_c = WgradPlan(d.C_in, k).ci_c;
    const long long chunks = (long long)((d.C_out + CO_T - 1) / CO_T) * ((d.C_in + ci_c - 1) / ci_c);
    const long long items = (long long)d.B * d.Do * ((d.Ho + TILE_H - 1) / TILE_H) * ((d.Wo + TILE_W - 1) / TILE_W);
    const int splits = (int)std::max<long long>(1, std::min<long long>(items, 2LL * sms / std::max(1LL, chunks)));
    return dim3((d.C_out + CO_T - 1) / CO_T, (d.C_in + ci_c - 1) / ci_c, splits);
}
// shared: wgrad_tiled_3d end

// shared: finish_weight_grad_tiled begin
// dL/dW: each weight's split totals added in order.
__global__ void finish_weight_grad_tiled_kernel(const double* __restrict__ partials, float* __restrict__ grad_weight,
                                                long long n, int splits)
{
    const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i >= n) return;
    double v = 0.0;
    for (int s = 0; s < splits; ++s) v += partials[(size_t)s * n + i];
    grad_weight[i] = (float)v;
}
// shared: finish_weight_grad_tiled end

// shared: convert begin
// A tensor's elements converted between float32 and a half type (to nearest even): the half-precision paths'
// float copies of their inputs and their gradients' roundings. Dtype codes as with_type's.
template <typename S, typename D>
__global__ void convert_kernel(const S* __restrict__ in, D* __restrict__ out, long long n) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        out[i] = from_float<D>(to_float(in[i]));
}
cudaError_t convert_launch(const void* in, int in_type, void* out, int out_type, long long n, cudaStream_t stream) {
    return with_type(in_type, [&](auto s) {
        return with_type(out_type, [&](auto d) {
            using S = decltype(s);
            using D = decltype(d);
            const int blocks = (int)std::min<long long>((n + 255) / 256, 4096);
            convert_kernel<S, D><<<blocks, 256, 0, stream>>>(static_cast<const S*>(in), static_cast<D*>(out), n);
            return cudaGetLastError();
        });
    });
}
// shared: convert end

static int units_per_sample(int D, int H, int W) {
    return ((D - K + 1) * (H - K + 1) * row_segments(W, wide_rows(W)) + WARPS - 1) / WARPS;
}

long long conv3d_groupnorm_mean_workspace(int B, int C_out, int D, int H, int W) {   // doubles
    return (long long)B * units_per_sample(D, H, W) * ((C_out + CO_CHUNK - 1) / CO_CHUNK) * N_STATS;
}

// The conv kernel's grid x. Half precision: 8 blocks an SM where each gets 4 units or more, else 6 (measured on
// the H200: at the benchmark 0.124 against 0.129 ms; at batch 8, 1.3 units a block, 0.033 against 0.028).
static int conv_blocks(int B, int D, int H, int W, int sms, bool half) {
    const long long units = (long long)B * units_per_sample(D, H, W);
    const int per_sm = !half ? BLOCKS_PER_SM : units >= 4LL * HALF_BLOCKS_PER_SM * sms ? HALF_BLOCKS_PER_SM : 6;
    return (int)std::min<long long>(units, (long long)per_sm * sms);
}

// conv_gn_stats_half_kernel's VEC form: each row one segment of 4-aligned columns (x_aligned: the input's start
// 4-element aligned), loaded 8 bytes at a time; else element loads.
static bool half_vec_rows(int W, bool x_aligned) { return W % 4 == 0 && row_segments(W, wide_rows(W)) == 1 && x_aligned; }

// The two phases, launched apart so that the host's work between them overlaps the first. Dtype codes:
// see with_types; x, the conv's parameters and dL/dy in the conv's type, the rest in the GroupNorm's.
// conv_gn_stats_kernel over the whole input: the statistics' partials, or (GRAD) dL/dy from coef.
template <bool GRAD, typename T>
static cudaError_t launch_conv_rows(const T* x, const T* weight, const T* bias, double* partials, const float* coef,
                                    float* grad_y, int B, int C_in, int C_out, int D, int H, int W, int sms,
                                    cudaStream_t stream) {
    const int n_chunks = (C_out + CO_CHUNK - 1) / CO_CHUNK;
    const int smem = (int)(depth_steps(C_in) * (2 * B_WORDS * sizeof(uint32_t) + 4 * sizeof(uint2)));
    const auto kernel = wide_rows(W) ? conv_gn_stats_kernel<true, T, GRAD> : conv_gn_stats_kernel<false, T, GRAD>;
    cudaError_t err;
    // The dynamic part and the kernel's static lane_sums together: past 48 KB a block must opt in (C_in of 7
    // or more; counting the dynamic part alone missed C_in 7 and 8, whose launch then failed).
    if (smem + (int)sizeof(double) * WARPS * LANE_STATS * 32 > 48 * 1024 &&
        (err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem)) != cudaSuccess)
        return err;
    const int ups = units_per_sample(D, H, W);
    kernel<<<dim3(conv_blocks(B, D, H, W, sms, false), n_chunks), THREADS, smem, stream>>>(
        x, weight, bias, partials, C_in, C_out, D, H, W, ups, (long long)B * ups, coef, grad_y);
    return cudaGetLastError();
}

cudaError_t conv3d_groupnorm_mean_stats(const void* x, const void* weight, const void* bias, double* partials,
                                        int conv_type, int B, int C_in, int C_out, int D, int H, int W, bool vec,
                                        int sms, cudaStream_t stream) {
    return with_type(conv_type, [&](auto type) {
        using T = decltype(type);
        if constexpr (std::is_same<T, float>::value) {
            return launch_conv_rows<false>(static_cast<const float*>(x), static_cast<const float*>(weight),
                                           static_cast<const float*>(bias),
                                           partials, nullptr, nullptr, B, C_in, C_out, D, H, W, sms, stream);
        } else {   // conv_gn_stats_half_kernel; VEC (the plan's vec): one 4-aligned segment a row
            const T* xt = static_cast<const T*>(x);
            const int smem = (int)(half_steps(C_in) * ((CO_CHUNK / 8) * 32 * sizeof(uint2) + 4 * sizeof(unsigned)));
            const auto kernel = vec ? conv_gn_stats_half_kernel<true, T> : conv_gn_stats_half_kernel<false, T>;
            cudaError_t err;
            if (smem + (int)sizeof(double) * WARPS * LANE_STATS * 32 > 48 * 1024 &&
                (err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem)) != cudaSuccess)
                return err;
            const int ups = units_per_sample(D, H, W);
            kernel<<<dim3(conv_blocks(B, D, H, W, sms, true), (C_out + CO_CHUNK - 1) / CO_CHUNK), THREADS, smem,
                     stream>>>(xt, static_cast<const T*>(weight), static_cast<const T*>(bias), partials, C_in, C_out,
                               D, H, W, ups, (long long)B * ups);
            return cudaGetLastError();
        }
    });
}

// ---- The plan: which path an input takes, decided here once for the forward, the backward, the workspace sizing
// and plan() (the C++ operator and ModelNew.plan read these functions, nothing else).
// TUNED: the fused conv (conv_gn_stats_kernel, the conv never written) where it was built and measured to win:
// kernel 3 on every axis and at most TUNED_MAX_C_IN input channels (16 in half: 16-bit MMA, the weights in shared
// memory). float32 stops at 7: the tuned kernel's tensor-core sums run the whole depth (C_in x 9) in one
// accumulator, and at 15 -> 30 channels missed the fp32 rule (1.11e-5 against float64, 1e-5 allowed; H200).
// TILED: float32 with at most TILED_MAX_C_IN input channels, any other kernel: the tiled CUDA-core conv, its sums
// in registers, and its tiled gradients. cuDNN's exact float32 convs of so few channels are slow, its backward most
// (H200, 16x3x24x32x32, kernel 5: forward 1.4x, forward + backward 3.7x faster than PyTorch's conv path).
// TORCH_CONV: everywhere else, PyTorch's own convolution (cuDNN, under the user's flags and dtype), then
// conv_sums_kernel over its output, and in the backward grad_y_from_conv_kernel and PyTorch's convolution backward.
// From 8 input channels on the conv is compute-bound and cuDNN beats any conv of ours, and in half precision it
// beats the tiled kernels' backward 2x (docs/conv3d_groupnorm_mean.md).
// Training (a gradient wanted; every backward) in half precision: tuned only up to TUNED_MAX_C_IN_HALF_TRAINING
// input channels. Above, the tuned backward recomputes the conv in float32 and hands PyTorch's convolution backward a
// converted dL/dy, where PyTorch's conv path keeps y from its forward: forward + backward 1.1x to 1.4x faster on
// that path at 8 -> 16, 12 -> 24 and 16 -> 32 channels, kernel 3, 8x16x16, batch 1, 8 and 32, bf16 and fp16 (ties,
// 0.97 to 1.03, at 12 -> 24 batch 8 and 32), while the tuned forward alone stays 1.3x to 2.6x faster from batch 8;
// at 4 -> 8, 6 -> 12 and 7 -> 14 the tuned path trains 1.07x to 1.45x faster (H200, interleaved).
Path conv3d_groupnorm_mean_path(int C_in, int kd, int kh, int kw, bool half, bool training) {
    const bool k3 = kd == K && kh == K && kw == K;
    const int tuned_max = !half ? TUNED_MAX_C_IN : training ? TUNED_MAX_C_IN_HALF_TRAINING : TUNED_MAX_C_IN_HALF;
    if (k3 && C_in <= tuned_max) return Path::TUNED;
    return !half && C_in <= TILED_MAX_C_IN ? Path::TILED : Path::TORCH_CONV;
}

// The tiled kernels' plan: as many input channels a stage as fit 40 KB of shared memory (at least one; beyond 48 KB
// with the static arrays, for kernels over about 40 wide, the kernel is allowed what it needs).
static TileConv3 tile_plan(int C_in, int C_out, int D, int H, int W, int kd, int kh, int kw, int co_t = CO_T,
                           int th = TILE_H) {
    TileConv3 t{C_in, C_out, D, H, W, 1, Kernel3{kd, kh, kw}, co_t, th};
    t.ci_t = (int)std::max<size_t>(1, std::min<size_t>((size_t)C_in, (40u << 10) / t.smem_bytes()));
    return t;
}
// The tiled path's statistics: partials (B, C_out, tiles, 2), the conv without its bias (the finalize adds it).
long long conv3d_groupnorm_mean_tiled_workspace(int B, int C_out, int D, int H, int W, int kd, int kh, int kw) {
    return (long long)B * C_out * tile_plan(1, 1, D, H, W, kd, kh, kw).tiles() * 2;   // doubles
}
cudaError_t conv3d_groupnorm_mean_tiled_stats(const float* x, const float* weight, double* partials, int B, int C_in,
                                              int C_out, int D, int H, int W, int kd, int kh, int kw, int sms,
                                              cudaStream_t stream) {
    const TileConv3 t = tile_plan(C_in, C_out, D, H, W, kd, kh, kw);
    const size_t smem = t.smem_bytes();
    if (smem > (40u << 10)) {
        const cudaError_t err = cudaFuncSetAttribute(conv_stats_general_kernel,
                                                     cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        if (err != cudaSuccess) return err;
    }
    // chunks of CO_T output channels split over blocks where tiles are few: about two blocks an SM
    const long long blocks = (long long)B * t.tiles(), chunks = (C_out + CO_T - 1) / CO_T;
    const int splits = (int)std::max<long long>(1, std::min<long long>(chunks, 2LL * sms / std::max(1LL, blocks)));
    conv_stats_general_kernel<<<dim3((unsigned)blocks, splits), GEN_THREADS, smem, stream>>>(x, weight, partials, t);
    return cudaGetLastError();
}

// The PyTorch-conv path's statistics: conv_sums_kernel over y (B, C_out, S) into partials (B, C_out, chunks, 2).
static int sum_chunks(long long S) { return (int)((S + SUM_CHUNK - 1) / SUM_CHUNK); }
long long conv3d_groupnorm_mean_conv_sums_workspace(int B, int C_out, long long S) {   // doubles
    return (long long)B * C_out * sum_chunks(S) * 2;
}
cudaError_t conv3d_groupnorm_mean_conv_sums(const void* y, double* partials, int conv_type, int B, int C_out,
                                            long long S, cudaStream_t stream) {
    return with_type(conv_type, [&](auto type) {
        using T = decltype(type);
        const int chunks = sum_chunks(S);
        conv_sums_kernel<T><<<(unsigned)((long long)B * C_out * chunks), SUM_THREADS, 0, stream>>>(
            static_cast<const T*>(y), partials, S, chunks);
        return cudaGetLastError();
    });
}

// The partials of conv3d_groupnorm_mean_stats (TUNED) or _tiled_stats (TILED), the bias added here; or those of
// conv3d_groupnorm_mean_conv_sums (TORCH_CONV: y holds the bias, bias is null). path: the plan's.
cudaError_t conv3d_groupnorm_mean_finalize(const double* partials, const void* bias, const void* gn_weight,
                                           const void* gn_bias, void* out, double* stats, int conv_type,
                                           int norm_type, int B, int C_out, int groups, int D, int H, int W, int kd,
                                           int kh, int kw, Path path, double eps, int sms, cudaStream_t stream) {
    return with_types(conv_type, norm_type, [&](auto t, auto to) {
        using T = decltype(t);
        using TO = decltype(to);
        const bool tuned = path == Path::TUNED;
        const int ups = tuned ? units_per_sample(D, H, W) : 0;
        const long long S = (long long)(D - kd + 1) * (H - kh + 1) * (W - kw + 1);
        const int chunks = tuned ? 0 : path == Path::TILED ? tile_plan(1, 1, D, H, W, kd, kh, kw).tiles()
                                                           : sum_chunks(S);
        gn_mean_finalize_kernel<T, TO><<<B, FINAL_THREADS, 3 * C_out * sizeof(double), stream>>>(
            partials, static_cast<const T*>(bias), static_cast<const TO*>(gn_weight), static_cast<const TO*>(gn_bias),
            static_cast<TO*>(out), stats, C_out, groups, ups, (long long)B * ups,
            tuned ? conv_blocks(B, D, H, W, sms, is_half<T>()) : 0, (double)S, eps, chunks);
        return cudaGetLastError();
    });
}

// The backward's kernels up to dL/dy and the parameters' gradients (grad_bias null: not wanted); coef (B, C_out, 3)
// floats and param_terms (B, 3 C_out) doubles of workspace. TUNED and TILED: the forward's conv recomputed, dL/dy
// written in float32 to grad_y; TORCH_CONV: dL/dy from the forward's y (the conv's dtype), written in that dtype.
cudaError_t conv3d_groupnorm_mean_backward(Path path, const void* grad_out, const double* stats, const void* x,
                                           const void* weight, const void* bias, const void* gn_weight, const void* y,
                                           float* coef, double* param_terms, void* grad_y, void* grad_bias,
                                           void* grad_gn_weight, void* grad_gn_bias, int conv_type, int norm_type,
                                           int B, int C_in, int C_out, int groups, int D, int H, int W, int kd,
                                           int kh, int kw, int sms, cudaStream_t stream) {
    return with_types(conv_type, norm_type, [&](auto t, auto to) {
        using T = decltype(t);
        using TO = decltype(to);
        const long long S = (long long)(D - kd + 1) * (H - kh + 1) * (W - kw + 1);
        gn_mean_backward_coef_kernel<TO><<<B, FINAL_THREADS, 0, stream>>>(
            static_cast<const TO*>(grad_out), stats, static_cast<const TO*>(gn_weight), coef, param_terms, C_out,
            groups, (double)S);
        cudaError_t err = cudaGetLastError();
        if (err != cudaSuccess) return err;
        if (path == Path::TUNED) {   // the forward's conv, writing dL/dy
            err = launch_conv_rows<true>(static_cast<const T*>(x), static_cast<const T*>(weight),
                                         static_cast<const T*>(bias), nullptr, coef, static_cast<float*>(grad_y), B,
                                         C_in, C_out, D, H, W, sms, stream);
        } else if (path == Path::TILED) {   // float32 (the plan's): tiles of output positions, CO_T channels a block
            if constexpr (!is_half<T>()) {
                const TileConv3 t = tile_plan(C_in, C_out, D, H, W, kd, kh, kw);
                if (t.smem_bytes() > (40u << 10) &&
                    (err = cudaFuncSetAttribute(conv_grad_y_general_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                (int)t.smem_bytes())) != cudaSuccess)
                    return err;
                conv_grad_y_general_kernel<<<dim3((unsigned)((long long)B * t.tiles()), (C_out + CO_T - 1) / CO_T),
                                             GEN_THREADS, t.smem_bytes(), stream>>>(
                    static_cast<const float*>(x), static_cast<const float*>(weight), static_cast<const float*>(bias),
                    coef, static_cast<float*>(grad_y), t);
                err = cudaGetLastError();
            }
        } else {
            const long long n = (long long)B * C_out * S;
            grad_y_from_conv_kernel<T><<<(unsigned)std::min<long long>((n + 255) / 256, 8LL * sms), 256, 0, stream>>>(
                static_cast<const T*>(y), coef, static_cast<T*>(grad_y), S, n);
            err = cudaGetLastError();
        }
        if (err != cudaSuccess) return err;
        gn_param_grad_kernel<T, TO><<<(3 * C_out + 255) / 256, 256, 0, stream>>>(
            param_terms, static_cast<TO*>(grad_gn_weight), static_cast<TO*>(grad_gn_bias), static_cast<T*>(grad_bias),
            B, C_out);
        return cudaGetLastError();
    });
}


// The conv's gradients on the tuned and tiled paths: the tensor-core kernels where their bounds hold (the tuned path;
// dL/dx: W <= 32, C_in <= 4, C_out <= 24; dL/dW: W <= 32 and a multiple of 4, C_in <= 7, the input 16-byte aligned),
// else the tiled kernels in float32 (exact; cuDNN's float32 gradients of so few channels are slow), else (half
// precision) PyTorch's convolution backward, as on PyTorch's conv path. Workspace (doubles): the dL/dW kernels'
// partials where they run.
static GradDims grad_dims(int B, int C_in, int C_out, int D, int H, int W, int kd, int kh, int kw) {
    return GradDims{B, C_in, C_out, D, H, W, D - kd + 1, H - kh + 1, W - kw + 1};
}
// dL/dx: STREAM (grad_input_stream_kernel, a block a sample) where its bounds hold and the samples fill the GPU
// (2 B >= SMs); else TC (grad_input_tc_kernel, blocks splitting the rows) where its bounds hold; else TILED
// (float32), else TORCH.
static DxPath dx_path(const GradDims& d, Path path, bool half, int sms) {
    if (path == Path::TUNED && stream_input_grad(K, d) && 2 * d.B >= sms) return DxPath::STREAM;
    if (path == Path::TUNED && tc_input_grad(d)) return DxPath::TC;
    return path != Path::TORCH_CONV && !half ? DxPath::TILED : DxPath::TORCH;
}
// dL/dW: ROWS (grad_weight_rows_kernel: rows = depths, every output channel a column) where C_in K^2 <= 2 x 16 and
// C_out <= WR_CO; else TC (grad_weight_tc_kernel); both need tc_weight_grad (W <= 32 and a multiple of 4, C_in <= 7,
// the float input 16-byte aligned); else TILED (float32), else TORCH.
static DwPath dw_path(const GradDims& d, Path path, bool half, bool x_aligned) {
    if (path == Path::TUNED && tc_weight_grad(d) && x_aligned) return rows_weight_grad(d) ? DwPath::ROWS : DwPath::TC;
    return path != Path::TORCH_CONV && !half ? DwPath::TILED : DwPath::TORCH;
}
// One call's plan, every stage decided here once. x_misalign: the conv input's address modulo 16 as the operator
// passes it (a contiguous tensor; 0 for a copy: in the backward, half precision's float copy).
Plan conv3d_groupnorm_mean_make_plan(int B, int C_in, int C_out, int D, int H, int W, int kd, int kh, int kw,
                                     bool half, bool training, int sms, int x_misalign) {
    const GradDims d = grad_dims(B, C_in, C_out, D, H, W, kd, kh, kw);
    Plan p{conv3d_groupnorm_mean_path(C_in, kd, kh, kw, half, training), false, DxPath::TORCH, DwPath::TORCH};
    p.vec = half && p.path == Path::TUNED && half_vec_rows(W, x_misalign % 8 == 0);
    if (training) {
        p.dx = dx_path(d, p.path, half, sms);
        p.dw = dw_path(d, p.path, half, half || x_misalign == 0);
    }
    return p;
}

// grad_weight_tc_kernel's blocks (grid x): a wave of resident blocks, shared by the chunks (the residency asked
// once per block size: 32 WGT_RPB groups threads, groups 1 to WGT_MAX_GROUPS; of the split-TF32 form, which the
// workspace's size follows whatever the flag).
static int wgt_threads(const GradDims& d) { return 32 * WGT_RPB * wgt_groups(d.C_in * K * K); }
static int wgt_blocks(const GradDims& d, int sms) {
    static std::atomic<int> resident[WGT_MAX_GROUPS + 1];
    const int groups = wgt_groups(d.C_in * K * K);
    int per_sm = resident[groups].load();
    if (per_sm == 0) {
        if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, grad_weight_tc_kernel<K, false>, wgt_threads(d), 0) !=
            cudaSuccess)
            per_sm = 2;
        resident[groups] = per_sm = std::max(1, per_sm);
    }
    return std::max(1, per_sm * sms / ((d.C_out + WGT_CO - 1) / WGT_CO));
}
// grad_weight_rows_kernel's blocks: a wave of resident blocks (the residency asked once, of the split-TF32 form).
static int wrows_blocks(int sms) {
    static std::atomic<int> resident{0};
    int per_sm = resident.load();
    if (per_sm == 0) {
        if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, grad_weight_rows_kernel<false>, 64 * WR_ROWS, 0) !=
            cudaSuccess)
            per_sm = 2;
        resident = per_sm = std::max(1, per_sm);
    }
    return per_sm * sms;
}
int conv3d_groupnorm_mean_grad_y_tail() { return GI_TAIL; }
// dL/dW's partial totals (doubles), the workspace (float32 inputs; none where PyTorch computes dL/dW).
long long conv3d_groupnorm_mean_grads_workspace(DwPath path, int B, int C_in, int C_out, int D, int H, int W,
                                                int kd, int kh, int kw, int sms) {
    const GradDims d = grad_dims(B, C_in, C_out, D, H, W, kd, kh, kw);
    if (path == DwPath::TORCH) return 0;
    if (path == DwPath::TILED) return (long long)wgrad_grid(d, Kernel3{kd, kh, kw}, sms).z * C_out * C_in * kd * kh * kw;
    return (long long)(path == DwPath::ROWS ? wrows_blocks(sms) : wgt_blocks(d, sms)) * ((d.C_out + WGT_CO - 1) / WGT_CO) *
           wgt_groups(d.C_in * K * K) * WGT_CO * WGT_DEPTHS * K;
}

// The tuned and tiled paths' dL/dx and dL/dW in float32 as the plan's dx and dw say (a null grad_x or grad_weight:
// not wanted, or PyTorch's). tf32 (allow_tf32, float32): the tensor-core kernels take
// one TF32 product a step, as PyTorch's conv backward does under the flag (docs/DESIGN.md), else split TF32; the
// tiled kernels stay exact. half: the inputs are float copies of half tensors (the streamed dL/dx skips the products
// of the weights' small parts, which are zero).
cudaError_t conv3d_groupnorm_mean_conv_grads(const Plan& plan, const float* grad_y, const float* x,
                                             const float* weight, float* grad_x, float* grad_weight, double* work,
                                             int B, int C_in, int C_out, int D, int H, int W, int kd, int kh, int kw,
                                             bool tf32, bool half, int sms, cudaStream_t stream) {
    const GradDims d = grad_dims(B, C_in, C_out, D, H, W, kd, kh, kw);
    const Kernel3 k{kd, kh, kw};
    cudaError_t err;
    if (grad_x != nullptr) {
        const DxPath dx = plan.dx;
        if (dx == DxPath::STREAM) {
            // A block a sample (fewer samples: grad_input_tc_kernel, whose blocks split the rows)
            if ((err = launch_grad_input_stream<K>(grad_y, weight, grad_x, d, tf32, half, stream)) != cudaSuccess) return err;
        } else if (dx == DxPath::TC) {
            const auto kernel = tf32 ? grad_input_tc_kernel<K, true> : grad_input_tc_kernel<K, false>;
            int per_sm = 0;   // one wave of resident blocks
            if ((err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, 32 * GI_WARPS, 0)) != cudaSuccess)
                return err;
            kernel<<<std::max(1, per_sm) * sms, 32 * GI_WARPS, 0, stream>>>(grad_y, weight, grad_x, d);
        } else {   // TILED, the conv's transpose: dL/dy (C_out channels, Do x Ho x Wo) in, C_in (< 8) channels out
            const int cot = C_in <= 4 ? 4 : 8, th = 2 * TILE_H;
            const TileConv3 t = tile_plan(C_out, C_in, d.Do, d.Ho, d.Wo, kd, kh, kw, cot, th);
            const long long tiles = (long long)D * ((H + th - 1) / th) * ((W + TILE_W - 1) / TILE_W);
            const auto kernel = cot == 4 ? grad_input_tiled_kernel<4, 2 * PIX> : grad_input_tiled_kernel<8, 2 * PIX>;
            if (t.smem_bytes() > (40u << 10) &&
                (err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)t.smem_bytes())) !=
                    cudaSuccess)
                return err;
            kernel<<<dim3((unsigned)(tiles * B), (C_in + cot - 1) / cot), GEN_THREADS, t.smem_bytes(), stream>>>(
                grad_y, weight, grad_x, t);
        }
        if ((err = cudaGetLastError()) != cudaSuccess) return err;
    }
    if (grad_weight == nullptr) return cudaSuccess;
    const DwPath dw = plan.dw;
    if (dw == DwPath::TILED) {
        const dim3 grid = wgrad_grid(d, k, sms);
        const size_t smem = wgrad_smem_bytes(C_in, k);
        if (smem > (40u << 10) &&
            (err = cudaFuncSetAttribute(grad_weight_tiled_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        (int)smem)) != cudaSuccess)
            return err;
        grad_weight_tiled_kernel<<<grid, GEN_THREADS, smem, stream>>>(grad_y, x, work, d, k, (int)grid.z);
        if ((err = cudaGetLastError()) != cudaSuccess) return err;
        const long long n_w = (long long)C_out * C_in * kd * kh * kw;
        finish_weight_grad_tiled_kernel<<<(unsigned)((n_w + 255) / 256), 256, 0, stream>>>(work, grad_weight, n_w,
                                                                                           (int)grid.z);
        return cudaGetLastError();
    }
    const bool rows = dw == DwPath::ROWS;
    const int n_blocks = rows ? wrows_blocks(sms) : wgt_blocks(d, sms);
    if (rows)
        (tf32 ? grad_weight_rows_kernel<true> : grad_weight_rows_kernel<false>)<<<n_blocks, 64 * WR_ROWS, 0, stream>>>(
            grad_y, x, work, d);
    else
        (tf32 ? grad_weight_tc_kernel<K, true> : grad_weight_tc_kernel<K, false>)<<<
            dim3(n_blocks, (C_out + WGT_CO - 1) / WGT_CO), wgt_threads(d), 0, stream>>>(grad_y, x, work, d);
    if ((err = cudaGetLastError()) != cudaSuccess) return err;
    const long long n_w = (long long)C_out * C_in * K * K * K;
    finish_weight_grad_tc_kernel<K><<<(unsigned)((n_w + 127) / 128), 128, 0, stream>>>(work, grad_weight, d, n_blocks);
    return cudaGetLastError();
}

// The launch plan for an input: each stage's kernel and the rule that picked it, from the functions above that the
// launchers call (conv3d_groupnorm_mean_path, half_vec_rows, dx_path, dw_path). conv_type: the dtype code; sms: the
// GPU's multiprocessor count; x_misalign: the input's address modulo 16 (0 for a copy the operator makes: a
// non-contiguous input, and in the backward the float copy of a half input); training: a gradient wanted (the
// backward's stages follow; without it, the forward's alone). One line a stage, "stage: kernel; rule".
std::string conv3d_groupnorm_mean_plan(int B, int C_in, int C_out, int D, int H, int W, int kd, int kh, int kw,
                                       int conv_type, int sms, int x_misalign, bool training) {
    const bool half = conv_type != 0;
    const Plan plan = conv3d_groupnorm_mean_make_plan(B, C_in, C_out, D, H, W, kd, kh, kw, half, training, sms,
                                                      x_misalign);
    const Path path = plan.path;
    const std::string envelope = "(tuned: kernel 3 on every axis, C_in <= " + std::to_string(TUNED_MAX_C_IN) +
                                 " in float32, <= " + std::to_string(TUNED_MAX_C_IN_HALF) + " in half, <= " +
                                 std::to_string(TUNED_MAX_C_IN_HALF_TRAINING) + " in half training; tiled: float32, "
                                 "C_in <= " + std::to_string(TILED_MAX_C_IN) + ")";
    const std::string torch_rule = "PyTorch's conv path: outside the tuned and tiled envelopes " + envelope;
    std::string s;
    if (path == Path::TORCH_CONV) {
        s += "forward conv: PyTorch's convolution (at::_convolution); " + torch_rule + "\n";
        s += "forward: conv_sums_kernel; each channel's sums of PyTorch's conv output\n";
    } else if (path == Path::TILED) {
        s += "forward: conv_stats_general_kernel; tiled: float32, C_in <= " + std::to_string(TILED_MAX_C_IN) +
             ", a kernel other than 3 on every axis\n";
    } else if (!half) {
        const std::string rows = wide_rows(W) ? "rows of 32-column segments (W >= 32)" : "rows of one segment (W < 32)";
        s += "forward: conv_gn_stats_kernel; tuned (kernel 3, C_in <= 7), split TF32 on the tensor cores, " + rows + "\n";
    } else {
        const bool vec = plan.vec;
        s += std::string("forward: conv_gn_stats_half_kernel") + (vec ? "<VEC>" : "") + "; tuned, 16-bit MMA, " +
             (vec ? "one 4-aligned segment a row: 8-byte loads" : "element loads (rows not one 4-aligned segment)") +
             "\n";
    }
    s += "forward finish: gn_mean_finalize_kernel; always\n";
    if (!training) return s;
    s += "backward coefficients: gn_mean_backward_coef_kernel; always\n";
    s += path == Path::TUNED ? "backward dL/dy: conv_gn_stats_kernel (GRAD mode); tuned\n"
         : path == Path::TILED ? "backward dL/dy: conv_grad_y_general_kernel; tiled\n"
                               : "backward dL/dy: grad_y_from_conv_kernel; from the forward's saved conv output "
                                 "(PyTorch's conv path)\n";
    s += "backward parameters: gn_param_grad_kernel; always\n";
    const std::string torch_bwd = "PyTorch's convolution backward (at::convolution_backward); ";
    const std::string bounds = path == Path::TUNED ? "the tensor-core kernels' bounds do not hold" : "tiled";
    switch (plan.dx) {
    case DxPath::STREAM:
        s += "backward dL/dx: grad_input_stream_kernel; kernel 3, W <= 32, C_in <= 3, C_out <= 32, its shared memory "
             "fits, and 2 B >= SMs (a block a sample fills the GPU)\n";
        break;
    case DxPath::TC:
        s += "backward dL/dx: grad_input_tc_kernel; kernel 3, W <= 32, C_in <= 4, and not the streamed path\n";
        break;
    case DxPath::TILED:
        s += "backward dL/dx: grad_input_tiled_kernel; " + bounds + ", float32\n";
        break;
    default:
        s += "backward dL/dx: " + torch_bwd + (path == Path::TUNED ? bounds + ", half precision\n" : torch_rule + "\n");
    }
    switch (plan.dw) {
    case DwPath::ROWS:
        s += "backward dL/dW: grad_weight_rows_kernel + finish_weight_grad_tc_kernel; kernel 3, W <= 32 and a "
             "multiple of 4, C_in <= 3, C_out <= 24, the input 16-byte aligned\n";
        break;
    case DwPath::TC:
        s += "backward dL/dW: grad_weight_tc_kernel + finish_weight_grad_tc_kernel; kernel 3, W <= 32 and a "
             "multiple of 4, C_in <= 7, the input 16-byte aligned, and not the rows path\n";
        break;
    case DwPath::TILED:
        s += "backward dL/dW: grad_weight_tiled_kernel + finish_weight_grad_tiled_kernel; " + bounds + ", float32\n";
        break;
    default:
        s += "backward dL/dW: " + torch_bwd + (path == Path::TUNED ? bounds + ", half precision\n" : torch_rule + "\n");
    }
    return s;
}
"""

cpp_source = plan_types + r"""
// shared: host begin
#include <torch/extension.h>
#include <torch/version.h>
#include <ATen/autocast_mode.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

// OPS_NAMESPACE comes from the build (-D): the file's name and a hash of its source.
#define OPS_STR_(s) #s
#define OPS_STR(s) OPS_STR_(s)
#define OP(name) OPS_STR(OPS_NAMESPACE) "::" name
#define DEFINE_OPS(ns, m) TORCH_LIBRARY(ns, m)
#define IMPLEMENT_OPS(ns, key, m) TORCH_LIBRARY_IMPL(ns, key, m)

using torch::Tensor;
using OptTensor = c10::optional<Tensor>;
using Mask = std::array<bool, 3>;

// The kernels' dtype codes: float32 0, float16 1, bfloat16 2.
static int dtype_code(const Tensor& t) {
    return t.scalar_type() == at::kHalf ? 1 : t.scalar_type() == at::kBFloat16 ? 2 : 0;
}
static bool takes_dtype(const Tensor& t) {
    return t.scalar_type() == at::kFloat || t.scalar_type() == at::kHalf || t.scalar_type() == at::kBFloat16;
}

// torch.backends.cudnn.allow_tf32 as PyTorch's own convolutions read it, at each call (a CUDA graph keeps
// the value it was captured with). torch 2.9 split the flag by operator and the conv's is the one that counts;
// it is read per operator from 2.11 on, the oldest version this was built and checked with.
static inline bool allow_tf32_conv() {
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 11)
    return at::globalContext().allowTF32CuDNN(at::Float32Op::CONV);
#else
    return at::globalContext().allowTF32CuDNN();
#endif
}

// Whether a file's tensor-core conv gradients take one TF32 product a step: float32 under allow_tf32, as PyTorch's conv
// backward does; bfloat16, whose input and weights are exact in TF32 and whose dL/dy, rounded to TF32, keeps 3 bits
// more than PyTorch's bfloat16 dL/dy (docs/DESIGN.md). Else (float32 with the flag off, float16) split TF32.
inline bool one_tf32_product(const Tensor& x) {
    return x.scalar_type() == at::kBFloat16 || (x.scalar_type() == at::kFloat && allow_tf32_conv());
}

// The dtype torch.autocast runs CUDA operators in (the call was renamed in torch 2.4).
static at::ScalarType autocast_dtype() {
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
    return at::autocast::get_autocast_dtype(at::kCUDA);
#else
    return at::autocast::get_autocast_gpu_dtype();
#endif
}
// t in autocast's dtype where autocast would cast it (a floating tensor other than float64); a
// differentiable cast, so that gradients reach the float32 parameters.
static Tensor autocast_to(const Tensor& t, at::ScalarType dtype) {
    return t.is_floating_point() && t.scalar_type() != at::kDouble && t.scalar_type() != dtype ? t.to(dtype) : t;
}
static OptTensor autocast_to(const OptTensor& t, at::ScalarType dtype) {
    return t.has_value() && t->defined() ? OptTensor(autocast_to(*t, dtype)) : t;
}

// Higher-order gradients are not computed by these operators. Where the backward operator runs with grad
// mode on (inside a backward with create_graph=True) and an input it was given requires grad, its outputs
// come out of DoubleBackwardRefused, whose backward raises: a gradient penalty gets a clear error, never a
// second-order gradient that is silently missing or wrong. A first-order gradient taken with
// create_graph=True still works.
struct DoubleBackwardRefused : torch::autograd::Function<DoubleBackwardRefused> {
    static constexpr int INPUTS = 6;   // the backward operator's tensor inputs that its outputs depend on
    static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, const std::string& file,
                                                  const std::vector<Tensor>& grads, const Tensor& a, const Tensor& b,
                                                  const Tensor& c, const Tensor& d, const Tensor& e, const Tensor& f) {
        ctx->saved_data["file"] = file;
        return grads;
    }
    static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                   torch::autograd::variable_list) {
        TORCH_CHECK(false, ctx->saved_data["file"].toStringRef(), ": double backward (a gradient of this file's "
                    "gradients, e.g. a gradient penalty) is not supported");
        return {};
    }
};
static void refuse_double_backward(const char* file, std::vector<Tensor> inputs,
                                   std::initializer_list<Tensor*> outputs) {
    if (!at::GradMode::is_enabled()) return;
    TORCH_CHECK(inputs.size() <= DoubleBackwardRefused::INPUTS, file, ": refuse_double_backward takes at most ",
                DoubleBackwardRefused::INPUTS, " inputs");
    inputs.resize(DoubleBackwardRefused::INPUTS);
    for (auto& t : inputs)   // Function::apply takes defined tensors: a repeat of the first stands for a missing one
        if (!t.defined()) t = inputs[0];
    std::vector<Tensor> grads;
    for (Tensor* t : outputs)
        if (t->defined()) grads.push_back(*t);
    auto wrapped = DoubleBackwardRefused::apply(std::string(file), grads, inputs[0], inputs[1], inputs[2], inputs[3],
                                                inputs[4], inputs[5]);
    size_t i = 0;
    for (Tensor* t : outputs)
        if (t->defined()) *t = wrapped[i++];
}
// shared: host end
// shared: torch_conv begin
// PyTorch's own convolution, as the module the file replaces runs it (nn.Conv2d, nn.Conv3d, nn.ConvTranspose3d):
// at::_convolution under the user's cuDNN settings (benchmark, deterministic, enabled, allow_tf32 for convs), in the
// input's dtype, on contiguous input (cuDNN's channels-last path takes TF32 where the contiguous one stays fp32), so
// the conv's output is eager's bit for bit. The plan calls it where cuDNN beats the file's fused kernels; it is
// never a fallback for an error.
static Tensor torch_conv(const Tensor& x, const Tensor& weight, const OptTensor& bias, at::IntArrayRef stride,
                         at::IntArrayRef padding, bool transposed, at::IntArrayRef output_padding) {
    const auto& ctx = at::globalContext();
    const std::vector<int64_t> dilation(stride.size(), 1);
    return at::_convolution(x.contiguous(), weight, bias, stride, padding, dilation, transposed, output_padding, 1,
                            ctx.benchmarkCuDNN(), ctx.deterministicCuDNN(), ctx.userEnabledCuDNN(), allow_tf32_conv())
        .contiguous();
}
// Its gradients (dL/dx, dL/dW, dL/dbias where mask asks) from dL/dy, as autograd computes them for that conv:
// at::convolution_backward under the same settings (deterministic only with torch.backends.cudnn.deterministic or
// torch.use_deterministic_algorithms, as eager's).
static std::tuple<Tensor, Tensor, Tensor> torch_conv_backward(const Tensor& grad_y, const Tensor& x,
                                                             const Tensor& weight, at::IntArrayRef stride,
                                                             at::IntArrayRef padding, bool transposed,
                                                             at::IntArrayRef output_padding, std::array<bool, 3> mask) {
    const std::vector<int64_t> dilation(stride.size(), 1);
    const int64_t bias_size = weight.size(transposed ? 1 : 0);
    return at::convolution_backward(grad_y.contiguous(), x.contiguous(), weight, at::IntArrayRef(&bias_size, 1),
                                    stride, padding, dilation, transposed, output_padding, 1, mask);
}
// shared: torch_conv end

long long conv3d_groupnorm_mean_workspace(int B, int C_out, int D, int H, int W);
cudaError_t conv3d_groupnorm_mean_stats(const void* x, const void* weight, const void* bias, double* partials,
                                        int conv_type, int B, int C_in, int C_out, int D, int H, int W, bool vec,
                                        int sms, cudaStream_t stream);
Path conv3d_groupnorm_mean_path(int C_in, int kd, int kh, int kw, bool half, bool training);
long long conv3d_groupnorm_mean_tiled_workspace(int B, int C_out, int D, int H, int W, int kd, int kh, int kw);
cudaError_t conv3d_groupnorm_mean_tiled_stats(const float* x, const float* weight, double* partials, int B, int C_in,
                                              int C_out, int D, int H, int W, int kd, int kh, int kw, int sms,
                                              cudaStream_t stream);
long long conv3d_groupnorm_mean_conv_sums_workspace(int B, int C_out, long long S);
cudaError_t conv3d_groupnorm_mean_conv_sums(const void* y, double* partials, int conv_type, int B, int C_out,
                                            long long S, cudaStream_t stream);
cudaError_t conv3d_groupnorm_mean_finalize(const double* partials, const void* bias, const void* gn_weight,
                                           const void* gn_bias, void* out, double* stats, int conv_type,
                                           int norm_type, int B, int C_out, int groups, int D, int H, int W, int kd,
                                           int kh, int kw, Path path, double eps, int sms, cudaStream_t stream);
cudaError_t conv3d_groupnorm_mean_backward(Path path, const void* grad_out, const double* stats, const void* x,
                                           const void* weight, const void* bias, const void* gn_weight, const void* y,
                                           float* coef, double* param_terms, void* grad_y, void* grad_bias,
                                           void* grad_gn_weight, void* grad_gn_bias, int conv_type, int norm_type,
                                           int B, int C_in, int C_out, int groups, int D, int H, int W, int kd,
                                           int kh, int kw, int sms, cudaStream_t stream);
cudaError_t convert_launch(const void* in, int in_type, void* out, int out_type, long long n, cudaStream_t stream);
int conv3d_groupnorm_mean_grad_y_tail();
std::string conv3d_groupnorm_mean_plan(int B, int C_in, int C_out, int D, int H, int W, int kd, int kh, int kw,
                                       int conv_type, int sms, int x_misalign, bool training);
long long conv3d_groupnorm_mean_grads_workspace(DwPath path, int B, int C_in, int C_out, int D, int H, int W,
                                                int kd, int kh, int kw, int sms);
cudaError_t conv3d_groupnorm_mean_conv_grads(const Plan& plan, const float* grad_y, const float* x,
                                             const float* weight, float* grad_x, float* grad_weight, double* work,
                                             int B, int C_in, int C_out, int D, int H, int W, int kd, int kh, int kw,
                                             bool tf32, bool half, int sms, cudaStream_t stream);
Plan conv3d_groupnorm_mean_make_plan(int B, int C_in, int C_out, int D, int H, int W, int kd, int kh, int kw,
                                     bool half, bool training, int sms, int x_misalign);

static void check(cudaError_t err) {
    TORCH_CHECK(err == cudaSuccess, "conv3d_groupnorm_mean: kernel launch failed: ", cudaGetErrorString(err));
}

// shared: converted begin
// t as a contiguous tensor of `dtype`: itself if it is one, else converted by convert_launch (to nearest even):
// the half-precision paths' float copies of their inputs (exact) and their gradients' roundings.
static Tensor converted(const Tensor& t, at::ScalarType dtype) {
    if (!t.defined()) return t;
    auto src = t.contiguous();
    if (src.scalar_type() == dtype) return src;
    auto dst = at::empty(src.sizes(), src.options().dtype(dtype));
    if (src.numel() > 0) {
        const cudaError_t err = convert_launch(src.data_ptr(), dtype_code(src), dst.data_ptr(), dtype_code(dst),
                                               src.numel(), c10::cuda::getCurrentCUDAStream());
        TORCH_CHECK(err == cudaSuccess, "conversion to ", c10::toString(dtype), " failed: ", cudaGetErrorString(err));
    }
    return dst;
}
static OptTensor converted(const OptTensor& t, at::ScalarType dtype) {
    return t.has_value() && t->defined() ? OptTensor(converted(*t, dtype)) : t;
}
// shared: converted end

// The plan of a call on x and w (contiguous: x's address read for the vector loads), on a GPU of `sms` SMs.
static Plan plan_of(const Tensor& x, const Tensor& w, bool training, int sms) {
    return conv3d_groupnorm_mean_make_plan((int)x.size(0), (int)x.size(1), (int)w.size(0), (int)x.size(2),
                                           (int)x.size(3), (int)x.size(4), (int)w.size(2), (int)w.size(3),
                                           (int)w.size(4), x.scalar_type() != at::kFloat, training, sms,
                                           (int)(reinterpret_cast<uintptr_t>(x.data_ptr()) % 16));
}
// The forward's path from the conv's channels, kernel and dtype alone, and whether a gradient is wanted (the Meta
// kernel's, with symbolic batch and spatial sizes; the CUDA kernels read the whole plan, make_plan).
static Path path_of(const Tensor& weight, bool training) {
    return conv3d_groupnorm_mean_path((int)weight.sym_size(1).guard_int(__FILE__, __LINE__),
                                      (int)weight.sym_size(2).guard_int(__FILE__, __LINE__),
                                      (int)weight.sym_size(3).guard_int(__FILE__, __LINE__),
                                      (int)weight.sym_size(4).guard_int(__FILE__, __LINE__),
                                      weight.scalar_type() != at::kFloat, training);
}

// The operators (ModelNew checks its input first, with clearer messages): model (differentiable: the
// Autograd kernel at the end), and the forward and backward it is made of:
//   forward(x, weight, bias, gn_weight, gn_bias, groups, eps, training) -> (out (B), stats (B, C + 2G) float64: per
//     channel the mean of the conv output, then per group mu_g, then rstd_g; y: PyTorch's conv output (B, C_out,
//     Do, Ho, Wo) on its path, kept for the backward as eager keeps it, empty (0 elements) on the others);
//     training: a backward may follow (the plan's path for training);
//   backward(grad_out, x, weight, bias, gn_weight, stats, y, groups, conv_mask) -> the gradients of x, weight,
//     bias (where conv_mask asks; undefined otherwise), gn_weight and gn_bias.
std::tuple<Tensor, Tensor, Tensor> forward_cuda(const Tensor& input, const Tensor& weight, const Tensor& bias,
                                                const Tensor& gn_weight, const Tensor& gn_bias, int64_t groups,
                                                double eps, bool training) {
    TORCH_CHECK(input.is_cuda(), "conv3d_groupnorm_mean: input must be a CUDA tensor, got ", input.device());
    TORCH_CHECK_VALUE(takes_dtype(input), "conv3d_groupnorm_mean: input must be float32, float16 or bfloat16, got ",
                      c10::toString(input.scalar_type()));
    // Numbers go through std::to_string: streaming an integer into a TORCH_CHECK message has been
    // seen to crash the process (torch 2.11 with a locally built extension).
    TORCH_CHECK(input.dim() == 5, "conv3d_groupnorm_mean: input must be 5-D (B, C, D, H, W), got " +
                std::to_string(input.dim()) + "-D");
    TORCH_CHECK(input.size(1) == weight.size(1), "conv3d_groupnorm_mean: input has " + std::to_string(input.size(1)) +
                " channels, the conv expects " + std::to_string(weight.size(1)));
    TORCH_CHECK(input.size(2) >= weight.size(2) && input.size(3) >= weight.size(3) && input.size(4) >= weight.size(4),
                "conv3d_groupnorm_mean: input spatial size is smaller than the kernel");
    for (const auto& t : {weight, bias, gn_weight, gn_bias})
        TORCH_CHECK(t.device() == input.device(), "conv3d_groupnorm_mean: parameters must be on the input's device");
    // Dtypes as the reference takes them: the conv's input and parameters of one dtype, the GroupNorm's
    // parameters the same or float32 (torch.autocast's GroupNorm).
    TORCH_CHECK_VALUE(weight.scalar_type() == input.scalar_type() && bias.scalar_type() == input.scalar_type(),
                      "conv3d_groupnorm_mean: input is ", c10::toString(input.scalar_type()), " but the conv's "
                      "parameters are ", c10::toString(weight.scalar_type()), ": convert one to the other "
                      "(model.to(dtype)) or run under torch.autocast");
    TORCH_CHECK_VALUE(gn_weight.scalar_type() == gn_bias.scalar_type() &&
                      (gn_weight.scalar_type() == input.scalar_type() || gn_weight.scalar_type() == at::kFloat),
                      "conv3d_groupnorm_mean: the GroupNorm's parameters must be float32 or the input's dtype");
    const c10::cuda::CUDAGuard guard(input.device());
    auto x = input.contiguous();
    auto w = weight.contiguous();
    const int64_t B = x.size(0), C_in = x.size(1), C_out = w.size(0), D = x.size(2), H = x.size(3), W = x.size(4);
    const int kd = (int)w.size(2), kh = (int)w.size(3), kw = (int)w.size(4);
    const int64_t Do = D - kd + 1, Ho = H - kh + 1, Wo = W - kw + 1;
    int sms = 0;
    check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, x.get_device()));
    const Plan plan = plan_of(x, w, training, sms);
    const Path path = plan.path;
    auto out = at::empty({B}, gn_weight.options());
    auto stats = at::empty({B, C_out + 2 * groups}, x.options().dtype(torch::kFloat64));
    auto b = bias.contiguous();
    // PyTorch's conv path: y = PyTorch's conv (bias included), kept for the backward.
    auto y = path != Path::TORCH_CONV ? at::empty({0}, x.options())
               : B == 0 ? at::empty({0, C_out, Do, Ho, Wo}, x.options())
                        : torch_conv(x, w, b, {1, 1, 1}, {0, 0, 0}, false, {0, 0, 0});
    if (B == 0) return {out, stats, y};
    TORCH_CHECK(x.numel() / B < (int64_t(1) << 31), "conv3d_groupnorm_mean: one sample must have fewer than "
                "2^31 elements");
    const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
    // The conv kernel first: the host's remaining work then overlaps it.
    const int64_t partial_doubles =
        path == Path::TUNED   ? conv3d_groupnorm_mean_workspace(B, C_out, D, H, W)
        : path == Path::TILED ? conv3d_groupnorm_mean_tiled_workspace(B, C_out, D, H, W, kd, kh, kw)
                              : conv3d_groupnorm_mean_conv_sums_workspace(B, C_out, Do * Ho * Wo);
    auto partials = at::empty({partial_doubles}, x.options().dtype(torch::kFloat64));
    if (path == Path::TUNED)
        check(conv3d_groupnorm_mean_stats(x.data_ptr(), w.data_ptr(), b.data_ptr(), partials.data_ptr<double>(),
                                          dtype_code(x), B, C_in, C_out, D, H, W, plan.vec, sms, stream));
    else if (path == Path::TILED)
        check(conv3d_groupnorm_mean_tiled_stats(x.data_ptr<float>(), w.data_ptr<float>(), partials.data_ptr<double>(),
                                                B, C_in, C_out, D, H, W, kd, kh, kw, sms, stream));
    else
        check(conv3d_groupnorm_mean_conv_sums(y.data_ptr(), partials.data_ptr<double>(), dtype_code(x), B, C_out,
                                              Do * Ho * Wo, stream));
    const auto gw = gn_weight.contiguous();
    check(conv3d_groupnorm_mean_finalize(partials.data_ptr<double>(), path != Path::TORCH_CONV ? b.data_ptr() : nullptr,
                                         gw.data_ptr(), gn_bias.contiguous().data_ptr(), out.data_ptr(),
                                         stats.data_ptr<double>(), dtype_code(x), dtype_code(gn_weight), B, C_out,
                                         groups, D, H, W, kd, kh, kw, path, eps, sms, stream));
    return {out, stats, y};
}

std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor> backward_cuda(
        const Tensor& grad_out, const Tensor& input, const Tensor& weight, const Tensor& bias, const Tensor& gn_weight,
        const Tensor& stats, const Tensor& y, int64_t groups, Mask conv_mask) {
    const c10::cuda::CUDAGuard guard(input.device());
    auto x = input.contiguous();
    auto w = weight.contiguous();
    const int64_t B = x.size(0), C_in = x.size(1), C_out = w.size(0), D = x.size(2), H = x.size(3), W = x.size(4);
    const int kd = (int)w.size(2), kh = (int)w.size(3), kw = (int)w.size(4);
    const bool half = x.scalar_type() != at::kFloat;
    TORCH_CHECK(grad_out.scalar_type() == gn_weight.scalar_type(), "conv3d_groupnorm_mean: the output's gradient "
                "must have the output's dtype");
    // The gradients in their tensors' dtypes; our dL/dx and dL/dW computed in float32 and rounded at the end,
    // PyTorch's in the conv's dtype.
    const auto f32 = x.options().dtype(at::kFloat);
    // B > 0: gn_param_grad_kernel writes every entry of these three (no fill kernels to launch).
    const auto made = [B](int64_t n, const at::TensorOptions& o) { return B > 0 ? at::empty({n}, o) : at::zeros({n}, o); };
    auto grad_gn_weight = made(C_out, gn_weight.options());
    auto grad_gn_bias = made(C_out, gn_weight.options());
    auto grad_bias = conv_mask[2] ? made(C_out, bias.options()) : Tensor();
    Tensor grad_x, grad_w;
    if (B == 0)
        return {conv_mask[0] ? at::empty(x.sizes(), x.options()) : Tensor(),
                conv_mask[1] ? at::zeros(w.sizes(), w.options()) : Tensor(), grad_bias, grad_gn_weight, grad_gn_bias};
    int sms = 0;
    check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, x.get_device()));
    // The plan of a call that wants gradients, as the forward made it (the same inputs, training)
    const Plan plan = plan_of(x, w, true, sms);
    const bool ours = plan.path != Path::TORCH_CONV;
    const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
    const int64_t S = (D - kd + 1) * (H - kh + 1) * (W - kw + 1);
    // dL/dy: float32 with the tensor-core kernels' tail on the tuned and tiled paths; PyTorch's conv path: y's dtype
    // and shape.
    auto grad_y = ours ? at::empty({B * C_out * S + conv3d_groupnorm_mean_grad_y_tail()}, f32) : at::empty_like(y);
    auto coef = at::empty({B, C_out, 3}, f32);
    auto param_terms = at::empty({B, 3 * C_out}, x.options().dtype(torch::kFloat64));
    check(conv3d_groupnorm_mean_backward(
        plan.path, grad_out.contiguous().data_ptr(), stats.data_ptr<double>(), x.data_ptr(), w.data_ptr(),
        bias.contiguous().data_ptr(), gn_weight.contiguous().data_ptr(), ours ? nullptr : y.data_ptr(),
        coef.data_ptr<float>(), param_terms.data_ptr<double>(), grad_y.data_ptr(),
        grad_bias.defined() ? grad_bias.data_ptr() : nullptr, grad_gn_weight.data_ptr(), grad_gn_bias.data_ptr(),
        dtype_code(x), dtype_code(gn_weight), B, C_in, C_out, groups, D, H, W, kd, kh, kw, sms, stream));
    if (!conv_mask[0] && !conv_mask[1]) return {grad_x, grad_w, grad_bias, grad_gn_weight, grad_gn_bias};
    const bool ours_x = conv_mask[0] && plan.dx != DxPath::TORCH, ours_w = conv_mask[1] && plan.dw != DwPath::TORCH;
    if (ours_x || ours_w) {   // the tensor-core or tiled kernels, in float32
        const auto wf = converted(w, at::kFloat), xf = ours_w ? converted(x, at::kFloat) : Tensor();
        auto gx = ours_x ? at::empty(x.sizes(), f32) : Tensor();
        auto gw = ours_w ? at::empty(w.sizes(), f32) : Tensor();
        auto work = at::empty({ours_w ? conv3d_groupnorm_mean_grads_workspace(plan.dw, B, C_in, C_out, D, H, W, kd,
                                                                              kh, kw, sms) : 0},
                              x.options().dtype(torch::kFloat64));
        check(conv3d_groupnorm_mean_conv_grads(plan, grad_y.data_ptr<float>(), ours_w ? xf.data_ptr<float>() : nullptr,
                                               wf.data_ptr<float>(), ours_x ? gx.data_ptr<float>() : nullptr,
                                               ours_w ? gw.data_ptr<float>() : nullptr, work.data_ptr<double>(), B,
                                               C_in, C_out, D, H, W, kd, kh, kw, one_tf32_product(x), half, sms,
                                               stream));
        grad_x = converted(gx, x.scalar_type());
        grad_w = converted(gw, w.scalar_type());
    }
    const bool torch_x = conv_mask[0] && !ours_x, torch_w = conv_mask[1] && !ours_w;
    if (torch_x || torch_w) {   // PyTorch's convolution backward, on dL/dy in the conv's dtype (as eager's)
        const auto gy = ours ? converted(grad_y.narrow(0, 0, B * C_out * S).view({B, C_out, D - kd + 1, H - kh + 1,
                                                                                    W - kw + 1}), x.scalar_type())
                             : grad_y;
        auto r = torch_conv_backward(gy, x, w, {1, 1, 1}, {0, 0, 0}, false, {0, 0, 0}, {torch_x, torch_w, false});
        if (torch_x) grad_x = std::get<0>(r);
        if (torch_w) grad_w = std::get<1>(r);
    }
    return {grad_x, grad_w, grad_bias, grad_gn_weight, grad_gn_bias};
}

// Meta: shapes and dtypes only, in symbolic sizes (torch.compile with dynamic shapes).
std::tuple<Tensor, Tensor, Tensor> forward_meta(const Tensor& x, const Tensor& weight, const Tensor& bias,
                                                const Tensor& gn_weight, const Tensor& gn_bias, int64_t groups,
                                                double eps, bool training) {
    std::vector<c10::SymInt> y_shape{0};
    if (path_of(weight, training) == Path::TORCH_CONV) {
        y_shape = {x.sym_size(0), weight.sym_size(0)};
        for (int d = 2; d < 5; ++d) y_shape.push_back(x.sym_size(d) - weight.sym_size(d) + 1);
    }
    return {at::empty_symint({x.sym_size(0)}, gn_weight.options()),
            at::empty_symint({x.sym_size(0), weight.sym_size(0) + 2 * groups}, x.options().dtype(torch::kFloat64)),
            at::empty_symint(y_shape, x.options())};
}

std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor> backward_meta(
        const Tensor& grad_out, const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& gn_weight,
        const Tensor& stats, const Tensor& y, int64_t groups, Mask conv_mask) {
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

// backward's Autograd kernel: the gradients, each refusing to be differentiated again (refuse_double_backward).
std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor> backward_autograd(
        const Tensor& grad_out, const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& gn_weight,
        const Tensor& stats, const Tensor& y, int64_t groups, Mask conv_mask) {
    auto r = [&] {
        at::AutoDispatchBelowADInplaceOrView below_autograd;
        return backward_op().call(grad_out, x, weight, bias, gn_weight, stats, y, groups, conv_mask);
    }();
    refuse_double_backward("conv3d_groupnorm_mean", {grad_out, x, weight, bias, gn_weight, y},
                           {&std::get<0>(r), &std::get<1>(r), &std::get<2>(r), &std::get<3>(r), &std::get<4>(r)});
    return r;
}

// model without autograd (inference tensors, no gradient wanted): the forward's output.
Tensor model_plain(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& gn_weight,
                   const Tensor& gn_bias, int64_t groups, double eps) {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return std::get<0>(forward_op().call(x, weight, bias, gn_weight, gn_bias, groups, eps, false));
}

// model's Autograd kernel; the backward operator does the rest. Saved for the backward (each a graph input or
// an output of the forward operator, so that CUDA graph pools track them): x, weight, bias, gn_weight (the
// inputs as given); stats (B, C + 2G) float64, each channel's conv mean and each group's mean and 1/std; y,
// PyTorch's conv output on its path (empty on the tuned path, whose backward recomputes the conv).
struct Model : torch::autograd::Function<Model> {
    static Tensor forward(torch::autograd::AutogradContext* ctx, const Tensor& x, const Tensor& weight,
                          const Tensor& bias, const Tensor& gn_weight, const Tensor& gn_bias, int64_t groups,
                          double eps) {
        at::AutoDispatchBelowADInplaceOrView below_autograd;
        auto r = forward_op().call(x, weight, bias, gn_weight, gn_bias, groups, eps, true);
        ctx->save_for_backward({x, weight, bias, gn_weight, std::get<1>(r), std::get<2>(r)});
        ctx->saved_data["groups"] = groups;
        ctx->saved_data["mask"] = c10::List<bool>({x.requires_grad(), weight.requires_grad(), bias.requires_grad()});
        return std::get<0>(r);
    }

    static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                   torch::autograd::variable_list grads) {
        const auto s = ctx->get_saved_variables();
        const auto m = ctx->saved_data["mask"].toBoolList();
        auto r = backward_op().call(grads[0], s[0], s[1], s[2], s[3], s[4], s[5], ctx->saved_data["groups"].toInt(),
                                    Mask{m[0], m[1], m[2]});
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

static auto& model_op() {
    static auto op = c10::Dispatcher::singleton().findSchemaOrThrow(OP("model"), "").typed<decltype(model_plain)>();
    return op;
}

// model's Autocast kernel: as torch.autocast runs the reference, the conv in autocast's dtype (input and
// conv parameters cast), GroupNorm and the mean in float32 (GroupNorm is on autocast's float32 list).
Tensor model_autocast(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& gn_weight,
                      const Tensor& gn_bias, int64_t groups, double eps) {
    c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::DispatchKey::AutocastCUDA);
    const auto low = autocast_dtype();
    return model_op().call(autocast_to(x, low), autocast_to(weight, low), autocast_to(bias, low),
                           autocast_to(gn_weight, at::kFloat), autocast_to(gn_bias, at::kFloat), groups, eps);
}

// plan(x_shape, weight_shape, dtype code, sms, x_misalign, training): each stage's kernel and why (ModelNew.plan).
std::string plan_op(at::IntArrayRef x, at::IntArrayRef w, int64_t conv_type, int64_t sms, int64_t x_misalign,
                    bool training) {
    TORCH_CHECK(x.size() == 5 && w.size() == 5, "conv3d_groupnorm_mean: plan takes 5-D shapes");
    return conv3d_groupnorm_mean_plan((int)x[0], (int)x[1], (int)w[0], (int)x[2], (int)x[3], (int)x[4], (int)w[2],
                                      (int)w[3], (int)w[4], (int)conv_type, (int)sms, (int)x_misalign, training);
}

DEFINE_OPS(OPS_NAMESPACE, m) {
    m.def("plan(int[] x_shape, int[] weight_shape, int dtype, int sms, int x_misalign, bool training) -> str", plan_op);
    m.def("forward(Tensor x, Tensor weight, Tensor bias, Tensor gn_weight, Tensor gn_bias, int groups, float eps, "
          "bool training) -> (Tensor, Tensor, Tensor)");
    m.def("backward(Tensor grad_out, Tensor x, Tensor weight, Tensor bias, Tensor gn_weight, Tensor stats, Tensor y, "
          "int groups, bool[3] conv_mask) -> (Tensor, Tensor, Tensor, Tensor, Tensor)");
    m.def("model(Tensor x, Tensor weight, Tensor bias, Tensor gn_weight, Tensor gn_bias, int groups, float eps) "
          "-> Tensor");
}
// shared: register_ops begin
// The operators' implementations by dispatch key, for a file whose operators are forward, backward and model
// (model_plain, model_autograd, backward_autograd, model_autocast and the CUDA and Meta kernels named before).
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
    m.impl("backward", backward_autograd);
}
IMPLEMENT_OPS(OPS_NAMESPACE, AutocastCUDA, m) {
    m.impl("model", model_autocast);
}
// shared: register_ops end
"""

# shared: build begin
# PyTorch >= 2.7 can skip prepending torch headers to the .cu file (about 40 s less to build it).
_header_option = ({"no_implicit_headers": True}
                  if "no_implicit_headers" in inspect.signature(load_inline).parameters else {})


def _built(build_root, name):
    """Whether load_inline will find this source already built (its library beside the same sources)."""
    folder = os.path.join(build_root, name)
    def ends_with(file, text):
        path = os.path.join(folder, file)
        if not os.path.exists(path):
            return False
        with open(path) as f:
            return f.read().endswith(text)
    return (os.path.exists(os.path.join(folder, name + ".so")) and ends_with("main.cpp", cpp_source)
            and ends_with("cuda.cu", cuda_source))


def _build(file, name, namespace, extra_cuda_cflags):
    """Loads the operators of cpp_source and cuda_source under `namespace`, building them first where no build
    of this source exists, after one line on stderr saying which."""
    build_root = os.environ.get("TORCH_EXTENSIONS_DIR") or get_default_build_root()
    action = (f"loading its CUDA extension from {build_root}" if _built(build_root, name)
              else f"building its CUDA extension in {build_root} (about 30 s)")
    print(f"{file}: {action}", file=sys.stderr)
    load_inline(name=name, cpp_sources=cpp_source, cuda_sources=cuda_source,
                extra_cflags=[f"-DOPS_NAMESPACE={namespace}"], extra_cuda_cflags=extra_cuda_cflags,
                is_python_module=False, verbose=False, **_header_option)
# shared: build end
# shared: hopper begin
# On Hopper (compute capability 9.0) build for sm_90a, whose wgmma runs the tensor cores at twice
# mma.sync's rate. Recent PyTorch (2.11 checked) then adds no architecture flags of its own; 2.1 adds
# those of TORCH_CUDA_ARCH_LIST or of the visible GPU beside it (sm_90 too, the mma.sync path: which of the
# two an H100 runs is then the driver's choice; both are exact). Other GPUs: PyTorch's defaults.
# VARIANTS_NO_SM90A=1 builds the mma.sync path on Hopper too, under its own name (the tests run it so).
_no_sm90a = os.environ.get("VARIANTS_NO_SM90A") == "1"
_hopper = torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0) and not _no_sm90a
# shared: hopper end
# The operators' namespace and the build folder's name: the file's name and a hash of its source. A namespace can be
# registered once per process, so the library is loaded once per source, however often the file is exec-ed; each
# version of the file builds in a folder of its own, once.
_namespace = "conv3d_groupnorm_mean_" + hashlib.sha256((cpp_source + cuda_source).encode()).hexdigest()[:12]
if not hasattr(getattr(torch.ops, _namespace), "model"):
    _build("conv3d_groupnorm_mean", _namespace + ("_mma_sync_ext" if _no_sm90a else "_ext"), _namespace,
           ["-O3"] + (["-gencode=arch=compute_90a,code=sm_90a"] if _hopper else []))
_ops = getattr(torch.ops, _namespace)
_model = _ops.model.default   # an overload, not the packet: a little less host time per call

DTYPES = (torch.float32, torch.float16, torch.bfloat16)   # as the reference takes them (model.to(dtype))


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, num_groups):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size)
        self.group_norm = nn.GroupNorm(num_groups, out_channels)

    def forward(self, x):
        # Host time per call shows in a harness's timing: one test on the common path (_refuse says what is
        # wrong), and the submodules and parameters read from their dicts, where nn.Module's __getattr__ finds them.
        conv, gn = self._modules["conv"], self._modules["group_norm"]
        k = conv.kernel_size
        if not ((x.is_cuda or x.is_meta) and x.dtype in DTYPES and x.dim() == 5 and x.shape[1] == conv.in_channels
                and x.shape[2] >= k[0] and x.shape[3] >= k[1] and x.shape[4] >= k[2]):
            self._refuse(x)
        cp, gp = conv._parameters, gn._parameters
        return _model(x, cp["weight"], cp["bias"], gp["weight"], gp["bias"], gn.num_groups, gn.eps)

    def plan(self, x, sms=None, training=None):
        """{stage: "kernel; rule"}: which kernel runs at each stage of the forward (and, training, the backward) for
        input x, and why, from the decisions the launchers make. sms: the GPU's multiprocessor count (default: x's
        GPU's); training: whether a gradient is wanted (default: as a call now decides it, from grad mode and
        requires_grad; half precision from 8 input channels trains on PyTorch's conv path, see the CUDA source)."""
        if sms is None:
            sms = torch.cuda.get_device_properties(x.device).multi_processor_count
        if training is None:
            training = torch.is_grad_enabled() and (x.requires_grad or any(p.requires_grad for p in self.parameters()))
        misalign = x.data_ptr() % 16 if x.is_cuda and x.is_contiguous() else 0
        text = _ops.plan(list(x.shape), list(self.conv.weight.shape), DTYPES.index(x.dtype), sms, misalign, training)
        build = ("wgmma; this extension was built for sm_90a (Hopper)" if _hopper else
                 "mma.sync; built without sm_90a (a GPU other than Hopper, or VARIANTS_NO_SM90A=1)")
        return dict([line.split(": ", 1) for line in text.splitlines()] + [("tensor cores", build)])

    def _refuse(self, x):
        if not (x.is_cuda or x.is_meta):   # meta: shapes only, for tracing
            raise ValueError(f"input must be a CUDA tensor (or meta), got one on {x.device}")
        if x.dtype not in DTYPES:
            raise ValueError(f"input must be float32, float16 or bfloat16, got {x.dtype}")
        if x.dim() != 5:
            raise ValueError(f"input must be 5-D (B, C, D, H, W), got {x.dim()}-D")
        if x.shape[1] != self.conv.in_channels:
            raise ValueError(f"input has {x.shape[1]} channels, the conv expects {self.conv.in_channels}")
        if any(s < k for s, k in zip(x.shape[2:], self.conv.kernel_size)):
            raise ValueError(f"input spatial size {tuple(x.shape[2:])} is smaller than the kernel "
                             f"{self.conv.kernel_size}")


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
    sys.exit(main("conv3d_groupnorm_mean", ModelNew))
