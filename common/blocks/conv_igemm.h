// The tensor-core conv engine: a 3-D convolution as an implicit GEMM on mma.sync (m16n8k8, TF32 operands, fp32
// sums), for the files' general paths (tests/test_conv_engine.py checks it alone against float64). Needs the
// element_types and split_tf32 blocks before it (and C++17: if constexpr).
//
// The GEMM: rows = output positions (b, od, oh, ow), columns = output channels, depth = (tap, ci), channels
// innermost, so a thread's row finds its input position once a tap and then steps through channels. Conv3d gathers
// x[b, ci, od s - p + kd, ...]. ConvTranspose3d (also a Conv3d's data gradient) is split by output parity: outputs
// od = c + s j (c < s) take only the taps kd = r + s u, r = (c + p) mod s, from x[.., j + (c + p) / s - u, ..], so
// each class (grid z) is a dense stride-1 GEMM over its own taps and no product is a zero of the stride. Any kernel,
// stride and padding per axis; 64-bit indices. The weights are first packed as [class][tap of the class][ci][co]
// (conv_igemm_pack_kernel, a workspace of the weight's size): a class's GEMM depth d is its packed row d, so a stage's
// weight loads are one pointer step and coalesce. A block of 4 warps computes IgTile's BM x BN outputs, a warp
// (BM / 2) x (BN / 2); a stage stages 16 depths of the gathered input and of the weights in shared memory: float
// operands by cp.async, IG_STAGES - 1 stages in flight while the tensor cores work on one; 16-bit ones through
// registers, one stage ahead. Where C_in is a multiple of 16 a stage is 16 channels of one tap: a thread's input
// elements of a stage share one bounds test and one base pointer (the gather's cost per element is a pointer add);
// other channel counts step each element through (tap, channel).
// Products (IgProducts): IG_SPLIT, three TF32 products a step (fp32-level accuracy, the split_tf32 block);
// IG_TF32, the operands rounded to TF32 to nearest even and one product (PyTorch's conv under allow_tf32);
// IG_EXACT, one product of operands already exact in TF32 (float16 and bfloat16 values). The tensor cores add a
// step's products without rounding to nearest (their sum truncates), so each stage sums into a fresh accumulator
// that is then added (rounded to nearest) to the running one: the error stays that of fp32 sums at any depth.
// The epilogue gets each output value with its (sample, channel, position) and stores it (a file's epilogue fuses
// what follows the conv). Depths are added in a fixed order: the same input gives the same bits. The weight
// gradient is a second GEMM (the _conv_igemm_wgrad block).
struct ConvGeom {
    int B, C_in, C_out, D, H, W, Do, Ho, Wo;
    int k[3], s[3], p[3];
    bool transposed;
};
enum IgProducts { IG_SPLIT = 0, IG_TF32 = 1, IG_EXACT = 2 };
constexpr int IG_BK = 16, IG_THREADS = 128;

// A block's tile: 2 x 2 warps of MI 16-row by NJ 8-column MMA tiles. A thread stages A_LOADS input values (one row,
// depths A_STEP apart) and B_LOADS weights (one column, depths B_STEP apart) a stage.
template <int MI, int NJ> struct IgTile {
    static constexpr int BM = 32 * MI, BN = 16 * NJ;
    static constexpr int A_STEP = IG_THREADS / BM, A_LOADS = IG_BK / A_STEP;
    static constexpr int B_STEP = IG_THREADS / BN, B_LOADS = IG_BK / B_STEP;
    static_assert(IG_THREADS % BM == 0 && IG_THREADS % BN == 0, "tile");
};
// Shared memory of one stage: a [depth][row], b [depth][column]; the pad of 8 makes a warp's fragment reads (rows or
// columns g at depths t, lanes (g, t)) hit 32 different banks.
template <int MI, int NJ> struct IgSmem {
    float a[IG_BK][32 * MI + 8];
    float b[IG_BK][16 * NJ + 8];
};

