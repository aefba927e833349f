"""The memory behind the PE's mem_req/mem_resp and pf_req ports: an L2 in front of a memory channel."""

import math
from fractions import Fraction

import numpy as np

from deca.hw.layouts import LINE_BYTES

from .bus import ProtocolError


def _garbage(addr):
    """What a byte outside the image reads as: never all zeros over a line, differs from line to line."""
    return (addr * 0x9D + 0x5B) & 0xFF


class MemoryModel:
    """The memory behind mem_req/mem_resp and pf_req, holding one image at ``base``: an L2 in front
    of a memory channel.

    A line not in L2 is fetched over the channel, which starts a line every 64/``bytes_per_cycle``
    cycles at most, in request order (None: no limit), and delivers it a latency drawn from
    ``miss_latency`` (inclusive range, in cycles) after it started; the line then stays in L2.
    Demand misses and prefetches share the channel. A demand read of a line in L2, or on its way
    there, is answered a latency drawn from ``hit_latency`` after the request, but not before the
    line arrived. Responses whose time has come go out one per cycle, at random among them with
    ``reorder`` and oldest first without. ``req_backpressure`` and ``pf_backpressure``: probability
    that mem_req.ready or pf_req.ready is low in a cycle.
    """

    def __init__(self, image, base, rng, *, miss_latency=(30, 80), hit_latency=(4, 12), bytes_per_cycle=None,
                 reorder=True, req_backpressure=0.0, pf_backpressure=0.0):
        self.image = np.asarray(image, np.uint8).tobytes()
        self.base, self.end = base, base + len(self.image)
        self.rng = rng
        self.miss_latency, self.hit_latency = tuple(miss_latency), tuple(hit_latency)
        if bytes_per_cycle is not None and not bytes_per_cycle > 0:
            raise ValueError(f"memory bandwidth must be a positive number of bytes per cycle, got {bytes_per_cycle!r}")
        self.bytes_per_cycle, self.reorder = bytes_per_cycle, reorder
        self.req_backpressure, self.pf_backpressure = req_backpressure, pf_backpressure
        # Exact channel times: float sums of 64/B drift across whole cycles.
        self._line_time = None if bytes_per_cycle is None else Fraction(LINE_BYTES) / Fraction(bytes_per_cycle)
        self.channel_free = Fraction(0)  # when the channel can start its next line
        self.in_l2 = {}  # line address -> cycle it arrives (arrived) in L2
        self.outstanding = []  # [due cycle, tag, line address], in request order
        self._offered = None
        self.lines_demanded = self.lines_prefetched = self.lines_fetched = 0
        self.prefetches = []  # prefetched line addresses, in order

    def _latency(self, bounds):
        lo, hi = bounds
        return lo if lo == hi else int(self.rng.integers(lo, hi + 1))

    def _fetch(self, addr, cycle):
        """Start bringing the line at ``addr`` into L2 over the channel; returns its arrival cycle."""
        start = max(Fraction(cycle), self.channel_free)
        if self._line_time is not None:
            self.channel_free = start + self._line_time
        self.lines_fetched += 1
        arrival = self.in_l2[addr] = math.ceil(start) + self._latency(self.miss_latency)
        return arrival

    def _ready(self, backpressure):
        return not (backpressure and self.rng.random() < backpressure)

    def request_ready(self):
        return self._ready(self.req_backpressure)

    def prefetch_ready(self):
        return self._ready(self.pf_backpressure)

    def _check_line(self, addr, what):
        if addr % LINE_BYTES:
            raise ProtocolError(f"PE {what} address {addr:#x} is not a multiple of {LINE_BYTES}")

    def demand(self, addr, tag, cycle):
        """A read of the line at ``addr`` was accepted in ``cycle``."""
        self._check_line(addr, "read")
        if addr + LINE_BYTES <= self.base or addr >= self.end:
            raise ProtocolError(f"PE read line {addr:#x} outside the image [{self.base:#x}, {self.end:#x})")
        if any(entry[1] == tag for entry in self.outstanding):
            raise ProtocolError(f"PE reused tag {tag} (line {addr:#x}) while a read with that tag is outstanding")
        if addr in self.in_l2:
            due = max(self.in_l2[addr], cycle + self._latency(self.hit_latency))
        else:
            due = self._fetch(addr, cycle)
        self.outstanding.append([due, tag, addr])
        self.lines_demanded += 1

    def channel_busy(self, cycles):
        """Cycles the channel spent fetching lines in a run of ``cycles`` cycles, which ended after
        the last request: what it still had to fetch then (prefetches past the end) does not count."""
        if self._line_time is None:
            raise ValueError("an unlimited channel has no utilization")
        return float(self.lines_fetched * self._line_time - max(Fraction(0), self.channel_free - cycles))

    def prefetch(self, addr, cycle):
        """A prefetch of the line at ``addr`` was accepted in ``cycle``: the line is fetched into L2
        unless it is there or on its way."""
        self._check_line(addr, "prefetch")
        if addr not in self.in_l2:
            self._fetch(addr, cycle)
        self.prefetches.append(addr)
        self.lines_prefetched += 1

    def line(self, addr):
        """The 64 bytes at ``addr`` as an int (byte a at bits 8(a mod 64)+7..), garbage outside the image."""
        lo, hi = max(addr, self.base), min(addr + LINE_BYTES, self.end)
        if lo == addr and hi == addr + LINE_BYTES:
            return int.from_bytes(self.image[addr - self.base:hi - self.base], "little")
        data = bytearray(_garbage(a) for a in range(addr, addr + LINE_BYTES))
        data[lo - addr:hi - addr] = self.image[lo - self.base:hi - self.base]
        return int.from_bytes(data, "little")

    def offer(self, cycle):
        """The response (tag, data) on mem_resp in ``cycle``, or None. Call once per cycle."""
        self._offered = None
        if self.reorder:
            due = [entry for entry in self.outstanding if entry[0] <= cycle]
            if due:
                self._offered = due[int(self.rng.integers(len(due)))] if len(due) > 1 else due[0]
        elif self.outstanding and self.outstanding[0][0] <= cycle:
            self._offered = self.outstanding[0]
        if self._offered is None:
            return None
        return self._offered[1], self.line(self._offered[2])

    def take(self):
        """The PE took this cycle's offered response."""
        self.outstanding.remove(self._offered)
        self._offered = None

    def summary(self):
        lines = ", ".join(f"tag {tag} line {addr:#x} due {due}" for due, tag, addr in self.outstanding)
        return f"{len(self.outstanding)} memory reads outstanding{': ' + lines if lines else ''}"


