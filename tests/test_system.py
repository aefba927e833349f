"""The system around the PE for measurements (deca.sim.bench.cores, deca.sim.bench.system): the TEPL and store-and-fence cores run
through the Harness against the behavioural PE of tests/fake_pe.py, and the System's checks.

Expected cycle counts are derived from the documented rules, with the FakePE's timing: it takes a
request the cycle it is presented on a free port, requests one line per cycle from the next cycle,
and streams a tile's 16 beats, one per cycle while tepl_resp.ready is high, from the cycle after its
last line arrived. An "instant" memory answers every line read one cycle after the request.
"""

import math
from functools import partial

import numpy as np
import pytest

from deca.hw.layouts import LINE_BYTES
from deca.sim.bench.cores import StoreFenceCore, TeplCore, gemm_core
from deca.sim.bench.scoreboard import Scoreboard
from deca.sim.bench.stimulus import tile_batch, workloads
from deca.sim.bench.system import System, system
from deca.sim.model.platform import TMUL_CYCLES
from fake_pe import run_fake

INSTANT = {"miss_latency": (1, 1), "hit_latency": (1, 1)}
#: A memory that is slow, reorders and pushes back, to stress the cores.
ROUGH = {"miss_latency": (30, 80), "hit_latency": (4, 12), "bytes_per_cycle": 24, "req_backpressure": 0.2,
         "pf_backpressure": 0.5}
BEATS = 16  # completion beats of a tile


@pytest.fixture(scope="module")
def matrices():
    cases = workloads(np.random.default_rng(1), schemes=["bf16", "nvfp4", "int8", "ternary"],
                      densities=(1, 0.3, 0), shape=(32, 64), extra_densities={})
    return dict(cases)


def batch_of(cm, label, copies=2):
    """Every tile of ``cm``, ``copies`` times over (one image), as one batch."""
    batch = tile_batch(cm, label)
    for copy in range(1, copies):
        batch.requests += tile_batch(cm, f"{label} copy {copy}").requests
    return batch


def lines_read(meta):
    """Lines the FakePE reads for a request: every line each non-empty stream touches."""
    return sum(len(range(meta[f"{s}_addr"] & -LINE_BYTES, meta[f"{s}_addr"] + meta[f"{s}_len"], LINE_BYTES))
               for s in ("mask", "scale", "val") if meta[f"{s}_len"])


class RecordingScoreboard(Scoreboard):
    """Records (cycle, request) of every completion; ``on_beat(cycle)`` is called before each beat is checked."""

    def __init__(self, on_beat=None):
        super().__init__()
        self.done_at, self.on_beat = [], on_beat

    def beat(self, beat, cycle):
        if self.on_beat is not None:
            self.on_beat(cycle)
        request = super().beat(beat, cycle)
        if request is not None:
            self.done_at.append((cycle, request))
        return request


class TmulLog:
    """A ``watch`` for run_fake: the cycles the TMUL starts a tile (tmul_busy grows at the start of them)."""

    def __init__(self):
        self.starts, self.busy = [], 0

    def __call__(self, harness, cycle):
        busy = harness.core.tmul_busy
        if busy != self.busy:
            assert busy - self.busy == harness.core.tmul_cycles, f"cycle {cycle}: two TMUL starts in one cycle"
            self.starts.append(cycle)
            self.busy = busy


def run(batch, rng, mode, watch=None, scoreboard=None, memory_kwargs=None, **core_kwargs):
    return run_fake(batch, rng, core=partial(gemm_core, mode), core_kwargs=core_kwargs,
                    memory_kwargs=memory_kwargs, watch=watch, scoreboard=scoreboard)


def check_tmul(log, board, core, link):
    """The TMUL took every tile in program order, each once, after it reached the core, one at a time."""
    n, T = len(core.requests), core.tmul_cycles
    arrive = {request.index: cycle + 1 + link for cycle, request in board.done_at}  # last beat + 1 + link
    assert len(log.starts) == n and core.tmul_busy == n * T
    for k, start in enumerate(log.starts):
        assert start >= arrive[k], f"tile {k} multiplied at cycle {start}, before it reached the core"
        if k:
            assert start >= log.starts[k - 1] + T, f"tile {k} multiplied while the TMUL was busy"


