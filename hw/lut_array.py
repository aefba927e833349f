"""The LUT array (paper, section 6.1, item 6): L big LUTs of four 64 x 16-bit sub-LUTs each.

How lanes use the sub-LUTs depends on Q:

* Q <= 6: every sub-LUT holds a copy of entries 0..63; lane i reads sub-LUT i mod 4 of big LUT
  i div 4 (Lq = 4L).
* Q = 7: the pair (0, 1) and the pair (2, 3) each hold entries 0..127, entry e in sub-LUT
  e div 64 of the pair; lane i reads pair i mod 2 of big LUT i div 2 (Lq = 2L).
* Q = 8: sub-LUT s holds entries 64s..64s+63; lane i reads big LUT i (Lq = L).
* Q = 16: no lookup, the code is the BF16 value (Lq = 4L, see ``params.LANES_PER_LUT``).

A logical LUT write stores the entry in every replica the configured Q reads, so Q is written
first; entries a mode cannot hold (e >= 64 for Q <= 6, e >= 128 for Q = 7) are dropped. Reads are
asynchronous so that a code is dequantized in the cycle it is unpacked.
"""

from amaranth.hdl import Module, Mux
from amaranth.lib import data, memory, wiring
from amaranth.lib.wiring import In, Out

from .layouts import BF16, ConfigSignature

SUB_LUTS = 4
SUB_LUT_ENTRIES = 64


class LUTArray(wiring.Component):
    """``codes`` in (one per lane, up to Lq of them meaningful), BF16 ``values`` out, same cycle."""

    def __init__(self, L, lanes):
        self.L = L
        self.lanes = lanes
        super().__init__({
            "cfg": In(ConfigSignature()),
            "codes": In(data.ArrayLayout(BF16, lanes)),
            "values": Out(data.ArrayLayout(BF16, lanes)),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        q8, q7, q16 = cfg.q == 8, cfg.q == 7, cfg.q == 16
        entry, section = cfg.lut_addr[:6], cfg.lut_addr[6:]

        # Which sub-LUTs a logical write reaches, per the table in the module docstring.
        writes = [
            q8 & (section == s)
            | q7 & (section == s % 2)
            | ~q8 & ~q7 & (section == 0)
            for s in range(SUB_LUTS)
        ]

        ports = []
        readback = []  # big LUT 0 holds every entry any mode keeps
        for b in range(self.L):
            for s in range(SUB_LUTS):
                mem = memory.Memory(shape=BF16, depth=SUB_LUT_ENTRIES, init=[])
                m.submodules[f"lut{b}_sub{s}"] = mem
                wp = mem.write_port()
                m.d.comb += [wp.addr.eq(entry), wp.data.eq(cfg.lut_data), wp.en.eq(cfg.lut_we & writes[s])]
                ports.append(mem.read_port(domain="comb"))
                if b == 0:
                    rp = mem.read_port(domain="comb")
                    m.d.comb += rp.addr.eq(entry)
                    readback.append(rp.data)
        with m.Switch(section):
            for s in range(SUB_LUTS):
                with m.Case(s):
                    with m.If(writes[s]):
                        m.d.comb += cfg.lut_rdata.eq(readback[s])

        def port(b, s):
            return ports[b * SUB_LUTS + s]

        # Each sub-LUT's address comes from the lane that reads it in the current mode.
        for b in range(self.L):
            for s in range(SUB_LUTS):
                lanes = {8: b, 7: 2 * b + s // 2, 6: SUB_LUTS * b + s}
                for mode, cond in ((8, q8), (7, q7), (6, ~q8 & ~q7)):
                    if lanes[mode] < self.lanes:
                        with m.If(cond):
                            m.d.comb += port(b, s).addr.eq(self.codes[lanes[mode]][:6])

        for i in range(self.lanes):
            code = self.codes[i]
            with m.If(q16):
                m.d.comb += self.values[i].eq(code)
            with m.Elif(q8):
                if i < self.L:
                    with m.Switch(code[6:8]):
                        for s in range(SUB_LUTS):
                            with m.Case(s):
                                m.d.comb += self.values[i].eq(port(i, s).data)
            with m.Elif(q7):
                if i < 2 * self.L:
                    b, pair = divmod(i, 2)
                    m.d.comb += self.values[i].eq(
                        Mux(code[6], port(b, 2 * pair + 1).data, port(b, 2 * pair).data))
            with m.Else():
                if i < SUB_LUTS * self.L:
                    m.d.comb += self.values[i].eq(port(i // SUB_LUTS, i % SUB_LUTS).data)
        return m
