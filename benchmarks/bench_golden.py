"""Golden-model speed: million weights per second of `compress` and `decompress`, per scheme.

    .venv/bin/python benchmarks/bench_golden.py [--size 4096] [--repeat 5] [--densities 1,0.5]
    .venv/bin/python benchmarks/bench_golden.py --smoke      # tiny sizes, one repeat: checks it runs

Runs in one thread of one process (numba kernels, no parallel loops). Prints, per scheme and
density, the median wall time of each over the repeats, the rates in million weights per second
and the decompressed BF16 output in MB/s. The first call of each kernel (its compilation or the
load from numba's cache) is made before timing. The machine may be shared and noisy: read the
medians, measured in one run, not single timings.
"""

import argparse
import statistics
import time

import numpy as np

from deca.golden import SCHEMES, compress, decompress

CODEBOOK = np.linspace(-2, 2, 16)


def median_time(fn, repeat):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), result


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", type=int, default=4096, help="the matrix is SIZE x SIZE float32 (default 4096)")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--densities", default="1,0.5", help="comma-separated; 1 is the dense format")
    p.add_argument("--schemes", default=",".join(SCHEMES))
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--smoke", action="store_true", help="64 x 96 weights, one repeat (for CI)")
    args = p.parse_args(argv)
    shape = (64, 96) if args.smoke else (args.size, args.size)
    repeat = 1 if args.smoke else args.repeat

    w = np.random.default_rng(args.seed).standard_normal(shape).astype(np.float32)
    print(f"compress() and decompress() on {shape[0]} x {shape[1]} float32, median of {repeat} runs, seed {args.seed}")
    print(f"{'scheme':>9} {'density':>7} {'compress s':>10} {'M weights/s':>11} {'decompress s':>12} "
          f"{'M weights/s':>11} {'BF16 out MB/s':>13}")
    for scheme in args.schemes.split(","):
        kwargs = {"codebook": CODEBOOK} if scheme == "codebook" else {}
        for density in (float(d) for d in args.densities.split(",")):
            d = None if density == 1 else density
            decompress(compress(w[:32, :64], scheme, density=d, **kwargs))  # compile or load the kernels
            t_c, cm = median_time(lambda: compress(w, scheme, density=d, **kwargs), repeat)
            t_d, _ = median_time(lambda: decompress(cm), repeat)
            print(f"{scheme:>9} {density:7.2f} {t_c:10.3f} {w.size / t_c / 1e6:11.1f} {t_d:12.3f} "
                  f"{w.size / t_d / 1e6:11.1f} {2 * w.size / t_d / 1e6:13.1f}", flush=True)


if __name__ == "__main__":
    main()
