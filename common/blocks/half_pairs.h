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
