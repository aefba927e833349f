"""The loader's blocks on the Amaranth simulator: realigning line queues, the tag table and the
prefetcher, each against a plain Python statement of what it must do."""

import numpy as np
import pytest
from amaranth.sim import Simulator

from deca.hw.layouts import LINE_BYTES, Stream, tepl_request_layout
from deca.hw.prefetcher import MAX_DELTA, Prefetcher
from deca.hw.queues import LineQueue
from deca.hw.tags import TagTable


def simulate(dut, bench):
    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()


# (rows, row bytes, beat bytes): the SQQ of W=8/L=1 (8-byte beats), of W=32/L=8 (64-byte beats),
# of W=64/L=16 (128-byte beats and rows), small SQQs that must wrap (the two-row one has one row
# per bank), and the one-row mask queue.
QUEUES = [(32, 64, 8), (32, 64, 64), (16, 128, 128), (4, 64, 16), (2, 64, 32), (1, 64, 64)]


@pytest.mark.parametrize("rows,row_bytes,beat_bytes", QUEUES, ids=[f"{r}x{b}by{c}" for r, b, c in QUEUES])
def test_line_queue_realigns_any_offset_and_order(rows, row_bytes, beat_bytes, rng):
    dut = LineQueue(rows, row_bytes, beat_bytes)
    capacity = rows * row_bytes
    cases = [(int(rng.integers(64)), int(n)) for n in
             rng.integers(0, min(capacity, 1100) if rows > 1 else 65, size=12)]
    cases += [(63, 64 if rows == 1 else 1024), (0, 0), (5, 1)]
    got = {}

    async def bench(ctx):
        for case, (offset, length) in enumerate(cases):
            stream_bytes = rng.integers(0, 256, length, dtype=np.uint8)
            # The lines as memory holds them: bytes outside the stream are garbage.
            n_lines = (offset + length + LINE_BYTES - 1) // LINE_BYTES
            memory = rng.integers(0, 256, n_lines * LINE_BYTES, dtype=np.uint8)
            memory[offset:offset + length] = stream_bytes
            ctx.set(dut.start, 1)
            ctx.set(dut.offset, offset)
            ctx.set(dut.length, length)
            await ctx.tick()
            ctx.set(dut.start, 0)
            issued, waiting, out = 0, [], bytearray()
            for _ in range(20 * n_lines + 200):
                # Request lines while there is room, return them in random order.
                ctx.set(dut.issue_index, issued)
                if issued < n_lines and ctx.get(dut.room) and rng.random() < 0.7:
                    waiting.append(issued)
                    issued += 1
                ctx.set(dut.write.valid, 0)
                if waiting and rng.random() < 0.6:
                    k = waiting.pop(int(rng.integers(len(waiting))))
                    ctx.set(dut.write.valid, 1)
                    ctx.set(dut.write.payload.index, k)
                    ctx.set(dut.write.payload.data, int.from_bytes(memory[k * 64:k * 64 + 64].tobytes(), "little"))
                ready = rng.random() < 0.7
                ctx.set(dut.beats.ready, ready)
                last = False
                if ready and ctx.get(dut.beats.valid):
                    beat = dut.beats.payload
                    n = ctx.get(beat.nbytes)
                    out += ctx.get(beat.data).to_bytes(beat_bytes, "little")[:n]
                    last = ctx.get(beat.last)
                await ctx.tick()
                if last:
                    break
            else:
                raise AssertionError(f"case {case} (offset {offset}, length {length}) never ended")
            got[case] = (bytes(out), stream_bytes.tobytes())

    simulate(dut, bench)
    for case, (out, want) in got.items():
        assert out == want, f"offset {cases[case][0]}, length {cases[case][1]}"


