"""Headless plots of the Roof-Surface model: the 3D surface (paper, Fig. 4), Bounding Region
Diagrams (Fig. 5 and 15) and the design-space exploration.

Figures are built with ``matplotlib.figure.Figure`` (no pyplot, no display needed) and written as PNG.
"""

import math

import numpy as np
from matplotlib import colormaps
from matplotlib.colors import ListedColormap, to_rgba_array
from matplotlib.figure import Figure

from .roof import eq3, roof_surface, tile_ops_per_weight_tile

#: Region colours as in the paper's Fig. 4: memory green, vector orange, matrix blue.
REGIONS = ("MEM", "VEC", "MTX")
REGION_COLORS = {"MEM": "#7fc97f", "VEC": "#fdb462", "MTX": "#80b1d3"}
GRID = 300


def _signature(pred, n):
    """A prediction's point on the BORD plane: its AIs, scaled by the tile reuse of batch N."""
    reuse = tile_ops_per_weight_tile(n)
    return pred.ai_xm * reuse, pred.ai_xv * reuse


def axis_limits(values, pivot):
    """Log-axis limits covering the finite values and the region corner ``pivot``, with margin."""
    finite = [v for v in values if math.isfinite(v)] + [pivot]
    return min(finite) / 4, max(finite) * 4


def _regions(platform, x, y):
    """Index into REGIONS of the bounding term at each (AI_XM, AI_XV) grid point (exact geometry)."""
    domains = {"MEM": (platform.mem_bw, x), "VEC": (platform.cycles_per_s, y), "MTX": (platform.mos, 1.0)}
    _, bound = eq3(domains, rtol=0)
    return sum(i * (bound == r) for i, r in enumerate(REGIONS))


def bord_axes(ax, platform, preds, n, xlim, ylim, title):
    xs = np.geomspace(*xlim, GRID)
    ys = np.geomspace(*ylim, GRID)
    X, Y = np.meshgrid(xs, ys)
    cmap = ListedColormap([REGION_COLORS[r] for r in REGIONS])
    ax.pcolormesh(X, Y, _regions(platform, X, Y), cmap=cmap, vmin=-0.5, vmax=len(REGIONS) - 0.5, shading="auto")
    # The three region borders meet at (MOS/MBW, MOS/VOS).
    x0, y0 = platform.mos / platform.mem_bw, platform.mos / platform.cycles_per_s
    ax.plot([xlim[0], x0], [platform.mem_bw / platform.cycles_per_s * xlim[0], y0], "k-", lw=1.2)
    ax.plot([x0, x0], [y0, ylim[1]], "k-", lw=1.2)
    ax.plot([x0, xlim[1]], [y0, y0], "k-", lw=1.2)
    for region, (tx, ty) in {"MEM": (xlim[0] * 1.5, ylim[1] / 2), "VEC": (xlim[1] / 1.5, ylim[0] * 1.5),
                             "MTX": (xlim[1] / 1.5, ylim[1] / 2)}.items():
        ax.text(tx, ty, f"{region}-bound", ha="left" if region == "MEM" else "right", va="center",
                fontsize=9, fontweight="bold")
    for i, p in enumerate(preds):
        x, y = _signature(p, n)
        clipped = not math.isfinite(y)
        y = ylim[1] / 1.15 if clipped else y
        ax.plot(x, y, "^" if clipped else "o", color="k", ms=4)
        # Kernels of one scheme often share AI_XV: slanted labels, alternately above and below.
        ax.annotate(p.kernel, (x, y), textcoords="offset points", xytext=(2, 4) if i % 2 else (2, -4),
                    va="bottom" if i % 2 else "top", rotation=40 if i % 2 else -40, fontsize=6.5,
                    rotation_mode="anchor")
    ax.set(xscale="log", yscale="log", xlim=xlim, ylim=ylim, title=title,
           xlabel=r"$AI_{XM}$ (tile ops / byte)", ylabel=r"$AI_{XV}$ (tile ops / vOp)")


