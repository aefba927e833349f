"""Models of the core's side of the TEPL ports.

- ``CoreModel``: issues a list of requests on the free ports, takes completions, squashes at
  random or at given cycles; the roughness the regression wants (back-pressure, squashes).
- ``TeplCore`` (paper, Fig. 9): one TEPL and one TComp per weight tile. TEPLs enter the TEPL queue
  in program order and are issued to a free port ``link_latency`` cycles later, speculatively and
  out of order with the TComps; a tile reaches the core ``link_latency`` cycles after its last
  beat; the TMUL takes tiles in program order, ``tmul_cycles`` each, and a TEPL leaves the queue
  when the TMUL starts on its tile. Squashes (``squash_at``, ``squash_prob``) abort what is in
  flight, which is then reissued.
- ``StoreFenceCore`` (Fig. 8): metadata store, fence, tile load and TComp, fully serialized as
  the paper describes, so every core-DECA crossing (``link_latency`` each way) is exposed. The
  store of tile i's metadata goes out after the TComp of tile i - 2, so at most two tiles are in
  the PE. The PE's completion port stays not-ready except while a tile load runs.

All keep the same port contract, so the Harness drives any of them and every measured run is also
a checked run: bit-exact tiles and cross-checked counters.

**Which port a TEPL goes to** (``TeplCore`` and ``StoreFenceCore``): the core follows the PE's
``tepl_req[i].ready`` and knows nothing of its loaders. A port is *free* for the next TEPL when in
the previous cycle it signalled ready and took no TEPL; every port is free at the start and after
a squash (the PE is idle the cycle after a squash, by contract). The oldest pending TEPL that may
go is presented on the lowest free port without one, and stays there until it is accepted.
"""

import math
from collections import deque

from deca.hw.layouts import ErrorReason
from deca.hw.pe import LOADERS

from deca.sim.model.platform import TMUL_CYCLES

TEPL_QUEUE = 8
MODES = ("tepl", "store")
#: Cycles between the core and DECA, one way (a TEPL or store reaching a loader, a tile or an
#: acknowledgement coming back). The paper gives no number; this is an L1-to-L2-like distance.
LINK_LATENCY = 8


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
    ``squash_cycles``; and ``reissues``, the requests reissued after squashes.
    """

    def __init__(self, requests, rng, *, loaders=LOADERS, id_bits=8, resp_backpressure=0.0, squash_at=(),
                 squash_prob=0.0, reissue=1.0):
        self.requests = list(requests)
        for index, request in enumerate(self.requests):
            request.index = index
        self.rng = rng
        self.id_limit = 1 << id_bits
        self.resp_backpressure, self.squash_prob, self.reissue = resp_backpressure, squash_prob, reissue
        self.squash_at = set(squash_at)
        self.pending = deque(self.requests)
        self.ports = [None] * loaders  # (id, request) presented and not accepted yet
        self.next_id = 0
        self.delivered, self.dropped = [], []
        self.busy_cycles = self.backpressure_cycles = self.tiles = self.errors = self.squash_cycles = 0
        self.reissues = 0

    @property
    def done(self):
        return not self.pending and not any(self.ports)

    def start_cycle(self, cycle):
        """Called at the start of every cycle of a run, before the core drives the ports."""
        self.fill_ports()

    def fill_ports(self):
        for port, slot in enumerate(self.ports):
            if slot is None and self.pending:
                self.ports[port] = (self.next_id, self.pending.popleft())
                self.next_id = (self.next_id + 1) % self.id_limit

    def saw_ready(self, ready, taken):
        """The PE's tepl_req readies in this cycle and the port that took a TEPL (or None): this
        model presents requests regardless."""

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
        self.ports = [None] * len(self.ports)
        self.squash_cycles += 1
        reissued = []
        for request in aborted:
            (reissued if self.rng.random() < self.reissue else self.dropped).append(request)
        self.pending.extendleft(reversed(reissued))
        self.reissues += len(reissued)
        return aborted



def check_cycles(name, value, low=0):
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"{name} must be an integer number of cycles >= {low}, got {value!r}")


class _GemmCore(CoreModel):
    """What both invocation modes share: tile arrival times and TMUL accounting."""

    def __init__(self, requests, rng, *, tmul_cycles=TMUL_CYCLES, link_latency=LINK_LATENCY, **kwargs):
        super().__init__(requests, rng, **kwargs)
        check_cycles("TMUL cycles per tile", tmul_cycles, 1)
        check_cycles("link latency", link_latency)
        self.tmul_cycles, self.link_latency = tmul_cycles, link_latency
        self.pending.clear()  # requests become pending when the program reaches them
        self.cycle = 0
        self.arrive = {}  # request index -> cycle its tile (or error) is at the core
        self.accepted = set()  # indices of requests the PE accepted
        self.tmul_busy = 0  # cycles the TMUL works
        self.free = [True] * len(self.ports)  # see the module docstring

    def start_cycle(self, cycle):
        self.cycle = cycle
        self.advance()
        self.fill_ports()

    def advance(self):
        raise NotImplementedError

    def fill_ports(self):
        """Present the oldest pending request that may go, on a free port (module docstring)."""
        for port, slot in enumerate(self.ports):
            if slot is None and self.free[port] and self.pending and self.may_issue(self.pending[0]):
                self.ports[port] = (self.next_id, self.pending.popleft())
                self.next_id = (self.next_id + 1) % self.id_limit

    def may_issue(self, request):
        return True

    def saw_ready(self, ready, taken):
        """The PE's tepl_req readies of this cycle, and the port that took a TEPL (or None)."""
        self.free = [r and port != taken for port, r in enumerate(ready)]

    def accept(self, port):
        slot = super().accept(port)
        self.accepted.add(slot[1].index)
        return slot

    def completed(self, request):
        super().completed(request)
        # The last beat is taken at the end of this cycle.
        self.arrive[request.index] = self.cycle + 1 + self.link_latency

    def squash(self, in_flight):
        self.free = [True] * len(self.ports)
        return super().squash(in_flight)


