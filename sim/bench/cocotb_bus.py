"""The harness's ``Bus`` on cocotb 2.x (see ``deca.sim.bench.bus``).

A cycle runs from one falling clock edge to the next: inputs are written at the falling edge,
``settle`` waits for ReadOnly in that same time step (combinational outputs have settled, the
rising edge in the middle of the cycle has not come yet), and ``tick`` waits for the next falling
edge, past the rising edge where the handshakes happen. Nothing may be written in ReadOnly, so
``set`` between ``settle`` and ``tick`` is refused.
"""

import json
import os

from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, ReadOnly

from .bus import UnresolvedValue
from .runner import PARAMS_ENV


class CocotbBus:
    """Drives and samples the ports of ``dut`` (the top-level handle) by Verilog name."""

    def __init__(self, dut, clock="clk"):
        self.dut = dut
        self._clk = getattr(dut, clock)
        self._handles = {}
        self._driven = {}  # last value written to each input: rewriting an unchanged value is a costly VPI call
        self._settled = False

    def _handle(self, name):
        handle = self._handles.get(name)
        if handle is None:
            handle = self._handles[name] = getattr(self.dut, name)
        return handle

    def set(self, name, value):
        if self._settled:
            raise RuntimeError(f"Bus.set({name!r}) after settle(): inputs are frozen until tick()")
        value = int(value)
        if self._driven.get(name) != value:
            self._handle(name).value = value
            self._driven[name] = value

    def get(self, name):
        # str() of a cocotb value is its bit string, MSB first; int() refuses X, Z and the like.
        text = str(self._handle(name).value)
        try:
            return int(text, 2)
        except ValueError:
            raise UnresolvedValue(f"{name} = {text}") from None

    def width(self, name):
        return len(self._handle(name))

    async def settle(self):
        if not self._settled:
            await ReadOnly()
            self._settled = True

    async def tick(self):
        await FallingEdge(self._clk)
        self._settled = False


async def start(dut, period_ns=10):
    """Start the clock on ``dut.clk``; return a CocotbBus at the start of a cycle."""
    Clock(dut.clk, period_ns, unit="ns").start()
    bus = CocotbBus(dut)
    await bus.tick()
    return bus


def tb_params():
    """The testbench parameters ``deca.sim.rtl_runner.run`` passed (a dict)."""
    return json.loads(os.environ.get(PARAMS_ENV, "{}"))
