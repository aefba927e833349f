"""The standard-cell flow: liberty cells (ASAP7 by default, or a user's files) with SRAM macros.

The memories the macro rule picks (``deca.synth.sram``) stay ``$mem_v2`` cells; the others become
word registers with a one-hot read (``MEMORY_CELLS``; ``memory_map`` takes those it declines);
registers map with ``dfflibmap``, logic with ``abc -liberty``; ``stat -liberty`` gives each module's cell area, the macro model each macro's. Timing and
power come from ``deca.synth.sta`` on the mapped netlist.

Clock gating is timing-aware: the design is mapped with a gate on every bank of flip-flops sharing
an enable, then mapped again from the same gates and flip-flops (``PREGATE``) without the gates
whose enable check the mapped netlist's timing finds late, until none is (``GATING_ROUNDS``).
"""

import fnmatch
import functools
import gzip
import hashlib
import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from deca.toolchain import ToolError

from . import activity, memories, signoff, sram, sta
from .blocks import BLOCK_NAMES, block_of
from .liberty import LibertyError
from .liberty import read as read_liberty
from .netlist import CELL_NAME, NetlistError, read_blif
from .stats import FF_CELL, NETLIST, BlockStats, _instances, _module_stats, _sha256
from .tools import run_yosys, yosys_version

#: The vendored ASAP7 standard cells (7.5-track RVT, typical corner, NLDM; see synth/pdk/asap7).
ASAP7_LIBERTIES = tuple(sorted(sram.PDK.glob("asap7sc7p5t_*.lib.gz")))
#: ASAP7 cells the mapping may not use: OpenROAD-flow-scripts' list for the platform. The fractional
#: drive strengths (``xp33``, ``x1p5``...) are too weak for the loads placement will add (left in,
#: ABC builds chains of 40-50 ps ``HB1xp67`` hold buffers on fanouts), scan flip-flops are not what
#: the RTL asks for. Clock gates are the library's only for ``clockgate`` (never for ABC or dfflibmap).
ASAP7_DONT_USE = ("*x1p*_ASAP7*", "*xp*_ASAP7*", "SDF*")
TECHNOLOGIES = ("asap7", "generic")
#: The paper's clock (section 7.4), where power is computed.
POWER_GHZ = 2.5
#: ABC's delay target, below the paper's 400 ps period: ABC's own delay model reads paths shorter
#: than this flow's timing does, and asked for 400 ps it stops sizing paths timed here at 450 to
#: 520 ps. Measured on the W = 32, L = 8 expander and scaling stage: 524 -> 437 ps and 477 -> 396
#: ps for +0.4% and +0.2% area; 150 and 200 ps give the same netlists as 250 (ABC's fastest).
TARGET_PS = 250
#: ABC's timing constraints: each module's inputs driven by a small buffer, its outputs loaded with
#: about two gate inputs (fF). ABC maps one module at a time and does not see the loads outside it.
ABC_CONSTR = "abc.constr"
ABC_OUTPUT_LOAD_FF = 1.0
#: Toggles per cycle of every net when no simulation gives them (a common vectorless default).
DEFAULT_ACTIVITY = 0.1
#: Clock gating: the fewest flip-flops sharing one enable that get an integrated clock gate (0: no
#: gating). One gate costs about the area of half a flip-flop and its clock pin's energy, so a gate
#: on one or two flip-flops saves nothing.
DEFAULT_GATE_MIN_FLOPS = 8
GATING = ("on", "off")
#: Mappings at most, each without the clock gates the one before found late: a gate whose enable
#: cannot be set up before its clock pin's edge within the period (``PERIOD_PS``) is dropped, its
#: flip-flops keep their enable multiplexers (whose select has the whole period, less the setup).
GATING_ROUNDS = 6


@dataclass(frozen=True)
class Technology:
    """What the design is mapped to: ``generic`` CMOS gates, or liberty standard cells with SRAM
    macros (``asap7``: the vendored library; ``liberty``: the user's files)."""

    name: str
    liberties: tuple = ()
    macro_liberties: tuple = sram.FAKERAM
    min_macro_bits: int = sram.MIN_MACRO_BITS
    activity: float = DEFAULT_ACTIVITY
    dont_use: tuple = ()     # glob patterns of cells left out of the mapping and the buffer trees
    memories: str = memories.DEFAULT_MODE   # deca.synth.memories.MODES
    gate_min_flops: int = 0  # clock gating: the fewest flip-flops one gate serves; 0: no gating

    @property
    def cells(self):
        return self.name != "generic"


