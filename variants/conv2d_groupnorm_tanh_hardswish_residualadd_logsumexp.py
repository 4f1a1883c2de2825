"""Conv2d -> GroupNorm -> tanh -> HardSwish -> residual add -> logsumexp over channels (KernelBench level 2,
problem 92), with a backward for autograd.

Two passes over the input; the 64-channel conv output never touches memory on the tuned path. Phase 1 finds the
GroupNorm statistics by algebra, without the conv: a channel's sum is N b + w . s and its sum of squares follows
from w^T G w, with s and G the sum and the Gram matrix of the input's patches. Phase 2 recomputes the conv on the
tensor cores, applies the chain and writes one logsumexp value a pixel; a training forward also writes the conv
(float32, in the order its registers hold it) for the backward's two passes to read.

Plan (struct Plan, made once a call by conv2d_gn_lse_make_plan from conv2d_gn_lse_path, the tuned backward's grids by
backward_geometry; the launchers, workspaces and ModelNew.plan(x) read it; tests/test_plan.py pins it). Three paths,
each kept where it was measured fastest:
  forward (TUNED: kernel 3, C_in <= 16, C_out <= 64, output rows wider than 32, batch >= 8)
    gram_kernel                 the input's row correlations as split-TF32 GEMMs (mma.sync), in double bins
    gram_stats_kernel           G, each channel's variance, scale and shift
    half_norm_kernel            half precision: GroupNorm's statistics rounded as PyTorch stores them
    conv_kernel<LOGSUMEXP>      the conv as a split-TF32 GEMM (wgmma on sm_90a builds, mma.sync elsewhere), the
                                chain, logsumexp across the 4 lanes of a quad; in training the conv kept
  forward elsewhere: the conv (before its bias) written once and kept for the backward, by PyTorch's own
  convolution (TORCH_CONV: at::_convolution under the user's flags and dtype, eager's bits) or, in float32 with
  C_in <= 4 and batch x C_out >= 1024 (TILED), by gn_sums_tiled_kernel (a tiled FP32 conv with its sums, 1.16x to
  1.54x PyTorch's there; fewer planes leave it too few blocks)
    plane_sums_kernel           the statistics' sums over PyTorch's conv output, in its dtype, by (sample, channel)
    gn_stats_general_kernel     the statistics in order
    lse_kernel                  the chain and logsumexp over the conv, 32 pixels a block, its warps split channels
  backward (tuned path; <.., LOADED>: over the kept conv, the next unit copied in during this one's epilogue)
    conv_kernel<BSUMS>, grad_coef_kernel, gn_param_grad_kernel   the chain's sums, coefficients, dL/dgamma, dL/dbeta
    conv_kernel<GRAD>, bias_grad_kernel    dL/dy (rows padded to 16 bytes) and dL/dbias
    grad_weight_kernel<128 or 32>, grad_weight_reduce_kernel       dL/dW per output row (split TF32), totals in order
    grad_input_kernel                      dL/dx per dL/dy row (split TF32), bands of rows sized to the GPU
  backward elsewhere (over the kept conv)
    backward_plane_kernel<false/true>, backward_coef_general_kernel, channel_grads_general_kernel: dL/dy, dL/dbias
    PyTorch's convolution backward (at::convolution_backward): dL/dx and dL/dW
  convert_kernel                half precision: float copies of the inputs, the gradients' roundings
Every sum of ours is in a fixed order (no atomics): the same input gives the same bits; PyTorch's conv backward is as
deterministic as eager's (torch.backends.cudnn.deterministic).

Semantics (docs/DESIGN.md): our convs exact fp32 under both torch.backends.cudnn.allow_tf32 settings (cuDNN keeps
this conv in fp32 at the benchmark size; where PyTorch's conv serves it follows the flag, as eager's); in float16/bfloat16 each op is rounded as PyTorch rounds it (the conv, its bias, GroupNorm,
tanh, HardSwish, the residual sum, each step of logsumexp); under autocast all after GroupNorm is float32. The
backward runs in float32 on float copies and rounds each gradient to its dtype. Double backward raises.

Floor at the benchmark size (B=128, 8->64 channels, 128x128, k=3): 18.7 GFLOP of multiply-add per conv, 0.28 ms at
the 67 TFLOP/s FP32 rate (the input is 0.02 ms of bandwidth); on the tensor cores phase 2 is about 0.11 ms of TF32
plus 0.10 ms of MUFU work. Measured (H200, run_all.py, README): forward 0.45 ms fp32 (7.7x eager), 0.55 ms in half
(5.6x to 5.7x); forward + backward 2.02 ms (4.3x), 2.34 to 2.37 ms in half (2.8x). PyTorch's conv path (channel
sweep, 32x32 images, batch 1 to 32): forward 1.4x to 2.4x eager in fp32 and bf16, forward + backward 1.2x to 1.9x.
The design in detail and what was tried: docs/conv2d_groupnorm_tanh_hardswish_residualadd_logsumexp.md.

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

# The plan's types, in both translation units: the CUDA source decides a call's plan once
# (conv2d_gn_lse_make_plan, and backward_geometry for the tuned backward's grids), the C++ operator and the launchers
# read it.
plan_types = r"""
enum class Path { TUNED, TILED, TORCH_CONV };   // conv2d_gn_lse_path
struct Plan {
    Path path;
    // The tuned backward's conv gradients on the GPU at hand (backward_geometry; 0 until it has run):
    int w_blocks;    // dL/dW's blocks: one wave of resident blocks, each a contiguous run of work items
    int band_rows;   // dL/dx's band of rows, sized so that its blocks fill about one wave
    int w_cols;      // dL/dW's item columns: 128 where the rows are wider than 32 and the shared memory holds it
};
"""

cuda_source = plan_types + r"""
#include <cuda_runtime.h>
#include <algorithm>
#include <array>
#include <cstdint>
#include <mutex>
#include <string>
#include <type_traits>

// ---- The plan's thresholds (conv2d_gn_lse_path applies them; its comment has the measurements, H200):
constexpr int TUNED_MAX_C_IN = 16;      // the tuned kernels' staged input and Gram sums: at most 16 input channels
constexpr int TUNED_MIN_WO = 33;        // output rows at least 33 wide (a unit is 128 columns; at 30 it lost 2.9x)
constexpr int TUNED_MIN_BATCH = 8;      // below: per-sample Gram kernels leave the GPU idle (PyTorch's conv 2.4x at 1)
constexpr int TILED_MAX_C_IN = 4;       // the tiled CUDA-core conv: 1.15x to 1.54x PyTorch's at 3 channels, 1.07x at 8
constexpr int TILED_MIN_PLANES = 1024;  // batch x C_out: fewer, too few blocks (0.75x to 0.97x PyTorch's conv path)

constexpr int K = 3;             // the tuned path's kernel size (other sizes: the tiled or PyTorch's conv path)
constexpr int TAPS = K * K;
constexpr int N_TILES = 8;       // 8-channel tiles: the conv's channels, padded to 64
constexpr int C_PAD = 8 * N_TILES;
constexpr int WARPS = 8, THREADS = 32 * WARPS;   // two warpgroups share one copy of the weights
constexpr int BLOCKS_PER_SM = 2;                 // caps registers at 128
constexpr int UNIT_COLS = 2 * 64;                // a unit of work: output columns of one row, 64 a warpgroup
constexpr int STAGE_W = UNIT_COLS + K - 1;       // input columns a unit reads
constexpr int RING = K + 1;                      // staged input rows: a unit's K, the next unit's new one
constexpr int N_STATS = 2 * C_PAD;               // per channel: sum, sum of squares
constexpr int B_WORDS = C_PAD * 8;               // one 8-deep slice of the weights
constexpr int FINAL_THREADS = 256;
constexpr int KEPT_WORDS = THREADS * 4 * N_TILES;   // a unit's products (the kept conv), a block's accumulators
constexpr int LOADED_SLOT = KEPT_WORDS + 4 * THREADS;   // LOADED's slot: a unit's products, its pixels' upstream

// LOGSUMEXP: phase 2; BSUMS, GRAD: the backward's two passes (over the conv the training forward kept).
enum Mode { LOGSUMEXP = 0, BSUMS = 1, GRAD = 2 };

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
// Two values rounded to TO where it is a half type (round_pair), else as they are (float32: autocast's GroupNorm).
template <typename TO> __device__ __forceinline__ float2 round2(float a, float b) {
    if constexpr (is_half<TO>()) return round_pair<TO>(a, b);
    else return make_float2(a, b);
}



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

// The hardware's approximations (MUFU), flushing denormals so that no fix-up code surrounds them.
__device__ __forceinline__ float ex2(float v) { float r; asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(v)); return r; }
__device__ __forceinline__ float rcp(float v) { float r; asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(v)); return r; }
constexpr float LOG2E = 1.4426950408889634f;

// tanh(y) from y2 = 2 y log2(e): 1 - 2 / (1 + 2^y2). Absolute error about 2e-7, which is all that
// x_res (an absolute sum) and 1 - t^2 need, for two MUFU operations. Saturates to +-1 (2^y2 = inf
// gives rcp = 0).
__device__ __forceinline__ float tanh_of_exp2_arg(float y2) { return fmaf(-2.f, rcp(1.f + ex2(y2)), 1.f); }

// hardswish(v) = v * clamp(v + 3, 0, 6) / 6 as PyTorch writes it; for a tanh (|t| <= 1) the clamp is never active
// (hardswish_of_tanh: one multiply-add, for the float32 paths).
__device__ __forceinline__ float hardswish(float v) { return v * fminf(fmaxf(v + 3.f, 0.f), 6.f) * (1.f / 6.f); }
__device__ __forceinline__ float hardswish_of_tanh(float t) { return t * fmaf(t, 1.f / 6.f, 0.5f); }

// shared: hardswish_grad begin
// d hardswish / dv as the running PyTorch's hardswish_backward takes it at the joins: from torch 2.7 (pull request
// 148049) the band is open (v <= -3 -> 0, v >= 3 -> 1), before it closed (v = -3 -> -0.5, v = 3 -> 1.5); measured:
// torch 2.1.2 closed, 2.11 and 2.14 open. Half values land on -3 and 3 exactly (one in 128 bf16 values near them), so
// a half backward takes PyTorch's side there or a small gradient falls farther from float64 than PyTorch's own.
#include <torch/version.h>
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 7)
__device__ __forceinline__ float hardswish_grad(float v) {
    return v <= -3.f ? 0.f : (v < 3.f ? fmaf(v, 1.f / 3.f, 0.5f) : 1.f);
}
#else
__device__ __forceinline__ float hardswish_grad(float v) {
    return v < -3.f ? 0.f : (v <= 3.f ? fmaf(v, 1.f / 3.f, 0.5f) : 1.f);
}
#endif
// shared: hardswish_grad end

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

// The conv as a GEMM: rows = output pixels, columns = output channels, depth = (kh, kw, ci), the
// input channels padded to a multiple of 8, so that an 8-deep step is one tap and 8 channels. Each
// block keeps the weights, split, in shared memory per step and part (big, small), in the tensor
// cores' K-major layout: channel n, depth k at word (n / 8) * 64 + (k / 4) * 32 + (n % 8) * 4 + k % 4
// (8x4 blocks of 128 bytes); zero past C_out and C_in.
__device__ __forceinline__ uint32_t split_weight(const float* __restrict__ weight, int i, int C_out, int C_in) {
    const int w = i % B_WORDS, part = i / B_WORDS % 2, step = i / (2 * B_WORDS), groups8 = (C_in + 7) / 8;
    const int co = w / 64 * 8 + w / 4 % 8, ci = step % groups8 * 8 + w / 32 % 2 * 4 + w % 4, tap = step / groups8;
    const Split s = split(co < C_out && ci < C_in ? weight[((size_t)co * C_in + ci) * TAPS + tap] : 0.f);
    return part == 0 ? s.big : s.small;
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// Hopper: one warpgroup multiplies 64 rows by the 64 channels, both read from shared memory by
// descriptor, asynchronously; d = product + (accumulate ? d : 0).
__device__ __forceinline__ void wgmma(float (&d)[4 * N_TILES], uint64_t a_desc, uint64_t b_desc, bool accumulate) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32 "
                 "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
                 "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, "
                 "%32, %33, p, 1, 1;\n}"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
                   "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
                   "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
                   "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
                   "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
                 : "l"(a_desc), "l"(b_desc), "r"((int)accumulate));
}
// The input gradient's products: 64 rows (16 a warp, a from registers in mma.sync's layout) by 72
// columns read from shared memory; d += a * b.
__device__ __forceinline__ void wgmma(float (&d)[36], const uint32_t (&a)[4], uint64_t b_desc) {
    asm volatile("wgmma.mma_async.sync.aligned.m64n72k8.f32.tf32.tf32 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, "
                 "%18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35}, "
                 "{%36, %37, %38, %39}, %40, 1, 1, 1;"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
                   "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
                   "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
                   "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
                   "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]),
                   "+f"(d[35])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc));
}
// Orders an accumulator set's register accesses against the asynchronous products (a compiler
// barrier only): the products' reads and writes stay between the fences around them.
template <int N>
__device__ __forceinline__ void fence_acc(float (&d)[N]) {
#pragma unroll
    for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i]) :: "memory");
}
// The same for registers that products read (a, from registers): set before the fences around them.
__device__ __forceinline__ void fence_a(uint32_t (&a)[4]) {
#pragma unroll
    for (int i = 0; i < 4; ++i) asm volatile("" : "+r"(a[i]) :: "memory");
}
// Shared-memory descriptor of a K-major operand without swizzle: 8x4 blocks (8 rows of 16 bytes),
// k_bytes apart along k and mn_bytes apart along the rows.
__device__ __forceinline__ uint64_t smem_desc(const uint32_t* p, uint32_t k_bytes, uint32_t mn_bytes) {
    const uint32_t addr = (uint32_t)__cvta_generic_to_shared(p);
    return (uint64_t)((addr & 0x3ffff) >> 4) | (uint64_t)(k_bytes >> 4) << 16 | (uint64_t)(mn_bytes >> 4) << 32;
}
#endif
__device__ __forceinline__ void split4(const float (&v)[4], uint32_t (&big)[4], uint32_t (&small)[4]) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
        const Split s = split(v[e]);
        big[e] = s.big;
        small[e] = s.small;
    }
}

// acc += a * (weight slice), with the slice's big and small parts at b[0, B_WORDS) and b[B_WORDS, 2 B_WORDS)
// (on Hopper: descriptors, a's small part a_small descriptor units past its big part; acc starts
// from zero unless accumulate).
// EXACT (half-precision operands, exact in TF32, small parts zero): the one product big * big.
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
template <bool EXACT>
__device__ __forceinline__ void multiply(float (&acc)[4 * N_TILES], uint64_t a_desc, uint32_t a_small, uint64_t b_desc,
                                         bool accumulate) {
    if (EXACT) {
        wgmma(acc, a_desc, b_desc, accumulate);
        return;
    }
    wgmma(acc, a_desc + a_small, b_desc, accumulate);   // small terms first
    wgmma(acc, a_desc, b_desc + B_WORDS * 4 / 16, true);
    wgmma(acc, a_desc, b_desc, true);
}
#else
template <bool EXACT>
__device__ __forceinline__ void multiply(float (&acc)[4 * N_TILES], const uint32_t (&big)[4], const uint32_t (&small)[4],
                                         const uint32_t* b) {
    const int lane = threadIdx.x % 32, nk = lane / 4 * 4 + lane % 4;   // channel g, depth t
#pragma unroll
    for (int j = 0; j < N_TILES; ++j) {
        const uint32_t* bj = b + j * 64 + nk;
        if (!EXACT) {
            mma(acc + 4 * j, small, bj[0], bj[32]);
            mma(acc + 4 * j, big, bj[B_WORDS], bj[B_WORDS + 32]);
        }
        mma(acc + 4 * j, big, bj[0], bj[32]);
    }
}
#endif

// Backward, one element: from the conv output v, the upstream gradient g of its pixel and the
// pixel's output, u = dL/dx_res (= dL/dx_conv through the residual) and vn = dL/d(GroupNorm output).
struct Grads { float u, vn; };
__device__ __forceinline__ Grads backward_elem(float v, float g, float out, float scale, float shift) {
    const float t = tanh_of_exp2_arg(fmaf(v, scale, shift));
    const float u = g * ex2((v + hardswish_of_tanh(t) - out) * LOG2E);   // g * softmax over the channels
    return {u, u * hardswish_grad(t) * (1.f - t * t)};
}

// dL/dx_conv's rows are padded to 16 bytes, for the weight gradient's 16-byte copies.
__host__ __device__ __forceinline__ int grad_pitch(int Wo) { return (Wo + 3) / 4 * 4; }

struct BackwardIn {             // what the backward's two conv passes read and write
    const float* grad_out;      // (B, Ho, Wo) the upstream gradient
    const float* out;           // (B, Ho, Wo) the forward's output
    const float* group_stats;   // BSUMS: (B, groups, 2) mean, 1/std
    const float4* coef;         // GRAD: (B, C_out) from grad_coef_kernel
    float* grad_conv;           // GRAD: (B, C_out, Ho, grad_pitch(Wo)) dL/dx_conv
    int groups;
    float* conv;                // the conv (before its bias) by unit, in fragment order (stored_unit): the training
                                // forward writes it (LOGSUMEXP), the LOADED passes read it; null: not kept
};

