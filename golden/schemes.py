"""Compression schemes: how float32 weights become codes, a LUT and per-group scales.

Every scheme computes in float32 the way the docstrings say, so an independent reference
(tests/reference.py) can reproduce its output exactly. Rounding is always to nearest with ties to
the even code (``numerics.nearest_code``); a BF16 scale is BF16(float32 expression) with values
below the BF16 normal range flushed to 0 (the scaler reads them as zero anyway).
"""

import math
from dataclasses import dataclass

import numpy as np

from . import kernels as _kernels
from .format import TileConfig
from .numerics import BF16_MIN_NORMAL, E2M1, E4M3, E5M2, bf16_to_f32, f32_to_bf16, nearest_code

#: The QLoRA NF4 codebook (Dettmers et al. 2023), stored in the LUT rounded to BF16.
NF4_LEVELS = (
    -1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453,
    -0.28444138169288635, -0.18477343022823334, -0.09105003625154495, 0.0,
    0.07958029955625534, 0.16093020141124725, 0.24611230194568634, 0.33791524171829224,
    0.44070982985305786, 0.5626170039176941, 0.7229568362236023, 1.0,
)


@dataclass(frozen=True)
class Scheme:
    """What a scheme stores and which options it takes.

    ``scaling``: "never", "always" or "optional" (scaled only when a group size is given).
    ``default_group``: group size along K when scaled and none is given ("channel" = K).
    ``fixed_group``: the only group size the scheme allows (MX and NV block formats).
    """

    name: str
    q_bits: int | None  # None: from the codebook size
    scale_format: str | None
    scaling: str
    default_group: int | str | None
    fixed_group: int | None = None
    encodes_nan: bool = False
    encodes_inf: bool = False
    always_sparse: bool = False
    summary: str = ""


SCHEMES = {
    s.name: s
    for s in (
        Scheme("bf16", 16, None, "never", None, encodes_nan=True, encodes_inf=True,
               summary="raw BF16 values (Q16), sparsity only"),
        Scheme("bf8", 8, None, "never", None, encodes_nan=True, encodes_inf=True,
               summary="FP8 E5M2 codes (Q8), no scales; finite overflow saturates"),
        Scheme("fp8e4m3", 8, "bf16", "optional", None, encodes_nan=True,
               summary="FP8 E4M3FN codes (Q8), optional BF16 scale = absmax/448 per group"),
        Scheme("mxfp4", 4, "e8m0", "always", 32, fixed_group=32,
               summary="OCP MXFP4: FP4 E2M1 codes + E8M0 scale per 32 elements"),
        Scheme("nvfp4", 4, "e4m3", "always", 16, fixed_group=16,
               summary="NVFP4: FP4 E2M1 codes + E4M3 scale per 16 elements + FP32 tensor scale"),
        Scheme("int8", 8, "bf16", "always", "channel", summary="symmetric int8 (-127..127), BF16 absmax/127 scale"),
        Scheme("int4", 4, "bf16", "always", 128, summary="symmetric int4 (-7..7), BF16 absmax/7 scale"),
        Scheme("int2", 2, "bf16", "always", 32, summary="symmetric int2 (-1..1), BF16 absmax scale"),
        Scheme("nf4", 4, "bf16", "always", 64, summary="QLoRA NF4 codebook, BF16 absmax scale"),
        Scheme("int1", 1, "bf16", "always", 32, summary="1-bit: code 0 = +1, 1 = -1, BF16 mean|w| scale"),
        Scheme("ternary", 1, "bf16", "always", "channel", always_sparse=True,
               summary="1.58-bit {-1,0,+1}: zeros in the bitmask, Q1 sign codes, BF16 absmean scale"),
        Scheme("codebook", None, "bf16", "optional", None,
               summary="user codebook of up to 2^Q BF16 values, nearest-value codes, optional BF16 scale"),
    )
}


def get_scheme(name):
    try:
        return SCHEMES[name]
    except KeyError:
        raise ValueError(f"unknown scheme {name!r}; known schemes: {', '.join(SCHEMES)}") from None