def technology(name="asap7", liberties=None, min_macro_bits=sram.MIN_MACRO_BITS, memory_mode=memories.DEFAULT_MODE,
               macro_liberties=None, clock_gating="on", gate_min_flops=DEFAULT_GATE_MIN_FLOPS):
    """The technology of ``deca synth --tech NAME`` or ``--liberty FILE...``, ``--memories MODE``,
    ``--macro-liberty FILE...`` (the macro model's calibration, checked here) and ``--clock-gating
    on|off`` with ``--gate-min-flops N``."""
    if memory_mode not in memories.MODES:
        raise ValueError(f"--memories must be one of {', '.join(memories.MODES)}, got {memory_mode!r}")
    if clock_gating not in GATING:
        raise ValueError(f"--clock-gating must be one of {', '.join(GATING)}, got {clock_gating!r}")
    if not isinstance(gate_min_flops, int) or gate_min_flops < 1:
        raise ValueError(f"--gate-min-flops must be a positive number of flip-flops, got {gate_min_flops!r}")
    macros = tuple(Path(p) for p in macro_liberties) if macro_liberties else sram.FAKERAM
    options = dict(min_macro_bits=min_macro_bits, memories=memory_mode, macro_liberties=macros,
                   gate_min_flops=gate_min_flops if clock_gating == "on" else 0)
    if liberties:
        sram.fit(macros, min_macro_bits)
        return Technology("liberty", tuple(Path(p) for p in liberties), **options)
    if name not in TECHNOLOGIES:
        raise ValueError(f"unknown technology {name!r} (one of {', '.join(TECHNOLOGIES)})")
    if name == "asap7":
        sram.fit(macros, min_macro_bits)
        return Technology(name, ASAP7_LIBERTIES, dont_use=ASAP7_DONT_USE, **options)
    return Technology(name, **options)


#: Gates have no power-on values: the registers' initial values are dropped after ``proc``, which
#: also spares ``opt`` a conflict where a register driven by a constant meets an output port.
DROP_INIT = "attrmap -remove init"


#: The memories as ``_memories`` reads them: ``FRONT`` with each multiplexer of an undefined input
#: replaced by its other input. ``proc`` gives a conditional write ``if (en) m[a] <= d`` the address
#: ``en ? a : x``, a net of its own although it is ``a`` wherever the write happens, so that only
#: this way a write port and a read port on the same address show the same nets.
MEMORIES_IL = "memories.il"
FRONT = "front.il"


def front_script(verilog, top):
    """Pass 1 of the standard-cell flow: the design up to its memories, before any is mapped
    (``FRONT``), and its memories for the choice of their storage (``MEMORIES_IL``; the design
    goes on from ``FRONT``, unchanged)."""
    return "\n".join([f"read_verilog {verilog}", f"hierarchy -check -top {top}", "proc", DROP_INIT,
                      "opt", "memory -nomap", f"write_rtlil {FRONT}", "opt_expr -mux_undef", "opt_clean",
                      f"write_rtlil {MEMORIES_IL}"]) + "\n"


#: The design down to gates and flip-flops, before clock gating and mapping (pass 2's output).
PREGATE = "pregate.il"
#: How a memory left in standard cells is built (Yosys techmap, copied into the work folder): word
#: registers and a one-hot read. A 64 x 16-bit sub-LUT with one read port, registers on its ports,
#: mapped alone to ASAP7 with ABC's buffering and sizing: 498 µm², 329 ps, against 873 µm², 357 ps
#: for ``memory_map``'s multiplexer tree on the address bits.
MEMORY_CELLS = Path(__file__).with_name("memory_cells.v")