// Phase 2 (LOGSUMEXP: the conv on the tensor cores, the chain, logsumexp; in training it also writes the conv
// for the backward) and the backward's two passes over that conv (BSUMS, GRAD; LOADED) share one loop and one
// epilogue. A unit of work is UNIT_COLS columns of one output row: 64 a warpgroup, 16 a warp. Blocks are
// persistent, each taking a contiguous run of the B * units_per_sample units (walked as sample,
// column chunk, row), so that consecutive units share K - 1 input rows. The input rows are staged in
// shared memory once, split, in the A operand's K-major layout (for each group of 4 channels,
// STAGE_W columns of 16 bytes), row h in slot h % RING; tap (kh, kw) of output row oh is slot
// (oh + kh) % RING read from column kw on. Per unit: stage the next unit's new row while this unit's
// products run (asynchronous on Hopper), one barrier, this unit's epilogue, then issue the next
// unit's products, which run during the next staging; the epilogue overlaps the other block's
// products. (Two accumulator sets, the next products in flight during the epilogue, measured 1.5x
// slower: ptxas serialises the products then, and 128 registers no longer hold both sets.) G8: the
// input channels' groups of 8 (C_in <= 8 * G8). Dynamic shared memory: the split weights
// (TAPS * G8 * 2 * B_WORDS words), then the ring.
// T, TO (LOGSUMEXP): the half-precision forward, its inputs given as floats (exact): one product per
// step, and each value rounded where PyTorch rounds it: the conv's output, plus the bias (T), then the
// GroupNorm's output, tanh, HardSwish, the residual sum and each step of logsumexp (TO, the output's type).
// LOADED: the backward's passes over the conv a training forward kept (bw.conv): each unit's products
// loaded, not computed (no staging, no shared weights); the same values, so the same sums and bits. The
// dynamic shared memory is then two slots of LOADED_SLOT: the next unit's products (and in BSUMS and GRAD its
// pixels' upstream gradient and output) are copied into one (cp.async) during this unit's epilogue.
template <int MODE, int G8, typename T = float, typename TO = float, bool LOADED = false>
__global__ void __launch_bounds__(THREADS, BLOCKS_PER_SM) conv_kernel(
    const float* __restrict__ x,        // (B, C_in, H, W), contiguous
    const float* __restrict__ weight,   // (C_out, C_in, K, K), contiguous
    const float* __restrict__ bias,     // (C_out)
    const float* __restrict__ norm,     // (B, C_out, 2) from gram_stats_kernel
    double* __restrict__ partials,      // BSUMS, GRAD: (B, units_per_sample, N_STATS)
    TO* __restrict__ out,               // LOGSUMEXP: (B, Ho, Wo)
    const BackwardIn bw,                // BSUMS, GRAD
    int B, int C_in, int C_out, int H, int W, int units_per_sample)
{
    static_assert(MODE == LOGSUMEXP || LOADED, "the backward's passes read the conv the training forward kept");
    constexpr int PARAMS = MODE == LOGSUMEXP ? 1 : 2;
    constexpr int PART_WORDS = 2 * G8 * STAGE_W * 4;   // a staged row's big part, then its small part
    constexpr bool HALF = is_half<T>();
    extern __shared__ __align__(128) uint32_t w_s[];
    __shared__ float red[2][MODE == LOGSUMEXP ? 1 : WARPS][N_STATS];   // by unit parity: per warp, each channel's two sums
    __shared__ float4 chan[2][PARAMS][C_PAD];                          // by unit parity: per channel, see fill()
    const int Ho = H - K + 1, Wo = W - K + 1;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const int w0 = warp / 4 * 64 + warp % 4 * 16;   // the warp's first column in the unit

    if (!LOADED)
        for (int i = threadIdx.x; i < TAPS * G8 * 2 * B_WORDS; i += THREADS)
            w_s[i] = split_weight(weight, i, C_out, C_in);
    // Ring slot s: PART_WORDS words of big parts, then as many of small parts: channel 4 q + e,
    // staged column col at word (q * STAGE_W + col) * 4 + e.
    uint32_t* ring = w_s + TAPS * G8 * 2 * B_WORDS;

    // Input rows h0 .. h0 + n - 1 of sample b, columns c0 .. c0 + STAGE_W - 1 (zero past W and C_in),
    // into their slots; two pieces of 4 channels a thread in flight at once.
    const auto stage = [&](int b, int c0, int h0, int n) {
        if (LOADED) return;
        const float* xb = x + (size_t)b * C_in * H * W;
        constexpr int PER_ROW = 2 * G8 * STAGE_W;
        for (int i0 = threadIdx.x; i0 < n * PER_ROW; i0 += 2 * THREADS) {
            float v[2][4];
#pragma unroll
            for (int k = 0; k < 2; ++k) {
                const int i = i0 + k * THREADS, q = i % PER_ROW / STAGE_W, c = c0 + i % STAGE_W, h = h0 + i / PER_ROW;
#pragma unroll
                for (int e = 0; e < 4; ++e)
                    v[k][e] = i < n * PER_ROW && c < W && 4 * q + e < C_in ? __ldg(xb + ((4 * q + e) * H + h) * W + c) : 0.f;
            }
#pragma unroll
            for (int k = 0; k < 2; ++k) {
                const int i = i0 + k * THREADS;
                if (i >= n * PER_ROW) break;
                uint32_t* dst = ring + (h0 + i / PER_ROW) % RING * 2 * PART_WORDS + i % PER_ROW * 4;
                const Split s0 = split(v[k][0]), s1 = split(v[k][1]), s2 = split(v[k][2]), s3 = split(v[k][3]);
                *reinterpret_cast<uint4*>(dst) = make_uint4(s0.big, s1.big, s2.big, s3.big);
                *reinterpret_cast<uint4*>(dst + PART_WORDS) = make_uint4(s0.small, s1.small, s2.small, s3.small);
            }
        }
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");   // read by wgmma
#endif
    };
    // Per channel, for sample b, into chan[p]. LOGSUMEXP: (scale, the shift with the conv bias folded
    // in, the bias (-inf for padding channels, whose x_res is then -inf)); otherwise (bias, scale,
    // shift) and BSUMS: (mean, rstd) of the channel's group, GRAD: coef.
    const auto fill = [&](int p, int b) {
        if (threadIdx.x >= C_PAD) return;
        const int c = threadIdx.x, cc = c < C_out ? c : 0;
        const float bc = c < C_out ? bias[c] : 0.f, scale = norm[((size_t)b * C_out + cc) * 2],
                    shift = norm[((size_t)b * C_out + cc) * 2 + 1];
        if (MODE == LOGSUMEXP) {   // half: the GroupNorm applies to the rounded conv + bias: no bias folded in
            chan[p][0][c] = make_float4(scale, HALF ? shift : fmaf(bc, scale, shift), c < C_out ? bc : -INFINITY, 0.f);
        } else {
            chan[p][0][c] = make_float4(bc, scale, shift, 0.f);
            float4 k = {0.f, 0.f, 0.f, 0.f};
            if (MODE == BSUMS) {
                const float* gs = bw.group_stats + ((size_t)b * bw.groups + cc / (C_out / bw.groups)) * 2;
                k.x = gs[0];
                k.y = gs[1];
            }
            if (MODE == GRAD) k = bw.coef[(size_t)b * C_out + cc];
            chan[p][PARAMS - 1][c] = k;
        }
    };
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");   // the weights are read by wgmma
    // Descriptors (16-byte units): the weights, and this warpgroup's 64 rows of ring slot 0, big part.
    const uint64_t b_desc0 = smem_desc(w_s, 128, 256), a_desc0 = smem_desc(ring + warp / 4 * 64 * 4, STAGE_W * 16, 128);
#endif
    // Unit (b, unit)'s products in bw.conv: this lane's acc as N_TILES float4s, a warp's 512 bytes apart.
    const auto stored_unit = [&](int b, int unit) {
        const size_t u = (size_t)b * units_per_sample + unit;
        return reinterpret_cast<float4*>(bw.conv) + (u * WARPS + warp) * N_TILES * 32 + lane;
    };
    // BSUMS, GRAD: the per-pixel upstream gradient and output at this lane's two rows of unit (b, unit): gv, ov,
    // copied with its products a unit ahead. The pixel of row r, clamped to the sample's first where the row is
    // past Wo.
    float gv[2], ov[2];
    const auto upstream_pixel = [&](int b, int unit, int r) {
        const int col = unit / Ho * UNIT_COLS + w0 + g + 8 * r;
        return (size_t)b * Ho * Wo + (col < Wo ? unit % Ho * Wo + col : 0);
    };
    // LOADED: this thread's products of unit (b, unit), and its gv and ov, copied into slot `slot` (one commit group).
    const auto prefetch = [&](int b, int unit, int slot) {
        const float4* src = stored_unit(b, unit);
        const uint32_t dst = (uint32_t)__cvta_generic_to_shared(w_s + slot * LOADED_SLOT) + threadIdx.x * 16;
#pragma unroll
        for (int j = 0; j < N_TILES; ++j)
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"(dst + j * THREADS * 16), "l"(src + 32 * j)
                         : "memory");
        if (MODE != LOGSUMEXP) {
            const uint32_t up = (uint32_t)__cvta_generic_to_shared(w_s + slot * LOADED_SLOT + KEPT_WORDS) +
                                threadIdx.x * 4;
#pragma unroll
            for (int r = 0; r < 2; ++r) {
                const size_t q = upstream_pixel(b, unit, r);
                asm volatile("cp.async.ca.shared.global [%0], [%1], 4;"
                             :: "r"(up + r * THREADS * 4), "l"(bw.grad_out + q) : "memory");
                asm volatile("cp.async.ca.shared.global [%0], [%1], 4;"
                             :: "r"(up + (2 + r) * THREADS * 4), "l"(bw.out + q) : "memory");
            }
        }
        asm volatile("cp.async.commit_group;" ::: "memory");
    };
    // acc = unit (b, unit)'s products (on Hopper: issued, committed as one group). LOADED: n, the unit's place in
    // the block's run (its slot n % 2, prefetched), and `more`: a unit follows it, to be prefetched now.
    const auto issue = [&](float (&acc)[4 * N_TILES], int b, int unit, int n, bool more) {
        if (LOADED) {
            if (more) {
                const bool last = unit + 1 == units_per_sample;
                prefetch(last ? b + 1 : b, last ? 0 : unit + 1, (n + 1) % 2);
                asm volatile("cp.async.wait_group 1;" ::: "memory");
            } else {
                asm volatile("cp.async.wait_group 0;" ::: "memory");
            }
            const uint32_t* slot = w_s + n % 2 * LOADED_SLOT;
            const float4* src = reinterpret_cast<const float4*>(slot) + threadIdx.x;
#pragma unroll
            for (int j = 0; j < N_TILES; ++j) {
                const float4 v = src[j * THREADS];
                acc[4 * j] = v.x;
                acc[4 * j + 1] = v.y;
                acc[4 * j + 2] = v.z;
                acc[4 * j + 3] = v.w;
            }
            if (MODE != LOGSUMEXP) {
                const float* up = reinterpret_cast<const float*>(slot + KEPT_WORDS) + threadIdx.x;
#pragma unroll
                for (int r = 0; r < 2; ++r) {
                    gv[r] = up[r * THREADS];
                    ov[r] = up[(2 + r) * THREADS];
                }
            }
            return;
        }
        const int oh = unit % Ho;
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
        fence_acc(acc);
        asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
        for (int kh = 0; kh < K; ++kh) {
            const uint64_t a_row = a_desc0 + (oh + kh) % RING * (PART_WORDS / 2);
#pragma unroll
            for (int kw = 0; kw < K; ++kw)
#pragma unroll
                for (int cg = 0; cg < G8; ++cg) {
                    const int step = (kh * K + kw) * G8 + cg;
                    multiply<HALF>(acc, a_row + 2 * cg * STAGE_W + kw, PART_WORDS / 4,
                                   b_desc0 + step * (2 * B_WORDS * 4 / 16), step > 0);
                }
        }
        asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
        fence_acc(acc);
#else
#pragma unroll
        for (int i = 0; i < 4 * N_TILES; ++i) acc[i] = 0.f;
        // A fragments: rows (columns) w0 + g and + 8, depths (channels) t and t + 4.
        const uint32_t* a_lane = ring + (w0 + g) * 4 + t;
#pragma unroll
        for (int kh = 0; kh < K; ++kh)
#pragma unroll
            for (int kw = 0; kw < K; ++kw)
#pragma unroll
                for (int cg = 0; cg < G8; ++cg) {
                    const uint32_t* a = a_lane + (oh + kh) % RING * 2 * PART_WORDS + (2 * cg * STAGE_W + kw) * 4;
                    const uint32_t big[4] = {a[0], a[32], a[4 * STAGE_W], a[4 * STAGE_W + 32]};
                    const uint32_t small[4] = {a[PART_WORDS], a[PART_WORDS + 32], a[PART_WORDS + 4 * STAGE_W],
                                               a[PART_WORDS + 4 * STAGE_W + 32]};
                    multiply<HALF>(acc, big, small, w_s + ((kh * K + kw) * G8 + cg) * 2 * B_WORDS);
                }
#endif
    };
    // Unit (b, unit)'s epilogue from its products acc; p: the unit's parity (chan[p], red[p]).
    const auto epilogue = [&](const float (&acc)[4 * N_TILES], int p, int b, int unit) {
        if (MODE == LOGSUMEXP && !LOADED && bw.conv != nullptr) {   // the training forward keeps the conv
            float4* dst = stored_unit(b, unit);
#pragma unroll
            for (int j = 0; j < N_TILES; ++j)
                __stcs(dst + 32 * j, make_float4(acc[4 * j], acc[4 * j + 1], acc[4 * j + 2], acc[4 * j + 3]));
        }
        const int oh = unit % Ho, col0 = unit / Ho * UNIT_COLS + w0 + g;
        // acc[4 * j + 2 * r + e]: column col0 + 8 r, channel 8 j + 2 t + e.
        const auto counted = [&](int r) { return col0 + 8 * r < Wo; };
        // Row r's pixel in an image of rows `pitch` apart (if counted).
        const auto pixel = [&](int r, int pitch) { return oh * pitch + col0 + 8 * r; };
        if (MODE != LOGSUMEXP) {
            // Per channel, the unit's sums over this lane's counted rows, the 8 lanes holding the same
            // channels, then (at the next barrier) the warps in double, all in a fixed order. BSUMS: vn
            // and vn xhat; GRAD: dL/dx_conv (also written), for the bias gradient. gv, ov: issue's.
            // The 8 lanes' sums are added by halving: at lane bit 4, then 3, then 2 (g's bits), a lane keeps
            // the half of its sums that its bit selects and adds its partner's copy of that half, so lane g
            // ends with an eighth of them complete. The first halving pairs the two sums of a channel
            // (BSUMS; bit 4 picks the kind) or of a channel pair 2 t, 2 t + 1 (GRAD; bit 4 picks e), taken
            // as soon as both exist: part[m] (m = 2 j + e, or j) then holds 16 or 8 of them.
            const bool hi = lane & 16;
            float part[MODE == BSUMS ? 2 * N_TILES : N_TILES], prev = 0.f;
#pragma unroll
            for (int j = 0; j < N_TILES; ++j)
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    const int c = j * 8 + 2 * t + e;
                    const float4 prm = chan[p][0][c], k = chan[p][PARAMS - 1][c];
                    float s = 0.f, q = 0.f;
#pragma unroll
                    for (int r = 0; r < 2; ++r) {
                        const float v = acc[4 * j + 2 * r + e] + prm.x;
                        const Grads gr = backward_elem(v, gv[r], ov[r], prm.y, prm.z);
                        if (MODE == BSUMS && counted(r)) {
                            s += gr.vn;
                            q = fmaf(gr.vn, (v - k.x) * k.y, q);
                        }
                        if (MODE == GRAD && counted(r)) {
                            const float d = gr.u + fmaf(k.x, gr.vn, fmaf(k.y, v - k.w, k.z));
                            s += d;
                            if (c < C_out)
                                bw.grad_conv[((size_t)b * C_out + c) * Ho * grad_pitch(Wo) + pixel(r, grad_pitch(Wo))] = d;
                        }
                    }
                    if (MODE == BSUMS) part[2 * j + e] = (hi ? q : s) + __shfl_xor_sync(0xffffffffu, hi ? s : q, 16);
                    if (MODE == GRAD && e == 1) part[j] = (hi ? s : prev) + __shfl_xor_sync(0xffffffffu, hi ? prev : s, 16);
                    prev = s;
                }
            constexpr int M = MODE == BSUMS ? 2 * N_TILES : N_TILES;
#pragma unroll
            for (int half = M / 2, off = 8; off >= 4; half /= 2, off /= 2) {
                const bool upper = lane & off;
#pragma unroll
                for (int i = 0; i < half; ++i)
                    part[i] = (upper ? part[i + half] : part[i]) + __shfl_xor_sync(0xffffffffu, upper ? part[i] : part[i + half], off);
            }
            // Lane g holds part[(g % 4) * M / 4 + i] of kind (BSUMS) or e (GRAD) g / 4.
#pragma unroll
            for (int i = 0; i < M / 4; ++i) {
                const int m = g % 4 * M / 4 + i;
                if (MODE == BSUMS) red[p][warp][g / 4 * C_PAD + m / 2 * 8 + 2 * t + m % 2] = part[i];
                if (MODE == GRAD) red[p][warp][8 * m + 2 * t + g / 4] = part[i];
            }
        } else if (HALF) {
            // LOGSUMEXP in half precision, per row, as PyTorch computes it op by op (chan: GroupNorm's a and b,
            // half_norm_kernel; HardSwish as PyTorch writes it), then logsumexp as PyTorch composes it: max,
            // exp(x - max), sum, log, + max, each rounded. The lane's channels 8j + 2t and 8j + 2t + 1 go as a pair:
            // each rounding one packed conversion, the conv's bias added to the rounded conv in T (add_pair).
#pragma unroll
            for (int r = 0; r < 2; ++r) {
                float xr[2 * N_TILES], m = -INFINITY;
#pragma unroll
                for (int j = 0; j < N_TILES; ++j) {
                    const float4 p0 = chan[p][0][8 * j + 2 * t], p1 = chan[p][0][8 * j + 2 * t + 1];
                    const bool real0 = p0.z != -INFINITY, real1 = p1.z != -INFINITY;   // padding channels take no part
                    const uint32_t conv = pack_pair<T>(acc[4 * j + 2 * r], acc[4 * j + 2 * r + 1]);
                    const float2 xc = unpack_pair<T>(add_pair<T>(conv, pack_pair<T>(real0 ? p0.z : 0.f, real1 ? p1.z : 0.f)));
                    const float2 z = round2<TO>(fmaf(xc.x, p0.x, p0.y), fmaf(xc.y, p1.x, p1.y));
                    const float2 th = round2<TO>(tanh_of_exp2_arg(z.x * (2.f * LOG2E)),
                                                 tanh_of_exp2_arg(z.y * (2.f * LOG2E)));
                    const float2 hs = round2<TO>(hardswish(th.x), hardswish(th.y));
                    const float2 x2 = round2<TO>(xc.x + hs.x, xc.y + hs.y);
                    xr[2 * j] = real0 ? x2.x : -INFINITY;
                    xr[2 * j + 1] = real1 ? x2.y : -INFINITY;
                    m = fmaxf(m, fmaxf(xr[2 * j], xr[2 * j + 1]));
                }
                m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
                m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));   // finite: channel 0 is real
                float s = 0.f;
#pragma unroll
                for (int j = 0; j < N_TILES; ++j) {
                    const float2 d = round2<TO>(xr[2 * j] - m, xr[2 * j + 1] - m);
                    const float2 e = round2<TO>(ex2(d.x * LOG2E), ex2(d.y * LOG2E));
                    s += e.x;
                    s += e.y;
                }
                s += __shfl_xor_sync(0xffffffffu, s, 1);
                s += __shfl_xor_sync(0xffffffffu, s, 2);
                if (t == r && counted(r))
                    out[(size_t)b * Ho * Wo + pixel(r, Wo)] = from_float<TO>(round_to<TO>(__logf(round_to<TO>(s))) + m);
            }
        } else {
            // LOGSUMEXP, per row: x_res = x + hardswish(tanh(x * scale + shift)) over this lane's 16
            // channels, their max and sum of exp merged across the quad (t = 0..3 hold the same
            // rows); lane t = r writes row r.
#pragma unroll
            for (int r = 0; r < 2; ++r) {
                float xr[2 * N_TILES], m = -INFINITY;
#pragma unroll
                for (int ch = 0; ch < 2 * N_TILES; ++ch) {
                    const float a = acc[4 * (ch / 2) + 2 * r + ch % 2];
                    const float4 prm = chan[p][0][8 * (ch / 2) + 2 * t + ch % 2];
                    xr[ch] = (a + prm.z) + hardswish_of_tanh(tanh_of_exp2_arg(fmaf(a, prm.x, prm.y)));
                    m = fmaxf(m, xr[ch]);
                }
                m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
                m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));   // finite: channel 0 is real
                const float ml = m * LOG2E;
                float s = 0.f;
#pragma unroll
                for (int ch = 0; ch < 2 * N_TILES; ++ch) s += ex2(fmaf(xr[ch], LOG2E, -ml));
                s += __shfl_xor_sync(0xffffffffu, s, 1);
                s += __shfl_xor_sync(0xffffffffu, s, 2);
                if (t == r && counted(r)) out[(size_t)b * Ho * Wo + pixel(r, Wo)] = from_float<TO>(m + __logf(s));
            }
        }
    };
    // BSUMS, GRAD: unit (b, unit)'s sums, from red[p] (complete after a barrier), in double.
    const auto flush = [&](int p, int b, int unit) {
        if (MODE == LOGSUMEXP || threadIdx.x >= (MODE == BSUMS ? N_STATS : C_PAD)) return;   // GRAD: one sum
        double v = 0.0;
#pragma unroll
        for (int w = 0; w < WARPS; ++w) v += red[p][w][threadIdx.x];
        partials[((size_t)b * units_per_sample + unit) * N_STATS + threadIdx.x] = v;
    };

    const long long n_units = (long long)B * units_per_sample, u_begin = n_units * blockIdx.x / gridDim.x;
    const int count = (int)(n_units * (blockIdx.x + 1) / gridDim.x - u_begin);
    int b = (int)(u_begin / units_per_sample), unit = (int)(u_begin % units_per_sample), prev_b = 0, prev_unit = 0;
    float acc[4 * N_TILES];
    stage(b, unit / Ho * UNIT_COLS, unit % Ho, K);
    fill(0, b);
    __syncthreads();
    if (LOADED) prefetch(b, unit, 0);
    issue(acc, b, unit, 0, count > 1);
    // Unit n: its products (issued last step) in acc; the next unit's staging overlaps them, and
    // its products, issued after this unit's epilogue, overlap the staging after.
#pragma unroll 1
    for (int n = 0; n < count; ++n) {
        const int oh = unit % Ho, c0 = unit / Ho * UNIT_COLS;
        const bool has_next = n + 1 < count;
        const int next_b = unit + 1 == units_per_sample ? b + 1 : b, next = unit + 1 == units_per_sample ? 0 : unit + 1;
        if (has_next) {
            if (next_b == b && next / Ho * UNIT_COLS == c0) {
                stage(b, c0, oh + K, 1);   // slot of row oh - 1, whose products are done
            } else {                       // a new sample or column chunk: every slot, once all products are done
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
                if (!LOADED) asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
#endif
                __syncthreads();
                stage(next_b, next / Ho * UNIT_COLS, next % Ho, K);
            }
        }
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
        if (!LOADED) asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
        fence_acc(acc);
#endif
        __syncthreads();   // the staged rows; every warpgroup's products; red[1 - p], chan[p] complete
        if (n > 0) flush((n - 1) % 2, prev_b, prev_unit);
        epilogue(acc, n % 2, b, unit);
        if (has_next) {
            fill((n + 1) % 2, next_b);
            issue(acc, next_b, next, n + 1, n + 2 < count);
        }
        prev_b = b;
        prev_unit = unit;
        b = next_b;
        unit = next;
    }
    __syncthreads();
    flush((count - 1) % 2, prev_b, prev_unit);
}

// Sample b's two sums per channel: its units' partials added in a fixed order (double), into
// sums[kind * C_out + c]: a thread per (kind, channel) and half of the units (neighbouring threads
// read neighbouring partials), then the two halves. Ends with a barrier.
static_assert(FINAL_THREADS == 2 * N_STATS, "sample_sums: two threads a statistic");
__device__ void sample_sums(const double* __restrict__ partials, double* sums, int b, int C_out, int units_per_sample) {
    __shared__ double halves[FINAL_THREADS];
    const int stat = threadIdx.x % N_STATS, half = threadIdx.x / N_STATS, kind = stat / C_PAD, c = stat % C_PAD;
    const double* p = partials + (size_t)b * units_per_sample * N_STATS + stat;
    double v = 0.0;
#pragma unroll 8
    for (int unit = half; unit < units_per_sample; unit += 2) v += p[(size_t)unit * N_STATS];
    halves[threadIdx.x] = v;
    __syncthreads();
    if (half == 0 && c < C_out) sums[kind * C_out + c] = v + halves[N_STATS + stat];
    __syncthreads();
}

// Phase 1 by algebra: the GroupNorm statistics without the conv. With z = x - m (m per sample and
// input channel: the mean of row H / 2, any value being exact, this one keeping the sums small), a
// channel's output is y = b' + w . patch(z) with b' = b + w . m, so its sum over the N = Ho Wo
// pixels is N b' + w . s and its variance (w^T G w) / N - (w . s / N)^2, where s is the sum of the
// patches and G = sum patch patch^T (T x T, T = C_in * 9) their Gram matrix. G's entry for taps
// (ci, kh, kw), (cj, lh, lw) sums z_ci(q) z_cj(q + (lh - kh, lw - kw)) over q in the window
// [kh, kh + Ho) x [kw, kw + Wo). gram_kernel computes, per input row h, the full-row correlations
// P(ci, cj, dh, dw) = sum_w z_ci(h, w) z_cj(h + dh, w + dw) (dh 0..2: G is symmetric; dw -2..2) and
// the same sums E_kw over only the 2 columns that window kw leaves out (0, 1, W-2, W-1: its entry
// is P - E_kw), with the row sums beside them. A row belongs to the windows kh in its mask (rows 0,
// 1, H-2 and H-1 to fewer than 3), so every 64 rows and wherever the mask changes, the fp32 sums go
// to double bins per kh: bins[kh] holds G's entries for (ci, kh, kw), (cj, kh + dh, lw) and s for
// (ci, kh, kw).
// P and E are GEMMs on the tensor cores in split TF32 (mma.sync, any GPU): rows = the 15 lags
// (dh, dw) of partner channel cj and a row of ones (giving the row sums); columns = channel ci;
// depth = the row's columns (for E: the 4 edge columns, ci's values kept where kw leaves them out).
// A warp takes 32 columns, its 4 steps of 8 permuted so that lane t's depths t and t + 4 are
// columns 4t + step and 16 + 4t + step. Its 8 tiles of 16 GEMM rows pair lags whose fragments
// depend on step + dw only: (0, dw) with (1, dw) for each dw, (2, -2) with (2, -1), (2, 0) with
// (2, 1), (2, 2) with the ones; so a row's fragments are 18 sets of 4 values (not 8 tiles x 4
// steps), each loaded once into the registers the instruction reads. Rows are staged raw, channel-
// interleaved (a column's 16 channels together, 18 words apart: a warp's 32 loads of 8 channels x 4
// columns 4 apart hit 32 banks), and centred as they are split; the places that the copies leave
// alone (columns outside the row, rows past the last) hold the channel's shift, so centre to 0.
constexpr int GR_CH = 8;                         // input channels a chunk (a block takes a pair of chunks)
constexpr int GR_WARPS = 4;                      // a warp per 32 columns
constexpr int GR_THREADS = 32 * GR_WARPS;
constexpr int GR_COLS = 32 * GR_WARPS;           // a block's columns (grid.z tiles wider rows)
constexpr int GR_SPAN = GR_COLS + 8;             // a staged row's places: columns c0 - 4 .. c0 + GR_COLS + 3
constexpr int GR_CW = 2 * GR_CH + 2;             // words a place: the two chunks' channels, 2 unused
constexpr int GR_SET = GR_SPAN * GR_CW;          // a staged row set
constexpr int GR_RING = 5;                       // row sets in shared memory
constexpr int GR_AHEAD = GR_RING - 1;            // rows in flight: row h + 4 is copied while row h is used
constexpr int GR_FLUSH = 64;                     // rows summed in fp32 before the double bins
constexpr int GR_LAGS = 15;                      // (dh, dw): lag l is dh = l / 5, dw = l % 5 - 2; then ones
constexpr int GR_P = GR_CH * GR_CH * 3 * 5;      // P: (ci, cj, dh, dw + 2)
constexpr int GR_PART = GR_P + GR_CH;            // P, then the row sums (ci)
constexpr int GR_G = GR_CH * GR_CH * 3 * 9;      // a bin's G entries: (ci, cj, dh, kw, lw)
constexpr int GR_BIN = GR_G + GR_CH * 3;         // then s: (ci, kw)
constexpr int GR_SMEM = GR_RING * GR_SET * 4 + GR_PART * 8 + 3 * GR_PART * 4;
constexpr int GR_TARGET_BLOCKS = 384;            // row bands split a sample until about this many blocks

