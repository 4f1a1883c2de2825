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
