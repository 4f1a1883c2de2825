"""Conv3d -> HardSwish -> GroupNorm -> mean over (D, H, W), the conv ours where it wins (KernelBench level 2, problem
27; the brief-compliant file that keeps PyTorch's Conv3d everywhere is conv3d_hardswish_groupnorm_mean.py).

The output needs, per sample, each channel's mean of h = hardswish(y) and each group's sum of squares of h, so where
the conv is memory-bound (few input channels) the forward computes it and keeps those sums in registers; the conv
output is never written. The backward writes dL/dy = (A_c + B_g (h - mu_g)) hardswish'(y), then the conv's gradients.

Plan (struct Plan, made once a call by conv3d_hardswish_gn_mean_make_plan from forward_path, dy_stage and grad_stage;
the launchers, workspaces and ModelNew.plan(x) read it; tests/test_plan.py pins it). Three paths, each kept where it
was measured fastest:
  FUSED (a cubic kernel of 3 or 4 and W <= 32, C_in K^2 <= 64, or C_in <= 7): conv_rows_tc_kernel (float32: per
    output row a split-TF32 GEMM; wgmma on sm_90a builds, else mma.sync), conv_rows_half_kernel (16-bit MMA), or
    conv_hswish_sums_kernel (plain FP32 past the tensor-core bounds); gn_mean_finalize_kernel
  TILED (float32, C_in <= 7, any other kernel, tuples too): conv_hswish_sums_general_kernel, a thread an output
  TORCH_CONV (everything else: C_in >= 8; half precision off the fused envelope): PyTorch's own convolution
    (at::_convolution under the user's flags and dtype: eager's bits), then hardswish_gn_mean_kernel over its output
    (the conv-kept file's kernel, one shared block); backward hardswish_gn_mean_backward_kernel and PyTorch's
    convolution backward
  backward after FUSED or TILED, stage by stage: gn_mean_backward_coef_kernel; dL/dy by conv_rows_tc_kernel (GRAD)
    where the tensor-core bounds hold, else grad_y_general_kernel (float32; half precision: PyTorch's conv recomputes
    y, then the TORCH_CONV backward); dL/dx by grad_input_stream_kernel (C_in <= 3, a block a sample where the samples
    fill the GPU; kernel 4: at most two products a step), grad_input_tc_kernel (C_in <= 4) or grad_input_tiled_kernel;
    dL/dW by grad_weight_tc_kernel or grad_weight_tiled_kernel (+ their finish kernels); finish_channel_grads_kernel;
    PyTorch's convolution backward where neither serves (half precision); convert_kernel: half's float copies
Every sum of ours is in a fixed order (no atomics): the same input gives the same bits; PyTorch's conv backward is as
deterministic as eager's (torch.backends.cudnn.deterministic).

Semantics (docs/DESIGN.md): our forward convs exact fp32 under both torch.backends.cudnn.allow_tf32 settings (cuDNN
keeps this conv in fp32 too); the tensor-core dL/dx and dL/dW one TF32 product a step under the flag (as PyTorch's
conv backward), exact with it off; in float16/bfloat16 y is rounded after the conv and after its bias, h after
HardSwish, GroupNorm's statistics as PyTorch's half GroupNorm stores them; under autocast GroupNorm is float32. Our
backward kernels run in float32 on float copies (in bfloat16 the conv's gradients one TF32 product a step, dL/dy
rounded to TF32: 3 bits more than PyTorch's bfloat16 dL/dy) and round each gradient to its dtype. Double backward
raises.

Floor at the benchmark size (B=1024, 3->16 channels, 16x32x32, k=4): 34.4 G multiply-adds a conv, 1.03 ms at the
67 TFLOP/s FP32 rate, about 0.42 ms as split TF32; the backward's two gradients twice that (forward + backward
3.08 ms). Measured (H200, run_all.py, README): forward 1.02 to 1.10 ms fp32 (10.9x to 11.7x eager), 0.41 ms in
half (13.3x fp16, 28.2x bf16; the 16-bit conv kernel 386 us, 5.5x the tensor-core floor of its products, bound by
issue and L1 together); forward + backward 6.0 ms fp32 (22.8x), 5.6 ms bf16 (37.7x), 6.7 ms fp16 (4.2x: eager's
fp16 training runs 7.5x faster than its bf16). Each kernel against its floor, the paths' measurements
and what was tried: docs/conv3d_hardswish_groupnorm_mean_all_custom.md.

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

# The plan's types, in both translation units: the CUDA source decides a call's plan once
# (conv3d_hardswish_gn_mean_make_plan), the C++ operator and the launchers read it.
plan_types = r"""
enum class Path { FUSED, TILED, TORCH_CONV };   // the forward (forward_path)
enum class Stage { TC, STREAM, TILED, TORCH };  // a backward stage (dy_stage, grad_stage; STREAM: dL/dx only)
struct Plan {
    Path path;
    bool tc;         // FUSED: the tensor-core conv (tc_forward); else the plain FP32 one
    bool vec;        // the forward's rows of x as vector loads: W a multiple of 4, x aligned to 4 elements
    Stage dy;        // TORCH: the chain's backward over y, then PyTorch's convolution backward for dL/dx and dL/dW
    Stage dx, dw;    // after a TC or TILED dL/dy
    bool vec_bwd;    // the backward's rows of the float input as vector loads
};
"""

cuda_source = plan_types + r"""
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>

// ---- The plan's thresholds (forward_path applies them; its comment has the measurements, H200):
constexpr int PLAIN_MAX_C_IN = 7;       // past the tensor-core bounds, the plain FP32 fused conv to 7 input channels
constexpr int TILED_MAX_C_IN = 7;       // float32, any other kernel: the tiled conv, 2x (7x with the backward) cuDNN's

constexpr int THREADS = 128;   // conv-shaped kernels: a thread per 4 output columns
constexpr int PW = 4;          // adjacent columns per thread
constexpr int CO = 16;         // output channels per thread (grid covers the rest in chunks)

struct Dims {
    int B, C_in, C_out, D, H, W, Do, Ho, Wo;
    int quads;                  // ceil(Wo / PW)
    long long out_units;        // per sample: Do * Ho * quads
};


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
// Four consecutive floats (16-byte aligned).
__device__ __forceinline__ float4 load_float4(const float* p) { return __ldg(reinterpret_cast<const float4*>(p)); }
// y = conv + bias and h = hardswish(y): in half precision each rounded to T as PyTorch rounds them (the conv's
// output, then the bias added after it, then HardSwish's output).
template <typename T> __device__ __forceinline__ float conv_output(float conv, float bias) {
    return is_half<T>() ? round_to<T>(round_to<T>(conv) + bias) : conv + bias;
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

__device__ __forceinline__ float hardswish(float v) { return v * fminf(fmaxf(v + 3.f, 0.f), 6.f) * (1.f / 6.f); }
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
template <int K, typename T>
__device__ void conv_quad(float (&acc)[PW][CO], const T* __restrict__ x, const T* __restrict__ weight,
                          float* w_s, const Dims& d, long long b, int co0, int od, int oh, int ow0) {
#pragma unroll
    for (int p = 0; p < PW; ++p)
#pragma unroll
        for (int j = 0; j < CO; ++j) acc[p][j] = 0.f;
    for (int ci = 0; ci < d.C_in; ++ci) {
        __syncthreads();
        for (int i = threadIdx.x; i < K * K * K * CO; i += blockDim.x) {   // [tap][j], zero past C_out
            const int tap = i / CO, co = co0 + i % CO;
            w_s[i] = co < d.C_out ? to_float(weight[((size_t)co * d.C_in + ci) * K * K * K + tap]) : 0.f;
        }
        __syncthreads();
        const T* xc = x + ((size_t)b * d.C_in + ci) * d.D * d.H * d.W;
        for (int kd = 0; kd < K; ++kd)
#pragma unroll
            for (int kh = 0; kh < K; ++kh) {
                const T* row = xc + ((size_t)(od + kd) * d.H + oh + kh) * d.W;
                float v[PW + K - 1];
#pragma unroll
                for (int i = 0; i < PW + K - 1; ++i) v[i] = load_float(row + min(ow0 + i, d.W - 1));   // clamped: unused
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
// (B, chunks, blocks_per_sample, 2, CO). T: the element type (conv_output, round_to).
template <int K, typename T>
__global__ void __launch_bounds__(THREADS) conv_hswish_sums_kernel(
    const T* __restrict__ x, const T* __restrict__ weight, const T* __restrict__ bias,
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
        const float bj = bias != nullptr && co0 + j < d.C_out ? to_float(bias[co0 + j]) : 0.f;
#pragma unroll
        for (int p = 0; p < PW; ++p)
            if (live && ow0 + p < d.Wo && co0 + j < d.C_out) {
                const float h = round_to<T>(hardswish(conv_output<T>(acc[p][j], bj)));
                s[j] += h;
                q[j] = fmaf(h, h, q[j]);
            }
    }
    double* out = partials + ((b * gridDim.y + blockIdx.y) * blocks_per_sample + blockIdx.x % blocks_per_sample) * 2 * CO;
    block_channel_sums(s, red, out);
    block_channel_sums(q, red, out + CO);
}

// The conv on the tensor cores, where a row of input fits one 32-column segment (W <= 32) and the depth
// (ci, kd, kh) is at most TC_MAX_STEPS * 8: per output row (b, od, oh) a GEMM with rows = the 32 input
// columns, columns = (kw slot 0..3, 16 output channels; slot 3 zero where K = 3), depth = (ci, kd, kh)
// padded to a multiple of 8, so that out[ow][co] = sum_kw C[ow + kw][kw, co]. Split TF32 ("3xTF32": v =
// big + small, both TF32, and big*big + big*small + small*big) keeps fp32-level accuracy. Fragments
// (g = lane / 4, t = lane % 4): a = rows g, g + 8 at depths t, t + 4; b = depths t, t + 4 of column g;
// c = row g then g + 8, columns 2t, 2t + 1 (mma.sync m16n8k8 and each warp's 16 rows of wgmma m64n64k8 alike).
// The rows are the columns in this order: lane g's rows g and g + 8 of tile i are its columns 4g + 2i and
// 4g + 2i + 1, so out[4g + s] needs C rows of its own lane but for the last K - 1, from lane g + 1.
constexpr int TC_MAX_STEPS = 8;
constexpr int TC_COLS = 4 * CO;         // GEMM columns: (kw slot, channel)
constexpr int TC_WORDS = TC_COLS * 8;   // one 8-deep slice of one part (big or small) of the weights
constexpr int TC_BLOCKS_PER_SM = 3;     // caps registers at 168
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
// Input offset, within a sample, of depth k = (ci, kd, kh) of a row-GEMM (0 for the padding depths past depth).
template <int K>
__device__ __forceinline__ unsigned depth_offset(int k, int depth, const Dims& d) {
    return k < depth ? ((k / (K * K) * d.D + k / K % K) * d.H + k % K) * d.W : 0u;
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// Hopper: the warpgroup's 4 warps give 16 rows each (A from registers) times the 64 columns of one weight
// slice in shared memory, asynchronously: d += a * b.
__device__ __forceinline__ void wgmma(float (&d)[32], const uint32_t (&a)[4], const uint32_t* b) {
    const uint32_t addr = (uint32_t)__cvta_generic_to_shared(b);   // 8x4 blocks, 128 bytes apart along k, 256 along n
    const uint64_t desc = (uint64_t)((addr & 0x3ffff) >> 4) | (uint64_t)(128 >> 4) << 16 | (uint64_t)(256 >> 4) << 32;
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, "
                 "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, p, 1, 1;\n}"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),
                   "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]),
                   "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]),
                   "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc));
}
#endif

// acc += a * (one step's weights: big part at w, small part at w + TC_WORDS), small terms first. Layout of a
// part: column n, depth k at word (n / 8) * 64 + (k / 4) * 32 + (n % 8) * 4 + k % 4 (the tensor cores' 8x4
// blocks). Only the first 2K column tiles hold weights; wgmma multiplies all 8, mma.sync those.
template <int K>
__device__ __forceinline__ void multiply(float (&acc)[32], const uint32_t (&big)[4], const uint32_t (&small)[4],
                                         const uint32_t* w) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    wgmma(acc, small, w);
    wgmma(acc, big, w + TC_WORDS);
    wgmma(acc, big, w);
#else
    const int lane = threadIdx.x % 32;
#pragma unroll
    for (int j = 0; j < 2 * K; ++j) {
        const uint32_t* wj = w + j * 64 + lane;
        mma(acc + 4 * j, small, wj[0], wj[32]);
        mma(acc + 4 * j, big, wj[TC_WORDS], wj[TC_WORDS + 32]);
        mma(acc + 4 * j, big, wj[0], wj[32]);
    }
#endif
}

// The row kernels' block partial: per quantity q and channel 8 jc + 2t + e of the chunk, a lane's sums[q][jc][e]
// added over the 8 lanes with the same t (a fixed shuffle tree, double), then over the warps in order, written to
// partials (B, chunks, parts, NQ, CO) at (b, blockIdx.y, part). Every thread of the block calls it (one barrier).
template <int NQ>
__device__ __forceinline__ void write_block_sums(const float (&sums)[NQ][2][2], double (*red)[NQ][CO],
                                                 double* __restrict__ partials, long long b, int parts, int part) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
#pragma unroll
    for (int q = 0; q < NQ; ++q)
#pragma unroll
        for (int jc = 0; jc < 2; ++jc)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                double v = sums[q][jc][e];
#pragma unroll
                for (int off = 4; off < 32; off *= 2) v += __shfl_xor_sync(0xffffffffu, v, off);
                if (g == 0) red[warp][q][8 * jc + 2 * t + e] = v;
            }
    __syncthreads();
    if (threadIdx.x < NQ * CO) {
        const int q = threadIdx.x / CO, j = threadIdx.x % CO;
        double v = 0.0;
        for (int w = 0; w < THREADS / 32; ++w) v += red[w][q][j];
        partials[((b * gridDim.y + blockIdx.y) * parts + part) * NQ * CO + q * CO + j] = v;
    }
}