// The kernel windows kh (bit kh) that contain row i of n (the same for columns).
__host__ __device__ __forceinline__ int window_mask(int i, int n) {
    return (i <= n - 3) | (i >= 1 && i <= n - 2) << 1 | (i >= 2) << 2;
}

// A warp's mean of a row (every lane gets it).
__device__ float row_mean(const float* __restrict__ row, int W) {
    float s = 0.f;
    for (int i = threadIdx.x % 32; i < W; i += 32) s += row[i];
#pragma unroll
    for (int off = 16; off > 0; off /= 2) s += __shfl_xor_sync(0xffffffffu, s, off);
    return s / W;
}

template <int BYTES>
__device__ __forceinline__ void cp_async(float* dst, const float* src, bool in) {   // zeros if !in
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;"
                 :: "r"((uint32_t)__cvta_generic_to_shared(dst)), "l"(src), "n"(BYTES), "r"(in ? BYTES : 0) : "memory");
}
// 4 bytes to shared address dst if in; else nothing (cp_async writes zeros).
__device__ __forceinline__ void cp_async4_if(uint32_t dst, const float* src, bool in) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %2, 0;\n@p cp.async.ca.shared.global [%0], [%1], 4;\n}"
                 :: "r"(dst), "l"(src), "r"((int)in) : "memory");
}

// Row bands a sample's rows are split into (a function of the shape only, so the bits do not depend
// on the GPU): about GR_TARGET_BLOCKS blocks where the batch is small, bands of >= 16 rows, none empty.
static int gram_bands(int B, int C_in, int H, int W) {
    const long long chunks = (C_in + GR_CH - 1) / GR_CH, tiles = (W + GR_COLS - 1) / GR_COLS;
    const int bands = (int)std::max<long long>(1, std::min<long long>(GR_TARGET_BLOCKS / (B * chunks * chunks * tiles), H / 16));
    const int rows = (H + bands - 1) / bands;
    return (H + rows - 1) / rows;
}

// The P tiles' lags: GEMM rows g (LAG_G) and g + 8 (LAG_G8; 15: ones).
__device__ constexpr int LAG_G[8] = {0, 1, 2, 3, 4, 10, 12, 14};
__device__ constexpr int LAG_G8[8] = {5, 6, 7, 8, 9, 11, 13, 15};

// v - m split (the instruction reads big's top 19 bits).
__device__ __forceinline__ void centred(float v, float m, uint32_t& big, uint32_t& small) {
    const Split s = split(v - m);
    big = s.big;
    small = s.small;
}

// One row's P products of a warp. a[d] points at partner row h + d, b at channel ci0 + g's row h,
// each at the lane's column of depth t in step 0; column offset x is x * GR_CW words on, depth
// t + 4 16 columns on. Tiles 0..4 take, at step s, the fragment of set x = s + dw of (qb, qs) (rows
// h, h + 1 at offset x); tiles 5..7 build theirs from row h + 2. Per step, each of the 3 split terms
// over all 8 tiles before the next.
__device__ __forceinline__ void gram_products(float (&acc)[8][4], const float* const (&a)[3], const float* b,
                                              float m_a, float m_b) {
    uint32_t qb[8][4], qs[8][4], zb[2][8], zs[2][8];   // [x + 2][fragment register]; row h + 2: [half][x + 2]
#pragma unroll
    for (int e = 0; e < 8; ++e)
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            const int at = (e - 2 + 16 * half) * GR_CW;
#pragma unroll
            for (int d = 0; d < 2; ++d) centred(a[d][at], m_a, qb[e][2 * half + d], qs[e][2 * half + d]);
            centred(a[2][at], m_a, zb[half][e], zs[half][e]);
        }
#pragma unroll
    for (int step = 0; step < 4; ++step) {
        uint32_t bb[2], bs[2], big[3][4], small[3][4];   // B; tiles 5, 6, 7
#pragma unroll
        for (int half = 0; half < 2; ++half) centred(b[(step + 16 * half) * GR_CW], m_b, bb[half], bs[half]);
#pragma unroll
        for (int j = 0; j < 3; ++j)
#pragma unroll
            for (int r = 0; r < 4; ++r) {   // rows g, g + 8 at depth t (r < 2), t + 4
                const int e = step + 2 * j + r % 2;   // (2, -2), (2, -1); (2, 0), (2, 1); (2, 2), ones
                const bool one = j == 2 && r % 2;
                big[j][r] = one ? __float_as_uint(1.f) : zb[r / 2][e];
                small[j][r] = one ? 0u : zs[r / 2][e];
            }
        const auto term = [&](const uint32_t (&q)[8][4], const uint32_t (&q567)[3][4], const uint32_t (&c)[2]) {
#pragma unroll
            for (int j = 0; j < 8; ++j) {
                if (j < 5) mma(acc[j], q[step + j], c[0], c[1]);
                else mma(acc[j], q567[j - 5], c[0], c[1]);
            }
        };
        term(qs, small, bb);   // small terms first
        term(qb, big, bs);
        term(qb, big, bb);
    }
}

// Block (b, chunk pair, band * column tiles + column tile): rows [h0, h1) of one column tile; adds
// its 3 bins (doubles) in gram[block]; the blocks of chunk pairs (ci0, 0) in band 0, tile 0 write
// their channels' shifts m to shifts (B, C_in).
__global__ void __launch_bounds__(GR_THREADS, 3) gram_kernel(const float* __restrict__ x, double* __restrict__ gram,
                                                              float* __restrict__ shifts, int C_in, int H, int W) {
    extern __shared__ __align__(16) float gr_s[];
    float* ring = gr_s;                                                      // [GR_RING][GR_SPAN][GR_CW]
    double* pslot = reinterpret_cast<double*>(ring + GR_RING * GR_SET);     // [GR_PART]: the warps' P, added in order
    float* eslot = reinterpret_cast<float*>(pslot + GR_PART);                // [3][GR_PART]: E_kw
    __shared__ float shift[2 * GR_CH];
    const int b = blockIdx.x, chunks = (C_in + GR_CH - 1) / GR_CH, tiles = (W + GR_COLS - 1) / GR_COLS;
    const int ci0 = blockIdx.y / chunks * GR_CH, cj0 = blockIdx.y % chunks * GR_CH, c0 = blockIdx.z % tiles * GR_COLS;
    const int band_rows = (H + gridDim.z / tiles - 1) / (gridDim.z / tiles);
    const int h0 = blockIdx.z / tiles * band_rows, h1 = min(H, h0 + band_rows), rows_in = min(H, h1 + 2);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const float* xb = x + (size_t)b * C_in * H * W;
    double* bins = gram + ((size_t)(b * gridDim.y + blockIdx.y) * gridDim.z + blockIdx.z) * 3 * GR_BIN;
    // One chunk (ci0 == cj0): its rows are staged once and are the partners too.
    const bool same = ci0 == cj0;
    const int partner_rows = same ? 0 : GR_CH, n_rows = same ? GR_CH : 2 * GR_CH;
    const auto channel = [&](int r) { return (r < GR_CH ? ci0 : cj0) + r % GR_CH; };   // staged row r
    const auto copied = [&](int r) { return r < n_rows && channel(r) < C_in; };

    for (int r = warp; r < 2 * GR_CH; r += GR_WARPS) {
        const float m = channel(r) < C_in ? row_mean(xb + ((size_t)channel(r) * H + H / 2) * W, W) : 0.f;
        if (lane == 0) shift[r] = m;
    }
    for (int i = threadIdx.x; i < GR_BIN; i += GR_THREADS)   // each entry's owner, as in the flushes
        for (int kh = 0; kh < 3; ++kh) bins[kh * GR_BIN + i] = 0.0;
    __syncthreads();
    for (int i = threadIdx.x; i < GR_RING * GR_SET; i += GR_THREADS) ring[i] = i % GR_CW < 2 * GR_CH ? shift[i % GR_CW] : 0.f;
    if (cj0 == 0 && blockIdx.z == 0 && threadIdx.x < GR_CH && ci0 + threadIdx.x < C_in)
        shifts[(size_t)b * C_in + ci0 + threadIdx.x] = shift[threadIdx.x];
    __syncthreads();
    // This thread's copies of a row: column c0 + threadIdx.x (place 4 + threadIdx.x) of each staged
    // row (bit r of rows_in_col), and one margin place (row rm, place pm: columns c0 - 4 .. c0 - 1,
    // c0 + GR_COLS .. + 3) if m_in.
    const size_t HW = (size_t)H * W;
    const int col = c0 + threadIdx.x, rm = threadIdx.x / 8, pm = threadIdx.x % 8 < 4 ? threadIdx.x % 8 : GR_COLS + threadIdx.x % 8;
    int rows_in_col = 0;
    for (int r = 0; r < 2 * GR_CH; ++r) rows_in_col |= (copied(r) && col < W) << r;
    const bool m_in = copied(rm) && c0 - 4 + pm >= 0 && c0 - 4 + pm < W;
    const float* src[2] = {xb + ci0 * HW + min(col, W - 1), xb + cj0 * HW + min(col, W - 1)};   // channel's row 0
    const float* src_m = m_in ? xb + channel(rm) * HW + c0 - 4 + pm : xb;
    const uint32_t dst = (uint32_t)__cvta_generic_to_shared(ring + (4 + threadIdx.x) * GR_CW);
    const uint32_t dst_m = (uint32_t)__cvta_generic_to_shared(ring + pm * GR_CW + rm);
    const auto issue = [&](int h) {   // row h's set, one commit group; past the last row: the shifts
        const int slot = h % GR_RING;
        if (h < rows_in) {
#pragma unroll
            for (int half = 0; half < 2; ++half) {
                const float* from = src[half] + (size_t)h * W;
#pragma unroll
                for (int r = 0; r < GR_CH; ++r, from += HW)
                    cp_async4_if(dst + (slot * GR_SET + half * GR_CH + r) * 4, from, rows_in_col >> (half * GR_CH + r) & 1);
            }
            cp_async4_if(dst_m + slot * GR_SET * 4, src_m + (size_t)h * W, m_in);
        } else if (h < h1 + 2) {
            float* set = ring + slot * GR_SET;
#pragma unroll
            for (int r = 0; r < 2 * GR_CH; ++r)
                if (rows_in_col >> r & 1) set[(4 + threadIdx.x) * GR_CW + r] = shift[r];
            if (m_in) set[pm * GR_CW + rm] = shift[rm];
        }
        asm volatile("cp.async.commit_group;" ::: "memory");
    };
    for (int i = 0; i < GR_AHEAD; ++i) issue(h0 + i);
    const float m_a = shift[partner_rows + g], m_b = shift[g];   // the lane's channels' shifts

    // P: the lane's place of depth t in step 0.
    const int q0 = (32 * warp + 4 * t + 4) * GR_CW;
    // E: tiles 2 warp + i, GEMM rows g, g + 8 = lags 4 warp + 2i, + 1, at the edge column of depth t
    // (the 4th only where W >= 4), if this tile holds it; kw_out: the windows that leave it out.
    const int ecol = t < 2 ? t : max(2, W - 2) + t - 2;
    const bool e_in = t < min(W, 4) && ecol >= c0 && ecol < c0 + GR_COLS;
    const int e_at = e_in ? ecol - c0 + 4 : 4, kw_out = e_in ? (ecol >= W - 2) | (ecol < 1 || ecol >= W - 1) << 1 | (ecol < 2) << 2 : 0;
    int e_dh[2][2], e_off[2][2];   // lag's row offset and place in its row set
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            const int l = 4 * warp + 2 * i + r;
            e_dh[i][r] = l < GR_LAGS ? l / 5 : 0;
            e_off[i][r] = (e_at + (l < GR_LAGS ? l % 5 - 2 : 0)) * GR_CW + partner_rows + g;
        }
    float acc[8][4] = {}, eacc[2][3][4] = {};
#pragma unroll 1
    for (int h = h0, since = 0; h < h1; ++h) {
        asm volatile("cp.async.wait_group %0;" :: "n"(GR_AHEAD - 3) : "memory");   // rows h .. h + 2 landed
        __syncthreads();   // and row h - 1's set free
        issue(h + GR_AHEAD);
        int slot[3];   // ring places of rows h .. h + 2
        const float* a[3];   // the lane's partner channel in them
#pragma unroll
        for (int d = 0; d < 3; ++d) {
            slot[d] = d == 0 ? h % GR_RING : slot[d - 1] + 1 == GR_RING ? 0 : slot[d - 1] + 1;
            a[d] = ring + slot[d] * GR_SET + q0 + partner_rows + g;
        }
        gram_products(acc, a, ring + slot[0] * GR_SET + q0 + g, m_a, m_b);
        {   // E: depth t only (t + 4 is zero)
            uint32_t bb, bs;
            centred(ring[slot[0] * GR_SET + e_at * GR_CW + g], m_b, bb, bs);
#pragma unroll
            for (int i = 0; i < 2; ++i) {
                uint32_t big[4] = {}, small[4] = {};
#pragma unroll
                for (int r = 0; r < 2; ++r) {
                    const int d = e_dh[i][r], s = d == 0 ? slot[0] : d == 1 ? slot[1] : slot[2];
                    if (4 * warp + 2 * i + r < GR_LAGS) centred(ring[s * GR_SET + e_off[i][r]], m_a, big[r], small[r]);
                    else big[r] = __float_as_uint(1.f);
                }
#pragma unroll
                for (int kw = 0; kw < 3; ++kw) {
                    const bool out = kw_out >> kw & 1;
                    mma(eacc[i][kw], small, out ? bb : 0u, 0u);
                    mma(eacc[i][kw], big, out ? bs : 0u, 0u);
                    mma(eacc[i][kw], big, out ? bb : 0u, 0u);
                }
            }
        }

        const int mask = window_mask(h, H);
        if (++since == GR_FLUSH || h + 1 == h1 || window_mask(h + 1, H) != mask) {
            since = 0;
            // Accumulator [r] is GEMM row g (r < 2) or g + 8, column ci = 2t + r % 2; lag 15's rows
            // (every g alike) hold the row sums. The warps add their P in turn.
            const auto place = [&](int l, int r) {
                const int ci = 2 * t + r % 2;
                return l < GR_LAGS ? ((ci * GR_CH + g) * 3 + l / 5) * 5 + l % 5 : g == 0 ? GR_P + ci : -1;
            };
#pragma unroll
            for (int r = 0; r < 4; ++r)
#pragma unroll
                for (int i = 0; i < 2; ++i)
#pragma unroll
                    for (int kw = 0; kw < 3; ++kw) {
                        const int p = place(4 * warp + 2 * i + r / 2, r);
                        if (p >= 0) eslot[kw * GR_PART + p] = eacc[i][kw][r];
                        eacc[i][kw][r] = 0.f;
                    }
            for (int w = 0; w < GR_WARPS; ++w) {
                if (warp == w)
#pragma unroll
                    for (int r = 0; r < 4; ++r)
#pragma unroll
                        for (int j = 0; j < 8; ++j) {
                            const int p = place(r < 2 ? LAG_G[j] : LAG_G8[j], r);
                            if (p >= 0) pslot[p] = (w == 0 ? 0.0 : pslot[p]) + acc[j][r];
                            acc[j][r] = 0.f;
                        }
                __syncthreads();
            }
            // Bins: entry (ci, cj, dh, kw, lw) gets P(dw = lw - kw) less E_kw; s entry (ci, kw) the
            // row sums less E_kw's; each in the bins kh of the rows' mask, by one thread, and
            // reductions to one address from one thread are applied in its order: a fixed order.
            for (int i = threadIdx.x; i < GR_BIN; i += GR_THREADS) {
                const int kw = i < GR_G ? i / 3 % 3 : (i - GR_G) % 3;
                const int p = i < GR_G ? i / 9 * 5 + i % 3 - kw + 2 : GR_P + (i - GR_G) / 3;
                const double v = pslot[p] - eslot[kw * GR_PART + p];
#pragma unroll
                for (int kh = 0; kh < 3; ++kh)
                    if (mask >> kh & 1) atomicAdd(bins + kh * GR_BIN + i, v);
            }
        }
    }
    asm volatile("cp.async.wait_group 0;" ::: "memory");
}

constexpr int GS_THREADS = 1024;   // gram_stats_kernel: a block per sample, 16 threads a channel

// Per sample: G (T x T floats, into gmat) and s from the bins (a chunk pair's pair_blocks blocks
// added in order), then per channel mean = b' + w.s / N and variance (w^T G w) / N - (w.s / N)^2
// (double, 16 threads a channel, their parts added in order), per group the mean and 1/std (the
// channels' variance plus the spread of their means), and per channel the scale and shift of
// 2 log2(e) y (what tanh_of_exp2_arg takes).
__global__ void __launch_bounds__(GS_THREADS) gram_stats_kernel(
    const double* __restrict__ gram, const float* __restrict__ shifts, float* __restrict__ gmat,
    const float* __restrict__ weight, const float* __restrict__ bias, const float* __restrict__ gn_weight,
    const float* __restrict__ gn_bias, float* __restrict__ norm, float* __restrict__ group_stats,
    int C_in, int C_out, int groups, int H, int W, int pair_blocks, double eps)
{
    constexpr int PARTS = GS_THREADS / C_PAD;
    extern __shared__ double st[];   // [C_out]: mean, [C_out]: variance, [PARTS][C_out]: parts, [T]: s; then wt
    const int b = blockIdx.x, T = C_in * TAPS, chunks = (C_in + GR_CH - 1) / GR_CH;
    double* part = st + 2 * C_out;
    double* s = part + PARTS * C_out;
    float* wt = reinterpret_cast<float*>(s + T);   // [T][C_out]: the weights, tap-major
    const float* shift = shifts + (size_t)b * C_in;
    // bin entry i of chunk pair (ci, cj) / 8, kernel row kh, summed over the pair's blocks
    const auto bin = [&](int ci, int cj, int kh, int i) {
        const double* p = gram + (((size_t)b * chunks * chunks + ci / GR_CH * chunks + cj / GR_CH) * pair_blocks * 3 + kh) * GR_BIN + i;
        double v = 0.0;
        for (int t = 0; t < pair_blocks; ++t) v += p[(size_t)t * 3 * GR_BIN];
        return v;
    };
    float* g = gmat + (size_t)b * T * T;
#pragma unroll 4
    for (int i = threadIdx.x; i < T * T; i += GS_THREADS) {
        int p = i / T, q = i % T;   // taps (ci, kh, kw), (cj, lh, lw) with lh >= kh (G is symmetric)
        if (p % TAPS / K > q % TAPS / K) { const int tmp = p; p = q; q = tmp; }
        const int ci = p / TAPS, kh = p % TAPS / K, kw = p % K, cj = q / TAPS, lh = q % TAPS / K, lw = q % K;
        g[i] = (float)bin(ci, cj, kh, (((ci % GR_CH) * GR_CH + cj % GR_CH) * 3 + lh - kh) * 9 + kw * 3 + lw);
    }
    for (int i = threadIdx.x; i < T; i += GS_THREADS)
        s[i] = bin(i / TAPS, 0, i % TAPS / K, GR_G + (i / TAPS % GR_CH) * 3 + i % K);
    for (int i = threadIdx.x; i < T * C_out; i += GS_THREADS) wt[i] = weight[(size_t)(i % C_out) * T + i / C_out];
    __syncthreads();
    const int c = threadIdx.x % C_PAD, pt = threadIdx.x / C_PAD;
    if (c < C_out) {
        double q = 0.0;
        for (int p = pt; p < T; p += PARTS) {
            float row[3] = {};   // T is a multiple of 9: three chains, nine loads in flight
            for (int r = 0; r < T; r += TAPS)
#pragma unroll
                for (int u = 0; u < TAPS; ++u) row[u % 3] = fmaf(g[(size_t)p * T + r + u], wt[(r + u) * C_out + c], row[u % 3]);
            q += (double)wt[p * C_out + c] * ((row[0] + row[1]) + row[2]);
        }
        part[pt * C_out + c] = q;
    }
    __syncthreads();
    const double n_pix = (double)(H - K + 1) * (W - K + 1);
    for (int c = threadIdx.x; c < C_out; c += GS_THREADS) {
        double q = 0.0, ws = 0.0, bm = bias[c];
        for (int pt = 0; pt < PARTS; ++pt) q += part[pt * C_out + c];
        for (int p = 0; p < T; ++p) {
            ws += (double)wt[p * C_out + c] * s[p];
            bm += (double)wt[p * C_out + c] * shift[p / TAPS];
        }
        st[c] = bm + ws / n_pix;
        st[C_out + c] = q / n_pix - (ws / n_pix) * (ws / n_pix);
    }
    __syncthreads();
    const int cpg = C_out / groups;
    for (int grp = threadIdx.x; grp < groups; grp += GS_THREADS) {
        double mean = 0.0, var = 0.0;
        for (int c = grp * cpg; c < (grp + 1) * cpg; ++c) mean += st[c];
        mean /= cpg;
        for (int c = grp * cpg; c < (grp + 1) * cpg; ++c) var += st[C_out + c] + (st[c] - mean) * (st[c] - mean);
        const double rstd = 1.0 / sqrt(fmax(var / cpg, 0.0) + eps);
        group_stats[((size_t)b * groups + grp) * 2] = (float)mean;
        group_stats[((size_t)b * groups + grp) * 2 + 1] = (float)rstd;
        for (int c = grp * cpg; c < (grp + 1) * cpg; ++c) {   // times 2 log2(e): tanh's exp2 argument
            const double scale = gn_weight[c] * rstd, log2e2 = 2.0 * 1.4426950408889634;
            norm[((size_t)b * C_out + c) * 2] = (float)(scale * log2e2);
            norm[((size_t)b * C_out + c) * 2 + 1] = (float)((gn_bias[c] - mean * scale) * log2e2);
        }
    }
}

