"""Synthesis results for people: console text, CSV/JSON files and PNG plots (headless matplotlib)."""

import csv
import json
import math

import numpy as np
from matplotlib import colormaps
from matplotlib.colors import LogNorm
from matplotlib.figure import Figure

from deca.golden.summary import format_table
from deca.hw.params import LOADERS

from .blocks import (BLOCK_NAMES, PAPER_AREA_MM2, PAPER_GHZ, PAPER_PES, PAPER_POINT, PAPER_POWER_SPLIT,
                     PAPER_POWER_W, PAPER_SPLIT, paper_group)
from .cells import PERIOD_PS
from .fpga import FPGA_TARGET_MHZ
from .sta import DEFAULT_DUTY
from .stats import FF_CELL

FLOW_NOTE = ("Yosys, generic CMOS: NAND/NOR/NOT gates (abc -g cmos2) and D flip-flops, transistors from "
             "stat -tech cmos; depth = gates on the longest combinational path")

CELLS_NOTE = ("Yosys to liberty standard cells (dfflibmap, abc -liberty), memories of at least the macro rule's "
              "size as SRAM macros of a FakeRAM-calibrated model; area from stat -liberty and the model, timing and "
              "power from deca.synth.sta")

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


def _size(stats, result):
    return stats.area if result.tech != "generic" else stats.transistors


def paper_split(result, value=None):
    """Share of the area (or of ``value(stats)``) in each group of the paper's three-way split
    (section 7.4)."""
    value = value or (lambda stats: _size(stats, result))
    shares = dict.fromkeys(PAPER_SPLIT, 0.0)
    for name, stats in result.blocks.items():
        shares[paper_group(name)] += value(stats) / value(result.total)
    return shares


def _split_text(shares):
    return " / ".join(f"{group} {share:.0%}" for group, share in shares.items())


def _where(result):
    """What was synthesized: the design and its parameters, or a user's file."""
    if result.W is None:
        return "from file"
    return f"{result.design}, W={result.W}, L={result.L}, {result.loaders} loaders"


def format_result(result):
    """The console report of one design: per-block table, the paper's split, the FPGA estimate."""
    if result.tech != "generic":
        return format_cells(result)
    where = _where(result)
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


# Standard cells -----------------------------------------------------------------------------------

CELL_COLUMNS = {
    "block": ("block", "{}"),
    "area": ("area µm²", "{:,.0f}"),
    "share": ("% of PE", "{:.1%}"),
    "paper": ("paper group (its share)", "{}"),
    "macro_area": ("of it SRAM µm²", "{:,.0f}"),
    "macros": ("macros", "{}"),
    "buffer_area": ("tree buffers µm²", "{:,.1f}"),
    "flip_flops": ("flip-flops", "{:,}"),
    "cells": ("cells", "{:,}"),
    "path_ps": ("crit. path ps", "{:.0f}"),
    "power": ("power mW", "{:.2f}"),
    "leakage": ("of it leakage", "{:.2f}"),
}
#: With a simulation's activity, its dynamic power beside the vectorless one.
ACTIVITY_COLUMNS = {**CELL_COLUMNS, "dynamic": ("of it dynamic", "{:.2f}"),
                    "vectorless": ("dynamic, vectorless", "{:.2f}")}


def _columns(result):
    return ACTIVITY_COLUMNS if "workload" in result.power else CELL_COLUMNS


def _cell_row(name, stats, whole, group):
    return {"block": name, "area": stats.area, "share": stats.area / whole.area, "paper": group,
            "macro_area": stats.macro_area, "macros": stats.macros, "buffer_area": stats.buffer_area,
            "flip_flops": stats.flip_flops,
            "cells": stats.num_cells, "path_ps": stats.path_ps, "power": stats.power_mw, "leakage": stats.leakage_mw,
            "dynamic": stats.dynamic_mw, "vectorless": stats.vectorless_dynamic_mw}


def _groups_text(shares, paper):
    return ", ".join(f"{group} {shares[group]:.0%} (paper {paper[group]:.0%})" for group in paper)


#: Cells of the critical path listed at each end; the middle is summarized.
PATH_ENDS = 5


def _step(s):
    net = f"  -> {s['net']}" if s.get("net") else ""  # reports cached before nets were named have none
    return f"{s['cell']:<28} {s['delay_ps']:7.1f} ps  at {s['arrival_ps']:7.1f}  {s['block']}: {s['module']}{net}"


