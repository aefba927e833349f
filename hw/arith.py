"""Arithmetic that synthesis would otherwise build slowly: Yosys and ABC turn an add into a ripple
of carries (two gates per bit) and a sum of many rows into a chain of such adds. Here: a Sklansky
(or Kogge-Stone) parallel-prefix carry network, and carry-save sums of several operands.

Each helper is written into the Verilog in one of two styles, chosen for a whole elaboration
(``arith_style``): "gates", the structures above, which synthesis maps (the default, and what
``deca generate`` writes), or "operators", Verilog's ``+`` and ``>=`` of the same values, which
Verilator simulates about twice as fast (its model evaluates every bit of a carry network as an
expression of its own): the fast engine's model. ``carry_save`` has one style: its rows are
whole-word expressions, cheap to simulate, and callers keep its two rows in registers, which must
be the same in both styles. The helpers are pure functions of their operands, so the two styles of
a design differ only in how these functions are written: every distinct helper call of a design
(an ``Instance``, recorded while it elaborates) is proven equal in both styles by Yosys
(``deca.synth.equiv``) before the fast engine runs the design's operators."""

import contextlib
import contextvars
import json
import typing
import weakref
from pathlib import Path

from amaranth.hdl import Cat, Const, Elaboratable, Module, Mux, Signal, Value

ARITH_STYLES = ("gates", "operators")
_style = contextvars.ContextVar("arith_style", default="gates")
_seen = contextvars.ContextVar("arith_instances", default=None)


class Instance(typing.NamedTuple):
    """One helper call, whatever its style: ``kind`` "add" (the sum of operands of ``widths`` and a
    carry in, "0", "1" or "signal", its low ``bits``, in gates a network ``width`` bits wide,
    Kogge-Stone if ``spread``) or "at_least" (``widths`` of a and b, ``signed``)."""
    kind: str
    widths: tuple
    width: int = 0
    bits: int = 1
    carry: str = "0"
    spread: bool = False
    signed: bool = False


@contextlib.contextmanager
def arith_style(style):
    """Elaborate the helpers inside the block in ``style`` (one of ``ARITH_STYLES``)."""
    if style not in ARITH_STYLES:
        raise ValueError(f"arithmetic style must be one of {', '.join(ARITH_STYLES)}, got {style!r}")
    token = _style.set(style)
    try:
        yield
    finally:
        _style.reset(token)


@contextlib.contextmanager
def recording():
    """The set of ``Instance``'s of the helpers elaborated inside the block."""
    seen = set()
    token = _seen.set(seen)
    try:
        yield seen
    finally:
        _seen.reset(token)


def instances_file(verilog_path):
    """Where ``deca.hw.generate`` lists the instances of an operators Verilog: ``<top>.arith.json``."""
    path = Path(verilog_path)
    return path.with_name(f"{path.stem}.arith.json")


def write_instances(instances, path):
    path.write_text(json.dumps(sorted(list(i) for i in instances), indent=0) + "\n")


def read_instances(path):
    return [Instance(kind, tuple(widths), *rest) for kind, widths, *rest in json.loads(Path(path).read_text())]


def _operators(instance):
    """Whether to write ``instance`` as operators; records it."""
    seen = _seen.get()
    if seen is not None:
        seen.add(instance)
    return _style.get() == "operators"


class InstanceCircuit(Elaboratable):
    """``instance`` alone in the current style: operands on ports ``i0``, ``i1``, ... (and ``carry``),
    the result on ``o``; equivalence checks compare its two styles."""

    def __init__(self, instance):
        self.instance = instance
        self.operands = [Signal(w, name=f"i{k}") for k, w in enumerate(instance.widths)]
        self.carry = Signal(name="carry") if instance.carry == "signal" else int(instance.carry)
        self.o = Signal(instance.bits, name="o")

    def elaborate(self, platform):
        m, instance = Module(), self.instance
        if instance.kind == "add":
            result = _adder(m, self.operands, instance.width, self.carry, instance.spread, instance.bits)
        else:
            result = at_least(*self.operands, instance.signed)
        m.d.comb += self.o.eq(result)
        return m


