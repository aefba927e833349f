"""Pipeline registers: the load enables of a chain of stages, a register slice that cuts both
directions of a stream link, an output buffer for a port's stream, wide held registers and
flip-flop copies of a stall's enable built for its fanout, and registers around a block
synthesized alone."""

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out


def stage_loads(m, valids, ready, name):
    """Load enables of a chain of pipeline registers whose valid bits are ``valids`` (first to last)
    and whose last one is taken when ``ready``: a register loads the beat (or bubble) in front of it
    when it is empty or its own beat moves on in this cycle, so a stall holds only the stages behind
    it and a bubble closes up. The chain is one OR gate per stage."""
    loads = []
    for k, valid in reversed(list(enumerate(valids))):
        load = Signal(name=f"{name}_load{k}")
        m.d.comb += load.eq(~valid | ready)
        loads.insert(0, load)
        ready = load
    return loads


class RegisterSlice(wiring.Component):
    """A stream through one register whose ``i.ready`` is itself a register (a skid buffer): no
    combinational path from ``i`` to ``o`` nor from ``o.ready`` back to ``i.ready``; one beat per
    cycle, one cycle of latency.

    A beat that arrives while the output stalls waits in the skid register, and ``i.ready`` falls
    until the output register takes it. With ``skid=False`` there is no skid register: ``i.ready``
    is ``~o.valid``, a beat every other cycle for half the flip-flops.
    """

    def __init__(self, layout, *, skid=True, ready_next=False):
        self.skid = skid
        members = {"i": In(stream.Signature(layout)), "o": Out(stream.Signature(layout))}
        if ready_next:  # ``i.ready`` of the next cycle, for a producer that registers copies of it
            members["ready_next"] = Out(1)
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        # Data registers have no reset (their valid bits say whether they hold a beat): a reset
        # would put a gate in front of every flip-flop and load the reset's tree.
        payload = Signal.like(self.i.payload, reset_less=True)
        m.d.comb += self.o.payload.eq(payload)
        if not self.skid:
            # ``i.ready`` is ~o.valid, in a flip-flop of its own (it enables the stage behind).
            ready = Signal(init=1)
            valid_next = Mux(self.o.valid, ~self.o.ready, self.i.valid)
            m.d.comb += self.i.ready.eq(ready)
            m.d.sync += [self.o.valid.eq(valid_next), ready.eq(~valid_next)]
            if "ready_next" in self.signature.members:
                m.d.comb += self.ready_next.eq(~valid_next)
            with m.If(self.i.valid & ~self.o.valid):
                m.d.sync += payload.eq(self.i.payload)
            return m
        skid = Signal.like(self.i.payload, reset_less=True)
        skid_valid = Signal()
        # ``i.ready`` is ~skid_valid in a register of its own: skid_valid also selects every output
        # bit's source, and ``i.ready`` often enables a whole stage behind.
        ready = Signal(init=1)
        move = ~self.o.valid | self.o.ready
        m.d.comb += self.i.ready.eq(ready)
        m.d.sync += ready.eq(move | Mux(skid_valid, ready, ~self.i.valid))
        if "ready_next" in self.signature.members:
            # From copies of the valid bits, in modules of their own, as the logic that reads
            # ``o.ready``: the slice's ``move`` drives every payload bit, and ``o.ready`` would reach
            # the next value only through that buffer tree.
            valid_next = Mux(move, skid_valid | self.i.valid, self.o.valid)
            skid_next = ~move & (skid_valid | self.i.valid)
            shadow, = copies(m, "shadow", Cat(valid_next, skid_next), 1, 1, init=0)
            ready_next, = replicas(m, "ready_next", lambda shadow, o_ready, ready, i_valid:
                                   ~shadow[0] | o_ready | Mux(shadow[1], ready, ~i_valid),
                                   [shadow, self.o.ready, ready, self.i.valid], 1)
            m.d.comb += self.ready_next.eq(ready_next)
        with m.If(move):
            m.d.sync += [
                self.o.valid.eq(skid_valid | self.i.valid),
                payload.eq(Mux(skid_valid, skid, self.i.payload)),
                skid_valid.eq(0),
            ]
        with m.Elif(~skid_valid):
            # The skid register loads whether or not a beat comes (its valid bit tells), so that
            # ``i.valid`` enables none of its flip-flops.
            m.d.sync += [skid.eq(self.i.payload), skid_valid.eq(self.i.valid)]
        return m