# TEPL mode --------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["tepl", "store"])
def test_every_tile_is_delivered_bit_exactly_and_multiplied_once(mode, matrices, rng):
    link, T = 8, 16
    for label, cm in matrices.items():
        batch = batch_of(cm, label)
        n = len(batch.requests)
        log, board = TmulLog(), RecordingScoreboard()
        # The Scoreboard checks every beat of every tile against the golden tile.
        harness = run(batch, rng, mode, watch=log, scoreboard=board, memory_kwargs=ROUGH, link_latency=link,
                      tmul_cycles=T, resp_backpressure=0.2)
        core = harness.core
        assert core.tiles == n and core.errors == 0, label
        assert sorted(request.index for _, request in board.done_at) == list(range(n)), label
        assert core.tmul_busy == n * T, label
        check_tmul(log, board, core, link)


def test_tepl_tmul_bound_with_instant_memory(matrices, rng):
    link, T = 1, 48  # T above the FakePE's time per tile (at most 17 lines and 16 beats)
    for label, cm in matrices.items():
        batch = batch_of(cm, label)
        n, n0 = len(batch.requests), lines_read(batch.requests[0].meta)
        assert max(lines_read(r.meta) for r in batch.requests) + BEATS + 2 <= T
        log, board = TmulLog(), RecordingScoreboard()
        harness = run(batch, rng, "tepl", watch=log, scoreboard=board, memory_kwargs=INSTANT, link_latency=link,
                      tmul_cycles=T)
        # Tile 0 enters the queue in cycle 0, is presented and accepted in cycle link, its n0 lines are
        # read in cycles link+1..link+n0 and arrive one cycle later, its beats go out in cycles
        # link+n0+2..link+n0+17 and it reaches the core link+1 cycles after the last: the TMUL starts
        # in cycle 2*link+n0+18, then works without a gap, and the run ends after its first idle cycle.
        first = 2 * link + n0 + BEATS + 2
        assert log.starts[0] == first, label
        assert n * T <= harness.cycle <= first + n * T + 1, label
        check_tmul(log, board, harness.core, link)


def test_tepl_queue_and_issue_rules(matrices, rng):
    batch = batch_of(matrices["int8@0.3"], "int8@0.3", copies=3)
    n, link = len(batch.requests), 8
    for queue in (1, 2, 3, 8):
        entered, presented, in_queue, log = {}, {}, [], TmulLog()

        def watch(harness, cycle):
            log(harness, cycle)
            core = harness.core
            for request in core.requests:
                if request not in core.program:
                    entered.setdefault(request.index, cycle)
            for slot in core.ports:
                if slot is not None:
                    presented.setdefault(slot[1].index, cycle)
                    assert cycle >= core.issue_at[slot[1].index]
            # Between entering the queue and the TMUL starting on it.
            in_queue.append(len(entered) - len(log.starts))
            assert core.queued == in_queue[-1]

        harness = run(batch, rng, "tepl", watch=watch, memory_kwargs=ROUGH, link_latency=link, queue=queue)
        assert harness.core.tiles == n
        assert max(in_queue) == min(queue, n), queue  # the queue fills up but never overflows
        for k in range(n):
            assert presented[k] >= entered[k] + link, (queue, k)
        if queue == 1:  # one TEPL at a time: the next enters when the TMUL starts on the previous
            for k in range(1, n):
                assert entered[k] == log.starts[k - 1]


def test_a_one_entry_queue_serializes(matrices, rng):
    batch = batch_of(matrices["nvfp4@0.3"], "nvfp4@0.3", copies=3)
    n, link, T = len(batch.requests), 8, TMUL_CYCLES
    cycles = {queue: run(batch, rng, "tepl", memory_kwargs=INSTANT, link_latency=link, tmul_cycles=T,
                         queue=queue).cycle for queue in (1, 2, 8)}
    # With one entry, TEPL k + 1 enters the queue when the TMUL starts on tile k, which needs tile k
    # presented link cycles after it entered, accepted, 16 beats from the next cycle at the earliest
    # and link + 1 cycles back to the core: at least 2 * link + 17 cycles per tile, then the last TMUL.
    assert cycles[1] >= n * (2 * link + BEATS + 1) + T
    assert cycles[8] < cycles[2] < cycles[1]
    assert cycles[8] < n * (2 * link + BEATS + 1)