def cells_lines(result, whole_path=False):
    """The standard-cell report as lines of text: blocks, paper comparisons, path (its ends only
    unless ``whole_path``), power, macros."""
    t, total, model = result.timing, result.total, result.macro_model
    where = _where(result)
    pe_mm2 = total.area * PAPER_PES / 1e6
    path, n = t["path"], len(t["path"])
    shown = path if whole_path or n <= 2 * PATH_ENDS else path[:PATH_ENDS] + [None] + path[-PATH_ENDS:]
    power_mw = total.power_mw
    lines = [f"{result.top} ({where}): {result.tech}, standard cells and SRAM macros; Yosys {result.seconds:.0f} s",
             "", format_table(_cell_rows(result), _columns(result)), "",
             f"area by the paper's groups (section 7.4): {_groups_text(paper_split(result), PAPER_SPLIT)}",
             f"{PAPER_PES} PEs: {total.area:,.0f} µm² x {PAPER_PES} = {pe_mm2:.2f} mm² "
             f"(paper: {PAPER_AREA_MM2} mm², "
             f"{pe_mm2 / PAPER_AREA_MM2:.2f}x)",
             f"critical path (register to register, setup included): {t['critical_ps']:.0f} ps; input to register "
             f"or register to output (half a period each): {t['io_ps']:.0f} ps -> period {t['period_ps']:.0f} ps, "
             f"fmax {t['fmax_ghz']:.2f} GHz ({t['limit']} bound; paper: {PAPER_GHZ} GHz); input to output, "
             f"combinational (not in the period): {t['through_ps']:.0f} ps",
             "  by block: " + ", ".join(f"{b} {ps:.0f} ps ({ps / t['critical_ps']:.0%})"
                                        for b, ps in sorted(t["per_block_ps"].items(), key=lambda x: -x[1])),
             f"  start {path[0]['cell']} in {path[0]['block']} ({path[0]['module']}), "
             f"end {path[-1]['cell']} in {path[-1]['block']} ({path[-1]['module']}); {n} cells:"]
    lines += ["    " + (_step(s) if s else f"... {n - 2 * PATH_ENDS} cells ...") for s in shown]
    lines.append("  worst path into each module, slowest first: "
                 + ", ".join(f"{m} {ps:,.0f} ps" for m, ps in t["worst_ends"]))
    io = t["io_path"]
    if io:
        lines.append(f"  longest input/output path: {len(io)} steps from {io[0]['cell']} {io[0]['net']} ({io[0]['block']}, "
                     f"{io[0]['module']}) to {io[-1]['cell']} ({io[-1]['block']}, {io[-1]['module']}); by block: "
                     + ", ".join(f"{b} {ps:.0f} ps" for b, ps in _by_block(io)))
    lines += signoff_lines(result)
    lines += [f"power at {result.power['frequency_ghz']} GHz: {power_mw:.1f} mW = leakage {total.leakage_mw:.1f} + "
              f"dynamic {total.dynamic_mw:.1f} (activity: {result.power['activity']}); "
              f"paper: {PAPER_POWER_W * 1e3 / PAPER_PES:.0f} mW per PE ({PAPER_POWER_W} W / {PAPER_PES}), "
              f"{power_mw / (PAPER_POWER_W * 1e3 / PAPER_PES):.2f}x",
              "  by the paper's groups: " + _groups_text(paper_split(result, lambda s: s.power_mw), PAPER_POWER_SPLIT)]
    lines += gating_lines(result)
    if "workload" in result.power:
        vectorless = total.leakage_mw + total.vectorless_dynamic_mw
        lines += [f"  activity: {result.power['workload']}, {result.power['cycles']:,.0f} cycles traced; "
                  f"{result.power['named_nets']:.0%} of the driven nets by their own simulated toggles (RTL signals, "
                  "memory rows, across inverters and buffers), the others at their module's average toggle rate "
                  "per traced bit",
                  f"  {result.power['vectorless']}: {vectorless:.1f} mW = leakage "
                  f"{total.leakage_mw:.1f} + dynamic {total.vectorless_dynamic_mw:.1f}; by the paper's groups: "
                  + _groups_text(paper_split(result, lambda s: s.leakage_mw + s.vectorless_dynamic_mw),
                                 PAPER_POWER_SPLIT)]
    return lines + estimate_lines(result) + workload_lines(result) + memory_lines(result)