def resolve_group_size(scheme, group_size, k):
    """The group size G along K (None when unscaled), validated for a matrix with K columns."""
    if scheme.scaling == "never":
        if group_size is not None:
            raise ValueError(f"scheme {scheme.name!r} has no scales; do not give a group size")
        return None
    if group_size is None:
        if scheme.scaling == "optional":
            return None
        group_size = scheme.default_group
        # A default wider than the matrix means one group per row.
        if group_size != "channel" and group_size > k and group_size not in (16, 32):
            group_size = "channel"
    if group_size == "channel":
        group_size = k
    if isinstance(group_size, bool) or not isinstance(group_size, (int, np.integer)):
        raise ValueError(f"group size must be an integer or 'channel', got {group_size!r}")
    group_size = int(group_size)
    if scheme.fixed_group is not None and group_size != scheme.fixed_group:
        raise ValueError(f"scheme {scheme.name!r} uses groups of {scheme.fixed_group} elements; group size {group_size} is not allowed")
    if not (group_size in (16, 32) or group_size == k or (group_size % 32 == 0 and 0 < group_size <= k)):
        raise ValueError(
            f"group size {group_size} is not allowed for K={k}: use 16, 32, a multiple of 32 up to K, or K ('channel')")
    return group_size


def tile_scale_group(group_size):
    """The in-tile scale group g for a group size G along K."""
    return 16 if group_size == 16 else 32


def element_groups(group_size, k_padded):
    """Group index along K of every padded column; all columns of one tile share a group when g = 32."""
    c = np.arange(k_padded)
    return c // 16 if group_size == 16 else (32 * (c // 32)) // group_size


@dataclass
class Quantized:
    codes: np.ndarray          # (Mp, Kp) codes of every element (those not stored are ignored)
    config: TileConfig
    group_scales: np.ndarray | None  # (Mp, groups) scale codes
    drop_code: int = -1        # a code the scheme turns into a zero, stored in the mask instead (ternary)
    tensor_scale: float = 1.0


def _bf16_scale(x):
    """float32 scale values -> BF16 scale codes; subnormal results flush to +0, overflow is an error."""
    s = f32_to_bf16(np.asarray(x, np.float32))
    s = np.where(np.abs(bf16_to_f32(s)) < BF16_MIN_NORMAL, np.uint16(0), s)
    if np.any(np.isinf(bf16_to_f32(s))):
        raise ValueError("weights too large: a group scale overflows BF16")
    return s


def _divide(w, scale_per_elem):
    """float32 w / scale, with 0 where the scale is 0 (an all-zero group)."""
    s = np.asarray(scale_per_elem, np.float32)
    return np.where(s == 0, np.float32(0), w / np.where(s == 0, np.float32(1), s)).astype(np.float32)


def _lut_from_values(values):
    lut = np.zeros(256, np.uint16)
    lut[: len(values)] = f32_to_bf16(np.asarray(values, np.float32))
    return lut


def _int_lut(q):
    v = np.arange(1 << q)
    return _lut_from_values(np.where(v >= 1 << (q - 1), v - (1 << q), v))


def _codebook_lut(codebook):
    cb = np.asarray(codebook, np.float64).ravel()
    if not 1 <= cb.size <= 256:
        raise ValueError(f"a codebook has 1..256 values, got {cb.size}")
    if not np.all(np.isfinite(cb)):
        raise ValueError("codebook values must be finite")
    lut = _lut_from_values(cb.astype(np.float32))
    values = bf16_to_f32(lut[: cb.size])
    if len(np.unique(values)) != cb.size:
        raise ValueError("codebook values must stay distinct after rounding to BF16")
    return lut, cb.size


def _element_tables(f):
    """``kernels.encode_with_tables``'s lookup tables for an element function f (float32 -> codes).

    f must pick its code by comparing x with breakpoints, so that where f agrees at both ends of
    the float32 patterns sharing top bits T it agrees in between: ``exact[T]`` is f at the
    pattern T << 16, ``inner[T]`` f on (T << 16) | 1 .. (T << 16) | 0xFFFF, or AMBIGUOUS.
    """
    top = np.arange(1 << 16, dtype=np.uint32) << np.uint32(16)
    with np.errstate(invalid="ignore", over="ignore"):  # NaN patterns: schemes that cannot encode them never see one
        exact = f(top.view(np.float32))
        lo, hi = f((top | np.uint32(1)).view(np.float32)), f((top | np.uint32(0xFFFF)).view(np.float32))
    inner = np.where(lo == hi, lo, _kernels.AMBIGUOUS)
    return exact.astype(np.int16), inner.astype(np.int16)