def cells_script(top, macro_shapes):
    """Pass 2: ``synth`` without its ABC run and with only the non-macro memories mapped to
    flip-flops, down to Yosys's gates, written as ``PREGATE``. Its flip-flops keep Yosys's names
    through the mapping (``write_blif -cname``; the final ``rename`` spares them), so a later mapping
    can be told which flip-flops to leave ungated. Renaming them here instead changes ABC's mapping
    of the loaders (422 ps where these names give 397.7 ps, W = 32, L = 8)."""
    marks = [f"setattr -set deca_macro 1 t:$mem_v2 r:WIDTH={width} %i r:SIZE={words} %i r:RD_PORTS={reads} %i "
             f"r:WR_PORTS={writes} %i" for words, width, reads, writes in sorted(macro_shapes)]
    lines = [f"read_rtlil {FRONT}", f"synth -top {top} -noabc -run coarse:fine", *marks,
             "opt -fast -full", f"techmap -map {MEMORY_CELLS.name} t:$mem_v2 a:deca_macro %d",
             "memory_map -attr !deca_macro",
             # Each memory left in flip-flops keeps its own: the L LUT replicas hold the same entries,
             # and merged they would be one array instead of L physical read ports.
             "setattr -set keep 1 n:$memory*", "opt -full", "techmap", "opt -fast", f"write_rtlil {PREGATE}"]
    return "\n".join(lines) + "\n"


def storage_dont_use(lib):
    """The flip-flop cells a memory's words (``deca_storage`` in ``MEMORY_CELLS``) and the registers of
    ``SMALL_FANOUT`` are not mapped to, so that they take the library's smallest: ``dfflibmap`` takes a
    cell with a true output before a smaller one whose output is inverted (ASAP7: DFFHQx4, 0.3645 µm²,
    before DFFHQNx1, 0.2916 µm²). A word only feeds its read multiplexer, which ABC builds with the
    inversion folded in; every other register keeps ``dfflibmap``'s choice, whose output drives its
    fanout (DFFHQNx1 on every register of the W = 32, L = 8 PE: 61,386 µm², but 465 ps against 392)."""
    smallest = min((c.area for c in lib.cells.values() if c.inverted_flop), default=None)
    if smallest is None:
        return ()
    return tuple(sorted(name for name, c in lib.cells.items()
                        if c.sequential and not c.inverted_flop and not c.clock_gate and c.area > smallest))


#: A register whose output at most this many gate inputs read (in its module, before mapping) is
#: mapped like a memory's words, to the smallest flip-flop: ABC folds the inversion into the one
#: gate it drives. Measured at W = 32, L = 8 (``deca synth``): the words alone 63,828 µm² and 392
#: ps, with the registers of fanout 1 62,754 µm² and 393 ps, of fanout 2 62,531 µm² but 400.1 ps.
SMALL_FANOUT = 1
#: The flip-flops of ``PREGATE`` with a small fanout (``module/cell`` lines), for ``map_script``.
SMALL_FANOUT_SEL = "small_fanout.sel"


def small_fanout_flops(rtlil, most=SMALL_FANOUT):
    """(module, cell) of each flip-flop of an RTLIL file of Yosys's gates whose output at most
    ``most`` gate inputs read, none of them outside its module (a port or a submodule's)."""
    found = []

    def close(module, wires, flops, reads, aliases, outside):
        parent = {}

        def root(b):
            while parent.get(b, b) != b:
                b = parent[b]
            return b
        for a, b in aliases:
            ra, rb = root(a), root(b)
            if ra != rb:
                parent[ra] = rb
        count, away = {}, {root(b) for b in outside}
        for b, n in reads.items():
            count[root(b)] = count.get(root(b), 0) + n
        found.extend((module, cell) for cell, q in flops
                     if root(q) not in away and count.get(root(q), 0) <= most)

    module = None
    for words in memories.rtlil_statements(rtlil):
        if words[0] == "module":
            module, wires, flops, reads, aliases, outside, cell = words[1][1:], {}, [], {}, [], [], None
        elif words[0] == "wire":
            name, (lsb, width) = memories.rtlil_wire(words)
            wires[name] = (lsb, width)
            if "output" in words:
                outside.extend((name, k) for k in range(lsb, lsb + width))
        elif words[0] == "cell":
            cell = (words[1], words[2].removeprefix("\\"))
        elif words[0] == "connect" and cell:
            bits = [b for b in activity._sigspec(" ".join(words[2:]), wires) if isinstance(b, tuple)]
            if not cell[0].startswith("$"):
                outside.extend(bits)          # a submodule's port: read outside this module
            elif words[1] == "\\Q" and "DFF" in cell[0] and bits:
                flops.append((cell[1], bits[0]))
            elif words[1] not in ("\\Y", "\\Q"):
                for b in bits:
                    reads[b] = reads.get(b, 0) + 1
        elif words[0] == "connect":
            text = " ".join(words[1:])
            left, right = _split_connect(text)
            aliases.extend(zip(activity._sigspec(left, wires), activity._sigspec(right, wires)))
        elif words[0] == "end":
            if cell:
                cell = None
            elif module:
                close(module, wires, flops, reads, aliases, outside)
                module = None
    return found