class _SlotSelect(wiring.Component):
    """A share of an ``OutputBuffer``'s output bits with a read pointer of its own: a flip-flop in a
    module of its own, which synthesis keeps apart from the other copies (it merges equal
    flip-flops within a module), so that each copy drives ``CHUNK`` multiplexers, not all of them."""

    def __init__(self, width):
        super().__init__({"rp_next": In(1), "slots": In(2 * width), "o": Out(width)})

    def elaborate(self, platform):
        m = Module()
        rp = Signal()
        m.d.sync += rp.eq(self.rp_next)
        m.d.comb += self.o.eq(Mux(rp, self.slots[len(self.o):], self.slots[:len(self.o)]))
        return m


class OutputBuffer(wiring.Component):
    """A stream through a two-entry FIFO of registers whose output is the multiplexer of the two:
    ``o.ready`` moves the read pointer and the fill state only, so that an output port's ready (an
    input of the design, or a late selection) enables no wide register; a free entry loads
    ``i.payload`` in every cycle, so that ``i.valid`` enables none either; ``i.ready`` is a
    register, and ``ready_next`` its value in the next cycle, from registers, were ``o.ready`` low
    (bit 0) or high (bit 1). One beat per cycle, one cycle of latency."""

    #: Output bits per copy of the read pointer (see ``_SlotSelect``).
    CHUNK = 64

    def __init__(self, layout):
        super().__init__({"i": In(stream.Signature(layout)), "o": Out(stream.Signature(layout)), "ready_next": Out(2)})

    def elaborate(self, platform):
        m = Module()
        slots = [Signal.like(self.i.payload, name=f"slot{k}", reset_less=True) for k in range(2)]  # data: no reset
        wp, rp = Signal(), Signal()
        full = Signal(2)  # the entries holding a beat
        # Whether one is free and whether one holds a beat, each a register of its own, so that
        # ``o.valid`` and ``i.ready`` are flip-flops and ``o.ready`` reaches them through two gates.
        room, nonempty = Signal(init=1), Signal()
        push = self.i.valid & room
        pop = self.o.valid & self.o.ready
        for k, slot in enumerate(slots):
            with m.If(~full[k]):
                m.d.sync += slot.eq(self.i.payload)
        def after(pop):
            return full & ~Mux(pop, Mux(rp, 0b10, 0b01), 0) | Mux(push, Mux(wp, 0b10, 0b01), 0)

        now = after(pop)
        m.d.sync += [wp.eq(wp ^ push), rp.eq(rp ^ pop), full.eq(now), room.eq(~now.all()), nonempty.eq(now.any())]
        m.d.comb += [self.i.ready.eq(room), self.o.valid.eq(nonempty),
                     self.ready_next.eq(Cat(~after(0).all(), ~after(self.o.valid).all()))]
        out = Value.cast(self.o.payload)
        for c, at in enumerate(range(0, len(out), self.CHUNK)):
            part = slice(at, min(at + self.CHUNK, len(out)))
            m.submodules[f"select{c}"] = select = _SlotSelect(part.stop - part.start)
            m.d.comb += [select.rp_next.eq(rp ^ pop),
                         select.slots.eq(Cat(Value.cast(slots[0])[part], Value.cast(slots[1])[part])),
                         out[part].eq(select.o)]
        return m


