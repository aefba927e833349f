"""Switching activity from a simulation: toggles of every traced signal bit in a VCD, mapped onto
the nets of the mapped netlist.

A net whose name (``name`` or ``name[bit]`` in its module) is a traced signal of the matching
scope gets that bit's toggle rate: flip-flop outputs and ports keep their RTL names through
Yosys. A memory in flip-flops (nets ``mem.row[row].q[bit]``, ``_ROW_BIT``) is not in the trace (Verilator
leaves out arrays of more than 32 words): the count replays each of its write ports whose enable,
address and data are traced signals at every rising edge of the port's clock, so each row's writes
and each of its bits' toggles are the simulation's. The input and the output of an inverter or a
buffer toggle together, so a net next to a matched one through such a cell takes its rate. Every
other net (the logic ABC made) gets the average toggle rate per bit of the traced signals of the
module instance that drives it, or of the whole design where a module traced none: an estimate,
whose share of the dynamic power ``estimated_power`` gives. Rates are toggles per clock cycle over
the whole trace (cycles: half the clock's toggles).

Counting runs once over the file, one step per value change: each signal keeps its per-bit
counts as bit planes (plane k holds bit k of every bit's count), so adding a change is a
carry-save addition of the XOR of old and new value, whatever the signal's width. x and z read as 0.
"""

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from deca.hw.params import LOADERS

from . import sta
from .memories import rtlil_cells, rtlil_statements
from .netlist import CELL_NAME, find

#: The design's clock in the trace (cocotb drives the PE's ``clk``).
CLOCK = "clk"
_BIT = re.compile(r"^(.*)\[(\d+)\]$")
#: A bit of a memory's row in flip-flops: row r of memory ``mem`` is ``mem.row[r].q``
#: (``synth/memory_cells.v``), or ``mem[r]`` where ``memory_map`` built the memory.
_ROW_BIT = re.compile(r"^(.*?)(?:\.row)?\[(\d+)\](?:\.q)?\[(\d+)\]$")


class ActivityError(ValueError):
    """The trace cannot be read, or is not of this design."""


@dataclass
class Toggles:
    """Toggle counts of one trace: ``signals`` maps a scope (tuple of scope names from the root) to
    {signal name: (lowest bit index, [toggles of each bit])}."""

    cycles: float
    signals: dict
    source: str = ""
    workload: str = ""    # what ran, for the report
    #: {scope: {name: {bit: share of the trace's time at 1}}} of its one-bit signals (a clock gate's
    #: enable).
    high: dict = field(default_factory=dict)
    #: {scope: {memory: ([[writes of each bit] of each row], [[toggles of each bit] of each row])}} of
    #: the memories whose write ports the count replayed (``WritePort``); a bit is written when its
    #: enable is.
    memories: dict = field(default_factory=dict)
    #: {scope: {signal: {bit: rising clock edges at which it loaded}}} of the registers with an
    #: enable (``RegisterEnable``) whose enable is traced.
    loads: dict = field(default_factory=dict)

    def to_json(self):
        return json.dumps({"cycles": self.cycles, "source": self.source, "workload": self.workload,
                           "signals": [[list(scope), name, lsb, counts] for scope, sigs in self.signals.items()
                                       for name, (lsb, counts) in sigs.items()],
                           "high": [[list(scope), name, bit, share] for scope, sigs in self.high.items()
                                    for name, bits in sigs.items() for bit, share in bits.items()],
                           "memories": [[list(scope), name, writes, toggles] for scope, mems in self.memories.items()
                                        for name, (writes, toggles) in mems.items()],
                           "loads": [[list(scope), name, bit, n] for scope, sigs in self.loads.items()
                                     for name, bits in sigs.items() for bit, n in bits.items()]})

    @classmethod
    def from_json(cls, text):
        d = json.loads(text)
        signals, high, memories = {}, {}, {}
        for scope, name, lsb, counts in d["signals"]:
            signals.setdefault(tuple(scope), {})[name] = (lsb, counts)
        for scope, name, bit, share in d.get("high", ()):
            high.setdefault(tuple(scope), {}).setdefault(name, {})[bit] = share
        for scope, name, writes, toggles in d.get("memories", ()):
            memories.setdefault(tuple(scope), {})[name] = (writes, toggles)
        loads = {}
        for scope, name, bit, n in d.get("loads", ()):
            loads.setdefault(tuple(scope), {}).setdefault(name, {})[bit] = n
        return cls(d["cycles"], signals, d["source"], d["workload"], high, memories, loads)

    def scope_of(self, top):
        """The scope of design ``top`` (the shortest path ending in a scope named ``top``)."""
        return _root(self.signals, top, self.source)


