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