// One stage's products for a warp's (16 MI) x (8 NJ) outputs at (wm, wn) of the block's tile, into acc; (gq, tq) the
// lane's (lane / 4, lane % 4). IG_SPLIT: the small products first, then big x big.
template <int P, int MI, int NJ>
__device__ __forceinline__ void ig_stage_mma(const IgSmem<MI, NJ>& s, float (&acc)[MI][NJ][4], int wm, int wn,
                                             int gq, int tq) {
#pragma unroll
    for (int ks = 0; ks < IG_BK; ks += 8) {
        uint32_t a_big[MI][4], a_small[MI][4];
#pragma unroll
        for (int i = 0; i < MI; ++i) {
            const int r = wm + 16 * i + gq;
            const float v[4] = {s.a[ks + tq][r], s.a[ks + tq][r + 8], s.a[ks + tq + 4][r], s.a[ks + tq + 4][r + 8]};
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                if (P == IG_SPLIT) {
                    const Split sp = split(v[e]);
                    a_big[i][e] = sp.big;
                    a_small[i][e] = sp.small;
                } else {
                    a_big[i][e] = __float_as_uint(P == IG_TF32 ? round_tf32(v[e]) : v[e]);
                }
            }
        }
#pragma unroll
        for (int jn = 0; jn < NJ; ++jn) {
            const int c = wn + 8 * jn + gq;
            const float u0 = s.b[ks + tq][c], u1 = s.b[ks + tq + 4][c];
            if (P == IG_SPLIT) {
                const Split b0 = split(u0), b1 = split(u1);
#pragma unroll
                for (int i = 0; i < MI; ++i) {
                    mma(acc[i][jn], a_small[i], b0.big, b1.big);
                    mma(acc[i][jn], a_big[i], b0.small, b1.small);
                    mma(acc[i][jn], a_big[i], b0.big, b1.big);
                }
            } else {
#pragma unroll
                for (int i = 0; i < MI; ++i) mma(acc[i][jn], a_big[i], __float_as_uint(u0), __float_as_uint(u1));
            }
        }
    }
}

// A stage's products summed apart and added to acc (rounded to nearest): see the header on truncated sums.
template <int P, int MI, int NJ>
__device__ __forceinline__ void ig_stage(const IgSmem<MI, NJ>& s, float (&acc)[MI][NJ][4], int wm, int wn, int gq,
                                         int tq) {
    float part[MI][NJ][4] = {};
    ig_stage_mma<P>(s, part, wm, wn, gq, tq);
#pragma unroll
    for (int i = 0; i < MI; ++i)
#pragma unroll
        for (int jn = 0; jn < NJ; ++jn)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[i][jn][e] += part[i][jn][e];
}

// f(row, column, value) for each of a warp's accumulators, row and column within the block's tile (the m16n8k8
// result layout: lane (g, t) holds rows g and g + 8, columns 2t and 2t + 1 of each 16 x 8 tile).
template <int MI, int NJ, typename F>
__device__ __forceinline__ void ig_for_each_result(const float (&acc)[MI][NJ][4], int wm, int wn, int gq, int tq,
                                                   F&& f) {
#pragma unroll
    for (int i = 0; i < MI; ++i)
#pragma unroll
        for (int jn = 0; jn < NJ; ++jn)
#pragma unroll
            for (int e = 0; e < 4; ++e)
                f(wm + 16 * i + gq + (e >= 2 ? 8 : 0), wn + 8 * jn + 2 * tq + (e & 1), acc[i][jn][e]);
}

// One axis of a parity class: its n outputs o = c + ostep j, its taps t = r + tstep u (u < taps), the input index
// j mul + off + dir u of output j through tap u.
struct IgAxis { int n, ostep, c, taps, r, tstep, mul, off, dir; };
__device__ __forceinline__ IgAxis ig_class_axis(int out, int k, int s, int p, bool transposed, int c) {
    if (!transposed) return {out, 1, 0, k, 0, 1, s, -p, 1};
    const int r = (c + p) % s;
    return {c < out ? (out - c + s - 1) / s : 0, s, c, r < k ? (k - r + s - 1) / s : 0, r, s, 1, (c + p) / s, -1};
}

// Epilogue: y[b, co, position] = v + bias[co] (bias may be null), rounded to T.
template <typename T> struct StoreWithBias {
    T* y;
    const T* bias;
    __device__ __forceinline__ void operator()(long long b, int co, long long pos, long long plane, int C_out,
                                               float v) const {
        y[((size_t)b * C_out + co) * plane + pos] = from_float<T>(bias != nullptr ? v + to_float(bias[co]) : v);
    }
};

