"""cocotb testbench that measures points on the generated PE (``deca.sim.sweep`` launches it).

Parameters come as JSON in $DECA_TB_PARAMS: the design's parameters, ``system`` (a
``deca.sim.system.System``), ``points``, ``tiles``, ``seed`` and ``out``, the folder each point's
record is written to as soon as it is measured.
"""

import cocotb

from .cocotb_bus import reset, start, tb_params
from .harness import drive_idle
from .measure import Point, measure_point, write_record
from .pe_bench import Bench
from .system import System


@cocotb.test()
async def measure(dut):
    p = tb_params()
    bus = await start(dut)
    drive_idle(bus)
    await reset(bus)
    system = System(**p["system"])
    design = {name: p[name] for name in ("W", "L", "tags", "sqq_bytes", "addr_bits", "id_bits")}
    bench = Bench(bus, {**design, "seed": p["seed"], "core": {}, "memory": system.memory_kwargs(),
                        "prefetch_degree": system.prefetch_degree}, dut._log.info)
    for fields in p["points"]:
        point = Point(**fields)
        rec = await measure_point(bench, point, system, p["tiles"], p["seed"])
        write_record(p["out"], rec)
        dut._log.info("%s: %.1f cycles per tile, bpv %.4f", point.key, rec["cycles_per_tile"], rec["bpv_measured"])
