"""ConvTranspose3d -> Swish -> GroupNorm -> HardSwish, all in custom CUDA (KernelBench level 2, problem 60).

GroupNorm needs each (sample, group)'s statistics before any output can be written, and the output (about 1 GB at
the benchmark) is the one tensor that must cross memory. So on the tuned path one persistent kernel runs two
phases: phase 1 computes the transposed conv and Swish in registers and keeps only per-channel sums; phase 2
recomputes them (ten multiply-adds a value: cheaper than storing and re-reading y), normalises, applies HardSwish
and writes the output once. The backward recomputes y the same way.

Plan (struct Plan, made once a call by convt_swish_gn_hardswish_make_plan from convt_tuned, the dtype and
allow_tf32; the launchers, workspaces and ModelNew.plan(x) read it; tests/test_plan.py pins it): the tuned path
(kernel 3, stride 2, padding 1; C_in <= 4, >= 512 input positions), else PyTorch's own transposed conv
(at::_convolution under the user's flags and dtype: eager's bits) and our chain over its output.
  forward
    convt_swish_gn_kernel         tuned: the parity split (each input position feeds 2 x 2 x 2 outputs through dense
                                  loops), work items taken by ticket, phase 2 items trailing phase 1's; in half
                                  precision it writes Swish rounded (RAW) only
    gn_partials_kernel, gn_finalize_kernel, gn_apply_kernel
                                  PyTorch's conv path, float32: Swish on the fly, GroupNorm in pieces sized to fill
                                  the GPU (Welford states in order), HardSwish: two reads of y, one write
    gn_fused_kernel               the same in one launch where 128 or more (sample, group)s of at most 32768
                                  elements fill the GPU: a block each, y read once into registers
    swish_half_kernel             PyTorch's conv path, half precision: Swish rounded as PyTorch's
    group_norm_hardswish_kernel   half precision: GroupNorm's statistics in PyTorch's own order, then HardSwish
  backward
    convt_backward_sweep_kernel   tuned path: two sweeps over the forward's items, y recomputed in registers as
                                  phase 1 computes it: the per-channel sums, then dL/dy (written once)
    chain_backward_kernel         PyTorch's conv path: the two sweeps over y (float32: the forward's; half: PyTorch's
                                  conv recomputes it unrounded on float copies), a thread an element
    chain_sums_kernel, gn_param_grad_kernel  the sums in order; dL/dgamma, dL/dbeta
    bias_grad_convt_kernel        dL/dbias
    grad_input_convt_tuned_kernel dL/dx on the tuned path: the parity split read backwards (4 input rows a thread,
                                  dL/dy rows loaded once per output depth)
    grad_weight_convt_tc_kernel + finish_weight_grad_convt_kernel  dL/dW on the tuned path: split-TF32 mma.sync,
                                  rows of dL/dy by tap parity (16 channels x 8 columns a step), totals in order
    PyTorch's convolution backward  dL/dx and dL/dW elsewhere, as eager's (half precision: dL/dx on dL/dy rounded
                                  to the dtype; dL/dW on float dL/dy, split in two TF32 parts by split_tf32_kernel
                                  under allow_tf32: float32-level)
    convert_kernel                half precision: float copies of the inputs, the gradients' roundings
Every sum of ours is in a fixed order; the tickets only decide which block does an item: the same input gives the
same bits; PyTorch's conv backward is as deterministic as eager's (torch.backends.cudnn.deterministic).
Each call allocates its workspace (so CUDA graph pools see it) and clears its counters on the stream.

Semantics (docs/DESIGN.md): under torch.backends.cudnn.allow_tf32 (read at every call) the tuned conv's operands
are rounded to TF32 as cuDNN rounds them (PyTorch's conv path: cuDNN's own, its float32 gradients TF32 as eager's;
the tuned path's gradient kernels stay float32-level: dL/dW in split TF32); with the flag off all is fp32-level.
In float16/bfloat16 each op is rounded where PyTorch rounds it (the conv, its bias, the sigmoid, the product,
GroupNorm's statistics in its own order, HardSwish). The backward runs in float32 and rounds each gradient to its
tensor's dtype. Double backward raises.

Floor at the benchmark size (B=128, 3->16 channels, 16x32x32 -> 31x63x63): writing the 1.0 GB output once, 0.25 ms
at 4.1 TB/s; the kernel is bound by issue and by Swish's MUFU work (about 23 instructions an output and phase).
Measured (H200, run_all.py, README): forward 0.67 ms fp32 (2.7x the floor, 10.0x eager), 1.03 to 1.18 ms in half
(PyTorch's order of statistics needs the Swish output stored and read twice); forward + backward 3.61 ms fp32 (4.5x
eager; dL/dW 0.60 ms of it, 2.5x its floor of reading dL/dy once), 3.93 ms in half (7.4x).
The design in detail and what was tried: docs/convtranspose3d_swish_groupnorm_hardswish.md.

Run: python variants/convtranspose3d_swish_groupnorm_hardswish.py
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
# (convt_swish_gn_hardswish_make_plan), the C++ operator and the launchers read it.
plan_types = r"""
// A transposed conv's shape: channels, input and output sizes, and per axis (d, h, w) kernel, stride, padding.
struct ConvShape {
    int C_in, C_out, D, H, W, Do, Ho, Wo;
    int k[3], s[3], p[3];
};
enum class Path { TUNED, TORCH_CONV };   // convt_tuned
// The conv's dL/dx and dL/dW: the tuned kernels; or PyTorch's convolution backward, in float32 as eager's (TORCH),
// in half precision on dL/dy rounded to the dtype for dL/dx and on float dL/dy for dL/dW, in float32 (TORCH_HALF)
// or, under allow_tf32, split in two TF32 parts by split_tf32_kernel (TORCH_HALF_SPLIT: float32-level).
enum class ConvGrads { TUNED, TORCH, TORCH_HALF, TORCH_HALF_SPLIT };
struct Plan {
    Path path;
    bool vec;          // tuned: rows of the float input as 16-byte loads (W a multiple of 4, the input aligned)
    ConvGrads grads;
    int gn_threads;    // PyTorch's conv path, GroupNorm in float32: gn_fused_kernel's block (0: the split kernels)
};
"""

cuda_source = plan_types + r"""
#include <cuda_runtime.h>
#include <algorithm>
#include <cfloat>
#include <cstdint>
#include <string>
#include <type_traits>

// ---- The plan's thresholds (convt_tuned applies them; its comment has the measurements, H200, made against the
// conv engine since removed, not yet against PyTorch's conv path):
constexpr int TUNED_MAX_C_IN = 4;                // at 3 input channels the tuned pass won 1.6x to 8.6x, at 8 it lost
constexpr long long TUNED_MIN_POSITIONS = 512;   // input positions a sample: at 256 (4x8x8) the tuned pass lost 1.1x
// PyTorch's conv path, float32 GroupNorm: gn_fused_kernel (a block a (sample, group) of at most 32768 elements) from
// this many (sample, group)s; fewer leave SMs idle: at 8 and 64 (batch 1 and 8, 8 groups) the split kernels ran 0.90x
// to 1.01x of it, at 256 (batch 32) it ran 1.03x to 1.22x faster (channel sweep, H200, interleaved)
constexpr long long GN_FUSED_MIN_GROUPS = 128;

constexpr int K = 3, TAPS = K * K * K;   // stride 2, padding 1: the configuration the parity split is for
constexpr int CO_TILE = 4;      // output channels per sweep of a thread: one float4 of weights per tap
static_assert(CO_TILE % 2 == 0, "phase 1 pairs the channels of a chunk");
constexpr int ROWS = 4;         // input rows m_h per thread
constexpr int WARPS = 8, THREADS = 32 * WARPS;
constexpr int MIN_BLOCKS = 2;   // caps registers at 128: 16 warps per SM
constexpr int CI_CHUNK = 4;     // input channels staged in shared memory at once
constexpr int CO_GROUP = 32;    // output channels per block
constexpr int CHUNKS = CO_GROUP / CO_TILE;
static_assert(CO_GROUP <= 32, "warp 0 loads a phase-2 item's normalisation");
constexpr int SPLIT = 4;        // parts of each phase-2 item in the launch's last round (a quarter of its chunks
                                // each; with fewer than 4 chunks some parts are empty)
constexpr int TILE_H = WARPS * ROWS + 1;   // input rows a block reads (+1 halo)
constexpr int TILE_W = 36;      // row pitch of a staged tile: columns 0 .. 32 are read (+1 halo); 16-byte rows
constexpr float LOG2E = 1.4426950408889634f;
constexpr double LN2 = 0.69314718055994531;

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



__device__ __forceinline__ float hardswish(float z) { return z * fminf(fmaxf(z + 3.f, 0.f), 6.f) * (1.f / 6.f); }

// Streaming (evict-first) loads and stores of one element, as a float.
__device__ __forceinline__ float load_streaming(const float* p) { return __ldcs(p); }
template <typename T> __device__ __forceinline__ float load_streaming(const T* p) {
    return to_float(T{__ldcs(reinterpret_cast<const unsigned short*>(p))});
}
__device__ __forceinline__ void store_streaming(float* p, float v) { __stcs(p, v); }
template <typename T> __device__ __forceinline__ void store_streaming(T* p, float v) {
    __stcs(reinterpret_cast<unsigned short*>(p), from_float<T>(v).bits);
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

// v = hi + lo with hi rounded to TF32 (to nearest even) and lo the rest, exact: PyTorch's conv backward under
// allow_tf32 on hi and on lo, added, gives float32-level gradients (split TF32 through cuDNN) where a TF32 product of
// dL/dy would not do (PyTorch's conv path in half precision; its x and weight are exact in TF32).
__global__ void split_tf32_kernel(const float* __restrict__ v, float* __restrict__ hi, float* __restrict__ lo, long long n) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        const float h = round_tf32(v[i]);
        hi[i] = h;
        lo[i] = v[i] - h;
    }
}
cudaError_t split_tf32_launch(const float* v, float* hi, float* lo, long long n, cudaStream_t stream) {
    split_tf32_kernel<<<(unsigned)std::min<long long>((n + 255) / 256, 1 << 16), 256, 0, stream>>>(v, hi, lo, n);
    return cudaGetLastError();
}


// The configuration convt_swish_gn_kernel takes: kernel 3, stride 2, padding 1 on every axis, at most TUNED_MAX_C_IN
// input channels and at least TUNED_MIN_POSITIONS input positions a sample, where its one pass over the output beats a
// conv written and normalised in more passes. The 4 and the 512 were set against the implicit-GEMM engine that served
// elsewhere until 2026-11-28 (H200, batch 32, interleaved, forward / forward + backward: C_in 3 -> 16 on 4x8x8 the
// engine 1.1x / -, on 6x14x14 the tuned path 1.6x / 1.1x, on 8x16x16 2.0x / 1.5x, at the benchmark 8.6x; C_in 8 the
// engine on all three; C_in 16 the engine 4.9x). PyTorch's conv path, which replaced the engine, was faster than it
// forward + backward in all 48 rows of the channel sweep and forward in 33 (0.63x to 3.4x, the slow ones fp32 at small
// batches); the tuned path was not re-measured against it at these edges.
bool convt_tuned(const ConvShape& cs) {
    for (int a = 0; a < 3; ++a)
        if (cs.k[a] != K || cs.s[a] != 2 || cs.p[a] != 1) return false;
    return cs.C_in <= TUNED_MAX_C_IN && (long long)cs.D * cs.H * cs.W >= TUNED_MIN_POSITIONS;
}
// One call's plan, every stage decided here once. half: the conv's dtype is a half type; tf32: allow_tf32 for convs
// as the call reads it (the backward's, when it runs); x_misalign: the float input's address modulo 16 (0 for a copy:
// half precision's float copy).
static int gn_fused_threads(long long n);
Plan convt_swish_gn_hardswish_make_plan(const ConvShape& cs, long long B, int groups, bool half, bool tf32,
                                        int x_misalign) {
    const bool tuned = convt_tuned(cs), fused_gn = !tuned && B * groups >= GN_FUSED_MIN_GROUPS;
    return Plan{tuned ? Path::TUNED : Path::TORCH_CONV, tuned && cs.W % 4 == 0 && (half || x_misalign == 0),
                tuned ? ConvGrads::TUNED : !half ? ConvGrads::TORCH : tf32 ? ConvGrads::TORCH_HALF_SPLIT
                                                                            : ConvGrads::TORCH_HALF,
                fused_gn ? gn_fused_threads((long long)(cs.C_out / groups) * cs.Do * cs.Ho * cs.Wo) : 0};
}

struct Geometry {
    int C_in, C_out, D, H, W, Do, Ho, Wo;
    int h_tiles, w_tiles, tiles;   // tiles per sample: (m_d, TILE_H - 1 rows, 32 columns)
    int items;                     // blocks per sample and phase: tiles x groups of CO_GROUP channels
    // The launch's schedule (schedule()): phase 2 of sample s comes among phase 1 of samples s + lag and on;
    // one ticket per item, but SPLIT per item from ticket split_from on (the last round of phase-2 items:
    // blocks finish together), `tickets` in all.
    int lag, split_from, tickets;
};

struct Params {
    const float* x;          // (B, C_in, D, H, W), contiguous
    const float* weight;     // (C_in, C_out, K, K, K), contiguous (ConvTranspose3d layout)
    const float* bias;       // (C_out) or nullptr
    const float* gn_weight;  // (C_out)
    const float* gn_bias;    // (C_out)
    double* partials;        // (B, C_out, tiles, 2): each phase-1 block's sum and sum of squares per channel
    float* norm;             // (B, C_out, 2): per channel 1 / (-ln(2) scale) and shift (half: scale, shift)
    double* stats;           // (B, groups, 2): per group the mean and 1/std of the Swish output (for the backward)
    int* counters;           // zero at the launch: [0] the work items' tickets
    int* done;               // (B): sample b's phase-1 items done; zero at the launch
    int* ready;              // (B): sample b's norm written; zero at the launch
    void* out;               // (B, C_out, Do, Ho, Wo), the GroupNorm's element type
    int B, groups;
    bool vec;                // W % 4 == 0 and x 16-byte aligned: the input is staged in 16-byte copies
    double eps;
    Geometry g;
};

// Where a block's work lies: sample b, input depth md, first input row h0 and column w0, output
// channels cg0 + CO_TILE k0 .. cg0 + CO_TILE k1 - 1; WRITE: phase 2.
struct Item {
    bool write;
    int b, tile, md, h0, w0, cg0;
    int k0, k1;   // chunks of CO_TILE channels
};

typedef float InputTile[CI_CHUNK][2][TILE_H][TILE_W];   // input depths m_d and m_d + 1, zero outside the input

struct Smem {
    InputTile in[2];                         // the current block's tile and the next one's, loading
    float4 w[CI_CHUNK][TAPS][CHUNKS];        // weights times -log2(e), a float4 over 4 output channels
    float rows[WARPS][2 * ROWS][64];         // phase 2: a warp's output rows, for coalesced stores
    float4 bias[CHUNKS];                     // times -log2(e); half: zero (the conv alone, bias_r added after)
    float4 bias_r[CHUNKS];                   // half: the bias, added to the rounded conv
    float4 inv[2][CHUNKS], shift[2][CHUNKS]; // phase 2: the normalisation (Params::norm), [buf] as `in`
    double red[CO_GROUP][2][WARPS];          // phase 1: per channel and warp, sum and sum of squares
    int ticket[2], last;
    Item next;                               // the block's next item, by warp 1 from its ticket
};

// Tap k of a stride-2, padding-1 axis: which output parity it feeds and which input offset it reads.
__device__ __forceinline__ constexpr int parity_of(int k) { return k == 1 ? 0 : 1; }
__device__ __forceinline__ constexpr int offset_of(int k) { return k == 0 ? 1 : 0; }

// One MUFU operation each (ex2 to 2 ulp, rcp to 1 ulp): the output's error budget is 1e-5 relative.
__device__ __forceinline__ float exp2_approx(float v) {
    float r;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(v));
    return r;
}
__device__ __forceinline__ float rcp_approx(float v) {
    float r;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(v));
    return r;
}

// Half precision: y = conv + bias and Swish = y sigmoid(y) rounded as PyTorch rounds them in T: the conv's
// output, the bias added, the sigmoid, the product. The sigmoid by ex2 and rcp (PyTorch: expf and a division):
// measured the same outputs outside the half tolerance as with expf and a division, in half the time.
template <typename T>
__device__ __forceinline__ float swish_of_rounded(float y) {   // y: the conv's output as PyTorch rounds it
    return round_to<T>(round_to<T>(rcp_approx(1.f + exp2_approx(fminf(-LOG2E * y, 63.f)))) * y);
}
template <typename T>
__device__ __forceinline__ float swish_rounded(float conv, float bias) {
    return swish_of_rounded<T>(round_to<T>(round_to<T>(conv) + bias));
}

// *dst = ok ? *src : 0, asynchronously where the GPU can (sm_80+): the loads of a whole tile are in
// flight at once. `src` must be a valid address even when !ok.
__device__ __forceinline__ void copy_async(float* dst, const float* src, bool ok) {
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n"
                 :: "r"((unsigned)__cvta_generic_to_shared(dst)), "l"(src), "r"(ok ? 4 : 0) : "memory");
#else
    *dst = ok ? __ldg(src) : 0.f;
#endif
}
// The same for 16 bytes; both addresses 16-byte aligned.
__device__ __forceinline__ void copy_async16(float* dst, const float* src, bool ok) {
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
                 :: "r"((unsigned)__cvta_generic_to_shared(dst)), "l"(src), "r"(ok ? 16 : 0) : "memory");
#else
    *reinterpret_cast<float4*>(dst) = ok ? __ldg(reinterpret_cast<const float4*>(src)) : make_float4(0.f, 0.f, 0.f, 0.f);
#endif
}
__device__ __forceinline__ void copy_async_commit() {
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}
// Waits for this thread's copies, all of them or (ALL = false) all but the last committed group.
template <bool ALL>
__device__ __forceinline__ void copy_async_wait() {
#if __CUDA_ARCH__ >= 800
    if (ALL) asm volatile("cp.async.wait_all;\n" ::: "memory");
    else asm volatile("cp.async.wait_group 1;\n" ::: "memory");
#endif
}


// Item u of a phase, all its chunks: sample u / items, then its tile and channel group.
__device__ __forceinline__ Item item_at(int u, const Geometry& g)
{
    Item it;
    const int n = g.items;
    it.write = false;
    it.b = u / n;
    it.tile = u % n % g.tiles;
    it.cg0 = u % n / g.tiles * CO_GROUP;
    it.w0 = it.tile % g.w_tiles * 32;
    it.h0 = it.tile / g.w_tiles % g.h_tiles * (TILE_H - 1);
    it.md = it.tile / (g.w_tiles * g.h_tiles);
    it.k0 = 0;
    it.k1 = (min(CO_GROUP, g.C_out - it.cg0) + CO_TILE - 1) / CO_TILE;   // the group's channels
    return it;
}

// The order of the items, each phase's items sample after sample: first phase 1 of samples 0 .. lag - 1,
// then phase-1 and phase-2 items in turn (phase 2 lag samples behind), then phase 2 of the last lag samples.
// So the output is written over the whole launch, not in its second half (where the writes alone would
// take most of the DRAM bandwidth), and every phase-2 item comes after all phase-1 items of its sample.
// From ticket split_from on, SPLIT tickets share an item, each with its part of the chunks.
__device__ __forceinline__ Item item_of(int t, int B, const Geometry& g)
{
    const bool split = t >= g.split_from;
    const int part = split ? (t - g.split_from) % SPLIT : 0;
    if (split) t = g.split_from + (t - g.split_from) / SPLIT;
    const int n = g.items, lead = g.lag * n, mixed = 2 * (B - g.lag) * n;
    int u;   // the item's index within its phase
    bool write;
    if (t < lead) {
        write = false;
        u = t;
    } else if (t < lead + mixed) {
        const int v = t - lead;
        write = v % 2 == 1;
        u = write ? v / 2 : lead + v / 2;
    } else {
        write = true;
        u = t - lead - mixed / 2;
    }
    Item it = item_at(u, g);
    it.write = write;
    const int chunks = it.k1;
    it.k0 = split ? part * chunks / SPLIT : 0;
    it.k1 = split ? (part + 1) * chunks / SPLIT : chunks;
    return it;
}