class RegisterQueue(wiring.Component):
    """A FIFO of ``depth`` registers for wide entries, built for its enables' fanout: a free entry
    loads ``w_data`` in every cycle, so a write only marks the entry at the write pointer taken, and
    a read only moves the read pointer; ``r_data`` is the entry at the read pointer (a multiplexer
    of registers). ``w_rdy`` (not full) and ``r_rdy`` (not empty) are registers' compares; a write
    is read from the next cycle on. The ports are those of Amaranth's FIFOs (``amaranth.lib.fifo``)."""

    def __init__(self, shape, depth, **members):
        self.depth = depth
        super().__init__({"w_data": In(shape), "w_en": In(1), "w_rdy": Out(1),
                          "r_data": Out(shape), "r_en": In(1), "r_rdy": Out(1), "level": Out(range(depth + 1)),
                          **members})

    def elaborate(self, platform):
        m = Module()
        entries = Array(Signal.like(self.r_data, name=f"entry{k}", reset_less=True) for k in range(self.depth))
        taken = Signal(self.depth)
        wp, rp = Signal(range(self.depth)), Signal(range(self.depth))
        push, pop = self.w_en & self.w_rdy, self.r_en & self.r_rdy
        for k in range(self.depth):
            with m.If(~taken[k]):
                m.d.sync += entries[k].eq(self.w_data)

        def advance(pointer):
            return Mux(pointer == self.depth - 1, 0, pointer + 1)

        with m.If(push):
            m.d.sync += wp.eq(advance(wp))
        with m.If(pop):
            m.d.sync += rp.eq(advance(rp))
        m.d.sync += [taken.eq(taken & ~Mux(pop, 1 << rp, 0) | Mux(push, 1 << wp, 0)),
                     self.level.eq(self.level + push - pop)]
        m.d.comb += [self.w_rdy.eq(self.level != self.depth), self.r_rdy.eq(self.level != 0),
                     self.r_data.eq(entries[rp])]
        return m


class ShiftQueue(RegisterQueue):
    """A FIFO of ``depth`` registers for narrow entries read by wide logic: the head is always
    entry 0 (``r_data`` is a register), a read shifts every entry down by one, and the occupancy is
    a thermometer code, so that ``r_en`` only selects each entry's source (no pointer or count
    arithmetic behind it). A free entry loads ``w_data`` in every cycle, as in ``RegisterQueue``,
    whose ports it has, and ``r_copy``: the head again, from flip-flops of its own (a module), for
    narrow logic beside the wide logic that ``r_data`` drives."""

    def __init__(self, shape, depth):
        super().__init__(shape, depth, r_copy=Out(shape))

    def elaborate(self, platform):
        m = Module()
        entries = [Signal.like(self.r_data, name=f"entry{k}", reset_less=True) for k in range(self.depth)]
        full = Signal(self.depth)  # entry k holds one: full[:level] set
        push, pop = self.w_en & self.w_rdy, self.r_en & self.r_rdy
        for k, entry in enumerate(entries):
            above = (entries[k + 1], full[k + 1]) if k + 1 < self.depth else (self.w_data, 0)
            kept = Mux(full[k], entry, self.w_data)
            after = Mux(pop, Mux(above[1], above[0], self.w_data), kept)
            m.d.sync += entry.eq(after)
            if k == 0:
                m.d.comb += self.r_copy.eq(copies(m, "head_copy", after, 1, 1)[0])
        grown = Cat(1, full[:-1])
        m.d.sync += full.eq(Mux(pop, Mux(push, full, full >> 1), Mux(push, grown, full)))
        m.d.comb += [self.w_rdy.eq(~full[-1]), self.r_rdy.eq(full[0]), self.r_data.eq(entries[0]),
                     self.level.eq(sum(full))]
        return m


class RegisteredPorts(wiring.Component):
    """``inner`` with a register on every input and output port: synthesized alone, a block's
    paths then start and end at flip-flops, as they do inside the PE, and its critical path is
    register to register. One cycle more each way; for measurement, not for use."""

    def __init__(self, inner):
        self.inner = inner
        super().__init__(inner.signature)

    def elaborate(self, platform):
        m = Module()
        m.submodules.inner = self.inner
        outer = dict((path, value) for path, _, value in self.signature.flatten(self))
        for path, member, value in self.inner.signature.flatten(self.inner):
            if isinstance(Value.cast(value), Const):  # an always-ready stream's ready
                continue
            # Without a reset: the block's own reset paths are what is measured.
            reg = Signal(len(Value.cast(value)), reset_less=True, name="port_" + "__".join(map(str, path)))
            source, sink = (outer[path], value) if member.flow == In else (value, outer[path])
            m.d.sync += reg.eq(source)
            m.d.comb += sink.eq(reg)
        return m


