"""Every scheme, bit for bit against the independent reference in tests/reference.py.

Shapes include ones that are not multiples of the 16 x 32 tile, so partial tiles, padding columns
and groups cut short by the edge of the matrix are all exercised.
"""

import numpy as np
import pytest

from deca.golden import TILE_COLS, TILE_ROWS, compress, decompress, decompress_tile
from reference import assert_same_bf16, bf16_values, expected, mask_bits

DENSITIES = [1, 0.5, 0.3, 0.2, 0.1, 0.05, 0]
# 37 x 75: partial tiles both ways; 20 x 300: K not a multiple of 32, 64 or the int4 default 128.
SHAPES = [(37, 75), (32, 64), (20, 300)]

#: 11 values (Q = 4, five codes unused), 0 included so that padding decodes to +0.
CODEBOOK = np.array([-2.5, -1.0, -0.375, 0.0, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 4.5], np.float32)

#: Group sizes each scheme is tested with; None is the scheme's default (or unscaled).
GROUPS = {
    "bf16": [None],
    "bf8": [None],
    "fp8e4m3": [None, 16, 32, 64, "channel"],
    "mxfp4": [None],
    "nvfp4": [None],
    "int8": [None, 16, 32, 64],
    "int4": [None, 16, 32, 64, "channel"],
    "int2": [None, 16, 64, "channel"],
    "nf4": [None, 16, 32, "channel"],
    "int1": [None, 16, 64, "channel"],
    "ternary": [None, 16, 32, 64],
    "codebook": [None, 16, 32, 64, "channel"],
}
CASES = [pytest.param(s, g, id=f"{s}-g{g}") for s, groups in GROUPS.items() for g in groups]


def options(scheme, group_size):
    opts = {"group_size": group_size}
    if scheme == "codebook":
        opts["codebook"] = CODEBOOK
    return opts


def weights(rng, shape):
    """Normal weights whose rows differ in magnitude, so groups get different scales."""
    scale = np.exp2(rng.uniform(-3, 3, size=(shape[0], 1)))
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def stored_mask(cm):
    """(M, K) elements the compressed matrix stores, read from its mask bytes (all, if dense)."""
    m, k = cm.shape
    tm, tk = cm.tile_grid
    if not cm.config.sparse:
        return np.ones((m, k), bool)
    tiles = np.stack([mask_bits(cm.tile_streams(t)[1]) for t in range(cm.num_tiles)])
    full = tiles.reshape(tm, tk, TILE_ROWS, TILE_COLS).transpose(0, 2, 1, 3).reshape(tm * TILE_ROWS, tk * TILE_COLS)
    # Padding is never stored in sparse mode.
    assert not full[m:].any() and not full[:, k:].any()
    return full[:m, :k]


@pytest.mark.parametrize("density", DENSITIES)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("scheme, group_size", CASES)
def test_round_trip_matches_reference(rng, scheme, group_size, shape, density):
    w = weights(rng, shape)
    cm = compress(w, scheme, density=density, **options(scheme, group_size))
    want = expected(w, scheme, density=density, **options(scheme, group_size))
    assert (cm.config.sparse, cm.config.q_bits) == (want.sparse, want.q_bits)
    assert_same_bf16(decompress(cm), want.bits)


@pytest.mark.parametrize("density", [None, 0.3])
@pytest.mark.parametrize("scheme, group_size", CASES)
def test_each_tile_decodes_alone(rng, scheme, group_size, density):
    m, k = 37, 75
    cm = compress(weights(rng, (m, k)), scheme, density=density, **options(scheme, group_size))
    whole = decompress(cm)
    tk = cm.tile_grid[1]
    # Padding weights are 0: they decode to +0 unless the codebook has no 0 (int1: +-1) and they are stored.
    padding_is_zero = cm.config.sparse or scheme != "int1"
    for t in range(cm.num_tiles):
        i, j = divmod(t, tk)
        tile = decompress_tile(*cm.tile_streams(t), cm.config)
        rows, cols = min(TILE_ROWS, m - TILE_ROWS * i), min(TILE_COLS, k - TILE_COLS * j)
        assert_same_bf16(tile[:rows, :cols], whole[TILE_ROWS * i:TILE_ROWS * i + rows, TILE_COLS * j:TILE_COLS * j + cols])
        if padding_is_zero:
            assert not tile[rows:].any() and not tile[:, cols:].any()


