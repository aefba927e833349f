"""Kernels as the Roof-Surface sees them: a compression scheme at a density, and its bytes per tile.

AI_XM = 1 / (compressed bytes per tile): one weight tile feeds one TMUL operation (for N <= 16).
The bytes come from the golden format, so every golden scheme at every density has a signature.
"""

from dataclasses import dataclass

import numpy as np

from deca.golden import SCHEMES, TILE_ELEMS, TILE_ROWS, CompressedMatrix, TileConfig, compress
from deca.golden.format import value_stream_len

#: Matrix columns assumed for scale sharing (groups wider than a tile, e.g. int8's per-channel scale,
#: are stored once for K / 32 tiles). 8192 is Llama2-70B's hidden size.
DEFAULT_K = 8192

#: The kernels of the paper's Table 2 and Fig. 5a, as "scheme" or "scheme:density" specs.
TABLE2_KERNELS = ("mxfp4", "bf8", "bf8:0.5", "bf8:0.3", "bf8:0.2", "bf8:0.1", "bf8:0.05",
                  "bf16:0.5", "bf16:0.3", "bf16:0.2", "bf16:0.1", "bf16:0.05")


@dataclass(frozen=True, eq=False)
class Kernel:
    """A compressed GeMM's weight side: scheme, tile config, expected bytes per tile.

    ``matrix``: the real compressed matrix when the kernel was measured from one (its masks give
    the window sizes for the DECA bubble count); None for a uniform-density kernel. ``tiles``: of
    that matrix, only the first ``tiles`` tiles count (None: all of them).
    """

    name: str
    scheme: str
    density: float
    config: TileConfig
    bytes_per_tile: float
    matrix: CompressedMatrix | None = None
    tiles: int | None = None

    @property
    def ai_xm(self):
        """Matrix tile operations per byte loaded from memory (N <= 16)."""
        return 1.0 / self.bytes_per_tile

    @property
    def q_bits(self):
        return self.config.q_bits

    @property
    def sparse(self):
        return self.config.sparse


def kernel_name(scheme, density, sparse):
    return scheme.upper() + (f"_{100 * density:.3g}%" if sparse else "")


def kernel(scheme, density=None, group_size=None, codebook=None, k=DEFAULT_K):
    """The signature of ``scheme`` with a uniform fraction ``density`` of stored elements.

    Bytes per tile = expected value bytes + mask + scale bytes. A tile stores d*512 elements on
    average, so its value stream averages d * value_stream_len(512, Q) = d*512*Q/8 bytes (the real
    stream rounds up to whole bytes, under one byte more). Scale bytes are the golden compressor's
    scale storage of a 16 x ``k`` matrix divided by its tiles, so shared scale blocks count once.
    Density None or 1 is the dense format (ternary is always sparse).
    """
    if scheme not in SCHEMES:
        raise ValueError(f"unknown scheme {scheme!r}; known schemes: {', '.join(SCHEMES)}")
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"K must be a positive number of matrix columns, got {k!r}")
    # Zero weights suffice: only the format (config, scale storage) matters here, not the codes.
    # The compressor also validates the density, group size and codebook.
    cm = compress(np.zeros((TILE_ROWS, k), np.float32), scheme, density=density, group_size=group_size,
                  codebook=codebook)
    cfg = cm.config
    d = 1.0 if density is None else float(density)
    scale_bytes = cm.stream_bytes()["scales"] / cm.num_tiles
    nbytes = d * value_stream_len(TILE_ELEMS, cfg.q_bits) + cfg.mask_stream_len + scale_bytes
    return Kernel(kernel_name(scheme, d, cfg.sparse), scheme, d, cfg, float(nbytes))


def kernel_from_matrix(cm, name=None, tiles=None):
    """The measured signature of a real compressed matrix, or of its first ``tiles`` tiles (what a
    run of that many tiles reads): their actual bytes per tile (every stream, a shared scale block
    once) and their masks for the DECA bubble count."""
    n = cm.num_tiles if tiles is None else tiles
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or not 1 <= n <= cm.num_tiles:
        raise ValueError(f"tiles must be 1..{cm.num_tiles} (the matrix's tiles), got {tiles!r}")
    nbytes = int(cm.value_offsets[n])
    if cm.masks is not None:
        nbytes += n * cm.masks.shape[1]
    if cm.scale_blocks is not None:
        nbytes += len(np.unique(cm.scale_block_of_tile[:n])) * cm.scale_blocks.shape[1]
    d = cm.density
    return Kernel(name or kernel_name(cm.scheme, d, cm.config.sparse), cm.scheme, d, cm.config, nbytes / n,
                  matrix=cm, tiles=int(n))


def parse_kernel(spec, k=DEFAULT_K):
    """A kernel from "scheme" (dense) or "scheme:density", e.g. "bf8:0.3"."""
    scheme, sep, density = spec.partition(":")
    if not sep:
        return kernel(scheme, k=k)
    try:
        d = float(density)
    except ValueError:
        raise ValueError(f"kernel {spec!r}: density must be a number in [0, 1]") from None
    return kernel(scheme, d, k=k)


def parse_kernels(text, k=DEFAULT_K):
    """Kernels from a comma-separated list of specs."""
    return [parse_kernel(s.strip(), k) for s in text.split(",") if s.strip()]