// Output rows (od, oh) of a sample go 4 at a time (a unit: one row per warp, the last unit's extra warps
// compute a copy of the last row and count nothing); block x = (sample b, part p) takes units
// [p U / parts, (p + 1) U / parts), U = ceil(Do Ho / 4); grid y: chunks of 16 output channels. Per output
// y = conv + bias, each lane adds, per channel of its four,
//   forward (GRAD false): h = hardswish(y) and h^2;
//   backward (GRAD true): dL/dy = (A_c + B_g (h - mu_g)) hardswish'(y), written to grad_y, and its sum;
// the block's sums go to partials (B, chunks, parts, quantities, CO), as conv_hswish_sums_kernel's.
// vec: W % 4 == 0 and x aligned to 4 elements, so a lane's 4 columns are one 16-byte load. Float32 only
// (the half types' forward is conv_rows_half_kernel; their backward runs in float32).
template <int K, bool GRAD>
__global__ void __launch_bounds__(THREADS, TC_BLOCKS_PER_SM) conv_rows_tc_kernel(
    const float* __restrict__ x, const float* __restrict__ weight, const float* __restrict__ bias,
    const float* __restrict__ coef, float* __restrict__ grad_y, double* __restrict__ partials, Dims d, int parts,
    bool vec)
{
    constexpr int NQ = GRAD ? 1 : 2;   // quantities summed per channel
    __shared__ __align__(128) uint32_t w_s[TC_MAX_STEPS][2][TC_WORDS];   // [step][big, small]
    __shared__ uint2 tap_s[TC_MAX_STEPS][4];   // input offsets of depths step * 8 + t and step * 8 + t + 4
    __shared__ double red[THREADS / 32][NQ][CO];
    __shared__ float chan_s[4][CO];   // per channel of the chunk: the conv bias, then (backward) A_c, B_g, mu_g
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const long long b = blockIdx.x / parts;
    const int part = (int)(blockIdx.x % parts), co0 = blockIdx.y * CO;
    const int depth = d.C_in * K * K, steps = (depth + 7) / 8;
    for (int i = threadIdx.x; i < steps * 2 * TC_WORDS; i += THREADS) {
        const int w = i % TC_WORDS, half = i / TC_WORDS % 2, st = i / (2 * TC_WORDS);
        const int n = w / 64 * 8 + w / 4 % 8, k = st * 8 + w / 32 % 2 * 4 + w % 4;
        const int kw = n / CO, co = co0 + n % CO;
        const float v = kw < K && co < d.C_out && k < depth
                            ? to_float(weight[((size_t)co * d.C_in + k / (K * K)) * K * K * K + k % (K * K) * K + kw]) : 0.f;
        const Split s = split(v);
        w_s[st][half][w] = half == 0 ? s.big : s.small;
    }
    for (int i = threadIdx.x; i < steps * 4; i += THREADS) {
        unsigned off[2];
        for (int h = 0; h < 2; ++h) off[h] = depth_offset<K>(i / 4 * 8 + i % 4 + 4 * h, depth, d);
        tap_s[i / 4][i % 4] = make_uint2(off[0], off[1]);
    }
    for (int i = threadIdx.x; i < 4 * CO; i += THREADS) {
        const int kind = i / CO, co = co0 + i % CO;
        chan_s[kind][i % CO] = co >= d.C_out ? 0.f
                               : kind == 0 ? (bias != nullptr ? to_float(bias[co]) : 0.f)
                               : GRAD ? coef[(b * d.C_out + co) * 3 + kind - 1] : 0.f;
    }
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");   // the weights are read by wgmma
#endif
    __syncthreads();

    const float* xs = x + (size_t)b * d.C_in * d.D * d.H * d.W;
    const int rows = d.Do * d.Ho, units = (rows + 3) / 4;
    const int u0 = (int)((long long)part * units / parts), u1 = (int)((long long)(part + 1) * units / parts);
    int od = 0, oh = 0;
    unsigned row = 0;    // input offset of the row's first column, within the sample
    bool counted = false;
    const auto locate = [&](int u) {
        const int r = u * 4 + warp;
        counted = r < rows;
        od = min(r, rows - 1) / d.Ho;
        oh = min(r, rows - 1) % d.Ho;
        row = ((unsigned)od * d.H + oh) * d.W;
    };
    // A step's A values: [i][r] column 4g + 2i + r at depth t, [i][r + 2] at depth t + 4; two steps' in flight.
    float raw[2][2][4];
    const auto load = [&](int st, float (&raw)[2][4]) {
        if (st >= steps) return;
        const uint2 o = tap_s[st][t];
        if (vec) {   // columns past W are clamped: only outputs past Wo use them
            const unsigned c = min(4 * g, d.W - 4);
            const float4 v0 = load_float4(xs + row + o.x + c);
            const float4 v1 = load_float4(xs + row + o.y + c);
            raw[0][0] = v0.x; raw[0][1] = v0.y; raw[1][0] = v0.z; raw[1][1] = v0.w;
            raw[0][2] = v1.x; raw[0][3] = v1.y; raw[1][2] = v1.z; raw[1][3] = v1.w;
        } else {
#pragma unroll
            for (int s = 0; s < 4; ++s) {
                const unsigned c = min(4 * g + s, d.W - 1);
                raw[s / 2][s % 2] = load_float(xs + row + o.x + c);
                raw[s / 2][s % 2 + 2] = load_float(xs + row + o.y + c);
            }
        }
    };
    float sums[NQ][2][2] = {};
    if (u0 < u1) {
        locate(u0);
        load(0, raw[0]);
        load(1, raw[1]);
    }
#pragma unroll 1
    for (int u = u0; u < u1; ++u) {
        float acc[2][32];
#pragma unroll
        for (int i = 0; i < 2; ++i)
#pragma unroll
            for (int j = 0; j < 32; ++j) acc[i][j] = 0.f;
        // A step splits its inputs into one of two register sets and issues its products; the step after
        // next's inputs load meanwhile. On Hopper the products run asynchronously, a step behind at most.
        uint32_t big[2][2][4], small[2][2][4];   // [set][i][e]
        const auto step = [&](int st, float (&raw)[2][4], uint32_t (&bg)[2][4], uint32_t (&sm)[2][4]) {
#pragma unroll
            for (int i = 0; i < 2; ++i)
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const Split v = split(raw[i][e]);
                    bg[i][e] = v.big;
                    sm[i][e] = v.small;
                }
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
            asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#endif
#pragma unroll
            for (int i = 0; i < 2; ++i) multiply<K>(acc[i], bg[i], sm[i], w_s[st][0]);
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
            asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
#endif
            load(st + 2, raw);
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
            asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");   // the other set is free
#endif
        };
#pragma unroll 1
        for (int st = 0; st < steps; st += 2) {
            step(st, raw[0], big[0], small[0]);
            if (st + 1 < steps) step(st + 1, raw[1], big[1], small[1]);
        }
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
        asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
#endif
        // The next unit's first inputs, in flight during this unit's sums.
        const int od_u = od, oh_u = oh;
        const bool counted_u = counted;
        if (u + 1 < u1) {
            locate(u + 1);
            load(0, raw[0]);
            load(1, raw[1]);
        }
        // y[4g + s] = bias + sum_kw C[4g + s + kw][kw, channel]; C[4g + s'] is acc[s' / 2][.][2 (s' % 2) + e].
#pragma unroll
        for (int jc = 0; jc < 2; ++jc)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                float c[K][4 + K - 1];
#pragma unroll
                for (int kw = 0; kw < K; ++kw) {
#pragma unroll
                    for (int s = 0; s < 4; ++s) c[kw][s] = acc[s / 2][4 * (kw * 2 + jc) + 2 * (s % 2) + e];
#pragma unroll
                    for (int m = 0; m < K - 1; ++m) c[kw][4 + m] = __shfl_sync(0xffffffffu, c[kw][m], (lane + 4) % 32);
                }
                const int co = co0 + 8 * jc + 2 * t + e, j = 8 * jc + 2 * t + e;
                float* gy = GRAD ? grad_y + (((size_t)b * d.C_out + co) * d.Do + od_u) * d.Ho * d.Wo + (size_t)oh_u * d.Wo
                                 : nullptr;
#pragma unroll
                for (int s = 0; s < 4; ++s) {
                    float v = chan_s[0][j];
#pragma unroll
                    for (int kw = 0; kw < K; ++kw) v += c[kw][s + kw];
                    if (counted_u && 4 * g + s < d.Wo && co < d.C_out) {
                        const float h = hardswish(v);
                        if (GRAD) {
                            const float dy = fmaf(chan_s[2][j], h - chan_s[3][j], chan_s[1][j]) * hardswish_grad(v);
                            gy[4 * g + s] = dy;
                            sums[0][jc][e] += dy;
                        } else {
                            sums[0][jc][e] += h;
                            sums[NQ - 1][jc][e] = fmaf(h, h, sums[NQ - 1][jc][e]);
                        }
                    }
                }
            }
    }
    write_block_sums<NQ>(sums, red, partials, b, parts, part);
}

