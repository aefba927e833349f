"""The prefetcher (paper, section 6.1, item 2, and Table 5): lines of the tiles to come, into the L2.

It watches the metadata of every accepted TEPL (``observe``) and of every tile whose lines a tile
context starts to read (``demand``: the request leaves the PE's request queue, at least a cycle
after its acceptance). Per stream (mask, scale, values) it learns the address delta between
consecutive accepted tiles and, while that delta is in 1..``MAX_DELTA``, prefetches every line up
to the end of the stream ``degree`` tiles ahead: through line (addr + degree * delta + len - 1)
div 64. A value stream's delta is the previous tile's length, so in sparse mode this follows the
compressed sizes as they go. The lines of a tile accepted but not yet demanded are prefetched too:
the request queue lengthens the lookahead by the tiles waiting in it.

**Passes.** Per stream it keeps the current *pass*: the highest start address accepted
(``front``), the lowest line accepted and the highest line demanded or prefetched (``low``,
``top``). The ports may accept tiles out of order, so a tile may start below ``front``; it belongs
to the pass as long as it starts at most ``window_tiles(loaders)`` of its own lengths below
``front`` (the smallest power of two >= 2 x loaders: the reordering of the ports and the reissue
after a squash). A tile starting further back begins a new pass (another matrix, or the same one
again): ``low`` restarts at its first line and ``top`` just below it, and nothing is prefetched for
it. An accepted tile in the pass lowers ``low``; a backwards step learns nothing. A demanded tile
not below ``low`` raises ``top`` over its last line.

**Guarantee.** Within a pass, a stream prefetches only lines above ``top``, one at a time, each
raising ``top``: no line twice, and no line of a tile demanded in the pass after its demand (a
demand reaches ``top`` before the next prefetch is chosen, below). No stream prefetches a line
inside another stream's current pass, [low, top] (it skips it), so where the regions of the
streams meet (the ``memory_image`` layout: values, masks, scales one after the other) no line is
prefetched twice or after its demand either. A new pass may prefetch lines of an earlier one
again, and a pass starting in line 0 never prefetches that line. Prefetches past the matrix's
last tile (up to ``degree`` tiles past each stream's end) remain; the testbench counts them as
wasted bytes. A stream absent from a request (length 0) leaves the pass and blocks no other
stream. The state survives a squash.

**Pipeline and latency.** Observations and demands are registered (stage 0), then the adds (stage
1), the pass's compares (against the pass and against the tile a stage ahead, which updates it in
that cycle) and the degree x delta partial products (stage 2), the pass update and the target line
(stage 3). A demand's first and last lines are computed in stage 1 and raise ``top`` in stage 3, a
cycle after its own acceptance's pass update at the earliest. A prefetch goes out from registered
flags, recomputed one cycle after any change of state, and not while an observation or a demand is
in stages 0 to 2 (so ``top`` already covers a demanded tile's lines when the next prefetch is
chosen). The first prefetch after an acceptance in cycle t (demanded in cycle t + 1, as from an
empty request queue), on an idle prefetcher with ``pf.ready`` high, is valid in cycle t +
``LATENCY``; then one line every two cycles at most. Adds use a parallel-prefix carry network
(``fast_add``), compares a tree of halves (``at_least``): no path is longer than one add or
compare and a few gates.
"""

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from .arith import apart, at_least, carry_save, fast_add
from .layouts import Stream, prefetch_layout, stream_fields, tepl_request_layout
from .params import LOADERS

MAX_DELTA = 1 << 16
#: Cycles from an accepted TEPL (``observe``) to its first prefetch on ``pf`` (the paper gives none).
LATENCY = 6


#: A stream's registers that have a reset: valid bits, flags that hold across tiles.
STATE = {"dv0", "dv1", "dv2", "v0", "idle0", "v1", "idle1", "v2", "idle2", "last_valid", "live", "prev_new", "raised"}


def window_tiles(loaders):
    """How many of its own lengths a tile may start below the pass's front and still be in the pass."""
    return 1 << (2 * loaders - 1).bit_length()


