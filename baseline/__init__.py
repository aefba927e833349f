"""The software-only baseline: hand-written AVX-512 (and portable scalar) C kernels that decompress
DECA tiles to BF16 bit-exactly, and their measurement on this machine (``deca baseline``)."""

from .build import BuildError
from .decode import PATHS, Stats, TileSet, Unsupported, avx512_supported, choose_path, decompress, decompress_tile

__all__ = ["BuildError", "PATHS", "Stats", "TileSet", "Unsupported", "avx512_supported", "choose_path",
           "decompress", "decompress_tile"]
