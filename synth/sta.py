"""Static timing and power of a mapped, hierarchical netlist with liberty cells and SRAM macros.

Timing (graph-based, one corner, NLDM), as OpenSTA does it: each net has a rising and a falling
arrival; each cell output's edge arrives at the latest, over its timing arcs and the input edges the
arc's ``timing_sense`` ties to it (positive unate: the same edge, negative: the other, non-unate:
both), of (input arrival + delay(input slew, output load)), its slew the largest of those arcs'; the
load is the sum of the reader pins' capacitances for that edge (no wire load: there is no
placement; a macro's pins on one net count once, as one pin of a real macro). ABC maps one module
at a time and cannot see the loads of nets that leave it, so a net loaded beyond its driver's ``max_capacitance`` gets
a buffer tree here, as placement's design repair would add: the library's highest-gain buffer,
each driving at most a quarter of its own limit, level by level up to one buffer at the driver;
the tree's delay adds to the driver's, its buffers to the driver's block's area and power. A
flip-flop's setup time is its constraint table's for the data's edge. The clock is ideal (arrival
0, slew ``CLOCK_SLEW_PS``, no skew) at every flip-flop, gated or not, as a balanced clock tree
makes it; an integrated clock gate's clock pin then sees the edge its insertion delay early (its
clock-to-gated-clock arc at its load, and the gated net's buffer tree), and its enable's setup is
checked against that (the clock-gating check, an endpoint like a flip-flop's data pin). Paths start at flip-flop outputs (clock-to-Q arc) and SRAM
macro read data (the macro's access time), and end at flip-flop data pins (setup arc) and macro inputs (the macro's setup time). The
design's memories have asynchronous reads; as macros they are read synchronously, the register
that feeds the address taken into the macro (so the macro's clock starts the read path). Inputs
arrive and outputs are needed with half a clock period to spare: a path from an input to a
register or from a register to an output must fit in half the period. A combinational path from
an input straight to an output (a ready/valid chain through the design) is reported but not part
of the period: how much of the cycle it gets depends on the logic around the design.

Power: leakage is each cell's state-averaged liberty leakage plus the macros'. Dynamic power at
frequency f is, per net toggle, the driving pin's internal energy (``toggle_energy_fj``: the mean of
its rise and fall tables over its states, summed over the supply rails) plus C V^2 / 2 of the net's
load, and per clock cycle each flip-flop's clock-pin internal energy (two toggles; behind a clock
gate, two times the share of cycles its enable is high: the gated clock's toggles, which also
charge the gate's output and the gated net) and each macro's access energy times its access rate. The toggle rates
come from the caller (``activity``: toggles per cycle of each net), by default one rate for all.
"""

from dataclasses import dataclass, field

from .netlist import NetlistError, find, flatten

EDGES = ("rise", "fall")
CLOCK_SLEW_PS = 20.0
#: Share of cycles a clock gate's enable is high when no simulation says (OpenSTA's default duty).
DEFAULT_DUTY = 0.5
INPUT_SLEW_PS = 20.0
#: A tree buffer drives at most this fraction of its max_capacitance (keeps its slew moderate).
TREE_LOAD_FRACTION = 0.25
MACRO = "$mem_v2"
#: Ports of Yosys's $mem_v2 cell, by role in a macro.
MACRO_OUTPUTS = ("RD_DATA",)
MACRO_CLOCKS = ("RD_CLK", "WR_CLK")
#: Modules listed in ``Timing.worst_ends``.
WORST_ENDS = 12


@dataclass
class PathStep:
    cell: str          # liberty cell or macro
    module: str        # the generated module the cell is in
    block: str
    delay_ps: float    # what this cell adds (clock-to-Q or access time for the first, setup for the last)
    arrival_ps: float
    net: str = ""      # the net it drives, by its RTL name where Yosys kept one, to find the path in the design
    edge: str = ""     # that net's transition on the path: "rise" or "fall"


