"""The PE regression of ``deca.sim.bench.pe_bench`` on the Amaranth simulator: the same procedures that
tests/test_pe_rtl.py runs on Icarus and Verilator, here without a Verilog build."""

import pytest
import numpy as np
from amaranth.hdl import ClockDomain, Module
from amaranth.sim import Simulator

from deca.golden import compress
from deca.hw import pe
from deca.hw.params import STORAGE, ParameterError
from deca.hw.pe import PE, ROW_LATENCY, request_queue_entries
from deca.golden.format import TILE_ELEMS, TILE_ROWS
from deca.hw.tout import BANKS, TOut, memory_rows
from deca.sim.bench.bus import AmaranthBus, ReusedSimulator, drive_idle
from deca.sim.bench.pe_bench import PROCEDURES, Bench
from deca.sim.bench.ports import PePorts
from deca.sim.bench.registers import configure
from deca.sim.bench.stimulus import DEFAULT_BASE, tile_batch

#: Every scheme (codebooks of Q = 3, 5 and 8) at three densities; a few at two.
ALL = {"densities": [1, 0.2, 0], "codebook_sizes": [5, 20, 200]}
FEW = {"schemes": ["nvfp4", "ternary", "bf16", "int1"], "densities": [1, 0.2], "codebook_sizes": []}
#: A scaled and an always-sparse scheme.
TWO = {"schemes": ["nvfp4", "ternary"], "densities": [1, 0.2], "codebook_sizes": []}
#: With a codebook of Q = 5 (a LUT loaded from the tile's metadata).
TWO_CODEBOOK = {**TWO, "schemes": [*TWO["schemes"], "codebook"], "codebook_sizes": [20]}
FEW_CODEBOOK = {**FEW, "schemes": [*FEW["schemes"], "codebook"], "codebook_sizes": [20]}
CASES = [
    ("reset_state", 8, 4, {}),
    ("workloads_bit_exact", 32, 8, TWO_CODEBOOK),
    ("malformed_metadata", 8, 4, {"malformed_schemes": ["nvfp4"]}),
    ("bad_config", 8, 4, {}),
    ("squash_recovery", 32, 8, TWO),
    # The least storage: one tile context per loader, the least tags and SQQ, one TOut buffer.
    ("reset_state", 8, 4, {"contexts": 1, "tags": 2, "sqq_bytes": 256, "tout_buffers": 1}),
]
#: The W32L8 workloads and squashes of FEW, the W8L4 malformed metadata of a second scheme, every scheme, the W8L4
#: squashes with two loaders, the designs with more loaders (more requests in flight, the line arbiter and the order
#: FIFOs over 3 and 4) and the least storage, a simulator each, under -m slow.
SLOW_CASES = [
    ("workloads_bit_exact", 32, 8, FEW_CODEBOOK),
    ("squash_recovery", 32, 8, FEW),
    ("malformed_metadata", 8, 4, {"malformed_schemes": ["nvfp4", "ternary"]}),
    ("workloads_bit_exact", 8, 4, ALL),
    ("squash_recovery", 8, 4, FEW),
    ("reset_state", 8, 4, {"loaders": 3}),
    ("workloads_bit_exact", 8, 4, {**TWO, "loaders": 3}),
    ("malformed_metadata", 8, 4, {"malformed_schemes": ["nvfp4"], "loaders": 4}),
    ("squash_recovery", 8, 4, {**TWO, "loaders": 4}),
    ("workloads_bit_exact", 8, 4, {**FEW, "loaders": 4}),
    ("malformed_metadata", 8, 4, {"malformed_schemes": ["nvfp4"], "loaders": 3}),
    ("squash_recovery", 8, 4, {**FEW, "loaders": 3}),
    ("workloads_bit_exact", 8, 4, {**TWO, "contexts": 1, "tags": 2, "sqq_bytes": 256, "tout_buffers": 1}),
    ("squash_recovery", 8, 4, {**TWO, "contexts": 1, "tags": 2, "sqq_bytes": 256, "tout_buffers": 1}),
]


async def accept(ctx, tout, ids):
    """TOut accepts a request of each id, one a cycle."""
    for tile in ids:
        ctx.set(tout.accept, 1)
        ctx.set(tout.accept_id, tile)
        await ctx.tick()
    ctx.set(tout.accept, 0)


