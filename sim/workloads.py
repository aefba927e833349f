"""Compressed test matrices over every scheme, codebook width and density, for the hardware tests."""

import numpy as np

from deca.golden import SCHEMES, compress

DENSITIES = (1, 0.5, 0.3, 0.2, 0.1, 0.05, 0)
#: Codebook sizes that give the code widths no built-in scheme uses (Q = 3, 5, 6, 7) and Q = 8
#: with a partly used LUT.
CODEBOOK_SIZES = (5, 20, 50, 100, 200)
#: Nearly dense BF16 runs the unpacker at its full rate, across short last beats of tiles.
EXTRA_DENSITIES = {"bf16": (0.97,)}


def workloads(rng, schemes=None, densities=DENSITIES, shape=(32, 64), codebook_sizes=CODEBOOK_SIZES,
              extra_densities=EXTRA_DENSITIES):
    """[(label, CompressedMatrix)] for each scheme (default all; "codebook" once per codebook size) and density.

    Labels read ``<scheme>[<codebook size>]@<density>``.
    """
    names = list(SCHEMES) if schemes is None else list(schemes)
    unknown = set(names) - set(SCHEMES)
    if unknown:
        raise ValueError(f"unknown schemes {sorted(unknown)}; choose from {', '.join(SCHEMES)}")
    kinds = [(name, None) for name in names if name != "codebook"]
    if "codebook" in names:
        # Multiples of 1/64 below 2 in magnitude are exact and distinct in BF16.
        kinds += [("codebook", rng.choice(np.arange(-128, 128), n, replace=False) / 64) for n in codebook_sizes]
    out = []
    for name, codebook in kinds:
        for density in (*densities, *extra_densities.get(name, ())):
            # Heavy-tailed weights with a few columns far larger than the rest exercise the scale range.
            w = (rng.standard_t(3, size=shape).astype(np.float32)
                 * np.exp(rng.normal(0, 2, size=shape[1])).astype(np.float32))
            cm = compress(w, name, density=density, codebook=codebook)
            out.append((f"{name}{'' if codebook is None else len(codebook)}@{density}", cm))
    return out
