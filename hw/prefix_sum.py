"""POPCNT and parallel prefix sum (paper, section 6.1, items 3 and 5): the window unit.

For each vOp of a tile it counts the stored elements among its W mask bits (the window, Wnd) and
computes the exclusive prefix sums that steer the expansion crossbar. It works one vOp ahead of
the dequantization stage, and the complete PE has one per loader.
"""

from amaranth.hdl import Const, Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from deca.golden.format import TILE_ELEMS

from .layouts import tile_layout, vop_layout

#: Cycles from a tile's bitmask handshake to its first vOp's valid: the bitmask and vOp registers.
WINDOW_LATENCY = 2


def prefix_sums(bits):
    """Inclusive prefix sums of a list of 1-bit values, Kogge-Stone: log2(n) levels of adders."""
    sums = list(bits)
    step = 1
    while step < len(sums):
        sums = [s + sums[j - step] if j >= step else s for j, s in enumerate(sums)]
        step *= 2
    return [s[:(j + 1).bit_length()] for j, s in enumerate(sums)]


def popcount(bits):
    """Number of ones in ``bits``: a balanced tree of adders, log2(n) levels deep."""
    sums = list(bits)
    while len(sums) > 1:
        sums = [a + b for a, b in zip(sums[::2], sums[1::2])] + sums[len(sums) & ~1:]
    return sums[0]


class WindowUnit(wiring.Component):
    """Tile bitmasks in, one vOp descriptor per cycle out.

    ``sparse`` = 0 treats every element as stored (Wnd = W), whatever the mask says.
    """

    def __init__(self, W):
        self.W = W
        super().__init__({
            "sparse": In(1),
            "tiles": In(stream.Signature(tile_layout())),
            "vops": Out(stream.Signature(vop_layout(W))),
        })

    def elaborate(self, platform):
        m = Module()
        W = self.W
        n_vops = TILE_ELEMS // W

        mask = Signal(TILE_ELEMS)
        index = Signal(range(n_vops))
        busy = Signal()  # a tile is loaded and its vOps are being issued
        advance = ~self.vops.valid | self.vops.ready
        last = index == n_vops - 1

        chunk = Signal(W)
        m.d.comb += chunk.eq(Const((1 << W) - 1, W))
        with m.If(self.sparse):
            m.d.comb += chunk.eq(mask.word_select(index, W))
        inclusive = prefix_sums(list(chunk))

        m.d.comb += self.tiles.ready.eq(~busy | (advance & last))
        with m.If(self.tiles.valid & self.tiles.ready):
            m.d.sync += [mask.eq(self.tiles.payload.mask), busy.eq(1), index.eq(0)]
        with m.Elif(busy & advance & last):
            m.d.sync += busy.eq(0)

        with m.If(advance):
            m.d.sync += self.vops.valid.eq(busy)
            with m.If(busy):
                p = self.vops.payload
                m.d.sync += [
                    p.mask.eq(chunk),
                    p.wnd.eq(inclusive[-1]),
                    p.prefix[0].eq(0),
                    [p.prefix[j].eq(inclusive[j - 1]) for j in range(1, W)],
                    p.index.eq(index),
                    p.last.eq(last),
                ]
                with m.If(~last):
                    m.d.sync += index.eq(index + 1)
        return m
