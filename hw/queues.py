"""A loader's input queues (paper, section 6.1, item 1): the SQQ, the bitmask queue and the scale
factor queue are each a ``LineQueue``.

Memory lines arrive in any order and at any byte alignment; each is written already realigned,
so that stream byte s sits at byte s mod R of row s div R (R = ``row_bytes``): a line lands in
at most two rows, consecutive ones and so in different banks: even rows are one memory, odd rows
another, each with one byte-enabled write port and one synchronous read port (a memory with two
write ports maps to no FPGA RAM, nor to the usual ASIC macro). Reads then never cross a row: the
queue hands out the stream in beats of ``beat_bytes`` (a divisor of R), each once every line it
needs has arrived. A queue holds one tile's stream at a time, circularly when the stream is longer
than the queue (a one-row queue: streams of at most a row); ``room`` tells the loader whether a
line may be requested yet.

**Pipeline.** A written line enters a register with its index (stage W1); the next cycle it is
rotated into place and its byte enables are formed (registered in stage W2), and the cycle after
it is written, but for the bytes of the first and last lines outside the stream (per-stream masks),
and counted as arrived. The line's data and its rotation are a ``LineRealigner``'s, the queue's
own or one shared by queues that take a line per cycle between them. A beat is issued from
registers (whether its lines have arrived, where it lies) by reading its row (the read port's
register is stage 1; a one-row queue is read from its register then); the beat's bytes enter the
output register (stage 2), which ``beats`` presents (a one-row queue's beat stays in its row, which
stage 2 points at). So a line written in cycle t lets out the first beat it completes in cycle
t + 5 at the earliest (t + 1 with combinational reads and writes), and beats follow one per cycle;
``beats.ready`` only enables the two read stages. ``room`` is registered from the read position
two cycles late, which only holds a request back that long. ``start`` drops what is in the pipeline,
including a line written in its own cycle.
"""

import operator
from functools import reduce

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import data, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from .arith import at_least, fast_add
from .layouts import LEN_BITS, LINE_BYTES
from .stages import HOLD_SLICE, copies, stage_loads

#: Index bits of a line within a stream: a stream of up to 2^16 - 1 bytes at any alignment.
LINE_INDEX_BITS = LEN_BITS - 5


def beat_layout(beat_bytes):
    """A piece of the stream: ``nbytes`` valid bytes, stream byte 0 of the beat in bits 7..0."""
    return data.StructLayout({"data": 8 * beat_bytes, "nbytes": range(beat_bytes + 1), "last": 1})


def _below(n, width):
    """The ``width``-bit thermometer code of ``n`` (0..``width``): bits 0 to n - 1 set."""
    return ~(Const((1 << width) - 1, width) << n)[:width]


def _onehot(n, width):
    """The ``width``-bit one-hot code of ``n``."""
    return Const(1, width) << n


def rotate(m, name, value, digits, unit, left=False):
    """``value`` read from unit ``back`` on, circularly (``left``: moved up by ``back`` units),
    where back = sum of 4^j x ``digits[j]`` (one-hot, registers; the last may have two bits): a
    4-way AND-OR per digit, each level a signal (it is read four times), as the unpacker's shift. A
    shifter by ``back`` maps to twice the levels behind the fanout of each amount bit. ``digits``
    may also be a list of copies of them (``stages.copies``), each serving an equal share of the
    output bits, for their fanout.
    Call it outside ``If``: its levels are comb statements."""
    shares = digits if isinstance(digits[0], (list, tuple)) else [digits]
    size = len(value) // len(shares)
    assert size * len(shares) == len(value)
    for j in range(len(shares[0])):
        cuts = [(len(value) - k * 4 ** j * unit if left else k * 4 ** j * unit) % len(value)
                for k in range(len(shares[0][j]))]
        level = Signal(len(value), name=f"{name}{j}")
        moved = [Cat(value[cut:], value[:cut]) for cut in cuts]
        m.d.comb += level.eq(Cat(*(reduce(operator.or_, (Mux(share[j][k], v[c * size:(c + 1) * size], 0)
                                                         for k, v in enumerate(moved)))
                                   for c, share in enumerate(shares))))
        value = level
    return value


#: Bits of a rotation amount's one-hot base-4 digits (``offset_digits``): three digits of four.
DIGIT_BITS = 12


def offset_digits(amount):
    """The base-4 digits of ``amount`` (6 bits), each one-hot."""
    return Cat((Const(1, 4) << amount[2 * j:2 * j + 2])[:4] for j in range(3))


