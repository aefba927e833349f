"""The PE's register map: one table that the hardware decodes and the documentation prints.

The ``cfg_`` port is a plain synchronous register bus: ``cfg__addr`` selects a 32-bit register,
``cfg__we`` writes ``cfg__wdata`` into it, and ``cfg__rdata`` shows the register ``cfg__addr``
selected ``READ_LATENCY`` cycles earlier. The bus enters registers first: a write takes effect at
the second clock edge (a TEPL request presented the cycle after it sees it), and a read that follows
a write sees it. Reads have no side effects. Write CONFIG and the LUT only while STATUS.BUSY is 0: tiles in flight use the configuration
as it is.
"""

from dataclasses import dataclass

from deca.golden.format import LUT_ENTRIES

from .params import LOADERS

ADDR_BITS = 6
DATA_BITS = 32
#: Cycles from ``cfg__addr`` to its register on ``cfg__rdata``: the address's two registers (the
#: second gives LUT_DATA's synchronous read of the LUT its cycle), then ``rdata``'s.
READ_LATENCY = 3
#: PREFETCH.DEGREE's reset value, and the benches' default: 8 tiles ahead, not the paper's 5, as at
#: 5% density the paper's let the TMUL wait for lines asked for too late (docs/measuring.md).
PREFETCH_DEGREE = 8


@dataclass(frozen=True)
class Field:
    name: str
    lsb: int
    width: int
    doc: str
    reset: int = 0


@dataclass(frozen=True)
class Register:
    name: str
    addr: int
    access: str  # RW, RO, WO (reads as 0), or W1C (a write clears it)
    doc: str
    fields: tuple = ()


#: Performance counters, 32 bits, wrapping; CONTROL.CLEAR_COUNTERS zeroes them all.
COUNTERS = (
    ("BUSY_CYCLES", "cycles with at least one accepted TEPL not yet completed"),
    ("VOPS", "vOps that entered the dequantization stage"),
    ("BUBBLE_CYCLES", "extra dequantization cycles of vOps whose window exceeds Lq (bubbles)"),
    ("STARVE_CYCLES", "cycles the dequantization stage waited for memory: a tile was pending but its "
                      "mask, codes or window were not there yet"),
    ("BACKPRESSURE_CYCLES", "cycles a completion beat waited on the core (tepl_resp valid, not ready)"),
    ("TILES", "tiles delivered (completions without error)"),
    ("ERRORS", "completions with an error"),
    ("SQUASHES", "cycles with the squash input high"),
    ("LINES_DEMANDED", "line reads issued on mem_req"),
    ("LINES_PREFETCHED", "line prefetches issued on pf_req"),
)
COUNTER_BASE = 0x10


def registers(W=0, L=0, tag_bits=0, sqq_log2=0, id_bits=0, loaders=LOADERS):
    """The register map; the PARAMS reset values describe the generated design."""
    regs = [
        Register("PARAMS", 0x00, "RO", "what this PE was generated with", (
            Field("W", 0, 8, "elements per vOp", W),
            Field("L", 8, 8, "big LUTs", L),
            Field("TAG_BITS", 16, 4, "log2 of the tag-table entries per loader", tag_bits),
            Field("SQQ_LOG2", 20, 4, "log2 of the SQQ bytes per loader", sqq_log2),
            Field("ID_BITS", 24, 5, "bits of a TEPL request id", id_bits),
            Field("LOADERS", 29, 3, "loaders, each with its TOut buffer", loaders),
        )),
        Register("CONFIG", 0x01, "RW", "the kernel's compression scheme (golden TileConfig)", (
            Field("Q", 0, 5, "code width: 1..8, or 16 for raw BF16", 8),
            Field("SPARSE", 5, 1, "1: tiles have a 64-byte bitmask"),
            Field("SCALE_FORMAT", 6, 2, "0 none, 1 BF16, 2 E8M0, 3 E4M3"),
            Field("SCALE_GROUP", 8, 1, "0: g = 32, 1: g = 16"),
        )),
        Register("PREFETCH", 0x02, "RW", "prefetcher", (
            Field("DEGREE", 0, 4, "tiles ahead to prefetch, 0 turns prefetching off", PREFETCH_DEGREE),
        )),
        Register("LUT_INDEX", 0x03, "RW", "logical LUT entry that LUT_DATA reads and writes", (
            Field("INDEX", 0, 8, f"entry 0..{LUT_ENTRIES - 1}"),
        )),
        Register("LUT_DATA", 0x04, "RW", "a write stores entry LUT_INDEX in every replica the configured Q "
                 "uses (write CONFIG first) and increments LUT_INDEX; a read returns the entry", (
                     Field("VALUE", 0, 16, "BF16 bit pattern"),
                 )),
        Register("STATUS", 0x05, "RO", "activity", (
            Field("BUSY", 0, 1, "some TEPL is in flight"),
            Field("LOADERS", 1, loaders, "bit i: loader i holds a TEPL"),
        )),
        Register("ERROR", 0x06, "W1C", "the most recent error completion; a write clears it", (
            Field("VALID", 0, 1, "an error was recorded"),
            Field("REASON", 4, 4, "ErrorReason code (see the error table)"),
            Field("ID", 16, 16, "request id of the failed TEPL"),
        )),
        Register("CONTROL", 0x07, "WO", "commands", (
            Field("CLEAR_COUNTERS", 0, 1, "write 1 to zero every performance counter"),
        )),
    ]
    regs += [Register(name, COUNTER_BASE + i, "RO", doc, (Field("COUNT", 0, 32, "wrapping count"),))
             for i, (name, doc) in enumerate(COUNTERS)]
    return regs


REGISTER_ADDR = {r.name: r.addr for r in registers()}


def field_value(register, **fields):
    """The 32-bit word that writes ``fields`` (by name) into ``register`` (a name)."""
    reg = next(r for r in registers() if r.name == register)
    known = {f.name: f for f in reg.fields}
    word = 0
    for name, value in fields.items():
        if name not in known:
            raise KeyError(f"register {register} has no field {name}")
        f = known[name]
        if not 0 <= int(value) < 1 << f.width:
            raise ValueError(f"{register}.{name} = {value} does not fit in {f.width} bits")
        word |= int(value) << f.lsb
    return word


def field_of(register, name, word):
    """Field ``name`` of ``register`` taken out of a 32-bit ``word``."""
    f = next(f for r in registers() if r.name == register for f in r.fields if f.name == name)
    return word >> f.lsb & ((1 << f.width) - 1)


def register_table(regs):
    """Markdown table of the register map."""
    lines = ["| addr | register | access | field | bits | reset | meaning |", "|---|---|---|---|---|---|---|"]
    for r in regs:
        lines.append(f"| 0x{r.addr:02x} | {r.name} | {r.access} | | | | {r.doc} |")
        for f in r.fields:
            bits = f"{f.lsb}" if f.width == 1 else f"{f.lsb + f.width - 1}:{f.lsb}"
            lines.append(f"| | | | {f.name} | {bits} | {f.reset} | {f.doc} |")
    return "\n".join(lines) + "\n"
