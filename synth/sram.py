"""SRAM macros for the design's memories: a macro model calibrated on FakeRAM liberties, and the rule
that decides which memories become macros.

The model. A macro of ``words`` x ``width`` bits with ``ports`` ports has the area
``ports * per_port + bits * per_bit + words * per_word`` (µm²): bit cells, row periphery (word-line
drivers, one per word) and a fixed periphery per port (decoder, sense amplifiers, IO, control).
The three terms are fitted by least squares on the FakeRAM macros (all single-port), which they
fit exactly when there are three; a two-port memory pays the fixed periphery twice (an
assumption: the FakeRAM set has no two-port macro). Access time (clock to read data), setup
time, leakage and energy per access are the FakeRAM values (all three macros give the same ones).

The rule. A memory of at least ``min_bits`` bits becomes a macro; a smaller one stays flip-flops,
as a register file: a few words of flops and their read mux cost less than a macro's fixed
periphery. Read ports are physical: a memory with R read-only ports and W write ports is one macro
of R + W ports, except that a read port on the same address nets as a write port is that port's
read side (one read-write port). The L LUT replicas are separate memories, so they stay L macros
(Yosys would merge their identical flip-flops).
"""

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from .liberty import LibertyError, read

PDK = Path(__file__).with_name("pdk") / "asap7"
FAKERAM = tuple(sorted(PDK.glob("fakeram7_*.lib.gz")))

#: A memory below this many bits stays flip-flops (the smallest FakeRAM-class macro is 1 Kbit).
MIN_MACRO_BITS = 1024


class MacroError(ValueError):
    """A memory the macro model cannot size."""


@dataclass(frozen=True)
class MacroModel:
    per_port: float       # µm² of fixed periphery per port
    per_bit: float        # µm² per bit cell
    per_word: float       # µm² of row periphery per word
    access_ps: float      # clock to read data
    setup_ps: float       # address/data/enable setup before the clock
    leakage_uw: float     # per macro
    energy_fj: float      # per access (the clock pin's internal energy, one rising edge)
    input_cap_ff: float   # the largest data/address/control pin capacitance
    calibration: tuple    # (name, words, width, liberty area, model area)
    min_bits: int = MIN_MACRO_BITS

    def area(self, words, width, ports=1):
        if words < 1 or width < 1 or ports < 1:
            raise MacroError(f"a memory of {words} x {width} bits with {ports} ports cannot be sized")
        return ports * self.per_port + words * width * self.per_bit + words * self.per_word

    def is_macro(self, words, width):
        return words * width >= self.min_bits

    def to_dict(self):
        """As stored in the cache's JSON (tuples become lists, so a stored result compares equal)."""
        return json.loads(json.dumps(asdict(self)))


def fit(paths=FAKERAM, min_bits=MIN_MACRO_BITS):
    """Fit the macro model on the memory cells (with a ``memory()`` group) of the liberty files."""
    if min_bits < 1:
        raise MacroError(f"the smallest macro must hold at least one bit, got {min_bits}")
    lib = read(paths)
    macros = [c for c in lib.cells.values() if c.memory]
    if len({(c.memory["address_width"], c.memory["word_width"]) for c in macros}) < 3:
        raise LibertyError("the SRAM macro model needs three macros of different shapes (cells with a memory() "
                           f"group), found {len(macros)} in " + ", ".join(map(str, paths)))
    shapes = [(c.name, 2 ** c.memory["address_width"], c.memory["word_width"], c.area) for c in macros]
    a = np.array([[1.0, words * width, words] for _, words, width, _ in shapes])
    (per_port, per_bit, per_word), *_ = np.linalg.lstsq(a, np.array([s[3] for s in shapes]), rcond=None)

    def worst(kind, pins):
        return max(t.lookup() for c in macros for p, pin in c.pins.items() if p.split("[")[0] in pins
                   for arc in pin.arcs if arc.kind == kind for t in arc.delay.values())

    clk = [e["rise"].lookup() for c in macros for pin in c.pins.values() if pin.clock for _, _, e in pin.energy]
    model = MacroModel(per_port=float(per_port), per_bit=float(per_bit), per_word=float(per_word),
                       access_ps=worst("rising_edge", {"rd_out"}),
                       setup_ps=worst("setup_rising", {"addr_in", "wd_in", "we_in", "ce_in"}),
                       leakage_uw=max(c.leakage for c in macros) / 1e6, energy_fj=max(clk, default=0.0),
                       input_cap_ff=max(pin.capacitance for c in macros for pin in c.pins.values()
                                        if pin.direction == "input" and not pin.clock),
                       calibration=(), min_bits=min_bits)
    calibration = tuple((name, words, width, area, round(model.area(words, width), 3))
                        for name, words, width, area in shapes)
    return MacroModel(**{**asdict(model), "calibration": calibration})


def ports(read_addrs, write_addrs):
    """Physical ports of a memory: write ports, plus read ports not sharing a write port's address."""
    writes = {tuple(a) for a in write_addrs}
    return len(write_addrs) + sum(tuple(a) not in writes for a in read_addrs)