def _split_connect(text):
    """The two signals of a module-level ``connect A B`` (each a name with an optional bit range, a
    constant or a ``{ ... }`` concatenation)."""
    depth = 0
    tokens = text.replace("{", " { ").replace("}", " } ").split()
    for i, t in enumerate(tokens):
        depth += (t == "{") - (t == "}")
        if depth == 0 and (i + 1 == len(tokens) or not tokens[i + 1].startswith("[")):
            return " ".join(tokens[:i + 1]), " ".join(tokens[i + 1:])
    raise ValueError(f"not a connection of two signals: {text}")


def map_script(liberties, constrained, dont_use=(), gate_min_flops=0, gates=(), ungated=None, netlist=NETLIST,
               stat="stat.json", storage_dont_use=(), small_fanout=None):
    """Pass 3: ``PREGATE``'s registers and logic mapped to the liberty cells but those of ``dont_use``
    (ABC with a delay target and, when ``constrained``, buffering and gate sizing against
    ``ABC_CONSTR``), written as ``netlist`` and ``stat``. ``gate_min_flops``: each set of at least that
    many flip-flops sharing a clock and an enable gets a clock gate (``clockgate``, the smallest of the
    library's, ``gates``), its flip-flops lose the enable; but the flip-flops the selection file
    ``ungated`` lists (``module/instance`` lines) keep theirs, as a multiplexer (``dffunmap``). The
    memories' words, and the flip-flops the selection file ``small_fanout`` lists, are mapped first,
    without the cells ``storage_dont_use`` names."""
    libs = " ".join(f"-liberty {name}" for name in liberties)
    usable = " ".join([*(f"-dont_use {pattern}" for pattern in (*dont_use, *gates)), libs])
    gating = []
    if gate_min_flops and gates:
        keep = [f"select -read {ungated}", "dffunmap -ce-only", "select -clear"] if ungated else []
        gating = [*keep, f"clockgate -min_net_size {gate_min_flops} {libs}"]
    abc = f"abc -D {TARGET_PS:g} " + (f"-constr {ABC_CONSTR} " if constrained else "") + usable
    storage = []
    if storage_dont_use:
        smallest = f"dfflibmap {' '.join(f'-dont_use {name}' for name in storage_dont_use)} {usable}"
        storage = ([f"select -read {small_fanout}", "select -add a:deca_storage", smallest, "select -clear"]
                   if small_fanout else [f"{smallest} a:deca_storage"])
    lines = [f"read_rtlil {PREGATE}", *gating, f"dfflegalize -cell {FF_CELL} 01", *storage, f"dfflibmap {usable}", abc,
             "opt_clean", f"tee -q -o {stat} stat {libs} -json", "rename -enumerate w:* c:* t:DFF* %d",
             f"write_blif -icells -conn -impltf -param -cname {netlist}"]
    return "\n".join(lines) + "\n"


def _memories(rtlil):
    """Every $mem_v2 cell of an RTLIL file as a ``memories.Memory``."""
    found = []
    for module, _, cell, params, conns, _ in memories.rtlil_cells(rtlil):
        reads, writes = int(params.get("RD_PORTS", "0")), int(params.get("WR_PORTS", "0"))
        clocked = params.get("RD_CLK_ENABLE", "0").split("'")[-1].zfill(reads)
        found.append(memories.Memory(
            module, cell, int(params.get("SIZE", "0")), int(params.get("WIDTH", "0")),
            tuple(clocked[-1 - i] == "1" for i in range(reads)), writes,
            reads == 1 and writes == 1 and conns.get("RD_ADDR") == conns.get("WR_ADDR")))
    return found


