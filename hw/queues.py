"""A loader's input queues (paper, section 6.1, item 1): the SQQ, the bitmask queue and the scale
factor queue are each a ``LineQueue``.

Memory lines arrive in any order and at any byte alignment; each is written already realigned,
so that stream byte s sits at byte s mod R of row s div R (R = ``row_bytes``): a line lands in
at most two rows, consecutive ones and so in different banks: even rows are one memory, odd rows
another, each with one byte-enabled write port (a memory with two write ports maps to no FPGA
RAM, nor to the usual ASIC macro). Reads then never cross a row: the queue hands out the stream
in beats of ``beat_bytes`` (a divisor of R), each once every line it needs has arrived. A queue
holds one tile's stream at a time, circularly when the stream is longer than the queue; ``room``
tells the loader whether a line may be requested yet.
"""

from amaranth.hdl import Const, Module, Mux, Signal, signed
from amaranth.lib import data, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from .layouts import LEN_BITS, LINE_BYTES

#: Index bits of a line within a stream: a stream of up to 2^16 - 1 bytes at any alignment.
LINE_INDEX_BITS = LEN_BITS - 5


def beat_layout(beat_bytes):
    """A piece of the stream: ``nbytes`` valid bytes, stream byte 0 of the beat in bits 7..0."""
    return data.StructLayout({"data": 8 * beat_bytes, "nbytes": range(beat_bytes + 1), "last": 1})


def _below(n, width):
    """The ``width``-bit thermometer code of ``n`` (0..``width``): bits 0 to n - 1 set."""
    return ~(Const((1 << width) - 1, width) << n)[:width]


def write_layout():
    """Line ``index`` of the current stream, as memory returned it."""
    return data.StructLayout({"index": LINE_INDEX_BITS, "data": 8 * LINE_BYTES})