_TABLES = {}  # key -> tables, the most recently used last
#: Tables kept (256 KB each): a run drawing a codebook per tile (``deca verify``) would otherwise
#: keep every one it drew.
TABLES_KEPT = 32


def _tables(f, key):
    tables = _TABLES.pop(key) if key in _TABLES else _element_tables(f)
    _TABLES[key] = tables
    if len(_TABLES) > TABLES_KEPT:
        del _TABLES[next(iter(_TABLES))]
    return tables


def _encode(w, f, key, divisor=None, groups=None):
    """f(x) for x = w / divisor[row, group of column] in float32 (``_divide``), x = w without divisor.

    ``key`` names f for the table cache (scheme and LUT).
    """
    tables = _tables(f, key)
    scaled = divisor is not None
    if not scaled:
        divisor, groups = np.zeros((1, 1), np.float32), np.zeros(1, np.int64)
    divisor = np.ascontiguousarray(divisor, np.float32)
    codes, ambiguous = _kernels.encode_with_tables(w, divisor, np.asarray(groups, np.int64), scaled, *tables)
    if ambiguous:
        r, c = np.nonzero(codes == _kernels.AMBIGUOUS)
        x = _divide(w[r, c], divisor[r, groups[c]]) if scaled else w[r, c]
        codes[r, c] = f(x)
    return codes


