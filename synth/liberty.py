"""Liberty (.lib) files: the cells' area, leakage, pin capacitances, NLDM delay and constraint tables
and internal energies, in one set of units (ps, fF, µm², pW, fJ) whatever the file uses.

Only what the flow needs is read: ``cell`` groups with ``area``, ``leakage_power`` /
``cell_leakage_power``, ``ff`` (a sequential cell), ``clock_gating_integrated_cell`` (a clock gate) and ``pin``/``bus`` groups with ``direction``,
``capacitance``, ``timing`` arcs (``timing_sense``, ``cell_rise``/``cell_fall``, ``rise_transition``/
``fall_transition``, ``rise_constraint``/``fall_constraint``) and ``internal_power``.
"""

import gzip
import re
from bisect import bisect_right
from dataclasses import dataclass, field
from pathlib import Path


class LibertyError(ValueError):
    """A liberty file that cannot be read or lacks what the flow needs."""


_TOKEN = re.compile(r'\s+|\\\n|/\*.*?\*/|//[^\n]*|("(?:[^"\\]|\\.)*")|([{}();:,])|([^\s{}();:,"\\]+)', re.S)


@dataclass
class Group:
    """One liberty group: ``name (args) { attrs; groups }``."""

    name: str
    args: list
    attrs: dict = field(default_factory=dict)    # simple "a : v;" and complex "a (v, ...);" attributes
    groups: list = field(default_factory=list)

    def all(self, name):
        return [g for g in self.groups if g.name == name]


def parse(text, source="liberty"):
    """The top-level group of a liberty text."""
    tokens = [m.group(1) or m.group(2) or m.group(3) for m in _TOKEN.finditer(text) if m.lastindex]
    stack, top, i, n = [], None, 0, len(tokens)
    try:
        while i < n:
            t = tokens[i]
            if t == "}":
                done = stack.pop()
                if not stack:
                    top = done
                i += 1
                if i < n and tokens[i] == ";":
                    i += 1
                continue
            name, nxt = t, tokens[i + 1]
            if nxt == ":":
                # One value token; the semicolon is optional (ASAP7's INVBUF omits some).
                stack[-1].attrs[name] = _unquote(tokens[i + 2])
                i += 3 + (tokens[i + 3] == ";")
            elif nxt == "(":
                j, args = i + 2, []
                while tokens[j] != ")":
                    if tokens[j] != ",":
                        args.append(_unquote(tokens[j]))
                    j += 1
                j += 1
                if j < n and tokens[j] == "{":
                    group = Group(name, args)
                    if stack:
                        stack[-1].groups.append(group)
                    stack.append(group)
                    i = j + 1
                else:
                    stack[-1].attrs[name] = args
                    i = j + (j < n and tokens[j] == ";")
            else:
                raise LibertyError(f"{source}: not a liberty file (unexpected {nxt!r} after {name!r})")
    except (IndexError, TypeError):
        raise LibertyError(f"{source}: not a liberty file (unbalanced groups or truncated)") from None
    if top is None or stack:
        raise LibertyError(f"{source}: not a liberty file (no complete library group)")
    return top


def _unquote(v):
    return v[1:-1] if v.startswith('"') else v


def _floats(s):
    return [float(x) for x in s.replace("\\", " ").replace(",", " ").split()]


# Units --------------------------------------------------------------------------------------------

_SCALE = {"f": 1e-15, "p": 1e-12, "n": 1e-9, "u": 1e-6, "m": 1e-3, "": 1.0}


def _unit(text, base, source, what):
    m = re.fullmatch(r"\s*([\d.]+)\s*([fpnum]?)\w*\s*", text or "")
    if not m:
        raise LibertyError(f"{source}: cannot read the {what} unit {text!r}")
    return float(m.group(1)) * _SCALE[m.group(2)] / base