@dataclass
class Timing:
    critical_ps: float           # the register-to-register critical path, setup included
    io_ps: float                 # the longest path from an input to a register or a register to an output
    through_ps: float            # the longest combinational path from an input to an output
    period_ps: float             # max(critical, 2 x io)
    limit: str                   # "register to register" or "input/output"
    path: list                   # PathStep of the critical register-to-register path
    io_path: list                # PathStep of the longest input-to-register or register-to-output path
    per_block_ps: dict           # block -> its cells' share of that path
    cells: int
    #: [module, ps]: the worst register-to-register path into each module's registers and macros,
    #: the WORST_ENDS slowest modules, slowest first: what else a faster clock must fix.
    worst_ends: list

    @property
    def fmax_ghz(self):
        return 1000.0 / self.period_ps if self.period_ps > 0 else float("inf")


@dataclass
class Power:
    leakage_mw: dict = field(default_factory=dict)   # block -> mW
    dynamic_mw: dict = field(default_factory=dict)   # block -> mW
    frequency_ghz: float = 0.0
    activity: str = ""                               # where the toggle rates come from
    buffers: dict = field(default_factory=dict)      # block -> tree buffers its nets got


def macro_pin_caps(input_cap_ff, pins, shared_address):
    """{pin: capacitance} of a macro's $mem_v2 pins ``pins``, as its liberty cell gives them
    (deca.synth.signoff.macro_liberty) and so OpenSTA counts them, every pin: ``input_cap_ff`` (the
    model's) for each data, address and enable pin, none for the clocks; Yosys gives a write port an
    enable bit per data bit where a macro has one write enable, so the bits share that pin's
    capacitance; a ``shared_address`` (1rw) macro has one address pin, counted as the write port's."""
    enables = sum(1 for pin in pins if pin.split("[")[0] == "WR_EN") or 1
    caps = {}
    for pin in pins:
        base = pin.split("[")[0]
        caps[pin] = (0.0 if base in MACRO_CLOCKS or base == "RD_ADDR" and shared_address
                     else input_cap_ff / (enables if base == "WR_EN" else 1))
    return caps


def shares_address(pins):
    """Whether a $mem_v2 cell's connections ``pins`` ([(pin, net)]) put its read address on its
    write address's nets (a 1rw macro, deca.synth.memories.Memory.shared_address)."""
    read, write = ([net for pin, net in pins if pin.split("[")[0] == base] for base in ("RD_ADDR", "WR_ADDR"))
    return bool(read) and read == write


