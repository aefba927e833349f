"""The whole datapath on the Amaranth simulator: bit-exact against the golden model, and the cycle
count of every tile equal to the bubble rule, for every scheme and density (three densities by default)."""

import numpy as np
import pytest

from deca.hw.datapath import PIPELINE_FILL, Datapath
from deca.hw.params import ParameterError, dequant_lanes
from deca.sim.bench.bus import ReusedSimulator
from deca.sim.bench.datapath_bench import TileJob, configure, run_datapath
from deca.sim.bench.stimulus import workloads

DESIGNS = [(8, 4), (16, 4), (32, 8), (64, 16), (64, 64)]


#: (W, L) -> the Datapath and its simulator, made once per test process.
SIMULATORS = {}


def simulate(W, L, cases, **kwargs):
    """Run each (label, CompressedMatrix) through one Datapath(W, L); return {label: (jobs, run)}."""
    if (W, L) not in SIMULATORS:
        dut = Datapath(W, L)
        SIMULATORS[W, L] = dut, ReusedSimulator(dut, 1e-6)
    dut, sim = SIMULATORS[W, L]
    results = {}

    async def bench(ctx):
        for label, cm in cases:
            await configure(ctx, dut, cm.config)
            jobs = [TileJob.from_matrix(cm, t, W, L) for t in range(cm.num_tiles)]
            results[label] = jobs, await run_datapath(ctx, dut, jobs, **kwargs)

    sim.run(bench)
    return results


def check_data(label, jobs, run):
    want = np.concatenate([j.chunks for j in jobs])
    assert run.chunks.shape == want.shape, label
    bad = np.argwhere(run.chunks != want)
    assert not bad.size, (f"{label}: chunk {bad[0][0]} element {bad[0][1]}: "
                          f"got {run.chunks[tuple(bad[0])]:#06x}, golden {want[tuple(bad[0])]:#06x}")
    per_tile = len(want) // len(jobs)
    assert run.lasts.tolist() == ([False] * (per_tile - 1) + [True]) * len(jobs), f"{label}: last flags"


#: The default design by default, dense, empty (every window takes the one-cycle floor) and at a
#: sparse density (windows of a few lanes' cycles each); every density there, W = 8, L = 4 (the
#: smallest), W = 16 (one scale decoder, as at W = 8), W = 64, L = 16 (the most decoders) and
#: W = 64, L = 64 (four times the LUTs) under -m slow.
SOME_DENSITIES = {"densities": (1, 0.3, 0)}
CHECKED = [pytest.param(32, 8, SOME_DENSITIES, id="W32L8"),
           *(pytest.param(W, L, {}, marks=pytest.mark.slow, id=f"W{W}L{L}" + ("-all" if (W, L) == (32, 8) else ""))
             for W, L in DESIGNS)]


@pytest.mark.parametrize("W,L,densities", CHECKED)
def test_bit_exact_and_bubble_rule(W, L, densities, rng):
    cases = workloads(rng, shape=(16, 64), **densities)  # two tiles each: the first with the fill, one after it
    cm_of = dict(cases)
    results = simulate(W, L, cases)
    for label, (jobs, run) in results.items():
        check_data(label, jobs, run)
        # Inputs always offered and output always ready: the first tile takes its dequantization
        # cycles plus the pipeline fill, and every later tile exactly its dequantization cycles.
        ends = run.out_cycles[run.lasts]
        assert ends[0] - run.first_tile_cycle == jobs[0].cycles + PIPELINE_FILL, label
        assert np.diff(ends).tolist() == [j.cycles for j in jobs[1:]], label
        # So does every chunk: chunk k of the first tile leaves after the cycles of vOps 0..k plus the fill
        # (in the PE, TOut sends a completion row ROW_LATENCY cycles after the chunk that completes it).
        lanes, sparse = dequant_lanes(cm_of[label].config.q_bits, L), cm_of[label].config.sparse
        windows = [bin(jobs[0].mask >> (k * W) & ((1 << W) - 1)).count("1") if sparse else W for k in range(512 // W)]
        want = np.cumsum([max(1, -(-n // lanes)) for n in windows]) + PIPELINE_FILL
        assert (run.out_cycles[:512 // W] - run.first_tile_cycle).tolist() == want.tolist(), label


#: A code width of each kind (raw BF16, Q = 8, Q = 4 with E8M0 and with E4M3 scales, Q = 2, ternary
#: Q = 1, a Q = 5 codebook) by default; every scheme, and W = 8, L = 4 (a minute and a half), under
#: -m slow: W = 32, L = 8 has the more lanes and decoders. Dense and a sparse density by default,
#: a sparser one too under -m slow.
SOME_SCHEMES = {"schemes": ["bf16", "bf8", "mxfp4", "nvfp4", "int2", "ternary", "codebook"], "codebook_sizes": (20,),
                "densities": (1, 0.3)}
ALL_DENSITIES = {"densities": (1, 0.3, 0.05)}


@pytest.mark.parametrize("W,L,schemes", [pytest.param(8, 4, ALL_DENSITIES, marks=pytest.mark.slow),
                                         (32, 8, SOME_SCHEMES),
                                         pytest.param(32, 8, ALL_DENSITIES, marks=pytest.mark.slow)],
                         ids=["W8L4-all", "W32L8", "W32L8-all"])
def test_stalls_and_backpressure_change_timing_only(W, L, schemes, rng):
    cases = workloads(rng, **schemes, extra_densities={})
    rough = simulate(W, L, cases, rng=rng, stall=0.3, backpressure=0.4)
    for label, (jobs, run) in rough.items():
        check_data(label, jobs, run)
    # A slow dequantization stage can hide a few stalls, but not all of them: together the runs take
    # longer than the bubble rule gives without stalls.
    taken = sum(run.out_cycles[-1] - run.first_tile_cycle for _, run in rough.values())
    assert taken > sum(sum(j.cycles for j in jobs) + PIPELINE_FILL for jobs, _ in rough.values())


@pytest.mark.parametrize("W,L", [(12, 4), (32, 3), (8, 16), (128, 8), (32, 0)])
def test_impossible_parameters_are_refused(W, L):
    with pytest.raises(ParameterError, match="W must be|L must be|exceeds W"):
        Datapath(W, L)
