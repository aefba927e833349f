"""The PE regression, written once against the ``Bus`` of ``deca.sim.bench.bus``: ``deca.sim.bench.pe_tb`` runs
it under cocotb (Icarus, Verilator), tests/test_hw_pe.py on the Amaranth simulator.

Parameters (``DEFAULTS``): the design (W, L, its storage, addr_bits, id_bits, loaders), the seed, the workloads
(``deca.sim.bench.stimulus.workloads`` arguments), and how rough the core and the memory are
(``CoreModel`` and ``MemoryModel`` keyword arguments). Every run of the Harness is followed by a
read of the performance counters, checked against what the models observed.
"""

from dataclasses import replace

import numpy as np

from deca.golden import compress
from deca.golden.format import TILE_ELEMS
from deca.hw.layouts import ErrorReason
from deca.hw.params import CONTEXTS, SQQ_BYTES, TAGS, TOUT_BUFFERS
from deca.hw.pe import sqq_byte_count
from deca.hw.registers import PREFETCH_DEGREE, field_of
from deca.sim.model.bubbles import tile_cycles

from .bus import idle_cycles
from .cores import CoreModel
from .harness import Harness
from .memory import MemoryModel
from .ports import PePorts
from .registers import clear_counters, config_word, configure, read_counters, read_reg, write_reg
from .scoreboard import Scoreboard
from .stimulus import DEFAULT_BASE, malformed_requests, tile_batch, workloads

DEFAULTS = {
    "W": 8, "L": 4, "tags": TAGS, "sqq_bytes": SQQ_BYTES, "addr_bits": 48, "id_bits": 8, "loaders": 2,
    "contexts": CONTEXTS, "tout_buffers": TOUT_BUFFERS, "seed": 0,
    "schemes": None, "densities": [1, 0.5, 0.2, 0.05, 0], "shape": [32, 64], "codebook_sizes": [5, 100, 200],
    "extra_densities": {"bf16": [0.97]},
    "aligns": [1, 64, 2, 16],  # memory_image alignment, one workload after another
    "prefetch_degree": PREFETCH_DEGREE,
    "core": {"resp_backpressure": 0.2},
    "memory": {"miss_latency": [20, 80], "hit_latency": [3, 12], "bytes_per_cycle": 48, "reorder": True,
               "req_backpressure": 0.1, "pf_backpressure": 0.3},
    "squash": {"squash_prob": 0.005, "reissue": 0.8, "squash_at": [2, 30]},
    "malformed_schemes": ["nvfp4", "bf16", "ternary"],
}


class Bench:
    """One reset PE behind ``bus``, with its parameters (``DEFAULTS`` updated by ``params``), ports
    and random generator; ``log`` takes a printf-style message. ``harness``: the Harness class its
    runs use (``deca.sim.bench.engine.FastHarness`` on the fast engine's bus)."""

    def __init__(self, bus, params, log, harness=Harness):
        self.bus, self.p, self.log, self.harness = bus, {**DEFAULTS, **params}, log, harness
        self.W, self.L = self.p["W"], self.p["L"]
        self.ports = PePorts(self.p["addr_bits"], self.p["id_bits"], self.p["tags"], self.p["loaders"],
                             self.p["contexts"])
        self.rng = np.random.default_rng(self.p["seed"])
        log("PE W=%d L=%d, seed %d (parameters %s)", self.W, self.L, self.p["seed"], self.p)

    def workloads(self):
        p = self.p
        return workloads(self.rng, p["schemes"], p["densities"], tuple(p["shape"]), p["codebook_sizes"],
                         p["extra_densities"])

    def batch(self, cm, label, index):
        """All tiles of ``cm``, at a base address that is not line-aligned and an alignment that changes."""
        align = self.p["aligns"][index % len(self.p["aligns"])]
        return tile_batch(cm, f"{label} (align {align})", DEFAULT_BASE + int(self.rng.integers(4096)), align)

    async def run(self, batch, squash=None, q=None, core=CoreModel, max_cycles=None, reissue_cycles=0):
        """Configure for ``batch`` (``q`` overrides CONFIG.Q), run it with cleared counters through
        ``core`` (a CoreModel class or factory taking the requests, the generator and keyword
        arguments), check the counters; returns (Harness, counters). ``max_cycles``: the run's budget
        (a longer run is a Hang), raised by ``reissue_cycles`` per request reissued after a squash."""
        p = self.p
        await configure(self.bus, batch.config, p["prefetch_degree"])
        if q is not None:
            await write_reg(self.bus, "CONFIG", config_word(batch.config) & ~0x1F | q)
        await clear_counters(self.bus)
        core = core(batch.requests, self.rng, loaders=self.ports.loaders, id_bits=p["id_bits"], **p["core"], **(squash or {}))
        memory = MemoryModel(batch.image, batch.base, self.rng, **p["memory"])
        harness = self.harness(core, memory, Scoreboard(), self.ports)
        await harness.run(self.bus, max_cycles, reissue_cycles=reissue_cycles)
        counters = await read_counters(self.bus)
        self.check_counters(harness, batch, counters)
        return harness, counters

    def check_counters(self, harness, batch, got):
        label = batch.label
        want = harness.observed_counters()
        if not harness.core.squash_cycles:
            # Aborted tiles leave vOps behind that no model counts, so these hold without squashes only.
            q, delivered = batch.config.q_bits, harness.core.delivered
            want["VOPS"] = len(delivered) * TILE_ELEMS // self.W
            want["BUBBLE_CYCLES"] = tile_cycles([r.mask for r in delivered], q, self.W, self.L) - want["VOPS"]
            idle = got["BUSY_CYCLES"] - got["VOPS"] - got["BUBBLE_CYCLES"]
            assert got["STARVE_CYCLES"] <= idle, (f"{label}: STARVE_CYCLES {got['STARVE_CYCLES']} > BUSY_CYCLES - VOPS "
                                                  f"- BUBBLE_CYCLES = {idle}")
        wrong = {name: f"PE {got[name]}, harness {value}" for name, value in want.items() if got[name] != value}
        assert not wrong, f"{label}: counters differ: {wrong}"
        self.log("%s: %d cycles, counters %s", label, harness.cycle, got)


