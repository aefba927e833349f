"""Every block of the PE that can be generated, linted and synthesized on its own (``deca generate
--design NAME``, ``deca synth --design NAME``), as it is built inside the PE of a design (W, L and
the PE's parameters): the unit of test and of synthesis is the block the paper names."""

from dataclasses import dataclass
from typing import Callable

from deca.golden.format import MASK_BYTES

from .datapath import Datapath
from .dequantizer import DequantStage
from .expander import Expander
from .layouts import LINE_BYTES, physical_lanes, sqq_row_bytes, value_beat_bits
from .lut_array import LUTArray
from .params import CONTEXTS, LOADERS, SQQ_BYTES, TAGS, TOUT_BUFFERS, tout_buffer_count
from .pe import PE, check_pe_params, request_queue_entries, sqq_byte_count, tile_context
from .pipeline import Pipeline
from .prefetcher import Prefetcher
from .prefix_sum import WindowUnit
from .queues import LineQueue
from .scaler import BF16Scaler, ScalingStage
from .tags import TagTable
from .tout import TOut


@dataclass(frozen=True)
class Unit:
    what: str
    build: Callable  # (W, L, tags, sqq_bytes, addr_bits, id_bits, loaders, contexts, tout_buffers) -> the component


def _sqq(W, L, sqq_bytes, contexts, **_):
    row_bytes = sqq_row_bytes(W, L)
    return LineQueue(sqq_bytes // contexts // row_bytes, row_bytes, value_beat_bits(W, L) // 8)


UNITS = {
    "pe": Unit("the complete PE (paper, Fig. 7 and 10)",
               lambda W, L, **p: PE(W, L, **p)),
    "datapath": Unit("the vector path: a window unit in front of the pipeline",
                     lambda W, L, **_: Datapath(W, L)),
    "pipeline": Unit("dequantization, expansion and scaling, shared by the loaders",
                     lambda W, L, **_: Pipeline(W, L)),
    "loader": Unit("one tile context of a loader: request checks, tag table, queues, window unit",
                   lambda W, L, loaders, tout_buffers, **p: tile_context(W, L, **p)),
    "sqq": Unit("a tile context's SQQ: a LineQueue of the value stream",
                _sqq),
    "mask_queue": Unit("the bitmask queue: a one-row LineQueue",
                       lambda W, L, **_: LineQueue(1, LINE_BYTES, MASK_BYTES)),
    "tag_table": Unit("a tile context's tag table",
                      lambda W, L, tags, contexts, **_: TagTable(tags // contexts)),
    "prefetcher": Unit("the stream prefetcher",
                       lambda W, L, addr_bits, id_bits, loaders, contexts, **_:
                       Prefetcher(addr_bits, id_bits, loaders * contexts)),
    "window_unit": Unit("popcount and prefix sums",
                        lambda W, L, **_: WindowUnit(W)),
    "dequant_stage": Unit("the dequantization stage: code unpacker, LUT array and the SD register",
                          lambda W, L, **_: DequantStage(W, L)),
    "expander": Unit("the triangular crossbar expander",
                     lambda W, L, **_: Expander(W)),
    "lut_array": Unit("the L big LUTs",
                      lambda W, L, **_: LUTArray(L, physical_lanes(W, L))),
    "bf16_scaler": Unit("one exact BF16 multiplier of the scaling stage",
                        lambda W, L, **_: BF16Scaler()),
    "scaling_stage": Unit("the scaling stage: max(1, W/16) scale decoders and W BF16 scalers",
                          lambda W, L, **_: ScalingStage(W)),
    "tout": Unit("the TOut buffers and the completion port",
                 lambda W, L, id_bits, loaders, contexts, tout_buffers, **_:
                 TOut(W, id_bits, loaders * contexts, buffers=tout_buffer_count(tout_buffers, loaders),
                      waiting=request_queue_entries(loaders) + 1)),
}


def build_unit(name, W, L, *, tags=TAGS, sqq_bytes=SQQ_BYTES, addr_bits=48, id_bits=8, loaders=LOADERS,
               contexts=CONTEXTS, tout_buffers=TOUT_BUFFERS):
    """The component of unit ``name`` for the design (W, L, ...), whose parameters are checked first."""
    if name not in UNITS:
        raise ValueError(f"unknown design {name!r}; choose from {', '.join(UNITS)}")
    params = dict(tags=tags, sqq_bytes=sqq_bytes, addr_bits=addr_bits, id_bits=id_bits, loaders=loaders,
                  contexts=contexts, tout_buffers=tout_buffers)
    check_pe_params(W, L, **params)
    params["sqq_bytes"] = sqq_byte_count(sqq_bytes, W, L, contexts)
    return UNITS[name].build(W, L, **params)
