"""Decompression with the C kernels: the same results and errors as ``deca.golden``, faster.

Two paths: ``avx512`` (needs AVX-512 F, BW, VL, DQ, VBMI, VBMI2 and BITALG) and the portable ``scalar``
fallback. ``path=None`` takes $DECA_BASELINE_PATH when set, else AVX-512 when the CPU has it.
$DECA_BASELINE_NO_AVX512=1 makes the CPU look as if it had no AVX-512 (to test the fallback), and
$DECA_BASELINE_NO_AVX512BF16=1 keeps the AVX-512 path off AVX512_BF16's rounding instruction (which
it uses when the CPU has it), as on AVX-512 CPUs without BF16.
"""

import ctypes
import os
from functools import cache

import numpy as np

from deca.golden import matrix as golden_matrix
from deca.golden.format import MASK_BYTES, TILE_COLS, TILE_ROWS
from deca.toolchain import ToolError

from .build import load

PATHS = ("avx512", "scalar")
_PATH_CODE = {"scalar": 0, "avx512": 1}
_AVX512_NO_BF16 = 2
_SCALE_CODE = {None: 0, "bf16": 1, "e8m0": 2, "e4m3": 3}
AVX512_FEATURES = "AVX-512 F, BW, VL, DQ, VBMI, VBMI2 and BITALG"


class Unsupported(ToolError):
    """The AVX-512 path was asked for on a CPU without it."""


class _Cfg(ctypes.Structure):
    _fields_ = [("q_bits", ctypes.c_int32), ("sparse", ctypes.c_int32), ("scale_fmt", ctypes.c_int32),
                ("scale_group", ctypes.c_int32), ("lut_size", ctypes.c_int32), ("lut", ctypes.c_uint16 * 256)]


class Stats(ctypes.Structure):
    """Counters of a decode: ``slow_tiles`` took the exact path for E8M0 scales the fast path cannot take."""

    _fields_ = [("slow_tiles", ctypes.c_int64)]


_P = ctypes.c_void_p
_I64 = ctypes.c_int64


@cache
def lib():
    """The compiled kernels (built on first use)."""
    so = load()
    args = [ctypes.POINTER(_Cfg), ctypes.c_int, _I64, _P, _P, _P, _P, _P, _P, _I64, _I64, ctypes.POINTER(Stats)]
    so.deca_decode.argtypes = args
    so.deca_decode.restype = _I64
    so.deca_decode_timed.argtypes = [*args, ctypes.POINTER(ctypes.c_uint64)]
    so.deca_decode_timed.restype = _I64
    so.deca_have_avx512.restype = ctypes.c_int
    so.deca_tsc.restype = ctypes.c_uint64
    so.deca_add_chain.argtypes = [_I64]
    so.deca_add_chain.restype = ctypes.c_uint64
    so.deca_stream_read.argtypes = [_P, _I64, ctypes.c_int, ctypes.POINTER(ctypes.c_uint64)]
    so.deca_stream_read.restype = ctypes.c_uint64
    return so


def avx512_supported():
    return os.environ.get("DECA_BASELINE_NO_AVX512", "") in ("", "0") and bool(lib().deca_have_avx512())


def choose_path(path=None):
    """The path to run: ``path``, else $DECA_BASELINE_PATH, else the best this CPU has."""
    path = path or os.environ.get("DECA_BASELINE_PATH") or ("avx512" if avx512_supported() else "scalar")
    if path not in PATHS:
        raise ValueError(f"unknown software decompression path {path!r}; known: {', '.join(PATHS)}")
    if path == "avx512" and not avx512_supported():
        raise Unsupported(f"this CPU lacks {AVX512_FEATURES}: the AVX-512 kernels cannot run here; "
                          "use the portable scalar path (path='scalar' or DECA_BASELINE_PATH=scalar)")
    return path


def _cfg(config):
    c = _Cfg(config.q_bits, int(config.sparse), _SCALE_CODE[config.scale_format], config.scale_group, config.lut_size)
    c.lut[:] = [int(x) for x in config.lut]
    return c


