"""The generated PE's Verilog under cocotb (deca.sim.bench.pe_tb), on Verilator and Icarus: every tile bit
for bit against the golden model through a rough core and memory, malformed metadata, squashes,
and the performance counters against what the models observed.

Waves: ``WAVES=1 pytest tests/test_pe_rtl.py -k ...`` (see ``deca.sim.rtl_runner.run``).
"""

import re
from pathlib import Path

import pytest

from deca.golden import SCHEMES
from deca.hw.generate import top_name
from deca.sim.bench.runner import run

DESIGNS = [(8, 4), (32, 8), (64, 64)]
#: The default run's schemes: raw BF16, Q = 8 without scales, Q = 4 with E4M3 scales per 16, Q = 2
#: with BF16 scales, always-sparse Q = 1 ternary, and codebooks of Q = 5 and a partly used Q = 8.
SOME_SCHEMES = ["bf16", "bf8", "nvfp4", "int2", "ternary", "codebook"]
SOME = {"schemes": SOME_SCHEMES, "densities": [1, 0.2, 0], "codebook_sizes": [20, 200]}
FEW = {"schemes": ["nvfp4", "ternary"], "densities": [1, 0.2], "codebook_sizes": []}
ALL = {"schemes": list(SCHEMES), "densities": [1, 0.5, 0.2, 0.05, 0], "codebook_sizes": [5, 20, 50, 100, 200]}


def run_pe(request, sim, W, L, seed, testcase, **params):
    """Run the cocotb tests ``testcase`` of pe_tb on the (W, L) PE; the build is reused while its Verilog stays."""
    name = re.sub(r"[^\w.-]+", "_", request.node.name)
    print(f"{sim} W={W} L={L} {testcase}: seed {seed}")
    verilog = request.getfixturevalue("generated")(W, L)
    run(sim, [verilog], top_name("pe", W, L), "deca.sim.bench.pe_tb", Path(__file__).parent, testcase=testcase,
        params={"W": W, "L": L, "seed": seed, **params}, run_name=name, seed=seed)


def design_ids(designs):
    return [f"W{W}L{L}" for W, L in designs]


#: One Verilator build by default, the generator's default W = 32, L = 8 (the squash and malformed
#: metadata tests share it); W = 8, L = 4 (more vOps per tile: the longer run) under -m slow, with
#: W = 64, L = 64 (a five-minute build) in the full matrix.
@pytest.mark.parametrize("W,L", [(32, 8), pytest.param(8, 4, marks=pytest.mark.slow)], ids=["W32L8", "W8L4"])
def test_verilator_workloads(request, W, L, seed):
    # W = 32 (a quarter of the vOps per tile, four times the bits per vOp) with a few schemes: all
    # of them run on it under -m slow.
    run_pe(request, "verilator", W, L, seed, ["reset_state", "workloads_bit_exact"], **(SOME if W == 8 else FEW))


def test_icarus_workloads(request, seed):
    # Icarus has four-state values: this is where X or Z on an output shows.
    run_pe(request, "icarus", 8, 4, seed, ["reset_state", "workloads_bit_exact"], **FEW)


@pytest.mark.parametrize("sim,W,L", [("verilator", 32, 8), ("icarus", 8, 4)], ids=["verilator-W32L8", "icarus-W8L4"])
def test_malformed_metadata(request, sim, W, L, seed):
    schemes = ["nvfp4", "bf16", "ternary"] if sim == "verilator" else ["nvfp4"]
    run_pe(request, sim, W, L, seed, ["malformed_metadata", "bad_config"], malformed_schemes=schemes)


#: W8L4 squashes on Verilator under -m slow: on Icarus and the Amaranth simulator by default. A few
#: schemes by default; W = 32, L = 8 squashes every scheme in test_verilator_all_schemes.
@pytest.mark.parametrize("sim,W,L", [pytest.param("verilator", 8, 4, marks=pytest.mark.slow), ("verilator", 32, 8),
                                     ("icarus", 8, 4)],
                         ids=["verilator-W8L4", "verilator-W32L8", "icarus-W8L4"])
def test_squash(request, sim, W, L, seed):
    run_pe(request, sim, W, L, seed, "squash_recovery", **(SOME if W == 8 and sim == "verilator" else FEW),
           squash={"squash_prob": 0.005, "reissue": 0.8, "squash_at": [1, 25, 60]})


@pytest.mark.slow
@pytest.mark.parametrize("W,L", DESIGNS, ids=design_ids(DESIGNS))
def test_verilator_all_schemes(request, W, L, seed):
    run_pe(request, "verilator", W, L, seed, ["reset_state", "workloads_bit_exact", "malformed_metadata", "bad_config",
                                              "squash_recovery"], **ALL)


@pytest.mark.slow
@pytest.mark.parametrize("W,L", [(8, 4), (32, 8)], ids=design_ids([(8, 4), (32, 8)]))
def test_icarus_some_schemes(request, W, L, seed):
    run_pe(request, "icarus", W, L, seed, ["reset_state", "workloads_bit_exact", "malformed_metadata"], **SOME)
