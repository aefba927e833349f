"""The Roof-Surface performance model (paper, section 4, Eq. 1-3, and appendix 12.2).

A kernel's signature is (AI_XM, AI_XV): TMUL tile operations per byte from memory and per
decompression vOp. The machine processes TPS = min(MBW*AI_XM, VOS*AI_XV, MOS) tile operations per
second; a TMUL operation is 512*N FMAs (the paper's FLOPs are FMAs).
"""

import math
from dataclasses import dataclass

import numpy as np

from deca.golden import TILE_ELEMS

from .platform import TMUL_ROWS

#: Terms within this relative distance of the smallest one also bound the kernel. Ties go to the
#: first term in MEM, MTX, VEC order, so a kernel counts as VEC-bound only when lifting every
#: vector limit would gain more than 1%: a bpv of 1e-4 is no bottleneck worth a bigger PE.
BOUND_RTOL = 0.01


def eq3(domains, rtol=BOUND_RTOL):
    """The n-domain model (paper, Eq. 3): TOS = min over domains of OS_i * AI_i.

    ``domains`` maps a name to (operations per second of that domain, target operations per
    operation of that domain), in tie-break order; memory is a domain whose operations are bytes,
    and the target domain itself has AI 1. Returns (TOS, name of the bounding domain); arrays
    broadcast, giving arrays of both.
    """
    names = list(domains)
    rates = np.stack(np.broadcast_arrays(*(np.multiply(os_, ai, dtype=float) for os_, ai in domains.values())))
    tos = rates.min(axis=0)
    bound = np.asarray(names)[np.argmax(rates <= tos * (1 + rtol), axis=0)]
    return (float(tos), str(bound)) if tos.ndim == 0 else (tos, bound)


def tile_ops_per_weight_tile(n):
    """TMUL operations per weight tile for batch N: one per 16 activation rows (appendix 12.2)."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"batch size N must be a positive integer, got {n!r}")
    return math.ceil(n / TMUL_ROWS)


def roof_surface(platform, ai_xm, ai_xv=None, n=16, rtol=BOUND_RTOL):
    """(TPS, FLOPS, bound) of signature(s) (AI_XM, AI_XV) at batch N; ``ai_xv`` None: the classic
    roofline (memory and matrix terms only).

    For N > 16 the TMUL saturates and a weight tile, loaded and decompressed once, feeds
    ceil(N/16) operations: both AIs scale by that factor (N/16 for multiples of 16, as in the
    paper) and each operation does 512*N/ceil(N/16) FMAs. TPS counts TMUL operations.
    """
    reuse = tile_ops_per_weight_tile(n)
    domains = {"MEM": (platform.mem_bw, np.multiply(ai_xm, reuse)), "MTX": (platform.mos, 1.0)}
    if ai_xv is not None:
        domains["VEC"] = (platform.cycles_per_s, np.multiply(ai_xv, reuse))
    tps, bound = eq3(domains, rtol)
    return tps, tps * TILE_ELEMS * n / reuse, bound


@dataclass(frozen=True)
class Prediction:
    kernel: str
    engine: str
    ai_xm: float
    ai_xv: float | None  # None for the roofline
    tps: float
    flops: float
    bound: str


def ai_xv(engine, kernel):
    """1 / VO_tile; infinite when the tile needs no vector work."""
    vo = engine.vo_tile(kernel)
    return math.inf if vo == 0 else 1.0 / vo


def predict(platform, kernel, engine=None, n=16):
    """The Roof-Surface prediction of a kernel on an engine; ``engine`` None: the classic roofline."""
    xv = None if engine is None else ai_xv(engine, kernel)
    tps, flops, bound = roof_surface(platform, kernel.ai_xm, xv, n)
    return Prediction(kernel.name, "roofline" if engine is None else engine.name, kernel.ai_xm, xv, tps, flops, bound)