// The half-precision forward's GroupNorm: per (sample, channel) a and b of y = a x + b (n = B C_out pairs),
// as PyTorch forms them: half_gn_affine where the GroupNorm runs in TO, in float32 under autocast.
template <typename TO>
__global__ void half_norm_kernel(const float* __restrict__ group_stats,   // (B, groups, 2): mean, 1/std
                                 const float* __restrict__ gn_weight,     // (C_out)
                                 const float* __restrict__ gn_bias,       // (C_out)
                                 float* __restrict__ norm,                // (B, C_out, 2): a, b
                                 int C_out, int groups, long long n)
{
    const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i >= n) return;
    const int c = (int)(i % C_out);
    const float* gs = group_stats + (i / C_out * groups + c / (C_out / groups)) * 2;
    const float a = gs[1] * gn_weight[c];
    const float2 ab = is_half<TO>() ? half_gn_affine<TO>(gs[0], gs[1], gn_weight[c], gn_bias[c])
                                    : make_float2(a, fmaf(-a, gs[0], gn_bias[c]));
    norm[2 * i] = ab.x;
    norm[2 * i + 1] = ab.y;
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

// Backward, per sample: each channel's S1 = sum vn and S2 = sum vn xhat from the BSUMS partials
// (fixed order, double; kept in sums for dgamma and dbeta), per group A_g and B_g, the group means of
// gamma S1 and gamma S2 per element, and per channel the coefficients of
// dL/dx_conv = u + p1 vn + p2 (v - mean) + p3: p1 = rstd gamma, p2 = -rstd^2 B_g, p3 = -rstd A_g.
__global__ void __launch_bounds__(FINAL_THREADS) grad_coef_kernel(
    const double* __restrict__ partials,    // (B, units_per_sample, N_STATS) from conv_kernel<BSUMS>
    const float* __restrict__ gn_weight,    // (C_out)
    const float* __restrict__ group_stats,  // (B, groups, 2)
    double* __restrict__ sums_out,          // (B, 2 C_out): S1 then S2
    float4* __restrict__ coef,              // (B, C_out): p1, p2, p3, mean
    int C_out, int groups, int units_per_sample, double n_per_channel)
{
    extern __shared__ double sums[];
    const int b = blockIdx.x, cpg = C_out / groups;
    sample_sums(partials, sums, b, C_out, units_per_sample);
    for (int i = threadIdx.x; i < 2 * C_out; i += FINAL_THREADS) sums_out[(size_t)b * 2 * C_out + i] = sums[i];
    for (int grp = threadIdx.x; grp < groups; grp += FINAL_THREADS) {
        double a = 0.0, bg = 0.0;
        for (int c = grp * cpg; c < (grp + 1) * cpg; ++c) {
            a += (double)gn_weight[c] * sums[c];
            bg += (double)gn_weight[c] * sums[C_out + c];
        }
        const double n = n_per_channel * cpg;
        const float mean = group_stats[((size_t)b * groups + grp) * 2];
        const double rstd = group_stats[((size_t)b * groups + grp) * 2 + 1];
        for (int c = grp * cpg; c < (grp + 1) * cpg; ++c)
            coef[(size_t)b * C_out + c] = make_float4((float)(rstd * gn_weight[c]), (float)(-rstd * rstd * bg / n),
                                                      (float)(-rstd * a / n), mean);
    }
}

// The bias gradient: per channel (a block each) the GRAD partials of every unit, added in a fixed
// order (a strided sum per thread, then a tree).
__global__ void __launch_bounds__(FINAL_THREADS) bias_grad_kernel(const double* __restrict__ partials,
                                                                  long long units, float* __restrict__ grad_bias) {
    __shared__ double part[FINAL_THREADS];
    const int c = blockIdx.x;
    double v = 0.0;
    for (long long u = threadIdx.x; u < units; u += FINAL_THREADS) v += partials[u * N_STATS + c];
    part[threadIdx.x] = v;
    for (int half = FINAL_THREADS / 2; half > 0; half /= 2) {
        __syncthreads();
        if (threadIdx.x < half) part[threadIdx.x] += part[threadIdx.x + half];
    }
    if (threadIdx.x == 0) grad_bias[c] = (float)part[0];
}

// Weight gradient: for each block of 8 input channels (blockIdx.y), one GEMM per work item (sample b,
// output row oh, COLS output columns from col0): rows = the 64 output channels, columns = the 72 taps
// (kh, kw, ci), depth = the item's columns, in split TF32. Blocks are persistent (one wave), each a
// contiguous run of items; two warpgroups take half the depth each. Shared memory holds:
//  - a ring of 2 stages, copied an item ahead by cp.async: the item's dL/dx_conv rows (chunk c of
//    channel co at chunk c ^ (co % 8), so that the A fragments' loads hit 32 banks) and the pieces
//    of its last input row that each thread stages (its own, so no barrier is needed);
//  - the input rows, split (big and small parts in two arrays) and stored as the B operand three
//    times, once per kernel column kw shifted by kw, in the tensor cores' K-major 8x4 blocks: in a
//    row's place, for kw, chunk c of 4 columns and channel ci, words (kw * CH + c) * 32 + ci * 4 + 0..3
//    hold columns col0 + 4c + kw + 0..3, zero past W and past C_in. Row h sits in place h % 4, and
//    also in place h % 4 + 4 where that is 4 or 5, so that an item's rows oh, oh + 1, oh + 2 are the
//    consecutive places oh % 4 + 0..2: the 72 taps are then 9 evenly spaced 8-column blocks, one
//    64 x 72 x 8 product per 8 columns (wgmma on Hopper, A from registers; mma.sync tiles elsewhere).
// An item that follows the row above it in the same columns stages one new row (others: all three,
// after every product has read the places); it is stored while the previous item's products run.
// Each item's products (the tensor cores add them, truncating) are added into fp32 totals; the
// block writes them (warpgroup 0's, then 1's added) and grad_weight_reduce_kernel adds the blocks
// in order.
constexpr int GW_THREADS = 256;
constexpr int GW_PLACES = 6;        // input rows' places: h % 4, and h % 4 + 4 for h % 4 < 2
constexpr int GW_TAPS = K * K * 8;   // partials' columns: tap (kh, kw, ci) at (kh * K + kw) * 8 + ci
template <int COLS>
struct GradWeightShape {
    static constexpr int CH = COLS / 4, STEPS = COLS / 8;
    static constexpr int PLACE = K * CH * 32;                  // words of one input row's part (big or small)
    static constexpr int GRAD = C_PAD * COLS;                  // words of one item's dL/dx_conv rows
    static constexpr int PIECES = 8;                           // words of a thread's staged input columns (6 used)
    static constexpr int STAGE = GRAD + GW_THREADS * PIECES;
    static constexpr int SMEM = (2 * GW_PLACES * PLACE + 2 * STAGE) * 4;   // 224 KB (COLS 128), 68 KB (32)
};

// A work item's coordinates: sample b, output row oh, column chunk c (items walk c, then oh, then b).
struct GwItem {
    int b, oh, c;
    __device__ void next(int Ho, int chunks) {
        if (++c == chunks) {
            c = 0;
            if (++oh == Ho) {
                oh = 0;
                ++b;
            }
        }
    }
};

template <int COLS>
__global__ void __launch_bounds__(GW_THREADS, 1) grad_weight_kernel(
    const float* __restrict__ x,          // (B, C_in, H, W)
    const float* __restrict__ grad_conv,  // (B, C_out, Ho, grad_pitch(Wo))
    float* __restrict__ partials,         // (gridDim.y, gridDim.x, C_PAD, GW_TAPS)
    int B, int C_in, int C_out, int H, int W)
{
    using S = GradWeightShape<COLS>;
    extern __shared__ __align__(16) uint32_t gw_s[];
    uint32_t* places = gw_s;   // big parts; the small parts GW_PLACES * PLACE words on
    float* stages = reinterpret_cast<float*>(gw_s + 2 * GW_PLACES * S::PLACE);
    const int Ho = H - K + 1, Wo = W - K + 1, Wp = grad_pitch(Wo), col_items = (Wo + COLS - 1) / COLS;
    const int ci0 = 8 * blockIdx.y, n_ci = min(8, C_in - ci0);
    const int wg = threadIdx.x / 128, warp = threadIdx.x / 32 % 4, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const long long items = (long long)B * Ho * col_items;
    const long long first = items * blockIdx.x / gridDim.x, last = items * (blockIdx.x + 1) / gridDim.x;
    const int per_sample = Ho * col_items;
    const GwItem start{(int)(first / per_sample), (int)(first % per_sample / col_items), (int)(first % col_items)};

    // This thread stages input columns 4 sc + 0..5 of channel sci (sc < CH), and copies 16-byte
    // chunk gc of dL/dx_conv channels gco + (threads / CH) j.
    const int sc = threadIdx.x / 8, sci = threadIdx.x % 8, gc = threadIdx.x % S::CH, gco = threadIdx.x / S::CH;
    const bool stager = sc < S::CH && sci < n_ci;
    const auto x_at = [&](const GwItem& it, int ih, int e) {   // nullptr past W or C_in
        const int iw = it.c * COLS + 4 * sc + e;
        return stager && iw < W ? x + (((size_t)it.b * C_in + ci0 + sci) * H + ih) * W + iw : nullptr;
    };
    // Item it's copies into stage `stage`, zero past C_out and past its columns; one commit group an
    // item (empty past the last), so that the wait below counts items.
    const auto copy_item = [&](const GwItem& it, int stage, bool in) {
        if (in) {
            const int cols = min(COLS, Wo - it.c * COLS), bytes = 4 * max(0, min(4, cols - 4 * gc));
            float* st = stages + stage * S::STAGE;
            const float* src = grad_conv + (((size_t)it.b * C_out + gco) * Ho + it.oh) * Wp + it.c * COLS + 4 * gc;
            constexpr int STEP = GW_THREADS / S::CH;   // channels a pass (a multiple of 8)
#pragma unroll
            for (int j = 0; j < C_PAD / STEP; ++j) {
                const int co = gco + STEP * j;
                asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;"
                             :: "r"((uint32_t)__cvta_generic_to_shared(st + co * COLS + (gc ^ gco % 8) * 4)),
                                "l"(co < C_out ? src + (size_t)STEP * j * Ho * Wp : grad_conv), "r"(co < C_out ? bytes : 0)
                             : "memory");
            }
            float* pieces = st + S::GRAD + threadIdx.x * S::PIECES;
#pragma unroll
            for (int e = 0; e < 6; ++e) {
                const float* p = x_at(it, it.oh + K - 1, e);
                cp_async<4>(pieces + e, p ? p : x, p != nullptr);
            }
        }
        asm volatile("cp.async.commit_group;" ::: "memory");
    };
    // Split one input row's 6 columns and store the thread's three shifted 16-byte pieces in the
    // row's place, and in its second place where it has one.
    const auto store_row = [&](int ih, const float (&v)[6]) {
        Split sp[6];
#pragma unroll
        for (int e = 0; e < 6; ++e) sp[e] = split(v[e]);
        const auto store_at = [&](int place) {
            uint32_t* big = places + place * S::PLACE + sc * 32 + sci * 4;
#pragma unroll
            for (int kw = 0; kw < K; ++kw) {
                *reinterpret_cast<uint4*>(big + kw * S::CH * 32) = make_uint4(sp[kw].big, sp[kw + 1].big, sp[kw + 2].big, sp[kw + 3].big);
                *reinterpret_cast<uint4*>(big + GW_PLACES * S::PLACE + kw * S::CH * 32) =
                    make_uint4(sp[kw].small, sp[kw + 1].small, sp[kw + 2].small, sp[kw + 3].small);
            }
        };
        store_at(ih % 4);
        if (ih % 4 < GW_PLACES - 4) store_at(ih % 4 + 4);
    };
    const auto products_done = [] {   // this warpgroup's products (a no-op before Hopper: mma.sync is synchronous)
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
        asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
#endif
    };
    float total[4 * 9] = {}, acc[4 * 9] = {};   // 9 tiles (kh, kw) of 8 channels, mma.sync's layout
    const auto add_item = [&] {   // an item's products (done) into the totals; acc starts over
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
        fence_acc(acc);
#endif
#pragma unroll
        for (int e = 0; e < 4 * 9; ++e) {
            total[e] += acc[e];
            acc[e] = 0.f;
        }
    };

    GwItem item = start;
    copy_item(item, 0, first < last);
    const int r0 = 16 * warp + g;   // this thread's A rows: r0, r0 + 8
#pragma unroll 1
    for (long long i = first; i < last; ++i) {
        const int oh = item.oh, stage = (int)((i - first) & 1);
        const float* st = stages + stage * S::STAGE;
        asm volatile("cp.async.wait_group 0;" ::: "memory");   // item i's copies
        const bool all_new = i == first || col_items > 1 || oh == 0;   // else only the last row is new
        if (all_new) {   // every product that reads the places done first
            products_done();
            __syncthreads();
        }
        if (sc < S::CH) {
            if (all_new) {
#pragma unroll
                for (int kh = 0; kh + 1 < K; ++kh) {
                    float v[6];
#pragma unroll
                    for (int e = 0; e < 6; ++e) {
                        const float* p = x_at(item, oh + kh, e);
                        v[e] = p ? *p : 0.f;
                    }
                    store_row(oh + kh, v);
                }
            }
            const float* pieces = st + S::GRAD + threadIdx.x * S::PIECES;
            const float v[6] = {pieces[0], pieces[1], pieces[2], pieces[3], pieces[4], pieces[5]};
            store_row(oh + K - 1, v);
        }
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");   // the stored rows are read by wgmma
#endif
        // Item i - 1's products done in both warpgroups before the barrier: after it, the places the
        // next item stores (read last by item i - 1) are free, and so is the stage it copies into.
        products_done();
        __syncthreads();
        GwItem next = item;
        next.next(Ho, col_items);
        copy_item(next, stage ^ 1, i + 1 < last);
        add_item();
        const uint32_t* b = places + oh % 4 * S::PLACE;   // kernel row kh: S::PLACE words on
#pragma unroll
        for (int j = 0; j < S::STEPS / 2; ++j) {
            const int s = wg * S::STEPS / 2 + j;   // this warpgroup's half of the depth
            const float a[4] = {st[r0 * COLS + ((2 * s) ^ g) * 4 + t], st[(r0 + 8) * COLS + ((2 * s) ^ g) * 4 + t],
                                st[r0 * COLS + ((2 * s + 1) ^ g) * 4 + t], st[(r0 + 8) * COLS + ((2 * s + 1) ^ g) * 4 + t]};
            uint32_t big[4], small[4];
            split4(a, big, small);
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
            fence_a(big);
            fence_a(small);
            asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
            const uint64_t desc = smem_desc(b + 2 * s * 32, 128, S::CH * 128);
            wgmma(acc, small, desc);
            wgmma(acc, big, desc + GW_PLACES * S::PLACE * 4 / 16);
            wgmma(acc, big, desc);
#else
#pragma unroll
            for (int tile = 0; tile < 9; ++tile) {   // (kh, kw): places are K * CH * 32 words apart
                const uint32_t* bb = b + tile * S::CH * 32 + 2 * s * 32 + g * 4 + t, *bs = bb + GW_PLACES * S::PLACE;
                mma(acc + 4 * tile, small, bb[0], bb[32]);
                mma(acc + 4 * tile, big, bs[0], bs[32]);
                mma(acc + 4 * tile, big, bb[0], bb[32]);
            }
#endif
        }
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
        asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
#endif
        item = next;
    }
    products_done();
    add_item();
    // Warpgroup 1's totals through shared memory, added to warpgroup 0's.
    asm volatile("cp.async.wait_group 0;" ::: "memory");
    __syncthreads();
    float* other = reinterpret_cast<float*>(gw_s) + (threadIdx.x % 128) * (4 * 9 + 1);
    if (wg == 1)
#pragma unroll
        for (int e = 0; e < 4 * 9; ++e) other[e] = total[e];
    __syncthreads();
    if (wg == 1) return;
    float* dst = partials + ((size_t)blockIdx.y * gridDim.x + blockIdx.x) * C_PAD * GW_TAPS;
#pragma unroll
    for (int e = 0; e < 4 * 9; ++e)
        dst[(size_t)(r0 + 8 * (e % 4 / 2)) * GW_TAPS + e / 4 * 8 + 2 * t + e % 2] = total[e] + other[e];
}

// dL/dweight[co][ci][kh][kw]: grad_weight_kernel's block totals added in a fixed order (double): a
// block per GWR_OUT outputs, GWR_SLICES threads each adding every GWR_SLICES-th block, then the slices.
constexpr int GWR_OUT = 32, GWR_SLICES = 8;
__global__ void __launch_bounds__(GWR_OUT * GWR_SLICES) grad_weight_reduce_kernel(
        const float* __restrict__ partials, int blocks, float* __restrict__ grad_weight, int C_in, int C_out) {
    __shared__ double slices[GWR_SLICES][GWR_OUT];
    const int i = blockIdx.x * GWR_OUT + threadIdx.x % GWR_OUT, slice = threadIdx.x / GWR_OUT;
    const bool real = i < C_out * C_in * K * K;
    double v = 0.0;
    if (real) {
        const int co = i / (C_in * K * K), ci = i / (K * K) % C_in, tap = i % (K * K);
        const float* p = partials + ((size_t)ci / 8 * blocks * C_PAD + co) * GW_TAPS + tap * 8 + ci % 8;
        for (int blk = slice; blk < blocks; blk += GWR_SLICES) v += p[(size_t)blk * C_PAD * GW_TAPS];
    }
    slices[slice][threadIdx.x % GWR_OUT] = v;
    __syncthreads();
    if (slice == 0 && real) {
#pragma unroll
        for (int k = 1; k < GWR_SLICES; ++k) v += slices[k][threadIdx.x];
        grad_weight[i] = (float)v;
    }
}

constexpr int GI_WARPS = 4;               // input gradient: 32 output columns (two row tiles) a warp
constexpr int GI_SPAN = 32 * GI_WARPS;    // P rows a block computes: output columns col0 - 2 onwards
constexpr int GI_OUT = GI_SPAN - 2;       // input columns a block completes (the last chunk: up to W)
constexpr int GI_TILES = 9;               // P's columns: the taps (ci, kh, kw) of 8 input channels
constexpr int GI_PITCH = GI_SPAN + 4;     // a column of P in shared memory: 4 mod 32 words apart (no conflicts)
constexpr int GI_SLICE = 2 * GI_TILES * 64;  // one 8-deep step of the split weights (big, then small)

static __host__ __device__ int gi_smem_bytes(int C_out) {
    return (int)(((C_out + 7) / 8 * GI_SLICE + 8 * GI_TILES * GI_PITCH) * sizeof(float));
}

// Input gradient, a block per (sample, band of input rows, chunk of input columns; blockIdx.y: 8
// input channels). For each row oh of dL/dx_conv that the band's rows need (its rows and the two
// before), a GEMM P = G(oh) W: rows = output columns col0 - 2 + 0..127, columns = the 72 taps
// (ci, kh, kw), depth = the output channels, 8 a step (G gathered from global memory and split in
// registers; W split in shared memory in the forward's 8x4-block layout; a warpgroup's wgmma on
// Hopper, 64 rows at a time, mma.sync elsewhere). P goes to shared memory and each thread folds its
// input column's taps into three rows of partial sums in registers:
// dx[ci][oh + kh][iw] += sum_kw P[iw - kw][(ci, kh, kw)]. Input row oh is complete after G row oh
// (the last rows after G's last) and is written then; rows before the band only serve as its halo.
__global__ void __launch_bounds__(32 * GI_WARPS, 3) grad_input_kernel(
    const float* __restrict__ grad_conv,  // (B, C_out, Ho, grad_pitch(Wo))
    const float* __restrict__ weight,     // (C_out, C_in, K, K)
    float* __restrict__ grad_x,           // (B, C_in, H, W)
    int C_in, int C_out, int H, int W, int band_rows)
{
    extern __shared__ __align__(16) uint32_t gi_s[];
    const int Ho = H - K + 1, Wo = W - K + 1, Wp = grad_pitch(Wo), k_steps = (C_out + 7) / 8;
    const int chunks = (Wo + GI_OUT - 1) / GI_OUT, bands = (H + band_rows - 1) / band_rows;
    const int chunk = blockIdx.x % chunks, band = blockIdx.x / chunks % bands, b = blockIdx.x / chunks / bands;
    const int ci0 = 8 * blockIdx.y, n_ci = min(8, C_in - ci0);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    for (int i = threadIdx.x; i < k_steps * GI_SLICE; i += blockDim.x) {
        const int w = i % (GI_TILES * 64), part = i / (GI_TILES * 64) % 2, step = i / GI_SLICE;
        const int n = w / 64 * 8 + w / 4 % 8, co = step * 8 + w / 32 % 2 * 4 + w % 4;
        const Split sp = split(co < C_out && n / TAPS < n_ci ? weight[((size_t)co * C_in + ci0 + n / TAPS) * TAPS + n % TAPS] : 0.f);
        gi_s[i] = part == 0 ? sp.big : sp.small;
    }
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");   // the weights are read by wgmma
#endif
    const int col0 = chunk * GI_OUT, iw = col0 + (int)threadIdx.x;
    const bool owns = iw < (chunk == chunks - 1 ? W : col0 + GI_OUT);
    const int row0 = band * band_rows, row1 = min(H, row0 + band_rows);
    float* P = reinterpret_cast<float*>(gi_s + k_steps * GI_SLICE);
    int m[2][2], ow[2][2];   // this lane's P rows (output columns col0 - 2 + m): tile i, row g + 8 r
    bool ow_ok[2][2];
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            m[i][r] = 64 * i + 16 * warp + g + 8 * r;
            const int o = col0 - 2 + m[i][r];
            ow_ok[i][r] = o >= 0 && o < Wo;
            ow[i][r] = ow_ok[i][r] ? o : 0;
        }
    float part[3][8] = {};   // input rows oh, oh + 1, oh + 2 of this thread's column, per input channel
    __syncthreads();