// item_of for one thread, out of line, into shared memory: the other threads read it instead of each
// computing it (its integer divisions and their MUFU reciprocals).
__device__ __noinline__ void store_item(Item* dst, int t, int B, const Geometry g) { *dst = item_of(t, B, g); }

// Starts copying input channels ci0 .. ci0 + CI_CHUNK - 1 (those that exist) of an item's tile into
// `in`, zeros outside the input. VEC: columns 0 .. 35 in 16-byte copies, each wholly inside the input or
// wholly outside (W % 4 == 0); otherwise columns 0 .. 31 one tile row per warp instruction, then column 32
// of every row, a row per lane. The caller commits, waits and synchronises.
__device__ __noinline__ void stage_input(InputTile& in, const float* __restrict__ x, int ci0, const Item it,
                                         const Geometry g, bool vec)
{
    const int n = min(CI_CHUNK, g.C_in - ci0);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const bool col_ok = it.w0 + lane < g.W;
    // Input plane (channel ci0 + ci, depth m_d + dd); past the last depth, the last one (read as zeros).
    const auto plane_of = [&](int ci, int dd) {
        return x + ((size_t)(it.b * g.C_in + ci0 + ci) * g.D + min(it.md + dd, g.D - 1)) * g.H * g.W;
    };
    if (vec) {   // a quarter of the copy instructions: they queue with the other block's MUFU work
        constexpr int C4 = TILE_W / 4, PER_CI = 2 * TILE_H * C4;
        for (int e = threadIdx.x; e < n * PER_CI; e += THREADS) {
            const int ci = e / PER_CI, dd = e / (TILE_H * C4) % 2, r = e / C4 % TILE_H, c = e % C4 * 4;
            const bool ok = it.md + dd < g.D && it.h0 + r < g.H && it.w0 + c < g.W;
            const float* plane = plane_of(ci, dd);
            copy_async16(&in[ci][dd][r][c], ok ? plane + (size_t)(it.h0 + r) * g.W + it.w0 + c : plane, ok);
        }
        return;
    }
    for (int ci = 0; ci < n; ++ci)
#pragma unroll
    for (int dd = 0; dd < 2; ++dd) {
        const bool d_ok = it.md + dd < g.D;
        const float* plane = plane_of(ci, dd);
        const float* src = plane + (it.h0 + warp) * g.W + it.w0 + lane;
#pragma unroll
        for (int r = warp; r < WARPS * ((TILE_H + WARPS - 1) / WARPS); r += WARPS, src += WARPS * g.W) {
            if (r >= TILE_H) break;   // uniform across the warp
            const bool ok = d_ok && col_ok && it.h0 + r < g.H;
            copy_async(&in[ci][dd][r][lane], ok ? src : plane, ok);
        }
    }
    const bool col32_ok = it.w0 + 32 < g.W;
    for (int row = threadIdx.x; row < n * 2 * TILE_H; row += THREADS) {
        const int ci = row / (2 * TILE_H), dd = row / TILE_H % 2, r = row % TILE_H;
        const bool ok = col32_ok && it.md + dd < g.D && it.h0 + r < g.H;
        const float* plane = plane_of(ci, dd);
        copy_async(&in[ci][dd][r][32], ok ? plane + (it.h0 + r) * g.W + it.w0 + 32 : plane, ok);
    }
}

// Rounds to TF32 the elements of a tile that this thread's stage_input copies brought in, once it has
// waited for them: the same elements in the same order (a change to stage_input's mapping goes here too),
// so that no barrier comes between the wait and the rounding.
__device__ __noinline__ void round_staged_input(InputTile& in, int ci0, const Geometry g, bool vec)
{
    const int n = min(CI_CHUNK, g.C_in - ci0);
    if (vec) {
        constexpr int C4 = TILE_W / 4, PER_CI = 2 * TILE_H * C4;
        for (int e = threadIdx.x; e < n * PER_CI; e += THREADS) {
            float4& v = *reinterpret_cast<float4*>(&in[e / PER_CI][e / (TILE_H * C4) % 2][e / C4 % TILE_H][e % C4 * 4]);
            v = make_float4(round_tf32(v.x), round_tf32(v.y), round_tf32(v.z), round_tf32(v.w));
        }
        return;
    }
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    for (int ci = 0; ci < n; ++ci)
        for (int dd = 0; dd < 2; ++dd)
            for (int r = warp; r < TILE_H; r += WARPS) in[ci][dd][r][lane] = round_tf32(in[ci][dd][r][lane]);
    for (int row = threadIdx.x; row < n * 2 * TILE_H; row += THREADS) {
        float& v = in[row / (2 * TILE_H)][row / TILE_H % 2][row % TILE_H][32];
        v = round_tf32(v);
    }
}

// Stages the weights of input channels ci0 .. ci0 + CI_CHUNK - 1 for output channels cg0 .. cg0 +
// CO_GROUP - 1 (zero where a channel does not exist), times -log2(e); TF32: unscaled, for round_staged_weights
// (rounding in this loop instead costs the TF32 kernel some 60 bytes of spills). Synchronous; the caller
// synchronises.
template <bool TF32>
__device__ __noinline__ void stage_weights(Smem& s, const float* __restrict__ weight, int ci0, int cg0,
                                           const Geometry g)
{
    const int n = min(CI_CHUNK, g.C_in - ci0);
    // Weights: all loads first, then the stores (no load waits for the previous store).
    constexpr int ITERS = (CI_CHUNK * TAPS * CHUNKS + THREADS - 1) / THREADS;
    float v[ITERS][CO_TILE];
#pragma unroll
    for (int it = 0; it < ITERS; ++it) {
        const int e = threadIdx.x + it * THREADS, tap = e / CHUNKS % TAPS, co = cg0 + e % CHUNKS * CO_TILE;
        const float* src = weight + ((size_t)(ci0 + e / (TAPS * CHUNKS)) * g.C_out + co) * TAPS + tap;
#pragma unroll
        for (int q = 0; q < CO_TILE; ++q)
            v[it][q] = e < n * TAPS * CHUNKS && co + q < g.C_out ? __ldg(src + q * TAPS) : 0.f;
    }
    const auto scaled = [](float w) { return TF32 ? w : w * -LOG2E; };
#pragma unroll
    for (int it = 0; it < ITERS; ++it) {
        const int e = threadIdx.x + it * THREADS;
        if (e < n * TAPS * CHUNKS)
            s.w[e / (TAPS * CHUNKS)][e / CHUNKS % TAPS][e % CHUNKS] =
                make_float4(scaled(v[it][0]), scaled(v[it][1]), scaled(v[it][2]), scaled(v[it][3]));
    }
}

// TF32: the weights that this thread's stage_weights<true> stored (unscaled), rounded to TF32 and then
// scaled by -log2(e), as stage_weights<false> scales them.
__device__ __noinline__ void round_staged_weights(Smem& s, int n)
{
    float4* w = &s.w[0][0][0];
    const auto scaled = [](float v) { return round_tf32(v) * -LOG2E; };
    for (int e = threadIdx.x; e < n * TAPS * CHUNKS; e += THREADS)
        w[e] = make_float4(scaled(w[e].x), scaled(w[e].y), scaled(w[e].z), scaled(w[e].w));
}

// TF32, no prefetch: one chunk of input channels and their weights staged and rounded, synchronously (one call,
// so that the TF32 kernel's hot loop keeps the FP32 kernel's register allocation).
__device__ __noinline__ void stage_chunk_tf32(Smem& s, const float* __restrict__ x, const float* __restrict__ weight,
                                              int ci0, const Item it, const Geometry g, bool vec, int buf)
{
    stage_input(s.in[buf], x, ci0, it, g, vec);
    copy_async_commit();
    stage_weights<true>(s, weight, ci0, it.cg0, g);
    round_staged_weights(s, min(CI_CHUNK, g.C_in - ci0));
    copy_async_wait<true>();
    round_staged_input(s.in[buf], ci0, g, vec);
}

// TF32, prefetch: waits for the current item's tile (issued an item ago, so done by now), rounds it, and starts
// the next item's (if any): one call where the FP32 kernel has stage_input.
__device__ __noinline__ void round_and_stage_next(Smem& s, const float* __restrict__ x, const Item next, bool has_next,
                                                  const Geometry g, bool vec, int buf)
{
    copy_async_wait<true>();
    round_staged_input(s.in[buf], 0, g, vec);
    if (has_next) stage_input(s.in[buf ^ 1], x, 0, next, g, vec);
}

// Adds input channel ci's contributions to the outputs of depth parity A that a thread owns: output
// depth 2 m_d + A, rows 2 (m_h0 + r) + bb, columns 2 m_w + c, CO_TILE channels (chunk k of the block's
// group). A = 0 takes tap kd = 1 from input depth m_d; A = 1 takes kd = 2 from m_d and kd = 0 from
// m_d + 1. Every tap is a multiply-add: no tests, no wasted products. FIRST: the first tap of each
// accumulator adds to the bias instead (no separate initialisation).
template <int A, bool FIRST>
__device__ __forceinline__ void convolve_channel(float (&acc)[2][2][ROWS][CO_TILE], const Smem& s,
                                                 const InputTile& tile, int ci, int k)
{
    constexpr int ND = A == 0 ? 1 : 2;   // input depths read: m_d (and m_d + 1)
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    float in[ND][ROWS + 1][2];
#pragma unroll
    for (int dd = 0; dd < ND; ++dd)
#pragma unroll
    for (int r = 0; r <= ROWS; ++r)
#pragma unroll
    for (int ww = 0; ww < 2; ++ww) in[dd][r][ww] = tile[ci][dd][ROWS * warp + r][lane + ww];
#pragma unroll
    for (int kd = 0; kd < K; ++kd) {
        if (parity_of(kd) != A) continue;
#pragma unroll
        for (int kh = 0; kh < K; ++kh)
#pragma unroll
        for (int kw = 0; kw < K; ++kw) {
            const float4 wv = s.w[ci][(kd * K + kh) * K + kw][k];
            const int bb = parity_of(kh), c = parity_of(kw);
            // The loops visit kd = 1 (A = 0) or 0 (A = 1) first, kh = 1 or 0 first, kw = 1 or 0 first.
            const bool first = FIRST && kd == 1 - A && kh == 1 - bb && kw == 1 - c;
            const float4 b4 = first ? s.bias[k] : float4();
#pragma unroll
            for (int r = 0; r < ROWS; ++r) {
                const float v = in[A == 0 ? 0 : offset_of(kd)][r + offset_of(kh)][offset_of(kw)];
                float (&a)[CO_TILE] = acc[bb][c][r];
                a[0] = fmaf(wv.x, v, first ? b4.x : a[0]);
                a[1] = fmaf(wv.y, v, first ? b4.y : a[1]);
                a[2] = fmaf(wv.z, v, first ? b4.z : a[2]);
                a[3] = fmaf(wv.w, v, first ? b4.w : a[3]);
            }
        }
    }
}

// All staged input channels, parity A; `first`: the first staged chunk, whose channel 0 starts from the bias.
template <int A>
__device__ __forceinline__ void convolve_staged(float (&acc)[2][2][ROWS][CO_TILE], const Smem& s,
                                                const InputTile& tile, int n_ci, bool first, int k)
{
    if (first) convolve_channel<A, true>(acc, s, tile, 0, k);
#pragma unroll 1
    for (int ci = first ? 1 : 0; ci < n_ci; ++ci) convolve_channel<A, false>(acc, s, tile, ci, k);
}

// Sample b's normalisation, by the last of its phase-1 blocks: per group, one warp adds the partials
// of the group's channels in a fixed order (each lane a fixed stride, then a fixed shuffle tree; double),
// then per channel folds mean, 1/std and the affine parameters into one scale and shift. It stores
// the reciprocal of the scale times -ln(2) (the scaled Swish's factor), at most FLT_MAX in size, so
// that phase 2 divides once (a zero scale gives a zero quotient); autocast (HALF, GroupNorm in float32): the
// scale itself. Partials come from other blocks: read past L1 (__ldcg).
template <bool HALF, typename TO>
__device__ void finalize_sample(const Params& p, int b)
{
    const Geometry& g = p.g;
    const int cpg = g.C_out / p.groups, lane = threadIdx.x % 32;
    const double n = (double)g.Do * g.Ho * g.Wo * cpg;
    for (int grp = threadIdx.x / 32; grp < p.groups; grp += WARPS) {
        double s = 0.0, q = 0.0;
        const double* part = p.partials + ((size_t)b * g.C_out + grp * cpg) * g.tiles * 2;
        for (int i = lane; i < cpg * g.tiles; i += 32) {
            s += __ldcg(part + 2 * i);
            q += __ldcg(part + 2 * i + 1);
        }
#pragma unroll
        for (int off = 16; off > 0; off /= 2) {
            s += __shfl_xor_sync(0xffffffffu, s, off);
            q += __shfl_xor_sync(0xffffffffu, q, off);
        }
        const double mean = s / n, rstd = 1.0 / sqrt(fmax(q / n - mean * mean, 0.0) + p.eps);
        if (lane == 0) {
            p.stats[((size_t)b * p.groups + grp) * 2] = mean;
            p.stats[((size_t)b * p.groups + grp) * 2 + 1] = rstd;
        }
        for (int c = grp * cpg + lane; c < (grp + 1) * cpg; c += 32) {
            const double scale = p.gn_weight[c] * rstd;
            const double inv = copysign(fmin(1.0 / fabs(scale * LN2), (double)FLT_MAX), -scale);
            float2 ab = make_float2((float)inv, (float)(p.gn_bias[c] - mean * scale));
            if (HALF) ab.x = (float)scale;
            p.norm[((size_t)b * g.C_out + c) * 2] = ab.x;
            p.norm[((size_t)b * g.C_out + c) * 2 + 1] = ab.y;
        }
    }
}

// Waits until *flag is set by another block, polling gently. Acquire: the later loads of this thread, and
// of the threads that synchronise with it, see what that block wrote before setting the flag. No fence, which
// would wait for this thread's own stores.
__device__ __forceinline__ void wait_for_flag(const int* flag)
{
#if __CUDA_ARCH__ >= 700
    for (;;) {
        int v;
        asm volatile("ld.acquire.gpu.global.b32 %0, [%1];" : "=r"(v) : "l"(flag) : "memory");
        if (v != 0) break;
        __nanosleep(200);
    }
#else
    while (*reinterpret_cast<const volatile int*>(flag) == 0) {}
    __threadfence();
#endif
}

// Stores a thread's outputs of one output depth (acc[bb][c][r][q]: rows 2 r + bb, columns c of its column pair,
// channel q; dst at the warp's first row and this lane's column): store_channel channel q, store_outputs the
// channels below n_ch (vol apart). Per channel, the warp's 2 ROWS x 64 values go through its rows in shared memory
// (`rows`, 2 ROWS x 64 floats) so that each store writes 32 consecutive elements (rows start at any alignment: the
// output width is odd). Rows from n_out_rows on (the last input row's second output row, rows past the input) are
// not stored; col_lo, col_hi: the output columns lane, lane + 32 exist. n_out_rows, n_ch: uniform across the warp.
template <typename TO>
__device__ __forceinline__ void store_channel(TO* dst, const float (&acc)[2][2][ROWS][CO_TILE], int q, float* rows,
                                              int Wo, int n_out_rows, bool col_lo, bool col_hi)
{
    const int lane = threadIdx.x % 32;
    float2* const row_wr = reinterpret_cast<float2*>(rows) + lane;   // this lane's slots
    const float* const row_rd = rows + lane;
    const auto store = [&](auto masked) {
        constexpr bool MASKED = decltype(masked)::value;
#pragma unroll
        for (int j = 0; j < 2 * ROWS; ++j) {
            const bool row_ok = !MASKED || j < n_out_rows;
            if (row_ok && col_lo) dst[j * Wo] = from_float<TO>(row_rd[j * 64]);
            if (row_ok && col_hi) dst[j * Wo + 32] = from_float<TO>(row_rd[j * 64 + 32]);
        }
    };
#pragma unroll
    for (int r = 0; r < ROWS; ++r)
#pragma unroll
    for (int bb = 0; bb < 2; ++bb)
        row_wr[(2 * r + bb) * 32] = make_float2(acc[bb][0][r][q], acc[bb][1][r][q]);
    __syncwarp();
    if (n_out_rows >= 2 * ROWS) store(std::false_type());
    else store(std::true_type());
    __syncwarp();
}
template <typename TO>
__device__ __forceinline__ void store_outputs(TO* dst_q, const float (&acc)[2][2][ROWS][CO_TILE], float* rows,
                                              size_t vol, int Wo, int n_ch, int n_out_rows, bool col_lo, bool col_hi)
{
#pragma unroll
    for (int q = 0; q < CO_TILE; ++q, dst_q += vol) {
        if (q >= n_ch) break;
        store_channel(dst_q, acc, q, rows, Wo, n_out_rows, col_lo, col_hi);
    }
}

// Chunk k's two sums a channel of each thread added over its warp (float, a fixed tree), into s.red[channel][i][warp]
// (double), for the block to add the warps in order.
__device__ __forceinline__ void warp_sums(Smem& s, int k, const float (&t0)[CO_TILE], const float (&t1)[CO_TILE])
{
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
#pragma unroll
    for (int q = 0; q < CO_TILE; ++q) {
        float t = t0[q], tt = t1[q];
#pragma unroll
        for (int off = 16; off > 0; off /= 2) {
            t += __shfl_xor_sync(0xffffffffu, t, off);
            tt += __shfl_xor_sync(0xffffffffu, tt, off);
        }
        if (lane == 0) {
            s.red[k * CO_TILE + q][0][warp] = t;
            s.red[k * CO_TILE + q][1][warp] = tt;
        }
    }
}

