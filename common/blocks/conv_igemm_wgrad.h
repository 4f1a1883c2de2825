// The conv engine's weight gradient. Needs the conv_igemm and finish_weight_grad_tiled blocks before it.
// The weight gradient as a GEMM, for both convs: W'[r][c][t] = sum over (b, pos) of Dir[b][r][pos] x
// Gat[b][c][pos s - p + t] (zero outside), pos running over Dir's positions. A Conv3d's dL/dW: Dir = dL/dy (r = co),
// Gat = x (c = ci), W' laid out as its weight (C_out, C_in, taps); a ConvTranspose3d's: Dir = x (r = ci), Gat = dL/dy
// (c = co), W' as its weight (C_in, C_out, taps). Rows = r, columns = (c, t), depth = (b, pos), split into `splits`
// contiguous ranges (grid z) whose totals (double) are added in order by finish_weight_grad_tiled_kernel (its block).
// A thread stages one depth (consecutive threads consecutive positions: the loads coalesce) of 8 rows and 8 columns.
// Products P: IG_SPLIT (exact fp32 level) or IG_TF32 (both operands rounded to TF32 to nearest even, one product:
// PyTorch's conv backward under allow_tf32); Gat is rounded as staged, Dir as its fragments load.
__device__ __forceinline__ int ig_in(int i, int in) { return (unsigned)i < (unsigned)in ? i : -1; }
struct WgradGeom {
    int B, R, C;              // samples, Dir's channels, Gat's channels
    int Dd, Dh, Dw;           // Dir's positions
    int Gd, Gh, Gw;           // Gat's
    int k[3], s[3], p[3];
};

template <int P>
__global__ void __launch_bounds__(IG_THREADS) conv_igemm_wgrad_kernel(const float* __restrict__ dir,
                                                                      const float* __restrict__ gat,
                                                                      double* __restrict__ partials, WgradGeom g)
{
    constexpr int MI = 2, NJ = 4, BM = 64, BN = 64;
    __shared__ IgSmem<MI, NJ> s;     // a: [depth][row] Dir, b: [depth][column] Gat gathered
    __shared__ int col_c[BN], col_t[BN];   // a column's Gat channel (-1: none) and tap (tz << 20 | ty << 10 | tx)
    const int taps = g.k[0] * g.k[1] * g.k[2], cols = g.C * taps;
    const long long plane = (long long)g.Dd * g.Dh * g.Dw, depth = (long long)g.B * plane;
    const long long gplane = (long long)g.Gd * g.Gh * g.Gw;
    const long long q0 = blockIdx.z * depth / gridDim.z, q1 = (blockIdx.z + 1) * depth / gridDim.z;
    const int m0 = blockIdx.x * BM, n0 = blockIdx.y * BN;
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, gq = lane / 4, tq = lane % 4;
    const int wm = warp / 2 * 32, wn = warp % 2 * 32;
    if (threadIdx.x < BN) {   // each column's Gat channel and tap (-1: no such column)
        const int n = n0 + threadIdx.x;
        const int t = n % taps;
        col_c[threadIdx.x] = n < cols ? n / taps : -1;
        col_t[threadIdx.x] = t / (g.k[1] * g.k[2]) << 20 | t / g.k[2] % g.k[1] << 10 | t % g.k[2];
    }
    __syncthreads();
    const int k_off = threadIdx.x % IG_BK, lead = threadIdx.x / IG_BK;   // rows / columns lead + 8 j
    // This thread's depth q = (b, pos), pos = (od, oh, ow), moved on by IG_BK a stage.
    long long q = q0 + k_off;
    long long b = q / plane;
    long long pos = q % plane;
    int ow = (int)(pos % g.Dw), oh = (int)(pos / g.Dw % g.Dh), od = (int)(pos / g.Dw / g.Dh);
    float av[8], bv[8];
    const auto load = [&]() {
        const bool ok = q < q1;
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            const int r = m0 + lead + 8 * j;
            av[j] = ok && r < g.R ? dir[((size_t)b * g.R + r) * plane + pos] : 0.f;
            const int c = col_c[lead + 8 * j], t = col_t[lead + 8 * j];
            float u = 0.f;
            if (ok && c >= 0) {
                const int id = ig_in(od * g.s[0] - g.p[0] + (t >> 20), g.Gd);
                const int ih = ig_in(oh * g.s[1] - g.p[1] + (t >> 10 & 1023), g.Gh);
                const int iw = ig_in(ow * g.s[2] - g.p[2] + (t & 1023), g.Gw);
                if ((id | ih | iw) >= 0) u = gat[((size_t)b * g.C + c) * gplane + ((size_t)id * g.Gh + ih) * g.Gw + iw];
            }
            bv[j] = u;
        }
        q += IG_BK;
        for (ow += IG_BK; ow >= g.Dw; ow -= g.Dw)
            if (++oh == g.Dh) { oh = 0; if (++od == g.Dd) od = 0; }
        for (pos += IG_BK; pos >= plane; pos -= plane) ++b;
    };
    float acc[MI][NJ][4] = {};
    load();
    for (long long k0 = q0; k0 < q1; k0 += IG_BK) {
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            s.a[k_off][lead + 8 * j] = av[j];
            s.b[k_off][lead + 8 * j] = P == IG_TF32 ? round_tf32(bv[j]) : bv[j];
        }
        __syncthreads();
        if (k0 + IG_BK < q1) load();
        ig_stage<P>(s, acc, wm, wn, gq, tq);
        __syncthreads();
    }
    const long long n_w = (long long)g.R * cols;
    ig_for_each_result(acc, wm, wn, gq, tq, [&](int r, int c, float v) {
        const int row = m0 + r, col = n0 + c;
        if (row < g.R && col < cols) partials[(size_t)blockIdx.z * n_w + (size_t)row * cols + col] = (double)v;
    });
}