def _ptr(a):
    return a.ctypes.data if a is not None and a.size else None


class TileSet:
    """Tiles in the kernels' layout, ready to decode repeatedly (benchmarks reuse one)."""

    def __init__(self, config, values, value_offsets, masks=None, scale_blocks=None, scale_block_of_tile=None):
        self.config = config
        self.cfg = _cfg(config)
        # The AVX-512 path reads whole registers of a stream only through masked loads, so no padding is needed.
        self.values = np.ascontiguousarray(values, np.uint8)
        self.value_offsets = np.ascontiguousarray(value_offsets, np.int64)
        self.masks = None if masks is None else np.ascontiguousarray(masks, np.uint8)
        self.scale_blocks = None if scale_blocks is None else np.ascontiguousarray(scale_blocks, np.uint8)
        self.scale_block_of_tile = (None if scale_block_of_tile is None
                                    else np.ascontiguousarray(scale_block_of_tile, np.int64))
        self.num_tiles = len(self.value_offsets) - 1

    @classmethod
    def of_matrix(cls, cm):
        return cls(cm.config, cm.values, cm.value_offsets, cm.masks, cm.scale_blocks, cm.scale_block_of_tile)

    def decode(self, out, tile_cols, row_stride, path=None, stats=None, timed=False):
        """Run the kernel into ``out`` (uint16); returns (first bad tile + 1 or 0, TSC ticks or None)."""
        path = choose_path(path)
        stats = stats if stats is not None else Stats()
        code = _PATH_CODE[path]
        if path == "avx512" and os.environ.get("DECA_BASELINE_NO_AVX512BF16", "") not in ("", "0"):
            code = _AVX512_NO_BF16
        args = (ctypes.byref(self.cfg), code, self.num_tiles, _ptr(self.values),
                _ptr(self.value_offsets), _ptr(self.masks), _ptr(self.scale_blocks),
                _ptr(self.scale_block_of_tile), out.ctypes.data, tile_cols, row_stride, ctypes.byref(stats))
        if timed:
            ticks = ctypes.c_uint64()
            rc = lib().deca_decode_timed(*args, ctypes.byref(ticks))
            return rc, ticks.value
        return lib().deca_decode(*args), None


def decompress(cm, path=None, stats=None):
    """``deca.golden.decompress`` with the C kernels: (M, K) uint16 BF16 patterns, same errors."""
    tm, tk = cm.tile_grid
    out = np.empty((tm * TILE_ROWS, tk * TILE_COLS), np.uint16)
    rc, _ = TileSet.of_matrix(cm).decode(out, tk, tk * TILE_COLS, path, stats)
    if rc:
        golden_matrix.decompress(cm)  # raises the golden model's error for this matrix
        raise AssertionError(f"the {choose_path(path)} kernel rejected tile {rc - 1}, which the golden model accepts")
    m, k = cm.shape
    return out[:m, :k]


def decompress_tile(values, mask, scales, config, path=None, stats=None):
    """``deca.golden.decompress_tile`` with the C kernels: (16, 32) uint16, same errors."""
    values, mask, scales = (np.frombuffer(bytes(b), np.uint8) for b in (values, mask, scales))
    if len(mask) != config.mask_stream_len or len(scales) != config.scale_stream_len:
        return golden_matrix.decompress_tile(values, mask, scales, config)  # raises its length error
    tiles = TileSet(config, values, [0, len(values)], mask.reshape(1, MASK_BYTES) if config.sparse else None,
                    scales.reshape(1, -1) if config.scale_format else None, [0] if config.scale_format else None)
    out = np.empty((TILE_ROWS, TILE_COLS), np.uint16)
    rc, _ = tiles.decode(out, 1, TILE_COLS, path, stats)
    if rc:
        golden_matrix.decompress_tile(values, mask, scales, config)
        raise AssertionError(f"the {choose_path(path)} kernel rejected a tile the golden model accepts")
    return out

