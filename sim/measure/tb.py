"""cocotb testbench that measures points on the generated PE (``deca.sim.measure.campaign`` launches it).

Parameters come as JSON in $DECA_TB_PARAMS: the design's parameters, ``system`` (a
``deca.sim.bench.system.System``), ``points``, ``tiles``, ``seed`` and ``out``, the folder each point's
record is written to as soon as it is measured.
"""

import cocotb

from deca.sim.bench.bus import drive_idle
from deca.sim.bench.cocotb_bus import reset, start, tb_params
from deca.sim.bench.pe_bench import Bench
from deca.sim.bench.system import System

from .point import Point, measure_point
from .records import write_record


@cocotb.test()
async def measure(dut):
    p = tb_params()
    bus = await start(dut)
    system = System(**p["system"])
    design = {name: p[name] for name in ("W", "L", "tags", "sqq_bytes", "addr_bits", "id_bits", "loaders")}
    bench = Bench(bus, {**design, "seed": p["seed"], "core": {}, "memory": system.memory_kwargs(),
                        "prefetch_degree": system.prefetch_degree}, dut._log.info)
    drive_idle(bus, bench.ports.inputs)
    await reset(bus)
    for fields in p["points"]:
        point = Point(**fields)
        rec = await measure_point(bench, point, system, p["tiles"], p["seed"])
        write_record(p["out"], rec)
        dut._log.info("%s: %.1f cycles per tile, bpv %.4f", point.key, rec["cycles_per_tile"], rec["bpv_measured"])
