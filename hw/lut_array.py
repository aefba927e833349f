"""The LUT array (paper, section 6.1, item 6): L big LUTs of four 64 x 16-bit sub-LUTs each.

How lanes use the sub-LUTs depends on Q:

* Q <= 6: every sub-LUT holds a copy of entries 0..63; lane i reads sub-LUT i mod 4 of big LUT
  i div 4 (Lq = 4L).
* Q = 7: the pair (0, 1) and the pair (2, 3) each hold entries 0..127, entry e in sub-LUT
  e div 64 of the pair; lane i reads pair i mod 2 of big LUT i div 2 (Lq = 2L).
* Q = 8: sub-LUT s holds entries 64s..64s+63; lane i reads big LUT i (Lq = L).
* Q = 16: no lookup, the code is the BF16 value (Lq = 4L, see ``params.LANES_PER_LUT``).

A logical LUT write stores the entry in every replica the configured Q reads, so Q is written
first; entries a mode cannot hold (e >= 64 for Q <= 6, e >= 128 for Q = 7) are dropped. Writes are
registered on their way to the replicas, off the configuration port's path, and land a cycle later:
the control registers cannot read an entry back before (``LUT_DATA`` writes advance the index). The
readback (``lut_rdata``) is a synchronous read too: the entry at ``lut_addr`` a cycle before.
Lookups take ``LOOKUP_LATENCY`` cycles: each sub-LUT's address, chosen from its lane's code, into a
register, then the synchronous read, as an SRAM macro reads. The code's selection in the unpacker,
the address choice and the 64:1 read multiplexer did not fit one 400 ps cycle together.

Only what a lane takes switches: a sub-LUT's address register loads only when the code of the lane
that reads it is in that sub-LUT (Q = 8: the code's bits 6..7 name it; Q = 7: bit 6 names the pair's
half), and keeps its address otherwise, so that the read multiplexers of the sub-LUTs not read stay
still; the codes, held beside the lookup as the value of Q = 16, load only with Q = 16.
"""

import operator
from functools import reduce

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data, memory, wiring
from amaranth.lib.wiring import In, Out

from .arith import apart
from .layouts import BF16, ConfigSignature
from .stages import copies, enable, hold, replicas

SUB_LUTS = 4
SUB_LUT_ENTRIES = 64
#: Cycles from a change of ``cfg.q`` to the lookups' mode.
MODE_LATENCY = 2
#: Cycles (with the enable) from ``codes`` to their ``values``: the address register, the read.
LOOKUP_LATENCY = 2