// Epilogue: y[b, co, position] = v as summed, in float32 (the bias and any rounding left to the kernel reading y).
struct StoreSum {
    float* y;
    __device__ __forceinline__ void operator()(long long b, int co, long long pos, long long plane, int C_out,
                                               float v) const {
        y[((size_t)b * C_out + co) * plane + pos] = v;
    }
};

// 4 bytes global -> shared (dst: a shared-memory address), asynchronously (cp.async, sm_80 on); zeros where !ok
// (then nothing is read at `any`, a valid global address).
__device__ __forceinline__ void ig_copy_async(unsigned dst, const float* src, bool ok, const float* any) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n"
                 :: "r"(dst), "l"(ok ? src : any), "r"(ok ? 4 : 0) : "memory");
}
__device__ __forceinline__ void ig_copy_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void ig_copy_wait() {
    asm volatile("cp.async.wait_group %0;\n" :: "n"(N) : "memory");
}
constexpr int IG_STAGES = 3;   // float operands: stages in flight in shared memory

// The parity classes (one unless transposed), and the class of index cls's three axes (output sizes unused: 0).
__device__ __forceinline__ int ig_classes(const ConvGeom& g) { return g.transposed ? g.s[0] * g.s[1] * g.s[2] : 1; }
__device__ __forceinline__ void ig_class_axes(const ConvGeom& g, int cls, IgAxis& ad, IgAxis& ah, IgAxis& aw,
                                              bool sized) {
    const int sh = g.transposed ? g.s[1] : 1, sw = g.transposed ? g.s[2] : 1;
    ad = ig_class_axis(sized ? g.Do : 0, g.k[0], g.s[0], g.p[0], g.transposed, cls / (sh * sw));
    ah = ig_class_axis(sized ? g.Ho : 0, g.k[1], g.s[1], g.p[1], g.transposed, cls / sw % sh);
    aw = ig_class_axis(sized ? g.Wo : 0, g.k[2], g.s[2], g.p[2], g.transposed, cls % sw);
}
// The taps of the classes before cls (the classes partition the kernel's taps): where cls's packed rows begin, / C_in.
__device__ __forceinline__ int ig_taps_before(const ConvGeom& g, int cls) {
    int before = 0;
    for (int c = 0; c < cls; ++c) {
        IgAxis ad, ah, aw;
        ig_class_axes(g, c, ad, ah, aw, false);
        before += ad.taps * ah.taps * aw.taps;
    }
    return before;
}

// The weights as [class][tap of the class (ud, uh, uw)][ci][co] (IG_TF32: rounded to TF32), from (C_out, C_in,
// taps), or (C_in, C_out, taps) when transposed.
template <typename T, int P>
__global__ void conv_igemm_pack_kernel(const T* __restrict__ w, T* __restrict__ packed, ConvGeom g) {
    const int C_in = g.C_in, C_out = g.C_out, taps = g.k[0] * g.k[1] * g.k[2], classes = ig_classes(g);
    const long long n = (long long)taps * C_in * C_out;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        const int co = (int)(i % C_out), ci = (int)(i / C_out % C_in);
        int q = (int)(i / C_out / C_in);   // the packed tap: its class's, then its index in the class
        IgAxis ad, ah, aw;
        for (int cls = 0; cls < classes; ++cls) {
            ig_class_axes(g, cls, ad, ah, aw, false);
            const int in_class = ad.taps * ah.taps * aw.taps;
            if (q < in_class) break;
            q -= in_class;
        }
        const int ud = q / (ah.taps * aw.taps), uh = q / aw.taps % ah.taps, uw = q % aw.taps;
        const int t = ((ad.r + ad.tstep * ud) * g.k[1] + ah.r + ah.tstep * uh) * g.k[2] + aw.r + aw.tstep * uw;
        const T v = w[g.transposed ? ((size_t)ci * C_out + co) * taps + t : ((size_t)co * C_in + ci) * taps + t];
        packed[i] = P == IG_TF32 ? from_float<T>(round_tf32(to_float(v))) : v;   // (A: as its fragments load)
    }
}

