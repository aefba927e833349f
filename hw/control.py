"""The control registers (paper, section 5.1): configuration, LUT access, status, error record and
performance counters, decoded from the table in ``registers``."""

from types import SimpleNamespace

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from .arith import fast_add
from .layouts import ConfigSignature, ErrorReason
from .registers import ADDR_BITS, COUNTERS, DATA_BITS


class RegisterBusSignature(wiring.Signature):
    """The ``cfg_`` port, as the core drives it (see ``registers``)."""

    def __init__(self):
        super().__init__({
            "addr": Out(ADDR_BITS),
            "wdata": Out(DATA_BITS),
            "we": Out(1),
            "rdata": In(DATA_BITS),
        })


COUNTER_INDEX = {name: i for i, (name, _) in enumerate(COUNTERS)}


class Control(wiring.Component):
    def __init__(self, regs):
        self.regs = regs
        loaders = next(f.width for r in regs if r.name == "STATUS" for f in r.fields if f.name == "LOADERS")
        super().__init__({
            "bus": In(RegisterBusSignature()),
            "cfg": Out(ConfigSignature()),
            "degree": Out(4),
            "events": In(len(COUNTERS)),  # one bit per counter, in COUNTERS order: count this cycle
            "status": In(1 + loaders),  # STATUS fields: BUSY, then one bit per loader
            "error": In(data.StructLayout({"en": 1, "reason": ErrorReason, "id": 16})),
        })

    def elaborate(self, platform):
        m = Module()
        # The bus enters registers first, so that no input reaches the decoders, the registers they
        # enable (the LUTs' write ports among them) or ``rdata``'s multiplexer in its cycle.
        bus = SimpleNamespace(addr=Signal(ADDR_BITS, name="bus_addr"), wdata=Signal(DATA_BITS, name="bus_wdata"),
                              we=Signal(name="bus_we"))
        m.d.sync += [bus.addr.eq(self.bus.addr), bus.wdata.eq(self.bus.wdata), bus.we.eq(self.bus.we)]
        fields = {(r.name, f.name): f for r in self.regs for f in r.fields}

        def reg(name, field):
            f = fields[name, field]
            return Signal(f.width, init=f.reset, name=f"{name.lower()}_{field.lower()}")

        q, sparse = reg("CONFIG", "Q"), reg("CONFIG", "SPARSE")
        scale_format, scale_group = reg("CONFIG", "SCALE_FORMAT"), reg("CONFIG", "SCALE_GROUP")
        degree, lut_index = reg("PREFETCH", "DEGREE"), reg("LUT_INDEX", "INDEX")
        error = Signal(self.error.shape())
        # A counter counts its event of the cycle before (``counted``), so that late events (the
        # pipeline's bubble) do not reach its adder; reads show the count with that event.
        # Each counter's next value (count + 1) is a register of its own, so that neither a read
        # nor a count goes through an increment.
        counters = [Signal(32, name=f"count_{name.lower()}") for name, _ in COUNTERS]
        following = [Signal(32, name=f"count_{name.lower()}_plus1", init=1) for name, _ in COUNTERS]
        counted = Signal(len(COUNTERS))
        shown = [Mux(counted[i], following[i], counter) for i, counter in enumerate(counters)]
        storage = {
            ("CONFIG", "Q"): q, ("CONFIG", "SPARSE"): sparse, ("CONFIG", "SCALE_FORMAT"): scale_format,
            ("CONFIG", "SCALE_GROUP"): scale_group, ("PREFETCH", "DEGREE"): degree, ("LUT_INDEX", "INDEX"): lut_index,
            ("LUT_DATA", "VALUE"): self.cfg.lut_rdata, ("STATUS", "BUSY"): self.status[0],
            ("STATUS", "LOADERS"): self.status[1:], ("ERROR", "VALID"): error.en, ("ERROR", "REASON"): error.reason,
            ("ERROR", "ID"): error.id,
        }
        storage.update({(name, "COUNT"): shown[i] for i, (name, _) in enumerate(COUNTERS)})

        m.d.comb += [
            self.cfg.q.eq(q), self.cfg.sparse.eq(sparse), self.degree.eq(degree),
            self.cfg.scale_format.eq(scale_format),
            self.cfg.scale_group.eq(scale_group),
            self.cfg.lut_addr.eq(lut_index),
            self.cfg.lut_data.eq(bus.wdata[:16]),
        ]

        # Reads: the register ``addr`` selected, READ_LATENCY cycles later; PARAMS is constant. The
        # address waits a cycle more than a write's, for the LUT's readback (a synchronous read of
        # the entry at LUT_INDEX, as it was in that cycle).
        read_addr = Signal(ADDR_BITS)
        m.d.sync += read_addr.eq(bus.addr)
        with m.Switch(read_addr):
            for r in self.regs:
                with m.Case(r.addr):
                    word = Const(0, DATA_BITS)
                    if r.access != "WO":
                        for f in r.fields:
                            # Fields without storage are the constant PARAMS.
                            word = word | (Cat(storage.get((r.name, f.name), Const(f.reset, f.width))) << f.lsb)
                    m.d.sync += self.bus.rdata.eq(word)
            with m.Default():
                m.d.sync += self.bus.rdata.eq(0)

        def written(name):
            return bus.we & (bus.addr == next(r.addr for r in self.regs if r.name == name))

        def field_bits(name, field):
            f = fields[name, field]
            return bus.wdata[f.lsb:f.lsb + f.width]

        with m.If(written("CONFIG")):
            m.d.sync += [q.eq(field_bits("CONFIG", "Q")), sparse.eq(field_bits("CONFIG", "SPARSE")),
                         scale_format.eq(field_bits("CONFIG", "SCALE_FORMAT")),
                         scale_group.eq(field_bits("CONFIG", "SCALE_GROUP"))]
        with m.If(written("PREFETCH")):
            m.d.sync += degree.eq(field_bits("PREFETCH", "DEGREE"))
        with m.If(written("LUT_INDEX")):
            m.d.sync += lut_index.eq(field_bits("LUT_INDEX", "INDEX"))
        with m.If(written("LUT_DATA")):
            m.d.comb += self.cfg.lut_we.eq(1)
            m.d.sync += lut_index.eq(lut_index + 1)

        # The error record: a new error wins over a clearing write in the same cycle.
        with m.If(self.error.en):
            m.d.sync += error.eq(self.error)
        with m.Elif(written("ERROR")):
            m.d.sync += error.eq(0)

        # A clear drops the events of its own cycle and the one pending.
        clear = written("CONTROL") & field_bits("CONTROL", "CLEAR_COUNTERS")
        m.d.sync += counted.eq(Mux(clear, 0, self.events))
        for i, counter in enumerate(counters):
            with m.If(clear):
                m.d.sync += [counter.eq(0), following[i].eq(1)]
            with m.Elif(counted[i]):
                m.d.sync += [counter.eq(following[i]), following[i].eq(fast_add(m, following[i], 0, 1)[:32])]
        return m