class LineQueue(wiring.Component):
    """``start`` (with ``offset`` = address mod 64 and ``length``) begins a new stream and drops
    what the queue held; ``write`` stores a line of it. A stream of length 0 is one empty beat with
    ``last``."""

    def __init__(self, rows, row_bytes, beat_bytes):
        assert rows & (rows - 1) == 0 and row_bytes % LINE_BYTES == 0 and row_bytes % beat_bytes == 0
        self.rows, self.row_bytes, self.beat_bytes = rows, row_bytes, beat_bytes
        # Lines that may be outstanding at once: those of a full queue plus one straddling its ends.
        self.slots = 1 << (rows * row_bytes // LINE_BYTES + 1).bit_length()
        super().__init__({
            "start": In(1),
            "offset": In(range(LINE_BYTES)),
            "length": In(LEN_BITS),
            "write": In(stream.Signature(write_layout(), always_ready=True)),
            "issue_index": In(LINE_INDEX_BITS),
            "room": Out(1),
            "beats": Out(stream.Signature(beat_layout(beat_bytes))),
        })

    def elaborate(self, platform):
        m = Module()
        offset = Signal(range(LINE_BYTES))
        length = Signal(LEN_BITS)
        with m.If(self.start):
            m.d.sync += [offset.eq(self.offset), length.eq(self.length)]
        row_b, parts = self._realign(m, offset, length)
        arrived = self._arrivals(m)
        pos, read_data = self._read(m, offset, length, arrived)
        if self.rows > 1:
            self._banks(m, row_b, parts, pos, read_data)
        else:
            # A one-row queue (bitmask, scales) is a register, as in the paper's Table 3.
            for j in range(self.row_bytes):
                for port in parts:
                    with m.If(port.en[j]):
                        m.d.sync += read_data.word_select(j, 8).eq(port.data.word_select(j, 8))

        # Line k may be requested once its last row is free: rows below the read row are.
        R = self.row_bytes
        top = Signal(LEN_BITS + 8)
        line_end = self.issue_index * LINE_BYTES + (LINE_BYTES - 1) - offset
        m.d.comb += top.eq(Mux(line_end < length, line_end, length - 1))
        m.d.comb += self.room.eq(top // R < pos // R + self.rows)
        return m

    def _realign(self, m, offset, length):
        """The written line shifted to its place: part 0 goes to row ``row_b`` - 1, part 1 to row
        ``row_b``, each with the byte enables of the bytes that belong to the stream."""
        R, w = self.row_bytes, self.write
        # Line k starts at stream byte 64k - offset; u = that + R is never negative.
        u = Signal(LINE_INDEX_BITS + 8)
        m.d.comb += u.eq(w.payload.index * LINE_BYTES + R - offset)
        shift = u % R
        row_b = u // R  # the row holding the line's end (or all of it when aligned)
        shifted = Signal(16 * R)
        m.d.comb += shifted.eq(w.payload.data << (shift * 8))
        # The bytes of the line that belong to the stream, [first, end): only line 0 has bytes before
        # it, only the last line bytes after it. One thermometer code each, shifted with the data:
        # a decoder per bound rather than two range compares per byte.
        first = Mux(w.payload.index == 0, offset, 0)
        end = Signal(signed(LEN_BITS + 2))
        m.d.comb += end.eq(offset + length - w.payload.index * LINE_BYTES)
        end_in_line = Mux(end < 0, 0, Mux(end > LINE_BYTES, LINE_BYTES, end))
        line_en = Signal(LINE_BYTES)
        m.d.comb += line_en.eq(Mux(w.valid, _below(end_in_line[:7], LINE_BYTES) & ~_below(first, LINE_BYTES), 0))
        en = Signal(2 * R)
        m.d.comb += en.eq(line_en << shift)
        layout = data.StructLayout({"en": R, "data": 8 * R})
        parts = [Signal(layout, name=f"write{part}") for part in (0, 1)]
        for part, port in enumerate(parts):
            m.d.comb += [port.data.eq(shifted.word_select(part, 8 * R)), port.en.eq(en.word_select(part, R))]
        return row_b, parts

    def _arrivals(self, m):
        """Lines below ``arrived`` are all in; later ones are marked in a bitmap until they join."""
        w = self.write
        arrived = Signal(LINE_INDEX_BITS + 1)
        seen = Signal(self.slots)
        slot = arrived % self.slots
        with m.If(self.start):
            m.d.sync += [arrived.eq(0), seen.eq(0)]
        with m.Else():
            mark = Signal(self.slots)
            with m.If(w.valid):
                m.d.comb += mark.eq(Const(1, self.slots) << (w.payload.index % self.slots))
            joined = (seen | mark).bit_select(slot, 1)
            m.d.sync += [seen.eq((seen | mark) & ~Mux(joined, Const(1, self.slots) << slot, 0)), arrived.eq(arrived + joined)]
        return arrived

    def _read(self, m, offset, length, arrived):
        """Beat ``beat`` covers stream bytes [beat*B, beat*B + B) of the row holding byte ``pos``;
        it goes out once the line holding its last byte has arrived. Returns (pos, that row)."""
        R, B = self.row_bytes, self.beat_bytes
        beat = Signal(LEN_BITS + 1)
        pos = Signal(LEN_BITS + 8)
        m.d.comb += pos.eq(beat * B)
        rest = Signal(signed(LEN_BITS + 9))
        m.d.comb += rest.eq(length - pos)
        last = rest <= B
        end = Mux(last, length, pos + B)  # one past the beat's last stream byte
        need = (end - 1 + offset) // LINE_BYTES  # the line holding it
        done = Signal()  # every beat of the stream was handed out
        read_data = Signal(8 * R)
        out = self.beats.payload
        m.d.comb += [
            self.beats.valid.eq(~done & ((length == 0) | (arrived > need))),
            out.data.eq(read_data.word_select((pos % R) // B, 8 * B)),
            out.nbytes.eq(Mux(last, rest, B)),
            out.last.eq(last),
        ]
        with m.If(self.start):
            m.d.sync += [beat.eq(0), done.eq(0)]
        with m.Elif(self.beats.valid & self.beats.ready):
            m.d.sync += [beat.eq(beat + 1), done.eq(last)]
        return pos, read_data

    def _banks(self, m, row_b, parts, pos, read_data):
        """Rows ``row_b`` - 1 and ``row_b`` differ in parity, so each bank takes one part of the
        line: part 1 when ``row_b`` has the bank's parity, else part 0."""
        R = self.row_bytes
        row = pos // R % self.rows  # the row read
        bank_data = []
        for parity, name in enumerate(("even", "odd")):
            m.submodules[name] = bank = memory.Memory(shape=8 * R, depth=self.rows // 2, init=[])
            wp, rp = bank.write_port(granularity=8), bank.read_port(domain="comb")
            at_end = row_b[0] == parity
            # Row -1 wraps around, but none of its bytes is enabled.
            m.d.comb += [
                wp.addr.eq((row_b - 1 + at_end) % self.rows // 2),
                wp.data.eq(Mux(at_end, parts[1].data, parts[0].data)),
                wp.en.eq(Mux(at_end, parts[1].en, parts[0].en)),
                rp.addr.eq(row // 2),
            ]
            bank_data.append(rp.data)
        m.d.comb += read_data.eq(Mux(row[0], bank_data[1], bank_data[0]))
