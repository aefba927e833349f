"""Number formats of deca.golden.numerics, checked against ml_dtypes and an exact Fraction reference."""

import math
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

from deca.golden import numerics as nx

ELEMENT_FORMATS = {
    "e5m2": (nx.E5M2, ml_dtypes.float8_e5m2),
    "e4m3": (nx.E4M3, ml_dtypes.float8_e4m3fn),
    "e2m1": (nx.E2M1, ml_dtypes.float4_e2m1fn),
}
SCALE_DTYPES = {"e8m0": ml_dtypes.float8_e8m0fnu, "e4m3": ml_dtypes.float8_e4m3fn}


def widen(x):
    """x as float64; widening a signalling NaN raises the invalid flag, which is expected here."""
    with np.errstate(invalid="ignore"):
        return np.asarray(x).astype(np.float64)


def ml_values(codes, dtype):
    """float64 value of each code according to ml_dtypes."""
    return widen(np.asarray(codes, np.uint8).view(dtype))


def bf16_bits(x):
    """ml_dtypes' BF16 pattern of each value (round to nearest even)."""
    return np.asarray(x).astype(ml_dtypes.bfloat16).view(np.uint16)


def assert_same_floats(actual, expected):
    """Equal NaN positions and bit-identical elsewhere (so the sign of zero counts)."""
    actual, expected = widen(actual), widen(expected)
    nan = np.isnan(expected)
    np.testing.assert_array_equal(np.isnan(actual), nan)
    np.testing.assert_array_equal(actual[~nan].view(np.uint64), expected[~nan].view(np.uint64))


# --- decoding ------------------------------------------------------------------------------------


def test_bf16_to_f32_all_patterns():
    bits = np.arange(1 << 16, dtype=np.uint16)
    assert_same_floats(nx.bf16_to_f32(bits), widen(bits.view(ml_dtypes.bfloat16)))


@pytest.mark.parametrize("name", ELEMENT_FORMATS)
def test_element_values_all_codes(name):
    fmt, dtype = ELEMENT_FORMATS[name]
    assert_same_floats(fmt.values, ml_values(np.arange(1 << fmt.bits), dtype))


@pytest.mark.parametrize("name", ELEMENT_FORMATS)
def test_element_lut_all_codes(name):
    fmt, dtype = ELEMENT_FORMATS[name]
    codes = np.arange(1 << fmt.bits, dtype=np.uint8)
    expected = codes.view(dtype).astype(ml_dtypes.bfloat16).view(np.uint16)
    lut = fmt.lut()
    assert lut.shape == (256,) and lut.dtype == np.uint16
    nan = np.isnan(ml_values(codes, dtype))
    np.testing.assert_array_equal(lut[codes][~nan], expected[~nan])
    assert np.isnan(nx.bf16_to_f32(lut[codes][nan])).all()


@pytest.mark.parametrize("name", SCALE_DTYPES)
def test_scale_values_all_codes(name):
    codes = np.arange(256, dtype=np.uint8)
    assert_same_floats(nx.scale_values(codes, name), ml_values(codes, SCALE_DTYPES[name]))


def test_scale_values_bf16_daz():
    bits = np.arange(1 << 16, dtype=np.uint16)
    v = widen(bits.view(ml_dtypes.bfloat16))
    # DAZ: a zero exponent field (zeros and subnormals) reads as zero of the same sign.
    expected = np.where((bits & 0x7F80) == 0, np.copysign(0.0, v), v)
    assert_same_floats(nx.scale_values(bits, "bf16"), expected)


# --- encoding ------------------------------------------------------------------------------------


def encode_samples(fmt, dtype, rng, n=20_000):
    """float32 values for fmt: every finite value, every midpoint and its float32 neighbours,
    random values over all binades (subnormal to beyond max), zeros and huge values; both signs."""
    finite = fmt.values[np.isfinite(fmt.values)]
    pos = np.unique(np.abs(finite))
    mids = ((pos[:-1] + pos[1:]) / 2).astype(np.float32)
    near_mids = np.concatenate([np.nextafter(mids, np.float32(0)), np.nextafter(mids, np.float32(np.inf))])
    info = ml_dtypes.finfo(dtype)
    lo, hi = math.log2(float(info.smallest_subnormal)) - 2, math.log2(float(info.max)) + 2
    rand = np.exp2(rng.uniform(lo, hi, n)).astype(np.float32)
    special = np.array([0.0, float(info.max) * 1.5, 1e30, np.finfo(np.float32).max, 1e-45], np.float32)
    mag = np.concatenate([pos.astype(np.float32), mids, near_mids, rand, special])
    return np.concatenate([mag, -mag])


