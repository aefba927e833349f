"""Which storage each memory of the design becomes: standard cells (flip-flops and their read muxes,
mapped to the library like the rest of the design) or SRAM macros, by cost.

Both candidates are costed for every memory. The standard-cell one is measured: the memory alone,
with registers on its ports, synthesized to the library (``deca.synth.cells.measure_memory``); its
area, and its register-to-register time through the read mux as the access time. The macro one
comes from the macro model (``deca.synth.sram``), and exists only where a calibrated macro can
hold the memory: one write port; every read port synchronous (a macro reads on the clock edge);
one read port on the write port's address is a ``1rw`` macro, otherwise each read port gets a
``1r1w`` macro of its own that every write goes to (replication, counted in the area). ``auto``
keeps the cheaper candidate that fits the clock period; ``cells`` and ``macros`` force a kind
where it exists.
"""

from dataclasses import asdict, dataclass

MODES = ("auto", "cells", "macros")
DEFAULT_MODE = "auto"
CELLS = "cells"


def rtlil_statements(rtlil):
    """The words of each statement (non-empty line) of an RTLIL file."""
    with open(rtlil) as f:
        for line in f:
            words = line.split()
            if words:
                yield words


def rtlil_wire(words):
    """(name, (lowest index, width)) of the words of an RTLIL ``wire`` statement."""
    width = int(words[words.index("width") + 1]) if "width" in words else 1
    lsb = int(words[words.index("offset") + 1]) if "offset" in words else 0
    return words[-1].removeprefix("\\"), (lsb, width)


def rtlil_cells(rtlil, types=("$mem_v2",)):
    """Each cell of one of ``types`` in an RTLIL file: (module, cell type, cell name, {parameter:
    value}, {port: signal text}, {wire of the module: (lowest index, width)})."""
    module, wires, cell, params, conns = None, {}, None, {}, {}
    for words in rtlil_statements(rtlil):
        if words[0] == "module":
            module, wires = words[1].removeprefix("\\"), {}
        elif words[0] == "wire":
            name, span = rtlil_wire(words)
            wires[name] = span
        elif words[0] == "cell":
            cell, params, conns = (words[1], words[2].removeprefix("\\")), {}, {}
        elif cell and cell[0] in types and words[0] == "parameter" and len(words) > 2:
            params[words[1][1:]] = words[2]
        elif cell and cell[0] in types and words[0] == "connect":
            conns[words[1][1:]] = " ".join(words[2:])
        elif words[0] == "end" and cell:
            if cell[0] in types:
                yield module, cell[0], cell[1], params, conns, wires
            cell = None


@dataclass(frozen=True)
class Memory:
    """One $mem_v2 of the design before mapping."""

    module: str
    name: str
    words: int
    width: int
    sync_reads: tuple     # per read port: read on the clock edge
    writes: int
    shared_address: bool  # one read port on the write port's address nets (a read-write port)

    @property
    def bits(self):
        return self.words * self.width

    @property
    def shape(self):
        """What the cost depends on."""
        return (self.words, self.width, self.sync_reads, self.writes, self.shared_address)

    @property
    def ports(self):
        if self.shared_address:
            return "1RW"
        return f"{len(self.sync_reads)}R{self.writes}W"


@dataclass(frozen=True)
class Candidate:
    kind: str           # "cells" or the macro configuration ("1rw", "1r1w")
    copies: int         # macros (replication for read ports); 1 for cells
    area: float         # µm², all copies
    access_ps: float    # cells: register to register through the read mux; macro: clock to data
    period_ps: float    # the cycle it needs: cells, access_ps; a macro, its setup plus its access

    def fits(self, period_ps):
        return self.period_ps <= period_ps


def macro_candidate(memory, model):
    """(Candidate, None) or (None, why there is no macro for ``memory``)."""
    if memory.bits < model.min_bits:
        return None, f"{memory.bits} bits, below the smallest macro ({model.min_bits})"
    if memory.writes != 1:
        return None, f"{memory.writes} write ports (a macro has one)"
    asynchronous = [i for i, sync in enumerate(memory.sync_reads) if not sync]
    if asynchronous:
        return None, f"read port {asynchronous[0]} is asynchronous (a macro reads on the clock edge)"
    kind, copies = ("1rw", 1) if memory.shared_address else ("1r1w", len(memory.sync_reads))
    if kind not in model.kinds:
        return None, (f"no {kind} macro calibrated (macro liberties have {', '.join(sorted(model.kinds))}); "
                      "not extrapolated")
    return Candidate(kind, copies, copies * model.area(memory.words, memory.width, kind), model.access_ps,
                     model.setup_ps + model.access_ps), None


def choose(memory, cells, macro, why_not, mode, period_ps):
    """The chosen Candidate and why. ``cells``: the measured standard-cell Candidate; ``macro`` and
    ``why_not``: ``macro_candidate``'s answer."""
    if mode not in MODES:
        raise ValueError(f"--memories must be one of {', '.join(MODES)}, got {mode!r}")
    if mode == "cells" or macro is None:
        return cells, "--memories cells" if mode == "cells" else f"no macro: {why_not}"
    replicated = f" ({macro.copies} copies, one per read port)" if macro.copies > 1 else ""
    if mode == "macros":
        return macro, "--memories macros" + replicated
    if macro.fits(period_ps) != cells.fits(period_ps):
        chosen = macro if macro.fits(period_ps) else cells
        other = cells if chosen is macro else macro
        return chosen, f"the other needs {other.period_ps:.0f} ps > {period_ps:g} ps" + replicated * (chosen is macro)
    chosen = macro if macro.area < cells.area else cells
    note = "" if cells.fits(period_ps) else f"; neither fits {period_ps:g} ps"
    return chosen, (f"cells {cells.area:,.0f} µm² {'<' if chosen is cells else '>'} macro {macro.area:,.0f} µm²"
                    + replicated + note)


def record(memory, count, chosen, reason, cells, macro):
    """One line of the memory table (JSON-ready)."""
    return {**{k: v for k, v in asdict(memory).items() if k != "sync_reads"}, "reads": len(memory.sync_reads),
            "sync_reads": list(memory.sync_reads), "ports": memory.ports, "instances": count, "kind": chosen.kind,
            "copies": chosen.copies, "area": chosen.area, "access_ps": chosen.access_ps, "reason": reason,
            "cells_area": cells.area, "cells_access_ps": cells.access_ps,
            "macro_area": macro.area if macro else None}
