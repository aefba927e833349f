"""The dequantization stage (paper, section 6.1, item 3): SQQ codes through the LUT array into SD.

A vOp whose window holds Wnd codes occupies the stage max(1, ceil(Wnd / Lq)) cycles; cycle k
dequantizes codes k*Lq .. k*Lq + Lq - 1 into the same SD entries. The work is pipelined:

    vops ─► slice ─► plan ─► head ──► words at ptr ─► shift ─► codes, LUT address ─► LUT read ─► SD
      └──────────────► queue of masks and expansion indices ─────────────────────────────────────┘

* slice: a register slice of the window and ``last``, so ``vops.ready`` is a register;
* plan: the next vOp with what its cycles need, computed ahead for the configured Q: how many
  cycles after its first, the bits its first and its last cycle take;
* head: the vOp being issued. Its read pointer ``ptr`` into the code unpacker's buffer, the pointer
  ``end`` past this cycle's codes (at a tile's end rounded up to a byte: the padding) and
  ``margin`` = ``wp - end`` are registers. A cycle issues (``go``) when ``margin`` is not negative
  and SD is free or moving on; the next ``end`` and ``margin`` are added from registers for each
  outcome (same vOp, the plan's or none) and chosen by ``go``;
* the unpacker's two read stages, then the LUT's two (address, read), carry each issued cycle to SD,
  where the vOp's last cycle also writes the mask and expansion indices that waited in the queue.

Back-pressure from ``sd.ready`` holds every stage (nothing moves on unless SD is free or moving on),
so no data is lost; the per-cycle activity outputs describe the issue. That stall reaches the issue
and the wide registers (the read stages, the LUT's, SD) from flip-flop copies registered from
its next value, which needs ``sd_ready_next``: the next cycle's ``sd.ready`` (the expander's ready
is a register, and this is its input), not through a buffer tree behind ``sd.ready``.
"""

import operator
from functools import reduce

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from deca.golden.format import Q_BITS

from .arith import fast_add, fast_sum, times
from .layouts import ConfigSignature, physical_lanes, sd_layout, value_beat_layout, vop_layout
from .lut_array import LOOKUP_LATENCY, LUTArray
from .params import LANES_PER_LUT, dequant_lanes
from .stages import HOLD_SLICE, RegisterSlice, copies, enable, replicas
from .unpacker import READ_LATENCY, CodeUnpacker

#: Cycles the pipelining adds to a vOp's way through the stage: alone in it, with its codes buffered,
#: a vOp is in SD max(1, ceil(Wnd/Lq)) + DEQUANT_LATENCY cycles after its handshake on ``vops`` (the
#: single-cycle stage had SD written in its last cycle, that handshake's). One cycle in each of the
#: slice, the plan, the head, the unpacker's read stages and the LUT's lookup stages.
DEQUANT_LATENCY = 3 + READ_LATENCY + LOOKUP_LATENCY
#: Entries of the queue of vOps' expansion indices (``QUEUED_FIELDS``): as many as the stage holds
#: (two in the slice, the plan, the head and one per read and lookup stage), a power of two.
QUEUED = 8
assert 4 + READ_LATENCY + LOOKUP_LATENCY <= QUEUED
QUEUED_FIELDS = ("mask", "prefix", "index", "last")


