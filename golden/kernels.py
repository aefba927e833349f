"""Compiled loops (numba) for the per-element passes of ``compress`` and ``decompress``.

Each kernel computes what the NumPy expression it replaced computed, element by element and with
the same float32 arithmetic, so the output is unchanged; ``schemes.py`` and ``format.py`` stay the
specification and tests/reference.py the independent check. Compiled code is cached next to this
file (``cache=True``), so only the first call of a kernel on a machine pays its compilation.
"""

import numba
import numpy as np

from .format import MASK_BYTES, TILE_COLS, TILE_ELEMS, TILE_ROWS

_jit = numba.njit(cache=True, nogil=True)

#: Table entry of ``encode_with_tables`` for an interval of float32 inputs whose code is not
#: constant: such elements are encoded afterwards by the scheme's own element function.
AMBIGUOUS = -1


@_jit
def _magnitude_key(bits):
    """|w| as its float32 bit pattern, NaN counted as Inf: the patterns order as the magnitudes."""
    return min(bits & 0x7FFFFFFF, 0x7F800000)


@_jit
def prune_mask(w, keep):
    """Flat bool mask of the ``keep`` largest |w| (NaN counts as Inf), ties to the lower index.

    A two-pass radix select (top, then low 16 bits) of the ``keep``-th largest magnitude key.
    """
    bits = w.view(np.uint32)
    n = bits.size
    mask = np.zeros(n, np.bool_)
    if keep == 0:
        return mask
    hist = np.zeros(65536, np.int64)
    for i in range(n):
        hist[_magnitude_key(bits[i]) >> 16] += 1
    need, hi = keep, 65535
    while hist[hi] < need:
        need -= hist[hi]
        hi -= 1
    hist[:] = 0
    for i in range(n):
        key = _magnitude_key(bits[i])
        if key >> 16 == hi:
            hist[key & 0xFFFF] += 1
    lo = 65535
    while hist[lo] < need:
        need -= hist[lo]
        lo -= 1
    threshold = (hi << 16) | lo
    for i in range(n):
        mask[i] = _magnitude_key(bits[i]) > threshold
    # `need` elements at the threshold, the first ones in index order.
    i = 0
    while need > 0:
        if _magnitude_key(bits[i]) == threshold:
            mask[i] = True
            need -= 1
        i += 1
    return mask


@_jit
def first_specials(w, mask, masked):
    """Flat index of the first NaN and of the first Inf among the stored elements (-1: none)."""
    bits = w.view(np.uint32)
    specials = 0
    for i in range(bits.size):
        specials += (bits[i] & 0x7F800000) == 0x7F800000
    first_nan = first_inf = -1
    if specials == 0:
        return first_nan, first_inf
    for i in range(w.size):
        if masked and not mask[i]:
            continue
        x = w[i]
        if first_nan < 0 and np.isnan(x):
            first_nan = i
        elif first_inf < 0 and np.isinf(x):
            first_inf = i
    return first_nan, first_inf


@_jit
def pad_pruned(w, mask, masked, mp, kp):
    """(mp, kp) float32: w where the mask keeps it, +0 elsewhere and in the padding."""
    m, k = w.shape
    out = np.zeros((mp, kp), np.float32)
    src, dst = w.view(np.uint32), out.view(np.uint32)
    for r in range(m):
        if masked:
            for c in range(k):
                dst[r, c] = src[r, c] & (np.uint32(0) - np.uint32(mask[r, c]))
        else:
            dst[r, :k] = src[r, :]
    return out


@_jit
def group_absmax(w, starts):
    """max |w| over each row's column groups (those starting at ``starts``); NaN-free input only.

    Returns (absmax, saw_nan); on NaN the caller recomputes with NumPy, which keeps its payload.
    """
    mp, kp = w.shape
    ng = starts.size
    out = np.zeros((mp, ng), np.float32)
    for r in range(mp):
        for gi in range(ng):
            end = starts[gi + 1] if gi + 1 < ng else kp
            top = np.float32(0)
            for c in range(starts[gi], end):
                a = abs(w[r, c])
                if a > top:
                    top = a
                elif a != a:
                    return out, True
            out[r, gi] = top
    return out, False


