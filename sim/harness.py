"""Cycle-level models of the core and the memory that drive the DECA PE through its top-level ports.

Pure Python (no simulator import), so that the same models run the PE on the Amaranth simulator
(``AmaranthBus``) and on Icarus or Verilator through cocotb (``deca.sim.cocotb_bus.CocotbBus``).

The ``Bus`` protocol
--------------------
Ports are named as in the generated Verilog (``tepl_req__0__valid``, ``mem_resp__payload``...);
values are non-negative ints (a payload is its flat bit vector).

- ``set(name, value)`` drives an input for the current cycle;
- ``await settle()`` lets combinational outputs settle after the inputs were set; no ``set``
  may follow in the same cycle;
- ``get(name) -> int`` reads a settled output, raising ``UnresolvedValue`` on X or Z;
- ``await tick()`` advances one clock cycle: the rising edge, where the handshakes the cycle
  showed take place, and the start of the next cycle.

Every cycle the ``Harness`` sets all inputs, settles, reads every output, works out the handshakes
of the coming edge, updates its models and ticks. The register helpers (``write_reg``,
``read_regs``...) start and end at the start of a cycle too.
"""

import math
from collections import deque
from fractions import Fraction
from dataclasses import dataclass
from enum import Enum
from typing import Protocol

import numpy as np
from amaranth.hdl import Value

from deca.golden.format import TILE_ELEMS, TILE_ROWS, TileConfig, mask_bits
from deca.golden.matrix import TILE_META_DTYPE, decompress_tile
from deca.hw.layouts import (
    LINE_BYTES, SCALE_FORMAT_OF, ErrorReason, ScaleGroup, mem_request_layout, mem_response_layout,
    prefetch_layout, tepl_request_layout, tepl_response_layout,
)
from deca.hw.params import dequant_lanes, vop_cycles
from deca.hw.registers import COUNTERS, REGISTER_ADDR, field_value

#: Cycles without any handshake, on top of the longest memory latency, before the watchdog fires.
WATCHDOG_CYCLES = 3000
#: Default first address of a memory image: not line-aligned, so streams straddle lines.
DEFAULT_BASE = 0x1_2345_6789
META_FIELDS = TILE_META_DTYPE.names


class CheckFailure(AssertionError):
    """The PE broke its contract."""


class UnresolvedValue(CheckFailure):
    """An output read as X or Z."""


class Mismatch(CheckFailure):
    """A completion differs from what the core expects."""


class ProtocolError(CheckFailure):
    """A port rule or the memory contract was broken."""


class Hang(CheckFailure):
    """Nothing happened for too long."""


class Bus(Protocol):
    """See the module docstring."""

    def set(self, name: str, value: int) -> None: ...

    def get(self, name: str) -> int: ...

    async def settle(self) -> None: ...

    async def tick(self) -> None: ...


class AmaranthBus:
    """The Bus on an Amaranth testbench context (``sim.add_testbench``), for a component's ports."""

    def __init__(self, ctx, component):
        self.ctx = ctx
        self._ports = {"__".join(map(str, path)): Value.cast(value)
                       for path, _, value in component.signature.flatten(component)}

    def set(self, name, value):
        self.ctx.set(self._ports[name], value)

    def get(self, name):
        return self.ctx.get(self._ports[name])

    async def settle(self):
        pass  # a testbench's ctx.get already sees the settled values

    async def tick(self):
        await self.ctx.tick()


# Payloads ---------------------------------------------------------------------------------------


class Packer:
    """Dicts of field values to the flat int of an Amaranth ``StructLayout``, and back."""

    def __init__(self, layout):
        self.fields = tuple((name, field.offset, (1 << field.width) - 1) for name, field in layout)
        self._field = {name: (offset, mask) for name, offset, mask in self.fields}
        self.width = layout.size

    def offset(self, name):
        return self._field[name][0]

    def pack(self, values):
        word = 0
        for name, value in values.items():
            offset, mask = self._field[name]
            value = int(value.value if isinstance(value, Enum) else value)
            if not 0 <= value <= mask:
                raise ValueError(f"field {name} = {value} does not fit in {mask.bit_length()} bits")
            word |= value << offset
        return word

    def unpack(self, word):
        return {name: word >> offset & mask for name, offset, mask in self.fields}


