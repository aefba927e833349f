"""``deca model llm``: tables, the Markdown report, CSV/JSON and plots of the next-token model
(``llm``), and the reproduction of the paper's Tables 6 and 7 and Figure 17 (``--paper``)."""

import csv
import json
import time
from pathlib import Path

from deca.errors import UsageError
from deca.golden.summary import format_table, markdown_table

from . import paper
from .arch import apply_schemes, from_checkpoint, load_config, preset, scheme_label
from .llm import (
    GPU_BW_EFFICIENCY, GPUS, PART_NAMES, PARTS, SYSTEM_NAMES, SYSTEMS, Engines, calibrate, check_batch, context,
    evaluate, gpu_latency, knee, speedups,
)
from .platform import PRESETS

#: Batch sizes of the latency/throughput-versus-N plot (paper, Fig. 17).
FIG17_BATCHES = (1, 2, 4, 8, 16, 32, 64, 128)
#: Targets of the reproduction (issue 47): every Table 6 and Table 7 CPU cell within 15%, DECA's
#: speedup over SW-only within 10%.
CELL_TOLERANCE, SPEEDUP_TOLERANCE = 0.15, 0.10

_ms = lambda x: "-" if x is None else f"{x:.1f}"  # noqa: E731
_x = lambda x: "-" if x is None else f"{x:.2f}x"  # noqa: E731
_ratio = lambda x: "-" if x is None else f"{x:.3f}"  # noqa: E731
SUMMARY_COLUMNS = {
    "N": ("N", "{}"),
    **{f"{s}_ms": (f"{SYSTEM_NAMES[s]} ms", _ms) for s in SYSTEMS},
    **{f"{s}_tps": (f"{SYSTEM_NAMES[s]} tok/s", lambda x: "-" if x is None else f"{x:.1f}") for s in SYSTEMS},
    "deca_over_baseline": ("DECA vs Baseline", _x), "deca_over_sw": ("DECA vs SW-only", _x),
    "deca_over_optimal": ("Optimal / DECA", _x),
}
SPLIT_COLUMNS = {"N": ("N", "{}"), "system": ("system", SYSTEM_NAMES.get), "latency_ms": ("total ms", "{:.2f}"),
                 **{f"{p}_ms": (PART_NAMES[p], "{:.2f}") for p in PARTS}, "gemm_share": ("GeMM share", "{:.1%}"),
                 "source": ("FC engine source", "{}")}


def load_arch(kind, value, schemes):
    """An architecture from --preset, --config or --checkpoint, with the schemes applied."""
    if kind == "checkpoint":
        if schemes:
            raise UsageError(f"{value}: a compressed checkpoint folder brings its own schemes; drop --scheme")
        return from_checkpoint(value)
    arch = preset(value) if kind == "preset" else load_config(value)
    return apply_schemes(arch, schemes)


def describe_schemes(arch):
    by = {}
    for f in arch.fcs:
        by.setdefault(scheme_label(f.scheme, f.density), set()).add(f.kind)
    return "; ".join(f"{label}: {', '.join(sorted(kinds))}" for label, kinds in by.items())


def read_deca_records(folder):
    """TEPL records of a ``deca run``/``deca sweep`` folder (its points/ or the folder itself)."""
    from deca.sim.measure.records import read_records

    folder = Path(folder)
    if not folder.is_dir():
        raise UsageError(f"--measured {folder}: no such folder")
    records = list(read_records(folder / "points" if (folder / "points").is_dir() else folder).values())
    if not records or not all(isinstance(r, dict) and "vops" in r and "bubbles" in r for r in records):
        raise UsageError(f"--measured {folder}: holds no records of deca run or deca sweep")
    return records


def _write_csv(path, rows):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def gpu_rows(platform, arch, n, ctx, rows):
    """Table 7's comparison for one model and N: the CPU systems of ``rows`` and the GPU presets."""
    lat = {r["system"]: r["latency_ms"] for r in rows if r["N"] == n}
    tflops = platform.mos * 512 * 16 / 1e12
    out = [{"platform": f"{platform.name} (SW-only)", "bw": platform.mem_bw / 1e9, "tflops": tflops, "ms": lat["sw"],
            "key": "SPR HBM"},
           {"platform": f"{platform.name} + DECA", "bw": platform.mem_bw / 1e9, "tflops": tflops, "ms": lat["deca"],
            "key": "SPR HBM + DECA"}]
    out += [{"platform": g.name, "bw": g.bandwidth_gbs, "tflops": g.tflops, "ms": 1e3 * gpu_latency(g, arch, n, ctx),
             "key": g.name} for g in GPUS]
    return out