@_jit
def encode_with_tables(w, divisor, group_of_col, scaled, exact_table, inner_table):
    """Codes of x = w / divisor[row, group] (float32; 0 where the divisor is 0; x = w unscaled).

    A code is looked up by the top 16 bits T of x's float32 pattern: ``exact_table[T]`` when the
    low 16 bits are 0, ``inner_table[T]`` otherwise (``AMBIGUOUS`` when the code changes inside
    that interval). Returns (int16 codes, number of AMBIGUOUS codes).
    """
    mp, kp = w.shape
    codes = np.empty((mp, kp), np.int16)
    row = np.empty(kp, np.float32)
    row_bits = row.view(np.uint32)
    ambiguous = 0
    for r in range(mp):
        for c in range(kp):
            if scaled:
                s = divisor[r, group_of_col[c]]
                row[c] = np.float32(0) if s == 0 else w[r, c] / s
            else:
                row[c] = w[r, c]
        for c in range(kp):
            u = row_bits[c]
            code = exact_table[u >> 16] if (u & 0xFFFF) == 0 else inner_table[u >> 16]
            codes[r, c] = code
            if code == AMBIGUOUS:
                ambiguous += 1
    return codes, ambiguous


#: De Bruijn sequence lookup of the lowest set bit of a 32-bit word (word & -word).
_DEBRUIJN = np.array([0, 1, 28, 2, 29, 14, 24, 3, 30, 22, 20, 15, 25, 17, 4, 8,
                      31, 27, 13, 23, 21, 19, 16, 7, 26, 12, 18, 6, 11, 5, 10, 9], np.int64)


