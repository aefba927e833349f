"""Code unpacker: the SQQ side of the dequantization stage.

Value-stream beats are appended to a bit buffer; each cycle the dequantization stage may take the
next ``n`` codes, lane i seeing the Q bits at buffer bit i*Q, so any starting bit offset works.
Tiles' streams arrive back to back in whole bytes; after a tile's last code the buffer skips
that tile's padding bits (to the next byte boundary of the stream, see ``deca.golden.format``).
"""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from deca.golden.format import Q_BITS

from .layouts import BF16, physical_lanes, value_beat_bits, value_beat_layout

#: Buffer size in beats. A beat is accepted whenever what stays after this cycle's take leaves
#: room for a whole beat, so the buffer always holds the next cycle's codes: a full beat, or the
#: rest of the tile when its short last beat went in (the next tile's first beat follows it).
BUFFER_BEATS = 2


class CodeUnpacker(wiring.Component):
    """``codes[i]`` is code i of the buffer (zero-extended); ``ok`` says the first ``n`` are all
    there. ``take`` consumes them (and, with ``tile_end``, the tile's padding bits)."""

    def __init__(self, W, L):
        self.lanes = physical_lanes(W, L)
        self.beat_bits = value_beat_bits(W, L)
        super().__init__({
            "q": In(5),
            "values": In(stream.Signature(value_beat_layout(W, L))),
            "n": In(range(self.lanes + 1)),
            "tile_end": In(1),
            "take": In(1),
            "ok": Out(1),
            "codes": Out(data.ArrayLayout(BF16, self.lanes)),
        })

    def elaborate(self, platform):
        m = Module()
        size = BUFFER_BEATS * self.beat_bits
        buf = Signal(size)
        fill = Signal(range(size + 1))
        phase = Signal(3)  # bits taken since the current tile's stream began, mod 8

        for i in range(self.lanes):
            with m.Switch(self.q):
                for q in Q_BITS:
                    with m.Case(q):
                        m.d.comb += self.codes[i].eq(buf[i * q:(i + 1) * q])

        bits = Signal(range(self.lanes * 16 + 1))
        m.d.comb += [bits.eq(self.n * self.q), self.ok.eq(fill >= bits)]

        used = Signal.like(bits)
        end = Signal(range(self.lanes * 16 + 8))
        m.d.comb += [used.eq(Mux(self.take, bits, 0)), end.eq(phase + used)]
        skip = Mux(self.take & self.tile_end, (8 - end[:3])[:3], 0)
        taken = Signal(range(self.lanes * 16 + 8))
        m.d.comb += taken.eq(used + skip)
        with m.If(self.take):
            m.d.sync += phase.eq(Mux(self.tile_end, 0, end[:3]))

        left = Signal.like(fill)
        m.d.comb += [
            left.eq(fill - taken),
            self.values.ready.eq(left + self.beat_bits <= size),
        ]
        beat = self.values.payload
        # Bytes past ``nbytes`` may hold anything; only valid ones enter the buffer.
        incoming = Cat(Mux(k < beat.nbytes, beat.data.word_select(k, 8), 0) for k in range(self.beat_bits // 8))
        with m.If(self.values.valid & self.values.ready):
            m.d.sync += [buf.eq((buf >> taken) | (incoming << left)), fill.eq(left + beat.nbytes * 8)]
        with m.Else():
            m.d.sync += [buf.eq(buf >> taken), fill.eq(left)]
        return m