def memory_verilog(memory, top):
    """``memory`` alone, in a module of its own, with registers on every port of ``top`` around it."""
    abits = max(1, (memory.words - 1).bit_length())
    w, a, reads = memory.width, abits, len(memory.sync_reads)
    ports = ["input clk"] + [f"input [{a - 1}:0] wa{i}, input [{w - 1}:0] wd{i}, input we{i}"
                             for i in range(memory.writes)]
    ports += [f"input [{a - 1}:0] ra{i}, output [{w - 1}:0] rd{i}" for i in range(reads)]
    body = [f"module mem({', '.join(ports)});", f"  reg [{w - 1}:0] m [0:{memory.words - 1}];"]
    body += [f"  always @(posedge clk) if (we{i}) m[wa{i}] <= wd{i};" for i in range(memory.writes)]
    for i, sync in enumerate(memory.sync_reads):
        body += ([f"  reg [{w - 1}:0] q{i};", f"  always @(posedge clk) q{i} <= m[ra{i}];", f"  assign rd{i} = q{i};"]
                 if sync else [f"  assign rd{i} = m[ra{i}];"])
    body.append("endmodule")
    regs = [f"{d} [{n - 1}:0] {name}" for d, n, name in
            [*(x for i in range(memory.writes) for x in (("input", a, f"wa{i}"), ("input", w, f"wd{i}"),
                                                          ("input", 1, f"we{i}"))),
             *(x for i in range(reads) for x in (("input", a, f"ra{i}"), ("output", w, f"rd{i}")))]]
    top_lines = [f"module {top}(input clk, {', '.join(regs)});"]
    conns = []
    for decl in regs:
        direction, _, rest = decl.partition(" ")
        width, name = rest.split(" ")
        top_lines += [f"  reg {width} r_{name};", f"  wire {width} m_{name};"]
        if direction == "input":
            top_lines += [f"  always @(posedge clk) r_{name} <= {name};", f"  assign m_{name} = r_{name};"]
        else:
            top_lines += [f"  always @(posedge clk) r_{name} <= m_{name};", f"  assign {name} = r_{name};"]
        conns.append(f".{name}(m_{name})")
    top_lines += [f"  mem u(.clk(clk), {', '.join(conns)});", "endmodule"]
    return "\n".join(body + top_lines) + "\n"


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


def _stage_memory_cells(work):
    """``MEMORY_CELLS`` copied into the work folder for ``cells_script``; its digest."""
    (work / MEMORY_CELLS.name).write_bytes(MEMORY_CELLS.read_bytes())
    return _sha256(work / MEMORY_CELLS.name)


def _macro_list(design, chosen):
    """One dict per SRAM macro of the mapped design: where it is, its shape, configuration, copies and
    area. ``chosen``: (words, width, read ports, write ports) -> the chosen ``memories.Candidate``."""
    out = []
    for module, kind, pins, params in design.cells:
        if kind != sta.MACRO:
            continue
        words, width = int(params["SIZE"], 2), int(params["WIDTH"], 2)
        c = chosen[words, width, int(params["RD_PORTS"], 2), int(params["WR_PORTS"], 2)]
        out.append({"module": module, "block": block_of(module, design.top),
                    "memory": params.get("MEMID", "").strip('"\\'), "words": words, "width": width,
                    "kind": c.kind, "copies": c.copies, "area": c.area, "pins": [pin for pin, _ in pins]})
    return out


@functools.lru_cache(maxsize=4)
def _library(paths, stamps, dont_use):
    lib = read_liberty(paths)
    lib.cells = {name: c for name, c in lib.cells.items()
                 if not any(fnmatch.fnmatchcase(name, pattern) for pattern in dont_use)}
    check_library(lib, paths)
    return lib


def clock_gates(lib):
    """The names of the library's integrated clock-gating cells."""
    return tuple(sorted(name for name, c in lib.cells.items() if c.clock_gate))