def _root(scopes, top, source):
    """The shortest of ``scopes`` (tuples of scope names), or of their prefixes, ending in ``top``."""
    found = sorted((s for s in scopes if s and s[-1] == top), key=len)
    if not found:
        # A scope holding only subscopes is not a key: look at the prefixes too.
        found = sorted({s[:i + 1] for s in scopes for i, n in enumerate(s) if n == top}, key=len)
    if not found:
        tops = sorted({".".join(s[:2]) for s in scopes})[:5]
        raise ActivityError(f"the trace {source} has no scope of design {top} (its scopes: "
                            f"{', '.join(tops) or 'none'})")
    return found[0]


# Memories in flip-flops ---------------------------------------------------------------------------


@dataclass(frozen=True)
class WritePort:
    """A write port of a memory: in ``module`` (the generated module's name), ``memory`` (its MEMID)
    of ``words`` rows from address ``offset``; its ``clock`` bit and the bits (LSB first) of its
    ``enable`` (one per data bit), ``address`` and ``data``, each (signal, index) or a constant 0 or 1."""

    module: str
    memory: str
    words: int
    offset: int
    clock: tuple
    enable: tuple
    address: tuple
    data: tuple


def _sigspec(text, wires):
    """The bits (LSB first) of an RTLIL signal: (wire, index) or a constant 0 or 1 (x and z as 0).
    ``wires``: {wire: (lowest index, width)}."""
    tokens = text.replace("{", " { ").replace("}", " } ").split()

    def parse(i):
        t = tokens[i]
        if t == "{":
            parts, i = [], i + 1
            while tokens[i] != "}":
                bits, i = parse(i)
                parts.append(bits)
            return [b for part in reversed(parts) for b in part], i + 1   # concatenations list the MSBs first
        constant = re.fullmatch(r"\d+'([01xzm-]*)", t)
        if constant:
            return [int(c == "1") for c in reversed(constant.group(1))], i + 1
        if t.lstrip("-").isdigit():
            return [(int(t) >> k) & 1 for k in range(32)], i + 1
        name = t[1:] if t.startswith("\\") else t
        if i + 1 < len(tokens) and tokens[i + 1].startswith("["):
            hi, _, lo = tokens[i + 1].strip("[]").partition(":")
            return [(name, k) for k in range(int(lo or hi), int(hi) + 1)], i + 2
        lsb, width = wires.get(name, (0, 1))
        return [(name, k) for k in range(lsb, lsb + width)], i + 1

    return parse(0)[0]


def write_ports(rtlil):
    """The write ports (``WritePort``) of every ``$mem_v2`` cell of an RTLIL file (Yosys's
    ``memories.il``), but those clocked on a falling edge or not at all."""
    return [port for module, _, _, params, conns, wires in rtlil_cells(rtlil)
            for port in _ports(module, params, conns, wires)]


@dataclass(frozen=True)
class RegisterEnable:
    """A register slice that loads only when its ``enable`` bit equals ``polarity``, at a rising
    edge of ``clock``: in ``module``, its bits ``q``; each bit (signal, index) or a constant."""

    module: str
    clock: tuple
    enable: tuple
    polarity: int
    q: tuple