def estimate_lines(result):
    """How much of each workload's dynamic power comes from an estimated activity rather than the
    simulation's: nets at their module's average toggle rate, clocks behind gates whose enable's duty
    the trace does not give, at the default duty."""
    lines = []
    for w in result.power.get("workloads", ()):
        if "estimated_mw" not in w:
            continue   # a result cached before the estimate was counted
        est = w["estimated_mw"]
        nets, gates = sum(e[0] for e in est.values()), sum(e[1] for e in est.values())
        share = (nets + gates) / w["dynamic_mw"] if w["dynamic_mw"] else 0.0
        blocks = ", ".join(f"{b} {n + g:.1f} ({k:,} gates)" for b, (n, g, k) in
                           sorted(est.items(), key=lambda x: -x[1][0] - x[1][1]))
        lines.append(f"  estimated, not simulated ({w['workload']}): {nets + gates:.1f} of {w['dynamic_mw']:.1f} mW "
                     f"dynamic ({share:.0%}): nets at their module's average toggle rate {nets:.1f} mW, clocks "
                     f"behind the {sum(e[2] for e in est.values()):,} gates whose enable the trace does not give, "
                     f"at duty {DEFAULT_DUTY}, {gates:.1f} mW; by block, mW: {blocks}")
    return lines


def gating_lines(result):
    """The clock gating: gates, the flip-flops they clock, where their enables' duty comes from."""
    p = result.power
    if "clock_gates" not in p:
        return []
    if not p["gate_min_flops"]:
        return ["  clock gating: off"]
    traced = p.get("enables_traced")
    duty = (f"; enable duty from the trace for {min(traced)} to {max(traced)} of the gates, the others "
            f"at {DEFAULT_DUTY}" if traced else f"; enable duty {DEFAULT_DUTY} (vectorless)")
    lines = [f"  clock gating: {p['clock_gates']:,} gates (at least {p['gate_min_flops']} flip-flops each) clock "
             f"{p['gated_flops']:,} of the {result.total.flip_flops:,} flip-flops{duty}"]
    rounds = p.get("late_rounds")
    if rounds:
        still = f"; {rounds[-1]:,} gates still late after {len(rounds)} mappings" if rounds[-1] else ""
        lines.append(f"  clock gates dropped for timing (enable later than the gate's check in the "
                     f"{PERIOD_PS:g} ps period): {p['gates_dropped']:,} gates, {p['flops_ungated']:,} flip-flops "
                     f"left with their enable multiplexers; gates late in each mapping: "
                     f"{', '.join(f'{n:,}' for n in rounds)}{still}")
    return lines


def workload_power_rows(result):
    """Power per block (mW, leakage and dynamic) of each simulated workload, their maximum per block
    and the vectorless figure: one dict per row, blocks by name and "whole design"."""
    blocks = [name for name in BLOCK_NAMES if name in result.blocks]

    def row(label, mw):
        return {"activity": label, **{b: mw.get(b, 0.0) for b in blocks}, "whole design": sum(mw.values())}

    rows = [row(w["workload"], w["blocks_mw"]) for w in result.power.get("workloads", ())]
    highest = {b: max(r[b] for r in rows) for b in [*blocks, "whole design"]}
    vectorless = {b: result.blocks[b].leakage_mw + result.blocks[b].vectorless_dynamic_mw for b in blocks}
    return rows + [{"activity": "maximum per block", **highest}, row(result.power["vectorless"], vectorless)]


def workload_lines(result):
    """The power of each workload beside their maximum and the vectorless figure (several workloads)."""
    if len(result.power.get("workloads", ())) < 2:
        return []
    rows = workload_power_rows(result)
    columns = {k: (k, "{}" if k == "activity" else "{:.2f}") for k in rows[0]}
    return [f"power per block and workload at {result.power['frequency_ghz']} GHz (mW, leakage and dynamic); the "
            "table above: the highest workload", format_table(rows, columns)]


def signoff_lines(result):
    """OpenSTA's worst paths beside deca.synth.sta's, as path delays (each from its group's slack)."""
    s, t = result.signoff, result.timing
    if not s:
        return []
    clk, path = s["groups"][s["clock"]], t["path"]
    return [f"OpenSTA {s['version']} signoff (netlist.v with the buffer trees above, signoff.sdc, macros.lib; "
            f"{s['seconds']:.0f} s, {s['warnings']} warnings): WNS {s['wns_ps']:.1f} ps, TNS {s['tns_ps']:,.1f} ps",
            f"  register to register: {s['critical_ps']:.1f} ps (slack {clk['slack_ps']:.1f} ps, data arrival "
            f"{clk['arrival_ps']:.1f} ps) from {clk['start']} to {clk['end']}; ours {t['critical_ps']:.1f} ps from "
            f"{path[0]['net']} to {path[-1]['net']}: OpenSTA {s['critical_diff']:+.2%}",
            f"  input to register or register to output: {s['io_ps']:.1f} ps (ours {t['io_ps']:.1f}); input to "
            f"output: {s['through_ps']:.1f} ps (ours {t['through_ps']:.1f}); period {s['period_ps']:.1f} ps (ours "
            f"{t['period_ps']:.1f}): OpenSTA {s['period_diff']:+.2%}"]


