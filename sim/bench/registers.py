"""Register access over the PE's ``cfg`` bus (every helper starts and ends at the start of a cycle)."""

from deca.hw.layouts import config_fields
from deca.hw.registers import COUNTERS, PREFETCH_DEGREE, READ_LATENCY, REGISTER_ADDR, field_value


async def write_regs(bus, name, values):
    """Write register ``name`` with each of ``values``, one a cycle (LUT_DATA's index counts up with
    each); returns once the last has taken effect (a cycle more: the bus is registered), so that
    what follows (a counter clear's first counted cycle) sees it."""
    bus.set("cfg__addr", REGISTER_ADDR[name])
    bus.set("cfg__we", 1)
    for value in values:
        bus.set("cfg__wdata", value)
        await bus.tick()
    bus.set("cfg__we", 0)
    await bus.tick()


async def write_reg(bus, name, value):
    await write_regs(bus, name, [value])


async def read_regs(bus, names):
    """Read registers ``names`` back to back (one cycle each, plus READ_LATENCY); returns {name: value}."""
    bus.set("cfg__we", 0)
    values = []
    # rdata shows the register addressed READ_LATENCY cycles earlier: the next addresses go out meanwhile.
    for cycle in range(len(names) + READ_LATENCY):
        if cycle < len(names):
            bus.set("cfg__addr", REGISTER_ADDR[names[cycle]])
        if cycle >= READ_LATENCY:
            await bus.settle()
            values.append(bus.get("cfg__rdata"))
        await bus.tick()
    return dict(zip(names, values))


async def read_reg(bus, name):
    return (await read_regs(bus, [name]))[name]


async def read_counters(bus):
    return await read_regs(bus, [name for name, _ in COUNTERS])


async def clear_counters(bus):
    await write_reg(bus, "CONTROL", field_value("CONTROL", CLEAR_COUNTERS=1))


def config_word(config):
    """The CONFIG register value for a golden TileConfig."""
    return field_value("CONFIG", **{name.upper(): int(getattr(value, "value", value))
                                    for name, value in config_fields(config).items()})


async def configure(bus, config, prefetch_degree=PREFETCH_DEGREE):
    """Write CONFIG, the LUT entries the codebook uses (none when Q = 16) and PREFETCH.DEGREE."""
    await write_reg(bus, "CONFIG", config_word(config))
    if config.q_bits != 16:
        await write_reg(bus, "LUT_INDEX", 0)
        await write_regs(bus, "LUT_DATA", [int(entry) for entry in config.lut[:config.lut_size]])
    await write_reg(bus, "PREFETCH", field_value("PREFETCH", DEGREE=prefetch_degree))