#: Bits per module of a ``hold`` register, and the loads of each copy of a ``copies`` register.
HOLD_SLICE = 64


class _Register(wiring.Component):
    def __init__(self, width, init):
        self.init = init
        super().__init__({"d": In(width), "en": In(1), "q": Out(width)})

    def elaborate(self, platform):
        m = Module()
        q = Signal.like(self.q, init=self.init or 0, reset_less=self.init is None)
        m.d.comb += self.q.eq(q)
        with m.If(self.en):
            m.d.sync += q.eq(self.d)
        return m


def copies(m, name, value, en, n, init=None):
    """``n`` copies of a register that takes ``value`` when ``en`` (without a reset when ``init`` is
    None), each a module of its own so that synthesis keeps them apart: a register that selects
    many bits (a rotation's digits) drives each share of them from its own flip-flops."""
    value = Value.cast(value)
    out = []
    for k in range(n):
        m.submodules[f"{name}{k}"] = reg = _Register(len(value), init)
        m.d.comb += [reg.d.eq(value), reg.en.eq(en)]
        out.append(reg.q)
    return out


class _Logic(wiring.Component):
    def __init__(self, fn, widths, width):
        self.fn, self.arity = fn, len(widths)
        super().__init__({**{f"a{i}": In(w) for i, w in enumerate(widths)}, "o": Out(width)})

    def elaborate(self, platform):
        m = Module()
        m.d.comb += self.o.eq(self.fn(*(getattr(self, f"a{i}") for i in range(self.arity))))
        return m


def replicas(m, name, fn, args, n):
    """``n`` copies of the logic ``fn(*args)``, each a module of its own so that synthesis keeps
    them apart: a late signal with many loads reaches each share of them through gates of its own
    rather than through one gate's load (or a buffer tree)."""
    args = [Value.cast(a) for a in args]
    width = len(Value.cast(fn(*args)))
    out = []
    for k in range(n):
        m.submodules[f"{name}{k}"] = logic = _Logic(fn, [len(a) for a in args], width)
        m.d.comb += [getattr(logic, f"a{i}").eq(a) for i, a in enumerate(args)]
        out.append(logic.o)
    return out


def enable(m, name, en_next):
    """A flip-flop copy of the enable whose next-cycle value is ``en_next``, for a group of loads of
    its own (``copies``: synthesis keeps it apart): a late stall then reaches wide registers from
    flip-flops, not through a buffer tree. It resets to 1, as the stages' stall enables do (an empty
    stage moves on)."""
    return copies(m, name, en_next, 1, 1, init=1)[0]


class _Hold(wiring.Component):
    def __init__(self, width):
        super().__init__({"d": In(width), "en_next": In(1), "when": In(1), "q": Out(width)})

    def elaborate(self, platform):
        m = Module()
        q = Signal.like(self.q, reset_less=True)  # data: whatever carries its valid bit has the reset
        m.d.comb += self.q.eq(q)
        with m.If(enable(m, "en", self.en_next) & self.when):
            m.d.sync += q.eq(self.d)
        return m


def hold(m, name, value, en_next, when=1):
    """A pipeline register that takes ``value`` in the cycle after ``en_next`` (a stall's enable
    decided a cycle ahead), for wide stages held by a stall: built in modules of ``HOLD_SLICE`` bits,
    each with its own flip-flop copy of the enable (``enable``). ``when``: a condition of the current
    cycle the load also needs (a flip-flop: it joins the enable after the enable's flip-flop, early
    enough for a clock gate), for a stage whose value is not used in every mode. Returns the
    register."""
    value = Value.cast(value)
    out = []
    for k, start in enumerate(range(0, len(value), HOLD_SLICE)):
        part = value[start:start + HOLD_SLICE]
        m.submodules[f"{name}{k}"] = reg = _Hold(len(part))
        m.d.comb += [reg.d.eq(part), reg.en_next.eq(en_next), reg.when.eq(when)]
        out.append(reg.q)
    return Cat(*out)
