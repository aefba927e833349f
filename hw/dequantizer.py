"""The dequantization stage (paper, section 6.1, item 3): SQQ codes through the LUT array into SD.

A vOp whose window holds Wnd codes occupies the stage max(1, ceil(Wnd / Lq)) cycles; cycle k
dequantizes codes k*Lq .. k*Lq + Lq - 1 into the same SD entries. The SD register is written only
when it is free or being handed on, so back-pressure stalls the stage without losing data.
"""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from .layouts import ConfigSignature, physical_lanes, sd_layout, value_beat_layout, vop_layout
from .lut_array import LUTArray
from .params import LANES_PER_LUT
from .unpacker import CodeUnpacker


class DequantStage(wiring.Component):
    def __init__(self, W, L):
        self.W, self.L = W, L
        super().__init__({
            "cfg": In(ConfigSignature()),
            "vops": In(stream.Signature(vop_layout(W))),
            "values": In(stream.Signature(value_beat_layout(W, L))),
            "sd": Out(stream.Signature(sd_layout(W))),
            # Per-cycle activity for the performance counters.
            "bubble": Out(1),  # working on a vOp that needs more cycles after this one
            "waiting": Out(1),  # free to work, but no vOp or not all of its codes are there
        })

    def elaborate(self, platform):
        m = Module()
        W, L = self.W, self.L
        lanes = physical_lanes(W, L)
        m.submodules.unpacker = unpacker = CodeUnpacker(W, L)
        m.submodules.luts = luts = LUTArray(L, lanes)
        wiring.connect(m, wiring.flipped(self.values), unpacker.values)
        wiring.connect(m, wiring.flipped(self.cfg), luts.cfg)
        m.d.comb += [unpacker.q.eq(self.cfg.q), luts.codes.eq(unpacker.codes)]

        # Lq of the configured Q, capped at W; one condition per distinct lane count.
        q8, q7 = self.cfg.q == 8, self.cfg.q == 7
        modes = {}
        for cond, per_lut in ((q8, LANES_PER_LUT[8]), (q7, LANES_PER_LUT[7]), (~q8 & ~q7, LANES_PER_LUT[6])):
            lq = min(per_lut * L, W)
            modes[lq] = modes[lq] | cond if lq in modes else cond
        lq = Signal(range(lanes + 1))
        for count, cond in modes.items():
            with m.If(cond):
                m.d.comb += lq.eq(count)

        vop = self.vops.payload
        done = Signal(range(W + 1))  # codes of the current vOp already dequantized
        rest = Signal(range(W + 1))
        final = Signal()  # this cycle finishes the vOp
        go = Signal()
        m.d.comb += [
            rest.eq(vop.wnd - done),
            final.eq(rest <= lq),
            unpacker.n.eq(Mux(final, rest, lq)),
            unpacker.tile_end.eq(vop.last & final),
            go.eq(self.vops.valid & (~self.sd.valid | self.sd.ready) & unpacker.ok),
            unpacker.take.eq(go),
            self.vops.ready.eq(go & final),
            self.bubble.eq(go & ~final),
            self.waiting.eq(~go & (~self.sd.valid | self.sd.ready)),
        ]

        sd = self.sd.payload
        with m.If(go):
            m.d.sync += done.eq(Mux(final, 0, done + lq))
            for count, cond in modes.items():
                with m.If(cond):
                    for e in range(W):
                        with m.If(done == e - e % count):
                            m.d.sync += sd.data[e].eq(luts.values[e % count])
            with m.If(final):
                m.d.sync += [sd.mask.eq(vop.mask), sd.prefix.eq(vop.prefix), sd.index.eq(vop.index),
                             sd.last.eq(vop.last)]
        with m.If(~self.sd.valid | self.sd.ready):
            m.d.sync += self.sd.valid.eq(go & final)
        return m
