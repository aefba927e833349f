"""What a synthesis run reports per block, and the readers of Yosys's hierarchical ``stat -json``
that both flows (generic CMOS and standard cells) share."""

import hashlib
from dataclasses import dataclass

#: The one flip-flop cell left after legalization: ``stat -tech cmos`` prices no other kind, so
#: enables and resets become gates that ABC maps with the rest of the logic.
FF_CELL = "$_DFF_P_"

#: The mapped, hierarchical netlist the depth is computed from.
NETLIST = "netlist.blif"


@dataclass
class BlockStats:
    """Synthesis numbers of one block or of the whole design."""

    cells: dict          # cell type -> count
    flip_flops: int
    memory_bits: int     # before memories are mapped to flip-flops
    modules: list        # generated modules counted here
    transistors: int | None = None   # generic: stat -tech cmos estimate
    depth: int | None = None         # generic: gates on the longest combinational path
    area: float | None = None        # standard cells: µm², cells and macros
    macro_area: float = 0.0          # µm² of SRAM macros
    buffer_area: float = 0.0         # µm² of the fanout trees the timing added (deca.synth.sta)
    buffers: int = 0                 # their buffers
    macros: int = 0
    macro_bits: int = 0
    leakage_mw: float | None = None
    dynamic_mw: float | None = None
    vectorless_dynamic_mw: float | None = None   # the dynamic power at the vectorless activity
    path_ps: float = 0.0             # this block's share of the critical path

    @property
    def power_mw(self):
        return None if self.leakage_mw is None else self.leakage_mw + self.dynamic_mw

    @property
    def num_cells(self):
        return sum(self.cells.values())


def _strip(name):
    return name.removeprefix("\\")


def _module_stats(stat, key="estimated_num_transistors", number=int):
    """({module: (its own cells by type, its own ``key``: transistors or liberty area)}, {module:
    {submodule: instances}}) of a hierarchical ``stat -json``."""
    modules = {_strip(name): m for name, m in stat["modules"].items()}
    own, children = {}, {}
    for name, m in modules.items():
        by_type = {_strip(t): n for t, n in m["num_cells_by_type"].items()}
        children[name] = {t: n for t, n in by_type.items() if t in modules}
        # A module's number includes its submodules'.
        value = number(m.get(key, 0)) - sum(number(modules[c].get(key, 0)) * n for c, n in children[name].items())
        own[name] = ({t: n for t, n in by_type.items() if t not in modules}, value)
    return own, children


def _instances(top, children):
    """How many times the design holds each module."""
    count, order = {top: 1}, [top]
    for name in order:
        for child, n in children[name].items():
            if child not in count:
                order.append(child)
            count[child] = count.get(child, 0) + count[name] * n
    return count


def _sha256(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()
