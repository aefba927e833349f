"""A tile context of a loader (paper, sections 5.2 and 6.1, items 1 and 4): one TEPL at a time,
from its metadata to the streams the shared pipeline consumes. The paper's loader is one of these;
the PE gives each loader ``params.TILES_PER_LOADER`` of them (see ``pe``). Below, "the loader" is
the context.

On a request the loader checks the metadata against the configuration (``ErrorReason``), then
requests every 64-byte line of the mask, scale and value streams (in that order: the mask is
needed first, the scales before the first chunk leaves the pipeline), tracking them in its tag
table, and fills its three queues as responses come back in any order. In sparse mode it counts
the mask's ones before anything flows, so a value stream of the wrong length is an error, not a
hang. Its own window unit turns the mask into vOps while the pipeline may still be busy with the
other loader's tile.

Every stream it hands the pipeline is *framed*: beats carry ``last`` at the end of the tile, and
a failed request presents one ``skip`` beat on each stream instead, so that the pipeline's input
selectors, which follow request order, move past it. The loader is done with a request, and
takes the next, once the last (or skip) beat of each of its streams has been taken: its tile has
then left the queues (every line of it has come back), while its completion is TOut's business.
"""

import operator
from functools import reduce

from amaranth.hdl import Array, C, Cat, Module, Mux, ResetInserter, Signal
from amaranth.lib import data, enum, stream, wiring
from amaranth.lib.wiring import In, Out

from deca.golden.format import MASK_BYTES, Q_BITS

from .arith import fast_add, fast_sum
from .layouts import (LINE_BYTES, ErrorReason, ModeSignature, ScaleFormat, ScaleGroup, Stream, scale_beat_layout,
                      sqq_row_bytes, stream_fields, tepl_request_layout, value_beat_bits, value_beat_layout, vop_layout)
from .prefix_sum import WindowUnit, popcount
from .queues import DIGIT_BITS, LINE_INDEX_BITS, LineQueue
from .stages import OutputBuffer, RegisterSlice, copies
from .tags import TagTable


#: Registered steps of the value-length check: the mask's ones in four, their bits, the compare.
CHECK_STEPS = 6


class LoaderState(enum.Enum, shape=2):
    IDLE = 0  #: takes a request
    ACTIVE = 1  #: fetching and feeding the pipeline
    FAILED = 2  #: the request failed a check; hands out its skip beats
    CHECKING = 3  #: the two cycles after the acceptance: the checks, then their verdict


def framed(layout):
    return data.StructLayout({"data": layout, "last": 1, "skip": 1})


def line_request_layout(addr_bits, tags):
    return data.StructLayout({"addr": addr_bits, "tag": range(tags)})


def line_response_layout(tags):
    """A line read's tag, the loader's own, one-hot (TagTable's ``lookup``). Its data does not
    enter the loader: see ``Loader``."""
    return data.StructLayout({"tag": tags})


def scale_stream_len(scale_format, scale_group):
    """Bytes of a tile's scale stream for the configured format and group (golden TileConfig)."""
    scales = Mux(scale_group == ScaleGroup.G16, 32, 16)
    return Mux(scale_format == ScaleFormat.NONE, 0, Mux(scale_format == ScaleFormat.BF16, 2 * scales, scales))


def _wraps(m, addr, length, addr_bits):
    """addr + length - 1 carries out of the address bits: the bits above the length's are all ones
    and the low ones plus the length minus one carry out of k bits (k bits of length). That is the
    carry out of k + 1 bits of a + n + (2^k - 1), one carry-save step (~(a ^ n) and (a | n) << 1)
    and one k + 1-bit parallel-prefix add: a full-width add, or a ripple carry, would be the
    request's longest path. Returns the check's two terms, (high bits and a length, carry), so that
    the carry reaches a flip-flop of its own."""
    k = len(length)
    low = addr[:k]
    carry = fast_add(m, ~(low ^ length), Cat(C(0), low | length))[k + 1]
    high = addr[k:addr_bits].all() if addr_bits > k else 1
    return (length != 0) & high, carry


#: ones x Q for each Q: (shift of the first copy, shift of the second or None; -1: minus ones).
Q_SHIFTS = {1: (0, None), 2: (1, None), 3: (1, 0), 4: (2, None), 5: (2, 0), 6: (2, 1), 7: (3, -1), 8: (3, None),
            16: (4, None)}
