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

import operator
from functools import reduce

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from deca.golden.format import Q_BITS

from .arith import fast_add
from .layouts import BF16, physical_lanes, value_beat_bits, value_beat_layout
from .queues import rotate
from .stages import copies, enable, hold

#: Buffer size in beats. Reading a full beat per cycle (Q = 16) while each write is decided a cycle
#: ahead needs three; four keep the pointers binary and absorb the short beats at tiles' ends.
BUFFER_BEATS = 4
#: Bits of a buffer word: the read stages select whole words, then shift by the rest of ``ptr``.
WORD = 64
#: Bits of the beat rotated by one set of the offset digits.
DIGIT_SHARE = 256
#: Cycles from a read at ``ptr`` (with ``en``) to its ``codes``.
READ_LATENCY = 2
#: Lanes whose code selection one copy of ``is_q`` drives: all lanes of W = 32 on one register put
#: a buffer tree (about 90 ps) in front of the LUT array's address registers.
LANES_PER_IS_Q = 8


class CodeUnpacker(wiring.Component):
    """``codes[i]`` is the code at ``ptr + i*q`` of the cycle ``READ_LATENCY`` read cycles before
    (zero-extended); the read stages move on in the cycles after ``en_next`` is high (the stall
    decided a cycle ahead: the stages' enables are flip-flops). ``wp`` is the write pointer,
    ``size`` the buffer's bits: the bits up to ``wp`` are in the buffer. ``take`` says the next
    cycle's ``ptr`` is ``next_ptr`` (otherwise it stays)."""

    def __init__(self, W, L):
        self.lanes = physical_lanes(W, L)
        self.beat_bits = value_beat_bits(W, L)
        self.size = BUFFER_BEATS * self.beat_bits
        self.is_q_copies = -(-self.lanes // LANES_PER_IS_Q)
        ptr_bits = self.size.bit_length()  # one more than the address: the wrap bit
        super().__init__({
            # Q, one-hot over Q_BITS, in equal copies: copy c selects the codes of lanes
            # c * LANES_PER_IS_Q onwards.
            "is_q": In(data.ArrayLayout(len(Q_BITS), self.is_q_copies)),
            "values": In(stream.Signature(value_beat_layout(W, L))),
            "ptr": In(ptr_bits),
            "en_next": In(1),
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
        # Q one-hot: each value of it selects a field of the window in every lane, a wide fanout
        # that a decode in front would lengthen.
        for i in range(self.lanes):
            is_q = self.is_q[i // LANES_PER_IS_Q]
            m.d.comb += self.codes[i].eq(reduce(operator.or_, (Mux(is_q[k], window[i * q:(i + 1) * q], 0)
                                                               for k, q in enumerate(Q_BITS))))
        return m

    def _write(self, m):
        beat_bits, size = self.beat_bits, self.size
        beat_bytes = beat_bits // 8
        slots = BUFFER_BEATS
        # The buffer and the beat's register hold data only (the pointers say what is valid): no reset.
        self.buf = [Signal(beat_bits, name=f"slot{s}", reset_less=True) for s in range(slots)]

        # The input register: the beat, already rotated to where it will be written, and its bits.
        # A beat waits there only while the buffer has no room, when ``wp`` does not move, and is
        # written at the ``wp`` of the cycle after it came: ``lead`` (below) minus a beat, so the
        # same byte offset. Byte k of the beat goes to byte wp/8 + k of the buffer: rotated by that
        # offset, the beat spans the slot of ``wp`` (from the offset up) and the next one (below it).
        held = Signal()
        # Registers recomputed every cycle or read only under a flag that reset clears (``bits``
        # under ``held``, ``lead_moved`` unless ``stayed``) have no reset: it reaches them from the
        # squash input, whose path into the registers must fit in half a cycle.
        bits = Signal(range(beat_bits + 1), reset_less=True)
        write = Signal()  # the held beat goes into the buffer in this cycle; decided a cycle ahead,
        # like ``added``, so that both leave registers
        # ``values.ready`` (~held | write) in a flip-flop of its own: ``write`` enables every byte of
        # the buffer, and ``values.ready`` a whole register slice in front.
        ready = Signal(init=1)
        m.d.comb += self.values.ready.eq(ready)
        beat = self.values.payload
        accept = self.values.valid & self.values.ready
        held_next, bits_next = Mux(self.values.ready, self.values.valid, held), Mux(accept, beat.nbytes * 8, bits)
        m.d.sync += [held.eq(held_next), bits.eq(bits_next)]
        # ``lead`` (below) is either of two registers, as the last cycle's write decision went
        # (``stayed``), and that decision compares both with the pointers: it ends at flip-flops
        # whose inputs it does not select.
        lead_kept, lead_moved = Signal(len(self.wp), init=beat_bits), Signal(len(self.wp), reset_less=True)
        stayed = Signal(init=1)
        lead = Signal(len(self.wp))
        m.d.comb += lead.eq(Mux(stayed, lead_kept, lead_moved))
        offset_bits = (beat_bytes - 1).bit_length()
        # The rotation takes the base-4 digits of lead's byte in a beat, one-hot (``rotate``): a
        # shifter by the binary amount put each bit's fanout in front of six levels of multiplexers.
        # Like ``lead``, each digit is either of two registers, chosen by a copy of ``stayed`` (whose
        # load put five buffers in front of the rotation at W = 64): the write decision drives none
        # of them. A set of them per ``DIGIT_SHARE`` bits of the beat, each with its own copy of
        # ``stayed``, so that a digit's buffer tree drives a share of the rotation. ``kept`` resets
        # to offset 0, as ``lead_kept`` does (all-zero digits would zero the beat).
        digit_widths = [min(2, offset_bits - 2 * j) for j in range((offset_bits + 1) // 2)]
        shares = max(1, beat_bits // DIGIT_SHARE)
        stayed_digits = [Signal(name=f"stayed_digits{c}") for c in range(shares)]
        digits = [[Signal(1 << n, name=f"offset_digit{c}_{j}") for j, n in enumerate(digit_widths)]
                  for c in range(shares)]
        digit_regs = []  # (j, digit, kept, moved) for every digit of every share
        for share, stayed_share in zip(digits, stayed_digits):
            for j, digit in enumerate(share):
                kept = Signal.like(digit, name=f"{digit.name}_kept", init=1)
                moved = Signal.like(digit, name=f"{digit.name}_moved", reset_less=True)
                m.d.comb += digit.eq(Mux(stayed_share, kept, moved))
                digit_regs.append((j, digit, kept, moved))
        rotated = Signal(beat_bits, reset_less=True)
        placed = rotate(m, "placed", beat.data, digits, 8, left=True)
        with m.If(accept):
            m.d.sync += rotated.eq(placed)

        # Where the next cycle's write goes, in registers: byte k of a slot is at or above the
        # offset (``above``), and the slot of ``wp`` (one-hot). A whole beat is written, its bytes
        # past ``nbytes`` too: the room for a whole beat is there (below), and the next beat
        # overwrites them.
        above = Signal(beat_bytes, reset_less=True)
        slot = Signal(slots, reset_less=True)
        lead_slot = lead[3 + offset_bits:(size - 1).bit_length()]
        m.d.sync += [above.eq(Const((1 << beat_bytes) - 1, beat_bytes) << lead[3:3 + offset_bits]),
                     slot.eq(Const(1, slots) << (lead_slot - 1)[:len(lead_slot)])]
        for s, word in enumerate(self.buf):
            mine = Mux(slot[s], above, 0) | Mux(slot[(s - 1) % slots], ~above, 0)
            for k in range(beat_bytes):
                with m.If(write & mine[k]):
                    m.d.sync += word.word_select(k, 8).eq(rotated.word_select(k, 8))

        # Next cycle's write: a held beat with room for a whole beat behind the next cycle's ``ptr``,
        # after this cycle's write. ``lead`` is the next cycle's ``wp`` plus a beat.

        def step(part):
            """Bits ``part`` of ``lead`` after this cycle's write (the beat taken now, else the one
            held): added to both of lead's registers and chosen last (``stayed`` fans out)."""
            def add(base):
                return Mux(accept, fast_add(m, base[part], (beat.nbytes * 8)[part]),
                           fast_add(m, base[part], bits[part]))[:len(base[part])]
            return Mux(stayed, add(lead_kept), add(lead_moved))
        after = step(slice(None))
        # The byte in a beat alone, for the rotation's digits: a narrower add, shorter carries.
        after_offset = step(slice(3, 3 + offset_bits))

        # lead - ptr is between a beat and 1.5 x size (size = 2^(n-1) for n-bit pointers: W and L
        # are powers of two), so it is at most size when ptr - lead, modulo 2^n, is at least 2^(n-1):
        # one subtraction's top bit. ``lead`` is byte aligned, so the bytes decide. That bit is the
        # operands' top bits and the borrow from below them: the carry out of ptr + ~lead + 1, from
        # a carry network whose levels are kept (a compare left to logic optimization became a
        # chain of ~190 ps at W = 64).
        assert size == 1 << (len(self.wp) - 1)
        top = len(self.wp) - 1

        def fits(ptr):
            return Mux(stayed, *(~(ptr[top] ^ base[top] ^ fast_add(m, ptr[3:top], ~base[3:top], 1)[top - 3])
                                 for base in (lead_kept, lead_moved)))
        write_next = held_next & Mux(self.take, fits(self.next_ptr), fits(self.ptr))
        m.d.comb += [s.eq(q) for s, q in zip(stayed_digits, copies(m, "stayed_digits", ~write_next, 1, shares, init=1))]
        m.d.sync += [self.wp.eq(self.wp + self.added), write.eq(write_next), ready.eq(~held_next | write_next),
                     stayed.eq(~write_next),
                     self.added.eq(Mux(write_next, bits_next, 0)), lead_kept.eq(lead), lead_moved.eq(after),
                     *(kept.eq(digit) for _, digit, kept, _ in digit_regs),
                     *(moved.eq(Const(1, len(moved)) << after_offset[2 * j:2 * j + 2])
                       for j, _, _, moved in digit_regs)]

    def _read(self, m):
        words = [w.word_select(k, WORD) for w in self.buf for k in range(self.beat_bits // WORD)]
        span = self.beat_bits // WORD + 1  # words that hold any beat of bits
        # The word holding ``ptr``, one-hot in a register that follows ``take``: the select is an
        # AND-OR behind a flip-flop rather than a decode of ``ptr`` fanned out to every word.
        word_bits = slice((WORD - 1).bit_length(), (self.size - 1).bit_length())
        first = Signal(len(words), init=1)
        with m.If(self.take):
            m.d.sync += first.eq((Const(1, len(words)) << self.next_ptr[word_bits])[:len(words)])
        picking = Signal(span * WORD)
        for j in range(span):
            m.d.comb += picking.word_select(j, WORD).eq(
                reduce(operator.or_, (Mux(first[k], words[(k + j) % len(words)], 0) for k in range(len(words)))))
        picked = hold(m, "picked", picking, self.en_next)
        # The shift within a word, by its base-4 digits, each one-hot in a register: three levels of
        # 4-way AND-OR instead of six of 2-way muxes behind a fanout of the amount. Each output word
        # is shifted apart with its own copy of the digits (a ``hold`` of its own), so that a digit
        # drives one word's multiplexers, not the whole beat's; after level j the shift left is
        # below 4^j, so that level keeps WORD + 4^j - 1 bits.
        assert WORD == 4 ** 3
        digits = Cat((Const(1, 4) << self.ptr[2 * j:2 * j + 2])[:4] for j in range(3))
        window = []
        for c in range(self.beat_bits // WORD):
            mine = hold(m, f"shift_digits{c}", digits, self.en_next)
            shifted = picked[c * WORD:(c + 2) * WORD]
            for j in reversed(range(3)):
                # A signal: each level reads the one before four times.
                level = Signal(WORD + 4 ** j - 1, name=f"shifted{c}_{j}")
                moved = [(shifted >> (k << 2 * j))[:len(level)] for k in range(4)]
                m.d.comb += level.eq(reduce(operator.or_, (Mux(mine[4 * j + k], v, 0) for k, v in enumerate(moved))))
                shifted = level
            window.append(shifted)
        return hold(m, "window", Cat(*window), self.en_next)