class Prefetcher(wiring.Component):
    def __init__(self, addr_bits, id_bits, loaders=LOADERS):
        self.addr_bits = addr_bits
        self.window_shift = window_tiles(loaders).bit_length() - 1
        super().__init__({
            "observe": In(1),  # a request is accepted this cycle
            "request": In(tepl_request_layout(addr_bits, id_bits)),
            "demand": In(1),  # a request reaches its tile context this cycle, which reads its lines
            "demanded": In(tepl_request_layout(addr_bits, id_bits)),
            "degree": In(4),
            "pf": Out(stream.Signature(prefetch_layout(addr_bits))),
        })

    def elaborate(self, platform):
        m = Module()
        states = [self._pass(m, s, *stream_fields(self.request)[s], *stream_fields(self.demanded)[s]) for s in Stream]
        self._issue(m, states)
        return m

    def _pass(self, m, s, addr, length, demand_addr, demand_length):
        """Stages 0 to 3 of one stream; returns its state and pipeline signals."""
        A, lines, name = self.addr_bits, self.addr_bits - 6, s.name.lower()

        def sig(what, shape=1):
            # Only the valid bits and ``live`` need a reset: the rest is read under them (a reset
            # would put a gate in front of each flip-flop, on paths as long as a 48-bit add).
            return Signal(shape, name=f"{what}_{name}", reset_less=what not in STATE)

        def last_byte(a, n):
            # a + n - 1 = a + n + (2^A - 1): one carry-save step, then one add.
            return fast_add(m, ~(a ^ n), Cat(Const(0), (a | n)[:A - 1]))[:A]

        # The demand of a tile: stage 0 registers it, stage 1 its first line - 1 and last line,
        # stage 2 applies it, after the pass update of its own acceptance (which is a cycle or more
        # before the demand, three stages before the update).
        dv0, da0, dn0 = sig("dv0"), sig("da0", A), sig("dn0", len(demand_length))
        m.d.sync += [dv0.eq(self.demand & (demand_length != 0)), da0.eq(demand_addr), dn0.eq(demand_length)]
        dv1, dstart_m1, dend_line = sig("dv1"), sig("dstart_m1", lines + 1), sig("dend_line", lines)
        m.d.sync += [dv1.eq(dv0), dstart_m1.eq(fast_add(m, da0[6:], Const(-1, lines + 1))[:lines + 1]),
                     dend_line.eq(last_byte(da0, dn0)[6:])]
        dv2, dend2 = sig("dv2"), sig("dend2", lines)
        m.d.sync += [dv2.eq(dv1), dend2.eq(dend_line)]

        # Stage 0: what was accepted.
        v0, idle0, a0, n0 = sig("v0"), sig("idle0"), sig("a0", A), sig("n0", len(length))
        m.d.sync += [v0.eq(self.observe & (length != 0)), idle0.eq(self.observe & (length == 0)),
                     a0.eq(addr), n0.eq(length)]

        # Stage 1: end of the tile, window edge, delta from the previous accepted tile. The delta's
        # low 17 bits are a subtraction; it is below 2^17 when the high bits are equal, or one
        # apart with a borrow from the low ones (``last_inc``: the previous tile's high bits + 1).
        last, last_inc, last_valid = sig("last", A), sig("last_inc", A - 16), sig("last_valid")
        with m.If(v0):
            m.d.sync += [last.eq(a0), last_inc.eq(fast_add(m, a0[17:], 0, 1)), last_valid.eq(1)]
        end = last_byte(a0, n0)
        edge = fast_add(m, a0, n0 << self.window_shift)  # window_tiles x length above the start
        low_delta = fast_add(m, a0[:17], ~last[:17], 1)  # bit 17: no borrow
        # The borrow comes late: it only picks one of the two compares, made apart.
        same = apart(m, a0[17:] == last[17:], f"same_{name}")
        next_ = apart(m, Cat(a0[17:], Const(0)) == last_inc, f"next_{name}")
        high_match = Mux(low_delta[17], same, next_)
        start_m1 = fast_add(m, a0[6:], Const(-1, lines + 1))[:lines + 1]  # start line - 1, signed
        v1, idle1, a1, end1, edge1 = sig("v1"), sig("idle1"), sig("a1", A), sig("end1", A), sig("edge1", A + 1)
        start_m1_1, forward1, d1 = sig("start_m1_1", lines + 1), sig("forward1"), sig("d1", 17)
        m.d.sync += [v1.eq(v0), idle1.eq(idle0), a1.eq(a0), end1.eq(end), edge1.eq(edge), start_m1_1.eq(start_m1),
                     d1.eq(low_delta[:17]), forward1.eq(last_valid & high_match)]  # 0 <= delta < 2^17
        streaming1 = forward1 & d1.any() & ~(d1[16] & d1[:16].any())  # 1 <= delta <= MAX_DELTA

        # Stage 2: the pass's compares and the degree x delta partial products. The tile in stage 3
        # (``prev``) updates the pass in this cycle, so each compare is made against the pass and
        # against ``prev`` too, and stage 3 picks the answer once it knows whether ``prev`` began a
        # new pass (then the pass is ``prev``'s alone) or not (then the front is the higher and the
        # low line the lower of the two).
        front, live = sig("front", A), sig("live")
        low_m1, top, target = sig("low_m1", lines + 1), sig("top", lines), sig("target", lines)
        deg = self.degree
        parts = [Mux(deg[k], d1 << k, 0) for k in range(4)]
        # Near the top of the address space the target could wrap: no prefetching there.
        wraps = end1[len(d1) + 4:].all()
        # end + degree x delta as two numbers (carry-save), added in stage 3.
        sum_, carry = carry_save(m, [end1, *parts], A)
        v2, idle2, a2, start2, aims2, sum2, carry2 = (sig("v2"), sig("idle2"), sig("a2", A), sig("start2", lines + 1),
                                                      sig("aims2"), sig("sum2", A), sig("carry2", A))
        m.d.sync += [v2.eq(v1), idle2.eq(idle1), a2.eq(a1), start2.eq(start_m1_1), aims2.eq(streaming1 & ~wraps),
                     sum2.eq(sum_), carry2.eq(carry)]
        # below: the window's edge is below the front; higher: the start is above it; lower: the
        # start line is below the low line; *_prev: the same against ``prev`` (none: as if it were
        # not a bound).
        below, below_prev, higher, higher_prev, lower, lower_prev = (sig(n) for n in (
            "below", "below_prev", "higher", "higher_prev", "lower", "lower_prev"))
        m.d.sync += [below.eq(~at_least(edge1, front)), below_prev.eq(v2 & ~at_least(edge1, a2)),
                     higher.eq(~at_least(front, a1)), higher_prev.eq(~v2 | ~at_least(a2, a1)),
                     lower.eq(~at_least(start_m1_1, low_m1, signed=True)),
                     lower_prev.eq(~v2 | ~at_least(start_m1_1, start2, signed=True))]

        # Stage 3: the pass update and the target line.
        prev_new = sig("prev_new")  # ``prev`` began a new pass
        new_pass = ~live | Mux(prev_new, below_prev, below | below_prev)
        lowered = v2 & (new_pass | Mux(prev_new, lower_prev, lower & lower_prev))  # low_m1 becomes start2
        new_top = Mux(start2[lines], 0, start2[:lines])
        m.d.sync += prev_new.eq(v2 & new_pass)
        # A demanded tile of the pass (not below its low line) raises the top over its lines. Its
        # compares are made a stage early, against the state and against what may replace it in
        # that cycle (no prefetch goes out while a demand is in flight): a new pass's low line and
        # top, or the top a demand a stage ahead raises.
        ge_low, ge_start, gt_top, gt_new, gt_raised = (sig(n) for n in ("ge_low", "ge_start", "gt_top", "gt_new",
                                                                         "gt_raised"))
        raised, low_was_lowered = sig("raised"), sig("low_was_lowered")
        m.d.sync += [ge_low.eq(at_least(dstart_m1, low_m1, signed=True)),
                     ge_start.eq(at_least(dstart_m1, start2, signed=True)),
                     gt_top.eq(~at_least(top, dend_line)),
                     # dend_line > new_top, new_top's two values compared apart
                     gt_new.eq(Mux(start2[lines], dend_line.any(), ~at_least(start2[:lines], dend_line))),
                     gt_raised.eq(~at_least(dend2, dend_line)), low_was_lowered.eq(lowered)]
        raise_ = dv2 & live & Mux(low_was_lowered, ge_start, ge_low) & Mux(prev_new, gt_new, Mux(raised, gt_raised, gt_top))
        m.d.sync += raised.eq(raise_ & ~(v2 & new_pass))
        with m.If(raise_):
            m.d.sync += top.eq(dend2)
        with m.If(idle2):
            m.d.sync += [live.eq(0), target.eq(0)]
        with m.If(v2):
            m.d.sync += live.eq(1)
            with m.If(new_pass):
                m.d.sync += [front.eq(a2), low_m1.eq(start2), top.eq(new_top),
                             target.eq(0)]
            with m.Else():
                with m.If(Mux(prev_new, higher_prev, higher & higher_prev)):
                    m.d.sync += front.eq(a2)
                with m.If(Mux(prev_new, lower_prev, lower & lower_prev)):
                    m.d.sync += low_m1.eq(start2)
                with m.If(aims2):
                    m.d.sync += target.eq(fast_add(m, sum2, carry2, spread=True)[6:A])
        return {"top": top, "target": target, "low_m1": low_m1, "live": live,
                "busy": v0 | v1 | v2 | dv0 | dv1 | dv2, "update": v2 | idle2 | dv2}

    def _issue(self, m, states):
        """Prefetches from flags registered one cycle earlier: a stream wants its next line (top + 1)
        while below its target; a line in another stream's pass is skipped instead."""
        lines, n = self.addr_bits - 6, len(states)
        fresh = Signal()  # the flags below describe the current state
        busy = Cat(st["busy"] for st in states).any()
        pending, blocked = Signal(n), Signal(n)
        nexts = [Signal(lines, name=f"next_{s.name.lower()}", reset_less=True) for s in Stream]
        for k, st in enumerate(states):
            top = st["top"]
            # Each other pass holding ``top`` is registered alone, and ORed behind the register.
            inside = Signal(n - 1, name=f"inside_{list(Stream)[k].name.lower()}")
            m.d.sync += inside.eq(Cat(other["live"] & at_least(Cat(top, Const(0)), other["low_m1"], signed=True)
                                      & ~at_least(top, other["top"]) for j, other in enumerate(states) if j != k))
            m.d.sync += [pending[k].eq(st["live"] & ~at_least(top, st["target"]) & (self.degree != 0)),
                         nexts[k].eq(fast_add(m, top, 0, 1)[:lines])]
            m.d.comb += blocked[k].eq(inside.any())
        go = fresh & ~busy
        want, skip = pending & ~blocked, pending & blocked
        # Rotate priority after every prefetch so that no stream waits behind a long one.
        pick, turn = Signal(range(n)), Signal(range(n))
        with m.Switch(turn):
            for k in range(n):
                with m.Case(k):
                    for i in reversed([(k + j) % n for j in range(n)]):
                        with m.If(want[i]):
                            m.d.comb += pick.eq(i)
        m.d.comb += [self.pf.valid.eq(go & want.any()),
                     self.pf.payload.addr.eq(Cat(Const(0, 6), Array(nexts)[pick]))]
        fire = self.pf.valid & self.pf.ready
        with m.If(fire):
            m.d.sync += turn.eq(Mux(turn == n - 1, 0, turn + 1))
        for k, st in enumerate(states):
            with m.If(go & skip[k] | fire & (pick == k)):
                m.d.sync += st["top"].eq(nexts[k])
        changed = fire | go & skip.any() | Cat(st["update"] for st in states).any()
        m.d.sync += fresh.eq(~changed)