// The forward in half precision (T = Fp16 or Bf16) where conv_rows_tc_kernel takes fp32: a product of two half
// values is exact in fp32, so the conv runs on mma.sync m16n8k16 in T with fp32 accumulation, one product a
// multiply (a third of split TF32's tensor instructions at twice their rate), and the GEMM is laid out for
// 16-bit fragments: per output row (b, od, oh), rows = the 32 output columns, columns = the chunk's 16
// channels, depth = (tap, kw) with a tap = (ci, kd, kh) and kw padded to 4 (zero weights at kw = 3 where
// K = 3). A k16 step is 4 taps; a lane's depths are one tap's kw (0, 1) in a0, a1 and (2, 3) in a2, a3, so its
// A registers are pairs of adjacent input columns: columns 4g .. 4g + 7 (an 8-byte load of 4g .. 4g + 3 clamped
// into the row, the next four by two shuffles from lane group g + 1) give the even pairs as loaded and 3 byte
// permutes the odd ones. The accumulators are the conv's outputs
// themselves (no kw additions across lanes, as the TF32 kernel's one-value registers need). M tile i: rows g,
// g + 8 are columns 4g + i, 4g + i + 2 (so tile 0's a1 = a2 is a loaded word), and a lane holds columns
// 4g .. 4g + 3 of channels 2t, 2t + 1, 8 + 2t, 9 + 2t. The padded kw = 3 products read columns of the same row
// (so an Inf there reaches the reference's group too). Same grid, units and partials as
// conv_rows_tc_kernel<K, false>.
constexpr int HALF_MAX_STEPS = TC_MAX_STEPS * 2;   // 4 taps a step: C_in K^2 <= 64, as tc_forward
constexpr int HALF_BLOCKS_PER_SM = 8;   // caps registers at 64
template <int K, typename T, bool VEC>
__global__ void __launch_bounds__(THREADS, HALF_BLOCKS_PER_SM) conv_rows_half_kernel(
    const T* __restrict__ x, const T* __restrict__ weight, const T* __restrict__ bias, double* __restrict__ partials,
    Dims d, int parts)
{
    __shared__ uint4 w_s[HALF_MAX_STEPS][32];   // [step][lane]: b0, b1 of channels 0-7, then of channels 8-15
    __shared__ unsigned tap_s[HALF_MAX_STEPS * 4];
    __shared__ double red[THREADS / 32][2][CO];
    __shared__ float bias_s[CO];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const long long b = blockIdx.x / parts;
    const int part = (int)(blockIdx.x % parts), co0 = blockIdx.y * CO;
    const int taps = d.C_in * K * K, steps = (taps + 3) / 4;
    const unsigned short* w_bits = reinterpret_cast<const unsigned short*>(weight);
    for (int i = threadIdx.x; i < steps * 32 * 4; i += THREADS) {
        const int r = i % 4, ln = i / 4 % 32, st = i / 128;   // register r: b1 if r odd, of channels 8 (r / 2) + g
        const int tap = st * 4 + ln % 4, co = co0 + 8 * (r / 2) + ln / 4;
        uint32_t pair = 0;
        for (int h = 0; h < 2; ++h) {
            const int kw = 2 * (r % 2) + h;
            if (kw < K && tap < taps && co < d.C_out) pair |= (uint32_t)w_bits[((size_t)co * taps + tap) * K + kw] << 16 * h;
        }
        reinterpret_cast<uint32_t*>(&w_s[st][ln])[r] = pair;
    }
    for (int i = threadIdx.x; i < steps * 4; i += THREADS) tap_s[i] = depth_offset<K>(i, taps, d);
    for (int i = threadIdx.x; i < CO; i += THREADS)
        bias_s[i] = co0 + i < d.C_out && bias != nullptr ? to_float(bias[co0 + i]) : 0.f;
    __syncthreads();

    const T* xs = x + (size_t)b * d.C_in * d.D * d.H * d.W;
    const int rows = d.Do * d.Ho, units = (rows + 3) / 4;
    const int u0 = (int)((long long)part * units / parts), u1 = (int)((long long)(part + 1) * units / parts);
    // Columns 4g .. 4g + 7 of a tap's row: VEC (rows aligned to 4 elements), one 8-byte load of columns 4g ..
    // 4g + 3 clamped into the row (the clamped columns feed only outputs past Wo) and the next lane group's by
    // shuffle; else element by element, clamped. A unit's row pointer is formed once (opaque to the compiler, so a
    // step's address is one wide multiply-add of its tap's 32-bit offset, not 64-bit index arithmetic from x).
    const T* x0 = xs + (VEC ? min(4 * g, d.W - 4) : 0);
    const unsigned* tap_t = tap_s + t;   // step st's tap for this lane: tap_t[4 st]
    const auto load = [&](const T* r0, int st, uint32_t (&w)[4]) {
        const unsigned o = tap_t[4 * st];
        if (VEC) {   // w[2], w[3]: the next lane group's w[0], w[1], by shuffle where used (with_next)
            const uint2 v0 = __ldg(reinterpret_cast<const uint2*>(r0 + o));
            w[0] = v0.x; w[1] = v0.y;
        } else {
            const unsigned short* q = reinterpret_cast<const unsigned short*>(r0 + o);
#pragma unroll
            for (int m = 0; m < 4; ++m)
                w[m] = (uint32_t)__ldg(q + min(4 * g + 2 * m, d.W - 1)) |
                       (uint32_t)__ldg(q + min(4 * g + 2 * m + 1, d.W - 1)) << 16;
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
    const auto multiply = [&](int st, const uint32_t (&w)[4], float (&acc)[2][2][4]) {
        const uint4 bw = w_s[st][lane];
        const uint32_t w12 = __byte_perm(w[1], w[2], 0x5432);   // columns (4g + 3, 4g + 4)
        const uint32_t a[2][4] = {{w[0], w[1], w[1], w[2]},
                                  {__byte_perm(w[0], w[1], 0x5432), w12, w12, __byte_perm(w[2], w[3], 0x5432)}};
#pragma unroll
        for (int i = 0; i < 2; ++i) {
            mma_half<T>(acc[i][0], a[i], bw.x, bw.y);
            mma_half<T>(acc[i][1], a[i], bw.z, bw.w);
        }
    };
    // This warp's row of unit u: r = 4u + warp, (od, oh) stepped from unit to unit (no division); past the
    // last row, a copy of it, computed and not counted.
    int r = u0 * 4 + warp, od = min(r, rows - 1) / d.Ho, oh = min(r, rows - 1) % d.Ho;
    const auto row_offset = [&]() { return ((unsigned)od * d.H + oh) * d.W; };
    const auto advance = [&]() {
        r += 4;
        if (r < rows) {
            for (oh += 4; oh >= d.Ho; oh -= d.Ho) ++od;
        } else {
            od = d.Do - 1;
            oh = d.Ho - 1;
        }
    };
    // This lane's channels' biases as pairs: (2t, 2t + 1), (8 + 2t, 9 + 2t)
    const uint32_t bias_p[2] = {pack_pair<T>(bias_s[2 * t], bias_s[2 * t + 1]),
                                pack_pair<T>(bias_s[8 + 2 * t], bias_s[9 + 2 * t])};
    float sums[2][2][2] = {};   // [h, h^2][channels 2t + e, 8 + 2t + e][e]
    uint32_t next[4] = {};      // the next step's inputs, in flight (deeper rings measured no faster)
    unsigned row = row_offset();
    if (u0 < u1) load(opaque(x0 + row), 0, next);
#pragma unroll 1
    for (int u = u0; u < u1; ++u) {
        const bool counted = r < rows;
        advance();
        const unsigned row_next = row_offset();
        const T* r0 = opaque(x0 + row);
        float acc[2][2][4] = {};   // [M tile i][channel tile j][fragment c]
#pragma unroll 2
        for (int st = 0; st < steps - 1; ++st) {
            uint32_t w[4];
            with_next(next, w);
            load(r0, st + 1, next);
            multiply(st, w, acc);
        }
        {
            uint32_t w[4];
            with_next(next, w);
            if (u + 1 < u1) load(opaque(x0 + row_next), 0, next);   // the next unit's first step
            multiply(steps - 1, w, acc);
        }
        row = row_next;
        if (!counted) continue;
        // The pair of channels (2t, 2t + 1) or (8 + 2t, 9 + 2t) of one column rounded together (packed
        // conversions; the bias added to the rounded conv in the half type); columns past Wo add zero. Channels
        // past C_out have zero weights and bias: h = 0.
#pragma unroll
        for (int i = 0; i < 2; ++i)
#pragma unroll
            for (int rr = 0; rr < 2; ++rr) {
                const bool ok = 4 * g + i + 2 * rr < d.Wo;
#pragma unroll
                for (int j = 0; j < 2; ++j) {
                    const uint32_t c = pack_pair<T>(acc[i][j][2 * rr], acc[i][j][2 * rr + 1]);
                    const float2 y = unpack_pair<T>(add_pair<T>(c, bias_p[j]));
                    float2 h = round_pair<T>(hardswish(y.x), hardswish(y.y));
                    h.x = ok ? h.x : 0.f;
                    h.y = ok ? h.y : 0.f;
                    sums[0][j][0] += h.x;
                    sums[0][j][1] += h.y;
                    sums[1][j][0] = fmaf(h.x, h.x, sums[1][j][0]);
                    sums[1][j][1] = fmaf(h.y, h.y, sums[1][j][1]);
                }
            }
    }
    write_block_sums<2>(sums, red, partials, b, parts, part);
}

__host__ __device__ inline bool tc_forward(const Dims& d, int K) {
    return d.W <= 32 && d.C_in * K * K <= TC_MAX_STEPS * 8;
}
// Blocks per (sample, channel chunk) of conv_rows_tc_kernel: some 8192 blocks in all, at most one per unit.
static int tc_parts(const Dims& d) {
    const long long per_sample = (long long)d.B * ((d.C_out + CO - 1) / CO);
    return (int)std::min<long long>((d.Do * d.Ho + 3) / 4, std::max<long long>(1, (8192 + per_sample - 1) / per_sample));
}

// Per sample: the partials added in order; out[b, c] = gamma_c (m_c - mu_g) rstd_g + beta_c; stats
// (B, C + 2G): m_c (mean of h), mu_g, rstd_g.
template <typename TO>
__global__ void gn_mean_finalize_kernel(const double* __restrict__ partials, const TO* __restrict__ gn_weight,
                                        const TO* __restrict__ gn_bias, TO* __restrict__ out,
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
        if (std::is_same<TO, float>::value) {
            out[b * C + c] = from_float<TO>((float)(to_float(gn_weight[c]) * (m - mu) * rstd + to_float(gn_bias[c])));
        } else {   // the mean of GroupNorm's a h + b (its rounding per element averages out over the mean)
            const float2 ab = half_gn_affine<TO>(mu, rstd, to_float(gn_weight[c]), to_float(gn_bias[c]));
            out[b * C + c] = from_float<TO>((float)(ab.x * m + ab.y));
        }
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

using TcDims = Dims;
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
static_assert(WGT_MAX_GROUPS * WGT_DEPTHS >= TC_MAX_STEPS * 8, "tc_forward's depth fits grad_weight_tc_kernel");
static_assert(WGT_CO == CO, "dL/dy's and dL/dW's chunks of output channels are one");
// The tensor-core dL/dx's bounds (tc_grad_3d's grad_input_tc_kernel): the forward's, C_in <= 4, its depth bound.
__host__ __device__ inline bool tc_input_grad(const Dims& d, int K) {
    return tc_forward(d, K) && d.C_in <= 4 && K * K * ((d.C_out + 7) / 8) <= GI_MAX_STEPS;
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

// ---- The tiled path (float32, at most TILED_MAX_C_IN input channels, any kernel but the fused path's cubic 3 and 4,
// tuples too): the conv on the CUDA cores, forward and backward. The forward: a thread per
// output position of one sample, the CO channels of a chunk (grid y); the chunk's weights staged in shared memory
// GC_TAPS taps at a time ([tap][channel]: a tap's CO weights are four broadcast float4 loads), so a tap is one
// input load (read-only cache), four weight loads and CO multiply-adds, over (ci, kd, kh, kw) in order; 64-bit
// indices. Blocks per sample: bps, each writing its partial sums in the tuned kernels' layout, so the same finalize
// and channel-gradient kernels follow.
struct Kernel3 { int d, h, w; };
constexpr int GC_TAPS = 512;   // 32 KB of weights a stage
template <typename T>
__device__ __forceinline__ void conv_general(float (&acc)[CO], const T* __restrict__ x, const T* __restrict__ weight,
                                             const Dims& d, Kernel3 k, long long b, int co0, int od, int oh, int ow) {
    __shared__ float4 w_s[GC_TAPS * CO / 4];
#pragma unroll
    for (int j = 0; j < CO; ++j) acc[j] = 0.f;
    const long long taps = (long long)d.C_in * k.d * k.h * k.w;
    const T* xs = x + (size_t)b * d.C_in * d.D * d.H * d.W + ((size_t)od * d.H + oh) * d.W + ow;
    long long t = 0, staged = 0;   // taps [staged - GC_TAPS, staged) in w_s
    for (int ci = 0; ci < d.C_in; ++ci)
        for (int kd = 0; kd < k.d; ++kd)
            for (int kh = 0; kh < k.h; ++kh)
                for (int kw = 0; kw < k.w; ++kw, ++t) {
                    if (t == staged) {   // uniform across the block: the next GC_TAPS taps' weights
                        __syncthreads();
                        float* ws = reinterpret_cast<float*>(w_s);
                        const int n = (int)min((long long)GC_TAPS, taps - t) * CO;   // taps past the last: never read
                        for (int i = threadIdx.x; i < n; i += THREADS) {
                            const int j = i % CO;
                            ws[i] = co0 + j < d.C_out ? load_float(weight + (co0 + j) * taps + t + i / CO) : 0.f;
                        }
                        __syncthreads();
                        staged = t + GC_TAPS;
                    }
                    const float v = load_float(xs + (((size_t)ci * d.D + kd) * d.H + kh) * d.W + kw);
                    const float4* w4 = w_s + (t - (staged - GC_TAPS)) * (CO / 4);
#pragma unroll
                    for (int q = 0; q < CO / 4; ++q) {
                        const float4 w = w4[q];
                        acc[4 * q] = fmaf(v, w.x, acc[4 * q]);
                        acc[4 * q + 1] = fmaf(v, w.y, acc[4 * q + 1]);
                        acc[4 * q + 2] = fmaf(v, w.z, acc[4 * q + 2]);
                        acc[4 * q + 3] = fmaf(v, w.w, acc[4 * q + 3]);
                    }
                }
}

// This thread's output position (grid x = B * bps): false past the sample's last.
__device__ __forceinline__ bool locate_position(const Dims& d, int bps, long long& b, int& od, int& oh, int& ow) {
    b = blockIdx.x / bps;
    const long long p = (long long)(blockIdx.x % bps) * THREADS + threadIdx.x, S = (long long)d.Do * d.Ho * d.Wo;
    const long long pp = p < S ? p : 0;
    ow = (int)(pp % d.Wo);
    oh = (int)(pp / d.Wo % d.Ho);
    od = (int)(pp / ((long long)d.Wo * d.Ho));
    return p < S;
}

// conv_hswish_sums_kernel on the tiled path.
template <typename T>
__global__ void __launch_bounds__(THREADS) conv_hswish_sums_general_kernel(
    const T* __restrict__ x, const T* __restrict__ weight, const T* __restrict__ bias, double* __restrict__ partials,
    Dims d, Kernel3 k, int bps)
{
    __shared__ double red[THREADS / 32][CO];
    long long b;
    int od, oh, ow;
    const bool live = locate_position(d, bps, b, od, oh, ow);
    const int co0 = blockIdx.y * CO;
    float acc[CO], s[CO], q[CO];
    conv_general(acc, x, weight, d, k, b, co0, od, oh, ow);
#pragma unroll
    for (int j = 0; j < CO; ++j) {
        s[j] = 0.f;
        q[j] = 0.f;
        if (live && co0 + j < d.C_out) {
            const float h = round_to<T>(hardswish(conv_output<T>(acc[j], bias != nullptr ? to_float(bias[co0 + j]) : 0.f)));
            s[j] = h;
            q[j] = h * h;
        }
    }
    double* out = partials + ((b * gridDim.y + blockIdx.y) * bps + blockIdx.x % bps) * 2 * CO;
    block_channel_sums(s, red, out);
    block_channel_sums(q, red, out + CO);
}

// dL/dy = (A_c + B_g (h - mu_g)) hardswish'(y), y recomputed (any kernel size, float32); per block the
// per-channel sum of dL/dy (the conv bias's gradient) -> partials (B, chunks, blocks_per_sample, CO).
__global__ void __launch_bounds__(THREADS) grad_y_general_kernel(
    const float* __restrict__ x, const float* __restrict__ weight, const float* __restrict__ bias,
    const float* __restrict__ coef, float* __restrict__ grad_y, double* __restrict__ bias_partials, Dims d, Kernel3 k,
    int bps)
{
    __shared__ double red[THREADS / 32][CO];
    long long b;
    int od, oh, ow;
    const bool live = locate_position(d, bps, b, od, oh, ow);
    const int co0 = blockIdx.y * CO;
    const long long S = (long long)d.Do * d.Ho * d.Wo, p = ((long long)od * d.Ho + oh) * d.Wo + ow;
    float acc[CO], s[CO];
    conv_general(acc, x, weight, d, k, b, co0, od, oh, ow);
#pragma unroll
    for (int j = 0; j < CO; ++j) {
        s[j] = 0.f;
        const int c = co0 + j;
        if (!live || c >= d.C_out) continue;
        const float* cf = coef + (b * d.C_out + c) * 3;
        const float y = acc[j] + (bias != nullptr ? bias[c] : 0.f);
        const float g = fmaf(cf[1], hardswish(y) - cf[2], cf[0]) * hardswish_grad(y);
        grad_y[((size_t)b * d.C_out + c) * S + p] = g;
        s[j] = g;
    }
    block_channel_sums(s, red, bias_partials + ((b * gridDim.y + blockIdx.y) * bps + blockIdx.x % bps) * CO);
}

// The tiled path's conv gradients (as problem 23's file computes them). dL/dx: block (b tiles + tile of
// TILE_H x TILE_W input positions of one input depth, chunk of COT input channels); tile_conv_flip gives a thread's
// PIXT positions (rows ty, ty + ROW_STEP, ...): the conv's transpose, a conv of dL/dy (C_out channels) padded by
// k - 1 with the weights flipped and their channels swapped. Per output depth and chunk of ci_t output channels it
// stages the dL/dy rows the tile reads and the chunk's weights of that depth ([c][kh][kw][ci]: a tap's COT weights
// are COT / 4 broadcast float4 loads) in shared memory; a tap is PIXT loads and PIXT x COT multiply-adds, summed
// over (chunk, kd, c, kh, kw) in fp32, a fixed order.
constexpr int GEN_THREADS = 256, TILE_W = 32, ROW_STEP = GEN_THREADS / TILE_W, TILE_H = 2 * ROW_STEP, CO_T = 16;
struct FlipConv {
    int C_in, C_out, D, H, W, ci_t;   // the transpose's: C_in = the model's C_out, D x H x W = Do x Ho x Wo
    Kernel3 k;
    int co_t, th;                     // input channels of the model at a time (COT), the tile's rows (PIXT ROW_STEP)
    __host__ __device__ int rows() const { return th + k.h - 1; }
    __host__ __device__ int cols() const { return TILE_W + k.w - 1; }
    __host__ __device__ int in_floats() const { return (rows() * cols() + 3) / 4 * 4; }   // a channel's, 16-byte aligned
    __host__ __device__ int w_floats() const { return k.h * k.w * co_t; }
    size_t smem_bytes() const { return (size_t)ci_t * (in_floats() + w_floats()) * sizeof(float); }
};
template <int COT, int PIXT>
__global__ void __launch_bounds__(GEN_THREADS, 2) grad_input_tiled_kernel(
    const float* __restrict__ grad_y, const float* __restrict__ weight, float* __restrict__ grad_x, FlipConv t)
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
    const int ty = threadIdx.x / TILE_W, tx = threadIdx.x % TILE_W, lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int rows = t.rows(), cols = t.cols(), taps2 = t.k.h * t.k.w, taps3 = t.k.d * taps2;
    const int j = threadIdx.x % COT, co = co0 + j;   // the weights: a thread per output channel of a tap
    float acc[PIXT][COT] = {};
    for (int ci0 = 0; ci0 < t.C_in; ci0 += t.ci_t) {
        const int nci = min(t.ci_t, t.C_in - ci0);
        for (int kd = 0; kd < t.k.d; ++kd) {
            const int id = od + kd - (t.k.d - 1);
            if (id < 0 || id >= t.D) continue;   // the padding: no products (uniform across the block)
            __syncthreads();
            for (int ci = 0; ci < nci; ++ci) {   // a warp per row, lanes along it
                const float* xc = grad_y + (((size_t)b * t.C_in + ci0 + ci) * t.D + id) * t.H * t.W;
                for (int r = warp; r < rows; r += GEN_THREADS / 32) {
                    const int ih = oh0 + r - (t.k.h - 1);
                    for (int col = lane; col < cols; col += 32) {
                        const int iw = ow0 + col - (t.k.w - 1);
                        in_s[ci * t.in_floats() + r * cols + col] =
                            ih >= 0 && iw >= 0 && ih < t.H && iw < t.W ? __ldg(xc + (size_t)ih * t.W + iw) : 0.f;
                    }
                }
            }
            // w_s[(ci taps2 + tap) COT + j] = weight[ci0 + ci][co][k.d - 1 - kd][taps2 - 1 - tap]
            for (int ct = threadIdx.x / COT; ct < nci * taps2; ct += GEN_THREADS / COT)
                w_s[ct * COT + j] = co < t.C_out ? __ldg(weight + ((size_t)(ci0 + ct / taps2) * t.C_out + co) * taps3 +
                                                         (size_t)(t.k.d - 1 - kd) * taps2 + taps2 - 1 - ct % taps2)
                                                 : 0.f;
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
    const int oh = oh0 + ty, ow = ow0 + tx;
#pragma unroll
    for (int p = 0; p < PIXT; ++p)
        if (oh + p * ROW_STEP < H && ow < W)
#pragma unroll
            for (int c = 0; c < COT; ++c)
                if (co0 + c < t.C_out)
                    grad_x[((((size_t)b * t.C_out + co0 + c) * D + od) * H + oh + p * ROW_STEP) * W + ow] = acc[p][c];
}

using WgradDims = Dims;
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


// shared: hardswish_gn_mean begin
// PyTorch's conv output y (B, C, D, H, W) -> HardSwish -> GroupNorm -> mean over (D, H, W), and its backward: the
// fused pass of problem 27 over a conv output that PyTorch computed (its conv-kept file's whole chain, and its
// all-custom file's PyTorch-conv path). Needs the element_types and hardswish_grad blocks before it. Kernels and
// helpers live in namespace hgm (a file's own kernels may use the same names); the two launchers are global.
namespace hgm {
constexpr int THREADS = 512;          // 16 warps: one channel row each at the benchmark's 16 channels
constexpr int WARPS = THREADS / 32;
constexpr int UNROLL = 4;             // 16-byte loads in flight per lane per step of a row (forward)
constexpr int BWD_UNROLL = 6;         // the backward also stores: more loads in flight per lane (8 spills at 64 registers)

// 16 bytes of elements, loaded or stored at once.
template <typename T> union Pack16 {
    static constexpr int N = 16 / sizeof(T);
    uint4 u;
    T e[N];
};


__device__ __forceinline__ float hardswish(float v) { return v * fminf(fmaxf(v + 3.f, 0.f), 6.f) * (1.f / 6.f); }

__device__ __forceinline__ double warp_sum(double v) {
#pragma unroll
    for (int off = 16; off > 0; off /= 2) v += __shfl_down_sync(0xffffffffu, v, off);
    return v;
}

// A row of elements seen as a scalar head up to its first 16-byte boundary, a body of 16-byte packs and a
// scalar tail. y and grad_y rows start at the same offsets, so one split serves both.
struct RowSplit {
    int head, n16, tail;   // tail: index of the first element after the body
};

template <typename T>
__device__ __forceinline__ RowSplit split_row(const T* row, int S) {
    constexpr int N = Pack16<T>::N;
    const int head = min((int)(((16 - ((uintptr_t)row & 15)) & 15) / sizeof(T)), S);
    const int n16 = (S - head) / N;
    return {head, n16, head + N * n16};
}

// h = hardswish(v), rounded to T as PyTorch's hardswish rounds its output; added to the sums of h and h^2.
template <typename T>
__device__ __forceinline__ void add_hardswish(float v, float& s, float& q) {
    const float h = round_to<T>(hardswish(v));
    s += h;
    q = fmaf(h, h, q);
}

// Sum of h and of its square over one row of S elements, read by one warp with 16-byte loads. Each lane
// adds in float (at most S / 128 terms per accumulator), the warp in double.
template <typename T>
__device__ __forceinline__ void row_sums(const T* __restrict__ row, int S, int lane, double& sum, double& sumsq) {
    const RowSplit sp = split_row(row, S);
    const uint4* body = reinterpret_cast<const uint4*>(row + sp.head);
    float s[UNROLL] = {}, q[UNROLL] = {};
    int i = lane;
    for (; i + 32 * (UNROLL - 1) < sp.n16; i += 32 * UNROLL) {
        Pack16<T> v[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) v[u].u = __ldg(body + i + 32 * u);
#pragma unroll
        for (int u = 0; u < UNROLL; ++u)
#pragma unroll
            for (int e = 0; e < Pack16<T>::N; ++e) add_hardswish<T>(to_float(v[u].e[e]), s[u], q[u]);
    }
    for (; i < sp.n16; i += 32) {
        Pack16<T> v;
        v.u = __ldg(body + i);
#pragma unroll
        for (int e = 0; e < Pack16<T>::N; ++e) add_hardswish<T>(to_float(v.e[e]), s[0], q[0]);
    }
    if (lane < sp.head) add_hardswish<T>(to_float(row[lane]), s[1], q[1]);
    if (sp.tail + lane < S) add_hardswish<T>(to_float(row[sp.tail + lane]), s[2], q[2]);
    double ds = 0.0, dq = 0.0;
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) { ds += s[u]; dq += q[u]; }
    sum = warp_sum(ds);
    sumsq = warp_sum(dq);
}

// Both kernels' grid: (sample, part), a part a run of gpb whole groups, so that a batch smaller than the GPU
// still fills it: parts such that B x parts >= 2 blocks per SM (1 at the benchmark's batch). Each channel's and
// group's sums are added in the same order whatever the split: the same bits for any number of parts.
struct GroupParts {
    int parts, gpb;   // parts of a sample, groups per part
};
static GroupParts group_parts(int B, int G) {
    int device = 0, sms = 132;
    if (cudaGetDevice(&device) != cudaSuccess || cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) !=
                                                     cudaSuccess)
        sms = 132;
    const int want = std::min(G, std::max(1, (2 * sms + B - 1) / B));
    const int gpb = (G + want - 1) / want;
    return {(G + gpb - 1) / gpb, gpb};
}

// Forward: a block per (sample, part of the groups). Writes out (B, C) and the statistics the backward needs.
// T: the conv output's element type; TO: the GroupNorm's (its parameters and the output).
template <typename T, typename TO>
__global__ void __launch_bounds__(THREADS) hardswish_gn_mean_kernel(
    const T* __restrict__ y,              // (B, C, S) conv output, contiguous
    const TO* __restrict__ gn_weight,     // (C)
    const TO* __restrict__ gn_bias,       // (C)
    TO* __restrict__ out,                 // (B, C)
    double* __restrict__ stats,           // (B, C + 2G): m_c, then mu_g, then rstd_g
    int C, int G, int S, double eps, int gpb)
{
    extern __shared__ double sums[];      // [0, C): sum of h per channel, [C, 2C): sum of h^2 (the part's slots)
    const int b = blockIdx.x, warp = threadIdx.x / 32, lane = threadIdx.x % 32, cpg = C / G;
    const int c0 = blockIdx.y * gpb * cpg, c1 = min(C, c0 + gpb * cpg);   // the part's channels: whole groups
    for (int c = c0 + warp; c < c1; c += WARPS) {
        double s, q;
        row_sums(y + ((size_t)b * C + c) * S, S, lane, s, q);
        if (lane == 0) { sums[c] = s; sums[C + c] = q; }
    }
    __syncthreads();
    const double n_group = (double)S * cpg;
    double* st = stats + (size_t)b * (C + 2 * G);
    for (int c = c0 + threadIdx.x; c < c1; c += THREADS) {
        const int g = c / cpg;
        double s = 0.0, q = 0.0;
        for (int j = g * cpg; j < (g + 1) * cpg; ++j) { s += sums[j]; q += sums[C + j]; }
        const double mu = s / n_group;
        const double rstd = 1.0 / sqrt(fmax(q / n_group - mu * mu, 0.0) + eps);
        const double m = sums[c] / S;
        if (std::is_same<TO, float>::value) {
            out[(size_t)b * C + c] = from_float<TO>((float)(to_float(gn_weight[c]) * (m - mu) * rstd + to_float(gn_bias[c])));
        } else {   // the mean of GroupNorm's a h + b (its rounding per element averages out over the mean)
            const float2 ab = half_gn_affine<TO>(mu, rstd, to_float(gn_weight[c]), to_float(gn_bias[c]));
            out[(size_t)b * C + c] = from_float<TO>((float)(ab.x * m + ab.y));
        }
        st[c] = m;
        if (c % cpg == 0) { st[C + g] = mu; st[C + G + g] = rstd; }
    }
}

// Backward: a block per (sample, part of the groups). Forms A_c, B_g (see the file's docstring) in shared
// memory, then streams y once and writes grad_y (in y's element type, for PyTorch's convolution backward)
// once. Also writes this sample's dgamma/dbeta terms.
template <typename T, typename TO>
__global__ void __launch_bounds__(THREADS, 2) hardswish_gn_mean_backward_kernel(   // 2 blocks/SM: <= 64 registers
    const TO* __restrict__ grad_out,      // (B, C)
    const T* __restrict__ y,              // (B, C, S)
    const TO* __restrict__ gn_weight,     // (C)
    const double* __restrict__ stats,     // (B, C + 2G), from the forward
    T* __restrict__ grad_y,               // (B, C, S)
    double* __restrict__ param_terms,     // (B, 2C): g_c (m_c - mu) rstd, then g_c
    int C, int G, int S, int gpb)
{
    extern __shared__ float coef[];       // [0, C): A_c, [C, C + G): B_g, [C + G, C + 2G): mu_g (the part's slots)
    const int b = blockIdx.x, cpg = C / G;
    const int c0 = blockIdx.y * gpb * cpg, c1 = min(C, c0 + gpb * cpg);   // the part's channels: whole groups
    const double* st = stats + (size_t)b * (C + 2 * G);
    const TO* g = grad_out + (size_t)b * C;
    const double n_group = (double)S * cpg;
    for (int c = c0 + threadIdx.x; c < c1; c += THREADS) {
        const int grp = c / cpg;
        const double mu = st[C + grp], rstd = st[C + G + grp];
        double g1 = 0.0, g2 = 0.0;
        for (int j = grp * cpg; j < (grp + 1) * cpg; ++j) {
            const double gg = (double)to_float(g[j]) * to_float(gn_weight[j]);
            g1 += gg;
            g2 += gg * (st[j] - mu);
        }
        const double gc = to_float(g[c]);
        coef[c] = (float)(rstd * (gc * to_float(gn_weight[c]) / S - g1 / n_group));
        if (c % cpg == 0) {
            coef[C + grp] = (float)(-rstd * rstd * rstd * g2 / n_group);
            coef[C + G + grp] = (float)mu;
        }
        param_terms[(size_t)b * 2 * C + c] = gc * (st[c] - mu) * rstd;
        param_terms[(size_t)b * 2 * C + C + c] = gc;
    }
    __syncthreads();
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    for (int c = c0 + warp; c < c1; c += WARPS) {
        const float a = coef[c], bg = coef[C + c / cpg], mu = coef[C + G + c / cpg];
        const auto grad = [=](T e) {
            const float v = to_float(e);
            return from_float<T>(fmaf(bg, round_to<T>(hardswish(v)) - mu, a) * hardswish_grad(v));
        };
        const size_t base = ((size_t)b * C + c) * S;
        const T* row = y + base;
        T* grow = grad_y + base;
        const RowSplit sp = split_row(row, S);
        const uint4* body = reinterpret_cast<const uint4*>(row + sp.head);
        uint4* gbody = reinterpret_cast<uint4*>(grow + sp.head);
        // y is read once and grad_y written once here: streaming (evict-first) loads and stores.
        int i = lane;
        for (; i + 32 * (BWD_UNROLL - 1) < sp.n16; i += 32 * BWD_UNROLL) {
            Pack16<T> v[BWD_UNROLL];
#pragma unroll
            for (int u = 0; u < BWD_UNROLL; ++u) v[u].u = __ldcs(body + i + 32 * u);
#pragma unroll
            for (int u = 0; u < BWD_UNROLL; ++u) {
#pragma unroll
                for (int e = 0; e < Pack16<T>::N; ++e) v[u].e[e] = grad(v[u].e[e]);
                __stcs(gbody + i + 32 * u, v[u].u);
            }
        }
        for (; i < sp.n16; i += 32) {
            Pack16<T> v;
            v.u = __ldcs(body + i);
#pragma unroll
            for (int e = 0; e < Pack16<T>::N; ++e) v.e[e] = grad(v.e[e]);
            __stcs(gbody + i, v.u);
        }
        if (lane < sp.head) grow[lane] = grad(row[lane]);
        if (sp.tail + lane < S) grow[sp.tail + lane] = grad(row[sp.tail + lane]);
    }
}

// dgamma, dbeta: the per-sample terms added over the batch in a fixed order.
template <typename TO>
__global__ void gn_param_grad_kernel(const double* __restrict__ param_terms,  // (B, 2C)
                                     TO* __restrict__ grad_weight,            // (C)
                                     TO* __restrict__ grad_bias,              // (C)
                                     int B, int C)
{
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= 2 * C) return;
    double s = 0.0;
    for (int b = 0; b < B; ++b) s += param_terms[(size_t)b * 2 * C + c];
    if (c < C) grad_weight[c] = from_float<TO>((float)s); else grad_bias[c - C] = from_float<TO>((float)s);
}
}  // namespace hgm

// Dtype codes: see with_type. y and grad_y in the conv's type, the rest in the GroupNorm's.
cudaError_t hardswish_gn_mean_forward_launch(const void* y, const void* gn_weight, const void* gn_bias, void* out,
                                             double* stats, int conv_type, int norm_type, int B, int C, int G, int S,
                                             double eps, cudaStream_t stream) {
    return with_types(conv_type, norm_type, [&](auto t, auto to) {
        using T = decltype(t);
        using TO = decltype(to);
        const hgm::GroupParts gp = hgm::group_parts(B, G);
        hgm::hardswish_gn_mean_kernel<T, TO><<<dim3(B, gp.parts), hgm::THREADS, 2 * C * sizeof(double), stream>>>(
            static_cast<const T*>(y), static_cast<const TO*>(gn_weight), static_cast<const TO*>(gn_bias),
            static_cast<TO*>(out), stats, C, G, S, eps, gp.gpb);
        return cudaGetLastError();
    });
}

cudaError_t hardswish_gn_mean_backward_launch(const void* grad_out, const void* y, const void* gn_weight,
                                              const double* stats, void* grad_y, double* param_terms,
                                              void* grad_weight, void* grad_bias, int conv_type, int norm_type,
                                              int B, int C, int G, int S, cudaStream_t stream) {
    return with_types(conv_type, norm_type, [&](auto t, auto to) {
        using T = decltype(t);
        using TO = decltype(to);
        const hgm::GroupParts gp = hgm::group_parts(B, G);
        hgm::hardswish_gn_mean_backward_kernel<T, TO><<<dim3(B, gp.parts), hgm::THREADS, (C + 2 * G) * sizeof(float), stream>>>(
            static_cast<const TO*>(grad_out), static_cast<const T*>(y), static_cast<const TO*>(gn_weight), stats,
            static_cast<T*>(grad_y), param_terms, C, G, S, gp.gpb);
        cudaError_t err = cudaGetLastError();
        if (err != cudaSuccess) return err;
        hgm::gn_param_grad_kernel<TO><<<(2 * C + 255) / 256, 256, 0, stream>>>(
            param_terms, static_cast<TO*>(grad_weight), static_cast<TO*>(grad_bias), B, C);
        return cudaGetLastError();
    });
}
// shared: hardswish_gn_mean end

static Dims make_dims(int B, int C_in, int C_out, int D, int H, int W, int K) {
    Dims d;
    d.B = B; d.C_in = C_in; d.C_out = C_out; d.D = D; d.H = H; d.W = W;
    d.Do = D - K + 1; d.Ho = H - K + 1; d.Wo = W - K + 1;
    d.quads = (d.Wo + PW - 1) / PW;
    d.out_units = (long long)d.Do * d.Ho * d.quads;
    return d;
}

static int out_blocks_per_sample(const Dims& d) { return (int)((d.out_units + THREADS - 1) / THREADS); }

// ---- The plan: which path an input takes, decided here once a call (conv3d_hardswish_gn_mean_make_plan) for the
// forward, the backward, the workspace and plan() (the C++ operator and ModelNew.plan read the Plan, nothing else).
// FUSED: the conv ours, its output never written: a cubic kernel of 3 or 4 and either the tensor-core kernels'
// bounds (tc_forward: W <= 32, C_in K^2 <= 64) or, past them, at most PLAIN_MAX_C_IN input channels (the plain
// FP32 conv_hswish_sums_kernel: the conv memory-bound, cuDNN's exact fp32 conv far slower).
// TILED: float32, at most TILED_MAX_C_IN input channels, any other kernel: conv_hswish_sums_general_kernel and the
// tiled gradients (H200, 64x3x16x32x32, kernel 5: forward 2x, forward + backward 7x faster than PyTorch's conv path,
// whose float32 gradients of so few channels are slow).
// TORCH_CONV: everywhere else, PyTorch's conv (cuDNN, the user's flags and dtype) and then the file's chain over its
// output: the pass of the conv-kept file (hardswish_gn_mean block), forward and backward. From 8 input channels the
// conv is compute-bound and cuDNN beats any conv of ours, and in half precision it beats the tiled backward 2x
// (docs/conv3d_hardswish_groupnorm_mean_all_custom.md).
bool tuned_kernel(int kd, int kh, int kw) { return kd == kh && kh == kw && (kd == 3 || kd == 4); }
static Path forward_path(int C_in, int C_out, int W, int kd, int kh, int kw, bool half) {
    if (tuned_kernel(kd, kh, kw) &&
        (tc_forward(make_dims(1, C_in, C_out, kd, kd, W, kd), kd) || C_in <= PLAIN_MAX_C_IN))
        return Path::FUSED;
    return !half && C_in <= TILED_MAX_C_IN && !tuned_kernel(kd, kh, kw) ? Path::TILED : Path::TORCH_CONV;
}
Path conv3d_hardswish_gn_mean_path(int C_in, int C_out, int W, int kd, int kh, int kw, bool half) {
    return forward_path(C_in, C_out, W, kd, kh, kw, half);
}
// The backward, stage by stage. dL/dy: TC, the forward's tensor-core conv (conv_rows_tc_kernel, GRAD) where
// tc_forward holds; TILED, grad_y_general_kernel, in float32 with at most TILED_MAX_C_IN channels (the fused plain
// path and the tiled one); else TORCH: the chain's backward over y (saved by the forward on PyTorch's conv path,
// recomputed by PyTorch's conv after the fused plain path in half precision), then PyTorch's convolution backward.
// dL/dx and dL/dW after a TC or TILED dL/dy: the tensor-core kernel where its bounds hold (tc_input_grad; rows of
// the float input as vector loads), else the tiled kernel in float32, else PyTorch's convolution backward.
// dy_stage from the forward's path and conv (TC exactly where the forward's is the tensor-core one); grad_stage, dL/dx
// or dL/dW after dL/dy y, with `tc` that kernel's bounds. dL/dx is STREAM (grad_input_stream_kernel, a block a sample,
// each dL/dy value loaded once) in place of TC where its bounds hold and the samples, its blocks, fill the GPU: kernel
// 3 from half the SMs' worth (2 B >= SMs, problem 23's rule; 0.87 to 0.91x the time at batch 256, every mode); kernel
// 4 from five sixths (6 B >= 5 SMs: the crossovers lie between 66 and 80 samples in float32, 96 and 112 in half
// precision) and where a step takes at most two products (tf32: float32 under allow_tf32, one; half precision, two).
// H200, benchmark, forward + backward against TC: 0.87x the time under allow_tf32 (dL/dx 2.83 -> 1.92 ms), 0.96x in
// bf16 and fp16; float32 with the flag off (three products, its accumulators spilled) 1.10x, so TC there.
static Stage dy_stage(Path path, bool tc, bool half) {
    return tc ? Stage::TC : path != Path::TORCH_CONV && !half ? Stage::TILED : Stage::TORCH;
}
static Stage grad_stage(Stage y, bool tc, bool half, int C_in) {
    if (y == Stage::TC && tc) return Stage::TC;
    return y != Stage::TORCH && !half && C_in <= TILED_MAX_C_IN ? Stage::TILED : Stage::TORCH;
}

// One call's plan, every stage decided here once. x_misalign: the conv input's address modulo 16 as the operator
// passes it (a contiguous tensor; 0 for a copy). Rows of x as 16-byte (half: 8-byte) loads need W a multiple of 4
// and x aligned to 4 elements; the backward's float input is a copy in half precision (aligned).
Plan conv3d_hardswish_gn_mean_make_plan(int B, int C_in, int C_out, int D, int H, int W, int kd, int kh, int kw,
                                        bool half, int x_misalign, int sms, bool tf32) {
    const Dims d = make_dims(B, C_in, C_out, D, H, W, kd);
    Plan p{forward_path(C_in, C_out, W, kd, kh, kw, half), false, false, Stage::TORCH, Stage::TORCH, Stage::TORCH,
           false};
    p.tc = p.path == Path::FUSED && tc_forward(d, kd);
    p.vec = W % 4 == 0 && x_misalign % (half ? 8 : 16) == 0;
    p.vec_bwd = W % 4 == 0 && (half || x_misalign == 0);
    p.dy = dy_stage(p.path, p.tc, half);
    p.dx = grad_stage(p.dy, tc_input_grad(d, kd), half, C_in);
    if (p.dx == Stage::TC && stream_input_grad(kd, d) && (kd == 3 ? 2 * B >= sms : 6 * B >= 5 * sms && (half || tf32)))
        p.dx = Stage::STREAM;
    p.dw = grad_stage(p.dy, p.vec_bwd, half, C_in);
    return p;
}
// The tiled path's dims and blocks per sample (a thread an output position).
static Dims general_dims(int B, int C_in, int C_out, int D, int H, int W, Kernel3 k) {
    Dims d = make_dims(B, C_in, C_out, D, H, W, 1);
    d.Do = D - k.d + 1; d.Ho = H - k.h + 1; d.Wo = W - k.w + 1;
    return d;
}
static int general_bps(const Dims& d) { return (int)(((long long)d.Do * d.Ho * d.Wo + THREADS - 1) / THREADS); }
static Dims path_dims(const Plan& p, int B, int C_in, int C_out, int D, int H, int W, int kd, int kh, int kw) {
    return p.path == Path::FUSED ? make_dims(B, C_in, C_out, D, H, W, kd)
                                 : general_dims(B, C_in, C_out, D, H, W, {kd, kh, kw});
}
// Blocks per (sample, channel chunk) of the forward: each writes one set of partial sums.
static int path_bps(const Plan& p, const Dims& d) {
    return p.path != Path::FUSED ? general_bps(d) : p.tc ? tc_parts(d) : out_blocks_per_sample(d);
}

// The fused and tiled forwards' partials (doubles).
long long forward_workspace_doubles(const Plan& plan, int B, int C_in, int C_out, int D, int H, int W, int kd, int kh,
                                    int kw) {
    const Dims d = path_dims(plan, B, C_in, C_out, D, H, W, kd, kh, kw);
    return (long long)B * ((C_out + CO - 1) / CO) * path_bps(plan, d) * 2 * CO;
}

// The fused and tiled forwards. Dtype codes: see with_types; x and the conv's parameters in the conv's type, the
// rest in the GroupNorm's.
cudaError_t forward_launch(const Plan& plan, const void* x_in, const void* weight_in, const void* bias_in,
                           const void* gn_weight, const void* gn_bias, double* partials, void* out, double* stats,
                           int conv_type, int norm_type, int B, int C_in, int C_out, int G, int D, int H, int W,
                           int kd, int kh, int kw, double eps, cudaStream_t stream) {
    return with_types(conv_type, norm_type, [&](auto t, auto to) {
        using T = decltype(t);
        using TO = decltype(to);
        const T* x = static_cast<const T*>(x_in);
        const T* weight = static_cast<const T*>(weight_in);
        const T* bias = static_cast<const T*>(bias_in);
        const int K = kd;
        const Dims d = path_dims(plan, B, C_in, C_out, D, H, W, kd, kh, kw);
        const bool tuned = plan.path == Path::FUSED, tc = plan.tc, vec = plan.vec;
        const int bps = path_bps(plan, d);
        const dim3 grid((unsigned)((long long)B * bps), (C_out + CO - 1) / CO);
        if (!tuned) {   // the tiled path: float32 only (forward_path), so no half instantiation
            if constexpr (!is_half<T>())
                conv_hswish_sums_general_kernel<T><<<grid, THREADS, 0, stream>>>(x, weight, bias, partials, d,
                                                                                 Kernel3{kd, kh, kw}, bps);
        } else if (tc) {
            if constexpr (is_half<T>()) {
                const auto kernel = K == 3 ? (vec ? conv_rows_half_kernel<3, T, true> : conv_rows_half_kernel<3, T, false>)
                                           : (vec ? conv_rows_half_kernel<4, T, true> : conv_rows_half_kernel<4, T, false>);
                kernel<<<grid, THREADS, 0, stream>>>(x, weight, bias, partials, d, bps);
            } else if (K == 3) {
                conv_rows_tc_kernel<3, false><<<grid, THREADS, 0, stream>>>(x, weight, bias, nullptr, nullptr, partials,
                                                                            d, bps, vec);
            } else {
                conv_rows_tc_kernel<4, false><<<grid, THREADS, 0, stream>>>(x, weight, bias, nullptr, nullptr, partials,
                                                                            d, bps, vec);
            }
        }
        else if (K == 3) conv_hswish_sums_kernel<3, T><<<grid, THREADS, 0, stream>>>(x, weight, bias, partials, d, bps);
        else conv_hswish_sums_kernel<4, T><<<grid, THREADS, 0, stream>>>(x, weight, bias, partials, d, bps);
        cudaError_t err = cudaGetLastError();
        if (err != cudaSuccess) return err;
        gn_mean_finalize_kernel<TO><<<B, 128, 2 * C_out * sizeof(double), stream>>>(
            partials, static_cast<const TO*>(gn_weight), static_cast<const TO*>(gn_bias), static_cast<TO*>(out), stats,
            d, G, bps, eps);
        return cudaGetLastError();
    });
}

// Workspace (doubles): coef (B, C, 3) floats rounded up to doubles, param terms (B, 2C), bias partials,
// weight-gradient partials.
// grad_weight_tc_kernel's blocks (grid x): 2 per SM resident (a wave), shared by the chunks.
static int wgt_blocks(const Dims& d, int sms) { return std::max(1, 2 * sms / ((d.C_out + CO - 1) / CO)); }
int grad_y_tail() { return GI_TAIL; }
long long backward_workspace_doubles(const Plan& plan, int B, int C_in, int C_out, int D, int H, int W, int kd,
                                     int kh, int kw, int sms) {
    const Dims dt = make_dims(B, C_in, C_out, D, H, W, kd);
    const Dims dg = general_dims(B, C_in, C_out, D, H, W, {kd, kh, kw});
    const bool tc_y = plan.dy == Stage::TC;
    const int chunks = (C_out + CO - 1) / CO, bps = tc_y ? tc_parts(dt) : general_bps(dg);
    const long long common = ((long long)B * C_out * 3 + 1) / 2 + (long long)B * 2 * C_out + (long long)B * chunks * bps * CO;
    switch (plan.dw) {
    case Stage::TC:
        return common + (long long)wgt_blocks(dt, sms) * chunks * wgt_groups(C_in * kd * kd) * CO * WGT_DEPTHS * kd;
    case Stage::TILED:
        return common + (long long)wgrad_grid(dg, {kd, kh, kw}, sms).z * C_out * C_in * kd * kh * kw;
    default:
        return common;
    }
}

// The backward after a TC or TILED dL/dy (the plan's dy), in float32 (half precision: on float copies, exact); dL/dy
// written to grad_y. grad_x / grad_weight null: not wanted here (or PyTorch's: the caller's). tf32 (allow_tf32,
// float32): the tensor-core dL/dx and dL/dW take one TF32 product a step, as PyTorch's conv backward does under the
// flag (docs/DESIGN.md); the tiled kernels stay exact. half: the inputs are float copies of half tensors (the
// streamed dL/dx skips the products of the weights' small parts, which are zero).
cudaError_t backward_launch(const Plan& plan, const float* grad_out, const float* x, const float* weight,
                            const float* bias, const float* gn_weight, const double* stats, double* work,
                            float* grad_y, float* grad_x, float* grad_weight, float* grad_bias, float* grad_gn_weight,
                            float* grad_gn_bias, int B, int C_in, int C_out, int G, int D, int H, int W, int kd,
                            int kh, int kw, bool tf32, bool half, int sms, cudaStream_t stream) {
    const int K = kd;
    const Kernel3 k{kd, kh, kw};
    const Dims dt = make_dims(B, C_in, C_out, D, H, W, K);   // the tensor-core kernels' dims (a cubic kernel K)
    const Dims dg = general_dims(B, C_in, C_out, D, H, W, k);
    const bool tc_y = plan.dy == Stage::TC;
    const int bps = tc_y ? tc_parts(dt) : general_bps(dg), chunks = (C_out + CO - 1) / CO;
    float* coef = reinterpret_cast<float*>(work);
    double* param_terms = work + ((long long)B * C_out * 3 + 1) / 2;
    double* b_partials = param_terms + (long long)B * 2 * C_out;
    double* w_partials = b_partials + (long long)B * chunks * bps * CO;
    cudaError_t err;
    gn_mean_backward_coef_kernel<<<B, 128, 0, stream>>>(grad_out, gn_weight, stats, coef, param_terms, dg, G);
    if ((err = cudaGetLastError()) != cudaSuccess) return err;
    // dL/dy and its per-block channel sums
    const dim3 grid_y((unsigned)((long long)B * bps), chunks);
    if (tc_y) {
        const auto kernel = K == 3 ? conv_rows_tc_kernel<3, true> : conv_rows_tc_kernel<4, true>;
        kernel<<<grid_y, THREADS, 0, stream>>>(x, weight, bias, coef, grad_y, b_partials, dt, bps, plan.vec_bwd);
    } else {
        grad_y_general_kernel<<<grid_y, THREADS, 0, stream>>>(x, weight, bias, coef, grad_y, b_partials, dg, k, bps);
    }
    if ((err = cudaGetLastError()) != cudaSuccess) return err;
    // dL/dx: the conv's transpose of dL/dy
    const Stage dx = plan.dx;
    if (grad_x != nullptr && dx == Stage::STREAM) {
        err = K == 3 ? launch_grad_input_stream<3>(grad_y, weight, grad_x, dt, tf32, half, stream)
                     : launch_grad_input_stream<4>(grad_y, weight, grad_x, dt, tf32, half, stream);
        if (err != cudaSuccess) return err;
    } else if (grad_x != nullptr && dx == Stage::TC) {
        const auto kernel = tf32 ? (K == 3 ? grad_input_tc_kernel<3, true> : grad_input_tc_kernel<4, true>)
                                 : (K == 3 ? grad_input_tc_kernel<3, false> : grad_input_tc_kernel<4, false>);
        int per_sm = 0;   // one wave of resident blocks
        if ((err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, 32 * GI_WARPS, 0)) != cudaSuccess)
            return err;
        kernel<<<std::max(1, per_sm) * sms, 32 * GI_WARPS, 0, stream>>>(grad_y, weight, grad_x, dt);
    } else if (grad_x != nullptr && dx == Stage::TILED) {   // dL/dy (C_out channels, Do x Ho x Wo) in, C_in out
        const int cot = C_in <= 4 ? 4 : 8, th = 2 * TILE_H;
        FlipConv t{C_out, C_in, dg.Do, dg.Ho, dg.Wo, 1, k, cot, th};
        t.ci_t = (int)std::max<size_t>(1, std::min<size_t>((size_t)C_out, (40u << 10) / t.smem_bytes()));
        const long long tiles = (long long)D * ((H + th - 1) / th) * ((W + TILE_W - 1) / TILE_W);
        const auto kernel = cot == 4 ? grad_input_tiled_kernel<4, 4> : grad_input_tiled_kernel<8, 4>;
        if (t.smem_bytes() > (40u << 10) &&
            (err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)t.smem_bytes())) !=
                cudaSuccess)
            return err;
        kernel<<<dim3((unsigned)(tiles * B), (C_in + cot - 1) / cot), GEN_THREADS, t.smem_bytes(), stream>>>(
            grad_y, weight, grad_x, t);
    }
    if ((err = cudaGetLastError()) != cudaSuccess) return err;
    // dL/dW: partials, then their sums in order
    const long long n_w = (long long)C_out * C_in * kd * kh * kw;
    const Stage dw = plan.dw;
    if (grad_weight != nullptr && dw == Stage::TC) {
        const int n_blocks = wgt_blocks(dt, sms), threads = 32 * WGT_RPB * wgt_groups(C_in * K * K);
        const unsigned w_grid = (unsigned)((n_w + 127) / 128);
        const auto kernel = tf32 ? (K == 3 ? grad_weight_tc_kernel<3, true> : grad_weight_tc_kernel<4, true>)
                                 : (K == 3 ? grad_weight_tc_kernel<3, false> : grad_weight_tc_kernel<4, false>);
        kernel<<<dim3(n_blocks, chunks), threads, 0, stream>>>(grad_y, x, w_partials, dt);
        if ((err = cudaGetLastError()) != cudaSuccess) return err;
        if (K == 3) finish_weight_grad_tc_kernel<3><<<w_grid, 128, 0, stream>>>(w_partials, grad_weight, dt, n_blocks);
        else finish_weight_grad_tc_kernel<4><<<w_grid, 128, 0, stream>>>(w_partials, grad_weight, dt, n_blocks);
    } else if (grad_weight != nullptr && dw == Stage::TILED) {
        const dim3 grid = wgrad_grid(dg, k, sms);
        const size_t smem = wgrad_smem_bytes(C_in, k);
        if (smem > (40u << 10) &&
            (err = cudaFuncSetAttribute(grad_weight_tiled_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        (int)smem)) != cudaSuccess)
            return err;
        grad_weight_tiled_kernel<<<grid, GEN_THREADS, smem, stream>>>(grad_y, x, w_partials, dg, k, (int)grid.z);
        if ((err = cudaGetLastError()) != cudaSuccess) return err;
        finish_weight_grad_tiled_kernel<<<(unsigned)((n_w + 255) / 256), 256, 0, stream>>>(w_partials, grad_weight,
                                                                                           n_w, (int)grid.z);
    }
    if ((err = cudaGetLastError()) != cudaSuccess) return err;
    finish_channel_grads_kernel<<<dim3(C_out, 3), SUM_THREADS, 0, stream>>>(b_partials, param_terms, grad_bias,
                                                                            grad_gn_weight, grad_gn_bias, dg, bps);
    return cudaGetLastError();
}