#pragma unroll 1
    for (int oh = max(row0 - 2, 0); oh < min(row1, Ho); ++oh) {
        const float* G = grad_conv + ((size_t)b * C_out * Ho + oh) * Wp;   // channel c at G + c Ho Wp
        if (oh + 1 < min(row1, Ho)) {   // the next row's span, on its way into L2: 5 lines a channel
            const int lo = max(col0 - 2, 0), len = min(Wo, col0 + GI_OUT) - lo;
            for (int i = threadIdx.x; i < C_out * 5; i += blockDim.x)
                asm volatile("prefetch.global.L2 [%0];" :: "l"(G + (size_t)(i / 5) * Ho * Wp + Wp + lo + min(i % 5 * 32, len - 1)));
        }
        float a_next[2][4];
        const auto load = [&](int step) {
            const int c0 = 8 * step + t, c1 = c0 + 4;
#pragma unroll
            for (int i = 0; i < 2; ++i) {
                a_next[i][0] = c0 < C_out && ow_ok[i][0] ? G[(size_t)c0 * Ho * Wp + ow[i][0]] : 0.f;
                a_next[i][1] = c0 < C_out && ow_ok[i][1] ? G[(size_t)c0 * Ho * Wp + ow[i][1]] : 0.f;
                a_next[i][2] = c1 < C_out && ow_ok[i][0] ? G[(size_t)c1 * Ho * Wp + ow[i][0]] : 0.f;
                a_next[i][3] = c1 < C_out && ow_ok[i][1] ? G[(size_t)c1 * Ho * Wp + ow[i][1]] : 0.f;
            }
        };
        float acc[2][4 * GI_TILES] = {};
        load(0);
#pragma unroll 1
        for (int step = 0; step < k_steps; ++step) {
            uint32_t big[2][4], small[2][4];
#pragma unroll
            for (int i = 0; i < 2; ++i) split4(a_next[i], big[i], small[i]);
            if (step + 1 < k_steps) load(step + 1);
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
            const uint64_t desc = smem_desc(gi_s + step * GI_SLICE, 128, 256);   // 8x4 blocks: k, then n
#pragma unroll
            for (int i = 0; i < 2; ++i) {
                fence_a(big[i]);
                fence_a(small[i]);
            }
            asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
            for (int i = 0; i < 2; ++i) {
                wgmma(acc[i], small[i], desc);
                wgmma(acc[i], big[i], desc + GI_TILES * 64 * 4 / 16);
                wgmma(acc[i], big[i], desc);
            }
            asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
            asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
            fence_acc(acc[0]);
            fence_acc(acc[1]);
#else
            const uint32_t* wb = gi_s + step * GI_SLICE + g * 4 + t;
#pragma unroll
            for (int j0 = 0; j0 < GI_TILES; j0 += 3) {   // pass-major as in grad_weight_kernel, 3 tiles at a time
                if (j0 * 8 >= TAPS * n_ci) continue;
                uint32_t bb[3][2], bs[3][2];
#pragma unroll
                for (int jj = 0; jj < 3; ++jj) {
                    const uint32_t* pb = wb + (j0 + jj) * 64;
                    bb[jj][0] = pb[0];
                    bb[jj][1] = pb[32];
                    bs[jj][0] = pb[GI_TILES * 64];
                    bs[jj][1] = pb[GI_TILES * 64 + 32];
                }
#pragma unroll
                for (int jj = 0; jj < 3; ++jj)
#pragma unroll
                    for (int i = 0; i < 2; ++i) mma(acc[i] + 4 * (j0 + jj), small[i], bb[jj][0], bb[jj][1]);
#pragma unroll
                for (int jj = 0; jj < 3; ++jj)
#pragma unroll
                    for (int i = 0; i < 2; ++i) mma(acc[i] + 4 * (j0 + jj), big[i], bs[jj][0], bs[jj][1]);
#pragma unroll
                for (int jj = 0; jj < 3; ++jj)
#pragma unroll
                    for (int i = 0; i < 2; ++i) mma(acc[i] + 4 * (j0 + jj), big[i], bb[jj][0], bb[jj][1]);
            }
#endif
        }
        __syncthreads();   // the previous row's fold has read P
#pragma unroll
        for (int i = 0; i < 2; ++i)
#pragma unroll
            for (int j = 0; j < GI_TILES; ++j)
#pragma unroll
                for (int e = 0; e < 4; ++e)
                    P[(8 * j + 2 * t + e % 2) * GI_PITCH + m[i][e / 2]] = acc[i][4 * j + e];
        __syncthreads();
#pragma unroll
        for (int ci = 0; ci < 8; ++ci)
#pragma unroll
            for (int kh = 0; kh < K; ++kh)
#pragma unroll
                for (int kw = 0; kw < K; ++kw) {
                    const int p = (int)threadIdx.x + 2 - kw;   // P row of output column iw - kw
                    if (p < GI_SPAN) part[kh][ci] += P[(ci * TAPS + kh * K + kw) * GI_PITCH + p];
                }
        // Row oh is complete; after G's last row, so are oh + 1 and oh + 2.
#pragma unroll
        for (int r = 0; r < 3; ++r) {
            const int ih = oh + r;
            if (owns && ih >= row0 && ih < row1 && (r == 0 || oh == Ho - 1))
#pragma unroll
                for (int ci = 0; ci < 8; ++ci)
                    if (ci < n_ci) grad_x[(((size_t)b * C_in + ci0 + ci) * H + ih) * W + iw] = part[r][ci];
        }
#pragma unroll
        for (int ci = 0; ci < 8; ++ci) {
            part[0][ci] = part[1][ci];
            part[1][ci] = part[2][ci];
            part[2][ci] = 0.f;
        }
    }
}

static int units_per_sample(int H, int W) { return (H - K + 1) * ((W - K + 1 + UNIT_COLS - 1) / UNIT_COLS); }

// What the launches ask of a device (its attributes, a kernel's occupancy) and set on it (a kernel's
// attributes), done once per device: a few microseconds of host time a call otherwise, spent before
// the first kernel starts on an idle GPU. PerDevice<T>::get computes a device's value once, thread-safe.
constexpr int MAX_DEVICES = 64;
template <typename T>
struct PerDevice {
    T value[MAX_DEVICES];
    std::once_flag once[MAX_DEVICES];
    template <typename F>
    const T& get(int device, F compute) {
        std::call_once(once[device], [&] { value[device] = compute(); });
        return value[device];
    }
};

struct DeviceInfo {
    cudaError_t err;
    int device, sms, smem_per_block, smem_per_sm;   // SMs; shared memory a block may opt in to, an SM has
};
const DeviceInfo& device_info() {   // the current device's
    static PerDevice<DeviceInfo> info;
    static const DeviceInfo bad{cudaErrorInvalidDevice, 0, 0, 0, 0};
    int device = 0;
    if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= MAX_DEVICES) return bad;
    return info.get(device, [device] {
        DeviceInfo d{cudaSuccess, device, 0, 0, 0};
        if ((d.err = cudaDeviceGetAttribute(&d.sms, cudaDevAttrMultiProcessorCount, device)) == cudaSuccess &&
            (d.err = cudaDeviceGetAttribute(&d.smem_per_block, cudaDevAttrMaxSharedMemoryPerBlockOptin, device)) == cudaSuccess)
            d.err = cudaDeviceGetAttribute(&d.smem_per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device);
        return d;
    });
}

// The shared memory a block may opt in to on the current device (-1 on an error).
int smem_per_block() {
    const DeviceInfo& d = device_info();
    return d.err == cudaSuccess ? d.smem_per_block : -1;
}

// conv_kernel's dynamic shared memory: the split weights (TAPS * groups8 steps of 2 * B_WORDS words),
// then the ring of split rows. 70 KB for C_in <= 8, 140 KB for C_in <= 16.
int conv_smem_bytes(int C_in) {
    const int groups8 = (C_in + 7) / 8;
    return TAPS * groups8 * 2 * B_WORDS * 4 + RING * 2 * 2 * groups8 * STAGE_W * 16;
}

// conv_kernel<MODE, G8>'s resident blocks an SM, its attributes set once per device: the dynamic
// shared memory, and the carveout for BLOCKS_PER_SM blocks (the system reserves 1 KB of each), as a
// percentage of the most an SM has. Left to the driver's choice, this forward has been seen to take
// twice its time in some runs (a split that fits fewer blocks, it seems); with it, six runs agreed.
struct Occupancy { cudaError_t err; int blocks; };
template <int MODE, int G8, typename T, typename TO, bool LOADED>
static cudaError_t conv_blocks_per_sm(int* per_sm) {
    static PerDevice<Occupancy> occupancy;
    const DeviceInfo& d = device_info();
    if (d.err != cudaSuccess) return d.err;
    const Occupancy& o = occupancy.get(d.device, [&d] {
        const auto kernel = conv_kernel<MODE, G8, T, TO, LOADED>;
        const int smem = LOADED ? 2 * LOADED_SLOT * 4 : conv_smem_bytes(8 * G8);
        cudaFuncAttributes attr;
        Occupancy o{cudaSuccess, 0};
        if ((o.err = cudaFuncGetAttributes(&attr, kernel)) != cudaSuccess ||
            (o.err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem)) != cudaSuccess)
            return o;
        const long long need = (long long)BLOCKS_PER_SM * (smem + attr.sharedSizeBytes + 1024);
        if ((o.err = cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                          (int)std::min(100LL, (100 * need + d.smem_per_sm - 1) / d.smem_per_sm))) == cudaSuccess)
            o.err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&o.blocks, kernel, THREADS, smem);
        return o;
    });
    *per_sm = o.blocks;
    return o.err;
}

// LOADED: over the conv the training forward kept (bw.conv), x and weight unused.
template <int MODE, typename T = float, typename TO = float, bool LOADED = false>
static cudaError_t launch_conv(const float* x, const float* weight, const float* bias, const float* norm,
                               double* partials, TO* out, const BackwardIn& bw, int B, int C_in, int C_out,
                               int H, int W, cudaStream_t stream) {
    constexpr int G2 = LOADED ? 1 : 2;   // C_in <= 16 (Python); LOADED stages no input
    const int groups8 = LOADED ? 1 : (C_in + 7) / 8, ups = units_per_sample(H, W);
    const int smem = LOADED ? 2 * LOADED_SLOT * 4 : conv_smem_bytes(C_in);
    const auto kernel = groups8 == 1 ? conv_kernel<MODE, 1, T, TO, LOADED> : conv_kernel<MODE, G2, T, TO, LOADED>;
    int per_sm = 0;
    const cudaError_t err = groups8 == 1 ? conv_blocks_per_sm<MODE, 1, T, TO, LOADED>(&per_sm)
                                         : conv_blocks_per_sm<MODE, G2, T, TO, LOADED>(&per_sm);
    if (err != cudaSuccess) return err;
    const unsigned grid = (unsigned)std::min<long long>((long long)B * ups, (long long)std::max(per_sm, 1) * device_info().sms);
    kernel<<<grid, THREADS, smem, stream>>>(x, weight, bias, norm, partials, out, bw, B, C_in, C_out, H, W, ups);
    return cudaGetLastError();
}

// gram_kernel's blocks a chunk pair: bands x column tiles.
static int gram_pair_blocks(int B, int C_in, int H, int W) { return gram_bands(B, C_in, H, W) * ((W + GR_COLS - 1) / GR_COLS); }

// gram_kernel's bins (doubles): 3 for each of its blocks.
static long long gram_bin_doubles(int B, int C_in, int H, int W) {
    const long long chunks = (C_in + GR_CH - 1) / GR_CH;
    return B * chunks * chunks * gram_pair_blocks(B, C_in, H, W) * 3 * GR_BIN;
}

// The forward's scratch, in doubles: gram_kernel's bins, then G and the shifts (floats).
long long forward_workspace_doubles(int B, int C_in, int H, int W) {
    const long long T = C_in * TAPS;
    return gram_bin_doubles(B, C_in, H, W) + B * ((T * T + C_in + 1) / 2);
}

static cudaError_t gram_ready() {   // gram_kernel's shared memory limit, set once per device
    static PerDevice<cudaError_t> set;
    const DeviceInfo& d = device_info();
    if (d.err != cudaSuccess) return d.err;
    return set.get(d.device, [] {
        return cudaFuncSetAttribute(gram_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, GR_SMEM);
    });
}

// The forward's scratch (forward_workspace_doubles): gram_kernel's bins, then G (B x T x T floats),
// then the shifts (B x C_in floats); returns G.
static float* gram_matrices(double* workspace, int B, int C_in, int H, int W) {
    return reinterpret_cast<float*>(workspace + gram_bin_doubles(B, C_in, H, W));
}

// The forward in two calls, so that its first kernel starts before the host allocates the outputs:
// gram_launch (phase 1's bins into workspace), then forward_launch (phase 1's statistics, phase 2).
cudaError_t gram_launch(const float* x, double* workspace, int B, int C_in, int H, int W, cudaStream_t stream) {
    const int chunks = (C_in + GR_CH - 1) / GR_CH, T = C_in * TAPS;
    const cudaError_t err = gram_ready();
    if (err != cudaSuccess) return err;
    float* shifts = gram_matrices(workspace, B, C_in, H, W) + (size_t)B * T * T;
    gram_kernel<<<dim3(B, chunks * chunks, gram_pair_blocks(B, C_in, H, W)), GR_THREADS, GR_SMEM, stream>>>(
        x, workspace, shifts, C_in, H, W);
    return cudaGetLastError();
}

// The inputs as floats (half precision: converted, exact); conv_type, norm_type: the dtype codes (with_types)
// of the model's conv and GroupNorm, `out` in the GroupNorm's; half_norm (B, C_out, 2): half precision's
// GroupNorm (half_norm_kernel), else unused; conv (kept_conv_floats(B, H, W)): the training forward's conv for
// the backward, else null.
cudaError_t forward_launch(const float* x, const float* weight, const float* bias, const float* gn_weight,
                           const float* gn_bias, double* workspace, float* norm, float* group_stats, float* half_norm,
                           void* out, float* conv, int conv_type, int norm_type, int B, int C_in, int C_out, int groups,
                           int H, int W, double eps, cudaStream_t stream) {
    const int T = C_in * TAPS;
    float* gmat = gram_matrices(workspace, B, C_in, H, W);
    float* shifts = gmat + (size_t)B * T * T;
    const size_t smem = (2 + GS_THREADS / C_PAD) * C_out * sizeof(double) + T * sizeof(double) + (size_t)T * C_out * sizeof(float);
    gram_stats_kernel<<<B, GS_THREADS, smem, stream>>>(workspace, shifts, gmat, weight, bias,
                                                         gn_weight, gn_bias, norm, group_stats, C_in, C_out, groups,
                                                         H, W, gram_pair_blocks(B, C_in, H, W), eps);
    const cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) return err;
    return with_types(conv_type, norm_type, [&](auto t, auto to) {
        using T = decltype(t);
        using TO = decltype(to);
        if (is_half<T>()) {
            const long long n = (long long)B * C_out;
            half_norm_kernel<TO><<<(unsigned)((n + 255) / 256), 256, 0, stream>>>(group_stats, gn_weight, gn_bias,
                                                                                 half_norm, C_out, groups, n);
            const cudaError_t e = cudaGetLastError();
            if (e != cudaSuccess) return e;
        }
        BackwardIn bw{};
        bw.conv = conv;
        return launch_conv<LOGSUMEXP, T, TO>(x, weight, bias, is_half<T>() ? half_norm : norm, nullptr,
                                             static_cast<TO*>(out), bw, B, C_in, C_out, H, W, stream);
    });
}

// The conv a training forward keeps for the backward (floats): each unit's products as the conv kernel holds them
// (stored_unit), padding columns and channels included (at the benchmark 528 MB against the conv's 520).
long long kept_conv_floats(long long B, int H, int W) { return B * units_per_sample(H, W) * KEPT_WORDS; }

// Phase 2 alone in float32 over the kept conv (the half-precision backward's output, unrounded), from the
// forward's norm.
cudaError_t logsumexp_launch(const float* conv, const float* bias, const float* norm, float* out, int B, int C_out,
                             int H, int W, cudaStream_t stream) {
    BackwardIn bw{};
    bw.conv = const_cast<float*>(conv);
    return launch_conv<LOGSUMEXP, float, float, true>(nullptr, nullptr, bias, norm, nullptr, out, bw, B, 0, C_out, H,
                                                      W, stream);
}

// grad_weight_kernel<COLS>'s resident blocks an SM, its shared memory limit set once per device.
template <int COLS>
static Occupancy grad_weight_occupancy() {
    static PerDevice<Occupancy> occupancy;
    const DeviceInfo& d = device_info();
    if (d.err != cudaSuccess) return {d.err, 0};
    return occupancy.get(d.device, [] {
        const auto kernel = grad_weight_kernel<COLS>;
        constexpr int smem = GradWeightShape<COLS>::SMEM;
        Occupancy o{cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem), 0};
        if (o.err == cudaSuccess) o.err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&o.blocks, kernel, GW_THREADS, smem);
        return o;
    });
}

// grad_input_kernel's resident blocks an SM for C_out output channels (its shared memory depends on
// their groups of 8), all computed once per device.
static Occupancy grad_input_occupancy(int C_out) {
    using Table = std::array<Occupancy, C_PAD / 8>;
    static PerDevice<Table> occupancy;
    const DeviceInfo& d = device_info();
    if (d.err != cudaSuccess) return {d.err, 0};
    return occupancy.get(d.device, [] {
        Table table{};
        const cudaError_t err = cudaFuncSetAttribute(grad_input_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                     gi_smem_bytes(C_PAD));
        for (int i = 0; i < C_PAD / 8; ++i) {
            table[i].err = err;
            if (err == cudaSuccess)
                table[i].err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&table[i].blocks, grad_input_kernel,
                                                                             32 * GI_WARPS, gi_smem_bytes(8 * (i + 1)));
        }
        return table;
    })[(C_out + 7) / 8 - 1];
}

// How the tuned backward's conv gradients are laid out on this GPU: the plan's w_blocks, w_cols (128 columns on
// Hopper's shared memory, else 32) and band_rows. Returns the backward's scratch in bytes (the units' partials,
// doubles, then the weight gradient's block totals), or -1 on an error.
long long backward_geometry(Plan& plan, int B, int C_in, int C_out, int H, int W) {
    const int Ho = H - K + 1, Wo = W - K + 1, ci_chunks = (C_in + 7) / 8;
    const DeviceInfo& d = device_info();
    if (d.err != cudaSuccess) return -1;
    plan.w_cols = Wo > 32 && d.smem_per_block >= GradWeightShape<128>::SMEM ? 128 : 32;
    const Occupancy w = plan.w_cols == 128 ? grad_weight_occupancy<128>() : grad_weight_occupancy<32>();
    const Occupancy in = grad_input_occupancy(C_out);
    if (w.err != cudaSuccess || in.err != cudaSuccess) return -1;
    const long long items = (long long)B * Ho * ((Wo + plan.w_cols - 1) / plan.w_cols);
    plan.w_blocks = (int)std::max(1LL, std::min(items, (long long)std::max(w.blocks, 1) * d.sms));
    const long long per_band = (long long)B * ((Wo + GI_OUT - 1) / GI_OUT) * ci_chunks;
    const long long bands = std::max(1LL, (long long)std::max(in.blocks, 1) * d.sms / std::max(per_band, 1LL));
    plan.band_rows = (int)std::max(2LL, (H + bands - 1) / bands);   // 8 rows a band at least left 16 blocks at batch 1
    return (long long)B * units_per_sample(H, W) * N_STATS * sizeof(double) +
           (long long)ci_chunks * plan.w_blocks * C_PAD * GW_TAPS * sizeof(float);
}

// need: which of the conv's gradients (input, weight, bias) to compute; grad_conv may be null if none.
// workspace: backward_geometry's bytes, for the plan it filled; conv: the training forward's (kept_conv_floats).
cudaError_t backward_launch(const Plan& plan, const float* x, const float* weight, const float* conv, const float* bias,
                            const float* gn_weight, const float* norm, const float* group_stats, const float* out,
                            const float* grad_out, void* workspace, float* grad_conv, double* sums, float* coef,
                            float* grad_x, float* grad_weight, float* grad_bias, float* grad_gn_weight,
                            float* grad_gn_bias, const bool* need, int B, int C_in, int C_out, int groups, int H, int W,
                            cudaStream_t stream) {
    const int Ho = H - K + 1, Wo = W - K + 1, ups = units_per_sample(H, W), ci_chunks = (C_in + 7) / 8;
    cudaError_t err;
    double* partials = static_cast<double*>(workspace);
    float* weight_totals = reinterpret_cast<float*>(partials + (size_t)B * ups * N_STATS);
    BackwardIn bw{grad_out, out, group_stats, reinterpret_cast<const float4*>(coef), grad_conv, groups,
                  const_cast<float*>(conv)};
    if ((err = launch_conv<BSUMS, float, float, true>(nullptr, nullptr, bias, norm, partials, (float*)nullptr, bw, B,
                                                      C_in, C_out, H, W, stream)) != cudaSuccess)
        return err;
    grad_coef_kernel<<<B, FINAL_THREADS, 2 * C_out * sizeof(double), stream>>>(
        partials, gn_weight, group_stats, sums, reinterpret_cast<float4*>(coef), C_out, groups, ups, (double)Ho * Wo);
    if ((err = cudaGetLastError()) != cudaSuccess) return err;
    gn_param_grad_kernel<<<(2 * C_out + 255) / 256, 256, 0, stream>>>(sums, grad_gn_weight, grad_gn_bias, B, C_out);
    if ((err = cudaGetLastError()) != cudaSuccess) return err;
    if (!(need[0] || need[1] || need[2])) return cudaSuccess;
    if ((err = launch_conv<GRAD, float, float, true>(nullptr, nullptr, bias, norm, partials, (float*)nullptr, bw, B,
                                                     C_in, C_out, H, W, stream)) != cudaSuccess)
        return err;
    if (need[2]) {
        bias_grad_kernel<<<C_out, FINAL_THREADS, 0, stream>>>(partials, (long long)B * ups, grad_bias);
        if ((err = cudaGetLastError()) != cudaSuccess) return err;
    }
    if (need[1]) {
        const dim3 grid(plan.w_blocks, ci_chunks);
        if (plan.w_cols == 128)
            grad_weight_kernel<128><<<grid, GW_THREADS, GradWeightShape<128>::SMEM, stream>>>(
                x, grad_conv, weight_totals, B, C_in, C_out, H, W);
        else
            grad_weight_kernel<32><<<grid, GW_THREADS, GradWeightShape<32>::SMEM, stream>>>(
                x, grad_conv, weight_totals, B, C_in, C_out, H, W);
        if ((err = cudaGetLastError()) != cudaSuccess) return err;
        const int n = C_out * C_in * TAPS;
        grad_weight_reduce_kernel<<<(n + GWR_OUT - 1) / GWR_OUT, GWR_OUT * GWR_SLICES, 0, stream>>>(
            weight_totals, plan.w_blocks, grad_weight, C_in, C_out);
        if ((err = cudaGetLastError()) != cudaSuccess) return err;
    }
    if (need[0]) {
        const long long bands = (H + plan.band_rows - 1) / plan.band_rows;
        const long long blocks = (long long)B * bands * ((Wo + GI_OUT - 1) / GI_OUT);
        grad_input_kernel<<<dim3((unsigned)blocks, ci_chunks), 32 * GI_WARPS, gi_smem_bytes(C_out), stream>>>(
            grad_conv, weight, grad_x, C_in, C_out, H, W, plan.band_rows);
        if ((err = cudaGetLastError()) != cudaSuccess) return err;
    }
    return cudaSuccess;
}
// ---- The tiled and PyTorch's conv paths: any kernel size (tuples too) and any number of input and output channels,
// where the tuned kernels do not apply. PyTorch's convolution computes the conv (without its bias, in the input's
// dtype: eager's bits, read here as stored) or, on the tiled path, gn_sums_tiled_kernel does (float32, tiles of
// 16 x 32 output positions, 16 channels a thread); the kernels after it run the chain over it by (sample, channel)
// plane and by pixel (64-bit indices), every sum in a fixed order; formats of their own: norm (B, C, 2) holds y's plain scale and shift (fp32; half precision: half_norm_kernel's a and b),
// group_stats (B, G, 2) the groups' mean and 1/std. ----
struct Kernel2 { int h, w; };
constexpr int GEN_THREADS = 256;

