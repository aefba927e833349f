"""The expansion stage (paper, section 6.1, item 3): the crossbar that puts zeros back.

DD[j] = mask[j] ? SD[prefix(j)] : +0. Since prefix(j) <= j, output j only needs inputs 0..j: the
crossbar is triangular, W(W+1)/2 crosspoints instead of W^2. In dense mode the mask is all ones and
prefix(j) = j, so the stage passes SD through at the same rate.

DD is a register slice (``hw/stages.py``): ``sd.ready`` comes from a register, so the scaling
stage's ready (and the scale queue's valid behind it) does not reach the dequantization stage in
the same cycle; ``sd_ready_next`` is that register's next value, from which the dequantization
stage registers the copies of its stall that enable its wide registers.
"""

from amaranth.hdl import Array, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from .layouts import chunk_layout, sd_layout
from .stages import RegisterSlice

#: Registers from SD to DD.
EXPANDER_LATENCY = 1


class Expander(wiring.Component):
    def __init__(self, W):
        self.W = W
        super().__init__({
            "sd": In(stream.Signature(sd_layout(W))),
            "dd": Out(stream.Signature(chunk_layout(W))),
            "sd_ready_next": Out(1),  # ``sd.ready`` of the next cycle (see ``DequantStage``)
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.dd = dd = RegisterSlice(chunk_layout(self.W), ready_next=True)
        sd = self.sd.payload
        expanded = Signal(chunk_layout(self.W))
        for j in range(self.W):
            inputs = Array(sd.data[i] for i in range(j + 1))
            m.d.comb += expanded.data[j].eq(Mux(sd.mask[j], inputs[sd.prefix[j]], 0))
        m.d.comb += [
            expanded.mask.eq(sd.mask), expanded.index.eq(sd.index), expanded.last.eq(sd.last),
            dd.i.valid.eq(self.sd.valid), dd.i.payload.eq(expanded), self.sd.ready.eq(dd.i.ready),
            self.sd_ready_next.eq(dd.ready_next),
        ]
        wiring.connect(m, dd.o, wiring.flipped(self.dd))
        return m
