"""The scaling stage (paper, section 6.1, item 3): W BF16 scalers, bit-exact to ``golden.numerics.scale_mul``.

A scale (BF16, E8M0 or E4M3) is decoded once per vOp into an exact significand and exponent; each
lane multiplies its 8-bit significand by it, rounds to nearest even with an unbounded exponent,
then flushes results below 2^-126 to signed zero and above the BF16 maximum to signed Inf. A BF16
operand with a zero exponent field is signed zero (DAZ); any NaN, or Inf x 0, gives 0x7FC0.
Without a scale format the stage passes values unchanged, as the golden decoder does.

The stage is pipelined for a 400 ps cycle: the scale codes are selected, then decoded, then each
lane takes the ``LANE_STEPS`` (partial products reduced to two rows; their sum; normalization; rounding and the
result's special cases), a register after each. ``BF16Scaler`` chains the same steps without
registers: one lane as a combinational block, for exhaustive checks of its netlist.
"""

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .arith import carry_save, fast_add
from .layouts import BF16, ScaleFormat, ScaleGroup, chunk_layout, out_layout, scale_beat_layout

BF16_NAN = 0x7FC0
BF16_INF = 0x7F80


class DecodedScale(data.Struct):
    """A scale's exact value: (-1)^sign * sig/128 * 2^exp unless a flag says otherwise; ``sig3`` is
    3 x sig, the one multiple of it the lanes' radix-4 partial products cannot wire."""
    sig: 8
    sig3: 10
    exp: signed(10)
    sign: 1
    zero: 1
    inf: 1
    nan: 1


def decode_scale(m, c, format):
    """Raw scale code ``c`` (BF16 in 16 bits, E8M0/E4M3 in the low 8) of ``format`` to a
    ``DecodedScale``. Every field comes from the code's bits in parallel, the format only
    choosing among them."""
    s = Signal(DecodedScale, name="decoded")
    # 3 x sig from the code's bits, beside the decoding rather than behind it.
    bf16_sig3 = Cat(c[:7], 1) + Cat(Const(0, 1), c[:7], 1)
    e4m3_sig3 = Cat(c[:3], 1) + Cat(Const(0, 1), c[:3], 1)  # of 1.man
    sub_sig3 = c[:3] + (c[:3] << 1)  # of a subnormal's man
    # Unbiased exponents, the same way (signed constants: unsigned - unsigned would wrap).
    e8_exp = c[:8] - Const(127, signed(9))
    bf16_exp = c[7:15] - Const(127, signed(9))
    e4m3_exp = c[3:7] - Const(7, signed(5))
    with m.Switch(format):
        with m.Case(ScaleFormat.E8M0):
            m.d.comb += [s.sig.eq(0x80), s.sig3.eq(0x180), s.exp.eq(e8_exp), s.nan.eq(c[:8] == 0xFF)]
        with m.Case(ScaleFormat.E4M3):
            exp, man = c[3:7], c[:3]
            m.d.comb += [s.sign.eq(c[7]), s.nan.eq((exp == 15) & (man == 7))]
            with m.If(exp != 0):
                m.d.comb += [s.sig.eq(Cat(Const(0, 4), man, 1)), s.sig3.eq(e4m3_sig3 << 4),
                             s.exp.eq(e4m3_exp)]
            # Subnormals, man * 2^-9, normalized: shift the leading one to bit 7.
            with m.Elif(man[2]):
                m.d.comb += [s.sig.eq(man << 5), s.sig3.eq(sub_sig3 << 5), s.exp.eq(-7)]
            with m.Elif(man[1]):
                m.d.comb += [s.sig.eq(man << 6), s.sig3.eq(sub_sig3 << 6), s.exp.eq(-8)]
            with m.Else():
                m.d.comb += [s.sig.eq(man << 7), s.sig3.eq(sub_sig3 << 7), s.exp.eq(-9), s.zero.eq(~man[0])]
        with m.Default():  # BF16
            exp, man = c[7:15], c[:7]
            m.d.comb += [
                s.sign.eq(c[15]),
                s.sig.eq(Cat(man, 1)),
                s.sig3.eq(bf16_sig3),
                s.exp.eq(bf16_exp),
                s.zero.eq(exp == 0),
                s.inf.eq((exp == 0xFF) & (man == 0)),
                s.nan.eq((exp == 0xFF) & (man != 0)),
            ]
    return s


