"""What OpenSTA needs to time the mapped design: an SDC for the clock and the I/O budgets, and a
liberty cell of each SRAM macro's own shape (name ``deca_macro_<words>x<width>``: its pins as Yosys's
$mem_v2 names them, bit by bit; clock to read data the model's access time, its inputs' setup the
model's setup time, its area the model's area of that shape)."""

import re
import shutil
import subprocess
import time
from pathlib import Path

from deca.toolchain import ToolError

from .memories import CELLS
from .netlist import find
from .sta import MACRO, macro_pin_caps

CLOCK = "clk"
#: Clock and input transition, as deca.synth.sta assumes them.
SLEW_PS = 20.0


def _data_inputs(clock):
    # all_inputs -no_clocks is newer than Debian's OpenSTA 2.0.
    return f"[delete_from_list [all_inputs] [get_ports {clock}]]"


def sdc(period_ps, clock=CLOCK):
    """The constraints of deca.synth.sta: a ``period_ps`` clock on port ``clock``, inputs arriving and
    outputs needed with half a period to spare."""
    if not period_ps > 0:
        raise ValueError(f"the SDC clock period must be positive, got {period_ps} ps")
    half = period_ps / 2
    data_inputs = _data_inputs(clock)
    return "\n".join([f"create_clock -name {clock} -period {period_ps:g} [get_ports {clock}]",
                      f"set_clock_transition {SLEW_PS:g} [get_clocks {clock}]",
                      f"set_input_delay {half:g} -clock {clock} {data_inputs}",
                      f"set_output_delay {half:g} -clock {clock} [all_outputs]",
                      f"set_input_transition {SLEW_PS:g} {data_inputs}", ""])


def _pin(name, direction, lines=(), clock=False, cap=0.0):
    body = [f"      direction : {direction};"] + (["      clock : true;"] if clock else [])
    if direction == "input":
        body.append(f"      capacitance : {cap:g};")
    return [f"    pin({name}) {{", *body, *lines, "    }"]


def macro_liberty(macros, model, name="deca_macros"):
    """A liberty library (ps, fF) with one cell per distinct macro of ``macros`` (the report's macro
    dicts: words, width, kind, copies, area, and ``pins``: the $mem_v2 pin names it has)."""
    # table_lookup: under liberty's default delay model OpenSTA reads the cells but ignores their
    # arcs, and would time no path into or out of a macro.
    out = [f"library({name}) {{", "  delay_model : table_lookup;", '  time_unit : "1ps";', '  voltage_unit : "1V";', '  current_unit : "1mA";',
           "  capacitive_load_unit(1, ff);", '  leakage_power_unit : "1nW";', "  nom_voltage : 0.7;",
           "  nom_temperature : 25;", "  nom_process : 1;",
           *(f"  {kind}_threshold_pct_{edge} : {pct};" for edge in ("rise", "fall")
             for kind, pct in (("input", 50), ("output", 50), ("slew_lower", 10), ("slew_upper", 90)))]
    seen = set()
    for m in macros:
        if m["kind"] == CELLS:
            continue
        cell = macro_cell(m["words"], m["width"])
        if cell in seen:
            continue
        seen.add(cell)
        out += [f"  cell({cell}) {{", f"    area : {m['area'] / m['copies']:.3f};"]
        caps = macro_pin_caps(model.input_cap_ff, m["pins"], m["kind"] == "1rw")
        for pin in sorted(m["pins"]):
            base = pin.split("[")[0]
            if base in ("RD_CLK", "WR_CLK"):
                out += _pin(liberty_pin(pin), "input", clock=True)
            elif base == "RD_DATA":
                related = "RD_CLK" if any(p.startswith("RD_CLK") for p in m["pins"]) else "WR_CLK"
                out += _pin(liberty_pin(pin), "output", [
                    "      timing() {", f"        related_pin : \"{liberty_pin(related + '[0]')}\";",
                    "        timing_type : rising_edge;",
                    f"        cell_rise(scalar) {{ values(\"{model.access_ps:g}\"); }}",
                    f"        cell_fall(scalar) {{ values(\"{model.access_ps:g}\"); }}",
                    f"        rise_transition(scalar) {{ values(\"{SLEW_PS:g}\"); }}",
                    f"        fall_transition(scalar) {{ values(\"{SLEW_PS:g}\"); }}", "      }"])
            else:
                related = "RD_CLK" if base.startswith("RD_") else "WR_CLK"
                if not any(p.startswith(related) for p in m["pins"]):
                    related = "WR_CLK" if related == "RD_CLK" else "RD_CLK"
                out += _pin(liberty_pin(pin), "input", [
                    "      timing() {", f"        related_pin : \"{liberty_pin(related + '[0]')}\";",
                    "        timing_type : setup_rising;",
                    f"        rise_constraint(scalar) {{ values(\"{model.setup_ps:g}\"); }}",
                    f"        fall_constraint(scalar) {{ values(\"{model.setup_ps:g}\"); }}", "      }"],
                    cap=caps[pin])
        out.append("  }")
    return "\n".join(out + ["}", ""])


