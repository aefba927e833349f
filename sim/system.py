"""The system around one DECA PE for measurements: a core running a compressed GeMM and the memory
of a Roof-Surface platform (paper, sections 5.2, 5.3 and 7.1).

Both cores keep the port contract of ``deca.sim.harness.CoreModel`` (the Harness drives them), so
every measured run is also a checked run: bit-exact tiles and cross-checked counters.

- ``TeplCore`` (paper, Fig. 9): one TEPL and one TComp per weight tile. TEPLs enter the TEPL queue
  in program order and are issued to a free port ``link_latency`` cycles later, speculatively and
  out of order with the TComps; a tile reaches the core ``link_latency`` cycles after its last
  beat; the TMUL takes tiles in program order, ``tmul_cycles`` each, and a TEPL leaves the queue
  when the TMUL starts on its tile. Squashes (``squash_at``, ``squash_prob``) abort what is in
  flight, which is then reissued.
- ``StoreFenceCore`` (Fig. 8): metadata store, fence, tile load and TComp, fully serialized as
  the paper describes, so every core-DECA crossing (``link_latency`` each way) is exposed. The
  store of tile i's metadata goes out after the TComp of tile i - 2, so at most two tiles are in
  the PE, one per loader. The PE's completion port stays not-ready except while a tile load runs.
"""

import math
from collections import deque
from dataclasses import asdict, dataclass

from .harness import CoreModel
from .platform import TMUL_CYCLES, get_platform
from .roof import tile_ops_per_weight_tile

TEPL_QUEUE = 8
MODES = ("tepl", "store")
#: Cycles between the core and DECA, one way (a TEPL or store reaching a loader, a tile or an
#: acknowledgement coming back). The paper gives no number; this is an L1-to-L2-like distance.
LINK_LATENCY = 8
#: L2 hit latency of a DECA line read, in cycles (Sapphire Rapids' L2 is about 16 cycles).
HIT_LATENCY = (14, 18)
#: Latency of a line fetched from memory, from the request to its arrival in L2, in cycles: 40 to
#: 56 ns at 2.5 GHz. The paper does not give its simulator's; longer latencies are measured in the
#: README (at 200-260 cycles, prefetching 5 tiles ahead no longer hides them below 20% density).
MISS_LATENCY = (100, 140)


def _check_cycles(name, value, low=0):
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"{name} must be an integer number of cycles >= {low}, got {value!r}")


class _GemmCore(CoreModel):
    """What both invocation modes share: tile arrival times and TMUL accounting."""

    def __init__(self, requests, rng, *, tmul_cycles=TMUL_CYCLES, link_latency=LINK_LATENCY, **kwargs):
        super().__init__(requests, rng, **kwargs)
        _check_cycles("TMUL cycles per tile", tmul_cycles, 1)
        _check_cycles("link latency", link_latency)
        self.tmul_cycles, self.link_latency = tmul_cycles, link_latency
        self.pending.clear()  # requests become pending when the program reaches them
        self.cycle = 0
        self.arrive = {}  # request index -> cycle its tile (or error) is at the core
        self.accepted = set()  # indices of requests the PE accepted
        self.tmul_busy = 0  # cycles the TMUL works
        self.executing = [None, None]  # the request each port's loader works on

    def start_cycle(self, cycle):
        self.cycle = cycle
        self.advance()
        self.fill_ports()

    def advance(self):
        raise NotImplementedError

    def fill_ports(self):
        """Present the oldest pending request that may go, on a port whose loader is free."""
        for port, slot in enumerate(self.ports):
            if slot is None and self.executing[port] is None and self.pending and self.may_issue(self.pending[0]):
                self.ports[port] = (self.next_id, self.pending.popleft())
                self.next_id = (self.next_id + 1) % self.id_limit

    def may_issue(self, request):
        return True

    def accept(self, port):
        slot = super().accept(port)
        self.accepted.add(slot[1].index)
        self.executing[port] = slot[1]
        return slot

    def completed(self, request):
        super().completed(request)
        self.executing[self.executing.index(request)] = None
        # The last beat is taken at the end of this cycle.
        self.arrive[request.index] = self.cycle + 1 + self.link_latency

    def squash(self, in_flight):
        self.executing = [None, None]
        return super().squash(in_flight)


