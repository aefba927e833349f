"""The prefetcher (paper, section 6.1, item 2, and Table 5): lines of the tiles to come, into the L2.

It watches the metadata of every accepted TEPL. Per stream (mask, scale, values) it learns the
address delta between consecutive tiles and, while that delta is positive, prefetches every line
up to the end of the stream ``degree`` tiles ahead: through line (addr + degree * delta + len - 1)
div 64. A value stream's delta is the previous tile's length, so in sparse mode this follows the
compressed sizes as they go.

Per stream it keeps the highest line it has prefetched or the loaders have demanded, and only ever
prefetches above it: no line is prefetched twice or after being demanded for that stream, while
the stream moves forward. A non-positive or huge delta (> ``MAX_DELTA``: not a streaming pattern)
stops that stream's prefetching until the next request; a negative one (a new pass over the
weights, or another matrix) also restarts the highest line from the current tile. The state
survives a squash: the predictions stay valid.
"""

from amaranth.hdl import Cat, Module, Mux, Signal, signed
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from .layouts import Stream, prefetch_layout, stream_fields, tepl_request_layout

MAX_DELTA = 1 << 16


class Prefetcher(wiring.Component):
    def __init__(self, addr_bits, id_bits):
        self.addr_bits = addr_bits
        super().__init__({
            "observe": In(1),  # a request is accepted this cycle
            "request": In(tepl_request_layout(addr_bits, id_bits)),
            "degree": In(4),
            "pf": Out(stream.Signature(prefetch_layout(addr_bits))),
        })

    def elaborate(self, platform):
        m = Module()
        line_bits = self.addr_bits - 6
        req = self.request
        fields = stream_fields(req)

        pending, nexts = [], []
        fire = self.pf.valid & self.pf.ready
        pick = Signal(Stream)
        for s in Stream:
            name = s.name.lower()
            last = Signal(self.addr_bits, name=f"last_{name}")
            seen = Signal(name=f"seen_{name}")
            top = Signal(line_bits, name=f"top_{name}")  # highest line prefetched or demanded
            target = Signal(line_bits + 1, name=f"target_{name}")
            issued = fire & (pick == s)
            now = Signal(line_bits, name=f"now_{name}")  # ``top`` after this cycle's prefetch
            m.d.comb += now.eq(top + issued)
            m.d.sync += top.eq(now)

            addr, length = fields[s]
            delta = Signal(signed(self.addr_bits + 1), name=f"delta_{name}")
            end = Signal(line_bits, name=f"end_{name}")
            ahead = Signal(self.addr_bits + 5 + 1, name=f"ahead_{name}")
            m.d.comb += [
                delta.eq(addr - last),
                end.eq((addr + length - 1) >> 6),
                ahead.eq(addr + self.degree * delta[:17] + length - 1),
            ]
            streaming = seen & (delta > 0) & (delta <= MAX_DELTA) & (self.degree != 0)
            with m.If(self.observe & (length != 0)):
                m.d.sync += [last.eq(addr), seen.eq(1)]
                # Going backwards starts a new pass (or another matrix): its lines may be fetched again.
                with m.If((end > now) | seen & (delta < 0)):
                    m.d.sync += top.eq(end)
                m.d.sync += target.eq(Mux(streaming & ~(ahead >> self.addr_bits).any(), ahead >> 6, 0))
            pending.append(target > top)
            nexts.append(top + 1)

        # Rotate priority after every prefetch so that no stream waits behind a long one.
        turn = Signal(range(len(Stream)))
        order = [[(k + j) % len(Stream) for j in range(len(Stream))] for k in range(len(Stream))]
        with m.Switch(turn):
            for k, ranking in enumerate(order):
                with m.Case(k):
                    for i in reversed(ranking):
                        with m.If(pending[i]):
                            m.d.comb += pick.eq(i)
        with m.If(fire):
            m.d.sync += turn.eq(Mux(turn == len(Stream) - 1, 0, turn + 1))

        m.d.comb += [self.pf.valid.eq(Cat(pending).any())]
        with m.Switch(pick):
            for s in Stream:
                with m.Case(s):
                    m.d.comb += self.pf.payload.addr.eq(nexts[s.value] << 6)
        return m