def test_tag_table_keeps_aborted_tags_until_they_return():
    dut = TagTable(4)
    log = []

    async def bench(ctx):
        tags = []
        for k in range(4):
            assert ctx.get(dut.free)
            tags.append(ctx.get(dut.tag))
            ctx.set(dut.alloc, 1)
            ctx.set(dut.alloc_line.stream, Stream.VALUE)
            ctx.set(dut.alloc_line.index, k)
            await ctx.tick()
        ctx.set(dut.alloc, 0)
        log.append(("tags", tags, ctx.get(dut.free)))
        # Line 2 returns before the abort, the others after it: they are stale and free their tag.
        ctx.set(dut.lookup, 1)
        ctx.set(dut.lookup_tag, tags[2])
        log.append(("fresh", ctx.get(dut.line.index), ctx.get(dut.stale)))
        await ctx.tick()
        ctx.set(dut.lookup, 0)
        ctx.set(dut.discard, 1)
        await ctx.tick()
        ctx.set(dut.discard, 0)
        log.append(("reuse", ctx.get(dut.tag)))
        ctx.set(dut.lookup, 1)
        ctx.set(dut.lookup_tag, tags[0])
        log.append(("aborted", ctx.get(dut.line.index), ctx.get(dut.stale)))
        await ctx.tick()
        ctx.set(dut.lookup, 0)
        log.append(("outstanding", ctx.get(dut.outstanding)))

    simulate(dut, bench)
    assert log[0] == ("tags", [0, 1, 2, 3], 0)
    assert log[1] == ("fresh", 2, 0)
    assert log[2] == ("reuse", 2)  # the returned tag, never one still outstanding
    assert log[3] == ("aborted", 0, 1)
    assert log[4] == ("outstanding", 1)  # tags 1 and 3 are still out


def reference_prefetches(requests, degree):
    """Lines the prefetcher must issue, per stream, when it has time to issue them all."""
    out = {s: [] for s in Stream}
    last, top = {}, {}
    for req in requests:
        for s, (addr, length) in zip(Stream, ((req["mask_addr"], req["mask_len"]),
                                              (req["scale_addr"], req["scale_len"]),
                                              (req["val_addr"], req["val_len"]))):
            if not length:
                continue
            end = (addr + length - 1) // 64
            delta = addr - last[s] if s in last else 0
            last[s] = addr
            top[s] = end if delta < 0 else max(top.get(s, 0), end)
            if degree and 0 < delta <= MAX_DELTA:
                target = (addr + degree * delta + length - 1) // 64
                out[s] += list(range(top[s] + 1, target + 1))
                top[s] = max(top[s], target)
    return out


@pytest.mark.parametrize("degree", [0, 1, 5, 15])
def test_prefetcher_follows_deltas_without_repeats(degree, rng):
    dut = Prefetcher(48, 8)
    layout = tepl_request_layout(48, 8)
    # Values of varying length back to back, masks every 64 bytes, scale blocks shared by pairs of
    # tiles (delta 0) and then a jump backwards (a new matrix): prefetching restarts from there.
    requests, val = [], 0x10_0005
    for t in range(24):
        n = int(rng.integers(1, 300))
        scale = 0x90_0000 + 32 * (t // 2) if t < 16 else 0x80_0000 + 32 * t
        requests.append(dict(val_addr=val, val_len=n, mask_addr=0x50_0003 + 64 * t, mask_len=64,
                             scale_addr=scale, scale_len=32, id=t))
        val += n
    issued = []

    async def bench(ctx):
        ctx.set(dut.degree, degree)
        ctx.set(dut.pf.ready, 1)
        for req in requests:
            ctx.set(dut.observe, 1)
            ctx.set(dut.request, layout.const(req))
            await ctx.tick()
            ctx.set(dut.observe, 0)
            # Enough cycles to issue everything the request allows.
            for _ in range(400):
                if ctx.get(dut.pf.valid):
                    issued.append(ctx.get(dut.pf.payload.addr))
                await ctx.tick()

    simulate(dut, bench)
    want = reference_prefetches(requests, degree)
    assert sorted(issued) == sorted(64 * line for lines in want.values() for line in lines)
    # No line twice (the region after the backward jump does not overlap the one before).
    assert len(set(issued)) == len(issued)
    assert all(a % 64 == 0 for a in issued)
    if degree:
        assert want[Stream.VALUE] and want[Stream.MASK] and want[Stream.SCALE]
    else:
        assert not issued
