"""Throughput per area: the Roof-Surface exploration of ``deca.sim.model.dse`` with the synthesized
area (µm² of standard cells and macros, or generic transistors) as its hardware cost, and measured
throughput from a ``deca sweep`` folder.

A design is (W, L, loaders). The Roof-Surface model has no loaders (its DECA engine is the
dequantization pipeline), so designs that differ only in their loaders share a prediction and
differ in area; the measurements tell what the extra loaders buy."""

import json
from dataclasses import dataclass
from pathlib import Path

from deca.hw.params import LOADERS
from deca.sim.measure.records import design_rows
from deca.sim.model.dse import DesignPoint, best_value, choose, explore
from deca.sim.model.kernels import TABLE2_KERNELS, parse_kernels
from deca.sim.model.platform import get_platform

#: The records of a ``deca sweep`` folder (one per design and workload).
MEASURED_FILE = "results.json"


@dataclass(frozen=True)
class AreaPoint(DesignPoint):
    """A DesignPoint of the Roof-Surface model with the loader count of the synthesized design."""

    loaders: int = LOADERS

    @property
    def design(self):
        return self.W, self.L, self.loaders


@dataclass
class AreaDse:
    """Roof-Surface predictions on the synthesized designs, costed in area."""

    points: list          # AreaPoint, cost = area (``unit``)
    chosen: object        # the Roof-Surface's own pick (deca.sim.dse.choose), None if none qualifies
    best: object          # highest predicted geomean TFLOPS per area
    measured: dict        # (W, L, loaders) -> measured TFLOPS, empty without a deca sweep folder
    platform: str
    n: int
    unit: str = "µm²"     # of the cost: "µm²" or "transistors"

    @property
    def per_area(self):
        """What tflops_per_area is per: a million transistors or a mm² (both 1e6 units of cost)."""
        return "mm²" if self.unit == "µm²" else "M transistors"

    def rows(self):
        rows = []
        for p in self.points:
            tflops, measured = p.geomean_flops / 1e12, self.measured.get(p.design)
            rows.append({"W": p.W, "L": p.L, "loaders": p.loaders, "cost": p.cost, "tflops": tflops,
                         "tflops_per_area": tflops / p.cost * 1e6, "vec_bound": len(p.vec_bound),
                         "measured_tflops": measured,
                         "measured_per_area": None if measured is None else measured / p.cost * 1e6})
        return rows

    @property
    def best_measured(self):
        """(W, L, loaders) with the highest measured TFLOPS per area, None without measurements."""
        rows = [r for r in self.rows() if r["measured_per_area"] is not None]
        best = max(rows, key=lambda r: r["measured_per_area"], default=None)
        return None if best is None else (best["W"], best["L"], best["loaders"])


def area_dse(results, platform="spr-hbm", n=16, kernels=TABLE2_KERNELS, measured=None):
    """Explore the designs of ``results`` (SynthResults with W, L and loaders) on the paper's Table 2
    kernels. Among designs the Roof-Surface cannot tell apart (the same W and L), its choice is the
    one with the fewest loaders."""
    cost = {(r.W, r.L, r.loaders): r.area for r in results}
    plat, kerns = get_platform(platform), parse_kernels(",".join(kernels))
    points = []
    for loaders in sorted({d[2] for d in cost}):
        designs = sorted((W, L) for W, L, k in cost if k == loaders)
        points += [AreaPoint(**vars(p), loaders=loaders)
                   for p in explore(plat, kerns, designs, n, cost={wl: cost[(*wl, loaders)] for wl in designs})]
    points.sort(key=lambda p: p.design)  # a design's loader counts side by side, the fewest first
    unit = "transistors" if results[0].tech == "generic" else "µm²"
    return AreaDse(points, choose(points), best_value(points), measured or {}, platform, n, unit)


def load_measured(folder):
    """{(W, L, loaders): measured TFLOPS} from a ``deca sweep`` folder, or None when it has no
    results: per design, the geometric mean over the workloads every design ran (``design_rows``)."""
    path = Path(folder) / MEASURED_FILE
    if not path.is_file():
        return None
    try:
        records = json.loads(path.read_text())
        return {(r["W"], r["L"], r["loaders"]): r["gmean_tflops"] for r in design_rows(records)}
    except (ValueError, KeyError, TypeError) as e:
        raise ValueError(f"{path} is not a deca sweep result ({type(e).__name__}: {e})") from None
