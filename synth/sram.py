"""SRAM macros: a model calibrated on real macros for each port configuration they have, and what a
memory of the design would cost as macros.

The model. A macro of ``words`` x ``width`` bits of one port configuration (``1rw``: one read-write
port; ``1r1w``: a read port and a write port) has the area ``fixed + bits * per_bit + words *
per_word`` (µm²): the fixed periphery (decoder, sense amplifiers, IO, control), bit cells and row
periphery (word-line drivers, one per word). The three terms are fitted by least squares on the
macros of that configuration in the macro liberties, which must hold at least three shapes of it;
the vendored FakeRAM set has three single-port macros, so the fit is exact and ``fixed`` is its
intercept. A configuration without calibration macros has no model: the area of a 1R1W or
multi-port macro is never extrapolated from single-port ones. Access time (clock to read data),
setup time, leakage and energy per access are the worst of the macros' liberty values.

A macro's configuration is read from its liberty cell: the number of address buses (``addr``
in the pin name) is the number of ports, one bus ``1rw``, two ``1r1w``.
"""

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from .liberty import LibertyError, read

PDK = Path(__file__).with_name("pdk") / "asap7"
FAKERAM = tuple(sorted(PDK.glob("fakeram7_*.lib.gz")))

#: A memory below this many bits gets no macro candidate (the smallest FakeRAM-class macro is 1 Kbit).
MIN_MACRO_BITS = 1024
#: Port configurations by the number of address buses of the macro's liberty cell.
KINDS = {1: "1rw", 2: "1r1w"}


class MacroError(ValueError):
    """A memory the macro model cannot size."""


@dataclass(frozen=True)
class MacroModel:
    #: kind -> [fixed µm², µm² per bit, µm² per word], fitted on that kind's macros
    kinds: dict
    access_ps: float      # clock to read data
    setup_ps: float       # address/data/enable setup before the clock
    leakage_uw: float     # per macro
    energy_fj: float      # per access (the clock pin's internal energy, one rising edge)
    input_cap_ff: float   # the largest data/address/control pin capacitance
    calibration: tuple    # (name, kind, words, width, liberty area, model area)
    min_bits: int = MIN_MACRO_BITS

    def area(self, words, width, kind="1rw"):
        if words < 1 or width < 1:
            raise MacroError(f"a memory of {words} x {width} bits cannot be sized")
        if kind not in self.kinds:
            raise MacroError(f"no {kind} macro to calibrate on (the macro liberties have "
                             f"{', '.join(sorted(self.kinds)) or 'none'}); a port configuration is never extrapolated")
        fixed, per_bit, per_word = self.kinds[kind]
        return fixed + words * width * per_bit + words * per_word

    def to_dict(self):
        """As stored in the cache's JSON (tuples become lists, so a stored result compares equal)."""
        return json.loads(json.dumps(asdict(self)))


def kind_of(cell):
    """A macro cell's port configuration, by its address buses."""
    buses = {p.split("[")[0] for p, pin in cell.pins.items() if "addr" in p.lower() and pin.direction == "input"}
    if len(buses) not in KINDS:
        raise LibertyError(f"macro {cell.name}: {len(buses)} address buses, a port configuration the model does not "
                           "know (1rw: one, 1r1w: two)")
    return KINDS[len(buses)]


def fit(paths=FAKERAM, min_bits=MIN_MACRO_BITS):
    """Fit the macro model on the memory cells (with a ``memory()`` group) of the liberty files, one fit
    per port configuration; each configuration present needs three macros of different shapes."""
    if min_bits < 1:
        raise MacroError(f"the smallest macro must hold at least one bit, got {min_bits}")
    for path in paths:
        if not Path(path).is_file():
            raise LibertyError(f"macro liberty {path} does not exist")
    lib = read(paths)
    macros = [c for c in lib.cells.values() if c.memory]
    names = ", ".join(map(str, paths))
    by_kind = {}
    for c in macros:
        by_kind.setdefault(kind_of(c), []).append((c.name, 2 ** c.memory["address_width"], c.memory["word_width"],
                                                   c.area))
    if not by_kind:
        raise LibertyError(f"the SRAM macro model needs macros (cells with a memory() group), found none in {names}")
    kinds = {}
    for kind, shapes in sorted(by_kind.items()):
        if len({(words, width) for _, words, width, _ in shapes}) < 3:
            raise LibertyError(f"the SRAM macro model needs three {kind} macros of different shapes, found "
                               f"{len(shapes)} in {names}")
        a = np.array([[1.0, words * width, words] for _, words, width, _ in shapes])
        coef, *_ = np.linalg.lstsq(a, np.array([s[3] for s in shapes]), rcond=None)
        kinds[kind] = [float(x) for x in coef]

    def worst(kind, pins):
        return max(t.lookup() for c in macros for p, pin in c.pins.items() if any(n in p for n in pins)
                   for arc in pin.arcs if arc.kind == kind for t in arc.delay.values())

    clk = [e["rise"].lookup() for c in macros for pin in c.pins.values() if pin.clock for _, _, e in pin.energy]
    model = MacroModel(kinds=kinds, access_ps=worst("rising_edge", {"rd_out"}),
                       setup_ps=worst("setup_rising", {"addr_in", "wd_in", "we_in", "ce_in"}),
                       leakage_uw=max(c.leakage for c in macros) / 1e6, energy_fj=max(clk, default=0.0),
                       input_cap_ff=max(pin.capacitance for c in macros for pin in c.pins.values()
                                        if pin.direction == "input" and not pin.clock),
                       calibration=(), min_bits=min_bits)
    calibration = tuple((name, kind, words, width, area, round(model.area(words, width, kind), 3))
                        for kind, shapes in sorted(by_kind.items()) for name, words, width, area in shapes)
    return MacroModel(**{**asdict(model), "calibration": calibration})