TEPL_REQ = tuple({s: f"tepl_req__{i}__{s}" for s in ("valid", "ready", "payload")} for i in (0, 1))
OUTPUTS = ("tepl_req__0__ready", "tepl_req__1__ready", "tepl_resp__valid", "tepl_resp__payload", "mem_req__valid",
           "mem_req__payload", "mem_resp__ready", "pf_req__valid", "pf_req__payload", "cfg__rdata")
#: Every input but the clock and the reset, all idle at 0.
INPUTS = ("tepl_req__0__valid", "tepl_req__0__payload", "tepl_req__1__valid", "tepl_req__1__payload",
          "tepl_resp__ready", "mem_req__ready", "mem_resp__valid", "mem_resp__payload", "pf_req__ready",
          "cfg__addr", "cfg__wdata", "cfg__we", "squash")


class PePorts:
    """Payload packers of the PE's ports for its address, id and tag widths."""

    def __init__(self, addr_bits=48, id_bits=8, tags=32):
        self.addr_bits, self.id_bits = addr_bits, id_bits
        self.tag_bits = 1 + (tags - 1).bit_length()  # the top bit names the loader
        self.tepl_req = Packer(tepl_request_layout(addr_bits, id_bits))
        self.tepl_resp = Packer(tepl_response_layout(id_bits))
        self.mem_req = Packer(mem_request_layout(addr_bits, self.tag_bits))
        self.mem_resp = Packer(mem_response_layout(self.tag_bits))
        self.pf_req = Packer(prefetch_layout(addr_bits))
        self.widths = {f"tepl_req__{i}__payload": self.tepl_req.width for i in (0, 1)} | {
            "tepl_resp__payload": self.tepl_resp.width, "mem_req__payload": self.mem_req.width,
            "mem_resp__payload": self.mem_resp.width, "pf_req__payload": self.pf_req.width}


def drive_idle(bus):
    """Drive every input (but clock and reset) to 0: no valid, no ready, no register write."""
    for name in INPUTS:
        bus.set(name, 0)


def read_outputs(bus, cycle):
    """Every output's settled value; X or Z anywhere fails naming the port and the cycle."""
    try:
        return {name: bus.get(name) for name in OUTPUTS}
    except UnresolvedValue as e:
        raise UnresolvedValue(f"cycle {cycle}: {e}") from None


async def idle_cycles(bus, cycles):
    """Run ``cycles`` cycles with idle inputs, checking that no output is X or Z; returns the last outputs."""
    drive_idle(bus)
    for cycle in range(cycles):
        await bus.settle()
        outputs = read_outputs(bus, cycle)
        await bus.tick()
    return outputs


# Requests ---------------------------------------------------------------------------------------


@dataclass(eq=False)
class Request:
    """One TEPL: its metadata, what it must produce, and a name for messages.

    ``expected``: the 16 rows of the decompressed tile as ints (element c at bits 16c+15..16c),
    or the ErrorReason it must fail with. ``mask``: the tile's bitmask bytes (empty when dense).
    """

    meta: dict
    expected: tuple | ErrorReason
    label: str
    mask: bytes = b""
    index: int = 0  # place in the core's request list, set by CoreModel
    payload: int = 0  # tepl_req payload without the id, set by Harness


def tile_rows(tile):
    """(16, 32) uint16 tile -> 16 row ints, element c at bits 16c+15..16c."""
    return tuple(int.from_bytes(row.astype("<u2").tobytes(), "little") for row in np.asarray(tile))


def meta_dict(row):
    return {name: int(row[name]) for name in META_FIELDS}


@dataclass
class Batch:
    """What one Harness run needs: the memory image and the requests on it."""

    label: str
    config: TileConfig
    image: np.ndarray
    base: int
    requests: list


def tile_batch(cm, label, base=DEFAULT_BASE, align=1):
    """Every tile of a CompressedMatrix in order, each expecting the golden tile."""
    image, meta = cm.memory_image(base, align)
    requests = []
    for t in range(cm.num_tiles):
        values, mask, scales = cm.tile_streams(t)
        requests.append(Request(meta_dict(meta[t]), tile_rows(decompress_tile(values, mask, scales, cm.config)),
                                f"{label} tile {t}", mask))
    return Batch(label, cm.config, image, base, requests)