def test_tepl_squashes_reissue_and_every_tile_is_multiplied_once(matrices, rng):
    batch = batch_of(matrices["int8@0.3"], "int8@0.3", copies=3)
    n, link, T = len(batch.requests), 8, TMUL_CYCLES
    squash_at = [0, 5, 12, 30, 60, 120, 200]
    aborted = []
    log, board = TmulLog(), RecordingScoreboard()

    class Core(TeplCore):
        def squash(self, in_flight):
            got = super().squash(in_flight)
            aborted.extend(got)
            return got

    harness = run_fake(batch, rng, core=Core, core_kwargs={"link_latency": link, "tmul_cycles": T,
                                                           "squash_at": squash_at, "reissue": 1.0,
                                                           "resp_backpressure": 0.2},
                       memory_kwargs=ROUGH, watch=log, scoreboard=board)
    core = harness.core
    assert max(squash_at) < harness.cycle and core.squash_cycles == len(squash_at)
    assert aborted, "no squash hit a request in flight"
    assert core.tiles == n and not core.dropped
    assert sorted(request.index for _, request in board.done_at) == list(range(n))
    check_tmul(log, board, core, link)


def test_tepl_squashes_without_reissue_multiply_what_is_left(matrices, rng):
    batch = batch_of(matrices["int8@0.3"], "int8@0.3", copies=3)
    n, T = len(batch.requests), TMUL_CYCLES
    harness = run(batch, rng, "tepl", memory_kwargs=ROUGH, squash_at=[40, 90], squash_prob=0.01, reissue=0.0)
    core = harness.core
    assert core.dropped and core.tiles + len(core.dropped) == n
    assert not set(core.delivered) & set(core.dropped)
    assert core.tmul_busy == core.tiles * T


# Store-and-fence mode ---------------------------------------------------------------------------


def test_store_core_has_two_tiles_in_the_pe_and_loads_only_while_loading(matrices, rng):
    for label in ("bf16@1", "nvfp4@0.3", "ternary@0"):
        batch = batch_of(matrices[label], label, copies=3)
        inflight = []
        harness = None

        def on_beat(cycle):
            core = harness.core
            assert core.loading is not None, f"cycle {cycle}: a completion beat while no tile load runs"
            assert core.loading is board.inflight[0][1], f"cycle {cycle}: a beat of a tile not being loaded"

        def watch(h, cycle):
            nonlocal harness
            harness = h
            inflight.append(len(h.scoreboard.inflight))

        board = RecordingScoreboard(on_beat)
        harness = run(batch, rng, "store", watch=watch, scoreboard=board, memory_kwargs=ROUGH,
                      resp_backpressure=0.2)
        assert harness.core.tiles == len(batch.requests), label
        assert max(inflight) == 2, label  # accepted and not completed
        assert harness.core.backpressure_cycles > 0, label  # tiles wait for their load


def test_store_core_cycles_per_tile_and_tepl_is_faster(matrices, rng):
    for link, T in ((8, TMUL_CYCLES), (2, 48)):
        for label in ("bf16@1", "nvfp4@0.3", "ternary@0"):
            batch = batch_of(matrices[label], label)
            n = len(batch.requests)
            store = run(batch, rng, "store", memory_kwargs=INSTANT, link_latency=link, tmul_cycles=T)
            # Per tile, the program waits link cycles (the load reaches DECA), then at least 16 cycles
            # of beats (the last one taken at the end of its cycle), link (the tile travels back) and
            # T (TComp); for the store: link, at least one cycle until it is accepted, link (the fence).
            assert store.cycle >= n * (4 * link + BEATS + 1 + T), (label, link)
            assert store.core.tmul_busy == n * T
            tepl = run(batch, rng, "tepl", memory_kwargs=INSTANT, link_latency=link, tmul_cycles=T)
            assert tepl.cycle < store.cycle, (label, link)


def test_store_core_refuses_squashes(matrices, rng):
    requests = tile_batch(matrices["int8@1"], "int8@1").requests
    for kwargs in ({"squash_at": [3]}, {"squash_prob": 0.1}):
        with pytest.raises(ValueError, match="nothing speculative to squash"):
            StoreFenceCore(requests, rng, **kwargs)
        with pytest.raises(ValueError, match="nothing speculative to squash"):
            gemm_core("store", requests, rng, **kwargs)
    assert isinstance(gemm_core("store", requests, rng, queue=4), StoreFenceCore)  # the queue is TEPL's
    assert gemm_core("tepl", requests, rng, queue=4).queue == 4


