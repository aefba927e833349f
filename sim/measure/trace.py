"""A wave trace of the PE running one measured workload (``deca synth --activity``): the point's
record, as ``deca run`` measures it, and Verilator's VCD of the whole run, from which synthesis
counts each signal's toggles."""

from pathlib import Path

from deca.hw.params import LOADERS
from deca.sim.bench.runner import run, verilator_fst
from deca.sim.bench.system import system

from .campaign import DESIGN
from .point import Point
from .records import read_records


def record_trace(verilog, top, W, L, workload, mode, tiles, seed, out, loaders=LOADERS, storage=None):
    """Run ``workload`` ("scheme@density") in ``mode`` for ``tiles`` tiles on the PE of the Verilog
    file ``verilog`` (module ``top``) on Verilator with waves; (the VCD's path, the point's record).
    The run happens in the waves build's folder ``<run>``; ``out`` gets the record. ``storage``: the
    PE's storage parameters other than the defaults."""
    if verilator_fst():
        # The runner then makes Verilator write FST, which deca.synth.activity does not read.
        raise ValueError("Verilator writes FST traces here (the lz4 headers are installed) and the toggle count "
                         "reads VCD; convert a trace with fst2vcd and give it with --vcd")
    point = Point(W, L, workload, mode, loaders)
    out = Path(out).resolve()  # the simulator runs in its own folder
    params = {**DESIGN, **(storage or {}), "W": W, "L": L, "loaders": loaders, "system": system().as_dict(), "tiles": tiles,
              "seed": seed, "out": str(out), "points": [point.as_dict()]}
    results = run("verilator", [verilog], top, "deca.sim.measure.tb", out, params=params,
                  run_name=f"trace-{point.key}-{tiles}-s{seed}", waves=True, seed=seed)
    return results.parent / "dump.vcd", read_records(out)[point.key]