class ScaleDecoder(wiring.Component):
    """``decode_scale`` as a block of its own."""

    code: In(16)
    format: In(ScaleFormat)
    scale: Out(DecodedScale)

    def elaborate(self, platform):
        m = Module()
        m.d.comb += self.scale.eq(decode_scale(m, self.code, self.format))
        return m


class _Special(data.Struct):
    """What a lane's operands already decide: the result's sign and whether it is NaN, Inf or zero."""
    sign: 1
    nan: 1
    inf: 1
    zero: 1


class ProductRows(data.Struct):
    """1.man x sig as two rows to add, and the exponent sum (value's biased + scale's) begun: its
    low 6 bits added with their carry, the high bits of the two still apart."""
    sum: 16
    carry: 16
    exp_low: 7
    value_exp_high: 2
    scale_exp_high: signed(4)
    special: _Special


class _Exponent(data.Struct):
    """A candidate biased result exponent: its field bits, and whether it overflows or underflows."""
    field: 8
    over: 1
    under: 1


class Product(data.Struct):
    """The 16-bit significand product (leading one at bit 15 or 14) and the exponent sum."""
    product: 16
    exp: signed(11)
    special: _Special


class Normalized(data.Struct):
    """The product's top 8 bits after normalization, whether they round up, whether that carries
    out of them, and the exponent without and with that carry."""
    sig: 8
    round_up: 1
    carry: 1
    exps: data.ArrayLayout(_Exponent, 2)
    special: _Special


def partial_products(m, value, scale):
    """Step 1: the operands' special cases, the low half of the exponent sum (an add split over
    two steps is two short carry chains) and 1.man x sig as two rows: each
    2-bit digit of 1.man picks 0, sig, 2 sig or 3 sig (radix 4), and two levels of full adders
    reduce the four rows."""
    exp, man = value[7:15], value[:7]
    v_zero = exp == 0
    v_inf = (exp == 0xFF) & (man == 0)
    significand = Cat(man, 1)
    multiples = [Const(0, 10), scale.sig, scale.sig << 1, scale.sig3]
    rows = []
    for i in range(4):
        digit = significand[2 * i:2 * i + 2]
        rows.append(Mux(digit[1], Mux(digit[0], multiples[3], multiples[2]),
                        Mux(digit[0], multiples[1], multiples[0])) << 2 * i)
    out = Signal(ProductRows)
    m.d.comb += [
        Cat(out.sum, out.carry).eq(Cat(*carry_save(m, rows, 16))),
        out.exp_low.eq(exp[:6] + scale.exp[:6]),
        out.value_exp_high.eq(exp[6:]),
        out.scale_exp_high.eq(scale.exp[6:]),
        out.special.sign.eq(value[15] ^ scale.sign),
        out.special.nan.eq((exp == 0xFF) & (man != 0) | scale.nan | v_inf & scale.zero | v_zero & scale.inf),
        out.special.inf.eq(v_inf | scale.inf),
        out.special.zero.eq(v_zero | scale.zero),
    ]
    return out


def add_rows(m, rows):
    """Step 2: the whole product, and beside it the exponent sum's high bits."""
    out = Signal(Product)
    high = rows.value_exp_high + rows.scale_exp_high + rows.exp_low[6]
    m.d.comb += [out.product.eq(fast_add(m, rows.sum, rows.carry)), out.exp.eq(Cat(rows.exp_low[:6], high)),
                 out.special.eq(rows.special)]
    return out