class DequantStage(wiring.Component):
    def __init__(self, W, L):
        self.W, self.L = W, L
        super().__init__({
            "cfg": In(ConfigSignature()),
            "vops": In(stream.Signature(vop_layout(W))),
            "values": In(stream.Signature(value_beat_layout(W, L))),
            "sd": Out(stream.Signature(sd_layout(W))),
            "sd_ready_next": In(1),  # ``sd.ready`` of the next cycle
            # Per-cycle activity for the performance counters.
            "bubble": Out(1),  # issuing a vOp's cycle that is not its last
            "waiting": Out(1),  # free to issue, but no vOp or not all of its codes are there
        })

    def elaborate(self, platform):
        m = Module()
        W, L = self.W, self.L
        lanes = physical_lanes(W, L)
        m.submodules.unpacker = unpacker = CodeUnpacker(W, L)
        m.submodules.luts = luts = LUTArray(L, lanes)
        m.submodules.slice = vops = RegisterSlice(data.StructLayout({"wnd": range(W + 1), "last": 1}))
        wiring.connect(m, wiring.flipped(self.values), unpacker.values)
        wiring.connect(m, wiring.flipped(self.cfg), luts.cfg)
        m.d.comb += [vops.i.valid.eq(self.vops.valid), vops.i.payload.wnd.eq(self.vops.payload.wnd),
                     vops.i.payload.last.eq(self.vops.payload.last), self.vops.ready.eq(vops.i.ready)]

        # Q registered: the mode is steady while tiles flow, and its decoding is off the input path.
        q = Signal(5)
        m.d.sync += q.eq(self.cfg.q)
        is_q = copies(m, "is_q", Cat(self.cfg.q == qq for qq in Q_BITS), 1, unpacker.is_q_copies, init=0)
        m.d.comb += [unpacker.is_q.eq(Cat(is_q)), luts.codes.eq(unpacker.codes)]

        # Lq of the configured Q, capped at W (a power of two); one condition per distinct lane count.
        q8, q7 = q == 8, q == 7
        modes = {}
        for cond, per_lut in ((q8, LANES_PER_LUT[8]), (q7, LANES_PER_LUT[7]), (~q8 & ~q7, LANES_PER_LUT[6])):
            lq = min(per_lut * L, W)
            modes[lq] = modes[lq] | cond if lq in modes else cond
        # What a vOp's cycles take, for each Q with its own constants (Lq a power of two, Q a short
        # shift-add), then the configured one: ``wnd`` is ``high`` whole Lq's and ``low`` more codes.
        full = Signal(range(lanes * 16 + 1))  # the bits of Lq codes
        left = Signal(range(W))  # cycles after the first
        single = Signal()  # no cycle after the first
        last_bits = Signal(range(lanes * 16 + 1))  # bits the last cycle takes, without padding
        vop = vops.o.payload
        with m.Switch(q):
            for qq in Q_BITS:
                with m.Case(qq):
                    lq = min(dequant_lanes(qq, L), W)
                    low, high = vop.wnd[:lq.bit_length() - 1], vop.wnd[lq.bit_length() - 1:]
                    m.d.sync += full.eq(lq * qq)
                    m.d.comb += [
                        left.eq(Mux((low != 0) | (high == 0), high, high - 1)),
                        single.eq(Mux(low != 0, high == 0, (high == 0) | (high == 1))),
                        last_bits.eq(Mux(low != 0, times(low, qq), Mux(high != 0, lq * qq, 0))),
                    ]

        plan_layout = data.StructLayout({
            "last": 1,  # the tile's last vOp
            "left": range(W),  # cycles after the first
            "last_bits": range(lanes * 16 + 1),  # bits the last cycle takes, without padding
            "first_bits": range(lanes * 16 + 1),  # bits the first cycle takes, without padding
            "single": 1,  # left is 0
        })
        head_layout = data.StructLayout({
            "last": 1,
            "left": range(W),  # cycles after this one
            "last_bits": range(lanes * 16 + 1),
            "k": range(W),  # cycles of the vOp before this one
        })
        plan, plan_valid = Signal(plan_layout), Signal()
        head, head_valid = Signal(head_layout), Signal()
        final, penult = Signal(), Signal()  # head.left is 0, 1
        # What the head's next cycle takes (bits, and whether it pads to a byte), registered with
        # ``penult`` rather than picked by it.
        next_bits, next_pad = Signal.like(plan.last_bits), Signal()

        ptr, end = Signal.like(unpacker.ptr), Signal.like(unpacker.ptr)
        margin = Signal(len(end) + 1)  # wp - end, two's complement: the head's bits are all there when >= 0
        go, load = Signal(), Signal()
        # Each issued cycle as it leaves the LUT's last stage (below).
        op_layout = data.StructLayout({"valid": 1, "final": 1, "k": range(W)})
        op = Signal(op_layout)
        # The stall, ``advance`` = ~sd.valid | sd.ready, is a flip-flop registered from its next
        # value, with copies of its own for the issue (``go``, which reaches the vOp slice's
        # enables), the unpacker's ``take`` and the wide registers (the read stages, the LUT's,
        # SD). SD's valid bit is written when it moves on (below). The next value comes late (the
        # expander's ready) and loads every copy: four gates compute it, for this stage, the
        # unpacker, the LUT array and SD.
        advance = Signal()
        own_next, unpacker_next, luts_next, sd_next = replicas(
            m, "advance_next", lambda now, op_valid, op_final, sd_valid, sd_ready_next:
            ~Mux(now, op_valid & op_final, sd_valid) | sd_ready_next,
            [advance, op.valid, op.final, self.sd.valid, self.sd_ready_next], 4)
        issue_advance = enable(m, "issue_advance", own_next)
        # The plan moves on when empty or when the head takes it (~plan_valid | load): a copy of
        # that logic for the vOp slice and one for the plan's registers, each driving its own loads.
        slice_ready, plan_ready = replicas(
            m, "plan_ready", lambda plan_valid, head_valid, margin_sign, adv, final:
            ~plan_valid | ~head_valid | ~margin_sign & adv & final,
            [plan_valid, head_valid, margin[-1], issue_advance, final], 2)
        m.d.comb += [
            advance.eq(enable(m, "advance", own_next)),
            unpacker.ptr.eq(ptr), unpacker.next_ptr.eq(end),
            unpacker.take.eq(head_valid & ~margin[-1] & enable(m, "take_advance", own_next)),
            unpacker.en_next.eq(unpacker_next), luts.en_next.eq(luts_next),
            go.eq(head_valid & ~margin[-1] & issue_advance),
            load.eq(~head_valid | go & final),  # the head takes the plan (or empties)
            vops.o.ready.eq(slice_ready),
            self.bubble.eq(go & ~final),
            self.waiting.eq(~go & advance),
        ]

        def after(bits, pad):
            """``end`` once it moves on by ``bits`` and, at a tile's end (``pad``), up to a byte; and
            ``margin`` then, with this cycle's write. ``wp`` is byte aligned, so rounding ``end`` up
            rounds ``margin`` down. Carry-save adds from registers."""
            moved = fast_sum(m, [end, bits, Mux(pad, 7, 0)])[:len(end)]
            wide = Signal(len(margin))
            m.d.comb += wide.eq(bits)
            after_margin = fast_sum(m, [margin, unpacker.added, ~wide], carry_in=1)[:len(margin)]
            return (Cat(moved[:3] & ~Mux(pad, 7, 0), moved[3:]),
                    Cat(after_margin[:3] & ~Mux(pad, 7, 0), after_margin[3:]))

        # Built outside the ``If``s below: comb statements inside them would take their conditions in.
        first_after = Cat(*after(plan.first_bits, plan.single & plan.last))
        next_after = Cat(*after(next_bits, next_pad))
        margin_added = fast_add(m, margin, unpacker.added)

        with m.If(plan_ready):
            m.d.sync += [
                plan_valid.eq(vops.o.valid),
                plan.last.eq(vop.last), plan.left.eq(left), plan.last_bits.eq(last_bits),
                plan.first_bits.eq(Mux(single, last_bits, full)), plan.single.eq(single),
            ]
        with m.If(go):
            m.d.sync += ptr.eq(end)
        with m.If(load):
            m.d.sync += head_valid.eq(plan_valid)
        with m.If(load & plan_valid):
            m.d.sync += [
                head.last.eq(plan.last), head.left.eq(plan.left), head.last_bits.eq(plan.last_bits), head.k.eq(0),
                final.eq(plan.single), penult.eq(plan.left == 1),
                next_bits.eq(Mux(plan.left == 1, plan.last_bits, full)), next_pad.eq((plan.left == 1) & plan.last),
                Cat(end, margin).eq(first_after),
            ]
        with m.Elif(go & ~final):
            m.d.sync += [
                head.left.eq(head.left - 1), head.k.eq(head.k + 1), final.eq(penult), penult.eq(head.left == 2),
                next_bits.eq(Mux(head.left == 2, head.last_bits, full)), next_pad.eq((head.left == 2) & head.last),
                Cat(end, margin).eq(next_after),
            ]
        with m.Else():
            m.d.sync += margin.eq(margin_added)

        # The rest of a vOp (mask and expansion indices) waits in a queue from its handshake to its
        # SD write, off the issue loop's registers. The stage holds at most QUEUED vOps (above), and
        # while it does the slice is full: no vOp comes in before one leaves.
        entry_layout = data.StructLayout({f: vop_layout(W).members[f] for f in QUEUED_FIELDS})
        queue = [Signal(entry_layout, name=f"queued{i}", reset_less=True) for i in range(QUEUED)]
        put, get = Signal(range(QUEUED)), Signal(range(QUEUED))
        with m.If(self.vops.valid & self.vops.ready):
            m.d.sync += put.eq(put + 1)
            with m.Switch(put):
                for i, entry in enumerate(queue):
                    with m.Case(i):
                        m.d.sync += [entry[f].eq(self.vops.payload[f]) for f in QUEUED_FIELDS]

        # Each issued cycle on its way to SD, beside its codes: through the read stages and the LUT's.
        # Into the last of them (the LUT read's) its SD write is decoded: per lane count of a mode
        # (``modes``), which group of SD entries its lanes fill, one-hot, so that the LUT's late
        # values pass one AND-OR into SD.
        issued = Signal(op_layout)
        m.d.comb += [issued.valid.eq(go), issued.final.eq(final), issued.k.eq(head.k)]
        op_in = issued
        for _ in range(READ_LATENCY + LOOKUP_LATENCY - 1):
            later = Signal(op_layout)
            with m.If(advance):
                m.d.sync += later.eq(op_in)
            op_in = later
        fills = {count: Signal(W // count, name=f"fill_by{count}") for count in modes}
        with m.If(advance):
            m.d.sync += op.eq(op_in)
            for count, cond in modes.items():
                m.d.sync += fills[count].eq(Cat(op_in.valid & cond & (op_in.k == g) for g in range(W // count)))

        # SD's data has no reset (``sd.valid`` has): a reset gate would sit on the LUT read's path.
        sd = Signal.like(self.sd.payload, reset_less=True)
        m.d.comb += self.sd.payload.eq(sd)
        element_bits = len(sd.data[0])
        per_copy = max(1, HOLD_SLICE // element_bits)
        sd_en = [enable(m, f"sd_en{c}", sd_next) for c in range(-(-W // per_copy))]
        for e in range(W):
            takes = [(sd_en[e // per_copy] & fills[count][e // count], luts.values[e % count]) for count in modes]
            kept = ~reduce(operator.or_, (take for take, _ in takes))
            m.d.sync += sd.data[e].eq(reduce(operator.or_, [Mux(take, v, 0) for take, v in takes] +
                                             [Mux(kept, sd.data[e], 0)]))
        fields_en = enable(m, "sd_fields_en", sd_next)
        with m.If(fields_en & op.valid & op.final):
            m.d.sync += get.eq(get + 1)
            with m.Switch(get):
                for i, entry in enumerate(queue):
                    with m.Case(i):
                        m.d.sync += [sd[f].eq(entry[f]) for f in QUEUED_FIELDS]
        with m.If(advance):
            m.d.sync += self.sd.valid.eq(op.valid & op.final)
        return m
