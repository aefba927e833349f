"""Synthesis results for people: console text, CSV/JSON files and PNG plots (headless matplotlib)."""

import csv
import json
import math

import numpy as np
from matplotlib import colormaps
from matplotlib.colors import LogNorm
from matplotlib.figure import Figure

from deca.golden.summary import format_table

from .blocks import BLOCK_NAMES, PAPER_POINT, PAPER_SPLIT, paper_group
from .flow import FF_CELL, FPGA_TARGET_MHZ

FLOW_NOTE = ("Yosys, generic CMOS: NAND/NOR/NOT gates (abc -g cmos2) and D flip-flops, transistors from "
             "stat -tech cmos; depth = gates on the longest combinational path")

BLOCK_COLUMNS = {
    "block": ("block", "{}"),
    "transistors": ("transistors", "{:,}"),
    "share": ("share", "{:.1%}"),
    "cells": ("cells", "{:,}"),
    "flip_flops": ("flip-flops", "{:,}"),
    "memory_bits": ("memory bits", "{:,}"),
    "depth": ("depth", "{}"),
    "types": ("cells by type", "{}"),
}


def _types(cells):
    return ", ".join(f"{'DFF' if t == FF_CELL else t.strip('$_')} {n:,}" for t, n in sorted(cells.items()))


def _block_row(name, stats, whole):
    return {"block": name, "transistors": stats.transistors, "share": stats.transistors / whole,
            "cells": stats.num_cells, "flip_flops": stats.flip_flops, "memory_bits": stats.memory_bits,
            "depth": stats.depth, "types": _types(stats.cells)}


def paper_split(result):
    """Share of the transistors in each group of the paper's three-way split (section 7.4)."""
    shares = dict.fromkeys(PAPER_SPLIT, 0.0)
    for name, stats in result.blocks.items():
        shares[paper_group(name)] += stats.transistors / result.total.transistors
    return shares


def _split_text(shares):
    return " / ".join(f"{group} {share:.0%}" for group, share in shares.items())


def format_result(result):
    """The console report of one design: per-block table, the paper's split, the FPGA estimate."""
    where = f"{result.design}, W={result.W}, L={result.L}" if result.W is not None else "from file"
    whole = result.total.transistors
    rows = [_block_row(name, result.blocks[name], whole) for name in BLOCK_NAMES if name in result.blocks]
    rows.append(_block_row("whole design", result.total, whole))
    lines = [f"{result.top} ({where}): Yosys run {result.seconds:.1f} s", FLOW_NOTE, "",
             format_table(rows, BLOCK_COLUMNS), "",
             f"paper, W={PAPER_POINT[0]} L={PAPER_POINT[1]} (section 7.4): {_split_text(PAPER_SPLIT)}",
             f"this design:                       {_split_text(paper_split(result))}"]
    if "loaders and queues" not in result.blocks:
        lines.append("  (no loaders, queues or TOut in this design: the paper's 55% group has nothing to count)")
    if result.fpga:
        lines += ["", format_fpga(result.fpga)]
    return "\n".join(lines)


#: FpgaStats fields as the report names them.
FPGA_FIELD_NAMES = {"luts": "LUT4/carry cells", "ffs": "FFs", "lutram": "LUT-RAM write ports", "bram": "DP16KD",
                    "dsp": "MULT18X18D"}


def format_fpga(f):
    """The FPGA line: each resource used of the device's, then fmax or why there is none."""
    def use(field, name):
        used, available = getattr(f, field), f.available[field]
        return f"{used:,} {name} of {available:,} ({used / available:.0%})" if available else f"{used:,} {name}"

    resources = ", ".join(use(field, name) for field, name in FPGA_FIELD_NAMES.items())
    if f.fits:
        verdict = f"fmax {f.fmax_mhz:.1f} MHz (target {FPGA_TARGET_MHZ} MHz)"
    else:
        verdict = "does not fit, so not placed: needs " + ", ".join(
            f"{used / available:.0%} of the {FPGA_FIELD_NAMES[field]}" for field, (used, available) in f.over().items())
    return f"FPGA, {f.device}, nextpnr out of context ({f.seconds:.0f} s): {resources}; {verdict}"


SWEEP_COLUMNS = {
    "W": ("W", "{}"), "L": ("L", "{}"),
    "transistors": ("transistors", "{:,}"), "flip_flops": ("flip-flops", "{:,}"),
    "memory_bits": ("memory bits", "{:,}"), "depth": ("depth", "{}"),
    "tflops": ("pred. TFLOPS", lambda x: "-" if x is None else f"{x:.2f}"),
    "tflops_per_mtr": ("TFLOPS/Mtr", lambda x: "-" if x is None else f"{x:.3f}"),
    "measured_tflops": ("meas. TFLOPS", lambda x: "-" if x is None else f"{x:.2f}"),
    "fmax": ("FPGA MHz", lambda x: "-" if x is None else f"{x:.1f}"),
}