def normalize(m, p):
    """Step 3: the leading one to bit 15; round to nearest even from the bits below the 8 kept.
    Beside it, the result's exponent for each of the 0, 1 or 2 that normalization and rounding may
    add to the exponent sum (adds and compares of constants), of which ``top`` picks two."""
    exps = []
    for k in range(3):
        e = Signal(_Exponent, name=f"exp_plus{k}")
        m.d.comb += [e.field.eq(p.exp + k), e.over.eq(p.exp >= 0xFF - k), e.under.eq(p.exp <= -k)]
        exps.append(e)
    top = p.product[15]
    norm = Mux(top, p.product, p.product << 1)[:16]
    out = Signal(Normalized)
    m.d.comb += [
        out.sig.eq(norm[8:]),
        out.round_up.eq(norm[7] & (norm[:7].any() | norm[8])),
        out.carry.eq(out.round_up & norm[8:].all()),
        out.exps[0].eq(Mux(top, exps[1], exps[0])),
        out.exps[1].eq(Mux(top, exps[2], exps[1])),
        out.special.eq(p.special),
    ]
    return out


def round_result(m, n):
    """Step 4: the rounded significand (a carry out of it leaves the mantissa field 0) and the
    result with overflow, underflow and the special cases."""
    mantissa = Signal(7)
    m.d.comb += mantissa.eq(n.sig + n.round_up)
    exp = _Exponent(Mux(n.carry, n.exps[1], n.exps[0]))
    sp = n.special
    result = Signal(BF16)
    with m.If(sp.nan):
        m.d.comb += result.eq(BF16_NAN)
    with m.Elif(sp.inf | exp.over):
        m.d.comb += result.eq(Cat(Const(BF16_INF, 15), sp.sign))
    with m.Elif(sp.zero | exp.under):
        m.d.comb += result.eq(Cat(Const(0, 15), sp.sign))
    with m.Else():
        m.d.comb += result.eq(Cat(mantissa, exp.field, sp.sign))
    return result


#: One lane's steps, in order; the scaling stage registers each one's result.
LANE_STEPS = (partial_products, add_rows, normalize, round_result)

#: Registers from DD to the output chunk: the selected scale codes, the decoded scales, then one
#: per lane step (the last one is the output register).
SCALER_LATENCY = 2 + len(LANE_STEPS)


class BF16Scaler(wiring.Component):
    """One lane, combinational: BF16 ``value`` times a decoded scale, rounded to BF16 ``result``."""

    value: In(BF16)
    scale: In(DecodedScale)
    result: Out(BF16)

    def elaborate(self, platform):
        m = Module()
        x = partial_products(m, self.value, self.scale)
        for step in LANE_STEPS[1:]:
            x = step(m, x)
        m.d.comb += self.result.eq(x)
        return m


