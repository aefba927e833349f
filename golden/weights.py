"""Reading weights: one matrix (``load_weights``) or a whole checkpoint lazily (``open_checkpoint``).

A checkpoint is a ``.safetensors`` file, a folder of ``.safetensors`` shards (with or without a
``*.index.json`` naming the shard of each tensor), a ``.zip`` holding such files, a ``.npz`` or a
``.npy``. ``open_checkpoint`` reads only the headers; ``Checkpoint.read(name)`` then reads one
tensor, memory-mapped where the bytes lie uncompressed in a file, so a checkpoint larger than
the memory can be processed one tensor at a time. ``write_safetensors`` writes one tensor at a
time too.
"""

import json
import os
import shutil
import struct
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path

import ml_dtypes
import numpy as np

# safetensors dtype names -> NumPy dtypes (little-endian, as the format prescribes).
SAFETENSORS_DTYPES = {
    "F64": np.dtype("<f8"), "F32": np.dtype("<f4"), "F16": np.dtype("<f2"),
    "BF16": np.dtype(ml_dtypes.bfloat16), "F8_E5M2": np.dtype(ml_dtypes.float8_e5m2),
    "F8_E4M3": np.dtype(ml_dtypes.float8_e4m3fn),
    "I64": np.dtype("<i8"), "I32": np.dtype("<i4"), "I16": np.dtype("<i2"), "I8": np.dtype("i1"),
    "U8": np.dtype("u1"), "BOOL": np.dtype("?"),
}
FLOAT_DTYPES = ("F64", "F32", "F16", "BF16", "F8_E5M2", "F8_E4M3")
_NAME_OF_DTYPE = {dt: name for name, dt in SAFETENSORS_DTYPES.items()}
#: Largest safetensors header accepted (the format's own limit is 100 MB).
_MAX_HEADER = 100 << 20


class CheckpointError(ValueError):
    """A checkpoint that cannot be read: missing, truncated or malformed."""


@dataclass(frozen=True)
class TensorInfo:
    """Where one tensor lies: ``file`` (a path, or a member of ``zip_path``) and its byte range."""

    name: str
    dtype: str          # safetensors dtype name, or a NumPy dtype string for .npz/.npy
    shape: tuple
    file: str
    offset: int = 0     # of the data inside the file (safetensors)
    nbytes: int = 0
    zip_path: str | None = None

    @property
    def floating(self):
        return self.dtype in FLOAT_DTYPES

    @property
    def numpy_dtype(self):
        return SAFETENSORS_DTYPES.get(self.dtype)