#: Yosys's flip-flop cells with an enable (after ``opt_dff``), clocked.
_ENABLED_FLOPS = ("$dffe", "$sdffe", "$sdffce", "$adffe", "$aldffe", "$dffsre")


def register_enables(rtlil):
    """The ``RegisterEnable`` of every flip-flop cell with an enable, clocked on a rising edge, of an
    RTLIL file (Yosys's ``memories.il``): the enable a clock gate of its bits takes after mapping."""
    found = []
    for module, _, _, params, conns, wires in rtlil_cells(rtlil, _ENABLED_FLOPS):
        if params.get("CLK_POLARITY", "1").endswith("1"):
            (clock,), (enable,) = _sigspec(conns["CLK"], wires), _sigspec(conns["EN"], wires)
            found.append(RegisterEnable(module, clock, enable, int(params.get("EN_POLARITY", "1")[-1]),
                                        tuple(_sigspec(conns["Q"], wires))))
    return found


def _ports(module, params, conns, wires):
    n, width, abits = int(params["WR_PORTS"]), int(params["WIDTH"]), int(params["ABITS"])
    if not n:
        return []
    clocked = params["WR_CLK_ENABLE"].split("'")[-1].zfill(n)
    rising = params["WR_CLK_POLARITY"].split("'")[-1].zfill(n)
    clock, enable = _sigspec(conns["WR_CLK"], wires), _sigspec(conns["WR_EN"], wires)
    address, data = _sigspec(conns["WR_ADDR"], wires), _sigspec(conns["WR_DATA"], wires)
    return [WritePort(module, params["MEMID"].strip('"').removeprefix("\\\\"), int(params["SIZE"]),
                      int(params.get("OFFSET", "0")), clock[i], tuple(enable[i * width:(i + 1) * width]),
                      tuple(address[i * abits:(i + 1) * abits]), tuple(data[i * width:(i + 1) * width]))
            for i in range(n) if clocked[-1 - i] == "1" and rising[-1 - i] == "1"]


def _chunks(bits, index):
    """``bits`` ((signal, index) or constants) as [(code, shift in the code's value, shift in the
    result)] and a constant part; None if a signal is not in ``index`` ({signal: (code, lsb)})."""
    chunks, constant = [], 0
    for k, bit in enumerate(bits):
        if isinstance(bit, int):
            constant |= bit << k
        elif bit[0] in index:
            code, lsb = index[bit[0]]
            chunks.append((code, bit[1] - lsb, k))
        else:
            return None
    return chunks, constant


def _value(text):
    # x and z count as 0: a bit that leaves x after reset is not a toggle of the logic.
    return int(text.translate(_XZ), 2) if text else 0


_XZ = str.maketrans("xXzZuUwW-", "000000000")


def _definitions(f, source):
    """Read the header up to $enddefinitions: {id code: [(scope, name, lsb, width)]}."""
    ids, scope = {}, []
    for line in f:
        words = line.split()
        if not words:
            continue
        while words[-1] != "$end" and words[0] in ("$var", "$scope"):
            more = f.readline()
            if not more:
                break
            words += more.split()
        key = words[0]
        if key == "$scope":
            scope.append(words[2])
        elif key == "$upscope":
            scope.pop()
        elif key == "$var":
            width, code, name = int(words[2]), words[3], words[4]
            lsb = 0
            rest = words[5:-1]
            if rest and rest[0].startswith("["):
                lo = rest[0].strip("[]").split(":")[-1]
                lsb = int(lo) if lo.lstrip("-").isdigit() else 0
            else:
                m = _BIT.match(name)
                if m and width == 1:
                    name, lsb = m.group(1), int(m.group(2))
            ids.setdefault(code, []).append((tuple(scope), name, lsb, width))
        elif key == "$enddefinitions":
            return ids
    raise ActivityError(f"{source} is not a VCD file (no $enddefinitions in it)")


