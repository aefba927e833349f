"""The .deca file: exact round trip, and a clear error for truncated, corrupt or foreign files."""

import json
import struct

import numpy as np
import pytest

from deca.golden import FormatError, compress, decompress, load, save


@pytest.mark.parametrize("scheme, kwargs", [
    ("bf8", {}),
    ("mxfp4", {"density": 0.3}),
    ("nvfp4", {}),
    ("int4", {"group_size": 96}),
    ("codebook", {"codebook": [-1.5, 0.0, 0.25, 3.0, 7.0], "group_size": 16, "density": 0.5}),
])
def test_save_load_round_trip(tmp_path, rng, scheme, kwargs):
    cm = compress(rng.standard_normal((50, 300)).astype(np.float32), scheme, **kwargs)
    save(cm, tmp_path / "w.deca")
    back = load(tmp_path / "w.deca")
    assert (back.shape, back.scheme, back.config, back.group_size, back.tensor_scale) == \
        (cm.shape, cm.scheme, cm.config, cm.group_size, cm.tensor_scale)
    assert all(back.tile_streams(t) == cm.tile_streams(t) for t in range(cm.num_tiles))
    assert np.array_equal(decompress(back), decompress(cm))


@pytest.fixture
def saved(tmp_path, rng):
    path = tmp_path / "w.deca"
    save(compress(rng.standard_normal((40, 100)).astype(np.float32), "int4", density=0.4), path)
    return path


@pytest.mark.parametrize("keep", [0, 5, 19, 40, -1, -200])
def test_truncated_file(saved, keep):
    data = saved.read_bytes()
    saved.write_bytes(data[:keep])
    with pytest.raises(FormatError, match="truncated|bad magic"):
        load(saved)


def test_foreign_file(tmp_path):
    path = tmp_path / "w.deca"
    np.save(path.with_suffix(".npy"), np.zeros(3))
    path.write_bytes(path.with_suffix(".npy").read_bytes())
    with pytest.raises(FormatError, match="not a .deca file"):
        load(path)


def test_corrupt_section(saved):
    data = bytearray(saved.read_bytes())
    data[-3] ^= 0x10
    saved.write_bytes(bytes(data))
    with pytest.raises(FormatError, match="corrupt \\(CRC mismatch\\)"):
        load(saved)


def _rewrite_header(path, edit):
    data = path.read_bytes()
    magic, version, hlen = struct.unpack_from("<8sIQ", data)
    header = json.loads(data[20:20 + hlen])
    edit(header)
    new = json.dumps(header).encode()
    path.write_bytes(struct.pack("<8sIQ", magic, version, len(new)) + new + data[20 + hlen:])


def test_unsupported_version(saved):
    data = bytearray(saved.read_bytes())
    data[8] = 99
    saved.write_bytes(bytes(data))
    with pytest.raises(FormatError, match="version 99 is not supported"):
        load(saved)


@pytest.mark.parametrize("edit, message", [
    (lambda h: h["config"].update(q_bits=8), "value stream is .* bytes but .* stored elements of 8 bits"),
    (lambda h: h["config"].update(q_bits=3), "lut_size must be in 1..8 for Q=3"),
    (lambda h: h["config"].update(q_bits=9), "q_bits must be one of"),
    (lambda h: h.update(shape=[40, 200]), "value offsets do not describe"),
    (lambda h: h.pop("scheme"), "corrupt header"),
    (lambda h: h["config"].update(sparse=False), "sparse mode needs masks"),
])
def test_header_inconsistent_with_data(saved, edit, message):
    _rewrite_header(saved, edit)
    with pytest.raises(FormatError, match=message):
        load(saved)


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError):
        load(tmp_path / "absent.deca")