async def reset_state(bench):
    """No X or Z on any output after reset; idle ports; PARAMS describes the design."""
    out = await idle_cycles(bench.bus, bench.ports, 20)
    busy = {name: out[name] for name in bench.ports.outputs if name.endswith("valid") and out[name]}
    assert not busy, f"valid outputs while idle: {busy}"
    not_ready = [names["ready"] for names in bench.ports.tepl_req_ports if not out[names["ready"]]]
    assert not not_ready, f"TEPL ports not ready while idle: {not_ready}"
    p = bench.p
    word = await read_reg(bench.bus, "PARAMS")
    sqq_bytes = sqq_byte_count(p["sqq_bytes"], p["W"], p["L"], p["contexts"])
    fields = {"W": p["W"], "L": p["L"], "ID_BITS": p["id_bits"], "TAG_BITS": (p["tags"] - 1).bit_length(),
              "SQQ_LOG2": sqq_bytes.bit_length() - 1, "LOADERS": p["loaders"]}
    got = {name: field_of("PARAMS", name, word) for name in fields}
    assert got == fields, f"PARAMS {word:#010x} reads {got}, expected {fields}"


async def workloads_bit_exact(bench):
    """Every tile of every workload bit for bit, through a rough memory and core; exact counters."""
    for index, (label, cm) in enumerate(bench.workloads()):
        await bench.run(bench.batch(cm, label, index))


async def malformed_metadata(bench):
    """Requests with broken metadata complete with their ErrorReason, between good tiles; ERROR records the last."""
    for index, scheme in enumerate(bench.p["malformed_schemes"]):
        for density in (0.3, 1, 0):
            cm = compress(bench.rng.normal(size=(32, 64)), scheme, density=density)
            batch = bench.batch(cm, f"{scheme}@{density}", index)
            good = batch.requests
            bad = malformed_requests(batch, bench.p["addr_bits"])
            batch.requests = [good[0], *bad[: len(bad) // 2], good[1], *bad[len(bad) // 2:], *good[2:]]
            harness, _ = await bench.run(batch)
            rid, last = [(rid, r) for rid, r in harness.scoreboard.completions if r in bad][-1]
            word = await read_reg(bench.bus, "ERROR")
            got, want = [field_of("ERROR", f, word) for f in ("VALID", "REASON", "ID")], [1, last.expected.value, rid]
            assert got == want, f"{batch.label}: ERROR (valid, reason, id) = {got}, expected {want} ({last.label})"


async def squash_recovery(bench):
    """Squashes at any point abort every TEPL in flight; reissued ones complete exactly, dropped ones never."""
    dropped = 0
    for index, (label, cm) in enumerate(bench.workloads()):
        batch = bench.batch(cm, label, index)
        # Each tile twice: more requests in flight to abort, and repeated lines that hit in L2.
        batch.requests += [replace(r, label=f"{r.label} again") for r in batch.requests]
        harness, _ = await bench.run(batch, squash=bench.p["squash"])
        core = harness.core
        assert core.tiles + len(core.dropped) == len(batch.requests), label
        dropped += len(core.dropped)
    bench.log("%d requests dropped by squashes in all", dropped)


async def bad_config(bench):
    """A CONFIG.Q the PE cannot run fails every request with CONFIG, without a hang; a good Q works again."""
    cm = compress(bench.rng.normal(size=(32, 64)), "int4", density=0.5)
    batch = bench.batch(cm, "int4@0.5", 0)
    for q in (0, 9, 15, 31):
        failing = [replace(r, expected=ErrorReason.CONFIG, label=f"{r.label} with CONFIG.Q = {q}") for r in batch.requests]
        await bench.run(replace(batch, label=f"CONFIG.Q = {q}", requests=failing), q=q)
    await bench.run(batch)


#: The regression's procedures by name, each ``async (bench)``.
PROCEDURES = {f.__name__: f for f in (reset_state, workloads_bit_exact, malformed_metadata, bad_config,
                                      squash_recovery)}