def _design(wl):
    return f"{{W={wl[0]}, L={wl[1]}}}"


def sweep_rows(results, dse=None):
    """One flat dict per design: the CSV row and the console table row."""
    by_design = {(r["W"], r["L"]): r for r in dse.rows()} if dse else {}
    rows = []
    for r in results:
        d = by_design.get((r.W, r.L), {})
        row = {"W": r.W, "L": r.L, "design": r.design, "top": r.top, "transistors": r.total.transistors,
               "cells": r.total.num_cells, "flip_flops": r.total.flip_flops, "memory_bits": r.total.memory_bits,
               "depth": r.total.depth, "seconds": r.seconds,
               **{f"transistors {b}": r.blocks[b].transistors if b in r.blocks else None for b in BLOCK_NAMES},
               **{f"depth {b}": r.blocks[b].depth if b in r.blocks else None for b in BLOCK_NAMES},
               "tflops": d.get("tflops"), "tflops_per_mtr": d.get("tflops_per_mtr"),
               "measured_tflops": d.get("measured_tflops"),
               "fmax": r.fpga.fmax_mhz if r.fpga else None}
        if r.fpga:
            row |= {f"fpga {k}": v for k, v in vars(r.fpga).items() if k != "available"}
        rows.append(row)
    return rows


def format_sweep(results, dse=None):
    rows = sweep_rows(results, dse)
    # Leave out what this sweep did not produce (measurements, FPGA runs).
    columns = {k: v for k, v in SWEEP_COLUMNS.items() if any(row[k] is not None for row in rows)}
    lines = [format_table(rows, columns)]
    if dse:
        lines += ["", f"Roof-Surface on {dse.platform}, N = {dse.n}, geomean over the paper's Table 2 kernels; "
                      "cost = synthesized transistors",
                  "Roof-Surface's choice (fewest LUTs, then smallest W, no kernel VEC-bound): "
                  + (_design((dse.chosen.W, dse.chosen.L)) if dse.chosen
                     else "none: every design leaves a kernel VEC-bound"),
                  f"highest predicted throughput per area: {_design((dse.best.W, dse.best.L))} "
                  f"({dse.best.geomean_flops / 1e12:.2f} TFLOPS, {dse.best.cost:,} transistors)"]
        if dse.best_measured:
            lines.append(f"highest measured throughput per area: {_design(dse.best_measured)}")
    return "\n".join(lines)


def write_csv(results, dse, path):
    rows = sweep_rows(results, dse)
    fields = list(dict.fromkeys(k for row in rows for k in row))
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)
    return path


def write_json(results, dse, path):
    doc = {"flow": FLOW_NOTE, "results": [r.to_dict() for r in results]}
    if dse:
        doc["dse"] = {"platform": dse.platform, "n": dse.n, "rows": dse.rows(),
                      "roof_surface_choice": [dse.chosen.W, dse.chosen.L] if dse.chosen else None,
                      "best_throughput_per_area": [dse.best.W, dse.best.L],
                      "best_measured_throughput_per_area": dse.best_measured}
    path.write_text(json.dumps(doc, indent=1))
    return path


# Plots --------------------------------------------------------------------------------------------


def _grid(results, value):
    Ws = sorted({r.W for r in results})
    Ls = sorted({r.L for r in results})
    grid = np.full((len(Ws), len(Ls)), np.nan)
    for r in results:
        grid[Ws.index(r.W), Ls.index(r.L)] = value(r)
    return Ws, Ls, grid


def _heatmap(fig, ax, results, value, title, fmt, norm=None):
    Ws, Ls, grid = _grid(results, value)
    im = ax.imshow(np.ma.masked_invalid(grid), origin="lower", cmap="viridis", norm=norm, aspect="auto")
    for i in range(len(Ws)):
        for j in range(len(Ls)):
            if not math.isnan(grid[i, j]):
                # Dark text on the light end of viridis, light text on the dark end.
                color = "black" if im.norm(grid[i, j]) > 0.6 else "white"
                ax.text(j, i, fmt(grid[i, j]), ha="center", va="center", fontsize=8, color=color)
    ax.set_xticks(range(len(Ls)), Ls)
    ax.set_yticks(range(len(Ws)), Ws)
    ax.set(xlabel="L (big LUTs)", ylabel="W (elements per vOp)", title=title)
    fig.colorbar(im, ax=ax, shrink=0.8)