// y = conv + bias as the model computes it: half precision (T) rounded after the conv and after the bias.
template <typename T>
__device__ __forceinline__ float conv_output_general(float conv, float bias) {
    return is_half<T>() ? round_to<T>(round_to<T>(conv) + bias) : conv + bias;
}

// The tiles: a block takes TILE_H x TILE_W output pixels of one sample (PIX a thread: rows ty, ty + ROW_STEP) and
// CO_T output channels at a time (PIX x CO_T values a thread).
constexpr int TILE_W = 32, CO_T = 16, PIX = 2, TILE_H = PIX * GEN_THREADS / TILE_W, ROW_STEP = GEN_THREADS / TILE_W;
static_assert(TILE_H * TILE_W == PIX * GEN_THREADS, "PIX pixels a thread");
static_assert(2 * CO_T == 32, "a channel's two sums a lane");

// The warp's sums of 32 values at once, lane l ending with value l's in v[0]: each of five steps halves the
// values a lane holds (it keeps the half its lane bit selects and adds its partner's), 31 shuffles, fixed order.
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

// The block's per-channel pair of sums over a tile: each thread's 2 CO_T values (channel j's at 2j, 2j + 1) added
// across the warp (warp_sum_transposed), then the warps in order, into partials (B, C_out, tiles, 2) at channels
// co0 .. co0 + CO_T - 1; the trailing barrier lets the caller's next chunk reuse warp_sums.
__device__ __forceinline__ void store_tile_sums(double (&v)[32], double (&warp_sums)[GEN_THREADS / 32][2 * CO_T],
                                                double* __restrict__ partials, long long b, int C_out, int co0,
                                                int tiles, int tile) {
    warp_sum_transposed(v);   // lane l: the warp's sum of value l
    warp_sums[threadIdx.x / 32][threadIdx.x % 32] = v[0];
    __syncthreads();
    if (threadIdx.x < 2 * CO_T && co0 + threadIdx.x / 2 < C_out) {
        double total = 0.0;
        for (int w = 0; w < GEN_THREADS / 32; ++w) total += warp_sums[w][threadIdx.x];
        partials[(((size_t)b * C_out + co0 + threadIdx.x / 2) * tiles + tile) * 2 + threadIdx.x % 2] = total;
    }
    __syncthreads();
}

struct TileConv {
    int C_in, C_out, H, W, ci_t;   // the conv's channels, its input's height and width; ci_t: tile_conv's stage
    Kernel2 k;
    __host__ __device__ int in_cols() const { return TILE_W + k.w - 1; }
    __host__ __device__ int in_floats() const { return ((TILE_H + k.h - 1) * in_cols() + 3) / 4 * 4; }   // a channel's, 16-byte aligned
    __host__ __device__ int w_floats() const { return k.h * k.w * CO_T; }                    // per input channel
    __host__ __device__ int tiles_w() const { return (W - k.w + 1 + TILE_W - 1) / TILE_W; }
    __host__ __device__ int tiles() const { return (H - k.h + 1 + TILE_H - 1) / TILE_H * tiles_w(); }
    size_t smem_bytes() const { return (size_t)ci_t * (in_floats() + w_floats()) * sizeof(float); }
};