assert set(Q_SHIFTS) == set(Q_BITS)


def _count_sum(m, counts):
    """The sum of ``counts`` (unsigned), wide enough for any values."""
    width = sum((1 << len(c)) - 1 for c in counts).bit_length()
    return fast_sum(m, [Cat(c, C(0, width - len(c))) for c in counts])[:width]


def request_checks(m, req, mode, addr_bits):
    """(ErrorReason, terms) of the request's metadata against ``mode``, in code order: a check
    fails when all its terms hold, and the first failing one is the request's reason. Each stream's
    wrap is a check of its own, and its add's carry a term apart from the rest (all registered apart
    and ANDed, ORed a cycle later)."""
    return [
        (ErrorReason.CONFIG, (~Cat(mode.q == q for q in Q_BITS).any(),)),
        *((ErrorReason.ADDR_WRAP, _wraps(m, a, n, addr_bits)) for a, n in stream_fields(req).values()),
        (ErrorReason.MASK_LEN, (req.mask_len != Mux(mode.sparse, MASK_BYTES, 0),)),
        (ErrorReason.SCALE_LEN, (req.scale_len != scale_stream_len(mode.scale_format, mode.scale_group),)),
        (ErrorReason.VALUE_LEN, (~mode.sparse & (req.val_len != mode.q * LINE_BYTES),)),
    ]