def digit_copies(m, name, digits, en, bits):
    """``digits`` (``offset_digits``) in registers loaded when ``en``: one copy per ``HOLD_SLICE``
    of the ``bits`` they select, for ``rotate``."""
    regs = copies(m, name, digits, en, max(1, bits // HOLD_SLICE))
    return [[reg[4 * j:4 * j + 4] for j in range(3)] for reg in regs]


def _index(n):
    """The shape of an index into ``n`` things, at least one bit wide: a one-row queue or a row of
    one beat would otherwise get zero-width signals, which Verilog cannot declare."""
    return range(max(2, n))


def write_layout(with_data=True):
    """Line ``index`` of the current stream, as memory returned it (without ``data`` where a
    ``LineRealigner`` outside the queue takes the data)."""
    return data.StructLayout({"index": LINE_INDEX_BITS, **({"data": 8 * LINE_BYTES} if with_data else {})})


class LineRealigner(wiring.Component):
    """The data half of a ``LineQueue``'s write stages: the line written in a cycle (``data``, with
    ``digits``, its stream's ``LineQueue.digits``) enters a register (stage W1), and the next cycle
    its rotation into place enters ``rotated`` (stage W2), which the queue writes. It holds no
    state of any queue, so queues that take at most one line per cycle between them share one,
    each told by its own valid bit which line is its (the PE: one memory response per cycle)."""

    def __init__(self):
        super().__init__({"data": In(8 * LINE_BYTES), "digits": In(DIGIT_BITS), "rotated": Out(8 * LINE_BYTES)})

    def elaborate(self, platform):
        m = Module()
        # No reset: the queues' valid bits say which line is whose.
        line = Signal(8 * LINE_BYTES, reset_less=True)
        rotated = Signal(8 * LINE_BYTES, reset_less=True)
        digits = digit_copies(m, "digits", self.digits, 1, len(line))
        m.d.sync += [line.eq(self.data), rotated.eq(rotate(m, "rotated", line, digits, 8))]
        m.d.comb += self.rotated.eq(rotated)
        return m


class LineQueue(wiring.Component):
    """``start`` (with ``offset`` = address mod 64 and ``length``) begins a new stream and drops
    what the queue held; ``write`` stores a line of it. A stream of length 0 is one empty beat with
    ``last``; a one-row queue takes streams of at most one row. Timing: see the module docstring.

    ``shared_realigner``: the line's data goes to a ``LineRealigner`` outside the queue, shared with
    other queues: ``write`` carries the index alone, ``digits`` is the stream's rotation for the
    realigner (in the line's write cycle) and ``rotated`` its output (two cycles later).

    ``issue_index``: the next line to request (lines are requested in order), ``issue``: it is
    requested in this cycle; ``room``: the line ``issue_index`` may be requested."""

    def __init__(self, rows, row_bytes, beat_bytes, *, shared_realigner=False):
        assert rows & (rows - 1) == 0 and row_bytes % LINE_BYTES == 0 and row_bytes % beat_bytes == 0
        self.rows, self.row_bytes, self.beat_bytes = rows, row_bytes, beat_bytes
        self.shared_realigner = shared_realigner
        # Lines that may be outstanding at once: those of a full queue plus one straddling its ends.
        self.slots = 1 << (rows * row_bytes // LINE_BYTES + 1).bit_length()
        realigner_ports = {"digits": Out(DIGIT_BITS), "rotated": In(8 * LINE_BYTES)} if shared_realigner else {}
        super().__init__({
            "start": In(1),
            "offset": In(range(LINE_BYTES)),
            "length": In(LEN_BITS),
            "write": In(stream.Signature(write_layout(with_data=not shared_realigner), always_ready=True)),
            "issue_index": In(LINE_INDEX_BITS),
            "issue": In(1),
            "room": Out(1),
            "beats": Out(stream.Signature(beat_layout(beat_bytes))),
            **realigner_ports,
        })

    def elaborate(self, platform):
        m = Module()
        R = self.row_bytes
        # The stream's registers: loaded at ``start``, before which nothing is written or issued
        # (no reset: it would reach deep into the realignment's logic).
        offset = Signal(range(LINE_BYTES), reset_less=True)
        length = Signal(LEN_BITS, reset_less=True)
        # Line k covers row bytes [64k - offset, 64k - offset + 64) mod R: of each 64-byte slot of
        # a row, bytes b < 64 - offset (``lo``) hold the line's bytes from the offset on in slot k
        # mod R/64, the other bytes its first ``offset`` bytes in the slot before. Either way byte b
        # holds line byte (b + offset) mod 64, so the line is rotated once for every slot, and
        # where it goes is a choice of slots, from these per-stream masks and the line's index.
        lo = Signal(LINE_BYTES, reset_less=True)
        wrap_lo = Signal(LINE_BYTES, reset_less=True)  # ``lo`` but for offset 0: slot 0's bytes that
        offset_nz = Signal(reset_less=True)            # belong to the next row when k mod R/64 = 0
        # The offset's base-4 digits, one-hot: the rotation amounts of the realignment (its
        # ``LineRealigner`` copies them for the line's bits) and of the last line's byte mask.
        assert LINE_BYTES == 4 ** 3
        digits = digit_copies(m, "offset_digits", offset_digits(self.offset), self.start, LINE_BYTES)
        with m.If(self.start):
            upper = _below((LINE_BYTES - self.offset)[:7], LINE_BYTES)
            m.d.sync += [offset.eq(self.offset), length.eq(self.length), lo.eq(upper),
                         wrap_lo.eq(Mux(self.offset == 0, 0, upper)), offset_nz.eq(self.offset != 0)]
        # The line holding the stream's last byte and that byte's place in it (offset + length - 1 =
        # 64 last_line + last_byte), as a mask of the line's bytes up to it: registered from the
        # stream's registers, so stale for one cycle after ``start``, when no line is in stage W1
        # yet and none has arrived.
        last_line = Signal(LINE_INDEX_BITS + 1, reset_less=True)
        last_mask = Signal(LINE_BYTES, reset_less=True)
        # offset + length - 1 as offset + length + (2^17 - 1): one carry-save step, then a
        # parallel-prefix add (a ripple add would be the queue's longest path).
        a, b = length | Const(0, LEN_BITS + 1), offset | Const(0, LEN_BITS + 1)
        stream_end = fast_add(m, ~(a ^ b), Cat(Const(0, 1), (a | b)[:LEN_BITS]))[:LEN_BITS + 1].as_signed()
        m.d.sync += [last_line.eq(stream_end // LINE_BYTES), last_mask.eq(~(Const((1 << LINE_BYTES) - 2, LINE_BYTES) << stream_end % LINE_BYTES)[:LINE_BYTES])]  # _below(end + 1)

        # Stage W1: the written line's index (its data: in the realigner).
        w = self.write
        w1_valid = Signal()
        w1 = Signal(write_layout(with_data=False), reset_less=True)  # no reset: the valid bit says
        m.d.sync += [w1_valid.eq(w.valid & ~self.start), w1.index.eq(w.payload.index)]
        if self.shared_realigner:
            m.d.comb += self.digits.eq(Cat(digits[0]))
            rotated = self.rotated
        else:
            m.submodules.realigner = realigner = LineRealigner()
            m.d.comb += [realigner.data.eq(w.payload.data), realigner.digits.eq(Cat(digits[0]))]
            rotated = realigner.rotated
        # Stage W2: the row writes, registered, so that a macro's inputs come from flip-flops and a
        # one-row queue's register takes its bytes straight from them.
        w2_mark = Signal(self.slots)  # the line's arrival slot, one-hot (none without a line)
        m.d.sync += w2_mark.eq(Mux(w1_valid & ~self.start, _onehot(w1.index % self.slots, self.slots), 0))
        writes = self._bank_writes(m, w1_valid, w1, lo, wrap_lo, offset_nz)
        write_data = Cat([rotated] * (R // LINE_BYTES))  # a rotated line suits every slot of a row
        # Only line 0 has bytes before the stream (where the slot holds its first ``offset``
        # bytes), only the last line bytes after it (placed as the line's bytes are: a per-stream
        # register, from the stream's registers, valid by the time a line reaches W2). The two
        # index compares are registered into W2 beside the enables they gate, off the path of
        # W1's wide enables; the write takes them out.
        w2_first, w2_last = Signal(reset_less=True), Signal(reset_less=True)
        m.d.sync += [w2_first.eq(w1.index == 0), w2_last.eq(w1.index == last_line)]
        last_placed = Signal(LINE_BYTES, reset_less=True)
        m.d.sync += last_placed.eq(rotate(m, "last_placed", last_mask, digits[0], 1))
        n = R // LINE_BYTES
        all_bytes = Const((1 << R) - 1, R)
        stream_bytes = Mux(w2_first, Cat([lo] * n), all_bytes) & Mux(w2_last, Cat([last_placed] * n), all_bytes)
        arrived = self._arrivals(m, w2_mark)
        pos, row1, read_data, read_en = self._read(m, last_line, arrived)
        if self.rows > 1:
            self._banks(m, writes, write_data, stream_bytes, pos, row1, read_data, read_en)
        else:
            # A one-row queue (bitmask, scales) is a register, as in the paper's Table 3; its
            # line's two parts both land in it.
            for j in range(R):
                with m.If((writes[0].en[j] | writes[1].en[j]) & stream_bytes[j]):
                    m.d.sync += read_data.word_select(j, 8).eq(write_data.word_select(j, 8))

        # Line k may be requested once its last row is free: rows below the next beat's row are (an
        # issued beat was read from its row already). With ``free`` bytes of the stream below the
        # free rows' end, line k's last byte is below it when k < free / 64 (the offset stays within
        # a line) or when the stream ends below it. ``free_lines`` is registered from ``pos`` a cycle
        # late (as ``pos`` only grows, a cautious view), and ``room`` is a register too, off the
        # loader's request path: the next issue index is this one or the one after it (``issue``),
        # so both compares are made from registers and ``issue`` picks.
        free_lines = Signal(LEN_BITS)
        room = Signal(init=1)
        m.d.sync += [free_lines.eq((pos // R + self.rows) * R // LINE_BYTES),
                     room.eq(Mux(self.issue, self.issue_index + 1 < free_lines, self.issue_index < free_lines)
                             | (length <= free_lines * LINE_BYTES))]
        with m.If(self.start):  # (the queue is empty)
            m.d.sync += [free_lines.eq(self.rows * R // LINE_BYTES), room.eq(1)]
        m.d.comb += self.room.eq(room)
        return m

    def _bank_writes(self, m, valid, line, lo, wrap_lo, offset_nz):
        """The line of stage W1 placed in rows S and S + 1 (``elaborate``): S = k div (R/64) - 1
        when k mod R/64 = 0 and offset > 0 (the line's first bytes end the row before), else k div
        (R/64); only slot 0's ``wrap_lo`` bytes of such a line are in row S + 1. The two rows differ
        in parity, so each bank writes one of them: registered write ports (address, data, byte
        enables), even bank first, beside the realigner's rotated line. The enables are all the
        line's bytes; the write takes out those of the first and last lines that are not the
        stream's (``elaborate``)."""
        R, n = self.row_bytes, self.row_bytes // LINE_BYTES
        slot = _onehot(line.index % n, n)
        wraps = slot[0] & offset_nz
        row = (line.index // n - wraps)[:max(1, (self.rows - 1).bit_length())]  # S mod rows
        line_bytes = Cat(Mux(slot[s], lo, 0) | Mux(slot[(s + 1) % n], ~lo, 0) for s in range(n))
        ahead = Cat(Mux(slot[0], wrap_lo, 0), Const(0, R - LINE_BYTES))  # the bytes in row S + 1
        layout = data.StructLayout({"addr": _index(self.rows // 2), "en": R})
        # No reset: ``en`` follows stage W1's valid bit a cycle later (a write left from before a
        # reset lands before the next stream starts, and rows are read only once their lines came).
        writes = [Signal(layout, name=f"write_{name}", reset_less=True) for name in ("even", "odd")]
        for parity, port in enumerate(writes):
            later = row[0] != parity  # this bank's row is S + 1
            m.d.sync += [port.addr.eq((row + later) % self.rows // 2),
                         port.en.eq(Mux(valid, Mux(later, ahead, line_bytes & ~ahead), 0))]
        return writes

    def _arrivals(self, m, mark):
        """Lines below ``arrived`` are all in; later ones are marked in a bitmap until they join.
        ``mark``: the slot of the line arriving now, one-hot."""
        arrived = Signal(LINE_INDEX_BITS + 1)
        seen = Signal(self.slots)
        slot = Signal(self.slots, init=1)  # arrived mod slots, one-hot: no decode on the way to ``joined``
        joined = ((seen | mark) & slot).any()
        # The increment is an add of its own, so that ``joined`` (late) only picks its result.
        m.d.sync += [seen.eq((seen | mark) & ~Mux(joined, slot, 0)),
                     slot.eq(Mux(joined, slot.rotate_left(1), slot)),
                     arrived.eq(Mux(joined, fast_add(m, arrived, 0, 1)[:len(arrived)], arrived))]
        with m.If(self.start):
            m.d.sync += [arrived.eq(0), seen.eq(0), slot.eq(1)]
        return arrived

    def _read(self, m, last_line, arrived):
        """The next beat to issue covers stream bytes [pos, pos + B) of the row holding byte
        ``pos``; it is issued once the line holding its last byte has arrived and stage 1 is free.
        Returns (pos, stage 1's row, the row stage 1 read, the read enable)."""
        R, B = self.row_bytes, self.beat_bytes
        # Kept per beat rather than derived from ``pos``, so that the issue is one compare: the
        # bytes left from ``pos``, pos + offset + B - 1 (whose line a full beat needs), whether the
        # beat is the last and the line holding its last byte. ``need`` follows the registers a
        # cycle later unless the beat is issued, so it is stale after ``start`` (with
        # ``last_line``) while nothing has arrived.
        # ``start`` loads these, and nothing issues before it (``arrived`` is 0): no reset, which
        # would be a gate behind the issue's fanout.
        pos = Signal(LEN_BITS + 8, reset_less=True)
        rest = Signal(signed(LEN_BITS + 2), reset_less=True)
        reach = Signal(LEN_BITS + 8, reset_less=True)
        last = Signal(reset_less=True)
        need = Signal(LINE_INDEX_BITS + 1, reset_less=True)
        empty = Signal()
        done = Signal()  # every beat of the stream was issued

        valid1 = Signal()
        row1 = Signal(_index(self.rows), reset_less=True)  # stage 1's data: ``valid1`` says
        last1 = Signal(reset_less=True)
        nbytes1 = Signal(range(B + 1), reset_less=True)
        sel1 = Signal(_index(R // B), reset_less=True)
        out = self.beats
        load1, load2 = stage_loads(m, [valid1, out.valid], out.ready, "beat")
        issue = ~done & (empty | ~at_least(need, arrived)) & load1  # arrived > need, a tree compare
        read_data = Signal(8 * R, reset_less=True)
        with m.If(load1):
            m.d.sync += [valid1.eq(issue), row1.eq(pos // R % self.rows), last1.eq(last),
                         nbytes1.eq(Mux(last, rest, B)), sel1.eq(pos % R // B)]
        # The steps as parallel-prefix adds: a plain add maps to a ripple of carries across the bits.
        reach_next = fast_add(m, reach, B)[:len(reach)]
        with m.If(issue):
            m.d.sync += [pos.eq(fast_add(m, pos, B)[:len(pos)]), rest.eq(fast_add(m, rest, (1 << len(rest)) - B)[:len(rest)]),
                         reach.eq(reach_next), done.eq(last), last.eq(rest <= 2 * B),
                         need.eq(Mux(rest <= 2 * B, last_line, reach_next // LINE_BYTES))]
        with m.Else():
            m.d.sync += need.eq(Mux(last, last_line, reach // LINE_BYTES))
        with m.If(load2):
            m.d.sync += [out.valid.eq(valid1), out.payload.nbytes.eq(nbytes1), out.payload.last.eq(last1)]
        if self.rows > 1:
            beat_data = Signal.like(out.payload.data, reset_less=True)
            with m.If(load2):
                m.d.sync += beat_data.eq(read_data.word_select(sel1, 8 * B))
        else:
            # A one-row queue's stream fits in its row, each byte written once, and a beat is issued
            # once its bytes are in: the row holds the beat unchanged while it waits in stage 2 (a
            # start clears the stage before the next stream's lines land), so it is read from there.
            sel2 = Signal.like(sel1)
            with m.If(load2):
                m.d.sync += sel2.eq(sel1)
            beat_data = read_data.word_select(sel2, 8 * B)
        m.d.comb += out.payload.data.eq(beat_data)
        with m.If(self.start):
            m.d.sync += [pos.eq(0), rest.eq(self.length), reach.eq(self.offset + B - 1), last.eq(self.length <= B),
                         empty.eq(self.length == 0), done.eq(0), valid1.eq(0), out.valid.eq(0)]
        return pos, row1, read_data, load1

    def _banks(self, m, writes, write_data, stream_bytes, pos, row1, read_data, read_en):
        """The two banks, written from stage W2 (of its enabled bytes, the ``stream_bytes``); both
        read the row of the beat being issued, and stage 1 keeps the one it lies in."""
        R = self.row_bytes
        row = pos // R % self.rows  # the row read
        bank_data = []
        for name, write in zip(("even", "odd"), writes):
            m.submodules[name] = bank = memory.Memory(shape=8 * R, depth=self.rows // 2, init=[])
            wp, rp = bank.write_port(granularity=8), bank.read_port()
            m.d.comb += [wp.addr.eq(write.addr), wp.data.eq(write_data), wp.en.eq(write.en & stream_bytes),
                         rp.addr.eq(row // 2), rp.en.eq(read_en)]
            bank_data.append(rp.data)
        m.d.comb += read_data.eq(Mux(row1[0], bank_data[1], bank_data[0]))
