"""Golden-model speed: million weights per second of `compress` and `decompress`, per scheme.

    .venv/bin/python benchmarks/bench_golden.py [--size 4096] [--repeat 5] [--densities 1,0.5]
    .venv/bin/python benchmarks/bench_golden.py --smoke      # tiny sizes, one repeat: checks it runs
    .venv/bin/python benchmarks/bench_golden.py --json out/golden/golden.json   # also the record

Runs in one thread of one process (numba kernels, no parallel loops). Prints, per scheme and
density, the median CPU time of this process over the repeats (``time.process_time``: the speed
of one core, which other programs on a shared machine disturb much less than they do wall time),
the rates in million weights per CPU second, and the median wall time of the whole call for
comparison. The first call of each kernel (its compilation or the load from numba's cache) is
made before timing.
"""

import argparse
import json
import shlex
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from deca.golden import SCHEMES, compress, decompress

CODEBOOK = np.linspace(-2, 2, 16)


def median_times(fn, repeat):
    """(median CPU seconds, median wall seconds, fn's result)."""
    cpu, wall = [], []
    for _ in range(repeat):
        c0, w0 = time.process_time(), time.perf_counter()
        result = fn()
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - w0)
    return statistics.median(cpu), statistics.median(wall), result


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", type=int, default=4096, help="the matrix is SIZE x SIZE float32 (default 4096)")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--densities", default="1,0.5", help="comma-separated; 1 is the dense format")
    p.add_argument("--schemes", default=",".join(SCHEMES))
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--smoke", action="store_true", help="64 x 96 weights, one repeat (for CI)")
    p.add_argument("--json", type=Path, help="also write the rows to this JSON file (deca docs record golden)")
    args = p.parse_args(argv)
    shape = (64, 96) if args.smoke else (args.size, args.size)
    repeat = 1 if args.smoke else args.repeat

    w = np.random.default_rng(args.seed).standard_normal(shape).astype(np.float32)
    print(f"compress() and decompress() on {shape[0]} x {shape[1]} float32, median of {repeat} runs, seed {args.seed}")
    print(f"{'scheme':>9} {'density':>7} {'compress':>9} {'M weights/s':>11} {'wall s':>7} {'decompress':>10} "
          f"{'M weights/s':>11} {'wall s':>7}")
    rows = []
    for scheme in args.schemes.split(","):
        kwargs = {"codebook": CODEBOOK} if scheme == "codebook" else {}
        for density in (float(d) for d in args.densities.split(",")):
            d = None if density == 1 else density
            decompress(compress(w[:32, :64], scheme, density=d, **kwargs))  # compile or load the kernels
            c_cpu, c_wall, cm = median_times(lambda: compress(w, scheme, density=d, **kwargs), repeat)
            d_cpu, d_wall, _ = median_times(lambda: decompress(cm), repeat)
            print(f"{scheme:>9} {density:7.2f} {c_cpu:8.3f}s {w.size / max(c_cpu, 1e-9) / 1e6:11.1f} {c_wall:7.3f} "
                  f"{d_cpu:9.3f}s {w.size / max(d_cpu, 1e-9) / 1e6:11.1f} {d_wall:7.3f}", flush=True)
            rows.append({"scheme": scheme, "density": density, "compress_cpu_s": c_cpu, "compress_wall_s": c_wall,
                         "compress_mws": w.size / max(c_cpu, 1e-9) / 1e6, "decompress_cpu_s": d_cpu,
                         "decompress_wall_s": d_wall, "decompress_mws": w.size / max(d_cpu, 1e-9) / 1e6})
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        command = "python benchmarks/bench_golden.py " + shlex.join(sys.argv[1:] if argv is None else argv)
        args.json.write_text(json.dumps({"shape": list(shape), "repeat": repeat, "seed": args.seed,
                                         "command": command.strip(), "rows": rows}, indent=1) + "\n")
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