@dataclass
class Table:
    """An NLDM lookup table: ``values[i][j]`` at (``index_1[i]``, ``index_2[j]``) of the variables
    ``var1``, ``var2`` (already scaled to ps and fF)."""

    var1: str
    index_1: list
    var2: str | None
    index_2: list
    values: list

    def lookup(self, **x):
        """Bilinear interpolation, linear extrapolation outside the table (as OpenSTA does)."""
        a = x.get(self.var1, 0.0)
        if self.var2 is None:
            return _interp1(self.index_1, [row[0] for row in self.values], a)
        b = x.get(self.var2, 0.0)
        rows = [_interp1(self.index_2, row, b) for row in self.values]
        return _interp1(self.index_1, rows, a)


def _interp1(xs, ys, x):
    if len(xs) == 1:
        return ys[0]
    k = min(max(bisect_right(xs, x) - 1, 0), len(xs) - 2)
    x0, x1 = xs[k], xs[k + 1]
    return ys[k] + (ys[k + 1] - ys[k]) * (x - x0) / (x1 - x0)


#: Liberty variable names -> the keyword lookup() takes.
VARIABLES = {"input_net_transition": "slew", "input_transition_time": "slew", "related_pin_transition": "clock_slew",
             "constrained_pin_transition": "slew", "total_output_net_capacitance": "load"}


@dataclass
class Arc:
    """A timing arc from ``related`` to the pin it is in; tables keyed rise/fall."""

    related: str
    kind: str          # combinational, rising_edge, falling_edge, setup_rising, hold_rising, ...
    delay: dict        # this pin's "rise"/"fall" -> Table (cell_rise/cell_fall or *_constraint)
    slew: dict         # this pin's "rise"/"fall" -> Table (output transition)
    sense: str = "non_unate"   # positive_unate, negative_unate or non_unate (timing_sense)

    def causes(self, edge):
        """The transitions of ``related`` that make this pin's ``edge`` ("rise" or "fall")."""
        if self.sense == "positive_unate":
            return (edge,)
        if self.sense == "negative_unate":
            return ("fall" if edge == "rise" else "rise",)
        return ("rise", "fall")


@dataclass
class Pin:
    direction: str
    capacitance: float = 0.0              # fF, the largest of its rise and fall capacitances
    edge_capacitance: dict = field(default_factory=dict)   # "rise"/"fall" -> fF, where the file gives them
    arcs: list = field(default_factory=list)
    energy: list = field(default_factory=list)   # (related pin, supply pin, {"rise"/"fall": Table in fJ})
    clock: bool = False
    function: str | None = None
    max_capacitance: float | None = None          # fF, the most an output may drive


@dataclass
class Cell:
    name: str
    area: float                  # µm²
    leakage: float               # pW
    pins: dict                   # pin name (bus bits as name[i]) -> Pin
    sequential: bool             # has an ff or latch group
    memory: dict | None = None   # memory() group of a macro: address_width, word_width
    #: An integrated clock-gating cell (``clock_gating_integrated_cell``): its clock pin, enable pin
    #: and gated clock output, else None.
    clock_gate: tuple | None = None
    #: A flip-flop (an ``ff`` group) whose every output is its D input inverted (``QN`` alone).
    inverted_flop: bool = False

    @property
    def outputs(self):
        return [p for p, pin in self.pins.items() if pin.direction == "output"]


@dataclass
class Library:
    name: str
    cells: dict
    voltage: float

    def buffers(self):
        """The non-inverting buffers: one input, the output's function that input."""
        return [c for c in self.cells.values() if not c.sequential and len(c.outputs) == 1 and len(c.pins) == 2
                and (c.pins[c.outputs[0]].function or "").strip("() ") in set(c.pins) - set(c.outputs)]

    def buffer(self):
        """The smallest buffer, or None."""
        return min(self.buffers(), key=lambda c: (c.area, c.name), default=None)

    def tree_buffer(self):
        """The buffer for fanout trees: the most load it may drive per load it puts on its input."""
        def gain(c):
            out = c.pins[c.outputs[0]]
            cin = max(p.capacitance for n, p in c.pins.items() if n not in c.outputs)
            return (out.max_capacitance or 0.0) / cin if cin else 0.0
        driving = [c for c in self.buffers() if c.pins[c.outputs[0]].max_capacitance]
        return max(driving, key=lambda c: (gain(c), -c.area), default=None)