@pytest.mark.parametrize("kind", ["normal", "ties"])
@pytest.mark.parametrize("density", DENSITIES)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("scheme", ["bf16", "int4", "mxfp4"])
def test_pruning_stores_exactly_round_d_mk_largest(rng, scheme, shape, density, kind):
    # "ties": few distinct magnitudes, so the lower-row-major-index rule decides most of the mask.
    w = weights(rng, shape) if kind == "normal" else rng.integers(-3, 4, size=shape).astype(np.float32)
    stored = stored_mask(compress(w, scheme, density=density))
    assert stored.sum() == round(density * w.size)
    np.testing.assert_array_equal(stored, expected(w, scheme, density=density).stored)


@pytest.mark.parametrize("group_size", [None, 32])
@pytest.mark.parametrize("density", [None, *DENSITIES])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_ternary_mask_is_the_nonzero_ternarization(rng, shape, density, group_size):
    w = weights(rng, shape)
    cm = compress(w, "ternary", density=density, group_size=group_size)
    want = expected(w, "ternary", density=density, group_size=group_size)
    assert cm.config.sparse
    np.testing.assert_array_equal(stored_mask(cm), want.stored)
    if density is None:
        # |w| below gamma / 2 (about 0.4 sigma, a third of normal weights) ternarizes to 0.
        assert 0.55 < want.stored.mean() < 0.8


def relative_rms_error(approx, w):
    return np.sqrt(np.mean((approx - w) ** 2) / np.mean(w.astype(np.float64) ** 2))


@pytest.mark.parametrize("magnitude", [1e-4, 1.0, 1e4])
def test_nvfp4_tensor_scale_restores_the_weights(rng, magnitude):
    w = (rng.standard_normal((37, 75)) * magnitude).astype(np.float32)
    cm = compress(w, "nvfp4")
    want = expected(w, "nvfp4")
    assert cm.tensor_scale == want.tensor_scale == np.float32(np.abs(w).max()) / np.float32(2688)
    approx = bf16_values(decompress(cm)) * cm.tensor_scale
    assert relative_rms_error(approx, w) < 0.15


# Bounds of the relative RMS error on normal weights, with a margin over what each format achieves.
@pytest.mark.parametrize("scheme, options_, limit", [
    ("bf16", {}, 0.004),
    ("bf8", {}, 0.08),
    ("fp8e4m3", {"group_size": 32}, 0.04),
    ("mxfp4", {}, 0.15),
    ("int8", {}, 0.01),
    ("int4", {}, 0.15),
    ("nf4", {}, 0.15),
    ("int1", {}, 0.65),
    ("ternary", {}, 0.58),
])
def test_quantization_error_is_small(rng, scheme, options_, limit):
    w = rng.standard_normal((64, 256)).astype(np.float32)
    approx = bf16_values(decompress(compress(w, scheme, **options_)))
    assert relative_rms_error(approx, w) < limit


def test_products_just_below_the_bf16_normal_range_flush_to_zero():
    # The scaler rounds to 8 significant bits with an unbounded exponent, then flushes below 2^-126:
    # 255/256 * 2^-126 is exact there and becomes 0 (rounding on BF16's subnormal grid gives 2^-126).
    tiny = 2.0**-126
    w = np.array([[tiny, 255 / 256 * tiny, -255 / 256 * tiny, tiny / 2]], np.float32)
    opts = {"codebook": [1.0, 255 / 256, 0.0, -255 / 256, 0.5], "group_size": "channel"}
    got = decompress(compress(w, "codebook", **opts))
    np.testing.assert_array_equal(got, [[0x0080, 0x0000, 0x8000, 0x0000]])
    assert_same_bf16(got, expected(w, "codebook", **opts).bits)
