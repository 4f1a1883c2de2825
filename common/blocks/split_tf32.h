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
