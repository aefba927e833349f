"""Unit tests of the DECA PE's Amaranth blocks against the golden model (deca.golden).

Every expected value comes from ``deca.golden`` (``scale_mul``, ``read_codes``) or from plain
Python/NumPy written here from the documented contracts, never from the block under test.
All testbenches are async (``sim.add_testbench``); combinational blocks run without a clock.

The scaler's lanes are checked on every BF16 value by evaluating their netlist with NumPy
(tests/aig.py), and on random values in the Python simulator.
"""

from collections import deque
from fractions import Fraction

import numpy as np
import pytest
from amaranth.hdl import Module, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out
from amaranth.sim import Simulator

from deca.golden.format import Q_BITS, TILE_ELEMS, read_codes
from deca.golden.numerics import scale_mul
from deca.hw.arith import ARITH_STYLES, arith_style, at_least, fast_add
from deca.hw.layouts import ScaleFormat, physical_lanes, vop_layout
from deca.hw.lut_array import LOOKUP_LATENCY, MODE_LATENCY, LUTArray
from deca.hw.params import dequant_lanes
from deca.hw.prefix_sum import WINDOW_LATENCY, WindowUnit, prefix_sums
from deca.hw.scaler import BF16Scaler, ScaleDecoder
from deca.hw.stages import OutputBuffer, RegisteredPorts, RegisterSlice, RegisterQueue, ShiftQueue
from deca.hw.unpacker import READ_LATENCY, CodeUnpacker

from aig import Netlist


# --- helpers ------------------------------------------------------------------------------------


def run(dut, testbench, clocked):
    sim = Simulator(dut)
    if clocked:
        sim.add_clock(1e-6)
    sim.add_testbench(testbench)
    sim.run()


def pack16(words):
    """uint16 words -> one little-endian integer, word i in bits 16i+15..16i."""
    return int.from_bytes(np.asarray(words, "<u2").tobytes(), "little")


def unpack16(value, n):
    """Inverse of ``pack16``."""
    return np.frombuffer(value.to_bytes(2 * n, "little"), "<u2").copy()


def unpack_bytes(value, n):
    return list(value.to_bytes(n, "little"))


def popcount(x):
    return bin(x).count("1")


# --- prefix sums and the window unit ------------------------------------------------------------


class PrefixSums(wiring.Component):
    """``prefix_sums`` on its own: n input bits, the n inclusive sums out (each 8 bits wide)."""

    def __init__(self, n):
        self.n = n
        super().__init__({"bits": In(n), "sums": Out(data.ArrayLayout(8, n))})

    def elaborate(self, platform):
        m = Module()
        self.widths = []
        for j, s in enumerate(prefix_sums(list(self.bits))):
            self.widths.append(len(s))
            m.d.comb += self.sums[j].eq(s)
        return m


@pytest.mark.parametrize("n", [1, 3, 8, 13, 64])
def test_prefix_sums_inclusive_counts(n, rng):
    dut = PrefixSums(n)
    if n <= 8:
        inputs = range(1 << n)  # exhaustive
    else:  # all zero, all ones, and random densities
        inputs = [0, (1 << n) - 1] + [sum(1 << int(j) for j in np.flatnonzero(rng.random(n) < rng.random()))
                                      for _ in range(600)]

    async def tb(ctx):
        for x in inputs:
            ctx.set(dut.bits, x)
            got = unpack_bytes(ctx.get(dut.sums.as_value()), n)
            expected = [popcount(x & ((2 << j) - 1)) for j in range(n)]
            assert got == expected, f"bits {x:#x}"

    run(dut, tb, clocked=False)
    # Every sum is wide enough for its largest value j + 1.
    assert all(w >= (j + 1).bit_length() for j, w in enumerate(dut.widths))


def expected_vops(masks, W, sparse):
    """The vOp descriptors of a sequence of tile masks: (mask, wnd, prefix tuple, index, last)."""
    n = TILE_ELEMS // W
    out = []
    for mask in masks:
        for i in range(n):
            chunk = (mask >> (i * W)) & ((1 << W) - 1) if sparse else (1 << W) - 1
            prefix = tuple(popcount(chunk & ((1 << j) - 1)) for j in range(W))
            out.append((chunk, popcount(chunk), prefix, i, int(i == n - 1)))
    return out


def decode_vop(raw, layout, W):
    v = layout.from_bits(raw)
    return (int(v.mask), int(v.wnd), tuple(int(v.prefix[j]) for j in range(W)), int(v.index), int(v.last))


