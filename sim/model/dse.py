"""Analytic design-space exploration of the DECA PE over (W, L) with the Roof-Surface (paper, 8.2).

The goal is the cheapest design that leaves no kernel VEC-bound: past that point a bigger PE
cannot speed anything up, since memory or the TMUL bounds every kernel.
"""

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from deca.golden.format import LUT_ENTRIES
from deca.hw.params import check_params

from .engines import DecaEngine
from .roof import predict


def placeholder_cost(W, L):
    """Placeholder hardware cost until synthesis measures area: LUT entries (L big LUTs of 256)
    plus the ports of the triangular expansion crossbar, W(W+1)/2."""
    return L * LUT_ENTRIES + W * (W + 1) // 2


def cost_function(cost):
    """A (W, L) -> cost callable from a callable or a mapping {(W, L): cost} (e.g. synthesized area)."""
    if callable(cost):
        return cost
    if isinstance(cost, Mapping):
        def lookup(W, L):
            if (W, L) not in cost:
                raise ValueError(f"no hardware cost given for design W={W}, L={L}")
            return cost[W, L]
        return lookup
    raise TypeError(f"cost must be a callable (W, L) -> cost or a mapping {{(W, L): cost}}, got {type(cost).__name__}")


@dataclass(frozen=True)
class DesignPoint:
    """One (W, L) design: its cost and the prediction of every kernel on it."""

    W: int
    L: int
    cost: float
    predictions: tuple

    @property
    def vec_bound(self):
        return [p.kernel for p in self.predictions if p.bound == "VEC"]

    @property
    def flops(self):
        return np.array([p.flops for p in self.predictions])

    @property
    def geomean_flops(self):
        return float(np.exp(np.mean(np.log(self.flops))))


def design_grid(Ws, Ls):
    """Every (W, L) with W in ``Ws`` and L in ``Ls``, L <= W (a vOp never needs more LUTs than W)."""
    for W in Ws:
        check_params(W, 1)
    designs = [(W, L) for W in Ws for L in Ls if L <= W]
    for W, L in designs:
        check_params(W, L)
    if not designs:
        raise ValueError(f"no design with L <= W in W = {list(Ws)}, L = {list(Ls)}")
    return designs


def evaluate(platform, kernels, W, L, n=16, cost=placeholder_cost):
    engine = DecaEngine(W, L)
    return DesignPoint(W, L, cost_function(cost)(W, L), tuple(predict(platform, k, engine, n) for k in kernels))


def explore(platform, kernels, designs, n=16, cost=placeholder_cost):
    """A DesignPoint per (W, L) of ``designs``."""
    if not kernels:
        raise ValueError("the design-space exploration needs at least one kernel")
    return [evaluate(platform, kernels, W, L, n, cost) for W, L in designs]


def choose(points):
    """The paper's rule: among designs leaving no kernel VEC-bound, fewest LUTs, then smallest W
    (None when every design leaves one)."""
    ok = [p for p in points if not p.vec_bound]
    return min(ok, key=lambda p: (p.L, p.W)) if ok else None


def best_value(points):
    """The design with the highest geometric-mean throughput per unit of cost."""
    return max(points, key=lambda p: p.geomean_flops / p.cost)


def speedup(a, b):
    """Geometric mean over kernels of a's predicted FLOPS over b's."""
    return float(np.exp(np.mean(np.log(a.flops / b.flops))))
