"""Formal contracts of the PE's blocks: bounded model checks (``tests/formal.py``) that every run
of a block, for every input its environment may give it, keeps its contract, and that a block
with a deliberate bug (a mutant) breaks it.

Each spec reaches its block only through one port adapter (``*_ports`` below), so that a renamed
port is fixed in one place.
"""

import time
from types import SimpleNamespace

import pytest
from amaranth.asserts import AnyConst, AnySeq
from amaranth.hdl import Array, Assert, Assume, Cat, Const, Elaboratable, Module, Mux, Signal

from deca.hw import expander, loader, prefix_sum, queues, tags
from deca.golden.format import MASK_BYTES, Q_BITS
from deca.hw.layouts import LEN_BITS, LINE_BYTES, ErrorReason, ScaleFormat, ScaleGroup, sd_layout
from deca.hw.loader import LoaderState

from formal import FormalFailure, mutant, prove


@pytest.fixture(autouse=True)
def timed(request):
    """Each formal check's time, printed with -s and shown in the report's durations (--durations=0)."""
    start = time.perf_counter()
    yield
    print(f"{request.node.name}: {time.perf_counter() - start:.1f} s")


def ones_below(bits, j):
    """Number of ones among bits[0..j-1]: the specification's count, a plain sum."""
    return sum((bits[i] for i in range(j)), Const(0, 8))


# Port adapters ----------------------------------------------------------------------------------

def queue_ports(q):
    return SimpleNamespace(start=q.start, offset=q.offset, length=q.length, write_en=q.write.valid,
                           write_index=q.write.payload.index, write_data=q.write.payload.data, issue_index=q.issue_index,
                           issue=q.issue, room=q.room, beats=q.beats)


def tag_ports(t):
    return SimpleNamespace(free=t.free, tag=t.tag, alloc=t.alloc, alloc_line=t.alloc_line, lookup=t.lookup,
                           line=t.line, stale=t.stale, abort=t.discard,
                           outstanding=t.outstanding)


def expander_ports(e):
    return SimpleNamespace(sd=e.sd, dd=e.dd, sd_ready_next=e.sd_ready_next)


class BlockSpec(Elaboratable):
    """A spec around one block: ``contract(m, p)`` states it over the block's ports ``p`` (its adapter)."""

    def __init__(self, dut, adapter):
        self.dut, self.adapter = dut, adapter

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = self.dut
        self.contract(m, self.adapter(self.dut))
        return m


# (a) LineQueue: lines in any order, the stream out in order -------------------------------------

