"""Property-based round trips against tests/reference.py, plus the stream rules of the format.

Matrices of any shape up to 70 x 100 (mostly not tile multiples), all-zero and constant matrices,
weights on a quarter grid (exact ties for codebooks, rint and pruning), weights near the bottom of
the BF16 range (flushed scales and products), random masks and densities.
"""

import numpy as np
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from deca.golden import TILE_COLS, TILE_ROWS, compress, decompress
from reference import assert_same_bf16, expected, mask_bits, unpack_codes

# No example database: it would be written into the working tree; failures print their example.
SETTINGS = dict(deadline=None, database=None)

shapes = st.tuples(st.integers(1, 70), st.integers(1, 100))
seeds = st.integers(0, 2**32 - 1)


@st.composite
def weight_matrices(draw, shape):
    kind = draw(st.sampled_from(["normal", "zeros", "constant", "quarters", "tiny"]))
    rng = np.random.default_rng(draw(seeds))
    if kind == "zeros":
        w = np.zeros(shape)
    elif kind == "constant":
        w = np.full(shape, draw(st.sampled_from([1.0, -1.0, 0.375])))
    elif kind == "quarters":
        w = rng.integers(-40, 41, size=shape) / 4
    elif kind == "tiny":
        w = rng.standard_normal(shape) * 2.0**-118
    else:
        w = rng.standard_normal(shape) * np.exp2(rng.uniform(-3, 3, size=(shape[0], 1)))
    return w.astype(np.float32)


@st.composite
def selections(draw, shape):
    """compress options choosing the stored elements: none (dense), a density or an explicit mask."""
    how = draw(st.sampled_from(["dense", "density", "mask"]))
    if how == "density":
        return {"density": draw(st.sampled_from([1, 0.5, 0.3, 0.2, 0.1, 0.05, 0]) | st.floats(0, 1))}
    if how == "mask":
        return {"mask": np.random.default_rng(draw(seeds)).random(shape) < draw(st.floats(0, 1))}
    return {}


@st.composite
def problems(draw):
    shape = draw(shapes)
    return draw(weight_matrices(shape)), draw(selections(shape))


def padded(a, fill):
    """(M, K) -> the tile-padded matrix, padding set to ``fill``."""
    m, k = a.shape
    out = np.full((-(-m // TILE_ROWS) * TILE_ROWS, -(-k // TILE_COLS) * TILE_COLS), fill, a.dtype)
    out[:m, :k] = a
    return out


def check_streams(cm, want):
    """Each tile's mask bits, value-stream length, code order and padding bits, from the format text."""
    q = cm.config.q_bits
    # Dense mode stores every element of a tile, padding included.
    stored = padded(want.stored, not cm.config.sparse)
    real = padded(np.ones(cm.shape, bool), False)
    codes = padded(want.codes, 0)
    tk = cm.tile_grid[1]
    for t in range(cm.num_tiles):
        i, j = divmod(t, tk)
        block = np.s_[TILE_ROWS * i:TILE_ROWS * (i + 1), TILE_COLS * j:TILE_COLS * (j + 1)]
        values, mask, _ = cm.tile_streams(t)
        if cm.config.sparse:
            np.testing.assert_array_equal(mask_bits(mask), stored[block])
        else:
            assert mask == b""
        n = int(stored[block].sum())
        assert len(values) == -(-n * q // 8)
        assert int.from_bytes(values, "little") >> (n * q) == 0, f"tile {t}: nonzero padding bits"
        # Codes follow increasing element index e = 32r + c; padding codes are not specified.
        in_stream = unpack_codes(values, n, q)
        np.testing.assert_array_equal(in_stream[real[block][stored[block]]], codes[block][stored[block] & real[block]])


def check_round_trip(w, scheme, **opts):
    cm = compress(w, scheme, **opts)
    want = expected(w, scheme, **opts)
    assert (cm.config.sparse, cm.config.q_bits) == (want.sparse, want.q_bits)
    assert_same_bf16(decompress(cm), want.bits)
    check_streams(cm, want)


@settings(max_examples=500, **SETTINGS)
@given(problem=problems(), q=st.integers(1, 8), group_size=st.sampled_from([None, 16, 32]), data=st.data())
def test_codebook_of_any_q(problem, q, group_size, data):
    w, select = problem
    size = data.draw(st.integers(2 ** (q - 1) + 1 if q > 1 else 1, 2**q), label="codebook size")
    # Distinct halves (exact in BF16 up to 128) in an arbitrary order: codes are not sorted by value,
    # and weights on the quarter grid fall on midpoints, where ties go to the even code.
    rng = np.random.default_rng(data.draw(seeds, label="codebook seed"))
    span = min(2 * size + 16, 256)
    codebook = rng.choice(np.arange(-span, span + 1), size, replace=False) / 2
    assume(group_size is None or codebook.any())  # a scaled codebook needs a nonzero value
    check_round_trip(w, "codebook", codebook=codebook, group_size=group_size, **select)


@settings(max_examples=200, **SETTINGS)
@given(data=st.data())
def test_bf16_of_any_float32(data):
    shape = data.draw(shapes)
    # Any finite or infinite float32, subnormals and -0 included: Q16 keeps BF16(w).
    w = data.draw(arrays(np.float32, shape, elements=st.floats(width=32, allow_nan=False)))
    check_round_trip(w, "bf16", **data.draw(selections(shape)))


@settings(max_examples=200, **SETTINGS)
@given(problem=problems(), scheme=st.sampled_from(["int4", "int8"]), group_size=st.sampled_from([16, 32]))
def test_integers_with_tile_groups(problem, scheme, group_size):
    w, select = problem
    check_round_trip(w, scheme, group_size=group_size, **select)


#: Group sizes each scheme accepts (64 only when K >= 64); None is the default.
GROUPS = {
    "bf8": [None], "fp8e4m3": [None, 16, 32, 64, "channel"], "mxfp4": [None], "nvfp4": [None],
    "int8": [None, 16, 32, 64, "channel"], "int4": [None, 16, 32, 64, "channel"],
    "int2": [None, 16, 32, 64, "channel"], "nf4": [None, 16, 32, 64, "channel"],
    "int1": [None, 16, 32, 64, "channel"], "ternary": [None, 16, 32, 64, "channel"],
}


@settings(max_examples=500, **SETTINGS)
@given(problem=problems(), scheme=st.sampled_from(sorted(GROUPS)), data=st.data())
def test_every_scheme(problem, scheme, data):
    w, select = problem
    choices = [g for g in GROUPS[scheme] if g != 64 or w.shape[1] >= 64]
    check_round_trip(w, scheme, group_size=data.draw(st.sampled_from(choices), label="group size"), **select)
