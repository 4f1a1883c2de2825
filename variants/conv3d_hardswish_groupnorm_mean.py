"""Conv3d -> HardSwish -> GroupNorm -> mean over (D, H, W) (KernelBench level 2, problem 27).

PyTorch's Conv3d stays (the brief keeps it: nn.Conv3d's parameters, computed by at::_convolution inside
our operator under the user's torch.backends.cudnn flags, allow_tf32 included), fed contiguous input
(cuDNN's channels-last path for it is TF32): at the benchmark size cuDNN runs it in fp32 under both
settings, so the file is exact there, as PyTorch is; at wider channel counts it takes TF32 under the
flag as eager's conv does (docs/channel_sweep.md). Everything after it is ours:
  forward (hardswish_gn_mean_kernel, a block per sample, or per run of its groups where the batch is too small
    to fill the GPU): each warp streams whole channel rows of
    the conv output y once, summing h = hardswish(y) and h^2; then
        out[b, c] = gamma_c * (m_c - mu_g) * rstd_g + beta_c,   m_c = mean_s h[c, s],
    with mu_g, rstd_g the group's mean and 1/std. Nothing of y's size is written.
  backward (hardswish_gn_mean_backward_kernel, blocks as the forward's): with N = S * C / G,
        dL/dh[c, s] = A_c + B_g * (h[c, s] - mu_g),
        A_c = rstd * (g_c gamma_c / S - sum_{c' in g} g_c' gamma_c' / N),
        B_g = -rstd^3 / N * sum_{c' in g} g_c' gamma_c' (m_c' - mu_g),
    times hardswish'(y): one read of y, one write of dL/dy. dgamma and dbeta: per-sample terms added
    over the batch in a fixed order by a small kernel; then PyTorch's convolution backward gives the
    conv's gradients (deterministic only with torch.backends.cudnn.deterministic, as in PyTorch).
Saved for backward: x, y (eager keeps both) and per-sample statistics (B, C + 2G) doubles. One path for every
input (ModelNew.plan(x) says so); double backward raises a clear error. The two kernels and their launchers are the
shared hardswish_gn_mean block, the conv calls the torch_conv block: problem 27's all-custom file runs the same
pieces where its plan takes PyTorch's conv.
Operators (TORCH_LIBRARY, namespace: the file's name and a hash of its source): model (CUDA, Meta,
Autograd and AutocastCUDA kernels), the forward and backward it calls, and the two fused kernels alone (run_all's
stages); torch.compile(fullgraph=True) traces it, and Inductor cannot change the conv's precision.

Half precision (float16, bfloat16: model.to(dtype)) and torch.autocast: cuDNN's conv in the dtype, as PyTorch's;
the kernels are templated over the element type: h = hardswish(y) rounded to it as PyTorch rounds it, and the
output from GroupNorm's a m_c + b with its mean and 1/std rounded to the dtype first, as PyTorch's half GroupNorm
stores them (tools/half_rounding.py measures each rounding point); under autocast GroupNorm runs in float32 (its
autocast policy) and so does the output. The backward's dL/dy is in the conv's dtype, for cuDNN's backward.

Floor at the benchmark size (B=1024, 16 channels of 13x29x29): the fused forward reads y, 716 MB
(0.17 ms at 4.2 TB/s); the backward reads y and writes dL/dy, 1.43 GB (0.34 ms). The model's time is
cuDNN's fp32 conv: 10.8 ms of which the fused kernel is 0.26 to 0.28 ms (1.05x to 1.14x its floor at an
H100's copy bandwidth); forward + backward 138 ms, nearly all cuDNN's conv weight gradient. bf16 10.72 ms and
fp16 4.66 ms (cuDNN's conv in each). README's tables; the design page docs/conv3d_hardswish_groupnorm_mean.md.

Run: python variants/conv3d_hardswish_groupnorm_mean.py
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
#include <type_traits>

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
"""