// A stride-1, unpadded Conv3d's dL/dW as this GEMM: Dir = dL/dy (C_out channels, the output's positions), Gat = x.
inline WgradGeom conv3d_wgrad_geom(int B, int C_in, int C_out, int D, int H, int W, int kd, int kh, int kw) {
    return WgradGeom{B, C_out, C_in, D - kd + 1, H - kh + 1, W - kw + 1, D, H, W, {kd, kh, kw}, {1, 1, 1}, {0, 0, 0}};
}

// Splits of the depth: enough blocks for two waves of `sms` SMs, each split at least 64 depths.
inline int conv_igemm_wgrad_splits(const WgradGeom& g, int sms) {
    const int cols = g.C * g.k[0] * g.k[1] * g.k[2];
    const long long tiles = (long long)((g.R + 63) / 64) * ((cols + 63) / 64);
    const long long depth = (long long)g.B * g.Dd * g.Dh * g.Dw;
    const long long want = (2LL * sms + tiles - 1) / tiles;
    return (int)std::max(1LL, std::min(want, (depth + 63) / 64));
}

// partials: splits x R x C x taps doubles; grad_weight: R x C x taps floats.
template <int P = IG_SPLIT>
inline cudaError_t conv_igemm_wgrad_launch(const float* dir, const float* gat, const WgradGeom& g, int splits,
                                           double* partials, float* grad_weight, cudaStream_t stream) {
    const long long n_w = (long long)g.R * g.C * g.k[0] * g.k[1] * g.k[2];
    if (n_w == 0) return cudaSuccess;
    const dim3 grid((g.R + 63) / 64, (unsigned)((n_w / g.R + 63) / 64), splits);
    conv_igemm_wgrad_kernel<P><<<grid, IG_THREADS, 0, stream>>>(dir, gat, partials, g);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) return err;
    finish_weight_grad_tiled_kernel<<<(unsigned)((n_w + 255) / 256), 256, 0, stream>>>(partials, grad_weight, n_w,
                                                                                       splits);
    return cudaGetLastError();
}
