"""A register slice: the pipeline register that cuts both directions of a stream link."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out


class RegisterSlice(wiring.Component):
    """A stream through one register whose ``i.ready`` is itself a register (a skid buffer): no
    combinational path from ``i`` to ``o`` nor from ``o.ready`` back to ``i.ready``; one beat per
    cycle, one cycle of latency.

    A beat that arrives while the output stalls waits in the skid register, and ``i.ready`` falls
    until the output register takes it.
    """

    def __init__(self, layout):
        super().__init__({"i": In(stream.Signature(layout)), "o": Out(stream.Signature(layout))})

    def elaborate(self, platform):
        m = Module()
        skid = Signal.like(self.i.payload)
        skid_valid = Signal()
        m.d.comb += self.i.ready.eq(~skid_valid)
        with m.If(~self.o.valid | self.o.ready):
            m.d.sync += [
                self.o.valid.eq(skid_valid | self.i.valid),
                self.o.payload.eq(Mux(skid_valid, skid, self.i.payload)),
                skid_valid.eq(0),
            ]
        with m.Elif(self.i.valid & ~skid_valid):
            m.d.sync += [skid.eq(self.i.payload), skid_valid.eq(1)]
        return m
