"""Number formats of the DECA format, written from their bit fields (tests check them against ml_dtypes).

BF16 patterns are ``uint16``. Element formats (E5M2, E4M3FN, E2M1) are ``MiniFloat`` codebooks;
scale formats are decoded to exact float64 values; ``scale_mul`` is the hardware's scaler.
"""

from dataclasses import dataclass
from functools import cached_property

import numpy as np

BF16_NAN = 0x7FC0
BF16_MIN_NORMAL = 2.0**-126


def f32_to_bf16(x):
    """float32 values -> BF16 patterns, round to nearest even; NaNs stay NaN (quiet, sign kept)."""
    bits = np.asarray(x, np.float32).view(np.uint32)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    quiet_nan = ((bits >> 16) | 0x0040).astype(np.uint16)
    return np.where(np.isnan(np.asarray(x, np.float32)), quiet_nan, rounded)


def bf16_to_f32(bits):
    """BF16 patterns -> float32 values (exact, subnormals kept)."""
    return (np.asarray(bits, np.uint16).astype(np.uint32) << 16).view(np.float32)


def bf16_to_f64_daz(bits):
    """BF16 patterns -> float64 values, with a zero exponent field read as signed zero (DAZ)."""
    bits = np.asarray(bits, np.uint16)
    with np.errstate(invalid="ignore"):  # widening a signalling NaN raises "invalid"; it stays NaN
        v = bf16_to_f32(bits).astype(np.float64)
    return np.where((bits & 0x7F80) == 0, np.copysign(0.0, v), v)


