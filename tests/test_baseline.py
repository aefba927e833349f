"""The software baseline's C kernels against the golden model: every scheme, density and special value.

Tiles are built here from the format text (plain bit packing, not the golden compressor), so the
kernels see streams no scheme would produce: random BF16 LUTs with NaN, Inf and subnormal entries,
every scale byte of each 8-bit scale format, special BF16 scales. Both paths (AVX-512 and the
portable scalar fallback) must give ``deca.golden.decompress``'s bits and errors.
"""

import csv
import itertools
import json
import re
import subprocess
import sys

import numpy as np
import pytest

from deca import baseline
from deca.baseline import build as baseline_build
from deca.golden import CompressedMatrix, FormatError, TileConfig, decompress, decompress_tile
from deca.golden.numerics import E2M1, E4M3, E5M2

Q_ALL = (1, 2, 3, 4, 5, 6, 7, 8, 16)
SCALINGS = ((None, 32), ("bf16", 16), ("bf16", 32), ("e8m0", 16), ("e8m0", 32), ("e4m3", 16), ("e4m3", 32))


@pytest.fixture(params=["avx512", "avx512-no-bf16", "avx2", "scalar"])
def path(request, monkeypatch):
    """Each kernel path (AVX-512 also without its AVX512_BF16 rounding); a path this CPU lacks must
    refuse with a clear message, and the test is skipped saying which features are missing."""
    name = request.param.removesuffix("-no-bf16")
    if request.param.endswith("-no-bf16"):
        monkeypatch.setenv("DECA_BASELINE_NO_AVX512BF16", "1")
    if name not in baseline.available_paths():
        with pytest.raises(baseline.Unsupported, match=f"lacks .*the {name} path cannot run here") as e:
            baseline.choose_path(name)
        pytest.skip(f"{e.value} (checked that the path refuses clearly)")
    return name


