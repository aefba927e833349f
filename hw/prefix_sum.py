"""POPCNT and parallel prefix sum (paper, section 6.1, items 3 and 5): the window unit.

For each vOp of a tile it counts the stored elements among its W mask bits (the window, Wnd) and
computes the exclusive prefix sums that steer the expansion crossbar. It works one vOp ahead of
the dequantization stage, and the complete PE has one per tile context.

The sums are pipelined, one vOp per cycle: the tile's bitmask register shifts by W per vOp (no
multiplexer in front of the adders), then come the counts within groups of ``GROUP`` elements, the
groups' offsets (carry-save sums of the groups' totals or, past two groups, of the counts of
pairs of groups, counted in the first stage beside the groups' own), and the output register, where
each element adds its group's offset to its count within the group.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from deca.golden.format import TILE_ELEMS

from .arith import fast_sum
from .layouts import tile_layout, vop_layout
from .stages import stage_loads

#: Elements whose counts the first stage sums; the second sums the groups.
GROUP = 8

#: Cycles from accepting a tile's bitmask to its first vOp: the bitmask, the counts within the groups,
#: the group offsets and the vOp register.
WINDOW_LATENCY = 4


def prefix_sums(bits):
    """Inclusive prefix sums of a list of bits, Kogge-Stone: log2(n) levels of adders."""
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

    ``sparse`` = 0 treats every element as stored (Wnd = W), whatever the mask says. With
    ``back_to_back`` a tile's mask is taken as its predecessor's last vOp moves on, so vOps follow
    without a gap across tiles; without it, the cycle after (``tiles.ready`` is then a register,
    for a user that has one tile at a time).
    """

    def __init__(self, W, *, back_to_back=True):
        self.W, self.back_to_back = W, back_to_back
        super().__init__({
            "sparse": In(1),
            "tiles": In(stream.Signature(tile_layout())),
            "vops": Out(stream.Signature(vop_layout(W))),
        })

    def elaborate(self, platform):
        m = Module()
        W = self.W
        n_vops = TILE_ELEMS // W
        group = min(GROUP, W)
        groups = W // group
        count_shape = range(group + 1)

        mask = Signal(TILE_ELEMS)  # the tile's bits not yet issued, the next vOp's at the bottom
        index = Signal(range(n_vops))
        busy = Signal()  # a tile is loaded and its vOps are being issued
        last = index == n_vops - 1
        side = {"mask": W, "index": range(n_vops), "last": 1}
        # Counts within the groups: element j's inclusive count among its group's elements 0..j; a
        # group's first count is its mask bit, not registered twice (synthesis would merge the two).
        # And, past two groups, the count of each pair of groups, so that the offsets' sums take
        # half as many rows (at W = 16 the one pair's count of 16 bits was 452 ps, for an end of
        # two rows).
        pairs = groups // 2 if groups > 2 else 0
        pair_layout = {"pairs": data.ArrayLayout(range(2 * group + 1), pairs)} if pairs else {}
        # The stages' data registers have no reset (``valid`` says which hold a vOp): a reset term
        # would be one more gate after the pair counts.
        local = Signal(data.StructLayout({"counts": data.ArrayLayout(count_shape, W), **pair_layout, **side}),
                       reset_less=True)
        # The groups' inclusive ends (group g starts at the end of g - 1) but the first, which is the
        # first group's last count (a second register with the same input would be merged by
        # synthesis), and the counts within the groups.
        offsets = Signal(data.StructLayout({"ends": data.ArrayLayout(range(W + 1), max(1, groups - 1)),
                                            "counts": data.ArrayLayout(count_shape, W), **side}),
                         reset_less=True)
        valid = Signal(2)  # of local, offsets

        def count(stage, j):
            return stage.mask[j] if j % group == 0 else stage.counts[j]

        loads = stage_loads(m, [*valid, self.vops.valid], self.vops.ready, "window")

        m.d.comb += self.tiles.ready.eq(~busy | (loads[0] & last) if self.back_to_back else ~busy)
        with m.If(self.tiles.valid & self.tiles.ready):
            all_ones = Const((1 << TILE_ELEMS) - 1, TILE_ELEMS)
            m.d.sync += [mask.eq(Mux(self.sparse, self.tiles.payload.mask, all_ones)), busy.eq(1), index.eq(0)]
        with m.Elif(busy & loads[0] & last):
            m.d.sync += busy.eq(0)

        chunk = mask[:W]
        with m.If(loads[0]):
            # The data loads whether or not a tile is busy (``valid`` says): no ``busy`` term after the counts.
            m.d.sync += valid[0].eq(busy)
            m.d.sync += [local.mask.eq(chunk), local.index.eq(index), local.last.eq(last)]
            for g in range(groups):
                counts = prefix_sums(list(chunk[g * group:(g + 1) * group]))
                m.d.sync += [local.counts[g * group + i].eq(c) for i, c in enumerate(counts) if i]
            m.d.sync += [local.pairs[k].eq(popcount(list(chunk[2 * k * group:2 * (k + 1) * group])))
                         for k in range(pairs)]
            with m.If(busy & ~last):  # (after the last vOp the next tile's bitmask may load)
                m.d.sync += [index.eq(index + 1), mask.eq(mask >> W)]

        # Each group's end a sum of the group totals up to it or, with pair counts, of the pair
        # counts below it and, for an even group, its own total, carry-save (``fast_sum``): at W = 64
        # at most four rows (seven group totals were 427 ps). Outside the ``If``: the sums are
        # signals of their own.
        end_bits = W.bit_length()

        def end_of(g):
            if not pairs:
                rows = [count(local, (h + 1) * group - 1) for h in range(g + 1)]
            else:
                rows = [local.pairs[k] for k in range((g + 1) // 2)]
                if g % 2 == 0:
                    rows.append(count(local, (g + 1) * group - 1))
            rows = [Cat(r, Const(0, end_bits - len(r))) for r in rows]
            return rows[0] if len(rows) == 1 else fast_sum(m, rows)[:end_bits]

        inclusive = [None, *(end_of(g) for g in range(1, groups))]
        with m.If(loads[1]):
            m.d.sync += valid[1].eq(valid[0])
            m.d.sync += [[offsets.ends[g - 1].eq(inclusive[g]) for g in range(1, groups)],
                         offsets.counts.eq(local.counts), offsets.mask.eq(local.mask),
                         offsets.index.eq(local.index), offsets.last.eq(local.last)]

        ends = [count(offsets, group - 1), *(offsets.ends[g] for g in range(groups - 1))]
        with m.If(loads[2]):
            m.d.sync += self.vops.valid.eq(valid[1])
            p = self.vops.payload
            m.d.sync += [
                p.mask.eq(offsets.mask), p.index.eq(offsets.index), p.last.eq(offsets.last),
                p.wnd.eq(ends[-1]),
                p.prefix[0].eq(0),
            ]
            for j in range(1, W):
                g = j // group
                start = ends[g - 1] if g else 0
                within = count(offsets, j - 1) if j % group else 0
                m.d.sync += p.prefix[j].eq(start + within)
        return m