// One block of either phase: WRITE = false gathers statistics, WRITE = true writes the output.
// A block owns one input tile of sample b (depth m_d, TILE_H - 1 rows, 32 columns) and output channels
// cg0 .. cg0 + CO_GROUP - 1; warp w owns ROWS of its rows, lane l one column. For each chunk of
// CO_TILE channels and each output depth parity a thread convolves, applies Swish, and either adds to
// its sums or normalises, applies HardSwish and stores.
//
// The staged weights and the bias carry a factor -log2(e), so an accumulator holds a = -log2(e) v and
// Swish is v sigmoid(v) = -ln(2) a / (1 + 2^a): no multiply before the exponential. The sums are
// scaled back in double, and phase 2's normalisation carries the -ln(2) (finalize_sample).
// Half precision (T): the accumulator holds the conv alone, and each value is rounded where PyTorch rounds
// it: the conv's output, plus the bias, the sigmoid, the product (Swish), then (in TO) the GroupNorm's
// output and the HardSwish's.
template <bool WRITE, bool TF32, typename T, typename TO>
__device__ __forceinline__ void convt_block(Smem& s, const Params& p, const Item& it, int buf)
{
    constexpr bool HALF = is_half<T>(), RAW = is_half<TO>();
    const Geometry& g = p.g;
    const int b = it.b, md = it.md, w0 = it.w0, cg0 = it.cg0;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int mh0 = it.h0 + ROWS * warp, mw = w0 + lane;
    const int n_cc = (g.C_in + CI_CHUNK - 1) / CI_CHUNK;
    const int n_parities = 2 * md + 1 < g.Do ? 2 : 1;   // the last input depth feeds one output depth
    const int n_out_rows = min(2 * ROWS, g.Ho - 2 * mh0);   // this warp's output rows inside the output
    const int n_out_cols = min(64, g.Wo - 2 * w0);          // this tile's output columns
    const size_t vol = (size_t)g.Do * g.Ho * g.Wo;
    const bool col_lo = lane < n_out_cols, col_hi = lane + 32 < n_out_cols;   // output columns lane, lane + 32
    const bool col_ok[2] = {mw < g.W, 2 * mw + 1 < g.Wo};   // output columns 2 m_w + c inside the output
    const InputTile& in = s.in[buf];

    float acc[2][2][ROWS][CO_TILE];   // [bb][c][r][q]
    for (int k = it.k0; k < it.k1; ++k) {
        const int co0 = cg0 + k * CO_TILE;
        float tot[CO_TILE] = {}, tot_sq[CO_TILE] = {};   // phase 1: the thread's sums
#pragma unroll 1
        for (int A = 0; A < n_parities; ++A) {
            for (int cc = 0; cc < n_cc; ++cc) {
                if (n_cc > 1) {   // no prefetch: the input channels and their weights chunk by chunk
                    __syncthreads();
                    if (TF32) {
                        stage_chunk_tf32(s, p.x, p.weight, cc * CI_CHUNK, it, g, p.vec, buf);
                    } else {
                        stage_input(s.in[buf], p.x, cc * CI_CHUNK, it, g, p.vec);
                        copy_async_commit();
                        stage_weights<HALF>(s, p.weight, cc * CI_CHUNK, cg0, g);   // half: unscaled
                        copy_async_wait<true>();
                    }
                    __syncthreads();
                }
                const int n_ci = min(CI_CHUNK, g.C_in - cc * CI_CHUNK);
                if (A == 0) convolve_staged<0>(acc, s, in, n_ci, cc == 0, k);
                else convolve_staged<1>(acc, s, in, n_ci, cc == 0, k);
            }

            if (!WRITE && HALF) {   // Swish as PyTorch computes it (swish_rounded); outside the output: not added
                const float4 b4 = s.bias_r[k];
                const float bq[CO_TILE] = {b4.x, b4.y, b4.z, b4.w};
#pragma unroll
                for (int bb = 0; bb < 2; ++bb)
#pragma unroll
                for (int c = 0; c < 2; ++c)
#pragma unroll
                for (int r = 0; r < ROWS; ++r)
#pragma unroll
                for (int q = 0; q < CO_TILE; ++q) {
                    const float p = swish_rounded<T>(acc[bb][c][r][q], bq[q]);
                    if (col_ok[c] && 2 * r + bb < n_out_rows) {
                        tot[q] += p;
                        tot_sq[q] = fmaf(p, p, tot_sq[q]);
                    }
                }
                continue;
            }
            if (!WRITE) {
                // -log2(e) Swish, added to the sums. Two channels share one reciprocal: with d = 1 + 2^a,
                // r = 1 / (d0 d1) gives 1 / d0 = r d1 and 1 / d1 = r d0 (MUFU issue is what the
                // epilogue waits on). a is clamped at 63 so that d0 d1 stays finite; below v = -43.7
                // Swish is then -ln(2) a / (1 + 2^63), within 1.1e-19 |v| of its value. Outputs outside
                // the output (rows and columns past its edge) take 2^64 for the 1: both channels of a
                // pair share the row and column, d0 d1 = inf, r = 0, nothing added.
                float one[2][2][ROWS];   // [bb][c][r]
#pragma unroll
                for (int bb = 0; bb < 2; ++bb)
#pragma unroll
                for (int c = 0; c < 2; ++c)
#pragma unroll
                for (int r = 0; r < ROWS; ++r)
                    one[bb][c][r] = col_ok[c] && 2 * r + bb < n_out_rows ? 1.f : 0x1p64f;
#pragma unroll
                for (int bb = 0; bb < 2; ++bb)
#pragma unroll
                for (int c = 0; c < 2; ++c)
#pragma unroll
                for (int r = 0; r < ROWS; ++r)
#pragma unroll
                for (int q = 0; q < CO_TILE; q += 2) {
                    const float a0 = acc[bb][c][r][q], a1 = acc[bb][c][r][q + 1];
                    const float d0 = one[bb][c][r] + exp2_approx(fminf(a0, 63.f));
                    const float d1 = one[bb][c][r] + exp2_approx(fminf(a1, 63.f));
                    const float rr = rcp_approx(d0 * d1), y0 = (a0 * rr) * d1, y1 = (a1 * rr) * d0;
                    tot[q] += y0;
                    tot_sq[q] = fmaf(y0, y0, tot_sq[q]);
                    tot[q + 1] += y1;
                    tot_sq[q + 1] = fmaf(y1, y1, tot_sq[q + 1]);
                }
                continue;
            }

            // Swish and the normalisation in one quotient: y = scale v sigmoid(v) + shift
            // = a / (inv (1 + 2^a)) + shift, with inv = 1 / (-ln(2) scale) (finalize_sample). For v < -88,
            // 2^a = inf and y = shift, the limit. Then hardswish(y) = y clamp(y / 6 + 1 / 2, 0, 1), in place.
            // Autocast: Swish rounded as in phase 1, then z = scale Swish + shift and HardSwish in float32 (s.inv
            // holds the scale, finalize_sample). RAW (float16, bfloat16): Swish alone, rounded, is written.
            const float4 inv4 = s.inv[buf][k], sh4 = s.shift[buf][k], b4 = s.bias_r[k];
            const float inv[CO_TILE] = {inv4.x, inv4.y, inv4.z, inv4.w}, sh[CO_TILE] = {sh4.x, sh4.y, sh4.z, sh4.w};
            const float bq[CO_TILE] = {b4.x, b4.y, b4.z, b4.w};
#pragma unroll
            for (int bb = 0; bb < 2; ++bb)
#pragma unroll
            for (int c = 0; c < 2; ++c)
#pragma unroll
            for (int r = 0; r < ROWS; ++r)
#pragma unroll
            for (int q = 0; q < CO_TILE; ++q) {
                float& a = acc[bb][c][r][q];
                if (RAW) {
                    a = swish_rounded<T>(a, bq[q]);
                } else if (HALF) {
                    const float z = round_to<TO>(fmaf(swish_rounded<T>(a, bq[q]), inv[q], sh[q]));
                    a = round_to<TO>(hardswish(z));
                } else {
                    const float y = fmaf(a, rcp_approx(fmaf(exp2_approx(a), inv[q], inv[q])), sh[q]);
                    a = y * __saturatef(fmaf(y, 1.f / 6.f, 0.5f));
                }
            }
            store_outputs(static_cast<TO*>(p.out) + ((size_t)b * g.C_out + co0) * vol
                          + ((size_t)(2 * md + A) * g.Ho + 2 * mh0) * g.Wo + 2 * w0 + lane,
                          acc, s.rows[warp][0], vol, g.Wo, g.C_out - co0, n_out_rows, col_lo, col_hi);
        }
        if (!WRITE) warp_sums(s, k, tot, tot_sq);
    }
    if (WRITE) return;
    __syncthreads();
    if (threadIdx.x < 2 * CO_GROUP) {   // the warps in order, double; undo the -log2(e)
        const int c = threadIdx.x / 2, i = threadIdx.x % 2;
        if (cg0 + c < g.C_out) {
            double v = 0.0;
#pragma unroll
            for (int w = 0; w < WARPS; ++w) v += s.red[c][i][w];
            p.partials[(((size_t)b * g.C_out + cg0 + c) * g.tiles + it.tile) * 2 + i] = HALF ? v : v * (i == 0 ? -LN2 : LN2 * LN2);
        }
        __threadfence();   // the partial is visible before the count below says so
    }
    __syncthreads();
    if (threadIdx.x == 0) s.last = atomicAdd(p.done + b, 1) == g.items - 1;
    __syncthreads();
    if (!s.last) return;
    __threadfence();   // every partial of the sample is visible
    finalize_sample<HALF, TO>(p, b);
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) atomicExch(p.ready + b, 1);
}

// Warp 0: a phase-2 item's normalisation into s.inv[buf] and s.shift[buf], once its sample's phase 1 is complete.
__device__ __forceinline__ void load_norm(Smem& s, const Params& p, const Item& it, int buf)
{
    if (threadIdx.x == 0) wait_for_flag(p.ready + it.b);
    __syncwarp();
    if (threadIdx.x < CO_GROUP) {
        const size_t at = ((size_t)it.b * p.g.C_out + min(it.cg0 + (int)threadIdx.x, p.g.C_out - 1)) * 2;
        reinterpret_cast<float*>(s.inv[buf])[threadIdx.x] = __ldcg(p.norm + at);
        reinterpret_cast<float*>(s.shift[buf])[threadIdx.x] = __ldcg(p.norm + at + 1);
    }
}

// The whole model in one launch: persistent blocks take items by ticket (item_of) until g.tickets are
// done; shared memory: a dynamic Smem. Tickets come from an atomic counter, so every smaller ticket
// belongs to a block that is working on it or done with it, or holds it as its next item while working on
// a still smaller one. A phase-2 item waits only for the phase-1 items of its sample, which all have smaller
// tickets, and phase-1 items never wait: the launch cannot deadlock however the GPU schedules blocks. (A
// block waits for its next item's statistics as it finishes the item before: a block holding a phase-1
// item as its next waits for nothing, so it reaches that item.)
// Where one staged chunk holds all input channels (C_in <= CI_CHUNK), a block loads its next item's
// input tile while it computes the current one. Bias and weights are staged when the channel group changes.
// A block's next ticket is drawn, and its next item's statistics waited for, as it finishes the item
// before, so that these round trips hide behind the warps still working and no barrier waits for them.
// TF32 (torch.backends.cudnn.allow_tf32): the conv's operands rounded to TF32, to nearest even, as staged.
// T, TO: half precision (T: the conv's element type, TO: the GroupNorm's; convt_block), the conv's inputs
// given as floats: unscaled weights and bias, no TF32 rounding (a half value is exact in TF32).
template <bool TF32, typename T, typename TO>
__global__ void __launch_bounds__(THREADS, MIN_BLOCKS) convt_swish_gn_kernel(const Params p)
{
    constexpr bool HALF = is_half<T>();
    extern __shared__ __align__(16) unsigned char smem_raw[];
    Smem& s = *reinterpret_cast<Smem*>(smem_raw);
    const Geometry& g = p.g;
    const int total = g.tickets;
    const bool prefetch = g.C_in <= CI_CHUNK;
    if (threadIdx.x == 0) s.ticket[0] = atomicAdd(p.counters, 1);
    __syncthreads();
    int t = s.ticket[0], staged_cg = -1;
    Item it = item_of(t, p.B, g);
    if (prefetch && t < total) stage_input(s.in[0], p.x, 0, it, g, p.vec);
    copy_async_commit();
    if (threadIdx.x == 32) {
        const int tn = atomicAdd(p.counters, 1);
        s.ticket[1] = tn;
        store_item(&s.next, tn, p.B, g);
    }
    if (t < total && it.write && threadIdx.x < 32) load_norm(s, p, it, 0);
    __syncthreads();
    for (int buf = 0; t < total; buf ^= 1) {
        if (it.cg0 != staged_cg) {   // the channel group's bias and, with prefetch, its weights
            if (threadIdx.x < CO_GROUP) {
                const int co = min(it.cg0 + (int)threadIdx.x, g.C_out - 1);
                const float bias = p.bias != nullptr ? p.bias[co] : 0.f;
                reinterpret_cast<float*>(s.bias)[threadIdx.x] = HALF ? 0.f : bias * -LOG2E;
                reinterpret_cast<float*>(s.bias_r)[threadIdx.x] = bias;
            }
            if (prefetch) stage_weights<TF32 || HALF>(s, p.weight, 0, it.cg0, g);
            if (TF32 && prefetch) round_staged_weights(s, min(CI_CHUNK, g.C_in));
            staged_cg = it.cg0;
        }
        const int t_next = s.ticket[buf ^ 1];
        const Item next = s.next;
        if (TF32 && prefetch) {
            round_and_stage_next(s, p.x, next, t_next < total, g, p.vec, buf);
        } else if (prefetch && t_next < total) {
            stage_input(s.in[buf ^ 1], p.x, 0, next, g, p.vec);
        }
        copy_async_commit();
        copy_async_wait<false>();   // this item's tile (all but the group just committed)
        __syncthreads();
        if (is_half<TO>() || it.write) convt_block<true, TF32, T, TO>(s, p, it, buf);
        else convt_block<false, TF32, T, TO>(s, p, it, buf);
        // The ticket after next, drawn by warp 1 as it finishes this item (the atomic's round trip hides
        // behind the warps still working) and published by the barrier: no barrier waits for it.
        if (threadIdx.x == 32 && t_next < total) {
            const int tn = atomicAdd(p.counters, 1);
            s.ticket[buf] = tn;
            store_item(&s.next, tn, p.B, g);
        }
        // Likewise warp 0 waits for the next item's statistics here, if it writes.
        if (t_next < total && next.write && threadIdx.x < 32) load_norm(s, p, next, buf ^ 1);
        __syncthreads();
        t = t_next;
        it = next;
    }
}

// ---- The tuned path's backward sweeps (convt_tuned), in the forward's structure. Per output, with a = -log2(e) y
// (y = the conv + bias, recomputed in registers exactly as phase 1 computes it: the same staged operands, the same
// sums), sigmoid(y) = 1 / (1 + 2^a), Swish s = y sigmoid(y), n = (s - mean) / std (the forward's saved group
// statistics), z = gamma n + beta, dz = dL/dout hardswish'(z):
//   SUMS (WRITE false): per channel sum dz and sum dz n;
//   WRITE: dL/dy = (gamma dz - P - n Q) / std * sigmoid(y) (1 + y (1 - sigmoid(y))) written in float32 (P, Q: the
//     group's sums of gamma dz and gamma dz n over its element count), and per channel its sum (dL/dbias).
// Each sweep's items are the forward's (a tile of input positions, CO_GROUP output channels), a block taking items
// blockIdx.x, + gridDim.x, ... and staging the next item's input tile while it computes the current one. Partials
// per (sample, channel, tile): a thread's float sums, a fixed shuffle tree, the warps in order in double.
struct SweepParams {
    const float* x;          // (B, C_in, D, H, W), contiguous
    const float* weight;     // (C_in, C_out, K, K, K)
    const float* bias;       // (C_out) or nullptr
    const float* gn_weight;  // (C_out)
    const float* gn_bias;    // (C_out)
    const double* stats;     // (B, groups, 2): each group's mean and 1/std of the Swish output (the forward's)
    const void* grad_out;    // (B, C_out, Do, Ho, Wo), the GroupNorm's element type
    double* partials;        // (B, C_out, tiles, 2) written: sum dz, sum dz n (WRITE: sum dL/dy, 0)
    const double* sums;      // WRITE: (B, C_out, 2), the SUMS partials added up
    float* grad_y;           // WRITE: (B, C_out, Do, Ho, Wo)
    int B, groups;
    bool vec;                // as Params::vec
    Geometry g;
};
// The forward's shared memory (so that its staging and conv helpers serve the sweeps; the sweeps leave its ticket,
// rounding and normalisation fields unused, about 1 KB) and the sweeps' per-channel constants.
struct SweepSmem : Smem {
    float4 chan[7][CHUNKS];  // per channel: 1/std, -mean/std, gamma, beta; WRITE: gamma/std, P/std, Q/std
};

// dL/dy's group terms P / N and Q / N: gamma times the SUMS sweep's per-channel sums (sum dz, sum dz n) added over
// the group's channels in order (double), over the group's element count.
__device__ __forceinline__ double2 group_terms(const float* gn_weight, const double* sums, long long b, int C_out,
                                               int grp, int cpg, double count)
{
    double pg = 0.0, qg = 0.0;
    for (int i = grp * cpg; i < (grp + 1) * cpg; ++i) {
        pg += gn_weight[i] * sums[((size_t)b * C_out + i) * 2];
        qg += gn_weight[i] * sums[((size_t)b * C_out + i) * 2 + 1];
    }
    return make_double2(pg / count, qg / count);
}

// L1-cached load of one element as a float: dL/dout's two column parities are two loads of the same lines.
__device__ __forceinline__ float load_cached(const float* p) { return __ldg(p); }
template <typename T> __device__ __forceinline__ float load_cached(const T* p) {
    return to_float(T{__ldg(reinterpret_cast<const unsigned short*>(p))});
}

// One item of a sweep (the block's tile staged in s.in[buf], weights and bias staged, s.chan loaded).
template <bool WRITE, typename TO>
__device__ __forceinline__ void sweep_block(SweepSmem& s, const SweepParams& p, const Item& it, int buf)
{
    const Geometry& g = p.g;
    const int b = it.b, md = it.md, w0 = it.w0, cg0 = it.cg0;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int mh0 = it.h0 + ROWS * warp, mw = w0 + lane;
    const int n_parities = 2 * md + 1 < g.Do ? 2 : 1;        // the last input depth feeds one output depth
    const int n_out_rows = min(2 * ROWS, g.Ho - 2 * mh0);   // this warp's output rows inside the output
    const int n_out_cols = min(64, g.Wo - 2 * w0);          // this tile's output columns
    const size_t vol = (size_t)g.Do * g.Ho * g.Wo;
    const bool col_lo = lane < n_out_cols, col_hi = lane + 32 < n_out_cols;
    const bool col_ok[2] = {mw < g.W, 2 * mw + 1 < g.Wo};   // output columns 2 m_w + c inside the output
    const TO* const grad_out = static_cast<const TO*>(p.grad_out);
    float acc[2][2][ROWS][CO_TILE];   // [bb][c][r][q]
    for (int k = 0; k < it.k1; ++k) {
        const int co0 = cg0 + k * CO_TILE, n_ch = g.C_out - co0;
        float tot[CO_TILE] = {}, tot_n[CO_TILE] = {};
#pragma unroll 1
        for (int A = 0; A < n_parities; ++A) {
            if (A == 0) convolve_staged<0>(acc, s, s.in[buf], g.C_in, true, k);
            else convolve_staged<1>(acc, s, s.in[buf], g.C_in, true, k);
            // Channel co0's output rows 2 mh0 .. of depth 2 md + A: this thread's columns 2 mw + c (loads) and,
            // through the rows in shared memory, this lane's columns 2 w0 + lane (+ 32) (WRITE's stores).
            const size_t row0 = ((size_t)b * g.C_out + co0) * vol + ((size_t)(2 * md + A) * g.Ho + 2 * mh0) * g.Wo;
            const size_t at = row0 + 2 * mw;
            float* const dst = p.grad_y + row0 + 2 * w0 + lane;
#pragma unroll
            for (int q = 0; q < CO_TILE; ++q) {
                if (q >= n_ch) break;   // uniform across the block
                const float* chan = reinterpret_cast<const float*>(s.chan) + k * CO_TILE + q;
                const float rstd = chan[0], mrs = chan[CO_GROUP], gamma = chan[2 * CO_GROUP], beta = chan[3 * CO_GROUP];
#pragma unroll
                for (int bb = 0; bb < 2; ++bb) {
                    float dout[2][ROWS];   // zero outside the output
#pragma unroll
                    for (int c = 0; c < 2; ++c)
#pragma unroll
                    for (int r = 0; r < ROWS; ++r) {
                        const bool ok = col_ok[c] && 2 * r + bb < n_out_rows;
                        dout[c][r] = ok ? load_cached(grad_out + at + q * vol + (2 * r + bb) * g.Wo + c) : 0.f;
                    }
#pragma unroll
                    for (int c = 0; c < 2; ++c)
#pragma unroll
                    for (int r = 0; r < ROWS; ++r) {
                        float& a = acc[bb][c][r][q];
                        const float sig = rcp_approx(1.f + exp2_approx(a)), y = a * (float)-LN2;
                        const float n = fmaf(y * sig, rstd, mrs), z = fmaf(gamma, n, beta);
                        const float dz = dout[c][r] * hardswish_grad(z);
                        if (WRITE) {
                            const float da = fmaf(chan[4 * CO_GROUP], dz, -fmaf(n, chan[6 * CO_GROUP], chan[5 * CO_GROUP]));
                            a = da * sig * fmaf(y, 1.f - sig, 1.f);
                            tot[q] += col_ok[c] && 2 * r + bb < n_out_rows ? a : 0.f;
                        } else {
                            tot[q] += dz;
                            tot_n[q] = fmaf(dz, n, tot_n[q]);
                        }
                    }
                }
                if (WRITE) store_channel(dst + q * vol, acc, q, s.rows[warp][0], g.Wo, n_out_rows, col_lo, col_hi);
            }
        }
        warp_sums(s, k, tot, tot_n);
    }
    __syncthreads();
    if (threadIdx.x < 2 * CO_GROUP) {   // the warps in order, double
        const int c = threadIdx.x / 2, i = threadIdx.x % 2;
        if (cg0 + c < g.C_out) {
            double v = 0.0;
#pragma unroll
            for (int w = 0; w < WARPS; ++w) v += s.red[c][i][w];
            p.partials[(((size_t)b * g.C_out + cg0 + c) * g.tiles + it.tile) * 2 + i] = v;
        }
    }
}

