"""The system around one DECA PE for measurements: a core running a compressed GeMM
(``deca.sim.bench.cores``) and the memory of a Roof-Surface platform (paper, sections 5.2, 5.3 and
7.1), as one JSON-able description."""

from dataclasses import asdict, dataclass

from deca.hw.registers import PREFETCH_DEGREE
from deca.sim.model.platform import TMUL_CYCLES, get_platform
from deca.sim.model.roof import tile_ops_per_weight_tile

from .cores import LINK_LATENCY, TEPL_QUEUE, check_cycles

#: L2 hit latency of a DECA line read, in cycles (Sapphire Rapids' L2 is about 16 cycles).
HIT_LATENCY = (14, 18)
#: Latency of a line fetched from memory, from the request to its arrival in L2, in cycles: 40 to
#: 56 ns at 2.5 GHz. The paper does not give its simulator's; longer latencies are discussed in
#: docs/measuring.md (at 200-260 cycles, prefetching 5 tiles ahead no longer hides them below 20% density).
MISS_LATENCY = (100, 140)



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
    prefetch_degree: int = PREFETCH_DEGREE
    squash_prob: float = 0.0  # TEPL mode: chance per cycle with a TEPL in flight of a squash (all reissued)

    def __post_init__(self):
        for name in ("hit_latency", "miss_latency"):  # JSON gives lists
            object.__setattr__(self, name, tuple(getattr(self, name)))
        if not self.bytes_per_cycle > 0:
            raise ValueError(f"memory bandwidth must be positive, got {self.bytes_per_cycle!r} bytes per cycle")
        for name in ("hit_latency", "miss_latency"):
            lo, hi = getattr(self, name)
            check_cycles(name.replace("_", " "), lo)
            check_cycles(name.replace("_", " "), hi, lo)
        check_cycles("link latency", self.link_latency)
        check_cycles("TEPL queue entries", self.tepl_queue, 1)
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
