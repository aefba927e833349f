"""The TOut buffers (paper, sections 5.2 and 6.1, item 4) and the completions on the TEPL response port.

Buffer i belongs to loader i: the loader keeps its request until the completion went out, so its
buffer is always free when its next tile arrives and the pipeline is never held up here (``chunks``
is nevertheless ready only while the target buffer is free, so a broken hold stalls instead of
overwriting a tile). A tile is delivered only once all of it is in the buffer, as 16 beats of one
64-byte row each; a failed request completes with one error beat instead. Completions go out in
request order: ``head`` is the oldest request (its buffer, id and outcome), taken when its last
beat leaves.
"""

from amaranth.hdl import Const, Module, Mux, Signal
from amaranth.lib import data, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from deca.golden.format import TILE_BYTES, TILE_ELEMS, TILE_ROWS

from .layouts import LINE_BYTES, ErrorReason, out_layout, tepl_response_layout


def head_layout(buffers, id_bits):
    """The request whose completion goes out next: its buffer, id, and whether (and why) it failed."""
    return data.StructLayout({"buffer": range(buffers), "id": id_bits, "failed": 1, "reason": ErrorReason})


class TOut(wiring.Component):
    def __init__(self, W, id_bits, buffers):
        self.W, self.buffers = W, buffers
        super().__init__({
            "chunks": In(stream.Signature(out_layout(W))),
            "target": In(range(buffers)),  # buffer of the tile the chunks belong to
            "head": In(stream.Signature(head_layout(buffers, id_bits))),
            "resp": Out(stream.Signature(tepl_response_layout(id_bits))),
        })

    def elaborate(self, platform):
        m = Module()
        chunk_bits = 16 * self.W
        row_bits = max(8 * LINE_BYTES, chunk_bits)  # a memory row holds a tile row or a chunk
        rows = TILE_BYTES * 8 // row_bits
        m.submodules.mem = mem = memory.Memory(shape=row_bits, depth=self.buffers * rows, init=[])

        # Write: chunk c of the tile, W elements, at bit 16W * c of the buffer.
        chunk = Signal(range(TILE_ELEMS // self.W))
        per_row = row_bits // chunk_bits
        wp = mem.write_port(granularity=chunk_bits) if per_row > 1 else mem.write_port()
        c = self.chunks.payload
        full = Signal(self.buffers)
        delivered = Signal(self.buffers)
        fire = self.chunks.valid & self.chunks.ready
        m.d.comb += [
            self.chunks.ready.eq(~full.bit_select(self.target, 1)),
            wp.addr.eq(self.target * rows + chunk // per_row),
            wp.data.eq(c.data.as_value().replicate(per_row)),
            wp.en.eq(Mux(fire, Const(1, per_row) << (chunk % per_row), 0) if per_row > 1 else fire),
        ]
        with m.If(fire):
            m.d.sync += chunk.eq(Mux(c.last, 0, chunk + 1))
        m.d.sync += full.eq((full | Mux(fire & c.last, Const(1, self.buffers) << self.target, 0)) & ~delivered)

        # Read: tile row r of the head's buffer.
        row = Signal(range(TILE_ROWS))
        rp = mem.read_port(domain="comb")
        rows_per = row_bits // (8 * LINE_BYTES)  # tile rows per memory row
        head = self.head.payload
        m.d.comb += rp.addr.eq(head.buffer * rows + row // rows_per)
        row_data = rp.data.word_select(row % rows_per, 8 * LINE_BYTES) if rows_per > 1 else rp.data
        r = self.resp.payload
        m.d.comb += [
            self.resp.valid.eq(self.head.valid & (head.failed | full.bit_select(head.buffer, 1))),
            r.data.eq(Mux(head.failed, 0, row_data)),
            r.id.eq(head.id),
            r.row.eq(Mux(head.failed, 0, row)),
            r.last.eq(head.failed | (row == TILE_ROWS - 1)),
            r.error.eq(head.failed),
            r.reason.eq(Mux(head.failed, head.reason, ErrorReason.NONE)),
            self.head.ready.eq(self.resp.valid & self.resp.ready & r.last),
            delivered.eq(Mux(self.head.ready & ~head.failed, Const(1, self.buffers) << head.buffer, 0)),
        ]
        with m.If(self.resp.valid & self.resp.ready):
            m.d.sync += row.eq(Mux(r.last, 0, row + 1))
        return m