def macro_cell(words, width):
    """The liberty cell of a macro of ``words`` x ``width`` bits."""
    return f"deca_macro_{words}x{width}"


def liberty_pin(pin):
    """A $mem_v2 pin bit (``RD_ADDR[3]``) as a scalar liberty pin name (``RD_ADDR_3``)."""
    base, _, bit = pin.partition("[")
    return f"{base}_{bit.rstrip(']') or 0}"


# The netlist OpenSTA times ------------------------------------------------------------------------

_SIMPLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_BUS_BIT = re.compile(r"^(.*)\[(\d+)\]$")
_CONSTANTS = {"$false": "1'b0", "$true": "1'b1", "$undef": "1'b0"}


def _id(name):
    """A Verilog identifier for ``name`` (escaped unless plain)."""
    return name if _SIMPLE.match(name) else f"\\{name} "


def _ports(design):
    """The top's ports: ({global net: its port bit's Verilog reference}, declarations, assigns)."""
    model, top_base = design.models[design.top], dict(design.placed)[design.top]
    names = {index: name for name, index in model.nets.items()}
    buses, ref, assigns = {}, {}, []
    for direction, indices in (("input", model.inputs), ("output", model.outputs)):
        for index in indices:
            name = names[index]
            m = _BUS_BIT.match(name)
            base, bit = (m.group(1), int(m.group(2))) if m else (name, None)
            buses.setdefault((direction, base), []).append(bit)
            bit_ref = _id(base) + ("" if bit is None else f"[{bit}]")
            net = find(design.parent, top_base + index)
            if net not in ref:
                ref[net] = bit_ref
            elif direction == "output":   # an output on a net that already has a port's name
                assigns.append(f"  assign {bit_ref} = {ref[net]};")
    decls = [f"  {direction} " + ("" if None in bits else f"[{max(bits)}:{min(bits)}] ") + f"{_id(base)};"
             for (direction, base), bits in buses.items()]
    return ref, [base for _, base in buses], decls, assigns