@pytest.mark.parametrize("name", ELEMENT_FORMATS)
def test_encode_matches_ml_dtypes(name, rng):
    fmt, dtype = ELEMENT_FORMATS[name]
    x = encode_samples(fmt, dtype, rng)
    # ml_dtypes rounds to nearest even but does not saturate, so clip to +-max first.
    top = np.float32(ml_dtypes.finfo(dtype).max)
    expected = np.clip(x, -top, top).astype(dtype).view(np.uint8)
    codes = fmt.encode(x)
    assert codes.dtype == np.uint16
    bad = np.flatnonzero(codes != expected)
    assert bad.size == 0, f"{name}: x={x[bad[:5]]} got {codes[bad[:5]]} expected {expected[bad[:5]]}"


@pytest.mark.parametrize("name, x, expected", [
    ("e5m2", np.inf, np.inf),
    ("e5m2", -np.inf, -np.inf),
    ("e5m2", np.nan, np.nan),
    ("e5m2", -np.nan, np.nan),
    ("e4m3", np.nan, np.nan),
    ("e4m3", -np.nan, np.nan),
])
def test_encode_specials(name, x, expected):
    fmt, dtype = ELEMENT_FORMATS[name]
    code = fmt.encode(np.array([x], np.float32))
    assert_same_floats(ml_values(code, dtype), [expected])


def test_nearest_code_ties_go_to_even_code():
    # Codes deliberately out of value order, so "even code" differs from "lower" or "upper value".
    values = np.array([2.0, 0.0, 3.0, 1.0])
    codes = np.array([7, 5, 4, 2])
    x = np.array([0.5, 1.5, 2.5, 0.49, 0.51, 2.49, 2.51, -1.0, 0.0, 3.0, 10.0])
    # Ties: 0.5 between 5|2 -> 2 (upper value), 1.5 between 2|7 -> 2 (lower value), 2.5 between 7|4 -> 4.
    # Others: nearest value; outside the codebook the end value.
    expected = [2, 2, 4, 5, 2, 7, 4, 5, 5, 4, 4]
    np.testing.assert_array_equal(nx.nearest_code(x, values, codes), expected)


# --- f32 -> bf16 ---------------------------------------------------------------------------------


def test_f32_to_bf16_matches_ml_dtypes(rng):
    n = 1 << 20
    bits = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)
    quarter = n // 4
    # Ties and their neighbours: the low 16 bits at or next to halfway.
    bits[:quarter] = (bits[:quarter] & 0xFFFF0000) | rng.choice([0x7FFF, 0x8000, 0x8001], quarter)
    # Subnormals and zeros: exponent field cleared.
    bits[quarter:2 * quarter] &= 0x807FFFFF
    special = [0x7F800000, 0xFF800000, 0x7F7FFFFF, 0x7F7F7FFF, 0x7F7F8000, 0xFF7F8000, 0x00000000, 0x80000000,
               0x00008000, 0x00018000, 0x7F800001, 0xFFC00000, 0x7FBFFFFF]
    bits = np.concatenate([bits, np.array(special, np.uint32)])
    x = bits.view(np.float32)
    out = nx.f32_to_bf16(x)
    assert out.dtype == np.uint16
    nan = np.isnan(x)
    np.testing.assert_array_equal(out[~nan], bf16_bits(x[~nan]))
    # NaN stays a quiet NaN with its sign.
    assert ((out[nan] & 0x7FC0) == 0x7FC0).all()
    np.testing.assert_array_equal(out[nan] >> 15, bits[nan] >> 31)


# --- scale_mul -----------------------------------------------------------------------------------


def test_scale_mul_bf16_matches_ml_dtypes(rng):
    n = 3_000_000
    a = rng.integers(0, 1 << 16, n, dtype=np.uint16)
    b = rng.integers(0, 1 << 16, n, dtype=np.uint16)
    a32, b32 = (widen(x.view(ml_dtypes.bfloat16)).astype(np.float32) for x in (a, b))
    exact = np.abs(a32.astype(np.float64) * b32.astype(np.float64))
    # Normal operands and a normal float32 product: there float32 multiplies exactly (8x8-bit
    # significands), so ml_dtypes' rounding of it is the reference (including overflow to Inf).
    normal = ~np.isin(a & 0x7F80, [0, 0x7F80]) & ~np.isin(b & 0x7F80, [0, 0x7F80])
    keep = normal & (exact >= 2.0**-126) & (exact < 2.0**128)
    a, b = a[keep], b[keep]
    assert a.size > n // 3
    expected = bf16_bits(a32[keep] * b32[keep])
    got = nx.scale_mul(a, b, "bf16")
    bad = np.flatnonzero(got != expected)
    assert bad.size == 0, f"a={a[bad[:5]]} b={b[bad[:5]]} got {got[bad[:5]]} expected {expected[bad[:5]]}"