def _table(group, templates, time, cap, value_scale, source):
    template = templates.get(group.args[0] if group.args else "", {})
    idx = {k: _floats(group.attrs[k][0]) if k in group.attrs else template.get(k, [0.0])
           for k in ("index_1", "index_2")}
    vars_ = [template.get("variable_1"), template.get("variable_2")]
    scale = {"slew": time, "clock_slew": time, "load": cap}
    names = [VARIABLES.get(v) if v else None for v in vars_]
    idx1 = [v * scale.get(names[0], 1.0) for v in idx["index_1"]]
    idx2 = [v * scale.get(names[1], 1.0) for v in idx["index_2"]]
    values = [[v * value_scale for v in _floats(row)] for row in group.attrs.get("values", [])]
    if not values:
        raise LibertyError(f"{source}: table {group.name} without values")
    if len(values) == 1 and len(idx1) > 1 and len(values[0]) == len(idx1) and names[1] is None:
        values = [[v] for v in values[0]]
    if len(values) == 1 and len(values[0]) == 1:
        return Table(names[0] or "slew", [0.0], None, [0.0], values)
    return Table(names[0] or "slew", idx1, names[1], idx2, values)


def _bits(group, types):
    """Pin names of a pin or bus group: ``name`` or ``name[i]`` for each bit of the bus type."""
    if group.name == "pin":
        return list(group.args)
    bus_type = types.get(group.attrs.get("bus_type", ""))
    if bus_type is None:
        return list(group.args)
    lo, hi = sorted((int(bus_type["bit_from"]), int(bus_type["bit_to"])))
    return [f"{group.args[0]}[{i}]" for i in range(lo, hi + 1)]


def read(paths):
    """The cells of the liberty files ``paths`` (plain or .gz), later files overriding earlier ones."""
    cells, voltage, name = {}, None, None
    for path in map(Path, paths):
        try:
            raw = path.read_bytes()
            text = (gzip.decompress(raw) if path.suffix == ".gz" else raw).decode(errors="replace")
        except (OSError, gzip.BadGzipFile, EOFError) as e:
            raise LibertyError(f"liberty {path}: cannot read it ({getattr(e, 'strerror', None) or e})") from None
        lib = parse(text, f"liberty {path}")
        if lib.name != "library":
            raise LibertyError(f"liberty {path}: not a liberty file (top group is {lib.name!r})")
        name = name or lib.args[0]
        source = f"liberty {path}"
        time = _unit(lib.attrs.get("time_unit", "1ns"), 1e-12, source, "time")
        cap_unit = lib.attrs.get("capacitive_load_unit", ["1", "pf"])
        cap = _unit("".join(cap_unit), 1e-15, source, "capacitance")
        leak = _unit(lib.attrs.get("leakage_power_unit", "1nW"), 1e-12, source, "leakage power")
        v = float(lib.attrs.get("nom_voltage", "0") or 0)
        voltage = voltage or v
        # Internal energy is in capacitance unit x volt^2: in fJ after scaling by cap (fF).
        templates = {g.args[0]: {**{k: v for k, v in g.attrs.items() if k.startswith("variable")},
                                 **{k: _floats(g.attrs[k][0]) for k in ("index_1", "index_2") if k in g.attrs}}
                     for g in lib.groups if g.name in ("lu_table_template", "power_lut_template") and g.args}
        types = {g.args[0]: g.attrs for g in lib.groups if g.name == "type" and g.args}
        for c in lib.all("cell"):
            cells[c.args[0]] = _cell(c, templates, types, time, cap, leak, source)
    if not cells:
        raise LibertyError("no cells in the liberty files " + ", ".join(map(str, paths)))
    return Library(name, cells, voltage)


