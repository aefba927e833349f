"""An independent reference for ``decompress(compress(w, scheme, ...))``: the decoder of intent.

Each scheme is re-derived from its description (the format text in ``deca.golden.format`` and the
scheme summaries) with plain NumPy and ml_dtypes instead of the golden model's own numerics:
pruning by a stable sort, group scales by looping over column slices of the (M, K) matrix, element
codes by ml_dtypes casts, ``np.rint`` or an argmin over distances, and the scaler's BF16 rounding
by rounding a ``frexp`` mantissa. Only format constants come from the code under test.

Quantization follows the float32 expressions of ``golden/schemes.py`` (as its docstring asks of
a reference): a BF16 scale is BF16(float32 expression), flushed to 0 below 2^-126, and elements
are divided by their scale in float32 (an element of a group whose scale is 0 quantizes 0).
"""

from dataclasses import dataclass

import ml_dtypes
import numpy as np

from deca.golden.format import TILE_COLS, TILE_ROWS

BF16 = ml_dtypes.bfloat16
BF16_MIN_NORMAL = 2.0**-126
E8M0 = ml_dtypes.float8_e8m0fnu
E4M3 = ml_dtypes.float8_e4m3fn
E2M1 = ml_dtypes.float4_e2m1fn

#: The QLoRA NF4 levels (Dettmers et al. 2023, appendix E), codes 0..15 in increasing value.
NF4_LEVELS = (
    -1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453,
    -0.28444138169288635, -0.18477343022823334, -0.09105003625154495, 0.0,
    0.07958029955625534, 0.16093020141124725, 0.24611230194568634, 0.33791524171829224,
    0.44070982985305786, 0.5626170039176941, 0.7229568362236023, 1.0,
)

#: The scale group along K of each scheme when none is given: None = unscaled, "channel" = K.
DEFAULT_GROUP = {
    "bf16": None, "bf8": None, "fp8e4m3": None, "codebook": None,
    "mxfp4": 32, "nvfp4": 16, "int8": "channel", "int4": 128, "int2": 32, "nf4": 64,
    "int1": 32, "ternary": "channel",
}


@dataclass
class Expected:
    bits: np.ndarray    # (M, K) BF16 patterns that decompress must return
    stored: np.ndarray  # (M, K) elements the format stores (all True in dense mode)
    codes: np.ndarray   # (M, K) code of every element (meaningful where stored)
    q_bits: int
    sparse: bool
    tensor_scale: float = 1.0


@dataclass
class _Quantized:
    codes: np.ndarray                  # (M, K) integer codes
    values: np.ndarray                 # (M, K) float64 value of each code (its LUT entry)
    q_bits: int
    scales: np.ndarray | None = None   # (M, K) float64 scale of each element; None when unscaled
    nonzero: np.ndarray | None = None  # (M, K) elements the scheme keeps (ternary drops zeros)
    tensor_scale: float = 1.0


# Pruning and groups -----------------------------------------------------------------------------


def prune(w, density):
    """Keep the round(density * M * K) largest |w|; equal magnitudes keep the lower row-major index."""
    order = np.argsort(-np.abs(w.ravel().astype(np.float64)), kind="stable")
    keep = np.zeros(w.size, bool)
    keep[order[:round(density * w.size)]] = True
    return keep.reshape(w.shape)


def group_slices(k, group):
    """Column slices of the groups along K: G consecutive columns from column 0, the last one shorter."""
    return [slice(start, min(start + group, k)) for start in range(0, k, group)]


def _per_group(shape, group, fn):
    """(M, K) float64 array holding, on each group's columns, fn(columns) -> one value per row."""
    out = np.empty(shape, np.float64)
    for cols in group_slices(shape[1], group):
        out[:, cols] = np.asarray(fn(cols), np.float64)[:, None]
    return out


def _resolve_group(scheme, group_size, k):
    if group_size is None:
        group_size = DEFAULT_GROUP[scheme]
        # A default group wider than the matrix means one group per row.
        if isinstance(group_size, int) and group_size > k and group_size not in (16, 32):
            group_size = "channel"
    return k if group_size == "channel" else group_size


# Number formats -----------------------------------------------------------------------------------


def _absmax(w, cols):
    return np.abs(w[:, cols]).max(axis=1)


def _bf16_scale(x):
    """A float32 scale expression -> the value of its BF16 scale; 0 below the BF16 normal range."""
    s = np.asarray(x, np.float32).astype(BF16).astype(np.float64)
    return np.where(s < BF16_MIN_NORMAL, 0.0, s)


