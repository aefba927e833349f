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
the control registers cannot read an entry back before (``LUT_DATA`` writes advance the index).
Lookups are synchronous, as an SRAM macro reads: ``values`` come a cycle after their ``codes``.
"""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data, memory, wiring
from amaranth.lib.wiring import In, Out

from .layouts import BF16, ConfigSignature
from .stages import hold

SUB_LUTS = 4
SUB_LUT_ENTRIES = 64


class LUTArray(wiring.Component):
    """``codes`` in (one per lane, up to Lq of them meaningful, looked up in mode ``q``), BF16
    ``values`` out a cycle later; with ``en`` low the lookup holds its values."""

    def __init__(self, L, lanes):
        self.L = L
        self.lanes = lanes
        super().__init__({
            "cfg": In(ConfigSignature()),
            "q": In(5),
            "en": In(1),
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

        ports = []
        readback = []  # big LUT 0 holds every entry any mode keeps
        for b in range(self.L):
            for s in range(SUB_LUTS):
                mem = memory.Memory(shape=BF16, depth=SUB_LUT_ENTRIES, init=[])
                m.submodules[f"lut{b}_sub{s}"] = mem
                wp = mem.write_port()
                m.d.comb += [wp.addr.eq(write_entry), wp.data.eq(write_data), wp.en.eq(write_en[s])]
                rp = mem.read_port()
                m.d.comb += rp.en.eq(self.en)
                ports.append(rp)
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

        q8, q7, q16 = self.q == 8, self.q == 7, self.q == 16
        # Each sub-LUT's address comes from the lane that reads it in the current mode.
        for b in range(self.L):
            for s in range(SUB_LUTS):
                lanes = {8: b, 7: 2 * b + s // 2, 6: SUB_LUTS * b + s}
                for mode, cond in ((8, q8), (7, q7), (6, ~q8 & ~q7)):
                    if lanes[mode] < self.lanes:
                        with m.If(cond):
                            m.d.comb += port(b, s).addr.eq(self.codes[lanes[mode]][:6])

        # The codes a cycle later, beside their lookups: Q = 16 values and the sub-LUT choices (a
        # ``hold``: ``en`` is the dequantization stage's stall, late and with many loads).
        codes = self.codes.shape()(hold(m, "codes", self.codes.as_value(), self.en))
        for i in range(self.lanes):
            code = codes[i]
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
