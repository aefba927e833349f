"""Marginal speed of whole commands: the extra simulated cycles over the extra CPU seconds of a
``deca sweep`` point and of ``deca verify`` between a small and a large number of tiles.

    .venv/bin/python benchmarks/bench_marginal.py [--W 32 --L 8] [--tiles 1024,16384] [--repeat 3] [--json PATH]
    .venv/bin/python benchmarks/bench_marginal.py --smoke    # W = 8, L = 4, 16 and 32 tiles, one repeat

Each command runs as a user runs it (``deca sweep --schemes bf8 --densities 0.2 --modes tepl --jobs 1``,
``deca verify --seed 1``), builds made before timing; its CPU time is its process's and its
children's (the worker processes), so everything counts: start-up, the workloads, their compression
and golden tiles, the run, the checks, the records. What a run costs whatever its size (start-up,
imports, the report) cancels in the difference, which leaves what each tile costs:
(cycles(large) - cycles(small)) / (CPU(large) - CPU(small)), from the median CPU seconds of the
repeats (small and large alternate). Printed beside it: the fast engine's C++ loop alone, measured
in this process on the large sweep point (``benchmarks/bench_engine.py``'s timer), the bound of both.
"""

import argparse
import json
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

DECA = str(Path(sys.executable).with_name("deca"))


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def sweep_args(W, L, tiles, out):
    return ["sweep", "--W", str(W), "--L", str(L), "--schemes", "bf8", "--densities", "0.2", "--modes", "tepl",
            "--jobs", "1", "--seed", "1", "--baseline", "none", "--tiles", str(tiles), "--out", str(out)]


def verify_args(W, L, tiles, out):
    return ["verify", "--W", str(W), "--L", str(L), "--seed", "1", "--tiles", str(tiles), "--out", str(out)]


def sweep_cycles(out):
    return sum(r["cycles"] for r in json.loads((out / "results.json").read_text()))


def verify_cycles(out):
    (report,) = out.glob("verify-*.json")
    return json.loads(report.read_text())["cycles"]


COMMANDS = {"sweep": (sweep_args, sweep_cycles), "verify": (verify_args, verify_cycles)}


def run(name, W, L, tiles, out):
    """(cycles, CPU seconds) of one command, in a fresh output folder."""
    args, cycles = COMMANDS[name]
    c0 = children_cpu()
    subprocess.run([DECA, *args(W, L, tiles, out)], check=True, stdout=subprocess.DEVNULL)
    return cycles(out), children_cpu() - c0


def loop_speed(W, L, tiles):
    """Cycles per CPU second of the C++ loop alone on the sweep point (``bench_engine``'s timer around
    ``VerilatorBus.run``, in this process)."""
    from bench_engine import LOOP, measure

    from deca.sim.measure import campaign
    from deca.sim.measure.point import Point

    LOOP.update(cpu=0.0, cycles=0)
    with tempfile.TemporaryDirectory() as out:
        measure("fast", campaign._generate(W, L, 2, engine="fast"), W, L, [Point(W, L, "bf8@0.2", "tepl")], tiles, Path(out))
    return LOOP["cycles"] / LOOP["cpu"]


def save(path, rec):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rec, indent=1) + "\n")
    print(f"wrote {path}")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--W", type=int, default=32)
    p.add_argument("--L", type=int, default=8)
    p.add_argument("--tiles", default="1024,16384", help="the small and the large tile count (default 1024,16384)")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--commands", default="sweep,verify", help="which to measure (default sweep,verify)")
    p.add_argument("--json", type=Path, help="also write the record here")
    p.add_argument("--smoke", action="store_true", help="W = 8, L = 4, 16 and 32 tiles, one repeat")
    args = p.parse_args(argv)
    if args.smoke:
        args.W, args.L, args.tiles, args.repeat = 8, 4, "16,32", 1
    small, large = (int(t) for t in args.tiles.split(","))
    names = args.commands.split(",")
    rec = {"command": "python " + shlex.join(["benchmarks/bench_marginal.py", *(sys.argv[1:] if argv is None else argv)]),
           "W": args.W, "L": args.L, "tiles": [small, large], "repeat": args.repeat, "commands": {}}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        # Builds (Verilog, engine) before timing.
        run(names[0], args.W, args.L, small, tmp / "warm-up")
        for name in names:
            cpu, cycles = {small: [], large: []}, {}
            for i in range(args.repeat):
                for tiles in (small, large):
                    cycles[tiles], seconds = run(name, args.W, args.L, tiles, tmp / f"{name}-{tiles}-{i}")
                    cpu[tiles].append(seconds)
                    print(f"{name} {tiles} tiles: {cycles[tiles]} cycles, {seconds:.2f} CPU s", flush=True)
            med = {t: statistics.median(cpu[t]) for t in cpu}
            marginal = (cycles[large] - cycles[small]) / (med[large] - med[small])
            args_of = COMMANDS[name][0]
            rec["commands"][name] = {
                "command": "deca " + shlex.join(args_of(args.W, args.L, "N", "OUT")),
                "cycles": {str(t): cycles[t] for t in cycles}, "cpu_seconds": {str(t): cpu[t] for t in cpu},
                "cpu_median_seconds": {str(t): med[t] for t in med},
                "marginal_cycles_per_cpu_s": marginal}
            print(f"{name}: marginal {marginal:,.0f} cycles per CPU second (median CPU s {med[small]:.2f}, "
                  f"{med[large]:.2f})", flush=True)
    rec["loop_cycles_per_cpu_s"] = loop_speed(args.W, args.L, large)
    print(f"the C++ loop alone: {rec['loop_cycles_per_cpu_s']:,.0f} cycles per CPU second ({large} tiles)")
    if args.json:
        save(args.json, rec)


if __name__ == "__main__":
    main()