// acc[p][j] = conv of output channel co0 + j at this thread's pixel p, (oh0 + ty + p ROW_STEP, ow0 + tx), of sample b.
// first: the block's first call for this tile (where all input channels fit one stage, later calls keep its rows).
// The tiled path's conv (float32): per chunk of ci_t input channels it stages the input rows the tile reads and the
// chunk's weights (transposed to [ci][kh][kw][co], so a tap's CO_T weights are four broadcast float4 loads) in
// shared memory; a tap is then PIX input loads, four weight loads and PIX x CO_T multiply-adds, summed over (ci, kh,
// kw) in that order. Dynamic shared memory: t.smem_bytes().
constexpr int COT = CO_T, PIXT = PIX;
__device__ __forceinline__ void tile_conv(const TileConv& t, const float* __restrict__ x, const float* __restrict__ weight,
                                          long long b, int oh0, int ow0, int co0, bool first, float* smem,
                                          float (&acc)[PIXT][COT])
{
    const int ty = threadIdx.x / TILE_W, tx = threadIdx.x % TILE_W, lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    float* in_s = smem;
    float* w_s = smem + (size_t)t.ci_t * t.in_floats();
    const int taps = t.k.h * t.k.w, rows = TILE_H + t.k.h - 1, cols = t.in_cols();
    const int j = threadIdx.x % COT, co = co0 + j;   // the weights: a thread per output channel of a tap
#pragma unroll
    for (int p = 0; p < PIXT; ++p)
#pragma unroll
        for (int i = 0; i < COT; ++i) acc[p][i] = 0.f;
    for (int ci0 = 0; ci0 < t.C_in; ci0 += t.ci_t) {
        const int nci = min(t.ci_t, t.C_in - ci0);
        __syncthreads();
        for (int ci = 0; ci < (first || nci < t.C_in ? nci : 0); ++ci) {   // a warp per input row, lanes along it
            const float* xc = x + ((size_t)b * t.C_in + ci0 + ci) * t.H * t.W;
            for (int r = warp; r < rows; r += GEN_THREADS / 32) {
                const int ih = oh0 + r;
                for (int col = lane; col < cols; col += 32) {
                    const int iw = ow0 + col;
                    const bool in = ih < t.H && iw < t.W;
                    in_s[(ci * rows + r) * cols + col] = in ? __ldg(xc + (size_t)ih * t.W + iw) : 0.f;
                }
            }
        }
        {   // w_s[(ci taps + tap) CO_T + j] = weight[co][ci0 + ci][tap]: (ci, tap) contiguous in the weight
            const float* wc = weight + ((size_t)co * t.C_in + ci0) * taps;
            for (int ct = threadIdx.x / COT; ct < nci * taps; ct += GEN_THREADS / COT)
                w_s[ct * COT + j] = co < t.C_out ? __ldg(wc + ct) : 0.f;
        }
        __syncthreads();
        for (int ci = 0; ci < nci; ++ci) {
            const float* in_r = in_s + (ci * rows + ty) * cols + tx;
            const float4* w4 = reinterpret_cast<const float4*>(w_s + (size_t)ci * taps * COT);
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


// acc[p][j] (output channel co0 + j at this thread's pixel p, (oh0 + ty + p ROW_STEP, ow0 + tx), of sample b)
// written to conv (B, C_out, Ho, Wo) inside the output.
__device__ __forceinline__ void store_conv(const TileConv& t, float* conv, long long b, int oh0, int ow0, int co0,
                                           const float (&acc)[PIX][CO_T]) {
    const int Ho = t.H - t.k.h + 1, Wo = t.W - t.k.w + 1;
    const int oh = oh0 + threadIdx.x / TILE_W, ow = ow0 + threadIdx.x % TILE_W;
#pragma unroll
    for (int p = 0; p < PIX; ++p)
#pragma unroll
        for (int j = 0; j < CO_T; ++j)
            if (oh + p * ROW_STEP < Ho && ow < Wo && co0 + j < t.C_out)
                conv[(((size_t)b * t.C_out + co0 + j) * Ho + oh + p * ROW_STEP) * Wo + ow] = acc[p][j];
}

// The tiled path's conv and its sums (float32). Block (b tiles + tile, chunk): per output channel of chunks chunk,
// chunk + gridDim.y, ... the conv over the tile (tile_conv), written to conv, and the tile's sum and sum of squares
// of y = conv + bias (double, fixed order) into partials (B, C_out, tiles, 2).
__global__ void __launch_bounds__(GEN_THREADS, 2) gn_sums_tiled_kernel(
    const float* __restrict__ x,          // (B, C_in, H, W)
    const float* __restrict__ weight,     // (C_out, C_in, kh, kw)
    const float* __restrict__ bias,       // (C_out)
    double* __restrict__ partials,        // (B, C_out, tiles, 2)
    float* __restrict__ conv,             // (B, C_out, Ho, Wo), before the bias
    TileConv t)
{
    extern __shared__ float4 smem4[];
    __shared__ double warp_sums[GEN_THREADS / 32][2 * CO_T];
    const int tile = (int)(blockIdx.x % t.tiles());
    const long long b = blockIdx.x / t.tiles();
    const int oh0 = tile / t.tiles_w() * TILE_H, ow0 = tile % t.tiles_w() * TILE_W;
    const int oh = oh0 + threadIdx.x / TILE_W, ow = ow0 + threadIdx.x % TILE_W;
    for (int co0 = blockIdx.y * CO_T; co0 < t.C_out; co0 += gridDim.y * CO_T) {
        float acc[PIX][CO_T];
        tile_conv(t, x, weight, b, oh0, ow0, co0, co0 == (int)blockIdx.y * CO_T, reinterpret_cast<float*>(smem4), acc);
        store_conv(t, conv, b, oh0, ow0, co0, acc);
        double v[2 * CO_T] = {};   // (sum, square) of each channel, the thread's pixels in order
#pragma unroll
        for (int p = 0; p < PIX; ++p) {
            const bool inside = oh + p * ROW_STEP < t.H - t.k.h + 1 && ow < t.W - t.k.w + 1;
#pragma unroll
            for (int j = 0; j < CO_T; ++j) {
                const float y = inside && co0 + j < t.C_out ? acc[p][j] + bias[co0 + j] : 0.f;
                v[2 * j] += y;
                v[2 * j + 1] += (double)y * y;
            }
        }
        store_tile_sums(v, warp_sums, partials, b, t.C_out, co0, t.tiles(), tile);
    }
}

// One block per sample: each channel's chunks added in order, then per group mean and 1/std (group_stats) and
// per channel y's scale gamma rstd and shift beta - mean scale (norm).
__global__ void __launch_bounds__(GEN_THREADS) gn_stats_general_kernel(
    const double* __restrict__ partials, const float* __restrict__ gn_weight, const float* __restrict__ gn_bias,
    float* __restrict__ norm, float* __restrict__ group_stats, int C_out, int groups, int chunks, double n_channel,
    double eps)
{
    extern __shared__ double sums[];   // [0, C): sum of y, [C, 2C): sum of y^2
    const long long b = blockIdx.x;
    for (int i = threadIdx.x; i < 2 * C_out; i += blockDim.x) {
        const double* part = partials + ((size_t)b * C_out + i % C_out) * chunks * 2 + i / C_out;
        double v = 0.0;
        for (int k = 0; k < chunks; ++k) v += part[2 * k];
        sums[i] = v;
    }
    __syncthreads();
    const int cpg = C_out / groups;
    for (int c = threadIdx.x; c < C_out; c += blockDim.x) {
        const int g = c / cpg;
        double s = 0.0, q = 0.0;
        for (int j = g * cpg; j < (g + 1) * cpg; ++j) { s += sums[j]; q += sums[C_out + j]; }
        const double n = n_channel * cpg, mean = s / n, rstd = 1.0 / sqrt(fmax(q / n - mean * mean, 0.0) + eps);
        const double scale = gn_weight[c] * rstd;
        norm[((size_t)b * C_out + c) * 2] = (float)scale;
        norm[((size_t)b * C_out + c) * 2 + 1] = (float)(gn_bias[c] - mean * scale);
        if (c % cpg == 0) {
            group_stats[((size_t)b * groups + g) * 2] = (float)mean;
            group_stats[((size_t)b * groups + g) * 2 + 1] = (float)rstd;
        }
    }
}

// x_res of channel c at one output: fp32 y + hardswish(tanh(y scale + shift)); half precision each op rounded as
// the tuned path rounds it (norm: half_norm_kernel's a and b), in TO after the conv's type T (autocast: float).
template <typename T, typename TO>
__device__ __forceinline__ float residual_general(float conv, float bias, float a, float b) {
    const float y = conv_output_general<T>(conv, bias);
    if (!is_half<T>()) {
        const float t = tanhf(fmaf(y, a, b));
        return y + hardswish(t);
    }
    const float z = round_to<TO>(fmaf(y, a, b));
    const float t = round_to<TO>(tanhf(z));
    const float hs = round_to<TO>(hardswish(t));
    return round_to<TO>(y + hs);
}

// ---- Over a kept conv output (B, C_out, S = Ho Wo), stored as ST: float32 (the tiled path's, PyTorch's in float32)
// or the half type PyTorch's conv wrote, read as it is. The statistics' and the backward's sums cut the batch by
// (sample, channel) plane, the output by pixel, so that small batches fill the GPU too. ----
constexpr int PLANE_THREADS = 256, PLANE_MIN_PIECE = 4 * PLANE_THREADS, LSE_WARPS = 8;

// Pieces a (sample, channel) plane is cut into: enough blocks for two waves of the GPU, no piece under
// PLANE_MIN_PIECE elements, at most 64.
int plane_pieces(long long B, int C, long long S) {
    const long long planes = std::max<long long>(1, B * C);
    const long long want = (2LL * device_info().sms * (2048 / PLANE_THREADS) + planes - 1) / planes;
    return (int)std::max<long long>(1, std::min<long long>({want, (S + PLANE_MIN_PIECE - 1) / PLANE_MIN_PIECE, 64}));
}

// The block's totals of (s, q) at thread 0: each warp's by a butterfly, then the warps' in order.
__device__ __forceinline__ double2 block_sum2(double s, double q) {
    __shared__ double2 warp_sums[PLANE_THREADS / 32];
#pragma unroll
    for (int o = 16; o > 0; o /= 2) {
        s += __shfl_xor_sync(0xffffffffu, s, o);
        q += __shfl_xor_sync(0xffffffffu, q, o);
    }
    if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = make_double2(s, q);
    __syncthreads();
    double2 t = make_double2(0.0, 0.0);
    if (threadIdx.x == 0)
        for (int w = 0; w < PLANE_THREADS / 32; ++w) { t.x += warp_sums[w].x; t.y += warp_sums[w].y; }
    return t;
}

// PyTorch's conv path's statistics: block (b C + c) pieces + piece sums y = conv + bias (rounded as the model
// rounds it in T) and y^2 over its piece of plane (b, c), in double, each thread's elements in order, into
// partials (B, C, pieces, 2).
template <typename ST>
__global__ void __launch_bounds__(PLANE_THREADS) plane_sums_kernel(
    const ST* __restrict__ conv, const float* __restrict__ bias, double* __restrict__ partials, int C, long long S,
    int pieces)
{
    const long long plane = blockIdx.x / pieces;
    const int piece = (int)(blockIdx.x % pieces);
    const ST* p = conv + plane * S;
    const float bc = bias[plane % C];
    double s = 0.0, q = 0.0;
    for (long long i = S * piece / pieces + threadIdx.x; i < S * (piece + 1) / pieces; i += PLANE_THREADS) {
        const float y = conv_output_general<ST>(to_float(p[i]), bc);
        s += y;
        q += (double)y * y;
    }
    const double2 t = block_sum2(s, q);
    if (threadIdx.x == 0) {
        partials[(size_t)blockIdx.x * 2] = t.x;
        partials[(size_t)blockIdx.x * 2 + 1] = t.y;
    }
}

// The output, a pixel's logsumexp over its channels' x_res (norm (B, C, 2): y's scale and shift; half precision
// half_norm_kernel's a and b). A block takes 32 consecutive pixels of the batch (a lane each) and its LSE_WARPS
// warps split the channels (warp w: w, w + LSE_WARPS, ...); the warps' maxima and sums are then combined in order.
// fp32 (and autocast, GroupNorm on in float32): one sweep, max and sum kept together (s rescaled when the max
// grows). Half precision (TO): two sweeps, the max first, then x - max, exp, the sum, log and + max each rounded,
// as PyTorch composes logsumexp. T: the conv's rounding (the half backward recomputes the output unrounded:
// T = TO = float over a half conv).
template <typename ST, typename T, typename TO>
__global__ void __launch_bounds__(32 * LSE_WARPS) lse_kernel(
    const ST* __restrict__ conv, const float* __restrict__ bias, const float* __restrict__ norm,
    TO* __restrict__ out, int C, long long S, long long pixels)
{
    __shared__ float part_m[LSE_WARPS][32], part_s[LSE_WARPS][32];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const long long px = blockIdx.x * 32LL + lane;
    const bool inside = px < pixels;
    const long long b = inside ? px / S : 0;
    const ST* cp = conv + b * C * S + (inside ? px % S : 0);
    const float* nb = norm + b * C * 2;
    float m = -INFINITY, sum = 0.f;
    for (int c = warp; inside && c < C; c += LSE_WARPS) {
        const float r = residual_general<T, TO>(to_float(cp[c * S]), bias[c], nb[2 * c], nb[2 * c + 1]);
        if (is_half<TO>()) {
            m = fmaxf(m, r);
        } else if (r > m) {
            sum = sum * expf(m - r) + 1.f;
            m = r;
        } else {
            sum += expf(r - m);
        }
    }
    part_m[warp][lane] = m;
    part_s[warp][lane] = sum;
    __syncthreads();
    float mx = part_m[0][lane];
    for (int w = 1; w < LSE_WARPS; ++w) mx = fmaxf(mx, part_m[w][lane]);
    if (is_half<TO>()) {   // the second sweep, against the pixel's max
        sum = 0.f;
        for (int c = warp; inside && c < C; c += LSE_WARPS) {
            const float r = residual_general<T, TO>(to_float(cp[c * S]), bias[c], nb[2 * c], nb[2 * c + 1]);
            sum += round_to<TO>(expf(round_to<TO>(r - mx)));
        }
        __syncthreads();
        part_s[warp][lane] = sum;
        __syncthreads();
    }
    if (warp != 0 || !inside) return;
    float total = 0.f;
    for (int w = 0; w < LSE_WARPS; ++w)
        total += is_half<TO>() ? part_s[w][lane] : part_m[w][lane] == -INFINITY ? 0.f
                                                 : part_s[w][lane] * expf(part_m[w][lane] - mx);
    out[px] = from_float<TO>(is_half<TO>() ? round_to<TO>(round_to<TO>(logf(round_to<TO>(total))) + mx)
                                           : mx + logf(total));
}

// Backward (float32), with r = x_res, u = g softmax_c(r) = g exp(r - out), t = tanh(z), z = y scale + shift,
// xhat = (y - mean) rstd and vn = u hardswish'(t) (1 - t^2):
//   dL/dy = u + rstd (gamma vn - P_g - xhat Q_g),  P_g = sum_{c in g} gamma sum vn / N_g,  Q_g likewise of vn xhat,
//   dL/dgamma = sum vn xhat, dL/dbeta = sum vn, dL/dbias = sum dL/dy.
// WRITE = false: the sums of vn and vn xhat per (sample, channel, piece); WRITE: dL/dy (written to grad_conv in the
// conv's type, rounded as PyTorch hands it to its conv backward) and its unrounded sum.
struct GeneralBackward {
    const float *bias, *gn_weight, *norm, *group_stats, *out, *grad_out;   // out: the output unrounded, float32
    const double* coef;   // (B, G, 2): P_g, Q_g (WRITE)
    double* partials;     // (B, C_out, pieces, 2): sum vn, sum vn xhat; WRITE: [0] the sum of dL/dy
    int C_out, groups, pieces;
    long long S;          // Ho Wo
};

// The backward's two sweeps, blocks as plane_sums_kernel's (one piece of a (sample, channel) plane each): per element
// y, t, x_res, u, vn and xhat (WRITE: dL/dy, written); the block's two sums (WRITE: the sum of dL/dy, and 0) into
// partials, in a fixed order.
template <typename ST, bool WRITE>
__global__ void __launch_bounds__(PLANE_THREADS) backward_plane_kernel(const GeneralBackward a,
                                                                       const ST* __restrict__ conv,
                                                                       ST* __restrict__ grad_conv)
{
    const long long plane = blockIdx.x / a.pieces, b = plane / a.C_out;
    const int piece = (int)(blockIdx.x % a.pieces), c = (int)(plane % a.C_out), g = c / (a.C_out / a.groups);
    const float scale = a.norm[plane * 2], shift = a.norm[plane * 2 + 1], bc = a.bias[c], gamma = a.gn_weight[c];
    const float mean = a.group_stats[(b * a.groups + g) * 2], rstd = a.group_stats[(b * a.groups + g) * 2 + 1];
    const float pg = WRITE ? (float)a.coef[(b * a.groups + g) * 2] : 0.f;
    const float qg = WRITE ? (float)a.coef[(b * a.groups + g) * 2 + 1] : 0.f;
    const ST* p = conv + plane * a.S;
    const float* g_out = a.grad_out + b * a.S;
    const float* lse = a.out + b * a.S;
    double s0 = 0.0, s1 = 0.0;
    for (long long i = a.S * piece / a.pieces + threadIdx.x; i < a.S * (piece + 1) / a.pieces; i += PLANE_THREADS) {
        const float y = to_float(p[i]) + bc;
        const float th = tanhf(fmaf(y, scale, shift));
        const float r = y + hardswish(th);
        const float u = g_out[i] * expf(r - lse[i]);
        const float vn = u * hardswish_grad(th) * (1.f - th * th), xhat = (y - mean) * rstd;
        if (WRITE) {
            const float gy = u + rstd * (gamma * vn - pg - xhat * qg);
            grad_conv[plane * a.S + i] = from_float<ST>(gy);
            s0 += gy;
        } else {
            s0 += vn;
            s1 += vn * xhat;
        }
    }
    const double2 t = block_sum2(s0, s1);
    if (threadIdx.x == 0) {
        a.partials[(size_t)blockIdx.x * 2] = t.x;
        a.partials[(size_t)blockIdx.x * 2 + 1] = t.y;
    }
}

// Per sample (a block each): per channel the chunks of sum vn and sum vn xhat in order (kept in sums (B, 2C) for
// the GroupNorm parameters' gradients), then per group P_g and Q_g.
__global__ void __launch_bounds__(GEN_THREADS) backward_coef_general_kernel(
    const double* __restrict__ partials, const float* __restrict__ gn_weight, double* __restrict__ sums,
    double* __restrict__ coef, int C_out, int groups, int chunks, double n_channel)
{
    const long long b = blockIdx.x;
    for (int i = threadIdx.x; i < 2 * C_out; i += blockDim.x) {
        const double* part = partials + ((size_t)b * C_out + i % C_out) * chunks * 2 + i / C_out;
        double v = 0.0;
        for (int k = 0; k < chunks; ++k) v += part[2 * k];
        sums[(size_t)b * 2 * C_out + i] = v;   // [0, C): sum vn (dbeta's), [C, 2C): sum vn xhat (dgamma's)
    }
    __syncthreads();
    const int cpg = C_out / groups;
    for (int g = threadIdx.x; g < groups; g += blockDim.x) {
        double p = 0.0, q = 0.0;
        for (int j = g * cpg; j < (g + 1) * cpg; ++j) {
            p += gn_weight[j] * sums[(size_t)b * 2 * C_out + j];
            q += gn_weight[j] * sums[(size_t)b * 2 * C_out + C_out + j];
        }
        coef[((size_t)b * groups + g) * 2] = p / (n_channel * cpg);
        coef[((size_t)b * groups + g) * 2 + 1] = q / (n_channel * cpg);
    }
}

// Per channel (a warp each): one kind of the channel's sums over the batch (and chunks): dL/dbias from the WRITE
// pass's partials, or dL/dgamma, dL/dbeta from sums. Lane l adds terms l, l + 32, ... in order, then a fixed tree.
__global__ void __launch_bounds__(32) channel_grads_general_kernel(
    const double* __restrict__ bias_partials, const double* __restrict__ sums, float* __restrict__ grad_bias,
    float* __restrict__ grad_gn_weight, float* __restrict__ grad_gn_bias, int B, int C_out, int chunks)
{
    const int c = blockIdx.x, kind = blockIdx.y;   // 0: bias, 1: gamma, 2: beta
    if (kind == 0 && grad_bias == nullptr) return;
    const long long n = kind == 0 ? (long long)B * chunks : B;
    double v = 0.0;
    for (long long i = threadIdx.x; i < n; i += 32)
        v += kind == 0 ? bias_partials[(((size_t)(i / chunks) * C_out + c) * chunks + i % chunks) * 2]
                       : sums[(size_t)i * 2 * C_out + (kind == 1 ? C_out + c : c)];
#pragma unroll
    for (int m = 16; m > 0; m /= 2) v += __shfl_xor_sync(0xffffffffu, v, m);
    if (threadIdx.x == 0) (kind == 0 ? grad_bias : kind == 1 ? grad_gn_weight : grad_gn_bias)[c] = (float)v;
}


// ---- The plan: which path an input takes, decided here once a call (conv2d_gn_lse_make_plan) for the forward, the
// backward, the workspace and plan() (the C++ operator and ModelNew.plan read the Plan, nothing else).
// TUNED (conv_kernel, gram_kernel: the conv never written): kernel 3, C_in <= TUNED_MAX_C_IN, C_out <= C_PAD, and
// output rows of at least TUNED_MIN_WO (a unit is 128 columns of a row; at KernelBench's previous 30-column rows the
// tuned kernels lost to the tiled ones 2.9x, and those to eager), and a batch of at least TUNED_MIN_BATCH (gram_kernel
// cuts a sample into at most H / 16 bands and gram_stats_kernel takes a block a sample: at the benchmark's
// configuration, H200, PyTorch's conv path is 2.4x, 2.0x, 1.7x faster forward at batch 1, 2, 4 (fp32; bf16 2.3x to
// 1.3x), even at 8, where the tuned path's forward + backward is 1.18x faster).
// TILED: float32 with at most TILED_MAX_C_IN input channels and at least TILED_MIN_PLANES output planes (batch x
// C_out) elsewhere: the forward's conv on the CUDA cores in tiles (gn_sums_tiled_kernel), which writes it for the
// output's sweep and the backward, whose sweeps and gradients are then PyTorch's conv path's (H200, fp32 forward:
// at KernelBench's previous size, 128x3x32x32, 1.54x PyTorch's conv path; 3 -> 16 channels 1.15x to 1.49x at batch
// 64 and 128, 3 -> 64 1.16x to 1.23x at batch 32 to 128; below 1024 planes too few blocks: 0.75x to 0.97x at 3 -> 16
// batch 32, 3 -> 64 batch 1 and 8; 8 -> 64 kernel 5 only 1.07x, so 8 stays PyTorch's).
// TORCH_CONV: everywhere else, PyTorch's conv (cuDNN, the user's flags and dtype), then the chain's tiled kernels
// over its output; the backward's dL/dx and dL/dW from PyTorch's convolution backward. The implicit-GEMM engine that
// served from 16 input channels lost to it 1.2x to 4x (docs/conv2d_groupnorm_tanh_hardswish_residualadd_logsumexp.md).
bool tuned_config(int C_in, int C_out, int kh, int kw, int W) {
    return kh == K && kw == K && C_in <= TUNED_MAX_C_IN && C_out <= C_PAD && W - K + 1 >= TUNED_MIN_WO;
}
int tuned_min_batch() { return TUNED_MIN_BATCH; }
static Path conv2d_gn_lse_path(long long B, int C_in, int C_out, int kh, int kw, int W, bool half) {
    if (tuned_config(C_in, C_out, kh, kw, W) && B >= TUNED_MIN_BATCH) return Path::TUNED;
    return !half && C_in <= TILED_MAX_C_IN && B * C_out >= TILED_MIN_PLANES ? Path::TILED : Path::TORCH_CONV;
}
Plan conv2d_gn_lse_make_plan(long long B, int C_in, int C_out, int kh, int kw, int W, bool half) {
    return Plan{conv2d_gn_lse_path(B, C_in, C_out, kh, kw, W, half), 0, 0, 0};
}
// The tiled conv's stage: as many input channels as fit 40 KB of shared memory (at least one; above 48 KB with the
// static arrays, for kernels over about 40 wide, the kernel is allowed what it needs).
static TileConv tile_plan(int C_in, int C_out, int H, int W, Kernel2 k) {
    TileConv t{C_in, C_out, H, W, 1, k};
    t.ci_t = (int)std::max<size_t>(1, std::min<size_t>((size_t)C_in, (40u << 10) / t.smem_bytes()));
    return t;
}

// The workspace of the tiled and PyTorch's conv paths (doubles): partials (B, C, chunks, 2), chunks the tiled conv's
// tiles or the planes' pieces, then sums (B, 2C) and coef (B, G, 2) for the backward.
long long general_workspace_doubles(int B, int C_out, int groups, int H, int W, int kh, int kw) {
    const long long S = (long long)(H - kh + 1) * (W - kw + 1);
    const int chunks = std::max(TileConv{0, 0, H, W, 1, {kh, kw}}.tiles(), plane_pieces(B, C_out, S));
    return (long long)B * C_out * chunks * 2 + (long long)B * 2 * C_out + (long long)B * groups * 2;
}

// Chunks of CO_T output channels the tiled conv's blocks split between them: enough blocks for two waves.
static int sums_splits(int B, const TileConv& t) {
    const long long blocks = (long long)B * t.tiles(), chunks = (t.C_out + CO_T - 1) / CO_T;
    return (int)std::max<long long>(1, std::min<long long>(chunks, 2LL * device_info().sms / std::max<long long>(1, blocks)));
}

// The tiled and PyTorch's conv paths' forward over conv (B, C_out, Ho, Wo: the conv before its bias, in the dtype of
// conv_type; the tiled path computes it there from x and the weight, float32): the statistics, norm (half: then
// half_norm_kernel into half_norm), the output. Dtype codes as forward_launch's.
cudaError_t general_forward_launch(const float* x, const float* weight, void* conv, const float* bias,
                                   const float* gn_weight, const float* gn_bias, double* workspace, float* norm,
                                   float* group_stats, float* half_norm, void* out, int conv_type, int norm_type,
                                   int B, int C_in, int C_out, int groups, int H, int W, int kh, int kw,
                                   const Plan& plan, double eps, cudaStream_t stream) {
    const bool tiled = plan.path == Path::TILED;
    const long long S = (long long)(H - kh + 1) * (W - kw + 1);
    const TileConv t = tile_plan(C_in, C_out, H, W, {kh, kw});
    const int chunks = tiled ? t.tiles() : plane_pieces(B, C_out, S);
    cudaError_t err;
    if (tiled) {   // float32 only (conv2d_gn_lse_path)
        const size_t smem = t.smem_bytes();
        if (smem > (40u << 10) && (err = cudaFuncSetAttribute(gn_sums_tiled_kernel,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem)) != cudaSuccess)
            return err;
        gn_sums_tiled_kernel<<<dim3((unsigned)((long long)t.tiles() * B), sums_splits(B, t)), GEN_THREADS, smem,
                               stream>>>(x, weight, bias, workspace, static_cast<float*>(conv), t);
    } else {
        err = with_type(conv_type, [&](auto type) {
            using ST = decltype(type);
            plane_sums_kernel<ST><<<(unsigned)((long long)B * C_out * chunks), PLANE_THREADS, 0, stream>>>(
                static_cast<const ST*>(conv), bias, workspace, C_out, S, chunks);
            return cudaSuccess;
        });
    }
    if ((err = cudaGetLastError()) != cudaSuccess) return err;
    gn_stats_general_kernel<<<B, GEN_THREADS, 2 * C_out * sizeof(double), stream>>>(
        workspace, gn_weight, gn_bias, norm, group_stats, C_out, groups, chunks, (double)S, eps);
    if ((err = cudaGetLastError()) != cudaSuccess) return err;
    return with_types(conv_type, norm_type, [&](auto type, auto to) {
        using T = decltype(type);
        using TO = decltype(to);
        if (is_half<T>()) {
            const long long n = (long long)B * C_out;
            half_norm_kernel<TO><<<(unsigned)((n + 255) / 256), 256, 0, stream>>>(group_stats, gn_weight, gn_bias,
                                                                                 half_norm, C_out, groups, n);
            cudaError_t e = cudaGetLastError();
            if (e != cudaSuccess) return e;
        }
        lse_kernel<T, T, TO><<<(unsigned)((B * S + 31) / 32), 32 * LSE_WARPS, 0, stream>>>(
            static_cast<const T*>(conv), bias, is_half<T>() ? half_norm : norm, static_cast<TO*>(out), C_out, S,
            B * S);
        return cudaGetLastError();
    });
}

// The tiled and PyTorch's conv paths' backward, up to dL/dy: conv (B, C_out, Ho, Wo) the forward's kept conv (before
// its bias, in the dtype of conv_type); dL/dy written to grad_conv (same shape and dtype) where conv_grads (some conv
// gradient is wanted), for the caller to give to PyTorch's convolution backward. out_float (half precision): the
// output recomputed here in float32, unrounded, as the sweeps read it (the same buffer as out).
cudaError_t general_backward_launch(const void* conv, int conv_type, const float* bias, const float* gn_weight,
                                    const float* norm, const float* group_stats, const float* out, float* out_float,
                                    const float* grad_out, double* workspace, void* grad_conv, bool conv_grads,
                                    float* grad_bias, float* grad_gn_weight, float* grad_gn_bias, int B, int C_out,
                                    int groups, int H, int W, int kh, int kw, cudaStream_t stream) {
    const long long S = (long long)(H - kh + 1) * (W - kw + 1);
    const int pieces = plane_pieces(B, C_out, S);
    double* partials = workspace;
    double* sums = partials + (size_t)B * C_out * pieces * 2;
    double* coef = sums + (size_t)B * 2 * C_out;
    const GeneralBackward a{bias, gn_weight, norm, group_stats, out, grad_out, coef, partials, C_out, groups, pieces, S};
    const unsigned blocks = (unsigned)((long long)B * C_out * pieces);
    return with_type(conv_type, [&](auto type) {
        using ST = decltype(type);
        const ST* c = static_cast<const ST*>(conv);
        cudaError_t err;
        if (out_float != nullptr) {
            lse_kernel<ST, float, float><<<(unsigned)((B * S + 31) / 32), 32 * LSE_WARPS, 0, stream>>>(
                c, bias, norm, out_float, C_out, S, B * S);
            if ((err = cudaGetLastError()) != cudaSuccess) return err;
        }
        backward_plane_kernel<ST, false><<<blocks, PLANE_THREADS, 0, stream>>>(a, c, nullptr);
        if ((err = cudaGetLastError()) != cudaSuccess) return err;
        backward_coef_general_kernel<<<B, GEN_THREADS, 0, stream>>>(partials, gn_weight, sums, coef, C_out, groups,
                                                                    pieces, (double)S);
        if ((err = cudaGetLastError()) != cudaSuccess) return err;
        if (conv_grads) {   // dL/dy, its sums (the bias gradient) into partials
            backward_plane_kernel<ST, true><<<blocks, PLANE_THREADS, 0, stream>>>(a, c, static_cast<ST*>(grad_conv));
            if ((err = cudaGetLastError()) != cudaSuccess) return err;
        }
        channel_grads_general_kernel<<<dim3(C_out, 3), 32, 0, stream>>>(
            partials, sums, conv_grads ? grad_bias : nullptr, grad_gn_weight, grad_gn_bias, B, C_out, pieces);
        return cudaGetLastError();
    });
}

// The launch plan for a configuration: each stage's kernel and the rule that picked it, from the Plan the launchers
// read (conv2d_gn_lse_make_plan; on the tuned path backward_geometry sizes the gradients' grids on the GPU at hand).
// conv_type: the dtype code. One line a stage, "stage: kernel; rule".
std::string conv2d_gn_lse_plan(long long B, int C_in, int C_out, int H, int W, int kh, int kw, int conv_type) {
    const bool half = conv_type != 0;
    const Path path = conv2d_gn_lse_make_plan(B, C_in, C_out, kh, kw, W, half).path;
    const std::string half_norm = half ? " + half_norm_kernel (the GroupNorm statistics rounded as PyTorch's)" : "";
    const std::string tuned_rule = "kernel " + std::to_string(K) + ", C_in <= " + std::to_string(TUNED_MAX_C_IN) +
                                   ", C_out <= " + std::to_string(C_PAD) + ", output rows wider than " +
                                   std::to_string(TUNED_MIN_WO - 1) + ", batch >= " + std::to_string(TUNED_MIN_BATCH);
    const std::string tiled_rule = "float32, C_in <= " + std::to_string(TILED_MAX_C_IN) + ", batch x C_out >= " +
                                   std::to_string(TILED_MIN_PLANES);
    std::string s;
    if (path == Path::TUNED) {
        s += "forward statistics: gram_kernel + gram_stats_kernel" + half_norm + "; tuned (" + tuned_rule + "): each "
             "sample's statistics from its input's Gram matrix\n";
        s += "forward output: conv_kernel<LOGSUMEXP>; tuned: split TF32 on the tensor cores, one value a pixel; in "
             "training it keeps the conv for the backward (float32, in its own order)\n";
        s += std::string("backward sums: ") +
             (half ? "conv_kernel<LOGSUMEXP, LOADED> (the output, unrounded) + " : "") + "conv_kernel<BSUMS, LOADED> + "
             "grad_coef_kernel + gn_param_grad_kernel; tuned, over the kept conv\n";
        s += "backward dL/dy: conv_kernel<GRAD, LOADED> + bias_grad_kernel; tuned, over the kept conv\n";
        s += "backward dL/dW: grad_weight_kernel<128> (output rows wider than 32 and 128 columns' shared memory on "
             "this GPU) or <32> + grad_weight_reduce_kernel; tuned (backward_geometry)\n";
        s += "backward dL/dx: grad_input_kernel; tuned, bands of rows sized to fill the GPU (backward_geometry)\n";
        return s;
    }
    if (path == Path::TILED) {
        s += "forward statistics: gn_sums_tiled_kernel + gn_stats_general_kernel; tiled: " + tiled_rule +
             " (the conv on the CUDA cores, written for the output and the backward)\n";
    } else {
        s += "forward conv: PyTorch's convolution (at::_convolution); PyTorch's conv path: outside the tuned envelope "
             "(" + tuned_rule + ") and the tiled one (" + tiled_rule + ")\n";
        s += "forward statistics: plane_sums_kernel + gn_stats_general_kernel" + half_norm + "; over PyTorch's conv "
             "output, read in its dtype\n";
    }
    s += "forward output: lse_kernel; over the conv output\n";
    s += std::string("backward sums: ") + (half ? "lse_kernel (the output recomputed unrounded) + " : "") +
         "backward_plane_kernel<false> + backward_coef_general_kernel; over the forward's saved conv output\n";
    s += "backward dL/dy: backward_plane_kernel<true> + channel_grads_general_kernel; over the saved conv output\n";
    s += "backward dL/dx, dL/dW: PyTorch's convolution backward (at::convolution_backward); off the tuned path\n";
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

long long forward_workspace_doubles(int B, int C_in, int H, int W);
int conv_smem_bytes(int C_in);
int smem_per_block();
cudaError_t gram_launch(const float* x, double* workspace, int B, int C_in, int H, int W, cudaStream_t stream);
cudaError_t forward_launch(const float* x, const float* weight, const float* bias, const float* gn_weight,
                           const float* gn_bias, double* workspace, float* norm, float* group_stats, float* half_norm,
                           void* out, float* conv, int conv_type, int norm_type, int B, int C_in, int C_out, int groups,
                           int H, int W, double eps, cudaStream_t stream);
long long kept_conv_floats(long long B, int H, int W);
cudaError_t logsumexp_launch(const float* conv, const float* bias, const float* norm, float* out, int B, int C_out,
                             int H, int W, cudaStream_t stream);
cudaError_t convert_launch(const void* in, int in_type, void* out, int out_type, long long n, cudaStream_t stream);
long long backward_geometry(Plan& plan, int B, int C_in, int C_out, int H, int W);
bool tuned_config(int C_in, int C_out, int kh, int kw, int W);
int tuned_min_batch();
std::string conv2d_gn_lse_plan(long long B, int C_in, int C_out, int H, int W, int kh, int kw, int conv_type);
long long general_workspace_doubles(int B, int C_out, int groups, int H, int W, int kh, int kw);
cudaError_t general_forward_launch(const float* x, const float* weight, void* conv, const float* bias,
                                   const float* gn_weight, const float* gn_bias, double* workspace, float* norm,
                                   float* group_stats, float* half_norm, void* out, int conv_type, int norm_type,
                                   int B, int C_in, int C_out, int groups, int H, int W, int kh, int kw,
                                   const Plan& plan,
                                   double eps, cudaStream_t stream);
Plan conv2d_gn_lse_make_plan(long long B, int C_in, int C_out, int kh, int kw, int W, bool half);
cudaError_t general_backward_launch(const void* conv, int conv_type, const float* bias, const float* gn_weight,
                                    const float* norm, const float* group_stats, const float* out, float* out_float,
                                    const float* grad_out, double* workspace, void* grad_conv, bool conv_grads,
                                    float* grad_bias, float* grad_gn_weight, float* grad_gn_bias, int B, int C_out,
                                    int groups, int H, int W, int kh, int kw, cudaStream_t stream);
cudaError_t backward_launch(const Plan& plan, const float* x, const float* weight, const float* conv, const float* bias,
                            const float* gn_weight, const float* norm, const float* group_stats, const float* out,
                            const float* grad_out, void* workspace, float* grad_conv, double* sums, float* coef,
                            float* grad_x, float* grad_weight, float* grad_bias, float* grad_gn_weight,
                            float* grad_gn_bias, const bool* need, int B, int C_in, int C_out, int groups, int H, int W,
                            cudaStream_t stream);

static void check(cudaError_t err, const char* what) {
    TORCH_CHECK(err == cudaSuccess, "conv2d_gn_lse: ", what, " failed: ", cudaGetErrorString(err));
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

// Shapes and devices are checked by ModelNew; these checks guard direct calls. The shared memory is
// checked on the current device (after the device guard). Dtypes as the reference takes them: the conv's
// input and parameters of one floating dtype (float32, float16 or bfloat16), the GroupNorm's parameters the
// same or float32 (torch.autocast's GroupNorm).
static void check_input(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& gn_weight) {
    TORCH_CHECK(x.is_cuda() && x.dim() == 4 && x.is_contiguous(), "conv2d_gn_lse: input must be a contiguous 4-D "
                "CUDA tensor");
    TORCH_CHECK_VALUE(takes_dtype(x), "conv2d_gn_lse: input must be float32, float16 or bfloat16, got ",
                      c10::toString(x.scalar_type()));
    TORCH_CHECK_VALUE(weight.scalar_type() == x.scalar_type() && bias.scalar_type() == x.scalar_type(),
                      "conv2d_gn_lse: input is ", c10::toString(x.scalar_type()), " but the conv's parameters are ",
                      c10::toString(weight.scalar_type()), ": convert one to the other (model.to(dtype)) or run "
                      "under torch.autocast");
    TORCH_CHECK_VALUE(gn_weight.scalar_type() == x.scalar_type() || gn_weight.scalar_type() == at::kFloat,
                      "conv2d_gn_lse: the GroupNorm's parameters must be float32 or the input's dtype");
    TORCH_CHECK(x.size(1) == weight.size(1) && x.size(2) >= weight.size(2) && x.size(3) >= weight.size(3),
                "conv2d_gn_lse: input channels or size do not fit the weight");
}
static void check_smem(int64_t C_in) {
    const int per_block = smem_per_block(), need = conv_smem_bytes((int)C_in);
    TORCH_CHECK(per_block >= 0, "conv2d_gn_lse: the device's shared memory could not be queried");
    TORCH_CHECK(need <= per_block, "conv2d_gn_lse: in_channels = ", C_in, " needs ", need / 1024,
                " KB of shared memory a block, this GPU has ", per_block / 1024,
                " KB (in_channels <= 8 fits every GPU since sm_80)");
}

// Whether an input takes the tuned path (else PyTorch's conv path): the plan's rule, its shape part (tuned_shape: the
// conv's channels and kernel and the input's width, which a Meta kernel with symbolic sizes specialises) and the
// batch (plan_of: concrete sizes only; forward_meta writes the batch rule into a shape instead).
static int64_t static_size(const Tensor& t, int d) { return t.sym_size(d).guard_int(__FILE__, __LINE__); }
static Plan plan_of(const Tensor& x, const Tensor& weight) {
    return conv2d_gn_lse_make_plan(x.size(0), (int)weight.size(1), (int)weight.size(0), (int)weight.size(2),
                                   (int)weight.size(3), (int)x.size(3), weight.scalar_type() != at::kFloat);
}
static bool tuned_shape(const Tensor& x, const Tensor& weight) {
    return tuned_config((int)static_size(weight, 1), (int)static_size(weight, 0), (int)static_size(weight, 2),
                        (int)static_size(weight, 3), (int)static_size(x, 3));
}

// The operators (ModelNew checks its input first, with clearer messages): model (differentiable: the
// Autograd kernel at the end), and the forward and backward it is made of:
//   forward(x, weight, bias, gn_weight, gn_bias, groups, eps, training) -> (out (B, 1, Ho, Wo), norm (B, C, 2),
//     group_stats (B, G, 2), conv: the conv output before its bias (B, C, Ho, Wo) on the tiled path (float32) and
//     PyTorch's conv path (PyTorch's, in the input's dtype), kept for the backward as eager keeps it; empty,
//     (0, C, Ho, Wo), on the tuned path; kept: on the tuned path in training (a backward may follow), the conv
//     in the tuned kernels' order (kept_conv_floats, float32), else empty);
//   backward(grad_out, x, weight, bias, gn_weight, norm, group_stats, out, conv, kept, conv_mask) -> the gradients of
//     x, weight, bias (where conv_mask asks; undefined otherwise), gn_weight and gn_bias.
std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor> forward_cuda(const Tensor& x_in, const Tensor& weight_in,
                                                                const Tensor& bias, const Tensor& gn_weight,
                                                                const Tensor& gn_bias, int64_t groups, double eps,
                                                                bool training) {
    auto x = x_in.contiguous(), weight = weight_in.contiguous();
    check_input(x, weight, bias, gn_weight);
    TORCH_CHECK_VALUE(gn_bias.scalar_type() == gn_weight.scalar_type(), "conv2d_gn_lse: the GroupNorm's weight and "
                      "bias must have one dtype");
    const c10::cuda::CUDAGuard guard(x.device());
    const int64_t B = x.size(0), C_in = x.size(1), C_out = weight.size(0), H = x.size(2), W = x.size(3);
    const int kh = (int)weight.size(2), kw = (int)weight.size(3);
    const Plan plan = plan_of(x, weight);
    const bool tuned = plan.path == Path::TUNED;
    if (tuned) check_smem(C_in);
    // The output in the GroupNorm's dtype; the statistics in float32 (the backward's, in either precision).
    const auto f32 = x.options().dtype(at::kFloat);
    const int64_t Ho = H - kh + 1, Wo = W - kw + 1;
    auto conv = at::empty({tuned ? 0 : B, C_out, Ho, Wo}, x.options());
    auto kept = at::empty({0}, f32);
    const auto empty_outputs = [&] {
        return std::make_tuple(at::empty({B, 1, Ho, Wo}, gn_weight.options()), at::empty({B, C_out, 2}, f32),
                               at::empty({B, groups, 2}, f32));
    };
    if (B * Ho * Wo == 0) {
        auto [out, norm, group_stats] = empty_outputs();
        return {out, norm, group_stats, conv, kept};
    }
    TORCH_CHECK(x.numel() / B < (int64_t(1) << 31), "conv2d_gn_lse: one sample must have fewer than 2^31 elements");
    if (!tuned) {   // the tiled path computes the conv (before the bias) into conv; PyTorch's conv path takes PyTorch's
        const auto stream = c10::cuda::getCurrentCUDAStream();
        const bool tiled = plan.path == Path::TILED;
        if (!tiled) conv = torch_conv(x, weight, OptTensor(), {1, 1}, {0, 0}, false, {0, 0});
        auto workspace = at::empty({general_workspace_doubles(B, C_out, groups, H, W, kh, kw)},
                                   x.options().dtype(torch::kFloat64));
        auto [out, norm, group_stats] = empty_outputs();
        const auto bf = converted(bias, at::kFloat);
        const auto gwf = converted(gn_weight, at::kFloat), gbf = converted(gn_bias, at::kFloat);
        auto half_norm = x.scalar_type() != at::kFloat ? at::empty({B, C_out, 2}, f32) : Tensor();
        check(general_forward_launch(tiled ? x.data_ptr<float>() : nullptr, tiled ? weight.data_ptr<float>() : nullptr,
                                     conv.data_ptr(), bf.data_ptr<float>(), gwf.data_ptr<float>(),
                                     gbf.data_ptr<float>(), workspace.data_ptr<double>(), norm.data_ptr<float>(),
                                     group_stats.data_ptr<float>(),
                                     half_norm.defined() ? half_norm.data_ptr<float>() : nullptr, out.data_ptr(),
                                     dtype_code(x), dtype_code(gn_weight), B, C_in, C_out, groups, H, W, kh, kw, plan,
                                     eps, stream), "forward");
        return {out, norm, group_stats, conv, kept};
    }
    // The first kernel is launched before the outputs are allocated (on an idle GPU, every microsecond
    // of host time before it is a microsecond of the call's time).
    auto workspace = at::empty({forward_workspace_doubles(B, C_in, H, W)}, x.options().dtype(torch::kFloat64));
    const auto stream = c10::cuda::getCurrentCUDAStream();
    const auto xf = converted(x, at::kFloat);   // half precision: the inputs as floats, the roundings in the kernel
    check(gram_launch(xf.data_ptr<float>(), workspace.data_ptr<double>(), B, C_in, H, W, stream), "forward");
    auto [out, norm, group_stats] = empty_outputs();
    if (training) kept = at::empty({kept_conv_floats(B, (int)H, (int)W)}, f32);
    const auto wf = converted(weight, at::kFloat), bf = converted(bias, at::kFloat);
    const auto gwf = converted(gn_weight, at::kFloat), gbf = converted(gn_bias, at::kFloat);
    auto half_norm = x.scalar_type() != at::kFloat ? at::empty({B, C_out, 2}, f32) : Tensor();
    check(forward_launch(xf.data_ptr<float>(), wf.data_ptr<float>(), bf.data_ptr<float>(), gwf.data_ptr<float>(),
                         gbf.data_ptr<float>(), workspace.data_ptr<double>(), norm.data_ptr<float>(),
                         group_stats.data_ptr<float>(), half_norm.defined() ? half_norm.data_ptr<float>() : nullptr,
                         out.data_ptr(), training ? kept.data_ptr<float>() : nullptr, dtype_code(x),
                         dtype_code(gn_weight), B, C_in, C_out, groups, H, W, eps, stream), "forward");
    return {out, norm, group_stats, conv, kept};
}

// The tuned path's backward reads the conv its training forward kept (kept). In half precision the chain's backward
// runs in float32 (on float copies of its inputs, exact), from the forward's statistics and its output recomputed
// unrounded (from kept), and each gradient is rounded to its tensor's dtype. PyTorch's
// conv path: the chain's backward over the forward's conv output, then PyTorch's convolution backward (on dL/dy
// in the conv's dtype, as eager's) for dL/dx and dL/dW.
std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor> backward_cuda(
        const Tensor& grad_out, const Tensor& x_in, const Tensor& weight_in, const Tensor& bias_in,
        const Tensor& gn_weight_in, const Tensor& norm, const Tensor& group_stats, const Tensor& out_in,
        const Tensor& conv, const Tensor& kept, Mask conv_mask) {
    const bool half = x_in.scalar_type() != at::kFloat;
    auto x = x_in.contiguous();
    check_input(x, weight_in, bias_in, gn_weight_in);
    const c10::cuda::CUDAGuard guard(x.device());
    Plan plan = plan_of(x, weight_in);
    if (plan.path != Path::TUNED) {
        const int64_t B = x.size(0), C_out = weight_in.size(0), H = x.size(2), W = x.size(3);
        const int kh = (int)weight_in.size(2), kw = (int)weight_in.size(3);
        const int64_t groups = group_stats.size(1), Ho = H - kh + 1, Wo = W - kw + 1;
        const auto f32 = x.options().dtype(at::kFloat);
        const bool any = B * Ho * Wo > 0, conv_grads = conv_mask[0] || conv_mask[1] || conv_mask[2];
        auto grad_bias = conv_mask[2] ? (any ? at::empty({C_out}, f32) : at::zeros({C_out}, f32)) : Tensor();
        auto grad_gn_weight = any ? at::empty({C_out}, f32) : at::zeros({C_out}, f32);
        auto grad_gn_bias = any ? at::empty({C_out}, f32) : at::zeros({C_out}, f32);
        Tensor grad_x, grad_weight;
        if (!any) {
            grad_x = conv_mask[0] ? at::zeros_like(x) : Tensor();
            grad_weight = conv_mask[1] ? at::zeros_like(weight_in) : Tensor();
        } else {
            const auto stream = c10::cuda::getCurrentCUDAStream();
            auto workspace = at::empty({general_workspace_doubles(B, C_out, groups, H, W, kh, kw)},
                                       x.options().dtype(torch::kFloat64));
            const auto kept = conv.contiguous();
            auto grad_conv = conv_grads ? at::empty_like(kept) : Tensor();   // dL/dy, in the conv's dtype
            auto out = half ? at::empty({B, 1, Ho, Wo}, f32) : out_in.contiguous();   // half: recomputed, unrounded
            const auto bf = converted(bias_in, at::kFloat), gwf = converted(gn_weight_in, at::kFloat);
            const auto g = converted(grad_out, at::kFloat);
            check(general_backward_launch(kept.data_ptr(), dtype_code(kept), bf.data_ptr<float>(),
                                          gwf.data_ptr<float>(), norm.data_ptr<float>(),
                                          group_stats.data_ptr<float>(), out.data_ptr<float>(),
                                          half ? out.data_ptr<float>() : nullptr, g.data_ptr<float>(),
                                          workspace.data_ptr<double>(),
                                          grad_conv.defined() ? grad_conv.data_ptr() : nullptr, conv_grads,
                                          grad_bias.defined() ? grad_bias.data_ptr<float>() : nullptr,
                                          grad_gn_weight.data_ptr<float>(), grad_gn_bias.data_ptr<float>(), B, C_out,
                                          groups, H, W, kh, kw, stream), "backward");
            if (conv_mask[0] || conv_mask[1]) {
                auto r = torch_conv_backward(grad_conv, x, weight_in, {1, 1}, {0, 0}, false,
                                             {0, 0}, {conv_mask[0], conv_mask[1], false});
                grad_x = std::get<0>(r);
                grad_weight = std::get<1>(r);
            }
        }
        return {grad_x, grad_weight, converted(grad_bias, bias_in.scalar_type()),
                converted(grad_gn_weight, gn_weight_in.scalar_type()), converted(grad_gn_bias, gn_weight_in.scalar_type())};
    }
    x = converted(x, at::kFloat);
    auto weight = converted(weight_in, at::kFloat), bias = converted(bias_in, at::kFloat);
    auto gn_weight = converted(gn_weight_in, at::kFloat);
    auto out = half ? Tensor() : out_in.contiguous();   // half: recomputed below, unrounded
    const int64_t B = x.size(0), C_in = x.size(1), C_out = weight.size(0), H = x.size(2), W = x.size(3);
    const int kh = (int)weight.size(2), kw = (int)weight.size(3);
    check_smem(C_in);
    const int64_t groups = group_stats.size(1), Ho = H - kh + 1, Wo = W - kw + 1;
    auto g = converted(grad_out, at::kFloat);
    const bool any = B * Ho * Wo > 0;   // else every gradient is zero (or empty)
    TORCH_CHECK(!any || (kept.scalar_type() == at::kFloat && kept.numel() == kept_conv_floats(B, (int)H, (int)W)),
                "conv2d_gn_lse: the backward needs the conv its training forward kept (forward with training=True)");
    if (any && half) {
        out = at::empty({B, 1, Ho, Wo}, x.options());
        check(logsumexp_launch(kept.data_ptr<float>(), bias.data_ptr<float>(), norm.data_ptr<float>(),
                               out.data_ptr<float>(), B, C_out, H, W, c10::cuda::getCurrentCUDAStream()), "backward");
    }
    auto grad_x = conv_mask[0] ? at::empty_like(x) : Tensor();
    auto grad_weight = conv_mask[1] ? (any ? at::empty_like(weight) : at::zeros_like(weight)) : Tensor();
    auto grad_bias = conv_mask[2] ? (any ? at::empty_like(bias) : at::zeros_like(bias)) : Tensor();
    auto grad_gn_weight = any ? at::empty({C_out}, x.options()) : at::zeros({C_out}, x.options());
    auto grad_gn_bias = any ? at::empty({C_out}, x.options()) : at::zeros({C_out}, x.options());
    if (any) {
        const bool need[3] = {conv_mask[0], conv_mask[1], conv_mask[2]};
        const long long ws = backward_geometry(plan, B, C_in, C_out, H, W);
        TORCH_CHECK(ws >= 0, "conv2d_gn_lse: backward plan failed");
        auto workspace = at::empty({ws}, x.options().dtype(torch::kUInt8));
        auto grad_conv = need[0] || need[1] || need[2] ? at::empty({B, C_out, Ho, (Wo + 3) / 4 * 4}, x.options()) : Tensor();
        auto sums = at::empty({B, 2 * C_out}, x.options().dtype(torch::kFloat64));
        auto coef = at::empty({B, C_out, 4}, x.options());
        const auto ptr = [](Tensor& t) { return t.defined() ? t.data_ptr<float>() : nullptr; };
        check(backward_launch(plan, x.data_ptr<float>(), weight.data_ptr<float>(), kept.data_ptr<float>(),
                              bias.data_ptr<float>(),
                              gn_weight.data_ptr<float>(), norm.data_ptr<float>(), group_stats.data_ptr<float>(),
                              out.data_ptr<float>(), g.data_ptr<float>(), workspace.data_ptr(), ptr(grad_conv),
                              sums.data_ptr<double>(), coef.data_ptr<float>(), ptr(grad_x), ptr(grad_weight),
                              ptr(grad_bias), grad_gn_weight.data_ptr<float>(), grad_gn_bias.data_ptr<float>(), need,
                              B, C_in, C_out, groups, H, W, c10::cuda::getCurrentCUDAStream()), "backward");
    }
    return {converted(grad_x, x_in.scalar_type()), converted(grad_weight, weight_in.scalar_type()),
            converted(grad_bias, bias_in.scalar_type()), converted(grad_gn_weight, gn_weight_in.scalar_type()),
            converted(grad_gn_bias, gn_weight_in.scalar_type())};
}

// Meta: shapes and dtypes only, in symbolic sizes (torch.compile with dynamic shapes).
std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor> forward_meta(const Tensor& x, const Tensor& weight,
                                                                const Tensor& bias, const Tensor& gn_weight,
                                                                const Tensor& gn_bias, int64_t groups, double eps,
                                                                bool training) {
    const auto B = x.sym_size(0), C = weight.sym_size(0);
    const auto Ho = x.sym_size(2) - weight.sym_size(2) + 1, Wo = x.sym_size(3) - weight.sym_size(3) + 1;
    const auto f32 = x.options().dtype(at::kFloat);
    // conv's batch: B, or 0 on the tuned path (from tuned_min_batch() on), in arithmetic rather than a comparison:
    // a symbolic batch takes no guard (torch.export with a dynamic batch on both sides of the rule)
    const auto from_rule = (B - (tuned_min_batch() - 1)).max(c10::SymInt(0)).min(c10::SymInt(1));   // 0 or 1
    const bool tuned = tuned_shape(x, weight);
    const auto kept = tuned ? (B * (1 - from_rule)).max(c10::SymInt(0)) : B;   // max: >= 0 shown
    // the tuned training forward's conv: kept_conv_floats(B, H, W) floats on the tuned path
    const auto row_floats = kept_conv_floats(1, (int)static_size(weight, 2), (int)static_size(x, 3));   // Ho = 1
    const auto kept_floats = tuned && training ? B * from_rule * Ho * c10::SymInt(row_floats) : c10::SymInt(0);
    return {at::empty_symint({B, 1, Ho, Wo}, gn_weight.options()), at::empty_symint({B, C, 2}, f32),
            at::empty_symint({B, groups, 2}, f32), at::empty_symint({kept, C, Ho, Wo}, x.options()),
            at::empty_symint({kept_floats}, f32)};
}

std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor> backward_meta(
        const Tensor& grad_out, const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& gn_weight,
        const Tensor& norm, const Tensor& group_stats, const Tensor& out, const Tensor& conv, const Tensor& kept,
        Mask conv_mask) {
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
        const Tensor& norm, const Tensor& group_stats, const Tensor& out, const Tensor& conv, const Tensor& kept,
        Mask conv_mask) {
    auto r = [&] {
        at::AutoDispatchBelowADInplaceOrView below_autograd;
        return backward_op().call(grad_out, x, weight, bias, gn_weight, norm, group_stats, out, conv, kept, conv_mask);
    }();
    refuse_double_backward("conv2d_groupnorm_tanh_hardswish_residualadd_logsumexp", {grad_out, x, weight, bias, gn_weight, out},
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
// inputs as given); norm (B, C, 2), each channel's affine GroupNorm coefficients; group_stats (B, G, 2), each
// group's mean and 1/std; out (B, 1, Ho, Wo), the model's output (the logsumexp the backward differentiates);
// conv, PyTorch's conv output on its path ((0, C, Ho, Wo) on the tuned path); kept, the tuned path's conv.
struct Model : torch::autograd::Function<Model> {
    static Tensor forward(torch::autograd::AutogradContext* ctx, const Tensor& x, const Tensor& weight,
                          const Tensor& bias, const Tensor& gn_weight, const Tensor& gn_bias, int64_t groups,
                          double eps) {
        at::AutoDispatchBelowADInplaceOrView below_autograd;
        auto r = forward_op().call(x, weight, bias, gn_weight, gn_bias, groups, eps, true);
        ctx->save_for_backward({x, weight, bias, gn_weight, std::get<1>(r), std::get<2>(r), std::get<0>(r),
                                std::get<3>(r), std::get<4>(r)});
        ctx->saved_data["mask"] = c10::List<bool>({x.requires_grad(), weight.requires_grad(), bias.requires_grad()});
        return std::get<0>(r);
    }

    static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                   torch::autograd::variable_list grads) {
        const auto s = ctx->get_saved_variables();
        const auto m = ctx->saved_data["mask"].toBoolList();
        auto r = backward_op().call(grads[0], s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7], s[8],
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
// conv parameters cast), GroupNorm in float32 (on autocast's float32 list) and so what follows it (tanh and
// HardSwish follow their input; the residual sum promotes to float32; logsumexp is on the float32 list).
Tensor model_autocast(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& gn_weight,
                      const Tensor& gn_bias, int64_t groups, double eps) {
    c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::DispatchKey::AutocastCUDA);
    const auto low = autocast_dtype();
    return model_op().call(autocast_to(x, low), autocast_to(weight, low), autocast_to(bias, low),
                           autocast_to(gn_weight, at::kFloat), autocast_to(gn_bias, at::kFloat), groups, eps);
}

// plan(x_shape, weight_shape, dtype code): each stage's kernel and why (ModelNew.plan).
std::string plan_op(at::IntArrayRef x, at::IntArrayRef w, int64_t conv_type) {
    TORCH_CHECK(x.size() == 4 && w.size() == 4, "conv2d_gn_lse: plan takes 4-D shapes");
    return conv2d_gn_lse_plan((long long)x[0], (int)x[1], (int)w[0], (int)x[2], (int)x[3], (int)w[2], (int)w[3], (int)conv_type);
}

DEFINE_OPS(OPS_NAMESPACE, m) {
    m.def("plan(int[] x_shape, int[] weight_shape, int dtype) -> str", plan_op);
    m.def("forward(Tensor x, Tensor weight, Tensor bias, Tensor gn_weight, Tensor gn_bias, int groups, float eps, "
          "bool training) -> (Tensor, Tensor, Tensor, Tensor, Tensor)");
    m.def("backward(Tensor grad_out, Tensor x, Tensor weight, Tensor bias, Tensor gn_weight, Tensor norm, "
          "Tensor group_stats, Tensor out, Tensor conv, Tensor kept, bool[3] conv_mask) -> "
          "(Tensor, Tensor, Tensor, Tensor, Tensor)");
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
_namespace = "conv2d_groupnorm_tanh_hardswish_residualadd_logsumexp_" + hashlib.sha256((cpp_source + cuda_source).encode()).hexdigest()[:12]
if not hasattr(getattr(torch.ops, _namespace), "model"):
    _build("conv2d_groupnorm_tanh_hardswish_residualadd_logsumexp", _namespace + ("_mma_sync_ext" if _no_sm90a else "_ext"), _namespace,
           ["-O3"] + (["-gencode=arch=compute_90a,code=sm_90a"] if _hopper else []))
_ops = getattr(torch.ops, _namespace)
_model = _ops.model.default   # an overload, not the packet: a little less host time per call

DTYPES = (torch.float32, torch.float16, torch.bfloat16)   # as the reference takes them (model.to(dtype))


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, groups, eps=1e-5):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.group_norm = nn.GroupNorm(groups, out_channels, eps=eps)
        self.tanh = nn.Tanh()
        self.hard_swish = nn.Hardswish()

    def forward(self, x):
        # Host time per call shows in a harness's timing: one test on the common path (_refuse says what is
        # wrong), and the submodules and parameters read from their dicts, where nn.Module's __getattr__ finds them.
        conv, gn = self._modules["conv"], self._modules["group_norm"]
        k = conv.kernel_size
        if not ((x.is_cuda or x.is_meta) and x.dtype in DTYPES and x.dim() == 4 and x.shape[1] == conv.in_channels
                and x.shape[2] >= k[0] and x.shape[3] >= k[1]):
            self._refuse(x)
        cp, gp = conv._parameters, gn._parameters
        return _model(x, cp["weight"], cp["bias"], gp["weight"], gp["bias"], gn.num_groups, gn.eps)

    def plan(self, x):
        """{stage: "kernel; rule"}: which kernel runs at each stage of the forward and the backward for input x,
        and why, from the decisions the launchers make."""
        text = _ops.plan(list(x.shape), list(self.conv.weight.shape), DTYPES.index(x.dtype))
        build = ("wgmma; this extension was built for sm_90a (Hopper)" if _hopper else
                 "mma.sync; built without sm_90a (a GPU other than Hopper, or VARIANTS_NO_SM90A=1)")
        return dict([line.split(": ", 1) for line in text.splitlines()] + [("tensor cores", build)])

    def _refuse(self, x):
        if not (x.is_cuda or x.is_meta):   # meta: shapes only, for tracing
            raise ValueError(f"input must be a CUDA tensor (or meta), got one on {x.device}")
        if x.dtype not in DTYPES:
            raise ValueError(f"input must be float32, float16 or bfloat16, got {x.dtype}")
        if x.dim() != 4:
            raise ValueError(f"input must be 4-D (B, C, H, W), got {x.dim()}-D")
        if x.shape[1] != self.conv.in_channels:
            raise ValueError(f"input has {x.shape[1]} channels, the conv expects {self.conv.in_channels}")
        if any(s < k for s, k in zip(x.shape[2:], self.conv.kernel_size)):
            raise ValueError(f"input spatial size {tuple(x.shape[2:])} is smaller than the kernel "
                             f"{self.conv.kernel_size}")


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
