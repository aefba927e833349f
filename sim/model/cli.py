"""``deca model``: the Roof-Surface model from the command line (roof, table, bord, surface, dse)."""

import argparse
import csv
import dataclasses
from pathlib import Path

from deca.args import group_size_arg, number_list
from deca.errors import UsageError
from deca.golden.summary import format_table
from deca.hw.params import W_CHOICES

from . import paper
from .dse import best_value, choose, design_grid, evaluate, explore, speedup
from .engines import SOFTWARE_CYCLES_PER_TILE, DecaEngine, SoftwareEngine, scheme_class
from .kernels import DEFAULT_K, TABLE2_KERNELS, kernel, kernel_from_matrix, parse_kernels
from .platform import PRESETS, get_platform
from .roof import predict

DEFAULT_OUT = Path("out/model")
L_GRID = (1, 2, 4, 8, 16, 32, 64)


def _designs(text):
    try:
        return [tuple(int(v) for v in d.lower().split("x", 1)) for d in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"designs look like 8x4,32x8 (W x L), got {text!r}") from None


def _sw_cycles(text):
    try:
        return {key.strip(): float(val) for key, val in (item.split("=") for item in text.split(","))}
    except ValueError:
        raise argparse.ArgumentTypeError(f"software costs look like mxfp4=100,bf8-sparse=71, got {text!r}") from None


# Arguments -------------------------------------------------------------------------------------------


def _add_platform(p):
    g = p.add_argument_group("platform")
    g.add_argument("--platform", default="spr-hbm", help=f"preset ({', '.join(PRESETS)}) or a name in --platforms")
    g.add_argument("--platforms", type=Path, metavar="TOML", help="TOML file of user platforms (see deca.sim.model.platform)")
    g.add_argument("--cores", type=int, help="override the number of cores")
    g.add_argument("--freq-ghz", type=float, help="override the core clock (GHz)")
    g.add_argument("--bw-gbs", type=float, help="override the memory bandwidth (GB/s)")


def _add_software(p):
    p.add_argument("--sw-cycles", type=_sw_cycles, default={}, metavar="CLASS=CYCLES,...",
                   help="software cost per tile by scheme class, added to the built-in "
                        + ", ".join(f"{k}={v:g}" for k, v in SOFTWARE_CYCLES_PER_TILE.items()))
    p.add_argument("--baseline", metavar="JSON|none",
                   help="software engine measured by 'deca baseline' (default: out/baseline/platform.json when "
                        "it exists; 'none' leaves it out)")


def _add_common(p, kernels=False):
    _add_platform(p)
    p.add_argument("--n", type=int, default=16, help="batch size N (default 16)")
    _add_software(p)
    if kernels:
        p.add_argument("--kernels", default=",".join(TABLE2_KERNELS),
                       help="comma-separated scheme or scheme:density (default: the paper's Table 2 set)")
        p.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"output folder (default {DEFAULT_OUT})")


