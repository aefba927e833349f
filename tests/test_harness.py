"""The pure-Python PE harness (deca.sim.bench): payload packing against Amaranth's own layouts, the
memory, core and scoreboard models, the watchdog, and whole runs against a behavioural fake PE that
follows the port contract."""

import math
from fractions import Fraction

import numpy as np
import pytest
from amaranth.hdl import Array, Const, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.sim import Simulator

from deca.golden import compress
from deca.hw.layouts import (
    LINE_BYTES, ErrorReason, mem_request_layout, mem_response_layout, prefetch_layout, tepl_request_layout,
    tepl_response_layout,
)
from deca.hw.registers import REGISTER_ADDR, field_value
from deca.sim.bench.bus import AmaranthBus, Hang, Mismatch, ProtocolError, UnresolvedValue
from deca.sim.bench.cores import CoreModel
from deca.sim.bench.harness import Harness
from deca.sim.bench.memory import MemoryModel
from deca.sim.bench.ports import Packer, PePorts
from deca.sim.bench.registers import config_word, configure, read_regs, write_reg
from deca.sim.bench.scoreboard import Scoreboard
from deca.sim.bench.stimulus import Request, malformed_requests, tile_batch, workloads
from deca.sim.model.bubbles import tile_cycles
from fake_pe import drive, run_fake

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


def run_memory(mem, events, limit=20000):
    """Drive ``mem`` cycle by cycle from cycle 0: ``events`` maps a cycle to the calls made in it,
    ("demand", addr, tag) or ("prefetch", addr); every response is taken as soon as it is offered.
    Returns {tag: (cycle, data)}."""
    got, last = {}, max(events)
    for cycle in range(limit):
        for kind, addr, *tag in events.get(cycle, ()):
            if kind == "demand":
                mem.demand(addr, tag[0], cycle)
            else:
                mem.prefetch(addr, cycle)
        offer = mem.offer(cycle)
        if offer is not None:
            mem.take()
            assert offer[0] not in got
            got[offer[0]] = cycle, offer[1]
        if cycle >= last and not mem.outstanding:
            return got
    raise AssertionError(f"responses still outstanding after {limit} cycles")


def line_of(image, base, addr):
    return int.from_bytes(image[addr - base:addr - base + LINE_BYTES].tobytes(), "little")


def test_memory_latency_hits_and_data(rng):
    miss, hit = 50, 4
    mem, image = memory(rng, miss_latency=(miss, miss), hit_latency=(hit, hit))
    m, p = 0x1000, 0x1040
    events = {0: [("prefetch", p)],
              10: [("demand", p, 1)],  # prefetched, not arrived yet
              20: [("demand", m, 0)],  # a miss
              60: [("demand", p, 2)],  # in L2
              67: [("demand", m, 3)],  # on its way, but arriving before the hit latency ends
              100: [("demand", m, 4)]}  # in L2
    p_arrives, m_arrives = 0 + miss, 20 + miss
    want = {1: p_arrives, 0: m_arrives, 2: 60 + hit, 3: max(m_arrives, 67 + hit), 4: 100 + hit}
    assert len(set(want.values())) == len(want)  # one due per cycle: each goes out when due
    got = run_memory(mem, events)
    assert {tag: cycle for tag, (cycle, _) in got.items()} == want
    assert got[1][0] > 10 + hit  # not earlier than the prefetched line arrives
    for tag, addr in ((0, m), (1, p), (2, p), (3, m), (4, m)):
        assert got[tag][1] == line_of(image, 0x1000, addr)
    assert (mem.lines_fetched, mem.lines_demanded, mem.lines_prefetched, mem.prefetches) == (2, 5, 1, [p])


def test_memory_responses_in_order_without_reorder(rng):
    miss, hit = 50, 4
    mem, _ = memory(rng, miss_latency=(miss, miss), hit_latency=(hit, hit), reorder=False)
    # The prefetched line is due at 51 + hit, before the miss (10 + miss), but waits behind it.
    got = run_memory(mem, {0: [("prefetch", 0x1040)], 10: [("demand", 0x1000, 0)], 51: [("demand", 0x1040, 1)]})
    assert 51 + hit < 10 + miss
    assert {tag: cycle for tag, (cycle, _) in got.items()} == {0: 10 + miss, 1: 10 + miss + 1}