def pack(codes, q):
    """Q-bit codes -> LSB-first little-endian byte stream of ceil(n*Q/8) bytes (format.py, item 2)."""
    acc = 0
    for k, c in enumerate(codes):
        acc |= int(c) << (k * q)
    return acc.to_bytes((len(codes) * q + 7) // 8, "little")


def make_matrix(rng, config, n_tiles, density=1.0, scale_codes=None):
    """A (16, 32 * n_tiles) CompressedMatrix of random codes, one scale block per tile."""
    q = config.q_bits
    bits = rng.random((n_tiles, 512)) < density if config.sparse else np.ones((n_tiles, 512), bool)
    top = 1 << 16 if q == 16 else config.lut_size
    streams = [pack(rng.integers(0, top, int(b.sum())), q) for b in bits]
    offsets = np.concatenate([[0], np.cumsum([len(s) for s in streams])])
    values = np.frombuffer(b"".join(streams), np.uint8).copy()
    masks = np.packbits(bits, axis=1, bitorder="little") if config.sparse else None
    blocks = block_of_tile = None
    if config.scale_format:
        n = 512 // config.scale_group
        if scale_codes is None:
            scale_codes = rng.integers(0, 1 << 16 if config.scale_format == "bf16" else 256, (n_tiles, n))
        dtype = "<u2" if config.scale_format == "bf16" else np.uint8
        blocks = np.asarray(scale_codes).astype(dtype).view(np.uint8).reshape(n_tiles, -1)
        block_of_tile = np.arange(n_tiles)
    return CompressedMatrix((16, 32 * n_tiles), "test", config, values, offsets, masks, blocks, block_of_tile)


def random_lut(rng, with_specials=True):
    """256 random BF16 patterns; with specials, NaN, Inf, zeros and subnormals are placed for sure."""
    lut = rng.integers(0, 1 << 16, 256).astype(np.uint16)
    if with_specials:
        lut[rng.permutation(256)[:8]] = [0x7FC0, 0xFFC1, 0x7F80, 0xFF80, 0x0000, 0x8000, 0x0001, 0x807F]
    else:  # finite, normal or zero
        lut = np.where((lut & 0x7F80) == 0x7F80, lut & 0xBFFF, lut)
    return lut


def check(cm, path, stats=None):
    want = decompress(cm)
    got = baseline.decompress(cm, path, stats)
    bad = np.argwhere(got != want)
    assert not bad.size, (f"{path}: {len(bad)} elements differ, first at {tuple(bad[0])}: "
                          f"{got[tuple(bad[0])]:#06x} vs golden {want[tuple(bad[0])]:#06x}")


@pytest.mark.parametrize("q", Q_ALL)
def test_every_q_sparsity_and_scaling(q, path, rng):
    # Every Q x dense/sparse x scale format and group, random LUTs with specials, random scales
    # (every BF16 pattern class turns up among 2 x 16 x 32 random ones), densities 0 to 1.
    for sparse, (fmt, g) in itertools.product((False, True), SCALINGS):
        lut_size = 256 if q == 16 else int(rng.integers(1, (1 << q) + 1))
        cfg = TileConfig(q, sparse, fmt, g, random_lut(rng), lut_size)
        for density in ((0.0, 0.05, 0.2, 0.5, 0.97, 1.0) if sparse else (1.0,)):
            check(make_matrix(rng, cfg, 4, density), path)


def test_sign_symmetric_luts(path, rng):
    # Q = 8 LUTs whose upper half is the lower half with the sign flipped (E5M2, E4M3 and here
    # random ones with both signs, NaN, Inf and subnormals in the lower half) are looked up by the
    # low 7 bits, the sign flipped by bit 7.
    # With the NaNs of both halves one positive NaN (as E5M2 and E4M3 have them) only the low
    # bytes are symmetric, and the high bytes take the full lookup.
    half = random_lut(rng)[:128]
    flipped = np.concatenate([half, half ^ 0x8000]).astype(np.uint16)
    one_nan = flipped.copy()
    one_nan[rng.permutation(128)[:6] + np.array([0, 0, 0, 128, 128, 128])] = 0x7FC0
    one_nan[128:][one_nan[:128] == 0x7FC0] = 0x7FC0
    # A non-negative lower half whose upper half negates it except at some kept entries (as the
    # NaNs of E5M2 and E4M3) marks the kept ones in the looked-up high byte.
    positive = (half & 0x7FFF).astype(np.uint16)
    kept = np.concatenate([positive, positive | 0x8000])
    idx = rng.permutation(128)[:9]
    kept[128 + idx] = positive[idx]
    for lut, sparse, (fmt, g) in itertools.product((flipped, one_nan, kept), (False, True), SCALINGS):
        cfg = TileConfig(8, sparse, fmt, g, lut, 256)
        for density in ((0.0, 0.05, 0.5, 1.0) if sparse else (1.0,)):
            check(make_matrix(rng, cfg, 4, density), path)


def test_finite_luts_and_moderate_scales_take_no_slow_path(path, rng):
    # LUT magnitudes in [2^-27, 2^24) and scales in [2^-8, 2^8): no product is NaN, Inf or below
    # 2^-126, so every tile takes the fast path (per tile, without per-row checks) and none is
    # counted slow; the results still match the golden model bit for bit.
    exps = rng.integers(100, 151, 256)
    lut = (rng.integers(0, 2, 256) << 15 | exps << 7 | rng.integers(0, 128, 256)).astype(np.uint16)
    for q, sparse, (fmt, g) in itertools.product((1, 2, 4, 5, 8), (False, True), SCALINGS[1:]):
        n = 512 // g
        if fmt == "bf16":
            scales = (rng.integers(0, 2, (4, n)) << 15 | rng.integers(119, 135, (4, n)) << 7
                      | rng.integers(0, 128, (4, n)))
        elif fmt == "e8m0":
            scales = rng.integers(119, 135, (4, n))
        else:  # E4M3 normal codes 2^-6 .. 2^8 x (1 + m/8), either sign
            scales = rng.integers(0, 2, (4, n)) << 7 | rng.integers(1, 15, (4, n)) << 3 | rng.integers(0, 8, (4, n))
        cfg = TileConfig(q, sparse, fmt, g, lut, 1 << q)
        stats = baseline.Stats()
        check(make_matrix(rng, cfg, 4, 0.5, scales), path, stats)
        assert stats.slow_tiles == 0, (q, sparse, fmt, g)


@pytest.mark.parametrize("fmt", ["e8m0", "e4m3"])
@pytest.mark.parametrize("g", [16, 32])
def test_every_8bit_scale_byte(fmt, g, path, rng):
    # All 256 scale codes, each with every LUT kind: a real element format and random patterns.
    n = 512 // g
    scales = np.tile(np.arange(256), 2)[: 256 * 2 // n * n].reshape(-1, n)
    for lut in (E2M1.lut(), E5M2.lut(), E4M3.lut(), random_lut(rng)):
        for q, sparse in ((4, False), (8, True)):
            cfg = TileConfig(q, sparse, fmt, g, lut, 1 << q)
            check(make_matrix(rng, cfg, len(scales), 0.6, scales), path)


def test_e8m0_fast_path_and_counted_slow_path(path, rng):
    # MXFP4's E2M1 LUT: nonzero magnitudes 0.5 (exponent field 126) to 6 (129). Times 2^(x-127) they
    # stay normal BF16 exactly when 126 + x - 127 >= 1 and 129 + x - 127 <= 254: x in [2, 252]. Tiles
    # with a scale outside take the exact slow path, and only those are counted.
    scales = rng.integers(0, 256, (64, 16))
    scales[:32] = rng.integers(2, 253, (32, 16))
    cfg = TileConfig(4, False, "e8m0", 32, E2M1.lut(), 16)
    stats = baseline.Stats()
    check(make_matrix(rng, cfg, 64, scale_codes=scales), path, stats)
    want_slow = int(((scales < 2) | (scales > 252)).any(axis=1).sum())
    assert stats.slow_tiles == (want_slow if path in ("avx512", "avx2") else 0)


def test_scaled_lut_slow_path_is_counted(path, rng):
    # Q <= 4 with BF16 scales scales the 16 LUT entries per row. A tile takes the exact slow path
    # when one of those float32 products is NaN or a nonzero below 2^-126 (numpy float32, which
    # keeps subnormals, says which); only the AVX-512 path counts them. E2M1's smallest magnitude
    # is 0.5: times 2^-126 it is subnormal (slow), times 2^-125 it is 2^-126 (fast).
    lut = E2M1.lut()
    scales = rng.integers(0x3C00, 0x4400, (48, 16)).astype(np.uint16)  # about 2^-7 .. 2^8
    scales[16:24, 3] = 0x0080  # 2^-126
    scales[24:32, 5] = 0x7FC0  # NaN
    scales[32:40, 7] = 0x0100  # 2^-125
    scales[40:48, 9] = 0x0000  # zero: every product is a zero
    cfg = TileConfig(4, False, "bf16", 32, lut, 16)
    stats = baseline.Stats()
    check(make_matrix(rng, cfg, 48, scale_codes=scales), path, stats)
    with np.errstate(invalid="ignore", under="ignore"):
        p = (lut[:16].astype(np.uint32) << 16).view(np.float32)[None, None, :] \
            * ((scales.astype(np.uint32) << 16).view(np.float32))[:, :, None]
    special = np.isnan(p) | ((p != 0) & (np.abs(p) < np.float32(2.0**-126)))
    want = int(special.any(axis=(1, 2)).sum())
    assert want == 16
    assert stats.slow_tiles == (want if path in ("avx512", "avx2") else 0)


@pytest.mark.parametrize("fmt, g", [("e8m0", 32), ("e8m0", 16), ("bf16", 32), ("e4m3", 16)])
def test_per_group_scaled_luts_and_per_element_scaling(fmt, g, path, rng):
    # Q <= 4 tiles with at least (512 / g) << Q stored elements have each group's 2^Q LUT entries
    # scaled once (the scalar path), tiles with fewer scale each element; both by the exact rules
    # where a tile's scales need them. The AVX2 path looks sparse Q <= 4 codes with one scale per
    # row (g = 32) up in the row's scaled table after expanding them (Q = 1 by one pdep per row).
    # Masks with stored counts just below, at and above that threshold, LUTs with NaN, Inf, zeros
    # and subnormals and scales of every class, and finite LUTs with moderate scales (the fast rules).
    for q in (1, 2, 4):
        threshold = (512 // g) << q
        counts = [c for c in (threshold - 1, threshold, threshold + 1, 512) if 0 <= c <= 512]
        bits = np.zeros((len(counts), 512), bool)
        for i, c in enumerate(counts):
            bits[i, rng.permutation(512)[:c]] = True
        for specials in (True, False):
            lut = random_lut(rng, with_specials=specials)
            for sparse in (False, True):
                cfg = TileConfig(q, sparse, fmt, g, lut, 1 << q)
                n = len(counts) if sparse else 1
                scales = None
                if not specials:
                    scales = (rng.integers(120, 134, (n, 512 // g)) if fmt == "e8m0"
                              else rng.integers(0x3C00, 0x4300, (n, 512 // g)) if fmt == "bf16"
                              else rng.integers(0x30, 0x50, (n, 512 // g)))
                cm = make_matrix(rng, cfg, n, scale_codes=scales)
                if sparse:  # the tiles' streams rebuilt for the chosen masks
                    streams = [pack(rng.integers(0, 1 << q, int(b.sum())), q) for b in bits]
                    cm = CompressedMatrix(cm.shape, "test", cfg, np.frombuffer(b"".join(streams), np.uint8).copy(),
                                          np.concatenate([[0], np.cumsum([len(s) for s in streams])]),
                                          np.packbits(bits, axis=1, bitorder="little"), cm.scale_blocks,
                                          cm.scale_block_of_tile)
                check(cm, path)


def test_all_codes_of_8bit_formats(path, rng):
    # Codes 0..255 twice per tile, for E5M2 and E4M3 LUTs, unscaled and with special BF16 scales.
    special_scales = [0x0000, 0x8000, 0x0001, 0x807F, 0x7F80, 0xFF80, 0x7FC0, 0x0080, 0x7F7F, 0x3F80, 0x0100, 0x7E00]
    for lut in (E5M2.lut(), E4M3.lut()):
        codes = np.tile(np.arange(256, dtype=np.uint16), 2)
        for fmt in (None, "bf16"):
            cfg = TileConfig(8, False, fmt, 32, lut, 256)
            n = len(special_scales)
            scales = np.repeat(np.array(special_scales), 16).reshape(n, 16) if fmt else None
            cm = make_matrix(rng, cfg, n if fmt else 1, scale_codes=scales)
            cm.values[:] = np.tile(codes.astype(np.uint8), len(cm.values) // 512)
            check(cm, path)


@pytest.mark.parametrize("fmt", ["bf16", "e4m3"])
def test_products_next_to_the_smallest_normal(fmt, path, rng):
    # Every significand of a LUT binade times scales whose products straddle 2^-126, where the
    # scaler rounds to 8 bits and flushes below 2^-126: (1 - 2^-9) 2^-126 rounds up to 2^-126 (the
    # tie goes to the even significand), (1 - 2^-8) 2^-126 is exact and flushes.
    mant = np.arange(128, dtype=np.uint16)
    if fmt == "bf16":  # values in [0.5, 1), scales in [2^-126, 2^-125)
        lut = np.concatenate([0x3F00 | mant, 0xBF00 | mant])
        scales = np.concatenate([0x0080 | mant, 0x8080 | mant])
    else:  # values in [2^-119, 2^-117), E4M3 scales from 2^-9 up
        lut = np.concatenate([0x0400 | mant, 0x8480 | mant])
        scales = np.arange(256)
    cfg = TileConfig(8, False, fmt, 32, lut.astype(np.uint16), 256)
    cm = make_matrix(rng, cfg, len(scales) // 16, scale_codes=scales.reshape(-1, 16))
    cm.values[:] = np.tile(np.arange(256, dtype=np.uint8), len(cm.values) // 256)
    check(cm, path)


@pytest.mark.parametrize("fmt", [None, "bf16", "e8m0"])
def test_fp8_luts_computed_and_looked_up(fmt, path, rng):
    # E5M2 and E4M3 LUTs are computed from the code's bits (sign | magnitude << s + base) where
    # that form holds, with a 16-entry table for the magnitudes below it (zeros, subnormals), and
    # looked up elsewhere (Inf, NaN): rows of codes all in the computed range, rows with codes
    # below it, and rows with one above, dense and sparse.
    for fmt_lut, lo, hi in ((E5M2, 4, 123), (E4M3, 8, 126)):
        for sparse in (False, True):
            cfg = TileConfig(8, sparse, fmt, 32, fmt_lut.lut(), 256)
            cm = make_matrix(rng, cfg, 8, 0.4)
            n = len(cm.values)
            codes = rng.integers(lo, hi + 1, n) | rng.integers(0, 2, n) << 7
            special = rng.permutation(n)[: n // 40]
            codes[special] = rng.choice([0, 1, lo - 1, hi + 1, 127, 128, 128 + lo - 1, 255], len(special))
            cm.values[:] = codes.astype(np.uint8)
            check(cm, path)


def test_integer_and_spread_luts(path, rng):
    # An integer LUT (entry i the BF16 of (int8)i, as int8's) is converted, not looked up, by the
    # AVX2 path; dense Q = 1 and 2 codes index a table spread to their bit offsets; with BF16 and
    # E4M3 scales per 32 the row's table entries are scaled instead of its elements. Every scaling,
    # with random scales (special BF16 patterns and E4M3 bytes among them), dense and sparse.
    int8 = (np.arange(256, dtype=np.uint8).view(np.int8).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    for (fmt, g), sparse in itertools.product(SCALINGS, (False, True)):
        check(make_matrix(rng, TileConfig(8, sparse, fmt, g, int8, 256), 8, 0.5), path)
    for q, (fmt, g) in itertools.product((1, 2), SCALINGS):
        check(make_matrix(rng, TileConfig(q, False, fmt, g, random_lut(rng), 1 << q), 8), path)


def test_decompress_tile_matches_golden(path, rng):
    for q, sparse, (fmt, g) in [(4, True, ("e4m3", 16)), (8, False, (None, 32)), (16, True, ("bf16", 32)),
                                (3, True, ("e8m0", 32))]:
        cfg = TileConfig(q, sparse, fmt, g, random_lut(rng), 1 << min(q, 8))
        streams = make_matrix(rng, cfg, 1, 0.4).tile_streams(0)
        assert np.array_equal(baseline.decompress_tile(*streams, cfg, path), decompress_tile(*streams, cfg))


def test_large_matrix_from_the_compressor(path, rng):
    # The fast path of decompress on real schemes and a matrix with partial tiles.
    from deca.golden import compress

    w = rng.standard_normal((100, 300)).astype(np.float32)
    for scheme, density in (("mxfp4", None), ("int4", 0.5), ("bf8", 0.2), ("bf16", 0.5), ("nvfp4", None)):
        check(compress(w, scheme, density=density), path)


def test_measured_tile_sets_hold_the_matrix_tiles(rng):
    # deca baseline times subsets, replicas (DRAM) and chunks of a matrix's tiles: each must decode
    # to the matrix's own tiles.
    from deca.baseline.measure import _replicate, _subset
    from deca.golden import compress

    ts = baseline.TileSet.of_matrix(compress(rng.standard_normal((32, 256)).astype(np.float32), "ternary"))
    n = ts.num_tiles

    def tiles(s):
        out = np.zeros((s.num_tiles * 16, 32), np.uint16)
        assert s.decode(out, 1, 32)[0] == 0
        return out.reshape(s.num_tiles, 16, 32)

    want = tiles(ts)
    assert np.array_equal(tiles(_subset(ts, n - 3)), want[:n - 3])
    big = _replicate(ts, 3)
    assert np.array_equal(tiles(big), np.concatenate([want] * 3))
    assert np.array_equal(tiles(big.chunk(n + 2, 2 * n + 5)), np.concatenate([want[2:], want[:5]]))


def test_golden_decompress_engine_hook(rng, tmp_path):
    from deca.cli import main
    from deca.golden import compress, save

    cm = compress(rng.standard_normal((200, 700)).astype(np.float32), "nvfp4", density=0.4)
    assert np.array_equal(decompress(cm, engine="baseline"), decompress(cm))
    with pytest.raises(ValueError, match="unknown decompression engine 'gpu'"):
        decompress(cm, engine="gpu")
    save(cm, tmp_path / "w.deca")
    for engine in ("numpy", "baseline"):
        main(["decompress", str(tmp_path / "w.deca"), "-o", str(tmp_path / f"{engine}.npy"), "--raw", "--engine", engine])
    assert np.array_equal(np.load(tmp_path / "numpy.npy"), np.load(tmp_path / "baseline.npy"))


# Bad input ----------------------------------------------------------------------------------------


def golden_error(fn, *args):
    with pytest.raises(FormatError) as e:
        fn(*args)
    return str(e.value)


def replace_tile(cm, t, mask, stream):
    """``cm`` with tile t's mask and value stream replaced."""
    streams = [cm.tile_streams(i)[0] for i in range(cm.num_tiles)]
    streams[t] = stream
    masks = cm.masks.copy()
    masks[t] = np.frombuffer(mask, np.uint8)
    return CompressedMatrix(cm.shape, cm.scheme, cm.config, np.frombuffer(b"".join(streams), np.uint8),
                            np.concatenate([[0], np.cumsum([len(s) for s in streams])]), masks,
                            cm.scale_blocks, cm.scale_block_of_tile)


def test_malformed_tiles_give_the_golden_error(path, rng):
    cfg = TileConfig(3, True, "bf16", 16, random_lut(rng), 5)
    cm = make_matrix(rng, cfg, 6, 0.5)
    one = bytes([1]) + bytes(63)  # one stored element: 3 code bits and 5 padding bits
    broken = {
        "code beyond the codebook": replace_tile(cm, 4, one, bytes([7])),
        "nonzero padding": replace_tile(cm, 2, one, bytes([0xF9])),
    }
    for what, bad in broken.items():
        want = golden_error(decompress, bad)
        with pytest.raises(FormatError) as e:
            baseline.decompress(bad, path)
        assert str(e.value) == want, what

    values, mask, scales = cm.tile_streams(0)
    tiles = {
        "value stream too long": (values + b"\0", mask, scales),
        "mask too short": (values, mask[:-1], scales),
        "scales too long": (values, mask, scales + b"\0\0"),
        "nonzero padding": (bytes([0xF9]), one, scales),
        "code beyond the codebook": (bytes([6]), one, scales),
    }
    for what, args in tiles.items():
        want = golden_error(decompress_tile, *args, cfg)
        with pytest.raises(FormatError) as e:
            baseline.decompress_tile(*args, cfg, path)
        assert str(e.value) == want, what


@pytest.mark.parametrize("q, fmt", [(4, "e8m0"), (4, None), (8, "bf16"), (2, "e4m3")])
def test_dense_code_beyond_the_codebook(q, fmt, path, rng):
    cfg = TileConfig(q, False, fmt, 16, random_lut(rng), 3)
    cm = make_matrix(rng, cfg, 3)
    codes = rng.integers(0, 3, 512)
    codes[int(rng.integers(512))] = 3  # the first code the 3-entry codebook lacks
    values = bytes(cm.values[:cm.value_offsets[1]])
    bad = pack(codes, q)
    want = golden_error(decompress_tile, bad, b"", cm.tile_streams(0)[2], cfg)
    with pytest.raises(FormatError) as e:
        baseline.decompress_tile(bad, b"", cm.tile_streams(0)[2], cfg, path)
    assert str(e.value) == want
    assert np.array_equal(baseline.decompress_tile(values, b"", cm.tile_streams(0)[2], cfg, path),
                          decompress_tile(values, b"", cm.tile_streams(0)[2], cfg))


# The fallback and the build -----------------------------------------------------------------------


def test_without_avx512_the_next_path_runs_and_avx512_refuses(monkeypatch, rng):
    monkeypatch.setenv("DECA_BASELINE_NO_AVX512", "1")
    monkeypatch.delenv("DECA_BASELINE_PATH", raising=False)
    assert not baseline.avx512_supported()
    assert baseline.choose_path() == baseline.available_paths()[0] != "avx512"
    with pytest.raises(baseline.Unsupported, match=r"lacks avx512.*the avx512 path cannot run here; this CPU has: .*scalar"):
        baseline.choose_path("avx512")
    check(make_matrix(rng, TileConfig(4, True, "e8m0", 32, E2M1.lut(), 16), 3, 0.5), None)


AVX2_CPU = ("avx2", "fma", "f16c", "bmi2", "popcnt", "avx512f", "avx512bw", "avx512vl", "avx512dq")  # no VBMI
AVX512_CPU = (*AVX2_CPU, "avx512vbmi", "avx512_vbmi2", "avx512_bitalg")


@pytest.mark.parametrize("features, paths", [
    (AVX512_CPU, ["avx512", "avx2", "scalar"]), (AVX2_CPU, ["avx2", "scalar"]),
    (("avx2", "fma", "f16c"), ["scalar"]), ((), ["scalar"]),
])
def test_paths_by_cpu_features(features, paths, monkeypatch):
    # The paths a CPU runs follow from its features alone (fake feature sets here); the default is
    # the fastest, and every other path is refused naming the missing features and the CPU's paths.
    monkeypatch.delenv("DECA_BASELINE_PATH", raising=False)
    assert baseline.available_paths(features) == paths
    assert baseline.choose_path(None, features) == paths[0]
    for p in baseline.PATHS:
        if p in paths:
            assert baseline.choose_path(p, features) == p
            continue
        missing = [f for f in baseline.decode.REQUIRES[p] if f not in features]
        with pytest.raises(baseline.Unsupported) as e:
            baseline.choose_path(p, features)
        assert str(e.value) == (f"this CPU lacks {', '.join(missing)}: the {p} path cannot run here; "
                                f"this CPU has: {', '.join(paths)}")
    with pytest.raises(ValueError, match=f"unknown software decompression path 'avx'.*this CPU has: {', '.join(paths)}$"):
        baseline.choose_path("avx", features)


def test_kernels_refuse_paths_the_cpu_lacks(rng, monkeypatch):
    # Below the Python check, the C entry point itself returns -1 for a path this CPU lacks.
    import ctypes

    from deca.baseline.decode import _PATH_CODE, _ptr, lib

    monkeypatch.delenv("DECA_BASELINE_NO_AVX512", raising=False)
    lacking = [p for p in baseline.PATHS if p not in baseline.available_paths()]
    if not lacking:
        pytest.skip("this CPU runs every path")
    ts = baseline.TileSet.of_matrix(make_matrix(rng, TileConfig(4, False, None, 32, E2M1.lut(), 16), 1))
    out = np.zeros(512, np.uint16)
    for p in lacking:
        rc = lib().deca_decode(ctypes.byref(ts.cfg), _PATH_CODE[p], 1, _ptr(ts.values), _ptr(ts.value_offsets), None,
                               None, None, out.ctypes.data, 0, 32, ctypes.byref(baseline.Stats()))
        assert rc == -1, p


def test_path_from_environment(monkeypatch):
    monkeypatch.setenv("DECA_BASELINE_PATH", "scalar")
    assert baseline.choose_path() == "scalar"
    monkeypatch.setenv("DECA_BASELINE_PATH", "sse2")
    with pytest.raises(ValueError, match="unknown software decompression path 'sse2'"):
        baseline.choose_path()


def test_missing_compiler_says_what_to_install(monkeypatch):
    monkeypatch.setenv("CC", "no-such-cc-deca")
    with pytest.raises(baseline.BuildError, match="no C compiler found.*apt-get install gcc"):
        baseline_build.build()


def test_build_is_keyed_by_the_sources(monkeypatch, tmp_path):
    sources = []
    for src in baseline_build.SOURCES:
        sources.append(tmp_path / src.name)
        sources[-1].write_bytes(src.read_bytes())
    monkeypatch.setattr(baseline_build, "SOURCES", tuple(sources))
    monkeypatch.setattr(baseline_build, "BUILD_ROOT", tmp_path / "build")
    first = baseline_build.library_path()
    src = tmp_path / "decode.c"
    src.write_text(src.read_text() + "\n/* an edit */\n")
    assert baseline_build.library_path() != first
    src.write_text(src.read_text() + "\nsyntax error here\n")
    with pytest.raises(baseline.BuildError, match="compiling the software baseline with .* failed"):
        baseline_build.build()


@pytest.mark.parametrize("arg, message", [
    ("foo:0.5", "unknown scheme 'foo'"), ("bf8:x", "scheme\\[:density\\]"), ("bf8:0", "density must be in"),
])
def test_cli_bad_workloads(arg, message, capsys):
    from deca.cli import main

    with pytest.raises(SystemExit) as e:
        main(["baseline", "--workloads", arg])
    assert e.value.code == 2
    assert re.search(message, capsys.readouterr().err)


@pytest.mark.parametrize("arg, env, message", [
    ("sse2", {}, r"unknown software decompression path 'sse2' \(known: avx512, avx2, scalar\); this CPU has: .*scalar$"),
    ("avx512", {"DECA_BASELINE_NO_AVX512": "1"}, r"this CPU lacks avx512.*: the avx512 path cannot run here; "
                                                  r"this CPU has: .*scalar$"),
])
def test_cli_bad_path_exits_2(arg, env, message, monkeypatch, capsys):
    from deca.cli import main

    for k, v in env.items():
        monkeypatch.setenv(k, v)
    with pytest.raises(SystemExit) as e:
        main(["baseline", "--path", arg, "--runs", "1"])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and re.search(message, err), err


def test_cli_missing_compiler_exits_2():
    env = {"CC": "no-such-cc-deca", "PATH": "/nonexistent"}
    proc = subprocess.run([sys.executable, "-m", "deca.cli", "baseline", "--build"], capture_output=True, text=True,
                          env=env)
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "no C compiler found" in proc.stderr


# The measured engine in the model ------------------------------------------------------------------


def platform_doc(points):
    """A platform file as ``deca baseline`` writes it, with made-up L2 medians by (scheme, density)."""
    return {
        "format": "deca-baseline-platform/1", "machine": {"cpu": "Test CPU"}, "path": "avx512", "core_ghz": 3.0,
        "workloads": [{"scheme": s, "density": d, "sparse": d < 1, "class": s + ("-sparse" if d < 1 else ""),
                       "l2_cycles_per_tile": {"median": c, "min": c}} for (s, d), c in points.items()],
    }


def test_measured_engine_interpolates_in_density(tmp_path):

    from deca.sim.model.measured import measured_engine
    from deca.sim.model.kernels import kernel

    path = tmp_path / "platform.json"
    path.write_text(json.dumps(platform_doc({("bf8", 0.5): 100.0, ("bf8", 0.1): 60.0, ("mxfp4", 1.0): 42.0})))
    engine = measured_engine(path)
    assert engine.vo_tile(kernel("bf8", 0.3)) == pytest.approx(80.0)   # halfway between 60 and 100
    assert engine.vo_tile(kernel("bf8", 0.05)) == pytest.approx(60.0)  # held beyond the measured range
    assert engine.vo_tile(kernel("mxfp4")) == 42.0
    assert engine.vo_tile(kernel("bf16")) == 0.0  # dense BF16: nothing to decompress
    with pytest.raises(ValueError, match=r"no measured software cost for 'int4'.*deca baseline --workloads int4:1"):
        engine.vo_tile(kernel("int4"))


@pytest.mark.parametrize("content, message", [
    (None, "no software-baseline platform file"),
    ("{not json", "not a deca baseline platform file"),
    ('{"format": "other"}', "not a deca baseline platform file"),
    ('{"format": "deca-baseline-platform/1", "workloads": [{}]}', "malformed baseline platform file"),
])
def test_bad_platform_files(tmp_path, content, message):
    from deca.sim.model.measured import load_platform

    path = tmp_path / "platform.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(ValueError, match=message):
        load_platform(path)


def test_model_table_with_paper_costs_measured_matches_paper_engine(tmp_path, capsys):
    # A "measured" engine with the paper-derived costs (MXFP4 100, sparse BF8 71, sparse BF16 50,
    # dense BF8 71) must give the paper engine's R-S and speedups row by row.

    from deca.cli import main

    points = {("mxfp4", 1.0): 100.0, ("bf8", 1.0): 71.0, ("bf8", 0.5): 71.0, ("bf8", 0.05): 71.0,
              ("bf16", 0.5): 50.0, ("bf16", 0.05): 50.0}
    path = tmp_path / "platform.json"
    path.write_text(json.dumps(platform_doc(points)))
    main(["model", "table", "--baseline", str(path)])
    out = capsys.readouterr().out
    section = out.split("Table 2 recomputed with the software engine measured on Test CPU")[1]
    rows = [line.split() for line in section.splitlines()[3:] if line.strip()]
    assert len(rows) == 12
    for kernel_name, paper_cycles, measured, rs, rs_m, _bound, _deca, speedup, speedup_m in rows:
        assert float(paper_cycles) == float(measured), kernel_name
        assert rs == rs_m and speedup == speedup_m, kernel_name


def test_model_with_a_partial_platform_file(tmp_path, capsys):

    from deca.cli import main

    path = tmp_path / "platform.json"
    path.write_text(json.dumps(platform_doc({("bf8", 0.5): 90.0, ("bf8", 0.05): 90.0})))
    main(["model", "table", "--baseline", str(path)])
    out = capsys.readouterr().out
    assert "(so left out below): BF16_10%, BF16_20%, BF16_30%, BF16_5%, BF16_50%, BF8, MXFP4" in out
    section = out.split("Table 2 recomputed")[1]
    assert len([line for line in section.splitlines() if line.lstrip().startswith("BF8_")]) == 5
    main(["model", "roof", "--scheme", "int4", "--baseline", str(path)])
    assert "has no 'int4' workload; measure it with 'deca baseline --workloads int4:1'" in capsys.readouterr().out


def test_deca_baseline_writes_a_platform_file_the_model_reads(tmp_path, monkeypatch, capsys):
    from deca.sim.model.measured import measured_engine
    from deca.cli import main
    from deca.sim.model.kernels import kernel

    monkeypatch.setenv("DECA_BASELINE_NO_AVX512", "1")  # also: without AVX-512 it says so and measures the next path
    monkeypatch.delenv("DECA_BASELINE_PATH", raising=False)
    paths = baseline.available_paths()
    main(["baseline", "--workloads", "bf8:0.5,mxfp4", "--runs", "1", "--dram-factor", "0.02", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert f"paths: {', '.join(paths)}; not avx512 (lacks avx512" in out
    assert f", {paths[0]} path, CPU" in out and "Every path this CPU runs" in out
    assert "bf8@0.5" in out and "mxfp4@1" in out and "bytes per core cycle" in out
    engine = measured_engine(tmp_path / "platform.json")
    assert engine.path == paths[0] and f"{paths[0]} path" in engine.describe()
    assert engine.vo_tile(kernel("bf8", 0.5)) > 0 and engine.vo_tile(kernel("mxfp4")) > 0
    doc = json.loads((tmp_path / "platform.json").read_text())
    assert doc["paths"] == paths and "avx2" in doc["machine"]["cpu_features"] or "avx2" not in paths
    for w in doc["workloads"]:
        assert sorted(w["paths"]) == sorted(paths)
        assert w["paths"][paths[0]]["l2_cycles_per_tile"] == w["l2_cycles_per_tile"]
        assert w["paths"]["scalar"]["speedup_over_scalar"] == 1.0
    with open(tmp_path / "paths.csv") as f:
        rows = list(csv.DictReader(f))
    assert [(r["workload"], r["path"]) for r in rows] == [(w, p) for w in ("bf8@0.5", "mxfp4@1") for p in paths]