// The launch plan for an input: each stage's kernel and the rule that picked it, from the Plan the launchers read
// (conv3d_hardswish_gn_mean_make_plan). conv_type: the dtype code; x_misalign: the input's address modulo 16 (0 for
// a copy the operator makes: a non-contiguous input). One line a stage, "stage: kernel; rule".
std::string conv3d_hardswish_gn_mean_plan(int B, int C_in, int C_out, int D, int H, int W, int kd, int kh, int kw,
                                          int conv_type, int x_misalign, int sms, bool tf32) {
    const bool half = conv_type != 0;
    const Plan plan = conv3d_hardswish_gn_mean_make_plan(B, C_in, C_out, D, H, W, kd, kh, kw, half, x_misalign, sms,
                                                         tf32);
    const Path path = plan.path;
    const bool tc = plan.tc, vec_fwd = plan.vec;
    const std::string rows = " (rows of x as vector loads: W a multiple of 4 and x aligned)";
    const std::string torch_rule = "PyTorch's conv path: outside the fused envelope (a cubic kernel of 3 or 4, and "
                                   "W <= 32 and C_in K^2 <= 64, or C_in <= " + std::to_string(PLAIN_MAX_C_IN) +
                                   ") and the tiled one (float32, C_in <= " + std::to_string(TILED_MAX_C_IN) + ")";
    std::string s;
    if (path == Path::TORCH_CONV) {
        s += "forward conv: PyTorch's convolution (at::_convolution); " + torch_rule + "\n";
        s += "forward: hardswish_gn_mean_kernel; the chain over PyTorch's conv output\n";
    } else if (path == Path::TILED) {
        s += "forward: conv_hswish_sums_general_kernel; tiled: float32, C_in <= " + std::to_string(TILED_MAX_C_IN) +
             ", a kernel other than cubic 3 or 4\n";
    } else if (tc && half) {
        s += std::string("forward: conv_rows_half_kernel<") + (vec_fwd ? "VEC" : "element loads") + ">; fused "
             "(a cubic kernel of 3 or 4), W <= 32, C_in K^2 <= 64: 16-bit MMA" + (vec_fwd ? rows : "") + "\n";
    } else if (tc) {
        s += std::string("forward: conv_rows_tc_kernel") + "; fused (a cubic kernel of 3 or 4), W <= 32, C_in K^2 <= "
             "64: split TF32 on the tensor cores" + (vec_fwd ? rows : "") + "\n";
    } else {
        s += "forward: conv_hswish_sums_kernel; fused kernel size, W > 32 or C_in K^2 > 64, C_in <= " +
             std::to_string(PLAIN_MAX_C_IN) + ": plain FP32\n";
    }
    if (path != Path::TORCH_CONV) s += "forward finish: gn_mean_finalize_kernel; always\n";
    const Stage y = plan.dy;
    if (y == Stage::TORCH) {
        s += std::string("backward conv: ") + (path == Path::FUSED ? "PyTorch's convolution (at::_convolution) "
                                                                     "recomputes y; half precision past the "
                                                                     "tensor-core bounds\n"
                                                                   : "the forward's saved output (PyTorch's conv path)\n");
        s += "backward chain: hardswish_gn_mean_backward_kernel + gn_param_grad_kernel; dL/dy over y\n";
        s += "backward dL/dx, dL/dW: PyTorch's convolution backward (at::convolution_backward); on dL/dy\n";
        return s;
    }
    s += "backward coefficients: gn_mean_backward_coef_kernel; always\n";
    s += y == Stage::TC ? "backward dL/dy: conv_rows_tc_kernel (GRAD); as the forward's tensor-core path\n"
                        : "backward dL/dy: grad_y_general_kernel; float32, C_in <= " + std::to_string(TILED_MAX_C_IN) +
                              ", the tensor-core bounds do not hold\n";
    const std::string torch_bwd = "PyTorch's convolution backward (at::convolution_backward); ";
    switch (plan.dx) {
    case Stage::STREAM:
        s += "backward dL/dx: grad_input_stream_kernel; tc_input_grad's bounds, C_in <= 3, C_out <= 32, the samples "
             "fill the GPU (kernel 3: 2 B >= SMs; kernel 4: 6 B >= 5 SMs and at most two products a step, not "
             "float32 with allow_tf32 off)\n";
        break;
    case Stage::TC:
        s += "backward dL/dx: grad_input_tc_kernel; tc_input_grad (the forward's bounds, C_in <= 4, its depth bound), "
             "not the streamed path\n";
        break;
    case Stage::TILED:
        s += std::string("backward dL/dx: grad_input_tiled_kernel<") + (C_in <= 4 ? "4" : "8") + ">; float32, past "
             "tc_input_grad's bounds\n";
        break;
    default:
        s += "backward dL/dx: " + torch_bwd + "half precision, past tc_input_grad's bounds\n";
    }
    switch (plan.dw) {
    case Stage::TC:
        s += "backward dL/dW: grad_weight_tc_kernel + finish_weight_grad_tc_kernel; rows of vector loads\n";
        break;
    case Stage::TILED:
        s += "backward dL/dW: grad_weight_tiled_kernel + finish_weight_grad_tiled_kernel; float32, not the "
             "tensor-core kernel's bounds\n";
        break;
    default:
        s += "backward dL/dW: " + torch_bwd + "half precision, rows not vector loads\n";
    }
    s += "backward channel gradients: finish_channel_grads_kernel; always\n";
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

long long forward_workspace_doubles(const Plan& plan, int B, int C_in, int C_out, int D, int H, int W, int kd, int kh,
                                    int kw);
cudaError_t forward_launch(const Plan& plan, const void* x, const void* weight, const void* bias,
                           const void* gn_weight, const void* gn_bias, double* partials, void* out, double* stats,
                           int conv_type, int norm_type, int B, int C_in, int C_out, int G, int D, int H, int W,
                           int kd, int kh, int kw, double eps, cudaStream_t stream);
Path conv3d_hardswish_gn_mean_path(int C_in, int C_out, int W, int kd, int kh, int kw, bool half);
Plan conv3d_hardswish_gn_mean_make_plan(int B, int C_in, int C_out, int D, int H, int W, int kd, int kh, int kw,
                                        bool half, int x_misalign, int sms, bool tf32);
cudaError_t hardswish_gn_mean_forward_launch(const void* y, const void* gn_weight, const void* gn_bias, void* out,
                                             double* stats, int conv_type, int norm_type, int B, int C, int G, int S,
                                             double eps, cudaStream_t stream);
cudaError_t hardswish_gn_mean_backward_launch(const void* grad_out, const void* y, const void* gn_weight,
                                              const double* stats, void* grad_y, double* param_terms,
                                              void* grad_weight, void* grad_bias, int conv_type, int norm_type,
                                              int B, int C, int G, int S, cudaStream_t stream);
cudaError_t convert_launch(const void* in, int in_type, void* out, int out_type, long long n, cudaStream_t stream);
long long backward_workspace_doubles(const Plan& plan, int B, int C_in, int C_out, int D, int H, int W, int kd,
                                     int kh, int kw, int sms);
int grad_y_tail();
std::string conv3d_hardswish_gn_mean_plan(int B, int C_in, int C_out, int D, int H, int W, int kd, int kh, int kw,
                                          int conv_type, int x_misalign, int sms, bool tf32);
cudaError_t backward_launch(const Plan& plan, const float* grad_out, const float* x, const float* weight,
                            const float* bias, const float* gn_weight, const double* stats, double* work,
                            float* grad_y, float* grad_x, float* grad_weight, float* grad_bias, float* grad_gn_weight,
                            float* grad_gn_bias, int B, int C_in, int C_out, int G, int D, int H, int W, int kd,
                            int kh, int kw, bool tf32, bool half, int sms, cudaStream_t stream);

static void check(cudaError_t err, const char* what) {
    TORCH_CHECK(err == cudaSuccess, "conv3d_hardswish_groupnorm_mean_all_custom: ", what, " failed: ",
                cudaGetErrorString(err));
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

// The forward's path from the conv's channels, kernel and dtype and the input's width alone (the Meta kernel's: a
// symbolic size is specialised only where read; the CUDA kernels read the whole plan, make_plan).
static int64_t static_size(const Tensor& t, int d) { return t.sym_size(d).guard_int(__FILE__, __LINE__); }
static Path path_of(const Tensor& x, const Tensor& weight) {
    return conv3d_hardswish_gn_mean_path((int)static_size(weight, 1), (int)static_size(weight, 0),
                                         (int)static_size(x, 4), (int)static_size(weight, 2),
                                         (int)static_size(weight, 3), (int)static_size(weight, 4),
                                         weight.scalar_type() != at::kFloat);
}
// x's GPU's multiprocessor count.
static int sm_count(const Tensor& x) {
    int sms = 0;
    check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, x.get_device()), "device query");
    return sms;
}
// The plan of a call on a real tensor (x contiguous: its address read for the vector loads) on a GPU of `sms` SMs,
// under the TF32 flag as it is now (the backward reads it again when it runs).
static Plan plan_of(const Tensor& x, const Tensor& weight, int sms) {
    const bool half = weight.scalar_type() != at::kFloat;
    return conv3d_hardswish_gn_mean_make_plan((int)x.size(0), (int)x.size(1), (int)weight.size(0), (int)x.size(2),
                                              (int)x.size(3), (int)x.size(4), (int)weight.size(2),
                                              (int)weight.size(3), (int)weight.size(4), half,
                                              x.is_contiguous() ? (int)(reinterpret_cast<uintptr_t>(x.data_ptr()) % 16)
                                                                : 0, sms, one_tf32_product(x));
}

