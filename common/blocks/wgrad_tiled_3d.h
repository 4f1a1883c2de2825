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