GPU_COLUMNS = {"platform": ("platform", "{}"), "bw": ("BW GB/s", "{:.0f}"), "tflops": ("max TFLOPS", "{:.0f}"),
               "ms": ("next-token ms", "{:.1f}"), "paper": ("paper ms", _ms), "ratio": ("model / paper", _ratio)}


def run_llm(args, platform, software, measured_software=None, log=print):
    """The ``deca model llm`` command for a user's models (see ``cli.add_model_parser``)."""
    specs = [("preset", p) for p in args.preset or []] + [("config", c) for c in args.config or []] \
        + [("checkpoint", c) for c in args.checkpoint or []]
    if not specs:
        specs = [("preset", "llama2-70b")]
    records = read_deca_records(args.measured) if args.measured else ()
    engines = Engines(software, args.W, args.L, records, args.measured, measured_software)
    if args.measured and not engines.records:
        raise UsageError(f"--measured {args.measured}: no TEPL record of W = {args.W}, L = {args.L}")
    ctx = context(args.prompt, args.generate)
    for n in args.batch:
        check_batch(n)
    overhead = calibrate()
    t0 = time.perf_counter()  # the models themselves, after the one-off calibration
    archs = [load_arch(kind, value, args.scheme or []) for kind, value in specs]
    args.out.mkdir(parents=True, exist_ok=True)
    log(f"{platform.describe()}; prompt {args.prompt} tokens, {args.generate} generated (average context "
        f"{ctx:g}); DECA W = {args.W}, L = {args.L}")
    log(f"calibration: {overhead.note}")
    all_rows, summaries, md = [], [], []
    for arch in archs:
        rows = evaluate(platform, arch, args.batch, args.prompt, args.generate, engines, overhead)
        summary = speedups(rows)
        head = (f"{arch.name} ({arch.source}): {arch.layers} layers, {arch.weights / 1e9:.3g} G FC weights per "
                f"token; schemes {describe_schemes(arch)}")
        log("\n" + head)
        log(format_table(summary, SUMMARY_COLUMNS))
        log(format_table(rows, SPLIT_COLUMNS))
        md += [f"## {arch.name}", "", head + ".", "", markdown_table(summary, SUMMARY_COLUMNS), "",
               markdown_table(rows, SPLIT_COLUMNS), ""]
        if args.compare_gpus:
            for n in args.batch:
                g = gpu_rows(platform, arch, n, ctx, rows)
                # The paper's Table 7 is Llama2-70B with Q4 (MXFP4) FC layers at N = 1 on SPR with HBM.
                same = (arch.name == "llama2-70b" and n == 1 and platform == PRESETS["spr-hbm"]
                        and all(f.scheme == "mxfp4" and f.density is None for f in arch.fcs if f.kind != "lm_head"))
                for r in g:
                    known = paper.TABLE7.get(r["key"])
                    r["paper"] = known[2] if known and same else None
                    r["ratio"] = r["ms"] / r["paper"] if r["paper"] else None
                log(f"\nAgainst GPUs (Table 7's presets), {arch.name}, N = {n}: GPUs on the classic roofline at "
                    f"{GPU_BW_EFFICIENCY:.1%} of their bandwidth, no CPU overhead")
                log(format_table(g, GPU_COLUMNS))
                md += [f"### Against GPUs, N = {n}", "", markdown_table(g, GPU_COLUMNS), ""]
        all_rows += rows
        summaries.append({"model": arch.name, "source": arch.source, "rows": summary})
    log(f"\nmodelled in {time.perf_counter() - t0:.2f} s (reading the models and costing every layer, N and system)")
    return write_outputs(args, platform, archs, engines, all_rows, summaries, md, overhead, log)