def add_model_parser(sub):
    m = sub.add_parser("model", help="Roof-Surface performance model, bubble model and W x L exploration")
    msub = m.add_subparsers(dest="model_command", required=True, metavar="MODEL_COMMAND")

    r = msub.add_parser("roof", help="TPS, TFLOPS and bound of one kernel with software and DECA decompression")
    _add_common(r)
    r.add_argument("--scheme", help="golden scheme (or give --matrix)")
    r.add_argument("--density", type=float, help="fraction of stored weights (sparse format)")
    r.add_argument("--group-size", type=group_size_arg, help="scale group along K: 16, 32, a multiple of 32, or 'channel'")
    r.add_argument("--k", type=int, default=DEFAULT_K, help=f"matrix columns K for shared scales (default {DEFAULT_K})")
    r.add_argument("--matrix", type=Path, help="a .deca file: measured bytes per tile and bubbles of its real masks")
    r.add_argument("--W", type=int, default=paper.DSE_BEST[0], help="DECA elements per vOp (default 32)")
    r.add_argument("--L", type=int, default=paper.DSE_BEST[1], help="DECA big LUTs (default 8)")
    r.set_defaults(func=cmd_roof)

    t = msub.add_parser("table", help="reproduce the paper's Table 2 (R-L and R-S rows)")
    _add_common(t)
    t.set_defaults(func=cmd_table)

    b = msub.add_parser("bord", help="Bounding Region Diagrams (paper Fig. 5, 15): PNG + CSV")
    _add_common(b, kernels=True)
    b.add_argument("--designs", type=_designs, default=[paper.DSE_UNDER, paper.DSE_BEST, paper.DSE_OVER],
                   help="DECA designs W x L, one panel each after the software panel (default 8x4,32x8,64x64)")
    b.set_defaults(func=cmd_bord)

    s = msub.add_parser("surface", help="the 3D Roof-Surface (paper Fig. 4): PNG + CSV")
    _add_common(s, kernels=True)
    s.add_argument("--W", type=int, default=paper.DSE_BEST[0], help="DECA elements per vOp (default 32)")
    s.add_argument("--L", type=int, default=paper.DSE_BEST[1], help="DECA big LUTs (default 8)")
    s.set_defaults(func=cmd_surface)

    d = msub.add_parser("dse", help="analytic W x L design-space exploration (paper 8.2): PNG + CSV")
    _add_common(d, kernels=True)
    d.add_argument("--W", type=number_list(int), default=list(W_CHOICES), help="W values (default 8,16,32,64)")
    d.add_argument("--L", type=number_list(int), default=list(L_GRID), help="L values; L > W is skipped (default 1..64)")
    d.set_defaults(func=cmd_dse)

    from .arch import PRESETS as MODELS

    lm = msub.add_parser("llm", help="next-token latency and tokens/s of a whole LLM: Baseline, SW-only, DECA, "
                                     "Optimal (paper 8.4); --paper reproduces Tables 6, 7 and Fig. 17")
    _add_platform(lm)
    _add_software(lm)
    g = lm.add_argument_group("model (one or more; default --preset llama2-70b)")
    g.add_argument("--preset", action="append", help=f"architecture preset: {', '.join(MODELS)}")
    g.add_argument("--config", action="append", type=Path, metavar="CONFIG.JSON",
                   help="a Hugging Face config.json (or its folder)")
    g.add_argument("--checkpoint", action="append", type=Path, metavar="FOLDER",
                   help="a folder written by 'deca compress' (its own shapes, schemes and densities)")
    lm.add_argument("--scheme", action="append", metavar="[PATTERN=]SCHEME[@DENSITY]",
                    help="compression of the FC layers: q16 (BF16), q8 (BF8), q4 (MXFP4) or a golden scheme, "
                         "optionally @density; PATTERN (e.g. 'mlp.*', 'attn.q', 'lm_head') picks layer kinds or "
                         "names, later options win (default: uncompressed)")
    lm.add_argument("--batch", type=number_list(int), default=[1, 16, 64], metavar="N,...",
                    help="batch sizes (default 1,16,64)")
    lm.add_argument("--prompt", type=int, default=paper.LLM_PROMPT, help="prompt tokens (default 128)")
    lm.add_argument("--generate", type=int, default=paper.LLM_GENERATE, help="generated tokens (default 128)")
    lm.add_argument("--W", type=int, default=paper.DSE_BEST[0], help="DECA elements per vOp (default 32)")
    lm.add_argument("--L", type=int, default=paper.DSE_BEST[1], help="DECA big LUTs (default 8)")
    lm.add_argument("--measured", type=Path, metavar="FOLDER",
                    help="DECA cycles per tile from the records of a 'deca run' or 'deca sweep' folder "
                         "(the bubble model for what they lack)")
    lm.add_argument("--compare-gpus", action="store_true", help="also model Table 7's GPUs")
    lm.add_argument("--paper", action="store_true",
                    help="reproduce the paper's Tables 6 and 7 and Figure 17 (its platform and software costs)")
    lm.add_argument("--out", type=Path, default=DEFAULT_OUT / "llm", help=f"output folder (default {DEFAULT_OUT}/llm)")
    lm.set_defaults(func=cmd_llm)


# Shared pieces ----------------------------------------------------------------------------------------


def _platform(args):
    p = get_platform(args.platform, args.platforms)
    overrides = {field: value * factor for field, value, factor in
                 (("cores", args.cores, 1), ("freq_hz", args.freq_ghz, 1e9), ("mem_bw", args.bw_gbs, 1e9))
                 if value is not None}
    return dataclasses.replace(p, **overrides) if overrides else p


