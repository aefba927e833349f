"""The FPGA estimate: ``synth_ecp5`` and nextpnr-ecp5 place and route, out of context."""

import json
import re
import time
from dataclasses import dataclass

from deca.toolchain import ToolError

from .tools import run_nextpnr_ecp5, run_yosys

#: ECP5 device for the FPGA estimate: the largest one, since the (8, 4) datapath alone takes 13k of
#: its 84k LUTs.
FPGA_DEVICE = "LFE5U-85F CABGA381"
FPGA_DEVICE_ARGS = ("--85k", "--package", "CABGA381")
FPGA_TARGET_MHZ = 100
#: nextpnr resource names -> the summary fields of FpgaStats.
FPGA_RESOURCES = {"TRELLIS_COMB": "luts", "TRELLIS_FF": "ffs", "DP16KD": "bram", "MULT18X18D": "dsp",
                  "TRELLIS_RAMW": "lutram"}


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


def fpga_script(verilog, top):
    return f"read_verilog {verilog}\nsynth_ecp5 -top {top} -json ecp5.json\n"


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