template <typename T, int P, int MI, int NJ, typename Epilogue>
__global__ void __launch_bounds__(IG_THREADS) conv_igemm_kernel(const T* __restrict__ x,
                                                                const T* __restrict__ packed, ConvGeom g,
                                                                Epilogue epilogue)
{
    using Tile = IgTile<MI, NJ>;
    // This block's parity class (one class unless transposed) and its GEMM.
    const int cls = blockIdx.z;
    IgAxis ad, ah, aw;
    ig_class_axes(g, cls, ad, ah, aw, true);
    const long long cplane = (long long)ad.n * ah.n * aw.n, rows = (long long)g.B * cplane;
    const long long m0 = (long long)blockIdx.x * Tile::BM;
    if (m0 >= rows) return;
    const int taps = ad.taps * ah.taps * aw.taps, depth = taps * g.C_in;
    const int n0 = blockIdx.y * Tile::BN;
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, gq = lane / 4, tq = lane % 4;
    const int wm = warp / 2 * 16 * MI, wn = warp % 2 * 8 * NJ;
    const long long in_plane = (long long)g.D * g.H * g.W;
    // A: this thread stages row a_row at depths a_k, a_k + A_STEP, ... of each stage.
    const int a_row = threadIdx.x % Tile::BM, a_k = threadIdx.x / Tile::BM;
    const long long m = m0 + a_row;
    const bool row_ok = m < rows;
    const long long rest = row_ok ? m : 0;
    const int jw = (int)(rest % aw.n), jh = (int)(rest / aw.n % ah.n), jd = (int)(rest / aw.n / ah.n % ad.n);
    const T* xb = x + (size_t)(rest / cplane) * g.C_in * in_plane;
    const int bd = jd * ad.mul + ad.off, bh = jh * ah.mul + ah.off, bw = jw * aw.mul + aw.off;
    const long long a_step = (long long)Tile::A_STEP * in_plane;
    // x at (row, tap (ud, uh, uw) of the class, channel ci); null: outside the input.
    const auto a_point = [&](int ud, int uh, int uw, int ci) -> const T* {
        const int id = bd + ad.dir * ud, ih = bh + ah.dir * uh, iw = bw + aw.dir * uw;
        return row_ok && (unsigned)id < (unsigned)g.D && (unsigned)ih < (unsigned)g.H && (unsigned)iw < (unsigned)g.W
                   ? xb + (size_t)ci * in_plane + ((size_t)id * g.H + ih) * g.W + iw : nullptr;
    };
    // C_in a multiple of 16: a stage is channels a_ci - a_k .. + 15 of tap (ud, uh, uw), and a_src this thread's
    // first element of it. Else the next element is at tap a_tap, channel a_ci (a_src; null: a zero).
    const bool whole_taps = g.C_in % IG_BK == 0;
    int a_tap = whole_taps ? 0 : a_k / g.C_in, a_ci = whole_taps ? a_k : a_k % g.C_in, ud = 0, uh = 0, uw = 0;
    const T* a_src = nullptr;
    const auto a_at_tap = [&]() {
        a_src = a_tap < taps ? a_point(a_tap / (ah.taps * aw.taps), a_tap / aw.taps % ah.taps, a_tap % aw.taps, a_ci)
                             : nullptr;
    };
    if (whole_taps) a_src = taps > 0 ? a_point(0, 0, 0, a_ci) : nullptr;
    else a_at_tap();
    const auto a_next = [&]() -> const T* {   // (not whole_taps) this element, moving on one
        const T* src = a_src;
        a_ci += Tile::A_STEP;
        if (a_ci >= g.C_in) {
            while (a_ci >= g.C_in) { a_ci -= g.C_in; ++a_tap; }
            a_at_tap();
        } else if (a_src != nullptr) {
            a_src += a_step;
        }
        return src;
    };
    const auto a_next_stage = [&]() {         // (whole_taps) on to the next stage's 16 channels
        a_ci += IG_BK;
        if (a_ci >= g.C_in) {
            a_ci -= g.C_in;
            if (++uw == aw.taps) {
                uw = 0;
                if (++uh == ah.taps) { uh = 0; ++ud; }
            }
            a_src = ud < ad.taps ? a_point(ud, uh, uw, a_ci) : nullptr;
        } else if (a_src != nullptr) {
            a_src += (long long)IG_BK * in_plane;
        }
    };
    // B: this thread stages column b_col at depths b_k, b_k + B_STEP, ...: the class's packed rows in order.
    const int b_col = threadIdx.x % Tile::BN, b_k = threadIdx.x / Tile::BN, n = n0 + b_col;
    const bool b_ok = n < g.C_out;
    const long long b_step = (long long)Tile::B_STEP * g.C_out;
    const T* b_src = packed + ((long long)ig_taps_before(g, cls) * g.C_in + b_k) * g.C_out + n;
    int b_left = depth - b_k;   // the class's depths from this thread's first of the stage on
    const int stages = (depth + IG_BK - 1) / IG_BK;
    float acc[MI][NJ][4] = {};
    if constexpr (std::is_same<T, float>::value) {
        // IG_STAGES - 1 stages in flight (cp.async) while the tensor cores work on one.
        __shared__ IgSmem<MI, NJ> s[IG_STAGES];
        const unsigned s0 = (unsigned)__cvta_generic_to_shared(&s[0]);
        const unsigned a_dst = (unsigned)__cvta_generic_to_shared(&s[0].a[a_k][a_row]) - s0;
        const unsigned b_dst = (unsigned)__cvta_generic_to_shared(&s[0].b[b_k][b_col]) - s0;
        const auto issue = [&](int buf) {
            const unsigned base = s0 + buf * (unsigned)sizeof(IgSmem<MI, NJ>);
            if (whole_taps) {
                const bool ok = a_src != nullptr;
#pragma unroll
                for (int j = 0; j < Tile::A_LOADS; ++j)
                    ig_copy_async(base + a_dst + j * Tile::A_STEP * (unsigned)sizeof(s[0].a[0]), a_src + j * a_step,
                                  ok, x);
                a_next_stage();
            } else {
#pragma unroll
                for (int j = 0; j < Tile::A_LOADS; ++j) {
                    const float* src = a_next();
                    ig_copy_async(base + a_dst + j * Tile::A_STEP * (unsigned)sizeof(s[0].a[0]), src, src != nullptr,
                                  x);
                }
            }
#pragma unroll
            for (int j = 0; j < Tile::B_LOADS; ++j)
                ig_copy_async(base + b_dst + j * Tile::B_STEP * (unsigned)sizeof(s[0].b[0]), b_src + j * b_step,
                              b_ok && j * Tile::B_STEP < b_left, x);
            b_src += (long long)IG_BK * g.C_out;
            b_left -= IG_BK;
        };
#pragma unroll
        for (int i = 0; i < IG_STAGES - 1; ++i) {
            if (i < stages) issue(i);
            ig_copy_commit();
        }
        for (int k = 0; k < stages; ++k) {
            ig_copy_wait<IG_STAGES - 2>();
            __syncthreads();   // stage k is in; every warp is done with stage k - 1's buffer
            if (k + IG_STAGES - 1 < stages) issue((k + IG_STAGES - 1) % IG_STAGES);
            ig_copy_commit();
            ig_stage<P>(s[k % IG_STAGES], acc, wm, wn, gq, tq);
        }
    } else {
        // 16-bit operands (no 2-byte cp.async): the next stage in registers while the tensor cores work.
        __shared__ IgSmem<MI, NJ> s;
        float av[Tile::A_LOADS], bv[Tile::B_LOADS];
        const auto load = [&]() {
            if (whole_taps) {
#pragma unroll
                for (int j = 0; j < Tile::A_LOADS; ++j) av[j] = a_src != nullptr ? to_float(a_src[j * a_step]) : 0.f;
                a_next_stage();
            } else {
#pragma unroll
                for (int j = 0; j < Tile::A_LOADS; ++j) {
                    const T* src = a_next();
                    av[j] = src != nullptr ? to_float(*src) : 0.f;
                }
            }
#pragma unroll
            for (int j = 0; j < Tile::B_LOADS; ++j)
                bv[j] = b_ok && j * Tile::B_STEP < b_left ? to_float(b_src[j * b_step]) : 0.f;
            b_src += (long long)IG_BK * g.C_out;
            b_left -= IG_BK;
        };
        load();
        for (int k = 0; k < stages; ++k) {
#pragma unroll
            for (int j = 0; j < Tile::A_LOADS; ++j) s.a[a_k + Tile::A_STEP * j][a_row] = av[j];
#pragma unroll
            for (int j = 0; j < Tile::B_LOADS; ++j) s.b[b_k + Tile::B_STEP * j][b_col] = bv[j];
            __syncthreads();
            if (k + 1 < stages) load();   // in flight during this stage's products
            ig_stage<P>(s, acc, wm, wn, gq, tq);
            __syncthreads();
        }
    }
    const long long plane = (long long)g.Do * g.Ho * g.Wo;
    ig_for_each_result(acc, wm, wn, gq, tq, [&](int r, int c, float v) {
        const long long row = m0 + r;
        const int co = n0 + c;
        if (row < rows && co < g.C_out) {
            const long long q = row % cplane;
            const int od = ad.c + ad.ostep * (int)(q / aw.n / ah.n), oh = ah.c + ah.ostep * (int)(q / aw.n % ah.n),
                      ow = aw.c + aw.ostep * (int)(q % aw.n);
            epilogue(row / cplane, co, ((long long)od * g.Ho + oh) * g.Wo + ow, plane, g.C_out, v);
        }
    });
}