class TeplCore(_GemmCore):
    """See the module docstring; ``queue``: TEPL queue entries."""

    def __init__(self, requests, rng, *, queue=TEPL_QUEUE, **kwargs):
        super().__init__(requests, rng, **kwargs)
        check_cycles("TEPL queue entries", queue, 1)
        self.queue = queue
        self.program = deque(self.requests)  # not in the TEPL queue yet
        self.tmul_order = deque(self.requests)
        self.queued = 0
        self.issue_at = {}  # request index -> first cycle it may go to a port
        self.tmul_free = 0

    def advance(self):
        cycle = self.cycle
        while self.tmul_order and cycle >= self.tmul_free:
            head = self.tmul_order[0]
            if head in self.dropped:  # a wrong-path TEPL: nothing to multiply
                self.tmul_order.popleft()
                self.queued -= 1
                continue
            if self.arrive.get(head.index, math.inf) > cycle:
                break
            self.tmul_order.popleft()
            self.queued -= 1
            self.tmul_free = cycle + self.tmul_cycles
            self.tmul_busy += self.tmul_cycles
        while self.program and self.queued < self.queue:
            request = self.program.popleft()
            self.queued += 1
            self.issue_at[request.index] = cycle + self.link_latency
            self.pending.append(request)

    def may_issue(self, request):
        return self.issue_at[request.index] <= self.cycle

    def squash(self, in_flight):
        aborted = super().squash(in_flight)
        for request in aborted:  # a reissued TEPL travels to DECA again
            self.issue_at[request.index] = self.cycle + self.link_latency
        return aborted

    @property
    def done(self):
        return super().done and not self.program and not self.tmul_order and self.cycle >= self.tmul_free


class StoreFenceCore(_GemmCore):
    """See the module docstring."""

    def __init__(self, requests, rng, **kwargs):
        if kwargs.get("squash_at") or kwargs.get("squash_prob"):
            raise ValueError("store-and-fence invocation has nothing speculative to squash: the stores are "
                             "performed at the head of the ROB")
        super().__init__(requests, rng, **kwargs)
        self.loading = None  # the request whose tile load is at the PE
        self._steps = self._program()
        self._finished = False

    def _delay(self, cycles):
        for _ in range(cycles):
            yield

    def _program(self):
        """Fig. 8, one step per cycle: for k = 0..n+1, load and multiply tile k - 2, then store M_k and fence."""
        n, link = len(self.requests), self.link_latency
        for k in range(n + 2):
            if k >= 2:
                tile = self.requests[k - 2]
                yield from self._delay(link)  # the tile load reaches DECA
                self.loading = tile
                while tile.index not in self.arrive:
                    yield
                self.loading = None
                yield from self._delay(self.arrive[tile.index] - self.cycle)  # the tile travels back
                self.tmul_busy += self.tmul_cycles
                yield from self._delay(self.tmul_cycles)  # TComp; the store waits for it at the ROB head
            if k < n:
                meta = self.requests[k]
                yield from self._delay(link)  # the store reaches the loader
                self.pending.append(meta)
                while meta.index not in self.accepted:
                    yield
                yield from self._delay(link)  # the fence waits for the store's acknowledgement
        self._finished = True

    def advance(self):
        if not self._finished:
            next(self._steps, None)

    def resp_ready(self):
        return self.loading is not None and super().resp_ready()

    @property
    def done(self):
        return self._finished


def gemm_core(mode, requests, rng, **kwargs):
    """The core of invocation ``mode`` ("tepl" or "store"), with CoreModel and core keyword arguments."""
    if mode == "tepl":
        return TeplCore(requests, rng, **kwargs)
    if mode == "store":
        kwargs.pop("queue", None)
        return StoreFenceCore(requests, rng, **kwargs)
    raise ValueError(f"invocation mode must be one of {', '.join(MODES)}, got {mode!r}")