def bf16_value(bits):
    """BF16 pattern -> exact Python float, with DAZ (zero exponent field -> signed zero)."""
    sign = -1.0 if bits & 0x8000 else 1.0
    exp, man = (bits >> 7) & 0xFF, bits & 0x7F
    if exp == 0xFF:
        return math.nan if man else sign * math.inf
    if exp == 0:
        return sign * 0.0
    return sign * math.ldexp(128 + man, exp - 134)


def scale_value(code, scale_format):
    if scale_format == "bf16":
        return bf16_value(code)
    return float(ml_values([code], SCALE_DTYPES[scale_format])[0])


def ref_scale_mul(v, code, scale_format):
    """The scaler's rule with exact Fraction arithmetic, rounded to 8 significant bits by integers."""
    a, b = bf16_value(v), scale_value(code, scale_format)
    if math.isnan(a) or math.isnan(b) or (math.isinf(a) and b == 0) or (math.isinf(b) and a == 0):
        return 0x7FC0
    sign = (math.copysign(1, a) < 0) != (math.copysign(1, b) < 0)
    sign_bit = 0x8000 if sign else 0
    if math.isinf(a) or math.isinf(b):
        return sign_bit | 0x7F80
    p = abs(Fraction(a) * Fraction(b))
    if p == 0:
        return sign_bit
    e = p.numerator.bit_length() - p.denominator.bit_length()  # floor(log2 p) or one more
    if Fraction(2) ** e > p:
        e -= 1
    t = p / Fraction(2) ** (e - 7)  # in [128, 256)
    q, rem = divmod(t.numerator, t.denominator)
    if 2 * rem > t.denominator or (2 * rem == t.denominator and q % 2):
        q += 1
    if q == 256:
        q, e = 128, e + 1
    if e < -126:
        return sign_bit
    if e > 127:
        return sign_bit | 0x7F80
    return sign_bit | (e + 127) << 7 | (q - 128)


@pytest.mark.parametrize("scale_format", ["bf16", "e8m0", "e4m3"])
def test_scale_mul_matches_exact_reference(scale_format, rng):
    code_range = 1 << 16 if scale_format == "bf16" else 256
    # Random pairs over all patterns (NaN, Inf, subnormals, zeros included) ...
    v = rng.integers(0, 1 << 16, 3000)
    codes = rng.integers(0, code_range, 3000)
    # ... and every scale code (random ones for BF16) against edge and random values.
    edges = [0x0000, 0x8000, 0x0001, 0x807F, 0x0080, 0x8080, 0x3F80, 0xBF81, 0x7F7F, 0xFF7F, 0x7F80, 0xFF80,
             0x7FC0, 0xFFC1, 0x7F81]
    grid_v = np.concatenate([edges, rng.integers(0, 1 << 16, 16)])
    grid_codes = rng.integers(0, code_range, 256) if scale_format == "bf16" else np.arange(256)
    gv, gc = np.meshgrid(grid_v, grid_codes)
    v = np.concatenate([v, gv.ravel()]).astype(np.uint16)
    codes = np.concatenate([codes, gc.ravel()])
    scale_codes = codes.astype(np.uint16 if scale_format == "bf16" else np.uint8)
    got = nx.scale_mul(v, scale_codes, scale_format)
    expected = np.array([ref_scale_mul(int(x), int(c), scale_format) for x, c in zip(v, codes)], np.uint16)
    bad = np.flatnonzero(got != expected)
    assert bad.size == 0, f"v={v[bad[:5]]} code={codes[bad[:5]]} got {got[bad[:5]]} expected {expected[bad[:5]]}"


