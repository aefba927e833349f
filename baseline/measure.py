"""Cycles per tile of the C kernels on this machine, and the platform file the model reads.

Method (``deca baseline``): the process is pinned to one core; each workload is a golden-compressed
Gaussian matrix of one scheme and density. *L2*: a set of tiles of about 256 KiB of compressed
streams (at least 256 tiles), decoded once to warm the caches, then timed run after run. *DRAM*:
the same tiles replicated to a working set several times the last-level cache, so each run streams
from memory. Each run decodes the tiles in timed calls of 128 tiles; medians and minimums are over
the calls of all runs. Every tile is decoded into one 1 KiB BF16 buffer, as a core would feed its matrix
engine from L1. Times come from the TSC inside the C call; the core clock in TSC ticks is
estimated by chains of dependent integer adds (one per core cycle) around every measurement, the
fastest chain counting (interference only slows a chain), so cycles per tile are core cycles.
Streaming bandwidth: one pass of 64-byte loads over a buffer larger than the LLC, in bytes per
core cycle.

Every path this CPU runs is measured in L2 in the same run, the paths taking turns run by run
(so that other processes' load falls on all of them alike), and its speed-up over the scalar loop
is the ratio of the medians; DRAM is measured for the chosen path (the model's).

The platform file (JSON, ``FORMAT``) holds the machine, the CPU features found, the chosen path, the
clocks, the bandwidth and one entry per workload: scheme, density, sparse, bytes per tile, the
chosen path's L2 and DRAM cycles per tile (median and minimum over the runs) and slow-path tiles,
and per path its L2 cycles and speed-up over the scalar loop. ``deca model`` reads it
(``software_engine``). ``paths.csv`` beside it has one row per workload and path.
"""

import csv
import ctypes
import json
import os
import platform as py_platform
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from deca.golden import compress
from deca.golden.format import TILE_BYTES
from deca.golden.schemes import get_scheme
from deca.sim.model.measured import FORMAT, PLATFORM_FILE

from .build import compiler, library_path
from .decode import Stats, TileSet, available_paths, choose_path, cpu_features, lib


#: The workloads of issue 19's table with the L2 and DRAM core cycles per tile measured there on an
#: AVX-512 Xeon (the target: within 1.25x of the L2 numbers).
XEON_REFERENCE = {
    ("bf8", 1.0): (49, 109), ("bf8", 0.5): (72, 74), ("bf8", 0.2): (66, 66), ("bf8", 0.05): (61, 62),
    ("bf16", 0.5): (51, 119), ("bf16", 0.05): (48, 48), ("mxfp4", 1.0): (42, 62), ("int4", 1.0): (70, 75),
}
TARGET_FACTOR = 1.25
#: The rest of the paper's Table 2 kernels, so the model reads them measured rather than
#: interpolated, and every other scheme of the golden model dense. Dense BF16 is a plain 1 KiB
#: copy per tile: the load/store floor of this core (the model charges it 0).
OTHER_WORKLOADS = (("bf8", 0.3), ("bf8", 0.1), ("bf16", 0.3), ("bf16", 0.2), ("bf16", 0.1), ("bf16", 1.0),
                   ("fp8e4m3", 1.0), ("nvfp4", 1.0), ("int8", 1.0), ("int2", 1.0), ("nf4", 1.0), ("int1", 1.0),
                   ("ternary", 1.0), ("mxfp4", 0.5))
DEFAULT_WORKLOADS = (*XEON_REFERENCE, *OTHER_WORKLOADS)

L2_BYTES = 256 << 10
MIN_TILES = 256
SOURCE_SHAPE = (512, 1024)  # 1024 tiles, replicated for the DRAM set


def parse_workloads(text):
    """'bf8:0.5,mxfp4' -> [("bf8", 0.5), ("mxfp4", 1.0)]."""
    out = []
    for item in text.split(","):
        scheme, _, density = item.strip().partition(":")
        get_scheme(scheme)  # names the known schemes when it is not one
        try:
            d = float(density) if density else 1.0
        except ValueError:
            raise ValueError(f"workloads look like bf8:0.5,mxfp4 (scheme[:density]), got {item!r}") from None
        if not 0 < d <= 1:
            raise ValueError(f"workload {item!r}: density must be in (0, 1]")
        out.append((scheme, d))
    return out