class TeplCore(_GemmCore):
    """See the module docstring; ``queue``: TEPL queue entries."""

    def __init__(self, requests, rng, *, queue=TEPL_QUEUE, **kwargs):
        super().__init__(requests, rng, **kwargs)
        _check_cycles("TEPL queue entries", queue, 1)
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


@dataclass(frozen=True)
class System:
    """Everything around the PE that a measurement depends on, JSON-able (``asdict``)."""

    platform: str = "spr-hbm"
    cores: int = 56  # of the platform, for its TFLOPS
    freq_hz: float = 2.5e9
    bytes_per_cycle: float = 0.0  # one core's share of the memory bandwidth
    hit_latency: tuple = HIT_LATENCY
    miss_latency: tuple = MISS_LATENCY
    link_latency: int = LINK_LATENCY
    tepl_queue: int = TEPL_QUEUE
    batch: int = 1
    prefetch_degree: int = 5
    squash_prob: float = 0.0  # TEPL mode: chance per cycle with a TEPL in flight of a squash (all reissued)

    def __post_init__(self):
        for name in ("hit_latency", "miss_latency"):  # JSON gives lists
            object.__setattr__(self, name, tuple(getattr(self, name)))
        if not self.bytes_per_cycle > 0:
            raise ValueError(f"memory bandwidth must be positive, got {self.bytes_per_cycle!r} bytes per cycle")
        for name in ("hit_latency", "miss_latency"):
            lo, hi = getattr(self, name)
            _check_cycles(name.replace("_", " "), lo)
            _check_cycles(name.replace("_", " "), hi, lo)
        _check_cycles("link latency", self.link_latency)
        _check_cycles("TEPL queue entries", self.tepl_queue, 1)
        if isinstance(self.batch, bool) or not isinstance(self.batch, int) or not 1 <= self.batch <= 16:
            raise ValueError(f"batch N must be an integer in 1..16 (one TMUL operation per weight tile), "
                             f"got {self.batch!r}")
        if isinstance(self.prefetch_degree, bool) or self.prefetch_degree not in range(16):
            raise ValueError(f"prefetch degree must be an integer in 0..15, got {self.prefetch_degree!r}")
        if isinstance(self.squash_prob, bool) or not isinstance(self.squash_prob, (int, float)) \
                or not 0 <= self.squash_prob < 1:
            raise ValueError(f"squash probability must be a number in [0, 1), got {self.squash_prob!r}")

    @property
    def tmul_cycles(self):
        return TMUL_CYCLES * tile_ops_per_weight_tile(self.batch)

    def memory_kwargs(self):
        """MemoryModel keyword arguments: in-order, always ready, with this bandwidth and these latencies."""
        return {"miss_latency": list(self.miss_latency), "hit_latency": list(self.hit_latency),
                "bytes_per_cycle": self.bytes_per_cycle, "reorder": False}

    def core_kwargs(self, mode):
        return {"tmul_cycles": self.tmul_cycles, "link_latency": self.link_latency,
                **({"queue": self.tepl_queue, "squash_prob": self.squash_prob} if mode == "tepl" else {})}

    def as_dict(self):
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}


def system(platform="spr-hbm", platforms_file=None, *, bandwidth=None, **kwargs):
    """A System whose memory bandwidth is each core's share of ``platform``'s (``bandwidth``
    overrides it, in bytes per cycle); ``kwargs``: the other System fields."""
    p = get_platform(platform, platforms_file)
    share = p.mem_bw / p.cycles_per_s if bandwidth is None else bandwidth
    return System(platform=p.name, cores=p.cores, freq_hz=p.freq_hz, bytes_per_cycle=share, **kwargs)