def plot_heatmaps(results, path):
    """Transistors and logic depth over W x L (empty cells: not synthesized, e.g. L > W)."""
    fig = Figure(figsize=(11, 4.5), layout="constrained")
    a, b = fig.subplots(1, 2)
    transistors = [r.total.transistors for r in results]
    norm = LogNorm(min(transistors), max(transistors)) if min(transistors) < max(transistors) else None
    _heatmap(fig, a, results, lambda r: r.total.transistors, "estimated transistors",
             lambda v: f"{v / 1e6:.2f}M", norm)
    _heatmap(fig, b, results, lambda r: r.total.depth, "logic depth (gates)", lambda v: f"{v:.0f}")
    fig.suptitle(f"{results[0].design}: Yosys generic CMOS synthesis")
    fig.savefig(path, dpi=130)
    return path


def plot_breakdown(result, path):
    """The design's area by block and in the paper's three groups, beside the paper's split."""
    fig = Figure(figsize=(9, 3.8), layout="constrained")
    ax = fig.subplots()
    groups = list(PAPER_SPLIT)
    colors = dict(zip(groups, ("#80b1d3", "#fdb462", "#b3de69")))
    bars = [(f"paper (7.4), W={PAPER_POINT[0]} L={PAPER_POINT[1]}", [(g, PAPER_SPLIT[g], colors[g]) for g in groups]),
            (f"{result.top}, grouped", [(g, s, colors[g]) for g, s in paper_split(result).items()]),
            (f"{result.top}, by block",
             [(name, result.blocks[name].transistors / result.total.transistors, colormaps["tab10"](i))
              for i, name in enumerate(BLOCK_NAMES) if name in result.blocks])]
    for y, (_, parts) in enumerate(bars):
        left = 0.0
        for name, share, color in parts:
            # Row 0 names the paper's groups, row 2 the blocks; row 1 repeats row 0's colours.
            ax.barh(y, share, left=left, color=color, edgecolor="white",
                    label={0: f"{name} (group)", 2: name}.get(y))
            if share >= 0.04:
                ax.text(left + share / 2, y, f"{share:.0%}", ha="center", va="center", fontsize=8)
            left += share
    ax.set_yticks(range(len(bars)), [label for label, _ in bars])
    ax.set_xlim(0, 1)
    ax.set(xlabel="share of area (synthesized: estimated transistors)",
           title=f"area split of {result.top} beside the paper's (section 7.4)")
    ax.legend(fontsize=7, ncol=3, loc="upper center", bbox_to_anchor=(0.5, -0.25))
    fig.savefig(path, dpi=130)
    return path


def plot_throughput_per_area(dse, path):
    """Predicted (and measured) geomean TFLOPS per million transistors of every design."""
    rows = dse.rows()
    x = np.arange(len(rows))
    fig = Figure(figsize=(max(7, 0.5 * len(rows) + 3), 4.5), layout="constrained")
    ax = fig.subplots()
    ax.bar(x, [r["tflops_per_mtr"] for r in rows], color="#80b1d3", label="Roof-Surface prediction")
    measured = [(i, r["measured_per_mtr"]) for i, r in enumerate(rows) if r["measured_per_mtr"] is not None]
    if measured:
        ax.plot(*zip(*measured), "D", color="black", label="measured (deca sweep)")
    labels = {}
    if dse.chosen is not None:
        labels[dse.chosen.W, dse.chosen.L] = "Roof-Surface choice"
    best = (dse.best.W, dse.best.L)
    labels[best] = labels[best] + "\n= best per area" if best in labels else "best per area"
    for i, r in enumerate(rows):
        if (r["W"], r["L"]) in labels:
            # The best-per-area label sits higher, so that it clears a neighbouring choice label.
            rise = 12 if (r["W"], r["L"]) != best or len(labels) == 1 else 26
            ax.annotate(labels[r["W"], r["L"]], (i, r["tflops_per_mtr"]), xytext=(0, rise), textcoords="offset points",
                        ha="center", fontsize=8, arrowprops={"arrowstyle": "->"})
    title = f"throughput per area, {dse.platform}, N = {dse.n}"
    if dse.chosen is None:
        title += "\n(Roof-Surface choice: none, every design leaves a kernel VEC-bound)"
    ax.set_xticks(x, [f"{r['W']}/{r['L']}" for r in rows], rotation=60, fontsize=8)
    ax.set(xlabel="design W/L", ylabel="geomean TFLOPS per million transistors", title=title)
    ax.margins(y=0.2)
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    fig.savefig(path, dpi=130)
    return path
