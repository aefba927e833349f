"""``deca verify``: a constrained-random regression of the PE on the fast Verilator engine.

The work comes in blocks (``run_block``): block b of a run with seed S holds ``tiles`` requests
and draws everything from its own generator (``[S, b]``), so blocks run anywhere in any order and
merge (``merge``) into the same run record. A block is a sequence of batches; a batch is one
Harness run of the PE from reset, drawn from ``[S, b, i]`` alone, so one batch replays exactly
(``replay``, with waves under cocotb). Each batch draws:

- a scheme of the format, a scale group size it allows (``coverage.groups_of``) and a density
  bucket (``coverage.DENSITY_BUCKETS``), the batch's place in a walk over every such tile cross
  (``schedule``); the codebook scheme with 2 to 256 entries, so every code width; masks in that
  bucket (random counts, its ends, one stored element per row), or the first tile's in it and
  the others' in any bucket;
- malformed requests of every error class between the tiles (``malformed_requests``; in dense
  batches the long value stream ends on the address space's last byte), or a CONFIG.Q the PE
  cannot run;
- the core (TEPL or store-fence mode, back-pressure on the completions, link latency, TMUL time,
  squashes at random and at chosen cycles, with reissue or drop) and the memory (miss and hit
  latency ranges, channel bandwidth, in-order or out-of-order responses, back-pressure on reads
  and prefetches), and the prefetch degree.

Every completion is checked bit for bit against the golden tile or its error, the performance
counters against the models, and a batch's cycles against a budget (``CYCLES_PER_REQUEST`` per
request the core issues, a reissue after a squash included): a longer run is a hang.
"""

import asyncio
import contextlib
from dataclasses import replace

import numpy as np

from deca.golden import SCHEMES, compress
from deca.golden.format import TILE_COLS, TILE_ELEMS, TILE_ROWS, mask_bits
from deca.hw.generate import top_name
from deca.hw.layouts import LINE_BYTES, ErrorReason
from deca.sim.bench.bus import CheckFailure, drive_idle, reset
from deca.sim.bench.cores import gemm_core
from deca.sim.bench.pe_bench import Bench
from deca.sim.bench.stimulus import DEFAULT_BASE, malformed_requests, tile_batch

from . import coverage

#: Requests per batch, at most (a batch is one Harness run from reset).
BATCH_REQUESTS = 48
#: The cycle budget of a batch: per request (a tile takes at most 16 x 32 vOps at W = 8 plus
#: bubbles, its lines and the core's TMUL time) and in longest memory latencies. A longer run is a hang.
#: Every request reissued after a squash adds a request's cycles: at 5% squashes a cycle a tile that
#: needs 100 cycles is squashed about 170 times before one run of it completes.
CYCLES_PER_REQUEST = 4000
BUDGET_LATENCIES = 10


def schedule(seed, block, index):
    """The tile cross (scheme, density bucket, group; ``coverage.tile_crosses``) batch ``index`` of block
    ``block`` is drawn for.

    The crosses in an order of the seed's, walked round by every block from its own start: the
    number of crosses times the base-2 radical inverse of the block (0, 1/2, 1/4, 3/4, 1/8, ...). So
    any number of blocks start evenly spread over the walk, and a run reaches every cross as soon as
    its blocks' batches span the gaps between their starts, whatever the block size.
    """
    crosses = coverage.tile_crosses()
    start = len(crosses) * int(f"{block:b}"[::-1], 2) // 2 ** block.bit_length()
    return crosses[np.random.default_rng(seed).permutation(len(crosses))[(start + index) % len(crosses)]]


def _mask(rng, bucket, tiles):
    """A (16, 32 x tiles) mask with tile 0 in density bucket ``bucket``, or None (the dense format).

    The other tiles are in ``bucket`` too, or (a mixed batch) each in a random sparse bucket. A
    tile holds a count of stored elements uniform over its bucket or at one of its ends (such as
    one element, all but one), at random places; half the ``le10`` tiles hold one element per row.
    """
    if bucket == "dense":
        return None
    names = list(coverage.STORED)
    buckets = np.full(tiles, names.index(bucket))
    if rng.random() < 0.4:
        buckets[1:] = rng.integers(len(names), size=tiles - 1)
    fewest, most = np.array(list(coverage.STORED.values()))[buckets].T
    ends = rng.random(tiles) < 0.2
    stored = np.where(ends, np.where(rng.random(tiles) < 0.5, fewest, most), rng.integers(fewest, most + 1))
    # Each tile's elements in a random order, the first ``stored`` of it kept.
    mask = rng.random((tiles, TILE_ELEMS)).argsort(axis=1).argsort(axis=1) < stored[:, None]
    mask = mask.reshape(tiles, TILE_ROWS, TILE_COLS)
    one = np.flatnonzero((buckets == names.index("le10")) & (rng.random(tiles) < 0.5))
    mask[one] = False
    mask[one[:, None], np.arange(TILE_ROWS), rng.integers(TILE_COLS, size=(len(one), TILE_ROWS))] = True
    return mask.transpose(1, 0, 2).reshape(TILE_ROWS, TILE_COLS * tiles)


