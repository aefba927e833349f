"""Measurements of the RTL PE in its system: one point is a design (W, L), a workload (scheme and
density, or a user's matrix) and an invocation mode, run tile by tile through the models of ``deca.sim.bench``.

Every number of a record comes from the PE's own performance counters or from the models around
it; the Bench checks the counters against what the models observed and every tile against the
golden model before a record is written. The analytic columns are the Roof-Surface model's
(``deca.sim.model.bubbles``, ``deca.sim.model.roof``) for the same workload and platform.
"""

import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from deca.golden import TILE_ELEMS, compress, load
from deca.golden.format import TILE_COLS, TILE_ROWS
from deca.hw.layouts import LINE_BYTES
from deca.hw.params import LOADERS

from deca.sim.bench.bus import drive_idle, reset
from deca.sim.bench.cores import MODES, gemm_core
from deca.sim.bench.harness import Harness
from deca.sim.bench.pe_bench import Bench
from deca.sim.bench.stimulus import DEFAULT_BASE, tile_batch
from deca.sim.bench.system import System
from deca.sim.model.bubbles import bpv_expected, bpv_monte_carlo
from deca.sim.model.engines import DecaEngine
from deca.sim.model.kernels import kernel, kernel_from_matrix
from deca.sim.model.platform import Platform
from deca.sim.model.roof import predict

from .records import COLUMNS, write_record

#: The PE parameters a campaign's testbench parameters name besides W and L.
DESIGN_PARAMS = ("tags", "sqq_bytes", "contexts", "tout_buffers", "addr_bits", "id_bits", "loaders")

@dataclass(frozen=True)
class Point:
    """One measurement. ``workload``: "scheme@density" (a generated matrix) or a .deca file path;
    ``loaders``: the PE's loader count (its design is (W, L, loaders))."""

    W: int
    L: int
    workload: str
    mode: str
    loaders: int = LOADERS

    def __post_init__(self):
        if self.mode not in MODES:
            raise ValueError(f"invocation mode must be one of {', '.join(MODES)}, got {self.mode!r}")

    @property
    def key(self):
        name = Path(self.workload).stem if self.is_file else self.workload
        return f"{design_key(self.W, self.L, self.loaders)}-{name}-{self.mode}"

    @property
    def design(self):
        return self.W, self.L, self.loaders

    @property
    def is_file(self):
        return "@" not in self.workload

    def as_dict(self):
        return {"W": self.W, "L": self.L, "workload": self.workload, "mode": self.mode, "loaders": self.loaders}


def design_key(W, L, loaders):
    """How keys and file names name a design: W32L8, and W32L8ld3 with another loader count than the
    paper's (as ``deca.hw.generate.top_name`` does)."""
    return f"W{W}L{L}" + (f"ld{loaders}" if loaders != LOADERS else "")


def workload_name(scheme, density):
    return f"{scheme}@{float(density):g}"


def parse_workload(name):
    scheme, _, density = name.partition("@")
    return scheme, float(density)


def seed_for(seed, key):
    """A generator seed of its own for each workload or point, from the run's seed."""
    return [seed, zlib.crc32(key.encode())]


def workload_matrix(workload, tiles, seed):
    """The CompressedMatrix of a workload: ``tiles`` tiles of Gaussian weights (one tile row, so
    the tiles lie one after the other in memory as a GeMM walks them), pruned to the density by
    magnitude, which puts the stored elements at uniformly random places; or a user's .deca file."""
    if "@" not in workload:
        return load(workload)
    scheme, density = parse_workload(workload)
    w = np.random.default_rng(seed_for(seed, workload)).standard_normal((TILE_ROWS, TILE_COLS * tiles))
    return compress(w.astype(np.float32), scheme, density=None if density == 1 else density)


def platform_of(system):
    """The Roof-Surface platform with the System's memory bandwidth (which may be overridden)."""
    return Platform(system.platform, system.cores, system.freq_hz,
                    system.bytes_per_cycle * system.cores * system.freq_hz)


async def measure_point(bench, point, system, tiles, seed):
    """Run ``point`` on the PE of ``bench`` (a ``deca.sim.pe_bench.Bench`` with the System's memory
    and no core roughness); returns its record. ``tiles``: how many tiles (of a file: the first ones)."""
    cm = workload_matrix(point.workload, tiles, seed)
    batch = tile_batch(cm, point.key, DEFAULT_BASE)
    batch.requests = batch.requests[:tiles]
    bench.rng = np.random.default_rng(seed_for(seed, point.key))
    harness, counters = await bench.run(
        batch, core=lambda requests, rng, **kw: gemm_core(point.mode, requests, rng, **kw,
                                                          **system.core_kwargs(point.mode)))
    return record(point, system, cm, len(batch.requests), seed, harness, counters)