def plot_bord(platform, panels, path, n=16):
    """One BORD per (title, predictions) panel, on shared axes; writes a PNG to ``path``.

    Points beyond the top (no vector work at all) are drawn as triangles on the upper edge.
    """
    preds = [p for _, ps in panels for p in ps]
    sig = [_signature(p, n) for p in preds]
    xlim = axis_limits([x for x, _ in sig], platform.mos / platform.mem_bw)
    ylim = axis_limits([y for _, y in sig], platform.mos / platform.cycles_per_s)
    cols = min(2, len(panels))
    rows = -(-len(panels) // cols)
    fig = Figure(figsize=(6.5 * cols, 5.5 * rows), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False).ravel()
    for ax in axes[len(panels):]:
        ax.set_axis_off()
    for ax, (title, ps) in zip(axes, panels):
        bord_axes(ax, platform, ps, n, xlim, ylim, title)
    fig.suptitle(f"Bounding Region Diagram, {platform.describe()}, N = {n}", fontsize=10)
    fig.savefig(path, dpi=130)
    return path


def plot_surface(platform, panels, path, n=16):
    """The 3D Roof-Surface (x = log AI_XM, y = log AI_XV, z = TFLOPS) coloured by bounding term,
    with each panel's kernels as points on it; writes a PNG."""
    preds = [p for _, ps in panels for p in ps]
    sig = [_signature(p, n) for p in preds]
    xlim = axis_limits([x for x, _ in sig], platform.mos / platform.mem_bw)
    ylim = axis_limits([y for _, y in sig], platform.mos / platform.cycles_per_s)
    lx, ly = np.meshgrid(np.linspace(*np.log10(xlim), 60), np.linspace(*np.log10(ylim), 60))
    reuse = tile_ops_per_weight_tile(n)
    # The surface is drawn in the plane of the scaled AIs, so take it at N's FLOPS per operation.
    _, flops, _ = roof_surface(platform, 10**lx / reuse, 10**ly / reuse, n)
    colors = np.array([REGION_COLORS[r] for r in REGIONS])[_regions(platform, 10**lx, 10**ly)]
    face = to_rgba_array(colors.ravel()).reshape(*colors.shape, 4)
    fig = Figure(figsize=(8, 6.5), layout="constrained")
    ax = fig.add_subplot(projection="3d")
    ax.plot_surface(lx, ly, flops / 1e12, facecolors=face, rstride=1, cstride=1, shade=False, alpha=0.45,
                    linewidth=0)
    for (title, ps), marker, color in zip(panels, "os^Dv", ("k", "#d62728", "#9467bd", "#8c564b", "#e377c2")):
        pts = [(math.log10(x), math.log10(min(y, ylim[1])), p.flops / 1e12, p.kernel)
               for p, (x, y) in ((p, _signature(p, n)) for p in ps)]
        ax.scatter(*np.array([q[:3] for q in pts]).T, color=color, marker=marker, s=18, depthshade=False,
                   label=title, zorder=10)
        for x, y, z, name in pts:
            ax.text(x, y, z, " " + name, fontsize=6, color=color, zorder=10)
    ticks = lambda lo, hi: np.arange(math.ceil(lo), math.floor(hi) + 1)  # noqa: E731
    xt, yt = ticks(*np.log10(xlim)), ticks(*np.log10(ylim))
    ax.set_xticks(xt, [f"$10^{{{t}}}$" for t in xt])
    ax.set_yticks(yt, [f"$10^{{{t}}}$" for t in yt])
    ax.set(xlabel=r"$AI_{XM}$ (tile ops / byte)", ylabel=r"$AI_{XV}$ (tile ops / vOp)", zlabel="TFLOPS (FMA/s)",
           title=f"Roof-Surface, {platform.describe()}, N = {n}")
    ax.legend(loc="upper left", fontsize=8)
    ax.view_init(elev=22, azim=-60)
    fig.savefig(path, dpi=130)
    return path


def plot_dse(points, path, chosen=None, title=""):
    """Predicted TFLOPS of every kernel on every (W, L) design; hollow markers are VEC-bound."""
    labels = [f"{p.W}/{p.L}" for p in points]
    kernels = [q.kernel for q in points[0].predictions]
    tflops = np.array([p.flops for p in points]) / 1e12
    vec = np.array([[q.bound == "VEC" for q in p.predictions] for p in points])
    fig = Figure(figsize=(max(8, 0.45 * len(points) + 3), 5.5), layout="constrained")
    ax = fig.subplots()
    x = np.arange(len(points))
    for j, name in enumerate(kernels):
        line, = ax.plot(x, tflops[:, j], "-", lw=1, label=name, color=colormaps["tab20"](j % 20))
        ax.plot(x[~vec[:, j]], tflops[~vec[:, j], j], "o", color=line.get_color(), ms=4)
        ax.plot(x[vec[:, j]], tflops[vec[:, j], j], "o", mfc="none", color=line.get_color(), ms=5)
    if chosen is not None:
        i = next(i for i, p in enumerate(points) if (p.W, p.L) == (chosen.W, chosen.L))
        ax.axvspan(i - 0.4, i + 0.4, color="0.85", zorder=0)
        ax.annotate("chosen", (i, ax.get_ylim()[1]), ha="center", va="top", fontsize=8)
    ax.set_xticks(x, labels, rotation=60, fontsize=8)
    ax.set(xlabel="design W/L", ylabel="predicted TFLOPS (FMA/s)",
           title=title + " (hollow: VEC-bound)")
    ax.legend(fontsize=7, ncol=2, loc="upper left")
    ax.grid(alpha=0.3)
    fig.savefig(path, dpi=130)
    return path


def plot_llm_split(rows, parts, part_names, system_names, path, title):
    """Stacked bars of the next-token time split into ``parts`` (rows of ``llm.evaluate``), one
    bar per system, grouped by batch size N; writes a PNG."""
    batches = list(dict.fromkeys(r["N"] for r in rows))
    systems = list(dict.fromkeys(r["system"] for r in rows))
    fig = Figure(figsize=(max(6, 1.1 * len(rows) + 2), 5), layout="constrained")
    ax = fig.subplots()
    width = 0.8 / len(systems)
    for i, n in enumerate(batches):
        for j, s in enumerate(systems):
            r = next(r for r in rows if r["N"] == n and r["system"] == s)
            x, bottom = i + (j - (len(systems) - 1) / 2) * width, 0.0
            for k, p in enumerate(parts):
                ax.bar(x, r[f"{p}_ms"], width * 0.9, bottom=bottom, color=colormaps["tab10"](k),
                       label=part_names[p] if i == 0 and j == 0 else None)
                bottom += r[f"{p}_ms"]
            ax.annotate(system_names[s], (x, bottom), ha="center", va="bottom", fontsize=7, rotation=90)
    ax.set_xticks(range(len(batches)), [f"N = {n}" for n in batches])
    ax.set(ylabel="next-token time (ms)", title=title)
    ax.margins(y=0.15)
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    fig.savefig(path, dpi=130)
    return path


def plot_llm_batch(rows, system_names, path, title, knee=None):
    """Latency and tokens per second against the batch size N (paper, Fig. 17), one line per system;
    ``knee``: the N to mark. Writes a PNG."""
    fig = Figure(figsize=(11, 4.5), layout="constrained")
    lat_ax, tps_ax = fig.subplots(1, 2)
    for k, s in enumerate(dict.fromkeys(r["system"] for r in rows)):
        mine = [r for r in rows if r["system"] == s]
        n = [r["N"] for r in mine]
        style = dict(color=colormaps["tab10"](k), ls=("-", "--", "-.", ":")[k % 4], marker="os^D"[k % 4], label=system_names[s])
        lat_ax.plot(n, [r["latency_ms"] for r in mine], **style)
        tps_ax.plot(n, [r["tokens_per_s"] for r in mine], **style)
    for ax, ylabel in ((lat_ax, "next-token latency (ms)"), (tps_ax, "tokens per second")):
        if knee is not None:
            ax.axvline(knee, color="0.5", ls="--", lw=1)
        ax.set(xscale="log", xlabel="batch size N", ylabel=ylabel)
        ax.set_xticks(sorted({r["N"] for r in rows}), [str(n) for n in sorted({r["N"] for r in rows})])
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    tps_ax.set_yscale("log")
    fig.suptitle(title + ("" if knee is None else f" (dashed: knee at N = {knee})"), fontsize=10)
    fig.savefig(path, dpi=130)
    return path
