"""The expansion stage (paper, section 6.1, item 3): the crossbar that puts zeros back.

DD[j] = mask[j] ? SD[prefix(j)] : +0. Since prefix(j) <= j, output j only needs inputs 0..j: the
crossbar is triangular, W(W+1)/2 crosspoints instead of W^2. In dense mode the mask is all ones and
prefix(j) = j, so the stage passes SD through at the same rate.
"""

from amaranth.hdl import Array, Module, Mux
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from .layouts import chunk_layout, sd_layout

#: Registers from SD to DD.
EXPANDER_LATENCY = 1


class Expander(wiring.Component):
    def __init__(self, W):
        self.W = W
        super().__init__({
            "sd": In(stream.Signature(sd_layout(W))),
            "dd": Out(stream.Signature(chunk_layout(W))),
        })

    def elaborate(self, platform):
        m = Module()
        sd, dd = self.sd.payload, self.dd.payload
        advance = ~self.dd.valid | self.dd.ready
        m.d.comb += self.sd.ready.eq(advance)
        with m.If(advance):
            m.d.sync += self.dd.valid.eq(self.sd.valid)
            with m.If(self.sd.valid):
                for j in range(self.W):
                    inputs = Array(sd.data[i] for i in range(j + 1))
                    m.d.sync += dd.data[j].eq(Mux(sd.mask[j], inputs[sd.prefix[j]], 0))
                m.d.sync += [dd.mask.eq(sd.mask), dd.index.eq(sd.index), dd.last.eq(sd.last)]
        return m