def load_library(tech):
    """The technology's cells but its ``dont_use``, checked for what the flow needs (raises
    LibertyError naming the file); read again only when a file changes."""
    for path in tech.liberties:
        if not Path(path).is_file():
            raise LibertyError(f"liberty {path} does not exist")
    return _library(tuple(tech.liberties), tuple(Path(p).stat().st_mtime_ns for p in tech.liberties), tech.dont_use)


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


#: The clock period the memory choice and the signoff constraints are made for (the paper's 2.5 GHz).
PERIOD_PS = 1000.0 / POWER_GHZ


def measure_memory(memory, tech, work):
    """The standard-cell candidate of ``memory``: its area (its module's cells and the buffer trees
    its nets need) and its register-to-register time, the memory synthesized alone with registers on
    its ports (``memory_verilog``), in ``work/memories/<shape>``; reused while its inputs are unchanged."""
    lib = load_library(tech)
    reads = "".join("s" if sync else "a" for sync in memory.sync_reads)
    folder = work / "memories" / f"m{memory.words}x{memory.width}r{reads}w{memory.writes}"
    folder.mkdir(parents=True, exist_ok=True)
    top = "memtop"
    (folder / "memory.v").write_text(memory_verilog(memory, top))
    names = _stage_liberties(folder, tech.liberties)
    yosys = yosys_version()
    front = front_script("memory.v", top)
    _yosys_step(folder, "front", [_sha256(folder / "memory.v"), front, yosys], front,
                f"Yosys front end of a {memory.words} x {memory.width} memory", (FRONT, MEMORIES_IL))
    script = cells_script(top, set())
    _yosys_step(folder, "cells", [_sha256(folder / FRONT), script, yosys, _stage_memory_cells(folder)], script,
                f"Yosys synthesis of a {memory.words} x {memory.width} memory", (PREGATE,))
    mapping = map_script(names, False, tech.dont_use, tech.gate_min_flops, clock_gates(lib),
                         storage_dont_use=storage_dont_use(lib))
    _yosys_step(folder, "map", [_sha256(folder / PREGATE), mapping, yosys,
                                *(_sha256(folder / name) for name in names)], mapping,
                f"Yosys mapping of a {memory.words} x {memory.width} memory", (NETLIST, "stat.json"))
    own, _ = _module_stats(json.loads((folder / "stat.json").read_text()), "area", float)
    design = sta.Design(read_blif(folder / NETLIST, gates=False), top, str, lib, sram.fit(tech.macro_liberties))
    t = sta.timing(design)
    trees = sta.power(design, POWER_GHZ, lambda net: 0.0, "").buffers.get("mem", 0)
    area = own["mem"][1] + trees * (design.buffer.area if design.buffer else 0.0)
    return memories.Candidate(memories.CELLS, 1, area, t.critical_ps, t.critical_ps)


def choose_memories(found, tech, work, model, period_ps=PERIOD_PS):
    """The memory table: one record per distinct (module, memory shape) of ``found`` (the design's
    memories, each instance once), the candidates measured once per shape."""
    cost, table = {}, {}
    for memory in found:
        if memory.shape not in cost:
            macro, why_not = memories.macro_candidate(memory, model)
            cells = measure_memory(memory, tech, work)
            cost[memory.shape] = (cells, macro, why_not,
                                  *memories.choose(memory, cells, macro, why_not, tech.memories, period_ps))
        cells, macro, _, chosen, reason = cost[memory.shape]
        key = (memory.module.rsplit(".", 1)[-1], memory.name.rstrip("0123456789_"), memory.shape)
        if key in table:
            table[key]["instances"] += 1
        else:
            table[key] = memories.record(memory, 1, chosen, reason, cells, macro)
    return list(table.values()), {shape: c[3] for shape, c in cost.items()}


def gated(design):
    """The design's clock gates: their count, the flip-flops they clock and their enable nets."""
    lib, gates = design.library.cells, {}
    for index, (_, kind, pins, _) in enumerate(design.cells):
        if kind != sta.MACRO and lib[kind].clock_gate:
            gates[dict(pins)[lib[kind].clock_gate[2]]] = dict(pins)[lib[kind].clock_gate[1]]
    flops = sum(1 for _, kind, pins, _ in design.cells if kind != sta.MACRO and lib[kind].sequential
                and any(lib[kind].pins[pin].clock and net in gates for pin, net in pins if pin in lib[kind].pins))
    return {"clock_gates": len(gates), "gated_flops": flops, "enables": set(gates.values())}


