"""cocotb testbench of the whole DECA PE, launched by tests/test_pe_rtl.py through deca.sim.bench.runner.

The procedures live in ``deca.sim.bench.pe_bench`` (shared with the Amaranth-simulator tests); their
parameters come as JSON in $DECA_TB_PARAMS.
"""

import cocotb

from deca.sim.bench.bus import drive_idle, reset
from deca.sim.bench.cocotb_bus import start, tb_params
from deca.sim.bench.pe_bench import PROCEDURES, Bench


async def bench_for(dut):
    """Clock, idle inputs and reset, then a Bench; checks the ports have the widths the layouts say."""
    bus = await start(dut)
    params = tb_params()
    bench = Bench(bus, params, dut._log.info)
    drive_idle(bus, bench.ports.inputs)
    await reset(bus)
    for name, width in bench.ports.widths.items():
        got = len(getattr(dut, name))
        assert got == width, f"{name} is {got} bits, the layout says {width}"
    return bench


def cocotb_test(procedure):
    async def test(dut):
        await procedure(await bench_for(dut))
    test.__name__ = test.__qualname__ = procedure.__name__
    test.__doc__ = procedure.__doc__
    return cocotb.test()(test)


for _name, _procedure in PROCEDURES.items():
    globals()[_name] = cocotb_test(_procedure)