class Design:
    """The flattened netlist with each cell's liberty data: what timing() and power() walk."""

    def __init__(self, models, top, block_of, library, macros):
        parent, placed = flatten(models, top)
        self.library, self.macros, self.top = library, macros, top
        # Kept for naming nets: model ``m``'s local net ``n`` of the instance at ``base`` is
        # ``find(parent, base + n)`` (deca.synth.activity).
        self.models, self.parent, self.placed = models, parent, placed
        self.cells = []    # (module, kind, [(pin, net)], params)
        for name, base in placed:
            for kind, pins, params in models[name].cells:
                if kind != MACRO and kind not in library.cells:
                    raise NetlistError(f"unmapped cell {kind} in module {name} (not in the liberty files)")
                self.cells.append((name, kind, [(pin, find(parent, base + net)) for pin, net in pins], params))
        self.block_of = block_of
        self.inputs = {find(parent, n) for n in models[top].inputs}
        self.outputs = {find(parent, n) for n in models[top].outputs}
        # load: a net's readers' largest pin capacitances (power, buffer trees); edge_load: their
        # capacitances for each of its transitions (delays).
        # Every reader pin counts, a macro's as its liberty cell gives it (``macro_pin_caps``).
        self.load, self.edge_load, self.driver = {}, {}, {}
        self.macro_caps = {index: macro_pin_caps(macros.input_cap_ff, [pin for pin, _ in pins], shares_address(pins))
                           for index, (_, kind, pins, _) in enumerate(self.cells) if kind == MACRO}
        for index, (_, kind, pins, _) in enumerate(self.cells):
            for pin, net in pins:
                if self.is_output(kind, pin):
                    if net in self.driver:
                        raise NetlistError(f"a net is driven by two cells ({self.cells[self.driver[net][0]][1]} "
                                           f"and {kind})")
                    self.driver[net] = (index, pin)
                else:
                    self.load[net] = self.load.get(net, 0.0) + self.pin_cap(index, pin)
                    loads = self.edge_load.setdefault(net, {"rise": 0.0, "fall": 0.0})
                    for edge in EDGES:
                        loads[edge] += self.pin_cap(index, pin, edge)
        self.buffer = library.tree_buffer()
        self.trees = {}   # net -> [(buffers, load on each)], from the driver to the loads
        for net, (index, pin) in self.driver.items():
            kind = self.cells[index][1]
            limit = None if kind == MACRO else library.cells[kind].pins[pin].max_capacitance
            if self.buffer and limit is not None and self.load.get(net, 0.0) > limit:
                self.trees[net] = self._tree(self.load[net])

    def gate_of(self, net):
        """(cell index, liberty cell) of the clock gate whose gated clock is ``net``, else None."""
        index = self.driver.get(net, (None,))[0]
        if index is None or self.cells[index][1] == MACRO:
            return None
        cell = self.library.cells[self.cells[index][1]]
        return (index, cell) if cell.clock_gate else None

    def insertion_ps(self, gate):
        """The delay from clock gate ``gate``'s clock pin to the clock pins its gated clock reaches:
        its clock-to-gated-clock arc (rising, the ideal clock's slew in, its load) and the net's
        buffer tree."""
        _, kind, pins, _ = self.cells[gate]
        cell = self.library.cells[kind]
        net = dict(pins)[cell.clock_gate[2]]
        load = self.driven_load(net, "rise")
        arcs = [arc for arc in cell.pins[cell.clock_gate[2]].arcs
                if arc.kind.startswith("combinational") and "rise" in arc.delay]
        delay = max(arc.delay["rise"].lookup(slew=CLOCK_SLEW_PS, load=load) for arc in arcs)
        slew = max(arc.slew["rise"].lookup(slew=CLOCK_SLEW_PS, load=load) for arc in arcs)
        return self.through_tree(net, "rise", delay, slew)[0]

    def clock_rate(self, net, duty):
        """Toggles per cycle of clock net ``net``: 2 for the clock, times the duty (share of cycles
        enabled, ``duty(enable net)``) of each clock gate on the way."""
        gate = self.gate_of(net)
        if gate is None:
            return 2.0
        index, cell = gate
        clock, enable, _ = cell.clock_gate
        pins = dict(self.cells[index][2])
        return self.clock_rate(pins[clock], duty) * min(1.0, max(0.0, duty(pins[enable])))

    def net_name(self, net):
        """A name of global net ``net``, with its module's path below the top: an RTL name (flip-flop
        outputs, ports, kept signals) where one reaches it, else the generated one."""
        if not hasattr(self, "_names"):
            self._names = {}
            for name, base in self.placed:
                below = name.removeprefix(self.top).lstrip(".")
                for local, index in self.models[name].nets.items():
                    full = f"{below}.{local}" if below else local
                    g = find(self.parent, base + index)
                    generated = local.startswith(("$", "_"))
                    if g not in self._names or self._names[g][0] and not generated:
                        self._names[g] = (generated, full)
        return self._names.get(net, (True, ""))[1]

    def _tree(self, load):
        out = self.buffer.pins[self.buffer.outputs[0]]
        per = out.max_capacitance * TREE_LOAD_FRACTION
        cin = max(p.capacitance for n, p in self.buffer.pins.items() if n not in self.buffer.outputs)
        levels = []
        while True:
            n = max(1, -(-load // per))
            levels.append((int(n), load / n))
            if n == 1:
                return levels[::-1]
            load = n * cin

    def driven_load(self, net, edge):
        """The load the net's driver sees on ``edge``: the first tree buffer's input, or the net's pins."""
        if net in self.trees:
            (cin,) = [p for n, p in self.buffer.pins.items() if n not in self.buffer.outputs]
            return cin.edge_capacitance.get(edge, cin.capacitance)
        return self.edge_load.get(net, {}).get(edge, 0.0)

    def through_tree(self, net, edge, at, slew):
        """(arrival, slew) of ``edge`` at the loads of ``net`` given its driver's output (the tree's
        buffers do not invert)."""
        arc = self.buffer.pins[self.buffer.outputs[0]].arcs[0]
        for _, load in self.trees.get(net, ()):
            at, slew = at + arc.delay[edge].lookup(slew=slew, load=load), arc.slew[edge].lookup(slew=slew, load=load)
        return at, slew

    def tree_buffers(self, net):
        return sum(n for n, _ in self.trees.get(net, ()))

    def tree_energy_fj(self, net):
        """Energy of one toggle of ``net`` in its tree: the buffers' internal energy and input pins."""
        out = self.buffer.pins[self.buffer.outputs[0]]
        cin = max(p.capacitance for n, p in self.buffer.pins.items() if n not in self.buffer.outputs)
        total = 0.0
        for n, load in self.trees.get(net, ()):
            total += n * (toggle_energy_fj(out, slew=INPUT_SLEW_PS, load=load) + 0.5 * cin * self.library.voltage ** 2)
        return total

    def is_output(self, kind, pin):
        if kind == MACRO:
            return pin.split("[")[0] in MACRO_OUTPUTS
        p = self.library.cells[kind].pins.get(pin)
        return p is not None and p.direction == "output"

    def pin_cap(self, index, pin, edge=None):
        """The capacitance of reader pin ``pin`` of cell ``index``: for ``edge``, else the largest."""
        kind = self.cells[index][1]
        if kind == MACRO:
            return self.macro_caps[index][pin]
        p = self.library.cells[kind].pins.get(pin)
        return 0.0 if p is None else p.edge_capacitance.get(edge, p.capacitance)

    def sequential(self, kind):
        return kind == MACRO or self.library.cells[kind].sequential


def toggle_energy_fj(pin, **x):
    """Internal energy of one toggle of ``pin`` at ``x`` (slew, load): the mean of rise and fall,
    averaged over the pin's internal_power groups of one supply pin (its states and related pins),
    summed over the supply pins (each group holds one rail's share: ASAP7 gives VDD and VSS apart)."""
    rails = {}
    for _, rail, edges in pin.energy:
        rails.setdefault(rail, []).append(sum(t.lookup(**x) for t in edges.values()) / len(edges))
    return sum(sum(v) / len(v) for v in rails.values())


def _latest(arr, net, edge, at, slew, pred):
    """Keep the later arrival of ``net``'s ``edge`` and the larger slew (as OpenSTA merges them)."""
    old = arr.setdefault(net, {}).get(edge)
    if old is None:
        arr[net][edge] = (at, slew, pred)
    else:
        arr[net][edge] = (at, max(slew, old[1]), pred) if at > old[0] else (old[0], max(slew, old[1]), old[2])


def timing(design, gate_checks=None):
    """The critical register-to-register path and the longest input/output path. ``gate_checks``: a
    dict that gets, for each clock gate (its cell index), the time its enable's check needs (the
    latest arrival plus setup and insertion delay: the gate meets a period at least that long)."""
    lib, cells = design.library.cells, design.cells
    # Arrival per net, per transition of the net ("rise"/"fall") and per source kind ("r": from a
    # register or macro, "i": from an input): (arrival, slew, (cell index, input net, its edge)).
    arrival = {"r": {}, "i": {n: {e: (0.0, INPUT_SLEW_PS, None) for e in EDGES} for n in design.inputs}}
    # endpoints: (cell index, pin, net, setup tables by edge or fixed setup, capture clock's arrival)
    comb, endpoints = [], []
    for index, (module, kind, pins, _) in enumerate(cells):
        if kind == MACRO:
            for pin, net in pins:
                role = pin.split("[")[0]
                if role in MACRO_OUTPUTS:
                    arrival["r"][net] = {e: (design.macros.access_ps, CLOCK_SLEW_PS, (index, None, None)) for e in EDGES}
                elif role not in MACRO_CLOCKS:
                    endpoints.append((index, pin, net, design.macros.setup_ps, 0.0))
        elif lib[kind].sequential or lib[kind].clock_gate:
            # The clock tree is balanced: every flip-flop's clock, gated or not, arrives at the same
            # time; a clock gate's clock pin then sees the edge its insertion delay earlier, and its
            # enable must be set up by then (the clock-gating check). Its gated clock is not data.
            clock_at = -design.insertion_ps(index) if lib[kind].clock_gate else 0.0
            for pin, net in pins:
                p = lib[kind].pins.get(pin)
                for arc in p.arcs if p else ():
                    if arc.kind in ("rising_edge", "falling_edge"):
                        for edge, table in arc.delay.items():
                            load = design.driven_load(net, edge)
                            at, slew = design.through_tree(net, edge, table.lookup(slew=CLOCK_SLEW_PS, load=load),
                                                           arc.slew[edge].lookup(slew=CLOCK_SLEW_PS, load=load))
                            _latest(arrival["r"], net, edge, at, slew, (index, None, None))
                    elif arc.kind == "setup_rising":
                        endpoints.append((index, pin, net, arc.delay, clock_at))
        else:
            comb.append(index)
    order = _topological(design, comb)
    for index in order:
        _, kind, pins, _ = cells[index]
        ins = dict(pins)
        for pin, net in pins:
            p = lib[kind].pins.get(pin)
            if p is None or p.direction != "output":
                continue
            loads = {edge: design.driven_load(net, edge) for edge in EDGES}
            for arr in arrival.values():
                found = {}
                for arc in p.arcs:
                    source = ins.get(arc.related)
                    if not arc.kind.startswith("combinational") or source not in arr:
                        continue
                    for edge, table in arc.delay.items():
                        load = loads[edge]
                        for cause in arc.causes(edge):
                            if cause in arr[source]:
                                t, slew, _ = arr[source][cause]
                                _latest(found, net, edge, t + table.lookup(slew=slew, load=load),
                                        arc.slew[edge].lookup(slew=slew, load=load), (index, source, cause))
                for edge, (at, slew, pred) in found.get(net, {}).items():
                    arr.setdefault(net, {})[edge] = (*design.through_tree(net, edge, at, slew), pred)

    def ends(tag):
        arr, found = arrival[tag], []
        for index, _, net, check, clock_at in endpoints:
            for edge, (at, slew, _) in arr.get(net, {}).items():
                setup = check if isinstance(check, float) else check[edge].lookup(slew=slew, clock_slew=CLOCK_SLEW_PS)
                # An earlier capture clock (a clock gate's) leaves the data that much less time.
                found.append((at + setup - clock_at, index, net, edge))
        found += [(at, None, net, edge) for net in design.outputs for edge, (at, _, _) in arr.get(net, {}).items()]
        return found

    reg = [e for e in ends("r") if e[1] is not None]
    if gate_checks is not None:
        for at, index, _, _ in reg:
            if cells[index][1] != MACRO and lib[cells[index][1]].clock_gate:
                gate_checks[index] = max(gate_checks.get(index, 0.0), at)
    if not reg:
        raise NetlistError("no register-to-register path: the design has no flip-flops or macros in a path")
    critical = max(reg)
    by_module = {}
    for at, index, _, _ in reg:
        module = cells[index][0].removeprefix(f"{design.top}.")
        by_module[module] = max(by_module.get(module, 0.0), at)
    # Slowest first; among equal ones (copies of a register) the critical path's module.
    critical_module = cells[critical[1]][0].removeprefix(f"{design.top}.")
    worst_ends = sorted(([m, ps] for m, ps in by_module.items()),
                        key=lambda x: (-x[1], x[0] != critical_module))[:WORST_ENDS]
    io_ends = [("i", e) for e in ends("i") if e[1] is not None] + [("r", e) for e in ends("r") if e[1] is None]
    io_tag, io = max(io_ends, key=lambda x: x[1][0], default=(None, (0.0, None, None, None)))
    through = max([e for e in ends("i") if e[1] is None], default=(0.0, None, None, None))
    path = _trace(design, arrival["r"], critical)
    per_block = {}
    for step in path:
        per_block[step.block] = per_block.get(step.block, 0.0) + step.delay_ps
    period = max(critical[0], 2 * io[0])
    return Timing(critical_ps=critical[0], io_ps=io[0], through_ps=through[0], period_ps=period,
                  limit="register to register" if critical[0] >= 2 * io[0] else "input/output",
                  path=path, io_path=_trace(design, arrival[io_tag], io) if io_tag else [],
                  per_block_ps=per_block, cells=len(cells), worst_ends=worst_ends)


def _topological(design, comb):
    cells, driver = design.cells, design.driver
    is_comb = set(comb)
    preds = {}
    for index in comb:
        _, kind, pins, _ = cells[index]
        preds[index] = {driver[net][0] for pin, net in pins
                        if not design.is_output(kind, pin) and net in driver and driver[net][0] in is_comb}
    readers = {index: [] for index in comb}
    for index, ps in preds.items():
        for d in ps:
            readers[d].append(index)
    pending = {index: len(ps) for index, ps in preds.items()}
    ready = [index for index, n in pending.items() if n == 0]
    order = []
    while ready:
        index = ready.pop()
        order.append(index)
        for r in readers[index]:
            pending[r] -= 1
            if not pending[r]:
                ready.append(r)
    if len(order) != len(comb):
        raise NetlistError(f"combinational loop: {len(comb) - len(order)} cells are on or behind one")
    return order


def _trace(design, arr, end):
    """The cells of the path ending at ``end`` (its total, endpoint cell or None for an output, net,
    the net's edge); a path from an input starts with a step named "input"."""
    total, index, net, edge = end
    steps = []
    if index is not None:
        module, kind, pins, _ = design.cells[index]
        # The endpoint is named by what it stores: its output (a flip-flop's Q), else the net it takes.
        stored = next((n for pin, n in pins if design.is_output(kind, pin)), net)
        steps.append(PathStep(kind, module, design.block_of(module), total - arr[net][edge][0], total,
                              design.net_name(stored), edge))
    else:
        steps.append(PathStep("output", design.top, design.block_of(design.top), 0.0, total, edge=edge))
    while True:
        at, _, pred = arr[net][edge]
        if pred is None:
            steps.append(PathStep("input", design.top, design.block_of(design.top), 0.0, 0.0, design.net_name(net),
                                  edge))
            break
        cell, source, cause = pred
        module, kind, _, _ = design.cells[cell]
        before = arr[source][cause][0] if source is not None else 0.0
        if net in design.trees:
            kind = f"{kind} + {len(design.trees[net])}-level {design.buffer.name} tree"
        steps.append(PathStep(kind, module, design.block_of(module), at - before, at, design.net_name(net), edge))
        if source is None:
            break
        net, edge = source, cause
    return steps[::-1]


def power(design, frequency_ghz, activity, activity_note, duty=lambda net: DEFAULT_DUTY):
    """Leakage and dynamic power per block (mW) at ``frequency_ghz``; ``activity(net)`` is the toggle
    rate of a net (toggles per cycle), also the access rate of a macro; ``duty(net)`` the share of
    cycles a clock gate's enable net is high. A clock pin and a gated clock net toggle at
    ``Design.clock_rate``: twice a cycle, times the duty of each gate on the way."""
    lib, macros, volts = design.library.cells, design.macros, design.library.voltage
    leak, dyn, buffers = {}, {}, {}
    f = frequency_ghz * 1e9
    for module, kind, pins, _ in design.cells:
        block = design.block_of(module)
        if kind == MACRO:
            leak[block] = leak.get(block, 0.0) + macros.leakage_uw * 1e-3
            rate = max((activity(net) for pin, net in pins if pin.startswith(("RD_ADDR", "WR_EN"))), default=0.0)
            energy_fj = macros.energy_fj * min(rate, 1.0)
        else:
            cell = lib[kind]
            leak[block] = leak.get(block, 0.0) + cell.leakage * 1e-9
            energy_fj = 0.0
            for pin, net in pins:
                p = cell.pins.get(pin)
                if p is None:
                    continue
                if p.clock:
                    # The clock pin toggles with its clock whatever the data does.
                    energy_fj += design.clock_rate(net, duty) * toggle_energy_fj(p, slew=CLOCK_SLEW_PS)
                elif p.direction == "output":
                    rate = design.clock_rate(net, duty) if cell.clock_gate else activity(net)
                    load = design.load.get(net, 0.0)
                    n = design.tree_buffers(net)
                    if n:
                        buffers[block] = buffers.get(block, 0) + n
                        leak[block] += n * design.buffer.leakage * 1e-9
                        energy_fj += rate * design.tree_energy_fj(net)
                    internal = toggle_energy_fj(p, slew=INPUT_SLEW_PS, load=load)
                    energy_fj += rate * (internal + 0.5 * load * volts ** 2)
        dyn[block] = dyn.get(block, 0.0) + energy_fj * 1e-15 * f * 1e3
    return Power(leakage_mw=leak, dynamic_mw=dyn, frequency_ghz=frequency_ghz, activity=activity_note,
                 buffers=buffers)