def malformed_requests(batch, addr_bits=48):
    """Requests that must fail, one per way to get each ErrorReason (but CONFIG) wrong.

    Each is tile 0's metadata with one thing broken; broken streams still point into the image
    (the PE reads the mask to check the value length), except where the address itself is the fault.
    """
    good, cfg, top = batch.requests[0].meta, batch.config, 1 << addr_bits
    cases = [(ErrorReason.ADDR_WRAP, "value stream wraps", {"val_addr": top - 1, "val_len": max(good["val_len"], 2)})]
    if cfg.sparse:
        cases += [(ErrorReason.ADDR_WRAP, "mask wraps", {"mask_addr": top - 32}),
                  (ErrorReason.MASK_LEN, "32-byte mask", {"mask_len": 32}),
                  (ErrorReason.MASK_LEN, "no mask in sparse mode", {"mask_len": 0, "mask_addr": 0})]
    else:
        cases.append((ErrorReason.MASK_LEN, "mask in dense mode", {"mask_len": 64, "mask_addr": good["val_addr"]}))
    if cfg.scale_format:
        cases += [(ErrorReason.ADDR_WRAP, "scales wrap", {"scale_addr": top - 1}),
                  (ErrorReason.SCALE_LEN, "one scale byte short", {"scale_len": good["scale_len"] - 1}),
                  (ErrorReason.SCALE_LEN, "no scales", {"scale_len": 0, "scale_addr": 0})]
    else:
        cases.append((ErrorReason.SCALE_LEN, "scales without scaling",
                      {"scale_len": 16, "scale_addr": good["val_addr"]}))
    # An empty value stream has address 0: the long case points it at the mask instead.
    cases.append((ErrorReason.VALUE_LEN, "one value byte too many",
                  {"val_len": good["val_len"] + 1, "val_addr": good["val_addr"] or good["mask_addr"]}))
    if good["val_len"]:
        cases.append((ErrorReason.VALUE_LEN, "one value byte short", {"val_len": good["val_len"] - 1}))
    return [Request({**good, **change}, reason, f"{batch.label} {reason.name}: {what}")
            for reason, what, change in cases]


def bubble_cycles(mask, q_bits, W, L):
    """Bubbles of one tile: sum over its vOps of max(1, ceil(Wnd / Lq)), minus 512/W."""
    vops = TILE_ELEMS // W
    windows = mask_bits(np.frombuffer(mask, np.uint8)).reshape(vops, W).sum(axis=1) if mask else np.full(vops, W)
    return int(vop_cycles(windows, dequant_lanes(q_bits, L)).sum()) - vops


# Memory -----------------------------------------------------------------------------------------


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

    @property
    def max_latency(self):
        return max(self.miss_latency[1], self.hit_latency[1])

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


# Core -------------------------------------------------------------------------------------------