// Tile shapes: 1: 64 x 32 (at most 32 output channels), 2: 64 x 64. (Measured on an H200 across the channel sweep's
// convs, batch 32: 128 x 32, 128 x 64 and 64 x 128 tiles won nowhere by more than 10% and lost up to 2x: fewer
// blocks, fewer warps a stage's latency hides behind.)
inline int conv_igemm_tile(const ConvGeom& g) { return g.C_out <= 32 ? 1 : 2; }

// The packed weights' elements (the workspace conv_igemm_launch needs).
inline long long conv_igemm_packed_size(const ConvGeom& g) {
    return (long long)g.k[0] * g.k[1] * g.k[2] * g.C_in * g.C_out;
}

template <typename T, int P, int MI, int NJ, typename Epilogue>
cudaError_t conv_igemm_launch_tile(const T* x, const T* packed, const ConvGeom& g, Epilogue epilogue,
                                   cudaStream_t stream) {
    using Tile = IgTile<MI, NJ>;
    const int classes = g.transposed ? g.s[0] * g.s[1] * g.s[2] : 1;
    const auto per_class = [&](int out, int s) { return g.transposed ? (out + s - 1) / s : out; };
    const long long rows = (long long)g.B * per_class(g.Do, g.s[0]) * per_class(g.Ho, g.s[1]) * per_class(g.Wo, g.s[2]);
    const dim3 grid((unsigned)((rows + Tile::BM - 1) / Tile::BM), (g.C_out + Tile::BN - 1) / Tile::BN, classes);
    conv_igemm_kernel<T, P, MI, NJ><<<grid, IG_THREADS, 0, stream>>>(x, packed, g, epilogue);
    return cudaGetLastError();
}

// packed: conv_igemm_packed_size(g) elements of workspace. tile: conv_igemm_tile's code (0: conv_igemm_tile(g)).
template <typename T, int P, typename Epilogue>
cudaError_t conv_igemm_launch(const T* x, const T* w, T* packed, const ConvGeom& g, Epilogue epilogue,
                              cudaStream_t stream, int tile = 0) {
    if (tile == 0) tile = conv_igemm_tile(g);
    const long long rows = (long long)g.B * g.Do * g.Ho * g.Wo, n_packed = conv_igemm_packed_size(g);
    if (rows == 0 || g.C_out == 0) return cudaSuccess;
    if (n_packed > 0) {
        const int blocks = (int)std::min<long long>((n_packed + 255) / 256, 4096);
        conv_igemm_pack_kernel<T, P><<<blocks, 256, 0, stream>>>(w, packed, g);
        const cudaError_t err = cudaGetLastError();
        if (err != cudaSuccess) return err;
    }
    return tile == 1 ? conv_igemm_launch_tile<T, P, 2, 2>(x, packed, g, epilogue, stream)
                     : conv_igemm_launch_tile<T, P, 2, 4>(x, packed, g, epilogue, stream);
}