def f64_to_bf16_exact(v):
    """float64 values that BF16 represents exactly (or NaN/Inf) -> BF16 patterns; NaN -> 0x7FC0 with sign."""
    v = np.asarray(v, np.float64)
    bits = (v.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    sign = (np.signbit(v).astype(np.uint16)) << 15
    return np.where(np.isnan(v), sign | BF16_NAN, bits)


@dataclass(frozen=True)
class MiniFloat:
    """A sign/exponent/mantissa element format of at most 8 bits.

    ``ieee_specials``: the all-ones exponent encodes Inf (mantissa 0) and NaN (E5M2).
    ``nan_all_ones``: only the all-ones magnitude is NaN and there is no Inf (E4M3FN).
    """

    name: str
    exp_bits: int
    man_bits: int
    bias: int
    ieee_specials: bool = False
    nan_all_ones: bool = False

    @property
    def bits(self):
        return 1 + self.exp_bits + self.man_bits

    @cached_property
    def values(self):
        """float64 value of every code (NaN where the code is NaN)."""
        code = np.arange(1 << self.bits)
        sign = np.where(code >> (self.bits - 1), -1.0, 1.0)
        exp = (code >> self.man_bits) & ((1 << self.exp_bits) - 1)
        man = code & ((1 << self.man_bits) - 1)
        frac = man / (1 << self.man_bits)
        mag = np.where(exp == 0, frac * 2.0 ** (1 - self.bias), (1 + frac) * 2.0 ** (exp - self.bias))
        top = exp == (1 << self.exp_bits) - 1
        if self.ieee_specials:
            mag = np.where(top, np.where(man == 0, np.inf, np.nan), mag)
        if self.nan_all_ones:
            mag = np.where(top & (man == (1 << self.man_bits) - 1), np.nan, mag)
        return sign * mag

    @cached_property
    def max_code(self):
        """Largest finite positive code (codes 0..max_code increase in value)."""
        pos = self.values[: 1 << (self.bits - 1)]
        return int(np.flatnonzero(np.isfinite(pos))[-1])

    @property
    def max(self):
        return float(self.values[self.max_code])

    @property
    def nan_code(self):
        if self.ieee_specials:
            return (((1 << self.exp_bits) - 1) << self.man_bits) | (1 << (self.man_bits - 1))
        if self.nan_all_ones:
            return (1 << (self.bits - 1)) - 1
        return None

    @property
    def inf_code(self):
        return ((1 << self.exp_bits) - 1) << self.man_bits if self.ieee_specials else None

    def lut(self):
        """256-entry BF16 LUT of the codes (every value of these formats is exact in BF16)."""
        lut = np.zeros(256, np.uint16)
        lut[: 1 << self.bits] = f64_to_bf16_exact(self.values)
        return lut

    def encode(self, x):
        """float32 values -> codes: round to nearest, ties to even, finite overflow saturates to +-max.

        NaN encodes as the format's NaN and Inf as its Inf; the caller rejects them for formats
        that have none.
        """
        x = np.asarray(x, np.float32)
        pos = np.arange(self.max_code + 1)
        mag = nearest_code(np.abs(x), self.values[pos], pos)
        code = mag | (np.signbit(x).astype(np.int64) << (self.bits - 1))
        if self.inf_code is not None:
            code = np.where(np.isinf(x), self.inf_code | (np.signbit(x).astype(np.int64) << (self.bits - 1)), code)
        if self.nan_code is not None:
            code = np.where(np.isnan(x), self.nan_code, code)
        return code.astype(np.uint16)


E5M2 = MiniFloat("e5m2", 5, 2, 15, ieee_specials=True)
E4M3 = MiniFloat("e4m3", 4, 3, 7, nan_all_ones=True)
E2M1 = MiniFloat("e2m1", 2, 1, 1)


def nearest_code(x, values, codes):
    """Code of the value nearest to each x; a tie goes to the even code (the lower code if both or neither are even).

    Above the largest value or below the smallest, the end value is chosen (saturation). For the
    MiniFloat formats and two's-complement integers this is round-to-nearest-even.
    """
    values = np.asarray(values, np.float64)
    codes = np.asarray(codes, np.int64)
    order = np.argsort(values, kind="stable")
    values, codes = values[order], codes[order]
    if len(values) == 1:
        return np.full(np.shape(x), codes[0], np.int64)
    mids = (values[:-1] + values[1:]) / 2
    x = np.asarray(x, np.float64)
    i = np.searchsorted(mids, x, side="left")
    tie = (i < len(mids)) & (x == mids[np.minimum(i, len(mids) - 1)])
    lo, hi = codes[i], codes[np.minimum(i + 1, len(codes) - 1)]
    hi_even, lo_even = hi % 2 == 0, lo % 2 == 0
    take_hi = tie & ((hi_even & ~lo_even) | ((hi_even == lo_even) & (hi < lo)))
    return np.where(take_hi, hi, lo)


def scale_values(codes, scale_format):
    """Exact float64 value of scale codes: BF16 (with DAZ), E8M0 (2^(x-127), 0xFF NaN) or E4M3FN."""
    codes = np.asarray(codes)
    if scale_format == "bf16":
        return bf16_to_f64_daz(codes.astype(np.uint16))
    if scale_format == "e8m0":
        x = codes.astype(np.int64)
        return np.where(x == 0xFF, np.nan, np.ldexp(1.0, x - 127))
    if scale_format == "e4m3":
        return E4M3.values[codes.astype(np.int64)]
    raise ValueError(f"unknown scale format {scale_format!r}")


def scale_mul(v, scale_codes, scale_format):
    """The scaler: BF16 pattern v times a scale, as a BF16 pattern.

    A BF16 operand with exponent field 0 counts as signed zero; E8M0 and E4M3 scales keep their
    exact value. Any NaN operand, or Inf x 0, gives 0x7FC0. Otherwise the exact product is rounded
    to nearest-even BF16 with unbounded exponent; a rounded magnitude below 2^-126 becomes signed
    zero, one above the BF16 maximum becomes signed Inf.
    """
    return product_to_bf16(bf16_to_f64_daz(v), scale_values(scale_codes, scale_format))


def product_to_bf16(a, b):
    """``scale_mul`` on operands already decoded to float64 (DAZ applied, scales exact)."""
    with np.errstate(invalid="ignore"):
        # Exact: the significands have at most 8 x 8 bits and the exponents stay inside float64's range.
        p = np.multiply(a, b)
    bits = np.atleast_1d(p).view(np.uint64)
    # Round the significand to BF16's 8 bits, nearest even, with float64's (unbounded) exponent.
    bits = (bits + ((bits >> np.uint64(45)) & np.uint64(1)) + np.uint64((1 << 44) - 1)) & ~np.uint64((1 << 45) - 1)
    with np.errstate(over="ignore", invalid="ignore"):
        # Exact in BF16's normal range; beyond its maximum the cast overflows to Inf as the rule wants.
        out = (bits.view(np.float64).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    # Below 2^-126 the float32 is subnormal or zero: keep only the sign.
    out = np.where(out & 0x7F80, out, out & 0x8000)
    out[np.isnan(np.atleast_1d(p))] = BF16_NAN
    return out.reshape(np.shape(p))
