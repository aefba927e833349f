"""The synthesis flow: generated Verilog -> Yosys (generic CMOS gates) and, optionally, ECP5 place and route.

Area is Yosys's ``stat -tech cmos`` transistor estimate after mapping to NAND/NOR/NOT gates
(``abc -g cmos2``) and plain D flip-flops; logic depth is ``ltp -noff``, gates on the longest
combinational path. The design is synthesized per module, every cell is then tagged with its block
(``deca.synth.blocks``) and the netlist flattened, so the blocks partition the whole design exactly
and a block's depth counts the gates of its own modules along one path.
"""

import hashlib
import json
import re
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from deca.toolchain import ToolError

from .blocks import BLOCK_NAMES, block_of
from .tools import run_nextpnr_ecp5, run_yosys

DEFAULT_WORK_DIR = Path("build/synth")

#: The one flip-flop cell left after legalization: ``stat -tech cmos`` prices no other kind, so
#: enables and resets become gates that ABC maps with the rest of the logic.
FF_CELL = "$_DFF_P_"

#: ECP5 device for the FPGA estimate: the largest one, since the (8, 4) datapath alone takes 13k of
#: its 84k LUTs.
FPGA_DEVICE = "LFE5U-85F CABGA381"
FPGA_DEVICE_ARGS = ("--85k", "--package", "CABGA381")
FPGA_TARGET_MHZ = 100
#: nextpnr resource names -> the summary fields of FpgaStats.
FPGA_RESOURCES = {"TRELLIS_COMB": "luts", "TRELLIS_FF": "ffs", "DP16KD": "bram", "MULT18X18D": "dsp",
                  "TRELLIS_RAMW": "lutram"}

_LTP = re.compile(r"Longest topological path in \S+ \(length=(-?\d+)\)")
_MODULE = re.compile(r"^module\s+\\?([^\s(]+)", re.M)


def default_design():
    """The complete PE once the generator has it, else the datapath."""
    from deca.hw.generate import DESIGNS

    return "pe" if "pe" in DESIGNS else "datapath"


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
    """ECP5 place-and-route result (nextpnr, out of context)."""

    device: str
    fmax_mhz: float      # of the clock "clk", achieved after routing
    luts: int            # TRELLIS_COMB: LUT4s and carry halves
    ffs: int
    bram: int            # DP16KD
    dsp: int             # MULT18X18D
    lutram: int          # TRELLIS_RAMW: LUT-RAM write ports
    seconds: float       # ECP5 synthesis plus place and route


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


def asic_script(verilog, top, blocks):
    """Yosys script for ``verilog`` (a file name in the work folder); ``blocks`` maps module -> block."""
    index = {name: i for i, name in enumerate(BLOCK_NAMES)}
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
        # Tag wires too: ltp only follows the selected wires.
        *(f"setattr -set deca_block {index[block]} {module}/*" for module, block in blocks.items()),
        "flatten -noscopeinfo",
        "tee -q -o stat.json stat -tech cmos -json",
        "tee -q -o ltp.txt ltp -noff",
    ]
    for block in sorted(set(blocks.values()), key=index.get):
        sel = f"a:deca_block={index[block]}"
        lines += [f"tee -q -o stat_{index[block]}.json stat -tech cmos -json {sel}",
                  f"tee -q -o ltp_{index[block]}.txt ltp -noff {sel}"]
    return "\n".join(lines) + "\n"


def fpga_script(verilog, top):
    return f"read_verilog {verilog}\nsynth_ecp5 -top {top} -json ecp5.json\n"


# Parsing ------------------------------------------------------------------------------------------


def _stat(path):
    """(cells by type, transistors) of the one module of a flattened ``stat -tech cmos -json``."""
    (module,) = json.loads(path.read_text())["modules"].values()
    return module["num_cells_by_type"], int(module["estimated_num_transistors"])


def _depth(path):
    # ltp says -1 when no cell is selected.
    return max(0, int(_LTP.search(path.read_text()).group(1)))


def _stats(work, suffix, modules, memory_bits):
    cells, transistors = _stat(work / f"stat{suffix}.json")
    return BlockStats(cells=cells, transistors=transistors, flip_flops=cells.get(FF_CELL, 0),
                      memory_bits=sum(memory_bits.get(m, 0) for m in modules),
                      depth=_depth(work / f"ltp{suffix}.txt"), modules=sorted(modules))


