"""CPU: the property the half_pairs block's add_pair rests on (common/blocks/half_pairs.h). PyTorch adds two half
values in float32 and rounds the sum to the half type; add_pair adds them in the half type with one rounding of the
exact sum (add.rn.f16x2, fma.rn.bf16x2). The two agree because float32's 24 bits are at least twice the half type's
precision plus 2 (11 and 8 bits). Checked against a rounding of the exact sum computed here on the type's grid in
float64 (the sum's float64 rounding error kept by TwoSum, so a tie is broken by the sum's true side), for every
finite value of each type against a spread of partners: every binade's power of two, its neighbours negated (sums
of a unit or exact cancellation), subnormals, the largest values (overflow) and random values."""
import pytest
import torch

# (precision in bits, the smallest normal's exponent, the largest finite value)
HALF_TYPES = {"fp16": (torch.float16, 11, -14), "bf16": (torch.bfloat16, 8, -126)}


def finite_values(dtype):
    v = torch.arange(-(2 ** 15), 2 ** 15, dtype=torch.int32).to(torch.int16).view(dtype)
    return v[torch.isfinite(v)]


def round_exact(s, err, bits, min_exp, top):
    """The sum s + err (s its float64 rounding, err the remainder) rounded to nearest even on the grid of a type
    with `bits` bits of precision, normals from 2^min_exp, largest finite value `top`; float64 results."""
    _, e = torch.frexp(s.abs().clamp_min(2.0 ** min_exp))   # |s| = m 2^e, m in [0.5, 1): its binade 2^(e - 1)
    ulp = torch.exp2((e - bits).double())
    q = s / ulp                                   # exact: ulp is a power of two in float64's range
    low = torch.floor(q)
    frac = q - low
    up = (frac > 0.5) | ((frac == 0.5) & ((err > 0) | ((err == 0) & (torch.remainder(low, 2) == 1))))
    down_tie = (frac == 0.5) & (err < 0)
    r = torch.where(up & ~down_tie, low + 1, low) * ulp
    r = torch.where(s == 0, s, r)
    over = r.abs() > top                          # past the largest finite value: the tie point rounds away too
    return torch.where(over, torch.copysign(torch.full_like(r, float("inf")), r), r)


@pytest.mark.parametrize("name", sorted(HALF_TYPES))
def test_half_sum_rounded_through_float32_is_the_exactly_rounded_sum(name):
    dtype, bits, min_exp = HALF_TYPES[name]
    top = torch.finfo(dtype).max
    a = finite_values(dtype)
    g = torch.Generator().manual_seed(0)
    max_exp = int(torch.frexp(torch.tensor(top, dtype=torch.float64))[1]) - 1   # top's binade
    exps = torch.arange(min_exp - bits + 1, max_exp + 1, dtype=torch.float64)
    powers = torch.cat([torch.exp2(exps), -torch.exp2(exps)]).to(dtype)
    b = torch.cat([powers, a[torch.randint(len(a), (64,), generator=g)], torch.tensor([top, -top], dtype=dtype)])
    bits_a = a.view(torch.int16)
    neighbours = torch.cat([(bits_a + 1).view(dtype), (bits_a - 1).view(dtype)])
    chunks = [(a[i:i + 2048].repeat_interleave(len(b)), b.repeat(len(a[i:i + 2048]))) for i in range(0, len(a), 2048)]
    chunks.append((a.repeat(2), -neighbours))
    differ, total = [], 0
    for ca, cb in chunks:   # a few million pairs at a time
        keep = torch.isfinite(cb)
        ca, cb = ca[keep], cb[keep]
        pa, pb = ca.double(), cb.double()
        s = pa + pb
        t = s - pa
        err = (pa - (s - t)) + (pb - t)           # TwoSum: s + err is the exact sum
        exact = round_exact(s, err, bits, min_exp, top)
        via_float = (ca.float() + cb.float()).to(dtype).double()
        same = (via_float == exact) & (torch.signbit(via_float) == torch.signbit(exact))
        total += len(same)
        differ += [f"{pa[i].item()!r} + {pb[i].item()!r}: {via_float[i].item()!r} vs {exact[i].item()!r}"
                   for i in torch.nonzero(~same)[:3, 0].tolist()]
    assert total > 10 ** 6 and not differ, f"sums that differ (of {total}): " + ", ".join(differ[:6])
