"""cocotb testbench that replays one batch of ``deca verify`` (``deca verify --replay TILE``, with
waves): the batch's PE from reset, its draws and checks as in the regression, on the Python Harness.

Parameters come as JSON in $DECA_TB_PARAMS: the design, ``seed``, ``block``, ``tiles`` (the
block's requests), ``block_tiles`` (the run's block size), ``batch``.
"""

import cocotb

from deca.sim.bench.cocotb_bus import start, tb_params
from deca.sim.bench.pe_bench import Bench

from .regression import block_params, replay


@cocotb.test()
async def replay_batch(dut):
    p = tb_params()
    bus = await start(dut)
    bench = Bench(bus, {**block_params(p["W"], p["L"], p["loaders"]), "seed": p["seed"]}, dut._log.info)
    record = await replay(bench, p["seed"], p["block"], p["tiles"], p["block_tiles"], p["batch"])
    assert not record["failures"], record["failures"][0]["message"]