async def measure_points(bus, p, log, harness=Harness):
    """Measure the points of the testbench parameters ``p`` one after another on the PE behind ``bus``,
    each from reset, each record written to ``p["out"]`` as soon as it is measured. ``p``: the design's
    parameters, ``system`` (a ``System`` as a dict), ``points``, ``tiles``, ``seed`` and ``out``;
    ``harness``: the Harness class (the fast engine's on its bus)."""
    system = System(**p["system"])
    bench = Bench(bus, {**{name: p[name] for name in ("W", "L", *DESIGN_PARAMS)}, "seed": p["seed"], "core": {},
                        "memory": system.memory_kwargs(), "prefetch_degree": system.prefetch_degree}, log, harness)
    for fields in p["points"]:
        point = Point(**fields)
        # Each point from reset: what one leaves in the PE (tags, queues, prefetcher) must not change the
        # next one's cycles, so that a record is the same however points are shared among runs.
        drive_idle(bus, bench.ports.inputs)
        await reset(bus)
        rec = await measure_point(bench, point, system, p["tiles"], p["seed"])
        write_record(p["out"], rec)
        log("%s: %.1f cycles per tile, bpv %.4f", point.key, rec["cycles_per_tile"], rec["bpv_measured"])


def record(point, system, cm, tiles, seed, harness, counters):
    """The measured and the analytic numbers of one run, as a dict of ``COLUMNS``."""
    W, L, cfg = point.W, point.L, cm.config
    cycles, memory = harness.cycle, harness.memory
    vops, bubbles = counters["VOPS"], counters["BUBBLE_CYCLES"]
    platform = platform_of(system)
    if point.is_file:
        # The first tiles only: their own windows and bytes.
        kern = kernel_from_matrix(cm, tiles=tiles)
        analytic = bpv_expected(W, L, cfg.q_bits, cfg.sparse, cm.density)
    else:
        scheme, density = parse_workload(point.workload)
        kern = kernel(scheme, None if density == 1 else density)
        analytic = bpv_expected(W, L, cfg.q_bits, cfg.sparse, density)
    pred = predict(platform, kern, DecaEngine(W, L), n=system.batch)
    nbytes, lines = _stream_bytes(harness.core.requests)
    fields = {
        "key": point.key, "W": W, "L": L, "loaders": harness.ports.loaders, "workload": point.workload,
        "scheme": cm.scheme,
        "density": float(cm.density), "mode": point.mode, "tiles": tiles, "seed": seed, "cycles": cycles,
        "cycles_per_tile": cycles / tiles, "vops": vops, "bubbles": bubbles, "bpv_measured": bubbles / vops,
        "bpv_analytic": analytic, "bpv_masks": bpv_monte_carlo(cm, W, L, tiles),
        "starve_cycles": counters["STARVE_CYCLES"], "backpressure_cycles": counters["BACKPRESSURE_CYCLES"],
        "busy_cycles": counters["BUSY_CYCLES"], "squashes": counters["SQUASHES"], "bytes_per_tile": nbytes / tiles,
        "lines_per_tile": lines / tiles, "lines_fetched": memory.lines_fetched, "lines_demanded": counters["LINES_DEMANDED"],
        "lines_prefetched": counters["LINES_PREFETCHED"], "prefetch_wasted_bytes": wasted_prefetch_bytes(memory),
        "util_mem": memory.channel_busy(cycles) / cycles,
        "util_tmul": harness.core.tmul_busy / cycles, "util_deca": (vops + bubbles) / cycles,
        "tflops": tiles / cycles * platform.cycles_per_s * TILE_ELEMS * system.batch / 1e12,
        "predicted_cycles_per_tile": platform.cycles_per_s / pred.tps, "predicted_tflops": pred.flops / 1e12,
        "predicted_bound": pred.bound,
    }
    assert set(fields) == set(COLUMNS)
    return {name: fields[name] for name in COLUMNS} | {"system": system.as_dict()}


def wasted_prefetch_bytes(memory):
    """Bytes of the distinct lines prefetched wholly outside the matrix's memory image (past its
    last tile, or before its first): fetched for nothing."""
    outside = {a for a in memory.prefetches if a + LINE_BYTES <= memory.base or a >= memory.end}
    return LINE_BYTES * len(outside)


def _stream_bytes(requests):
    """Compressed bytes of the requests' tiles (a scale block shared by tiles counts once) and the
    64-byte lines they touch."""
    spans = np.unique(np.array([(r.meta[f"{s}_addr"], r.meta[f"{s}_len"]) for r in requests
                                for s in ("val", "mask", "scale")], np.int64).reshape(-1, 2), axis=0)
    addr, n = spans[spans[:, 1] > 0].T
    # The lines of each span as [first, end), sorted; overlapping runs merged, then counted.
    first, end = addr // LINE_BYTES, -(-(addr + n) // LINE_BYTES)
    order = np.argsort(first, kind="stable")
    first, reach = first[order], np.maximum.accumulate(end[order])
    starts = np.flatnonzero(np.r_[True, first[1:] >= reach[:-1]])
    lines = int((reach[np.r_[starts[1:] - 1, len(first) - 1]] - first[starts]).sum()) if len(first) else 0
    return int(n.sum()), lines