// The operators (ModelNew checks its input first, with clearer messages): model (differentiable: the
// Autograd kernel at the end), and the forward and backward it calls:
//   forward(x, weight, bias, gn_weight, gn_bias, groups, eps) -> (out (B, C), stats (B, C + 2G) float64, y: PyTorch's
//     conv output (B, C, Do, Ho, Wo) on its path, kept for the backward as eager keeps it; empty on the others);
//   backward(grad_out, x, weight, bias, gn_weight, stats, y, groups, input_grad) -> the gradients of x (if
//     input_grad; else an empty tensor), weight, bias (empty if None), gn_weight and gn_bias.
std::tuple<Tensor, Tensor, Tensor> forward_cuda(const Tensor& input, const Tensor& weight_in, const OptTensor& bias,
                                                const Tensor& gn_weight, const Tensor& gn_bias, int64_t groups,
                                                double eps) {
    TORCH_CHECK(input.is_cuda() && input.dim() == 5, "conv3d_hardswish_groupnorm_mean_all_custom: input must be a "
                "5-D CUDA tensor");
    // Dtypes as the reference takes them: the conv's input and parameters of one floating dtype, the
    // GroupNorm's parameters the same or float32 (torch.autocast's GroupNorm).
    TORCH_CHECK_VALUE(takes_dtype(input), "conv3d_hardswish_groupnorm_mean_all_custom: input must be float32, "
                      "float16 or bfloat16, got ", c10::toString(input.scalar_type()));
    TORCH_CHECK_VALUE(weight_in.scalar_type() == input.scalar_type() &&
                      (!bias.has_value() || bias->scalar_type() == input.scalar_type()),
                      "conv3d_hardswish_groupnorm_mean_all_custom: input is ", c10::toString(input.scalar_type()),
                      " but the conv's parameters are ", c10::toString(weight_in.scalar_type()), ": convert one to "
                      "the other (model.to(dtype)) or run under torch.autocast");
    TORCH_CHECK_VALUE(gn_weight.scalar_type() == gn_bias.scalar_type() &&
                      (gn_weight.scalar_type() == input.scalar_type() || gn_weight.scalar_type() == at::kFloat),
                      "conv3d_hardswish_groupnorm_mean_all_custom: the GroupNorm's parameters must be float32 or "
                      "the input's dtype");
    TORCH_CHECK(input.size(1) == weight_in.size(1) && input.size(2) >= weight_in.size(2) &&
                input.size(3) >= weight_in.size(3) && input.size(4) >= weight_in.size(4),
                "conv3d_hardswish_groupnorm_mean_all_custom: input channels or size do not fit the weight");
    const c10::cuda::CUDAGuard guard(input.device());
    auto x = input.contiguous(), weight = weight_in.contiguous();
    const int64_t B = x.size(0), C = weight.size(0);
    const int kd = (int)weight.size(2), kh = (int)weight.size(3), kw = (int)weight.size(4);
    const int64_t Do = x.size(2) - kd + 1, Ho = x.size(3) - kh + 1, Wo = x.size(4) - kw + 1;
    const Plan plan = plan_of(x, weight, sm_count(x));
    const bool ours = plan.path != Path::TORCH_CONV;
    auto out = at::empty({B, C}, gn_weight.options());
    auto stats = at::empty({B, C + 2 * groups}, x.options().dtype(torch::kFloat64));
    const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
    if (!ours) {   // PyTorch's conv path: its conv, then the chain over its output
        auto y = B == 0 ? at::empty({0, C, Do, Ho, Wo}, x.options())
                        : torch_conv(x, weight, bias, {1, 1, 1}, {0, 0, 0}, false, {0, 0, 0});
        TORCH_CHECK(Do * Ho * Wo < (int64_t(1) << 31), "conv3d_hardswish_groupnorm_mean_all_custom: one channel's "
                    "output must have fewer than 2^31 elements");
        if (B > 0)
            check(hardswish_gn_mean_forward_launch(y.data_ptr(), gn_weight.contiguous().data_ptr(),
                                                   gn_bias.contiguous().data_ptr(), out.data_ptr(),
                                                   stats.data_ptr<double>(), dtype_code(y), dtype_code(gn_weight), B,
                                                   C, groups, Do * Ho * Wo, eps, stream), "forward launch");
        return {out, stats, y};
    }
    auto y = at::empty({0}, x.options());
    if (B == 0) return {out, stats, y};
    auto partials = at::empty({forward_workspace_doubles(plan, B, x.size(1), C, x.size(2), x.size(3), x.size(4), kd,
                                                         kh, kw)},
                              x.options().dtype(torch::kFloat64));
    check(forward_launch(plan, x.data_ptr(), weight.data_ptr(),
                         bias.has_value() ? bias->contiguous().data_ptr() : nullptr, gn_weight.contiguous().data_ptr(),
                         gn_bias.contiguous().data_ptr(), partials.data_ptr<double>(), out.data_ptr(),
                         stats.data_ptr<double>(), dtype_code(x), dtype_code(gn_weight), B, x.size(1), C, groups,
                         x.size(2), x.size(3), x.size(4), kd, kh, kw, eps, stream),
          "forward launch");
    return {out, stats, y};
}