class Checkpoint:
    """The tensors of a checkpoint, from their headers; ``read`` loads one (see the module text)."""

    def __init__(self, path):
        self.path = Path(path)
        self.tensors = {}    # name -> TensorInfo, in file order
        self._open_zip = None
        if not self.path.exists():
            raise CheckpointError(f"no such checkpoint: {self.path}")
        if self.path.is_dir():
            self._scan_folder()
        else:
            suffix = self.path.suffix.lower()
            if suffix == ".safetensors":
                self._add_safetensors(str(self.path))
            elif suffix == ".zip":
                self._scan_zip()
            elif suffix == ".npz":
                self._scan_npz()
            elif suffix == ".npy":
                self._scan_npy()
            else:
                raise CheckpointError(f"{self.path}: unsupported checkpoint type {suffix!r} "
                                      "(use .safetensors, a folder of shards, .zip, .npz or .npy)")
        if not self.tensors:
            raise CheckpointError(f"{self.path}: holds no tensors")

    # Listing -------------------------------------------------------------------------------------

    def _scan_folder(self):
        indexes = sorted(self.path.glob("*.index.json"))
        if indexes:
            try:
                weight_map = json.loads(indexes[0].read_text())["weight_map"]
            except (ValueError, KeyError, TypeError) as e:
                raise CheckpointError(f"{indexes[0]}: not a shard index ({type(e).__name__}: {e})") from None
            shards = list(dict.fromkeys(weight_map.values()))
            missing = [s for s in shards if not (self.path / s).is_file()]
            if missing:
                raise CheckpointError(f"{indexes[0]} names shards that are missing: {', '.join(missing)}")
            for shard in shards:
                self._add_safetensors(str(self.path / shard))
            absent = sorted(set(weight_map) - set(self.tensors))
            if absent:
                raise CheckpointError(f"{indexes[0]}: tensor {absent[0]!r} is not in its shard {weight_map[absent[0]]}")
        else:
            shards = sorted(self.path.glob("*.safetensors"))
            if not shards:
                raise CheckpointError(f"{self.path}: a checkpoint folder needs .safetensors shards, found none")
            for shard in shards:
                self._add_safetensors(str(shard))

    def _scan_zip(self):
        try:
            z = zipfile.ZipFile(self.path)
        except (zipfile.BadZipFile, OSError) as e:
            raise CheckpointError(f"{self.path}: not a readable zip file ({e})") from None
        with z:
            members = sorted(i.filename for i in z.infolist() if i.filename.endswith(".safetensors"))
            if not members:
                raise CheckpointError(f"{self.path}: the zip file holds no .safetensors file")
            for member in members:
                with z.open(member) as f:
                    self._add_safetensors(member, f, z.getinfo(member).file_size, zip_path=str(self.path))

    def _scan_npz(self):
        try:
            with zipfile.ZipFile(self.path) as z:
                for info in z.infolist():
                    if not info.filename.endswith(".npy"):
                        continue
                    with z.open(info) as f:
                        shape, dtype = _npy_header(f, f"{self.path}:{info.filename}")
                    name = info.filename[:-4]
                    self.tensors[name] = TensorInfo(name, _NAME_OF_DTYPE.get(dtype, dtype.str), shape, str(self.path))
        except (zipfile.BadZipFile, OSError) as e:
            raise CheckpointError(f"{self.path}: not a readable .npz file ({e})") from None

    def _scan_npy(self):
        with open(self.path, "rb") as f:
            shape, dtype = _npy_header(f, str(self.path))
        name = self.path.stem
        self.tensors[name] = TensorInfo(name, _NAME_OF_DTYPE.get(dtype, dtype.str), shape, str(self.path))

    def _add_safetensors(self, file, f=None, size=None, zip_path=None):
        where = f"{zip_path}:{file}" if zip_path else file
        own = f is None
        if own:
            size = os.path.getsize(file)
            f = open(file, "rb")
        try:
            raw = f.read(8)
            if len(raw) != 8:
                raise CheckpointError(f"{where}: not a safetensors file (shorter than its 8-byte header length)")
            (hlen,) = struct.unpack("<Q", raw)
            if hlen > min(_MAX_HEADER, size - 8):
                raise CheckpointError(f"{where}: not a safetensors file or truncated (header length {hlen}, "
                                      f"file size {size})")
            try:
                header = json.loads(f.read(hlen))
                if not isinstance(header, dict):
                    raise ValueError("the header is not a JSON object")
            except (ValueError, UnicodeDecodeError) as e:
                raise CheckpointError(f"{where}: not a safetensors file (bad header: {e})") from None
        finally:
            if own:
                f.close()
        header.pop("__metadata__", None)
        data_size = size - 8 - hlen
        for name, entry in header.items():
            try:
                dtype, shape = entry["dtype"], tuple(int(d) for d in entry["shape"])
                lo, hi = (int(x) for x in entry["data_offsets"])
            except (KeyError, TypeError, ValueError):
                raise CheckpointError(f"{where}: malformed header entry for tensor {name!r}") from None
            if hi > data_size:
                raise CheckpointError(f"{where}: truncated: tensor {name!r} ends at data byte {hi}, "
                                      f"the file holds {data_size}")
            np_dtype = SAFETENSORS_DTYPES.get(dtype)
            if np_dtype is not None and hi - lo != int(np.prod(shape, dtype=np.int64)) * np_dtype.itemsize:
                raise CheckpointError(f"{where}: tensor {name!r} has {hi - lo} bytes for shape {list(shape)} of {dtype}")
            if name in self.tensors:
                raise CheckpointError(f"{where}: tensor {name!r} is also in {self.tensors[name].file}")
            self.tensors[name] = TensorInfo(name, dtype, shape, file, 8 + hlen + lo, hi - lo, zip_path)

    # Reading -------------------------------------------------------------------------------------

    def read(self, name):
        """The tensor ``name`` as a NumPy array of its own dtype (read-only when memory-mapped)."""
        info = self.tensors[name]
        if self.path.suffix.lower() == ".npz" and not self.path.is_dir():
            with np.load(self.path, allow_pickle=False) as z:
                return z[name]
        if self.path.suffix.lower() == ".npy" and not self.path.is_dir():
            return np.load(self.path, mmap_mode="r", allow_pickle=False)
        dtype = info.numpy_dtype
        if dtype is None:
            raise CheckpointError(f"{self.path}: tensor {name!r} has dtype {info.dtype}, which cannot be read")
        count = int(np.prod(info.shape, dtype=np.int64))
        if info.zip_path is None:
            if count == 0:
                return np.zeros(info.shape, dtype)
            return np.memmap(info.file, dtype=dtype, mode="r", offset=info.offset, shape=info.shape)
        return np.frombuffer(self.read_bytes(name), dtype).reshape(info.shape)

    def read_bytes(self, name):
        """The tensor's bytes as safetensors stores them (little-endian, row-major)."""
        info = self.tensors[name]
        if info.offset == 0:  # .npz or .npy
            return np.ascontiguousarray(self.read(name), info.numpy_dtype).tobytes()
        if info.zip_path is None:
            with open(info.file, "rb") as f:
                f.seek(info.offset)
                return f.read(info.nbytes)
        if self._open_zip is None:
            self._open_zip = zipfile.ZipFile(info.zip_path)
        # A stored member could be mapped; a deflated one is decompressed up to the tensor.
        with self._open_zip.open(info.file) as f:
            f.seek(info.offset)
            data = f.read(info.nbytes)
        if len(data) != info.nbytes:
            raise CheckpointError(f"{info.zip_path}:{info.file}: truncated in tensor {name!r}")
        return data

    def unpacked(self, folder):
        """A path that reads like this checkpoint with its zip members as plain files in ``folder``
        (this checkpoint's own path when it is not a zip)."""
        if self.path.suffix.lower() != ".zip" or self.path.is_dir():
            return self.path
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(self.path) as z:
            for member in {t.file for t in self.tensors.values()}:
                with z.open(member) as src, open(folder / Path(member).name, "wb") as dst:
                    shutil.copyfileobj(src, dst, 1 << 22)
        return folder

    def fingerprint(self):
        """What identifies this checkpoint's content cheaply: names, dtypes, shapes and a CRC of
        sampled bytes of every file (the member CRCs of a zip)."""
        files = sorted({(t.zip_path or t.file, t.file if t.zip_path else None) for t in self.tensors.values()},
                       key=str)
        sums = []
        for path, member in files:
            if member is not None:
                with zipfile.ZipFile(path) as z:
                    sums.append([member, z.getinfo(member).CRC])
            else:
                sums.append([Path(path).name, _sampled_crc(path)])
        tensors = [[t.name, t.dtype, list(t.shape)] for t in self.tensors.values()]
        return {"crc": zlib.crc32(json.dumps([sums, tensors]).encode())}


