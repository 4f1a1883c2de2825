// The tensor-core conv engine, first step: a 3-D convolution as an implicit GEMM on mma.sync (m16n8k8, split
// TF32: three TF32 products a step, fp32-level accuracy), for the files' general paths. Not yet written into any
// variant (the leading _ keeps tools/check_shared.py from asking for a copy): tests/test_conv_engine.py builds it
// alone and checks it against float64. Needs the split_tf32 and finish_weight_grad_tiled blocks before it.
//
// The GEMM: rows = output positions (b, od, oh, ow), columns = output channels, depth = (ci, kd, kh, kw).
// Conv3d gathers x[b, ci, od s - p + kd, ...]; ConvTranspose3d is the same GEMM gathering x[b, ci, (od + p - kd) / s,
// ...] where that divides exactly (the transposed conv as a data gradient), its weight (C_in, C_out, taps). Any
// kernel, stride and padding per axis; 64-bit indices. A block computes 64 rows x 64 columns, a warp 32 x 32 of
// them; a stage stages 16 depths of the gathered input and of the weights in shared memory. The epilogue gets each
// output value with its (sample, channel, position) and stores it (a file's epilogue fuses what follows the conv).
// Depths are added in a fixed order: the same input gives the same bits. The weight gradient is a second GEMM
// (conv_igemm_wgrad_kernel, below); the data gradient is this one (a Conv3d's: the transposed form over dL/dy with
// the conv's weight; a ConvTranspose3d's: the plain form).
struct ConvGeom {
    int B, C_in, C_out, D, H, W, Do, Ho, Wo;
    int k[3], s[3], p[3];
    bool transposed;
};
constexpr int IG_BM = 64, IG_BN = 64, IG_BK = 16, IG_THREADS = 128;

// The input index along one axis that output o takes through tap t, or -1 where there is none.
__device__ __forceinline__ int ig_axis(int o, int t, int s, int p, int in, bool transposed) {
    if (!transposed) {
        const int i = o * s - p + t;
        return i >= 0 && i < in ? i : -1;
    }
    const int q = o + p - t;
    if (q < 0 || q % s != 0) return -1;
    return q / s < in ? q / s : -1;
}

// One stage's products: a warp's 32 x 32 of the block's 64 x 64, over the IG_BK staged depths, split TF32 (the small
// products first, then big x big). a_s: [depth][row], b_s: [depth][column]; (gq, tq) the lane's (lane / 4, lane % 4).
__device__ __forceinline__ void ig_stage_mma(const float (&a_s)[IG_BK][IG_BM + 4],
                                             const float (&b_s)[IG_BK][IG_BN + 4], float (&acc)[2][4][4], int wm,
                                             int wn, int gq, int tq) {
#pragma unroll
    for (int ks = 0; ks < IG_BK; ks += 8) {
        uint32_t a_big[2][4], a_small[2][4];
#pragma unroll
        for (int i = 0; i < 2; ++i) {
            const int r = wm + 16 * i + gq;
            const Split s0 = split(a_s[ks + tq][r]), s1 = split(a_s[ks + tq][r + 8]);
            const Split s2 = split(a_s[ks + tq + 4][r]), s3 = split(a_s[ks + tq + 4][r + 8]);
            a_big[i][0] = s0.big; a_big[i][1] = s1.big; a_big[i][2] = s2.big; a_big[i][3] = s3.big;
            a_small[i][0] = s0.small; a_small[i][1] = s1.small; a_small[i][2] = s2.small; a_small[i][3] = s3.small;
        }
#pragma unroll
        for (int jn = 0; jn < 4; ++jn) {
            const int c = wn + 8 * jn + gq;
            const Split b0 = split(b_s[ks + tq][c]), b1 = split(b_s[ks + tq + 4][c]);
#pragma unroll
            for (int i = 0; i < 2; ++i) {
                mma(acc[i][jn], a_small[i], b0.big, b1.big);
                mma(acc[i][jn], a_big[i], b0.small, b1.small);
                mma(acc[i][jn], a_big[i], b0.big, b1.big);
            }
        }
    }
}

// f(row, column, value) for each of a warp's accumulators, row and column within the block's 64 x 64 (the m16n8k8
// result layout: lane (g, t) holds rows g and g + 8, columns 2t and 2t + 1 of each 16 x 8 tile).
template <typename F>
__device__ __forceinline__ void ig_for_each_result(const float (&acc)[2][4][4], int wm, int wn, int gq, int tq, F&& f) {
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int jn = 0; jn < 4; ++jn)
#pragma unroll
            for (int e = 0; e < 4; ++e)
                f(wm + 16 * i + gq + (e >= 2 ? 8 : 0), wn + 8 * jn + 2 * tq + (e & 1), acc[i][jn][e]);
}

