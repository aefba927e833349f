"""The fast engine's PCG64 (sim/bench/csrc/pcg64.h) against NumPy's Generator, draw for draw: the
C++ models must draw exactly the numbers the Python models draw on the same generator."""

import ctypes
import subprocess

import numpy as np
import pytest

from deca.sim.bench.engine import CSRC, _pcg64_state, _set_pcg64_state


@pytest.fixture(scope="module")
def draws(tmp_path_factory):
    lib = tmp_path_factory.mktemp("pcg64") / "libpcg64.so"
    subprocess.run(["c++", "-O2", "-shared", "-fPIC", "-DPCG64_DRAWS", "-x", "c++", "-o", str(lib),
                    str(CSRC / "pcg64.h")], check=True)
    f = ctypes.CDLL(str(lib)).pcg64_draws
    f.argtypes = [ctypes.POINTER(ctypes.c_uint64), *[np.ctypeslib.ndpointer(np.int64)] * 2, ctypes.c_long,
                  np.ctypeslib.ndpointer(np.float64)]

    def run(state, lo, hi):
        st = (ctypes.c_uint64 * 6)(*state)
        out = np.zeros(len(lo))
        f(st, lo, hi, len(lo), out)
        return out, list(st)
    return run


def test_draws_match_numpy(draws, rng):
    """random() and integers(lo, hi) interleaved, over ranges from 2 to 2^32 - 1 values, from a
    generator part way through its stream (a half-used 32-bit buffer included)."""
    gen = np.random.default_rng(int(rng.integers(2**63)))
    gen.integers(0, 7)  # leaves half of a 64-bit draw in the 32-bit buffer
    n = 20000
    spans = np.array([2, 3, 5, 41, 1000, 2**16 + 3, 2**31, 3 * 2**30, 2**32 - 1])
    lo = rng.integers(0, 300, n)
    hi = lo + spans[rng.integers(len(spans), size=n)]
    lo[rng.random(n) < 0.4] = -1  # random() there
    state = _pcg64_state(gen)
    got, final = draws(state, lo, hi)
    want = [gen.random() if a < 0 else float(gen.integers(a, b)) for a, b in zip(lo, hi)]
    bad = np.flatnonzero(got != np.array(want))
    assert not len(bad), f"draw {bad[0]}: C++ {got[bad[0]]}, NumPy {want[bad[0]]}"
    assert final == _pcg64_state(gen)


def test_state_round_trip(rng):
    """The state words set back into a generator continue its stream."""
    gen = np.random.default_rng(int(rng.integers(2**63)))
    gen.random(3)
    gen.integers(0, 5)
    words = _pcg64_state(gen)
    other = np.random.default_rng(0)
    _set_pcg64_state(other, words)
    assert [other.integers(0, 10**6) for _ in range(20)] == [gen.integers(0, 10**6) for _ in range(20)]
