"""The PE's prefetches on one workload: how many repeat a line, come after the line's demand, or
fall outside the matrix's memory image (wasted bytes).

    .venv/bin/python benchmarks/bench_prefetcher.py [--W 8 --L 4] [--scheme bf16 --density 0.3] [--tiles 64]

Runs the PE on the Amaranth simulator through the regression's Harness (``deca.sim.bench.pe_bench``:
a core that presents requests on every free TEPL port, so the loaders accept tiles out of order,
and a memory that answers out of order with back-pressure), on the matrix's ``memory_image``
layout (values, masks, scales one after the other, byte-aligned). Every tile is checked bit for
bit as in the regression.
"""

import argparse

import numpy as np
from amaranth.sim import Simulator

from deca.golden import compress
from deca.golden.format import TILE_COLS, TILE_ROWS
from deca.hw.layouts import LINE_BYTES
from deca.hw.pe import PE
from deca.sim.bench import pe_bench
from deca.sim.bench.bus import AmaranthBus
from deca.sim.bench.memory import MemoryModel
from deca.sim.bench.stimulus import DEFAULT_BASE, tile_batch


class LoggedMemory(MemoryModel):
    """The MemoryModel, also recording the first cycle each line was demanded and every prefetch's cycle."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.first_demand, self.prefetch_cycles = {}, []

    def demand(self, addr, tag, cycle):
        self.first_demand.setdefault(addr, cycle)
        super().demand(addr, tag, cycle)

    def prefetch(self, addr, cycle):
        self.prefetch_cycles.append((addr, cycle))
        super().prefetch(addr, cycle)


def prefetch_audit(memory):
    """Counts of a run's prefetches: all, repeating a line, at or after the line's first demand,
    and the bytes of distinct lines wholly outside the image."""
    seen, repeated, late = set(), 0, 0
    for addr, cycle in memory.prefetch_cycles:
        repeated += addr in seen
        seen.add(addr)
        late += memory.first_demand.get(addr, cycle + 1) <= cycle
    outside = {a for a in seen if a + LINE_BYTES <= memory.base or a >= memory.end}
    return {"prefetches": len(memory.prefetch_cycles), "repeated": repeated, "after_demand": late,
            "wasted_bytes": LINE_BYTES * len(outside)}


def measure(W, L, scheme, density, tiles, seed, loaders=2):
    cm = compress(np.random.default_rng(seed).standard_normal((TILE_ROWS, TILE_COLS * tiles)).astype(np.float32),
                  scheme, density=density)
    batch = tile_batch(cm, f"{scheme}@{density}", DEFAULT_BASE)
    dut, result = PE(W, L, loaders=loaders), {}
    memories = []

    def memory(*args, **kwargs):
        memories.append(LoggedMemory(*args, **kwargs))
        return memories[-1]

    async def bench(ctx):
        b = pe_bench.Bench(AmaranthBus(ctx, dut), {"W": W, "L": L, "seed": seed, "loaders": loaders}, lambda *a: None)
        harness, _ = await b.run(batch)
        result.update(prefetch_audit(harness.memory), cycles=harness.cycle)

    pe_bench.MemoryModel = memory
    sim = Simulator(dut)
    sim.add_clock(1e-9)
    sim.add_testbench(bench)
    sim.run()
    return result


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--W", type=int, default=8)
    p.add_argument("--L", type=int, default=4)
    p.add_argument("--scheme", default="bf16")
    p.add_argument("--density", type=float, default=0.3)
    p.add_argument("--tiles", type=int, default=64)
    p.add_argument("--loaders", type=int, default=2)
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args(argv)
    r = measure(args.W, args.L, args.scheme, args.density, args.tiles, args.seed, args.loaders)
    print(f"W={args.W} L={args.L} {args.loaders} loaders, {args.scheme}@{args.density}, {args.tiles} tiles, "
          f"seed {args.seed}: {r['cycles']} cycles, {r['prefetches']} prefetches, {r['repeated']} repeat a line, "
          f"{r['after_demand']} at or after the line's demand, {r['wasted_bytes']} bytes wasted outside the image")


if __name__ == "__main__":
    main()