cpp_source = r"""
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

cudaError_t hardswish_gn_mean_forward_launch(const void* y, const void* gn_weight, const void* gn_bias, void* out,
                                             double* stats, int conv_type, int norm_type, int B, int C, int G, int S,
                                             double eps, cudaStream_t stream);
cudaError_t hardswish_gn_mean_backward_launch(const void* grad_out, const void* y, const void* gn_weight,
                                              const double* stats, void* grad_y, double* param_terms,
                                              void* grad_weight, void* grad_bias, int conv_type, int norm_type,
                                              int B, int C, int G, int S, cudaStream_t stream);

static void check(cudaError_t err, const char* what) {
    TORCH_CHECK(err == cudaSuccess, "conv3d_hardswish_groupnorm_mean: ", what, " failed: ", cudaGetErrorString(err));
}

// Dtypes as the reference takes them: the conv's input and parameters of one floating dtype (float32,
// float16 or bfloat16), the GroupNorm's parameters the same or float32 (torch.autocast's GroupNorm). Returns
// (conv code, GroupNorm code).
static std::pair<int, int> checked_dtypes(const Tensor& x, const Tensor& conv_weight, const OptTensor& conv_bias,
                                          const Tensor& gn_weight, const Tensor& gn_bias) {
    TORCH_CHECK_VALUE(takes_dtype(x), "conv3d_hardswish_groupnorm_mean: input must be float32, float16 or bfloat16, "
                      "got ", c10::toString(x.scalar_type()));
    TORCH_CHECK_VALUE(conv_weight.scalar_type() == x.scalar_type() &&
                      (!conv_bias.has_value() || conv_bias->scalar_type() == x.scalar_type()),
                      "conv3d_hardswish_groupnorm_mean: input is ", c10::toString(x.scalar_type()),
                      " but the conv's parameters are ", c10::toString(conv_weight.scalar_type()),
                      ": convert one to the other (model.to(dtype)) or run under torch.autocast");
    TORCH_CHECK_VALUE(gn_weight.scalar_type() == gn_bias.scalar_type() &&
                      (gn_weight.scalar_type() == x.scalar_type() || gn_weight.scalar_type() == at::kFloat),
                      "conv3d_hardswish_groupnorm_mean: the GroupNorm's parameters must be float32 or the input's dtype");
    return {dtype_code(x), dtype_code(gn_weight)};
}

// The operators (ModelNew checks its input first, with clearer
// messages): model (differentiable: the Autograd kernel at the end), forward and backward (the model's,
// conv included), hardswish_gn_mean and hardswish_gn_mean_backward (the fused kernels alone). stats
// (B, C + 2G) float64: per channel the mean m_c of hardswish(y), then per group mu_g, then rstd_g.
// The fused kernel alone: (y, GroupNorm weight and bias, groups, eps) -> (out (B, C), stats (B, C + 2G)).
std::tuple<Tensor, Tensor> hardswish_gn_mean_cuda(const Tensor& y, const Tensor& gn_weight, const Tensor& gn_bias,
                                                  int64_t groups, double eps) {
    TORCH_CHECK(y.is_cuda() && takes_dtype(y) && y.dim() == 5 && y.is_contiguous(),
                "conv3d_hardswish_groupnorm_mean: conv output must be a contiguous 5-D float32, float16 or "
                "bfloat16 CUDA tensor");
    TORCH_CHECK(gn_weight.device() == y.device() && gn_bias.device() == y.device(),
                "conv3d_hardswish_groupnorm_mean: GroupNorm parameters must be on the input's device");
    const auto types = checked_dtypes(y, y, OptTensor(), gn_weight, gn_bias);
    TORCH_CHECK(y.size(2) * y.size(3) * y.size(4) < (int64_t(1) << 31),
                "conv3d_hardswish_groupnorm_mean: one channel's spatial size must stay under 2^31 elements");
    const c10::cuda::CUDAGuard guard(y.device());
    const int64_t B = y.size(0), C = y.size(1), S = y.size(2) * y.size(3) * y.size(4);
    auto out = at::empty({B, C}, gn_weight.options());
    auto stats = at::empty({B, C + 2 * groups}, y.options().dtype(torch::kFloat64));
    if (B > 0)
        check(hardswish_gn_mean_forward_launch(y.data_ptr(), gn_weight.contiguous().data_ptr(),
                                               gn_bias.contiguous().data_ptr(), out.data_ptr(), stats.data_ptr<double>(),
                                               types.first, types.second, B, C, groups, S, eps,
                                               c10::cuda::getCurrentCUDAStream()), "forward launch");
    return {out, stats};
}

// Its backward: (grad_out, y, GroupNorm weight, stats, groups) -> (dL/dy, dL/dgamma, dL/dbeta), each in the
// dtype of what it is the gradient of.
std::tuple<Tensor, Tensor, Tensor> hardswish_gn_mean_backward_cuda(const Tensor& grad_out, const Tensor& y,
                                                                   const Tensor& gn_weight, const Tensor& stats,
                                                                   int64_t groups) {
    const c10::cuda::CUDAGuard guard(y.device());
    TORCH_CHECK(grad_out.scalar_type() == gn_weight.scalar_type(), "conv3d_hardswish_groupnorm_mean: the output's gradient "
                "must have the output's dtype");
    auto g = grad_out.contiguous();
    const int64_t B = y.size(0), C = y.size(1), S = y.size(2) * y.size(3) * y.size(4);
    auto grad_y = at::empty_like(y);
    // B > 0: every entry written by gn_param_grad_kernel (no fill kernels to launch)
    auto grad_gn_weight = B > 0 ? at::empty({C}, gn_weight.options()) : at::zeros({C}, gn_weight.options());
    auto grad_gn_bias = B > 0 ? at::empty({C}, gn_weight.options()) : at::zeros({C}, gn_weight.options());
    if (B > 0) {
        auto param_terms = at::empty({B, 2 * C}, y.options().dtype(torch::kFloat64));
        check(hardswish_gn_mean_backward_launch(
                  g.data_ptr(), y.data_ptr(), gn_weight.contiguous().data_ptr(), stats.data_ptr<double>(),
                  grad_y.data_ptr(), param_terms.data_ptr<double>(), grad_gn_weight.data_ptr(),
                  grad_gn_bias.data_ptr(), dtype_code(y), dtype_code(gn_weight), B, C, groups, S,
                  c10::cuda::getCurrentCUDAStream()), "backward launch");
    }
    return {grad_y, grad_gn_weight, grad_gn_bias};
}

// The model's forward: PyTorch's Conv3d, then the fused kernel. -> (out, y, stats)
std::tuple<Tensor, Tensor, Tensor> forward_cuda(const Tensor& x, const Tensor& conv_weight, const OptTensor& conv_bias,
                                                const Tensor& gn_weight, const Tensor& gn_bias, int64_t groups,
                                                double eps) {
    TORCH_CHECK(x.is_cuda() && x.dim() == 5, "conv3d_hardswish_groupnorm_mean: input must be a 5-D CUDA tensor");
    checked_dtypes(x, conv_weight, conv_bias, gn_weight, gn_bias);
    const c10::cuda::CUDAGuard guard(x.device());
    // PyTorch's own conv call under the user's cuDNN settings, allow_tf32 included (nn.Conv3d's: at the
    // benchmark size cuDNN stays fp32 with it on; at wider channel counts it runs TF32 there, as eager's does), on
    // contiguous input (cuDNN's channels-last path is TF32 even at the benchmark size). In half precision cuDNN's
    // conv, as PyTorch's.
    auto y = torch_conv(x, conv_weight, conv_bias, {1, 1, 1}, {0, 0, 0}, false, {0, 0, 0});
    auto r = hardswish_gn_mean_cuda(y, gn_weight, gn_bias, groups, eps);
    return {std::get<0>(r), y, std::get<1>(r)};
}

// The model's backward: the fused kernel's, then PyTorch's convolution backward for the conv's own
// gradients (as the brief allows), where conv_mask asks. -> (dL/dx, dL/dW, dL/db, dL/dgamma, dL/dbeta)
std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor> backward_cuda(
        const Tensor& grad_out, const Tensor& x, const Tensor& conv_weight, const Tensor& y, const Tensor& gn_weight,
        const Tensor& stats, int64_t groups, Mask conv_mask) {
    auto r = hardswish_gn_mean_backward_cuda(grad_out, y, gn_weight, stats, groups);
    const c10::cuda::CUDAGuard guard(y.device());
    auto conv = torch_conv_backward(std::get<0>(r), x, conv_weight, {1, 1, 1}, {0, 0, 0}, false, {0, 0, 0}, conv_mask);
    return {std::get<0>(conv), std::get<1>(conv), std::get<2>(conv), std::get<1>(r), std::get<2>(r)};
}

// Meta: shapes and dtypes only, in symbolic sizes (torch.compile with dynamic shapes).
std::tuple<Tensor, Tensor, Tensor> forward_meta(const Tensor& x, const Tensor& conv_weight, const OptTensor& conv_bias,
                                                const Tensor& gn_weight, const Tensor& gn_bias, int64_t groups,
                                                double eps) {
    const auto B = x.sym_size(0), C = conv_weight.sym_size(0);
    std::vector<c10::SymInt> y_shape{B, C};
    for (int d = 2; d < 5; ++d) y_shape.push_back(x.sym_size(d) - conv_weight.sym_size(d) + 1);
    return {at::empty_symint({B, C}, gn_weight.options()), at::empty_symint(y_shape, x.options()),
            at::empty_symint({B, C + 2 * groups}, x.options().dtype(torch::kFloat64))};
}

std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor> backward_meta(
        const Tensor& grad_out, const Tensor& x, const Tensor& conv_weight, const Tensor& y, const Tensor& gn_weight,
        const Tensor& stats, int64_t groups, Mask conv_mask) {
    return {conv_mask[0] ? at::empty_like(x) : Tensor(), conv_mask[1] ? at::empty_like(conv_weight) : Tensor(),
            conv_mask[2] ? at::empty_symint({conv_weight.sym_size(0)}, conv_weight.options()) : Tensor(),
            at::empty_like(gn_weight), at::empty_like(gn_weight)};
}

std::tuple<Tensor, Tensor> hardswish_gn_mean_meta(const Tensor& y, const Tensor& gn_weight, const Tensor& gn_bias,
                                                  int64_t groups, double eps) {
    return {at::empty_symint({y.sym_size(0), y.sym_size(1)}, gn_weight.options()),
            at::empty_symint({y.sym_size(0), y.sym_size(1) + 2 * groups}, y.options().dtype(torch::kFloat64))};
}

std::tuple<Tensor, Tensor, Tensor> hardswish_gn_mean_backward_meta(const Tensor& grad_out, const Tensor& y,
                                                                   const Tensor& gn_weight, const Tensor& stats,
                                                                   int64_t groups) {
    return {at::empty_like(y), at::empty_like(gn_weight), at::empty_like(gn_weight)};
}

static auto& forward_op() {
    static auto op = c10::Dispatcher::singleton()
        .findSchemaOrThrow(OP("forward"), "").typed<decltype(forward_cuda)>();
    return op;
}
static auto& backward_op() {
    static auto op = c10::Dispatcher::singleton()
        .findSchemaOrThrow(OP("backward"), "").typed<decltype(backward_cuda)>();
    return op;
}

// backward's Autograd kernel: the gradients, each refusing to be differentiated again (refuse_double_backward).
std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor> backward_autograd(
        const Tensor& grad_out, const Tensor& x, const Tensor& conv_weight, const Tensor& y, const Tensor& gn_weight,
        const Tensor& stats, int64_t groups, Mask conv_mask) {
    auto r = [&] {
        at::AutoDispatchBelowADInplaceOrView below_autograd;
        return backward_op().call(grad_out, x, conv_weight, y, gn_weight, stats, groups, conv_mask);
    }();
    refuse_double_backward("conv3d_hardswish_groupnorm_mean", {grad_out, x, conv_weight, y, gn_weight},
                           {&std::get<0>(r), &std::get<1>(r), &std::get<2>(r), &std::get<3>(r), &std::get<4>(r)});
    return r;
}

// model without autograd (inference tensors, no gradient wanted): the forward's output.
Tensor model_plain(const Tensor& x, const Tensor& conv_weight, const OptTensor& conv_bias, const Tensor& gn_weight,
                   const Tensor& gn_bias, int64_t groups, double eps) {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return std::get<0>(forward_op().call(x, conv_weight, conv_bias, gn_weight, gn_bias, groups, eps));
}

// model's Autograd kernel; the backward operator does the rest. Saved for the backward (each a graph input or
// an output of the forward operator, so that CUDA graph pools track them): x, conv_weight (as given); y, the
// conv's output (B, C, Do, Ho, Wo) from PyTorch's nn.Conv3d; gn_weight; stats (B, C + 2G) float64, each
// channel's HardSwish mean and each group's mean and 1/std.
struct Model : torch::autograd::Function<Model> {
    static Tensor forward(torch::autograd::AutogradContext* ctx, const Tensor& x, const Tensor& conv_weight,
                          const OptTensor& conv_bias, const Tensor& gn_weight, const Tensor& gn_bias, int64_t groups,
                          double eps) {
        at::AutoDispatchBelowADInplaceOrView below_autograd;
        auto r = forward_op().call(x, conv_weight, conv_bias, gn_weight, gn_bias, groups, eps);
        ctx->save_for_backward({x, conv_weight, std::get<1>(r), gn_weight, std::get<2>(r)});
        ctx->saved_data["groups"] = groups;
        ctx->saved_data["mask"] = c10::List<bool>({x.requires_grad(), conv_weight.requires_grad(),
                                                   conv_bias.has_value() && conv_bias->requires_grad()});
        return std::get<0>(r);
    }

    static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                   torch::autograd::variable_list grads) {
        const auto s = ctx->get_saved_variables();
        const auto m = ctx->saved_data["mask"].toBoolList();
        auto r = backward_op().call(grads[0], s[0], s[1], s[2], s[3], s[4], ctx->saved_data["groups"].toInt(),
                                    Mask{m[0], m[1], m[2]});
        return {std::get<0>(r), std::get<1>(r), std::get<2>(r), std::get<3>(r), std::get<4>(r), Tensor(), Tensor()};
    }
};

Tensor model_autograd(const Tensor& x, const Tensor& conv_weight, const OptTensor& conv_bias, const Tensor& gn_weight,
                      const Tensor& gn_bias, int64_t groups, double eps) {
    // Function::apply costs some 13 us of host time per call: only where a gradient is wanted.
    const bool wanted = at::GradMode::is_enabled() && (x.requires_grad() || conv_weight.requires_grad() || (conv_bias.has_value() && conv_bias->requires_grad()) ||
                           gn_weight.requires_grad() || gn_bias.requires_grad());
    if (!wanted) return model_plain(x, conv_weight, conv_bias, gn_weight, gn_bias, groups, eps);
    return Model::apply(x, conv_weight, conv_bias, gn_weight, gn_bias, groups, eps);
}

static auto& model_op() {
    static auto op = c10::Dispatcher::singleton()
        .findSchemaOrThrow(OP("model"), "").typed<decltype(model_plain)>();
    return op;
}

// model's Autocast kernel: as torch.autocast runs the reference, the conv in autocast's dtype (input and
// conv parameters cast), GroupNorm and the mean in float32 (GroupNorm is on autocast's float32 list).
Tensor model_autocast(const Tensor& x, const Tensor& conv_weight, const OptTensor& conv_bias, const Tensor& gn_weight,
                      const Tensor& gn_bias, int64_t groups, double eps) {
    c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::DispatchKey::AutocastCUDA);
    const auto low = autocast_dtype();
    return model_op().call(autocast_to(x, low), autocast_to(conv_weight, low), autocast_to(conv_bias, low),
                           autocast_to(gn_weight, at::kFloat), autocast_to(gn_bias, at::kFloat), groups, eps);
}

DEFINE_OPS(OPS_NAMESPACE, m) {
    m.def("forward(Tensor x, Tensor conv_weight, Tensor? conv_bias, Tensor gn_weight, Tensor gn_bias, int groups, "
          "float eps) -> (Tensor, Tensor, Tensor)");
    m.def("backward(Tensor grad_out, Tensor x, Tensor conv_weight, Tensor y, Tensor gn_weight, Tensor stats, "
          "int groups, bool[3] conv_mask) -> (Tensor, Tensor, Tensor, Tensor, Tensor)");
    m.def("model(Tensor x, Tensor conv_weight, Tensor? conv_bias, Tensor gn_weight, Tensor gn_bias, int groups, "
          "float eps) -> Tensor");
    m.def("hardswish_gn_mean(Tensor y, Tensor gn_weight, Tensor gn_bias, int groups, float eps) -> (Tensor, Tensor)");
    m.def("hardswish_gn_mean_backward(Tensor grad_out, Tensor y, Tensor gn_weight, Tensor stats, int groups) "
          "-> (Tensor, Tensor, Tensor)");
}
IMPLEMENT_OPS(OPS_NAMESPACE, CUDA, m) {
    m.impl("forward", forward_cuda);
    m.impl("backward", backward_cuda);
    m.impl("model", model_plain);
    m.impl("hardswish_gn_mean", hardswish_gn_mean_cuda);
    m.impl("hardswish_gn_mean_backward", hardswish_gn_mean_backward_cuda);
}
IMPLEMENT_OPS(OPS_NAMESPACE, Meta, m) {
    m.impl("forward", forward_meta);
    m.impl("backward", backward_meta);
    m.impl("model", model_plain);
    m.impl("hardswish_gn_mean", hardswish_gn_mean_meta);
    m.impl("hardswish_gn_mean_backward", hardswish_gn_mean_backward_meta);
}
IMPLEMENT_OPS(OPS_NAMESPACE, Autograd, m) {
    m.impl("model", model_autograd);
    m.impl("backward", backward_autograd);
}
IMPLEMENT_OPS(OPS_NAMESPACE, AutocastCUDA, m) {
    m.impl("model", model_autocast);
}
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
_namespace = "conv3d_hardswish_groupnorm_mean_" + hashlib.sha256((cpp_source + cuda_source).encode()).hexdigest()[:12]
if not hasattr(getattr(torch.ops, _namespace), "model"):
    _build("conv3d_hardswish_groupnorm_mean", _namespace + "_ext", _namespace,
           ["-O3"])
_ops = getattr(torch.ops, _namespace)
_model = _ops.model.default   # an overload, not the packet: a little less host time per call


DTYPES = (torch.float32, torch.float16, torch.bfloat16)   # as the reference takes them (model.to(dtype))


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, num_groups=4, bias=True):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size, bias=bias)
        self.group_norm = nn.GroupNorm(num_groups, out_channels)

    def forward(self, x):
        if not (x.is_cuda or x.is_meta):   # meta: shapes only, for tracing
            raise ValueError(f"input must be a CUDA tensor (or meta), got one on {x.device}")
        if x.dtype not in DTYPES:
            raise ValueError(f"input must be float32, float16 or bfloat16, got {x.dtype}")
        if x.dim() != 5:
            raise ValueError(f"input must be 5-D (B, C, D, H, W), got {x.dim()}-D")
        if x.shape[1] != self.conv.in_channels:
            raise ValueError(f"input has {x.shape[1]} channels, the conv expects {self.conv.in_channels}")
        if min(x.shape[2:]) < min(self.conv.kernel_size):
            raise ValueError(f"input spatial size {tuple(x.shape[2:])} is smaller than the kernel "
                             f"{self.conv.kernel_size}")
        conv, gn = self.conv, self.group_norm
        return _model(x, conv.weight, conv.bias, gn.weight, gn.bias, gn.num_groups, gn.eps)

    def plan(self, x):
        """{stage: "kernel; rule"}: which kernel runs at each stage of the forward and the backward. One path for every
        input and configuration (the element types are template parameters), so the plan is the same for all x."""
        return {"forward conv": "PyTorch's nn.Conv3d (at::_convolution); the brief keeps it",
                "forward": "hardswish_gn_mean_kernel; always: a block per (sample, run of whole groups), as many "
                           "runs as fill 2 blocks per SM (one at the benchmark's batch), y read once",
                "backward chain": "hardswish_gn_mean_backward_kernel + gn_param_grad_kernel; always: y read once, "
                                  "dL/dy written once",
                "backward conv": "PyTorch's convolution backward (at::convolution_backward); the brief keeps the conv"}


def benchmark_stages(model, x):
    """Each stage alone, for run_all.py: name -> (callable, bytes it must move at least)."""
    conv, gn = model.conv, model.group_norm
    args = (x, conv.weight, conv.bias, gn.weight, gn.bias, gn.num_groups, gn.eps)
    out, y, stats = _ops.forward(*args)
    grad_out = torch.randn_like(out)
    y_bytes = y.numel() * y.element_size()
    mask = [False, True, conv.bias is not None]   # what training the layer needs
    return {
        "forward (PyTorch's conv, fused kernel)": (lambda: _ops.forward(*args), None),
        "fused forward kernel": (lambda: _ops.hardswish_gn_mean(y, gn.weight, gn.bias, gn.num_groups, gn.eps), y_bytes),
        "backward (fused kernels, PyTorch's conv backward)":
            (lambda: _ops.backward(grad_out, x, conv.weight, y, gn.weight, stats, gn.num_groups, mask), None),
        "fused backward kernels":
            (lambda: _ops.hardswish_gn_mean_backward(grad_out, y, gn.weight, stats, gn.num_groups), 2 * y_bytes),
    }


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
    sys.exit(main("conv3d_hardswish_groupnorm_mean", ModelNew, benchmark_stages))
