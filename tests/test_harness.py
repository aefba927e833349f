"""The pure-Python PE harness (deca.sim.harness): payload packing against Amaranth's own layouts, the
memory, core and scoreboard models, the watchdog, and whole runs against a behavioural fake PE that
follows the port contract."""

from collections import deque

import numpy as np
import pytest
from amaranth.hdl import Array, Const, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.sim import Simulator

from deca.golden import FormatError, compress, decompress_tile
from deca.hw.layouts import (
    LINE_BYTES, ErrorReason, mem_request_layout, mem_response_layout, prefetch_layout, tepl_request_layout,
    tepl_response_layout,
)
from deca.hw.registers import REGISTER_ADDR, field_value
from deca.sim.harness import (
    INPUTS, OUTPUTS, AmaranthBus, CoreModel, Hang, Harness, MemoryModel, Mismatch, Packer, PePorts, ProtocolError,
    Request, Scoreboard, UnresolvedValue, bubble_cycles, config_word, configure, malformed_requests, read_regs,
    tile_batch, write_reg,
)
from deca.sim.workloads import workloads

LAYOUTS = [tepl_request_layout(48, 8), tepl_response_layout(8), mem_request_layout(48, 6), mem_response_layout(6),
           prefetch_layout(40)]


# Packer -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("layout", LAYOUTS, ids=["tepl_req", "tepl_resp", "mem_req", "mem_resp", "pf_req"])
def test_packer_matches_amaranth_layouts(layout, rng):
    packer = Packer(layout)
    assert packer.width == layout.size
    for _ in range(50):
        values = {name: int.from_bytes(rng.bytes(-(-field.width // 8)), "little") & ((1 << field.width) - 1)
                  for name, field in layout}
        if "reason" in values:
            values["reason"] = int(rng.integers(0, 6))
        word = packer.pack(values)
        assert word == Const.cast(layout.const(values)).value
        assert packer.unpack(word) == values


def test_packer_takes_enum_members_and_refuses_what_does_not_fit():
    packer = Packer(tepl_response_layout(8))
    assert packer.unpack(packer.pack({"reason": ErrorReason.VALUE_LEN}))["reason"] == 5
    with pytest.raises(ValueError, match="id = 256 does not fit in 8 bits"):
        packer.pack({"id": 256})
    with pytest.raises(KeyError):
        packer.pack({"tag": 1})


# Memory -----------------------------------------------------------------------------------------


def memory(rng, size=1024, base=0x1000, **kwargs):
    image = np.arange(size, dtype=np.uint32).astype(np.uint8)
    return MemoryModel(image, base, rng, **kwargs), image


def drain(mem, start, limit=1000):
    """Take every response as soon as it is offered; returns [(cycle, tag, data)]."""
    got = []
    for cycle in range(start, start + limit):
        offer = mem.offer(cycle)
        if offer is not None:
            mem.take()
            got.append((cycle, *offer))
        if not mem.outstanding:
            break
    return got


def test_memory_latency_hits_and_data(rng):
    mem, image = memory(rng, miss_latency=(50, 60), hit_latency=(3, 5), reorder=False)
    mem.prefetch(0x1040)
    for tag, addr in enumerate((0x1000, 0x1040, 0x1000)):  # a miss, a prefetched line, a line read before
        mem.demand(addr, tag, cycle=10 + tag)
    cycles = {tag: cycle for cycle, tag, _ in drain(mem, 10)}
    assert 60 <= cycles[0] <= 70
    # The hits are due long before the miss but wait behind it: responses come in order without reorder.
    assert cycles[1] == cycles[0] + 1 and cycles[2] == cycles[0] + 2
    mem2, _ = memory(rng, miss_latency=(50, 60), hit_latency=(3, 5))
    mem2.prefetch(0x1080)
    mem2.demand(0x1080, 7, cycle=0)
    ((cycle, tag, data),) = drain(mem2, 0)
    assert 3 <= cycle <= 5 and tag == 7
    assert data == int.from_bytes(image[0x80:0xC0].tobytes(), "little")
    assert (mem.lines_demanded, mem.lines_prefetched, mem.prefetches) == (3, 1, [0x1040])


def test_memory_reorders_responses_that_are_due(rng):
    mem, _ = memory(rng, miss_latency=(10, 10))
    for tag in range(16):
        mem.demand(0x1000 + 64 * tag, tag, cycle=0)
    tags = [tag for _, tag, _ in drain(mem, 0)]
    assert sorted(tags) == list(range(16)) and tags != list(range(16))


def test_memory_bandwidth_limit(rng):
    mem, _ = memory(rng, size=4096, miss_latency=(1, 1), bytes_per_cycle=16)
    for tag in range(32):
        mem.demand(0x1000 + 64 * tag, tag, cycle=0)
    cycles = [cycle for cycle, _, _ in drain(mem, 1)]
    assert len(cycles) == 32
    assert min(np.diff(cycles)) == 4  # 64-byte lines at 16 bytes per cycle


def test_memory_garbage_outside_the_image_and_bad_reads(rng):
    mem, image = memory(rng, size=100, base=0x1010)
    first = mem.line(0x1000).to_bytes(64, "little")
    assert first[16:] == image[:48].tobytes() and first[:16] != bytes(16)
    with pytest.raises(ProtocolError, match="PE read line 0x1080 outside the image"):
        mem.demand(0x1080, 0, 0)
    with pytest.raises(ProtocolError, match="not a multiple of 64"):
        mem.demand(0x1020, 0, 0)
    mem.demand(0x1040, 3, 0)
    with pytest.raises(ProtocolError, match="reused tag 3"):
        mem.demand(0x1000, 3, 1)


def test_memory_backpressure(rng):
    mem, _ = memory(rng, req_backpressure=0.25, pf_backpressure=0.75)
    assert 0.70 < np.mean([mem.request_ready() for _ in range(4000)]) < 0.80
    assert 0.20 < np.mean([mem.prefetch_ready() for _ in range(4000)]) < 0.30


# Scoreboard -------------------------------------------------------------------------------------


def tile_request(label="t", seed=0):
    rows = tuple(int.from_bytes(np.random.default_rng(seed).bytes(64), "little") for _ in range(16))
    return Request({}, rows, label)


def beat(rid, row, data, last=None, error=0, reason=0):
    return {"id": rid, "row": row, "data": data, "last": int(row == 15) if last is None else last,
            "error": error, "reason": reason}


def deliver(board, rid, request):
    for row in range(16):
        done = board.beat(beat(rid, row, request.expected[row]), 0)
    return done


def test_scoreboard_accepts_whole_tiles_and_errors_in_order():
    board, a, b = Scoreboard(), tile_request("a"), Request({}, ErrorReason.MASK_LEN, "b")
    board.accept(1, a)
    board.accept(2, b)
    assert deliver(board, 1, a) is a
    assert board.beat(beat(2, 0, 0, last=1, error=1, reason=ErrorReason.MASK_LEN.value), 0) is b
    assert not board.inflight


def test_scoreboard_catches_wrong_data():
    board, a = Scoreboard(), tile_request("matrix tile 3")
    board.accept(7, a)
    board.beat(beat(7, 0, a.expected[0]), 0)
    bad = a.expected[1] ^ (1 << (16 * 5 + 3))
    want = a.expected[1] >> 80 & 0xFFFF
    with pytest.raises(Mismatch, match=rf"matrix tile 3 \(id 7\): row 1 element 5: got {want ^ 8:#06x}, "
                                       rf"expected {want:#06x}"):
        board.beat(beat(7, 1, bad), 0)


def test_scoreboard_catches_rows_out_of_order_and_a_missing_last():
    board, a = Scoreboard(), tile_request()
    board.accept(0, a)
    board.beat(beat(0, 0, a.expected[0]), 0)
    with pytest.raises(Mismatch, match="got row 2, expected row 1"):
        board.beat(beat(0, 2, a.expected[2]), 0)
    board2 = Scoreboard()
    board2.accept(0, a)
    for row in range(15):
        board2.beat(beat(0, row, a.expected[row]), 0)
    with pytest.raises(Mismatch, match="row 15 has last=0"):
        board2.beat(beat(0, 15, a.expected[15], last=0), 0)
    with pytest.raises(Mismatch, match="row 0 has last=1"):
        _with(a).beat(beat(0, 0, a.expected[0], last=1), 0)


def _with(request, rid=0):
    """A scoreboard with ``request`` in flight as id ``rid``."""
    board = Scoreboard()
    board.accept(rid, request)
    return board


def test_scoreboard_catches_stale_and_reordered_ids():
    a, b = tile_request("a", 1), tile_request("b", 2)
    board = _with(a, 1)
    deliver(board, 1, a)
    board.accept(2, b)
    with pytest.raises(Mismatch, match=r"not in flight, already completed \(a\)"):
        board.beat(beat(1, 0, a.expected[0]), 0)
    board.abort()
    with pytest.raises(Mismatch, match=r"aborted by a squash \(b\); nothing is in flight"):
        board.beat(beat(2, 0, b.expected[0]), 0)
    board.accept(3, a)
    board.accept(4, b)
    with pytest.raises(Mismatch, match=r"out of order: it belongs to b, but request id 3 \(a\) was accepted first"):
        board.beat(beat(4, 0, b.expected[0]), 0)
    with pytest.raises(Mismatch, match="never issued"):
        board.beat(beat(9, 0, 0), 0)


def test_scoreboard_catches_errors_where_tiles_belong_and_back():
    a, e = tile_request("a"), Request({}, ErrorReason.VALUE_LEN, "e")
    with pytest.raises(Mismatch, match="expected tile data, got error SCALE_LEN at row 0"):
        _with(a).beat(beat(0, 0, 0, last=1, error=1, reason=ErrorReason.SCALE_LEN.value), 0)
    with pytest.raises(Mismatch, match="expected error VALUE_LEN, got data row 0"):
        _with(e).beat(beat(0, 0, a.expected[0]), 0)
    with pytest.raises(Mismatch, match="reason VALUE_LEN.*got reason MASK_LEN"):
        _with(e).beat(beat(0, 0, 0, last=1, error=1, reason=ErrorReason.MASK_LEN.value), 0)
    with pytest.raises(Mismatch, match="got reason invalid reason 9"):
        _with(e).beat(beat(0, 0, 0, last=1, error=1, reason=9), 0)


# Core -------------------------------------------------------------------------------------------


def test_core_squash_reissues_in_order_with_fresh_ids(rng):
    requests = [tile_request(str(i), i) for i in range(5)]
    core = CoreModel(requests, rng, id_bits=2)
    core.fill_ports()
    accepted = core.accept(0)
    core.fill_ports()
    assert [slot[0] for slot in core.ports] == [2, 1] and accepted == (0, requests[0])
    aborted = core.squash([requests[0]])
    assert aborted == requests[:3] and core.ports == [None, None]
    assert list(core.pending) == requests
    core.fill_ports()
    assert core.ports == [(3, requests[0]), (0, requests[1])]  # ids go on, modulo 2**id_bits
    assert core.squash_cycles == 1 and not core.dropped


def test_core_squash_drops_without_reissue(rng):
    requests = [tile_request(str(i), i) for i in range(4)]
    core = CoreModel(requests, rng, reissue=0.0)
    core.fill_ports()
    core.squash([])
    assert core.dropped == requests[:2] and list(core.pending) == requests[2:]


def test_core_squash_schedule_and_backpressure(rng):
    core = CoreModel([], rng, squash_at=[3], squash_prob=0.5, resp_backpressure=0.5)
    assert core.squash_now(3, in_flight=False) and not core.squash_now(4, in_flight=False)
    assert 0.4 < np.mean([core.squash_now(5, in_flight=True) for _ in range(2000)]) < 0.6
    assert 0.4 < np.mean([core.resp_ready() for _ in range(2000)]) < 0.6


# Watchdog and X/Z -------------------------------------------------------------------------------


class StuckBus:
    """A PE that never takes or offers anything; ``x_at`` makes one output X from that cycle."""

    def __init__(self, x_at=None):
        self.cycle, self.x_at = 0, x_at

    def set(self, name, value):
        assert name in INPUTS

    def get(self, name):
        if self.x_at is not None and self.cycle >= self.x_at and name == "mem_req__payload":
            raise UnresolvedValue(f"{name} = 10xx")
        return 0

    async def settle(self):
        pass

    async def tick(self):
        self.cycle += 1


def drive(coroutine):
    """Run a coroutine that only awaits fake buses (which never suspend)."""
    try:
        coroutine.send(None)
    except StopIteration as stop:
        return stop.value
    raise AssertionError("the coroutine suspended")


def stuck_harness(rng):
    batch = tile_batch(compress(np.ones((16, 32), np.float32), "int8"), "ones")
    return Harness(CoreModel(batch.requests, rng), MemoryModel(batch.image, batch.base, rng), Scoreboard(), PePorts())


def test_watchdog_raises_hang_with_a_summary(rng):
    harness = stuck_harness(rng)
    with pytest.raises(Hang, match=r"(?s)cycle 51: no handshake for 50 cycles.*port 0: id 0 ones tile 0.*"
                                   r"0 memory reads outstanding"):
        drive(harness.run(StuckBus(), watchdog=50))
    with pytest.raises(Hang, match="more than 20 cycles"):
        drive(stuck_harness(rng).run(StuckBus(), max_cycles=20, watchdog=50))


def test_x_on_an_output_names_port_and_cycle(rng):
    with pytest.raises(UnresolvedValue, match=r"cycle 7: mem_req__payload = 10xx"):
        drive(stuck_harness(rng).run(StuckBus(x_at=7)))


# A behavioural PE --------------------------------------------------------------------------------


class _Tepl:
    def __init__(self, rid, meta):
        self.id, self.meta = rid, meta
        self.lines, self.rows, self.error = {}, None, None


class FakePE:
    """A PE in Python behind the Bus protocol: checks metadata, reads every line of a tile's streams,
    decompresses with the golden model and completes in request order; a squash aborts everything.
    It prefetches the line after each value stream. ``corrupt``: flip a bit of that row of the
    first tile. ``stuck``: a squash leaves loader 1 busy."""

    def __init__(self, config, ports, corrupt=None, stuck=False):
        self.config, self.ports, self.corrupt, self.stuck = config, ports, corrupt, stuck
        self.inputs, self.out = dict.fromkeys(INPUTS, 0), {}
        self.loaders, self.order = [None, None], deque()
        self.reads, self.prefetches = deque(), deque()  # (tepl, line address) to request; line addresses
        self.tags = {}  # tag -> (tepl, line address) at the memory; a squash leaves them stale
        self.row = 0

    def set(self, name, value):
        self.inputs[name] = int(value)

    def get(self, name):
        return self.out[name]

    async def settle(self):
        p, out = self.ports, dict.fromkeys(OUTPUTS, 0)
        out["mem_resp__ready"] = 1
        for i, loader in enumerate(self.loaders):
            out[f"tepl_req__{i}__ready"] = int(loader is None)
        if self.reads:
            self.tag = min(set(range(1 << p.tag_bits)) - set(self.tags))
            out["mem_req__valid"] = 1
            out["mem_req__payload"] = p.mem_req.pack({"addr": self.reads[0][1], "tag": self.tag})
        if self.prefetches:
            out["pf_req__valid"], out["pf_req__payload"] = 1, p.pf_req.pack({"addr": self.prefetches[0]})
        head = self.order[0] if self.order else None
        if head is not None and head.error is not None:
            out["tepl_resp__valid"] = 1
            out["tepl_resp__payload"] = p.tepl_resp.pack({"id": head.id, "last": 1, "error": 1, "reason": head.error})
        elif head is not None and head.rows is not None:
            out["tepl_resp__valid"] = 1
            out["tepl_resp__payload"] = p.tepl_resp.pack({"id": head.id, "row": self.row, "last": int(self.row == 15),
                                                          "data": head.rows[self.row]})
        self.out = out

    async def tick(self):
        p, i, out = self.ports, self.inputs, self.out
        if i["mem_resp__valid"]:
            resp = p.mem_resp.unpack(i["mem_resp__payload"])
            tepl, addr = self.tags.pop(resp["tag"])
            tepl.lines[addr] = resp["data"].to_bytes(LINE_BYTES, "little")
            self._finish(tepl)
        if out["mem_req__valid"] and i["mem_req__ready"]:
            self.tags[self.tag] = self.reads.popleft()
        if out["pf_req__valid"] and i["pf_req__ready"]:
            self.prefetches.popleft()
        if i["squash"]:
            self.loaders, self.order, self.row = [None, self.loaders[1] if self.stuck else None], deque(), 0
            self.reads.clear()
            return
        if out["tepl_resp__valid"] and i["tepl_resp__ready"]:
            self.row += 1
            if out["tepl_resp__payload"] >> p.tepl_resp.offset("last") & 1:
                done = self.order.popleft()
                self.loaders[self.loaders.index(done)] = None
                self.row = 0
        port = next((k for k in (0, 1) if i[f"tepl_req__{k}__valid"] and out[f"tepl_req__{k}__ready"]), None)
        if port is not None:
            self._accept(port, p.tepl_req.unpack(i[f"tepl_req__{port}__payload"]))

    def _accept(self, port, req):
        tepl = self.loaders[port] = _Tepl(req["id"], req)
        self.order.append(tepl)
        cfg, streams = self.config, [(req[f"{s}_addr"], req[f"{s}_len"]) for s in ("mask", "scale", "val")]
        if any(addr + length > 1 << self.ports.addr_bits for addr, length in streams):
            tepl.error = ErrorReason.ADDR_WRAP
        elif req["mask_len"] != cfg.mask_stream_len:
            tepl.error = ErrorReason.MASK_LEN
        elif req["scale_len"] != cfg.scale_stream_len:
            tepl.error = ErrorReason.SCALE_LEN
        else:
            self.reads.extend((tepl, line) for addr, length in streams if length
                              for line in range(addr & -LINE_BYTES, addr + length, LINE_BYTES))
            self.prefetches.append((req["val_addr"] + req["val_len"]) & -LINE_BYTES)
            self._finish(tepl)

    def _finish(self, tepl):
        if tepl not in self.loaders or any(t is tepl for t, _ in self.reads) \
                or any(t is tepl for t, _ in self.tags.values()):
            return
        def read(stream):
            addr, length = tepl.meta[f"{stream}_addr"], tepl.meta[f"{stream}_len"]
            return bytes(tepl.lines[a & -LINE_BYTES][a % LINE_BYTES] for a in range(addr, addr + length))

        try:
            tile = decompress_tile(read("val"), read("mask"), read("scale"), self.config)
        except FormatError:
            tepl.error = ErrorReason.VALUE_LEN
            return
        tepl.rows = [int.from_bytes(row.astype("<u2").tobytes(), "little") for row in tile]
        if self.corrupt is not None:
            tepl.rows[self.corrupt] ^= 1
            self.corrupt = None


def run_fake(batch, rng, pe_kwargs=None, core_kwargs=None, memory_kwargs=None):
    ports = PePorts()
    harness = Harness(CoreModel(batch.requests, rng, **(core_kwargs or {})),
                      MemoryModel(batch.image, batch.base, rng, **(memory_kwargs or {})), Scoreboard(), ports)
    drive(harness.run(FakePE(batch.config, ports, **(pe_kwargs or {}))))
    return harness


@pytest.fixture(scope="module")
def matrices():
    cases = workloads(np.random.default_rng(1), schemes=["bf16", "nvfp4", "int8", "ternary"],
                      densities=(1, 0.3, 0), shape=(32, 64), extra_densities={})
    return dict(cases)


def test_fake_pe_runs_every_tile_through_rough_memory_and_core(matrices, rng):
    for label, cm in matrices.items():
        batch = tile_batch(cm, label, align=1)
        harness = run_fake(batch, rng, core_kwargs={"resp_backpressure": 0.3},
                           memory_kwargs={"bytes_per_cycle": 24, "req_backpressure": 0.2, "pf_backpressure": 0.5})
        counters = harness.observed_counters()
        assert counters["TILES"] == cm.num_tiles and counters["ERRORS"] == counters["SQUASHES"] == 0, label
        assert counters["LINES_DEMANDED"] > 0 and counters["BACKPRESSURE_CYCLES"] > 0, label
        assert counters["LINES_PREFETCHED"] == cm.num_tiles and counters["BUSY_CYCLES"] < harness.cycle, label


def test_fake_pe_malformed_requests_fail_with_their_reason(matrices, rng):
    for label in ("nvfp4@0.3", "bf16@1", "ternary@0"):
        batch = tile_batch(matrices[label], label)
        bad = malformed_requests(batch)
        batch.requests = [batch.requests[0], *bad, batch.requests[1]]
        harness = run_fake(batch, rng)
        assert harness.core.errors == len(bad) and harness.core.tiles == 2
        assert {r.expected for r in bad} == set(ErrorReason) - {ErrorReason.NONE, ErrorReason.CONFIG}


def test_fake_pe_squashes_abort_and_reissue(matrices, rng):
    cm = matrices["int8@0.3"]
    batch = tile_batch(cm, "int8")
    batch.requests += tile_batch(cm, "again").requests
    total = len(batch.requests)
    # Squashes before anything is accepted, mid-way through the first tiles and in completions.
    harness = run_fake(batch, rng, core_kwargs={"squash_at": [0, 3, 40, 120], "resp_backpressure": 0.3})
    core = harness.core
    assert core.squash_cycles == 4 and core.tiles == total and not core.dropped
    assert harness.memory.lines_demanded > run_fake(batch, rng).memory.lines_demanded  # aborted reads happened
    # Without reissue, what a squash aborts is gone for good.
    harness = run_fake(batch, rng, core_kwargs={"squash_at": [5], "squash_prob": 0.02, "reissue": 0.0})
    core = harness.core
    assert len(core.dropped) >= 2 and core.tiles + len(core.dropped) == total
    assert not set(core.delivered) & set(core.dropped)


def test_a_loader_busy_after_a_squash_is_caught(matrices, rng):
    batch = tile_batch(matrices["int8@1"], "int8@1")
    batch.requests = batch.requests[:2]
    with pytest.raises(ProtocolError, match=r"cycle 4: the PE is not idle the cycle after a squash "
                                            r"\(tepl_req ready = \(1, 0\)\)"):
        run_fake(batch, rng, pe_kwargs={"stuck": True}, core_kwargs={"squash_at": [3], "reissue": 0.0})


def test_fake_pe_corrupted_row_is_caught(matrices, rng):
    batch = tile_batch(matrices["nvfp4@1"], "nvfp4@1")
    with pytest.raises(Mismatch, match=r"nvfp4@1 tile \d \(id \d\): row 6 element 0: got 0x[0-9a-f]{4}, expected"):
        run_fake(batch, rng, pe_kwargs={"corrupt": 6})


def test_bubble_cycles():
    dense = compress(np.ones((16, 32), np.float32), "int8")
    # W = 32, L = 4, Q = 8: Lq = 4, so each of the 16 vOps takes 8 cycles: 7 bubbles each.
    assert bubble_cycles(b"", 8, 32, 4) == 16 * 7
    half = np.zeros(64, np.uint8)
    half[:32] = 0xFF  # rows 0..7 stored
    # Q = 4 at L = 4: Lq = 16; full vOps of W = 32 take 2 cycles, empty ones 1 (no bubble).
    assert bubble_cycles(half.tobytes(), 4, 32, 4) == 8
    assert config_word(dense.config) == field_value("CONFIG", Q=8, SCALE_FORMAT=1)


# Registers --------------------------------------------------------------------------------------


class RegisterFile(wiring.Component):
    """64 plain registers on the cfg bus: rdata shows the register addressed in the previous cycle."""

    def __init__(self):
        super().__init__({"cfg": In(wiring.Signature({"addr": Out(6), "wdata": Out(32), "we": Out(1),
                                                      "rdata": In(32)}))})

    def elaborate(self, platform):
        m = Module()
        regs = Array(Signal(32, name=f"r{i}") for i in range(64))
        with m.If(self.cfg.we):
            m.d.sync += regs[self.cfg.addr].eq(self.cfg.wdata)
        m.d.sync += self.cfg.rdata.eq(regs[self.cfg.addr])
        return m


def test_register_helpers_on_the_amaranth_simulator():
    dut, got = RegisterFile(), {}
    values = {"CONFIG": 0x1F, "PREFETCH": 3, "TILES": 0xFFFFFFFF, "BUSY_CYCLES": 12345}

    async def bench(ctx):
        bus = AmaranthBus(ctx, dut)
        for name, value in values.items():
            await write_reg(bus, name, value)
        got.update(await read_regs(bus, list(values)))

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert got == values


class RecordingBus:
    """Records the register writes that happen at each clock edge."""

    def __init__(self):
        self.inputs, self.writes = {}, []

    def set(self, name, value):
        self.inputs[name] = int(value)

    async def tick(self):
        if self.inputs.get("cfg__we"):
            self.writes.append((self.inputs["cfg__addr"], self.inputs["cfg__wdata"]))


@pytest.mark.parametrize("scheme", ["codebook", "bf16"])
def test_configure_writes_config_lut_and_prefetch(scheme, rng):
    codebook = np.arange(-10, 10) / 8 if scheme == "codebook" else None
    cfg = compress(rng.normal(size=(16, 32)), scheme, density=0.5, codebook=codebook).config
    bus = RecordingBus()
    drive(configure(bus, cfg, prefetch_degree=3))
    lut = [(REGISTER_ADDR["LUT_INDEX"], 0), *((REGISTER_ADDR["LUT_DATA"], int(v)) for v in cfg.lut[:20])]
    assert bus.writes == [(REGISTER_ADDR["CONFIG"], config_word(cfg)), *(lut if scheme == "codebook" else []),
                          (REGISTER_ADDR["PREFETCH"], 3)]
    assert config_word(cfg) == field_value("CONFIG", Q=cfg.q_bits, SPARSE=1)
