"""The shared vector pipeline (paper, section 6.1, item 3): dequantization, expansion and scaling.

    vops ──► DequantStage ──sd──► Expander ──dd──► ScalingStage ──► out
    values ──────┘ (unpacker, LUT array)    scales ───────┘

Takes vOps already computed by a window unit: the complete PE has one window unit per loader in
front of it, the stand-alone ``Datapath`` one.
"""

from amaranth.hdl import Module
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from .dequantizer import DequantStage
from .expander import Expander
from .layouts import ConfigSignature, out_layout, scale_beat_layout, value_beat_layout, vop_layout
from .scaler import ScalingStage


class Pipeline(wiring.Component):
    def __init__(self, W, L):
        self.W, self.L = W, L
        super().__init__({
            "cfg": In(ConfigSignature()),
            "vops": In(stream.Signature(vop_layout(W))),
            "values": In(stream.Signature(value_beat_layout(W, L))),
            "scales": In(stream.Signature(scale_beat_layout())),
            "out": Out(stream.Signature(out_layout(W))),
            "bubble": Out(1),  # see DequantStage
            "waiting": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.dequant = dequant = DequantStage(self.W, self.L)
        m.submodules.expander = expander = Expander(self.W)
        m.submodules.scaler = scaler = ScalingStage(self.W)

        m.d.comb += [
            scaler.scale_format.eq(self.cfg.scale_format),
            scaler.scale_group.eq(self.cfg.scale_group),
            self.bubble.eq(dequant.bubble),
            self.waiting.eq(dequant.waiting),
            dequant.sd_ready_next.eq(expander.sd_ready_next),
        ]
        wiring.connect(m, wiring.flipped(self.cfg), dequant.cfg)
        wiring.connect(m, wiring.flipped(self.vops), dequant.vops)
        wiring.connect(m, wiring.flipped(self.values), dequant.values)
        wiring.connect(m, dequant.sd, expander.sd)
        wiring.connect(m, expander.dd, scaler.dd)
        wiring.connect(m, wiring.flipped(self.scales), scaler.scales)
        wiring.connect(m, scaler.out, wiring.flipped(self.out))
        return m