class CoreModel:
    """The core's side of the TEPL ports: issues requests, takes completions, squashes.

    A pending request goes to a free port (one whose previous request was accepted) with the next
    id, and stays there until accepted. ``resp_backpressure``: probability that tepl_resp.ready is
    low. Squashes come in the cycles of ``squash_at`` (cycles of the run) and, with probability
    ``squash_prob``, in any cycle with a request in flight; every request squashed is reissued
    with a fresh id, in the original order ahead of the pending ones, with probability ``reissue``,
    and dropped for good (a wrong path) otherwise.

    Counts what the PE's counters must show: ``busy_cycles`` (a request accepted in an earlier
    cycle was not completed before this one), ``backpressure_cycles``, ``tiles``, ``errors``,
    ``squash_cycles``.
    """

    def __init__(self, requests, rng, *, id_bits=8, resp_backpressure=0.0, squash_at=(), squash_prob=0.0,
                 reissue=1.0):
        self.requests = list(requests)
        for index, request in enumerate(self.requests):
            request.index = index
        self.rng = rng
        self.id_limit = 1 << id_bits
        self.resp_backpressure, self.squash_prob, self.reissue = resp_backpressure, squash_prob, reissue
        self.squash_at = set(squash_at)
        self.pending = deque(self.requests)
        self.ports = [None, None]  # (id, request) presented and not accepted yet
        self.next_id = 0
        self.delivered, self.dropped = [], []
        self.busy_cycles = self.backpressure_cycles = self.tiles = self.errors = self.squash_cycles = 0

    @property
    def done(self):
        return not self.pending and self.ports == [None, None]

    def start_cycle(self, cycle):
        """Called at the start of every cycle of a run, before the core drives the ports."""
        self.fill_ports()

    def fill_ports(self):
        for port, slot in enumerate(self.ports):
            if slot is None and self.pending:
                self.ports[port] = (self.next_id, self.pending.popleft())
                self.next_id = (self.next_id + 1) % self.id_limit

    def squash_now(self, cycle, in_flight):
        return cycle in self.squash_at or bool(in_flight and self.squash_prob and self.rng.random() < self.squash_prob)

    def resp_ready(self):
        return not (self.resp_backpressure and self.rng.random() < self.resp_backpressure)

    def accept(self, port):
        """The request on ``port`` was accepted; returns (id, request)."""
        slot, self.ports[port] = self.ports[port], None
        return slot

    def completed(self, request):
        if isinstance(request.expected, ErrorReason):
            self.errors += 1
        else:
            self.tiles += 1
            self.delivered.append(request)

    def squash(self, in_flight):
        """Abort ``in_flight`` (accepted requests) and the presented ones; reissue or drop each."""
        aborted = sorted([*in_flight, *(slot[1] for slot in self.ports if slot)], key=lambda r: r.index)
        self.ports = [None, None]
        self.squash_cycles += 1
        reissued = []
        for request in aborted:
            (reissued if self.rng.random() < self.reissue else self.dropped).append(request)
        self.pending.extendleft(reversed(reissued))
        return aborted


# Scoreboard -------------------------------------------------------------------------------------


class Scoreboard:
    """Checks every completion beat against the requests in flight, in acceptance order."""

    def __init__(self):
        self.inflight = deque()  # [id, request, next row], in acceptance order
        self.gone = {}  # id -> why a beat with it is stale ("aborted" or "completed", and the label)
        self.completions = []  # (id, request) in completion order

    def accept(self, rid, request):
        self.inflight.append([rid, request, 0])
        self.gone.pop(rid, None)

    def abort(self):
        """Every request in flight is squashed; returns them."""
        for rid, request, _ in self.inflight:
            self.gone[rid] = f"aborted by a squash ({request.label})"
        aborted = [request for _, request, _ in self.inflight]
        self.inflight.clear()
        return aborted

    def beat(self, beat, cycle):
        """Check one completion beat (the unpacked tepl_resp payload); returns the request it completes, if any."""
        rid, row = beat["id"], beat["row"]
        if not self.inflight or self.inflight[0][0] != rid:
            raise Mismatch(f"cycle {cycle}: completion beat (id {rid}, row {row}) {self._stale(rid)}")
        head = self.inflight[0]
        _, request, want_row = head
        where = f"cycle {cycle}: {request.label} (id {rid})"
        if isinstance(request.expected, ErrorReason):
            if not beat["error"]:
                raise Mismatch(f"{where}: expected error {request.expected.name}, got data row {row}")
            if beat["reason"] != request.expected.value or not beat["last"] or beat["data"]:
                raise Mismatch(f"{where}: expected a single error beat with reason {request.expected.name}, last=1 "
                               f"and data 0; got reason {_reason(beat['reason'])}, last={beat['last']}, "
                               f"data {beat['data']:#x}")
        elif beat["error"]:
            raise Mismatch(f"{where}: expected tile data, got error {_reason(beat['reason'])} at row {want_row}")
        else:
            if row != want_row:
                raise Mismatch(f"{where}: got row {row}, expected row {want_row}")
            if beat["last"] != (row == TILE_ROWS - 1):
                raise Mismatch(f"{where}: row {row} has last={beat['last']}")
            want = request.expected[row]
            if beat["data"] != want:
                diff = beat["data"] ^ want
                e = ((diff & -diff).bit_length() - 1) // 16
                raise Mismatch(f"{where}: row {row} element {e}: got {beat['data'] >> 16 * e & 0xFFFF:#06x}, "
                               f"expected {want >> 16 * e & 0xFFFF:#06x}")
            head[2] = row + 1
            if not beat["last"]:
                return None
        self.inflight.popleft()
        self.gone[rid] = f"already completed ({request.label})"
        self.completions.append((rid, request))
        return request

    def _stale(self, rid):
        if self.inflight:
            first = self.inflight[0]
            order = f"request id {first[0]} ({first[1].label}) was accepted first and is not complete"
            later = next((r for i, r, _ in self.inflight if i == rid), None)
            if later is not None:
                return f"is out of order: it belongs to {later.label}, but {order}"
            return f"has an id not in flight, {self.gone.get(rid, 'never issued')}; {order}"
        return f"has an id not in flight, {self.gone.get(rid, 'never issued')}; nothing is in flight"

    def summary(self):
        return "in flight: " + (", ".join(f"id {rid} {request.label} (next row {row})"
                                          for rid, request, row in self.inflight) or "none")


