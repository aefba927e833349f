"""What the testbench asks of the PE: requests (a TEPL's metadata and the tile or error it must
produce), batches of them over a memory image, broken metadata, and the test matrices of every
scheme, codebook width and density."""

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from deca.golden import SCHEMES, compress
from deca.golden.format import TILE_COLS, TILE_ROWS, TileConfig
from deca.golden.matrix import TILE_META_DTYPE, decompress_tiles
from deca.hw.layouts import ErrorReason

#: Default first address of a memory image: not line-aligned, so streams straddle lines.
DEFAULT_BASE = 0x1_2345_6789
META_FIELDS = TILE_META_DTYPE.names
#: Bytes of a tile row: element c at bytes 2c, 2c+1 (an int: bits 16c+15..16c).
ROW_BYTES = 2 * TILE_COLS

DENSITIES = (1, 0.5, 0.3, 0.2, 0.1, 0.05, 0)
#: Codebook sizes that give the code widths no built-in scheme uses (Q = 3, 5, 6, 7) and Q = 8
#: with a partly used LUT.
CODEBOOK_SIZES = (5, 20, 50, 100, 200)
#: Nearly dense BF16 runs the unpacker at its full rate, across short last beats of tiles.
EXTRA_DENSITIES = {"bf16": (0.97,)}


class TileRows(Sequence):
    """A golden tile: its 16 rows as a (16, 64) uint8 array, ``data`` (for comparing many tiles at
    once), and as items the rows as ints (element c at bits 16c+15..16c), made when first read."""

    __slots__ = ("data", "_ints")

    def __init__(self, data):
        self.data, self._ints = data, None

    def __len__(self):
        return len(self.data)

    def __getitem__(self, index):
        if self._ints is None:
            self._ints = tuple(int.from_bytes(row.tobytes(), "little") for row in self.data)
        return self._ints[index]


@dataclass(eq=False)
class Request:
    """One TEPL: its metadata, what it must produce, and a name for messages.

    ``expected``: the 16 rows of the decompressed tile as ints (element c at bits 16c+15..16c; a
    ``TileRows`` or a tuple), or the ErrorReason it must fail with. ``mask``: the tile's bitmask
    bytes (empty when dense).
    """

    meta: dict
    expected: Sequence | ErrorReason
    label: str
    mask: bytes = b""
    index: int = 0  # place in the core's request list, set by CoreModel
    payload: int = 0  # tepl_req payload without the id, set by Harness


@dataclass
class Batch:
    """What one Harness run needs: the memory image and the requests on it."""

    label: str
    config: TileConfig
    image: np.ndarray
    base: int
    requests: list


def tile_batch(cm, label, base=DEFAULT_BASE, align=1):
    """Every tile of a CompressedMatrix in order, each expecting the golden tile (all decoded at once)."""
    image, meta = cm.memory_image(base, align)
    data = decompress_tiles(cm).astype("<u2").view(np.uint8).reshape(cm.num_tiles, TILE_ROWS, ROW_BYTES)
    masks = [b""] * cm.num_tiles if cm.masks is None else [m.tobytes() for m in cm.masks]
    metas = [dict(zip(META_FIELDS, values)) for values in zip(*(meta[name].tolist() for name in META_FIELDS))]
    return Batch(label, cm.config, image, base,
                 [Request(metas[t], TileRows(data[t]), f"{label} tile {t}", masks[t]) for t in range(cm.num_tiles)])


def malformed_requests(batch, addr_bits=48):
    """Requests that must fail, one per way to get each ErrorReason (but CONFIG) wrong.

    Each is tile 0's metadata with one thing broken; broken streams still point into the image
    (the PE reads the mask to check the value length), except where the address itself is the fault.
    """
    good, cfg, top = batch.requests[0].meta, batch.config, 1 << addr_bits
    cases = [(ErrorReason.ADDR_WRAP, "value stream wraps", {"val_addr": top - 1, "val_len": max(good["val_len"], 2)})]
    if cfg.sparse:
        cases += [(ErrorReason.ADDR_WRAP, "mask wraps", {"mask_addr": top - 32}),
                  (ErrorReason.MASK_LEN, "32-byte mask", {"mask_len": 32}),
                  (ErrorReason.MASK_LEN, "no mask in sparse mode", {"mask_len": 0, "mask_addr": 0})]
    else:
        cases.append((ErrorReason.MASK_LEN, "mask in dense mode", {"mask_len": 64, "mask_addr": good["val_addr"]}))
    if cfg.scale_format:
        cases += [(ErrorReason.ADDR_WRAP, "scales wrap", {"scale_addr": top - 1}),
                  (ErrorReason.SCALE_LEN, "one scale byte short", {"scale_len": good["scale_len"] - 1}),
                  (ErrorReason.SCALE_LEN, "no scales", {"scale_len": 0, "scale_addr": 0})]
    else:
        cases.append((ErrorReason.SCALE_LEN, "scales without scaling",
                      {"scale_len": 16, "scale_addr": good["val_addr"]}))
    # An empty value stream has address 0: the long case points it at the mask instead.
    cases.append((ErrorReason.VALUE_LEN, "one value byte too many",
                  {"val_len": good["val_len"] + 1, "val_addr": good["val_addr"] or good["mask_addr"]}))
    if good["val_len"]:
        cases.append((ErrorReason.VALUE_LEN, "one value byte short", {"val_len": good["val_len"] - 1}))
    return [Request({**good, **change}, reason, f"{batch.label} {reason.name}: {what}")
            for reason, what, change in cases]


def workloads(rng, schemes=None, densities=DENSITIES, shape=(32, 64), codebook_sizes=CODEBOOK_SIZES,
              extra_densities=EXTRA_DENSITIES):
    """[(label, CompressedMatrix)] for each scheme (default all; "codebook" once per codebook size) and density.

    Labels read ``<scheme>[<codebook size>]@<density>``.
    """
    names = list(SCHEMES) if schemes is None else list(schemes)
    unknown = set(names) - set(SCHEMES)
    if unknown:
        raise ValueError(f"unknown schemes {sorted(unknown)}; choose from {', '.join(SCHEMES)}")
    kinds = [(name, None) for name in names if name != "codebook"]
    if "codebook" in names:
        # Multiples of 1/64 below 2 in magnitude are exact and distinct in BF16.
        kinds += [("codebook", rng.choice(np.arange(-128, 128), n, replace=False) / 64) for n in codebook_sizes]
    out = []
    for name, codebook in kinds:
        for density in (*densities, *extra_densities.get(name, ())):
            # Heavy-tailed weights with a few columns far larger than the rest exercise the scale range.
            w = (rng.standard_t(3, size=shape).astype(np.float32)
                 * np.exp(rng.normal(0, 2, size=shape[1])).astype(np.float32))
            cm = compress(w, name, density=density, codebook=codebook)
            out.append((f"{name}{'' if codebook is None else len(codebook)}@{density}", cm))
    return out