def _cell(c, templates, types, time, cap, leak, source):
    types = {**types, **{g.args[0]: g.attrs for g in c.all("type") if g.args}}
    default = [g for g in c.all("leakage_power") if "when" not in g.attrs]
    if "cell_leakage_power" in c.attrs:
        leakage = float(c.attrs["cell_leakage_power"]) * leak
    else:
        states = default or c.all("leakage_power")
        leakage = sum(float(g.attrs.get("value", 0)) for g in states) * leak / (1 if default else max(1, len(states)))
    pins = {}
    for g in c.groups:
        if g.name not in ("pin", "bus"):
            continue
        groups = g.groups + [sub for p in g.all("pin") for sub in p.groups]
        edge_cap = {edge: float(g.attrs[f"{edge}_capacitance"]) * cap for edge in ("rise", "fall")
                    if g.attrs.get(f"{edge}_capacitance")}
        pin = Pin(direction=g.attrs.get("direction", "input"), edge_capacitance=edge_cap,
                  capacitance=max(float(g.attrs.get(k, 0) or 0) for k in ("capacitance", "rise_capacitance",
                                                                         "fall_capacitance")) * cap,
                  clock=g.attrs.get("clock", "false") == "true", function=g.attrs.get("function"),
                  max_capacitance=float(g.attrs["max_capacitance"]) * cap if "max_capacitance" in g.attrs else None)
        for t in (s for s in groups if s.name == "timing"):
            def tables(keys, scale=time):
                return {edge: _table(t.all(key)[0], templates, time, cap, scale, source)
                        for edge, key in keys if t.all(key)}
            delay = tables((("rise", "cell_rise"), ("fall", "cell_fall"))) or tables(
                (("rise", "rise_constraint"), ("fall", "fall_constraint")))
            pin.arcs.append(Arc(related=t.attrs.get("related_pin", ""),
                                kind=t.attrs.get("timing_type", "combinational"),
                                sense=t.attrs.get("timing_sense", "non_unate"),
                                delay=delay, slew=tables((("rise", "rise_transition"), ("fall", "fall_transition")))))
        for p in (s for s in groups if s.name == "internal_power"):
            energy = {edge: _table(p.all(key)[0], templates, time, cap, cap, source)
                      for edge, key in (("rise", "rise_power"), ("fall", "fall_power")) if p.all(key)}
            if energy:
                pin.energy.append((p.attrs.get("related_pin"), p.attrs.get("related_pg_pin"), energy))
        for bit in _bits(g, types):
            pins[bit] = pin
    memory = next(({k: int(v) for k, v in m.attrs.items() if k.endswith("width")} for m in c.all("memory")), None)
    gate = None
    if "clock_gating_integrated_cell" in c.attrs:
        roles = {role: next((g.args[0] for g in c.all("pin") if g.attrs.get(f"clock_gate_{role}_pin") == "true"), None)
                 for role in ("clock", "enable", "out")}
        if None in roles.values():
            raise LibertyError(f"{source}: clock-gating cell {c.args[0]} without a clock_gate_clock_pin, "
                               "clock_gate_enable_pin and clock_gate_out_pin")
        gate = (roles["clock"], roles["enable"], roles["out"])
    ff = c.all("ff")
    inverted = False
    if ff and len(ff[0].args) == 2:
        # An output is D inverted if it is the state of a "!D" next state, or the other state of a "D" one.
        state, other = (a.strip() for a in ff[0].args)
        next_inverted = str(ff[0].attrs.get("next_state", "")).replace(" ", "").startswith("!")
        negated = {other, f"!{state}", f"{state}'"}
        functions = [(p.function or "").replace(" ", "").strip("()") for p in pins.values() if p.direction == "output"]
        inverted = bool(functions) and all(f in negated | {state} and (f in negated) != next_inverted
                                           for f in functions)
    return Cell(name=c.args[0], area=float(c.attrs.get("area", 0)), leakage=leakage, pins=pins,
                sequential=bool(ff or c.all("latch") or c.all("ff_bank")), memory=memory, clock_gate=gate,
                inverted_flop=inverted)