# BF16 bits: sign | 8-bit exponent (bias 127) | 7-bit mantissa; 0x3F80 = 1.0, 0x7F7F = max, 0x0080 = 2^-126.
# E8M0 code c = 2^(c-127); E4M3 bits: sign | 4-bit exponent (bias 7) | 3-bit mantissa.
@pytest.mark.parametrize("v, code, scale_format, expected", [
    # DAZ: subnormal operand 2^-133 x 2^100 would be 2^-33, but reads as +0.
    (0x0001, 0x7180, "bf16", 0x0000),
    (0x8040, 0x3F80, "bf16", 0x8000),  # -subnormal x 1 -> -0
    (0x0040, 0xBF80, "bf16", 0x8000),  # +subnormal x -1 -> -0
    (0x0040, 0xFE, "e8m0", 0x0000),  # 2^-127 x 2^127 would be 1.0
    (0x8001, 0x7E, "e4m3", 0x8000),  # -subnormal x 448 -> -0
    (0x7180, 0x0040, "bf16", 0x0000),  # 2^100 x subnormal scale 2^-127 would be 2^-27
    (0xF180, 0x0040, "bf16", 0x8000),  # -2^100 x subnormal scale -> -0
    # FTZ: 1.875*2^-63 x 1.0625*2^-64 = -(2^-126 - 2^-134), exact but below 2^-126 -> -0.
    (0xA070, 0x1F88, "bf16", 0x8000),
    (0x0080, 0x7E, "e8m0", 0x0000),  # 2^-126 x 2^-1 = 2^-127 -> +0
    (0x8080, 0x7E, "e8m0", 0x8000),  # -2^-127 -> -0
    # 1.75*2^-63 x 1.140625*2^-64 = 1.11111111b*2^-127: a tie that rounds up to even 2^-126, kept.
    (0x2060, 0x1F92, "bf16", 0x0080),
    # Ties to even: 1.75 x 1.15625 = 2*1.00000011b rounds up to 2*1.0000010b = 2.03125 ...
    (0x3FE0, 0x3F94, "bf16", 0x4002),
    # ... and 1.125 x 1.8125 = 2*1.00000101b rounds down to the same 2.03125.
    (0x3F90, 0x3FE8, "bf16", 0x4002),
    (0x3F81, 0x3C, "e4m3", 0x3FC2),  # (1+2^-7) x 1.5 = 1.10000011b -> 1.1000010b
    (0x3F83, 0x3C, "e4m3", 0x3FC4),  # (1+3*2^-7) x 1.5 = 1.10001001b, a tie down to even 1.1000100b
    # NaN operand (either side, any sign or payload) -> 0x7FC0.
    (0x7FC1, 0x3F80, "bf16", 0x7FC0),
    (0xFFC0, 0x7F, "e8m0", 0x7FC0),
    (0x7F81, 0x38, "e4m3", 0x7FC0),
    (0xBF80, 0xFFC0, "bf16", 0x7FC0),
    (0xBF80, 0xFF, "e8m0", 0x7FC0),
    (0x3F80, 0x7F, "e4m3", 0x7FC0),
    (0x3F80, 0xFF, "e4m3", 0x7FC0),
    (0x7F80, 0xFF, "e8m0", 0x7FC0),  # Inf x NaN
    # Inf x 0 -> 0x7FC0, also when the zero is a DAZ subnormal.
    (0x7F80, 0x0000, "bf16", 0x7FC0),
    (0xFF80, 0x8000, "bf16", 0x7FC0),
    (0x7F80, 0x0001, "bf16", 0x7FC0),
    (0x0001, 0x7F80, "bf16", 0x7FC0),
    (0x8000, 0xFF80, "bf16", 0x7FC0),
    (0x7F80, 0x00, "e4m3", 0x7FC0),
    (0xFF80, 0x80, "e4m3", 0x7FC0),
    # Inf x finite -> Inf with the XOR sign.
    (0x7F80, 0xBF80, "bf16", 0xFF80),
    (0xBF80, 0x7F80, "bf16", 0xFF80),
    (0xFF80, 0x00, "e8m0", 0xFF80),  # 2^-127 is not zero
    (0x7F80, 0xB8, "e4m3", 0xFF80),
    (0xFF80, 0x01, "e4m3", 0xFF80),
    # Overflow -> signed Inf: max x 2, 2^127 x 2^1, max x 448.
    (0x7F7F, 0x4000, "bf16", 0x7F80),
    (0xFF7F, 0x4000, "bf16", 0xFF80),
    (0xFF00, 0x80, "e8m0", 0xFF80),
    (0x7F7F, 0x7E, "e4m3", 0x7F80),
    (0x7F7F, 0x3F80, "bf16", 0x7F7F),  # max x 1 stays max
    # 1.75*2^63 x 1.140625*2^64 = 1.11111111b*2^127: halfway between max and 2^128, to even -> Inf.
    (0x5F60, 0x5F92, "bf16", 0x7F80),
    # E8M0 0x00 = 2^-127 is not flushed: 2^100 x 2^-127 = 2^-27.
    (0x7180, 0x00, "e8m0", 0x3200),
    (0x7F00, 0x00, "e8m0", 0x3F80),  # 2^127 x 2^-127 = 1.0
    # E4M3 subnormal scales are exact: 2^-9, 3*2^-9 = 1.5*2^-8, -5*2^-9 = -1.25*2^-7.
    (0x3F80, 0x01, "e4m3", 0x3B00),
    (0x3F80, 0x03, "e4m3", 0x3BC0),
    (0x3F80, 0x85, "e4m3", 0xBC20),
], ids=lambda p: f"{p:#x}" if isinstance(p, int) else p)
def test_scale_mul_explicit_cases(v, code, scale_format, expected):
    got = int(nx.scale_mul(np.array([v], np.uint16), np.array([code]), scale_format)[0])
    assert got == expected, f"{v:#06x} x {scale_format} {code:#x}: got {got:#06x}, expected {expected:#06x}"