def _reason(value):
    try:
        return ErrorReason(value).name
    except ValueError:
        return f"invalid reason {value}"


# Harness ----------------------------------------------------------------------------------------


class Harness:
    """Runs a CoreModel and a MemoryModel against the PE, checking completions with a Scoreboard."""

    def __init__(self, core, memory, scoreboard, ports):
        self.core, self.memory, self.scoreboard, self.ports = core, memory, scoreboard, ports
        for request in core.requests:
            request.payload = ports.tepl_req.pack(request.meta)
        self._id_shift = ports.tepl_req.offset("id")
        self.cycle = 0  # cycles run so far
        self.last_handshake = 0

    def observed_counters(self):
        """The PE counters whose value the models know exactly."""
        core, memory = self.core, self.memory
        return {"BUSY_CYCLES": core.busy_cycles, "BACKPRESSURE_CYCLES": core.backpressure_cycles, "TILES": core.tiles,
                "ERRORS": core.errors, "SQUASHES": core.squash_cycles, "LINES_DEMANDED": memory.lines_demanded,
                "LINES_PREFETCHED": memory.lines_prefetched}

    def summary(self, why):
        core = self.core
        presented = ", ".join(f"port {p}: id {slot[0]} {slot[1].label}" for p, slot in enumerate(core.ports) if slot)
        return "\n".join([f"cycle {self.cycle}: {why}", f"last handshake in cycle {self.last_handshake}",
                          self.scoreboard.summary(), f"presented: {presented or 'none'}",
                          f"pending: {len(core.pending)} requests, dropped: {len(core.dropped)}",
                          self.memory.summary()])

    async def run(self, bus, max_cycles=None, watchdog=None):
        """Run until every request completed or was dropped and memory is quiet; inputs are idle afterwards.

        ``watchdog``: cycles without any handshake before ``Hang`` (default ``WATCHDOG_CYCLES``
        plus the longest memory latency); ``max_cycles``: a limit on the whole run.
        """
        core, memory, board, ports = self.core, self.memory, self.scoreboard, self.ports
        watchdog = watchdog or WATCHDOG_CYCLES + memory.max_latency
        stop = None if max_cycles is None else self.cycle + max_cycles
        after_squash = finished = False
        while not finished:
            cycle = self.cycle
            if cycle - self.last_handshake > watchdog:
                raise Hang(self.summary(f"no handshake for {watchdog} cycles"))
            if cycle == stop:
                raise Hang(self.summary(f"the run took more than {max_cycles} cycles"))
            core.start_cycle(cycle)
            squash = core.squash_now(cycle, bool(board.inflight))
            for names, slot in zip(TEPL_REQ, core.ports):
                bus.set(names["valid"], slot is not None)
                if slot is not None:
                    bus.set(names["payload"], slot[1].payload | slot[0] << self._id_shift)
            resp_ready = core.resp_ready()
            mem_ready, pf_ready = memory.request_ready(), memory.prefetch_ready()
            offer = memory.offer(cycle)
            bus.set("tepl_resp__ready", resp_ready)
            bus.set("squash", squash)
            bus.set("mem_req__ready", mem_ready)
            bus.set("pf_req__ready", pf_ready)
            bus.set("mem_resp__valid", offer is not None)
            if offer is not None:
                bus.set("mem_resp__payload", ports.mem_resp.pack({"tag": offer[0], "data": offer[1]}))
            await bus.settle()
            out = read_outputs(bus, cycle)

            core.busy_cycles += bool(board.inflight)
            handshake = False
            if squash:
                core.squash(board.abort())
                after_squash = handshake = True
            else:
                ready = tuple(out[names["ready"]] for names in TEPL_REQ)
                # Both loaders are idle after a squash; port 1 may only look busy because port 0 wins.
                if after_squash and not (ready[0] and (ready[1] or core.ports[0] is not None)):
                    raise ProtocolError(f"cycle {cycle}: the PE is not idle the cycle after a squash "
                                        f"(tepl_req ready = {ready})")
                after_squash = False
                if out["tepl_resp__valid"]:
                    if resp_ready:
                        done = board.beat(ports.tepl_resp.unpack(out["tepl_resp__payload"]), cycle)
                        if done is not None:
                            core.completed(done)
                        handshake = True
                    else:
                        core.backpressure_cycles += 1
                # One request per cycle at most; port 0 wins.
                port = next((p for p in (0, 1) if core.ports[p] is not None and ready[p]), None)
                if port is not None:
                    board.accept(*core.accept(port))
                    handshake = True
            if out["mem_req__valid"] and mem_ready:
                read = ports.mem_req.unpack(out["mem_req__payload"])
                memory.demand(read["addr"], read["tag"], cycle)
                handshake = True
            if out["pf_req__valid"] and pf_ready:
                memory.prefetch(ports.pf_req.unpack(out["pf_req__payload"])["addr"], cycle)
                handshake = True
            if offer is not None and out["mem_resp__ready"]:
                memory.take()
                handshake = True
            if handshake:
                self.last_handshake = cycle
            finished = (core.done and not board.inflight and not memory.outstanding
                        and not out["mem_req__valid"] and not out["pf_req__valid"])
            await bus.tick()
            self.cycle += 1
        drive_idle(bus)


