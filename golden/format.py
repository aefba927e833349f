"""The DECA compressed-tile format: the contract between the compressor, the hardware and the core model.

This module is the one place where the format is written down; everything else refers to it.

Geometry
--------
A weight matrix has shape (M, K): M output channels, K input features. It is cut into tiles of
``TILE_ROWS`` x ``TILE_COLS`` = 16 x 32 elements: tile (i, j) holds rows 16i..16i+15 and columns
32j..32j+31; a matrix whose M or K is not a multiple is padded with zero weights before it is
quantized. Tiles are numbered t = i * ceil(K/32) + j. Inside a tile, element e = 32*r + c
(row-major; one row is one output channel, 32 consecutive K elements). A decompressed tile is
512 BF16 values = 1024 bytes, little-endian, row r at bytes [64r, 64r + 64): one AMX tile register.

Streams of one compressed tile
------------------------------
1. Bitmask (sparse mode only): ``MASK_BYTES`` = 64 bytes. Element e is bit (e mod 8) of byte
   (e div 8), so row r's mask is the little-endian uint32 at byte 4r. 1 = element stored.
   Dense mode has no mask stream and stores every element.
2. Values: the codes of the stored elements in increasing e, Q bits each, packed LSB-first into
   a little-endian bit stream: code k occupies stream bits [kQ, kQ + Q), stream bit i is bit
   (i mod 8) of byte (i div 8). Q is 1..8, or 16 for raw BF16 (no lookup). For n stored
   elements the stream is ceil(n*Q/8) bytes, its padding bits are zero, and it starts on a byte
   boundary.
3. Scales (optional): one scale per group of g consecutive elements of a row, g in {16, 32};
   element (r, c) uses scale s = r*(32/g) + (c div g); 512/g scales per tile, in increasing s.
   Formats: BF16 (2 bytes, little-endian), E8M0 (1 byte, 2^(x-127), 0xFF = NaN, as in OCP MX),
   E4M3 (1 byte, OCP FP8 E4M3FN). Tiles whose elements share scales (groups wider than one tile)
   point at the same scale bytes in memory; nothing is duplicated.

Per-kernel configuration (not per tile): ``TileConfig`` below.

Decompression of element e: 0 (+0, 0x0000) if its mask bit is 0; otherwise v = LUT[code] (the code
itself when Q = 16), then with scaling v' = scale_mul(v, scale[s]) (see ``numerics.scale_mul``).

Per-tile metadata, as a core hands it to the PE: byte address and byte length of each of the
three streams. Mask length 0 means dense, scale length 0 means no scaling; a stream of length 0
has address 0 (``CompressedMatrix.memory_image``).
"""

from dataclasses import dataclass, field

import numpy as np

TILE_ROWS = 16
TILE_COLS = 32
TILE_ELEMS = TILE_ROWS * TILE_COLS
MASK_BYTES = TILE_ELEMS // 8
TILE_BYTES = TILE_ELEMS * 2

Q_BITS = (1, 2, 3, 4, 5, 6, 7, 8, 16)
SCALE_GROUPS = (16, 32)
LUT_ENTRIES = 256
#: Bytes per scale of each scale format; ``None`` means no scaling.
SCALE_BYTES = {None: 0, "bf16": 2, "e8m0": 1, "e4m3": 1}
SCALE_FORMATS = tuple(SCALE_BYTES)


class FormatError(ValueError):
    """A compressed tile, matrix or file is inconsistent with the format."""


def value_stream_len(n_stored, q_bits):
    """Bytes of the value stream of a tile with ``n_stored`` stored elements (scalar or array)."""
    return (np.asarray(n_stored) * q_bits + 7) // 8


