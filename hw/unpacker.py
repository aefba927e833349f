"""Code unpacker: the SQQ side of the dequantization stage, a circular bit buffer of the value stream.

Value-stream beats enter an input register, then the buffer at the write pointer ``wp`` (a bit
address; beats carry whole bytes, so it stays byte aligned). The dequantization stage reads codes
from its read pointer ``ptr``: in the cycle it is there, the 64-bit words that hold the next beat
of bits are selected; a cycle later they are shifted to put ``ptr`` at bit 0; a cycle later still,
lane i's code is the Q bits at ``ptr + i*Q`` (``codes``). Tiles' streams arrive back to back in
whole bytes, so a tile's first code is byte aligned in the buffer and skipping a tile's padding
(``deca.golden.format``) is rounding the read pointer up to a byte: the stage's business.

Pointers count bits modulo twice the buffer size: ``wp - ptr`` is what the buffer holds, 0 to
``size``. A held beat is written when the buffer has room for a whole beat behind the next cycle's
``ptr`` (the bits from there on are what later reads may need), decided a cycle ahead so that
``values.ready``, the write enables and ``added`` come from registers.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from deca.golden.format import Q_BITS

from .arith import fast_add
from .layouts import BF16, physical_lanes, value_beat_bits, value_beat_layout
from .stages import hold

#: Buffer size in beats. Reading a full beat per cycle (Q = 16) while each write is decided a cycle
#: ahead needs three; four keep the pointers binary and absorb the short beats at tiles' ends.
BUFFER_BEATS = 4
#: Bits of a buffer word: the read stages select whole words, then shift by the rest of ``ptr``.
WORD = 64
#: Cycles from a read at ``ptr`` (with ``en``) to its ``codes``.
READ_LATENCY = 2


class CodeUnpacker(wiring.Component):
    """``codes[i]`` is the code at ``ptr + i*q`` of the cycle ``READ_LATENCY`` read cycles before
    (zero-extended); the read stages move on when ``en`` is high. ``wp`` is the write pointer,
    ``size`` the buffer's bits: the bits up to ``wp`` are in the buffer. ``take`` says the next
    cycle's ``ptr`` is ``next_ptr`` (otherwise it stays)."""

    def __init__(self, W, L):
        self.lanes = physical_lanes(W, L)
        self.beat_bits = value_beat_bits(W, L)
        self.size = BUFFER_BEATS * self.beat_bits
        ptr_bits = self.size.bit_length()  # one more than the address: the wrap bit
        super().__init__({
            "q": In(5),
            "values": In(stream.Signature(value_beat_layout(W, L))),
            "ptr": In(ptr_bits),
            "en": In(1),
            "wp": Out(ptr_bits),
            "next_ptr": In(ptr_bits),  # ``ptr`` of the next cycle, if ``take``
            "take": In(1),
            "added": Out(range(self.beat_bits + 1)),  # bits going into the buffer in this cycle
            "codes": Out(data.ArrayLayout(BF16, self.lanes)),
        })

    def elaborate(self, platform):
        m = Module()
        self._write(m)
        window = self._read(m)
        for i in range(self.lanes):
            with m.Switch(self.q):
                for q in Q_BITS:
                    with m.Case(q):
                        m.d.comb += self.codes[i].eq(window[i * q:(i + 1) * q])
        return m

    def _write(self, m):
        beat_bits, size = self.beat_bits, self.size
        beat_bytes = beat_bits // 8
        slots = BUFFER_BEATS
        self.buf = [Signal(beat_bits, name=f"slot{s}") for s in range(slots)]

        # The input register: the beat, its valid bytes as a mask, and their bits.
        held = Signal()
        data_ = Signal(beat_bits)
        valid = Signal(beat_bytes)
        bits = Signal(range(beat_bits + 1))
        write = Signal()  # the held beat goes into the buffer in this cycle; decided a cycle ahead,
        # like ``added``, so that both leave registers
        m.d.comb += self.values.ready.eq(~held | write)
        beat = self.values.payload
        accept = self.values.valid & self.values.ready
        held_next, bits_next = Mux(self.values.ready, self.values.valid, held), Mux(accept, beat.nbytes * 8, bits)
        m.d.sync += [held.eq(held_next), bits.eq(bits_next)]
        with m.If(accept):
            # The first ``nbytes`` bytes as a shift (compares of every byte against it map to a chain).
            all_valid = Const((1 << beat_bytes) - 1, beat_bytes)
            m.d.sync += [data_.eq(beat.data), valid.eq(~(all_valid << beat.nbytes)[:beat_bytes])]

        # Byte k of the beat goes to byte wp/8 + k of the buffer: rotated by the byte offset within
        # a slot, the beat spans the slot of ``wp`` (from the offset up) and the next one (below it).
        offset = self.wp[3:3 + (beat_bytes - 1).bit_length()]
        slot = self.wp[3 + (beat_bytes - 1).bit_length():(size - 1).bit_length()]
        rot_data = Signal(beat_bits)
        rot_valid = Signal(beat_bytes)
        m.d.comb += [rot_data.eq((Cat(data_, data_) << offset * 8)[beat_bits:]),
                     rot_valid.eq((Cat(valid, valid) << offset)[beat_bytes:])]
        above = Signal(beat_bytes)  # byte k of a slot is at or above the offset
        m.d.comb += above.eq(Const((1 << beat_bytes) - 1, beat_bytes) << offset)
        for s, word in enumerate(self.buf):
            mine = Mux(slot == s, above, Mux(slot == (s - 1) % slots, ~above, 0))
            for k in range(beat_bytes):
                with m.If(write & rot_valid[k] & mine[k]):
                    m.d.sync += word.word_select(k, 8).eq(rot_data.word_select(k, 8))

        # Next cycle's write: a held beat with room for a whole beat behind the next cycle's ``ptr``,
        # after this cycle's write. ``lead`` is a register: the next cycle's ``wp`` plus a beat,
        # updated with both outcomes of the decision ready, so that the decision is one subtraction
        # and a compare.
        lead = Signal(len(self.wp), init=beat_bits)
        after = Mux(accept, fast_add(m, lead, beat.nbytes * 8)[:len(lead)], fast_add(m, lead, bits)[:len(lead)])

        # lead - ptr is between a beat and 1.5 x size (size = 2^(n-1) for n-bit pointers: W and L
        # are powers of two), so it is at most size when ptr - lead, modulo 2^n, is at least 2^(n-1):
        # one subtraction's top bit, no compare.
        assert size == 1 << (len(self.wp) - 1)

        def fits(ptr):
            return fast_add(m, ptr, ~lead, carry_in=1)[len(ptr) - 1]
        write_next = held_next & Mux(self.take, fits(self.next_ptr), fits(self.ptr))
        m.d.sync += [self.wp.eq(self.wp + self.added), write.eq(write_next),
                     self.added.eq(Mux(write_next, bits_next, 0)), lead.eq(Mux(write_next, after, lead))]

    def _read(self, m):
        words = [w.word_select(k, WORD) for w in self.buf for k in range(self.beat_bits // WORD)]
        span = self.beat_bits // WORD + 1  # words that hold any beat of bits
        first = self.ptr[(WORD - 1).bit_length():(self.size - 1).bit_length()]
        picking = Signal(span * WORD)
        for j in range(span):
            with m.Switch(first):
                for k in range(len(words)):
                    with m.Case(k):
                        m.d.comb += picking.word_select(j, WORD).eq(words[(k + j) % len(words)])
        picked = hold(m, "picked", picking, self.en)
        shift = Signal(range(WORD))
        with m.If(self.en):
            m.d.sync += shift.eq(self.ptr[:(WORD - 1).bit_length()])
        return hold(m, "window", (picked >> shift)[:self.beat_bits], self.en)