def test_memory_latencies_are_drawn_from_the_inclusive_ranges(rng):
    lines = 200
    mem, _ = memory(rng, size=lines * LINE_BYTES, miss_latency=(50, 60), hit_latency=(3, 5))
    # A miss of line i at 40i answers in [40i + 50, 40i + 60]; the line read again at 40i + 62 (in
    # L2 by then) answers in [40i + 65, 40i + 67]: no two responses can be due in the same cycle.
    events = {}
    for i in range(lines):
        events.setdefault(40 * i, []).append(("demand", 0x1000 + LINE_BYTES * i, 2 * i))
        events.setdefault(40 * i + 62, []).append(("demand", 0x1000 + LINE_BYTES * i, 2 * i + 1))
    got = run_memory(mem, events)
    misses = {got[2 * i][0] - 40 * i for i in range(lines)}
    hits = {got[2 * i + 1][0] - (40 * i + 62) for i in range(lines)}
    assert misses == set(range(50, 61)) and hits == set(range(3, 6))
    assert mem.lines_fetched == lines and mem.lines_demanded == 2 * lines


def test_memory_reorders_responses_that_are_due(rng):
    mem, _ = memory(rng, miss_latency=(10, 10))
    for tag in range(16):
        mem.demand(0x1000 + 64 * tag, tag, cycle=0)
    tags = [tag for _, tag, _ in drain(mem, 0)]
    assert sorted(tags) == list(range(16)) and tags != list(range(16))


@pytest.mark.parametrize("bytes_per_cycle", [16, 24])
def test_memory_bandwidth_limit(bytes_per_cycle, rng):
    # A burst of misses: the channel starts a line every 64 / bytes_per_cycle cycles, in order, and
    # each arrives the miss latency after its (whole) start cycle.
    lines, miss = 32, 10
    mem, _ = memory(rng, size=lines * LINE_BYTES, miss_latency=(miss, miss), bytes_per_cycle=bytes_per_cycle)
    got = run_memory(mem, {0: [("demand", 0x1000 + LINE_BYTES * tag, tag) for tag in range(lines)]})
    interval = Fraction(LINE_BYTES, bytes_per_cycle)
    want = [math.ceil(k * interval) + miss for k in range(lines)]
    assert [got[tag][0] for tag in range(lines)] == want
    if bytes_per_cycle == 16:
        assert want[:4] == [10, 14, 18, 22]
    assert mem.lines_fetched == lines