// An item's per-channel constants into s.chan, by threads 0 .. CO_GROUP - 1.
template <bool WRITE>
__device__ __forceinline__ void load_sweep_channels(SweepSmem& s, const SweepParams& p, const Item& it)
{
    const Geometry& g = p.g;
    const int j = threadIdx.x, c = min(it.cg0 + j, g.C_out - 1), cpg = g.C_out / p.groups, grp = c / cpg;
    const double mean = p.stats[((size_t)it.b * p.groups + grp) * 2];
    const double rstd = p.stats[((size_t)it.b * p.groups + grp) * 2 + 1];
    float* chan = reinterpret_cast<float*>(s.chan);
    chan[0 * CO_GROUP + j] = (float)rstd;
    chan[1 * CO_GROUP + j] = (float)(-mean * rstd);
    chan[2 * CO_GROUP + j] = p.gn_weight[c];
    chan[3 * CO_GROUP + j] = p.gn_bias[c];
    if (WRITE) {
        const double2 pq = group_terms(p.gn_weight, p.sums, it.b, g.C_out, grp, cpg, (double)g.Do * g.Ho * g.Wo * cpg);
        chan[4 * CO_GROUP + j] = (float)(p.gn_weight[c] * rstd);
        chan[5 * CO_GROUP + j] = (float)(pq.x * rstd);
        chan[6 * CO_GROUP + j] = (float)(pq.y * rstd);
    }
}

// A sweep: blocks take items blockIdx.x, + gridDim.x, ...; TF32: the operands rounded as the forward's.
template <bool WRITE, bool TF32, typename TO>
__global__ void __launch_bounds__(THREADS, MIN_BLOCKS) convt_backward_sweep_kernel(const SweepParams p)
{
    extern __shared__ __align__(16) unsigned char smem_raw[];
    SweepSmem& s = *reinterpret_cast<SweepSmem*>(smem_raw);
    const Geometry& g = p.g;
    const int total = p.B * g.items;
    int u = blockIdx.x, staged_cg = -1;
    Item it = item_at(u, g);
    if (u < total) stage_input(s.in[0], p.x, 0, it, g, p.vec);
    copy_async_commit();
    for (int buf = 0; u < total; buf ^= 1) {
        if (it.cg0 != staged_cg) {   // the channel group's bias and weights, times -log2(e)
            if (threadIdx.x < CO_GROUP) {
                const int co = min(it.cg0 + (int)threadIdx.x, g.C_out - 1);
                reinterpret_cast<float*>(s.bias)[threadIdx.x] = p.bias != nullptr ? p.bias[co] * -LOG2E : 0.f;
            }
            stage_weights<TF32>(s, p.weight, 0, it.cg0, g);
            if (TF32) round_staged_weights(s, g.C_in);
            staged_cg = it.cg0;
        }
        if (threadIdx.x < CO_GROUP) load_sweep_channels<WRITE>(s, p, it);
        const int u_next = u + gridDim.x;
        const Item next = item_at(u_next, g);
        if (TF32) round_and_stage_next(s, p.x, next, u_next < total, g, p.vec, buf);
        else if (u_next < total) stage_input(s.in[buf ^ 1], p.x, 0, next, g, p.vec);
        copy_async_commit();
        copy_async_wait<false>();   // this item's tile (all but the group just committed)
        __syncthreads();
        sweep_block<WRITE, TO>(s, p, it, buf);
        __syncthreads();
        u = u_next;
        it = next;
    }
}

static Geometry make_geometry(int C_in, int C_out, int D, int H, int W) {
    Geometry g = {};   // the schedule is set by schedule()
    g.C_in = C_in; g.C_out = C_out; g.D = D; g.H = H; g.W = W;
    g.Do = 2 * D - 1; g.Ho = 2 * H - 1; g.Wo = 2 * W - 1;
    g.h_tiles = (H + TILE_H - 2) / (TILE_H - 1);
    g.w_tiles = (W + 31) / 32;
    g.tiles = D * g.h_tiles * g.w_tiles;
    g.items = g.tiles * ((C_out + CO_GROUP - 1) / CO_GROUP);
    return g;
}

// The launch's schedule for B samples on `blocks` resident blocks. Phase 2 lags about 1.5 rounds of items
// (and at least one sample), so that the last samples' statistics are complete before the launch's last
// round needs them (a lag of one round left blocks waiting at the end). That last round of phase-2
// items, one per block, is split: the blocks' last tickets are shorter, so they finish closer together
// (blocks drift apart, so without it the GPU is half idle for about half an item). The split tickets (at
// most one round) are all phase 2.
static void schedule(Geometry& g, int B, int blocks) {
    g.lag = min(B, (3 * blocks / 2 + g.items - 1) / g.items + 1);
    const int split = min(B * g.items, blocks);
    g.split_from = 2 * B * g.items - split;
    g.tickets = g.split_from + split * SPLIT;
}

// Data workspace: partials (double), then norm (float).
static size_t partials_bytes(long long B, const Geometry& g) { return (size_t)B * g.C_out * g.tiles * 2 * sizeof(double); }
static size_t norm_bytes(long long B, const Geometry& g) { return (size_t)B * g.C_out * 2 * sizeof(float); }

long long convt_data_bytes(long long B, int C_in, int C_out, int D, int H, int W) {
    const Geometry g = make_geometry(C_in, C_out, D, H, W);
    return (long long)(partials_bytes(B, g) + norm_bytes(B, g));
}

// Tickets at most (as if every phase-2 item were split).
long long convt_items(long long B, int C_in, int C_out, int D, int H, int W) {
    return (1 + SPLIT) * B * make_geometry(C_in, C_out, D, H, W).items;
}

// Blocks of `kernel` (THREADS threads, `smem` bytes of dynamic shared memory) resident at once on the current device,
// its shared-memory opt-in done once per device (`cache`: one per kernel).
template <typename Kernel>
static cudaError_t resident_blocks_of(Kernel kernel, int smem, int (&cache)[64], int* resident) {
    int dev;
    cudaError_t err;
    if ((err = cudaGetDevice(&dev)) != cudaSuccess) return err;
    if (dev < 64 && cache[dev] > 0) { *resident = cache[dev]; return cudaSuccess; }
    int per_sm = 0, sms = 0;
    if ((err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem)) != cudaSuccess ||
        (err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, THREADS, smem)) != cudaSuccess ||
        (err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev)) != cudaSuccess)
        return err;
    *resident = max(1, per_sm * sms);
    if (dev < 64) cache[dev] = *resident;
    return cudaSuccess;
}
template <bool TF32, typename T, typename TO>
static cudaError_t resident_blocks(int* resident) {
    static int cache[64] = {};
    return resident_blocks_of(convt_swish_gn_kernel<TF32, T, TO>, (int)sizeof(Smem), cache, resident);
}

// RAW (is_half<TO>: the Swish output written, no statistics): phase-1 items only, each written as phase 2 writes.
template <bool TF32, typename T, typename TO>
static cudaError_t launch_convt(Params& p, int B, cudaStream_t stream) {
    constexpr bool RAW = is_half<TO>();
    int resident;
    cudaError_t err;
    if ((err = resident_blocks<TF32, T, TO>(&resident)) != cudaSuccess) return err;
    const int blocks = (int)min((RAW ? 1LL : 2LL) * B * p.g.items, (long long)resident);
    schedule(p.g, B, blocks);
    if (RAW) p.g.lag = B, p.g.split_from = p.g.tickets = B * p.g.items;   // item_of: phase-1 items, none split
    convt_swish_gn_kernel<TF32, T, TO><<<blocks, THREADS, sizeof(Smem), stream>>>(p);
    return cudaGetLastError();
}

// float16 and bfloat16: GroupNorm and HardSwish over the stored Swish output, in place, as PyTorch's half
// GroupNorm computes them, so that each group's mean and 1/std round to the same neighbour in the dtype (a
// different order of the float sums moves about one group in 250 to the other, shifting all its outputs).
// Its statistics kernel (RowwiseMoments): per (sample, group), 512 threads (32 below 512 elements), thread j
// a Welford update for elements j, j + 512, ... in order; then the states combined down a shuffle tree (16,
// 8, 4, 2, 1) in each warp, and the warps' results the same way in warp 0; mean and 1/std = rsqrt(var +
// eps) (eps rounded to the dtype, as PyTorch passes it) stored in the dtype. The expressions below are
// PyTorch's (WelfordOps), compiled to the same operations (a division, fused multiply-adds).
// Then a = rstd gamma, b = -a mean + beta in float (ComputeFusedParams), a x + b rounded, HardSwish rounded.
constexpr int GN_THREADS = 512;
struct Welford { float mean, m2, nf; };
__device__ __forceinline__ Welford welford_add(Welford w, float x) {
    const float nf = w.nf + 1.f;   // exact: a thread's count is far below 2^24
    const float delta = x - w.mean, mean = w.mean + delta / nf;
    return {mean, w.m2 + delta * (x - mean), nf};
}
__device__ __forceinline__ Welford welford_combine(Welford a, Welford b) {
    if (a.nf == 0.f) return b;
    if (b.nf == 0.f) return a;
    const float delta = b.mean - a.mean, count = a.nf + b.nf, nb_over_n = b.nf / count;
    return {a.mean + delta * nb_over_n, a.m2 + b.m2 + delta * delta * a.nf * nb_over_n, count};
}
__device__ __forceinline__ Welford welford_warp(Welford w) {
#pragma unroll
    for (int off = 16; off > 0; off /= 2)
        w = welford_combine(w, {__shfl_down_sync(0xffffffffu, w.mean, off), __shfl_down_sync(0xffffffffu, w.m2, off),
                                __shfl_down_sync(0xffffffffu, w.nf, off)});
    return w;
}

template <typename TO>
__global__ void __launch_bounds__(GN_THREADS, 2) group_norm_hardswish_kernel(
    TO* __restrict__ out, const float* __restrict__ gn_weight, const float* __restrict__ gn_bias,
    double* __restrict__ stats, int C_out, int groups, long long vol, float eps)
{
    __shared__ Welford warps[GN_THREADS / 32];
    __shared__ float mean_rstd[2];
    const int grp = blockIdx.x % groups, cpg = C_out / groups, lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    TO* const x = out + (size_t)blockIdx.x * cpg * vol;   // the group's channels: contiguous
    const long long n = (long long)cpg * vol;
    Welford w = {0.f, 0.f, 0.f};
    long long j = threadIdx.x;
    for (; j + 31LL * blockDim.x < n; j += 32LL * blockDim.x) {   // 32 loads in flight, then the updates in order
        float v[32];
#pragma unroll
        for (int k = 0; k < 32; ++k) v[k] = to_float(x[j + k * blockDim.x]);
#pragma unroll
        for (int k = 0; k < 32; ++k) w = welford_add(w, v[k]);
    }
    for (; j < n; j += blockDim.x) w = welford_add(w, to_float(x[j]));
    w = welford_warp(w);
    if (blockDim.x > 32) {
        if (lane == 0) warps[warp] = w;
        __syncthreads();
        if (warp == 0) w = welford_warp(lane < (int)blockDim.x / 32 ? warps[lane] : Welford{0.f, 0.f, 0.f});
    }
    if (threadIdx.x == 0) {   // the backward's statistics unrounded (nearer float64 than PyTorch's rounded ones)
        const float mean = w.mean, rstd = rsqrtf(w.m2 / w.nf + round_to<TO>(eps));
        mean_rstd[0] = round_to<TO>(mean);
        mean_rstd[1] = round_to<TO>(rstd);
        stats[(size_t)blockIdx.x * 2] = mean;
        stats[(size_t)blockIdx.x * 2 + 1] = rstd;
    }
    __syncthreads();
    for (int c = 0; c < cpg; ++c) {   // each channel's row: 16-byte vectors between a head and a tail of elements
        const int ch = grp * cpg + c;
        const float2 ab = half_gn_affine<TO>(mean_rstd[0], mean_rstd[1], gn_weight[ch], gn_bias[ch]);
        const float a = ab.x, b = ab.y;
        const auto apply = [a, b](TO v) {
            const float z = round_to<TO>(fmaf(a, to_float(v), b));
            return from_float<TO>(hardswish(z));
        };
        TO* const row = x + (size_t)c * vol;
        const long long head = min(vol, (long long)((16 - reinterpret_cast<uintptr_t>(row) % 16) % 16 / sizeof(TO)));
        constexpr int PER = 16 / sizeof(TO);   // elements per vector
        const long long vecs = (vol - head) / PER;
        if (threadIdx.x < head) row[threadIdx.x] = apply(row[threadIdx.x]);
        uint4* const body = reinterpret_cast<uint4*>(row + head);
#pragma unroll 4
        for (long long i = threadIdx.x; i < vecs; i += blockDim.x) {
            uint4 u = body[i];
            unsigned* const words = &u.x;
#pragma unroll
            for (int k = 0; k < 4; ++k) {
                if constexpr (sizeof(TO) == 4) {
                    words[k] = __float_as_uint(apply(__uint_as_float(words[k])));
                } else {
                    const unsigned lo = apply(TO{(unsigned short)(words[k] & 0xffffu)}).bits;
                    const unsigned hi = apply(TO{(unsigned short)(words[k] >> 16)}).bits;
                    words[k] = lo | hi << 16;
                }
            }
            body[i] = u;
        }
        for (long long i = head + PER * vecs + threadIdx.x; i < vol; i += blockDim.x) row[i] = apply(row[i]);
    }
}

// PyTorch's conv path in float32: Swish, GroupNorm and HardSwish over PyTorch's conv output y, split over
// pieces of each (sample, group) (gn_chunk_len: GN_CHUNK elements, halved while the pieces are fewer than
// GN_MIN_PIECES, a function of the shape alone) so that small batches fill the GPU (group_norm_hardswish_kernel
// takes a block per (sample, group): 64 blocks at 16 x 4; it stays for the half types, whose rounded mean and 1/std
// need PyTorch's order of sums). gn_partials_kernel: a block per piece, the Welford state of its Swish(y);
// gn_finalize_kernel: per (sample, group) the pieces combined in order, then mean and 1/std as
// group_norm_hardswish_kernel forms them; gn_apply_kernel: a block per piece writes HardSwish(GroupNorm(Swish(y))).
// Two reads of y and one write of the output, nothing between. SWISH false (autocast: GroupNorm in float32 over the
// half Swish values that swish_half_kernel wrote into the output): y holds the Swish values, normalised in place.
// Scratch: gn_scratch_bytes.
constexpr long long GN_CHUNK = 65536, GN_MIN_CHUNK = 2048;
constexpr int GN_MIN_PIECES = 512;   // about four blocks an SM: at batch 1 and 8 one piece a group left the GPU idle
constexpr int GN_SPLIT_THREADS = 256, GN_APPLY_LOADS = 8;
static long long gn_chunk_len(long long n, long long n_bg) {
    long long len = GN_CHUNK;
    while (len > GN_MIN_CHUNK && n_bg * ((n + len - 1) / len) < GN_MIN_PIECES) len /= 2;
    return len;
}
static long long gn_chunks(long long n, long long n_bg) { return (n + gn_chunk_len(n, n_bg) - 1) / gn_chunk_len(n, n_bg); }
long long gn_scratch_bytes(long long B, int C_out, int groups, long long vol) {
    return B * groups * (gn_chunks((long long)(C_out / groups) * vol, B * groups) * (long long)sizeof(Welford) +
                         2 * sizeof(float));
}
__device__ __forceinline__ float swish(float y) { return y * (1.f / (1.f + expf(-y))); }   // as PyTorch writes it
template <bool SWISH>
__global__ void __launch_bounds__(GN_SPLIT_THREADS) gn_partials_kernel(const float* __restrict__ y,
                                                                      Welford* __restrict__ part, long long n, int chunks, long long len)
{
    const auto value = [](float v) { return SWISH ? swish(v) : v; };
    __shared__ Welford warps[GN_SPLIT_THREADS / 32];
    const long long bg = blockIdx.x / chunks, lo = (blockIdx.x % chunks) * len, hi = min(n, lo + len);
    const float* const x = y + bg * n;   // the group's channels: contiguous
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    Welford w = {0.f, 0.f, 0.f};
    long long j = lo + threadIdx.x;
    for (; j + 7LL * GN_SPLIT_THREADS < hi; j += 8LL * GN_SPLIT_THREADS) {   // eight loads in flight, then in order
        float v[8];
#pragma unroll
        for (int k = 0; k < 8; ++k) v[k] = x[j + k * GN_SPLIT_THREADS];
#pragma unroll
        for (int k = 0; k < 8; ++k) w = welford_add(w, value(v[k]));
    }
    for (; j < hi; j += GN_SPLIT_THREADS) w = welford_add(w, value(x[j]));
    w = welford_warp(w);
    if (lane == 0) warps[warp] = w;
    __syncthreads();
    if (warp == 0) {
        w = welford_warp(lane < GN_SPLIT_THREADS / 32 ? warps[lane] : Welford{0.f, 0.f, 0.f});
        if (lane == 0) part[blockIdx.x] = w;
    }
}
__global__ void gn_finalize_kernel(const Welford* __restrict__ part, float* __restrict__ mean_rstd,
                                   double* __restrict__ stats, int chunks, long long n_bg, float eps)
{
    const long long bg = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (bg >= n_bg) return;
    Welford w = part[bg * chunks];
    for (int k = 1; k < chunks; ++k) w = welford_combine(w, part[bg * chunks + k]);
    const float mean = w.mean, rstd = rsqrtf(w.m2 / w.nf + eps);
    mean_rstd[bg * 2] = mean;
    mean_rstd[bg * 2 + 1] = rstd;
    stats[bg * 2] = mean;
    stats[bg * 2 + 1] = rstd;
}
// Where a (sample, group)'s n elements fit GN_FUSED_PER values a thread of one block (n <= GN_FUSED_MAX) and the
// (sample, group)s fill the GPU (GN_FUSED_MIN_GROUPS; the plan's gn_threads, a function of the shape alone):
// gn_fused_kernel, a block per (sample, group), Swish(y) loaded once into registers, its Welford state in a fixed
// order (each thread its values, the warps, warp 0 over the warps), mean and 1/std as gn_finalize_kernel forms them,
// then each value normalised and HardSwish'ed from the registers: one read of y, one write, one launch where the
// split kernels take three launches and two reads.
constexpr int GN_FUSED_PER = 32, GN_FUSED_MAX = 1024 * GN_FUSED_PER;   // values a thread; elements a block
static int gn_fused_threads(long long n) {   // whole warps of GN_FUSED_PER values a thread; 0: too many for a block
    constexpr long long WARP_VALUES = 32LL * GN_FUSED_PER;
    return n > GN_FUSED_MAX ? 0 : (int)std::max(32LL, (n + WARP_VALUES - 1) / WARP_VALUES * 32);
}
template <bool SWISH>
__global__ void __launch_bounds__(1024) gn_fused_kernel(const float* y, float* out, double* __restrict__ stats,
                                                        const float* __restrict__ gn_weight,
                                                        const float* __restrict__ gn_bias, int C_out, int groups,
                                                        int vol, float eps)
{
    __shared__ Welford warps[32];
    __shared__ float mean_rstd[2];
    const int cpg = C_out / groups, grp = blockIdx.x % groups, lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int n = cpg * vol;
    const float* const x = y + (size_t)blockIdx.x * n;   // the group's channels: contiguous
    float* const o = out + (size_t)blockIdx.x * n;
    float v[GN_FUSED_PER];
#pragma unroll
    for (int k = 0; k < GN_FUSED_PER; ++k) {
        const int i = threadIdx.x + k * blockDim.x;
        v[k] = i < n ? x[i] : 0.f;
    }
    Welford w = {0.f, 0.f, 0.f};
#pragma unroll
    for (int k = 0; k < GN_FUSED_PER; ++k) {
        if (threadIdx.x + k * blockDim.x < n) {
            v[k] = SWISH ? swish(v[k]) : v[k];
            w = welford_add(w, v[k]);
        }
    }
    w = welford_warp(w);
    if (lane == 0) warps[warp] = w;
    __syncthreads();
    if (warp == 0) {
        w = welford_warp(lane < (int)blockDim.x / 32 ? warps[lane] : Welford{0.f, 0.f, 0.f});
        if (lane == 0) {
            const float mean = w.mean, rstd = rsqrtf(w.m2 / w.nf + eps);
            mean_rstd[0] = mean;
            mean_rstd[1] = rstd;
            stats[(size_t)blockIdx.x * 2] = mean;
            stats[(size_t)blockIdx.x * 2 + 1] = rstd;
        }
    }
    __syncthreads();
    const float mean = mean_rstd[0], rstd = mean_rstd[1];
#pragma unroll
    for (int k = 0; k < GN_FUSED_PER; ++k) {
        const int i = threadIdx.x + k * blockDim.x;
        if (i < n) {
            const int ch = grp * cpg + i / vol;
            const float a = rstd * gn_weight[ch], b = -a * mean + gn_bias[ch];
            const float z = a * v[k] + b;
            o[i] = hardswish(z);
        }
    }
}
template <bool SWISH>
__global__ void __launch_bounds__(GN_SPLIT_THREADS) gn_apply_kernel(
    const float* y, float* out, const float* __restrict__ mean_rstd,
    const float* __restrict__ gn_weight, const float* __restrict__ gn_bias, int C_out, int groups, long long vol,
    int chunks, long long len)
{
    const int cpg = C_out / groups;
    const long long n = (long long)cpg * vol, bg = blockIdx.x / chunks;
    const long long lo = (blockIdx.x % chunks) * len, hi = min(n, lo + len);
    const float* const x = y + bg * n;
    float* const o = out + bg * n;
    const int grp = (int)(bg % groups);
    for (int c = (int)(lo / vol); c < cpg && (long long)c * vol < hi; ++c) {   // the channels the piece spans
        const int ch = grp * cpg + c;
        const float a = mean_rstd[bg * 2 + 1] * gn_weight[ch], b = -a * mean_rstd[bg * 2] + gn_bias[ch];
        const long long end = min(hi, (long long)(c + 1) * vol);
        // GN_APPLY_LOADS loads in flight a thread (one at a time left the kernel waiting on memory: 1.1 TB/s)
        for (long long i0 = max(lo, (long long)c * vol) + threadIdx.x; i0 < end;
             i0 += GN_APPLY_LOADS * GN_SPLIT_THREADS) {
            float v[GN_APPLY_LOADS];
#pragma unroll
            for (int k = 0; k < GN_APPLY_LOADS; ++k) {
                const long long i = i0 + k * GN_SPLIT_THREADS;
                v[k] = i < end ? x[i] : 0.f;
            }
#pragma unroll
            for (int k = 0; k < GN_APPLY_LOADS; ++k) {
                const long long i = i0 + k * GN_SPLIT_THREADS;
                if (i < end) {
                    const float z = a * (SWISH ? swish(v[k]) : v[k]) + b;
                    o[i] = hardswish(z);
                }
            }
        }
    }
}

