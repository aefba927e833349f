"""Decompression engines: how many vector operations a compressed tile costs (VO_tile).

VO_tile is counted in cycles of one per-core engine, so both engines have VOS = c * f: DECA
completes at most one vOp per cycle per core (paper, 6.2), and the software path's cost is in
core cycles per tile.
"""

from dataclasses import dataclass, field

from deca.hw.params import check_params, vops_per_tile

from .bubbles import bpv_expected, bpv_monte_carlo

#: Core cycles per tile of libxsmm's AVX decompression, by scheme class ("scheme" dense,
#: "scheme-sparse"). Derived from the paper's Table 2 R-S row, not measured: with N = 16, 56 cores
#: and 2.5 GHz, a VEC-bound kernel reaches 512*16*c*f / VO_tile FLOPS, so MXFP4's 11.5 TFLOPS gives
#: 99.7 cycles, every sparse BF8's 16.1 gives 71.2 and every sparse BF16's 23.0 gives 49.9. Dense BF8
#: is memory-bound there, which only says VO_tile < 86; we reuse the sparse BF8 cost. Dense BF16 is
#: what the TMUL reads directly: nothing to decompress.
SOFTWARE_CYCLES_PER_TILE = {"mxfp4": 100.0, "bf8": 71.0, "bf8-sparse": 71.0, "bf16": 0.0, "bf16-sparse": 50.0}


def scheme_class(kernel):
    """The key of ``SOFTWARE_CYCLES_PER_TILE`` for a kernel."""
    return kernel.scheme + ("-sparse" if kernel.sparse else "")


@dataclass(frozen=True)
class SoftwareEngine:
    """The core's AVX decompression sequence; ``cycles`` maps scheme classes to core cycles per tile."""

    cycles: dict = field(default_factory=lambda: dict(SOFTWARE_CYCLES_PER_TILE))
    name: str = "software"

    def __post_init__(self):
        for key, value in self.cycles.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
                raise ValueError(f"software cost of {key!r} must be a number of cycles >= 0, got {value!r}")

    def vo_tile(self, kernel):
        key = scheme_class(kernel)
        if key not in self.cycles:
            raise ValueError(f"no software decompression cost for {key!r} (known: {', '.join(self.cycles)}); "
                             f"give one, e.g. --sw-cycles {key}=80")
        return float(self.cycles[key])


@dataclass(frozen=True)
class DecaEngine:
    """A DECA PE with W elements per vOp and L big LUTs: VO_tile = (512/W) * (1 + bpv)."""

    W: int
    L: int

    def __post_init__(self):
        check_params(self.W, self.L)

    @property
    def name(self):
        return f"DECA W{self.W} L{self.L}"

    def bpv(self, kernel):
        # A kernel measured from a real matrix counts its own windows; otherwise the binomial model.
        if kernel.matrix is not None:
            return bpv_monte_carlo(kernel.matrix, self.W, self.L, kernel.tiles)
        return bpv_expected(self.W, self.L, kernel.q_bits, kernel.sparse, kernel.density)

    def vo_tile(self, kernel):
        return vops_per_tile(self.W) * (1 + self.bpv(kernel))