def check_trace(path, top, clock=CLOCK):
    """Refuse, from its header, a trace that cannot be read, is not VCD, has no one-bit ``clock`` or
    no scope of design ``top``."""
    path = Path(path)
    try:
        with open(path, errors="replace") as f:
            ids = _definitions(f, path)
    except OSError as e:
        raise ActivityError(f"cannot read the trace {path}: {e.strerror}") from None
    variables = [v for vs in ids.values() for v in vs]
    if not any(name == clock and width == 1 for _, name, _, width in variables):
        raise ActivityError(f"the trace {path} has no clock {clock!r} that toggles")
    _root({v[0] for v in variables}, top, path)


def count_toggles(path, clock=CLOCK, ports=(), top=None, registers=()):
    """Toggles of every bit of every signal in the VCD file ``path``; the first value of a signal
    (from $dumpvars or its first change) is its start, not a toggle. ``ports``: ``WritePort``s of
    design ``top``, replayed at each rising edge of their clock on the values their signals had
    before it, for the memories whose ports are all traced; ``registers``: its ``RegisterEnable``s,
    whose loads are counted at those edges where their enable is traced."""
    path = Path(path)
    try:
        f = open(path, errors="replace")
    except OSError as e:
        raise ActivityError(f"cannot read the trace {path}: {e.strerror}") from None
    with f:
        ids = _definitions(f, path)
        single = {code for code, variables in ids.items() if all(v[3] == 1 for v in variables)}
        replay = _Replay(ids, ports, registers, top, path)
        prev, planes = {}, {}
        # One-bit signals: the time each spent at 1, and when it last changed.
        now, start, high, since = 0, None, {}, {}
        for line in f:
            c = line[0] if line else ""
            if c in "01xzXZ":
                code, text = line[1:].rstrip("\n\r "), c
            elif c in "bB":
                text, _, code = line[1:].rstrip("\n\r ").partition(" ")
            elif c == "#":
                now = int(line[1:])
                start = now if start is None else start
                replay.step += 1
                continue
            else:
                continue   # $dumpvars/$end, real values, comments
            new = _value(text)
            old = prev.get(code)
            prev[code] = new
            if code in replay.watched:
                replay.change(code, old, new, prev)
            if code in single:
                if old:
                    high[code] = high.get(code, 0) + now - since[code]
                since[code] = now
            if old is None:
                continue
            if old != new:
                _add(planes.setdefault(code, []), old ^ new)
    signals, clock_toggles, shares = {}, None, {}
    span = now - (start or 0)
    for code, variables in ids.items():
        pl = planes.get(code, [])
        if code in single and span > 0:
            at_one = high.get(code, 0) + (now - since[code] if prev.get(code) else 0)
            for scope, name, lsb, _ in variables:
                shares.setdefault(scope, {}).setdefault(name, {})[lsb] = at_one / span
        for scope, name, lsb, width in variables:
            signals.setdefault(scope, {})[name] = (lsb, _counts(pl, width))
            if name == clock and width == 1 and (clock_toggles is None or len(scope) < clock_toggles[0]):
                clock_toggles = (len(scope), signals[scope][name][1][0])
    if not signals:
        raise ActivityError(f"the trace {path} has no signals")
    if clock_toggles is None or clock_toggles[1] < 2:
        raise ActivityError(f"the trace {path} has no clock {clock!r} that toggles")
    return Toggles(clock_toggles[1] / 2, signals, str(path), f"the trace {path}", shares, replay.memories(),
                   replay.loaded())


def _add(planes, bits):
    """Add 1 to the count of each bit set in ``bits``: a carry-save addition into bit planes."""
    k = 0
    while bits:
        if k == len(planes):
            planes.append(0)
        x = planes[k]
        planes[k] = x ^ bits
        bits &= x
        k += 1


def _counts(planes, width):
    """Each bit's count from bit planes."""
    return [sum(((plane >> i) & 1) << k for k, plane in enumerate(planes)) for i in range(width)]