def _software(args):
    return SoftwareEngine({**SOFTWARE_CYCLES_PER_TILE, **args.sw_cycles})


def _measured(args):
    """The software engine measured on this machine (deca.baseline), or None (said once)."""
    from .measured import chosen_engine

    engine = chosen_engine(args.baseline)
    if engine is None and args.baseline != "none":
        print("software measured on this machine: none yet (run 'deca baseline' to measure it)")
    elif engine is not None:
        print(f"software measured on this machine: {engine.describe()}; its core cycles per tile are applied "
              "to the platform's cores")
    return engine


PREDICTION_COLUMNS = {
    "kernel": ("kernel", "{}"),
    "engine": ("engine", "{}"),
    "ai_xm": ("AI_XM", "{:.3g}"),
    "ai_xv": ("AI_XV", lambda x: "-" if x is None else f"{x:.3g}"),
    "tps": ("G tile ops/s", lambda x: f"{x / 1e9:.3f}"),
    "flops": ("TFLOPS", lambda x: f"{x / 1e12:.2f}"),
    "bound": ("bound", "{}"),
}


def _report(preds, out, stem):
    """Print predictions as a table and write them to ``out/stem.csv``."""
    rows = [dataclasses.asdict(p) for p in preds]
    print(format_table(rows, PREDICTION_COLUMNS))
    path = out / f"{stem}.csv"
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(PREDICTION_COLUMNS))
        w.writeheader()
        w.writerows(rows)
    print(f"wrote {path}")


def _panels(args, platform, kernels, designs):
    sw = _software(args)
    panels = [("software (libxsmm AVX)", [predict(platform, k, sw, args.n) for k in kernels])]
    for W, L in designs:
        engine = DecaEngine(W, L)
        panels.append((engine.name, [predict(platform, k, engine, args.n) for k in kernels]))
    return panels


def _setup(args):
    platform = _platform(args)
    kernels = parse_kernels(args.kernels)
    if not kernels:
        raise ValueError("--kernels names no kernel")
    args.out.mkdir(parents=True, exist_ok=True)
    print(platform.describe() + f", N = {args.n}")
    return platform, kernels


# Commands ---------------------------------------------------------------------------------------------


def cmd_roof(args):
    from deca.golden import load

    platform = _platform(args)
    if args.matrix is not None:
        if args.scheme or args.density is not None or args.group_size:
            raise ValueError("give either --matrix or --scheme/--density/--group-size, not both")
        k = kernel_from_matrix(load(args.matrix))
        source = f"measured from {args.matrix} ({k.matrix.shape[0]} x {k.matrix.shape[1]})"
    elif args.scheme:
        k = kernel(args.scheme, args.density, args.group_size, k=args.k)
        source = "uniform density, binomial bubble model"
    else:
        raise ValueError("give --scheme (with --density for the sparse format) or --matrix FILE.deca")
    deca = DecaEngine(args.W, args.L)
    sw = _software(args)
    print(platform.describe() + f", N = {args.n}")
    print(f"kernel {k.name}: Q = {k.q_bits}, {'sparse' if k.sparse else 'dense'}, density {k.density:.4g}, "
          f"{k.bytes_per_tile:.2f} bytes/tile, AI_XM {k.ai_xm:.4g} tile ops/byte ({source})")
    preds = [predict(platform, k, None, args.n)]
    if scheme_class(k) in sw.cycles:
        preds.append(predict(platform, k, sw, args.n))
    measured = _measured(args)
    if measured is not None and measured.measures(k):
        preds.append(predict(platform, k, measured, args.n))
    elif measured is not None:
        print(f"software (measured): {measured.source} has no {scheme_class(k)!r} workload; measure it with "
              f"'deca baseline --workloads {k.scheme}:{k.density:g}'")
    print(f"{deca.name}: bpv {deca.bpv(k):.4f}, VO_tile {deca.vo_tile(k):.2f} vOps")
    preds.append(predict(platform, k, deca, args.n))
    print(format_table([dataclasses.asdict(p) for p in preds], PREDICTION_COLUMNS))
    for p in preds[1:-1]:
        print(f"DECA speedup over {p.engine}: {preds[-1].flops / p.flops:.2f}x")
    if scheme_class(k) not in sw.cycles:
        print(f"software: no cost known for scheme class {scheme_class(k)!r}; "
              f"give it with --sw-cycles {scheme_class(k)}=CYCLES")


