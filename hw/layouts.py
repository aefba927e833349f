"""Configuration and stream payloads shared by the blocks of the DECA pipeline.

Bit layouts follow ``deca.golden.format``; every field is listed LSB first, which is also how it
appears in the flat ``*__payload`` ports of the generated Verilog.
"""

from amaranth.hdl import unsigned
from amaranth.lib import data, enum, wiring
from amaranth.lib.wiring import In, Out

from deca.golden.format import LUT_ENTRIES, TILE_ELEMS

from .params import LANES_PER_LUT

BF16 = unsigned(16)
SCALE_BLOCK_BITS = 512  # the largest scale stream: 32 BF16 scales (g = 16)


class ScaleFormat(enum.Enum, shape=2):
    NONE = 0
    BF16 = 1
    E8M0 = 2
    E4M3 = 3


class ScaleGroup(enum.Enum, shape=1):
    G32 = 0
    G16 = 1


#: Runtime encoding of each ``ScaleFormat`` from the golden format's names.
SCALE_FORMAT_OF = {None: ScaleFormat.NONE, "bf16": ScaleFormat.BF16, "e8m0": ScaleFormat.E8M0,
                   "e4m3": ScaleFormat.E4M3}


def config_fields(config):
    """The runtime configuration of a golden ``TileConfig``: {q, sparse, scale_format, scale_group},
    the values of ``ModeSignature``'s members (and, upper-cased, of the CONFIG register's fields)."""
    return {"q": config.q_bits, "sparse": int(config.sparse), "scale_format": SCALE_FORMAT_OF[config.scale_format],
            "scale_group": ScaleGroup.G16 if config.scale_group == 16 else ScaleGroup.G32}


#: The kernel's compression mode as the blocks see it (golden TileConfig; ``config_fields``).
MODE_MEMBERS = {"q": Out(5), "sparse": Out(1), "scale_format": Out(ScaleFormat), "scale_group": Out(ScaleGroup)}


class ModeSignature(wiring.Signature):
    """The compression mode, as its source (the PE's registers) drives it: code width ``q`` (1..8 or
    16), ``sparse``, ``scale_format`` and ``scale_group``; held steady while tiles flow."""

    def __init__(self):
        super().__init__(MODE_MEMBERS)


class ConfigSignature(wiring.Signature):
    """Runtime configuration as its source (the PE's registers) drives it: the mode
    (``MODE_MEMBERS``) and the LUT port; blocks take ``In(ConfigSignature())``.

    A LUT write (``lut_we``) stores logical entry ``lut_addr`` in every replica the current ``q``
    uses, so write ``q`` before the LUT; ``lut_rdata`` is the entry at the ``lut_addr`` of the cycle
    before (0 for entries the current ``q`` cannot hold), so that the LUT can be saved and restored
    on a context switch.
    """

    def __init__(self):
        super().__init__({
            **MODE_MEMBERS,
            "lut_we": Out(1),
            "lut_addr": Out(range(LUT_ENTRIES)),
            "lut_data": Out(BF16),
            "lut_rdata": In(BF16),
        })


def physical_lanes(W, L):
    """Dequantization lanes built in hardware: the widest Lq of any Q, never more than W."""
    return min(max(LANES_PER_LUT.values()) * L, W)


def value_beat_bits(W, L):
    """Width of one value-stream beat: what the widest Lq of the widest Q consumes per cycle."""
    return physical_lanes(W, L) * 16


