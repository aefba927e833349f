"""Shared pytest fixtures: one reproducible random seed per run, printed in the report header."""

import os
import zlib

import numpy as np
import pytest


def pytest_addoption(parser):
    parser.addoption("--seed", type=int, default=None,
                     help="base random seed (default: $DECA_SEED or a fresh one, printed in the header)")


def pytest_configure(config):
    seed = config.getoption("--seed")
    if seed is None:
        seed = int(os.environ.get("DECA_SEED", np.random.SeedSequence().entropy % 2**32))
    config.deca_seed = seed
    # pytest-xdist's workers start after this and inherit the environment: one seed for the run.
    os.environ["DECA_SEED"] = str(seed)


def pytest_report_header(config):
    return f"deca random seed: {config.deca_seed} (reproduce with --seed {config.deca_seed})"


@pytest.fixture
def seed(request):
    """A per-test seed derived from the run's base seed and the test's id (stable under -k / reordering)."""
    return (request.config.deca_seed + zlib.crc32(request.node.nodeid.encode())) % 2**32


@pytest.fixture
def rng(seed, record_property):
    record_property("seed", seed)
    return np.random.default_rng(seed)


def pytest_runtest_makereport(item, call):
    # Name the seed on failure so one failing test can be re-run alone.
    if call.when == "call" and call.excinfo is not None and "seed" in item.fixturenames:
        item.add_report_section("call", "seed", f"base seed {item.config.deca_seed} (re-run with --seed {item.config.deca_seed})")


@pytest.fixture(scope="session")
def generated():
    """``generated(W, L, design="pe")``: the Verilog path, generated once for all test workers and
    the measurements (``deca.hw.generate.generate_cached`` in the campaigns' cache): it takes seconds
    to a minute per design."""
    from deca.hw.generate import generate_cached
    from deca.hw.params import LOADERS
    from deca.sim.measure.campaign import DESIGN, VERILOG_CACHE

    def get(W, L, design="pe"):
        return generate_cached(W, L, VERILOG_CACHE, design=design, **DESIGN, loaders=LOADERS)

    return get


#: The test files that take longest (in this order, from the durations of a default run in a fresh
#: clone), sent first to the test processes (``scripts/test.sh``: pytest-xdist, a file to one
#: process, in collection order with ``--no-loadscope-reorder``): started last, a long file would
#: keep one process busy while the other has nothing left to run. test_synth_cells.py (Yosys alone)
#: beside test_pe_rtl.py, not test_engine.py: that one waited for the W = 32, L = 8 Verilator build
#: test_pe_rtl.py makes; test_engine.py next, as it builds the W = 8, L = 4 fast engine that later
#: files use.
LONGEST_FILES = ("test_pe_rtl.py", "test_synth_cells.py", "test_engine.py", "test_hw_pe.py", "test_verilog.py",
                 "test_formal.py", "test_hw_datapath.py", "test_rtl_runner.py", "test_synth.py", "test_hw_prefetcher.py",
                 "test_hw_blocks.py")


def pytest_collection_modifyitems(config, items):
    rank = {name: k for k, name in enumerate(LONGEST_FILES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(LONGEST_FILES)))  # stable: a file's order kept