// Backward. With y the conv output, a = Swish(y), n = (a - mu_g) rstd_g, z = gamma_c n + beta_c, out = HardSwish(z)
// and dz = grad_out HardSwish'(z): dL/dgamma_c = sum dz n, dL/dbeta_c = sum dz, and
//     dL/dy = rstd_g (gamma_c dz - P_g / N - n Q_g / N) Swish'(y),
//     P_g = sum_{c in g} gamma_c sum dz,   Q_g = sum_{c in g} gamma_c sum dz n   (N: elements per group),
// so one sweep gathers per (sample, channel) sum dz and sum dz n and a second writes dL/dy. Both recompute y
// from the input in plain FP32 (operands rounded to TF32 when `tf32`, as the forward): about ten multiply-adds
// per element, cheaper than storing y (4 bytes per element) and reading it twice. Block (chunk, c, b) takes
// chunk_len consecutive positions of channel c of sample b, a thread each in turn.
constexpr int BWD_THREADS = 256, BWD_CHUNK = 16 * BWD_THREADS;

// PyTorch's conv path in half precision: Swish of PyTorch's conv output y (T, bias included, rounded as PyTorch
// rounds it) into out (TO; autocast: float32 holding the rounded values), the sigmoid and the product rounded.
template <typename T, typename TO>
__global__ void swish_half_kernel(const T* __restrict__ y, TO* __restrict__ out, long long n) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        out[i] = from_float<TO>(swish_of_rounded<T>(to_float(y[i])));
}

// GroupNorm and HardSwish in place over the half Swish output written to `out` (TO), in PyTorch's order.
template <typename TO>
static cudaError_t normalise_half(TO* out, const float* gn_weight, const float* gn_bias, double* stats, int B,
                                  const ConvShape& cs, int groups, double eps, cudaStream_t stream) {
    const long long vol = (long long)cs.Do * cs.Ho * cs.Wo;
    const int threads = (long long)(cs.C_out / groups) * vol < GN_THREADS ? 32 : GN_THREADS;
    group_norm_hardswish_kernel<TO><<<B * groups, threads, 0, stream>>>(out, gn_weight, gn_bias, stats, cs.C_out,
                                                                        groups, vol, (float)eps);
    return cudaGetLastError();
}

// PyTorch's conv path (every configuration but convt_tuned's): y, PyTorch's ConvTranspose3d output (the conv's dtype,
// bias included), to `out` (the GroupNorm's dtype). float32: the split GroupNorm kernels with Swish on the fly;
// half: swish_half_kernel, then GroupNorm in the dtype's order (or, under autocast, the split kernels in float32).
// data: gn_scratch_bytes.
cudaError_t torch_conv_chain_launch(const Plan& plan, const void* y, void* out, const float* gn_weight,
                                    const float* gn_bias, void* data, double* stats, int conv_type, int norm_type,
                                    int B, const ConvShape& cs, int groups, double eps, cudaStream_t stream) {
    const long long vol = (long long)cs.Do * cs.Ho * cs.Wo;
    const long long n = (long long)(cs.C_out / groups) * vol, n_bg = (long long)B * groups;
    const int chunks = (int)gn_chunks(n, n_bg);
    const long long len = gn_chunk_len(n, n_bg);
    const auto split = [&](const float* src, auto swish_on) {   // the statistics in 64K pieces, then the output
        constexpr bool SWISH = decltype(swish_on)::value;
        if (plan.gn_threads > 0) {   // one block a (sample, group)
            gn_fused_kernel<SWISH><<<(unsigned)n_bg, plan.gn_threads, 0, stream>>>(
                src, static_cast<float*>(out), stats, gn_weight, gn_bias, cs.C_out, groups, (int)vol, (float)eps);
            return cudaGetLastError();
        }
        Welford* part = static_cast<Welford*>(data);
        float* mean_rstd = reinterpret_cast<float*>(part + n_bg * chunks);
        gn_partials_kernel<SWISH><<<(unsigned)(n_bg * chunks), GN_SPLIT_THREADS, 0, stream>>>(src, part, n, chunks,
                                                                                             len);
        cudaError_t err = cudaGetLastError();
        if (err != cudaSuccess) return err;
        gn_finalize_kernel<<<(unsigned)((n_bg + 127) / 128), 128, 0, stream>>>(part, mean_rstd, stats, chunks, n_bg,
                                                                              (float)eps);
        if ((err = cudaGetLastError()) != cudaSuccess) return err;
        gn_apply_kernel<SWISH><<<(unsigned)(n_bg * chunks), GN_SPLIT_THREADS, 0, stream>>>(
            src, static_cast<float*>(out), mean_rstd, gn_weight, gn_bias, cs.C_out, groups, vol, chunks, len);
        return cudaGetLastError();
    };
    return with_types(conv_type, norm_type, [&](auto t, auto to) {
        using T = decltype(t);
        using TO = decltype(to);
        if constexpr (!is_half<T>()) {
            return split(static_cast<const float*>(y), std::true_type());
        } else {
            const long long total = n * n_bg;
            swish_half_kernel<T, TO><<<(unsigned)std::min<long long>((total + 255) / 256, 1 << 16), 256, 0, stream>>>(
                static_cast<const T*>(y), static_cast<TO*>(out), total);
            const cudaError_t err = cudaGetLastError();
            if (err != cudaSuccess) return err;
            if constexpr (is_half<TO>())
                return normalise_half(static_cast<TO*>(out), gn_weight, gn_bias, stats, B, cs, groups, eps, stream);
            else
                return split(static_cast<const float*>(out), std::false_type());   // autocast: GroupNorm in float32
        }
    });
}

// The tuned configuration (convt_tuned): convt_items < 2^30 (the ticket counter overshoots by the grid size);
// `data` of convt_data_bytes; counters (1 int), done and ready (B ints each) zero, and only this launch using them.
// The inputs as floats (half precision: converted); conv_type, norm_type: the dtype codes (with_types) of the
// model's conv and GroupNorm; `out` in the GroupNorm's.
cudaError_t convt_swish_gn_hardswish_launch(
    const float* x, const float* weight, const float* bias, const float* gn_weight, const float* gn_bias,
    void* data, int* counters, int* done, int* ready, void* out, double* stats, int conv_type,
    int norm_type, int B, const ConvShape& cs, int groups, double eps, bool tf32, bool vec, cudaStream_t stream)
{
    Params p;
    p.g = make_geometry(cs.C_in, cs.C_out, cs.D, cs.H, cs.W);
    p.x = x; p.weight = weight; p.bias = bias; p.gn_weight = gn_weight; p.gn_bias = gn_bias; p.out = out;
    p.stats = stats;
    p.partials = static_cast<double*>(data);
    p.norm = reinterpret_cast<float*>(static_cast<char*>(data) + partials_bytes(B, p.g));
    p.counters = counters; p.done = done; p.ready = ready;
    p.B = B; p.groups = groups; p.eps = eps;
    p.vec = vec;   // the plan's
    if (conv_type == 0) return tf32 ? launch_convt<true, float, float>(p, B, stream) : launch_convt<false, float, float>(p, B, stream);
    return with_types(conv_type, norm_type, [&](auto t, auto to) {
        using TO = decltype(to);
        const cudaError_t err = launch_convt<false, decltype(t), TO>(p, B, stream);
        if (err != cudaSuccess || !is_half<TO>()) return err;
        return normalise_half(static_cast<TO*>(out), gn_weight, gn_bias, stats, B, cs, groups, eps, stream);   // RAW
    });
}

// T: dL/dy's element type (float32, which the conv's gradient kernels read); TO: the output gradient's.
// In half precision the chain's gradient is computed in float from float copies of the inputs.
// PyTorch's conv path's sweeps (a thread an element): y = the conv + bias read from y_saved (the forward's saved
// conv output, as floats).
template <bool WRITE, typename T, typename TO>
__global__ void __launch_bounds__(BWD_THREADS) chain_backward_kernel(
    const float* __restrict__ y_saved,    // (B, C_out, Do, Ho, Wo): the conv with its bias
    const float* __restrict__ gn_weight, const float* __restrict__ gn_bias,
    const double* __restrict__ stats,     // (B, groups, 2): mean, 1/std
    const TO* __restrict__ grad_out,      // (B, C_out, Do, Ho, Wo)
    double* __restrict__ partials,        // (B, C_out, chunks, 2) written: sum dz, sum dz n (WRITE: sum dL/dy, 0)
    const double* __restrict__ sums,      // WRITE: (B, C_out, 2), the partials added up
    T* __restrict__ grad_y,               // WRITE: (B, C_out, Do, Ho, Wo), float32 for our conv gradients
    const ConvShape cs, int groups, int chunk_len)
{
    const int C_out = cs.C_out;
    const int S = cs.Do * cs.Ho * cs.Wo;
    const int chunk = blockIdx.x, c = blockIdx.y, b = blockIdx.z, cpg = C_out / groups, grp = c / cpg;
    const float mu = (float)stats[((size_t)b * groups + grp) * 2], rstd = (float)stats[((size_t)b * groups + grp) * 2 + 1];
    const float gamma = gn_weight[c], beta = gn_bias[c];
    float p_n = 0.f, q_n = 0.f;   // WRITE: P_g / N and Q_g / N
    if (WRITE) {
        const double2 pq = group_terms(gn_weight, sums, b, C_out, grp, cpg, (double)S * cpg);
        p_n = (float)pq.x;
        q_n = (float)pq.y;
    }
    const size_t row = ((size_t)b * C_out + c) * S;
    float s_dz = 0.f, s_dzn = 0.f;
    const int end = min(S, (chunk + 1) * chunk_len);
    for (int pos = chunk * chunk_len + threadIdx.x; pos < end; pos += BWD_THREADS) {
        const float y = y_saved[row + pos];
        const float sig = 1.f / (1.f + expf(-y));
        const float n = (y * sig - mu) * rstd;
        const float z = fmaf(gamma, n, beta);
        const float dz = load_streaming(grad_out + row + pos) * hardswish_grad(z);
        if (WRITE) {
            const float da = rstd * (gamma * dz - p_n - n * q_n);
            const float dy = da * sig * (1.f + y * (1.f - sig));
            store_streaming(grad_y + row + pos, dy);
            s_dz += dy;
        } else {
            s_dz += dz;
            s_dzn = fmaf(dz, n, s_dzn);
        }
    }
    {   // the block's sums, in a fixed order: warps by shuffles, then warp 0 over the warps (WRITE: sum dL/dy)
        __shared__ double warp_sums[BWD_THREADS / 32][2];
        double d0 = s_dz, d1 = s_dzn;
#pragma unroll
        for (int off = 16; off > 0; off /= 2) {
            d0 += __shfl_xor_sync(0xffffffffu, d0, off);
            d1 += __shfl_xor_sync(0xffffffffu, d1, off);
        }
        if (threadIdx.x % 32 == 0) { warp_sums[threadIdx.x / 32][0] = d0; warp_sums[threadIdx.x / 32][1] = d1; }
        __syncthreads();
        if (threadIdx.x < 2) {
            double v = 0.0;
            for (int w = 0; w < BWD_THREADS / 32; ++w) v += warp_sums[w][threadIdx.x];
            partials[(((size_t)b * C_out + c) * gridDim.x + chunk) * 2 + threadIdx.x] = v;
        }
    }
}

// PyTorch's conv path's chunk of positions (chunk_len): BWD_CHUNK, halved (down to 2 BWD_THREADS) while
// chain_backward_kernel would have fewer than 256 blocks: small batches fill the GPU. A function of the shape only
// (the same bits on every GPU).
static int bwd_chunk(long long B, int C_out, long long S) {
    int len = BWD_CHUNK;
    while (len > 2 * BWD_THREADS && (S + len - 1) / len * C_out * B < 256) len /= 2;
    return len;
}
// The sweeps' partials per (sample, channel): the tuned sweeps' tiles, or PyTorch's conv path's chunks.
static int sweep_chunks(const Plan& plan, long long B, const ConvShape& cs) {
    if (plan.path == Path::TUNED) return make_geometry(cs.C_in, cs.C_out, cs.D, cs.H, cs.W).tiles;
    const long long S = (long long)cs.Do * cs.Ho * cs.Wo;
    const int len = bwd_chunk(B, cs.C_out, S);
    return (int)((S + len - 1) / len);
}

// Per (sample, channel): the chunks' partials added in order; then per channel dL/dgamma and dL/dbeta, the
// samples added in order. One thread per (b, c), then one per (c, kind).
__global__ void chain_sums_kernel(const double* __restrict__ partials, double* __restrict__ sums, int BC, int chunks) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= BC) return;
    double s0 = 0.0, s1 = 0.0;
    for (int k = 0; k < chunks; ++k) {
        s0 += partials[((size_t)i * chunks + k) * 2];
        s1 += partials[((size_t)i * chunks + k) * 2 + 1];
    }
    sums[(size_t)i * 2] = s0;
    sums[(size_t)i * 2 + 1] = s1;
}

template <typename TO>
__global__ void gn_param_grad_kernel(const double* __restrict__ sums, TO* __restrict__ grad_gn_weight,
                                     TO* __restrict__ grad_gn_bias, int B, int C_out) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;   // (c, kind): kind 1 is dL/dgamma (sum dz n)
    if (i >= 2 * C_out) return;
    const int c = i / 2, kind = i % 2;
    double v = 0.0;
    for (int b = 0; b < B; ++b) v += sums[((size_t)b * C_out + c) * 2 + kind];
    (kind ? grad_gn_weight : grad_gn_bias)[c] = from_float<TO>((float)v);
}

// Doubles: the sweeps' partials and sums.
long long chain_backward_workspace(const Plan& plan, long long B, const ConvShape& cs) {
    return B * cs.C_out * sweep_chunks(plan, B, cs) * 2 + B * cs.C_out * 2;
}

template <bool WRITE, bool TF32, typename TO>
static cudaError_t launch_sweep(const SweepParams& p, cudaStream_t stream) {
    static int cache[64] = {};
    const auto kernel = convt_backward_sweep_kernel<WRITE, TF32, TO>;
    int resident;
    cudaError_t err;
    if ((err = resident_blocks_of(kernel, (int)sizeof(SweepSmem), cache, &resident)) != cudaSuccess) return err;
    const int blocks = (int)min((long long)p.B * p.g.items, (long long)resident);
    kernel<<<blocks, THREADS, sizeof(SweepSmem), stream>>>(p);
    return cudaGetLastError();
}

// dL/dy (B, C_out, Do, Ho, Wo) in float32 and the GroupNorm parameters' gradients in the GroupNorm's dtype
// (dtype codes: with_types; grad_out in the GroupNorm's type); `work` of chain_backward_workspace, whose partials
// then hold the WRITE sweep's sums of dL/dy (conv_grads_launch's bias gradient). The tuned path's sweeps recompute
// y (convt_backward_sweep_kernel); PyTorch's conv path's read y_saved, the forward's conv output as floats.
cudaError_t chain_backward_launch(const Plan& plan, const float* x, const float* weight, const float* bias,
                                  const float* gn_weight, const float* gn_bias, const double* stats,
                                  const float* y_saved, const void* grad_out, double* work, void* grad_y,
                                  void* grad_gn_weight, void* grad_gn_bias, int conv_type, int norm_type, int B,
                                  const ConvShape& cs, int groups, bool tf32, int sms, cudaStream_t stream) {
    return with_types(conv_type, norm_type, [&](auto t, auto to) {
        using TO = decltype(to);
        const bool tuned = plan.path == Path::TUNED;
        const int C_out = cs.C_out;
        const long long S = (long long)cs.Do * cs.Ho * cs.Wo;
        const int len = bwd_chunk(B, C_out, S), chunks = sweep_chunks(plan, B, cs);
        double* partials = work;
        double* sums = work + (size_t)B * C_out * chunks * 2;
        const TO* g = static_cast<const TO*>(grad_out);
        float* gy = static_cast<float*>(grad_y);
        SweepParams sp;
        if (tuned) {
            sp.x = x; sp.weight = weight; sp.bias = bias; sp.gn_weight = gn_weight; sp.gn_bias = gn_bias;
            sp.stats = stats; sp.grad_out = g; sp.partials = partials; sp.sums = sums; sp.grad_y = gy;
            sp.B = B; sp.groups = groups; sp.vec = plan.vec;
            sp.g = make_geometry(cs.C_in, cs.C_out, cs.D, cs.H, cs.W);
        }
        const auto sweep = [&](auto write) {
            constexpr bool WRITE = decltype(write)::value;
            if (tuned)
                return tf32 ? launch_sweep<WRITE, true, TO>(sp, stream) : launch_sweep<WRITE, false, TO>(sp, stream);
            chain_backward_kernel<WRITE, float, TO><<<dim3(chunks, C_out, B), BWD_THREADS, 0, stream>>>(
                y_saved, gn_weight, gn_bias, stats, g, partials, sums, gy, cs, groups, len);
            return cudaGetLastError();
        };
        cudaError_t err = sweep(std::false_type());
        if (err != cudaSuccess) return err;
        chain_sums_kernel<<<(B * C_out + 255) / 256, 256, 0, stream>>>(partials, sums, B * C_out, chunks);
        if ((err = cudaGetLastError()) != cudaSuccess) return err;
        gn_param_grad_kernel<TO><<<(2 * C_out + 255) / 256, 256, 0, stream>>>(
            sums, static_cast<TO*>(grad_gn_weight), static_cast<TO*>(grad_gn_bias), B, C_out);
        if ((err = cudaGetLastError()) != cudaSuccess) return err;
        return sweep(std::true_type());
    });
}