class LUTArray(wiring.Component):
    """``codes`` in (one per lane, up to Lq of them meaningful), BF16 ``values`` out
    ``LOOKUP_LATENCY`` cycles later; the lookup's stages move on in the cycles after ``en_next`` is
    high (the stall decided a cycle ahead: the enables are flip-flops) and otherwise hold. The mode
    is ``cfg.q`` registered twice: it takes effect ``MODE_LATENCY`` cycles after ``cfg.q`` changes
    (CONFIG is written only while no tile is in flight, and a tile's first codes come many cycles
    after its TEPL)."""

    def __init__(self, L, lanes):
        self.L = L
        self.lanes = lanes
        #: Each sub-LUT's address register, [big LUT][sub-LUT] (the first stage of a lookup).
        self.addresses = [[Signal(6, name=f"lut{b}_sub{s}_addr", reset_less=True) for s in range(SUB_LUTS)]
                          for b in range(L)]
        super().__init__({
            "cfg": In(ConfigSignature()),
            "en_next": In(1),
            "codes": In(data.ArrayLayout(BF16, lanes)),
            "values": Out(data.ArrayLayout(BF16, lanes)),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        entry, section = cfg.lut_addr[:6], cfg.lut_addr[6:]

        # Which sub-LUTs a logical write reaches, per the table in the module docstring.
        writes = [
            (cfg.q == 8) & (section == s)
            | (cfg.q == 7) & (section == s % 2)
            | (cfg.q != 8) & (cfg.q != 7) & (section == 0)
            for s in range(SUB_LUTS)
        ]
        write_en = Signal(SUB_LUTS)
        write_entry = Signal.like(entry)
        write_data = Signal.like(cfg.lut_data)
        m.d.sync += [write_en.eq(Mux(cfg.lut_we, Cat(writes), 0)), write_entry.eq(entry), write_data.eq(cfg.lut_data)]

        ports, addresses = [], []  # per sub-LUT: its read port, and the address register in front
        readback = []  # big LUT 0 holds every entry any mode keeps
        for b in range(self.L):
            if b % SUB_LUTS == 0:  # a copy of the enable per 16 macros
                read_en = enable(m, f"lut{b}_en", self.en_next)
            for s in range(SUB_LUTS):
                mem = memory.Memory(shape=BF16, depth=SUB_LUT_ENTRIES, init=[])
                m.submodules[f"lut{b}_sub{s}"] = mem
                wp = mem.write_port()
                m.d.comb += [wp.addr.eq(write_entry), wp.data.eq(write_data), wp.en.eq(write_en[s])]
                rp = mem.read_port()
                address = self.addresses[b][s]
                m.d.comb += [rp.en.eq(read_en), rp.addr.eq(address)]
                ports.append(rp)
                addresses.append((address, read_en))
                if b == 0:
                    rp = mem.read_port()
                    m.d.comb += rp.addr.eq(entry)
                    readback.append(rp.data)
        # The readback's sub-LUT, registered beside its read: a sub-LUT that holds the entry in the
        # configured mode (the others read as 0).
        shown = Signal(SUB_LUTS)
        m.d.sync += shown.eq(Cat(writes[s] & (section == s) for s in range(SUB_LUTS)))
        m.d.comb += cfg.lut_rdata.eq(reduce(operator.or_, (Mux(shown[s], readback[s], 0) for s in range(SUB_LUTS))))

        def port(b, s):
            return ports[b * SUB_LUTS + s]

        def address(b, s):
            return addresses[b * SUB_LUTS + s]

        # The mode decoded into flip-flops, a copy per big LUT (its sub-LUTs' addresses and the lanes
        # that read it): decoded from one Q register, each flag drove every lane's choice and every
        # address mux (at W = 64, L = 32, 170 and 220 ps on the decoding gates alone). Each copy
        # decodes Q itself, from a copy of Q per eight big LUTs: ``cfg.q`` also drives the writes'
        # decoding and the readback to the configuration port, which the copies' load slowed
        # (W = 32, L = 32: 451 ps).
        def decode(q):
            return Cat(q == 8, q == 7, q == 16, (q != 8) & (q != 7) & (q != 16))

        group = 8
        next_modes = [mode for g, q in enumerate(copies(m, "mode_q", self.cfg.q, 1, -(-self.L // group)))
                      for mode in replicas(m, f"mode_next{g}_", decode, [q], min(group, self.L - g * group))]
        modes = [copies(m, f"mode{b}_", next_mode, 1, 1)[0] for b, next_mode in enumerate(next_modes)]

        def mode_of(b):  # (Q = 8, Q = 7, Q = 16, Q <= 6) of big LUT b
            return tuple(modes[b][k] for k in range(4))

        # Each sub-LUT's address comes from the lane that reads it in the current mode, into the
        # sub-LUT's address register (the first stage of the lookup), and only when that lane's code
        # is in the sub-LUT (Q = 8: its bits 6 and 7, Q = 7: its bit 6): the others keep their
        # address, so that their read multiplexers do not switch for a value no lane takes.
        for b in range(self.L):
            q8, q7, _, q6 = mode_of(b)
            for s in range(SUB_LUTS):
                lanes = {8: b, 7: 2 * b + s // 2, 6: SUB_LUTS * b + s}
                chosen, en = address(b, s)
                for mode, cond in ((8, q8), (7, q7), (6, q6)):
                    if lanes[mode] < self.lanes:
                        code = self.codes[lanes[mode]]
                        reads = {8: code[6:8] == s, 7: code[6] == s % 2, 6: 1}[mode]
                        with m.If(en & cond & reads):
                            m.d.sync += chosen.eq(code[:6])

        # The codes LOOKUP_LATENCY cycles later, beside their lookups (``hold``s: the enable is the
        # dequantization stage's stall, with many loads), and with them each lane's choice among its
        # sources decoded one-hot, so that the macros' late outputs pass one AND-OR to ``values``.
        def later(name, value, when=1):
            for k in range(LOOKUP_LATENCY):
                value = hold(m, f"{name}{'_read' * k}", value, self.en_next, when)
            return value

        # The codes themselves are a value only with Q = 16: in the other modes they stay held.
        codes = self.codes.shape()(later("codes", self.codes.as_value(), mode_of(0)[2]))
        choices, read = [], []  # per lane: a condition per sub-LUT it may read, and those sub-LUTs
        for i in range(self.lanes):
            code, chosen = self.codes[i], {}
            q8, q7, q16, q6 = mode_of(i // SUB_LUTS)
            candidates = []
            if i < self.L:  # Q = 8: big LUT i, the sub-LUT of the code's bits 6 and 7
                candidates += [(i, s, q8 & (code[6:8] == s)) for s in range(SUB_LUTS)]
            if i < 2 * self.L:  # Q = 7: pair i mod 2 of big LUT i div 2, the sub-LUT of bit 6
                candidates += [(i // 2, 2 * (i % 2) + h, q7 & (code[6] == h)) for h in range(2)]
            if i < SUB_LUTS * self.L:  # Q <= 6
                candidates.append((i // SUB_LUTS, i % SUB_LUTS, q6))
            for b, s, cond in candidates:
                chosen[b, s] = chosen[b, s] | cond if (b, s) in chosen else cond
            choices.append(Cat(q16, *chosen.values()))  # Q = 16: the code itself
            read.append([port(b, s).data for b, s in chosen])
        held = later("choices", Cat(*choices))
        at = 0
        for i, ports_read in enumerate(read):
            pick = held[at:at + 1 + len(ports_read)]
            at += len(pick)
            terms = [Mux(pick[k], v, 0) for k, v in enumerate([codes[i], *ports_read])]
            if len(terms) > 3:
                # Up to three sources per module (one AND-OR gate), those ORed: two gates after the
                # macros for up to nine sources, where logic optimization of the whole sum made three.
                terms = [apart(m, reduce(operator.or_, terms[k:k + 3]), f"lane{i}_sources{k // 3}")
                         for k in range(0, len(terms), 3)]
            m.d.comb += self.values[i].eq(reduce(operator.or_, terms))
        return m
