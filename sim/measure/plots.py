"""Headless plots of RTL measurement records (``deca.sim.measure.point``): measured against analytic bpv,
cycles per tile over the design space, measured points on the Bounding Region Diagram, the
utilizations of the paper's Table 4 and the two invocation modes.

Each function takes a list of records (the dicts of ``deca.sim.measure.record``, as read back from
JSON) and writes a PNG, like ``deca.sim.model.plots``.
"""

import math
from pathlib import Path

import numpy as np
from matplotlib import colormaps
from matplotlib.colors import LogNorm
from matplotlib.figure import Figure
from matplotlib.ticker import FormatStrFormatter

from deca.hw.params import LOADERS
from deca.sim.model.plots import axis_limits, bord_axes
from deca.sim.model.roof import tile_ops_per_weight_tile

from .point import parse_workload
from .records import bpv_tolerance, design_of

MARKERS = "osD^v<>ph*"
#: Bar colours of the three utilizations (as in the paper's Table 4: memory, matrix engine, DECA).
UTIL_COLORS = {"MEM": "#4daf4a", "TMUL": "#377eb8", "DECA": "#ff7f00"}
#: How far (relative) a record's actual density may be from a reference density it is matched to.
DENSITY_RTOL = 0.1


def _tepl(records):
    """The TEPL-mode records, or all of them if there are none (a store-only run)."""
    if not records:
        raise ValueError("no records to plot")
    return [r for r in records if r["mode"] == "tepl"] or list(records)


def design_label(design):
    """W/L 32/8, with the loader count when it is not the paper's: W/L 32/8 ld3."""
    W, L, loaders = design
    return f"W/L {W}/{L}" + ("" if loaders == LOADERS else f" ld{loaders}")


def _styles(records):
    """(colour, marker) of each design (W, L, loaders) of the records, in design order."""
    designs = sorted({design_of(r) for r in records})
    return {d: (colormaps["tab10"](i % 10), MARKERS[i % len(MARKERS)]) for i, d in enumerate(designs)}


def _workload_label(name):
    return name if "@" in name else Path(name).stem


def _workload_order(name):
    """Generated workloads by scheme and falling density, then users' files by name."""
    if "@" in name:
        scheme, density = parse_workload(name)
        return 0, scheme, -density
    return 1, name, 0


def _batch(records):
    batches = {r["system"]["batch"] for r in records}
    if len(batches) != 1:
        raise ValueError(f"records of one plot must share the batch N, got {sorted(batches)}")
    return batches.pop()


def _nearest(reference, density):
    """The key of ``reference`` nearest to ``density`` (records hold the actual stored fraction,
    e.g. 0.4999 for 0.5), or None if none is within DENSITY_RTOL of it."""
    key = min(reference, key=lambda d: abs(d - density), default=None)
    return key if key is not None and abs(key - density) <= DENSITY_RTOL * key else None


def plot_bpv(records, path):
    """Measured against analytic bubbles per vOp, one marker per design, with the y = x line and
    the band the measurement must lie in (``bpv_tolerance``); TEPL-mode records."""
    records = _tepl(records)
    styles = _styles(records)
    hi = (1.1 * max(max(r["bpv_analytic"], r["bpv_measured"]) for r in records)) or 1.0  # all zero: any scale
    fig = Figure(figsize=(6, 5.5), layout="constrained")
    ax = fig.subplots()
    xs = np.linspace(0, hi, 200)
    tol = np.array([bpv_tolerance(x) for x in xs])
    ax.fill_between(xs, xs - tol, xs + tol, color="0.85", label="tolerance")
    ax.plot(xs, xs, "k-", lw=1, label="y = x")
    for d, (color, marker) in styles.items():
        pts = np.array([(r["bpv_analytic"], r["bpv_measured"]) for r in records if design_of(r) == d])
        ax.plot(*pts.T, marker, color=color, ms=5, ls="none", label=design_label(d))
    ax.set(xlim=(0, hi), ylim=(0, hi), xlabel="analytic bpv (closed form)", ylabel="measured bpv (RTL counters)",
           title="Bubbles per vOp, tolerance max(3% of analytic, 0.02)")
    ax.legend(fontsize=8, loc="upper left")
    ax.grid(alpha=0.3)
    fig.savefig(path, dpi=130)
    return path


