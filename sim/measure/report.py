"""Tables and the Markdown report of a measurement campaign (``deca run``, ``deca sweep``): the
measured numbers beside the analytic model, the software-only baseline, the paper's Table 4 and the
two invocation modes."""

from dataclasses import replace
from pathlib import Path

from deca.golden.summary import format_table
from deca.golden.summary import markdown_table
from deca.hw.params import LOADERS

from deca.sim.bench.system import System
from deca.sim.model.engines import SOFTWARE_CYCLES_PER_TILE, SoftwareEngine, scheme_class
from deca.sim.model.kernels import kernel
from deca.sim.model.paper import (
    DSE_BEST, DSE_BEST_OVER_UNDER, DSE_OVER, DSE_OVER_OVER_BEST_MAX, DSE_UNDER, TABLE4_DECA, TEPL_SPEEDUP_5PCT,
)
from deca.sim.model.roof import predict

from .plots import plot_bord_measured, plot_bpv, plot_cycles_grid, plot_modes, plot_utilization
from .point import platform_of
from .records import bpv_tolerance, design_of, design_rows

_pct = "{:.0%}".format
SUMMARY_COLUMNS = {
    "W": ("W", "{}"), "L": ("L", "{}"), "workload": ("workload", "{}"), "mode": ("mode", "{}"),
    "tiles": ("tiles", "{}"), "cycles_per_tile": ("cycles/tile", "{:.1f}"),
    "predicted_cycles_per_tile": ("model", "{:.1f}"), "predicted_bound": ("bound", "{}"),
    "bpv_measured": ("bpv", "{:.3f}"), "bpv_analytic": ("bpv model", "{:.3f}"),
    "starve_per_tile": ("starve/tile", "{:.1f}"), "util_mem": ("MEM", _pct), "util_tmul": ("TMUL", _pct),
    "util_deca": ("DECA", _pct), "tflops": ("TFLOPS", "{:.2f}"), "lines_prefetched": ("PF lines", "{}"),
    "prefetch_wasted_bytes": ("PF wasted B", "{}"),
}
TABLE4_COLUMNS = {
    "density": ("density", "{:.0%}"), "mem": ("MEM", "{}"), "tmul": ("TMUL", "{}"), "deca": ("DECA", "{}"),
    "cycles_per_tile": ("cycles/tile", "{:.1f}"), "gap": ("largest gap", "{:.0f} pp"),
}
DESIGN_COLUMNS = {
    "W": ("W", "{}"), "L": ("L", "{}"), "workloads": ("workloads", "{}"), "gmean": ("gmean cycles/tile", "{:.1f}"),
    "vs_best": ("speed vs W=32 L=8 (2 loaders)", "{:.3f}x"),
}
DSE_NOTE = (f"The paper (section 8.2): W = {DSE_BEST[0]}, L = {DSE_BEST[1]} is {DSE_BEST_OVER_UNDER:g}x faster than "
            f"W = {DSE_UNDER[0]}, L = {DSE_UNDER[1]}, and W = {DSE_OVER[0]}, L = {DSE_OVER[1]} less than "
            f"{100 * (DSE_OVER_OVER_BEST_MAX - 1):.0f}% faster than it.")
MODES_COLUMNS = {
    "W": ("W", "{}"), "L": ("L", "{}"), "workload": ("workload", "{}"), "tepl": ("TEPL cycles/tile", "{:.1f}"),
    "store": ("store-and-fence", "{:.1f}"), "ratio": ("TEPL speedup", "{:.2f}x"),
}

_tflops = lambda x: "-" if x is None else f"{x:.2f}"  # noqa: E731
_speedup = lambda x: "-" if x is None else f"{x:.2f}x"  # noqa: E731
SOFTWARE_COLUMNS = {
    "W": ("W", "{}"), "L": ("L", "{}"), "workload": ("workload", "{}"), "mode": ("mode", "{}"),
    "tflops": ("DECA TFLOPS", "{:.2f}"), "sw_paper": ("SW paper-derived", _tflops), "x_paper": ("DECA / it", _speedup),
    "sw_measured": ("SW measured", _tflops), "x_measured": ("DECA / it", _speedup),
}


def with_loaders(columns, records):
    """``columns`` with a loaders column after L when the records span several loader counts."""
    if len({r["loaders"] for r in records}) < 2:
        return columns
    items = list(columns.items())
    at = [key for key, _ in items].index("L") + 1
    return dict(items[:at] + [("loaders", ("loaders", "{}"))] + items[at:])


def several_designs(records):
    return len({design_of(r) for r in records}) > 1