class Loader(wiring.Component):
    """One TEPL at a time (see the module docstring). ``squash``: drop it, whatever its state, and
    a request accepted in that cycle (neither ``req.ready`` nor the outputs are gated then: whoever
    drives it takes no line request and no beat, and forgets the request, as the PE does);
    ``grant``: the PE takes at most one request per cycle. ``fails``: the request failed a check,
    announced in this cycle, the one after the verdict (which is before any of it flows: the cycle
    two after its acceptance for the metadata, the value-length check's last step for the value length),
    for ``reason``, the last failure's.

    A line response's data goes to a ``LineRealigner`` outside the loader, shared by the PE's
    loaders (one response per cycle): ``line_digits`` is the rotation of the stream the response
    is for (zero without one), in the response's cycle, and ``line_rotated`` the realigner's output,
    which the queues write two cycles later."""

    def __init__(self, W, L, *, tags, sqq_bytes, addr_bits, id_bits):
        self.W, self.L = W, L
        self.tags, self.sqq_bytes, self.addr_bits = tags, sqq_bytes, addr_bits
        super().__init__({
            "mode": In(ModeSignature()),
            "req": In(stream.Signature(tepl_request_layout(addr_bits, id_bits))),
            "grant": In(1),
            "squash": In(1),
            "state": Out(LoaderState),
            "idle": Out(1, init=1),  # state == IDLE, from a register
            "fails": Out(1),
            "reason": Out(ErrorReason),
            "line_req": Out(stream.Signature(line_request_layout(addr_bits, tags))),
            "line_resp": In(stream.Signature(line_response_layout(tags), always_ready=True)),
            "line_digits": Out(DIGIT_BITS),
            "line_rotated": In(8 * LINE_BYTES),
            "vops": Out(stream.Signature(framed(vop_layout(W)))),
            "values": Out(stream.Signature(framed(value_beat_layout(W, L)))),
            "scales": Out(stream.Signature(framed(scale_beat_layout()))),
        })

    def elaborate(self, platform):
        m = Module()
        beat_bytes = value_beat_bits(self.W, self.L) // 8
        row_bytes = sqq_row_bytes(self.W, self.L)
        m.submodules.tags = tags = TagTable(self.tags)
        m.submodules.sqq = sqq = LineQueue(self.sqq_bytes // row_bytes, row_bytes, beat_bytes, shared_realigner=True)
        m.submodules.mask_queue = mask_q = LineQueue(1, LINE_BYTES, MASK_BYTES, shared_realigner=True)
        m.submodules.scale_queue = scale_q = LineQueue(1, LINE_BYTES, LINE_BYTES, shared_realigner=True)
        # One tile per request: the window's ``tiles.ready`` may be a register.
        window, window_reset = WindowUnit(self.W, back_to_back=False), Signal()
        m.submodules.window = ResetInserter(window_reset)(window)
        queues = {Stream.MASK: mask_q, Stream.SCALE: scale_q, Stream.VALUE: sqq}

        meta = Signal(self.req.payload.shape())
        # The state is set through ``state_next`` (later statements win, as in ``sync``), so that
        # registers may copy what it decodes to (``active``, ``flowing``): the state fans out widely.
        state, state_next, reason = Signal(LoaderState), Signal(LoaderState), Signal(ErrorReason)
        owed = Signal(3)  # vops, values, scales: the last (or skip) beat still to hand out
        scaling = self.mode.scale_format != ScaleFormat.NONE
        m.d.comb += [self.state.eq(state), self.reason.eq(reason), state_next.eq(state)]

        # A failure is announced to TOut from a register (``fails`` follows ``failure``), so that
        # the checks' logic stays off the paths into TOut's records; not after a squash.
        failure = Signal()
        m.d.sync += self.fails.eq(failure & ~self.squash)

        def fail(why):
            m.d.sync += reason.eq(why)
            m.d.comb += [state_next.eq(LoaderState.FAILED), failure.eq(1)]

        # While idle the request's registers load the offered request in every cycle, so that their
        # enables follow the state register rather than the acceptance (which fans out from the
        # PE's request queue): the acceptance only changes the state. The request is then checked
        # against the configuration in two CHECKING cycles: each check's outcome is registered in
        # the first (``failing``, from the registered request), and in the second (``judging``) the
        # first failing one decides FAILED or ACTIVE (a failure is announced the cycle after,
        # above). The queues start their streams in the first CHECKING cycle, from the registered
        # request, so that neither the request's adds nor the acceptance's fanout make a long path.
        idle = self.idle
        m.d.comb += self.req.ready.eq(idle & self.grant)
        accept = self.req.valid & self.req.ready
        # ``state_next`` leaves the acceptance out (IDLE -> CHECKING, a squash's cycle aside): it
        # comes late, from the PE's request queue, and only the registers that need it see it.
        entering = accept & ~self.squash
        m.d.sync += [state.eq(Mux(entering, LoaderState.CHECKING, state_next)),
                     idle.eq((state_next == LoaderState.IDLE) & ~entering)]
        # ``started``: the acceptance a cycle later, in a flip-flop per queue and one for the rest
        # (each queue's start loads most of its registers).
        *starts, started = copies(m, "started", accept, 1, len(queues) + 1, init=0)
        judging = Signal()
        m.d.sync += judging.eq(started & (state_next == LoaderState.CHECKING))
        for (s, (addr, length)), start in zip(stream_fields(meta).items(), starts):
            m.d.comb += [queues[s].start.eq(start), queues[s].offset.eq(addr[:6]), queues[s].length.eq(length)]
        checks = request_checks(m, meta, self.mode, self.addr_bits)
        terms = [term for _, check in checks for term in check]
        failing = Signal(len(terms), reset_less=True)  # read only while judging
        m.d.sync += failing.eq(Cat(terms))
        bad = Signal(ErrorReason)
        at = len(terms)
        for why, check in reversed(checks):
            at -= len(check)
            with m.If(failing[at:at + len(check)].all()):
                m.d.comb += bad.eq(why)
        with m.If(idle):
            m.d.sync += meta.eq(self.req.payload)
        with m.If(accept):
            m.d.sync += owed.eq(Cat(1, 1, scaling))
        with m.If(judging):
            m.d.comb += state_next.eq(LoaderState.ACTIVE)
            with m.If(bad != ErrorReason.NONE):
                fail(bad)

        # ``squash`` does not gate the tile's flow here: the PE's ports and the ResetInserters drop
        # whatever moves in its cycle, and the state returns to IDLE (so it stays off the long paths).
        active = Signal()  # state == ACTIVE
        entry_streams = self._issue_lines(m, tags, sqq, meta, started, active)
        self._route_responses(m, tags, queues, entry_streams)
        checked_next = self._check_value_length(m, mask_q, meta, accept, active, fail)
        is_failed = Signal()  # state == FAILED
        m.d.comb += tags.discard.eq(self.squash | is_failed)
        m.d.sync += [active.eq(state_next == LoaderState.ACTIVE), is_failed.eq(state_next == LoaderState.FAILED)]
        # ACTIVE and the value length checked: a flip-flop per output stream (each gates its
        # queue's beat issue, which fans out to the queue's read registers).
        flowing = copies(m, "flowing", (state_next == LoaderState.ACTIVE) & checked_next, 1, 3, init=0)
        # ACTIVE again, a flip-flop for the mask and scale queues' ``beats.ready`` (which starts
        # their beat issue), off the buffers of ``active``'s wide fanout.
        taking, = copies(m, "taking", state_next == LoaderState.ACTIVE, 1, 1, init=0)

        # The window unit takes the mask while its value length is checked, and its vOps wait for
        # the verdict; a failure or a squash resets it with the tile's vOps, a cycle later (from a
        # register: the reset fans out to the whole unit; the tile is no longer ACTIVE by then, so
        # nothing enters or leaves the unit in between).
        dropped = Signal()
        m.d.sync += dropped.eq(failure | self.squash)
        m.d.comb += [
            window_reset.eq(dropped),
            window.sparse.eq(self.mode.sparse),
            window.tiles.valid.eq(active & mask_q.beats.valid),
            window.tiles.payload.mask.eq(mask_q.beats.payload.data),
            mask_q.beats.ready.eq(taking & window.tiles.ready),
        ]
        # One scale beat per tile: its slice needs no skid register.
        outs = {name: self._output_slice(m, name, skid=name != "scales") for name in ("vops", "values", "scales")}
        handed = self._frame_outputs(m, is_failed, owed, [
            (outs["vops"], window.vops, window.vops.payload.last, flowing[0]),
            (outs["values"], sqq.beats, sqq.beats.payload.last, flowing[1]),
            (outs["scales"], scale_q.beats, 1, flowing[2] & scaling),
        ])
        m.d.comb += [
            outs["vops"].payload.data.eq(window.vops.payload),
            outs["values"].payload.data.data.eq(sqq.beats.payload.data),
            outs["values"].payload.data.nbytes.eq(sqq.beats.payload.nbytes),
            outs["scales"].payload.data.data.eq(scale_q.beats.payload.data),
        ]
        # Without scaling the scale queue's one empty beat per tile goes nowhere.
        with m.If(taking & ~scaling):
            m.d.comb += scale_q.beats.ready.eq(1)

        with m.If(self.squash | ((state != LoaderState.IDLE) & ~(owed & ~handed).any())):
            m.d.sync += owed.eq(0)
            m.d.comb += state_next.eq(LoaderState.IDLE)
        return m

    def _issue_lines(self, m, tags, sqq, meta, started, active):
        """Line requests: the first stream (in Stream order) with lines left and room for the next,
        in two steps. The pick takes the next line into a candidate register (stream, index, line
        address) and steps that stream's counters; the candidate takes a tag and enters the output
        buffer when it has room. So the pick compares registers and the tag's allocation follows
        registers. The buffer is not squashed: its tag is taken, and the tag table waits for the
        response (stale). A candidate is dropped when the tile stops being ACTIVE. Returns each
        tag-table entry's stream, one-hot, in a register loaded at its allocation (its response
        comes cycles later): ``_route_responses`` chooses from them before the lookup."""
        fields = stream_fields(meta)
        issued = Array(Signal(LINE_INDEX_BITS + 1, name=f"issued_{s.name.lower()}") for s in Stream)
        # Lines still to issue, counted down, and whether there are any (``more``, a register:
        # the pick starts at flip-flops).
        owing = Array(Signal(LINE_INDEX_BITS + 1, name=f"owing_{s.name.lower()}") for s in Stream)
        more = Array(Signal(name=f"more_{s.name.lower()}") for s in Stream)
        next_line = Array(Signal(self.addr_bits - 6, name=f"next_line_{s.name.lower()}") for s in Stream)
        with m.If(started):
            for s, (addr, length) in fields.items():
                m.d.sync += [issued[s.value].eq(0), next_line[s.value].eq(addr >> 6)]
        # The line counts load in every cycle until the tile is ACTIVE: the request's registers
        # hold still from its acceptance on.
        for s, (addr, length) in fields.items():
            end = fast_sum(m, [addr[:6], length, C(LINE_BYTES - 1, 6)])  # (a sum's signals: outside the If)
            with m.If(~active):  # ceil((offset + length) / 64) lines: some unless both are 0
                m.d.sync += [owing[s.value].eq(end[6:]), more[s.value].eq((length != 0) | (addr[:6] != 0))]
        m.d.comb += sqq.issue_index.eq(issued[Stream.VALUE.value])
        pick, pending = Signal(Stream), Signal()
        which = pick.as_value()
        for s in reversed(Stream):
            with m.If(more[s.value]):
                m.d.comb += [pick.eq(s), pending.eq(1)]

        candidate = Signal(data.StructLayout({"stream": Stream, "index": LINE_INDEX_BITS, "line": self.addr_bits - 6}))
        candidate_valid = Signal()
        # The PE's pick of a context is the port's ready here: it only moves the buffer's pointers.
        m.submodules.line_req_reg = reg = OutputBuffer(self.line_req.payload.shape())
        wiring.connect(m, reg.o, wiring.flipped(self.line_req))
        m.d.comb += [
            reg.i.valid.eq(active & candidate_valid & tags.free),
            reg.i.payload.addr.eq(Cat(C(0, 6), candidate.line)),
            reg.i.payload.tag.eq(tags.tag),
            tags.alloc.eq(reg.i.valid & reg.i.ready),
            tags.alloc_line.stream.eq(candidate.stream),
            tags.alloc_line.index.eq(candidate.index),
        ]
        picked = active & pending & Mux(pick == Stream.VALUE, sqq.room, 1)
        loads = ~candidate_valid | tags.alloc  # the candidate register takes the pick
        m.d.comb += sqq.issue.eq(loads & picked & (pick == Stream.VALUE))
        with m.If(loads):
            m.d.sync += [candidate_valid.eq(picked), candidate.stream.eq(pick), candidate.index.eq(issued[which]),
                         candidate.line.eq(next_line[which])]
            for s in Stream:  # each stream's counters step on their own: the pick only enables them
                with m.If(picked & (pick == s)):
                    m.d.sync += [issued[s.value].eq(issued[s.value] + 1), owing[s.value].eq(owing[s.value] - 1),
                                 more[s.value].eq(owing[s.value] != 1),
                                 next_line[s.value].eq(fast_add(m, next_line[s.value], 0, 1)[:self.addr_bits - 6])]
        with m.If(~active):
            m.d.sync += candidate_valid.eq(0)
        entry_streams = [Signal(len(Stream), name=f"entry_stream{i}", reset_less=True) for i in range(self.tags)]
        for i, entry in enumerate(entry_streams):
            with m.If(tags.alloc & (tags.tag == i)):
                m.d.sync += entry.eq(Cat(candidate.stream == s for s in Stream))
        return entry_streams

    def _route_responses(self, m, tags, queues, entry_streams):
        """Responses go to the queue of their stream, unless their tile was aborted; the realigner
        gets that queue's rotation (also for a stale line, which no queue takes), chosen for each
        tag-table entry from registers (``entry_streams``) and picked by the one-hot tag: the
        table's lookup of the line's stream leaves no time for it."""
        resp = self.line_resp
        m.d.comb += tags.lookup.eq(resp.payload.tag)
        for s, queue in queues.items():
            m.d.comb += [
                queue.write.valid.eq(resp.valid & ~tags.stale & (tags.line.stream == s)),
                queue.write.payload.index.eq(tags.line.index),
                queue.rotated.eq(self.line_rotated),
            ]
        digits = (reduce(operator.or_, (Mux(stream[k], queues[s].digits, 0) for k, s in enumerate(Stream)))
                  for stream in entry_streams)
        m.d.comb += self.line_digits.eq(reduce(operator.or_, (Mux(hit, d, 0) for hit, d in zip(resp.payload.tag, digits))))

    def _check_value_length(self, m, mask_q, meta, accept, active, fail):
        """Sparse mode: the value stream must be ceil(ones * Q / 8) bytes; count the mask's ones,
        then compare, before anything flows. The mask beat is taken into the count when it comes
        (the window unit may take it then too); the count takes four registered steps (bytes, 32-bit
        and 128-bit words, the mask), the bits a fifth and the compare a sixth (CHECK_STEPS). Returns
        ``checked`` of the next cycle: the streams may flow."""
        checked, checked_next = Signal(), Signal()  # ``checked_next`` leaves the acceptance out
        m.d.comb += checked_next.eq(checked)
        m.d.sync += checked.eq(Mux(accept, ~self.mode.sparse, checked_next))
        step = Signal(range(CHECK_STEPS + 1))  # cycles since the mask beat came
        mask = mask_q.beats.payload.data
        sums = [mask[k] for k in range(len(mask))]
        assert len(mask) % 128 == 0
        for n, group in enumerate((8, 4, 4, len(mask) // 128)):
            # Counts of counts as carry-save sums (a tree of adds maps to ripples of carries).
            sums = [popcount(sums[k:k + group]) if n == 0 else _count_sum(m, sums[k:k + group])
                    for k in range(0, len(sums), group)]
            # A pipeline without enables: each step is read exactly one cycle after it loads (the
            # steps advance in every cycle from the one with the beat, ``step`` 0).
            regs = [Signal(len(v), name=f"ones{n}_{k}") for k, v in enumerate(sums)]
            m.d.sync += [r.eq(v) for r, v in zip(regs, sums)]
            sums = regs
        # ones x Q as one add of two shifted copies (7: 8 x ones - ones), picked by Q: a multiplier
        # maps to a ripple of adds, a sum of all five shifts to a deeper one.
        q, ones = self.mode.q, sums[0]
        bits, matches = Signal(len(ones) + len(q)), Signal()
        width = len(bits)
        wide = Cat(ones, C(0, width - len(ones)))
        # Q decoded into a register (the configuration does not change while a tile is loaded), the
        # copies picked by its one-hot bits (an AND-OR, not a chain of multiplexers).
        is_q = Signal(len(Q_SHIFTS))
        m.d.sync += [is_q[k].eq(q == code) for k, code in enumerate(Q_SHIFTS)]
        first, second, minus = C(0, width), C(0, width), C(0)
        for k, (shift, other) in enumerate(Q_SHIFTS.values()):
            first = first | Mux(is_q[k], wide << shift, 0)
            if other == -1:
                second, minus = second | Mux(is_q[k], ~wide, 0), minus | is_q[k]
            elif other is not None:
                second = second | Mux(is_q[k], wide << other, 0)
        m.d.sync += [bits.eq(fast_add(m, first, second, minus)[:width]),
                     matches.eq((bits + 7) // 8 == meta.val_len)]
        with m.If(accept):
            m.d.sync += step.eq(0)
        with m.If(active & ~checked & (mask_q.beats.valid | (step != 0))):
            with m.If(step != CHECK_STEPS):
                m.d.sync += step.eq(step + 1)
            with m.Elif(matches):
                m.d.comb += checked_next.eq(1)
            with m.Else():
                fail(ErrorReason.VALUE_LEN)
        return checked_next

    def _output_slice(self, m, name, skid):
        """The output ``name`` leaves through a register slice, so that the pipeline's selectors'
        ``ready`` stops at a flip-flop instead of reaching the window unit and the queues' read
        stages. Returns the slice's input."""
        port = getattr(self, name)
        slice_ = RegisterSlice(port.payload.shape(), skid=skid)
        m.submodules[f"{name}_slice"] = slice_ = ResetInserter(self.squash)(slice_)
        wiring.connect(m, slice_.o, wiring.flipped(port))
        return slice_.i

    def _frame_outputs(self, m, failed, owed, sources):
        """The framed outputs (into their slices): the tile's beats (gated) while ACTIVE, one skip
        beat each once FAILED. Returns ``handed``: per stream, its last (or skip) beat is taken in
        this cycle (a slice may then hold it with the next tile's first beats)."""
        handed = Signal(len(sources))
        for i, (out, src, last, gate) in enumerate(sources):
            # Not gated by ``failed``: the gate is low then.
            m.d.comb += src.ready.eq(out.ready & gate)
            with m.If(failed):
                m.d.comb += [out.valid.eq(owed[i]), out.payload.skip.eq(1), out.payload.last.eq(1)]
            with m.Else():
                m.d.comb += [out.valid.eq(src.valid & gate), out.payload.last.eq(last)]
            m.d.comb += handed[i].eq(out.valid & out.ready & out.payload.last)
            with m.If(handed[i]):
                m.d.sync += owed[i].eq(0)
        return handed
