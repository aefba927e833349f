"""Reading a weight matrix from .npy, .npz or .safetensors files."""

import json
import struct
from pathlib import Path

import ml_dtypes
import numpy as np

# safetensors dtype names -> NumPy dtypes (little-endian, as the format prescribes).
_SAFETENSORS_DTYPES = {
    "F64": np.dtype("<f8"), "F32": np.dtype("<f4"), "F16": np.dtype("<f2"),
    "BF16": np.dtype(ml_dtypes.bfloat16), "F8_E5M2": np.dtype(ml_dtypes.float8_e5m2),
    "F8_E4M3": np.dtype(ml_dtypes.float8_e4m3fn),
    "I64": np.dtype("<i8"), "I32": np.dtype("<i4"), "I16": np.dtype("<i2"), "I8": np.dtype("i1"),
    "U8": np.dtype("u1"),
}


def _pick(names, tensor, path):
    if tensor is not None:
        if tensor not in names:
            raise KeyError(f"{path} has no tensor named {tensor!r}; it has: {', '.join(sorted(names)) or 'none'}")
        return tensor
    if len(names) != 1:
        raise KeyError(f"{path} holds {len(names)} tensors; name one with --tensor: {', '.join(sorted(names))}")
    return next(iter(names))


def _read_safetensors(path, tensor):
    with open(path, "rb") as f:
        raw = f.read(8)
        if len(raw) != 8:
            raise ValueError(f"{path}: not a safetensors file (too short)")
        (hlen,) = struct.unpack("<Q", raw)
        try:
            header = json.loads(f.read(hlen))
        except ValueError as e:
            raise ValueError(f"{path}: not a safetensors file (bad header: {e})") from None
    header.pop("__metadata__", None)
    name = _pick(header, tensor, path)
    info = header[name]
    if info["dtype"] not in _SAFETENSORS_DTYPES:
        raise ValueError(f"{path}: tensor {name!r} has unsupported dtype {info['dtype']}")
    dtype = _SAFETENSORS_DTYPES[info["dtype"]]
    lo, hi = info["data_offsets"]
    count = int(np.prod(info["shape"], dtype=np.int64))
    if hi - lo != count * dtype.itemsize:
        raise ValueError(f"{path}: tensor {name!r} has {hi - lo} bytes for shape {info['shape']} of {info['dtype']}")
    data = np.memmap(path, dtype=dtype, mode="r", offset=8 + hlen + lo, shape=(count,))
    return name, np.asarray(data).reshape(info["shape"])


def load_weights(path, tensor=None):
    """Load one 2-D tensor as float32; returns (name, array). ``tensor`` names it in .npz/.safetensors."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no such weight file: {path}")
    suffix = path.suffix.lower()
    if suffix == ".npy":
        if tensor is not None:
            raise ValueError(f"{path}: a .npy file holds one tensor; --tensor does not apply")
        name, w = path.stem, np.load(path, allow_pickle=False)
    elif suffix == ".npz":
        with np.load(path, allow_pickle=False) as z:
            name = _pick(z.files, tensor, path)
            w = z[name]
    elif suffix == ".safetensors":
        name, w = _read_safetensors(path, tensor)
    else:
        raise ValueError(f"{path}: unsupported weight file type {suffix!r} (use .npy, .npz or .safetensors)")
    if w.ndim != 2:
        raise ValueError(f"{path}: tensor {name!r} has shape {tuple(w.shape)}; a weight matrix must be 2-D (M, K)")
    return name, np.asarray(w).astype(np.float32)
