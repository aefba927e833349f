"""The TOut buffers (paper, sections 5.2 and 6.1, item 4) and the completions on the TEPL response port.

Two things are kept apart from the loaders, so that a loader takes its next TEPL as soon as its
tile has left its queues:

- **The accepted requests, in order** (``slots`` = waiting + loaders + buffers records: id, failed,
  reason).
  A request is accepted only while a record is free (``room``, which keeps one more for a request
  accepted in the cycle before ``accept`` writes it); ``accept`` writes its id into the next record (in acceptance order), and a loader whose request fails a check marks that record (``fails``, before
  any of the request has flowed). The oldest record is the ``head``, whose completion goes out next.
- **The buffers** (``buffers`` of one tile, 1 KB each) form a ring in tile order: a tile takes the
  next buffer with its first chunk, fills it in order, and its completion frees it. ``chunks`` is
  ready only while the buffer it writes is free: the pipeline stalls behind a tile that has no
  buffer yet, and holds no buffer while a tile is still in flight in it (taking the buffer when the
  tile entered the pipeline held it ``PIPELINE_FILL`` cycles longer with nothing written to it).
  Tiles are written in request order, so the head's tile, once its first chunk is written, is the
  oldest in the ring.

A completion goes out as 16 beats of one 64-byte row, **each as soon as the chunks covering it are
written** (a row is read the cycle after its last chunk), with ``last`` on row 15; a failed
request completes with one error beat instead. Each buffer is ``BANKS`` single-port memories
(memory row j in bank j % BANKS), each with one address for its write and its synchronous read, so
that synthesis can make each a single-port (``1rw``) SRAM macro: in a cycle a bank writes a chunk or
reads a row. The read wins: a row is read as soon as its chunks are written and ``resp`` loads,
and the chunk for its bank waits for a cycle without a row read from that bank. ``chunks.ready``
stays a register (deciding it from this cycle's read would put TOut's response logic on the
scaling stage's enables), decided a cycle ahead from the next state: of the records, the ring, the
row and ``resp``, with ``resp_ready_next`` (``resp.ready`` in the next cycle, from the register
that takes ``resp``). The banks keep the waits off the streaming chunks: a row is read while the
pipeline writes the next memory row, in the other bank; only a row that has fallen two or more
memory rows behind the chunks (the core not taking rows) holds one back. A
memory's read register is the ``resp`` register, loaded when ``resp`` is empty or taken
(``done``: the record and the buffer are freed as the last beat is loaded). No row of a request
can leave before its verdict: a request fails only before any of it flows, its record is marked in
the cycle after the failure is announced, and a later tile's first chunk comes ``PIPELINE_FILL``
cycles after its first vOp, which passes the vOp selector only after the failed request's skip beat.
"""

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import data, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from deca.golden.format import TILE_BYTES, TILE_ELEMS, TILE_ROWS

from .layouts import LINE_BYTES, ErrorReason, out_layout, tepl_response_layout


def record_layout(id_bits):
    """An accepted request: its id, and whether (and why) it failed."""
    return data.StructLayout({"id": id_bits, "failed": 1, "reason": ErrorReason})


def fail_layout(slots):
    """A loader's request fails in this cycle (``en``): its record and the reason."""
    return data.StructLayout({"en": 1, "slot": range(slots), "reason": ErrorReason})


#: Single-port memories per tile buffer, by memory row (see ``TOut._buffers``).
BANKS = 2


def memory_rows(W):
    """Bits of a buffer memory row (a tile row or a chunk of W BF16, the wider) and rows per tile."""
    row_bits = max(8 * LINE_BYTES, 16 * W)
    return row_bits, TILE_BYTES * 8 // row_bits


