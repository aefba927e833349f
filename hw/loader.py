"""A loader (paper, sections 5.2 and 6.1, items 1 and 4): one TEPL at a time, from its metadata to
the streams the shared pipeline consumes.

On a request the loader checks the metadata against the configuration (``ErrorReason``), then
requests every 64-byte line of the mask, scale and value streams (in that order: the mask is
needed first, the scales before the first chunk leaves the pipeline), tracking them in its tag
table, and fills its three queues as responses come back in any order. In sparse mode it counts
the mask's ones before anything flows, so a value stream of the wrong length is an error, not a
hang. Its own window unit turns the mask into vOps while the pipeline may still be busy with the
other loader's tile.

Every stream it hands the pipeline is *framed*: beats carry ``last`` at the end of the tile, and
a failed request presents one ``skip`` beat on each stream instead, so that the pipeline's input
selectors, which follow request order, move past it.
"""

from amaranth.hdl import Cat, Module, Mux, ResetInserter, Signal
from amaranth.lib import data, enum, stream, wiring
from amaranth.lib.wiring import In, Out

from deca.golden.format import MASK_BYTES, Q_BITS

from .layouts import (LINE_BYTES, ErrorReason, ScaleFormat, ScaleGroup, Stream, scale_beat_layout, stream_fields,
                      tepl_request_layout, value_beat_bits, value_beat_layout, vop_layout)
from .prefix_sum import WindowUnit, popcount
from .queues import LINE_INDEX_BITS, LineQueue
from .tags import TagTable


class LoaderState(enum.Enum, shape=2):
    IDLE = 0  #: takes a request
    ACTIVE = 1  #: fetching and feeding the pipeline
    FAILED = 2  #: the request failed a check; waits for its error completion


def framed(layout):
    return data.StructLayout({"data": layout, "last": 1, "skip": 1})


def line_request_layout(addr_bits, tags):
    return data.StructLayout({"addr": addr_bits, "tag": range(tags)})


def scale_stream_len(scale_format, scale_group):
    """Bytes of a tile's scale stream for the configured format and group (golden TileConfig)."""
    scales = Mux(scale_group == ScaleGroup.G16, 32, 16)
    return Mux(scale_format == ScaleFormat.NONE, 0, Mux(scale_format == ScaleFormat.BF16, 2 * scales, scales))


