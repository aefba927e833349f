"""Verilog generation: one file per design, named after its top module, plus a port table."""

from pathlib import Path

from amaranth.back import verilog
from amaranth.hdl import Value
from amaranth.lib import wiring

from .datapath import Datapath

DESIGNS = {"datapath": Datapath}


def top_name(design, W, L):
    return f"deca_{design}_w{W}_l{L}"


def ports(component):
    """(name, direction, width) of each top-level port, named as in the Verilog."""
    rows = []
    for path, member, value in component.signature.flatten(component):
        name = "__".join(map(str, path))
        rows.append((name, "input" if member.flow == wiring.In else "output", len(Value.cast(value))))
    return rows


def generate(W, L, out_dir, design="datapath"):
    """Write ``<top>.v`` and ``<top>.ports.md`` into ``out_dir``; return the Verilog path."""
    if design not in DESIGNS:
        raise ValueError(f"unknown design {design!r}; choose from {', '.join(DESIGNS)}")
    component = DESIGNS[design](W, L)
    top = top_name(design, W, L)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{top}.v"
    path.write_text(verilog.convert(component, name=top, emit_src=False))
    table = [f"# Ports of {top}", "", "| port | direction | bits |", "|---|---|---|",
             "| clk | input | 1 |", "| rst | input | 1 |"]
    table += [f"| {name} | {direction} | {width} |" for name, direction, width in ports(component)]
    (out_dir / f"{top}.ports.md").write_text("\n".join(table) + "\n")
    return path
