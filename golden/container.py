"""The ``.deca`` file: one compressed matrix in one file.

Layout (all integers little-endian)::

    offset 0   8 bytes   magic b"DECA\\r\\n\\x1a\\n"
    offset 8   u32       container version (1)
    offset 12  u64       H, the length of the header
    offset 20  H bytes   header: a UTF-8 JSON object
    offset 20+H          sections, at the offsets the header gives (relative to 20+H)

The header holds ``scheme``, ``shape`` [M, K], ``config`` (``TileConfig.to_dict``: q_bits,
sparse, scale_format, scale_group, lut as 256 integers, lut_size), ``group_size`` (G along K or
null), ``tensor_scale`` and ``sections``: for each of ``values`` (uint8), ``value_offsets``
(int64, tiles + 1), ``masks`` (uint8, tiles x 64, sparse only), ``scale_blocks`` (uint8,
blocks x scale stream bytes) and ``scale_block_of_tile`` (int64, tiles) an object
{offset, length, crc32}. The arrays are those of ``CompressedMatrix``.
"""

import json
import struct
import zlib

import numpy as np

from .format import FormatError, TileConfig
from .matrix import CompressedMatrix

MAGIC = b"DECA\r\n\x1a\n"
VERSION = 1
_PREFIX = struct.Struct("<8sIQ")
_SECTIONS = {
    "values": np.uint8,
    "value_offsets": np.dtype("<i8"),
    "masks": np.uint8,
    "scale_blocks": np.uint8,
    "scale_block_of_tile": np.dtype("<i8"),
}


def save(cm, path):
    """Write ``cm`` to ``path`` in the .deca layout."""
    arrays = {
        "values": cm.values,
        "value_offsets": cm.value_offsets,
        "masks": cm.masks,
        "scale_blocks": cm.scale_blocks,
        "scale_block_of_tile": cm.scale_block_of_tile,
    }
    sections, blobs, offset = {}, [], 0
    for name, dtype in _SECTIONS.items():
        if arrays[name] is None:
            continue
        blob = np.ascontiguousarray(arrays[name], dtype).tobytes()
        sections[name] = {"offset": offset, "length": len(blob), "crc32": zlib.crc32(blob)}
        blobs.append(blob)
        offset += len(blob)
    header = json.dumps({
        "scheme": cm.scheme,
        "shape": list(cm.shape),
        "config": cm.config.to_dict(),
        "group_size": cm.group_size,
        "tensor_scale": cm.tensor_scale,
        "sections": sections,
    }).encode()
    with open(path, "wb") as f:
        f.write(_PREFIX.pack(MAGIC, VERSION, len(header)))
        f.write(header)
        for blob in blobs:
            f.write(blob)


def load(path):
    """Read a .deca file; raises FormatError naming the problem if it is truncated, corrupt or foreign."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < _PREFIX.size or data[:8] != MAGIC:
        raise FormatError(f"{path}: not a .deca file (bad magic)")
    _, version, hlen = _PREFIX.unpack_from(data)
    if version != VERSION:
        raise FormatError(f"{path}: .deca container version {version} is not supported (this is version {VERSION})")
    start = _PREFIX.size + hlen
    if start > len(data):
        raise FormatError(f"{path}: truncated: the header needs {start} bytes, the file has {len(data)}")
    try:
        header = json.loads(data[_PREFIX.size:start])
        sections = header["sections"]
        arrays = {}
        for name, sec in sections.items():
            if name not in _SECTIONS:
                raise FormatError(f"{path}: unknown section {name!r}")
            lo, hi = start + sec["offset"], start + sec["offset"] + sec["length"]
            if hi > len(data):
                raise FormatError(f"{path}: truncated: section {name!r} ends at byte {hi}, the file has {len(data)}")
            blob = data[lo:hi]
            if zlib.crc32(blob) != sec["crc32"]:
                raise FormatError(f"{path}: section {name!r} is corrupt (CRC mismatch)")
            arrays[name] = np.frombuffer(blob, _SECTIONS[name]).copy()
        config = TileConfig.from_dict(header["config"])
        if "masks" in arrays:
            arrays["masks"] = arrays["masks"].reshape(-1, 64)
        if "scale_blocks" in arrays:
            arrays["scale_blocks"] = arrays["scale_blocks"].reshape(-1, max(config.scale_stream_len, 1))
        return CompressedMatrix(
            shape=tuple(header["shape"]),
            scheme=header["scheme"],
            config=config,
            values=arrays["values"],
            value_offsets=arrays["value_offsets"],
            masks=arrays.get("masks"),
            scale_blocks=arrays.get("scale_blocks"),
            scale_block_of_tile=arrays.get("scale_block_of_tile"),
            group_size=header["group_size"],
            tensor_scale=float(header["tensor_scale"]),
        )
    except FormatError as e:
        if str(e).startswith(str(path)):
            raise
        raise FormatError(f"{path}: {e}") from None
    except (ValueError, KeyError, TypeError) as e:
        raise FormatError(f"{path}: corrupt header ({type(e).__name__}: {e})") from None