class _Replay:
    """The memories of ``ports`` rebuilt from the trace: each write port, at a rising edge of its
    clock, writes its data into its row under its enable, with the values its signals had before
    the edge's time step (a flip-flop samples those; the step's own changes come after the edge).
    And the edges at which each of ``registers`` loads (its enable at its polarity)."""

    def __init__(self, ids, ports, registers, top, source):
        self.step, self.watched, self.clocks, self.before, self.rows = 0, set(), {}, {}, {}
        self.enables, self.loads, self.registers = {}, [], []
        if not ports and not registers:
            return
        root = _root({v[0] for variables in ids.values() for v in variables}, top, source)
        by_scope = {}
        for code, variables in ids.items():
            for scope, name, lsb, _ in variables:
                by_scope.setdefault(scope, {})[name] = (code, lsb)

        def scope_of(module):
            below = module.removeprefix(top).lstrip(".")
            return root + tuple(below.split(".")) if below else root

        counters = {}   # one count per distinct (clock, enable, polarity)
        for register in registers:
            scope = scope_of(register.module)
            clock, enable = (_chunks((bit,), by_scope.get(scope, {})) for bit in (register.clock, register.enable))
            if clock is None or enable is None or not clock[0]:
                continue   # not traced: the gate of its bits keeps the default duty
            key = (clock[0][0][0], tuple(enable[0]), enable[1], register.polarity)
            if key not in counters:
                counters[key] = len(self.loads)
                self.loads.append(0)
                self.enables.setdefault(key[0], []).append((enable, register.polarity, counters[key]))
                self.watched |= {key[0], *(chunk[0] for chunk in enable[0])}
            self.registers.append((scope, register.q, counters[key]))
        grouped = {}
        for port in ports:
            grouped.setdefault((scope_of(port.module), port.memory), []).append(port)
        for (scope, memory), group in grouped.items():
            index = by_scope.get(scope, {})
            compiled = [[_chunks(bits, index) for bits in ((p.clock,), p.enable, p.address, p.data)] for p in group]
            if any(part is None for parts in compiled for part in parts) or any(not c[0][0] for c in compiled):
                continue   # a signal of a port is not traced (or a constant clock): its rows stay estimated
            words = group[0].words
            state = self.rows[scope, memory] = ([0] * words, [[] for _ in range(words)], [[] for _ in range(words)],
                                                len(group[0].data))
            for port, (clock, *parts) in zip(group, compiled):
                code = clock[0][0][0]
                self.clocks.setdefault(code, []).append((port, parts, state))
                self.watched |= {code, *(chunk[0] for part in parts for chunk in part[0])}

    def change(self, code, old, new, values):
        """``code`` went from ``old`` to ``new`` (``values``: every code's value, ``code``'s already new)."""
        if self.before.get(code, (None,))[0] != self.step:
            self.before[code] = (self.step, old or 0)
        if old == 0 and new == 1:
            for port, parts, state in self.clocks.get(code, ()):
                self._write(port, *(self._value(part, values) for part in parts), state)
            for enable, polarity, counter in self.enables.get(code, ()):
                if self._value(enable, values) == polarity:
                    self.loads[counter] += 1

    def _value(self, part, values):
        chunks, value = part
        for code, shift, k in chunks:
            step, old = self.before.get(code, (None, 0))
            value |= (((old if step == self.step else values.get(code) or 0) >> shift) & 1) << k
        return value

    @staticmethod
    def _write(port, enable, address, data, state):
        row = address - port.offset
        if not enable or not 0 <= row < port.words:
            return
        contents, writes, toggles, _ = state
        new = contents[row] & ~enable | data & enable
        _add(writes[row], enable)
        _add(toggles[row], contents[row] ^ new)
        contents[row] = new

    def memories(self):
        """{scope: {memory: ([[writes of each bit] of each row], [[toggles of each bit] of each row])}}."""
        out = {}
        for (scope, memory), (_, writes, toggles, width) in self.rows.items():
            out.setdefault(scope, {})[memory] = ([_counts(pl, width) for pl in writes],
                                                 [_counts(pl, width) for pl in toggles])
        return out

    def loaded(self):
        """{scope: {signal: {bit: edges at which it loaded}}} of the registers' traced bits."""
        out = {}
        for scope, q, counter in self.registers:
            for bit in q:
                if not isinstance(bit, int):
                    out.setdefault(scope, {}).setdefault(bit[0], {})[bit[1]] = self.loads[counter]
        return out