def memory_lines(result):
    """The macro model and the memory table: every memory, its ports, the storage chosen and why."""
    model = result.macro_model
    fits = "; ".join(f"{kind}: {fixed:.1f} + bits x {per_bit:.5f} + words x {per_word:.4f} µm²"
                     for kind, (fixed, per_bit, per_word) in sorted(model["kinds"].items()))
    lines = [f"SRAM macro model (fit on {', '.join(c[0] for c in model['calibration'])}): {fits}; "
             f"access {model['access_ps']:.0f} ps, setup {model['setup_ps']:.0f} ps, "
             f"{model['leakage_uw']:.1f} µW leakage, {model['energy_fj']:.0f} fJ per access"]
    if result.memories:
        lines += ["memories (cells: flip-flops and read muxes measured alone; area and access per instance):",
                  format_table(memory_rows(result), MEMORY_COLUMNS)]
    return lines


def memory_rows(result):
    return [{"memory": f"{m['module'].removeprefix(result.top + '.')}.{m['name']}",
             "shape": f"{m['words']} x {m['width']}", "ports": m["ports"], "instances": m["instances"],
             "kind": m["kind"] if m["copies"] == 1 else f"{m['kind']} x {m['copies']}", "area": m["area"],
             "access_ps": m["access_ps"], "cells_area": m["cells_area"], "macro_area": m["macro_area"],
             "reason": m["reason"]} for m in result.memories]



def _by_block(path):
    """(block, ps) of a path's steps, largest first."""
    shares = {}
    for step in path:
        shares[step["block"]] = shares.get(step["block"], 0.0) + step["delay_ps"]
    return sorted(shares.items(), key=lambda x: -x[1])


def format_cells(result):
    return "\n".join(cells_lines(result))


def _cell_rows(result):
    total = result.total
    rows = [_cell_row(name, result.blocks[name], total, f"{paper_group(name)} ({PAPER_SPLIT[paper_group(name)]:.0%})")
            for name in BLOCK_NAMES if name in result.blocks]
    return rows + [_cell_row("whole design", total, total, "")]


def format_markdown(result):
    """The standard-cell report as Markdown: the block table, then the rest as a list, with every
    cell of the critical path."""
    lines = cells_lines(result, whole_path=True)
    columns = _columns(result)
    heads = [h for h, _ in columns.values()]
    body = ["| " + " | ".join(fmt(row[k]) if callable(fmt) else fmt.format(row[k])
                              for k, (_, fmt) in columns.items()) + " |" for row in _cell_rows(result)]
    # lines: title, blank, the text table, blank, then one line per fact (indented: the path's cells).
    rest = [f"    - `{line.strip()}`" if line.startswith("    ") else f"- {line.strip()}" for line in lines[4:]]
    return "\n".join([f"## {lines[0]}", "", "| " + " | ".join(heads) + " |", "|" + "---|" * len(heads), *body, "",
                      *rest]) + "\n"


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


def _opt(fmt):
    return lambda x: "-" if x is None else fmt.format(x)


MEMORY_COLUMNS = {"memory": ("memory", "{}"), "shape": ("words x bits", "{}"), "ports": ("ports", "{}"),
                  "instances": ("instances", "{}"), "kind": ("kind", "{}"), "area": ("area µm²", "{:,.0f}"),
                  "access_ps": ("access ps", "{:.0f}"), "cells_area": ("cells µm²", "{:,.0f}"),
                  "macro_area": ("macro µm²", _opt("{:,.0f}")), "reason": ("why", "{}")}