class ScalingStage(wiring.Component):
    """DD chunks in, scaled output chunks out; one scale beat per tile is consumed with its last vOp.

    Element e of the tile uses scale e div g (g divides the 32-element row), so a vOp needs
    max(1, W/16) scales at most: that many decoders serve all W lanes. The chunk's values, mask
    bits and ``last`` travel beside the lanes, for the unscaled output and the zeros of masked
    elements. A chunk leaves ``SCALER_LATENCY`` cycles after it entered, one per cycle, whatever
    the scale format; a stalled output holds every stage.
    """

    def __init__(self, W):
        self.W = W
        super().__init__({
            "scale_format": In(ScaleFormat),
            "scale_group": In(ScaleGroup),
            "dd": In(stream.Signature(chunk_layout(W))),
            "scales": In(stream.Signature(scale_beat_layout())),
            "out": Out(stream.Signature(out_layout(W))),
        })

    def elaborate(self, platform):
        m = Module()
        W = self.W
        fmt = self.scale_format
        # The configuration's decodes in registers of their own (CONFIG is written only while no
        # tile is in flight). ``scaling`` selects every output lane's source; ``dd.ready``, which
        # enables the expander's output, takes its complement from a flip-flop of its own.
        g16, scaling, unscaled, bf16 = (Signal(name=n) for n in ("g16", "scaling", "unscaled", "bf16"))
        m.d.sync += [g16.eq(self.scale_group == ScaleGroup.G16), scaling.eq(fmt != ScaleFormat.NONE),
                     unscaled.eq(fmt == ScaleFormat.NONE), bf16.eq(fmt == ScaleFormat.BF16)]
        decoders = max(1, W // 16)

        # A valid bit and the chunk beside the lanes for every stage register but the output. The
        # whole stage moves on together, or holds while the output is stalled: one enable, one
        # gate from flip-flops, where a stall that only held the stages behind it would put a
        # chain of gates in front of every register's enable.
        valids = [Signal(name=f"valid{k}") for k in range(SCALER_LATENCY - 1)]
        sides = [Signal(chunk_layout(W), name=f"side{k}", reset_less=True) for k in range(SCALER_LATENCY - 1)]
        advance = Signal()
        m.d.comb += advance.eq(~self.out.valid | self.out.ready)

        dd = self.dd.payload
        has_scales = unscaled | self.scales.valid
        # ``dd.ready`` from a flip-flop of its own (``out.valid`` inverted, so that synthesis keeps
        # it apart), not from the end of ``advance``'s tree: it enables the expander's output.
        out_empty = Signal(init=1)
        with m.If(advance):
            m.d.sync += out_empty.eq(~valids[-1])
        m.d.comb += [
            self.dd.ready.eq((out_empty | self.out.ready) & has_scales),
            self.scales.ready.eq(advance & scaling & self.dd.valid & dd.last),
        ]
        with m.If(advance):
            for k, (valid, side) in enumerate(zip(valids, sides)):
                m.d.sync += [valid.eq(self.dd.valid & has_scales if k == 0 else valids[k - 1]),
                             side.eq(dd if k == 0 else sides[k - 1])]

        def register(shape, value, name):
            """``value`` in the next stage register."""
            reg = Signal(shape, name=name, reset_less=True)  # data: only the valid bits need a reset
            with m.If(advance):
                m.d.sync += reg.eq(value)
            return reg

        # Stage 0: each decoder's scale code: code k of the vOp with index i is scale i*W/g + k, so
        # the vOp's index selects it in a mux tree, with no add before it.
        block = self.scales.payload.data

        def pick(k, bits, g):
            """Code k of the vOp, for scales of ``bits`` bits in groups of ``g``."""
            return Array(block.word_select(i * W // g + k, bits) if i * W // g + k < 512 // bits else 0
                         for i in range(512 // W))[dd.index]

        decoded = []
        for k in range(decoders):
            code = Signal(16, name=f"scale_code{k}")
            m.d.comb += code.eq(Mux(bf16, Mux(g16, pick(k, 16, 16), pick(k, 16, 32)),
                                    Mux(g16, pick(k, 8, 16), pick(k, 8, 32))))
            # Decoded in the lanes' module, so that logic optimization sees the whole path.
            decoded.append(decode_scale(m, register(16, code, f"code{k}"), fmt))

        # Stage 1: each lane's decoded scale (synthesis merges the equal ones); then the lane steps.
        results = []
        for j in range(W):
            k16, k32 = min(j // 16, decoders - 1), min(j // 32, decoders - 1)
            scale = register(DecodedScale, Mux(g16, decoded[k16].as_value(), decoded[k32].as_value()),
                             f"lane{j}_scale")
            x = partial_products(m, sides[1].data[j], scale)
            for s, step in enumerate(LANE_STEPS[1:]):
                x = step(m, register(x.shape(), x, f"lane{j}_step{s}"))
            results.append(x)

        side = sides[-1]
        out = self.out.payload
        with m.If(advance):
            m.d.sync += [self.out.valid.eq(valids[-1]), out.last.eq(side.last)]
            for j in range(W):
                m.d.sync += out.data[j].eq(Mux(scaling, Mux(side.mask[j], results[j], 0), side.data[j]))
        return m