// ---- The transposed conv's own gradients, from dL/dy in float32 and the input and weights in float32 (half
// precision: float copies, exact). dL/dx on the tuned path (convt_tuned: kernel 3, stride 2, padding 1, C_in <= 4) is
// the forward's parity split read backwards: input position m meets dL/dy at outputs 2 m - 1 + k (k = 0, 1, 2) on
// each axis, dL/dx[ci, m] = sum_c sum_k w[ci, c, k] dL/dy[c, 2 m - 1 + k]. A thread owns R consecutive input rows of
// one input column (warp w rows R w .. of a tile of R GX_WARPS rows, lane l column l of 32); for an output depth it
// loads its dL/dy rows 2 m_h - 1 .. 2 (m_h + R) - 1 at columns 2 m_w - 1 .. 2 m_w + 1 once (load_grad_rows), with no
// bounds test in the products.
constexpr int GX_WARPS = 8, GX_THREADS = 32 * GX_WARPS;
constexpr int GX_CO = 64;   // dL/dx: output channels whose weights are staged at once

// v[j][e] = dL/dy at row oh0 + j, column ow - 1 + e of one output depth's plane (zero outside it): columns ow and
// ow + 1 loaded by the lane, ow - 1 taken from the lane before (lane 0 loads it). All 32 lanes call it.
template <int R>
__device__ __forceinline__ void load_grad_rows(float (&v)[2 * R + 1][3], const float* __restrict__ plane, int oh0,
                                               int ow, int Ho, int Wo)
{
    const int lane = threadIdx.x % 32;
#pragma unroll
    for (int j = 0; j < 2 * R + 1; ++j) {
        const int oh = oh0 + j;
        const bool ok = oh >= 0 && oh < Ho;
        const float* row = plane + (size_t)(ok ? oh : 0) * Wo;
        v[j][1] = ok && ow < Wo ? __ldg(row + ow) : 0.f;
        v[j][2] = ok && ow + 1 < Wo ? __ldg(row + ow + 1) : 0.f;
        const float left = __shfl_up_sync(0xffffffffu, v[j][2], 1);
        v[j][0] = lane > 0 ? left : (ok && ow >= 1 ? __ldg(row + ow - 1) : 0.f);
    }
}

// A block per (sample, input depth, tile); a thread's R x CI sums over the output channels in order, each channel's
// taps in the order (kd, kh, kw), in fp32 (the order of the kernel before it). The weights of GX_CO
// output channels at a time in shared memory as a float4 over the input channels (a broadcast a tap).
template <int CI, int R>
__global__ void __launch_bounds__(GX_THREADS) grad_input_convt_tuned_kernel(
    const float* __restrict__ grad_y,     // (B, C_out, Do, Ho, Wo)
    const float* __restrict__ weight,     // (C_in, C_out, 3, 3, 3)
    float* __restrict__ grad_x,           // (B, C_in, D, H, W)
    const ConvShape cs)
{
    __shared__ float4 w_s[GX_CO][TAPS];
    const int D = cs.D, H = cs.H, W = cs.W, Ho = cs.Ho, Wo = cs.Wo, C_out = cs.C_out;
    const int h_tiles = (H + R * GX_WARPS - 1) / (R * GX_WARPS), w_tiles = (W + 31) / 32;
    long long t = blockIdx.x;
    const int w0 = (int)(t % w_tiles) * 32;
    t /= w_tiles;
    const int h0 = (int)(t % h_tiles) * R * GX_WARPS;
    t /= h_tiles;
    const int md = (int)(t % D);
    const long long b = t / D;
    const int mh0 = h0 + R * (threadIdx.x / 32), mw = w0 + threadIdx.x % 32;
    const size_t plane = (size_t)Ho * Wo, vol = (size_t)cs.Do * plane;
    float acc[R][CI] = {};
    for (int c0 = 0; c0 < C_out; c0 += GX_CO) {
        const int n_c = min(GX_CO, C_out - c0);
        __syncthreads();
        for (int i = threadIdx.x; i < n_c * TAPS; i += GX_THREADS) {
            const int cl = i / TAPS, tap = i % TAPS;
            float w[4];
#pragma unroll
            for (int q = 0; q < 4; ++q) w[q] = q < CI ? weight[((size_t)q * C_out + c0 + cl) * TAPS + tap] : 0.f;
            w_s[cl][tap] = make_float4(w[0], w[1], w[2], w[3]);
        }
        __syncthreads();
        for (int cl = 0; cl < n_c; ++cl) {
            const float* g = grad_y + ((size_t)b * C_out + c0 + cl) * vol;
#pragma unroll
            for (int kd = 0; kd < K; ++kd) {
                const int od = 2 * md - 1 + kd;
                if (od < 0 || od >= cs.Do) continue;   // uniform across the block
                float v[2 * R + 1][3];
                load_grad_rows<R>(v, g + od * plane, 2 * mh0 - 1, 2 * mw, Ho, Wo);
#pragma unroll
                for (int kh = 0; kh < K; ++kh)
#pragma unroll
                for (int kw = 0; kw < K; ++kw) {
                    const float4 w4 = w_s[cl][(kd * K + kh) * K + kw];
                    const float wq[4] = {w4.x, w4.y, w4.z, w4.w};
#pragma unroll
                    for (int r = 0; r < R; ++r)
#pragma unroll
                    for (int q = 0; q < CI; ++q) acc[r][q] = fmaf(v[2 * r + kh][kw], wq[q], acc[r][q]);
                }
            }
        }
    }
    if (mw >= W) return;
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
    for (int q = 0; q < CI; ++q)
        if (mh0 + r < H) grad_x[(((size_t)b * CI + q) * D + md) * H * W + (size_t)(mh0 + r) * W + mw] = acc[r][q];
}

// dL/dx's rows a thread (R): 4 where that leaves at least two blocks an SM, else 1 (small batches fill the GPU);
// either gives the same sums. f(CI, R) as compile-time values: the tuned path's C_in (1 .. 4) and R.
template <typename F> cudaError_t with_ci_rows(long long B, const ConvShape& cs, int sms, F&& f) {
    const long long tiles4 = B * cs.D * ((cs.H + 4 * GX_WARPS - 1) / (4 * GX_WARPS)) * ((cs.W + 31) / 32);
    const auto rows = [&](auto ci) {
        return tiles4 >= 2LL * sms ? f(ci, std::integral_constant<int, 4>()) : f(ci, std::integral_constant<int, 1>());
    };
    switch (cs.C_in) {
        case 1: return rows(std::integral_constant<int, 1>());
        case 2: return rows(std::integral_constant<int, 2>());
        case 3: return rows(std::integral_constant<int, 3>());
        default: return rows(std::integral_constant<int, 4>());
    }
}

// dL/dW[ci, c, k] = sum_b sum_i x[b, ci, i] dL/dy[b, c, 2 i - 1 + k], the tuned configuration, on the tensor cores
// (mma.sync m16n8k8, split TF32: fp32-level). An output row (od, oh) takes taps kd = 1 where od is even, kd = 0 and 2
// where it is odd (all inside the input), the same for kh; each tap (kd, kh) reads input row
// ((od + 1 - kd) / 2, (oh + 1 - kh) / 2). Along the row, even columns ow = 2 m take kw = 1 at iw = m, odd ones
// ow = 2 m + 1 take kw = 0 at m + 1 and kw = 2 at m. So per tap (kd, kh), 8 columns m at a time, two GEMM steps:
// rows = 16 output channels, depth = the 8 columns (A = dL/dy at the even or the odd columns), columns = the input
// channel (even step; B = x) or (kw in {0, 2}, ci) (odd step): C_in <= 4 fills one 8-column tile.
// Rows fall in five groups by their taps: (od, oh) parity (even, even) 1 tap, (even, odd) and (odd, even) 2 taps,
// (odd, odd) with kd = 0 and with kd = 2, 2 taps each (4 taps in one task held 168 registers: 12 warps an SM).
// A warp is a task (output-channel tile, group, sample, part): a contiguous run of its group's rows; each row's sums
// in fp32 on the tensor cores, then added to the task's totals (fp32 adds: a task's sums in one accumulator chain
// measured 1.3e-5 from float64 against 5e-7), written to partials [task][(tap, step, register)][lane];
// finish_weight_grad_convt_kernel adds a weight's terms over (sample, part) in order in double. x (1/40 of dL/dy)
// comes from cache.
constexpr int WT_WARPS = 4, WT_GROUPS = 5, WT_PARTIAL = 2 * 2 * 4 * 32;   // floats a task: [tap][step][register][lane]
struct WtGeometry { int co_tiles, parts; long long tasks; };
static WtGeometry wt_geometry(long long B, const ConvShape& cs) {   // about 4096 warps; at least 2 rows a part
    const int co_tiles = (cs.C_out + 15) / 16;
    const long long per_part = B * co_tiles * WT_GROUPS, rows = (long long)(cs.Do / 2) * (cs.Ho / 2);   // the least
    const int parts = (int)std::max<long long>(1, std::min<long long>((4096 + per_part - 1) / per_part, rows / 2));
    return {co_tiles, parts, per_part * parts};
}
// The taps of a group: kd in {1} (PD 0), {0, 2} (PD 1, KD -1) or {KD}; kh in {1} (PH 0) or {0, 2} (PH 1).
template <int PD, int PH, int KD>
__device__ __forceinline__ void grad_weight_convt_task(const float* __restrict__ grad_y, const float* __restrict__ x,
                                                       float* __restrict__ partial, const ConvShape& cs, int b,
                                                       int co0, int part, int parts)
{
    constexpr int NKD = PD && KD < 0 ? 2 : 1, NKH = PH ? 2 : 1, NT = NKD * NKH;
    static_assert(NT <= 2, "a task holds two taps");
    const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const int D = cs.D, H = cs.H, W = cs.W, Do = cs.Do, Ho = cs.Ho, Wo = cs.Wo;
    const int n_oh = (Ho - PH + 1) / 2, rows = (Do - PD + 1) / 2 * n_oh;
    const int r0 = (int)((long long)rows * part / parts), r1 = (int)((long long)rows * (part + 1) / parts);
    const bool co_lo = co0 + g < cs.C_out, co_hi = co0 + g + 8 < cs.C_out;
    const bool even_ok = g < cs.C_in, odd_ok = g % 4 < cs.C_in;   // B column g: ci = g (even), (g / 4, g % 4) (odd)
    const int odd_shift = g < 4 ? 1 : 0;                          // kw = 0 reads iw = m + 1, kw = 2 reads m
    const size_t plane = (size_t)Do * Ho * Wo;
    const float* gy_lo = grad_y + ((size_t)b * cs.C_out + co0 + g) * plane;
    const float* gy_hi = gy_lo + 8 * plane;
    const float* xb = x + ((size_t)b * cs.C_in + g % 4) * D * H * W;
    float total[NT][2][4] = {};
#pragma unroll 1
    for (int r = r0; r < r1; ++r) {
        const int od = PD + 2 * (r / n_oh), oh = PH + 2 * (r % n_oh);
        const size_t row = ((size_t)od * Ho + oh) * Wo;
        const float* x_row[NT];
#pragma unroll
        for (int i = 0; i < NKD; ++i)
#pragma unroll
            for (int j = 0; j < NKH; ++j) {
                const int kd = KD >= 0 ? KD : PD ? 2 * i : 1, kh = PH ? 2 * j : 1;
                x_row[i * NKH + j] = xb + ((size_t)((od + 1 - kd) / 2) * H + (oh + 1 - kh) / 2) * W;
            }
        float acc[NT][2][4] = {};
#pragma unroll 2
        for (int m0 = 0; m0 < W; m0 += 8) {
            // A: rows g, g + 8 (channels co0 + g, + 8) at depths t, t + 4 (columns m = m0 + t, + 4)
            uint32_t ab[2][4], as[2][4];   // [even, odd][register]
#pragma unroll
            for (int s = 0; s < 2; ++s)
#pragma unroll
                for (int k = 0; k < 2; ++k) {
                    const int m = m0 + t + 4 * k, ow = 2 * m + s;
                    const bool ok = s ? m < W - 1 : m < W;
                    const Split lo = split(ok && co_lo ? __ldg(gy_lo + row + ow) : 0.f);
                    const Split hi = split(ok && co_hi ? __ldg(gy_hi + row + ow) : 0.f);
                    ab[s][2 * k] = lo.big, as[s][2 * k] = lo.small;
                    ab[s][2 * k + 1] = hi.big, as[s][2 * k + 1] = hi.small;
                }
#pragma unroll
            for (int c = 0; c < NT; ++c) {
                Split e[2], o[2];   // B: depths t, t + 4 of column g
#pragma unroll
                for (int k = 0; k < 2; ++k) {
                    const int m = m0 + t + 4 * k;
                    e[k] = split(even_ok && m < W ? __ldg(x_row[c] + m) : 0.f);
                    o[k] = split(odd_ok && m < W - 1 ? __ldg(x_row[c] + m + odd_shift) : 0.f);
                }
                mma(acc[c][0], as[0], e[0].big, e[1].big);
                mma(acc[c][0], ab[0], e[0].small, e[1].small);
                mma(acc[c][0], ab[0], e[0].big, e[1].big);
                mma(acc[c][1], as[1], o[0].big, o[1].big);
                mma(acc[c][1], ab[1], o[0].small, o[1].small);
                mma(acc[c][1], ab[1], o[0].big, o[1].big);
            }
        }
#pragma unroll
        for (int c = 0; c < NT; ++c)
#pragma unroll
            for (int s = 0; s < 2; ++s)
#pragma unroll
                for (int q = 0; q < 4; ++q) total[c][s][q] += acc[c][s][q];
    }
#pragma unroll
    for (int c = 0; c < NT; ++c)
#pragma unroll
        for (int s = 0; s < 2; ++s)
#pragma unroll
            for (int q = 0; q < 4; ++q) partial[((c * 2 + s) * 4 + q) * 32 + lane] = total[c][s][q];
}
// Tasks in the order (output-channel tile, group, sample, part), a warp each.
__global__ void __launch_bounds__(32 * WT_WARPS) grad_weight_convt_tc_kernel(
    const float* __restrict__ grad_y, const float* __restrict__ x, float* __restrict__ partials, const ConvShape cs,
    int B, int parts, long long tasks)
{
    const long long task = (long long)blockIdx.x * WT_WARPS + threadIdx.x / 32;
    if (task >= tasks) return;
    const int part = (int)(task % parts), b = (int)(task / parts % B), group = (int)(task / parts / B % WT_GROUPS);
    const int co0 = (int)(task / parts / B / WT_GROUPS) * 16;
    float* partial = partials + task * WT_PARTIAL;
    switch (group) {
        case 0: grad_weight_convt_task<0, 0, -1>(grad_y, x, partial, cs, b, co0, part, parts); break;
        case 1: grad_weight_convt_task<0, 1, -1>(grad_y, x, partial, cs, b, co0, part, parts); break;
        case 2: grad_weight_convt_task<1, 0, -1>(grad_y, x, partial, cs, b, co0, part, parts); break;
        case 3: grad_weight_convt_task<1, 1, 0>(grad_y, x, partial, cs, b, co0, part, parts); break;
        default: grad_weight_convt_task<1, 1, 2>(grad_y, x, partial, cs, b, co0, part, parts); break;
    }
}

// The tuned dL/dW from its partials, a warp per weight (ci, c, kd, kh, kw): lane l adds the terms of the weight's
// tasks (sample, part) l, l + 32, ... in order in double, then a fixed shuffle tree.
__global__ void finish_weight_grad_convt_kernel(const float* __restrict__ partials, float* __restrict__ grad_weight,
                                                const ConvShape cs, int B, int parts) {
    const int i = (int)((blockIdx.x * (long long)blockDim.x + threadIdx.x) / 32), lane = threadIdx.x % 32;
    if (i >= cs.C_in * cs.C_out * TAPS) return;
    const int kw = i % K, kh = i / K % K, kd = i / (K * K) % K, c = i / TAPS % cs.C_out, ci = i / TAPS / cs.C_out;
    const bool pd = kd != 1, ph = kh != 1;
    const int group = pd && ph ? 3 + kd / 2 : 2 * pd + ph;
    const int tap = ph ? kh / 2 : pd ? kd / 2 : 0;   // the group's taps: (kd or kh) 0 then 2
    const int step = kw != 1, n = ci + (kw == 2 ? 4 : 0), r = c % 16;
    const int at = ((tap * 2 + step) * 4 + r / 8 * 2 + n % 2) * 32 + r % 8 * 4 + n / 2;
    const long long terms = (long long)B * parts, first = ((long long)(c / 16) * WT_GROUPS + group) * terms;
    double v = 0.0;
    for (long long j = lane; j < terms; j += 32) v += partials[(first + j) * WT_PARTIAL + at];
#pragma unroll
    for (int off = 16; off > 0; off /= 2) v += __shfl_xor_sync(0xffffffffu, v, off);
    if (lane == 0) grad_weight[i] = (float)v;
}

// dL/dbias from the WRITE sweep's per-(sample, channel, chunk) sums of dL/dy, in the bias's dtype: a block per
// channel, thread j adding terms j, j + 256, ... in order, then a fixed tree.
constexpr int BG_THREADS = 256;
template <typename T>
__global__ void __launch_bounds__(BG_THREADS) bias_grad_convt_kernel(const double* __restrict__ partials,
                                                                     T* __restrict__ grad_bias, int B, int C_out,
                                                                     int chunks) {
    __shared__ double red[BG_THREADS];
    const int c = blockIdx.x;
    const long long n = (long long)B * chunks;
    double v = 0.0;
    for (long long i = threadIdx.x; i < n; i += BG_THREADS)
        v += partials[(((i / chunks) * C_out + c) * chunks + i % chunks) * 2];
    red[threadIdx.x] = v;
    __syncthreads();
    for (int half = BG_THREADS / 2; half > 0; half /= 2) {
        if (threadIdx.x < half) red[threadIdx.x] += red[threadIdx.x + half];
        __syncthreads();
    }
    if (threadIdx.x == 0) grad_bias[c] = from_float<T>((float)red[0]);
}

// Doubles: the tuned dL/dW's partials (floats, two a double).
long long conv_grads_workspace(const Plan& plan, long long B, const ConvShape& cs) {
    return plan.grads == ConvGrads::TUNED ? wt_geometry(B, cs).tasks * WT_PARTIAL / 2 : 0;
}