@dataclass(frozen=True, eq=False)
class TileConfig:
    """Per-kernel configuration shared by every tile of a compressed matrix.

    ``lut`` holds 256 BF16 bit patterns; codes at or above ``lut_size`` are outside the codebook
    and make a tile malformed. With Q = 16 the LUT is unused.
    """

    q_bits: int
    sparse: bool
    scale_format: str | None = None
    scale_group: int = 32
    lut: np.ndarray = field(default_factory=lambda: np.zeros(LUT_ENTRIES, np.uint16))
    lut_size: int = LUT_ENTRIES

    def __post_init__(self):
        if self.q_bits not in Q_BITS:
            raise FormatError(f"q_bits must be one of {Q_BITS}, got {self.q_bits!r}")
        if self.scale_format not in SCALE_FORMATS:
            raise FormatError(f"scale_format must be one of {SCALE_FORMATS}, got {self.scale_format!r}")
        if self.scale_group not in SCALE_GROUPS:
            raise FormatError(f"scale_group must be one of {SCALE_GROUPS}, got {self.scale_group!r}")
        lut = np.asarray(self.lut)
        if lut.shape != (LUT_ENTRIES,) or lut.dtype != np.uint16:
            raise FormatError(f"lut must be {LUT_ENTRIES} uint16 BF16 patterns, got {lut.dtype} {lut.shape}")
        max_codes = 1 << self.q_bits if self.q_bits <= 8 else LUT_ENTRIES
        if not 1 <= self.lut_size <= max_codes:
            raise FormatError(f"lut_size must be in 1..{max_codes} for Q={self.q_bits}, got {self.lut_size}")
        lut = lut.copy()
        lut.flags.writeable = False
        object.__setattr__(self, "lut", lut)
        object.__setattr__(self, "sparse", bool(self.sparse))

    @property
    def scales_per_tile(self):
        return TILE_ELEMS // self.scale_group if self.scale_format else 0

    @property
    def scale_stream_len(self):
        """Bytes of one tile's scale stream (0 without scaling)."""
        return self.scales_per_tile * SCALE_BYTES[self.scale_format]

    @property
    def mask_stream_len(self):
        return MASK_BYTES if self.sparse else 0

    def __eq__(self, other):
        if not isinstance(other, TileConfig):
            return NotImplemented
        return self.to_dict() == other.to_dict()

    def to_dict(self):
        return {
            "q_bits": self.q_bits,
            "sparse": self.sparse,
            "scale_format": self.scale_format,
            "scale_group": self.scale_group,
            "lut": [int(x) for x in self.lut],
            "lut_size": self.lut_size,
        }

    @classmethod
    def from_dict(cls, d):
        return cls(
            q_bits=d["q_bits"],
            sparse=d["sparse"],
            scale_format=d["scale_format"],
            scale_group=d["scale_group"],
            lut=np.asarray(d["lut"], dtype=np.uint16),
            lut_size=d["lut_size"],
        )


def tile_grid(shape):
    """(tile rows, tile columns) of a matrix of ``shape`` (M, K)."""
    m, k = shape
    return -(-m // TILE_ROWS), -(-k // TILE_COLS)


def scale_index(scale_group):
    """Scale index s of every element e of a tile (shape (512,))."""
    e = np.arange(TILE_ELEMS)
    r, c = divmod(e, TILE_COLS)
    return r * (TILE_COLS // scale_group) + c // scale_group


def mask_bits(mask_bytes):
    """Unpack masks (..., 64) uint8 into element bits (..., 512) bool, element e = bit e%8 of byte e//8."""
    return np.unpackbits(np.asarray(mask_bytes, np.uint8), axis=-1, bitorder="little").astype(bool)


def read_codes(stream, bitpos, q_bits):
    """Read the Q-bit codes starting at stream bit positions ``bitpos`` (any shape)."""
    # Three bytes cover any code of up to 16 bits at any bit offset; pad so every read is in range.
    padded = np.concatenate([np.asarray(stream, np.uint8), np.zeros(3, np.uint8)])
    byte = np.asarray(bitpos, np.int64) >> 3
    window = (
        padded[byte].astype(np.uint32)
        | padded[byte + 1].astype(np.uint32) << 8
        | padded[byte + 2].astype(np.uint32) << 16
    )
    return ((window >> (np.asarray(bitpos) & 7).astype(np.uint32)) & ((1 << q_bits) - 1)).astype(np.uint16)