def gate_flops(design, gates):
    """(module, instance name) of each flip-flop the clock gates ``gates`` (cell indices) clock."""
    lib = design.library.cells
    clocks = set()
    for index in gates:
        _, kind, pins, _ = design.cells[index]
        clocks.add(dict(pins)[lib[kind].clock_gate[2]])
    return {(module, params[CELL_NAME]) for module, kind, pins, params in design.cells
            if kind != sta.MACRO and lib[kind].sequential
            and any(lib[kind].pins[pin].clock and net in clocks for pin, net in pins if pin in lib[kind].pins)}


def _block_power(power):
    """{block: leakage + dynamic mW} of a ``sta.Power``."""
    return {b: power.leakage_mw.get(b, 0.0) + power.dynamic_mw.get(b, 0.0) for b in power.leakage_mw}


def run_front(work, verilog, top, source):
    """Pass 1 (``front_script``) on ``work/verilog``, unless done on the same inputs; its seconds."""
    front = front_script(verilog, top)
    return _yosys_step(work, "front", [_sha256(work / verilog), front, yosys_version()], front,
                       f"Yosys front end of {source} (top {top})", (FRONT, MEMORIES_IL))


def run_cells(work, verilog, top, source, tech, toggles=(), signoff_sta=False):
    """The standard-cell flow on ``work/verilog``: (total, per block, seconds, timing, power, macros, model,
    memory table, OpenSTA's signoff or None). ``toggles``: simulations' ``deca.synth.activity.Toggles``, each
    giving the power of its activity (the blocks get the highest of them), else the power is vectorless only. ``signoff_sta``: also time the design with OpenSTA
    (``deca.synth.signoff.run``)."""
    lib = load_library(tech)
    model = sram.fit(tech.macro_liberties, tech.min_macro_bits)
    names = _stage_liberties(work, tech.liberties)
    yosys = yosys_version()
    seconds = run_front(work, verilog, top, source)
    found = _memories(work / MEMORIES_IL)
    memory_table, chosen = choose_memories(found, tech, work, model)
    macro_shapes = {(m.words, m.width, len(m.sync_reads), m.writes) for m in found
                    if chosen[m.shape].kind != memories.CELLS}
    buffer = lib.buffer()
    constr = f"set_driving_cell {buffer.name}\nset_load {ABC_OUTPUT_LOAD_FF}\n" if buffer else ""
    if buffer:
        (work / ABC_CONSTR).write_text(constr)
    cells = cells_script(top, macro_shapes)
    seconds += _yosys_step(work, "cells", [_sha256(work / FRONT), cells, yosys, _stage_memory_cells(work)], cells,
                           f"Yosys synthesis of {source} (top {top})", (PREGATE,))
    (work / SMALL_FANOUT_SEL).write_text("".join(f"{m}/{c}\n" for m, c in small_fanout_flops(work / PREGATE)))
    ungated, late_rounds, first = set(), [], None
    while True:
        # Round r maps with the flip-flops of every gate found late before it left ungated; each
        # round keeps its own files, so a second run of the flow reads them again without Yosys.
        r = len(late_rounds)
        netlist, stat = (NETLIST, "stat.json") if r == 0 else (f"netlist{r}.blif", f"stat{r}.json")
        selection = f"ungated{r}.sel" if ungated else None
        if selection:
            (work / selection).write_text("".join(f"{module}/{name}\n" for module, name in sorted(ungated)))
        mapping = map_script(names, buffer is not None, tech.dont_use, tech.gate_min_flops, clock_gates(lib),
                             selection, netlist, stat, storage_dont_use(lib), SMALL_FANOUT_SEL)
        seconds += _yosys_step(work, f"map{r}" if r else "map", [
            _sha256(work / PREGATE), mapping, constr, yosys, *(_sha256(work / name) for name in names),
            _sha256(work / SMALL_FANOUT_SEL),
            *([_sha256(work / selection)] if selection else [])], mapping,
            f"Yosys mapping of {source} (top {top}) to {', '.join(names)}", (netlist, stat))
        try:
            models = read_blif(work / netlist, gates=False)
            design = sta.Design(models, top, lambda m: block_of(m, top), lib, model)
            checks = {}
            timing = sta.timing(design, checks)
        except (NetlistError, sram.MacroError) as e:
            raise ToolError(f"the netlist Yosys made of {source} (top {top}): {e}") from None
        gating = gated(design)
        first = first or gating
        late = [index for index, ps in checks.items() if ps > PERIOD_PS]
        late_rounds.append(len(late))
        if not late or len(late_rounds) == GATING_ROUNDS:
            break
        ungated |= gate_flops(design, late)
        models = design = None  # the next round's netlist takes its place in memory
    gating.update(gates_dropped=first["clock_gates"] - gating["clock_gates"],
                  flops_ungated=first["gated_flops"] - gating["gated_flops"], late_rounds=late_rounds)
    if toggles:
        # After the netlist is flattened (the names only add to its modules' nets).
        activity.name_flop_outputs(design.models, work / PREGATE, lib)
    try:
        vectorless = sta.power(design, POWER_GHZ, lambda net: tech.activity,
                               f"vectorless: {tech.activity} toggles per cycle on every net")
        enables = gating.pop("enables")
        simulated = []
        for t in toggles:
            rates, estimated = activity.net_rates(design, t)
            duties = activity.net_duties(design, t)
            simulated.append((t, 1 - len(estimated) / max(1, len(rates)),
                              sta.power(design, POWER_GHZ, lambda net, rates=rates: rates.get(net, 0.0),
                                        f"simulated: {t.source}, {t.cycles:g} cycles",
                                        lambda net, d=duties: d.get(net, sta.DEFAULT_DUTY)),
                              activity.estimated_power(design, POWER_GHZ, rates, estimated, duties)))
            # How many gates' enable duty the trace gives; the others get sta.DEFAULT_DUTY.
            gating.setdefault("enables_traced", []).append(sum(e in duties for e in enables))
    except (NetlistError, sram.MacroError) as e:
        raise ToolError(f"the netlist Yosys made of {source} (top {top}): {e}") from None
    highest, matched, power, _ = max(simulated, key=lambda x: sum(_block_power(x[2]).values()),
                                     default=(None, None, vectorless, None))
    macros = _macro_list(design, {(m.words, m.width, len(m.sync_reads), m.writes): chosen[m.shape]
                                          for m in found})
    # OpenSTA's inputs: the constraints deca.synth.sta assumes, each macro as a cell of its own shape.
    (work / signoff.SDC).write_text(signoff.sdc(PERIOD_PS) + signoff.gate_latencies(design))
    (work / signoff.MACROS_LIB).write_text(signoff.macro_liberty(macros, model))
    checked = signoff.run(work, design, names, PERIOD_PS, timing) if signoff_sta else None
    memory_bits = {}
    for m in found:
        memory_bits[m.module] = memory_bits.get(m.module, 0) + m.bits
    own, children = _module_stats(json.loads((work / stat).read_text()), "area", float)
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
                          vectorless_dynamic_mw=sum(vectorless.dynamic_mw.get(b, 0.0) for b in blocks),
                          path_ps=sum(timing.per_block_ps.get(b, 0.0) for b in blocks))

    per_block = {}
    for name in BLOCK_NAMES:
        modules = [m for m in count if block_of(m, top) == name]
        if modules:
            per_block[name] = stats(modules)
    total = stats(list(count))
    timing_dict = {**asdict(timing), "fmax_ghz": timing.fmax_ghz,
                   "tree_buffer": design.buffer.name if design.buffer else None}
    power_dict = {"frequency_ghz": power.frequency_ghz, "activity": power.activity,
                  "vectorless": vectorless.activity, "gate_min_flops": tech.gate_min_flops, **gating}
    if simulated:
        power_dict.update(cycles=highest.cycles, named_nets=matched, workload=highest.workload,
                          workloads=[{"workload": t.workload, "cycles": t.cycles, "named_nets": share,
                                      "blocks_mw": _block_power(p),
                                      "dynamic_mw": sum(p.dynamic_mw.values()), "estimated_mw": estimated}
                                     for t, share, p, estimated in simulated])
    return total, per_block, seconds, timing_dict, power_dict, macros, model.to_dict(), memory_table, checked