def verilog_netlist(design):
    """The mapped design (a ``deca.synth.sta.Design``) as one flat structural Verilog module of
    liberty cells and ``macro_cell`` macros, with the buffer tree deca.synth.sta assumes on every
    net loaded beyond its driver's limit built as real buffers (the same levels and counts, the
    readers shared in order of the net's pins so that each buffer gets its level's share of the
    load). Instances are named by the net they drive (a flip-flop by its register's RTL name)."""
    ref, port_names, decls, assigns = _ports(design)
    for name, base in design.placed:
        for local, index in design.models[name].nets.items():
            if local in _CONSTANTS:
                ref[find(design.parent, base + index)] = _CONSTANTS[local]
    for net, port in list(ref.items()):
        if net in design.outputs and port in _CONSTANTS.values():
            assigns.append(f"  assign {ref[net]} = {port};")

    wires = set()

    def net_ref(net):
        if net in ref:
            return ref[net]
        wires.add(f"n{net}")
        return f"n{net}"

    # Each reader pin of a buffered net moves to a leaf of its tree.
    readers = {net: {} for net in design.trees}
    for index, (_, kind, pins, _) in enumerate(design.cells):
        for pin, net in pins:
            if net in readers and not design.is_output(kind, pin):
                readers[net].setdefault(index, []).append((pin, design.pin_cap(index, pin)))
    moved, trees = {}, []
    for net, levels in design.trees.items():
        driving = [net_ref(net)]
        for level, (count, _) in enumerate(levels):
            nets = [f"t{net}_{level}_{j}" for j in range(count)]
            trees += [(f"tree{net}_{level}_{j}", driving[j * len(driving) // count], out) for j, out in enumerate(nets)]
            driving = nets
        total = 0.0
        for index, pins in readers[net].items():
            leaf = driving[min(len(driving) - 1, int(total // levels[-1][1]))]
            for pin, cap in pins:
                moved[index, pin] = leaf
                total += cap
    buffer = design.buffer
    b_in = next((n for n in buffer.pins if n not in buffer.outputs), None) if trees else None
    body, names = [], set()
    for index, (_, kind, pins, params) in enumerate(design.cells):
        outs = [net for pin, net in pins if design.is_output(kind, pin)]
        name = gate_instance(index) if kind != MACRO and design.library.cells[kind].clock_gate else (
            design.net_name(outs[0]) if outs else "")
        if not name or name in names:
            name = f"{name}_c{index}" if name else f"c{index}"
        names.add(name)
        # A macro's $mem_v2 pin bits are scalar pins of its liberty cell.
        rename = liberty_pin if kind == MACRO else str
        if kind == MACRO:
            kind = macro_cell(int(params["SIZE"], 2), int(params["WIDTH"], 2))
        conns = [f".{rename(pin)}({moved.get((index, pin)) or net_ref(net)})" for pin, net in pins]
        body.append(f"  {kind} {_id(name)}({', '.join(conns)});")
    for name, source, out in trees:
        wires.add(out)
        body.append(f"  {buffer.name} {_id(name)}(.{b_in}({source}), .{buffer.outputs[0]}({out}));")
    head = [f"module {_id(design.top)}({', '.join(map(_id, port_names))});", *decls,
            *(f"  wire {w};" for w in sorted(wires))]
    return "\n".join(head + assigns + body + ["endmodule", ""])


def gate_instance(index):
    """The instance name of the clock gate that is cell ``index`` of the design."""
    return f"clock_gate_{index}"


def gate_latencies(design):
    """SDC lines for the clock gates of ``design`` (a ``deca.synth.sta.Design``), as deca.synth.sta
    times them: the clock tree balanced, so each gate's clock pin sees the ideal clock its insertion
    delay early and the flip-flops behind it see it on time (0 at its gated clock; OpenSTA carries a
    pin's ideal latency to every pin downstream)."""
    lines = []
    for index, (_, kind, _, _) in enumerate(design.cells):
        cell = design.library.cells.get(kind)
        if cell is not None and cell.clock_gate:
            clock, _, out = cell.clock_gate
            lines += [f"set_clock_latency {-design.insertion_ps(index):.4f} [get_pins {gate_instance(index)}/{clock}]",
                      f"set_clock_latency 0 [get_pins {gate_instance(index)}/{out}]"]
    return "\n".join(lines) + "\n" if lines else ""


# OpenSTA ------------------------------------------------------------------------------------------

NETLIST_V = "netlist.v"
SDC = "signoff.sdc"
MACROS_LIB = "macros.lib"
SCRIPT = "signoff.tcl"
#: OpenSTA's path groups, as deca.synth.sta's path classes (the clock's own group: register to register).
IO_GROUPS = ("in2reg", "reg2out")
THROUGH_GROUP = "in2out"


def opensta():
    """The OpenSTA executable, or a ToolError saying it is missing."""
    path = shutil.which("sta")
    if path is None:
        raise ToolError("--signoff runs OpenSTA, but there is no 'sta' on PATH (Debian's opensta; "
                        "scripts/bootstrap.sh installs it)")
    return path


def script(top, liberties, clock=CLOCK):
    """OpenSTA's Tcl: the libraries, the netlist and the SDC, the paths grouped as deca.synth.sta
    classes them (the more specific group_path wins, as SDC exceptions do), the worst path of each
    group, WNS and TNS."""
    inputs = _data_inputs(clock)
    return "\n".join([*(f"read_liberty {lib}" for lib in (*liberties, MACROS_LIB)), f"read_verilog {NETLIST_V}",
                      f"link_design {top}", f"read_sdc {SDC}",
                      f"group_path -name {THROUGH_GROUP} -from {inputs} -to [all_outputs]",
                      f"group_path -name {IO_GROUPS[0]} -from {inputs}",
                      f"group_path -name {IO_GROUPS[1]} -to [all_outputs]",
                      "report_checks -path_delay max -group_count 1 -digits 3",
                      "report_wns -digits 3", "report_tns -digits 3", ""])


#: A path's head; OpenSTA puts a long name's "(kind)" on the next line.
_HEAD = re.compile(r"^Startpoint: (\S+)\s+\((.*)\)\nEndpoint: (\S+)\s+\((.*)\)\nPath Group: (\S+)", re.M)
_VALUE = re.compile(r"^\s*(-?[\d.]+)\s+(data arrival time|data required time|slack \((?:MET|VIOLATED)\))", re.M)


def parse(text, period_ps, clock=CLOCK):
    """The worst path of each group in OpenSTA's report, and the path delays deca.synth.sta reports
    from their slacks: register to register ``period - slack``; input to register and register to
    output ``period / 2 - slack`` (half a period each); input to output ``-slack``."""
    heads = list(_HEAD.finditer(text))
    groups = {}
    for head, after in zip(heads, heads[1:] + [None]):
        block = text[head.end():after.start() if after else len(text)]
        values = {}
        for m in _VALUE.finditer(block):
            values.setdefault(m.group(2).split(" (")[0], float(m.group(1)))
        groups[head.group(5)] = {"start": head.group(1), "start_kind": head.group(2), "end": head.group(3),
                                 "end_kind": head.group(4), "arrival_ps": values.get("data arrival time"),
                                 "required_ps": values.get("data required time"), "slack_ps": values.get("slack")}
    wns, tns = (re.search(rf"^{name} (-?[\d.]+)", text, re.M) for name in ("wns", "tns"))
    if clock not in groups or wns is None or tns is None:
        raise ToolError(f"OpenSTA reported no register-to-register path or no WNS/TNS:\n{text[-2000:]}")
    io = [period_ps / 2 - groups[g]["slack_ps"] for g in IO_GROUPS if g in groups]
    critical = period_ps - groups[clock]["slack_ps"]
    return {"groups": groups, "wns_ps": float(wns.group(1)), "tns_ps": float(tns.group(1)),
            "critical_ps": critical, "io_ps": max(io, default=0.0),
            "through_ps": -groups[THROUGH_GROUP]["slack_ps"] if THROUGH_GROUP in groups else 0.0,
            "period_ps": max(critical, 2 * max(io, default=0.0)), "clock": clock}


def run(work, design, liberties, period_ps, timing):
    """Write the netlist of ``design`` and OpenSTA's script into ``work`` (beside ``SDC`` and
    ``MACROS_LIB``), run OpenSTA on the liberty files ``liberties`` (names inside ``work``) and
    return ``parse``'s numbers with the relative difference of deca.synth.sta's ``timing``
    (``(OpenSTA - ours) / ours``) for the register-to-register path and the period."""
    sta = opensta()
    work = Path(work)
    (work / NETLIST_V).write_text(verilog_netlist(design))
    (work / SCRIPT).write_text(script(design.top, liberties))
    start = time.monotonic()
    proc = subprocess.run([sta, "-no_splash", "-exit", SCRIPT], cwd=work, capture_output=True, text=True)
    text = proc.stdout + proc.stderr
    (work / "signoff.log").write_text(text)
    errors = [line for line in text.splitlines() if line.startswith("Error")]
    if proc.returncode or errors:
        raise ToolError(f"OpenSTA on {work / NETLIST_V} failed: {'; '.join(errors[:3]) or text[-500:]} "
                        f"(full log: {work / 'signoff.log'})")
    found = parse(text, period_ps)
    version = subprocess.run([sta, "-version"], capture_output=True, text=True).stdout.strip()
    return {**found, "version": version, "seconds": round(time.monotonic() - start, 1),
            "warnings": sum(line.startswith("Warning") for line in text.splitlines()),
            "critical_diff": found["critical_ps"] / timing.critical_ps - 1,
            "period_diff": found["period_ps"] / timing.period_ps - 1}