def plot_cycles_grid(records, path):
    """Cycles per tile over the designs, one heatmap per workload and loader count (TEPL mode): rows
    L, columns W; grey cells were not measured (or are no valid design)."""
    records = _tepl(records)
    counts = sorted({r["loaders"] for r in records})
    # Panels: (workload, loaders), the loader counts of a workload side by side.
    workloads = [(w, n) for w in sorted({r["workload"] for r in records}, key=_workload_order) for n in counts]
    Ws = sorted({r["W"] for r in records})
    Ls = sorted({r["L"] for r in records})
    grids = {w: np.full((len(Ls), len(Ws)), np.nan) for w in workloads}
    for r in records:
        grids[r["workload"], r["loaders"]][Ls.index(r["L"]), Ws.index(r["W"])] = r["cycles_per_tile"]
    values = [r["cycles_per_tile"] for r in records]
    # One colour scale for all panels, so that workloads compare; cycles per tile span decades.
    norm = LogNorm(min(values), max(values))
    cmap = colormaps["viridis"].with_extremes(bad="0.85")
    cols = min(4, len(workloads))
    rows = -(-len(workloads) // cols)
    fig = Figure(figsize=(cols * (0.55 * len(Ws) + 1.4) + 1, rows * (0.4 * len(Ls) + 1.3) + 0.5),
                 layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False).ravel()
    for ax in axes[len(workloads):]:
        ax.set_axis_off()
    for ax, (w, n) in zip(axes, workloads):
        grid = grids[w, n]
        im = ax.imshow(np.ma.masked_invalid(grid), norm=norm, cmap=cmap, aspect="auto", origin="lower")
        for (i, j), v in np.ndenumerate(grid):
            if math.isfinite(v):
                ax.text(j, i, f"{v:.1f}", ha="center", va="center", fontsize=6.5,
                        color="w" if norm(v) < 0.5 else "k")
        ax.set_xticks(range(len(Ws)), Ws, fontsize=7)
        ax.set_yticks(range(len(Ls)), Ls, fontsize=7)
        ax.set(xlabel="W", ylabel="L", title=_workload_label(w) + ("" if counts == [LOADERS] else f", {n} loaders"))
        ax.title.set_fontsize(9)
    bar = fig.colorbar(im, ax=axes[:len(workloads)].tolist(), label="cycles per tile")
    for setter in (bar.ax.yaxis.set_major_formatter, bar.ax.yaxis.set_minor_formatter):
        setter(FormatStrFormatter("%g"))  # plain numbers, like the cells, not 6x10^1
    fig.suptitle("Measured cycles per tile (RTL, TEPL)", fontsize=10)
    fig.savefig(path, dpi=130)
    return path


def plot_bord_measured(platform, records, path):
    """The measured TEPL-mode points on ``platform``'s Bounding Region Diagram at the records' batch
    N: AI_XM from the compressed bytes per tile, AI_XV from the DECA pipeline's cycles per tile
    (vOps plus bubbles; the vector domain's rate is ``platform.cycles_per_s``). ``platform``
    should carry the bandwidth the records were measured at (``deca.sim.measure.platform_of``).

    Points beyond the top (no pipeline cycle at all) are drawn as triangles on the upper edge.
    """
    records = _tepl(records)
    n = _batch(records)
    reuse = tile_ops_per_weight_tile(n)
    pts = [(reuse / r["bytes_per_tile"],
            reuse * r["tiles"] / cyc if (cyc := r["vops"] + r["bubbles"]) else math.inf) for r in records]
    xlim = axis_limits([x for x, _ in pts], platform.mos / platform.mem_bw)
    ylim = axis_limits([y for _, y in pts], platform.mos / platform.cycles_per_s)
    fig = Figure(figsize=(7, 6), layout="constrained")
    ax = fig.subplots()
    bord_axes(ax, platform, [], n, xlim, ylim, "measured (RTL, TEPL)")
    styles = _styles(records)
    for d, (color, marker) in styles.items():
        ax.plot([], [], marker, color=color, ls="none", label=design_label(d))
    for r, (x, y) in zip(records, pts):
        color, marker = styles[design_of(r)]
        clipped = not math.isfinite(y)
        y = ylim[1] / 1.15 if clipped else y
        ax.plot(x, y, "^" if clipped else marker, color=color, mec="k", mew=0.4, ms=5)
        ax.annotate(_workload_label(r["workload"]), (x, y), textcoords="offset points", xytext=(3, 2),
                    fontsize=6)
    # Beside the diagram: its corners hold the region names.
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
    fig.suptitle(f"Bounding Region Diagram, {platform.describe()}, N = {n}", fontsize=10)
    fig.savefig(path, dpi=130)
    return path


def plot_utilization(records, reference, path):
    """Memory, TMUL and DECA utilization (percent) of each record, by falling density, beside the
    paper's values ``reference`` {density: (mem, tmul, deca)} (hatched) at the nearest density."""
    if not records:
        raise ValueError("no records to plot")
    records = sorted(records, key=lambda r: -r["density"])
    keys = [_nearest(reference, r["density"]) for r in records]
    x = np.arange(len(records))
    width = 0.13
    fig = Figure(figsize=(max(6, 1.5 * len(records) + 2), 4.5), layout="constrained")
    ax = fig.subplots()
    for j, (name, color) in enumerate(UTIL_COLORS.items()):
        offset = (2 * j - 2.5) * width
        measured = [100 * r[f"util_{name.lower()}"] for r in records]
        bars = ax.bar(x + offset, measured, width, color=color, label=f"{name} (RTL)")
        ax.bar_label(bars, fmt="%.0f", fontsize=6)
        matched = [(i, reference[k][j]) for i, k in enumerate(keys) if k is not None]
        if matched:
            xi, paper = zip(*matched)
            bars = ax.bar(np.array(xi) + offset + width, paper, width, color=color, alpha=0.4, hatch="//",
                          edgecolor=color, label=f"{name} (paper)")
            ax.bar_label(bars, fmt="%.0f", fontsize=6)
    ax.set_xticks(x, [f"{100 * (k if k is not None else r['density']):g}%" for r, k in zip(records, keys)])
    designs = ", ".join(map(design_label, sorted({design_of(r) for r in records})))
    ax.set(xlabel="density", ylabel="utilization (%)", ylim=(0, 125),
           title=f"Utilization, RTL ({designs}) vs paper Table 4 (hatched)")
    ax.legend(fontsize=7, ncol=3, loc="upper left")
    ax.grid(axis="y", alpha=0.3)
    fig.savefig(path, dpi=130)
    return path


def plot_modes(records, path):
    """Cycles per tile in TEPL and in store-and-fence mode of each (design, workload) measured in
    both, with the slowdown store / TEPL above each pair."""
    by_mode = {(design_of(r), r["workload"], r["mode"]): r["cycles_per_tile"] for r in records}
    pairs = sorted({(d, w) for d, w, _ in by_mode if (d, w, "tepl") in by_mode and (d, w, "store") in by_mode},
                   key=lambda p: (p[0], _workload_order(p[1])))
    if not pairs:
        raise ValueError("no workload was measured in both modes (tepl and store) on one design")
    tepl = np.array([by_mode[d, w, "tepl"] for d, w in pairs])
    store = np.array([by_mode[d, w, "store"] for d, w in pairs])
    x = np.arange(len(pairs))
    fig = Figure(figsize=(max(6, 0.8 * len(pairs) + 2), 4.5), layout="constrained")
    ax = fig.subplots()
    ax.bar(x - 0.2, tepl, 0.4, label="TEPL", color="#377eb8")
    ax.bar(x + 0.2, store, 0.4, label="store and fence", color="#e41a1c")
    for xi, t, s in zip(x, tepl, store):
        ax.annotate(f"x{s / t:.2f}", (xi, max(t, s)), textcoords="offset points", xytext=(0, 3), ha="center",
                    fontsize=7)
    # One design: name it in the title; several: under each workload.
    designs = sorted({d for d, _ in pairs})
    labels = [_workload_label(w) + ("" if len(designs) == 1 else f"\n{design_label(d)}") for d, w in pairs]
    ax.set_xticks(x, labels, rotation=45 if len(pairs) > 6 else 0, fontsize=7)
    only = f" ({design_label(designs[0])})" if len(designs) == 1 else ""
    ax.set(ylabel="cycles per tile", ylim=(0, 1.15 * max(store.max(), tepl.max())),
           title=f"TEPL vs store and fence{only}: store / TEPL above")
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    fig.savefig(path, dpi=130)
    return path