def cmd_table(args):
    platform = _platform(args)
    sw, deca = _software(args), DecaEngine(*paper.DSE_BEST)
    print(f"Table 2 reproduction: {platform.describe()}, N = {args.n}; TFLOPS (FMA/s)")
    measured = _measured(args)
    rows, rows_measured = [], []
    for k in parse_kernels(",".join(TABLE2_KERNELS)):
        rl, rs, dc = (predict(platform, k, e, args.n) for e in (None, sw, deca))
        if measured is not None and measured.measures(k):
            rm = predict(platform, k, measured, args.n)
            rows_measured.append({"kernel": k.name, "sw": sw.vo_tile(k), "sw_m": measured.vo_tile(k),
                                  "rs": rs.flops / 1e12, "rs_m": rm.flops / 1e12, "bound_m": rm.bound,
                                  "deca": dc.flops / 1e12, "speedup": dc.flops / rs.flops,
                                  "speedup_m": dc.flops / rm.flops})
        paper_rl, paper_rs = paper.TABLE2[k.name]
        rows.append({
            "kernel": k.name, "bytes": k.bytes_per_tile,
            "rl_paper": paper_rl, "rl": rl.flops / 1e12, "rl_err": rl.flops / 1e12 / paper_rl - 1,
            "rs_paper": paper_rs, "rs": rs.flops / 1e12, "rs_err": rs.flops / 1e12 / paper_rs - 1,
            "bound": rs.bound, "bound_paper": "MEM" if k.name in paper.TABLE2_MEM_BOUND else "VEC",
            "deca": dc.flops / 1e12, "deca_bound": dc.bound,
        })
    pct = "{:+.1%}".format
    print(format_table(rows, {
        "kernel": ("kernel", "{}"), "bytes": ("B/tile", "{:.1f}"),
        "rl_paper": ("R-L paper", "{:.1f}"), "rl": ("R-L model", "{:.2f}"), "rl_err": ("diff", pct),
        "rs_paper": ("R-S paper", "{:.1f}"), "rs": ("R-S model", "{:.2f}"), "rs_err": ("diff", pct),
        "bound_paper": ("bound paper", "{}"), "bound": ("bound model", "{}"),
        "deca": (f"DECA {paper.DSE_BEST[0]}/{paper.DSE_BEST[1]}", "{:.2f}"), "deca_bound": ("bound", "{}"),
    }))
    worst = max(rows, key=lambda r: max(abs(r["rl_err"]), abs(r["rs_err"])))
    mismatched = [r["kernel"] for r in rows if r["bound"] != r["bound_paper"]]
    print(f"largest deviation from the paper: {worst['kernel']} "
          f"(R-L {pct(worst['rl_err'])}, R-S {pct(worst['rs_err'])}); bounds "
          + (f"DISAGREE for {', '.join(mismatched)}" if mismatched else "agree with the paper for all 12 kernels"))
    if platform != PRESETS["spr-hbm"] or args.n != 16:
        print("note: the paper's numbers are for spr-hbm at N = 16")
    if measured is not None and len(rows_measured) < len(rows):
        print(f"\nnot in {measured.source} (so left out below): "
              + ", ".join(sorted({r['kernel'] for r in rows} - {r['kernel'] for r in rows_measured})))
    if rows_measured:
        print(f"\nTable 2 recomputed with the software engine measured on {measured.machine} "
              f"({measured.path} path): R-S TFLOPS and DECA {paper.DSE_BEST[0]}/{paper.DSE_BEST[1]}'s speedup")
        print(format_table(rows_measured, {
            "kernel": ("kernel", "{}"), "sw": ("SW cycles/tile paper", "{:.0f}"), "sw_m": ("measured", "{:.1f}"),
            "rs": ("R-S paper SW", "{:.2f}"), "rs_m": ("R-S measured SW", "{:.2f}"), "bound_m": ("bound", "{}"),
            "deca": ("DECA", "{:.2f}"), "speedup": ("DECA / paper SW", "{:.2f}x"),
            "speedup_m": ("DECA / measured SW", "{:.2f}x"),
        }))


