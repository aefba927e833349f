"""The software-only baseline: hand-written AVX-512, AVX2 and portable scalar C kernels that decompress
DECA tiles to BF16 bit-exactly, and their measurement on this machine (``deca baseline``)."""

from .build import BuildError
from .decode import (PATHS, Stats, TileSet, Unsupported, available_paths, avx512_supported, choose_path, cpu_features,
                     decompress, decompress_tile)

__all__ = ["BuildError", "PATHS", "Stats", "TileSet", "Unsupported", "available_paths", "avx512_supported", "choose_path",
           "cpu_features",
           "decompress", "decompress_tile"]