def random_tile_masks(rng, W, n_tiles):
    """Tile masks built from W-bit chunks: all zero, all ones, single bits and random densities."""
    masks = []
    for _ in range(n_tiles):
        mask = 0
        for i in range(TILE_ELEMS // W):
            kind = rng.integers(5)
            if kind == 0:
                chunk = 0
            elif kind == 1:
                chunk = (1 << W) - 1
            elif kind == 2:
                chunk = 1 << int(rng.integers(W))
            else:
                bits = rng.random(W) < rng.random()
                chunk = sum(1 << j for j in range(W) if bits[j])
            mask |= chunk << (i * W)
        masks.append(mask)
    return masks


async def drive_window_unit(ctx, dut, masks, *, rng=None, stall=0.0, backpressure=0.0):
    """Feed tile masks, collect every vOp handshake; returns (vOps, their cycles, first tile cycle)."""
    W = dut.W
    layout = vop_layout(W)
    expected = len(masks) * (TILE_ELEMS // W)
    vops, cycles, first_tile = [], [], None
    pos = 0
    for cycle in range(20 * expected + 50):
        if len(vops) == expected:
            break
        offer = pos < len(masks) and not (stall and rng.random() < stall)
        ctx.set(dut.tiles.valid, offer)
        if offer:
            ctx.set(dut.tiles.payload.mask, masks[pos])
        ready = not (backpressure and rng.random() < backpressure)
        ctx.set(dut.vops.ready, ready)
        if offer and ctx.get(dut.tiles.ready):
            pos += 1
            if first_tile is None:
                first_tile = cycle
        if ready and ctx.get(dut.vops.valid):
            vops.append(decode_vop(ctx.get(dut.vops.payload.as_value()), layout, W))
            cycles.append(cycle)
        await ctx.tick()
    assert len(vops) == expected, f"only {len(vops)} of {expected} vOps"
    # Nothing more comes out once every tile is done.
    ctx.set(dut.tiles.valid, 0)
    ctx.set(dut.vops.ready, 1)
    for _ in range(3):
        assert not ctx.get(dut.vops.valid), "extra vOp after the last tile"
        await ctx.tick()
    return vops, cycles, first_tile


@pytest.mark.parametrize("back_to_back", [True, False], ids=["back_to_back", "gap"])
@pytest.mark.parametrize("sparse", [1, 0], ids=["sparse", "dense"])
@pytest.mark.parametrize("W", [8, 16, 32, 64])
def test_window_unit_descriptors_back_to_back(W, sparse, back_to_back, rng):
    """Every field of every vOp; one vOp per cycle across tiles when the output is always ready
    (without ``back_to_back``: one cycle between tiles)."""
    if W == 8 and sparse:
        # All 256 masks of one 8-bit vOp, 64 per tile, in random order.
        order = rng.permutation(256)
        masks = [sum(int(c) << (8 * i) for i, c in enumerate(order[64 * t:64 * t + 64])) for t in range(4)]
    else:
        masks = random_tile_masks(rng, W, 4 if W >= 32 else 3)
    masks = masks + [0, (1 << TILE_ELEMS) - 1]
    dut = WindowUnit(W, back_to_back=back_to_back)
    result = {}

    async def tb(ctx):
        ctx.set(dut.sparse, sparse)
        result["run"] = await drive_window_unit(ctx, dut, masks)

    run(dut, tb, clocked=True)
    vops, cycles, first_tile = result["run"]
    expected = expected_vops(masks, W, sparse)
    for k, (got, exp) in enumerate(zip(vops, expected)):
        assert got == exp, f"vOp {k} (tile {k // (TILE_ELEMS // W)}): got {got}, expected {exp}"
    if W == 8 and sparse:
        assert sorted(v[0] for v in vops[:256]) == list(range(256))
    if not sparse:
        assert all(v[1] == W and v[2] == tuple(range(W)) for v in vops)
    # The first vOp WINDOW_LATENCY cycles after its tile, then one per cycle, with no gap between
    # tiles back to back, else one.
    per_tile = TILE_ELEMS // W
    gaps = 0 if back_to_back else 1
    assert first_tile == 0
    assert cycles == [WINDOW_LATENCY + k + gaps * (k // per_tile) for k in range(len(expected))], \
        f"vOp handshake cycles {cycles}"


@pytest.mark.parametrize("back_to_back", [True, False], ids=["back_to_back", "gap"])
@pytest.mark.parametrize("W", [8, 16, 32, 64])
def test_window_unit_backpressure_loses_nothing(W, back_to_back, rng):
    """Random output back-pressure and input stalls: the same vOps, in order, none lost or repeated."""
    n_tiles = {8: 3, 16: 4, 32: 6, 64: 8}[W]
    masks = random_tile_masks(rng, W, n_tiles)
    dut = WindowUnit(W, back_to_back=back_to_back)
    result = {}

    async def tb(ctx):
        ctx.set(dut.sparse, 1)
        half = n_tiles // 2
        first = await drive_window_unit(ctx, dut, masks[:half], rng=rng, stall=0.3, backpressure=0.4)
        second = await drive_window_unit(ctx, dut, masks[half:], rng=rng, stall=0.2, backpressure=0.7)
        result["vops"] = first[0] + second[0]

    run(dut, tb, clocked=True)
    assert result["vops"] == expected_vops(masks, W, 1)


# --- scaler -------------------------------------------------------------------------------------


class ScaledLane(wiring.Component):
    """A scale decoder feeding one BF16Scaler lane, as the scaling stage wires them."""

    format: In(ScaleFormat)
    code: In(16)
    value: In(16)
    result: Out(16)

    def elaborate(self, platform):
        m = Module()
        m.submodules.decoder = dec = ScaleDecoder()
        m.submodules.lane = lane = BF16Scaler()
        m.d.comb += [dec.format.eq(self.format), dec.code.eq(self.code), lane.value.eq(self.value),
                     lane.scale.eq(dec.scale), self.result.eq(lane.result)]
        return m


class ScalerBank(wiring.Component):
    """``lanes`` ScaledLanes for the Python simulator, all I/O through wide signals: lane i is word i
    of ``codes``, ``values`` and ``results``."""

    def __init__(self, lanes):
        self.lanes = lanes
        super().__init__({
            "format": In(ScaleFormat),
            "codes": In(16 * lanes),
            "values": In(16 * lanes),
            "results": Out(16 * lanes),
        })

    def elaborate(self, platform):
        m = Module()
        for i in range(self.lanes):
            m.submodules[f"lane{i}"] = lane = ScaledLane()
            m.d.comb += [lane.format.eq(self.format), lane.code.eq(self.codes.word_select(i, 16)),
                         lane.value.eq(self.values.word_select(i, 16)), self.results.word_select(i, 16).eq(lane.result)]
        return m


# Every BF16 value is multiplied by every scale of 8 bits (E8M0, E4M3: all 256 codes) and, for BF16
# scales, by the core set below, the subset after it and 256 random ones: on the lane's and-inverter
# graph (tests/aig.py), whose NumPy evaluation takes about 2 s per format where the Python simulator
# (about 45 us per lane and input) would take 13 to 14 minutes. The core sets hold
# the numerically demanding scales: rounding ties, overflow to Inf and underflow to zero after
# rounding, Inf (Inf x 0 and Inf x DAZ-subnormal), zeros, subnormals, NaN.
CORE_SCALES = {
    "bf16": [
        0x3F81,  # 1.0078125: ties (x 1.5), x 0x7F7E overflows to Inf only by rounding
        0x3F01,  # 0.50390625: ties, x 0x00FE rounds up to the smallest normal, underflow to zero
        0xBFFF,  # -1.9921875: carries out of the significand
        0x3F7F,  # 0.99609375
        0xC2B5,  # -90.5
        0x7F7F,  # largest finite
        0x0080,  # smallest normal
        0x7F80,  # +Inf
        0x8000,  # -0
        0x8001,  # negative subnormal: -0 (DAZ)
        0x007F,  # largest subnormal: +0 (DAZ)
        0x7FC0,  # quiet NaN
    ],
    "e8m0": [0x00, 0x01, 0x02, 0x40, 0x7E, 0x7F, 0x80, 0x81, 0xC0, 0xFD, 0xFE, 0xFF],
    "e4m3": [
        0x39,  # 1.125: ties
        0x31,  # 0.5625: ties, round up to the smallest normal
        0xBF,  # -1.875
        0x7E,  # 448, largest finite
        0x08,  # 2^-6, smallest normal
        0x01,  # 2^-9, smallest subnormal
        0x05,  # 5 x 2^-9
        0x06,  # 6 x 2^-9
        0x87,  # -7 x 2^-9
        0x00,  # +0
        0x80,  # -0
        0x7F,  # NaN
    ],
}
SUBSET_SCALES = {
    "bf16": [
        0x0000,  # +0
        0x0001, 0x0040, 0x807F,  # subnormals (DAZ)
        0xFFC0, 0x7FFF,  # quiet NaNs
        0x7F81, 0xFF81, 0x7FBF, 0xFFA0,  # signalling NaNs
        0xFF80,  # -Inf
        0xFF7F, 0x8080, 0x0081, 0x00FF,  # -largest finite, -smallest normal, just above it
        0x3F80, 0xBF80, 0x4000, 0x7F00, 0x0100, 0x4049, 0x3FC1, 0x5F80, 0x2000,
    ],
    "e8m0": [0x03, 0x3F, 0x60, 0xA0, 0xFC],
    "e4m3": [
        0xFF, 0xFE, 0x88, 0x38, 0x3F, 0x78, 0x77, 0xB9,
        0x02, 0x03, 0x04, 0x07, 0x81, 0x82, 0x83, 0x84, 0x85, 0x86,  # subnormals
    ],
}
RANDOM_BF16_SCALES = 256
HW_FORMAT = {"bf16": ScaleFormat.BF16, "e8m0": ScaleFormat.E8M0, "e4m3": ScaleFormat.E4M3}


@pytest.fixture(scope="module")
def lane_netlist():
    return Netlist(ScaledLane())


def scales_under_test(fmt, rng):
    if fmt != "bf16":
        return list(range(256))
    return CORE_SCALES[fmt] + SUBSET_SCALES[fmt] + [int(x) for x in rng.integers(0, 1 << 16, RANDOM_BF16_SCALES)]


@pytest.mark.parametrize("fmt", ["bf16", "e8m0", "e4m3"])
def test_scaler_bit_exact_against_scale_mul(fmt, rng, lane_netlist):
    values = np.arange(1 << 16, dtype=np.uint16)
    scales = scales_under_test(fmt, rng)
    for first in range(0, len(scales), 16):  # 16 scales x 65,536 values per evaluation
        group = scales[first:first + 16]
        got = lane_netlist.evaluate(format=np.array([HW_FORMAT[fmt].value]), code=np.repeat(group, len(values)),
                                    value=np.tile(values, len(group)))["result"].reshape(len(group), -1)
        for scale, row in zip(group, got):
            expected = scale_mul(values, scale, fmt)
            bad = np.flatnonzero(row != expected)
            assert not len(bad), (
                f"{fmt} scale {scale:#06x}: {len(bad)} of {len(values)} values wrong, e.g. "
                + ", ".join(f"{values[i]:#06x} -> {int(row[i]):#06x} (expected {expected[i]:#06x})" for i in bad[:6]))


def test_scaler_lanes_in_the_python_simulator(rng):
    """The lanes as the Python simulator runs them (the PE's tests and users' simulations) agree with
    the golden model on random scales and values of every format."""
    dut = ScalerBank(16)
    cases = []

    async def tb(ctx):
        for fmt in ("bf16", "e8m0", "e4m3") * 4:
            codes = rng.integers(0, 1 << (16 if fmt == "bf16" else 8), dut.lanes).astype(np.uint16)
            values = rng.integers(0, 1 << 16, dut.lanes).astype(np.uint16)
            ctx.set(dut.format, HW_FORMAT[fmt])
            ctx.set(dut.codes, pack16(codes))
            ctx.set(dut.values, pack16(values))
            cases.append((fmt, codes, values, unpack16(ctx.get(dut.results), dut.lanes)))

    run(dut, tb, clocked=False)
    for fmt, codes, values, got in cases:
        expected = [scale_mul(v, int(c), fmt) for c, v in zip(codes, values)]
        assert list(got) == expected, (fmt, [hex(c) for c in codes], [hex(v) for v in values])


def test_registered_ports_delay_each_way_by_one_cycle(rng):
    """A block synthesized alone gets a register on every port (``RegisteredPorts``): a lane's
    result appears two clock edges after its inputs, and is still the golden one."""
    dut = RegisteredPorts(ScaledLane())
    cases = [(int(c), int(v)) for c, v in zip(rng.integers(0, 1 << 16, 8), rng.integers(0, 1 << 16, 8))]
    got = []

    async def tb(ctx):
        ctx.set(dut.format, ScaleFormat.BF16)
        for k, (code, value) in enumerate(cases + [(0, 0)] * 2):
            ctx.set(dut.code, code)
            ctx.set(dut.value, value)
            await ctx.tick()
            if k >= 1:
                got.append(ctx.get(dut.result))

    run(dut, tb, clocked=True)
    # Case k is taken in at edge k and its result registered at edge k + 1.
    assert got[:len(cases)] == [int(scale_mul(np.uint16(v), c, "bf16")) for c, v in cases]


def exact_products(values, scale, fmt):
    """Exact float64 products (DAZ) of BF16 patterns and a scale code; NaN where either is NaN."""
    from deca.golden.numerics import bf16_to_f64_daz, scale_values
    with np.errstate(invalid="ignore"):
        return bf16_to_f64_daz(values) * scale_values(np.array(scale), fmt)


def test_core_scales_hit_rounding_corner_cases():
    """The exhaustively tested scales do produce exact ties, overflow by rounding, underflow to zero
    and rounding up to the smallest normal (checked on exact float64 products, one tie by Fraction)."""
    values = np.arange(1 << 16, dtype=np.uint16)
    max_finite = (2 - 2.0**-7) * 2.0**127
    counts = {}
    for fmt, scales in CORE_SCALES.items():
        for scale in scales:
            p = np.abs(exact_products(values, scale, fmt))
            r = scale_mul(values, scale, fmt) & 0x7FFF
            finite = np.isfinite(p) & (p > 0)
            bits = p.view(np.uint64)
            tie = finite & ((bits & ((1 << 45) - 1)) == (1 << 44))
            counts[fmt, "tie"] = counts.get((fmt, "tie"), 0) + int(tie.sum())
            for name, hit in (
                ("overflow by rounding", finite & (p > max_finite) & (p < 2.0**128) & (r == 0x7F80)),
                ("underflow to zero", finite & (p < 2.0**-126) & (r == 0)),
                ("rounded up to the smallest normal", finite & (p < 2.0**-126) & (r == 0x0080)),
                ("overflow", finite & (p >= 2.0**128) & (r == 0x7F80)),
            ):
                counts[name] = counts.get(name, 0) + int(hit.sum())
    assert counts["bf16", "tie"] > 0 and counts["e4m3", "tie"] > 0, counts
    for name in ("overflow by rounding", "underflow to zero", "rounded up to the smallest normal", "overflow"):
        assert counts[name] > 0, (name, counts)
    # One tie by hand: 1.5 x 1.0078125 = 1.51171875, halfway between 0x3FC1 and 0x3FC2 -> even 0x3FC2.
    exact = Fraction(3, 2) * Fraction(129, 128)
    assert exact == (Fraction(0xC1, 128) + Fraction(0xC2, 128)) / 2
    assert scale_mul(np.uint16(0x3FC0), 0x3F81, "bf16") == 0x3FC2
    assert scale_mul(np.uint16(0x7F7E), 0x3F81, "bf16") == 0x7F80  # 1.99988 x 2^127 -> Inf
    assert scale_mul(np.uint16(0x00FE), 0x3F01, "bf16") == 0x0080  # 0.99994 x 2^-126 -> 2^-126


# --- LUT array ----------------------------------------------------------------------------------


class LUTModel:
    """The sub-LUT contents and lane reads of ``deca.hw.lut_array``'s docstring table.

    Every big LUT holds the same copy, so one 4 x 64 array models all of them; ``None`` = unknown.
    """

    def __init__(self):
        self.sub = [[None] * 64 for _ in range(4)]

    def write(self, q, addr, value):
        if q == 16:  # no replica is read with Q = 16; what a write does is not documented
            self.sub = [[None] * 64 for _ in range(4)]
        elif q == 8:
            self.sub[addr // 64][addr % 64] = value
        elif q == 7:
            if addr < 128:
                self.sub[addr // 64][addr % 64] = self.sub[2 + addr // 64][addr % 64] = value
        elif addr < 64:
            for s in range(4):
                self.sub[s][addr] = value

    def read(self, q, lane, code):
        if q == 16:
            return code
        if q == 8:
            return self.sub[code // 64][code % 64]
        if q == 7:
            return self.sub[2 * (lane % 2) + code // 64][code % 64]
        return self.sub[lane % 4][code % 64]


@pytest.mark.parametrize("W, L", [(64, 1), (64, 2), (64, 4), (8, 4)])
def test_lut_array_lookup_every_q(W, L, rng):
    lanes = physical_lanes(W, L)
    dut = LUTArray(L, lanes)
    model = LUTModel()
    checked = {"lanes": 0, "switch": 0, "readback": 0}

    def meaningful(q):
        return min(dequant_lanes(q, L), lanes)

    async def write(ctx, q, addr, value):
        ctx.set(dut.cfg.lut_we, 1)
        ctx.set(dut.cfg.lut_addr, addr)
        ctx.set(dut.cfg.lut_data, value)
        await ctx.tick()
        ctx.set(dut.cfg.lut_we, 0)
        model.write(q, addr, value)

    async def check(ctx, q, codes, expected):
        """codes: (evals, lq); expected: (evals, lq) or None entries to skip. A lookup's values come
        LOOKUP_LATENCY cycles after its codes, each a cycle after ``en_next`` was high, and hold while
        it is low; a write lands a cycle after its port cycle."""
        lq = codes.shape[1]
        await ctx.tick().repeat(MODE_LATENCY)  # the mode registered from cfg.q
        for e in range(len(codes)):
            words = rng.integers(0, 1 << 16, lanes).astype(np.uint16)  # garbage on unused lanes
            words[:lq] = codes[e]
            ctx.set(dut.codes.as_value(), pack16(words))
            ctx.set(dut.en_next, 1)
            await ctx.tick()
            for stage in range(LOOKUP_LATENCY):  # the lookup's stages
                ctx.set(dut.en_next, stage < LOOKUP_LATENCY - 1)
                await ctx.tick()
                ctx.set(dut.codes.as_value(), pack16(rng.integers(0, 1 << 16, lanes).astype(np.uint16)))
            if rng.random() < 0.3:
                await ctx.tick()  # held
            got = unpack16(ctx.get(dut.values.as_value()), lanes)[:lq]
            for i in range(lq):
                if expected[e][i] is not None:
                    assert got[i] == expected[e][i], (
                        f"Q={q} lane {i} code {codes[e][i]:#x}: got {got[i]:#06x}, expected {expected[e][i]:#06x}")
                    checked["lanes"] += 1

    async def tb(ctx):
        order = [int(q) for q in rng.permutation(Q_BITS)]
        prev = None
        for q in order + order[:1]:
            lq = meaningful(q)
            ctx.set(dut.cfg.q, q)
            if prev is not None and prev != 16 and q != 16:
                # Q changed, LUT not yet rewritten: each lane reads what the docstring's layout of
                # the previous Q left in its sub-LUT (the reason the LUT must be rewritten).
                codes = rng.integers(0, 1 << q, (32, lq))
                expected = [[model.read(q, i, int(c)) for i, c in enumerate(row)] for row in codes]
                await check(ctx, q, codes, expected)
                checked["switch"] += 1
            prev = q
            # A full random 256-entry logical LUT, one write per cycle, in random order: with
            # Q <= 7 the entries the mode cannot hold must be dropped, not alias smaller ones.
            lut = rng.integers(0, 1 << 16, 256).astype(np.uint16)
            for addr in rng.permutation(256):
                await write(ctx, q, int(addr), int(lut[addr]))
            size = 1 << min(q, 8)
            capacity = {7: 128, 8: 256}.get(q, 64)
            if q != 16:
                # The readback (LUT_DATA): the entry at ``lut_addr`` a cycle before, once the last
                # write landed; 0 past the entries the mode holds.
                await ctx.tick()
                for addr in rng.integers(0, 256, 24):
                    ctx.set(dut.cfg.lut_addr, int(addr))
                    await ctx.tick()
                    assert ctx.get(dut.cfg.lut_rdata) == (lut[addr] if addr < capacity else 0), (q, int(addr))
                    checked["readback"] += 1
            if q == 16:
                codes = rng.integers(0, 1 << 16, (64, lq))
                codes[0], codes[1] = 0, 0xFFFF
                expected = codes
            else:
                # Every code on every lane (a different order per lane).
                codes = np.stack([rng.permutation(size) for _ in range(lq)], axis=1)
                expected = lut[codes]
            await check(ctx, q, codes, expected.tolist())
            if q == 16:
                continue
            # Rewriting one entry reaches every lane (every replica); the others keep their values.
            for _ in range(3):
                e = int(rng.integers(size))
                lut[e] = rng.integers(1 << 16)
                await write(ctx, q, e, int(lut[e]))
                other = int(rng.integers(size))
                codes = np.array([[e] * lq, [other] * lq])
                await check(ctx, q, codes, lut[codes].tolist())
            # Entries the mode cannot hold are dropped.
            if capacity < 256:
                e = int(rng.integers(min(size, capacity)))
                await write(ctx, q, e + capacity * int(rng.integers(1, 256 // capacity)), 0xDEAD)
                codes = np.array([[e] * lq])
                await check(ctx, q, codes, lut[codes].tolist())

    run(dut, tb, clocked=True)
    assert checked["switch"] >= 5 and checked["lanes"] > 0 and checked["readback"] > 0


@pytest.mark.parametrize("q", [8, 7])
def test_lut_array_loads_only_the_address_of_the_sub_lut_a_code_is_in(q, rng):
    """With Q = 8 a lookup loads the address register of the sub-LUT of its code's bits 6 and 7,
    with Q = 7 that of the pair's half of its bit 6; every other sub-LUT keeps its address (its
    read multiplexer stays still)."""
    W, L = 8, 4
    lanes = physical_lanes(W, L)
    dut = LUTArray(L, lanes)
    counted = {"loaded": 0, "kept": 0}

    def reader(b, s):  # the lane whose code may read sub-LUT s of big LUT b, and the sub-LUT of a code
        return (b, lambda code: code >> 6) if q == 8 else (2 * b + s // 2, lambda code: 2 * (s // 2) + (code >> 6))

    async def tb(ctx):
        ctx.set(dut.cfg.q, q)
        ctx.set(dut.en_next, 1)
        await ctx.tick().repeat(MODE_LATENCY)
        for _ in range(64):
            words = rng.integers(0, 1 << 16, lanes).astype(np.uint16)  # garbage on unused lanes
            lq = dequant_lanes(q, L)
            words[:lq] = rng.integers(0, 1 << q, lq)
            before = [[ctx.get(a) for a in row] for row in dut.addresses]
            ctx.set(dut.codes.as_value(), pack16(words))
            await ctx.tick()
            for b in range(L):
                for s in range(4):
                    lane, sub_lut = reader(b, s)
                    got = ctx.get(dut.addresses[b][s])
                    if sub_lut(int(words[lane])) == s:
                        assert got == words[lane] % 64, (b, s, lane)
                        counted["loaded"] += 1
                    else:
                        assert got == before[b][s], f"Q={q}: sub-LUT {s} of big LUT {b} loaded a code it does not hold"
                        counted["kept"] += 1

    run(dut, tb, clocked=True)
    assert counted["loaded"] > 0 and counted["kept"] > 0


# --- code unpacker ------------------------------------------------------------------------------


def build_stream(tiles):
    """Byte stream of tiles given as (prefix bits, codes, q): ``prefix`` 1-bit codes, then Q-bit
    codes, LSB first, each tile padded with zeros to a whole byte (deca.golden.format)."""
    out, starts = [], []
    for prefix, codes, q in tiles:
        nbits = len(prefix) + len(codes) * q
        bits = np.zeros(-(-nbits // 8) * 8, np.uint8)
        bits[:len(prefix)] = prefix
        for b in range(q):
            bits[len(prefix) + q * np.arange(len(codes)) + b] = (np.asarray(codes, np.int64) >> b) & 1
        starts.append(8 * sum(len(o) for o in out))
        out.append(np.packbits(bits, bitorder="little"))
    return out, starts


@pytest.mark.parametrize("q", Q_BITS)
#: The smallest and the default design; the widest (a third of the file's time) under -m slow.
@pytest.mark.parametrize("W, L", [(8, 4), (32, 8), pytest.param(64, 16, marks=pytest.mark.slow)],
                         ids=["8-4", "32-8", "64-16"])
def test_code_unpacker_against_read_codes(W, L, q, rng):
    """The unpacker read as the dequantization stage reads it: every starting bit offset 0..7 (o
    one-bit codes read with Q = 1 before the tile's Q-bit codes), random beat cuts with garbage past
    ``nbytes``, random input stalls and read stalls (``en_next`` low), random ``n``, the read pointer
    rounded up to a byte after each tile's codes. Codes are read only up to ``wp``, and each read's
    codes, READ_LATENCY read cycles later, are the stream's (``read_codes``)."""
    dut = CodeUnpacker(W, L)
    lanes, beat_bits, size = dut.lanes, dut.beat_bits, dut.size
    beat_bytes = beat_bits // 8
    tiles = []
    for o in np.concatenate([rng.permutation(8), rng.permutation(8)]):
        # A tile whose codes start at bit offset o, then a plain one (possibly empty).
        n = int(rng.choice([1, int(rng.integers(2, 40)), int(rng.integers(40, 200))], p=[.1, .45, .45]))
        tiles.append((rng.integers(0, 2, int(o)), rng.integers(0, 1 << q, n), q))
        n = int(rng.choice([0, 1, int(rng.integers(2, 40)), int(rng.integers(40, 200))], p=[.1, .1, .4, .4]))
        tiles.append((np.zeros(0, np.int64), rng.integers(0, 1 << q, n), q))
    tiles.append((np.zeros(0, np.int64), rng.integers(0, 1 << q, TILE_ELEMS), q))  # a full tile
    streams, starts = build_stream(tiles)
    stream = np.concatenate(streams)
    total = 8 * len(stream)

    # A tile's stream cut into beats (full most of the time) with random bytes past nbytes.
    beats, beat_tile = [], []
    for t, s in enumerate(streams):
        pos = 0
        while pos < len(s):
            cut = beat_bytes if rng.random() < 0.5 else int(rng.integers(1, beat_bytes + 1))
            piece = s[pos:pos + cut]
            garbage = rng.integers(0, 256, beat_bytes).astype(np.uint8)
            garbage[:len(piece)] = piece
            beats.append(int.from_bytes(garbage.tobytes(), "little") | len(piece) << beat_bits)
            beat_tile.append(t)
            pos += len(piece)
    # Half the tiles' beats wait until the reader reaches the tile, starving it.
    held = rng.random(len(tiles)) < 0.5
    # The reads in order, (tile, stream bit, Q, n); after a tile's codes its padding, (tile, bit, None, bits).
    reads = []
    for t, (prefix, codes, tq) in enumerate(tiles):
        pos = starts[t]
        for cq, count in ((1, len(prefix)), (tq, len(codes))):
            done = 0
            while done < count:
                most = min(count - done, min(dequant_lanes(cq, L), lanes))
                n = most if rng.random() < 0.5 else int(rng.integers(1, most + 1))
                reads.append((t, pos, cq, n))
                pos += n * cq
                done += n
        reads.append((t, pos, None, -pos % 8))
    wrap = 2 * size  # pointers count bits modulo twice the buffer
    stats = {"waited": 0, "codes": 0, "offsets": set()}

    async def tb(ctx):
        beat, ptr, r = 0, 0, 0
        en_next = True  # the enable after reset
        pipe = [None] * READ_LATENCY  # the reads in the read stages, the one whose codes are out first
        cycles, limit = 0, 1000 + 50 * (len(beats) + len(reads))
        while r < len(reads) or any(pipe):
            if pipe[0] is not None:
                t, pos, cq, n = pipe[0]
                ctx.set(dut.is_q, [1 << Q_BITS.index(cq)] * dut.is_q_copies)
                got = unpack16(ctx.get(dut.codes.as_value()), lanes)[:n]
                expected = read_codes(stream, pos + cq * np.arange(n), cq)
                assert np.array_equal(got, expected), (
                    f"tile {t} Q={cq} bit {pos}: got {got.tolist()}, expected {expected.tolist()}")
                stats["codes"] += n
                if cq == q and pos == starts[t] + len(tiles[t][0]):
                    stats["offsets"].add(pos % 8)
            t = reads[r][0] if r < len(reads) else len(tiles)
            offer = (beat < len(beats) and rng.random() >= 0.3
                     and not (held[beat_tile[beat]] and beat_tile[beat] > t))
            ctx.set(dut.values.valid, offer)
            if offer:
                ctx.set(dut.values.payload.as_value(), beats[beat])
            en, en_next = en_next, rng.random() < 0.8  # the read stages' enable is decided a cycle ahead
            take, step = False, 0
            if en and r < len(reads):
                _, pos, cq, n = reads[r]
                step = n * cq if cq else n
                buffered = (ctx.get(dut.wp) - ptr) % wrap
                assert buffered <= min(size, total - pos), f"wp claims {buffered} bits from bit {pos}"
                if cq is None or buffered >= step:
                    take = rng.random() < 0.9
                else:
                    stats["waited"] += 1
            ctx.set(dut.en_next, en_next)
            ctx.set(dut.ptr, ptr)
            ctx.set(dut.take, take)
            ctx.set(dut.next_ptr, (ptr + step) % wrap)
            accepted = offer and ctx.get(dut.values.ready)
            await ctx.tick()
            cycles += 1
            assert cycles < limit, f"stuck at read {r} of {len(reads)}, beat {beat} of {len(beats)}"
            beat += accepted
            if en:
                pipe = [*pipe[1:], reads[r] if take and reads[r][2] else None]
            if take:
                ptr = (ptr + step) % wrap
                r += 1
        assert beat == len(beats) and ptr == total % wrap and ctx.get(dut.wp) == ptr

    run(dut, tb, clocked=True)
    assert stats["waited"] > 0 and stats["codes"] > 0
    # Some tile's first Q-bit code was read at every bit offset 0..7.
    assert stats["offsets"] == set(range(8)), stats["offsets"]


# --- register slice -----------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["skid", "no_skid", "output_buffer"])
def test_register_slice_passes_every_beat_in_order_with_ready_from_a_register(kind, rng):
    """Random valid and ready on both sides: the beats come out in order, none lost or repeated;
    ``i.ready`` never follows ``o.ready`` in the same cycle; always ready, one beat a cycle (a
    RegisterSlice with its skid register, an OutputBuffer) or one every other cycle (no skid)."""
    dut = OutputBuffer(16) if kind == "output_buffer" else RegisterSlice(16, skid=kind == "skid")
    beats = [int(v) for v in rng.integers(0, 1 << 16, 200)]
    got, rate = [], {}

    async def tb(ctx):
        sent, cycle, taken = 0, 0, []
        while len(got) < len(beats):
            free_run = cycle >= 150  # after the random part: both sides always willing
            valid = sent < len(beats) and (free_run or rng.random() < 0.7)
            ctx.set(dut.i.valid, valid)
            ctx.set(dut.i.payload, beats[sent] if valid else 0)
            ready_before = ctx.get(dut.i.ready)
            ctx.set(dut.o.ready, 1 - ready_before)  # flip o.ready: i.ready must not move with it
            assert ctx.get(dut.i.ready) == ready_before, f"cycle {cycle}: i.ready follows o.ready"
            ctx.set(dut.o.ready, free_run or rng.random() < 0.6)
            if ctx.get(dut.o.valid) and ctx.get(dut.o.ready):
                got.append(ctx.get(dut.o.payload))
                taken.append(cycle)
            if valid and ctx.get(dut.i.ready):
                sent += 1
            await ctx.tick()
            cycle += 1
            assert cycle < 2000, "the slice stalls"
        steady = [t for t in taken if t >= 160]
        rate["gaps"] = {b - a for a, b in zip(steady, steady[1:])}

    run(dut, tb, clocked=True)
    assert got == beats
    assert rate["gaps"] == ({2} if kind == "no_skid" else {1}), rate


@pytest.mark.parametrize("queue", [RegisterQueue, ShiftQueue])
@pytest.mark.parametrize("depth", [1, 2, 4, 11])
def test_register_queue_is_a_fifo_with_ready_from_registers(queue, depth, rng):
    """Random writes and reads against a Python deque: every entry comes out in order, a write is
    readable in the next cycle, the queue fills to ``depth``, and neither ``w_rdy`` nor ``r_rdy``
    moves with ``w_en`` or ``r_en`` in the same cycle; a ShiftQueue's head copy is its head."""
    dut = queue(16, depth)
    model, got = deque(), []

    async def tb(ctx):
        levels = set()
        for cycle in range(600):
            write, read = rng.random() < 0.55, rng.random() < 0.5
            value = int(rng.integers(1 << 16))
            rdys = ctx.get(dut.w_rdy), ctx.get(dut.r_rdy)
            for w, r in ((1, 1), (write, read)):
                ctx.set(dut.w_en, w)
                ctx.set(dut.r_en, r)
                assert (ctx.get(dut.w_rdy), ctx.get(dut.r_rdy)) == rdys, f"cycle {cycle}: a ready follows an enable"
            ctx.set(dut.w_data, value)
            assert rdys == (len(model) < depth, len(model) > 0) and ctx.get(dut.level) == len(model), cycle
            levels.add(len(model))
            if read and model:
                assert ctx.get(dut.r_data) == model.popleft(), f"cycle {cycle}"
                got.append(cycle)
            if queue is ShiftQueue:
                assert ctx.get(dut.r_copy) == ctx.get(dut.r_data), f"cycle {cycle}: the head's copy differs"
            if write and rdys[0]:
                model.append(value)
            await ctx.tick()
        assert levels == set(range(depth + 1)), levels

    run(dut, tb, clocked=True)
    assert len(got) > 100


# --- arithmetic ---------------------------------------------------------------------------------


@pytest.mark.parametrize("style", ARITH_STYLES)
@pytest.mark.parametrize("signed", [False, True])
def test_at_least_compares_every_pair_of_mixed_width_operands(signed, style):
    m = Module()
    a, b, ge = Signal(9), Signal(3), Signal()  # 9 bits: several levels of the tree of halves
    with arith_style(style):
        m.d.comb += ge.eq(at_least(a, b, signed=signed))

    def value(bits, width):
        return bits - (1 << width) if signed and bits >> (width - 1) else bits

    async def bench(ctx):
        for x in range(1 << 9):
            for y in range(1 << 3):
                ctx.set(a, x)
                ctx.set(b, y)
                assert ctx.get(ge) == (value(x, 9) >= value(y, 3)), (x, y)

    run(m, bench, clocked=False)


@pytest.mark.parametrize("style", ARITH_STYLES)
@pytest.mark.parametrize("spread", [False, True], ids=["sklansky", "kogge_stone"])
def test_fast_add_adds_every_pair_with_and_without_carry(spread, style):
    m = Module()
    a, b, c, total = Signal(7), Signal(5), Signal(), Signal(8)  # 7 bits: the top level reaches over a partial block
    with arith_style(style):
        m.d.comb += total.eq(fast_add(m, a, b, c, spread=spread))

    async def bench(ctx):
        for x in range(1 << 7):
            for y in range(1 << 5):
                for z in (0, 1):
                    ctx.set(a, x)
                    ctx.set(b, y)
                    ctx.set(c, z)
                    assert ctx.get(total) == x + y + z, (x, y, z)

    run(m, bench, clocked=False)
