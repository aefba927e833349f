"""Decompression with the C kernels: the same results and errors as ``deca.golden``, faster.

Three paths, fastest first: ``avx512`` (needs AVX-512 F, BW, VL, DQ, VBMI, VBMI2 and BITALG),
``avx2`` (AVX2, FMA, F16C, BMI2) and the portable ``scalar`` loop. ``path=None`` takes
$DECA_BASELINE_PATH when set, else the fastest path the CPU has. $DECA_BASELINE_NO_AVX512=1 makes
the CPU look as if it had no AVX-512 (to test the fallback), and $DECA_BASELINE_NO_AVX512BF16=1
keeps the AVX-512 path off AVX512_BF16's rounding instruction (which it uses when the CPU has it),
as on AVX-512 CPUs without BF16.
"""

import ctypes
import os
from functools import cache

import numpy as np

from deca.golden import matrix as golden_matrix
from deca.golden.format import MASK_BYTES, TILE_COLS, TILE_ROWS
from deca.toolchain import ToolError

from .build import load

#: The paths, fastest first, and the CPU features (as /proc/cpuinfo names them) each needs.
PATHS = ("avx512", "avx2", "scalar")
REQUIRES = {
    "avx512": ("avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512vbmi", "avx512_vbmi2", "avx512_bitalg"),
    "avx2": ("avx2", "fma", "f16c", "bmi2"),
    "scalar": (),
}
#: Bit i of ``deca_cpu_features()``.
FEATURE_BITS = ("avx2", "fma", "f16c", "bmi2", "popcnt", "avx512f", "avx512bw", "avx512vl", "avx512dq",
                "avx512vbmi", "avx512_vbmi2", "avx512_bitalg", "avx512_bf16")
_PATH_CODE = {"scalar": 0, "avx512": 1, "avx2": 3}
_AVX512_NO_BF16 = 2
_SCALE_CODE = {None: 0, "bf16": 1, "e8m0": 2, "e4m3": 3}
AVX512_FEATURES = "AVX-512 F, BW, VL, DQ, VBMI, VBMI2 and BITALG"
#: Bytes every path may read past the end of a value stream.
STREAM_PADDING = 64


class Unsupported(ToolError):
    """A path was asked for that this CPU cannot run."""


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
    so.deca_cpu_features.restype = ctypes.c_int64
    so.deca_tsc.restype = ctypes.c_uint64
    so.deca_add_chain.argtypes = [_I64]
    so.deca_add_chain.restype = ctypes.c_uint64
    so.deca_stream_read.argtypes = [_P, _I64, ctypes.c_int, ctypes.POINTER(ctypes.c_uint64)]
    so.deca_stream_read.restype = ctypes.c_uint64
    return so


def cpu_features():
    """The features of this CPU the paths use (sorted names); $DECA_BASELINE_NO_AVX512=1 hides AVX-512's."""
    bits = lib().deca_cpu_features()
    found = {name for i, name in enumerate(FEATURE_BITS) if bits >> i & 1}
    if os.environ.get("DECA_BASELINE_NO_AVX512", "") not in ("", "0"):
        found = {f for f in found if not f.startswith("avx512")}
    return sorted(found)


def available_paths(features=None):
    """The paths a CPU with ``features`` (default: this one's) runs, fastest first."""
    have = set(cpu_features() if features is None else features)
    return [p for p in PATHS if set(REQUIRES[p]) <= have]


def avx512_supported():
    return "avx512" in available_paths()


def choose_path(path=None, features=None):
    """The path to run: ``path``, else $DECA_BASELINE_PATH, else the fastest this CPU (or one with
    ``features``) has. Unknown paths: ValueError; paths the CPU lacks: ``Unsupported``; both name
    the paths the CPU has."""
    have = set(cpu_features() if features is None else features)
    avail = available_paths(have)
    path = path or os.environ.get("DECA_BASELINE_PATH") or avail[0]
    if path not in PATHS:
        raise ValueError(f"unknown software decompression path {path!r} (known: {', '.join(PATHS)}); "
                         f"this CPU has: {', '.join(avail)}")
    if path not in avail:
        missing = [f for f in REQUIRES[path] if f not in have]
        raise Unsupported(f"this CPU lacks {', '.join(missing)}: the {path} path cannot run here; "
                          f"this CPU has: {', '.join(avail)}")
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
        values = np.asarray(values, np.uint8).ravel()
        raw = np.zeros(len(values) + STREAM_PADDING + 64, np.uint8)  # the kernels read ahead
        start = -raw.ctypes.data % 64  # on a cache line, as a tile buffer would be
        self.values = raw[start:start + len(values) + STREAM_PADDING]
        self.values[:len(values)] = values
        self.value_offsets = np.ascontiguousarray(value_offsets, np.int64)
        self.masks = None if masks is None else np.ascontiguousarray(masks, np.uint8)
        self.scale_blocks = None if scale_blocks is None else np.ascontiguousarray(scale_blocks, np.uint8)
        self.scale_block_of_tile = (None if scale_block_of_tile is None
                                    else np.ascontiguousarray(scale_block_of_tile, np.int64))
        self.num_tiles = len(self.value_offsets) - 1

    def chunk(self, start, stop):
        """Tiles start..stop-1 as a TileSet sharing this one's buffers (no copy; the padding stays behind)."""
        part = object.__new__(TileSet)
        part.config, part.cfg = self.config, self.cfg
        base = int(self.value_offsets[start])
        part.values = self.values[base:]
        part.value_offsets = np.ascontiguousarray(self.value_offsets[start:stop + 1] - base)
        part.masks = None if self.masks is None else self.masks[start:stop]
        part.scale_blocks = self.scale_blocks
        part.scale_block_of_tile = None if self.scale_block_of_tile is None else self.scale_block_of_tile[start:stop]
        part.num_tiles = stop - start
        return part

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