class _FastAdd(Elaboratable):
    """The sum of ``rows`` (each ``width`` bits) and ``carry_in``, ``width`` + 1 bits: carry-save
    levels down to two rows, then the carry network, all in this module (logic optimization works
    on one module at a time). The two rows are signals: the network reads each three times."""

    def __init__(self, rows, width, carry_in, spread):
        self.rows, self.width, self.carry_in, self.spread = rows, width, carry_in, spread
        self.sum = Signal(width + 1)

    def elaborate(self, platform):
        m = Module()
        width = self.width
        a, b = Signal(width), Signal(width)
        m.d.comb += Cat(a, b).eq(Cat(*carry_save(m, self.rows, width)))
        # Position 0 is the carry in; position i + 1 is bit i.
        gen, prop = Cat(Value.cast(self.carry_in)[0], a & b), Cat(Const(0), a ^ b)
        step = 1
        while step <= width:
            if self.spread:  # Kogge-Stone: position i takes in the group that ends ``step`` below it
                takes = [i >= step for i in range(width + 1)]
                below = [i - step if t else i for i, t in enumerate(takes)]
            else:  # Sklansky: position i takes in the group that ends just below its own block of ``step``
                takes = [(i // step) % 2 == 1 for i in range(width + 1)]
                below = [(i // step) * step - 1 if t else i for i, t in enumerate(takes)]
            mask = Const(int("".join("1" if t else "0" for t in reversed(takes)), 2), width + 1)
            g, q = Signal(width + 1, attrs={"keep": 1}), Signal(width + 1, attrs={"keep": 1})
            m.d.comb += [g.eq(gen | prop & Cat(*(gen[j] for j in below)) & mask),
                         q.eq(prop & (Cat(*(prop[j] for j in below)) | ~mask))]
            gen, prop = g, q
            step *= 2
        m.d.comb += self.sum.eq(Cat((a ^ b) ^ gen[:width], gen[width]))
        return m


def _adder(m, rows, width, carry_in, spread, bits):
    """The low ``bits`` (at most ``width`` + 1) of the sum of ``rows`` (each at most ``width`` bits)
    and ``carry_in``."""
    carry_in = Value.cast(carry_in)
    carry = str(carry_in.value & 1) if isinstance(carry_in, Const) else "signal"
    carry_in = carry_in[0] if carry == "signal" else Const(int(carry), 1)
    if _operators(Instance("add", tuple(len(r) for r in rows), width, bits, carry, spread)):
        return (sum(rows[1:], rows[0]) + carry_in)[:bits]
    adder = _FastAdd([Cat(r, Const(0, width - len(r))) for r in rows], width, carry_in, spread)
    _adders[m] = _adders.get(m, 0) + 1
    m.submodules[f"add{_adders[m] - 1}"] = adder
    return adder.sum[:bits]


def fast_add(m, a, b, carry_in=0, *, spread=False):
    """a + b + carry_in, unsigned, one bit wider than the wider operand, through a Sklansky
    parallel-prefix carry network (log2 levels). Each level's generate and propagate bits are kept
    signals: otherwise logic optimization folds them back into a ripple chain, two gates per bit.
    The adder is a submodule of ``m``, so that it may be used inside an ``If``: comb statements
    there would take the condition into every level of the carry network.

    ``spread``: a Kogge-Stone network instead, for wide adds on a critical path: each group drives
    two others, where a Sklansky level's drives up to half the bits (a buffer tree per level), for
    about twice the cells."""
    a, b = Value.cast(a).as_unsigned(), Value.cast(b).as_unsigned()
    width = max(len(a), len(b))
    return _adder(m, [a, b], width, carry_in, spread, width + 1)


#: Operand bits compared directly at the leaves of ``at_least``'s tree (a short chain: 4 bits
#: mapped to chains of three or four cells, where a level of the tree is one).
COMPARE_LEAF = 2

_adders = weakref.WeakKeyDictionary()  # fast adds in each module so far, for their names


def carry_save(m, rows, width):
    """Rows (values, each already shifted to its weight) reduced to two whose sum is theirs, mod
    2^``width``, by levels of 3:2 full-adder compressors: about log1.5(n/2) full adders deep and no
    carry chain. Add the two with ``fast_add``. Each level's rows are signals of ``m`` (a compressor
    reads each input three times: nested expressions would be written out, and simulated, 3^levels
    times), driven by comb statements: call it outside ``If`` and ``Switch``."""
    rows = [Value.cast(r).as_unsigned() for r in rows]
    while len(rows) > 2:
        level = [Signal(width) for _ in rows]
        m.d.comb += [s.eq(r) for s, r in zip(level, rows)]
        rows = []
        for k in range(0, len(level) - 2, 3):
            x, y, z = level[k:k + 3]
            rows += [x ^ y ^ z, Cat(Const(0, 1), x & y | x & z | y & z)[:width]]
        rows += level[3 * (len(level) // 3):]
    return rows


def fast_sum(m, operands, carry_in=0):
    """The sum of ``operands`` (unsigned, wrapping at the widest one's width plus one): ``carry_save``
    down to two, then ``fast_add``."""
    width = max(len(Value.cast(v)) for v in operands) + 1
    return _adder(m, [Value.cast(v).as_unsigned() for v in operands], width, carry_in, False, width)


def times(value, k):
    """``value * k`` for a constant ``k`` >= 0, as a sum of shifts: Yosys keeps a constant ``*`` a
    multiplier cell, which the ECP5 flow puts in a DSP block."""
    value = Value.cast(value)
    terms = [value << i for i in range(k.bit_length()) if k >> i & 1]
    return sum(terms[1:], terms[0]) if terms else Const(0)


def at_least(a, b, signed=False):
    """``a >= b`` as a balanced tree of compares of halves (the high halves decide unless equal):
    Yosys's compares map to chains as its adds do. One expression, no kept signals, so the Amaranth
    simulator evaluates it as fast as ``>=``. Operands are extended to the wider one
    (sign-extended if ``signed``)."""
    a, b = Value.cast(a), Value.cast(b)
    if _operators(Instance("at_least", (len(a), len(b)), signed=signed)):
        return a.as_signed() >= b.as_signed() if signed else a.as_unsigned() >= b.as_unsigned()
    width = max(len(a), len(b))

    def extend(v):
        v = v.as_signed() if signed else v.as_unsigned()
        v = Cat(v, v[-1].replicate(width - len(v))) if signed else Cat(v, Const(0, width - len(v)))
        return v ^ (1 << (width - 1)) if signed else v  # signed order is unsigned order with the sign flipped

    def tree(x, y):  # (x >= y, x == y)
        if len(x) <= COMPARE_LEAF:
            return x >= y, x == y
        half = len(x) // 2
        ge_lo, eq_lo = tree(x[:half], y[:half])
        ge_hi, eq_hi = tree(x[half:], y[half:])
        # the low half decides when the high halves are equal: each half's expressions written once
        return Mux(eq_hi, ge_lo, ge_hi), eq_hi & eq_lo

    return tree(extend(a), extend(b))[0]


class _Apart(Elaboratable):
    def __init__(self, value, name):
        self.value, self.out = value, Signal(len(value), name=name)

    def elaborate(self, platform):
        m = Module()
        m.d.comb += self.out.eq(self.value)
        return m


def apart(m, value, name):
    """``value`` computed in a submodule of ``m``: ABC maps each module alone, so logic that reads
    it cannot be merged into it (a late input then only drives the gates after it)."""
    part = _Apart(Value.cast(value), name)
    m.submodules[name] = part
    return part.out