// Epilogue: y[b, co, position] = v + bias[co] (bias may be null).
struct StoreWithBias {
    float* y;
    const float* bias;
    __device__ __forceinline__ void operator()(long long b, int co, long long pos, long long plane, int C_out,
                                               float v) const {
        y[((size_t)b * C_out + co) * plane + pos] = bias != nullptr ? v + bias[co] : v;
    }
};

template <typename Epilogue>
__global__ void __launch_bounds__(IG_THREADS) conv_igemm_kernel(const float* __restrict__ x,
                                                                const float* __restrict__ w, ConvGeom g,
                                                                Epilogue epilogue)
{
    __shared__ float a_s[IG_BK][IG_BM + 4];   // [depth][row]: the gathered input
    __shared__ float b_s[IG_BK][IG_BN + 4];   // [depth][column]: the weights
    const long long plane = (long long)g.Do * g.Ho * g.Wo, rows = (long long)g.B * plane;
    const int taps = g.k[0] * g.k[1] * g.k[2], depth = g.C_in * taps;
    const long long m0 = (long long)blockIdx.x * IG_BM;
    const int n0 = blockIdx.y * IG_BN;
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, gq = lane / 4, tq = lane % 4;
    const int wm = warp / 2 * 32, wn = warp % 2 * 32;
    // This thread stages row a_row of the input and column a_row of the weights, at depths half + 2 j.
    const int a_row = threadIdx.x % IG_BM, half = threadIdx.x / IG_BM;
    const long long m = m0 + a_row;
    const bool row_ok = m < rows;
    long long rest = row_ok ? m : 0;
    const int ow = (int)(rest % g.Wo), oh = (int)(rest / g.Wo % g.Ho), od = (int)(rest / g.Wo / g.Ho % g.Do);
    const long long b = rest / plane;
    const float* xb = x + (size_t)b * g.C_in * g.D * g.H * g.W;
    const int n = n0 + a_row;
    float acc[2][4][4] = {};
    for (int k0 = 0; k0 < depth; k0 += IG_BK) {
#pragma unroll
        for (int j = 0; j < IG_BK / 2; ++j) {
            const int kk = k0 + half + 2 * j;
            float v = 0.f, u = 0.f;
            if (kk < depth) {
                const int ci = kk / taps, t = kk % taps;
                const int tz = t / (g.k[1] * g.k[2]), ty = t / g.k[2] % g.k[1], tx = t % g.k[2];
                if (row_ok) {
                    const int id = ig_axis(od, tz, g.s[0], g.p[0], g.D, g.transposed);
                    const int ih = ig_axis(oh, ty, g.s[1], g.p[1], g.H, g.transposed);
                    const int iw = ig_axis(ow, tx, g.s[2], g.p[2], g.W, g.transposed);
                    if (id >= 0 && ih >= 0 && iw >= 0) v = __ldg(xb + (((size_t)ci * g.D + id) * g.H + ih) * g.W + iw);
                }
                if (n < g.C_out)
                    u = __ldg(w + (g.transposed ? ((size_t)ci * g.C_out + n) * taps + t : (size_t)n * depth + kk));
            }
            a_s[half + 2 * j][a_row] = v;
            b_s[half + 2 * j][a_row] = u;
        }
        __syncthreads();
        ig_stage_mma(a_s, b_s, acc, wm, wn, gq, tq);
        __syncthreads();
    }
    ig_for_each_result(acc, wm, wn, gq, tq, [&](int r, int c, float v) {
        const long long row = m0 + r;
        const int co = n0 + c;
        if (row < rows && co < g.C_out) epilogue(row / plane, co, row % plane, plane, g.C_out, v);
    });
}

template <typename Epilogue>
cudaError_t conv_igemm_launch(const float* x, const float* w, const ConvGeom& g, Epilogue epilogue,
                              cudaStream_t stream) {
    const long long rows = (long long)g.B * g.Do * g.Ho * g.Wo;
    if (rows == 0 || g.C_out == 0) return cudaSuccess;
    const dim3 grid((unsigned)((rows + IG_BM - 1) / IG_BM), (g.C_out + IG_BN - 1) / IG_BN);
    conv_igemm_kernel<<<grid, IG_THREADS, 0, stream>>>(x, w, g, epilogue);
    return cudaGetLastError();
}

// The weight gradient as a GEMM, for both convs: W'[r][c][t] = sum over (b, pos) of Dir[b][r][pos] x
// Gat[b][c][pos s - p + t] (zero outside), pos running over Dir's positions. A Conv3d's dL/dW: Dir = dL/dy (r = co),
// Gat = x (c = ci), W' laid out as its weight (C_out, C_in, taps); a ConvTranspose3d's: Dir = x (r = ci), Gat = dL/dy
// (c = co), W' as its weight (C_in, C_out, taps). Rows = r, columns = (c, t), depth = (b, pos), split into `splits`
// contiguous ranges (grid z) whose totals (double) are added in order by finish_weight_grad_tiled_kernel (its block).
struct WgradGeom {
    int B, R, C;              // samples, Dir's channels, Gat's channels
    int Dd, Dh, Dw;           // Dir's positions
    int Gd, Gh, Gw;           // Gat's
    int k[3], s[3], p[3];
};