def _npy_header(f, where):
    try:
        version = np.lib.format.read_magic(f)
        read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, _, dtype = read(f)
    except ValueError as e:
        raise CheckpointError(f"{where}: not a .npy array ({e})") from None
    return tuple(shape), dtype


def _sampled_crc(path, samples=16, chunk=1 << 16):
    """CRC-32 of the size and of ``samples`` chunks spread over the file."""
    size = os.path.getsize(path)
    crc = zlib.crc32(str(size).encode())
    with open(path, "rb") as f:
        for i in range(samples):
            f.seek(max(0, (size - chunk) * i // max(1, samples - 1)))
            crc = zlib.crc32(f.read(chunk), crc)
    return crc


def open_checkpoint(path):
    return Checkpoint(path)


def write_safetensors(path, tensors):
    """Write a safetensors file one tensor at a time, atomically (a temporary file, then renamed).

    ``tensors``: (name, dtype name, shape, producer) in file order; ``producer()`` returns the
    tensor's bytes (or an array of that dtype) when its turn comes.
    """
    header, offset = {}, 0
    for name, dtype, shape, _ in tensors:
        nbytes = int(np.prod(shape, dtype=np.int64)) * SAFETENSORS_DTYPES[dtype].itemsize
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    blob = json.dumps(header).encode()
    blob += b" " * (-len(blob) % 8)  # the data starts 8-byte aligned
    path = Path(path)
    tmp = path.with_name(path.name + ".partial")
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(blob)))
        f.write(blob)
        for name, dtype, _, produce in tensors:
            data = produce()
            data = data.tobytes() if isinstance(data, np.ndarray) else data
            if len(data) != header[name]["data_offsets"][1] - header[name]["data_offsets"][0]:
                raise ValueError(f"tensor {name!r}: {len(data)} bytes do not match its shape and dtype")
            f.write(data)
    os.replace(tmp, path)


def _pick(names, tensor, path):
    if tensor is not None:
        if tensor not in names:
            raise KeyError(f"{path} has no tensor named {tensor!r}; it has: {', '.join(sorted(names)) or 'none'}")
        return tensor
    if len(names) != 1:
        raise KeyError(f"{path} holds {len(names)} tensors; name one with --tensor: {', '.join(sorted(names))}")
    return next(iter(names))


def load_weights(path, tensor=None):
    """Load one 2-D tensor as float32; returns (name, array). ``tensor`` names it in .npz/.safetensors."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no such weight file: {path}")
    suffix = path.suffix.lower()
    if suffix not in (".npy", ".npz", ".safetensors"):
        raise ValueError(f"{path}: unsupported weight file type {suffix!r} (use .npy, .npz or .safetensors)")
    if suffix == ".npy" and tensor is not None:
        raise ValueError(f"{path}: a .npy file holds one tensor; --tensor does not apply")
    ckpt = open_checkpoint(path)
    name = _pick(ckpt.tensors, tensor, path)
    info = ckpt.tensors[name]
    if suffix == ".safetensors" and info.numpy_dtype is None:
        raise ValueError(f"{path}: tensor {name!r} has unsupported dtype {info.dtype}")
    if len(info.shape) != 2:
        raise ValueError(f"{path}: tensor {name!r} has shape {tuple(info.shape)}; a weight matrix must be 2-D (M, K)")
    return name, np.asarray(ckpt.read(name)).astype(np.float32)