def _matrix(scheme, density, seed):
    w = np.random.default_rng(seed).standard_normal(SOURCE_SHAPE).astype(np.float32)
    kwargs = {"codebook": np.linspace(-2, 2, 16)} if scheme == "codebook" else {}
    return compress(w, scheme, density=None if density == 1 else density, **kwargs)


def aligned(a, align=64):
    """A copy of ``a`` starting on an ``align``-byte boundary (a tile buffer for the matrix engine is)."""
    a = np.asarray(a)
    raw = np.empty(a.nbytes + align, np.uint8)
    start = -raw.ctypes.data % align
    out = raw[start:start + a.nbytes].view(a.dtype).reshape(a.shape)
    out[...] = a
    return out


def _subset(ts, n):
    """The first n tiles of a TileSet."""
    end = int(ts.value_offsets[n])
    return TileSet(ts.config, ts.values[:end], ts.value_offsets[:n + 1],
                   None if ts.masks is None else ts.masks[:n], ts.scale_blocks,
                   None if ts.scale_block_of_tile is None else ts.scale_block_of_tile[:n])


def _replicate(ts, copies):
    """``copies`` back-to-back copies of every stream of a TileSet (a working set ``copies`` times larger)."""
    lens = np.diff(ts.value_offsets)
    offsets = np.concatenate([[0], np.cumsum(np.tile(lens, copies))])
    blocks = ts.scale_blocks
    block_of = ts.scale_block_of_tile
    if blocks is not None:
        block_of = np.concatenate([block_of + i * len(blocks) for i in range(copies)])
        blocks = np.tile(blocks, (copies, 1))
    return TileSet(ts.config, np.tile(ts.values[:ts.value_offsets[-1]], copies), offsets,
                   None if ts.masks is None else np.tile(ts.masks, (copies, 1)), blocks, block_of)


def working_set_bytes(ts):
    scale = 0 if ts.scale_blocks is None else ts.scale_blocks.size
    return int(ts.value_offsets[-1] + (0 if ts.masks is None else ts.masks.size) + scale)


class Clock:
    """Core cycles per TSC tick from dependent-add chains (one add per cycle).

    Other processes can only slow a chain down (preempted, it takes more ticks), never speed it
    up, so the fastest chain is the clock: on a loaded machine the median underestimates it and
    with it every cycle count."""

    CHAIN = 2_000_000

    def __init__(self):
        self.samples = []

    def sample(self):
        ticks = min(lib().deca_add_chain(self.CHAIN) for _ in range(3))
        self.samples.append(self.CHAIN / ticks)
        return self.samples[-1]

    @property
    def ratio(self):
        return max(self.samples)


def tsc_hz(seconds=0.25):
    """TSC ticks per second, against the OS's monotonic clock."""
    t0, c0 = time.perf_counter(), lib().deca_tsc()
    time.sleep(seconds)
    return (lib().deca_tsc() - c0) / (time.perf_counter() - t0)


#: Tiles per timed call: short calls (well under a scheduler time slice, even on the scalar path)
#: let the median skip the calls another process interrupted.
CHUNK_TILES = 128


