"""The ``Bus`` a testbench drives the PE through, the same on every simulator.

Pure Python (no simulator import), so that the same testbench runs the PE on the Amaranth simulator
(``AmaranthBus``) and on Icarus or Verilator through cocotb (``deca.sim.bench.cocotb_bus.CocotbBus``).

Ports are named as in the generated Verilog (``tepl_req__0__valid``, ``mem_resp__payload``...);
values are non-negative ints (a payload is its flat bit vector).

- ``set(name, value)`` drives an input for the current cycle;
- ``await settle()`` lets combinational outputs settle after the inputs were set; no ``set``
  may follow in the same cycle;
- ``get(name) -> int`` reads a settled output, raising ``UnresolvedValue`` on X or Z;
- ``await tick()`` advances one clock cycle: the rising edge, where the handshakes the cycle
  showed take place, and the start of the next cycle.
"""

from typing import Protocol

from amaranth.hdl import Value


class CheckFailure(AssertionError):
    """The PE broke its contract."""


class UnresolvedValue(CheckFailure):
    """An output read as X or Z."""


class Mismatch(CheckFailure):
    """A completion differs from what the core expects."""


class ProtocolError(CheckFailure):
    """A port rule or the memory contract was broken."""


class Hang(CheckFailure):
    """Nothing happened for too long."""


class Bus(Protocol):
    """See the module docstring."""

    def set(self, name: str, value: int) -> None: ...

    def get(self, name: str) -> int: ...

    async def settle(self) -> None: ...

    async def tick(self) -> None: ...


class AmaranthBus:
    """The Bus on an Amaranth testbench context (``sim.add_testbench``), for a component's ports."""

    def __init__(self, ctx, component):
        self.ctx = ctx
        self._ports = {"__".join(map(str, path)): Value.cast(value)
                       for path, _, value in component.signature.flatten(component)}

    def set(self, name, value):
        self.ctx.set(self._ports[name], value)

    def get(self, name):
        return self.ctx.get(self._ports[name])

    async def settle(self):
        pass  # a testbench's ctx.get already sees the settled values

    async def tick(self):
        await self.ctx.tick()


class ReusedSimulator:
    """An Amaranth simulator of ``top``, built once and reset between runs: elaborating a PE and
    compiling it for the simulator takes 20 to 40 s, longer than most runs on it. ``run(bench,
    process)`` runs the testbench ``bench(ctx)`` to its end, with the process ``process(ctx)``
    alongside, from the initial state (``Simulator.reset``: every signal and memory back to its
    initial value, every process restarted)."""

    def __init__(self, top, period=1e-9):
        from amaranth.sim import Simulator  # not at the top: this module stays free of simulators

        self._sim, self._job, self._used = Simulator(top), None, False
        self._sim.add_clock(period)

        async def bench(ctx):
            await self._job[0](ctx)

        async def process(ctx):
            if self._job[1] is not None:
                await self._job[1](ctx)

        self._sim.add_testbench(bench)
        self._sim.add_process(process)

    def run(self, bench, process=None):
        if self._used:
            self._sim.reset()
        self._used, self._job = True, (bench, process)
        self._sim.run()


def drive_idle(bus, inputs):
    """Drive every input in ``inputs`` to 0: no valid, no ready, no register write."""
    for name in inputs:
        bus.set(name, 0)


def read_outputs(bus, outputs, cycle):
    """Every output's settled value; X or Z anywhere fails naming the port and the cycle."""
    try:
        return {name: bus.get(name) for name in outputs}
    except UnresolvedValue as e:
        raise UnresolvedValue(f"cycle {cycle}: {e}") from None


async def idle_cycles(bus, ports, cycles):
    """Run ``cycles`` cycles with idle inputs, checking that no output of ``ports`` (a PePorts) is X
    or Z; returns the last outputs."""
    drive_idle(bus, ports.inputs)
    for cycle in range(cycles):
        await bus.settle()
        outputs = read_outputs(bus, ports.outputs, cycle)
        await bus.tick()
    return outputs


async def reset(bus, cycles=4):
    """Hold ``rst`` high for ``cycles`` clock edges; returns at the start of the first cycle out of reset."""
    bus.set("rst", 1)
    for _ in range(cycles):
        await bus.tick()
    bus.set("rst", 0)
