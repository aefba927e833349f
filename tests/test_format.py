"""The byte layout of the three streams and of the memory image, checked against the format's text.

Expected bytes are built here by plain loops straight from the wording in deca.golden.format, from
weights chosen so that the codes and scales the compressor must pick are known in advance.
"""

import numpy as np
import pytest

from deca.golden import SCHEMES, TILE_META_DTYPE, FormatError, compress, decompress, decompress_tile, decompress_tiles
from deca.golden import schemes
from deca.golden.numerics import bf16_to_f32


def naive_pack(codes, q):
    """Code k occupies stream bits [kQ, kQ+Q); stream bit i is bit i%8 of byte i//8."""
    out = bytearray((len(codes) * q + 7) // 8)
    for k, code in enumerate(codes):
        for b in range(q):
            if (int(code) >> b) & 1:
                i = k * q + b
                out[i // 8] |= 1 << (i % 8)
    return bytes(out)


def naive_mask(tile_mask):
    """Element e is bit e%8 of byte e//8."""
    out = bytearray(64)
    for e, bit in enumerate(tile_mask.ravel()):
        if bit:
            out[e // 8] |= 1 << (e % 8)
    return bytes(out)


def tile_of(a, i, j):
    return a[16 * i:16 * i + 16, 32 * j:32 * j + 32]


@pytest.mark.parametrize("q", [1, 2, 3, 4, 5, 6, 7, 8])
@pytest.mark.parametrize("sparse", [False, True])
def test_value_and_mask_streams_follow_the_spec(rng, q, sparse):
    # Distinct, exactly representable codebook values: each weight picks a known code.
    codebook = np.arange(1 << q, dtype=np.float32) - (1 << (q - 1))
    codes = rng.integers(0, 1 << q, size=(32, 64))
    mask = rng.random((32, 64)) < 0.6 if sparse else None
    cm = compress(codebook[codes], "codebook", mask=mask, codebook=codebook)
    assert cm.config.q_bits == q and cm.config.sparse == sparse
    for t, (i, j) in enumerate(np.ndindex(*cm.tile_grid)):
        values, mask_bytes, scales = cm.tile_streams(t)
        tile_mask = tile_of(mask, i, j) if sparse else np.ones((16, 32), bool)
        assert values == naive_pack(tile_of(codes, i, j)[tile_mask], q)
        assert mask_bytes == (naive_mask(tile_mask) if sparse else b"")
        assert scales == b""


def test_q16_streams_hold_raw_bf16_little_endian(rng):
    w = rng.standard_normal((16, 32)).astype(np.float32)
    cm = compress(w, "bf16")
    values, _, _ = cm.tile_streams(0)
    as_bf16 = np.frombuffer(values, "<u2").reshape(16, 32)
    # Truncation and RNE differ by at most one ulp; the exact rounding is checked in test_numerics.
    assert np.allclose(bf16_to_f32(as_bf16), w, rtol=2**-8)


def bf16_le(x):
    return int(np.float32(x).view(np.uint32) >> 16).to_bytes(2, "little")


@pytest.mark.parametrize("group_size", [16, 32, 64, 96, "channel"])
def test_scale_stream_layout_and_sharing(rng, group_size):
    m, k = 32, 192
    g_cols = k if group_size == "channel" else group_size
    # Group (r, gi) gets scale 2^(e) exactly: absmax = 127 * 2^e, so int8 picks code +-127 there.
    exps = rng.integers(-8, 8, size=(m, k // g_cols))
    w = rng.uniform(-1, 1, size=(m, k)).astype(np.float32) * np.float32(100)
    w = w * np.repeat(np.exp2(exps), g_cols, axis=1).astype(np.float32)
    gi = np.arange(k // g_cols)
    w[:, gi * g_cols] = (127 * np.exp2(exps)).astype(np.float32)
    cm = compress(w, "int8", group_size=group_size)
    g = 16 if group_size == 16 else 32
    assert cm.config.scale_group == g and cm.config.scale_format == "bf16"
    for t, (i, j) in enumerate(np.ndindex(*cm.tile_grid)):
        _, _, scales = cm.tile_streams(t)
        expected = b"".join(
            bf16_le(2.0 ** exps[16 * i + r, (32 * j + c) // g_cols])
            for r in range(16) for c in range(0, 32, g)  # s = r*(32/g) + c//g, increasing
        )
        assert scales == expected
    # Tiles of one wide group share a block; no block is stored twice.
    tiles_per_group = max(1, g_cols // 32)
    assert cm.stream_bytes()["scales"] == cm.num_tiles // tiles_per_group * len(expected)


def test_memory_image_places_every_stream(rng):
    w = rng.standard_normal((40, 224)).astype(np.float32)
    cm = compress(w, "int4", density=0.3, group_size=64)
    base, align = 0x10_0003, 64
    image, meta = cm.memory_image(base=base, align=align)
    assert meta.dtype == TILE_META_DTYPE and len(meta) == cm.num_tiles
    spans = set()
    for t, row in enumerate(meta):
        got = []
        for name in ("val", "mask", "scale"):
            addr, length = int(row[f"{name}_addr"]), int(row[f"{name}_len"])
            if length == 0:
                assert addr == 0
                got.append(b"")
                continue
            assert addr % align == 0 and base <= addr and addr + length <= base + len(image)
            got.append(image[addr - base:addr - base + length].tobytes())
            spans.add((addr, length))
        assert tuple(got) == cm.tile_streams(t)
    # Distinct streams never overlap (shared scale blocks appear once in `spans`).
    ordered = sorted(spans)
    assert all(a + n <= b for (a, n), (b, _) in zip(ordered, ordered[1:]))
    shared = meta["scale_addr"].reshape(cm.tile_grid)
    # G = 64: tiles 2j and 2j+1 share scales; the 7th tile column starts a group of its own.
    assert np.all(shared[:, 0:6:2] == shared[:, 1:6:2]) and np.all(shared[:, 6] != shared[:, 5])


def test_dense_memory_image_has_no_mask_and_packs_with_align_1(rng):
    cm = compress(rng.standard_normal((16, 64)).astype(np.float32), "bf8")
    image, meta = cm.memory_image()
    assert np.all(meta["mask_len"] == 0) and np.all(meta["scale_len"] == 0)
    assert list(meta["val_addr"]) == [0, 512] and len(image) == 1024


@pytest.mark.parametrize("base, align", [(-1, 1), (0, 3), (0, 0), (1.5, 1)])
def test_memory_image_rejects_bad_layout(rng, base, align):
    cm = compress(rng.standard_normal((16, 32)).astype(np.float32), "bf8")
    with pytest.raises(ValueError, match="base|align"):
        cm.memory_image(base=base, align=align)


def test_zero_density_tiles_have_empty_value_streams(rng):
    cm = compress(rng.standard_normal((16, 64)).astype(np.float32), "mxfp4", density=0)
    assert all(cm.tile_streams(t)[0] == b"" for t in range(cm.num_tiles))
    assert not decompress(cm).any()


@pytest.mark.parametrize("scheme", sorted(SCHEMES))
@pytest.mark.parametrize("density", [None, 0.4])
def test_decompress_tiles_is_each_tiles_decompress_tile(rng, scheme, density):
    # 40 x 70: edge tiles with padding rows and columns, scale blocks shared across tiles.
    codebook = {"codebook": np.arange(-8, 8) / 4} if scheme == "codebook" else {}
    cm = compress(rng.standard_normal((40, 70)).astype(np.float32), scheme, density=density, **codebook)
    tiles = decompress_tiles(cm)
    assert tiles.shape == (9, 16, 32) and tiles.dtype == np.uint16
    for t in range(cm.num_tiles):
        np.testing.assert_array_equal(tiles[t], decompress_tile(*cm.tile_streams(t), cm.config), err_msg=f"tile {t}")


# Malformed tiles: decompress_tile names the problem instead of returning a wrong tile.


@pytest.fixture
def sparse_int4(rng):
    w = rng.standard_normal((16, 32)).astype(np.float32)
    cm = compress(w, "int4", density=0.5, group_size=16)
    return cm.tile_streams(0), cm.config


def test_malformed_value_length(sparse_int4):
    (values, mask, scales), cfg = sparse_int4
    for bad in (values[:-1], values + b"\0"):
        with pytest.raises(FormatError, match=r"value stream is \d+ bytes but 256 stored elements of 4 bits need 128"):
            decompress_tile(bad, mask, scales, cfg)


def test_malformed_mask_length(sparse_int4):
    (values, mask, scales), cfg = sparse_int4
    with pytest.raises(FormatError, match="mask stream is 63 bytes; this sparse config needs 64"):
        decompress_tile(values, mask[:63], scales, cfg)


def test_mask_inconsistent_with_values(sparse_int4):
    (values, mask, scales), cfg = sparse_int4
    more = bytes([mask[0] | 0xFF]) + mask[1:] if mask[0] != 0xFF else bytes([0]) + mask[1:]
    with pytest.raises(FormatError, match="value stream is 128 bytes but"):
        decompress_tile(values, more, scales, cfg)


def test_malformed_scale_length(sparse_int4):
    (values, mask, scales), cfg = sparse_int4
    with pytest.raises(FormatError, match="scale stream is 62 bytes; the config \\(bf16, g=16\\) needs 64"):
        decompress_tile(values, mask, scales[:62], cfg)


def test_nonzero_padding_bits():
    codebook = [0.0, 1.0, 2.0]
    mask = np.zeros((16, 32), bool)
    mask[0, :3] = True  # 3 codes of 2 bits: 6 bits used, 2 padding bits
    cm = compress(np.ones((16, 32), np.float32), "codebook", mask=mask, codebook=codebook)
    values, m, s = cm.tile_streams(0)
    assert len(values) == 1
    with pytest.raises(FormatError, match="padding bits are not zero"):
        decompress_tile(bytes([values[0] | 0x80]), m, s, cm.config)


def test_code_beyond_codebook():
    cm = compress(np.zeros((16, 32), np.float32), "codebook", codebook=[0.0, 1.0, 2.0])
    values, m, s = cm.tile_streams(0)
    bad = bytearray(values)
    bad[5] |= 0b1100_0000  # element 23 gets code 3 of a 3-entry codebook
    with pytest.raises(FormatError, match="element 23: code 3 is beyond the 3-entry codebook"):
        decompress_tile(bytes(bad), m, s, cm.config)


def test_the_encoding_tables_kept_are_bounded_and_a_dropped_one_is_rebuilt_alike(rng):
    # deca verify draws a codebook per tile: each has tables of its own (256 KB), which must not pile up.
    w = rng.standard_normal((16, 32)).astype(np.float32)
    # values on a 1/8 grid are exact in BF16, so every codebook stays four distinct values
    books = [np.sort(rng.choice(np.arange(-64, 64), 4, replace=False)) / 8 for _ in range(schemes.TABLES_KEPT + 8)]
    streams = [[bytes(s) for s in compress(w, "codebook", codebook=b).tile_streams(0)] for b in books]
    assert len(schemes._TABLES) == schemes.TABLES_KEPT
    assert len({tuple(s) for s in streams}) > 1  # the codebooks encode differently
    again = [bytes(s) for s in compress(w, "codebook", codebook=books[0]).tile_streams(0)]  # its tables were dropped
    assert again == streams[0]
