"""Golden ``decompress`` with the NumPy reference against the C kernels (``engine="baseline"``).

    .venv/bin/python benchmarks/bench_baseline.py [--rows 4096 --cols 4096] [--workloads bf8:0.5,mxfp4] [--repeat 5]

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
from deca.baseline.measure import parse_workloads
from deca.golden import compress, decompress

def median_seconds(fn, repeat):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=4096, help="matrix rows M (default 4096)")
    p.add_argument("--cols", type=int, default=4096, help="matrix columns K (default 4096)")
    p.add_argument("--workloads", type=parse_workloads, default=parse_workloads("bf8,bf8:0.5,bf16:0.5,mxfp4,int4"),
                   help="scheme[:density],... (default bf8,bf8:0.5,bf16:0.5,mxfp4,int4)")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()

    rng = np.random.default_rng(args.seed)
    w = rng.standard_normal((args.rows, args.cols)).astype(np.float32)
    print(f"decompress() of a {args.rows} x {args.cols} Gaussian matrix (seed {args.seed}), median of "
          f"{args.repeat} runs; baseline kernels: {choose_path()} path")
    print(f"{'workload':>12} {'numpy s':>9} {'baseline s':>11} {'speedup':>8}")
    for scheme, density in args.workloads:
        cm = compress(w, scheme, density=None if density == 1 else density)
        if not np.array_equal(decompress(cm, engine="baseline"), decompress(cm)):
            raise SystemExit(f"{scheme}: the engines disagree")
        ref = median_seconds(lambda: decompress(cm), args.repeat)
        fast = median_seconds(lambda: decompress(cm, engine="baseline"), args.repeat)
        print(f"{scheme + '@' + format(density, 'g'):>12} {ref:9.3f} {fast:11.4f} {ref / fast:7.1f}x")


if __name__ == "__main__":
    main()
