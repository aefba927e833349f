"""Golden model of the DECA compressed-tile format: compressor, bit-exact decompressor, file I/O.

The format is specified in ``deca.golden.format``; the schemes in ``deca.golden.schemes``.
"""

from .container import load, save
from .format import TILE_COLS, TILE_ELEMS, TILE_ROWS, FormatError, TileConfig
from .matrix import TILE_META_DTYPE, CompressedMatrix, compress, decompress, decompress_tile, decompress_tiles
from .numerics import scale_mul
from .schemes import SCHEMES
from .weights import load_weights

__all__ = [
    "CompressedMatrix", "FormatError", "SCHEMES", "TILE_COLS", "TILE_ELEMS", "TILE_META_DTYPE", "TILE_ROWS",
    "TileConfig", "compress", "decompress", "decompress_tile", "decompress_tiles", "load", "load_weights", "save",
    "scale_mul",
]
