"""The loader's blocks on the Amaranth simulator: realigning line queues and the tag table, each
against a plain Python statement of what it must do (the prefetcher: tests/test_hw_prefetcher.py)."""

import numpy as np
import pytest
from amaranth.sim import Simulator

from deca.hw.layouts import LINE_BYTES, Stream
from deca.hw.queues import LineQueue
from deca.hw.tags import TagTable


def simulate(dut, bench):
    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()


# (rows, row bytes, beat bytes): the SQQ of W=8/L=1 (8-byte beats), of W=32/L=8 (64-byte beats),
# of W=64/L=16 (128-byte beats and rows), rows of four and eight lines (W=64 with L=32, 64), small
# SQQs that must wrap (the two-row ones have one row per bank), and the one-row mask queue.
QUEUES = [(32, 64, 8), (32, 64, 64), (16, 128, 128), (4, 256, 256), (2, 512, 256), (4, 64, 16), (2, 64, 32),
          (1, 64, 64)]


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
                issue = issued < n_lines and ctx.get(dut.room) and rng.random() < 0.7
                ctx.set(dut.issue, issue)
                if issue:
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
        ctx.set(dut.lookup, 1 << tags[2])
        log.append(("fresh", ctx.get(dut.line.index), ctx.get(dut.stale)))
        await ctx.tick()
        ctx.set(dut.lookup, 0)
        ctx.set(dut.discard, 1)
        await ctx.tick()
        ctx.set(dut.discard, 0)
        log.append(("reuse", ctx.get(dut.tag)))
        ctx.set(dut.lookup, 1 << tags[0])
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
