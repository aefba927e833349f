"""Golden-model decompression speed: compressed MB/s of `decompress` on an N x N matrix per scheme.

    .venv/bin/python benchmarks/bench_decompress.py [--size 4096] [--repeat 5] [--density 0.3]

Prints, per scheme, the median wall time over the repeats and the compressed bytes (values + mask
+ scales) and decompressed BF16 bytes processed per second. The machine is shared and noisy: read
the medians and their ratios, measured in one run, not single timings.
"""

import argparse
import statistics
import time

import numpy as np

from deca.golden import SCHEMES, compress, decompress

CODEBOOK = np.linspace(-2, 2, 16)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", type=int, default=4096)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--density", type=float, default=None, help="prune to this density (default: dense)")
    p.add_argument("--schemes", default=",".join(SCHEMES))
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()

    w = np.random.default_rng(args.seed).standard_normal((args.size, args.size)).astype(np.float32)
    print(f"decompress() on {args.size} x {args.size}, density {args.density or 1.0}, "
          f"median of {args.repeat} runs, seed {args.seed}")
    print(f"{'scheme':>9} {'compressed MB':>14} {'median s':>9} {'compressed MB/s':>16} {'BF16 out MB/s':>14}")
    for scheme in args.schemes.split(","):
        kwargs = {"codebook": CODEBOOK} if scheme == "codebook" else {}
        cm = compress(w, scheme, density=args.density, **kwargs)
        size = sum(cm.stream_bytes().values())
        times = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            decompress(cm)
            times.append(time.perf_counter() - t0)
        med = statistics.median(times)
        print(f"{scheme:>9} {size / 1e6:14.2f} {med:9.3f} {size / med / 1e6:16.1f} {2 * w.size / med / 1e6:14.1f}")


if __name__ == "__main__":
    main()