def _scopes(design, toggles):
    """(model name, base, its scope in the trace) of every module instance of ``design``."""
    root = toggles.scope_of(design.top)
    for name, base in design.placed:
        below = name.removeprefix(design.top).lstrip(".")
        yield name, base, root + tuple(below.split(".")) if below else root


def _signal_bit(net):
    """(signal, bit) a net's name stands for: ``name[bit]`` or ``name`` (bit 0); BLIF escapes a name
    that starts with ``$`` (Amaranth's ``$288``, a wire of the Verilog) as ``\\$288``, the trace does not."""
    m = _BIT.match(net)
    signal, bit = (m.group(1), int(m.group(2))) if m else (net, 0)
    return signal.removeprefix("\\"), bit


def _flop_outputs(rtlil):
    """{module: {flip-flop cell: the net its Q drives, as BLIF names it}} of an RTLIL file, for the
    flip-flops whose Q drives a net with a public name."""
    found, module, cell = {}, None, None
    for words in rtlil_statements(rtlil):
        if words[0] == "module":
            module = words[1].removeprefix("\\")
            found[module] = {}
        elif words[0] == "cell":
            cell = words[2] if "DFF" in words[1] else None
        elif words[0] == "end":
            cell = None
        elif cell and words[:2] == ["connect", "\\Q"] and words[2].startswith("\\"):
            found[module][cell] = words[2][1:] + "".join(words[3:])
    return found


def name_flop_outputs(models, rtlil, library):
    """Give each flip-flop output of the mapped netlist ``models`` that lost its register's name the
    name it had in ``rtlil`` (Yosys's design before mapping; the flip-flops keep their cell names,
    ``CELL_NAME``). A flip-flop mapped to a cell with only an inverted output (a memory's words and
    the registers of fanout 1, ``deca.synth.cells.storage_dont_use``) drives a net of ABC's, the
    register's name was on the inverter ABC folded into the logic; the inverted bit toggles as the
    bit does."""
    outputs = _flop_outputs(rtlil)
    for name, model in models.items():
        registers = outputs.get(name)
        if not registers:
            continue
        public = {index for net, index in model.nets.items() if not net.startswith(("$", "_"))}
        for kind, pins, params in model.cells:
            cell = library.cells.get(kind)
            register = registers.get(params.get(CELL_NAME)) if cell is not None and cell.sequential else None
            output = next((net for pin, net in pins if pin in cell.outputs), None) if register else None
            if output is not None and output not in public and register not in model.nets:
                model.nets[register] = output


def _through_buffers(design, known):
    """``known`` ({net: value}) extended to the nets across inverters and buffers from its nets (a
    one-input cell's input and output toggle together), both ways."""
    lib, pairs = design.library.cells, []
    for _, kind, pins, _ in design.cells:
        cell = lib.get(kind)
        if cell is None or cell.sequential or cell.clock_gate:
            continue
        ins = [net for pin, net in pins if pin in cell.pins and cell.pins[pin].direction == "input"]
        outs = [net for pin, net in pins if pin in cell.pins and cell.pins[pin].direction == "output"]
        if len(ins) == 1 and len(outs) == 1:
            pairs.append((ins[0], outs[0]))
    added = True
    while added:
        added = False
        for a, b in pairs:
            if (a in known) != (b in known):
                known[b if a in known else a] = known[a if a in known else b]
                added = True
    return known


