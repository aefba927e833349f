"""The prefetcher on the Amaranth simulator, against plain Python statements of its rules
(hw/prefetcher.py): what it prefetches, its latency, and that no line is prefetched twice or
after its demand whatever order the loaders accept the tiles in."""

import math

import numpy as np
import pytest
from amaranth.sim import Simulator

from deca.golden import compress
from deca.hw.layouts import Stream, tepl_request_layout
from deca.hw.prefetcher import MAX_DELTA, Prefetcher
from deca.sim.bench.memory import MemoryModel
from deca.sim.measure.point import wasted_prefetch_bytes

LINE = 64
FIELDS = {Stream.MASK: ("mask_addr", "mask_len"), Stream.SCALE: ("scale_addr", "scale_len"),
          Stream.VALUE: ("val_addr", "val_len")}


def streams(req):
    """(stream, address, length) of a request's non-empty streams."""
    return [(s, req[a], req[n]) for s, (a, n) in FIELDS.items() if req[n]]


def run(dut, schedule, degree, ready=lambda cycle: True, quiet=60, demands=None):
    """Accept ``schedule`` [(cycle, request)] (increasing cycles) and demand ``demands`` [(cycle,
    request)] (by default each request one cycle after its acceptance, as a tile context takes it
    from an empty request queue), then run until no prefetch was valid for ``quiet`` cycles;
    returns [(cycle, line)] prefetched."""
    layout = tepl_request_layout(48, 8)
    issued, at = [], dict(schedule)
    demand_at = dict(demands if demands is not None else [(c + 1, r) for c, r in schedule])

    async def bench(ctx):
        ctx.set(dut.degree, degree)
        cycle, end = 0, max(*at, *demand_at) + quiet
        while cycle < end:
            ctx.set(dut.observe, cycle in at)
            if cycle in at:
                ctx.set(dut.request, layout.const(at[cycle]))
            ctx.set(dut.demand, cycle in demand_at)
            if cycle in demand_at:
                ctx.set(dut.demanded, layout.const(demand_at[cycle]))
            ctx.set(dut.pf.ready, ready(cycle))
            if ctx.get(dut.pf.valid):
                end = max(end, cycle + quiet)
                if ctx.get(dut.pf.ready):
                    addr = ctx.get(dut.pf.payload.addr)
                    assert addr % LINE == 0
                    issued.append((cycle, addr // LINE))
            await ctx.tick()
            cycle += 1

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return issued


def reference_prefetches(requests, degree, window=4):
    """Lines each stream prefetches when it has time for all of them, the streams' regions are
    apart and each tile is demanded after its acceptance's prefetches and before the next
    acceptance. An accepted tile starting more than ``window`` of its lengths below the highest
    start so far begins a new pass (lowest line: its first); otherwise prefetch above the highest
    line demanded or prefetched, through (addr + degree * delta + len - 1) div 64, delta from the
    previous tile, if 1 <= delta <= 2^16. A demanded tile not below the pass's lowest line raises
    the highest line over its own."""
    out, last, passes = {s: [] for s in Stream}, {}, {}
    for req in requests:
        for s, addr, length in streams(req):
            start, end = addr // LINE, (addr + length - 1) // LINE
            delta = addr - last[s] if s in last else 0
            last[s] = addr
            if s not in passes or addr + window * length < passes[s]["front"]:
                passes[s] = p = {"front": addr, "low": start, "top": start - 1}
            else:
                p = passes[s]
                p["front"], p["low"] = max(p["front"], addr), min(p["low"], start)
                if degree and 1 <= delta <= MAX_DELTA:
                    target = (addr + degree * delta + length - 1) // LINE
                    out[s] += range(p["top"] + 1, target + 1)
                    p["top"] = max(p["top"], target)
            p["top"] = max(p["top"], end)  # the demand
    return out


#: Off and the largest degree by default; the degrees between under -m slow.
@pytest.mark.parametrize("degree", [0, pytest.param(1, marks=pytest.mark.slow), pytest.param(5, marks=pytest.mark.slow), 15])
def test_prefetcher_follows_deltas_without_repeats(degree, rng):
    # Values of varying length back to back, masks every 64 bytes, scale blocks shared by pairs of
    # tiles (delta 0), then scales jump far backwards (another matrix: a new pass) and, at tile 20,
    # values step back by one tile (within the window: no new pass, no repeat).
    requests, val = [], 0x10_0005
    for t in range(24):
        n = int(rng.integers(1, 300))
        scale = 0x90_0000 + 32 * (t // 2) if t < 16 else 0x80_0000 + 32 * t
        if t == 20:
            val -= requests[-1]["val_len"]
        requests.append(dict(val_addr=val, val_len=n, mask_addr=0x50_0003 + 64 * t, mask_len=64,
                             scale_addr=scale, scale_len=32, id=t))
        val += n
    # 300 cycles between requests: time to issue all a request allows (one line per two cycles)
    # before its demand, 150 cycles later.
    issued = run(Prefetcher(48, 8), [(300 * t, req) for t, req in enumerate(requests)], degree,
                 demands=[(300 * t + 150, req) for t, req in enumerate(requests)])
    want = reference_prefetches(requests, degree)
    assert sorted(line for _, line in issued) == sorted(line for lines in want.values() for line in lines)
    assert len({line for _, line in issued}) == len(issued)
    if degree:
        assert want[Stream.VALUE] and want[Stream.MASK] and want[Stream.SCALE]
    else:
        assert not issued


def test_prefetch_latency_is_six_cycles():
    # Two tiles of 128-byte values 64 cycles apart; the second teaches delta 128: with degree 2 the
    # lines through (0x1080 + 2 * 128 + 127) div 64 = 71, above the demanded 67, i.e. 68..71.
    dut = Prefetcher(48, 8)
    tile = dict(mask_addr=0, mask_len=0, scale_addr=0, scale_len=0, id=0, val_len=128)
    issued = run(dut, [(0, {**tile, "val_addr": 0x1000}), (64, {**tile, "val_addr": 0x1080})], 2)
    assert issued[0] == (64 + 6, 68)  # 6 cycles from acceptance: the latency hw/prefetcher.py states
    assert [line for _, line in issued] == [68, 69, 70, 71]
    assert [cycle for cycle, _ in issued] == [70, 72, 74, 76]  # one line every two cycles


def acceptance_order(tiles, loaders, rng):
    """The order in which ``loaders`` ports accept a program-order list of tiles: each port holds
    the next tile of the program and any port may go first, but a tile waits for at most
    ``loaders`` - 1 others (a loader keeps its tile until it completed, completions leave in
    acceptance order, so a busy loader is free again before the others can take a second tile)."""
    waiting, order, nxt = [[t, 0] for t in range(min(loaders, tiles))], [], min(loaders, tiles)
    while waiting:
        overdue = [k for k, (_, waited) in enumerate(waiting) if waited >= loaders - 1]
        tile = waiting.pop(overdue[0] if overdue else int(rng.integers(len(waiting))))[0]
        order.append(tile)
        for entry in waiting:
            entry[1] += 1
        if nxt < tiles:
            waiting.append([nxt, 0])
            nxt += 1
    return order


#: (scheme, density, memory_image alignment); the first runs by default, all under -m slow.
WORKLOADS = [("bf8", 0.05, 1), ("bf16", 0.3, 1), ("bf8", 0.2, 64), ("mxfp4", None, 16), ("nvfp4", 0.5, 2),
             ("bf16", None, 1)]
ORDER_CASES = ([pytest.param(*w, 2, id=f"{w[0]}@{w[1]}-align{w[2]}-2") for w in WORKLOADS[:1]]
               + [pytest.param(*w, n, id=f"{w[0]}@{w[1]}-align{w[2]}-{n}", marks=pytest.mark.slow)
                  for n in (2, 4) for w in WORKLOADS if n == 4 or w not in WORKLOADS[:1]])


@pytest.mark.parametrize("scheme,density,align,loaders", ORDER_CASES)
def test_no_line_twice_or_after_demand_in_any_order(scheme, density, align, loaders, rng):
    tiles, degree, base = 24, int(rng.integers(1, 16)), 0x4000 + int(rng.integers(64))
    cm = compress(rng.standard_normal((16, 32 * tiles)).astype(np.float32), scheme, density=density)
    image, meta = cm.memory_image(base, align)
    requests = [{name: int(row[name]) for name in meta.dtype.names} | {"id": t} for t, row in enumerate(meta)]
    dut = Prefetcher(48, 8, loaders)
    for trial in range(3):
        order = acceptance_order(tiles, loaders, rng) if trial else list(range(tiles))
        gaps = rng.integers(1, 40, tiles) if trial else np.full(tiles, 80)  # 1: back to back
        cycles = np.cumsum(gaps)
        stalls = rng.random(int(cycles[-1]) + 5000) < (0.3 if trial else 0)
        # A tile context takes the request queue's head (acceptance order) one cycle or more after
        # its acceptance (in order: at once, as from an empty queue), and demands its lines from
        # the cycle after on.
        waits = rng.integers(1, 60, tiles) if trial else np.ones(tiles, int)
        takes = cycles + waits
        for t in range(1, tiles):
            takes[t] = max(takes[t], takes[t - 1] + 1)
        issued = run(dut, [(int(c), requests[t]) for c, t in zip(cycles, order)], degree, lambda c: not stalls[c],
                     demands=[(int(c), requests[t]) for c, t in zip(takes, order)])
        demanded = {}
        for c, t in zip(takes, order):
            for _, addr, length in streams(requests[t]):
                for line in range(addr // LINE, (addr + length - 1) // LINE + 1):
                    demanded.setdefault(line, int(c) + 1)
        label = f"{scheme}@{density} align {align}, {loaders} loaders, degree {degree}, order {order}"
        lines = [line for _, line in issued]
        assert len(set(lines)) == len(lines), f"{label}: a line prefetched twice"
        late = [(c, line) for c, line in issued if demanded.get(line, math.inf) <= c]
        assert not late, f"{label}: prefetched at or after demand: {late}"
        # Nothing beyond the end of a stream `degree` deltas ahead of the furthest tile.
        bound, last = 0, {}
        for t in order:
            for s, addr, length in streams(requests[t]):
                delta = addr - last.get(s, addr)
                last[s] = addr
                if 1 <= delta <= MAX_DELTA:
                    bound = max(bound, (addr + degree * delta + length - 1) // LINE)
        assert max(lines, default=0) <= bound, label
        if not trial:
            # In order with time to spare: every line of tiles 2 on of the value and mask streams
            # that the previous tile's prediction reaches (addr + degree * delta + len - 1; a longer
            # sparse tile may end beyond it) is prefetched before its demand, unless an earlier tile
            # demanded it.
            first = {line: c for c, line in reversed(issued)}
            for t in range(2, tiles):
                previous = {s: (addr, length) for s, addr, length in streams(requests[t - 1])}
                before = {s: addr for s, addr, _ in streams(requests[t - 2])}
                for s, addr, length in streams(requests[t]):
                    if s == Stream.SCALE:
                        continue
                    prev_addr, prev_len = previous[s]
                    reach = (prev_addr + degree * (prev_addr - before[s]) + prev_len - 1) // LINE
                    for line in range(addr // LINE, min(reach, (addr + length - 1) // LINE) + 1):
                        assert first.get(line, math.inf) < demanded[line] or demanded[line] < takes[t] + 1, \
                            f"{label}: tile {t} line {line:#x} not prefetched"


def test_wasted_prefetch_bytes_are_the_distinct_lines_outside_the_image(rng):
    # An image of 200 bytes at 0x1010: lines 0x1000 (partly in it) to 0x10c0 (partly in it).
    memory = MemoryModel(np.zeros(200, np.uint8), 0x1010, rng)
    for addr in (0x1000, 0x10c0, 0x1100, 0x1140, 0x1100, 0xfc0, 0x1040):
        memory.prefetch(addr, 0)
    # Outside: 0x1100 (twice: one line), 0x1140 and 0xfc0.
    assert wasted_prefetch_bytes(memory) == 3 * 64