__global__ void __launch_bounds__(IG_THREADS) conv_igemm_wgrad_kernel(const float* __restrict__ dir,
                                                                      const float* __restrict__ gat,
                                                                      double* __restrict__ partials, WgradGeom g)
{
    __shared__ float a_s[IG_BK][IG_BM + 4];   // [depth][row]: Dir
    __shared__ float b_s[IG_BK][IG_BN + 4];   // [depth][column]: Gat gathered
    const int taps = g.k[0] * g.k[1] * g.k[2], cols = g.C * taps;
    const long long plane = (long long)g.Dd * g.Dh * g.Dw, depth = (long long)g.B * plane;
    const long long gplane = (long long)g.Gd * g.Gh * g.Gw;
    const long long q0 = blockIdx.z * depth / gridDim.z, q1 = (blockIdx.z + 1) * depth / gridDim.z;
    const int m0 = blockIdx.x * IG_BM, n0 = blockIdx.y * IG_BN;
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, gq = lane / 4, tq = lane % 4;
    const int wm = warp / 2 * 32, wn = warp % 2 * 32;
    const int a_row = threadIdx.x % IG_BM, half = threadIdx.x / IG_BM;
    const int r = m0 + a_row, n = n0 + a_row;   // this thread stages row r of Dir and column n of Gat
    const int c = n / taps, t = n % taps;
    const int tz = t / (g.k[1] * g.k[2]), ty = t / g.k[2] % g.k[1], tx = t % g.k[2];
    float acc[2][4][4] = {};
    for (long long k0 = q0; k0 < q1; k0 += IG_BK) {
#pragma unroll
        for (int j = 0; j < IG_BK / 2; ++j) {
            const long long q = k0 + half + 2 * j;
            float v = 0.f, u = 0.f;
            if (q < q1) {
                const long long b = q / plane, pos = q % plane;
                if (r < g.R) v = __ldg(dir + ((size_t)b * g.R + r) * plane + pos);
                if (n < cols) {
                    const int ow = (int)(pos % g.Dw), oh = (int)(pos / g.Dw % g.Dh), od = (int)(pos / g.Dw / g.Dh);
                    const int id = ig_axis(od, tz, g.s[0], g.p[0], g.Gd, false);
                    const int ih = ig_axis(oh, ty, g.s[1], g.p[1], g.Gh, false);
                    const int iw = ig_axis(ow, tx, g.s[2], g.p[2], g.Gw, false);
                    if (id >= 0 && ih >= 0 && iw >= 0)
                        u = __ldg(gat + ((size_t)b * g.C + c) * gplane + ((size_t)id * g.Gh + ih) * g.Gw + iw);
                }
            }
            a_s[half + 2 * j][a_row] = v;
            b_s[half + 2 * j][a_row] = u;
        }
        __syncthreads();
        ig_stage_mma(a_s, b_s, acc, wm, wn, gq, tq);
        __syncthreads();
    }
    const long long n_w = (long long)g.R * cols;
    ig_for_each_result(acc, wm, wn, gq, tq, [&](int r, int c, float v) {
        const int row = m0 + r, col = n0 + c;
        if (row < g.R && col < cols) partials[(size_t)blockIdx.z * n_w + (size_t)row * cols + col] = (double)v;
    });
}

// Splits of the depth: enough blocks for two waves of `sms` SMs, each split at least 64 depths.
inline int conv_igemm_wgrad_splits(const WgradGeom& g, int sms) {
    const int cols = g.C * g.k[0] * g.k[1] * g.k[2];
    const long long tiles = (long long)((g.R + IG_BM - 1) / IG_BM) * ((cols + IG_BN - 1) / IG_BN);
    const long long depth = (long long)g.B * g.Dd * g.Dh * g.Dw;
    const long long want = (2LL * sms + tiles - 1) / tiles;
    return (int)std::max(1LL, std::min(want, (depth + 63) / 64));
}

// partials: splits x R x C x taps doubles; grad_weight: R x C x taps floats.
inline cudaError_t conv_igemm_wgrad_launch(const float* dir, const float* gat, const WgradGeom& g, int splits,
                                           double* partials, float* grad_weight, cudaStream_t stream) {
    const long long n_w = (long long)g.R * g.C * g.k[0] * g.k[1] * g.k[2];
    if (n_w == 0) return cudaSuccess;
    const dim3 grid((g.R + IG_BM - 1) / IG_BM, (unsigned)((n_w / g.R + IG_BN - 1) / IG_BN), splits);
    conv_igemm_wgrad_kernel<<<grid, IG_THREADS, 0, stream>>>(dir, gat, partials, g);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) return err;
    finish_weight_grad_tiled_kernel<<<(unsigned)((n_w + 255) / 256), 256, 0, stream>>>(partials, grad_weight, n_w,
                                                                                       splits);
    return cudaGetLastError();
}