def quantize(scheme, w, group_size, sparse, shape, kept=None, codebook=None):
    """Quantize the padded, pruned float32 matrix ``w`` (Mp, Kp).

    ``group_size``: G along K from ``resolve_group_size`` (None when unscaled); ``shape``: the
    (M, K) of the real elements (the rest is padding); ``kept``: (M, K) bool of the elements not
    pruned (None: all).
    """
    if scheme.name != "codebook" and codebook is not None:
        raise ValueError(f"scheme {scheme.name!r} takes no codebook")
    scaled = group_size is not None
    groups = element_groups(group_size, w.shape[1]) if scaled else None
    starts = np.flatnonzero(np.diff(groups, prepend=-1)) if scaled else None

    def per_group(reduce, a):
        return reduce.reduceat(a, starts, axis=1)

    def real_count():
        """float64 count of the elements inside (M, K) of each group."""
        m, k = shape
        ends = np.append(starts[1:], w.shape[1])
        per_row = np.clip(np.minimum(ends, k) - starts, 0, None).astype(np.float64)
        return np.where(np.arange(w.shape[0])[:, None] < m, per_row[None, :], 0.0)

    absmax = None
    if scaled:
        absmax, saw_nan = _kernels.group_absmax(w, starts)
        if saw_nan:  # NumPy's maximum keeps the NaN's payload, which the scale's pattern shows
            absmax = per_group(np.maximum, np.abs(w))
    name = scheme.name
    tensor_scale = 1.0
    drop_code = -1
    scale_format = scheme.scale_format if scaled else None

    if name == "bf16":
        q, lut, lut_size = 16, np.zeros(256, np.uint16), 256
        codes, gscale = f32_to_bf16(w), None
    elif name in ("bf8", "fp8e4m3"):
        fmt = E5M2 if name == "bf8" else E4M3
        q, lut, lut_size = 8, fmt.lut(), 256
        if scaled:
            gscale = _bf16_scale(absmax / np.float32(fmt.max))
            codes = _encode(w, fmt.encode, name, bf16_to_f32(gscale), groups)
        else:
            gscale = None
            codes = _encode(w, fmt.encode, name)
    elif name == "mxfp4":
        # OCP MX v1.0: X = 2^(floor(log2(amax)) - emax_elem), emax_elem = 2 for E2M1, clamped to E8M0's range.
        _, e = np.frexp(absmax)
        exp = np.clip(np.where(absmax > 0, e - 1 - 2, -127), -127, 127)
        gscale = (exp + 127).astype(np.uint16)
        # w / 2^exp in float32 is the exact product rounded once, as ldexp(w, -exp) rounds it.
        codes = _encode(w, E2M1.encode, "e2m1", np.ldexp(1.0, exp).astype(np.float32), groups)
        q, lut, lut_size = 4, E2M1.lut(), 16
    elif name == "nvfp4":
        amax_t = np.float32(np.max(absmax))
        tensor_scale = float(amax_t / np.float32(448.0 * 6.0)) if amax_t > 0 else 1.0
        ts = np.float32(tensor_scale)
        gscale = E4M3.encode(absmax / np.float32(6.0) / ts)
        denom = (E4M3.values[gscale.astype(np.int64)].astype(np.float32) * ts).astype(np.float32)
        codes = _encode(w, E2M1.encode, "e2m1", denom, groups)
        q, lut, lut_size = 4, E2M1.lut(), 16
    elif name in ("int8", "int4", "int2"):
        q = int(name[3:])
        qmax = (1 << (q - 1)) - 1
        gscale = _bf16_scale(absmax / np.float32(qmax))
        codes = _encode(w, lambda x: np.clip(np.rint(x), -qmax, qmax).astype(np.int64) & ((1 << q) - 1), name,
                        bf16_to_f32(gscale), groups)
        lut, lut_size = _int_lut(q), 1 << q
    elif name in ("nf4", "codebook"):
        if name == "nf4":
            lut, lut_size = _lut_from_values(NF4_LEVELS), 16
        elif codebook is None:
            raise ValueError("scheme 'codebook' needs a codebook (a list of up to 256 values)")
        else:
            lut, lut_size = _codebook_lut(codebook)
        q = 4 if name == "nf4" else max(1, math.ceil(math.log2(lut_size)))
        values = bf16_to_f32(lut[:lut_size])
        f = lambda x: nearest_code(x, values, np.arange(lut_size))  # noqa: E731
        key = (name, lut.tobytes(), lut_size)
        if scaled:
            top = np.float32(np.max(np.abs(values)))
            if top == 0:
                raise ValueError("a scaled codebook needs a nonzero value")
            gscale = _bf16_scale(absmax / top)
            codes = _encode(w, f, key, bf16_to_f32(gscale), groups)
        else:
            gscale = None
            codes = _encode(w, f, key)
    elif name == "int1":
        # The L2-optimal scale of sign quantization: mean |w| over the group's kept elements.
        if kept is None:
            count = real_count()
        else:
            padded = np.zeros(w.shape, bool)
            padded[:shape[0], :shape[1]] = kept
            count = np.add.reduceat(padded, starts, axis=1, dtype=np.int64).astype(np.float64)
        total = per_group(np.add, np.abs(w).astype(np.float64))
        gscale = _bf16_scale(np.where(count > 0, total / np.maximum(count, 1), 0).astype(np.float32))
        codes = _encode(w, lambda x: x < 0, name)
        q, lut, lut_size = 1, _lut_from_values([1.0, -1.0]), 2
    elif name == "ternary":
        # BitNet b1.58: gamma = mean |w| over the group's elements of the (M, K) matrix, t = round(clip(w / gamma, -1, 1)).
        count = real_count()
        total = per_group(np.add, np.abs(w).astype(np.float64))
        gscale = _bf16_scale(np.where(count > 0, total / np.maximum(count, 1), 0).astype(np.float32))
        # Codes 0 (+1) and 1 (-1); the zeros get code 2, which the packer leaves out of the mask.
        drop_code = 2

        def ternarize(x):
            t = np.rint(np.clip(x, -1, 1))
            return np.where(t == 0, drop_code, t < 0)

        codes = _encode(w, ternarize, name, bf16_to_f32(gscale), groups)
        q, lut, lut_size = 1, _lut_from_values([1.0, -1.0]), 2
    else:  # pragma: no cover - SCHEMES and this function list the same names
        raise AssertionError(name)

    config = TileConfig(
        q_bits=q, sparse=sparse, scale_format=scale_format,
        scale_group=tile_scale_group(group_size) if scaled else 32,
        lut=lut, lut_size=lut_size,
    )
    return Quantized(codes, config, gscale, drop_code, tensor_scale)