// The conv's gradients (grad_x, grad_weight null: not wanted, or PyTorch's: every configuration but the tuned one);
// grad_bias (the conv's dtype code) from the partials the WRITE sweep left in chain_backward_launch's workspace.
// The tuned path's kernels stay float32-level under allow_tf32 too (dL/dx in FP32, dL/dW in split TF32).
cudaError_t conv_grads_launch(const Plan& plan, const float* grad_y, const float* x, const float* weight,
                              const double* chain_work, double* work, float* grad_x, float* grad_weight,
                              void* grad_bias, int conv_type, int B, const ConvShape& cs, int sms,
                              cudaStream_t stream) {
    cudaError_t err;
    if (grad_bias != nullptr) {
        const int chunks = sweep_chunks(plan, B, cs);
        err = with_type(conv_type, [&](auto t) {
            using T = decltype(t);
            bias_grad_convt_kernel<T><<<cs.C_out, BG_THREADS, 0, stream>>>(chain_work, static_cast<T*>(grad_bias), B,
                                                                           cs.C_out, chunks);
            return cudaGetLastError();
        });
        if (err != cudaSuccess) return err;
    }
    if (plan.grads != ConvGrads::TUNED) return cudaSuccess;
    if (grad_x != nullptr) {
        err = with_ci_rows(B, cs, sms, [&](auto ci, auto rows) {
            constexpr int CI = decltype(ci)::value, R = decltype(rows)::value;
            const long long blocks = (long long)B * cs.D * ((cs.H + R * GX_WARPS - 1) / (R * GX_WARPS)) * ((cs.W + 31) / 32);
            grad_input_convt_tuned_kernel<CI, R><<<(unsigned)blocks, GX_THREADS, 0, stream>>>(grad_y, weight, grad_x, cs);
            return cudaGetLastError();
        });
        if (err != cudaSuccess) return err;
    }
    if (grad_weight == nullptr) return cudaSuccess;
    const WtGeometry wg = wt_geometry(B, cs);
    float* partials = reinterpret_cast<float*>(work);
    grad_weight_convt_tc_kernel<<<(unsigned)((wg.tasks + WT_WARPS - 1) / WT_WARPS), 32 * WT_WARPS, 0, stream>>>(
        grad_y, x, partials, cs, B, wg.parts, wg.tasks);
    if ((err = cudaGetLastError()) != cudaSuccess) return err;
    const long long weights = (long long)cs.C_in * cs.C_out * TAPS;
    finish_weight_grad_convt_kernel<<<(unsigned)((weights * 32 + 255) / 256), 256, 0, stream>>>(partials, grad_weight,
                                                                                              cs, B, wg.parts);
    return cudaGetLastError();
}

// The launch plan for a configuration: each stage's kernel and the rule that picked it, from the Plan the launchers
// read (convt_swish_gn_hardswish_make_plan; the GroupNorm's kernels follow the dtypes). conv_type, norm_type: the
// dtype codes; tf32: allow_tf32 for convs. One line a stage, "stage: kernel; rule".
std::string convt_swish_gn_hardswish_plan(const ConvShape& cs, long long B, int groups, int conv_type, int norm_type,
                                          bool tf32) {
    const Plan plan = convt_swish_gn_hardswish_make_plan(cs, B, groups, conv_type != 0, tf32, 0);
    const bool tuned = plan.path == Path::TUNED, half_norm = norm_type != 0;
    std::string s;
    if (tuned)
        s += std::string("forward: convt_swish_gn_kernel") + (half_norm ? " (RAW: Swish written, rounded)" : "") +
             "; tuned (kernel 3, stride 2, padding 1 on every axis, C_in <= 4, >= 512 input positions a sample): the "
             "parity split, one "
             "persistent kernel\n";
    else
        s += std::string("forward conv: PyTorch's convolution (at::_convolution, transposed); PyTorch's conv path: ") +
             "outside the tuned envelope (kernel 3, stride 2, padding 1, C_in <= 4, >= 512 input positions a sample)\n" +
             (conv_type != 0 ? "forward Swish: swish_half_kernel; half precision: Swish rounded as PyTorch's\n" : "");
    if (half_norm)
        s += "forward GroupNorm: group_norm_hardswish_kernel; half-precision output: PyTorch's order of the "
             "statistics\n";
    else if (!tuned)
        s += (plan.gn_threads > 0 ? "forward GroupNorm: gn_fused_kernel; at least " +
                                        std::to_string(GN_FUSED_MIN_GROUPS) + " (sample, group)s of at most " +
                                        std::to_string(GN_FUSED_MAX) + " elements: a block each, one read, "
                                  : std::string("forward GroupNorm: gn_partials_kernel + gn_finalize_kernel + "
                                                "gn_apply_kernel; a (sample, group) in pieces, ")) +
             (conv_type == 0 ? "float32: Swish on the fly over PyTorch's conv output\n"
                             : "autocast: GroupNorm in float32 over the half Swish values\n");
    else
        s += "forward GroupNorm: in convt_swish_gn_kernel (phase 2); tuned, float32 output\n";
    s += tuned ? "backward sweeps: convt_backward_sweep_kernel (two sweeps) + chain_sums_kernel + "
                 "gn_param_grad_kernel; tuned, y recomputed in each sweep as the forward computes it\n"
               : conv_type == 0 ? "backward sweeps: chain_backward_kernel (two sweeps) + chain_sums_kernel + "
                                  "gn_param_grad_kernel; over the forward's saved conv output\n"
                                : "backward sweeps: chain_backward_kernel (two sweeps) + chain_sums_kernel + "
                                  "gn_param_grad_kernel; half precision: over y recomputed unrounded by PyTorch's "
                                  "conv on float copies\n";
    s += "backward dL/dbias: bias_grad_convt_kernel; always\n";
    const std::string torch_bwd = "PyTorch's convolution backward (at::convolution_backward); PyTorch's conv path";
    switch (plan.grads) {
    case ConvGrads::TUNED:
        s += "backward dL/dx: grad_input_convt_tuned_kernel; tuned\n";
        s += "backward dL/dW: grad_weight_convt_tc_kernel + finish_weight_grad_convt_kernel; tuned\n";
        break;
    case ConvGrads::TORCH:
        s += "backward dL/dx: " + torch_bwd + "\nbackward dL/dW: " + torch_bwd + "\n";
        break;
    default:
        s += "backward dL/dx: " + torch_bwd + ", half precision: on dL/dy rounded to the dtype\n";
        s += plan.grads == ConvGrads::TORCH_HALF_SPLIT
                 ? "backward dL/dW: split_tf32_kernel + PyTorch's convolution backward (at::convolution_backward) "
                   "twice; PyTorch's conv path, half precision under allow_tf32: on float dL/dy split in two TF32 "
                   "parts (float32-level)\n"
                 : "backward dL/dW: " + torch_bwd + ", half precision: on float dL/dy in float32\n";
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

long long convt_data_bytes(long long B, int C_in, int C_out, int D, int H, int W);
long long gn_scratch_bytes(long long B, int C_out, int groups, long long vol);
long long convt_items(long long B, int C_in, int C_out, int D, int H, int W);
bool convt_tuned(const ConvShape& cs);
Plan convt_swish_gn_hardswish_make_plan(const ConvShape& cs, long long B, int groups, bool half, bool tf32,
                                        int x_misalign);
cudaError_t convt_swish_gn_hardswish_launch(
    const float* x, const float* weight, const float* bias, const float* gn_weight, const float* gn_bias,
    void* data, int* counters, int* done, int* ready, void* out, double* stats, int conv_type,
    int norm_type, int B, const ConvShape& cs, int groups, double eps, bool tf32, bool vec, cudaStream_t stream);
cudaError_t torch_conv_chain_launch(const Plan& plan, const void* y, void* out, const float* gn_weight,
                                    const float* gn_bias, void* data, double* stats, int conv_type, int norm_type,
                                    int B, const ConvShape& cs, int groups, double eps, cudaStream_t stream);
long long chain_backward_workspace(const Plan& plan, long long B, const ConvShape& cs);
long long conv_grads_workspace(const Plan& plan, long long B, const ConvShape& cs);
cudaError_t conv_grads_launch(const Plan& plan, const float* grad_y, const float* x, const float* weight,
                              const double* chain_work, double* work, float* grad_x, float* grad_weight,
                              void* grad_bias, int conv_type, int B, const ConvShape& cs, int sms,
                              cudaStream_t stream);
cudaError_t chain_backward_launch(const Plan& plan, const float* x, const float* weight, const float* bias,
                                  const float* gn_weight, const float* gn_bias, const double* stats,
                                  const float* y_saved, const void* grad_out, double* work, void* grad_y,
                                  void* grad_gn_weight, void* grad_gn_bias, int conv_type, int norm_type, int B,
                                  const ConvShape& cs, int groups, bool tf32, int sms, cudaStream_t stream);
cudaError_t convert_launch(const void* in, int in_type, void* out, int out_type, long long n, cudaStream_t stream);
cudaError_t split_tf32_launch(const float* v, float* hi, float* lo, long long n, cudaStream_t stream);
std::string convt_swish_gn_hardswish_plan(const ConvShape& cs, long long B, int groups, int conv_type, int norm_type,
                                          bool tf32);



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

// Dtypes as the reference takes them: the conv's input and parameters of one floating dtype (float32,
// float16 or bfloat16), the GroupNorm's parameters the same or float32 (torch.autocast's GroupNorm).
static void check_dtypes(const Tensor& x, const Tensor& weight, const OptTensor& bias, const Tensor& gn_weight,
                         const Tensor& gn_bias) {
    TORCH_CHECK_VALUE(takes_dtype(x), "convt_swish_gn_hardswish: input must be float32, float16 or bfloat16, got ",
                      c10::toString(x.scalar_type()));
    TORCH_CHECK_VALUE(weight.scalar_type() == x.scalar_type() &&
                      (!bias.has_value() || bias->scalar_type() == x.scalar_type()),
                      "convt_swish_gn_hardswish: input is ", c10::toString(x.scalar_type()), " but the conv's "
                      "parameters are ", c10::toString(weight.scalar_type()), ": convert one to the other "
                      "(model.to(dtype)) or run under torch.autocast");
    TORCH_CHECK_VALUE(gn_weight.scalar_type() == gn_bias.scalar_type() &&
                      (gn_weight.scalar_type() == x.scalar_type() || gn_weight.scalar_type() == at::kFloat),
                      "convt_swish_gn_hardswish: the GroupNorm's parameters must be float32 or the input's dtype");
}

// The tuned kernel's workspace, allocated on each call (so that a CUDA graph pool, as torch.compile's
// reduce-overhead mode keeps one, sees every allocation; nothing outlives the call but its outputs).
// Layout: the ticket counter, done and ready (B ints each), zeroed on the stream before the
// launch; from a 16-byte boundary, data_bytes of partials and norm, which the kernel writes before reading.
struct Workspace {
    Tensor buf;
    int64_t B = 0;
    static int64_t counter_bytes(int64_t B) { return ((1 + 2 * B) * 4 + 15) / 16 * 16; }
    int* counters() const { return static_cast<int*>(buf.data_ptr()); }
    int* done() const { return counters() + 1; }
    int* ready() const { return counters() + 1 + B; }
    void* data() const { return static_cast<char*>(buf.data_ptr()) + counter_bytes(B); }
};

static Workspace workspace_for(const Tensor& like, cudaStream_t stream, int64_t B, int64_t data_bytes) {
    Workspace ws;
    ws.B = B;
    ws.buf = at::empty({Workspace::counter_bytes(B) + data_bytes}, like.options().dtype(at::kByte));
    const cudaError_t err = cudaMemsetAsync(ws.buf.data_ptr(), 0, Workspace::counter_bytes(B), stream);
    TORCH_CHECK(err == cudaSuccess, "convt_swish_gn_hardswish: clearing the workspace failed: ", cudaGetErrorString(err));
    return ws;
}

// The transposed conv's shape for input x and weight w (C_in, C_out, kd, kh, kw), with per-axis stride and padding
// (no output padding, dilation 1, as the reference's ConvTranspose3d): output size (in - 1) s - 2 p + k.
static ConvShape conv_shape(const Tensor& x, const Tensor& w, at::IntArrayRef stride, at::IntArrayRef padding) {
    TORCH_CHECK_VALUE(stride.size() == 3 && padding.size() == 3, "convt_swish_gn_hardswish: stride and padding "
                      "take 3 values");
    ConvShape cs = {};
    int64_t in[3], out[3];
    for (int a = 0; a < 3; ++a) {
        TORCH_CHECK_VALUE(stride[a] >= 1 && padding[a] >= 0, "convt_swish_gn_hardswish: stride must be >= 1 and "
                          "padding >= 0, got ", stride, " and ", padding);
        in[a] = x.size(2 + a);
        out[a] = (in[a] - 1) * stride[a] - 2 * padding[a] + w.size(2 + a);
        TORCH_CHECK_VALUE(out[a] >= 1, "convt_swish_gn_hardswish: the output would be empty along axis ", a, " (input ",
                          in[a], ", stride ", stride[a], ", padding ", padding[a], ", kernel ", w.size(2 + a), ")");
        cs.k[a] = (int)w.size(2 + a); cs.s[a] = (int)stride[a]; cs.p[a] = (int)padding[a];
    }
    TORCH_CHECK(out[0] * out[1] * out[2] < (int64_t(1) << 31), "convt_swish_gn_hardswish: one output channel must "
                "stay under 2^31 elements");
    cs.C_in = (int)x.size(1); cs.C_out = (int)w.size(1);
    cs.D = (int)in[0]; cs.H = (int)in[1]; cs.W = (int)in[2];
    cs.Do = (int)out[0]; cs.Ho = (int)out[1]; cs.Wo = (int)out[2];
    return cs;
}

// The operators (ModelNew checks its input first, with clearer messages): model (differentiable: the
// Autograd kernel at the end), and the forward and backward it is made of:
//   forward(x, weight, bias, gn_weight, gn_bias, stride, padding, groups, eps) -> (out (B, C_out, Do, Ho, Wo),
//     stats (B, groups, 2) float64: each group's mean and 1/std of the Swish output, y: PyTorch's conv output on
//     its path in float32 (B, C_out, Do, Ho, Wo), kept for the backward as eager keeps it; else empty);
//     `bias` may be None;
//   backward(grad_out, x, weight, bias, gn_weight, gn_bias, stats, y, stride, padding, conv_mask) -> the gradients
//     of x, weight, bias (where conv_mask asks), gn_weight, gn_bias.
// Shapes and devices are checked by ModelNew; these checks guard direct calls.
// Whether an input takes the tuned path (else PyTorch's conv path): convt_tuned of its shape, read from the
// weight, the input's spatial size, stride and padding (a Meta kernel with symbolic sizes specialises those).
static bool tuned_path(const Tensor& x, const Tensor& w, at::IntArrayRef stride, at::IntArrayRef padding) {
    ConvShape cs = {};
    cs.C_in = (int)w.sym_size(0).guard_int(__FILE__, __LINE__);
    cs.C_out = (int)w.sym_size(1).guard_int(__FILE__, __LINE__);
    int in[3];
    for (int a = 0; a < 3; ++a) {
        in[a] = (int)x.sym_size(2 + a).guard_int(__FILE__, __LINE__);
        cs.k[a] = (int)w.sym_size(2 + a).guard_int(__FILE__, __LINE__);
        cs.s[a] = (int)stride[a];
        cs.p[a] = (int)padding[a];
    }
    cs.D = in[0]; cs.H = in[1]; cs.W = in[2];
    return convt_tuned(cs);
}
// The plan of a call on x (contiguous; half precision's tuned kernels read a float copy, aligned).
static Plan plan_of(const Tensor& x, const ConvShape& cs, int64_t groups, bool tf32) {
    const bool half = x.scalar_type() != at::kFloat;
    return convt_swish_gn_hardswish_make_plan(cs, x.size(0), (int)groups, half, tf32,
                                              half ? 0 : (int)(reinterpret_cast<uintptr_t>(x.data_ptr()) % 16));
}
std::tuple<Tensor, Tensor, Tensor> forward_cuda(const Tensor& input, const Tensor& weight, const OptTensor& bias,
                                        const Tensor& gn_weight, const Tensor& gn_bias, at::IntArrayRef stride,
                                        at::IntArrayRef padding, int64_t groups, double eps) {
    TORCH_CHECK(input.is_cuda() && input.dim() == 5, "convt_swish_gn_hardswish: input must be a 5-D CUDA tensor");
    check_dtypes(input, weight, bias, gn_weight, gn_bias);
    TORCH_CHECK(input.size(1) == weight.size(0), "convt_swish_gn_hardswish: input channels do not match the weight");
    TORCH_CHECK(weight.device() == input.device() && gn_weight.device() == input.device() &&
                gn_bias.device() == input.device() && (!bias.has_value() || bias->device() == input.device()),
                "convt_swish_gn_hardswish: the parameters must be on the input's device");
    const c10::cuda::CUDAGuard guard(input.device());
    auto x = input.contiguous();
    auto w = weight.contiguous();
    const ConvShape cs = conv_shape(x, w, stride, padding);
    const int64_t B = x.size(0);
    // at::empty: torch::empty's autograd wrapping cost some 3 us of host time per call (0.996 and 0.995)
    auto out = at::empty({B, cs.C_out, cs.Do, cs.Ho, cs.Wo}, gn_weight.options());
    auto stats = at::empty({B, groups, 2}, x.options().dtype(torch::kFloat64));
    const bool half = x.scalar_type() != at::kFloat;
    const Plan plan = plan_of(x, cs, groups, allow_tf32_conv());
    const bool tuned = plan.path == Path::TUNED;
    const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
    if (!tuned) {   // PyTorch's conv path: its transposed conv (bias included), then the chain over its output
        auto y = out.numel() == 0 ? at::empty(out.sizes(), x.options())
                                  : torch_conv(x, w, bias, stride, padding, true, {0, 0, 0});
        if (out.numel() == 0) return {out, stats, y};
        const auto scratch = at::empty({gn_scratch_bytes(B, cs.C_out, groups, (int64_t)cs.Do * cs.Ho * cs.Wo)},
                                       x.options().dtype(at::kByte));
        const auto gwf = converted(gn_weight, at::kFloat), gbf = converted(gn_bias, at::kFloat);
        const cudaError_t err = torch_conv_chain_launch(plan, y.data_ptr(), out.data_ptr(), gwf.data_ptr<float>(),
                                                        gbf.data_ptr<float>(), scratch.data_ptr(),
                                                        stats.data_ptr<double>(), dtype_code(x), dtype_code(gn_weight),
                                                        B, cs, groups, eps, stream);
        TORCH_CHECK(err == cudaSuccess, "convt_swish_gn_hardswish: kernel launch failed: ", cudaGetErrorString(err));
        // kept for the backward in float32; half precision: not kept (the backward recomputes it unrounded)
        return {out, stats, x.scalar_type() == at::kFloat ? y : at::empty({0}, x.options())};
    }
    auto y = at::empty({0}, x.options());
    if (out.numel() == 0) return {out, stats, y};
    TORCH_CHECK(!tuned || convt_items(B, cs.C_in, cs.C_out, cs.D, cs.H, cs.W) < (int64_t(1) << 30),
                "convt_swish_gn_hardswish: the input needs 2^30 or more work items; split the batch");
    const Workspace ws = workspace_for(x, stream, B, convt_data_bytes(B, cs.C_in, cs.C_out, cs.D, cs.H, cs.W));
    // Half precision: the inputs as floats (exact), the roundings in the kernel.
    const auto xf = converted(x, at::kFloat), wf = converted(w, at::kFloat);
    const auto gwf = converted(gn_weight, at::kFloat), gbf = converted(gn_bias, at::kFloat);
    const auto bf = converted(bias, at::kFloat);
    const cudaError_t err = convt_swish_gn_hardswish_launch(
        xf.data_ptr<float>(), wf.data_ptr<float>(), bf.has_value() ? bf->data_ptr<float>() : nullptr,
        gwf.data_ptr<float>(), gbf.data_ptr<float>(), ws.data(), ws.counters(), ws.done(), ws.ready(), out.data_ptr(),
        stats.data_ptr<double>(),
        dtype_code(x), dtype_code(gn_weight), B, cs, groups, eps, !half && allow_tf32_conv(), plan.vec, stream);
    TORCH_CHECK(err == cudaSuccess, "convt_swish_gn_hardswish: kernel launch failed: ", cudaGetErrorString(err));
    return {out, stats, y};
}

// The tuned backward's conv recompute follows the flag as it stands when the backward runs, as PyTorch's
// convolution backward does. PyTorch's conv path: the sweeps over the forward's y, then PyTorch's convolution
// backward of dL/dy for dL/dx and dL/dW, in float32 (half precision: on float dL/dy and float copies of x and the
// weight, exact; measured with dL/dy rounded to bf16 first, as eager's, the gradients of 6 of 14 configurations
// fell farther from float64 than PyTorch's own).
std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor> backward_cuda(
        const Tensor& grad_out, const Tensor& input, const Tensor& weight, const OptTensor& bias,
        const Tensor& gn_weight, const Tensor& gn_bias, const Tensor& stats, const Tensor& y, at::IntArrayRef stride,
        at::IntArrayRef padding, Mask conv_mask) {
    const c10::cuda::CUDAGuard guard(input.device());
    auto x = input.contiguous();
    auto w = weight.contiguous();
    const ConvShape cs = conv_shape(x, w, stride, padding);
    const int64_t B = x.size(0), C_out = cs.C_out, groups = stats.size(1);
    const bool tf32 = allow_tf32_conv(), half = x.scalar_type() != at::kFloat;
    const Plan plan = plan_of(x, cs, groups, tf32);
    TORCH_CHECK(cs.k[0] * cs.k[1] * cs.k[2] <= 2048, "convt_swish_gn_hardswish: the backward takes kernels of at most "
                "2048 taps");
    // dL/dy in float32; the conv's gradients in float32, rounded to their tensors' dtypes; the GroupNorm's in its own.
    const auto f32 = x.options().dtype(at::kFloat);
    auto grad_y = at::empty({B, C_out, cs.Do, cs.Ho, cs.Wo}, f32);
    const bool any = grad_y.numel() > 0;   // else every gradient is zero (or empty)
    const auto made = [any](at::IntArrayRef sizes, const at::TensorOptions& o) {   // any: every entry written
        return any ? at::empty(sizes, o) : at::zeros(sizes, o);
    };
    auto grad_gn_weight = made({C_out}, gn_weight.options());
    auto grad_gn_bias = made({C_out}, gn_weight.options());
    const bool tuned = plan.path == Path::TUNED;
    auto grad_x = conv_mask[0] && tuned ? made(x.sizes(), f32) : Tensor();
    auto grad_w = conv_mask[1] && tuned ? made(w.sizes(), f32) : Tensor();
    auto grad_b = conv_mask[2] && bias.has_value() ? made({C_out}, bias->options()) : Tensor();
    TORCH_CHECK(grad_out.scalar_type() == gn_weight.scalar_type(), "convt_swish_gn_hardswish: the output's gradient "
                "must have the output's dtype");
    if (any) {
        const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
        int sms = 0;
        TORCH_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, x.get_device()) == cudaSuccess,
                    "convt_swish_gn_hardswish: the device query failed");
        auto work = at::empty({chain_backward_workspace(plan, B, cs)}, x.options().dtype(torch::kFloat64));
        const auto xf = converted(x, at::kFloat), wf = converted(w, at::kFloat);
    const auto gwf = converted(gn_weight, at::kFloat), gbf = converted(gn_bias, at::kFloat);
        const auto bf = converted(bias, at::kFloat);
        // PyTorch's conv path: y as the forward kept it (float32), or in half precision recomputed unrounded by
        // PyTorch's conv on the float copies (half values exact; with y rounded to bf16, as the forward's, 5 of 14
        // configurations' gradients fell farther from float64 than PyTorch's own).
        const auto yf = tuned ? Tensor()
                              : x.scalar_type() == at::kFloat ? y
                                                              : torch_conv(xf, wf, bf, stride, padding, true, {0, 0, 0});
        cudaError_t err = chain_backward_launch(
            plan, xf.data_ptr<float>(), wf.data_ptr<float>(), bf.has_value() ? bf->data_ptr<float>() : nullptr,
            gwf.data_ptr<float>(), gbf.data_ptr<float>(), stats.data_ptr<double>(),
            tuned ? nullptr : yf.data_ptr<float>(), grad_out.contiguous().data_ptr(), work.data_ptr<double>(),
            grad_y.data_ptr(), grad_gn_weight.data_ptr(), grad_gn_bias.data_ptr(), dtype_code(x),
            dtype_code(gn_weight), B, cs, groups, x.scalar_type() == at::kFloat && tf32, sms, stream);
        TORCH_CHECK(err == cudaSuccess, "convt_swish_gn_hardswish: backward launch failed: ", cudaGetErrorString(err));
        auto conv_work = at::empty({conv_grads_workspace(plan, B, cs)}, x.options().dtype(torch::kFloat64));
        err = conv_grads_launch(plan, grad_y.data_ptr<float>(), xf.data_ptr<float>(), wf.data_ptr<float>(),
                                work.data_ptr<double>(), conv_work.data_ptr<double>(),
                                grad_x.defined() ? grad_x.data_ptr<float>() : nullptr,
                                grad_w.defined() ? grad_w.data_ptr<float>() : nullptr,
                                grad_b.defined() ? grad_b.data_ptr() : nullptr, dtype_code(x), B, cs, sms, stream);
        TORCH_CHECK(err == cudaSuccess, "convt_swish_gn_hardswish: backward launch failed: ", cudaGetErrorString(err));
        if (plan.grads == ConvGrads::TORCH && (conv_mask[0] || conv_mask[1])) {   // as eager's
            auto r = torch_conv_backward(grad_y, x, w, stride, padding, true, {0, 0, 0},
                                         {conv_mask[0], conv_mask[1], false});
            grad_x = std::get<0>(r);
            grad_w = std::get<1>(r);
        } else if (plan.grads != ConvGrads::TUNED && (conv_mask[0] || conv_mask[1])) {
            // Half precision. dL/dx as eager's: on dL/dy rounded to the dtype (eager's is a tensor of it), x and W as
            // stored. dL/dW float32-level: on float dL/dy and float copies (half values exact), split in two TF32
            // parts (split_tf32_kernel) under allow_tf32; on the rounded dL/dy it fell farther from float64 than
            // eager's (bf16, kernel 1: 8.8e-3 against 7.2e-3).
            if (conv_mask[0])
                grad_x = std::get<0>(torch_conv_backward(grad_y.to(x.scalar_type()), x, w, stride, padding, true,
                                                         {0, 0, 0}, {true, false, false}));
            if (conv_mask[1] && plan.grads == ConvGrads::TORCH_HALF) {
                grad_w = std::get<1>(torch_conv_backward(grad_y, xf, wf, stride, padding, true, {0, 0, 0},
                                                         {false, true, false}));
            } else if (conv_mask[1]) {
                auto hi = at::empty_like(grad_y), lo = at::empty_like(grad_y);
                err = split_tf32_launch(grad_y.data_ptr<float>(), hi.data_ptr<float>(), lo.data_ptr<float>(),
                                        grad_y.numel(), stream);
                TORCH_CHECK(err == cudaSuccess, "convt_swish_gn_hardswish: backward launch failed: ",
                            cudaGetErrorString(err));
                const Mask mask{false, true, false};
                grad_w = std::get<1>(torch_conv_backward(hi, xf, wf, stride, padding, true, {0, 0, 0}, mask))
                             .add_(std::get<1>(torch_conv_backward(lo, xf, wf, stride, padding, true, {0, 0, 0}, mask)));
            }
        }
    } else if (!tuned) {
        grad_x = conv_mask[0] ? at::zeros_like(x) : Tensor();
        grad_w = conv_mask[1] ? at::zeros_like(w) : Tensor();
    }
    return {converted(grad_x, x.scalar_type()), converted(grad_w, w.scalar_type()), grad_b, grad_gn_weight,
            grad_gn_bias};
}