def _design_text(row):
    """W = 32, L = 8 (and the loader count when it is not the paper's) of a row or record."""
    return f"W = {row['W']}, L = {row['L']}" + ("" if row["loaders"] == LOADERS else f", {row['loaders']} loaders")


def software_rows(records, measured=None):
    """Each record's measured TFLOPS beside the Roof-Surface TFLOPS of the software engines on the
    same platform, batch and workload: the paper-derived costs (``SoftwareEngine``) and, when given,
    those measured on this machine by ``deca baseline`` (a ``MeasuredSoftwareEngine``). None ("-")
    where an engine has no cost for the scheme. A user's matrix keeps its measured bytes per tile."""
    rows = []
    for r in records:
        system = System(**r["system"])
        platform = platform_of(system)
        kern = kernel(r["scheme"], None if r["density"] == 1 else r["density"])
        if "@" not in r["workload"]:
            kern = replace(kern, bytes_per_tile=r["bytes_per_tile"])
        paper, mine = (predict(platform, kern, engine, system.batch).flops / 1e12 if known else None
                       for engine, known in ((SoftwareEngine(), scheme_class(kern) in SOFTWARE_CYCLES_PER_TILE),
                                             (measured, measured is not None and measured.measures(kern))))
        rows.append({**{k: r[k] for k in ("W", "L", "loaders", "workload", "mode", "tflops")},
                     "sw_paper": paper, "x_paper": None if paper is None else r["tflops"] / paper,
                     "sw_measured": mine, "x_measured": None if mine is None else r["tflops"] / mine})
    return rows


def software_note(measured):
    if measured is None:
        return ("Software engine measured on this machine: none (run 'deca baseline' to measure it; "
                "'SW measured' stays empty until then).")
    return f"Software engine measured on this machine: {measured.describe()}."


def summary_rows(records):
    return [{**r, "starve_per_tile": r["starve_cycles"] / r["tiles"]} for r in records]


def bpv_outliers(records):
    """Records whose measured bpv is off the closed form by more than ``bpv_tolerance``."""
    return [r for r in records if abs(r["bpv_measured"] - r["bpv_analytic"]) > bpv_tolerance(r["bpv_analytic"])]


def table4_records(records):
    """The Q8 (bf8) TEPL records at the paper's Table 4 densities, of one design: the paper's
    W = 32, L = 8 with two loaders when measured, else the first design."""
    rows = [r for r in records if r["scheme"] == "bf8" and r["mode"] == "tepl" and "@" in r["workload"]
            and float(r["workload"].partition("@")[2]) in TABLE4_DECA]
    designs = [design_of(r) for r in rows]
    paper = (*DSE_BEST, LOADERS)
    design = paper if paper in designs else designs[0] if designs else None
    return [r for r in rows if design_of(r) == design]


def table4_rows(records):
    """``table4_records`` each beside the paper's utilizations."""
    rows = []
    for r in table4_records(records):
        density = float(r["workload"].partition("@")[2])
        ours = [round(100 * r[k]) for k in ("util_mem", "util_tmul", "util_deca")]
        paper = TABLE4_DECA[density]
        rows.append({"W": r["W"], "L": r["L"], "loaders": r["loaders"], "density": density,
                     "cycles_per_tile": r["cycles_per_tile"],
                     "gap": max(abs(a - b) for a, b in zip(ours, paper)),
                     **{k: f"{a}% ({b}%)" for k, a, b in zip(("mem", "tmul", "deca"), ours, paper)}})
    return sorted(rows, key=lambda row: (row["W"], row["L"], -row["density"]))


def modes_rows(records):
    """Workloads measured in both modes on one design, with the TEPL speedup (store / TEPL cycles)."""
    by = {(design_of(r), r["workload"], r["mode"]): r for r in records}
    rows = []
    for ((W, L, loaders), workload, mode), r in by.items():
        store = by.get(((W, L, loaders), workload, "store"))
        if mode == "tepl" and store is not None:
            rows.append({"W": W, "L": L, "loaders": loaders, "workload": workload, "tepl": r["cycles_per_tile"],
                         "store": store["cycles_per_tile"], "ratio": store["cycles"] / r["cycles"]})
    return rows