def write_outputs(args, platform, archs, engines, rows, summaries, md, overhead, log):
    from .plots import plot_llm_batch, plot_llm_split

    out = args.out
    _write_csv(out / "llm.csv", rows)
    settings = {"platform": platform.describe(), "prompt": args.prompt, "generate": args.generate,
                "batches": args.batch, "W": args.W, "L": args.L, "software": engines.software_source(),
                "measured": None if args.measured is None else str(args.measured), "calibration": overhead.note}
    (out / "llm.json").write_text(json.dumps({"settings": settings, "models": summaries, "rows": rows}, indent=1))
    first = archs[0]
    plots = {"llm_split.png": plot_llm_split([r for r in rows if r["model"] == first.name], PARTS, PART_NAMES,
                                             SYSTEM_NAMES, out / "llm_split.png",
                                             f"{first.name} next-token time, {platform.name}")}
    sweep = evaluate(platform, first, FIG17_BATCHES, args.prompt, args.generate, engines, overhead)
    base = [r["latency_ms"] for r in sweep if r["system"] == "baseline"]
    plots["llm_batch.png"] = plot_llm_batch(sweep, SYSTEM_NAMES, out / "llm_batch.png",
                                            f"{first.name} on {platform.name}", knee(FIG17_BATCHES, base))
    command = "deca " + " ".join(getattr(args, "argv", []) or ["model", "llm"])
    lines = [f"# Next-token time: {', '.join(a.name for a in archs)}", "", f"Reproduce: `{command}`", "",
             f"{settings['platform']}; prompt {args.prompt}, generated {args.generate}; DECA W = {args.W}, "
             f"L = {args.L}; software engine {settings['software']}.", "",
             f"Calibration: {overhead.note}.", "", *md, "## Plots", "", *(f"![{n}]({n})" for n in plots)]
    (out / "report.md").write_text("\n".join(lines) + "\n")
    for name in ("report.md", "llm.csv", "llm.json", *plots):
        log(f"wrote {out / name}")
    return rows


# The paper's Tables 6 and 7 and Figure 17 ----------------------------------------------------------

PAPER_SCHEMES = ("q16", "q4", "q8@0.3")