@_jit
def pack_tiles(codes, keep, masked, m, k, drop_code, q, sparse):
    """Value streams (and masks when ``sparse``) of every tile of the (Mp, Kp) code matrix.

    Sparse mode stores the elements inside (m, k) that ``keep`` keeps (all, unless ``masked``)
    and whose code is not ``drop_code``; dense mode stores every element. Returns (values,
    offsets, masks).
    """
    mp, kp = codes.shape
    tm, tk = mp // TILE_ROWS, kp // TILE_COLS
    n_tiles = tm * tk
    masks = np.zeros((n_tiles if sparse else 0, MASK_BYTES), np.uint8)
    offsets = np.zeros(n_tiles + 1, np.int64)
    for t in range(n_tiles):
        n = TILE_ELEMS
        if sparse:
            n = 0
            i, j = divmod(t, tk)
            for r in range(TILE_ROWS):
                row = TILE_ROWS * i + r
                if row >= m:
                    break
                for c8 in range(TILE_COLS // 8):
                    byte = 0
                    for b in range(8):
                        col = TILE_COLS * j + 8 * c8 + b
                        st = np.int64(col < k) * np.int64(codes[row, col] != drop_code)
                        if masked:
                            st *= np.int64(keep[row, min(col, k - 1)])
                        byte |= st << b
                        n += st
                    masks[t, 4 * r + c8] = byte
        offsets[t + 1] = offsets[t] + (n * q + 7) // 8
    values = np.zeros(offsets[n_tiles], np.uint8)
    code_mask = (np.uint64(1) << np.uint64(q)) - np.uint64(1)
    for t in range(n_tiles):
        i, j = divmod(t, tk)
        pos, acc, nbits = offsets[t], np.uint64(0), 0
        for r in range(TILE_ROWS):
            row = TILE_ROWS * i + r
            word = np.uint64(0xFFFFFFFF)
            if sparse:
                word = (np.uint64(masks[t, 4 * r]) | np.uint64(masks[t, 4 * r + 1]) << np.uint64(8)
                        | np.uint64(masks[t, 4 * r + 2]) << np.uint64(16) | np.uint64(masks[t, 4 * r + 3]) << np.uint64(24))
            # Visit the stored elements of the row, lowest column first.
            while word:
                low = word & (~word + np.uint64(1))
                c = _DEBRUIJN[((low * np.uint64(0x077CB531)) & np.uint64(0xFFFFFFFF)) >> np.uint64(27)]
                word ^= low
                acc |= (np.uint64(codes[row, TILE_COLS * j + c]) & code_mask) << np.uint64(nbits)
                nbits += q
                if nbits >= 32:
                    values[pos] = np.uint8(acc & np.uint64(0xFF))
                    values[pos + 1] = np.uint8((acc >> np.uint64(8)) & np.uint64(0xFF))
                    values[pos + 2] = np.uint8((acc >> np.uint64(16)) & np.uint64(0xFF))
                    values[pos + 3] = np.uint8((acc >> np.uint64(24)) & np.uint64(0xFF))
                    acc >>= np.uint64(32)
                    nbits -= 32
                    pos += 4
        while nbits > 0:
            values[pos] = np.uint8(acc & np.uint64(0xFF))
            acc >>= np.uint64(8)
            nbits -= min(nbits, 8)
            pos += 1
    return values, offsets, masks


_POPCOUNT = np.array([bin(x).count("1") for x in range(256)], np.int64)


@_jit
def popcounts(masks):
    """Set bits of each row of a (T, 64) uint8 mask array."""
    out = np.zeros(masks.shape[0], np.int64)
    for t in range(masks.shape[0]):
        n = 0
        for b in range(masks.shape[1]):
            n += _POPCOUNT[masks[t, b]]
        out[t] = n
    return out


@_jit
def decode_tiles(values, offsets, masks, sparse, q, table, scale_rows, block_of_tile, scales_per_row,
                 scale_group, lut_size, out, tile_cols):
    """Decode tiles into ``out`` (Mp, Kp) BF16 patterns at their places in the matrix.

    ``values`` ends with 8 bytes of padding (words are read ahead). Element e of tile t with code
    x becomes ``table[row, x]`` (a table with 2^Q columns), where row is
    ``scale_rows[block_of_tile[t], s]`` for the element's scale s (0 when ``scales_per_row`` is
    0); with Q = 16 it is the code itself. Returns (tile, element, code) of the first stored code
    at or beyond ``lut_size`` (Q <= 8), or (-1, -1, -1).
    """
    n_tiles = offsets.size - 1
    mask_q = np.uint64((1 << q) - 1)
    flat, table_cols = table.reshape(-1), table.shape[1]
    for t in range(n_tiles):
        i, j = divmod(t, tile_cols)
        pos, acc, nbits = offsets[t], np.uint64(0), 0
        for r in range(TILE_ROWS):
            row = TILE_ROWS * i + r
            col0 = TILE_COLS * j
            # Table rows of the row's (at most two) scale groups.
            base_lo = base_hi = 0
            if scales_per_row:
                base_lo = scale_rows[block_of_tile[t], r * scales_per_row] * table_cols
                base_hi = scale_rows[block_of_tile[t], r * scales_per_row + scales_per_row - 1] * table_cols
            word = np.uint64(0xFFFFFFFF)
            if sparse:
                word = (np.uint64(masks[t, 4 * r]) | np.uint64(masks[t, 4 * r + 1]) << np.uint64(8)
                        | np.uint64(masks[t, 4 * r + 2]) << np.uint64(16) | np.uint64(masks[t, 4 * r + 3]) << np.uint64(24))
                for c in range(TILE_COLS):
                    out[row, col0 + c] = 0
            # Visit the stored elements of the row, lowest column first.
            while word:
                low = word & (~word + np.uint64(1))
                c = _DEBRUIJN[((low * np.uint64(0x077CB531)) & np.uint64(0xFFFFFFFF)) >> np.uint64(27)]
                word ^= low
                if nbits < q:
                    acc |= (np.uint64(values[pos]) | np.uint64(values[pos + 1]) << np.uint64(8)
                            | np.uint64(values[pos + 2]) << np.uint64(16)
                            | np.uint64(values[pos + 3]) << np.uint64(24)) << np.uint64(nbits)
                    pos += 4
                    nbits += 32
                code = np.int64(acc & mask_q)
                acc >>= np.uint64(q)
                nbits -= q
                if q == 16:
                    out[row, col0 + c] = code
                    continue
                if code >= lut_size:
                    return t, 32 * r + c, code
                out[row, col0 + c] = flat[(base_lo if c < scale_group else base_hi) + code]
    return -1, -1, -1