SWEEP_COLUMNS = {
    "W": ("W", "{}"), "L": ("L", "{}"), "loaders": ("loaders", "{}"),
    "area_um2": ("area µm²", _opt("{:,.0f}")), "critical_ps": ("crit. path ps", _opt("{:.0f}")),
    "fmax_ghz": ("fmax GHz", _opt("{:.2f}")), "signoff_ps": ("OpenSTA ps", _opt("{:.0f}")),
    "signoff_diff": ("OpenSTA - ours", _opt("{:+.1%}")), "power_mw": ("power mW", _opt("{:.1f}")),
    "macros": ("macros", _opt("{}")),
    "transistors": ("transistors", _opt("{:,}")), "flip_flops": ("flip-flops", "{:,}"),
    "memory_bits": ("memory bits", "{:,}"), "depth": ("depth", _opt("{}")),
    "tflops": ("pred. TFLOPS", _opt("{:.2f}")),
    "tflops_per_area": ("TFLOPS/area", _opt("{:.3f}")),
    "measured_tflops": ("meas. TFLOPS", _opt("{:.2f}")),
    "fmax": ("FPGA MHz", _opt("{:.1f}")),
}


def _design(design):
    W, L, loaders = design
    return f"{{W={W}, L={L}, {loaders} loaders}}"


def sweep_rows(results, dse=None):
    """One flat dict per design: the CSV row and the console table row."""
    by_design = {(r["W"], r["L"], r["loaders"]): r for r in dse.rows()} if dse else {}
    rows = []
    for r in results:
        d = by_design.get((r.W, r.L, r.loaders), {})
        cells = r.tech != "generic"
        row = {"W": r.W, "L": r.L, "loaders": r.loaders, "design": r.design, "top": r.top, "tech": r.tech,
               "area_um2": r.total.area, "critical_ps": r.timing["critical_ps"] if cells else None,
               "fmax_ghz": r.timing["fmax_ghz"] if cells else None,
               "signoff_ps": r.signoff["critical_ps"] if r.signoff else None,
               "signoff_diff": r.signoff["critical_diff"] if r.signoff else None, "power_mw": r.total.power_mw,
               "leakage_mw": r.total.leakage_mw, "macros": r.total.macros if cells else None,
               "transistors": r.total.transistors,
               "cells": r.total.num_cells, "flip_flops": r.total.flip_flops, "memory_bits": r.total.memory_bits,
               "depth": r.total.depth, "seconds": r.seconds,
               **{f"area {b}": r.blocks[b].area if b in r.blocks else None for b in BLOCK_NAMES},
               **{f"power {b}": r.blocks[b].power_mw if b in r.blocks else None for b in BLOCK_NAMES},
               **{f"transistors {b}": r.blocks[b].transistors if b in r.blocks else None for b in BLOCK_NAMES},
               **{f"depth {b}": r.blocks[b].depth if b in r.blocks else None for b in BLOCK_NAMES},
               "tflops": d.get("tflops"), "tflops_per_area": d.get("tflops_per_area"),
               "measured_tflops": d.get("measured_tflops"),
               "fmax": r.fpga.fmax_mhz if r.fpga else None}
        if r.fpga:
            row |= {f"fpga {k}": v for k, v in vars(r.fpga).items() if k != "available"}
        rows.append(row)
    return rows