// The backward. PyTorch's conv path (and the fused plain forward in half precision, whose y PyTorch's conv
// recomputes): the chain's backward over y, then PyTorch's convolution backward. Else the tensor-core or tiled
// kernels in float32 (on float copies of half inputs, exact), each gradient rounded to its tensor's dtype, with
// PyTorch's convolution backward for dL/dx or dL/dW where neither serves (half precision).
std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor> backward_cuda(
        const Tensor& grad_out_in, const Tensor& input, const Tensor& weight_in, const OptTensor& bias_in,
        const Tensor& gn_weight_in, const Tensor& stats, const Tensor& y_in, int64_t groups, bool input_grad) {
    const c10::cuda::CUDAGuard guard(input.device());
    const int64_t B = input.size(0), C_in = input.size(1), C = weight_in.size(0);
    const int kd = (int)weight_in.size(2), kh = (int)weight_in.size(3), kw = (int)weight_in.size(4);
    const int64_t D = input.size(2), H = input.size(3), W = input.size(4);
    const int64_t Do = D - kd + 1, Ho = H - kh + 1, Wo = W - kw + 1;
    const bool has_bias = bias_in.has_value() && bias_in->defined();
    if (B == 0)
        return {input_grad ? at::empty_like(input) : at::empty({0}, input.options()), at::zeros_like(weight_in),
                has_bias ? at::zeros_like(*bias_in) : at::empty({0}, weight_in.options()), at::zeros_like(gn_weight_in),
                at::zeros_like(gn_weight_in)};
    const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
    const int sms = sm_count(input);
    const Plan plan = plan_of(input, weight_in, sms);
    if (plan.dy == Stage::TORCH) {
        auto y = y_in.numel() > 0 ? y_in : torch_conv(input, weight_in, bias_in, {1, 1, 1}, {0, 0, 0}, false, {0, 0, 0});
        auto grad_y = at::empty_like(y);
        auto grad_gn_weight = at::empty({C}, gn_weight_in.options()), grad_gn_bias = at::empty({C}, gn_weight_in.options());
        auto param_terms = at::empty({B, 2 * C}, y.options().dtype(torch::kFloat64));
        check(hardswish_gn_mean_backward_launch(
                  grad_out_in.contiguous().data_ptr(), y.data_ptr(), gn_weight_in.contiguous().data_ptr(),
                  stats.data_ptr<double>(), grad_y.data_ptr(), param_terms.data_ptr<double>(),
                  grad_gn_weight.data_ptr(), grad_gn_bias.data_ptr(), dtype_code(y), dtype_code(gn_weight_in), B, C,
                  groups, Do * Ho * Wo, stream), "backward launch");
        auto conv = torch_conv_backward(grad_y, input, weight_in, {1, 1, 1}, {0, 0, 0}, false, {0, 0, 0},
                                        {input_grad, true, has_bias});
        return {input_grad ? std::get<0>(conv) : at::empty({0}, input.options()), std::get<1>(conv),
                has_bias ? std::get<2>(conv) : at::empty({0}, weight_in.options()), grad_gn_weight, grad_gn_bias};
    }
    auto x = converted(input, at::kFloat), weight = converted(weight_in, at::kFloat);
    const auto bias = converted(bias_in, at::kFloat);
    const auto gn_weight = converted(gn_weight_in, at::kFloat), grad_out = converted(grad_out_in, at::kFloat);
    const bool half = input.scalar_type() != at::kFloat;
    const bool ours_x = input_grad && plan.dx != Stage::TORCH, ours_w = plan.dw != Stage::TORCH;
    auto grad_x = ours_x ? at::empty_like(x) : at::empty({0}, x.options());   // every entry written below
    auto grad_weight = ours_w ? at::empty_like(weight) : Tensor();
    auto grad_bias = at::empty({has_bias ? C : 0}, x.options());
    auto grad_gn_weight = at::empty({C}, x.options()), grad_gn_bias = at::empty({C}, x.options());
    // dL/dy (B, C, Do, Ho, Wo) and a tail the input gradient's last row may read past (its columns past Wo).
    auto grad_y = at::empty({B * C * Do * Ho * Wo + grad_y_tail()}, x.options());
    auto work = at::empty({backward_workspace_doubles(plan, B, C_in, C, D, H, W, kd, kh, kw, sms)},
                          x.options().dtype(torch::kFloat64));
    check(backward_launch(plan, grad_out.contiguous().data_ptr<float>(), x.data_ptr<float>(), weight.data_ptr<float>(),
                          has_bias ? bias->data_ptr<float>() : nullptr, gn_weight.contiguous().data_ptr<float>(),
                          stats.data_ptr<double>(), work.data_ptr<double>(), grad_y.data_ptr<float>(),
                          ours_x ? grad_x.data_ptr<float>() : nullptr, ours_w ? grad_weight.data_ptr<float>() : nullptr,
                          has_bias ? grad_bias.data_ptr<float>() : nullptr, grad_gn_weight.data_ptr<float>(),
                          grad_gn_bias.data_ptr<float>(), B, C_in, C, groups, D, H, W, kd, kh, kw,
                          one_tf32_product(input), half, sms, stream), "backward launch");
    auto gx = converted(grad_x, input.scalar_type()), gw = converted(grad_weight, weight_in.scalar_type());
    const bool torch_x = input_grad && !ours_x, torch_w = !ours_w;
    if (torch_x || torch_w) {   // PyTorch's convolution backward on dL/dy in the conv's dtype (as eager's)
        const auto gy = converted(grad_y.narrow(0, 0, B * C * Do * Ho * Wo).view({B, C, Do, Ho, Wo}), input.scalar_type());
        auto r = torch_conv_backward(gy, input, weight_in, {1, 1, 1}, {0, 0, 0}, false, {0, 0, 0},
                                     {torch_x, torch_w, false});
        if (torch_x) gx = std::get<0>(r);
        if (torch_w) gw = std::get<1>(r);
    }
    return {gx, gw, converted(grad_bias, weight_in.scalar_type()), converted(grad_gn_weight, gn_weight_in.scalar_type()),
            converted(grad_gn_bias, gn_weight_in.scalar_type())};
}

