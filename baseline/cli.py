"""``deca baseline``: build the software kernels, measure them on this machine, write the platform file."""

import argparse
from pathlib import Path

from deca.golden.summary import format_table
from deca.sim.model.measured import DEFAULT_OUT

from .build import build
from .decode import PATHS, REQUIRES, available_paths, choose_path, cpu_features
from .measure import DEFAULT_WORKLOADS, TARGET_FACTOR, XEON_REFERENCE, measure, parse_workloads, write


def _workloads(text):
    try:
        return parse_workloads(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def add_baseline_parser(sub):
    b = sub.add_parser("baseline", help="measure the software (AVX-512, AVX2, scalar) decompression kernels on this CPU")
    b.add_argument("--build", action="store_true", help="only build the kernels (setup runs this) and say where")
    b.add_argument("--workloads", type=_workloads, default=list(DEFAULT_WORKLOADS), metavar="SCHEME[:D],...",
                   help="schemes and densities (default: issue 19's table and every other scheme dense)")
    b.add_argument("--path", metavar="|".join(PATHS),
                   help="the kernel path the model reads (default: the fastest this CPU runs; every path it runs is "
                        "measured in L2 beside it)")
    b.add_argument("--runs", type=int, default=9, help="timed runs per workload in L2 (DRAM: half; default 9)")
    b.add_argument("--dram-factor", type=float, default=4, help="DRAM working set in multiples of the LLC (default 4)")
    b.add_argument("--cpu", type=int, help="CPU to pin to (default: the last one available)")
    b.add_argument("--seed", type=int, default=1, help="seed of the Gaussian weights (default 1)")
    b.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"output folder (default {DEFAULT_OUT})")
    b.set_defaults(func=cmd_baseline)


def cmd_baseline(args):
    lib = build()
    if args.build:
        print(f"software baseline kernels: {lib}")
        return
    if args.runs < 1 or not args.dram_factor > 0:
        raise ValueError("--runs must be at least 1 and --dram-factor positive")
    features = cpu_features()
    path = choose_path(args.path)
    avail = available_paths(features)
    lacking = [f"{p} (lacks {', '.join(f for f in REQUIRES[p] if f not in features)})" for p in PATHS if p not in avail]
    print(f"CPU features found: {', '.join(features) or 'none of those the paths use'}; paths: {', '.join(avail)}"
          + (f"; not {', '.join(lacking)}" if lacking else ""))
    doc = measure(args.workloads, path, args.runs, args.dram_factor, args.seed, args.cpu)
    doc["command"] = "deca " + " ".join(args.argv)
    rows = []
    for w in doc["workloads"]:
        ref = XEON_REFERENCE.get((w["scheme"], w["density"]))
        l2, dram = w["l2_cycles_per_tile"], w["dram_cycles_per_tile"]
        row = {
            "workload": f"{w['scheme']}@{w['density']:g}", "bytes": w["bytes_per_tile"],
            "l2": l2["median"], "l2_min": l2["min"], "dram": dram["median"], "dram_min": dram["min"],
            "xeon": f"{ref[0]} / {ref[1]}" if ref else "-",
            "ratio": f"{l2['median'] / ref[0]:.2f}x" + ("" if l2["median"] <= TARGET_FACTOR * ref[0] else " MISSED")
            if ref else "-",
            "slow": w["slow_tiles_per_pass"],
        }
        for p, m in w["paths"].items():
            row[f"{p}_l2"] = m["l2_cycles_per_tile"]["median"]
            row[f"{p}_x"] = f"{m['speedup_over_scalar']:.1f}x" if "speedup_over_scalar" in m else "-"
        rows.append(row)
    print(f"\n{doc['machine']['cpu']}, {path} path, CPU {doc['pinned_cpu']}: core ~{doc['core_ghz']:.2f} GHz "
          f"(estimated), TSC {doc['tsc_ghz']:.2f} GHz; core cycles per 16 x 32 tile to BF16")
    print(format_table(rows, {
        "workload": ("workload", "{}"), "bytes": ("B/tile", "{:.1f}"),
        "l2": ("L2 median", "{:.1f}"), "l2_min": ("min", "{:.1f}"),
        "dram": ("DRAM median", "{:.1f}"), "dram_min": ("min", "{:.1f}"),
        "xeon": ("Xeon L2 / DRAM", "{}"), "ratio": (f"L2 vs Xeon (target <= {TARGET_FACTOR}x)", "{}"),
        "slow": ("slow tiles/pass", "{}"),
    }))
    columns = {"workload": ("workload", "{}")}
    for p in doc["paths"]:
        columns[f"{p}_l2"] = (f"{p} L2 median", "{:.1f}")
        columns[f"{p}_x"] = ("vs scalar", "{}")
    print("\nEvery path this CPU runs, L2 medians measured in the same run (speed-up: scalar median / path median)")
    print(format_table(rows, columns))
    print(f"streaming read bandwidth: {doc['stream_bytes_per_cycle']:.2f} bytes per core cycle "
          f"({doc['stream_bytes_per_cycle'] * doc['core_ghz']:.1f} GB/s) on one core")
    la = doc["load_average"]
    print(f"load average before/after: {la['before'][0]:.2f} / {la['after'][0]:.2f} "
          f"on {doc['machine']['cpus_online']} CPUs (other processes share the core: read medians and minimums)")
    print(f"wrote {write(doc, args.out)} (the model reads it: deca model table / roof)")