# Registers --------------------------------------------------------------------------------------


async def write_reg(bus, name, value):
    """Write register ``name`` (one cycle)."""
    bus.set("cfg__addr", REGISTER_ADDR[name])
    bus.set("cfg__wdata", value)
    bus.set("cfg__we", 1)
    await bus.tick()
    bus.set("cfg__we", 0)


async def read_regs(bus, names):
    """Read registers ``names`` back to back (one cycle each, plus one); returns {name: value}."""
    bus.set("cfg__we", 0)
    bus.set("cfg__addr", REGISTER_ADDR[names[0]])
    await bus.tick()
    values = []
    # rdata shows the register addressed in the previous cycle, so the next address goes out meanwhile.
    for following in [*names[1:], None]:
        if following is not None:
            bus.set("cfg__addr", REGISTER_ADDR[following])
        await bus.settle()
        values.append(bus.get("cfg__rdata"))
        await bus.tick()
    return dict(zip(names, values))


async def read_reg(bus, name):
    return (await read_regs(bus, [name]))[name]


async def read_counters(bus):
    return await read_regs(bus, [name for name, _ in COUNTERS])


async def clear_counters(bus):
    await write_reg(bus, "CONTROL", field_value("CONTROL", CLEAR_COUNTERS=1))


def config_word(config):
    """The CONFIG register value for a golden TileConfig."""
    group = ScaleGroup.G16 if config.scale_group == 16 else ScaleGroup.G32
    return field_value("CONFIG", Q=config.q_bits, SPARSE=int(config.sparse),
                       SCALE_FORMAT=SCALE_FORMAT_OF[config.scale_format].value, SCALE_GROUP=group.value)


async def configure(bus, config, prefetch_degree=5):
    """Write CONFIG, the LUT entries the codebook uses (none when Q = 16) and PREFETCH.DEGREE."""
    await write_reg(bus, "CONFIG", config_word(config))
    if config.q_bits != 16:
        await write_reg(bus, "LUT_INDEX", 0)
        for entry in config.lut[:config.lut_size]:
            await write_reg(bus, "LUT_DATA", int(entry))  # LUT_INDEX counts up by itself
    await write_reg(bus, "PREFETCH", field_value("PREFETCH", DEGREE=prefetch_degree))