// Meta: shapes and dtypes only, in symbolic sizes (torch.compile with dynamic shapes).
std::tuple<Tensor, Tensor, Tensor> forward_meta(const Tensor& x, const Tensor& weight, const OptTensor& bias,
                                                const Tensor& gn_weight, const Tensor& gn_bias, int64_t groups,
                                                double eps) {
    std::vector<c10::SymInt> y_shape{0};
    if (path_of(x, weight) == Path::TORCH_CONV) {
        y_shape = {x.sym_size(0), weight.sym_size(0)};
        for (int d = 2; d < 5; ++d) y_shape.push_back(x.sym_size(d) - weight.sym_size(d) + 1);
    }
    return {at::empty_symint({x.sym_size(0), weight.sym_size(0)}, gn_weight.options()),
            at::empty_symint({x.sym_size(0), weight.sym_size(0) + 2 * groups}, x.options().dtype(torch::kFloat64)),
            at::empty_symint(y_shape, x.options())};
}

std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor> backward_meta(
        const Tensor& grad_out, const Tensor& x, const Tensor& weight, const OptTensor& bias,
        const Tensor& gn_weight, const Tensor& stats, const Tensor& y, int64_t groups, bool input_grad) {
    return {input_grad ? at::empty_like(x) : at::empty({0}, x.options()), at::empty_like(weight),
            bias.has_value() ? at::empty_symint({weight.sym_size(0)}, weight.options()) : at::empty({0}, weight.options()),
            at::empty_like(gn_weight), at::empty_like(gn_weight)};
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
        const Tensor& gn_weight, const Tensor& stats, const Tensor& y, int64_t groups, bool input_grad) {
    auto r = [&] {
        at::AutoDispatchBelowADInplaceOrView below_autograd;
        return backward_op().call(grad_out, x, weight, bias, gn_weight, stats, y, groups, input_grad);
    }();
    refuse_double_backward("conv3d_hardswish_groupnorm_mean_all_custom",
                           {grad_out, x, weight, bias.has_value() ? *bias : Tensor(), gn_weight, y},
                           {&std::get<0>(r), &std::get<1>(r), &std::get<2>(r), &std::get<3>(r), &std::get<4>(r)});
    return r;
}