def format_sweep(results, dse=None):
    rows = sweep_rows(results, dse)
    # Leave out what this sweep did not produce (measurements, FPGA runs, the other technology's numbers).
    columns = {k: v for k, v in SWEEP_COLUMNS.items() if any(row[k] is not None for row in rows)}
    if dse:
        columns["tflops_per_area"] = (f"TFLOPS/{dse.per_area}", columns["tflops_per_area"][1])
    lines = [format_table(rows, columns)]
    if dse:
        cost = f"{dse.best.cost:,.0f} {dse.unit}"
        lines += ["", f"Roof-Surface on {dse.platform}, N = {dse.n}, geomean over the paper's Table 2 kernels; "
                      f"cost = synthesized area ({dse.unit})",
                  "Roof-Surface's choice (fewest LUTs, then smallest W, no kernel VEC-bound): "
                  + (_design(dse.chosen.design) if dse.chosen
                     else "none: every design leaves a kernel VEC-bound"),
                  f"highest predicted throughput per area: {_design(dse.best.design)} "
                  f"({dse.best.geomean_flops / 1e12:.2f} TFLOPS, {cost})"]
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
    doc = {"flow": FLOW_NOTE if results[0].tech == "generic" else CELLS_NOTE, "results": [r.to_dict() for r in results]}
    if dse:
        doc["dse"] = {"platform": dse.platform, "n": dse.n, "rows": dse.rows(),
                      "roof_surface_choice": list(dse.chosen.design) if dse.chosen else None,
                      "best_throughput_per_area": list(dse.best.design),
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
    """Area and logic depth (generic) or area, fmax and power (standard cells) over W x L, one row
    per loader count (empty cells: not synthesized, e.g. L > W)."""
    cells = results[0].tech != "generic"
    counts = sorted({r.loaders for r in results})
    fig = Figure(figsize=(16 if cells else 11, 4.5 * len(counts)), layout="constrained")
    area = [r.area for r in results]
    norm = LogNorm(min(area), max(area)) if min(area) < max(area) else None
    for axes, loaders in zip(fig.subplots(len(counts), 3 if cells else 2, squeeze=False), counts):
        these = [r for r in results if r.loaders == loaders]
        of = "" if counts == [LOADERS] else f", {loaders} loaders"
        if cells:
            _heatmap(fig, axes[0], these, lambda r: r.area, f"area (µm²){of}", lambda v: f"{v / 1e3:.0f}k", norm)
            _heatmap(fig, axes[1], these, lambda r: r.timing["fmax_ghz"], f"fmax (GHz){of}", lambda v: f"{v:.2f}")
            _heatmap(fig, axes[2], these, lambda r: r.total.power_mw,
                     f"power at {results[0].power['frequency_ghz']} GHz (mW){of}", lambda v: f"{v:.0f}")
        else:
            _heatmap(fig, axes[0], these, lambda r: r.total.transistors, f"estimated transistors{of}",
                     lambda v: f"{v / 1e6:.2f}M", norm)
            _heatmap(fig, axes[1], these, lambda r: r.total.depth, f"logic depth (gates){of}", lambda v: f"{v:.0f}")
    fig.suptitle(f"{results[0].design}: {results[0].tech} standard cells and SRAM macros" if cells
                 else f"{results[0].design}: Yosys generic CMOS synthesis")
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
             [(name, _size(result.blocks[name], result) / _size(result.total, result), colormaps["tab10"](i))
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
    ax.set(xlabel="share of area (synthesized: " + ("estimated transistors)" if result.tech == "generic" else
                                                     f"{result.tech} µm², cells and SRAM macros)"),
           title=f"area split of {result.top} beside the paper's (section 7.4)")
    ax.legend(fontsize=7, ncol=3, loc="upper center", bbox_to_anchor=(0.5, -0.25))
    fig.savefig(path, dpi=130)
    return path


def plot_throughput_per_area(dse, path):
    """Predicted (and measured) geomean TFLOPS per area (mm² or million transistors) of every design."""
    rows = dse.rows()
    x = np.arange(len(rows))
    fig = Figure(figsize=(max(7, 0.5 * len(rows) + 3), 4.5), layout="constrained")
    ax = fig.subplots()
    ax.bar(x, [r["tflops_per_area"] for r in rows], color="#80b1d3", label="Roof-Surface prediction")
    measured = [(i, r["measured_per_area"]) for i, r in enumerate(rows) if r["measured_per_area"] is not None]
    if measured:
        ax.plot(*zip(*measured), "D", color="black", label="measured (deca sweep)")
    labels = {}
    if dse.chosen is not None:
        labels[dse.chosen.design] = "Roof-Surface choice"
    best = dse.best.design
    labels[best] = labels[best] + "\n= best per area" if best in labels else "best per area"
    for i, r in enumerate(rows):
        design = r["W"], r["L"], r["loaders"]
        if design in labels:
            # The best-per-area label sits higher, so that it clears a neighbouring choice label.
            rise = 12 if design != best or len(labels) == 1 else 26
            ax.annotate(labels[design], (i, r["tflops_per_area"]), xytext=(0, rise), textcoords="offset points",
                        ha="center", fontsize=8, arrowprops={"arrowstyle": "->"})
    title = f"throughput per area, {dse.platform}, N = {dse.n}"
    if dse.chosen is None:
        title += "\n(Roof-Surface choice: none, every design leaves a kernel VEC-bound)"
    # The loader counts in the labels unless every design has the paper's.
    loaders_shown = {r["loaders"] for r in rows} != {LOADERS}
    ax.set_xticks(x, [f"{r['W']}/{r['L']}" + (f"/{r['loaders']}" if loaders_shown else "") for r in rows],
                  rotation=60, fontsize=8)
    ax.set(xlabel="design W/L" + ("/loaders" if loaders_shown else ""), ylabel=f"geomean TFLOPS per {dse.per_area}",
           title=title)
    ax.margins(y=0.2)
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    fig.savefig(path, dpi=130)
    return path
