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

from .dequantizer import DEQUANT_LATENCY
from .expander import EXPANDER_LATENCY
from .layouts import ConfigSignature, out_layout, scale_beat_layout, tile_layout, value_beat_layout
from .params import check_params
from .pipeline import Pipeline
from .prefix_sum import WINDOW_LATENCY, WindowUnit
from .scaler import SCALER_LATENCY

#: Cycles from accepting a tile's bitmask to the handshake of its last chunk, beyond the sum of
#: the dequantization cycles of its vOps (the last of which writes SD): the window unit's, the
#: expander's and the scaling stage's registers. Later tiles follow without gaps.
PIPELINE_FILL = WINDOW_LATENCY + DEQUANT_LATENCY + EXPANDER_LATENCY + SCALER_LATENCY


class Datapath(wiring.Component):
    """A window unit in front of the shared pipeline: the PE's vector path with one input."""

    def __new__(cls, W, L):
        check_params(W, L)  # before the component exists: nothing unused to warn about
        return super().__new__(cls)

    def __init__(self, W, L):
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
        m.submodules.pipeline = pipeline = Pipeline(self.W, self.L)
        m.d.comb += window.sparse.eq(self.cfg.sparse)
        wiring.connect(m, wiring.flipped(self.cfg), pipeline.cfg)
        wiring.connect(m, wiring.flipped(self.tiles), window.tiles)
        wiring.connect(m, window.vops, pipeline.vops)
        wiring.connect(m, wiring.flipped(self.values), pipeline.values)
        wiring.connect(m, wiring.flipped(self.scales), pipeline.scales)
        wiring.connect(m, pipeline.out, wiring.flipped(self.out))
        return m