class LineQueueSpec(BlockSpec):
    """Streams of up to ``max_len`` bytes at line offset ``offset`` (None: a free offset for each
    stream, which Boolector handles where Z3 takes minutes), restarted at any time; lines requested
    while ``room`` allows, in index order, and written back in any order, each once. Stream byte s
    is (s mod 256) XOR a free ``salt``; line bytes outside the stream are free garbage.

    Contract: each beat carries the next ``beat_bytes`` bytes of the stream (fewer, with ``last``,
    at its end; one empty beat for an empty stream), only once every line it needs was written,
    nothing after the last beat; and the queue never stalls for more than ``lag`` cycles while
    every requested line is in and there is room to request no further line.
    """

    def __init__(self, dut, max_len, offset):
        super().__init__(dut, queue_ports)
        self.max_len, self.offset = max_len, offset

    def contract(self, m, p):
        dut = self.dut
        B = dut.beat_bytes
        max_lines = (LINE_BYTES - 1 + self.max_len + LINE_BYTES - 1) // LINE_BYTES
        salt = AnyConst(8)

        # The environment: a new stream now and then, the first in cycle 0.
        begun = Signal()
        m.d.comb += [p.start.eq(AnySeq(1)), p.length.eq(AnySeq(len(p.length))),
                     p.offset.eq(AnySeq(len(p.offset)) if self.offset is None else self.offset)]
        m.d.comb += Assume(p.start | begun)
        m.d.comb += Assume(~p.start | (p.length <= self.max_len))
        m.d.sync += begun.eq(1)

        offset, length = Signal(6), Signal(range(self.max_len + 1))
        lines = Signal(range(max_lines + 1))
        m.d.comb += lines.eq((offset + length + LINE_BYTES - 1) // LINE_BYTES)
        issued = Signal(range(max_lines + 1))
        written = Signal(max_lines)
        beat = Signal(range(self.max_len // B + 2))
        done = Signal()

        # Line requests in index order while ``room``, responses in any order, each line once.
        issue = AnySeq(1) & p.room & (issued < lines) & ~p.start
        m.d.comb += [p.issue_index.eq(issued), p.issue.eq(issue)]
        index = Signal(len(p.write_index))
        m.d.comb += [index.eq(AnySeq(len(index))), p.write_index.eq(index), p.write_en.eq(AnySeq(1))]
        m.d.comb += Assume(~p.write_en | ((index < issued) & ~written.bit_select(index, 1) & ~p.start))
        for j in range(LINE_BYTES):
            s = Signal(range(-LINE_BYTES, max_lines * LINE_BYTES), name=f"s{j}")
            m.d.comb += s.eq(index * LINE_BYTES + j - offset)
            m.d.comb += p.write_data.word_select(j, 8).eq(Mux((s >= 0) & (s < length), s[:8] ^ salt, AnySeq(8)))

        # The beat the contract expects next.
        pos, rest = Signal(range(self.max_len + B + 1)), Signal(range(-B, self.max_len + 1))
        nbytes, need = Signal(range(B + 1)), Signal(range(max_lines + 1))
        m.d.comb += [pos.eq(beat * B), rest.eq(length - pos), nbytes.eq(Mux(rest < B, rest, B)),
                     need.eq((pos + nbytes - 1 + offset) // LINE_BYTES)]  # its last byte's line
        lines_in = (nbytes == 0) | Cat(written[i] | (i > need) for i in range(max_lines)).all()

        b = p.beats.payload
        m.d.comb += p.beats.ready.eq(AnySeq(1))
        with m.If(p.beats.valid & ~p.start):
            m.d.comb += [
                Assert(~done, "a beat after the stream's last"),
                Assert(lines_in, "a beat before all its lines arrived"),
                Assert(b.nbytes == nbytes, "wrong beat length"),
                Assert(b.last == (rest <= B), "wrong last"),
            ]
            for i in range(B):
                m.d.comb += Assert((i >= nbytes) | (b.data.word_select(i, 8) == ((pos + i)[:8] ^ salt)), "wrong byte")

        # No stall: whenever neither a beat nor a line request nor a response can happen, that
        # lasts at most ``lag`` cycles (the queue takes in one arrived line per cycle).
        lag = dut.slots + 1
        stalled = Signal(range(lag + 2))
        idle = ~done & ~p.beats.valid & ~((issued < lines) & p.room) & (written == (1 << issued) - 1)
        m.d.sync += stalled.eq(Mux(idle & ~p.start, stalled + 1, 0))
        m.d.comb += Assert(stalled <= lag, "the queue stalls")

        with m.If(p.start):
            m.d.sync += [offset.eq(p.offset), length.eq(p.length), issued.eq(0), written.eq(0), beat.eq(0),
                         done.eq(0)]
        with m.Else():
            with m.If(issue):
                m.d.sync += issued.eq(issued + 1)
            with m.If(p.write_en):
                m.d.sync += written.eq(written | (Const(1, max_lines) << index))
            with m.If(p.beats.valid & p.beats.ready):
                m.d.sync += [beat.eq(beat + 1), done.eq(b.last)]


# The one-row register queue of the mask and scales (rows, row bytes, beat bytes), streams of up
# to 64 bytes at any line offset (at all but 0 a stream straddles two lines), 4 cycles: a line
# written in cycle 2 (the first request's response) gives its first non-empty beat in cycle 7, so
# within 4 cycles the proof covers the beats of empty streams, that no beat leaves before its
# lines arrived, and the stall bound. (A two-row SQQ takes Z3 over six minutes; 9 cycles, the
# first full beat of a two-line stream, take Boolector over 20 minutes.)
QUEUES = {"mask_1x64by64": (1, 64, 64, 64, 4)}


@pytest.mark.parametrize("queue", QUEUES)
def test_line_queue_hands_out_the_stream_in_order(queue):
    rows, row_bytes, beat_bytes, max_len, depth = QUEUES[queue]
    prove(LineQueueSpec(queues.LineQueue(rows, row_bytes, beat_bytes), max_len, None), depth,
          f"line_queue_{queue}", solver="boolector")


def test_line_queue_mutant_without_arrival_check_fails():
    """A queue that hands a beat out one line early (``>=`` for ``>``) is caught."""
    bad = mutant(queues, "~at_least(need, arrived)", "at_least(arrived, need)")
    with pytest.raises(FormalFailure, match="before all its lines arrived|wrong byte"):
        prove(LineQueueSpec(bad.LineQueue(1, 64, 64), 64, None), 4, "line_queue_mutant", solver="boolector")


# (b) TagTable: no tag reused while outstanding --------------------------------------------------

class TagTableSpec(BlockSpec):
    """Allocations while ``free``, responses for outstanding tags only, aborts at any time.

    Contract: ``tag`` is never an outstanding tag (allocated, response not yet back), also after
    aborts; ``free`` and ``outstanding`` tell whether some entry is free / allocated; a response
    finds the line it was allocated for, ``stale`` exactly when an abort came in between or in
    the cycle of its allocation.
    """

    def __init__(self, dut):
        super().__init__(dut, tag_ports)

    def contract(self, m, p):
        n = self.dut.entries
        m.d.comb += [p.alloc.eq(AnySeq(1)), p.alloc_line.eq(AnySeq(len(p.alloc_line.as_value()))),
                     p.lookup.eq(AnySeq(n)), p.abort.eq(AnySeq(1))]

        outstanding, aborted = Signal(n), Signal(n)
        lines = [Signal(p.alloc_line.shape(), name=f"line{i}") for i in range(n)]
        back = p.lookup  # one-hot: the tag a response brings back
        m.d.comb += [
            Assume(~p.alloc | p.free),
            Assume((back & (back - 1)) == 0),
            Assume((back & ~outstanding) == 0),
            Assert(p.free == ~outstanding.all(), "free is wrong"),
            Assert(p.outstanding == outstanding.any(), "outstanding is wrong"),
        ]
        with m.If(p.free):
            m.d.comb += Assert(~outstanding.bit_select(p.tag, 1), "an outstanding tag is offered")
        for i in range(n):
            with m.If(back[i]):
                m.d.comb += [Assert(p.line == lines[i], "a response finds the wrong line"),
                             Assert(p.stale == aborted[i], "stale is wrong")]

        taken = Mux(p.alloc, Const(1, n) << p.tag, 0)
        m.d.sync += [outstanding.eq((outstanding & ~back) | taken),
                     aborted.eq((aborted & ~back & ~taken) | Mux(p.abort, (outstanding & ~back) | taken, 0))]
        for i in range(n):
            with m.If(taken[i]):
                m.d.sync += lines[i].eq(p.alloc_line)


def test_tag_table_never_reuses_an_outstanding_tag():
    prove(TagTableSpec(tags.TagTable(4)), 10, "tag_table")


def test_tag_table_mutant_ignoring_busy_fails():
    bad = mutant(tags, "with m.If(~kept[i]):\n                m.d.comb += lowest[0]", "with m.If(1):\n                m.d.comb += lowest[0]")
    with pytest.raises(FormalFailure, match="an outstanding tag is offered"):
        prove(TagTableSpec(bad.TagTable(4)), 10, "tag_table_mutant")


# (c) Expander, prefix sums and window unit against their specification --------------------------

class PrefixSumSpec(Elaboratable):
    """For every W-bit mask: ``prefix_sums`` gives the inclusive counts, ``popcount`` the total."""

    def __init__(self, W):
        self.W = W

    def elaborate(self, platform):
        m = Module()
        bits = AnyConst(self.W)
        inclusive = prefix_sum.prefix_sums(list(bits))
        for j in range(self.W):
            m.d.comb += Assert(inclusive[j] == ones_below(bits, j + 1), "wrong prefix sum")
        m.d.comb += Assert(prefix_sum.popcount(list(bits)) == ones_below(bits, self.W), "wrong popcount")
        return m


@pytest.mark.parametrize("W", [8, 16, pytest.param(32, marks=pytest.mark.slow)])
def test_prefix_sums_count_the_ones_for_every_mask(W):
    prove(PrefixSumSpec(W), 1, f"prefix_sums_w{W}")


class ExpanderSpec(BlockSpec):
    """SD beats with free values, mask and expansion indices (prefix[j] <= j, as every count of
    mask ones below j is; the prefix-sum check proves the window unit's are those counts); a free
    ``ready``.

    Contract: one DD beat per SD beat, in order, held while not taken, with DD[j] = SD[prefix[j]]
    where mask[j] is set and +0 elsewhere (paper, section 6.1, item 3), mask, index and last
    passed along; ``sd.ready`` exactly while fewer than two beats are inside (DD and its skid
    register): a function of the state, which ``dd.ready`` does not reach in the same cycle;
    ``sd_ready_next`` is the next cycle's ``sd.ready``.
    """

    def __init__(self, dut):
        super().__init__(dut, expander_ports)

    def contract(self, m, p):
        W = self.dut.W
        sd = Signal(sd_layout(W))
        m.d.comb += [sd.eq(AnySeq(len(sd.as_value()))), p.sd.payload.eq(sd), p.sd.valid.eq(AnySeq(1)),
                     p.dd.ready.eq(AnySeq(1))]
        m.d.comb += [Assume(sd.prefix[j] <= j) for j in range(W)]

        want = [Signal(p.dd.payload.shape(), name=f"want{k}") for k in range(2)]  # a FIFO, head first
        count = Signal(range(3))
        m.d.comb += Assert(p.dd.valid == (count != 0), "a DD beat lost or made up")
        with m.If(p.dd.valid):
            m.d.comb += Assert(p.dd.payload == want[0], "wrong DD beat")
        m.d.comb += Assert(p.sd.ready == (count != 2), "sd.ready is not: room for a beat")
        promised = Signal(init=1)  # the last cycle's sd_ready_next; sd.ready is 1 after reset
        m.d.sync += promised.eq(p.sd_ready_next)
        m.d.comb += Assert(p.sd.ready == promised, "sd_ready_next is not the next cycle's sd.ready")
        pop = p.dd.valid & p.dd.ready
        push = p.sd.valid & p.sd.ready
        beat = Signal.like(want[0])
        m.d.comb += [beat.mask.eq(sd.mask), beat.index.eq(sd.index), beat.last.eq(sd.last)]
        for j in range(W):
            m.d.comb += beat.data[j].eq(Mux(sd.mask[j], Array(sd.data)[sd.prefix[j]], 0))
        m.d.sync += count.eq(count + push - pop)
        with m.If(pop):
            m.d.sync += want[0].eq(want[1])
        with m.If(push):
            with m.If(count - pop == 0):
                m.d.sync += want[0].eq(beat)
            with m.Else():
                m.d.sync += want[1].eq(beat)


@pytest.mark.parametrize("W", [8, pytest.param(32, marks=pytest.mark.slow)])
def test_expander_puts_zeros_back(W):
    prove(ExpanderSpec(expander.Expander(W)), 4, f"expander_w{W}")


def test_expander_mutant_off_by_one_fails():
    bad = mutant(expander, "inputs[sd.prefix[j]]", "inputs[sd.prefix[j] + 1]")
    with pytest.raises(FormalFailure, match="wrong DD beat"):
        prove(ExpanderSpec(bad.Expander(8)), 4, "expander_mutant")


# (d) Loader: malformed metadata fails, and its skip beats go out, within a bound ----------------

def loader_ports(ld):
    return SimpleNamespace(q=ld.mode.q, sparse=ld.mode.sparse, scale_format=ld.mode.scale_format,
                           scale_group=ld.mode.scale_group,
                           req=ld.req, grant=ld.grant, abort=ld.squash, state=ld.state,
                           reason=ld.reason, fails=ld.fails, fail_reason=ld.reason, line_req=ld.line_req, line_resp_en=ld.line_resp.valid,
                           outs=[ld.vops, ld.values, ld.scales])


class LoaderSpec(BlockSpec):
    """Any configuration and any request metadata; the pipeline takes every beat; no line comes
    back (the checks below need none).

    Contract: for the two cycles after a request is accepted, the loader is CHECKING; the cycle after, it is
    FAILED with the first reason of ``ErrorReason``'s list that applies (from the list's wording, not
    the loader's code) and announces the failure (``fails``, with ``reason``) exactly then, or it is
    ACTIVE when none applies; a FAILED request has handed out its skip beats, and the loader is idle
    again, the cycle after that.
    """

    def __init__(self, dut):
        super().__init__(dut, loader_ports)

    def contract(self, m, p):
        q, sparse, fmt, group = AnyConst(5), AnyConst(1), AnyConst(2), AnyConst(1)
        m.d.comb += [p.q.eq(q), p.sparse.eq(sparse), p.scale_format.eq(fmt), p.scale_group.eq(group),
                     p.req.valid.eq(AnySeq(1)), p.req.payload.eq(AnySeq(len(p.req.payload.as_value()))),
                     p.grant.eq(1), p.abort.eq(0), p.line_req.ready.eq(AnySeq(1)),
                     p.line_resp_en.eq(0), [out.ready.eq(1) for out in p.outs]]
        r = p.req.payload
        scales = Mux(group == ScaleGroup.G16, 32, 16)
        scale_len = Mux(fmt == ScaleFormat.NONE, 0, Mux(fmt == ScaleFormat.BF16, 2 * scales, scales))
        wraps = [(n != 0) & (a + n - 1 >= 1 << len(a)) for a, n in
                 ((r.val_addr, r.val_len), (r.mask_addr, r.mask_len), (r.scale_addr, r.scale_len))]
        reasons = [  # ErrorReason's list, in its order
            (ErrorReason.CONFIG, ~((q >= 1) & (q <= 8) | (q == 16))),
            (ErrorReason.ADDR_WRAP, Cat(wraps).any()),
            (ErrorReason.MASK_LEN, r.mask_len != Mux(sparse, 64, 0)),
            (ErrorReason.SCALE_LEN, r.scale_len != scale_len),
            (ErrorReason.VALUE_LEN, ~sparse & (r.val_len != q * 64)),
        ]
        first = ErrorReason.NONE.value
        for reason, applies in reversed(reasons):
            first = Mux(applies, reason.value, first)

        want = Signal(ErrorReason)
        since = Signal(range(5))  # cycles since the last accepted request
        accepted = Signal()
        with m.If(p.req.valid & p.req.ready):
            m.d.sync += [want.eq(first), since.eq(0), accepted.eq(1)]
        with m.Elif(since < 4):
            m.d.sync += since.eq(since + 1)
        with m.If(accepted & (since <= 1)):
            m.d.comb += [Assert(p.state.as_value() == LoaderState.CHECKING.value, "not checking after a request"),
                         Assert(~p.fails, "a failure announced before the verdict")]
        with m.If(accepted & (since == 2)):
            m.d.comb += [Assert(p.state.as_value() == Mux(want == ErrorReason.NONE, LoaderState.ACTIVE.value, LoaderState.FAILED.value),
                                "wrong state after a request"),
                         Assert((want == ErrorReason.NONE) | (p.reason.as_value() == want.as_value()), "wrong error reason"),
                         Assert(p.fails == (want != ErrorReason.NONE), "a failure not announced, or a false one")]
            with m.If(want != ErrorReason.NONE):
                m.d.comb += Assert(p.fail_reason.as_value() == want.as_value(), "wrong announced reason")
        with m.If(accepted & (want != ErrorReason.NONE) & (since == 3)):
            m.d.comb += Assert(p.state.as_value() == LoaderState.IDLE.value, "the skip beats of a failed request are not out")


def test_malformed_request_fails_with_its_reason_and_skips():
    prove(LoaderSpec(loader.Loader(8, 1, tags=2, sqq_bytes=256, addr_bits=16, id_bits=1)), 6, "loader")


def test_loader_mutant_with_off_by_one_wrap_check_fails():
    """A stream ending on the last byte of the address space taken for a wrap is caught."""
    bad = mutant(loader, "Cat(C(0), low | length)", "Cat(C(1), low | length)")
    with pytest.raises(FormalFailure, match="wrong state|wrong error reason|wrong announced reason|a failure not announced"):
        prove(LoaderSpec(bad.Loader(8, 1, tags=2, sqq_bytes=256, addr_bits=16, id_bits=1)), 6, "loader_mutant")


# (e) The sparse value-length check ---------------------------------------------------------------

class ValueLengthSpec(Elaboratable):
    """The loader's sparse value-length check (``Loader._check_value_length``, run on a stand-in
    loader: it reads only the mode), for any Q of the format and any value length: a request
    accepted in cycle 0, the tile active from cycle 1, its mask beat from cycle 1 or 2 on. Mask bits
    0-15 are free and each 128-bit quarter's others all ones or all zeros (a free mask of 512 bits
    makes the proof that the count's adder tree counts the ones take the solver over 15 minutes;
    the 8-bit counts it starts from are ``prefix_sum.popcount``, proven above).

    Contract: ``CHECK_STEPS`` cycles after the beat comes, the check fails with VALUE_LEN exactly
    when the value length is not ceil(ones x Q / 8) (format: the value stream) and otherwise lets
    the streams flow; before then neither happens."""

    def __init__(self, module):
        self.module = module

    def elaborate(self, platform):
        m = Module()
        q, val_len, mask = AnyConst(5), AnyConst(LEN_BITS), AnyConst(8 * MASK_BYTES)
        fill, arrive = AnyConst(4), AnyConst(1)
        m.d.comb += Assume(Cat(q == code for code in Q_BITS).any())
        m.d.comb += [Assume(mask[i] == fill[i // 128]) for i in range(16, len(mask))]
        cycle = Signal(range(16))
        m.d.sync += cycle.eq(cycle + 1)
        active, beat = Signal(), Signal()
        m.d.sync += active.eq(1)
        m.d.comb += beat.eq(cycle >= 1 + arrive)
        failed, reason = Signal(), Signal(ErrorReason)

        def fail(why):
            m.d.comb += [failed.eq(1), reason.eq(why)]

        stand_in = SimpleNamespace(mode=SimpleNamespace(q=q, sparse=Const(1)))
        queue = SimpleNamespace(beats=SimpleNamespace(valid=beat, payload=SimpleNamespace(data=mask)))
        checked_next = self.module.Loader._check_value_length(
            stand_in, m, queue, SimpleNamespace(val_len=val_len), cycle == 0, active, fail)

        ones = list(mask)
        while len(ones) > 1:  # a plain count, in pairs (a 512-deep sum overflows Python's recursion)
            ones = [ones[k] + ones[k + 1] for k in range(0, len(ones), 2)]
        bad = (ones[0] * q + 7) // 8 != val_len
        verdict = 1 + arrive + loader.CHECK_STEPS
        with m.If(cycle == verdict):
            m.d.comb += [Assert(failed == bad, "wrong VALUE_LEN verdict"),
                         Assert(~failed | (reason == ErrorReason.VALUE_LEN), "wrong reason"),
                         Assert(checked_next == ~bad, "the streams do not flow after a good verdict")]
        with m.If((cycle >= 1) & (cycle < verdict)):
            m.d.comb += Assert(~failed & ~checked_next, "a verdict before the count")
        return m


def test_value_length_check_fails_exactly_wrong_lengths():
    prove(ValueLengthSpec(loader), 3 + loader.CHECK_STEPS, "value_length", solver="boolector")


def test_value_length_mutant_rounding_down_fails():
    """A check that rounds the value bits down to bytes (floor for ceil) is caught."""
    bad = mutant(loader, "matches.eq((bits + 7) // 8 == meta.val_len)", "matches.eq(bits // 8 == meta.val_len)")
    with pytest.raises(FormalFailure, match="wrong VALUE_LEN verdict|do not flow"):
        prove(ValueLengthSpec(bad), 3 + loader.CHECK_STEPS, "value_length_mutant", solver="boolector")