def test_memory_prefetches_share_the_channel(rng):
    miss, hit, interval = 10, 4, 4  # 16 bytes per cycle: a line every 4 cycles
    mem, _ = memory(rng, miss_latency=(miss, miss), hit_latency=(hit, hit), bytes_per_cycle=LINE_BYTES // interval)
    line = [0x1000 + LINE_BYTES * i for i in range(8)]
    events = {0: [("prefetch", line[i]) for i in range(4)],  # the channel is busy until 4 * interval
              1: [("demand", line[4], 0)],  # a miss behind the prefetches
              2: [("demand", line[3], 1)],  # the last prefetch, on its way
              3: [("prefetch", line[0]), ("prefetch", line[3])],  # in L2 / on its way: not fetched again
              4: [("demand", line[5], 2)],  # a miss behind the first one
              100: [("demand", line[6], 3)]}  # the channel is idle again
    starts = [0 * interval, 1 * interval, 2 * interval, 3 * interval, 4 * interval, 5 * interval, 100]
    want = {0: starts[4] + miss, 1: max(starts[3] + miss, 2 + hit), 2: starts[5] + miss, 3: starts[6] + miss}
    got = run_memory(mem, events)
    assert {tag: cycle for tag, (cycle, _) in got.items()} == want
    assert (mem.lines_fetched, mem.lines_prefetched, mem.lines_demanded) == (7, 6, 4)

    def busy(cycles):  # the channel's busy cycles among the first ``cycles``, from the start times
        return sum(max(0, min(start + interval, cycles) - start) for start in starts)

    for cycles in (101, 102, 104, 200):
        assert mem.channel_busy(cycles) == pytest.approx(busy(cycles))
    assert busy(102) == 6 * interval + 2  # the last fetch is clipped


def test_memory_channel_busy_clips_a_burst_and_refuses_no_limit(rng):
    mem, _ = memory(rng, bytes_per_cycle=16)
    for tag in range(3):  # busy over cycles 0..11
        mem.demand(0x1000 + LINE_BYTES * tag, tag, cycle=0)
    assert [mem.channel_busy(c) for c in (1, 6, 12, 50)] == [pytest.approx(v) for v in (1, 6, 12, 12)]
    unlimited, _ = memory(rng)
    with pytest.raises(ValueError, match="unlimited channel"):
        unlimited.channel_busy(10)


@pytest.mark.parametrize("bytes_per_cycle", [0, -16, 0.0, float("nan")])
def test_memory_refuses_a_bandwidth_that_is_not_positive(bytes_per_cycle, rng):
    with pytest.raises(ValueError, match="memory bandwidth must be a positive number"):
        memory(rng, bytes_per_cycle=bytes_per_cycle)


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
        assert name in PePorts().inputs

    def get(self, name):
        if self.x_at is not None and self.cycle >= self.x_at and name == "mem_req__payload":
            raise UnresolvedValue(f"{name} = 10xx")
        return 0

    async def settle(self):
        pass

    async def tick(self):
        self.cycle += 1


def stuck_harness(rng, **memory):
    batch = tile_batch(compress(np.ones((16, 32), np.float32), "int8"), "ones")
    return Harness(CoreModel(batch.requests, rng), MemoryModel(batch.image, batch.base, rng, **memory), Scoreboard(),
                   PePorts())


def test_watchdog_raises_hang_with_a_summary(rng):
    harness = stuck_harness(rng)
    with pytest.raises(Hang, match=r"(?s)cycle 51: no handshake and no memory read outstanding for 50 cycles.*"
                                   r"port 0: id 0 ones tile 0.*0 memory reads outstanding"):
        drive(harness.run(StuckBus(), watchdog=50))
    with pytest.raises(Hang, match="more than 20 cycles"):
        drive(stuck_harness(rng).run(StuckBus(), max_cycles=20, watchdog=50))


class PrefetchingBus(StuckBus):
    """A PE that prefetches the lines ``lines[1:]``, one a cycle, then reads ``lines[0]`` (tag 0), and
    does nothing else."""

    def __init__(self, lines):
        super().__init__()
        self.ports, self.lines, self.ready = PePorts(), list(lines), {}

    def set(self, name, value):
        super().set(name, value)
        self.ready[name] = value

    def get(self, name):
        prefetching, reading = len(self.lines) > 1, len(self.lines) == 1
        if name == "pf_req__valid":
            return int(prefetching)
        if name == "pf_req__payload" and prefetching:
            return self.ports.pf_req.pack({"addr": self.lines[1]})
        if name == "mem_req__valid":
            return int(reading)
        if name == "mem_req__payload" and reading:
            return self.ports.mem_req.pack({"addr": self.lines[0], "tag": 0})
        return 0

    async def tick(self):
        if len(self.lines) > 1 and self.ready["pf_req__ready"]:
            del self.lines[1]
        elif len(self.lines) == 1 and self.ready["mem_req__ready"]:
            self.lines = []
        await super().tick()


def test_watchdog_waits_for_a_read_the_memory_owes(rng):
    """A read queued behind prefetches on a narrow channel comes long after the watchdog's cycles
    without a handshake: the PE waits for it, which is no hang; the watchdog counts from its response."""
    harness = stuck_harness(rng, miss_latency=(10, 10), bytes_per_cycle=1, reorder=False)
    first = harness.memory.base // LINE_BYTES * LINE_BYTES
    # Prefetches in cycles 0 to 3 take the channel until cycle 256; the read (cycle 4) is due in 266.
    with pytest.raises(Hang, match=r"(?s)cycle 317: no handshake and no memory read outstanding for 50 cycles\n"
                                   r"last handshake in cycle 266\n.*0 memory reads outstanding"):
        drive(harness.run(PrefetchingBus([first + k * LINE_BYTES for k in range(5)]), watchdog=50))


def test_x_on_an_output_names_port_and_cycle(rng):
    with pytest.raises(UnresolvedValue, match=r"cycle 7: mem_req__payload = 10xx"):
        drive(stuck_harness(rng).run(StuckBus(x_at=7)))


# Whole runs on a behavioural PE (tests/fake_pe.py) ----------------------------------------------


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


def test_the_budget_grows_by_reissue_cycles_for_each_reissued_request(matrices, rng):
    """A squash makes the PE run what it aborted again: every request the core reissues adds
    ``reissue_cycles`` to ``max_cycles``."""
    batch = tile_batch(matrices["int8@0.3"], "int8")
    squashes = {"squash_at": [3, 40], "reissue": 1.0}
    state = rng.bit_generator.state
    free = run_fake(batch, rng, core_kwargs=squashes)
    cycles, reissues = free.cycle, free.core.reissues
    assert reissues >= 2 and free.core.squash_cycles == 2

    def run(max_cycles, reissue_cycles):
        rng.bit_generator.state = state
        return run_fake(batch, rng, core_kwargs=squashes, run_kwargs={"max_cycles": max_cycles,
                                                                      "reissue_cycles": reissue_cycles})

    assert run(cycles - 2 * reissues, 2).cycle == cycles
    with pytest.raises(Hang, match=f"the run took more than {cycles - 1} cycles"):
        run(cycles - 2 * reissues - 1, 2)
    with pytest.raises(Hang, match=f"the run took more than {cycles - 2 * reissues} cycles"):
        run(cycles - 2 * reissues, 0)


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


def test_tile_cycles():
    dense = compress(np.ones((16, 32), np.float32), "int8")
    # W = 32, L = 4, Q = 8: Lq = 4, so each of the 16 vOps takes 8 cycles: 7 bubbles each.
    assert tile_cycles(b"", 8, 32, 4) == 16 * 8
    half = np.zeros(64, np.uint8)
    half[:32] = 0xFF  # rows 0..7 stored
    # Q = 4 at L = 4: Lq = 16; full vOps of W = 32 take 2 cycles, empty ones 1 (no bubble).
    assert tile_cycles(half.tobytes(), 4, 32, 4) == 16 + 8
    # Several tiles at once, dense and sparse: the sum (a dense vOp takes 2 cycles at Lq = 16).
    assert tile_cycles([half.tobytes(), b"", half.tobytes()], 4, 32, 4) == 2 * (16 + 8) + 16 * 2
    assert config_word(dense.config) == field_value("CONFIG", Q=8, SCALE_FORMAT=1)


# Registers --------------------------------------------------------------------------------------


class RegisterFile(wiring.Component):
    """64 plain registers on the cfg bus, as the PE has it: the bus is registered, then rdata shows
    the register addressed READ_LATENCY cycles earlier (the address registered once more)."""

    def __init__(self):
        super().__init__({"cfg": In(wiring.Signature({"addr": Out(6), "wdata": Out(32), "we": Out(1),
                                                      "rdata": In(32)}))})

    def elaborate(self, platform):
        m = Module()
        regs = Array(Signal(32, name=f"r{i}") for i in range(64))
        addr, wdata, we = Signal(6), Signal(32), Signal()
        read_addr = Signal(6)
        m.d.sync += [addr.eq(self.cfg.addr), wdata.eq(self.cfg.wdata), we.eq(self.cfg.we), read_addr.eq(addr)]
        with m.If(we):
            m.d.sync += regs[addr].eq(wdata)
        m.d.sync += self.cfg.rdata.eq(regs[read_addr])
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
