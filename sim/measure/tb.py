"""cocotb testbench that measures points on the generated PE (``deca.sim.measure.campaign`` launches it
with ``--engine python``).

Parameters come as JSON in $DECA_TB_PARAMS (see ``deca.sim.measure.point.measure_points``).
"""

import cocotb

from deca.sim.bench.cocotb_bus import start, tb_params

from .point import measure_points


@cocotb.test()
async def measure(dut):
    bus = await start(dut)
    await measure_points(bus, tb_params(), dut._log.info)