def reproduce():
    """Tables 6 and 7 and Figure 17 on the paper's platform with the paper-derived software costs;
    returns a JSON-able record."""
    hbm = PRESETS["spr-hbm"]
    engines = Engines()
    overhead = calibrate()
    cells, speed = [], []
    for model in dict.fromkeys(m for m, *_ in paper.TABLE6):
        for scheme in PAPER_SCHEMES:
            arch = apply_schemes(preset(model), [scheme])
            rows = evaluate(hbm, arch, (1, 16), paper.LLM_PROMPT, paper.LLM_GENERATE, engines, overhead)
            lat = {(r["N"], r["system"]): r["latency_ms"] for r in rows}
            for n in (1, 16):
                for system in ("sw", "deca"):
                    want = paper.TABLE6.get((model, n, scheme, system))
                    if want is not None:
                        cells.append({"model": model, "N": n, "scheme": scheme_label(*_split(scheme)),
                                      "system": SYSTEM_NAMES[system], "ms": lat[n, system], "paper": want,
                                      "ratio": lat[n, system] / want})
                if (model, n, scheme, "deca") in paper.TABLE6:
                    p = paper.TABLE6[model, n, scheme, "sw"] / paper.TABLE6[model, n, scheme, "deca"]
                    m = lat[n, "sw"] / lat[n, "deca"]
                    speed.append({"model": model, "N": n, "scheme": scheme_label(*_split(scheme)), "speedup": m,
                                  "paper": p, "ratio": m / p})
    llama = apply_schemes(preset("llama2-70b"), ["q4"])
    ctx = context(paper.LLM_PROMPT, paper.LLM_GENERATE)
    rows = evaluate(hbm, llama, (1,), paper.LLM_PROMPT, paper.LLM_GENERATE, engines, overhead)
    t7 = gpu_rows(hbm, llama, 1, ctx, rows)
    for r in t7:
        r["paper"] = paper.TABLE7[r["key"]][2]
        r["ratio"] = r["ms"] / r["paper"]
        r["target"] = r["key"].startswith("SPR")
    fig = evaluate(hbm, preset("llama2-70b"), FIG17_BATCHES, paper.LLM_PROMPT, paper.LLM_GENERATE, engines, overhead,
                   systems=("baseline",))
    # Fig. 17 prints no numbers; its N = 1 and 16 points are Table 6's Q16 latencies.
    known = {n: paper.TABLE6.get(("llama2-70b", n, "q16", "sw")) for n in FIG17_BATCHES}
    fig17 = [{"N": r["N"], "ms": r["latency_ms"], "paper": known[r["N"]],
              "ratio": known[r["N"]] and r["latency_ms"] / known[r["N"]], "tokens_per_s": r["tokens_per_s"],
              "linear": r["tokens_per_s"] / (fig[0]["tokens_per_s"] * r["N"])} for r in fig]
    model_knee = knee(FIG17_BATCHES, [r["ms"] for r in fig17])
    table1 = []
    for mem, shares in (("spr-ddr", paper.TABLE1_DDR), ("spr-hbm", {(1, p): v for p, v in paper.TABLE1_HBM_N1.items()})):
        for (n, prompt), want in shares.items():
            r = evaluate(PRESETS[mem], preset("llama2-70b"), (n,), prompt, paper.LLM_GENERATE, engines, overhead,
                         systems=("baseline",))[0]
            table1.append({"memory": mem, "N": n, "prompt": prompt, "share": 100 * r["gemm_share"], "paper": want,
                           "ratio": r["gemm_share"] * 100 / want,
                           "use": "fitted" if (mem == "spr-hbm" and prompt == 128) else
                           "its N = 16 / N = 1 growth used" if mem == "spr-ddr" and n in (1, 16) else "predicted"})
    return {
        "platform": hbm.describe(), "prompt": paper.LLM_PROMPT, "generate": paper.LLM_GENERATE,
        "inputs": inputs_statement(overhead),
        "table1": table1, "table6": cells, "speedups": speed, "table7": t7, "fig17": fig17,
        "knee": {"model": model_knee, "paper": paper.FIG17_KNEE},
        "worst_cell": max(abs(c["ratio"] - 1) for c in cells),
        "worst_speedup": max(abs(s["ratio"] - 1) for s in speed),
        "worst_table7_cpu": max(abs(r["ratio"] - 1) for r in t7 if r["target"]),
    }


def _split(scheme):
    name, _, d = scheme.partition("@")
    from .arch import ALIASES

    return ALIASES.get(name, name), float(d) if d else None


def inputs_statement(overhead):
    from .engines import SOFTWARE_CYCLES_PER_TILE

    sw = ", ".join(f"{k} {v:g}" for k, v in SOFTWARE_CYCLES_PER_TILE.items() if v)
    return {
        "from the paper's platform description": (
            "56 cores at 2.5 GHz, one TMUL tile operation per core every 16 cycles (72 TFLOPS), DECA W = 32, "
            "L = 8 at one vOp per cycle per core, 128 prompt and 128 generated tokens, the models' published "
            "shapes (the LM head left in BF16)"),
        "fitted": [
            "memory bandwidth 830 GB/s (the paper says about 850): fitted on Table 2's roofline row "
            "(deca.sim.model.platform)",
            f"software decompression cycles per tile ({sw}): fitted on Table 2's Roof-Surface row "
            "(deca.sim.model.engines)",
            overhead.note,
        ],
        "not fitted on Tables 6, 7 or Figure 17": "every cell of them above is a prediction",
    }


T6_COLUMNS = {"model": ("model", "{}"), "N": ("N", "{}"), "scheme": ("scheme", "{}"), "system": ("system", "{}"),
              "ms": ("model ms", "{:.1f}"), "paper": ("paper ms", "{:.1f}"), "ratio": ("ratio", "{:.3f}")}
SPEEDUP_COLUMNS = {"model": ("model", "{}"), "N": ("N", "{}"), "scheme": ("scheme", "{}"),
                   "speedup": ("DECA / SW-only model", "{:.2f}x"), "paper": ("paper", "{:.2f}x"),
                   "ratio": ("ratio", "{:.3f}")}
