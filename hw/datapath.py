"""The DECA vector pipeline (paper, Fig. 10): window unit, dequantization, expansion and scaling.

    tiles ──► WindowUnit ──vops──► DequantStage ──sd──► Expander ──dd──► ScalingStage ──► out
              (prefix_sum)          (dequantizer:         (expander)      (scaler)
                                     unpacker, LUT array)
    values ─────────────────────────────┘                   scales ──────────┘

Inputs per tile, in tile order: one ``tiles`` beat (its bitmask), its value stream as ``values``
beats, and with scaling one ``scales`` beat. Output: 512/W chunks of W BF16 values, ``last`` on
the tile's final chunk. A vOp spends max(1, ceil(Wnd/Lq)) cycles in dequantization and one in
every other stage; ``PIPELINE_FILL`` is the latency of the stages around it.
"""

from amaranth.hdl import Module
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from .dequantizer import DequantStage
from .expander import Expander
from .layouts import ConfigSignature, out_layout, scale_beat_layout, tile_layout, value_beat_layout
from .params import ParameterError, check_params
from .prefix_sum import WindowUnit
from .scaler import ScalingStage

#: Cycles from accepting a tile's bitmask to the handshake of its last chunk, beyond the sum of
#: the dequantization cycles of its vOps: one register each for the bitmask and the vOp in the
#: window unit, DD and the output chunk. Later tiles follow without gaps.
PIPELINE_FILL = 4


class Datapath(wiring.Component):
    def __init__(self, W, L):
        try:
            check_params(W, L)
        except ParameterError:
            self._MustUse__silence = True  # never built, so Amaranth need not warn it went unused
            raise
        self.W, self.L = W, L
        super().__init__({
            "cfg": In(ConfigSignature()),
            "tiles": In(stream.Signature(tile_layout())),
            "values": In(stream.Signature(value_beat_layout(W, L))),
            "scales": In(stream.Signature(scale_beat_layout())),
            "out": Out(stream.Signature(out_layout(W))),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.window = window = WindowUnit(self.W)
        m.submodules.dequant = dequant = DequantStage(self.W, self.L)
        m.submodules.expander = expander = Expander(self.W)
        m.submodules.scaler = scaler = ScalingStage(self.W)

        m.d.comb += [
            window.sparse.eq(self.cfg.sparse),
            scaler.scale_format.eq(self.cfg.scale_format),
            scaler.scale_group.eq(self.cfg.scale_group),
        ]
        wiring.connect(m, wiring.flipped(self.cfg), dequant.cfg)
        wiring.connect(m, wiring.flipped(self.tiles), window.tiles)
        wiring.connect(m, window.vops, dequant.vops)
        wiring.connect(m, wiring.flipped(self.values), dequant.values)
        wiring.connect(m, dequant.sd, expander.sd)
        wiring.connect(m, expander.dd, scaler.dd)
        wiring.connect(m, wiring.flipped(self.scales), scaler.scales)
        wiring.connect(m, scaler.out, wiring.flipped(self.out))
        return m