def test_gemm_core_refuses_an_unknown_mode_and_bad_parameters(matrices, rng):
    requests = tile_batch(matrices["int8@1"], "int8@1").requests
    with pytest.raises(ValueError, match="invocation mode must be one of tepl, store, got 'fence'"):
        gemm_core("fence", requests, rng)
    for mode, kwargs in (("tepl", {"queue": 0}), ("tepl", {"tmul_cycles": 0}), ("store", {"link_latency": -1}),
                         ("tepl", {"link_latency": 1.5})):
        with pytest.raises(ValueError, match="must be an integer number of cycles"):
            gemm_core(mode, requests, rng, **kwargs)


# System -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("kwargs", [
    {"batch": 0}, {"batch": 17}, {"batch": True}, {"prefetch_degree": 16}, {"prefetch_degree": -1},
    {"hit_latency": (-1, 4)}, {"miss_latency": (-5, -1)}, {"link_latency": -1}, {"hit_latency": (12, 4)},
    {"miss_latency": (140, 100)}, {"tepl_queue": 0},
])
def test_system_refuses_bad_fields(kwargs):
    with pytest.raises(ValueError):
        system("spr-hbm", **kwargs)


def test_system_bandwidth_and_platforms():
    hbm = system("spr-hbm")
    assert hbm.bytes_per_cycle == pytest.approx(830e9 / (56 * 2.5e9), rel=1e-12)
    assert (hbm.platform, hbm.cores, hbm.freq_hz) == ("spr-hbm", 56, 2.5e9)
    assert system("spr-ddr").bytes_per_cycle == pytest.approx(260e9 / (56 * 2.5e9), rel=1e-12)
    assert system("spr-hbm", bandwidth=6.07).bytes_per_cycle == 6.07
    with pytest.raises(ValueError, match=r"unknown platform 'nope'; known platforms: .*spr-hbm.*spr-ddr"):
        system("nope")
    for bandwidth in (0, -1.0):
        with pytest.raises(ValueError, match="memory bandwidth must be positive"):
            system("spr-hbm", bandwidth=bandwidth)
    with pytest.raises(ValueError, match="memory bandwidth must be positive"):
        System()  # no bandwidth given


def test_system_derived_keyword_arguments():
    for batch in (1, 15, 16):
        s = system("spr-hbm", batch=batch, link_latency=3, tepl_queue=5, squash_prob=0.25)
        assert s.tmul_cycles == TMUL_CYCLES * math.ceil(batch / 16)
        assert s.core_kwargs("tepl") == {"tmul_cycles": s.tmul_cycles, "link_latency": 3, "queue": 5,
                                         "squash_prob": 0.25}
        assert s.core_kwargs("store") == {"tmul_cycles": s.tmul_cycles, "link_latency": 3}
    s = system("spr-hbm", bandwidth=10, hit_latency=[2, 3], miss_latency=[20, 30])
    assert s.hit_latency == (2, 3) and s.miss_latency == (20, 30)  # lists (JSON) become tuples
    assert s.memory_kwargs() == {"miss_latency": [20, 30], "hit_latency": [2, 3], "bytes_per_cycle": 10,
                                 "reorder": False}
    assert System(**s.as_dict()) == s


def test_a_system_runs_through_the_harness(matrices, rng):
    """The System's core and memory keyword arguments drive a checked run in both modes."""
    s = system("spr-hbm", link_latency=4)
    batch = batch_of(matrices["nvfp4@1"], "nvfp4@1")
    n = len(batch.requests)
    cycles = {}
    for mode in ("tepl", "store"):
        harness = run(batch, rng, mode, memory_kwargs=s.memory_kwargs(), **s.core_kwargs(mode))
        assert harness.core.tiles == n and harness.core.tmul_busy == n * s.tmul_cycles
        lines = harness.memory.lines_fetched
        assert 0 < harness.memory.channel_busy(harness.cycle) <= lines * LINE_BYTES / s.bytes_per_cycle
        cycles[mode] = harness.cycle
    assert cycles["tepl"] < cycles["store"]
