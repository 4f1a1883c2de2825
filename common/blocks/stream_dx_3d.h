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