// model without autograd (inference tensors, no gradient wanted): the forward's output.
Tensor model_plain(const Tensor& x, const Tensor& weight, const OptTensor& bias, const Tensor& gn_weight,
                   const Tensor& gn_bias, int64_t groups, double eps) {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return std::get<0>(forward_op().call(x, weight, bias, gn_weight, gn_bias, groups, eps));
}

// model's Autograd kernel; the backward operator does the rest. Saved for the backward (each a graph input or
// an output of the forward operator, so that CUDA graph pools track them): x, weight, bias (undefined if None),
// gn_weight (the inputs as given); stats (B, C + 2G) float64, each channel's HardSwish mean and each group's
// mean and 1/std; y, PyTorch's conv output on its path (empty on the fused path, whose backward recomputes it).
struct Model : torch::autograd::Function<Model> {
    static Tensor forward(torch::autograd::AutogradContext* ctx, const Tensor& x, const Tensor& weight,
                          const OptTensor& bias, const Tensor& gn_weight, const Tensor& gn_bias, int64_t groups,
                          double eps) {
        at::AutoDispatchBelowADInplaceOrView below_autograd;
        auto r = forward_op().call(x, weight, bias, gn_weight, gn_bias, groups, eps);
        const bool has_bias = bias.has_value() && bias->defined();
        ctx->save_for_backward({x, weight, has_bias ? *bias : Tensor(), gn_weight, std::get<1>(r), std::get<2>(r)});
        ctx->saved_data["groups"] = groups;
        ctx->saved_data["input_grad"] = x.requires_grad();
        return std::get<0>(r);
    }

    static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                   torch::autograd::variable_list grads) {
        const auto s = ctx->get_saved_variables();
        const bool input_grad = ctx->saved_data["input_grad"].toBool();
        auto r = backward_op().call(grads[0], s[0], s[1], s[2].defined() ? OptTensor(s[2]) : OptTensor(), s[3], s[4],
                                    s[5], ctx->saved_data["groups"].toInt(), input_grad);
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

static auto& model_op() {
    static auto op = c10::Dispatcher::singleton().findSchemaOrThrow(OP("model"), "").typed<decltype(model_plain)>();
    return op;
}

// model's Autocast kernel: as torch.autocast runs the reference, the conv in autocast's dtype (input and
// conv parameters cast) and HardSwish in it too (it follows its input), GroupNorm and the mean in float32
// (GroupNorm is on autocast's float32 list).
Tensor model_autocast(const Tensor& x, const Tensor& weight, const OptTensor& bias, const Tensor& gn_weight,
                      const Tensor& gn_bias, int64_t groups, double eps) {
    c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::DispatchKey::AutocastCUDA);
    const auto low = autocast_dtype();
    return model_op().call(autocast_to(x, low), autocast_to(weight, low), autocast_to(bias, low),
                           autocast_to(gn_weight, at::kFloat), autocast_to(gn_bias, at::kFloat), groups, eps);
}

// plan(x_shape, weight_shape, dtype code, x_misalign, sms): each stage's kernel and why (ModelNew.plan), under the
// TF32 flag as it is now.
std::string plan_op(at::IntArrayRef x, at::IntArrayRef w, int64_t conv_type, int64_t x_misalign, int64_t sms) {
    TORCH_CHECK(x.size() == 5 && w.size() == 5, "conv3d_hardswish_groupnorm_mean_all_custom: plan takes 5-D shapes");
    return conv3d_hardswish_gn_mean_plan((int)x[0], (int)x[1], (int)w[0], (int)x[2], (int)x[3], (int)x[4], (int)w[2],
                                         (int)w[3], (int)w[4], (int)conv_type, (int)x_misalign, (int)sms,
                                         conv_type == 0 && allow_tf32_conv());
}

DEFINE_OPS(OPS_NAMESPACE, m) {
    m.def("plan(int[] x_shape, int[] weight_shape, int dtype, int x_misalign, int sms) -> str", plan_op);
    m.def("forward(Tensor x, Tensor weight, Tensor? bias, Tensor gn_weight, Tensor gn_bias, int groups, float eps) "
          "-> (Tensor, Tensor, Tensor)");
    m.def("backward(Tensor grad_out, Tensor x, Tensor weight, Tensor? bias, Tensor gn_weight, Tensor stats, Tensor y, "
          "int groups, bool input_grad) -> (Tensor, Tensor, Tensor, Tensor, Tensor)");
    m.def("model(Tensor x, Tensor weight, Tensor? bias, Tensor gn_weight, Tensor gn_bias, int groups, float eps) "
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
_namespace = "conv3d_hardswish_groupnorm_mean_all_custom_" + hashlib.sha256((cpp_source + cuda_source).encode()).hexdigest()[:12]
if not hasattr(getattr(torch.ops, _namespace), "model"):
    _build("conv3d_hardswish_groupnorm_mean_all_custom", _namespace + ("_mma_sync_ext" if _no_sm90a else "_ext"), _namespace,
           ["-O3"] + (["-gencode=arch=compute_90a,code=sm_90a"] if _hopper else []))
_ops = getattr(torch.ops, _namespace)
_model = _ops.model.default   # an overload, not the packet: a little less host time per call

DTYPES = (torch.float32, torch.float16, torch.bfloat16)   # as the reference takes them (model.to(dtype))


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, num_groups=4, bias=True):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size, bias=bias)
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

    def plan(self, x, sms=None):
        """{stage: "kernel; rule"}: which kernel runs at each stage of the forward and the backward for input x,
        and why, from the decisions the launchers make, under torch.backends.cudnn.allow_tf32 as it is now. sms: the
        GPU's multiprocessor count (default: x's GPU's)."""
        if sms is None:
            sms = torch.cuda.get_device_properties(x.device).multi_processor_count
        misalign = x.data_ptr() % 16 if x.is_cuda and x.is_contiguous() else 0
        text = _ops.plan(list(x.shape), list(self.conv.weight.shape), DTYPES.index(x.dtype), misalign, sms)
        build = ("wgmma in the forward convs, mma.sync in the gradient convs; built for sm_90a (Hopper)" if _hopper else
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