T7_COLUMNS = {**GPU_COLUMNS, "paper": ("paper ms", "{:.0f}")}
FIG17_COLUMNS = {"N": ("N", "{}"), "ms": ("latency ms", "{:.1f}"), "paper": ("paper ms (Table 6 Q16)", _ms),
                 "ratio": ("ratio", _ratio), "tokens_per_s": ("tokens/s", "{:.1f}"),
                 "linear": ("of linear scaling", "{:.0%}")}


T1_COLUMNS = {"memory": ("platform", "{}"), "N": ("N", "{}"), "prompt": ("prompt", "{}"),
              "share": ("FC GeMM share %", "{:.1f}"), "paper": ("paper %", "{:.1f}"), "ratio": ("ratio", "{:.3f}"),
              "use": ("calibration", "{}")}


def paper_tables(rec):
    """{key: (title, rows, columns)} of the reproduction record's tables, for text and Markdown alike."""
    return {
        "table1": ("Table 1: FC GeMM share of BF16 Llama2-70B's next-token time (the calibration's data)",
                   rec["table1"], T1_COLUMNS),
        "table6": ("Table 6: next-token latency (ms), SPR HBM, 128 + 128 tokens", rec["table6"], T6_COLUMNS),
        "speedups": ("Table 6: DECA's speedup over SW-only", rec["speedups"], SPEEDUP_COLUMNS),
        "table7": ("Table 7: W4A16 (Q4) Llama2-70B, N = 1", rec["table7"], T7_COLUMNS),
        "fig17": ("Figure 17: BF16 Llama2-70B (Baseline) against N", rec["fig17"], FIG17_COLUMNS),
    }


def verdicts(rec):
    k = rec["knee"]
    return [
        f"Table 6: every cell within {rec['worst_cell']:.1%} of the paper (target {CELL_TOLERANCE:.0%}): "
        + ("met" if rec["worst_cell"] <= CELL_TOLERANCE else "NOT met"),
        f"Table 6: DECA over SW-only within {rec['worst_speedup']:.1%} (target {SPEEDUP_TOLERANCE:.0%}): "
        + ("met" if rec["worst_speedup"] <= SPEEDUP_TOLERANCE else "NOT met"),
        f"Table 7: SPR HBM rows within {rec['worst_table7_cpu']:.1%} (target {CELL_TOLERANCE:.0%}): "
        + ("met" if rec["worst_table7_cpu"] <= CELL_TOLERANCE else "NOT met")
        + "; the GPU rows are llama.cpp measurements, shown for comparison only",
        f"Figure 17: knee (largest N with throughput within 90% of linear) at N = {k['model']}, the paper's at "
        f"N = {k['paper']}: " + ("same" if k["model"] == k["paper"] else "DIFFERENT"),
    ]


def run_paper(args, log=print):
    from .plots import plot_llm_batch

    rec = reproduce()
    log(f"Reproduction of the paper's section 8.4 on {rec['platform']}; paper-derived software costs")
    for title, rows, columns in paper_tables(rec).values():
        log(f"\n{title}")
        log(format_table(rows, columns))
    log("\nInputs")
    for what, text in rec["inputs"].items():
        for line in [text] if isinstance(text, str) else text:
            log(f"  {what}: {line}")
    log("")
    for line in verdicts(rec):
        log(line)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "paper.json").write_text(json.dumps(rec, indent=1))
    fig = [{"N": r["N"], "system": "baseline", "latency_ms": r["ms"], "tokens_per_s": r["tokens_per_s"]}
           for r in rec["fig17"]]
    plot = plot_llm_batch(fig, SYSTEM_NAMES, args.out / "fig17.png", "Llama2-70B BF16 on spr-hbm (paper, Fig. 17)",
                          rec["knee"]["model"])
    lines = ["# The paper's Tables 6 and 7 and Figure 17", "", "Reproduce: `deca model llm --paper`", ""]
    for title, rows, columns in paper_tables(rec).values():
        lines += [f"## {title}", "", markdown_table(rows, columns), ""]
    lines += ["## Verdicts", "", *(f"- {v}" for v in verdicts(rec)), "", f"![fig17]({plot.name})"]
    (args.out / "paper.md").write_text("\n".join(lines) + "\n")
    for name in ("paper.md", "paper.json", plot.name):
        log(f"wrote {args.out / name}")
    return rec