// Meta: shapes and dtypes only, in symbolic sizes (torch.compile with dynamic shapes).
std::tuple<Tensor, Tensor, Tensor> forward_meta(const Tensor& x, const Tensor& weight, const OptTensor& bias,
                                                const Tensor& gn_weight, const Tensor& gn_bias, at::IntArrayRef stride,
                                                at::IntArrayRef padding, int64_t groups, double eps) {
    std::vector<c10::SymInt> shape{x.sym_size(0), weight.sym_size(1)};
    for (int d = 2; d < 5; ++d) shape.push_back((x.sym_size(d) - 1) * stride[d - 2] - 2 * padding[d - 2] + weight.sym_size(d));
    const bool kept = x.scalar_type() == at::kFloat && !tuned_path(x, weight, stride, padding);   // as forward_cuda
    const std::vector<c10::SymInt> y_shape = kept ? shape : std::vector<c10::SymInt>{0};
    return {at::empty_symint(shape, gn_weight.options()),
            at::empty_symint({x.sym_size(0), groups, 2}, x.options().dtype(torch::kFloat64)),
            at::empty_symint(y_shape, x.options())};
}

std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor> backward_meta(
        const Tensor& grad_out, const Tensor& x, const Tensor& weight, const OptTensor& bias,
        const Tensor& gn_weight, const Tensor& gn_bias, const Tensor& stats, const Tensor& y, at::IntArrayRef stride,
        at::IntArrayRef padding, Mask conv_mask) {
    return {conv_mask[0] ? at::empty_like(x) : Tensor(), conv_mask[1] ? at::empty_like(weight) : Tensor(),
            conv_mask[2] ? at::empty_symint({weight.sym_size(1)}, weight.options()) : Tensor(), at::empty_like(gn_weight),
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

// backward's Autograd kernel: the gradients, each refusing to be differentiated again (refuse_double_backward).
std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor> backward_autograd(
        const Tensor& grad_out, const Tensor& x, const Tensor& weight, const OptTensor& bias,
        const Tensor& gn_weight, const Tensor& gn_bias, const Tensor& stats, const Tensor& y, at::IntArrayRef stride,
        at::IntArrayRef padding, Mask conv_mask) {
    auto r = [&] {
        at::AutoDispatchBelowADInplaceOrView below_autograd;
        return backward_op().call(grad_out, x, weight, bias, gn_weight, gn_bias, stats, y, stride, padding, conv_mask);
    }();
    refuse_double_backward("convtranspose3d_swish_groupnorm_hardswish", {grad_out, x, weight, bias.has_value() ? *bias : Tensor(), gn_weight, gn_bias},
                           {&std::get<0>(r), &std::get<1>(r), &std::get<2>(r), &std::get<3>(r), &std::get<4>(r)});
    return r;
}

// model without autograd (inference tensors, no gradient wanted): the forward's output.
Tensor model_plain(const Tensor& x, const Tensor& weight, const OptTensor& bias, const Tensor& gn_weight,
                   const Tensor& gn_bias, at::IntArrayRef stride, at::IntArrayRef padding, int64_t groups, double eps) {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return std::get<0>(forward_op().call(x, weight, bias, gn_weight, gn_bias, stride, padding, groups, eps));
}

// model's Autograd kernel; the backward operator does the rest. Saved for the backward (each a graph input or
// an output of the forward operator, so that CUDA graph pools track them): x, weight, bias (undefined if None),
// gn_weight, gn_bias (the inputs as given); stats (B, groups, 2) float64, each group's mean and 1/std of the
// Swish output; y, PyTorch's conv output on its path in float32 (empty on the tuned path, whose backward recomputes
// the transposed conv, and in half precision, where the backward recomputes it unrounded).
struct Model : torch::autograd::Function<Model> {
    static Tensor forward(torch::autograd::AutogradContext* ctx, const Tensor& x, const Tensor& weight,
                          const OptTensor& bias, const Tensor& gn_weight, const Tensor& gn_bias, at::IntArrayRef stride,
                          at::IntArrayRef padding, int64_t groups, double eps) {
        at::AutoDispatchBelowADInplaceOrView below_autograd;
        auto r = forward_op().call(x, weight, bias, gn_weight, gn_bias, stride, padding, groups, eps);
        ctx->saved_data["stride"] = stride.vec();
        ctx->saved_data["padding"] = padding.vec();
        const bool has_bias = bias.has_value() && bias->defined();
        ctx->save_for_backward({x, weight, has_bias ? *bias : Tensor(), gn_weight, gn_bias, std::get<1>(r),
                                std::get<2>(r)});
        ctx->saved_data["mask"] = c10::List<bool>({x.requires_grad(), weight.requires_grad(),
                                                   has_bias && bias->requires_grad()});
        return std::get<0>(r);
    }

    static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                   torch::autograd::variable_list grads) {
        const auto s = ctx->get_saved_variables();
        const auto m = ctx->saved_data["mask"].toBoolList();
        const auto stride = ctx->saved_data["stride"].toIntVector(), padding = ctx->saved_data["padding"].toIntVector();
        auto r = backward_op().call(grads[0], s[0], s[1], s[2].defined() ? OptTensor(s[2]) : OptTensor(), s[3], s[4],
                                    s[5], s[6], stride, padding, Mask{m[0], m[1], m[2]});
        return {std::get<0>(r), std::get<1>(r), std::get<2>(r), std::get<3>(r), std::get<4>(r), Tensor(), Tensor(),
                Tensor(), Tensor()};
    }
};

Tensor model_autograd(const Tensor& x, const Tensor& weight, const OptTensor& bias, const Tensor& gn_weight,
                      const Tensor& gn_bias, at::IntArrayRef stride, at::IntArrayRef padding, int64_t groups,
                      double eps) {
    // Function::apply costs some 13 us of host time per call: only where a gradient is wanted.
    const bool wanted = at::GradMode::is_enabled() && (x.requires_grad() || weight.requires_grad() || (bias.has_value() && bias->requires_grad()) ||
                           gn_weight.requires_grad() || gn_bias.requires_grad());
    if (!wanted) return model_plain(x, weight, bias, gn_weight, gn_bias, stride, padding, groups, eps);
    return Model::apply(x, weight, bias, gn_weight, gn_bias, stride, padding, groups, eps);
}

static auto& model_op() {
    static auto op = c10::Dispatcher::singleton().findSchemaOrThrow(OP("model"), "").typed<decltype(model_plain)>();
    return op;
}

// model's Autocast kernel: as torch.autocast runs the reference, the transposed conv in autocast's dtype
// (input and conv parameters cast) and Swish in it too (sigmoid and the product follow their input's dtype),
// GroupNorm and HardSwish in float32 (GroupNorm is on autocast's float32 list).
Tensor model_autocast(const Tensor& x, const Tensor& weight, const OptTensor& bias, const Tensor& gn_weight,
                      const Tensor& gn_bias, at::IntArrayRef stride, at::IntArrayRef padding, int64_t groups,
                      double eps) {
    c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::DispatchKey::AutocastCUDA);
    const auto low = autocast_dtype();
    return model_op().call(autocast_to(x, low), autocast_to(weight, low), autocast_to(bias, low),
                           autocast_to(gn_weight, at::kFloat), autocast_to(gn_bias, at::kFloat), stride, padding, groups,
                           eps);
}

// plan(x_shape, weight_shape, stride, padding, groups, dtype code, GroupNorm dtype code, allow_tf32): each stage's
// kernel and why (ModelNew.plan).
std::string plan_op(at::IntArrayRef x, at::IntArrayRef w, at::IntArrayRef stride, at::IntArrayRef padding,
                    int64_t groups, int64_t conv_type, int64_t norm_type, bool tf32) {
    TORCH_CHECK(x.size() == 5 && w.size() == 5, "convt_swish_gn_hardswish: plan takes 5-D shapes");
    const auto meta = at::TensorOptions().device(at::kMeta);
    return convt_swish_gn_hardswish_plan(conv_shape(at::empty(x, meta), at::empty(w, meta), stride, padding),
                                         x[0], (int)groups, (int)conv_type, (int)norm_type, tf32);
}

DEFINE_OPS(OPS_NAMESPACE, m) {
    m.def("plan(int[] x_shape, int[] weight_shape, int[3] stride, int[3] padding, int groups, int dtype, "
          "int norm_dtype, bool tf32) -> str",
          plan_op);
    m.def("forward(Tensor x, Tensor weight, Tensor? bias, Tensor gn_weight, Tensor gn_bias, int[3] stride, "
          "int[3] padding, int groups, float eps) -> (Tensor, Tensor, Tensor)");
    m.def("backward(Tensor grad_out, Tensor x, Tensor weight, Tensor? bias, Tensor gn_weight, Tensor gn_bias, "
          "Tensor stats, Tensor y, int[3] stride, int[3] padding, bool[3] conv_mask) "
          "-> (Tensor, Tensor, Tensor, Tensor, Tensor)");
    m.def("model(Tensor x, Tensor weight, Tensor? bias, Tensor gn_weight, Tensor gn_bias, int[3] stride, "
          "int[3] padding, int groups, float eps) -> Tensor");
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
# The operators' namespace and the build folder's name: the file's name and a hash of its source. A namespace can be
# registered once per process, so the library is loaded once per source, however often the file is exec-ed; each
# version of the file builds in a folder of its own, once.
_namespace = "convtranspose3d_swish_groupnorm_hardswish_" + hashlib.sha256((cpp_source + cuda_source).encode()).hexdigest()[:12]
if not hasattr(getattr(torch.ops, _namespace), "model"):
    _build("convtranspose3d_swish_groupnorm_hardswish", _namespace + "_ext", _namespace,
           ["-O3"])
_ops = getattr(torch.ops, _namespace)
_model = _ops.model.default   # an overload, not the packet: a little less host time per call

DTYPES = (torch.float32, torch.float16, torch.bfloat16)      # as the reference takes them (model.to(dtype))


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, groups, eps, bias=True):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose3d(
            in_channels, out_channels, kernel_size, stride=stride, padding=padding, bias=bias)
        self.group_norm = nn.GroupNorm(num_groups=groups, num_channels=out_channels, eps=eps)

    def forward(self, x):
        # The host's time per call shows in the timing: one test on the common path (_refuse says what is
        # wrong), and the submodules and parameters read from their dicts, where nn.Module's __getattr__ finds them.
        ct, gn = self._modules["conv_transpose"], self._modules["group_norm"]
        if not ((x.is_cuda or x.is_meta) and x.dtype in DTYPES and x.dim() == 5 and x.shape[1] == ct.in_channels
                and x.numel()):
            self._refuse(x)   # returns only for an empty batch
        cp, gp = ct._parameters, gn._parameters
        return _model(x, cp["weight"], cp["bias"], gp["weight"], gp["bias"], ct.stride, ct.padding, gn.num_groups, gn.eps)

    def plan(self, x):
        """{stage: "kernel; rule"}: which kernel runs at each stage of the forward and the backward for input x,
        and why, from the decisions the launchers make."""
        ct, gn = self.conv_transpose, self.group_norm
        text = _ops.plan(list(x.shape), list(ct.weight.shape), list(ct.stride), list(ct.padding), gn.num_groups,
                         DTYPES.index(x.dtype), DTYPES.index(gn.weight.dtype), torch.backends.cudnn.allow_tf32)
        return dict(line.split(": ", 1) for line in text.splitlines())

    def _refuse(self, x):
        if not (x.is_cuda or x.is_meta):   # meta: shapes only, for tracing
            raise ValueError(f"input must be a CUDA tensor (or meta), got one on {x.device}")
        if x.dtype not in DTYPES:
            raise ValueError(f"input must be float32, float16 or bfloat16, got {x.dtype}")
        if x.dim() != 5:
            raise ValueError(f"input must be 5-D (B, C, D, H, W), got {x.dim()}-D")
        if x.shape[1] != self.conv_transpose.in_channels:
            raise ValueError(f"input has {x.shape[1]} channels, the layer expects {self.conv_transpose.in_channels}")
        if min(x.shape[2:]) < 1:
            raise ValueError(f"input spatial size {tuple(x.shape[2:])} is empty")


batch_size = 128
in_channels = 3
out_channels = 16
depth, height, width = 16, 32, 32
kernel_size = 3
stride = 2
padding = 1
groups = 4
eps = 1e-5


def get_inputs():
    return [torch.rand(batch_size, in_channels, depth, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding, groups, eps]


if __name__ == "__main__":
    from common.evaluate import main
    sys.exit(main("convtranspose3d_swish_groupnorm_hardswish", ModelNew))
