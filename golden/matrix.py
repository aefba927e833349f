"""Compressed matrices: ``compress``, ``decompress``, ``decompress_tile``, ``decompress_tiles`` and the memory image.

The format itself is specified in ``format.py``; the schemes in ``schemes.py``.
"""

from dataclasses import dataclass

import numpy as np

from . import kernels as _kernels
from . import schemes as _schemes
from .format import (
    MASK_BYTES, SCALE_BYTES, TILE_COLS, TILE_ELEMS, TILE_ROWS, FormatError, TileConfig,
    mask_bits, scale_index, tile_grid, value_stream_len,
)
from .numerics import bf16_to_f64_daz, product_to_bf16, scale_values

#: One row per tile of ``CompressedMatrix.memory_image``: absolute byte address and length of each stream.
TILE_META_DTYPE = np.dtype([
    ("val_addr", "<u8"), ("val_len", "<u8"),
    ("mask_addr", "<u8"), ("mask_len", "<u8"),
    ("scale_addr", "<u8"), ("scale_len", "<u8"),
])


@dataclass(eq=False)
class CompressedMatrix:
    """A weight matrix in the DECA format.

    ``values``: every tile's value stream, concatenated in tile order; tile t's stream is
    ``values[value_offsets[t]:value_offsets[t+1]]``. ``masks``: (tiles, 64) mask bytes, or None
    in dense mode. ``scale_blocks``: (blocks, scale stream bytes) and ``scale_block_of_tile``:
    the block each tile uses (tiles of one wide group share a block), or None without scaling.
    ``tensor_scale``: a per-tensor factor outside the tile decode (NVFP4's second level), 1.0
    otherwise. ``group_size``: the scale group G along K (None without scaling).
    """

    shape: tuple
    scheme: str
    config: TileConfig
    values: np.ndarray
    value_offsets: np.ndarray
    masks: np.ndarray | None = None
    scale_blocks: np.ndarray | None = None
    scale_block_of_tile: np.ndarray | None = None
    group_size: int | None = None
    tensor_scale: float = 1.0

    def __post_init__(self):
        self.shape = tuple(int(x) for x in self.shape)
        if len(self.shape) != 2 or min(self.shape) < 1:
            raise FormatError(f"shape must be two positive sizes (M, K), got {self.shape}")
        t = self.num_tiles
        self.values = np.ascontiguousarray(self.values, np.uint8)
        self.value_offsets = np.asarray(self.value_offsets, np.int64)
        if self.value_offsets.shape != (t + 1,) or self.value_offsets[0] != 0 \
                or np.any(np.diff(self.value_offsets) < 0) or self.value_offsets[-1] != len(self.values):
            raise FormatError(f"value offsets do not describe {t} streams covering {len(self.values)} value bytes")
        if self.config.sparse != (self.masks is not None):
            raise FormatError("sparse mode needs masks and dense mode has none")
        if self.masks is not None:
            self.masks = np.ascontiguousarray(self.masks, np.uint8)
            if self.masks.shape != (t, MASK_BYTES):
                raise FormatError(f"masks must have shape ({t}, {MASK_BYTES}), got {self.masks.shape}")
        if bool(self.config.scale_format) != (self.scale_blocks is not None) \
                or (self.scale_blocks is None) != (self.scale_block_of_tile is None):
            raise FormatError("scale blocks and their tile index must be present exactly when the config scales")
        if self.scale_blocks is not None:
            self.scale_blocks = np.ascontiguousarray(self.scale_blocks, np.uint8)
            self.scale_block_of_tile = np.asarray(self.scale_block_of_tile, np.int64)
            if self.scale_blocks.ndim != 2 or self.scale_blocks.shape[1] != self.config.scale_stream_len:
                raise FormatError(
                    f"scale blocks must be {self.config.scale_stream_len} bytes each, got shape {self.scale_blocks.shape}")
            if self.scale_block_of_tile.shape != (t,) or np.any(self.scale_block_of_tile < 0) \
                    or np.any(self.scale_block_of_tile >= len(self.scale_blocks)):
                raise FormatError("a tile refers to a scale block that does not exist")
        check_value_lengths(np.diff(self.value_offsets), self.stored_per_tile(), self.config)

    # Geometry and streams -------------------------------------------------------------------

    @property
    def tile_grid(self):
        return tile_grid(self.shape)

    @property
    def num_tiles(self):
        tm, tk = self.tile_grid
        return tm * tk

    def stored_per_tile(self):
        """Number of stored elements of each tile."""
        if self.masks is None:
            return np.full(self.num_tiles, TILE_ELEMS, np.int64)
        return _kernels.popcounts(self.masks)

    def tile_streams(self, t):
        """(values, mask, scales) bytes of tile t; empty bytes for an absent stream."""
        if not 0 <= t < self.num_tiles:
            raise IndexError(f"tile {t} out of range 0..{self.num_tiles - 1}")
        values = self.values[self.value_offsets[t]:self.value_offsets[t + 1]].tobytes()
        mask = self.masks[t].tobytes() if self.masks is not None else b""
        scales = self.scale_blocks[self.scale_block_of_tile[t]].tobytes() if self.scale_blocks is not None else b""
        return values, mask, scales

    def stream_bytes(self):
        """Bytes in memory of each stream over the whole matrix (shared scale blocks counted once)."""
        return {
            "values": int(len(self.values)),
            "mask": int(self.masks.size) if self.masks is not None else 0,
            "scales": int(self.scale_blocks.size) if self.scale_blocks is not None else 0,
        }

    def stored_mask(self):
        """(M, K) bool: which elements are stored (all True in dense mode)."""
        if self.masks is None:
            return np.ones(self.shape, bool)
        tm, tk = self.tile_grid
        m, k = self.shape
        return from_tiles(mask_bits(self.masks), (tm * TILE_ROWS, tk * TILE_COLS))[:m, :k]

    @property
    def density(self):
        """Fraction of the M x K elements that are stored."""
        if self.masks is None:
            return 1.0
        m, k = self.shape
        return float(self.stored_per_tile().sum()) / (m * k)

    def memory_image(self, base=0, align=1):
        """Lay the matrix out in memory as the PE reads it.

        Three regions follow each other from ``base``: every tile's value stream, every mask,
        every scale block (each once, however many tiles share it). Each non-empty stream starts
        at an address that is a multiple of ``align``. Returns (image, meta): ``image[a - base]``
        is the byte at address a, and ``meta`` is a ``TILE_META_DTYPE`` array with one row per
        tile; a stream of length 0 has address 0.
        """
        if isinstance(base, bool) or not isinstance(base, (int, np.integer)) or base < 0:
            raise ValueError(f"base must be a non-negative integer address, got {base!r}")
        if isinstance(align, bool) or not isinstance(align, (int, np.integer)) or align < 1 or align & (align - 1):
            raise ValueError(f"align must be a power of two, got {align!r}")
        meta = np.zeros(self.num_tiles, TILE_META_DTYPE)
        chunks, cursor = [], int(base)

        def place(blobs, lengths):
            nonlocal cursor
            lengths = np.asarray(lengths, np.int64)
            padded = -(-lengths // align) * align
            start = -(-cursor // align) * align
            addr = start + np.concatenate([[0], np.cumsum(padded)[:-1]]).astype(np.int64)
            region = np.zeros(int(padded.sum()) + start - cursor, np.uint8)
            offs = addr - cursor
            keep = lengths > 0
            if keep.any():
                # Scatter each blob's bytes to its offset in one shot.
                idx = np.repeat(offs[keep] - np.concatenate([[0], np.cumsum(lengths[keep])[:-1]]), lengths[keep])
                region[idx + np.arange(int(lengths[keep].sum()))] = blobs
            chunks.append(region)
            cursor += len(region)
            return np.where(keep, addr, 0)

        val_lens = np.diff(self.value_offsets)
        meta["val_addr"] = place(self.values, val_lens)
        meta["val_len"] = val_lens
        if self.masks is not None:
            meta["mask_addr"] = place(self.masks.ravel(), np.full(self.num_tiles, MASK_BYTES))
            meta["mask_len"] = MASK_BYTES
        if self.scale_blocks is not None:
            nblocks, blen = self.scale_blocks.shape
            block_addr = place(self.scale_blocks.ravel(), np.full(nblocks, blen))
            meta["scale_addr"] = block_addr[self.scale_block_of_tile]
            meta["scale_len"] = blen
        return np.concatenate(chunks), meta


# Compression ------------------------------------------------------------------------------------


def _as_weights(w):
    w = np.asarray(w)
    if w.ndim != 2 or min(w.shape) < 1:
        raise ValueError(f"weights must be a non-empty 2-D matrix (M, K), got shape {w.shape}")
    # Kind "V" covers ml_dtypes' bfloat16 and float8 types.
    if w.dtype.kind not in "fiuV":
        raise ValueError(f"weights must be real numbers, got dtype {w.dtype}")
    return np.ascontiguousarray(w.astype(np.float32, copy=False))


def prune_mask(w, density):
    """Unstructured magnitude pruning: keep exactly round(density * M * K) elements of largest |w|.

    Ties in |w| keep the element with the lower row-major index; NaN counts as the largest magnitude.
    """
    if isinstance(density, bool) or not isinstance(density, (int, float, np.number)) or not 0 <= density <= 1:
        raise ValueError(f"density must be a number in [0, 1], got {density!r}")
    w = np.ascontiguousarray(w, np.float32)
    return _kernels.prune_mask(w.reshape(-1), round(density * w.size)).reshape(w.shape)


def from_tiles(t, shape_p):
    """(tiles, 512) in tile order, element e = 32r + c -> the (Mp, Kp) matrix they tile."""
    mp, kp = shape_p
    tm, tk = mp // TILE_ROWS, kp // TILE_COLS
    return t.reshape(tm, tk, TILE_ROWS, TILE_COLS).transpose(0, 2, 1, 3).reshape(mp, kp)


def compress(w, scheme, density=None, mask=None, group_size=None, codebook=None):
    """Compress float weights (M, K) with a scheme (see ``SCHEMES``).

    ``density``: prune to exactly round(density*M*K) stored elements by magnitude; ``mask``: an
    explicit (M, K) boolean mask of the elements to store instead. Either one gives the sparse
    format; neither, or density 1, gives the dense format (``ternary`` is always sparse: its zeros
    go to the bitmask). ``group_size``: scale group along K (16, 32, a multiple of 32 up to K, or
    'channel'); None takes the scheme's default. ``codebook``: the values of the ``codebook``
    scheme. Weights are converted to float32 first.
    """
    sch = _schemes.get_scheme(scheme)
    w = _as_weights(w)
    m, k = w.shape
    if density is not None and mask is not None:
        raise ValueError("give either a density or a mask, not both")
    if mask is not None:
        mask = np.asarray(mask)
        if mask.shape != w.shape:
            raise ValueError(f"mask shape {mask.shape} does not match weights shape {w.shape}")
        if mask.dtype != bool and not np.all((mask == 0) | (mask == 1)):
            raise ValueError("mask must be boolean (or 0/1)")
        mask = mask.astype(bool)
    elif density is not None:
        mask = prune_mask(w, density)
        if density == 1:
            mask = None
    _check_specials(sch, w, mask)
    g = _schemes.resolve_group_size(sch, group_size, k)

    tm, tk = tile_grid(w.shape)
    mp, kp = tm * TILE_ROWS, tk * TILE_COLS
    wp = w if mask is None and (mp, kp) == (m, k) else \
        _kernels.pad_pruned(w, _no_mask(mask), mask is not None, mp, kp)
    sparse = mask is not None or sch.always_sparse

    qz = _schemes.quantize(sch, wp, g, sparse, (m, k), mask, codebook)
    cfg = qz.config
    values, offsets, masks = _kernels.pack_tiles(qz.codes, _no_mask(mask), mask is not None, m, k,
                                                 qz.drop_code, cfg.q_bits, sparse)
    blocks = block_of_tile = None
    if g is not None:
        blocks, block_of_tile = _scale_blocks(qz.group_scales, cfg, tm, tk, g)
    return CompressedMatrix((m, k), sch.name, cfg, values, offsets, masks if sparse else None, blocks,
                            block_of_tile, g, qz.tensor_scale)


def _no_mask(mask):
    """The kernels' mask argument: the mask, or a placeholder they do not read."""
    return np.zeros((1, 1), bool) if mask is None else np.ascontiguousarray(mask)


def _check_specials(sch, w, mask):
    first_nan, first_inf = _kernels.first_specials(w.reshape(-1), _no_mask(mask).reshape(-1), mask is not None)
    for kind, first, allowed in (("NaN", first_nan, sch.encodes_nan), ("Inf", first_inf, sch.encodes_inf)):
        if first >= 0 and not allowed:
            r, c = divmod(int(first), w.shape[1])
            raise ValueError(f"weights contain {kind}, which scheme {sch.name!r} cannot encode "
                             f"(first at row {r}, column {c})")


def _scale_blocks(group_scales, cfg, tm, tk, group_size):
    """Per-tile scale streams, stored once per distinct block. Returns (blocks, block of each tile)."""
    g = cfg.scale_group
    if g == 16:
        # One block per tile: scale s = 2r + h is group 2j + h of row 16i + r.
        per_tile = group_scales.reshape(tm, TILE_ROWS, tk, 2).transpose(0, 2, 1, 3).reshape(tm * tk, 32)
        block_of_tile = np.arange(tm * tk)
    else:
        # A block per (tile row, group): tiles of a group wider than 32 columns share it.
        ngroups = group_scales.shape[1]
        per_tile = group_scales.reshape(tm, TILE_ROWS, ngroups).transpose(0, 2, 1).reshape(tm * ngroups, TILE_ROWS)
        j = np.arange(tk)
        block_of_tile = (np.arange(tm)[:, None] * ngroups + (TILE_COLS * j // group_size)[None, :]).ravel()
    nbytes = SCALE_BYTES[cfg.scale_format]
    dtype = np.dtype("<u2") if nbytes == 2 else np.dtype(np.uint8)
    blocks = np.ascontiguousarray(per_tile.astype(dtype)).view(np.uint8).reshape(len(per_tile), -1)
    return blocks, block_of_tile


# Decompression ----------------------------------------------------------------------------------


def _where(t, n_tiles):
    """Error-message prefix naming tile t, unless there is only one tile."""
    return f"tile {t}: " if n_tiles > 1 else ""


def check_value_lengths(lengths, stored, cfg):
    """Raise FormatError unless each value stream is ceil(stored * Q / 8) bytes long."""
    lengths, stored = np.asarray(lengths), np.asarray(stored)
    want = value_stream_len(stored, cfg.q_bits)
    bad = np.flatnonzero(lengths != want)
    if bad.size:
        t = bad[0]
        raise FormatError(f"{_where(t, len(lengths))}value stream is {lengths[t]} bytes but {stored[t]} stored "
                          f"elements of {cfg.q_bits} bits need {want[t]}")


def _decode(values, offsets, masks, block_scales, block_of_tile, cfg, tile_cols):
    """Decode tiles to a (Mp, Kp) matrix of BF16 patterns.

    ``masks``: (T, 64) mask bytes, or None in dense mode; ``block_scales``: (blocks, scales per
    tile) scale codes and ``block_of_tile`` the block of each tile, or None without scaling.
    """
    q = cfg.q_bits
    n_tiles = len(offsets) - 1
    stored = np.full(n_tiles, TILE_ELEMS) if masks is None else _kernels.popcounts(masks)
    check_value_lengths(np.diff(offsets), stored, cfg)
    # Padding bits after the last code must be zero.
    tail = (stored * q) % 8
    has_tail = np.flatnonzero(tail > 0)
    bad = has_tail[(values[offsets[1:][has_tail] - 1] >> tail[has_tail]) != 0]
    if bad.size:
        raise FormatError(f"{_where(bad[0], n_tiles)}value stream padding bits are not zero")

    scaled = cfg.scale_format is not None
    table, rows = cfg.lut[None, :].copy(), np.zeros((1, 1), np.int64)
    if scaled and q <= 8:
        # Row i of the table: every LUT entry times the i-th distinct scale, each product computed once.
        distinct, inverse = np.unique(block_scales, return_inverse=True)
        rows = inverse.reshape(block_scales.shape)
        lut = bf16_to_f64_daz(cfg.lut[:cfg.lut_size])
        table = np.zeros((len(distinct), 1 << q), np.uint16)  # 2^Q columns: codes of unstored elements index it too
        table[:, :cfg.lut_size] = product_to_bf16(scale_values(distinct, cfg.scale_format)[:, None], lut[None, :])
    out = np.empty((n_tiles // tile_cols * TILE_ROWS, tile_cols * TILE_COLS), np.uint16)
    t, e, code = _kernels.decode_tiles(
        np.concatenate([values, np.zeros(8, np.uint8)]), offsets, np.zeros((1, 1), np.uint8) if masks is None else masks, masks is not None, q, table,
        rows, block_of_tile if scaled else np.zeros(1, np.int64), cfg.scales_per_tile // TILE_ROWS,
        cfg.scale_group, cfg.lut_size, out, tile_cols)
    if t >= 0:
        raise FormatError(f"{_where(t, n_tiles)}element {e}: code {code} is beyond the {cfg.lut_size}-entry codebook")
    if scaled and q == 16:
        # Raw BF16 codes times scales: too many distinct products for a table.
        scales = scale_values(block_scales, cfg.scale_format)[block_of_tile][:, scale_index(cfg.scale_group)]
        stored_at = np.ones(out.shape, bool) if masks is None else from_tiles(mask_bits(masks), out.shape)
        out[stored_at] = product_to_bf16(bf16_to_f64_daz(out[stored_at]), from_tiles(scales, out.shape)[stored_at])
    return out


def _scale_codes(raw, cfg):
    """Scale stream bytes (..., n) -> scale codes (..., scales per tile)."""
    raw = np.ascontiguousarray(raw, np.uint8)
    return raw.view("<u2") if SCALE_BYTES[cfg.scale_format] == 2 else raw


def decompress_tile(values, mask, scales, config):
    """Decompress one tile from its three streams (bytes); returns (16, 32) uint16 BF16 patterns."""
    cfg = config
    mask = np.frombuffer(bytes(mask), np.uint8)
    if len(mask) != cfg.mask_stream_len:
        raise FormatError(f"mask stream is {len(mask)} bytes; this {'sparse' if cfg.sparse else 'dense'} "
                          f"config needs {cfg.mask_stream_len}")
    scales = np.frombuffer(bytes(scales), np.uint8)
    if len(scales) != cfg.scale_stream_len:
        raise FormatError(f"scale stream is {len(scales)} bytes; the config "
                          f"({cfg.scale_format or 'no scaling'}, g={cfg.scale_group}) needs {cfg.scale_stream_len}")
    values = np.frombuffer(bytes(values), np.uint8)
    masks = mask[None] if cfg.sparse else None
    scale_codes = _scale_codes(scales[None], cfg) if cfg.scale_format else None
    return _decode(values, np.array([0, len(values)]), masks, scale_codes, np.zeros(1, np.int64), cfg, 1)


def decompress(cm, engine="numpy"):
    """Decompress a whole matrix; returns (M, K) uint16 BF16 patterns (the tile decode, without
    ``cm.tensor_scale``).

    ``engine``: "numpy" (default), this module's exact reference; or "baseline", the C kernels of
    ``deca.baseline`` (AVX-512 where the CPU has it), the same bits and errors, faster on large matrices.
    """
    if engine == "baseline":
        from deca.baseline import decompress as baseline_decompress
        return baseline_decompress(cm)
    if engine != "numpy":
        raise ValueError(f"unknown decompression engine {engine!r}; known: numpy, baseline")
    m, k = cm.shape
    return _decode_padded(cm)[:m, :k]


def _decode_padded(cm):
    """The (Mp, Kp) matrix of all tiles, padding included."""
    cfg = cm.config
    scale_codes = _scale_codes(cm.scale_blocks, cfg) if cfg.scale_format else None
    return _decode(cm.values, cm.value_offsets, cm.masks, scale_codes, cm.scale_block_of_tile, cfg, cm.tile_grid[1])


def decompress_tiles(cm):
    """Every tile of a matrix in tile order, each as ``decompress_tile`` of its streams gives it:
    (tiles, 16, 32) uint16 BF16 patterns, the padding of edge tiles included; one decode for all."""
    tm, tk = cm.tile_grid
    return _decode_padded(cm).reshape(tm, TILE_ROWS, tk, TILE_COLS).swapaxes(1, 2).reshape(-1, TILE_ROWS, TILE_COLS)