def _row_bits(design, toggles):
    """{global net: (scope, memory, row, bit)} of the flip-flop bits of the memories the trace
    replayed (``_ROW_BIT``), and of the nets across buffers from them."""
    rows = {}
    for name, base, scope in _scopes(design, toggles):
        memories = toggles.memories.get(scope, {})
        for net, index in design.models[name].nets.items():
            m = _ROW_BIT.match(net)
            if m and m.group(1) in memories and int(m.group(2)) < len(memories[m.group(1)][0]) \
                    and int(m.group(3)) < len(memories[m.group(1)][0][0]):
                rows[find(design.parent, base + index)] = (scope, m.group(1), int(m.group(2)), int(m.group(3)))
    return _through_buffers(design, rows)


def net_rates(design, toggles):
    """({global net: toggles per cycle} for every net a cell drives, {the nets among them whose rate
    is their module's average, not their own}). ``design``: a ``deca.synth.sta.Design``."""
    cycles = toggles.cycles
    total_bits = total_toggles = 0
    named, average = {}, {}
    for name, base, scope in _scopes(design, toggles):
        sigs = toggles.signals.get(scope, {})
        bits = sum(len(c) for _, c in sigs.values())
        count = sum(sum(c) for _, c in sigs.values())
        total_bits, total_toggles = total_bits + bits, total_toggles + count
        average[name] = count / bits / cycles if bits else None
        for net, index in design.models[name].nets.items():
            signal, bit = _signal_bit(net)
            if signal in sigs:
                lsb, counts = sigs[signal]
                if 0 <= bit - lsb < len(counts):
                    named[find(design.parent, base + index)] = counts[bit - lsb] / cycles
    if not total_bits:
        raise ActivityError(f"the trace {toggles.source} has no signals in the scopes of design {design.top}")
    for net, (scope, memory, row, bit) in _row_bits(design, toggles).items():
        named.setdefault(net, toggles.memories[scope][memory][1][row][bit] / cycles)
    _through_buffers(design, named)
    design_average = total_toggles / total_bits / cycles
    rates, estimated = {}, set()
    for net, (index, _) in design.driver.items():
        if net in named:
            rates[net] = named[net]
        else:
            module = design.cells[index][0]
            rates[net] = average[module] if average[module] is not None else design_average
            estimated.add(net)
    return rates, estimated


def net_duties(design, toggles):
    """{global net: share of the trace's time at 1} of the nets named like a traced one-bit signal
    (a clock gate's enable, where it kept an RTL name), and of each clock gate's enable whose
    flip-flops are bits of a replayed memory or of registers whose enable is traced: the share of
    cycles they load (of the one that loads most, where they differ). ``design``: a
    ``deca.synth.sta.Design``."""
    duties = {}
    for name, base, scope in _scopes(design, toggles):
        high = toggles.high.get(scope, {})
        for net, index in design.models[name].nets.items():
            signal, bit = _signal_bit(net)
            if bit in high.get(signal, {}):
                duties[find(design.parent, base + index)] = high[signal][bit]
    loads, lib = _loads(design, toggles), design.library.cells
    clocked = {}   # gated clock net -> [the loads of each of its flip-flops, None where not known]
    for _, kind, pins, _ in design.cells:
        cell = lib.get(kind)
        if cell is not None and cell.sequential and not cell.clock_gate:
            clock = next((net for pin, net in pins if pin in cell.pins and cell.pins[pin].clock), None)
            outs = [loads.get(net) for pin, net in pins if pin in cell.pins and cell.pins[pin].direction == "output"]
            clocked.setdefault(clock, []).append(next((n for n in outs if n is not None), None))
    for _, kind, pins, _ in design.cells:
        cell = lib.get(kind)
        if cell is None or not cell.clock_gate:
            continue
        _, enable_pin, gated_pin = cell.clock_gate
        pins = dict(pins)
        flops = clocked.get(pins[gated_pin], [])
        if flops and None not in flops:
            duties[pins[enable_pin]] = max(flops) / toggles.cycles
    return duties