class Loader(wiring.Component):
    def __init__(self, W, L, *, tags, sqq_bytes, addr_bits, id_bits):
        self.W, self.L = W, L
        self.tags, self.sqq_bytes, self.addr_bits = tags, sqq_bytes, addr_bits
        super().__init__({
            "q": In(5),
            "sparse": In(1),
            "scale_format": In(ScaleFormat),
            "scale_group": In(ScaleGroup),
            "req": In(stream.Signature(tepl_request_layout(addr_bits, id_bits))),
            "grant": In(1),  # the PE takes at most one request per cycle
            "abort": In(1),  # squash: drop the request, whatever its state
            "release": In(1),  # the request's completion went out
            "state": Out(LoaderState),
            "reason": Out(ErrorReason),
            "id": Out(id_bits),
            "failed": Out(1),  # FAILED, and the pipeline's selectors have skipped the request
            "line_req": Out(stream.Signature(line_request_layout(addr_bits, tags))),
            "line_resp": In(data.StructLayout({"en": 1, "tag": range(tags), "data": 8 * LINE_BYTES})),
            "vops": Out(stream.Signature(framed(vop_layout(W)))),
            "values": Out(stream.Signature(framed(value_beat_layout(W, L)))),
            "scales": Out(stream.Signature(framed(scale_beat_layout()))),
        })

    def elaborate(self, platform):
        m = Module()
        W, L = self.W, self.L
        beat_bytes = value_beat_bits(W, L) // 8
        row_bytes = max(LINE_BYTES, beat_bytes)
        m.submodules.tags = tags = TagTable(self.tags)
        m.submodules.sqq = sqq = LineQueue(self.sqq_bytes // row_bytes, row_bytes, beat_bytes)
        m.submodules.mask_queue = mask_q = LineQueue(1, LINE_BYTES, MASK_BYTES)
        m.submodules.scale_queue = scale_q = LineQueue(1, LINE_BYTES, LINE_BYTES)
        window = WindowUnit(W)
        m.submodules.window = ResetInserter(self.abort)(window)
        queues = {Stream.MASK: mask_q, Stream.SCALE: scale_q, Stream.VALUE: sqq}

        req = self.req.payload
        meta = Signal(tepl_request_layout(self.addr_bits, len(self.id)))
        m.d.comb += self.id.eq(meta.id)
        streams, req_streams = stream_fields(meta), stream_fields(req)
        scaling = self.scale_format != ScaleFormat.NONE

        # Checks of a request against the configuration, in ErrorReason order.
        checks = [
            (ErrorReason.CONFIG, ~Cat(self.q == q for q in Q_BITS).any()),
            (ErrorReason.ADDR_WRAP, Cat((n != 0) & ((a + n - 1) >> self.addr_bits).any()
                                        for a, n in req_streams.values()).any()),
            (ErrorReason.MASK_LEN, req.mask_len != Mux(self.sparse, MASK_BYTES, 0)),
            (ErrorReason.SCALE_LEN, req.scale_len != scale_stream_len(self.scale_format, self.scale_group)),
            (ErrorReason.VALUE_LEN, ~self.sparse & (req.val_len != self.q * LINE_BYTES)),
        ]
        bad = Signal(ErrorReason)
        for reason, failing in reversed(checks):
            with m.If(failing):
                m.d.comb += bad.eq(reason)

        state = Signal(LoaderState)
        reason = Signal(ErrorReason)
        checked = Signal()  # the value length matches the mask: the streams may flow
        counted = Signal()
        ones = Signal(range(len(mask_q.beats.payload.data) + 1))
        skips = Signal(3)  # vops, values, scales: a skip beat still to hand out
        m.d.comb += [self.state.eq(state), self.reason.eq(reason), self.failed.eq((state == LoaderState.FAILED) & ~skips.any())]

        def fail(why):
            m.d.sync += [state.eq(LoaderState.FAILED), reason.eq(why), skips.eq(Cat(1, 1, scaling))]

        m.d.comb += self.req.ready.eq((state == LoaderState.IDLE) & self.grant & ~self.abort)
        accept = self.req.valid & self.req.ready
        for s, queue in queues.items():
            addr, length = req_streams[s]
            m.d.comb += [queue.start.eq(accept), queue.offset.eq(addr[:6]), queue.length.eq(length)]
        with m.If(accept):
            m.d.sync += [meta.eq(req), checked.eq(~self.sparse), counted.eq(0)]
            with m.If(bad == ErrorReason.NONE):
                m.d.sync += state.eq(LoaderState.ACTIVE)
            with m.Else():
                fail(bad)

        active = (state == LoaderState.ACTIVE) & ~self.abort

        # Line requests: the first stream (in Stream order) with lines left and room for the next.
        issued = {s: Signal(LINE_INDEX_BITS + 1, name=f"issued_{s.name.lower()}") for s in Stream}
        with m.If(accept):
            m.d.sync += [issued[s].eq(0) for s in Stream]
        m.d.comb += sqq.issue_index.eq(issued[Stream.VALUE])
        pick = Signal(Stream)
        pending = Signal()
        for s in reversed(Stream):
            addr, length = streams[s]
            lines = (addr[:6] + length + LINE_BYTES - 1) // LINE_BYTES
            with m.If(issued[s] < lines):
                m.d.comb += [pick.eq(s), pending.eq(1)]
        room = Mux(pick == Stream.VALUE, sqq.room, 1)
        line = self.line_req.payload
        with m.Switch(pick):
            for s in Stream:
                with m.Case(s):
                    addr, _ = streams[s]
                    m.d.comb += line.addr.eq(((addr >> 6) + issued[s]) << 6)
        m.d.comb += [
            self.line_req.valid.eq(active & pending & room & tags.free),
            line.tag.eq(tags.tag),
            tags.alloc.eq(self.line_req.valid & self.line_req.ready),
            tags.alloc_line.stream.eq(pick),
            tags.alloc_line.index.eq(Mux(pick == Stream.VALUE, issued[Stream.VALUE],
                                         Mux(pick == Stream.SCALE, issued[Stream.SCALE], issued[Stream.MASK]))),
        ]
        with m.If(tags.alloc):
            with m.Switch(pick):
                for s in Stream:
                    with m.Case(s):
                        m.d.sync += issued[s].eq(issued[s] + 1)

        # Responses go to the queue of their stream, unless their tile was aborted.
        resp = self.line_resp
        m.d.comb += [tags.lookup.eq(resp.en), tags.lookup_tag.eq(resp.tag)]
        for s, queue in queues.items():
            m.d.comb += [
                queue.write.en.eq(resp.en & ~tags.stale & (tags.line.stream == s)),
                queue.write.index.eq(tags.line.index),
                queue.write.data.eq(resp.data),
            ]

        # Sparse mode: the value stream must be ceil(ones * Q / 8) bytes; count, then compare.
        mask = mask_q.beats.payload.data
        with m.If(active & ~checked & mask_q.beats.valid):
            with m.If(~counted):
                m.d.sync += [ones.eq(popcount(list(mask))), counted.eq(1)]
            with m.Elif((ones * self.q + 7) // 8 == meta.val_len):
                m.d.sync += checked.eq(1)
            with m.Else():
                fail(ErrorReason.VALUE_LEN)
        m.d.comb += tags.abort.eq(self.abort | (state == LoaderState.FAILED))

        flowing = active & checked
        m.d.comb += [
            window.sparse.eq(self.sparse),
            window.tiles.valid.eq(flowing & mask_q.beats.valid),
            window.tiles.payload.mask.eq(mask),
            mask_q.beats.ready.eq(flowing & window.tiles.ready),
        ]

        # The framed outputs: the tile's beats while ACTIVE, one skip beat each once FAILED.
        failed = state == LoaderState.FAILED
        sources = [
            (self.vops, window.vops, window.vops.payload.last, 1),
            (self.values, sqq.beats, sqq.beats.payload.last, flowing),
            (self.scales, scale_q.beats, 1, flowing & scaling),
        ]
        for i, (out, src, last, gate) in enumerate(sources):
            with m.If(failed):
                m.d.comb += [out.valid.eq(skips[i]), out.payload.skip.eq(1), out.payload.last.eq(1)]
                with m.If(out.valid & out.ready):
                    m.d.sync += skips[i].eq(0)
            with m.Else():
                m.d.comb += [out.valid.eq(src.valid & gate), src.ready.eq(out.ready & gate), out.payload.last.eq(last)]
        m.d.comb += [
            self.vops.payload.data.eq(window.vops.payload),
            self.values.payload.data.data.eq(sqq.beats.payload.data),
            self.values.payload.data.nbytes.eq(sqq.beats.payload.nbytes),
            self.scales.payload.data.data.eq(scale_q.beats.payload.data),
        ]
        # Without scaling the scale queue's one empty beat per tile goes nowhere.
        with m.If(active & ~scaling):
            m.d.comb += scale_q.beats.ready.eq(1)

        with m.If(self.abort):
            m.d.sync += [state.eq(LoaderState.IDLE), skips.eq(0)]
        with m.Elif(self.release):
            m.d.sync += state.eq(LoaderState.IDLE)
        return m
