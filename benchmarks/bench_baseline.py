"""Golden ``decompress`` with the NumPy reference against the C kernels (``engine="baseline"``).

    .venv/bin/python benchmarks/bench_baseline.py [--size 4096] [--repeat 5] [--density 0.3]

Prints, per scheme, the median wall time of each engine over the repeats and the speedup. The
kernels' cycles per tile on this core are what ``deca baseline`` measures (pinned, TSC-timed,
L2 and DRAM); this script measures the whole-matrix path a user calls. The machine is shared and
noisy: read the medians and their ratios, measured in one run, not single timings.
"""

import argparse
import statistics
import time

import numpy as np

from deca.baseline import choose_path
from deca.golden import SCHEMES, compress, decompress

CODEBOOK = np.linspace(-2, 2, 16)


def median_seconds(fn, repeat):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", type=int, default=4096)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--density", type=float, default=None, help="prune to this density (default: dense)")
    p.add_argument("--schemes", default=",".join(SCHEMES))
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()

    w = np.random.default_rng(args.seed).standard_normal((args.size, args.size)).astype(np.float32)
    print(f"decompress() on {args.size} x {args.size}, density {args.density or 1.0}, median of {args.repeat} "
          f"runs, seed {args.seed}; baseline kernels: {choose_path()} path")
    print(f"{'scheme':>9} {'numpy s':>9} {'baseline s':>11} {'speedup':>8}")
    for scheme in args.schemes.split(","):
        kwargs = {"codebook": CODEBOOK} if scheme == "codebook" else {}
        cm = compress(w, scheme, density=args.density, **kwargs)
        if not np.array_equal(decompress(cm, engine="baseline"), decompress(cm)):
            raise SystemExit(f"{scheme}: the engines disagree")
        ref = median_seconds(lambda: decompress(cm), args.repeat)
        fast = median_seconds(lambda: decompress(cm, engine="baseline"), args.repeat)
        print(f"{scheme:>9} {ref:9.3f} {fast:11.4f} {ref / fast:7.1f}x")


if __name__ == "__main__":
    main()