def _loads(design, toggles):
    """{global net: rising clock edges at which its flip-flop loaded} of the nets of the memory bits
    the trace replayed and of the registers whose enable it holds, and of the nets across buffers
    from them."""
    loads = {net: toggles.memories[scope][memory][0][row][bit]
             for net, (scope, memory, row, bit) in _row_bits(design, toggles).items()}
    for name, base, scope in _scopes(design, toggles):
        registers = toggles.loads.get(scope, {})
        for net, index in design.models[name].nets.items():
            signal, bit = _signal_bit(net)
            if bit in registers.get(signal, {}):
                loads.setdefault(find(design.parent, base + index), registers[signal][bit])
    return _through_buffers(design, loads)


def estimated_power(design, frequency_ghz, rates, estimated, duties):
    """{block: (dynamic mW of the nets at an averaged rate (``estimated``, rates from ``rates``),
    dynamic mW of the clocks behind gates whose enable has no duty in ``duties``, at
    ``sta.DEFAULT_DUTY``, the number of those gates)}: the power that is estimated rather than simulated."""
    def dynamic(activity, duty):
        return sta.power(design, frequency_ghz, activity, "", duty).dynamic_mw

    base = dynamic(lambda net: 0.0, lambda net: 0.0)   # the clock pins of ungated flip-flops and of the gates
    nets = dynamic(lambda net: rates[net] if net in estimated else 0.0, lambda net: 0.0)
    gates = dynamic(lambda net: 0.0, lambda net: 0.0 if net in duties else sta.DEFAULT_DUTY)
    lib, count = design.library.cells, dict.fromkeys(base, 0)
    for module, kind, pins, _ in design.cells:
        gate = lib[kind].clock_gate if kind in lib else None
        if gate and dict(pins)[gate[1]] not in duties:
            count[design.block_of(module)] += 1
    return {b: (nets[b] - base[b], gates[b] - base[b], count[b]) for b in base}


@dataclass(frozen=True)
class Workload:
    """A measured workload whose trace gives the activity (``deca synth --activity``)."""

    name: str = "bf8@0.5"
    mode: str = "tepl"
    tiles: int = 256
    seed: int = 1

    @property
    def key(self):
        return f"{self.name}-{self.mode}-{self.tiles}t-s{self.seed}"


def workload_toggles(verilog, top, W, L, workload, cache_dir, loaders=LOADERS, storage=None, ports=(), registers=()):
    """The toggles of the PE (W, L, ``loaders``, ``storage``) of the Verilog file ``verilog`` running ``workload``
    on Verilator, its memories' ``ports`` and its ``registers``' enables replayed: cached in ``cache_dir`` by the
    Verilog, those and the workload (the counts, not the VCD, which can be gigabytes and is deleted once counted)."""
    verilog, cache_dir = Path(verilog), Path(cache_dir)
    digest = hashlib.sha256(verilog.read_bytes() + repr((ports, registers)).encode()).hexdigest()[:16]
    cached = cache_dir / f"{top}-{digest}-{workload.key}.json"
    if cached.is_file():
        return Toggles.from_json(cached.read_text())
    from deca.sim.measure.trace import record_trace

    vcd, record = record_trace(verilog, top, W, L, workload.name, workload.mode, workload.tiles, workload.seed,
                               cache_dir / "records", loaders, storage)
    toggles = count_toggles(vcd, ports=ports, top=top, registers=registers)
    toggles.source = f"Verilator, {top}"
    toggles.workload = (f"{workload.name} {workload.mode}, {workload.tiles} tiles, seed {workload.seed}: "
                        f"{record['cycles_per_tile']:.1f} cycles per tile")
    cached.parent.mkdir(parents=True, exist_ok=True)
    part = cached.with_suffix(".part")
    part.write_text(toggles.to_json())
    part.replace(cached)
    vcd.unlink()
    return toggles
