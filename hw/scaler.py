"""The scaling stage (paper, section 6.1, item 3): W BF16 scalers, bit-exact to ``golden.numerics.scale_mul``.

A scale (BF16, E8M0 or E4M3) is decoded once per vOp into an exact significand and exponent; each
lane multiplies its 8-bit significand by it, rounds to nearest even with an unbounded exponent,
then flushes results below 2^-126 to signed zero and above the BF16 maximum to signed Inf. A BF16
operand with a zero exponent field is signed zero (DAZ); any NaN, or Inf x 0, gives 0x7FC0.
Without a scale format the stage passes values unchanged, as the golden decoder does.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .layouts import BF16, ScaleFormat, ScaleGroup, chunk_layout, out_layout, scale_beat_layout

#: Registers from DD to the output chunk.
SCALER_LATENCY = 1

BF16_NAN = 0x7FC0
BF16_INF = 0x7F80


class DecodedScale(data.Struct):
    """A scale's exact value: (-1)^sign * sig/128 * 2^exp unless a flag says otherwise."""
    sig: 8
    exp: signed(10)
    sign: 1
    zero: 1
    inf: 1
    nan: 1


class ScaleDecoder(wiring.Component):
    """Raw scale code (BF16 in 16 bits, E8M0/E4M3 in the low 8) to ``DecodedScale``.

    Biases are subtracted as signed constants: unsigned - unsigned would wrap in Amaranth.
    """

    code: In(16)
    format: In(ScaleFormat)
    scale: Out(DecodedScale)

    def elaborate(self, platform):
        m = Module()
        c, s = self.code, self.scale
        with m.Switch(self.format):
            with m.Case(ScaleFormat.E8M0):
                m.d.comb += [s.sig.eq(0x80), s.exp.eq(c[:8] - Const(127, signed(9))), s.nan.eq(c[:8] == 0xFF)]
            with m.Case(ScaleFormat.E4M3):
                exp, man = c[3:7], c[:3]
                m.d.comb += [s.sign.eq(c[7]), s.nan.eq((exp == 15) & (man == 7))]
                with m.If(exp != 0):
                    m.d.comb += [s.sig.eq(Cat(Const(0, 4), man, 1)), s.exp.eq(exp - Const(7, signed(5)))]
                # Subnormals, man * 2^-9, normalized: shift the leading one to bit 7.
                with m.Elif(man[2]):
                    m.d.comb += [s.sig.eq(man << 5), s.exp.eq(-7)]
                with m.Elif(man[1]):
                    m.d.comb += [s.sig.eq(man << 6), s.exp.eq(-8)]
                with m.Else():
                    m.d.comb += [s.sig.eq(man << 7), s.exp.eq(-9), s.zero.eq(~man[0])]
            with m.Default():  # BF16
                exp, man = c[7:15], c[:7]
                m.d.comb += [
                    s.sign.eq(c[15]),
                    s.sig.eq(Cat(man, 1)),
                    s.exp.eq(exp - Const(127, signed(9))),
                    s.zero.eq(exp == 0),
                    s.inf.eq((exp == 0xFF) & (man == 0)),
                    s.nan.eq((exp == 0xFF) & (man != 0)),
                ]
        return m


class BF16Scaler(wiring.Component):
    """One lane: BF16 ``value`` times a decoded scale, rounded to BF16 ``result``."""

    value: In(BF16)
    scale: In(DecodedScale)
    result: Out(BF16)

    def elaborate(self, platform):
        m = Module()
        v, s = self.value, self.scale
        exp, man = v[7:15], v[:7]
        sign = v[15] ^ s.sign
        v_zero = exp == 0
        v_inf = (exp == 0xFF) & (man == 0)
        nan = (exp == 0xFF) & (man != 0) | s.nan | v_inf & s.zero | v_zero & s.inf

        product = Signal(16)  # 1.man x sig: leading one at bit 15 or 14
        m.d.comb += product.eq(Cat(man, 1) * s.sig)
        top = product[15]
        norm = Signal(16)
        m.d.comb += norm.eq(Mux(top, product, product << 1))
        round_up = norm[7] & (norm[:7].any() | norm[8])
        rounded = Signal(9)  # a carry out of the 8-bit significand leaves the mantissa field 0
        m.d.comb += rounded.eq(norm[8:] + round_up)
        biased = Signal(signed(12))
        m.d.comb += biased.eq(exp + s.exp + top + rounded[8])

        with m.If(nan):
            m.d.comb += self.result.eq(BF16_NAN)
        with m.Elif(v_inf | s.inf | (biased >= 0xFF)):
            m.d.comb += self.result.eq(Cat(Const(BF16_INF, 15), sign))
        with m.Elif(v_zero | s.zero | (biased <= 0)):
            m.d.comb += self.result.eq(Cat(Const(0, 15), sign))
        with m.Else():
            m.d.comb += self.result.eq(Cat(rounded[:7], biased[:8], sign))
        return m


class ScalingStage(wiring.Component):
    """DD chunks in, scaled output chunks out; one scale beat per tile is consumed with its last vOp.

    Element e of the tile uses scale e div g (g divides the 32-element row), so a vOp needs
    max(1, W/16) scales at most: that many decoders serve all W lanes.
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
        dd = self.dd.payload
        fmt = self.scale_format
        g16 = self.scale_group == ScaleGroup.G16

        first = Signal(range(512 // 16))  # scale of the vOp's first element
        element = dd.index * W
        m.d.comb += first.eq(Mux(g16, element >> 4, element >> 5))
        block = self.scales.payload.data
        decoders = []
        for k in range(max(1, W // 16)):
            m.submodules[f"decoder{k}"] = dec = ScaleDecoder()
            index = first + k
            m.d.comb += [
                dec.format.eq(fmt),
                dec.code.eq(Mux(fmt == ScaleFormat.BF16, block.word_select(index, 16), block.word_select(index, 8))),
            ]
            decoders.append(dec)

        scaled = []
        for j in range(W):
            m.submodules[f"lane{j}"] = lane = BF16Scaler()
            k16, k32 = min(j // 16, len(decoders) - 1), min(j // 32, len(decoders) - 1)
            m.d.comb += [
                lane.value.eq(dd.data[j]),
                lane.scale.eq(Mux(g16, decoders[k16].scale.as_value(), decoders[k32].scale.as_value())),
            ]
            scaled.append(Mux(dd.mask[j], lane.result, 0))

        scaling = fmt != ScaleFormat.NONE
        advance = ~self.out.valid | self.out.ready
        has_scales = ~scaling | self.scales.valid
        m.d.comb += [
            self.dd.ready.eq(advance & has_scales),
            self.scales.ready.eq(advance & scaling & self.dd.valid & dd.last),
        ]
        out = self.out.payload
        with m.If(advance):
            m.d.sync += self.out.valid.eq(self.dd.valid & has_scales)
            with m.If(self.dd.valid & has_scales):
                m.d.sync += out.last.eq(dd.last)
                for j in range(W):
                    m.d.sync += out.data[j].eq(Mux(scaling, scaled[j], dd.data[j]))
        return m
