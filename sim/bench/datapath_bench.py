"""Testbench pieces for the DECA datapath on the Amaranth simulator.

``TileJob`` turns a golden tile into the datapath's input beats and the output chunks and cycle
count the golden model and the bubble rule predict; ``run_datapath`` drives a ``Datapath``
cycle by cycle, optionally stalling inputs and back-pressuring the output at random.
"""

from dataclasses import dataclass

import numpy as np

from deca.golden.format import TILE_ELEMS
from deca.golden.matrix import decompress_tile
from deca.hw.layouts import config_fields, value_beat_bits
from deca.sim.model.bubbles import tile_cycles


@dataclass
class TileJob:
    """One tile's inputs (as integers in the payload bit layouts) and expected results."""

    mask: int
    value_beats: list  # [(data, nbytes)]
    scale_beat: int | None
    chunks: np.ndarray  # (512/W, W) uint16: the golden output
    cycles: int  # dequantization cycles: sum over vOps of max(1, ceil(Wnd / Lq))

    @classmethod
    def from_matrix(cls, cm, t, W, L):
        cfg = cm.config
        values, mask, scales = cm.tile_streams(t)
        beat_bytes = value_beat_bits(W, L) // 8
        beats = [(int.from_bytes(values[i:i + beat_bytes], "little"), len(values[i:i + beat_bytes]))
                 for i in range(0, len(values), beat_bytes)]
        return cls(
            mask=int.from_bytes(mask, "little"),
            value_beats=beats,
            scale_beat=int.from_bytes(scales, "little") if cfg.scale_format else None,
            chunks=decompress_tile(values, mask, scales, cfg).reshape(-1, W),
            cycles=tile_cycles(mask, cfg.q_bits, W, L),
        )


async def configure(ctx, dut, cfg, lut_entries=None):
    """Set Q, mode and scaling, then write the LUT (all entries the codebook uses, one per cycle)."""
    for name, value in config_fields(cfg).items():
        ctx.set(getattr(dut.cfg, name), value)
    if cfg.q_bits == 16:
        return
    ctx.set(dut.cfg.lut_we, 1)
    for addr in range(cfg.lut_size) if lut_entries is None else lut_entries:
        ctx.set(dut.cfg.lut_addr, addr)
        ctx.set(dut.cfg.lut_data, int(cfg.lut[addr]))
        await ctx.tick()
    ctx.set(dut.cfg.lut_we, 0)


class _Source:
    """Offers a list of raw payloads on a stream, dropping ``valid`` at random with ``stall``."""

    def __init__(self, port, items, rng, stall):
        self.port, self.items, self.rng, self.stall = port, list(items), rng, stall
        self.pos = 0

    def present(self, ctx):
        offer = self.pos < len(self.items) and not (self.stall and self.rng.random() < self.stall)
        ctx.set(self.port.valid, offer)
        if offer:
            ctx.set(self.port.payload.as_value(), self.items[self.pos])

    def advance(self, ctx):
        fired = ctx.get(self.port.valid) and ctx.get(self.port.ready)
        self.pos += fired
        return fired


@dataclass
class DatapathRun:
    chunks: np.ndarray  # (n, W) uint16, in output order
    lasts: np.ndarray  # (n,) bool
    out_cycles: np.ndarray  # cycle of each output handshake
    first_tile_cycle: int  # cycle of the first ``tiles`` handshake


async def run_datapath(ctx, dut, jobs, *, rng=None, stall=0.0, backpressure=0.0, max_cycles=None):
    """Stream ``jobs`` through ``dut`` and collect every output chunk with its cycle number."""
    W = dut.W
    vb = value_beat_bits(W, dut.L)
    sources = [
        _Source(dut.tiles, [j.mask for j in jobs], rng, stall),
        _Source(dut.values, [d | n << vb for j in jobs for d, n in j.value_beats], rng, stall),
        _Source(dut.scales, [j.scale_beat for j in jobs if j.scale_beat is not None], rng, stall),
    ]
    expected = len(jobs) * (TILE_ELEMS // W)
    limit = max_cycles or 64 + 8 * sum(j.cycles for j in jobs) * (1 + int(4 * (stall + backpressure)))
    raw, cycles, first_tile = [], [], None
    for cycle in range(limit):
        if len(raw) == expected:
            break
        for s in sources:
            s.present(ctx)
        ready = not (backpressure and rng.random() < backpressure)
        ctx.set(dut.out.ready, ready)
        if sources[0].advance(ctx) and first_tile is None:
            first_tile = cycle
        for s in sources[1:]:
            s.advance(ctx)
        if ready and ctx.get(dut.out.valid):
            raw.append(ctx.get(dut.out.payload.as_value()))
            cycles.append(cycle)
        await ctx.tick()
    else:
        raise TimeoutError(f"datapath produced {len(raw)} of {expected} chunks in {limit} cycles")
    data_mask = (1 << (16 * W)) - 1
    words = np.frombuffer(b"".join((r & data_mask).to_bytes(2 * W, "little") for r in raw), "<u2").reshape(-1, W)
    lasts = np.array([r >> (16 * W) for r in raw], bool)
    return DatapathRun(words, lasts, np.array(cycles), first_tile)