class TOut(wiring.Component):
    """See the module docstring; ``loaders``: the ports of ``fails``; ``buffers``: tile buffers
    (default one per loader); ``waiting``: requests accepted before a loader takes them. ``done``:
    the head's last beat is loaded into ``resp`` in this cycle; ``busy``: a record is in use or a
    beat waits in ``resp``; ``resp_ready_next``: ``resp.ready`` in the next cycle."""

    def __init__(self, W, id_bits, loaders, buffers=None, waiting=0):
        self.W, self.loaders = W, loaders
        self.buffers = loaders if buffers is None else buffers
        # A request waits for a loader, is in one or has a buffer, or failed.
        self.slots = waiting + loaders + self.buffers
        super().__init__({
            "accept": In(1),
            "accept_id": In(id_bits),
            "room": Out(1),
            "fails": In(fail_layout(self.slots)).array(loaders),
            "chunks": In(stream.Signature(out_layout(W))),
            "head": Out(record_layout(id_bits)),
            "busy": Out(1),
            "done": Out(1),
            "resp": Out(stream.Signature(tepl_response_layout(id_bits))),
            "resp_ready_next": In(1),
        })

    def elaborate(self, platform):
        m = Module()
        delivered, in_use, records_next = self._records(m)
        self._buffers(m, delivered, in_use, records_next)
        return m

    @staticmethod
    def _advance(pointer, size):
        return Mux(pointer == size - 1, 0, pointer + 1)

    def _records(self, m):
        """The ring of request records; returns ``delivered`` (a tile's completion ends in this cycle),
        whether a record is in use, and both for the next cycle: whether a record will be in use and
        whether the head will have failed."""
        n = self.slots
        records = Array(Signal(record_layout(len(self.accept_id)), name=f"record{i}") for i in range(n))
        tail, first = Signal(range(n)), Signal(range(n))
        count = Signal(range(n + 1))
        in_use = count != 0
        # ``room`` is a register that keeps a record for an acceptance on its way (the PE registers
        # ``accept``), so that no input of the PE reaches the count.
        room = Signal(init=1)
        # Both outcomes of ``done`` (it comes late, from the head's record) computed beside it.
        added = count + self.accept
        counted = Mux(self.done, added - 1, added)
        m.d.sync += [count.eq(counted), room.eq(Mux(self.done, added < n, added + 1 < n))]
        m.d.comb += [self.room.eq(room), self.busy.eq(in_use | self.resp.valid),
                     self.head.eq(records[first])]
        with m.If(self.accept):
            m.d.sync += [records[tail].id.eq(self.accept_id), records[tail].failed.eq(0),
                         records[tail].reason.eq(ErrorReason.NONE), tail.eq(self._advance(tail, n))]
        for fail in self.fails:  # after the accept: a request can fail in the cycle it is accepted
            with m.If(fail.en):
                m.d.sync += [records[fail.slot].failed.eq(1), records[fail.slot].reason.eq(fail.reason)]
        with m.If(self.done):
            m.d.sync += first.eq(self._advance(first, n))
        failed_next = Array(Mux(Cat(f.en & (f.slot == i) for f in self.fails).any(), 1,
                                Mux(self.accept & (tail == i), 0, records[i].failed)) for i in range(n))
        first_next = Mux(self.done, self._advance(first, n), first)
        return self.done & ~self.head.failed, in_use, (counted != 0, failed_next[first_next])

    def _buffers(self, m, delivered, in_use, records_next):
        """The tile ring (``wb`` is written, ``rb`` read; ``full`` buffers hold a whole tile), its
        ``BANKS`` single-port memories per buffer, and the head's rows out of ``rb`` into ``resp``."""
        n = self.buffers
        # At least a bit each: one buffer would make them zero-width, which Verilog cannot declare.
        wb, rb = Signal(range(max(2, n))), Signal(range(max(2, n)))
        chunk = Signal(range(TILE_ELEMS // self.W))  # chunks of the tile in ``wb`` written so far
        full = Signal(n)
        row = Signal(range(TILE_ROWS))  # the head's next tile row

        chunk_bits = 16 * self.W
        row_bits, rows = memory_rows(self.W)
        per_row = row_bits // chunk_bits  # chunks per memory row
        rows_per = row_bits // (8 * LINE_BYTES)  # tile rows per memory row
        c = self.chunks.payload
        fire = self.chunks.valid & self.chunks.ready
        # ``chunks.ready`` is a register: it stalls the whole scaling stage, whose enables are a wide
        # tree already. It is low while the buffer ``wb`` is full, and in a cycle in which a row is
        # read from the bank the next chunk writes, decided a cycle ahead from the next state.
        accepting = Signal(init=1)
        m.d.comb += self.chunks.ready.eq(accepting)
        chunk_next = Mux(fire, Mux(c.last, 0, chunk + 1), chunk)
        rb_next = Mux(delivered, self._advance(rb, n), rb)
        wb_next = Mux(fire & c.last, self._advance(wb, n), wb)
        full_next = (full | Mux(fire & c.last, Const(1, n) << wb, 0)) & ~Mux(delivered, Const(1, n) << rb, 0)
        m.d.sync += [chunk.eq(chunk_next), rb.eq(rb_next), wb.eq(wb_next), full.eq(full_next)]

        # The head's tile is the oldest with a buffer (rb); until it is whole, it is the one being
        # written (wb = rb), and no chunk of it is written while ``chunk`` is 0. A bank's one port
        # either writes a chunk or reads a row: the read wins, and a chunk for its bank waits
        # (``chunks.ready``, below).
        elems_per_row = TILE_ELEMS // TILE_ROWS

        def written(full, wb, rb, chunk, row):
            return full.bit_select(rb, 1) | ((wb == rb) & (chunk * self.W >= (row + 1) * elems_per_row))

        head, r = self.head, self.resp.payload
        beat = Signal(tepl_response_layout(len(head.id)))  # the next beat, but for its data
        m.d.comb += [
            beat.id.eq(head.id),
            beat.row.eq(Mux(head.failed, 0, row)),
            beat.last.eq(head.failed | (row == TILE_ROWS - 1)),
            beat.error.eq(head.failed),
            beat.reason.eq(Mux(head.failed, head.reason, ErrorReason.NONE)),
        ]
        readable = in_use & written(full, wb, rb, chunk, row)
        ready = readable | (in_use & head.failed)
        load = ~self.resp.valid | self.resp.ready
        sent = load & ready
        m.d.comb += self.done.eq(sent & beat.last)
        row_next = Mux(sent, Mux(beat.last, 0, row + 1), row)
        m.d.sync += row.eq(row_next)

        # The next cycle's row read, from the next state (``resp_ready_next``: ``resp.ready`` then).
        in_use_next, failed_next = records_next
        load_next = ~Mux(load, ready, self.resp.valid) | self.resp_ready_next
        reading_next = load_next & in_use_next & written(full_next, wb_next, rb_next, chunk_next, row_next) & ~failed_next
        write_row, read_row = chunk // per_row, row // rows_per  # memory rows
        block_next = reading_next & (wb_next == rb_next) & ((chunk_next // per_row) % BANKS == (row_next // rows_per) % BANKS)
        m.d.sync += accepting.eq(~full_next.bit_select(wb_next, 1) & ~block_next)
        loaded = Signal.like(beat)
        read_from = Signal(range(n * BANKS))  # the bank whose read port holds the loaded row
        # A read port's register loads only with a row read (a bank's one port may be writing), so
        # until its first read it holds no value: the beat's data is 0 unless a row was read.
        read = Signal()
        with m.If(load):
            m.d.sync += [self.resp.valid.eq(ready), loaded.eq(beat), read.eq(readable & ~head.failed),
                         read_from.eq(rb * BANKS + read_row % BANKS)]

        # The memories read synchronously, as SRAM macros do: a read port's data register is the
        # ``resp`` register. Each has one address for its write and read ports, a ``1rw`` macro.
        data = []
        for i in range(n):
            for b in range(BANKS):
                mem = memory.Memory(shape=row_bits, depth=rows // BANKS, init=[])
                m.submodules[f"buffer{i}_{b}"] = mem
                wp = mem.write_port(granularity=chunk_bits) if per_row > 1 else mem.write_port()
                rp = mem.read_port(transparent_for=())
                writing = fire & (wb == i) & (write_row % BANKS == b)
                addr = Signal(range(rows // BANKS), name=f"addr{i}_{b}")
                m.d.comb += [
                    addr.eq(Mux(writing, write_row // BANKS, read_row // BANKS)),
                    wp.addr.eq(addr), rp.addr.eq(addr),
                    wp.data.eq(c.data.as_value().replicate(per_row)),
                    wp.en.eq(Mux(writing, Const(1, per_row) << (chunk % per_row), 0) if per_row > 1 else writing),
                    rp.en.eq(load & readable & (rb == i) & (read_row % BANKS == b) & ~head.failed),
                ]
                data.append(rp.data)
        row_data = Array(data)[read_from]
        if rows_per > 1:
            part = Signal(range(rows_per))  # the tile row's part of the memory row read
            with m.If(load):
                m.d.sync += part.eq(row % rows_per)
            row_data = row_data.word_select(part, 8 * LINE_BYTES)
        m.d.comb += [r.eq(loaded), r.data.eq(Mux(read, row_data, 0))]