def draw_batch(seed, block, index, W, loaders, addr_bits=48):
    """Batch ``index`` of block ``block``: (Batch, run settings, generator for the run); ``None`` requests past the block end are cut by the caller."""
    rng = np.random.default_rng([seed, block, index])
    scheme, bucket, group = schedule(seed, block, index)
    codebook = None
    if scheme == "codebook":
        size = int(rng.choice([2, 3, 4, 5, 8, 9, 16, 20, 32, 50, 64, 100, 128, 200, 256]))
        # Multiples of 1/64 below 2 in magnitude are exact and distinct in BF16.
        codebook = rng.choice(np.arange(-128, 128), size, replace=False) / 64
    tiles = int(rng.integers(1, BATCH_REQUESTS + 1))
    if group not in (None, 16, 32, "channel"):
        tiles = max(tiles, group // TILE_COLS)  # K holds at least one group
    shape = (TILE_ROWS, TILE_COLS * tiles)
    if scheme == "ternary":
        # |w| in [1, 1.5) times a factor per row: a group's absmean scale stays below 1.5 times its
        # smallest weight, so no stored weight rounds to 0 (which would leave the mask and the bucket).
        w = (rng.choice([-1, 1], shape) * rng.uniform(1, 1.5, shape)
             * np.exp(rng.normal(0, 2, size=(TILE_ROWS, 1)))).astype(np.float32)
    else:
        w = (rng.standard_t(3, size=shape) * np.exp(rng.normal(0, 2, size=TILE_COLS * tiles))).astype(np.float32)
    if SCHEMES[scheme].encodes_inf and rng.random() < 0.1:
        w[rng.random(w.shape) < 0.01] = np.inf
    cm = compress(w, scheme, mask=_mask(rng, bucket, tiles), group_size=group, codebook=codebook)
    align = int(rng.choice([1, 2, 16, 64]))
    batch = tile_batch(cm, f"{scheme}/{bucket}/g{group}", DEFAULT_BASE + int(rng.integers(1 << 16)), align)
    q = None
    if rng.random() < 0.15:
        bad = malformed_requests(batch, addr_bits)
        if not batch.config.sparse:
            # The long value stream moved to end on the address space's last byte: no wrap, still
            # VALUE_LEN (judged before any line is read), the edge the wrap check's carry decides.
            long = batch.requests[0].meta["val_len"]
            bad = [replace(r, meta={**r.meta, "val_addr": (1 << addr_bits) - r.meta["val_len"]})
                   if r.expected == ErrorReason.VALUE_LEN and r.meta["val_len"] > long else r for r in bad]
        picks = rng.choice(len(bad), int(rng.integers(1, len(bad) + 1)), replace=False)
        requests = list(batch.requests)
        for k in picks:
            requests.insert(int(rng.integers(len(requests) + 1)), bad[k])
        batch.requests = requests
    elif rng.random() < 0.02:
        q = int(rng.choice([0, 9, 15, 31]))
        batch.requests = [replace(r, expected=ErrorReason.CONFIG, label=f"{r.label} with CONFIG.Q = {q}")
                          for r in batch.requests]
    mode = "store" if rng.random() < 0.2 else "tepl"
    miss_lo = int(rng.choice([1, 20, 100, 200]))
    hit_lo = int(rng.integers(1, 20))
    memory = {"miss_latency": [miss_lo, miss_lo + int(rng.choice([0, 10, 100, 300]))],
              "hit_latency": [hit_lo, hit_lo + int(rng.choice([0, 5, 40]))],
              "bytes_per_cycle": None if rng.random() < 0.3 else float(rng.choice([2, 8, 16, 48, 64])),
              "reorder": bool(rng.random() < 0.7),
              "req_backpressure": float(rng.choice([0, 0.1, 0.5, 0.9])),
              "pf_backpressure": float(rng.choice([0, 0.3, 0.9]))}
    core = {"resp_backpressure": float(rng.choice([0, 0.2, 0.6, 0.95])),
            "tmul_cycles": int(rng.choice([1, 2, 16, 64])), "link_latency": int(rng.integers(0, 12))}
    squash = {}
    if mode == "tepl":
        core["queue"] = int(rng.integers(1, 17))
        if rng.random() < 0.5:
            budget = len(batch.requests) * TILE_ELEMS // W * 2
            squash = {"squash_prob": float(rng.choice([0, 0.001, 0.01, 0.05])), "reissue": float(rng.random()),
                      "squash_at": sorted(int(c) for c in rng.integers(0, budget, int(rng.integers(0, 6))))}
    settings = {"mode": mode, "memory": memory, "core": core, "squash": squash, "q": q,
                "prefetch_degree": int(rng.integers(0, 16)), "scheme": scheme, "group": group,
                "q_bits": cm.config.q_bits}
    return batch, settings, rng


def tile_bins(batch, settings):
    """Coverage bins of the tiles of ``batch`` (counted when it ran clean)."""
    hits = {}

    def hit(name, n=1):
        hits[name] = hits.get(name, 0) + n

    scheme, group = settings["scheme"], settings["group"]
    tiles = [r for r in batch.requests if not isinstance(r.expected, ErrorReason)]
    # Stored elements of every row of every tile, all masks unpacked at once (dense tiles: none).
    per_row = np.zeros((len(tiles), TILE_ROWS), np.int64)
    masked = [k for k, r in enumerate(tiles) if r.mask]
    if masked:
        bits = mask_bits(np.frombuffer(b"".join(tiles[k].mask for k in masked), np.uint8).reshape(len(masked), -1))
        per_row[masked] = bits.reshape(len(masked), TILE_ROWS, TILE_COLS).sum(axis=2)
    for r, rows in zip(tiles, per_row):
        stored = int(rows.sum()) if r.mask else TILE_ELEMS
        hit(f"tile/{scheme}/{coverage.density_bucket(stored, not r.mask)}/{group}")
        hit(f"bits/{settings['q_bits']}")
        meta = r.meta
        if r.mask and not meta["val_len"]:
            hit("edge/empty_values")
        if r.mask and stored == TILE_ELEMS:
            hit("edge/full_mask")
        if r.mask and (rows == 1).all():
            hit("edge/one_per_row")
        if meta["val_len"] and (meta["val_addr"] + meta["val_len"]) % LINE_BYTES == 0:
            hit("edge/values_end_on_line")
    hit(f"mode/{settings['mode']}")
    return hits


def empty_record(seed):
    return {"seed": seed, "blocks": [], "requests": 0, "tiles": 0, "errors": 0, "cycles": 0, "mismatches": 0,
            "hangs": 0, "failures": [], "bins": {}}


def _add(bins, hits):
    for name, n in hits.items():
        bins[name] = bins.get(name, 0) + n


def merge(records):
    """One record of many blocks' (or runs') records of the same seed."""
    out = empty_record(records[0]["seed"] if records else None)
    for rec in records:
        out["blocks"] += rec["blocks"]
        for name in ("requests", "tiles", "errors", "cycles", "mismatches", "hangs"):
            out[name] += rec[name]
        out["failures"] += rec["failures"]
        _add(out["bins"], rec["bins"])
    out["blocks"].sort()
    return out


async def _run_batches(bench, seed, block, tiles, W, loaders, record, first_request, stop=None):
    """Batches of block ``block`` until ``tiles`` requests ran (``stop``: only batch ``stop``)."""
    done, index = 0, 0
    while done < tiles:
        batch, settings, rng = draw_batch(seed, block, index, W, loaders, bench.p["addr_bits"])
        batch.requests = batch.requests[:tiles - done]
        if stop is None or index == stop:
            await _run_batch(bench, batch, settings, rng, record, first_request + done, index)
        done += len(batch.requests)
        index += 1
        if stop is not None and index > stop:
            return


async def _run_batch(bench, batch, settings, rng, record, first, index):
    bench.rng = rng
    bench.p = {**bench.p, "memory": settings["memory"], "prefetch_degree": settings["prefetch_degree"],
               "core": {"resp_backpressure": settings["core"]["resp_backpressure"]}}
    core_kw = {k: v for k, v in settings["core"].items() if k != "resp_backpressure"}
    drive_idle(bench.bus, bench.ports.inputs)
    await reset(bench.bus)
    budget = CYCLES_PER_REQUEST * len(batch.requests) + BUDGET_LATENCIES * max(settings["memory"]["miss_latency"])
    try:
        harness, _ = await bench.run(batch, squash=settings["squash"] or None, q=settings["q"],
                                     core=lambda requests, g, **kw: gemm_core(settings["mode"], requests, g,
                                                                              **kw, **core_kw),
                                     max_cycles=budget, reissue_cycles=CYCLES_PER_REQUEST)
    except (CheckFailure, AssertionError) as e:
        message = str(e)
        tile = next((first + k for k, r in enumerate(batch.requests) if f"{r.label} " in message + " "), first)
        kind = type(e).__name__
        record["hangs" if kind == "Hang" else "mismatches"] += 1
        record["failures"].append({"kind": kind, "tile": tile, "block": record["blocks"][0], "batch": index,
                                   "message": message.splitlines()[0] if message else kind})
        return
    record["requests"] += len(batch.requests)
    errors = sum(isinstance(r.expected, ErrorReason) for r in batch.requests)
    record["errors"] += errors
    record["tiles"] += len(batch.requests) - errors
    record["cycles"] += harness.cycle
    _add(record["bins"], tile_bins(batch, settings))
    if hasattr(harness, "events"):  # the fast engine counts them; a replay on the Python Harness does not
        _add(record["bins"], coverage.engine_hits(harness.events, bench.ports.loaders))


def block_params(W, L, loaders):
    from deca.sim.measure.campaign import DESIGN

    return {**DESIGN, "W": W, "L": L, "loaders": loaders}


def open_bus(W, L, loaders, verilog=None, jobs=2, build_root=None):
    """The fast engine's bus on the (W, L, loaders) PE (``verilog``: another Verilog of it, a mutant's,
    built under ``build_root``), built unless cached."""
    from deca.sim.bench.engine import ENGINE_ROOT, VerilatorBus, build
    from deca.sim.bench.ports import PePorts
    from deca.sim.measure.campaign import DESIGN, _generate

    verilog = verilog or _generate(W, L, loaders, engine="fast")
    ports = PePorts(DESIGN["addr_bits"], DESIGN["id_bits"], DESIGN["tags"], loaders, DESIGN["contexts"])
    return VerilatorBus(build(verilog, top_name("pe", W, L, loaders), ports, build_root or ENGINE_ROOT, jobs=jobs))


def run_block(W, L, loaders, seed, block, tiles, bus=None, verilog=None, block_tiles=None):
    """Run block ``block`` (``tiles`` requests) of the regression with ``seed``; returns its record:
    requests, tiles and error requests checked, cycles, mismatches, hangs, failures (kind, global
    tile index, block, batch, first line of the message) and coverage bin hits. ``block_tiles``: the
    run's block size, which places the block's first request (default ``tiles``; a run's last block
    may be shorter). ``bus``: a fast-engine bus on the design to reuse (else one is opened and closed)."""
    from deca.sim.bench.engine import FastHarness

    record = {**empty_record(seed), "blocks": [block]}
    with contextlib.ExitStack() as stack:
        if bus is None:
            bus = open_bus(W, L, loaders, verilog)
            stack.callback(bus.close)
        bench = Bench(bus, {**block_params(W, L, loaders), "seed": seed}, lambda *args: None, FastHarness)
        asyncio.run(_run_batches(bench, seed, block, tiles, W, loaders, record, block * (block_tiles or tiles)))
    return record


def batch_of(seed, block, tiles, offset, W, loaders):
    """The index of the batch of block ``block`` (``tiles`` requests) that holds request ``offset``."""
    done, index = 0, 0
    while True:
        batch, _, _ = draw_batch(seed, block, index, W, loaders)
        done += len(batch.requests[:tiles - done])
        if offset < done:
            return index
        index += 1


async def replay(bench, seed, block, tiles, block_tiles, batch):
    """Run batch ``batch`` of block ``block`` (``tiles`` requests of a run in blocks of ``block_tiles``)
    alone, as the regression ran it (the cocotb replay)."""
    record = {**empty_record(seed), "blocks": [block]}
    await _run_batches(bench, seed, block, tiles, bench.W, bench.ports.loaders, record, block * block_tiles,
                       stop=batch)
    return record
