"""Measurement speed: simulated cycles per CPU second of the fast engine and of the cocotb path.

    .venv/bin/python benchmarks/bench_engine.py [--W 32 --L 8] [--tiles 64] [--fast-tiles 1024] [--repeat 3]
    .venv/bin/python benchmarks/bench_engine.py --smoke    # W = 8, L = 4, one workload, 4 tiles: checks it runs

Each engine measures the same points (``deca run``'s default workloads in both modes, or
``--workloads``) in one worker run, as a campaign does (``deca.sim.measure.campaign._measure``), on
builds made before timing; the records of both must be equal (the engines' contract). The CPU time
is this process's and its children's (the cocotb simulator is a child), so everything a point costs
counts: the workload's compression, the golden tiles, the run, the record. Printed: per engine and
repeat the simulated cycles (the sum of the records' cycles), CPU and wall seconds, the median
cycles per CPU second and the ratio; then the fast engine alone on ``--fast-tiles`` tiles per point,
where the run itself dominates, with the CPU time of the C++ loop alone (``VerilatorBus.run``);
with ``--compilers clang++,c++`` that part alternates between engines built by each compiler
(``DECA_ENGINE_CXX``), so their ratio comes from one run.
"""

import argparse
import os
import resource
import statistics
import tempfile
import time
from pathlib import Path

from deca.hw.generate import top_name
from deca.sim.bench.engine import VerilatorBus, build, compiler
from deca.sim.bench.ports import PePorts
from deca.sim.bench.system import system
from deca.sim.measure import campaign
from deca.sim.measure.cli import RUN_WORKLOADS
from deca.sim.measure.point import Point
from deca.sim.measure.records import first_difference, read_records


LOOP = {"cpu": 0.0, "cycles": 0}  # the C++ loop's share of the fast engine's runs


def _timed(run):
    def timed(self, spec):
        c0 = time.process_time()
        result = run(self, spec)
        LOOP["cpu"] += time.process_time() - c0
        LOOP["cycles"] += result.cycle
        return result
    return timed


VerilatorBus.run = _timed(VerilatorBus.run)


def cpu_seconds():
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def measure(engine, verilog, W, L, points, tiles, out):
    """(records, CPU seconds, wall seconds) of one worker run of ``points``."""
    params = {"system": system("spr-hbm").as_dict(), "tiles": tiles, "seed": 1, "loaders": 2, "out": str(out)}
    c0, w0 = cpu_seconds(), time.perf_counter()
    campaign._measure("verilator", verilog, W, L, points, params, out.name, engine)
    cpu, wall = cpu_seconds() - c0, time.perf_counter() - w0
    records = read_records(out)
    return [records[p.key] for p in points], cpu, wall


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--W", type=int, default=32)
    p.add_argument("--L", type=int, default=8)
    p.add_argument("--tiles", type=int, default=64, help="tiles per point, both engines (default 64)")
    p.add_argument("--fast-tiles", type=int, default=1024, help="tiles per point, fast engine alone (default 1024)")
    p.add_argument("--workloads", default=",".join(RUN_WORKLOADS))
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--compilers", help="C++ compilers of the fast engine to compare at --fast-tiles, comma-separated "
                   "(default: the one deca.sim.bench.engine.compiler() picks)")
    p.add_argument("--smoke", action="store_true", help="W = 8, L = 4, bf8@0.5 in both modes, 4 tiles, one repeat")
    args = p.parse_args(argv)
    if args.smoke:
        args.W, args.L, args.tiles, args.fast_tiles, args.workloads, args.repeat = 8, 4, 4, 8, "bf8@0.5", 1
    W, L = args.W, args.L
    points = [Point(W, L, w, m) for w in args.workloads.split(",") for m in ("tepl", "store")]
    verilog = {engine: campaign._generate(W, L, 2, engine=engine) for engine in ("python", "fast")}
    top = top_name("pe", W, L)
    print(f"W={W} L={L}, {len(points)} points; building (not timed)", flush=True)
    build(verilog["fast"], top, PePorts())
    rates = {}
    with tempfile.TemporaryDirectory() as tmp:
        measure("python", verilog["python"], W, L, points[:1], 1, Path(tmp) / "warm-up")  # the cocotb build
        for engine in ("python", "fast"):
            rates[engine] = []
            for i in range(args.repeat):
                records, cpu, wall = measure(engine, verilog[engine], W, L, points, args.tiles, Path(tmp) / f"{engine}-{i}")
                cycles = sum(r["cycles"] for r in records)
                rates[engine].append(cycles / cpu)
                print(f"{engine:>6} engine, {args.tiles} tiles per point: {cycles} cycles, {cpu:.2f} s CPU, "
                      f"{wall:.2f} s wall: {cycles / cpu:,.0f} cycles per CPU second", flush=True)
                if engine == "fast":
                    python_records = read_records(Path(tmp) / "python-0")
                    diff = first_difference([python_records[p.key] for p in points], records, ("python", "fast"))
                    assert diff is None, f"the engines' records differ: {diff}"
        python, fast = (statistics.median(rates[e]) for e in ("python", "fast"))
        print(f"median: python {python:,.0f}, fast {fast:,.0f} cycles per CPU second: {fast / python:.1f}x")
        compilers = args.compilers.split(",") if args.compilers else [compiler()[0]]
        for cxx in compilers:
            os.environ["DECA_ENGINE_CXX"] = cxx
            print(f"building with {cxx}: {compiler()[1]} (not timed)", flush=True)
            build(verilog["fast"], top, PePorts())
        big = {cxx: [] for cxx in compilers}
        loop = {cxx: [0.0, 0] for cxx in compilers}
        for i in range(args.repeat):
            for cxx in compilers:
                os.environ["DECA_ENGINE_CXX"] = cxx
                LOOP.update(cpu=0.0, cycles=0)
                records, cpu, wall = measure("fast", verilog["fast"], W, L, points, args.fast_tiles, Path(tmp) / f"big-{i}")
                cycles = sum(r["cycles"] for r in records)
                big[cxx].append(cycles / cpu)
                loop[cxx][0] += LOOP["cpu"]
                loop[cxx][1] += LOOP["cycles"]
                print(f"  fast engine ({cxx}), {args.fast_tiles} tiles per point: {cycles} cycles, {cpu:.2f} s CPU, "
                      f"{wall:.2f} s wall: {cycles / cpu:,.0f} cycles per CPU second", flush=True)
        first = statistics.median(big[compilers[0]])
        for cxx in compilers:
            print(f"median: fast ({cxx}) {statistics.median(big[cxx]):,.0f} cycles per CPU second at {args.fast_tiles} "
                  f"tiles per point ({statistics.median(big[cxx]) / first:.2f}x {compilers[0]}); "
                  f"the C++ loop alone {loop[cxx][1] / loop[cxx][0]:,.0f}")


if __name__ == "__main__":
    main()
