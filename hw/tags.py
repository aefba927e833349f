"""The tag table of a load unit (paper, section 6.1, item 1; Table 3's LDU): what each outstanding
line read was for, so that responses may come back in any order.

The memory system echoes the tag; the PE decodes it one-hot on its way into the response register,
so a response selects its entry with one AND-OR (a binary index would put a decoder and a
multiplexer between that register and the queues' writes). An aborted tile (squash
or error) leaves its entries ``stale``: they stay allocated until their responses arrive, which are
then dropped, so a tag is never reused while a response for it may still come.
"""

import operator
from functools import reduce

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from .layouts import Stream
from .queues import LINE_INDEX_BITS


def line_layout():
    """What an outstanding line is: line ``index`` of ``stream`` of the loader's current tile."""
    return data.StructLayout({"stream": Stream, "index": LINE_INDEX_BITS})


class TagTable(wiring.Component):
    def __init__(self, entries):
        self.entries = entries
        super().__init__({
            # Allocation: ``free`` says an entry is available, ``tag`` is the one ``alloc`` takes.
            "free": Out(1),
            "tag": Out(range(entries)),
            "alloc": In(1),
            "alloc_line": In(line_layout()),
            # Response: ``lookup`` (one-hot, zero when there is none) frees its entry; ``line`` and
            # ``stale`` describe it.
            "lookup": In(entries),
            "line": Out(line_layout()),
            "stale": Out(1),
            "discard": In(1),  # the tile was aborted: every allocated entry becomes stale, and one taken now
            "outstanding": Out(1),  # some entry is allocated
        })

    def elaborate(self, platform):
        m = Module()
        busy = Signal(self.entries)
        stale = Signal(self.entries)
        lines = [Signal(line_layout(), name=f"line{i}") for i in range(self.entries)]

        # ``free`` and ``tag`` (the lowest free entry) are registers, computed from the next cycle's
        # ``busy``: the allocation they enable starts at flip-flops. The next ``tag`` is chosen
        # with and without this cycle's allocation (``kept``: the entries still busy, returns
        # done), so that the allocation only picks one of the two.
        busy_next, kept = Signal(self.entries), Signal(self.entries)
        free = Signal(init=1)
        m.d.sync += [busy.eq(busy_next), free.eq(~busy_next.all())]
        lowest = [Signal(range(self.entries), name=f"lowest_{n}") for n in ("kept", "taken")]
        for i in reversed(range(self.entries)):
            with m.If(~kept[i]):
                m.d.comb += lowest[0].eq(i)
            with m.If(~kept[i] & (self.tag != i)):
                m.d.comb += lowest[1].eq(i)
        m.d.sync += self.tag.eq(Mux(self.alloc, lowest[1], lowest[0]))
        m.d.comb += [self.free.eq(free), self.outstanding.eq(busy.any())]

        # An entry's line is written the cycle after it is taken (``alloc`` and ``alloc_line`` wait
        # for the loader's pick: registered first, they reach one register each, not every entry's);
        # a lookup in that cycle reads it from that register.
        taken = Signal(self.entries)
        line_d, taken_d = Signal(line_layout()), Signal(self.entries)
        m.d.sync += [line_d.eq(self.alloc_line), taken_d.eq(taken)]
        found = [Mux(self.lookup[i], Mux(taken_d[i], line_d.as_value(), lines[i].as_value()), 0)
                 for i in range(self.entries)]
        m.d.comb += [self.line.eq(reduce(operator.or_, found)), self.stale.eq((self.lookup & stale).any())]

        for i in range(self.entries):
            m.d.comb += taken[i].eq(self.alloc & (self.tag == i))
            returned = self.lookup[i]
            m.d.comb += [kept[i].eq(busy[i] & ~returned), busy_next[i].eq(kept[i] | taken[i])]
            with m.If(taken_d[i]):
                m.d.sync += lines[i].eq(line_d)
            with m.If(taken[i]):
                # Taken in an abort's cycle, it belongs to the aborted tile.
                m.d.sync += stale[i].eq(self.discard)
            with m.Elif(returned):
                m.d.sync += stale[i].eq(0)
            with m.Elif(self.discard):
                m.d.sync += stale[i].eq(busy[i])
        return m