def _parse(work, blocks):
    memory = json.loads((work / "memory.json").read_text())["modules"]
    memory_bits = {name.removeprefix("\\"): m["num_memory_bits"] for name, m in memory.items()}
    total = _stats(work, "", blocks, memory_bits)
    per_block = {}
    for i, name in enumerate(BLOCK_NAMES):
        modules = [m for m, b in blocks.items() if b == name]
        if modules:
            per_block[name] = _stats(work, f"_{i}", modules, memory_bits)
    return total, per_block


# The flow -----------------------------------------------------------------------------------------


def _sha256(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _cache_file(cache_dir, top, verilog_sha, script):
    # The script is part of the key: a changed flow must not reuse old numbers.
    key = hashlib.sha256(f"{verilog_sha}\n{script}".encode()).hexdigest()
    return Path(cache_dir) / f"{top}-{key[:20]}.json"


def _store(cached, result):
    # Stored after each step, so a failed place and route keeps the Yosys numbers; written aside
    # and renamed, so an interrupted write leaves no half file.
    if cached:
        cached.parent.mkdir(parents=True, exist_ok=True)
        part = cached.with_suffix(".part")
        part.write_text(json.dumps(result.to_dict(), indent=1))
        part.replace(cached)


def run_asic(work, verilog, top, blocks, source):
    """Run ``asic_script`` on ``work/verilog``; (whole-design stats, per-block stats, seconds)."""
    (work / "synth.ys").write_text(asic_script(verilog, top, blocks))
    start = time.monotonic()
    run_yosys("synth.ys", work, f"Yosys synthesis of {source} (top {top})")
    seconds = time.monotonic() - start
    return (*_parse(work, blocks), seconds)


def run_fpga(work, verilog, top, source):
    """``synth_ecp5`` then nextpnr-ecp5 out of context (no IO buffers: the PE's ports are hundreds of
    bits wide and connect to the core, not to pins)."""
    (work / "fpga.ys").write_text(fpga_script(verilog, top))
    start = time.monotonic()
    run_yosys("fpga.ys", work, f"Yosys ECP5 synthesis of {source} (top {top})")
    # The default router1: router2 halves the time on the (8, 4) datapath but its overuse kept
    # growing on (32, 8) (59% of the LUTs).
    run_nextpnr_ecp5([*FPGA_DEVICE_ARGS, "--json", "ecp5.json", "--out-of-context", "--freq", str(FPGA_TARGET_MHZ),
                      "--timing-allow-fail", "--seed", "1", "--report", "nextpnr.json"],
                     work, f"nextpnr-ecp5 place and route of {source} (top {top})")
    report = json.loads((work / "nextpnr.json").read_text())
    used = {name: report["utilization"].get(name, {}).get("used", 0) for name in FPGA_RESOURCES}
    fmax = report["fmax"].get("clk", {}).get("achieved", 0.0)
    return FpgaStats(device=FPGA_DEVICE, fmax_mhz=round(fmax, 2),
                     seconds=round(time.monotonic() - start, 1),
                     **{field: used[name] for name, field in FPGA_RESOURCES.items()})


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
    blocks = {m: block_of(m, top) for m in _MODULE.findall(local.read_text())}
    sha = _sha256(local)
    cached = _cache_file(cache_dir, top, sha, asic_script(local.name, top, blocks)) if cache_dir else None
    if cached and cached.is_file():
        result = SynthResult.from_dict(json.loads(cached.read_text()))
    else:
        total, per_block, seconds = run_asic(work, local.name, top, blocks, path)
        result = SynthResult(top=top, design=design, W=W, L=L, verilog_sha256=sha, total=total, blocks=per_block,
                             seconds=round(seconds, 1))
        _store(cached, result)
    if fpga and result.fpga is None:
        result.fpga = run_fpga(work, local.name, top, path)
        _store(cached, result)
    return result


def synthesize(W, L, design=None, work_dir=DEFAULT_WORK_DIR, fpga=False, cache_dir=None):
    """Generate the Verilog of ``design`` (default: ``default_design()``) for (W, L) into
    ``work_dir/<top>/`` and synthesize it."""
    from deca.hw.generate import generate, top_name
    from deca.hw.params import check_params

    check_params(W, L)
    design = design or default_design()
    top = top_name(design, W, L)
    work = Path(work_dir) / top
    path = generate(W, L, work, design=design)
    return synthesize_file(path, top, work, fpga=fpga, cache_dir=cache_dir, design=design, W=W, L=L)