def _divide(w, scales):
    """float32 w / scale; 0 where the scale is 0."""
    s = np.asarray(scales, np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(s == 0, np.float32(0), w / s)


def _minifloat(x, dtype):
    """Round x (exact in float32) to an ml_dtypes format, saturating: (codes, values).

    The cast starts from float32: ml_dtypes rounds a float64 through float32, i.e. twice.
    """
    top = float(ml_dtypes.finfo(dtype).max)
    y = np.clip(np.asarray(x, np.float32), -top, top).astype(dtype)
    return y.view(np.uint8).astype(np.int64), y.astype(np.float64)


def nearest_index(x, levels):
    """Index of the level nearest to each x; a tie goes to an even index, then to the lowest one.

    Distances are compared exactly, so that a tiny x between -v and v is not taken for a tie:
    x - level = head + tail with head the rounded float64 difference (Knuth's TwoSum).
    """
    x = np.asarray(x, np.float64)[..., None]
    minus_level = -np.asarray(levels, np.float64)
    head = x + minus_level
    z = head - x
    tail = (x - (head - z)) + (minus_level - z)
    # |x - level| = |head| + sign(head) * tail, with |tail| at most half an ulp of head: compare
    # heads first, then tails.
    distance, extra = np.abs(head), np.where(head < 0, -tail, tail)
    tied = distance == distance.min(axis=-1, keepdims=True)
    tied &= extra == np.where(tied, extra, np.inf).min(axis=-1, keepdims=True)
    even = tied & (np.arange(len(levels)) % 2 == 0)
    return np.where(even.any(axis=-1, keepdims=True), even, tied).argmax(axis=-1)


def _bf16_bits(values):
    """float64 values that BF16 holds exactly (or +-Inf) -> BF16 patterns."""
    with np.errstate(over="ignore"):
        return np.asarray(values, np.float64).astype(np.float32).astype(BF16).view(np.uint16)


def _flush(x):
    """Magnitudes below the BF16 normal range become zero of the same sign."""
    return np.where(np.abs(x) < BF16_MIN_NORMAL, np.copysign(0.0, x), x)


def scale_mul(values, scales):
    """The scaler on exact operand values: BF16 value (subnormal reads as zero) times exact scale,
    rounded to 8 significant bits (nearest even, unbounded exponent), then flushed below 2^-126."""
    # Products of two significands of at most 8 bits are exact in float64.
    mantissa, exponent = np.frexp(_flush(values) * scales)
    rounded = np.ldexp(mantissa.astype(np.float32).astype(BF16).astype(np.float64), exponent)
    return _bf16_bits(_flush(rounded))


# Schemes ------------------------------------------------------------------------------------------


def _raw_bf16(w):
    b = w.astype(BF16)
    return _Quantized(b.view(np.uint16).astype(np.int64), b.astype(np.float64), 16)


def _float8(w, group, dtype):
    if group is None:
        return _Quantized(*_minifloat(w, dtype), 8)
    top = np.float32(ml_dtypes.finfo(dtype).max)
    scales = _per_group(w.shape, group, lambda cols: _bf16_scale(_absmax(w, cols) / top))
    return _Quantized(*_minifloat(_divide(w, scales), dtype), 8, scales)


def _mxfp4(w):
    def scale(cols):
        # OCP MX: 2^(floor(log2(amax)) - 2), 2 being E2M1's largest exponent, within E8M0's range.
        amax = _absmax(w, cols).astype(np.float64)
        with np.errstate(divide="ignore"):
            exponent = np.where(amax > 0, np.floor(np.log2(amax)) - 2, -127)
        return np.exp2(np.clip(exponent, -127, 127)).astype(E8M0).astype(np.float64)

    scales = _per_group(w.shape, 32, scale)
    return _Quantized(*_minifloat(w / scales, E2M1), 4, scales)


def _nvfp4(w):
    amax = np.abs(w).max()
    tensor_scale = amax / np.float32(448 * 6) if amax > 0 else np.float32(1)
    # E4M3 block scales of amax / 6 relative to the FP32 tensor scale amax / (448 * 6).
    scales = _per_group(w.shape, 16,
                        lambda cols: _minifloat(_absmax(w, cols) / np.float32(6) / tensor_scale, E4M3)[1])
    divisor = scales.astype(np.float32) * tensor_scale
    return _Quantized(*_minifloat(_divide(w, divisor), E2M1), 4, scales, tensor_scale=float(tensor_scale))


def _integer(w, group, q):
    qmax = 2 ** (q - 1) - 1
    scales = _per_group(w.shape, group, lambda cols: _bf16_scale(_absmax(w, cols) / np.float32(qmax)))
    n = np.clip(np.rint(_divide(w, scales)), -qmax, qmax).astype(np.int64)
    return _Quantized(n % 2**q, n.astype(np.float64), q, scales)


def _nearest(w, group, levels):
    lut = np.asarray(levels, np.float32).astype(BF16).astype(np.float64)
    q = max(1, (len(lut) - 1).bit_length())
    if group is None:
        codes = nearest_index(w, lut)
        return _Quantized(codes, lut[codes], q)
    top = np.float32(np.abs(lut).max())
    scales = _per_group(w.shape, group, lambda cols: _bf16_scale(_absmax(w, cols) / top))
    codes = nearest_index(_divide(w, scales), lut)
    return _Quantized(codes, lut[codes], q, scales)


def _sign_codes(negative, scales, nonzero=None):
    """Q1 codes: 0 = +1, 1 = -1."""
    return _Quantized(negative.astype(np.int64), np.where(negative, -1.0, 1.0), 1, scales, nonzero)


def _int1(w, group, stored):
    # The L2-optimal sign scale: mean |w| over the group's stored weights (padding is no weight).
    def mean_abs(cols):
        count = stored[:, cols].sum(axis=1)
        total = np.abs(w[:, cols]).astype(np.float64).sum(axis=1)
        return _bf16_scale((total / np.maximum(count, 1)).astype(np.float32))

    return _sign_codes(w < 0, _per_group(w.shape, group, mean_abs))


def _ternary(w, group):
    # BitNet b1.58: gamma = mean |w| over the group's elements of the (pruned) M x K matrix.
    scales = _per_group(w.shape, group,
                        lambda cols: _bf16_scale(np.abs(w[:, cols]).astype(np.float64).mean(axis=1).astype(np.float32)))
    t = np.rint(np.clip(_divide(w, scales), -1, 1))
    return _sign_codes(t < 0, scales, nonzero=t != 0)


def expected(w, scheme, density=None, mask=None, group_size=None, codebook=None):
    """What ``decompress(compress(w, scheme, ...))`` must return, and what the format must store."""
    w = np.asarray(w, np.float32)
    sparse = mask is not None or density not in (None, 1) or scheme == "ternary"
    if mask is None:
        mask = prune(w, 1 if density is None else density)
    w = np.where(mask, w, np.float32(0))
    group = _resolve_group(scheme, group_size, w.shape[1])
    if scheme == "bf16":
        qz = _raw_bf16(w)
    elif scheme in ("bf8", "fp8e4m3"):
        qz = _float8(w, group, ml_dtypes.float8_e5m2 if scheme == "bf8" else E4M3)
    elif scheme == "mxfp4":
        qz = _mxfp4(w)
    elif scheme == "nvfp4":
        qz = _nvfp4(w)
    elif scheme in ("int8", "int4", "int2"):
        qz = _integer(w, group, int(scheme[3:]))
    elif scheme in ("nf4", "codebook"):
        qz = _nearest(w, group, NF4_LEVELS if scheme == "nf4" else codebook)
    elif scheme == "int1":
        qz = _int1(w, group, mask)
    elif scheme == "ternary":
        qz = _ternary(w, group)
    else:
        raise ValueError(f"no reference for scheme {scheme!r}")
    stored = mask if qz.nonzero is None else mask & qz.nonzero
    decoded = _bf16_bits(qz.values) if qz.scales is None else scale_mul(qz.values, qz.scales)
    bits = np.where(stored, decoded, np.uint16(0)).astype(np.uint16)
    return Expected(bits, stored, qz.codes, qz.q_bits, sparse, qz.tensor_scale)


# Reading streams and comparing results -------------------------------------------------------------


def mask_bits(mask):
    """A tile's 64 mask bytes -> (16, 32) bool: element e = 32r + c is bit e % 8 of byte e // 8."""
    b = np.frombuffer(mask, np.uint8)
    e = np.arange(TILE_ROWS * TILE_COLS)
    return ((b[e // 8] >> (e % 8)) & 1).astype(bool).reshape(TILE_ROWS, TILE_COLS)


def unpack_codes(stream, n, q):
    """The first n codes of a value stream: code k is stream bits [kQ, kQ + Q), bit i = bit i % 8 of byte i // 8."""
    b = np.frombuffer(stream, np.uint8)
    i = np.arange(n)[:, None] * q + np.arange(q)
    return (((b[i // 8] >> (i % 8)) & 1).astype(np.int64) << np.arange(q)).sum(axis=1)


def bf16_values(bits):
    return np.asarray(bits, np.uint16).view(BF16).astype(np.float64)


def assert_same_bf16(actual, want):
    """Equal BF16 patterns, NaNs compared by NaN-ness; the message lists the first differences."""
    actual, want = np.asarray(actual, np.uint16), np.asarray(want, np.uint16)
    assert actual.shape == want.shape, f"shape {actual.shape} != {want.shape}"
    a, b = bf16_values(actual), bf16_values(want)
    both_nan = np.isnan(a) & np.isnan(b)
    bad = np.argwhere((actual != want) & ~both_nan)
    if bad.size:
        shown = ", ".join(f"{tuple(int(i) for i in p)}: {actual[tuple(p)]:#06x} ({a[tuple(p)]:g}) != "
                          f"{want[tuple(p)]:#06x} ({b[tuple(p)]:g})" for p in bad[:6])
        raise AssertionError(f"{len(bad)} of {actual.size} elements differ, e.g. {shown}")