def cmd_bord(args):
    from .plots import plot_bord

    platform, kernels = _setup(args)
    panels = _panels(args, platform, kernels, args.designs)
    _report([p for _, ps in panels for p in ps], args.out, "bord")
    print(f"wrote {plot_bord(platform, panels, args.out / 'bord.png', args.n)}")


def cmd_surface(args):
    from .plots import plot_surface

    platform, kernels = _setup(args)
    panels = _panels(args, platform, kernels, [(args.W, args.L)])
    _report([p for _, ps in panels for p in ps], args.out, "surface")
    print(f"wrote {plot_surface(platform, panels, args.out / 'surface.png', args.n)}")


def _design(point):
    return f"{{W={point.W}, L={point.L}}}"


def cmd_dse(args):
    from .plots import plot_dse

    platform, kernels = _setup(args)
    points = explore(platform, kernels, design_grid(args.W, args.L), args.n)
    names = [p.kernel for p in points[0].predictions]
    print(format_table([{"W": p.W, "L": p.L, "cost": p.cost, "gm": p.geomean_flops / 1e12,
                         "vec": ", ".join(p.vec_bound) or "-"} for p in points], {
        "W": ("W", "{}"), "L": ("L", "{}"), "cost": ("cost*", "{:g}"), "gm": ("geomean TFLOPS", "{:.2f}"),
        "vec": ("VEC-bound kernels", "{}"),
    }))
    print("* placeholder cost: 256 LUT entries per big LUT + W(W+1)/2 crossbar ports (deca.sim.model.dse)")
    csv_path = args.out / "dse.csv"
    with open(csv_path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["W", "L", "cost", *(f"{n} TFLOPS" for n in names), *(f"{n} bound" for n in names)])
        for p in points:
            w.writerow([p.W, p.L, p.cost, *(f"{q.flops / 1e12:.4f}" for q in p.predictions),
                        *(q.bound for q in p.predictions)])
    print(f"wrote {csv_path}")

    chosen = choose(points)
    best_w, best_l = paper.DSE_BEST
    value = best_value(points)
    print("model's choice (fewest LUTs, then smallest W, no kernel VEC-bound): "
          + (_design(chosen) if chosen else "none: every design leaves a kernel VEC-bound"))
    print(f"best geomean throughput per cost: {_design(value)} ({value.geomean_flops / 1e12:.2f} TFLOPS, cost {value.cost:g})")
    if chosen is None or (chosen.W, chosen.L) != paper.DSE_BEST:
        print(f"DISAGREES with the paper, which picked {{W={best_w}, L={best_l}}}")
    else:
        print(f"agrees with the paper's choice {{W={best_w}, L={best_l}}}")
    # The paper's three designs, from the grid when it has them.
    by_design = {(p.W, p.L): p for p in points}
    under, best, over = (by_design.get(d) or evaluate(platform, kernels, *d, args.n)
                         for d in (paper.DSE_UNDER, paper.DSE_BEST, paper.DSE_OVER))
    for p in (under, best, over):
        print(f"  {_design(p)} leaves VEC-bound: {', '.join(p.vec_bound) or 'none'}")
    s1, s2 = speedup(best, under), speedup(over, best)
    print(f"speedup {_design(best)} over {_design(under)}: {s1:.2f}x geomean over the kernels "
          f"(paper, simulated: {paper.DSE_BEST_OVER_UNDER:g}x)")
    print(f"speedup {_design(over)} over {_design(best)}: {s2:.3f}x (paper, simulated: under "
          f"{paper.DSE_OVER_OVER_BEST_MAX:g}x) -> "
          + ("agrees" if s2 < paper.DSE_OVER_OVER_BEST_MAX else "DISAGREES"))
    title = f"DSE, {platform.name}, N = {args.n}"
    print(f"wrote {plot_dse(points, args.out / 'dse.png', chosen, title)}")


def cmd_llm(args):
    from .llm_report import run_llm, run_paper

    if args.paper:
        given = [opt for opt, value in (("--preset", args.preset), ("--config", args.config),
                                        ("--checkpoint", args.checkpoint), ("--scheme", args.scheme),
                                        ("--measured", args.measured)) if value]
        if given:
            raise UsageError(f"--paper runs the paper's models, schemes and platform; drop {', '.join(given)}")
        return run_paper(args)
    return run_llm(args, _platform(args), _software(args), _measured(args))
