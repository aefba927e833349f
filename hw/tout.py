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

from math import gcd
from types import SimpleNamespace

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
        in_use, records_after = self._records(m)
        self._buffers(m, in_use, records_after)
        return m

    @staticmethod
    def _advance(pointer, size):
        return Mux(pointer == size - 1, 0, pointer + 1)

    def _records(self, m):
        """The ring of request records; returns whether a record is in use, and ``after(done)``: whether
        one will be in use in the next cycle and whether the head will have failed, were ``done``."""
        n = self.slots
        records = Array(Signal(record_layout(len(self.accept_id)), name=f"record{i}") for i in range(n))
        tail, first = Signal(range(n), name="tail"), Signal(range(n), name="first")
        count = Signal(range(n + 1))
        in_use = count != 0
        # ``room`` is a register that keeps a record for an acceptance on its way (the PE registers
        # ``accept``), so that no input of the PE reaches the count.
        room = Signal(init=1)
        # Both outcomes of ``done`` (it comes late, from the head's record) computed beside it.
        added = count + self.accept
        counted = Mux(self.done, added - 1, added)
        m.d.sync += [count.eq(counted), room.eq(Mux(self.done, added < n, added + 1 < n))]
        # The head's ``failed`` is a register of its own, updated with the records: the records'
        # multiplexer would otherwise come before ``done`` and everything ``done`` selects.
        head_failed = Signal()
        m.d.comb += [self.room.eq(room), self.busy.eq(in_use | self.resp.valid),
                     self.head.id.eq(records[first].id), self.head.reason.eq(records[first].reason),
                     self.head.failed.eq(head_failed)]
        with m.If(self.accept):
            m.d.sync += [records[tail].id.eq(self.accept_id), records[tail].failed.eq(0),
                         records[tail].reason.eq(ErrorReason.NONE), tail.eq(self._advance(tail, n))]
        for fail in self.fails:  # after the accept: a request can fail in the cycle it is accepted
            with m.If(fail.en):
                m.d.sync += [records[fail.slot].failed.eq(1), records[fail.slot].reason.eq(fail.reason)]
        with m.If(self.done):
            m.d.sync += first.eq(self._advance(first, n))

        def failed_next(i):
            """Whether record ``i`` (a signal) will have failed in the next cycle: the records' multiplexer
            from registers, then this cycle's acceptance and failures, compared with ``i``."""
            fails = Cat(f.en & (f.slot == i) for f in self.fails).any()
            return fails | (~(self.accept & (tail == i)) & records[i].failed)

        def after(done):
            """Whether a record will be in use and whether the head will have failed, were ``done``."""
            # (count + accept - done != 0, without the sum)
            in_use_next = Mux(done, Mux(self.accept, in_use, count > 1), in_use | self.accept)
            return in_use_next, Mux(done, failed_next(self._advance(first, n)), failed_next(first))

        m.d.sync += head_failed.eq(after(self.done)[1])

        return in_use, after

    def _buffers(self, m, in_use, records_after):
        """The tile ring (``wb`` is written, ``rb`` read; ``full`` buffers hold a whole tile), its
        ``BANKS`` single-port memories per buffer, and the head's rows out of ``rb`` into ``resp``."""
        n = self.buffers
        # At least a bit each: one buffer would make them zero-width, which Verilog cannot declare.
        wb, rb = Signal(range(max(2, n)), name="wb"), Signal(range(max(2, n)), name="rb")
        chunk = Signal(range(TILE_ELEMS // self.W))  # chunks of the tile in ``wb`` written so far
        full = Signal(n)
        row = Signal(range(TILE_ROWS))  # the head's next tile row

        chunk_bits = 16 * self.W
        row_bits, rows = memory_rows(self.W)
        per_row = row_bits // chunk_bits  # chunks per memory row
        rows_per = row_bits // (8 * LINE_BYTES)  # tile rows per memory row
        c = self.chunks.payload
        fire = self.chunks.valid & self.chunks.ready
        head, r = self.head, self.resp.payload
        beat = Signal(tepl_response_layout(len(head.id)))  # the next beat, but for its data
        m.d.comb += [
            beat.id.eq(head.id),
            beat.row.eq(Mux(head.failed, 0, row)),
            beat.last.eq(head.failed | (row == TILE_ROWS - 1)),
            beat.error.eq(head.failed),
            beat.reason.eq(Mux(head.failed, head.reason, ErrorReason.NONE)),
        ]

        # ``lead``: how far the chunks written are ahead of the head's next row (chunk x W - row x
        # elems_per_row, in units of their gcd) while the head's tile is the one being written
        # (``wb`` = ``rb``, not full); it restarts with each completion. A row is written when the
        # lead is a row's elements, so that the next cycle's ``written`` compares a register with
        # constants.
        elems_per_row = TILE_ELEMS // TILE_ROWS
        unit = gcd(self.W, elems_per_row)
        step, row_step = self.W // unit, elems_per_row // unit
        lead = Signal(range(-TILE_ELEMS // unit, TILE_ELEMS // unit + 1))

        def after(sent, fire):
            """The next state, were a row sent (``sent``) and a chunk written (``fire``) in this cycle."""
            done, ends = sent & beat.last, fire & c.last
            delivered = done & ~head.failed
            in_use, failed = records_after(done)
            return SimpleNamespace(
                chunk=Mux(fire, Mux(c.last, 0, chunk + 1), chunk), row=Mux(sent, Mux(beat.last, 0, row + 1), row),
                wb=Mux(ends, self._advance(wb, n), wb), rb=Mux(delivered, self._advance(rb, n), rb),
                full=(full | Mux(ends, Const(1, n) << wb, 0)) & ~Mux(delivered, Const(1, n) << rb, 0),
                lead=Mux(done, Mux(ends, 0, chunk + fire) * step, lead + fire * step - sent * row_step),
                in_use=in_use, failed=failed)

        def written(sent, fire):
            """Whether the chunks of the head's next row will be written in the next cycle, for constant
            late signals (0 or 1): the head's tile is whole, or the lead compared with constants."""
            s = after(sent, fire)
            ahead = lead >= (elems_per_row * (1 + sent) - self.W * fire) // unit
            if sent:  # a completion restarts the lead: the next tile's chunks, from row 0
                # (compared only when the bound is above 0: Verilator rejects a comparison always true)
                needed = -(-elems_per_row // self.W) - fire
                restarted = ~(fire & c.last) & (chunk >= needed) if needed > 0 else ~(fire & c.last)
                ahead = Mux(beat.last, restarted, ahead)
            return s.full.bit_select(s.rb, 1) | ((s.wb == s.rb) & ahead)

        # The head's tile is the oldest with a buffer (rb); until it is whole, it is the one being
        # written (wb = rb), and no chunk of it is written while ``chunk`` is 0.
        # ``chunks.ready`` is a register: it stalls the whole scaling stage, whose enables are a wide
        # tree already. A bank's one port either writes a chunk or reads a row: the read wins, so
        # ``chunks.ready`` is low while the buffer ``wb`` is full and in a cycle in which a row is read
        # from the bank the next chunk writes, decided a cycle ahead from the next state. Whether the
        # head's next row is written is a register too (``row_written``), decided likewise, and so is
        # the lead. Each is computed from registers for each value of this cycle's late signals (a
        # row sent, a chunk written, and ``resp_ready_next``: ``resp.ready`` in the next cycle), and
        # selected by them.
        accepting, row_written = Signal(init=1), Signal()
        m.d.comb += self.chunks.ready.eq(accepting)
        readable = in_use & row_written
        ready = readable | (in_use & head.failed)
        load = ~self.resp.valid | self.resp.ready
        sent = load & ready
        m.d.comb += self.done.eq(sent & beat.last)
        now = after(sent, fire)
        m.d.sync += [chunk.eq(now.chunk), row.eq(now.row), wb.eq(now.wb), rb.eq(now.rb), full.eq(now.full)]

        def accepts(sent, fire, resp_ready):
            """``accepting`` in the next cycle, for constant late signals (0 or 1)."""
            s = after(sent, fire)
            # ``resp`` loads in the next cycle if it is taken then, or empty (nothing sent into it
            # now, and it loads now).
            loads = 1 if resp_ready else 0 if sent else load
            reading = loads & s.in_use & written(sent, fire) & ~s.failed
            # the next chunk's memory row and the next row read in one bank
            bank = (s.wb == s.rb) & ((s.chunk // per_row) % BANKS == (s.row // rows_per) % BANKS)
            return ~s.full.bit_select(s.wb, 1) & ~(reading & bank)

        def by_late(f):
            """``f(sent, fire)`` for each value of both, selected by this cycle's."""
            return Mux(sent, Mux(fire, f(1, 1), f(1, 0)), Mux(fire, f(0, 1), f(0, 0)))

        m.d.sync += [
            accepting.eq(Mux(self.resp_ready_next, by_late(lambda s, f: accepts(s, f, 1)),
                             by_late(lambda s, f: accepts(s, f, 0)))),
            row_written.eq(by_late(written)),
            lead.eq(by_late(lambda s, f: after(s, f).lead)),
        ]
        write_row, read_row = chunk // per_row, row // rows_per  # memory rows
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