def _time_runs(ts, out, paths, runs, clock):
    """Per path, cycles per tile of every timed call over ``runs`` passes through the tiles of ``ts``
    in calls of ``CHUNK_TILES`` tiles (the paths take turns pass by pass, so that other processes'
    load falls on all of them alike), and slow-path tiles per pass."""
    chunks = [ts.chunk(i, min(i + CHUNK_TILES, ts.num_tiles)) for i in range(0, ts.num_tiles, CHUNK_TILES)]
    stats = {p: Stats() for p in paths}
    for p in paths:
        ts.decode(out, 0, 32, p, stats[p])  # warm caches, branch predictors, the clock
    results = {p: [] for p in paths}
    for _ in range(runs):
        for p in paths:
            clock.sample()
            for c in chunks:
                rc, dt = c.decode(out, 0, 32, p, stats[p], timed=True)
                if rc:
                    raise AssertionError(f"the {p} kernel rejected a tile of a golden-compressed matrix")
                results[p].append(dt / c.num_tiles)
            clock.sample()
    return ({p: [r * clock.ratio for r in results[p]] for p in paths},
            {p: stats[p].slow_tiles // (runs + 1) for p in paths})


def _summary(cycles):
    return {"median": round(statistics.median(cycles), 2), "min": round(min(cycles), 2), "calls": len(cycles)}


@dataclass
class Result:
    scheme: str
    density: float
    sparse: bool
    bytes_per_tile: float
    l2_tiles: int
    l2: list
    dram_mib: float
    dram: list
    slow_tiles_per_pass: int
    by_path: dict  # path -> (L2 cycles per tile of every run, slow tiles per pass)

    def to_dict(self):
        return {
            "scheme": self.scheme, "density": self.density, "sparse": self.sparse,
            "class": self.scheme + ("-sparse" if self.sparse else ""),
            "bytes_per_tile": round(self.bytes_per_tile, 2),
            "l2_tiles": self.l2_tiles,
            "l2_cycles_per_tile": _summary(self.l2),
            "dram_working_set_mib": round(self.dram_mib, 1),
            "dram_cycles_per_tile": _summary(self.dram),
            "slow_tiles_per_pass": self.slow_tiles_per_pass,
            "paths": {p: {"l2_cycles_per_tile": _summary(l2), "slow_tiles_per_pass": slow,
                          **({"speedup_over_scalar": round(statistics.median(self.by_path["scalar"][0])
                                                           / statistics.median(l2), 2)}
                             if "scalar" in self.by_path else {})}
                      for p, (l2, slow) in self.by_path.items()},
        }


def llc_bytes():
    """Size of the largest CPU cache (sysfs), or 32 MiB when the OS does not say."""
    sizes = []
    for f in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*/size"):
        text = f.read_text().strip()
        units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
        sizes.append(int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text))
    return max(sizes, default=32 << 20)


def measure_stream(path, clock, nbytes):
    buf = np.ones(nbytes // 256 * 256, np.uint8)
    sink = ctypes.c_uint64()
    code = 1 if path == "avx512" else 0
    lib().deca_stream_read(buf.ctypes.data, buf.size, code, sink)  # fault the pages in
    out = []
    for _ in range(5):
        clock.sample()
        out.append(buf.size / lib().deca_stream_read(buf.ctypes.data, buf.size, code, sink))
        clock.sample()
    return statistics.median(out) / clock.ratio


def pick_cpu():
    """The last CPU this process may run on (pinning keeps the TSC-to-cycle ratio on one core)."""
    return max(os.sched_getaffinity(0))


def measure(workloads=DEFAULT_WORKLOADS, path=None, runs=9, dram_factor=4, seed=1, cpu=None, log=print):
    """Measure every workload; returns the platform document (a dict, see the module docstring).

    ``path``: the path whose numbers the model reads (default: the fastest); every path this CPU
    runs is measured in L2 beside it."""
    path = choose_path(path)
    paths = [path, *(p for p in available_paths() if p != path)]
    cpu = pick_cpu() if cpu is None else cpu
    allowed = os.sched_getaffinity(0)
    if cpu not in allowed:
        raise ValueError(f"CPU {cpu} is not available to this process (allowed: {sorted(allowed)})")
    os.sched_setaffinity(0, {cpu})
    try:
        clock = Clock()
        clock.sample()
        tsc = tsc_hz()
        llc = llc_bytes()
        dram_bytes = int(dram_factor * llc)
        load_before = os.getloadavg()
        log(f"pinned to CPU {cpu}; TSC {tsc / 1e9:.3f} GHz; core clock ~{clock.ratio * tsc / 1e9:.3f} GHz "
            f"(dependent adds); LLC {llc >> 20} MiB; DRAM sets of {dram_bytes >> 20} MiB; {path} path "
            f"(L2 also: {', '.join(paths[1:]) or 'no other path'})")
        results = []
        out = aligned(np.zeros(TILE_BYTES // 2, np.uint16))
        for scheme, density in workloads:
            cm = _matrix(scheme, density, seed)
            ts = TileSet.of_matrix(cm)
            per_tile = working_set_bytes(ts) / ts.num_tiles
            n = int(min(ts.num_tiles, max(MIN_TILES, L2_BYTES // per_tile)))
            l2, slow = _time_runs(_subset(ts, n), out, paths, runs, clock)
            big = _replicate(ts, -(-dram_bytes // working_set_bytes(ts)))
            dram, _ = _time_runs(big, out, [path], max(3, runs // 2), clock)
            # The matrix's own density: ternary makes zeros of its own.
            r = Result(scheme, round(cm.density, 4), ts.config.sparse, per_tile, n, l2[path],
                       working_set_bytes(big) / 2**20, dram[path], slow[path], {p: (l2[p], slow[p]) for p in paths})
            del big
            results.append(r)
            d = r.to_dict()
            log(f"  {scheme:>8} d={density:<5g} {per_tile:7.1f} B/tile  L2 {d['l2_cycles_per_tile']['median']:7.1f} "
                f"(min {d['l2_cycles_per_tile']['min']:.1f})  DRAM {d['dram_cycles_per_tile']['median']:7.1f} "
                f"(min {d['dram_cycles_per_tile']['min']:.1f}) cycles/tile"
                + "".join(f"; {p} L2 {d['paths'][p]['l2_cycles_per_tile']['median']:.1f}" for p in paths[1:]))
        stream = measure_stream(path, clock, dram_bytes)
        load_after = os.getloadavg()
    finally:
        os.sched_setaffinity(0, allowed)
    cc = compiler()
    return {
        "format": FORMAT,
        "machine": {"cpu": _cpu_name(), "arch": py_platform.machine(), "cpus_online": os.cpu_count(),
                    "avx512": "avx512" in available_paths(), "cpu_features": cpu_features(), "llc_bytes": llc},
        "path": path,
        "paths": paths,
        "library": str(library_path(cc).name),
        "compiler": cc,
        "pinned_cpu": cpu,
        "tsc_ghz": round(tsc / 1e9, 4),
        "core_cycles_per_tsc_tick": round(clock.ratio, 4),
        "core_ghz": round(clock.ratio * tsc / 1e9, 4),
        "stream_bytes_per_cycle": round(stream, 3),
        "load_average": {"before": [round(x, 2) for x in load_before], "after": [round(x, 2) for x in load_after]},
        "seed": seed,
        "workloads": [r.to_dict() for r in results],
    }


def _cpu_name():
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return py_platform.processor() or "unknown"


#: Columns of ``paths.csv``.
CSV_FIELDS = ("workload", "scheme", "density", "bytes_per_tile", "path", "l2_median", "l2_min", "speedup_over_scalar",
              "slow_tiles_per_pass")


def write(doc, out):
    """The platform file and ``paths.csv`` into folder ``out``; returns the platform file's path."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / PLATFORM_FILE
    path.write_text(json.dumps(doc, indent=1) + "\n")
    with open(out / "paths.csv", "w", newline="") as f:
        w = csv.DictWriter(f, CSV_FIELDS)
        w.writeheader()
        for wl in doc["workloads"]:
            for p, m in wl["paths"].items():
                w.writerow({"workload": f"{wl['scheme']}@{wl['density']:g}", "scheme": wl["scheme"],
                            "density": wl["density"], "bytes_per_tile": wl["bytes_per_tile"], "path": p,
                            "l2_median": m["l2_cycles_per_tile"]["median"], "l2_min": m["l2_cycles_per_tile"]["min"],
                            "speedup_over_scalar": m.get("speedup_over_scalar", ""),
                            "slow_tiles_per_pass": m["slow_tiles_per_pass"]})
    return path