@pytest.mark.parametrize("W,buffers", [(8, 2), (64, 2), (8, 1)])
def test_tout_buffers_are_taken_by_first_chunks_and_never_overwritten(W, buffers, seed):
    """One tile more than TOut has buffers while the core takes nothing: the last tile's first chunk
    waits (ready low) until the first tile's last row is taken, and no chunk of another tile waits;
    every row comes back, in request order, with the data written."""
    print(f"seed {seed}")
    rng = np.random.default_rng(seed)
    ids, per_tile = list(range(10, 11 + buffers)), TILE_ELEMS // W
    tiles = rng.integers(0, 1 << 16, (len(ids), TILE_ELEMS), dtype=np.uint16)
    dut = TOut(W, 8, loaders=1, buffers=buffers)
    stalled, beats = [], []

    async def core(ctx):
        await accept(ctx, dut, ids)
        await ctx.tick().repeat(buffers * per_tile + 19)  # every buffer filled, the last tile waiting
        ctx.set(dut.resp_ready_next, 1)
        await ctx.tick()
        assert stalled and min(stalled) == buffers * per_tile, stalled
        ctx.set(dut.resp.ready, 1)
        for _ in range(100 * len(ids)):
            if ctx.get(dut.resp.valid):  # taken at this clock edge
                beats.append((ctx.get(dut.resp.payload.id), ctx.get(dut.resp.payload.row),
                               ctx.get(dut.resp.payload.error), ctx.get(dut.resp.payload.data)))
            await ctx.tick()

    async def pipeline(ctx):
        await ctx.tick().repeat(len(ids))
        for k in range(len(ids) * per_tile):
            chunk = tiles.reshape(-1, W)[k]
            ctx.set(dut.chunks.valid, 1)
            ctx.set(dut.chunks.payload.data, [int(x) for x in chunk])
            ctx.set(dut.chunks.payload.last, k % per_tile == per_tile - 1)
            cycle = 0
            while not ctx.get(dut.chunks.ready):
                stalled.append(k)
                await ctx.tick()
                cycle += 1
                assert cycle < 1000, f"chunk {k} never written"
            await ctx.tick()
        ctx.set(dut.chunks.valid, 0)

    sim = Simulator(dut)
    sim.add_clock(1e-9)
    sim.add_testbench(core)
    sim.add_testbench(pipeline)
    sim.run()
    # (later chunks of the last tile may wait for rows read from their bank: see the next test)
    assert {k // per_tile for k in stalled} == {buffers}, "only the last tile's chunks wait"
    assert len(beats) == 16 * len(ids)
    rows = tiles.reshape(len(ids), TILE_ROWS, -1)
    for k, (tile_id, row, error, data) in enumerate(beats):
        t, r = divmod(k, 16)
        assert (tile_id, row, error) == (ids[t], r, 0)
        assert data == int.from_bytes(rows[t, r].astype("<u2").tobytes(), "little"), f"tile {t} row {r}"


@pytest.mark.parametrize("W", [8, 32, 64])
def test_tout_rows_are_read_before_chunks_for_their_bank(W, seed):
    """Each buffer is BANKS single-port memories: a cycle writes a chunk into a bank or reads a row
    from it, and the read wins. The pipeline offers a chunk in most cycles, the core takes no row
    until half a tile is written, then every cycle, so that rows fall behind the chunks: row r of
    tile t is read in the cycle after the chunk that completes it or the one the previous row is
    taken in, the later, and taken the cycle after (or when the core first takes one), with the
    data written (a read in a write's cycle would read the write's row); a chunk is refused exactly
    in the cycles in which a row of its tile is read from its bank or its buffer is not yet free."""
    print(f"seed {seed}")
    rng = np.random.default_rng(seed)
    ids, per_tile = list(range(4)), TILE_ELEMS // W
    tiles = rng.integers(0, 1 << 16, (len(ids), TILE_ELEMS), dtype=np.uint16)
    dut = TOut(W, 8, loaders=1, buffers=2, waiting=1)  # a record per tile
    # (cycle, tile) of the chunk handshakes and of the chunks offered and refused; (cycle, id, row, data) of the beats taken
    chunks, refused, beats = [], [], []
    taking = per_tile // 2  # the first cycle the core takes a row

    async def bench(ctx):
        await accept(ctx, dut, ids)
        k = 0
        for cycle in range(40 * per_tile):
            ctx.set(dut.resp.ready, cycle >= taking)
            ctx.set(dut.resp_ready_next, cycle + 1 >= taking)
            # A chunk in about five cycles of six: rows are read in the gaps and after the tile.
            offered = k < len(ids) * per_tile and rng.random() < 0.85
            ctx.set(dut.chunks.valid, offered)
            if offered:
                ctx.set(dut.chunks.payload.data, [int(x) for x in tiles.reshape(-1, W)[k]])
                ctx.set(dut.chunks.payload.last, k % per_tile == per_tile - 1)
                (chunks if ctx.get(dut.chunks.ready) else refused).append((cycle, k))
                k += bool(ctx.get(dut.chunks.ready))
            if ctx.get(dut.resp.valid) and cycle >= taking:
                beats.append((cycle, ctx.get(dut.resp.payload.id), ctx.get(dut.resp.payload.row),
                              ctx.get(dut.resp.payload.data)))
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-9)
    sim.add_testbench(bench)
    sim.run()
    assert len(beats) == 16 * len(ids), "not every row came out"
    rows = tiles.reshape(len(ids), TILE_ROWS, -1)
    row_bits, _ = memory_rows(W)
    per_row, rows_per = row_bits // (16 * W), row_bits // (16 * TILE_ELEMS // TILE_ROWS)
    previous, reads = -1, {}  # the cycle of each row read, by (tile, row)
    for k, (cycle, tile_id, row, data) in enumerate(beats):
        t, r = divmod(k, 16)
        assert (tile_id, row) == (ids[t], r)
        assert data == int.from_bytes(rows[t, r].astype("<u2").tobytes(), "little"), f"tile {t} row {r}"
        read = max(chunks[t * per_tile + -(-32 * (r + 1) // W) - 1][0] + 1, previous)
        assert cycle == max(read + 1, taking), f"tile {t} row {r}: read at {read}, taken at {cycle}"
        reads[t, r] = read
        previous = cycle
    # (cycle, tile, bank) of each row read and of each chunk offered: memory row j is in bank j % BANKS.
    reading = {(c, t, r // rows_per % BANKS) for (t, r), c in reads.items()}
    at = {(c, k): (c, k // per_tile, k % per_tile // per_row % BANKS) for c, k in chunks + refused}
    # The two buffers: tile t's first chunk waits until the last row of tile t - 2 is read.
    expected = sorted((c, k) for c, k in at if at[c, k] in reading
                      or (k % per_tile == 0 and k >= 2 * per_tile and c <= reads[k // per_tile - 2, TILE_ROWS - 1]))
    assert refused == expected
    assert any(at[c, k] in reading for c, k in refused), "no chunk met a row read from its bank"


class ReusedPE:
    """A PE, in a top module whose ``sync`` domain a testbench may reset, and its simulator, made
    once per design in each test process (``ReusedSimulator``)."""
    made = {}

    def __init__(self, W, L, loaders, storage):
        self.dut = PE(W, L, loaders=loaders, **dict(storage))
        top = Module()
        top.domains.sync = self.domain = ClockDomain()
        top.submodules.pe = self.dut
        self.sim = ReusedSimulator(top)

    @classmethod
    def get(cls, W, L, loaders=pe.LOADERS, **storage):
        """``storage``: other values of the PE's storage parameters (``deca.hw.params``)."""
        key = (W, L, loaders, tuple(sorted(storage.items())))
        if key not in cls.made:
            cls.made[key] = cls(W, L, loaders, key[3])
        return cls.made[key]


def simulate(W, L, procedure, seed, process=None, **params):
    """Run ``procedure`` on a PE; ``process(dut)``: a simulator process to run alongside."""
    reused = ReusedPE.get(W, L, **{k: params[k] for k in ("loaders", *STORAGE) if k in params})
    dut, messages = reused.dut, []

    async def bench(ctx):
        await PROCEDURES[procedure](Bench(AmaranthBus(ctx, dut), {"W": W, "L": L, "seed": seed, **params},
                                         lambda fmt, *args: messages.append(fmt % args)))

    reused.sim.run(bench, None if process is None else process(dut))
    return messages


@pytest.mark.parametrize("procedure,W,L,params", [*CASES, *(pytest.param(*c, marks=pytest.mark.slow) for c in SLOW_CASES)],
                         ids=[f"{p}-W{W}L{L}" + (f"-ld{q['loaders']}" if "loaders" in q else "")
                              + "".join(f"-{k}{q[k]}" for k in STORAGE if k in q)
                              + ("-all" if q is ALL else "") + ("-few" if q in (FEW, FEW_CODEBOOK) and W == 32 else "")
                              + ("-2schemes" if len(q.get("malformed_schemes", ())) == 2 else "")
                              for p, W, L, q in CASES + SLOW_CASES])
def test_pe_regression(procedure, W, L, params, seed):
    print(f"seed {seed}")
    messages = simulate(W, L, procedure, seed, **params)
    # Every Harness run logs its counters: the procedure really ran its workloads.
    if procedure != "reset_state":
        assert any("counters" in m for m in messages)


@pytest.mark.parametrize("params,message", [
    ({"tags": 24, "contexts": 2}, r"tags must be 2 x a power of two >= 2, at most 256"),
    ({"tags": 2, "contexts": 2}, r"tags must be 2 x a power of two .*split between its 2 tile contexts"),
    ({"tags": 512, "contexts": 1}, r"tags must be 1 x a power of two >= 2, at most 256"),
    ({"sqq_bytes": 100, "contexts": 1}, "sqq_bytes must be 1 x a power of two"),
    # Four rows of 128-byte value beats for each of a loader's tile contexts.
    ({"W": 64, "L": 64, "sqq_bytes": 512, "contexts": 2}, r"sqq_bytes must be 2 x a power of two >= 512 for W = 64, L = 64"),
    ({"sqq_bytes": 256, "contexts": 2}, r"sqq_bytes must be 2 x a power of two >= 256 for W = 8, L = 4"),
    ({"contexts": 0}, "contexts must be one of 1, 2, 3, 4"),
    ({"contexts": True}, "contexts must be one of 1, 2, 3, 4"),
    ({"tout_buffers": 5}, "tout_buffers must be one of 1, 2, 3, 4"),
    ({"addr_bits": 80}, "addr_bits must be in 16..64"),
    ({"id_bits": 0}, "id_bits must be in 1..16"),
    ({"W": 24}, "W must be one of"),
    ({"loaders": 1}, "loaders must be one of 2, 3, 4"),
    ({"loaders": 5}, "loaders must be one of 2, 3, 4"),
])
def test_impossible_pe_parameters_are_refused(params, message):
    with pytest.raises(ParameterError, match=message):
        PE(**{"W": 8, "L": 4, **params})


# SQQ bytes per loader by default: four rows per tile context, a row the larger of a 64-byte line
# and a value beat (W = 64, L >= 16: 64 lanes of 16 bits, 128 bytes).
@pytest.mark.parametrize("W,L,contexts,sqq_bytes", [(8, 4, 2, 512), (32, 8, 2, 512), (64, 8, 2, 512),
                                                    (64, 16, 2, 1024), (64, 64, 2, 1024), (64, 64, 1, 512),
                                                    (64, 64, 4, 2048)])
def test_default_sqq_holds_four_rows_per_context(W, L, contexts, sqq_bytes):
    assert pe.sqq_byte_count(None, W, L, contexts) == sqq_bytes
    assert pe.sqq_byte_count(4096, W, L, contexts) == 4096


def test_every_design_of_the_sweep_grid_takes_the_default_storage():
    for W in (8, 16, 32, 64):
        for L in (1, 2, 4, 8, 16, 32, 64):
            if L <= W:
                pe.check_pe_params(W, L, **STORAGE)


@pytest.mark.parametrize("W,L,loaders", [(8, 4, 2), pytest.param(64, 64, 3, marks=pytest.mark.slow)],
                         ids=["W8L4", "W64L64-ld3"])
def test_completion_rows_leave_the_cycle_after_their_chunks(W, L, loaders, seed):
    """Rows stream (docs/pe/tout.md): with the core always ready, row r of a tile is read in the
    cycle after the pipeline's chunk that completes it (chunk ceil(32 (r + 1) / W) - 1 of the tile)
    or after the previous row's read, the later, and leaves ROW_LATENCY - 1 cycles after its read
    (ROW_LATENCY after the chunk when nothing is in the way)."""
    print(f"seed {seed}")
    chunks, beats = [], []  # cycles of the chunk handshakes; (cycle, row, error) of the completion beats

    def watch(dut):
        async def process(ctx):
            out, resp = dut.pipeline.out, dut.tepl_resp
            signals = (out.valid, out.ready, resp.valid, resp.ready, resp.payload.row, resp.payload.error)
            cycle = 0
            async for _, _, out_v, out_r, resp_v, resp_r, row, error in ctx.tick().sample(*signals):
                if out_v and out_r:
                    chunks.append(cycle)
                if resp_v and resp_r:
                    beats.append((cycle, row, error))
                cycle += 1
        return process

    simulate(W, L, "workloads_bit_exact", seed, process=watch, loaders=loaders, core={},
             schemes=["nvfp4", "int8"], densities=[1, 0.05], codebook_sizes=[])
    per_tile, rows = 512 // W, [b for b in beats if not b[2]]
    assert len(chunks) == per_tile * len(rows) // 16 and rows, "not every tile went through"
    previous = -1
    for k, (cycle, row, _) in enumerate(rows):
        tile = k // 16
        assert row == k % 16
        written = chunks[tile * per_tile + -(-32 * (row + 1) // W) - 1]
        read = max(written + 1, previous - ROW_LATENCY + 2)
        assert cycle == read + ROW_LATENCY - 1, f"tile {tile} row {row}: chunk at {written}, row at {cycle}"
        previous = cycle


@pytest.mark.parametrize("loaders", [2, pytest.param(3, marks=pytest.mark.slow)])
def test_ports_take_tepls_into_the_request_queue_while_the_contexts_wait(loaders, seed):
    """With memory never answering, the ports take exactly one TEPL per tile context plus one per
    request queue entry, then stay not ready; the prefetcher runs ahead of the queued tiles too
    (it sees a TEPL when the queue takes it), and never prefetches a line already demanded."""
    print(f"seed {seed}")
    rng = np.random.default_rng(seed)
    reused = ReusedPE.get(8, 4, loaders)
    dut, ports = reused.dut, PePorts(loaders=loaders)
    cm = compress(rng.standard_normal((16, 32 * 40)).astype(np.float32), "bf8", density=0.05)
    batch = tile_batch(cm, "bf8@0.05", DEFAULT_BASE)
    taken, demanded, prefetched = [], set(), []

    async def bench(ctx):
        bus = AmaranthBus(ctx, dut)
        drive_idle(bus, ports.inputs)
        await configure(bus, batch.config, 5)
        bus.set("mem_req__ready", 1)
        bus.set("pf_req__ready", 1)
        for cycle in range(300):
            request = batch.requests[len(taken)]
            bus.set("tepl_req__0__valid", 1)
            bus.set("tepl_req__0__payload", ports.tepl_req.pack({**request.meta, "id": len(taken)}))
            if bus.get("tepl_req__0__ready"):
                taken.append(cycle)
            if bus.get("mem_req__valid"):
                demanded.add(ports.mem_req.unpack(bus.get("mem_req__payload"))["addr"])
            if bus.get("pf_req__valid"):
                prefetched.append(ports.pf_req.unpack(bus.get("pf_req__payload"))["addr"])
                assert prefetched[-1] not in demanded, f"cycle {cycle}: line {prefetched[-1]:#x} prefetched after its demand"
            await bus.tick()

    reused.sim.run(bench)
    held = loaders * dut.contexts + request_queue_entries(loaders)
    assert len(taken) == held, taken
    # The queued tiles' lines, demanded by no context, are prefetched: the lines of the tiles up to
    # PREFETCH.DEGREE past the last one taken.
    queued = batch.requests[loaders * dut.contexts:held]
    queued_lines = {line * 64 for r in queued for s in ("val", "mask")
                    for line in range(r.meta[f"{s}_addr"] // 64, (r.meta[f"{s}_addr"] + r.meta[f"{s}_len"] - 1) // 64 + 1)}
    assert queued_lines - demanded <= set(prefetched), sorted(queued_lines - demanded - set(prefetched))
    assert len(set(prefetched)) == len(prefetched)


@pytest.mark.parametrize("rst_cycles", [1, 3])
def test_a_reset_empties_the_pe_and_closes_its_ports_for_a_cycle_after(rst_cycles, seed):
    """The datapath takes ``rst`` from a flip-flop: a reset while every tile context and queue entry
    holds a TEPL (memory never answers) empties them all, the ports stay closed in the cycle after
    ``rst`` falls (no ready, no valid), and then, configured again, take as many TEPLs as before."""
    print(f"seed {seed}")
    rng = np.random.default_rng(seed)
    reused = ReusedPE.get(8, 4)
    dut, domain, ports = reused.dut, reused.domain, PePorts()
    cm = compress(rng.standard_normal((16, 32 * 20)).astype(np.float32), "bf8", density=0.05)
    batch = tile_batch(cm, "bf8@0.05", DEFAULT_BASE)
    held = dut.loaders * dut.contexts + request_queue_entries(dut.loaders)
    counts, closed = [], []

    async def bench(ctx):
        bus = AmaranthBus(ctx, dut)
        drive_idle(bus, ports.inputs)
        bus.set("mem_req__ready", 1)
        bus.set("pf_req__ready", 1)
        for _ in range(2):
            await configure(bus, batch.config, 5)  # the control registers take ``rst`` too
            taken = 0
            for cycle in range(150):
                bus.set("tepl_req__0__valid", 1)
                bus.set("tepl_req__0__payload", ports.tepl_req.pack({**batch.requests[taken].meta, "id": taken}))
                taken += bus.get("tepl_req__0__ready")
                await bus.tick()
            counts.append(taken)
            bus.set("tepl_req__0__valid", 0)
            ctx.set(domain.rst, 1)
            for _ in range(rst_cycles):
                await bus.tick()
            ctx.set(domain.rst, 0)
            closed.append({name: bus.get(name) for name in ("tepl_req__0__ready", "tepl_req__1__ready", "mem_req__valid",
                                                            "pf_req__valid", "tepl_resp__valid")})
            await bus.tick()
            closed.append({name: bus.get(name) for name in ("tepl_req__0__ready", "tepl_req__1__ready")})

    reused.sim.run(bench)
    assert counts == [held, held], counts
    for after, next_ in zip(closed[0::2], closed[1::2]):
        assert after == dict.fromkeys(after, 0), after
        assert next_ == {"tepl_req__0__ready": 1, "tepl_req__1__ready": 1}, next_


class ProbingBus:
    """A Bus that, every ``every`` settles, complements each input in turn and records any output
    that changes in the same cycle (the SDC gives an input-to-output path no time)."""

    def __init__(self, bus, ports, every):
        self.bus, self.ports, self.every = bus, ports, every
        self.settles, self.probes, self.paths = 0, 0, set()

    def set(self, name, value):
        self.bus.set(name, value)

    def get(self, name):
        return self.bus.get(name)

    async def settle(self):
        self.settles += 1
        if self.settles % self.every:
            return
        self.probes += 1
        before = {name: self.bus.get(name) for name in self.ports.outputs}
        for name in self.ports.inputs:
            value = self.bus.get(name)
            self.bus.set(name, value ^ ((1 << self.ports.widths[name]) - 1))
            self.paths |= {(name, out) for out, was in before.items() if self.bus.get(out) != was}
            self.bus.set(name, value)

    async def tick(self):
        await self.bus.tick()


def test_no_input_reaches_an_output_in_its_cycle(seed):
    """Every output comes from flip-flops: through squashes (each reissued TEPL presented again, a tie
    on the ports), completions and memory traffic, complementing any input in a cycle changes no
    output in that cycle."""
    print(f"seed {seed}")
    reused = ReusedPE.get(8, 4)
    ports, probing = PePorts(), []

    async def bench(ctx):
        bus = ProbingBus(AmaranthBus(ctx, reused.dut), ports, every=5)
        probing.append(bus)
        await PROCEDURES["squash_recovery"](Bench(bus, {"W": 8, "L": 4, "seed": seed, "schemes": ["nvfp4"],
                                                        "densities": [0.2], "codebook_sizes": []}, lambda *a: None))

    reused.sim.run(bench)
    (bus,) = probing
    assert bus.probes > 50, bus.probes
    assert not bus.paths, sorted(bus.paths)