def sqq_row_bytes(W, L):
    """An SQQ row: a line, or a value beat where that is wider."""
    return max(LINE_BYTES, value_beat_bits(W, L) // 8)


def tile_layout():
    """One beat per tile into the window unit: the tile's bitmask (ignored in dense mode)."""
    return data.StructLayout({"mask": TILE_ELEMS})


def value_beat_layout(W, L):
    """A piece of a tile's value stream: ``nbytes`` valid bytes, stream byte 0 in bits 7..0.

    A tile's stream may be cut into beats anywhere; only full beats sustain the full rate.
    """
    bits = value_beat_bits(W, L)
    return data.StructLayout({"data": bits, "nbytes": range(bits // 8 + 1)})


def scale_beat_layout():
    """One beat per tile when scaling: the tile's scale stream, byte 0 in bits 7..0."""
    return data.StructLayout({"data": SCALE_BLOCK_BITS})


def vop_layout(W):
    """A vOp as the window unit hands it on: its mask bits, window and expansion indices."""
    return data.StructLayout({
        "mask": W,
        "wnd": range(W + 1),
        "prefix": data.ArrayLayout(range(W), W),
        "index": range(TILE_ELEMS // W),
        "last": 1,
    })


def _chunk_fields(W):
    return {
        "data": data.ArrayLayout(BF16, W),
        "mask": W,
        "index": range(TILE_ELEMS // W),
        "last": 1,
    }


def chunk_layout(W):
    """W BF16 values with their mask bits and place in the tile (the DD register)."""
    return data.StructLayout(_chunk_fields(W))


def sd_layout(W):
    """The SD register: the window's dequantized values, packed, with the vOp's expansion indices."""
    return data.StructLayout({**_chunk_fields(W), "prefix": data.ArrayLayout(range(W), W)})


def out_layout(W):
    """An output chunk: elements [index*W, index*W + W) of the tile; ``last`` ends the tile."""
    return data.StructLayout({"data": data.ArrayLayout(BF16, W), "last": 1})


# The complete PE's ports ------------------------------------------------------------------------

LINE_BYTES = 64  # memory line, and one row of a decompressed tile (32 BF16)
LEN_BITS = 16  # byte length of a stream in a TEPL request


class ErrorReason(enum.Enum, shape=4):
    """Why a TEPL completed with an error (checked in this order; the first that applies wins)."""
    NONE = 0
    CONFIG = 1  #: the CONFIG register holds a Q that is not 1..8 or 16
    ADDR_WRAP = 2  #: address + length of a stream passes the end of the address space
    MASK_LEN = 3  #: mask length is not 64 in sparse mode or 0 in dense mode
    SCALE_LEN = 4  #: scale length is not 512/g times the scale size (0 without scaling)
    VALUE_LEN = 5  #: value length is not ceil(popcount(mask) * Q / 8) (512 * Q / 8 when dense)


class Stream(enum.Enum, shape=2):
    """The three streams of a compressed tile, in the order a loader requests their lines."""
    MASK = 0
    SCALE = 1
    VALUE = 2


def tepl_request_layout(addr_bits, id_bits):
    """A TEPL's metadata: byte address and length of each stream, and the core's request id."""
    return data.StructLayout({
        "val_addr": addr_bits, "val_len": LEN_BITS,
        "mask_addr": addr_bits, "mask_len": LEN_BITS,
        "scale_addr": addr_bits, "scale_len": LEN_BITS,
        "id": id_bits,
    })


def stream_fields(request):
    """{Stream: (address, length)} of a TEPL request (a ``tepl_request_layout`` view)."""
    return {Stream.MASK: (request.mask_addr, request.mask_len), Stream.SCALE: (request.scale_addr, request.scale_len),
            Stream.VALUE: (request.val_addr, request.val_len)}


def tepl_response_layout(id_bits):
    """One beat of a completion: tile row ``row`` (32 BF16, element c in bits 16c+15..16c), or, with
    ``error``, a single beat without data that carries the reason."""
    return data.StructLayout({
        "data": LINE_BYTES * 8,
        "id": id_bits,
        "row": range(16),
        "last": 1,
        "error": 1,
        "reason": ErrorReason,
    })


def mem_request_layout(addr_bits, tag_bits):
    """A 64-byte line read: ``addr`` is the line's byte address (low 6 bits zero)."""
    return data.StructLayout({"addr": addr_bits, "tag": tag_bits})


def mem_response_layout(tag_bits):
    """A line read's data (address byte a at bits 8(a mod 64)+7..8(a mod 64)) with its request's tag."""
    return data.StructLayout({"data": LINE_BYTES * 8, "tag": tag_bits})


def prefetch_layout(addr_bits):
    """A line prefetch: the line's byte address (low 6 bits zero); there is no response."""
    return data.StructLayout({"addr": addr_bits})