def print_summary(records, measured=None, log=print):
    log(format_table(summary_rows(records), with_loaders(SUMMARY_COLUMNS, records)))
    log("\nAgainst the software-only baseline (Roof-Surface TFLOPS of the AVX-512 decompression on the "
        "same platform). " + software_note(measured))
    log(format_table(software_rows(records, measured), with_loaders(SOFTWARE_COLUMNS, records)))
    t4 = table4_rows(records)
    if t4:
        log(f"\nPaper's Table 4 (Q8, N = 1, HBM, DECA): {_design_text(t4[0])} measured (paper) utilization")
        log(format_table(t4, TABLE4_COLUMNS))
    if several_designs(records):
        log("\nDesigns: " + DSE_NOTE)
        log(format_table(design_rows(records), with_loaders(DESIGN_COLUMNS, records)))
    modes = modes_rows(records)
    if modes:
        log(f"\nTEPL versus store-and-fence (the paper: about {TEPL_SPEEDUP_5PCT:g}x at 5% density)")
        log(format_table(modes, with_loaders(MODES_COLUMNS, records)))
    outliers = bpv_outliers(records)
    log(f"\nbpv: {len(records) - len(outliers)} of {len(records)} points within max(3%, 0.02) of the closed form"
        + "".join(f"\n  OUTSIDE: {r['key']}: measured {r['bpv_measured']:.4f}, model {r['bpv_analytic']:.4f}"
                  for r in outliers))


def write_report(out, records, title, command, settings, explanations=(), measured=None):
    """Plots and ``report.md`` in ``out``; returns the report's path. ``explanations``: paragraphs on gaps."""
    out = Path(out)
    system = System(**settings["system"])
    plots = {"bpv.png": lambda p: plot_bpv(records, p),
             "bord.png": lambda p: plot_bord_measured(platform_of(system), records, p)}
    if several_designs(records):
        plots["cycles_grid.png"] = lambda p: plot_cycles_grid(records, p)
    if table4_rows(records):
        plots["utilization.png"] = lambda p: plot_utilization(table4_records(records), TABLE4_DECA, p)
    if modes_rows(records):
        plots["modes.png"] = lambda p: plot_modes(records, p)
    for name, plot in plots.items():
        plot(out / name)
    s = settings["system"]
    lines = [f"# {title}", "", f"Reproduce: `{command}`", "",
             f"Platform {s['platform']}: {s['bytes_per_cycle']:.3f} B/cycle of memory bandwidth per core, "
             f"memory latency {s['miss_latency'][0]}-{s['miss_latency'][1]} cycles, L2 hits "
             f"{s['hit_latency'][0]}-{s['hit_latency'][1]}, core-DECA link {s['link_latency']} cycles each way, "
             f"TEPL queue {s['tepl_queue']}, batch N = {s['batch']}, prefetch degree {s['prefetch_degree']}; "
             f"{settings['tiles']} tiles per workload, seed {settings['seed']}, simulator {settings['sim']}.",
             "", "Every tile was checked bit for bit against the golden model and every counter against the "
             "models. *model* is the Roof-Surface prediction; bpv model is the closed form of section 6.2.",
             "", "## Summary", "", markdown_table(summary_rows(records), with_loaders(SUMMARY_COLUMNS, records)),
             "", "## Against the software-only baseline", "",
             "DECA's measured TFLOPS beside the Roof-Surface TFLOPS of the software decompression on the same "
             "platform, batch and workload: with the paper-derived costs (its Table 2) and with the costs "
             "measured on this machine by `deca baseline`. " + software_note(measured), "",
             markdown_table(software_rows(records, measured), with_loaders(SOFTWARE_COLUMNS, records))]
    t4 = table4_rows(records)
    if t4:
        lines += ["", "## The paper's Table 4 (Q8, N = 1, HBM, DECA)", "",
                  f"Measured utilization of {_design_text(t4[0])}, the paper's in parentheses.", "",
                  markdown_table(t4, TABLE4_COLUMNS)]
    if several_designs(records):
        lines += ["", "## Designs", "", DSE_NOTE, "",
                  markdown_table(design_rows(records), with_loaders(DESIGN_COLUMNS, records))]
    modes = modes_rows(records)
    if modes:
        lines += ["", "## TEPL versus store-and-fence", "",
                  "The paper reports TEPLs doubling performance at 5% density (Fig. 16).", "",
                  markdown_table(modes, with_loaders(MODES_COLUMNS, records))]
    outliers = bpv_outliers(records)
    lines += ["", "## Bubbles per vOp", "",
              f"{len(records) - len(outliers)} of {len(records)} points within max(3%, 0.02) of the closed form."]
    lines += [f"- OUTSIDE: {r['key']}: measured {r['bpv_measured']:.4f}, model {r['bpv_analytic']:.4f}"
              for r in outliers]
    lines += ["", *explanations]
    lines += ["", "## Plots", "", *(f"![{name}]({name})" for name in plots)]
    path = out / "report.md"
    path.write_text("\n".join(lines) + "\n")
    return path
